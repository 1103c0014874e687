//! Builds the hostile test component (`tests/hostile`) for `wasm32-wasip2`, once
//! as is and once with its `filesystem` feature, and tells the tests where they
//! are. A nested cargo with its own target directories, as in `host/build.rs`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const ARTIFACT: &str = "weir_hostile_provider.wasm";

fn main() -> ExitCode {
    let Some(workspace) =
        env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).and_then(|dir| dir.parent().map(Path::to_path_buf))
    else {
        eprintln!("CARGO_MANIFEST_DIR is not set");
        return ExitCode::FAILURE;
    };
    for watched in ["tests/hostile", "sdk", "wit", "Cargo.toml", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    for (features, dir, var) in
        [(None, "hostile", "WEIR_HOSTILE_WASM"), (Some("filesystem"), "hostile-fs", "WEIR_HOSTILE_FS_WASM")]
    {
        let target_dir = workspace.join("target").join(dir);
        if let Err(message) = build(&workspace, &target_dir, features) {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
        let path = target_dir.join("wasm32-wasip2").join("wasm").join(ARTIFACT);
        println!("cargo:rustc-env={var}={}", path.display());
    }
    ExitCode::SUCCESS
}

fn build(workspace: &Path, target_dir: &Path, features: Option<&str>) -> Result<(), String> {
    let mut command = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(workspace)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "wasm", "-p", "weir-hostile-provider"])
        .env("CARGO_TARGET_DIR", target_dir);
    if let Some(features) = features {
        command.args(["--features", features]);
    }
    for var in
        ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER"]
    {
        command.env_remove(var);
    }
    let status = command.status().map_err(|e| format!("cannot run cargo to build the hostile component: {e}"))?;
    if status.success() { Ok(()) } else { Err("building the hostile test component failed".to_owned()) }
}
