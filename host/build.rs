//! Builds the first-party provider components (`providers/*`) for `wasm32-wasip2`
//! and tells the crate where they are, so the `weir` binary embeds them and runs
//! with no providers folder at all.
//!
//! The nested cargo uses its own target directory: the outer build holds the lock
//! on the workspace's, and a shared one would deadlock.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// (provider crate, artifact name, env var the crate reads the path from)
const PROVIDERS: &[(&str, &str, &str)] =
    &[("weir-provider-openai", "weir_provider_openai.wasm", "WEIR_EMBEDDED_OPENAI")];

fn main() -> ExitCode {
    let Some(workspace) =
        env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).and_then(|dir| dir.parent().map(Path::to_path_buf))
    else {
        eprintln!("CARGO_MANIFEST_DIR is not set");
        return ExitCode::FAILURE;
    };
    for dir in ["providers", "sdk", "wit", "Cargo.lock", "Cargo.toml", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    println!("cargo:rerun-if-env-changed=WEIR_PROVIDERS_TARGET_DIR");

    let target_dir = env::var_os("WEIR_PROVIDERS_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target").join("providers"));
    if let Err(message) = build_providers(&workspace, &target_dir) {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    for (_, artifact, var) in PROVIDERS {
        let path = target_dir.join("wasm32-wasip2").join("wasm").join(artifact);
        println!("cargo:rustc-env={var}={}", path.display());
    }
    ExitCode::SUCCESS
}

fn build_providers(workspace: &Path, target_dir: &Path) -> Result<(), String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "wasm"])
        .env("CARGO_TARGET_DIR", target_dir);
    for (package, _, _) in PROVIDERS {
        command.args(["-p", package]);
    }
    // The outer build's flags and wrappers (clippy, coverage, host RUSTFLAGS) are not
    // meant for the guest build.
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
    let status = command.status().map_err(|e| format!("cannot run cargo to build the provider components: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err("building the provider components failed (is the target installed? \
             `rustup target add wasm32-wasip2`)"
            .to_owned())
    }
}
