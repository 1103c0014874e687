//! Owner-only files: the ledger holds every call's record (with
//! `record_content = true`, every prompt and answer), so its folder is
//! created 0700 and every file of it — the database, SQLite's `-wal` and
//! `-shm`, the log's segments, the anchor — is 0600, whatever the umask.
//!
//! Modes are set when a file is created (SQLite creates `-wal` and `-shm`
//! with the database file's mode, so the database file is created 0600
//! first), and a file of the ledger found with group or other bits (one an
//! older weir wrote) has them cleared. A folder that already exists is left
//! as it is (the operator may share it on purpose, with a backup group say):
//! when group or others may enter it, a warning says so; its files stay
//! owner-only either way.

use std::fs::File;
use std::io;
use std::path::Path;

/// Group and other permission bits.
#[cfg(unix)]
const SHARED_BITS: u32 = 0o077;

/// Creates the ledger's `folder` (and its missing parents) 0700; an existing
/// one is left as it is.
pub(crate) fn create_folder(folder: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(folder)
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(folder)
}

/// Warns when group or others may use the ledger's folder (the gateway's
/// open says it; a reader does not repeat it).
pub(super) fn warn_if_shared(folder: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(folder) {
            let mode = metadata.permissions().mode() & 0o7777;
            if metadata.is_dir() && mode & SHARED_BITS != 0 {
                tracing::warn!(folder = %folder.display(), mode = %format!("{mode:o}"),
                    "the ledger's folder is open to group or others (its files are owner-only); `chmod 700` it unless shared on purpose");
            }
        }
    }
    #[cfg(not(unix))]
    let _ = folder;
}

/// Creates the database file at `db` 0600 when missing (an empty file is a
/// new SQLite database), before SQLite opens it, so that its `-wal` and
/// `-shm` are created 0600 too; an existing database, `-wal` or `-shm` with
/// group or other bits has them cleared.
pub(crate) fn prepare_database(db: &Path) -> io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(db)?;
    owner_only_file(&file, db);
    for suffix in ["-wal", "-shm"] {
        let mut companion = db.as_os_str().to_os_string();
        companion.push(suffix);
        if let Ok(file) = File::open(&companion) {
            owner_only_file(&file, Path::new(&companion));
        }
    }
    Ok(())
}

/// Clears `file`'s group and other bits when it has any (its owner's stay);
/// a failure (a file of another user) is logged: the file is still used.
pub(super) fn owner_only_file(file: &File, path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let tightened = file.metadata().and_then(|metadata| {
            let mode = metadata.permissions().mode() & 0o7777;
            match mode & SHARED_BITS {
                0 => Ok(()),
                _ => file.set_permissions(std::fs::Permissions::from_mode(mode & !SHARED_BITS)),
            }
        });
        if let Err(error) = tightened {
            tracing::warn!(path = %path.display(), %error, "cannot make a ledger file owner-only");
        }
    }
    #[cfg(not(unix))]
    let _ = (file, path);
}
