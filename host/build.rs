//! Builds the first-party provider components (`providers/*`) for `wasm32-wasip2`
//! and tells the crate where they are and their SHA-256 digests, so the `weir`
//! binary embeds them and runs with no providers folder at all; and names the
//! commit it was built from, for `weir --version`.

#[path = "../build-support/wasm_guest.rs"]
mod wasm_guest;

#[path = "../build-support/git_revision.rs"]
mod git_revision;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sha2::{Digest, Sha256};

/// (provider crate, artifact name, env var the crate reads the path from)
const PROVIDERS: &[(&str, &str, &str)] = &[
    ("weir-provider-openai", "weir_provider_openai.wasm", "WEIR_EMBEDDED_OPENAI"),
    ("weir-provider-anthropic", "weir_provider_anthropic.wasm", "WEIR_EMBEDDED_ANTHROPIC"),
    ("weir-provider-anthropic-bedrock", "weir_provider_anthropic_bedrock.wasm", "WEIR_EMBEDDED_ANTHROPIC_BEDROCK"),
    (
        "weir-provider-anthropic-bedrock-mantle",
        "weir_provider_anthropic_bedrock_mantle.wasm",
        "WEIR_EMBEDDED_ANTHROPIC_BEDROCK_MANTLE",
    ),
    ("weir-provider-bedrock-converse", "weir_provider_bedrock_converse.wasm", "WEIR_EMBEDDED_BEDROCK_CONVERSE"),
    ("weir-provider-bedrock-retrieval", "weir_provider_bedrock_retrieval.wasm", "WEIR_EMBEDDED_BEDROCK_RETRIEVAL"),
    ("weir-provider-gemini", "weir_provider_gemini.wasm", "WEIR_EMBEDDED_GEMINI"),
    ("weir-provider-anthropic-vertex", "weir_provider_anthropic_vertex.wasm", "WEIR_EMBEDDED_ANTHROPIC_VERTEX"),
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
        &["providers", "sdk", "wit", "build-support", "Cargo.lock", "Cargo.toml", ".cargo/config.toml"],
    );
    println!("cargo:rerun-if-env-changed=WEIR_GIT_REVISION");
    let revision = git_revision::git_revision(&workspace, std::env::var("WEIR_GIT_REVISION").ok());
    for path in &revision.watch {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rustc-env=WEIR_GIT_REVISION={}", revision.name);
    println!("cargo:rerun-if-env-changed=WEIR_PROVIDERS_TARGET_DIR");
    let target_dir = std::env::var_os("WEIR_PROVIDERS_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target").join("providers"));
    // One build per component: cargo unifies the SDK's features across the
    // packages of one build, and those features pick each component's world.
    for (package, artifact, var) in PROVIDERS {
        let out = wasm_guest::build_components(&workspace, &target_dir, &[package], None)?;
        let path = out.join(artifact);
        println!("cargo:rustc-env={var}={}", path.display());
        println!("cargo:rustc-env={var}_SHA256={}", digest(&path)?);
    }
    Ok(())
}

/// The component's hex SHA-256 (as `plugin::component_digest` computes it; a
/// test compares the two), computed here so that a gateway starting on a warm
/// artifact cache never reads the embedded bytes (hashing them at start made
/// every one of their pages resident).
fn digest(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(hex::encode(Sha256::digest(bytes)))
}
