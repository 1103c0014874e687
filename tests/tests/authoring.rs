//! `docs/src/providers/writing-a-provider.md`, sections 1 and 2, run word for word from a temporary
//! folder outside the repository, as a new user would with only the `weir` binary and
//! Python and componentize-py (section 1) or Node and npm (section 2): the guide's shell
//! blocks (marked `<!-- tested: NAME -->`) build the Python or JavaScript template
//! against `weir wit`'s files and check it; its catalog entry is served by the real
//! `weir serve` started before the providers folder exists; the drop block copies and
//! renames the file in; the guide's `curl` gets an answer from the fake upstream
//! through the dropped component. The JavaScript section's `npm ci` runs with
//! `npm_config_prefer_offline=true`: the packages come from the npm cache `.ci/run`'s
//! own `npm ci` filled (the registry is asked only for what the cache lacks).

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::gateway::{run_cli, shared_cache_dir, weir_binary};
use weir_tests::{FakeUpstream, Gateway};

/// The endpoint and address the guide writes, replaced by the test's own.
const GUIDE_ENDPOINT: &str = "http://127.0.0.1:9100/v1";
const GUIDE_ADDRESS: &str = "localhost:8080";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The fenced block right after `<!-- tested: NAME -->` in the guide.
fn guide_block(name: &str) -> String {
    let guide = std::fs::read_to_string(repository().join("docs/src/providers/writing-a-provider.md")).unwrap();
    let marker = format!("<!-- tested: {name} -->");
    let after = &guide[guide.find(&marker).unwrap_or_else(|| panic!("no {marker} in the guide")) + marker.len()..];
    let fence = after.find("```").unwrap();
    let body = &after[fence..];
    let start = body.find('\n').unwrap() + 1;
    let end = body[start..].find("```").unwrap();
    body[start..start + end].to_owned()
}

/// A folder for PATH holding `weir` (the binary under test) and `componentize-py`
/// (through the Python the other tests use, as `build.rs` finds it).
fn tools(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(weir_binary(), bin.join("weir")).unwrap();
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/.venv/bin/python");
    let python = std::env::var("WEIR_PYTHON")
        .ok()
        .unwrap_or_else(|| if venv.is_file() { venv.to_str().unwrap().to_owned() } else { "python3".to_owned() });
    let shim = bin.join("componentize-py");
    let script = format!(
        "#!/bin/sh\nexec '{python}' -c 'import sys, componentize_py; sys.exit(componentize_py.script())' \"$@\"\n"
    );
    std::fs::write(&shim, script).unwrap();
    let mut permissions = std::fs::metadata(&shim).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&shim, permissions).unwrap();
    bin
}

/// Runs a guide block with `sh -e` in `dir`, the tools first on PATH.
fn run_block(block: &str, dir: &Path, bin: &Path) -> Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("sh")
        .args(["-e", "-c", block])
        .current_dir(dir)
        .env("PATH", path)
        .env("WEIR_SRC", repository())
        .env("WEIR_CACHE_DIR", shared_cache_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("npm_config_prefer_offline", "true")
        .env("npm_config_audit", "false")
        .env("npm_config_fund", "false")
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn the_python_guide_runs_word_for_word_outside_the_repository() {
    walk_through("build", "acme", "config", "template-py").await;
}

#[tokio::test]
async fn the_javascript_guide_runs_word_for_word_outside_the_repository() {
    walk_through("js-build", "acme-js", "js-config", "template-js").await;
}

/// The guide's build block (which makes `folder` and builds `folder/acme.wasm` in it),
/// its config block, then the shared drop and call blocks, for the template `key`.
async fn walk_through(build: &str, folder: &str, config: &str, key: &str) {
    let outside = tempfile::Builder::new().prefix("weir-guide-").tempdir().unwrap();
    assert!(!outside.path().starts_with(repository()), "the temp folder is outside the repository");
    let bin = tools(outside.path());

    // Build and check: `mkdir`, `weir wit`, the build, `weir check`.
    let started = Instant::now();
    let built = run_block(&guide_block(build), outside.path(), &bin);
    let stdout = text(&built.stdout);
    assert!(built.status.success(), "the build block failed:\n{stdout}\n{}", text(&built.stderr));
    eprintln!("guide {build} block (build + weir check): {:.1} s", started.elapsed().as_secs_f64());
    assert!(stdout.contains("wrote weir:provider@0.7.0"), "{stdout}");
    assert!(stdout.contains(&format!("ok    {key}: fixture: an answer with every field the kit compares")), "{stdout}");
    assert!(stdout.contains("57 checks, 57 passed (5 by refusing as unsupported), 0 failed"), "{stdout}");
    let acme = outside.path().join(folder);
    assert!(acme.join("wit/worlds.wit").is_file() && acme.join("acme.wasm").is_file());

    // The guide's config, with the fake upstream's endpoint; served before the
    // providers folder exists.
    let upstream = FakeUpstream::start().await;
    let config = guide_block(config);
    assert!(config.contains(&format!("provider = \"{key}\"")), "{config}");
    assert!(config.contains(GUIDE_ENDPOINT), "{config}");
    let config = config.replace(GUIDE_ENDPOINT, &upstream.base_url());
    std::fs::write(acme.join("weir.toml"), &config).unwrap();
    let providers = acme.join("providers");
    let gateway = Gateway::start_with(&config, &[], Some(&providers)).await;
    gateway.wait_for_stderr("the providers folder does not exist", Duration::from_secs(10)).await;

    // Drop: mkdir, copy and rename, `weir providers`.
    let dropped = Instant::now();
    let drop = run_block(&guide_block("drop"), &acme, &bin);
    let listing = text(&drop.stdout);
    assert!(drop.status.success(), "the drop block failed:\n{listing}\n{}", text(&drop.stderr));
    let folder = listing.lines().find(|line| line.starts_with("providers folder: ")).expect("the folder line");
    assert!(folder.ends_with("providers"), "the config's folder, relative to the config file: {folder}");
    let row = listing.lines().find(|line| line.starts_with(&format!("{key} "))).expect("a row for the key");
    assert!(row.contains(" file "), "{row}");
    assert!(listing.contains(&format!("model acme-large: endpoint {}", upstream.base_url())), "{listing}");

    // The running gateway picks the file up: poll a call until it answers (bounded).
    let client = reqwest::Client::new();
    let request = json!({"model": "acme-large", "messages": [{"role": "user", "content": "warm up"}]});
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let response = client.post(gateway.url("/v1/chat/completions")).json(&request).send().await.unwrap();
        if response.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the dropped component never answered:\n{}", gateway.stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("live after the rename: {:.1} s (already compiled by weir check)", dropped.elapsed().as_secs_f64());

    // The guide's curl, at the gateway's address.
    let address = gateway.url("").trim_start_matches("http://").to_owned();
    let call = guide_block("call").replace(GUIDE_ADDRESS, &address);
    let answered = run_block(&call, &acme, &bin);
    assert!(answered.status.success(), "{}", text(&answered.stderr));
    let body: Value = serde_json::from_slice(&answered.stdout).unwrap();
    assert_eq!(body["model"], "acme-large", "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "echo: Hello, Acme", "{body}");

    // What the upstream received from the template: its path, the wire id, the entry's budget.
    let received = upstream.received();
    let sent = received.last().unwrap();
    assert_eq!(sent.path, "/v1/chat/completions");
    let sent = sent.json();
    assert_eq!(sent["model"], "acme-large-2026");
    assert_eq!(sent["max_tokens"], 1024, "the entry's output_tokens, exactly");
    assert_eq!(sent["messages"], json!([{"role": "user", "content": "Hello, Acme"}]));
}

/// The template streams: a caller's stream goes upstream as a stream (with the usage
/// asked for), and the template's decoder turns the chunks into the caller's events
/// (what the guide's section 6 says of a Python provider's `chat.py`).
#[tokio::test]
async fn the_python_template_streams_through_its_decoder() {
    streams_through_its_decoder(Path::new(env!("WEIR_TEMPLATE_PY_WASM")), "template-py").await;
}

/// The same for the JavaScript template (its `chat.StreamDecoder`).
#[tokio::test]
async fn the_javascript_template_streams_through_its_decoder() {
    streams_through_its_decoder(Path::new(env!("WEIR_TEMPLATE_JS_WASM")), "template-js").await;
}

async fn streams_through_its_decoder(component: &Path, key: &str) {
    weir_tests::gateway::precompile(component);
    let folder = tempfile::tempdir().unwrap();
    std::fs::copy(component, folder.path().join("template.wasm")).unwrap();
    let upstream = FakeUpstream::start().await;
    upstream
        .push(weir_tests::openai_wire::stream(weir_tests::openai_wire::sse_chunks(&["Hello from ", "the template."])));
    let config = format!(
        "[[model]]\nid = \"acme\"\nprovider = \"{key}\"\nendpoint = \"{}\"\ncredential = \"acme-api-key\"\n\
         max_output_tokens = 100\ncontext_window = 1000\noutput_tokens = 10\n",
        upstream.base_url()
    );
    let gateway = Gateway::start_with(&config, &[], Some(folder.path())).await;
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .json(&json!({"model": "acme", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert_eq!(weir_tests::openai_wire::streamed_text(&body), "Hello from the template.", "{body}");
    assert!(body.contains("\"finish_reason\":\"stop\"") && body.ends_with("data: [DONE]\n\n"), "{body}");
    let received = upstream.received();
    assert_eq!(received.len(), 1, "one streamed request: {received:?}");
    let sent = received[0].json();
    assert_eq!((sent["stream"].clone(), sent["stream_options"].clone()), (json!(true), json!({"include_usage": true})));
    let listing = run_cli(&["providers", "--providers-dir", folder.path().to_str().unwrap()], &[]);
    let row = text(&listing.stdout);
    let row = row.lines().find(|line| line.starts_with(&format!("{key} "))).unwrap();
    assert!(row.contains("streaming"), "the template declares streaming: {row}");
}
