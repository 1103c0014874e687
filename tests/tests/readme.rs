//! The README's quick start and five-minute tour, run as written (their
//! `<!-- tested: NAME -->` blocks) from an empty folder outside the repository,
//! with the binaries on `PATH` as a reader who installed them has them: `weir`
//! (the binary under test), `fake-upstream` (this crate's), and a `python3` with
//! the official `openai` and `anthropic` packages. The block's two addresses
//! (8080, 9100) are swapped for free ports: other gateways may run beside the
//! tests. The quick start's `cargo install` line is the one line not run (a
//! release build of the workspace): the binary under test stands for what it
//! installs.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use weir_tests::gateway::{shared_cache_dir, weir_binary};
use weir_tests::python::python_with;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The fenced block right after `<!-- tested: NAME -->` in the README.
fn readme_block(name: &str) -> String {
    let readme = std::fs::read_to_string(repository().join("README.md")).unwrap();
    let marker = format!("<!-- tested: {name} -->");
    let after = &readme[readme.find(&marker).unwrap_or_else(|| panic!("no {marker} in the README")) + marker.len()..];
    let body = &after[after.find("```").unwrap()..];
    let start = body.find('\n').unwrap() + 1;
    let end = body[start..].find("\n```").unwrap();
    body[start..start + end + 1].to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A `bin` folder for `PATH`: `weir`, `fake-upstream` and a `python3` shim
/// over the interpreter that has both official clients.
fn tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(weir_binary(), bin.join("weir")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_fake-upstream"), bin.join("fake-upstream")).unwrap();
    let _ = python_with("openai");
    // Its absolute path: the shim is itself `python3` on `PATH`.
    let python =
        Command::new(python_with("anthropic")).args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    let shim = bin.join("python3");
    std::fs::write(&shim, format!("#!/bin/sh\nexec '{}' \"$@\"\n", python.trim())).unwrap();
    let mut permissions = std::fs::metadata(&shim).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&shim, permissions).unwrap();
    bin
}

/// Runs `script` with bash in `folder` (background jobs killed on any exit),
/// `bin` first on `PATH` and the user's folders inside `home`.
fn run(script: &str, folder: &Path, bin: &Path, home: &Path) -> std::process::Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let guarded = format!("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}");
    let child = Command::new("timeout")
        .arg("300")
        .args(["bash", "-c", &guarded])
        .current_dir(folder)
        .env("PATH", path)
        .env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env("WEIR_CACHE_DIR", shared_cache_dir())
        .env("NO_COLOR", "1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_five_minute_tour_runs_from_an_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let bin = tools(dir.path());
    let folder = dir.path().join("tour");
    std::fs::create_dir(&folder).unwrap();
    let (gateway, upstream) = (free_port(), free_port());
    let block = readme_block("tour");
    assert!(block.contains(":8080") && block.contains(":9100"), "the tour names its two ports:\n{block}");
    let script = block.replace(":8080", &format!(":{gateway}")).replace(":9100", &format!(":{upstream}"));
    let output = run(&script, &folder, &bin, dir.path());
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the tour failed:\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let said = |client: &str| {
        let line = stdout.lines().find(|line| line.starts_with(&format!("{client}: "))).unwrap_or_default();
        line.to_owned()
    };
    assert!(said("openai").contains("Hello, Weir"), "the echo through the OpenAI client:\n{stdout}");
    assert!(said("anthropic").contains("Hello again"), "the echo through the Anthropic client:\n{stdout}");
    assert!(stdout.contains("ok: weir.toml: 1 entries"), "weir config check passed:\n{stdout}");
    // The ledger query: both calls, the member's, with a cost.
    let rows: Vec<&str> =
        stdout.lines().filter(|line| line.contains(" local-chat ") && line.contains(" ana ")).collect();
    assert_eq!(rows.len(), 2, "two calls in the ledger:\n{stdout}");
    assert!(rows.iter().all(|row| row.contains(" ok ") && row.contains('$')), "{rows:#?}");
    assert!(stdout.contains("total: 2 call(s)"), "{stdout}");
    let token = std::fs::read_to_string(folder.join("token")).unwrap();
    let config = std::fs::read_to_string(folder.join("weir.toml")).unwrap();
    assert!(!config.contains(token.trim()), "the config keeps the key's hash, not its token");
    assert!(folder.join("ledger.db").is_file(), "the ledger is beside the config");
}

#[test]
fn the_quick_start_serves_the_embedded_catalog() {
    let block = readme_block("quick-start");
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(
        lines,
        ["cargo run -p weir-host --bin weir -- serve", "cargo test --workspace"],
        "the quick start is its two commands: the gateway, then the tests (this very test is one of them)"
    );
    // The binary under test stands in for `cargo run -p weir-host --bin weir --`.
    let serve = lines[0].replace("cargo run -p weir-host --bin weir --", "weir");
    let dir = tempfile::tempdir().unwrap();
    let bin = tools(dir.path());
    let folder = dir.path().join("empty");
    std::fs::create_dir(&folder).unwrap();
    let port = free_port();
    // `weir serve` as written, on a free port; then what a reader would ask it.
    let script = format!(
        "{} --listen 127.0.0.1:{port} &\n\
         until curl -sf localhost:{port}/health > /dev/null; do sleep 0.2; done\n\
         curl -sf localhost:{port}/v1/models\n",
        serve
    );
    let output = run(&script, &folder, &bin, dir.path());
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let models: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().filter_map(|model| model["id"].as_str()).collect();
    for expected in ["gpt-4.1-mini", "claude-sonnet-4-5-direct", "gemini-2.5-flash-lite"] {
        assert!(ids.contains(&expected), "{expected} in {ids:?}");
    }
    assert!(
        dir.path().join(".local/share/weir/ledger.db").is_file(),
        "its ledger is in the user's data folder, as the book says"
    );
}
