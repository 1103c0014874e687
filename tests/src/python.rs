//! Runs `tests/python/openai_client.py` — the official `openai` Python package — against
//! any OpenAI-compatible base URL (the fake upstream, or Weir itself).
//!
//! The interpreter is `$WEIR_PYTHON`, else `tests/python/.venv/bin/python` when that venv
//! exists, else `python3`. It must have the pinned `openai` package
//! (`python3 -m pip install -r tests/python/requirements.txt`, which `.ci/run` does). A
//! missing package fails the test with that instruction: it is never skipped.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The Python interpreter that has `openai`, or a panic saying how to install it.
#[must_use]
pub fn python_with_openai() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    let candidate = std::env::var_os("WEIR_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| if venv.is_file() { venv } else { PathBuf::from("python3") });
    let probe = Command::new(&candidate).args(["-c", "import openai; print(openai.__version__)"]).output();
    match probe {
        Ok(output) if output.status.success() => candidate,
        Ok(output) => panic!(
            "{} cannot import `openai`: install it with `python3 -m pip install -r tests/python/requirements.txt`\n{}",
            candidate.display(),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => panic!("cannot run {}: {error}", candidate.display()),
    }
}

/// Runs the client script's `steps` (`plain`, `tools`, `stream`) against `base_url` for
/// `model`, and returns one JSON object per step. Fails the test if the script fails.
#[must_use]
pub fn run_openai_client(base_url: &str, model: &str, steps: &str) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/openai_client.py");
    let output = Command::new(python_with_openai())
        .arg(script)
        .args([base_url, model, "--steps", steps])
        .output()
        .expect("run openai_client.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "openai_client.py failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
}
