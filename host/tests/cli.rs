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
    for expected in ["openai ", "openai-compatible", "embedded", "0.7.0", "OPENAI_API_KEY", "native-tools"] {
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

/// `weir providers` with every AWS source cleared and AWS's instance-metadata
/// endpoint pointed at a local listener: without `--resolve` nothing connects to it
/// and nothing is logged; with `--resolve` the chain does connect (so the listener
/// is where the chain would go, and the first half proves something).
#[test]
fn providers_makes_no_network_call_unless_asked_to_resolve() {
    let home = tempfile::tempdir().expect("temp dir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let metadata = format!("http://{}", listener.local_addr().expect("address"));
    let command = |resolve: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
        command.args(["providers", "--providers-dir", "/nonexistent-weir-folder"]);
        if resolve {
            command.arg("--resolve");
        }
        command
            .env("WEIR_CACHE_DIR", std::env::temp_dir().join("weir-cli-test-cache"))
            .env("NO_COLOR", "1")
            .env("HOME", home.path())
            .env("AWS_CONFIG_FILE", home.path().join("no-config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", home.path().join("no-credentials"))
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &metadata)
            .env_remove("AWS_EC2_METADATA_DISABLED")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for variable in
            ["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        {
            command.env_remove(variable);
        }
        for variable in ["AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI"] {
            command.env_remove(variable);
        }
        command.env_remove("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").env_remove("RUST_LOG");
        command
    };

    let output = command(false).output().expect("run weir providers");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(listener.accept().is_err(), "weir providers connected to the instance-metadata endpoint");
    assert!(!stderr.contains("WARN"), "no warning without --resolve: {stderr}");
    let bedrock = stdout.lines().find(|line| line.starts_with("bedrock-converse ")).expect("bedrock-converse row");
    assert!(bedrock.contains(" unknown "), "not in the secret store, chain not asked: {bedrock}");
    assert!(stdout.contains("region: not resolved: not in the secret store"), "{stdout}");
    assert!(stdout.contains("`--resolve` asks AWS's default chains too"), "{stdout}");

    // With --resolve the chain walks to the metadata endpoint: the listener sees it.
    let mut child = command(true).spawn().expect("spawn weir providers --resolve");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let connected = loop {
        if listener.accept().is_ok() {
            break true;
        }
        if std::time::Instant::now() > deadline || child.try_wait().expect("poll").is_some() {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().ok();
    child.wait().expect("reap");
    assert!(connected, "--resolve asks AWS's chain, which reaches the metadata endpoint");
}

#[test]
fn providers_says_when_the_providers_folder_does_not_exist() {
    let output = weir(&["providers", "--providers-dir", "/nonexistent-weir-folder"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "providers folder: /nonexistent-weir-folder does not exist: only the embedded providers are loaded"
        ),
        "{stdout}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let output = weir(&["providers", "--providers-dir", dir.path().to_str().expect("utf-8 path")]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(&format!("providers folder: {}\n", dir.path().display())), "{stdout}");
}

#[test]
fn providers_shows_the_endpoint_each_catalog_entry_uses() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("weir.toml");
    let config = r#"
[[model]]
id = "local"
provider = "openai-compatible"
endpoint = "http://127.0.0.1:9/v1"
max_output_tokens = 10
context_window = 100

[[model]]
id = "gpt"
provider = "openai"
max_output_tokens = 10
context_window = 100
"#;
    std::fs::write(&path, config).expect("write");
    let output = weir(&["providers", "--config", path.to_str().expect("utf-8 path")]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("model local: endpoint http://127.0.0.1:9/v1"), "the entry's own: {stdout}");
    assert!(stdout.contains("model gpt: endpoint https://api.openai.com/v1"), "the provider's default: {stdout}");
}

#[test]
fn wit_writes_the_package_the_binary_speaks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("nested").join("wit");
    let output = weir(&["wit", "--out", out.to_str().expect("utf-8 path")]);
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("weir:provider@0.7.0"), "{output:?}");
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    let wit_files = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("readable")
            .map(|entry| entry.expect("entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "wit"))
            .map(|path| path.file_name().expect("a name").to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let names = wit_files(&repository);
    assert_eq!(wit_files(&out), names, "every WIT file of the repository's package, and only those");
    assert!(names.contains(&"embeddings.wit".to_owned()) && names.contains(&"logprobs.wit".to_owned()), "{names:?}");
    assert_eq!(std::fs::read_dir(&out).expect("readable").count(), names.len(), "no frozen folder, nothing else");
    for name in names {
        let written = std::fs::read_to_string(out.join(&name)).expect("written");
        let source = std::fs::read_to_string(repository.join(&name)).expect("source");
        assert_eq!(written, source, "{name}");
    }
}

#[test]
fn wit_into_a_path_that_cannot_be_a_folder_fails_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("write");
    let output = weir(&["wit", "--out", file.to_str().expect("utf-8 path")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot create") && stderr.contains("a-file"), "{stderr}");
}
