//! No secret in the log (issue 44, item 3), through real `weir serve`
//! processes at `RUST_LOG=debug`: a Redis that requires a password and a
//! PostgreSQL user with one, named by `[fleet] redis_url` and `[ledger]
//! postgres_url` in every form a connection string takes; an upstream that
//! echoes the key it was sent in its error bodies (HTTP errors and an error
//! frame inside a stream). The gateway's whole stderr is read after it
//! stopped. Also: a caller's `model` holding a newline and an ANSI sequence
//! stays inside its own log line, and an Azure-style endpoint keeps its
//! `?api-version=` as the query of the URL sent, never shown with its value.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_tests::redis_server::percent_escaped;
use weir_tests::{FakeUpstream, Gateway, PostgresServer, RedisServer, openai_wire, run_cli};

/// The upstream key the gateway sends (`Authorization: Bearer …`); the
/// upstream echoes it back.
const UPSTREAM_KEY: &str = "sk-echo-Zq8sW3vT0kLm";
/// Redis's password: it holds `@`, which the old redaction cut at.
const REDIS_PASSWORD: &str = "rp@ss-Ke7Xy";
/// PostgreSQL's password: it holds `@` and a space (quoted in libpq's form).
const POSTGRES_PASSWORD: &str = "pg p@ss-Wq4Zr";
/// Text found in every form of each secret (escaped or not, and past the `@`):
/// none of it may reach the log.
const NEVER_LOGGED: [&str; 5] = ["Zq8sW3vT0kLm", "Ke7Xy", "Wq4Zr", "rp%40ss", "pg%20p"];

/// The chat entry at `endpoint` (its key from `ECHO_TEST_KEY`; its `rpm` /
/// `tpm` are what a fleet shares in Redis), then `tail`.
fn config(endpoint: &str, tail: &str) -> String {
    format!(
        r#"
[[model]]
id = "chat"
provider = "openai"
endpoint = "{endpoint}"
credential = "echo-test-key"
max_output_tokens = 100
context_window = 10000
output_tokens = 10
max_retries = 0
rpm = 600
tpm = 1000000
{tail}"#
    )
}

/// The upstream's echo of the `Authorization` value it received, the way
/// OpenAI words a rejected key.
fn echo(status: u16) -> weir_tests::Scripted {
    let message = format!("Incorrect API key provided: Bearer {UPSTREAM_KEY}. Your key {UPSTREAM_KEY} is not valid.");
    openai_wire::error(status, "invalid_request_error", Some("invalid_api_key"), &message)
}

/// The same echo inside a 200 stream, before any output.
fn echo_in_stream() -> weir_tests::Scripted {
    let frame = json!({"error": {"message": format!("key {UPSTREAM_KEY} rejected"), "type": "invalid_request_error"}});
    openai_wire::stream(vec![openai_wire::sse_error_frame(&frame)])
}

async fn chat(gateway: &Gateway, stream: bool) -> u16 {
    let body = json!({"model": "chat", "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .json(&body)
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let _ = response.bytes().await;
    status
}

/// Where every secret must not appear: `text`, with what it is for the message.
fn assert_no_secret(text: &str, what: &str) {
    for secret in NEVER_LOGGED.iter().chain([&REDIS_PASSWORD, &POSTGRES_PASSWORD, &UPSTREAM_KEY]) {
        assert!(!text.contains(secret), "{what} holds `{secret}`:\n{text}");
    }
}

/// One run: a gateway on `redis_url` and `postgres_url`, three calls (the
/// third a stream, replayed once) the upstream answers with the key echoed;
/// its whole log once it stopped.
async fn run(redis_url: &str, postgres_url: &str, fleet_extra: &str) -> (String, FakeUpstream) {
    let upstream = FakeUpstream::start().await;
    upstream.push(echo(401));
    upstream.push(echo(500));
    upstream.push(echo_in_stream());
    // The stream's error frame before any output is replayed once without streaming.
    upstream.push(echo(400));
    let tail = format!(
        "[fleet]\nredis_url = \"{}\"\n{fleet_extra}\n[ledger]\npostgres_url = \"{}\"\n",
        redis_url.replace('"', "\\\""),
        postgres_url.replace('\\', "\\\\").replace('"', "\\\"")
    );
    let env = [("RUST_LOG", "debug"), ("ECHO_TEST_KEY", UPSTREAM_KEY)];
    let mut gateway = Gateway::start_with(&config(&upstream.base_url(), &tail), &env, None).await;
    assert_ne!(chat(&gateway, false).await, 200);
    assert_ne!(chat(&gateway, false).await, 200);
    assert_ne!(chat(&gateway, true).await, 200);
    let received = upstream.wait_for_requests(4, Duration::from_secs(30)).await;
    let bearer = format!("Bearer {UPSTREAM_KEY}");
    assert!(received.iter().all(|request| request.header("authorization") == Some(bearer.as_str())));
    gateway.wait_for_stderr("in-band error frame", Duration::from_secs(30)).await;
    assert!(gateway.terminate(Duration::from_secs(30)).is_some(), "the gateway stops on SIGTERM");
    (gateway.stderr(), upstream)
}

/// What the log of every run shows: the echoes scrubbed (three HTTP errors
/// and the stream's frame), and no secret at all.
fn assert_scrubbed(log: &str) {
    assert_no_secret(log, "the gateway's log");
    assert_eq!(log.matches("upstream call failed").count(), 3, "{log}");
    let scrubbed = log
        .lines()
        .filter(|line| line.contains("Incorrect API key provided: <credential>. Your key <credential> is not valid"))
        .count();
    assert_eq!(scrubbed, 3, "every HTTP echo logged scrubbed:\n{log}");
    assert!(log.contains("key <credential> rejected"), "the stream's echo logged scrubbed:\n{log}");
}

/// Waits until the fleet's PostgreSQL table holds `rows` closing rows: the
/// URL form really reached the database, password and all.
async fn until_shipped(server: &PostgresServer, rows: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let count = server.try_integer("SELECT COUNT(*) FROM ledger WHERE kind = 'close'").unwrap_or(0);
        if count >= rows {
            return;
        }
        assert!(Instant::now() < deadline, "only {count} of {rows} closing rows reached PostgreSQL");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Redis's keys under the gateway's prefix: the URL form really reached Redis.
async fn fleet_keys(redis: &RedisServer) -> Vec<String> {
    let mut connection = redis.connection().await;
    redis::cmd("KEYS").arg("weir*").query_async(&mut connection).await.unwrap()
}

#[tokio::test]
async fn passwords_in_userinfo_escaped_or_raw_and_an_echoed_key_never_reach_the_log() {
    let redis = RedisServer::start_with_password(REDIS_PASSWORD).await;
    let postgres = PostgresServer::start_with_password(POSTGRES_PASSWORD);
    let (redis_port, postgres_port) = (redis.port(), postgres.port());

    // Userinfo, percent-escaped: `redis://:rp%40ss…@`, `postgres://weir:pg%20p%40ss…@`.
    let redis_url = format!("redis://:{}@127.0.0.1:{redis_port}/0", percent_escaped(REDIS_PASSWORD));
    let (log, _upstream) = run(&redis_url, &postgres.url(), "").await;
    assert_scrubbed(&log);
    assert!(log.contains(&format!("redis://<credentials>@127.0.0.1:{redis_port}/0")), "{log}");
    until_shipped(&postgres, 3).await;
    assert!(!fleet_keys(&redis).await.is_empty(), "the gateway used Redis");

    // Userinfo with a raw `@` in Redis's password; PostgreSQL's in the query.
    let redis_url = format!("redis://default:{REDIS_PASSWORD}@127.0.0.1:{redis_port}/0");
    let postgres_url = format!(
        "postgresql://127.0.0.1:{postgres_port}/postgres?user=weir&password={}&sslmode=disable",
        percent_escaped(POSTGRES_PASSWORD)
    );
    let (log, _upstream) = run(&redis_url, &postgres_url, "").await;
    assert_scrubbed(&log);
    assert!(log.contains(&format!("redis://<credentials>@127.0.0.1:{redis_port}/0")), "{log}");
    until_shipped(&postgres, 6).await;
}

#[tokio::test]
async fn passwords_in_a_query_a_key_value_string_or_refused_never_reach_the_log() {
    let redis = RedisServer::start_with_password(REDIS_PASSWORD).await;
    let postgres = PostgresServer::start_with_password(POSTGRES_PASSWORD);
    let (redis_port, postgres_port) = (redis.port(), postgres.port());

    // Redis's password as `?pass=` (which the client does not send: Redis
    // refuses every command, and `local` admits alone, logging each refusal);
    // PostgreSQL's as libpq key/value pairs, quoted.
    let redis_url = format!("redis://127.0.0.1:{redis_port}/0?pass={REDIS_PASSWORD}");
    let postgres_kv = format!(
        "host=127.0.0.1 port={postgres_port} user=weir password='{POSTGRES_PASSWORD}' dbname=postgres sslmode=disable"
    );
    let (log, _upstream) = run(&redis_url, &postgres_kv, "on_shared_error = \"local\"\nfleet_size = 1").await;
    assert_scrubbed(&log);
    assert!(log.contains(&format!("redis://127.0.0.1:{redis_port}/0?pass=<redacted>")), "{log}");
    assert!(log.contains("shared state unreachable"), "Redis's refusal is logged:\n{log}");
    until_shipped(&postgres, 3).await;

    // A wrong PostgreSQL password, bare: the shipper's failures are logged.
    let wrong = format!("host=127.0.0.1 port={postgres_port} user=weir password=wrong-Wq4Zr dbname=postgres");
    let redis_url = format!("redis://:{}@127.0.0.1:{redis_port}/0", percent_escaped(REDIS_PASSWORD));
    let (log, _upstream) = run(&redis_url, &wrong, "").await;
    assert_scrubbed(&log);
    assert!(log.contains("password=<redacted>"), "the shipper's failure names the target redacted:\n{log}");
    assert!(log.contains("password authentication failed"), "{log}");
}

#[tokio::test]
async fn a_model_holding_a_newline_and_an_ansi_sequence_stays_inside_its_log_line() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start_with(&config(&upstream.base_url(), ""), &[("RUST_LOG", "debug")], None).await;
    let forged = "chat\n2026-12-05T00:00:00.000000Z  INFO weir_host: forged line\x1b[31m red\r";
    let body = json!({"model": forged, "messages": [{"role": "user", "content": "hi"}]});
    let answer = gateway.post_json("/v1/chat/completions", &body, &[]).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    let log = gateway.wait_for_stderr("call failed", Duration::from_secs(10)).await;
    assert!(!log.trim_end_matches('\n').contains(|c: char| c.is_control() && c != '\n'), "{log:?}");
    let forged_lines: Vec<&str> = log.lines().filter(|line| line.contains("forged line")).collect();
    assert!(!forged_lines.is_empty(), "the model is logged:\n{log}");
    for line in forged_lines {
        assert!(line.contains("call failed"), "the forged text is inside its own event's line: {line}");
        assert!(line.contains("chat\\n2026-12-05") && line.contains("\\x1b[31m red\\r"), "escaped: {line}");
    }
    assert!(upstream.received().is_empty(), "nothing was sent for an unknown model");
}

#[tokio::test]
async fn an_azure_style_endpoint_keeps_its_query_and_never_shows_its_value() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::completion("hello"));
    let endpoint = format!("http://{}/openai/deployments/d?api-version=2024-10-21", upstream.addr());
    let toml = config(&endpoint, "");
    let env = [("RUST_LOG", "debug"), ("ECHO_TEST_KEY", UPSTREAM_KEY)];
    let mut gateway = Gateway::start_with(&toml, &env, None).await;
    let answer = gateway
        .post_json(
            "/v1/chat/completions",
            &json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}),
            &[],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["choices"][0]["message"]["content"], Value::from("hello"));
    let received = upstream.wait_for_requests(1, Duration::from_secs(10)).await;
    assert_eq!(received[0].path, "/openai/deployments/d/chat/completions");
    assert_eq!(received[0].query.as_deref(), Some("api-version=2024-10-21"));

    // `weir providers` shows the endpoint, its query's value hidden.
    let listed = run_cli(&["providers", "--config", gateway.config_path().to_str().unwrap()], &env);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{stdout}{}", String::from_utf8_lossy(&listed.stderr));
    assert!(stdout.contains("/openai/deployments/d?api-version=<redacted>"), "{stdout}");
    assert!(!stdout.contains("2024-10-21"), "{stdout}");
    assert!(gateway.terminate(Duration::from_secs(30)).is_some());
    assert!(!gateway.stderr().contains("2024-10-21"), "{}", gateway.stderr());

    // An endpoint the gateway refuses is named in the refusal without its values.
    let dir = tempfile::tempdir().unwrap();
    let refused = dir.path().join("weir.toml");
    let remote = config("http://10.0.0.7/openai?api-version=2024-10-21&api-key=K3Y-azure", "");
    std::fs::write(&refused, remote).unwrap();
    let output = run_cli(&["serve", "--config", refused.to_str().unwrap(), "--listen", "127.0.0.1:0"], &env);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("plain http") && stderr.contains("?api-version=<redacted>&api-key=<redacted>"), "{stderr}");
    assert!(!stderr.contains("K3Y-azure") && !stderr.contains("2024-10-21"), "{stderr}");
}
