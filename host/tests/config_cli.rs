//! `weir config check|show`, run as a process: every example configuration
//! passes, each kind of error `weir serve` refuses at load is refused here
//! with its message and exit 1, an unset credential is a warning that never
//! shows a secret, and nothing is bound or dialled.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::expect_used)]

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn weir(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
    command
        .args(args)
        .env("WEIR_CACHE_DIR", std::env::temp_dir().join("weir-cli-test-cache"))
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("AZURE_SECRET");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run weir")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the host crate is in the repository").to_path_buf()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A config file in a fresh folder (kept alive by the returned guard).
fn config_file(body: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, body).expect("write config");
    (dir, path.to_str().expect("utf-8 path").to_owned())
}

/// A local entry every error config starts from.
const LOCAL: &str = "[[model]]\nid = \"local\"\nprovider = \"openai-compatible\"\nendpoint = \"http://127.0.0.1:9/v1\"\n\
                     max_output_tokens = 100\ncontext_window = 1000\ninput_price = 1.0\noutput_price = 2.0\n";

/// Every example configuration in the repository (and the embedded catalog)
/// loads as `weir serve` would load it.
#[test]
fn every_example_config_passes() {
    let examples = repo_root().join("host/examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&examples).expect("read host/examples") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|ext| ext != "toml") {
            continue;
        }
        let output = weir(&["config", "check", path.to_str().expect("utf-8 path")], &[]);
        assert!(output.status.success(), "{}: {output:?}", path.display());
        assert!(text(&output.stdout).contains("ok: "), "{}: {output:?}", path.display());
        checked += 1;
    }
    assert!(checked >= 2, "the examples folder holds local.toml and fleet.toml");
    let embedded = weir(&["config", "check"], &[]);
    assert!(embedded.status.success(), "{embedded:?}");
    assert!(text(&embedded.stdout).contains("ok: (embedded default): "), "{embedded:?}");
}

/// One broken configuration per kind of error: exit 1 and the message that
/// names what is wrong (and where, for the parser's errors).
#[test]
fn each_kind_of_error_exits_1_with_its_message() {
    let key = "[[key]]\nid = \"k\"\nmember = \"m\"\nhash = \"sha256:1234\"\n";
    let cases: [(&str, String, &[&str]); 10] = [
        ("syntax", format!("{LOCAL}\n[server\nmax_connections = 3\n"), &["line 10, column"]),
        ("unknown key", format!("{LOCAL}colour = \"red\"\n"), &["line 9", "colour"]),
        ("wrong type", format!("listen = 8080\n{LOCAL}"), &["line 1, column", "expected socket address"]),
        (
            "reach (plain http off loopback)",
            LOCAL.replace("http://127.0.0.1:9/v1", "http://models.example.com/v1"),
            &["model `local`", "http"],
        ),
        (
            "role",
            format!("{LOCAL}[role.chat]\ngrade = \"deep\"\n"),
            &["role `chat`", "no `[[model]]` has grade `deep`"],
        ),
        ("pin", format!("{LOCAL}grade = \"fast\"\n[pins]\nfast = \"elsewhere\"\n"), &["[pins]", "elsewhere"]),
        (
            "budget",
            format!("{LOCAL}[member.ana]\ndaily_usd = -1.0\n"),
            &["[member.ana]", "USD budgets must be finite and not negative"],
        ),
        ("key", format!("{LOCAL}{key}"), &["hash", "weir keys new"]),
        ("ledger", format!("{LOCAL}[ledger]\npostgres_ca = \"ca.pem\"\n"), &["postgres_ca", "without `postgres_url`"]),
        (
            "serve's own refusal: no key beyond loopback",
            format!("listen = \"0.0.0.0:8080\"\n{LOCAL}"),
            &["refusing to listen on 0.0.0.0:8080 with no [[key]]"],
        ),
    ];
    for (kind, body, expected) in cases {
        let (_dir, path) = config_file(&body);
        let output = weir(&["config", "check", &path], &[]);
        assert_eq!(output.status.code(), Some(1), "{kind}: {output:?}");
        let stderr = text(&output.stderr);
        assert!(stderr.starts_with("error: "), "{kind}: {stderr}");
        for part in expected {
            assert!(stderr.contains(part), "{kind}: missing {part:?} in {stderr}");
        }
        assert!(output.stdout.is_empty(), "{kind}: nothing is reported ok: {output:?}");
    }
}

/// A prices file naming an entry the catalog lacks, and a config that cannot
/// be read: both refused, naming the file.
#[test]
fn a_bad_prices_file_and_a_missing_config_are_errors() {
    let (dir, path) = config_file(LOCAL);
    let prices = dir.path().join("prices.toml");
    std::fs::write(&prices, "[nowhere]\ninput_price = 1.0\noutput_price = 1.0\n").expect("write prices");
    let output = weir(&["config", "check", &path, "--prices", prices.to_str().expect("utf-8 path")], &[]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(text(&output.stderr).contains("`nowhere` is not a catalog entry"), "{output:?}");

    let missing = dir.path().join("absent.toml");
    let output = weir(&["config", "check", missing.to_str().expect("utf-8 path")], &[]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(text(&output.stderr).contains("cannot read config") && text(&output.stderr).contains("absent.toml"));
}

/// Credentials named but unset are warnings naming the id and where it is
/// looked for; a credential that is set shows neither its value nor a warning.
#[test]
fn an_unset_credential_is_a_warning_that_shows_no_secret() {
    let secret = "sk-the-operators-secret-4417";
    let body = format!(
        "{LOCAL}credential = \"local-key\"\n\
         [[model]]\nid = \"other\"\nprovider = \"openai-compatible\"\nendpoint = \"http://127.0.0.1:9/v1\"\n\
         credential = \"other-key\"\nmax_output_tokens = 100\ncontext_window = 1000\ninput_price = 1.0\noutput_price = 2.0\n"
    );
    let (_dir, path) = config_file(&body);
    let output = weir(&["config", "check", &path], &[("LOCAL_KEY", secret)]);
    assert!(output.status.success(), "warnings do not fail the check: {output:?}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("warning: credential `other-key` is not set (environment variable OTHER_KEY): needed by other"),
        "{stdout}"
    );
    assert!(!stdout.contains("`local-key`"), "a set credential is not warned of: {stdout}");
    for stream in [&stdout, &text(&output.stderr)] {
        assert!(!stream.contains(secret), "the secret is never printed: {stream}");
    }
    let shown = weir(&["config", "show", "--config", &path, "--json"], &[("LOCAL_KEY", secret)]);
    assert!(shown.status.success(), "{shown:?}");
    assert!(!text(&shown.stdout).contains(secret) && !text(&shown.stderr).contains(secret), "{shown:?}");
}

/// A loopback listener that must never see a connection.
struct Untouched {
    listener: TcpListener,
    what: &'static str,
}

impl Untouched {
    fn new(what: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback listener");
        listener.set_nonblocking(true).expect("nonblocking");
        Self { listener, what }
    }

    fn address(&self) -> String {
        self.listener.local_addr().expect("local address").to_string()
    }

    fn assert_untouched(&self) {
        let accepted = self.listener.accept();
        assert!(
            matches!(&accepted, Err(error) if error.kind() == ErrorKind::WouldBlock),
            "{} saw a connection: {accepted:?}",
            self.what
        );
    }
}

/// Everything that could dial or listen points at a loopback socket the test
/// holds — the model's endpoint, a token credential's authority, Redis,
/// PostgreSQL, the OTLP collector — and `listen` and `[metrics] listen` are
/// addresses the test has bound already (so binding them would fail the
/// check): the check passes, no socket sees a connection, and no ledger file
/// is created.
#[test]
fn check_binds_nothing_and_dials_nothing() {
    let endpoint = Untouched::new("the model's endpoint");
    let authority = Untouched::new("the token credential's authority");
    let redis = Untouched::new("Redis");
    let postgres = Untouched::new("PostgreSQL");
    let collector = Untouched::new("the OTLP collector");
    let listen = Untouched::new("the gateway's listen address");
    let metrics = Untouched::new("the metrics listen address");
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("calls.db");
    let body = format!(
        "listen = \"{listen}\"\n\n\
         [[model]]\nid = \"azure-chat\"\nprovider = \"openai-compatible\"\nendpoint = \"http://{endpoint}/v1\"\n\
         credential = \"azure\"\nmax_output_tokens = 100\ncontext_window = 1000\ninput_price = 1.0\noutput_price = 2.0\n\
         rpm = 60\n\n\
         [credentials.azure]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"azure-secret\"\n\
         authority_host = \"http://{authority}\"\n\n\
         [member.ana]\ndaily_usd = 5.0\n\n\
         [fleet]\nredis_url = \"redis://{redis}\"\n\n\
         [ledger]\npath = \"{ledger}\"\npostgres_url = \"postgres://weir@{postgres}/weir\"\n\n\
         [telemetry]\notlp_endpoint = \"http://{collector}/v1/traces\"\n\n\
         [metrics]\nlisten = \"{metrics}\"\n",
        listen = listen.address(),
        endpoint = endpoint.address(),
        authority = authority.address(),
        redis = redis.address(),
        postgres = postgres.address(),
        collector = collector.address(),
        metrics = metrics.address(),
        ledger = ledger.display(),
    );
    let path = dir.path().join("weir.toml");
    std::fs::write(&path, body).expect("write config");
    let output = weir(&["config", "check", path.to_str().expect("utf-8 path")], &[("AZURE_SECRET", "s3cret-value")]);
    assert!(output.status.success(), "{output:?}");
    assert!(text(&output.stdout).contains(&format!("would listen on {}", listen.address())), "{output:?}");
    let shown = weir(&["config", "show", "--config", path.to_str().expect("utf-8 path")], &[]);
    assert!(shown.status.success(), "{shown:?}");
    for socket in [&endpoint, &authority, &redis, &postgres, &collector, &listen, &metrics] {
        socket.assert_untouched();
    }
    assert!(!ledger.exists(), "the ledger file is not created");
    assert!(!text(&output.stdout).contains("s3cret-value"));
}

/// `show` lists entries, roles with what they resolve to, providers and
/// budgets; `--json` holds the same as one document.
#[test]
fn show_prints_the_resolved_catalog() {
    let body = format!(
        "{LOCAL}grade = \"fast\"\n[role.quick]\ngrade = \"fast\"\n[member.ana]\ndaily_usd = 5.0\n\
         [[model]]\nid = \"orphan\"\nprovider = \"no-such-provider\"\nendpoint = \"https://x.example/v1\"\n\
         max_output_tokens = 100\ncontext_window = 1000\ninput_price = 1.0\noutput_price = 2.0\n"
    );
    let (_dir, path) = config_file(&body);
    let output = weir(&["config", "show", "--config", &path], &[]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    let row = |start: &str| stdout.lines().find(|line| line.starts_with(start)).map(str::to_owned);
    let local = row("local ").expect("the local entry's row");
    assert!(local.contains("openai-compatible") && local.contains("fast") && local.contains("1 / 2"), "{local}");
    assert!(row("orphan ").expect("orphan row").contains(" no "), "{stdout}");
    let role = row("quick ").expect("the role's row");
    assert!(role.contains("grade fast") && role.contains("local"), "{role}");
    assert!(row("member ").expect("the budget's row").contains("ana"), "{stdout}");

    let json = weir(&["config", "show", "--config", &path, "--json"], &[]);
    assert!(json.status.success(), "{json:?}");
    let body: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON document");
    assert_eq!(body["roles"][0]["name"], "quick");
    assert_eq!(body["roles"][0]["resolves_to"], "local");
    let entries = body["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().any(|entry| entry["id"] == "orphan" && entry["available"] == false), "{body}");
    assert_eq!(body["budgets"][0]["name"], "ana");
    assert!(body["providers"].as_array().expect("providers").iter().any(|p| p["key"] == "openai-compatible"));

    let check = weir(&["config", "check", &path], &[]);
    assert!(check.status.success(), "{check:?}");
    assert!(text(&check.stdout).contains("warning: model `orphan` is unavailable"), "{check:?}");
}

/// `weir config schema` prints the JSON Schema the library generates.
#[test]
fn schema_prints_the_generated_json_schema() {
    let output = weir(&["config", "schema"], &[]);
    assert!(output.status.success(), "{output:?}");
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(printed, weir_host::catalog::config_schema());
    assert_eq!(printed["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(printed["additionalProperties"], false, "unknown keys are refused, as the parser refuses them");
}
