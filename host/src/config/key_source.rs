//! Reading an operator's key named by a config table: from an environment
//! variable or from a file, never written in the config itself. The ledger's
//! anchor key and the Responses route's seal key are read the same way.

use std::ffi::OsString;
use std::path::PathBuf;

use super::Config;

/// Where a table says its key is: the field names (for messages) and their values.
#[derive(Debug, Clone, Copy)]
pub struct KeySource<'a> {
    /// The table, e.g. `ledger`.
    pub table: &'static str,
    /// The field naming the environment variable, e.g. `anchor_key_env`.
    pub env_field: &'static str,
    /// The field naming the file, e.g. `anchor_key_file`.
    pub file_field: &'static str,
    pub env: Option<&'a str>,
    pub file: Option<&'a std::path::Path>,
}

/// Why a key cannot be read (never holds the key).
#[derive(Debug, thiserror::Error)]
pub enum KeySourceError {
    #[error("`[{table}]` sets both `{env_field}` and `{file_field}`: set one")]
    Both { table: &'static str, env_field: &'static str, file_field: &'static str },
    #[error("`[{table}] {env_field}` names {name}, which is not set")]
    EnvMissing { table: &'static str, env_field: &'static str, name: String },
    #[error("`[{table}] {file_field}` {path}: {source}")]
    File { table: &'static str, file_field: &'static str, path: String, source: std::io::Error },
}

/// The key's bytes and where they came from (`$NAME` or the file's path, for
/// messages); `None` when the table names neither. A file's path is relative
/// to the config file.
pub fn read_key(
    config: &Config,
    source: KeySource<'_>,
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<Option<(Vec<u8>, String)>, KeySourceError> {
    let KeySource { table, env_field, file_field, .. } = source;
    match (source.env, source.file) {
        (Some(_), Some(_)) => Err(KeySourceError::Both { table, env_field, file_field }),
        (None, None) => Ok(None),
        (Some(name), None) => {
            let value =
                env(name).ok_or_else(|| KeySourceError::EnvMissing { table, env_field, name: name.to_owned() })?;
            Ok(Some((value.into_encoded_bytes(), format!("${name}"))))
        }
        (None, Some(file)) => {
            let path: PathBuf = config.resolve_path(file);
            let text = std::fs::read(&path).map_err(|source| KeySourceError::File {
                table,
                file_field,
                path: path.display().to_string(),
                source,
            })?;
            Ok(Some((text, path.display().to_string())))
        }
    }
}
