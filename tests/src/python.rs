//! Runs the official Python clients — `tests/python/openai_client.py` (the `openai`
//! package) against any OpenAI-compatible base URL, `tests/python/anthropic_client.py` (the
//! `anthropic` package) against any Messages API root — the fake upstream, or Weir itself.
//!
//! The interpreter is `$WEIR_PYTHON`, else `tests/python/.venv/bin/python` when that venv
//! exists, else `python3`. It must have the pinned packages
//! (`python3 -m pip install -r tests/python/requirements.txt`, which `.ci/run` does). A
//! missing package fails the test with that instruction: it is never skipped.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The Python interpreter that has `openai`, or a panic saying how to install it.
#[must_use]
pub fn python_with_openai() -> PathBuf {
    python_with("openai")
}

/// The Python interpreter that can import `module`, or a panic saying how to install it.
#[must_use]
pub fn python_with(module: &str) -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    let candidate = std::env::var_os("WEIR_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| if venv.is_file() { venv } else { PathBuf::from("python3") });
    let probe =
        Command::new(&candidate).args(["-c", &format!("import {module}; print({module}.__version__)")]).output();
    match probe {
        Ok(output) if output.status.success() => candidate,
        Ok(output) => panic!(
            "{} cannot import `{module}`: install it with `python3 -m pip install -r tests/python/requirements.txt`\n{}",
            candidate.display(),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => panic!("cannot run {}: {error}", candidate.display()),
    }
}

/// Runs the OpenAI client script's `steps` (`plain`, `tools`, `stream`, `stream_tools`)
/// against `base_url` (ending in `/v1`) for `model`, and returns one JSON object per step.
/// Fails the test if the script fails.
#[must_use]
pub fn run_openai_client(base_url: &str, model: &str, steps: &str) -> Vec<Value> {
    run_client("openai", base_url, model, steps)
}

/// Runs the Anthropic client script's `steps` (`plain`, `tools`, `stream`, `stream_tools`)
/// against `base_url` (the server's root: the client appends `/v1/messages`) for `model`, and
/// returns one JSON object per step. Fails the test if the script fails.
#[must_use]
pub fn run_anthropic_client(base_url: &str, model: &str, steps: &str) -> Vec<Value> {
    run_client("anthropic", base_url, model, steps)
}

fn run_client(package: &str, base_url: &str, model: &str, steps: &str) -> Vec<Value> {
    let name = format!("{package}_client.py");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python").join(&name);
    let output = Command::new(python_with(package))
        .arg(script)
        .args([base_url, model, "--steps", steps])
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{name} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
}
