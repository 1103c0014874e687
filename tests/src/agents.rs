//! The released coding agents, run non-interactively against a gateway: Codex CLI
//! (`codex exec`) and Claude Code (`claude -p`), pinned in `tests/agents/package.json`
//! and installed by `npm ci --prefix tests/agents` (which `.ci/run` does). A missing
//! binary fails the test with that instruction: it is never skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The installed agent binary `name` (`codex`, `claude`), or `$env_override` when set.
fn agent_binary(name: &str, env_override: &str) -> PathBuf {
    let path = std::env::var_os(env_override)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("agents/node_modules/.bin").join(name));
    assert!(
        path.is_file(),
        "{} is not installed: run `npm ci --prefix tests/agents` (or set {env_override})",
        path.display()
    );
    path
}

/// Codex CLI's binary (`$WEIR_CODEX_BIN` overrides).
#[must_use]
pub fn codex_binary() -> PathBuf {
    agent_binary("codex", "WEIR_CODEX_BIN")
}

/// Claude Code's binary (`$WEIR_CLAUDE_BIN` overrides).
#[must_use]
pub fn claude_binary() -> PathBuf {
    agent_binary("claude", "WEIR_CLAUDE_BIN")
}

/// Runs `codex exec --json` once with `prompt`, against the gateway at `gateway_url`
/// (its root, no `/v1`) as a custom provider on the Responses wire, naming `model`, with
/// the caller key `key`. Codex's own state lives in `home`, and it works in `workdir`;
/// it may run commands there without asking and without its sandbox (the test's fake
/// upstream decides which). Returns its output (stdout: one JSON event per line).
#[must_use]
pub fn run_codex(gateway_url: &str, model: &str, key: &str, prompt: &str, home: &Path, workdir: &Path) -> Output {
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", codex_home.display()));
    let provider = format!(
        r#"model_providers.weir={{name="weir",base_url="{gateway_url}/v1",env_key="WEIR_CALLER_KEY",wire_api="responses"}}"#
    );
    Command::new(codex_binary())
        .args(["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"])
        .args(["-c", &provider, "-c", "model_provider=weir", "-m", model])
        .arg(prompt)
        .current_dir(workdir)
        .env("HOME", home)
        .env("CODEX_HOME", &codex_home)
        .env("WEIR_CALLER_KEY", key)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("cannot run codex: {error}"))
}
