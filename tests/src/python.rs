//! Runs the official Python clients — `tests/python/openai_client.py` (the `openai`
//! package) against any OpenAI-compatible base URL, `tests/python/anthropic_client.py` (the
//! `anthropic` package) against any Messages API root — the fake upstream, or Weir itself.
//!
//! `tests/python/parse_metrics.py` reads `/metrics` with the Prometheus project's own parser
//! (the `prometheus_client` package).
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
    // Only the import: not every package has `__version__` (`prometheus_client` has none).
    let probe = Command::new(&candidate).args(["-c", &format!("import {module}")]).output();
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

/// Runs the Playwright script `tests/python/{script}` with `args` (a JSON object; `chromium` is
/// added: `$WEIR_CHROMIUM`, else Debian's `/usr/bin/chromium`) and returns the one JSON object
/// it prints. Fails the test when the browser is missing or the script fails. Blocking: an
/// async test calls it through `spawn_blocking`.
#[must_use]
pub fn run_browser_script(script: &str, mut args: Value) -> Value {
    let chromium = std::env::var("WEIR_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        std::path::Path::new(&chromium).is_file(),
        "{chromium} is missing: install Debian's `chromium` package (`.ci/run` does)"
    );
    args["chromium"] = Value::String(chromium);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python").join(script);
    let output = Command::new(python_with("playwright")).arg(path).arg(args.to_string()).output().unwrap();
    assert!(
        output.status.success(),
        "{script} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
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

/// [`run_anthropic_client`] with `env` added to the script's environment (`WEIR_CALLER_KEY`:
/// the caller key it sends; `WEIR_MAX_USES`: the `budgeted_web_search` step's bound).
#[must_use]
pub fn run_anthropic_client_with(base_url: &str, model: &str, steps: &str, env: &[(&str, &str)]) -> Vec<Value> {
    run_script("anthropic_client.py", "anthropic", base_url, model, steps, env)
}

/// Parses an OpenMetrics exposition with the `prometheus_client` package's strict parser
/// (`tests/python/parse_metrics.py`) and returns its families as JSON: `[{"name", "type",
/// "unit", "samples": [{"name", "labels", "value"}]}]`. Fails the test if the text does not
/// parse.
#[must_use]
pub fn parse_metrics(text: &str) -> Value {
    use std::io::Write;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/parse_metrics.py");
    let mut child = Command::new(python_with("prometheus_client"))
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run parse_metrics.py: {e}"));
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "parse_metrics.py refused the exposition ({}):\n{}\n--- text ---\n{text}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("parse_metrics.py prints JSON")
}

/// Runs `tests/python/responses_client.py`'s `steps` (see its docstring: the `openai`
/// client's `responses.create` / `responses.stream`, and the `openai-agents` SDK) against
/// `base_url` (ending in `/v1`) for `model`, with `env` added to its environment, and
/// returns one JSON object per step. Fails the test if the script fails.
#[must_use]
pub fn run_responses_client(base_url: &str, model: &str, steps: &str, env: &[(&str, &str)]) -> Vec<Value> {
    let module = if steps.contains("agent") { "agents" } else { "openai" };
    run_script("responses_client.py", module, base_url, model, steps, env)
}

fn run_client(package: &str, base_url: &str, model: &str, steps: &str) -> Vec<Value> {
    run_script(&format!("{package}_client.py"), package, base_url, model, steps, &[])
}

fn run_script(name: &str, module: &str, base_url: &str, model: &str, steps: &str, env: &[(&str, &str)]) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python").join(name);
    let output = Command::new(python_with(module))
        .arg(script)
        .args([base_url, model, "--steps", steps])
        .envs(env.iter().copied())
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
