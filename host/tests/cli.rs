//! The `weir` binary's command line, run as a process. (Being an integration test
//! of this package also makes `cargo test --workspace` build the binary that the
//! gateway tests in `tests/` drive.)

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used)]

use std::process::Command;

fn weir(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("WEIR_CACHE_DIR", std::env::temp_dir().join("weir-cli-test-cache"))
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run weir")
}

#[test]
fn providers_lists_the_embedded_components() {
    let output = weir(&["providers", "--providers-dir", "/nonexistent-weir-folder"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    for expected in ["openai ", "openai-compatible", "embedded", "0.1.0", "OPENAI_API_KEY", "native-tools"] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    let openai_row = stdout.lines().find(|line| line.starts_with("openai ")).expect("openai row");
    assert!(openai_row.contains(" no "), "no OPENAI_API_KEY, so not configured: {openai_row}");
    let anthropic_row = stdout.lines().find(|line| line.starts_with("anthropic ")).expect("anthropic row");
    assert!(anthropic_row.contains("embedded"), "the Messages API component is embedded: {anthropic_row}");
}

#[test]
fn a_bad_config_fails_naming_the_file_and_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:0\"\nprovidrs_dir = \"x\"\n").expect("write");
    let output = weir(&["serve", "--config", path.to_str().expect("utf-8 path")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.toml") && stderr.contains("line 2") && stderr.contains("providrs_dir"), "{stderr}");
}

#[test]
fn a_model_without_any_endpoint_is_a_config_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("weir.toml");
    let config =
        "[[model]]\nid = \"local\"\nprovider = \"openai-compatible\"\nmax_output_tokens = 10\ncontext_window = 100\n";
    std::fs::write(&path, config).expect("write");
    let output = weir(&["providers", "--config", path.to_str().expect("utf-8 path")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`local`") && stderr.contains("set `endpoint`"), "{stderr}");
}
