//! Builds the test components for `wasm32-wasip2` and tells the tests where they
//! are: the hostile provider (`tests/hostile`, as is and with its `filesystem`
//! and `v2` features) and the foreign components (`tests/foreign`: another world
//! version, another world).

#[path = "../build-support/wasm_guest.rs"]
mod wasm_guest;

use std::process::ExitCode;

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
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let workspace = wasm_guest::workspace()?;
    wasm_guest::rerun_if_changed(
        &workspace,
        &["tests/hostile", "tests/foreign", "sdk", "wit", "build-support", "Cargo.toml", ".cargo/config.toml"],
    );
    for (package, features, dir, artifact, var) in BUILDS {
        let out = wasm_guest::build_components(&workspace, &workspace.join("target").join(dir), &[package], features)?;
        println!("cargo:rustc-env={var}={}", out.join(artifact).display());
    }
    Ok(())
}
