//! Shared by the build scripts that compile WebAssembly guests (`host/build.rs`,
//! `tests/build.rs`), included with `#[path]`: build scripts cannot depend on
//! one another.
//!
//! The guests are built by a nested cargo with its own target directory: the
//! outer build holds the lock on the workspace's, and sharing it would deadlock.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root: the parent of the package being built.
pub fn workspace() -> Result<PathBuf, String> {
    env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|dir| dir.parent().map(Path::to_path_buf))
        .ok_or_else(|| "CARGO_MANIFEST_DIR is not set".to_owned())
}

/// Re-runs the build script when any of these workspace paths change (a folder
/// counts as changed when anything inside it does).
pub fn rerun_if_changed(workspace: &Path, paths: &[&str]) {
    for path in paths {
        println!("cargo:rerun-if-changed={}", workspace.join(path).display());
    }
}

/// Builds `packages` for `wasm32-wasip2` with the `wasm` profile into
/// `target_dir`, and returns the folder the components land in.
pub fn build_components(
    workspace: &Path,
    target_dir: &Path,
    packages: &[&str],
    features: Option<&str>,
) -> Result<PathBuf, String> {
    let mut command = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(workspace)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "wasm"])
        .env("CARGO_TARGET_DIR", target_dir);
    for package in packages {
        command.args(["-p", package]);
    }
    if let Some(features) = features {
        command.args(["--features", features]);
    }
    // The outer build's flags and wrappers (clippy, coverage, host RUSTFLAGS) are
    // not meant for the guest build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(var);
    }
    let what = packages.join(", ");
    let status = command.status().map_err(|e| format!("cannot run cargo to build {what}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the component(s) {what} failed (is the target installed? `rustup target add wasm32-wasip2`)"
        ));
    }
    Ok(target_dir.join("wasm32-wasip2").join("wasm"))
}
