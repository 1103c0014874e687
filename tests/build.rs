//! Builds the test components for `wasm32-wasip2` and tells the tests where they
//! are: the hostile provider (`tests/hostile`, as is and with its `filesystem`
//! feature) and the foreign components (`tests/foreign`: another world version,
//! another world). A nested cargo with its own target directories, as in
//! `host/build.rs`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// (package, features, target dir under `target/`, artifact, env var for the tests)
const BUILDS: [(&str, Option<&str>, &str, &str, &str); 5] = [
    ("weir-hostile-provider", None, "hostile", "weir_hostile_provider.wasm", "WEIR_HOSTILE_WASM"),
    ("weir-hostile-provider", Some("filesystem"), "hostile-fs", "weir_hostile_provider.wasm", "WEIR_HOSTILE_FS_WASM"),
    ("weir-hostile-provider", Some("v2"), "hostile-v2", "weir_hostile_provider.wasm", "WEIR_HOSTILE_V2_WASM"),
    ("weir-foreign-component", None, "foreign-version", "weir_foreign_component.wasm", "WEIR_WRONG_VERSION_WASM"),
    (
        "weir-foreign-component",
        Some("other-world"),
        "foreign-world",
        "weir_foreign_component.wasm",
        "WEIR_WRONG_WORLD_WASM",
    ),
];

fn main() -> ExitCode {
    let Some(workspace) =
        env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).and_then(|dir| dir.parent().map(Path::to_path_buf))
    else {
        eprintln!("CARGO_MANIFEST_DIR is not set");
        return ExitCode::FAILURE;
    };
    for watched in ["tests/hostile", "tests/foreign", "sdk", "wit", "Cargo.toml", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    for (package, features, dir, artifact, var) in BUILDS {
        let target_dir = workspace.join("target").join(dir);
        if let Err(message) = build(&workspace, &target_dir, package, features) {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
        let path = target_dir.join("wasm32-wasip2").join("wasm").join(artifact);
        println!("cargo:rustc-env={var}={}", path.display());
    }
    ExitCode::SUCCESS
}

fn build(workspace: &Path, target_dir: &Path, package: &str, features: Option<&str>) -> Result<(), String> {
    let mut command = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(workspace)
        .args(["build", "--target", "wasm32-wasip2", "--profile", "wasm", "-p", package])
        .env("CARGO_TARGET_DIR", target_dir);
    if let Some(features) = features {
        command.args(["--features", features]);
    }
    for var in
        ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER"]
    {
        command.env_remove(var);
    }
    let status = command.status().map_err(|e| format!("cannot run cargo to build {package}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("building the test component {package} failed")) }
}
