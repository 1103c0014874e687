//! Minted credentials (`[credentials.ID]`) through the real `weir serve`: the host signs a
//! Google service-account assertion (or presents an Entra ID secret, certificate assertion,
//! federated token or managed identity), a fake token endpoint verifies it as Google's and
//! Microsoft's do (`weir_tests::token_endpoints`) and issues tokens that expire, and the fake
//! upstream asserts each call carried `authorization: Bearer <the minted token>`.
//!
//! Covered: Claude on Vertex (`anthropic-vertex`) with the official `anthropic` client (plain,
//! streamed, a streamed tool call); 50 calls arriving while the token is expired making one
//! token request; a token past its life refreshed; a token endpoint that fails, stalls or
//! answers garbage giving a typed error while the next call recovers; a file that does not
//! parse stopping the start; and each Entra ID source.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::anthropic_wire::{
    self, content_block_start, content_block_stop, input_json_delta, message_delta, message_start, message_stop,
    streamed_tool_use_block,
};
use weir_tests::python::run_anthropic_client;
use weir_tests::token_endpoints::{EntraExpect, FakeTokenEndpoint, TestKey, TokenMode};
use weir_tests::{FakeUpstream, Gateway};

const WIRE_ID: &str = "claude-sonnet-4-5@20250929";
const PUBLISHER_PATH: &str = "/v1/projects/weir-test/locations/us-east5/publishers/anthropic";

/// The Vertex endpoint an operator names for the entry, on the fake.
fn vertex_endpoint(upstream: &FakeUpstream) -> String {
    format!("http://{}{PUBLISHER_PATH}", upstream.addr())
}

/// Writes `contents` to `name` under `dir`, and answers its path.
fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// A gateway with one Claude-on-Vertex entry whose credential is `[credentials.vertex]`.
fn vertex_config(upstream: &FakeUpstream, credentials: &str) -> String {
    format!(
        r#"
read_timeout_secs = 10

{credentials}

[[model]]
id = "claude-vertex"
provider = "anthropic-vertex"
wire_id = "{WIRE_ID}"
endpoint = "{endpoint}"
credential = "vertex"
max_output_tokens = 8000
context_window = 200000
output_tokens = 100
max_retries = 0
max_queue = 200
"#,
        endpoint = vertex_endpoint(upstream)
    )
}

fn service_account_table(file: &Path) -> String {
    format!("[credentials.vertex]\nkind = \"google\"\nservice_account_file = \"{}\"\n", file.display())
}

/// A Google token endpoint, a service-account file naming it, and a gateway in front of
/// the fake Vertex upstream. The temp dir holds the key file.
async fn vertex_gateway() -> (FakeTokenEndpoint, FakeUpstream, Gateway, tempfile::TempDir) {
    vertex_gateway_with("").await
}

/// [`vertex_gateway`] with `more` (further entries; `{endpoint}` stands for the fake
/// Vertex endpoint) after the Vertex entry.
async fn vertex_gateway_with(more: &str) -> (FakeTokenEndpoint, FakeUpstream, Gateway, tempfile::TempDir) {
    let key = TestKey::generate();
    let google = FakeTokenEndpoint::google(&key).await;
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "sa.json", &key.service_account_json(&google.token_uri()));
    let upstream = FakeUpstream::start().await;
    let more = more.replace("{endpoint}", &vertex_endpoint(&upstream));
    let config = format!("{}{more}", vertex_config(&upstream, &service_account_table(&file)));
    let gateway = Gateway::start(&config).await;
    (google, upstream, gateway, dir)
}

fn hello() -> Value {
    json!({"model": "claude-vertex", "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]})
}

async fn post(gateway: &Gateway, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn claude_on_vertex_with_a_service_account_through_the_anthropic_client() {
    let (google, upstream, gateway, _dir) = vertex_gateway().await;
    upstream.push(anthropic_wire::text_message("Paris."));
    upstream.push(anthropic_wire::stream(anthropic_wire::sse_text_events(&["One, ", "two."], "end_turn", 9, 4)));
    upstream.push(anthropic_wire::stream(vec![
        message_start(30, 0, 0),
        content_block_start(0, &streamed_tool_use_block("toolu_vrtx", "get_weather")),
        input_json_delta(0, "{\"city\":"),
        input_json_delta(0, " \"Paris\"}"),
        content_block_stop(0),
        message_delta("tool_use", None, 12),
        message_stop(),
    ]));
    let base = gateway.base_url.clone();
    let lines =
        tokio::task::spawn_blocking(move || run_anthropic_client(&base, "claude-vertex", "plain,stream,stream_tools"))
            .await
            .unwrap();
    assert_eq!(lines[0]["text"], "Paris.");
    assert_eq!(lines[1]["text"], "One, two.");
    assert_eq!(lines[1]["stop_reason"], "end_turn");
    assert_eq!(
        lines[2]["tool_calls"],
        json!([{"id": "toolu_vrtx", "name": "get_weather", "input": {"city": "Paris"}}])
    );
    assert_eq!(lines[2]["stop_reason"], "tool_use");

    assert_eq!(google.rejections(), Vec::<String>::new(), "every assertion verified");
    assert_eq!(google.requests(), 1, "one token for three calls");
    let token = google.last_token().unwrap();
    let received = upstream.received();
    assert_eq!(received.len(), 3);
    let methods = [":rawPredict", ":streamRawPredict", ":streamRawPredict"];
    for (request, method) in received.iter().zip(methods) {
        assert_eq!(request.path, format!("{PUBLISHER_PATH}/models/{WIRE_ID}{method}"));
        assert_eq!(request.header("authorization"), Some(bearer(&token).as_str()));
        assert_eq!(request.header("x-api-key"), None);
        let body = request.json();
        assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
        assert!(body.get("model").is_none(), "the model is in the path: {body}");
        assert_eq!(body["stream"].as_bool().unwrap_or(false), method == ":streamRawPredict");
    }
    assert!(!gateway.stderr().contains(&token), "the token is never logged");
}

/// Vertex AI runs Anthropic's web search for Claude 4 and later (Google's "Web search
/// with Anthropic Claude models"): the tool reaches the Vertex entry as the caller wrote
/// it, the answer's own blocks come back in place, and the next turn's search blocks go
/// back; a block of another server tool is refused before anything is sent, and a Claude
/// 3.7 entry on Vertex is not sent the tool (dropped and named).
#[tokio::test]
async fn web_search_on_vertex_for_claude_4_with_its_blocks_both_ways() {
    let older = "\n[[model]]\nid = \"claude-3-vertex\"\nprovider = \"anthropic-vertex\"\n\
                 wire_id = \"claude-3-7-sonnet@20250219\"\nendpoint = \"{endpoint}\"\ncredential = \"vertex\"\n\
                 max_output_tokens = 1000\ncontext_window = 200000\n";
    let (_google, upstream, gateway, _dir) = vertex_gateway_with(older).await;
    let tool = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 2});
    let searched = vec![
        json!({"type": "server_tool_use", "id": "srvtoolu_vrtx_1", "name": "web_search", "input": {"query": "weir"}}),
        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_vrtx_1", "content": [
            {"type": "web_search_result", "url": "https://weir.example/", "title": "Weir",
             "encrypted_content": "Eq", "page_age": null}
        ]}),
        json!({"type": "text", "text": "Weir is a gateway.", "citations": [
            {"type": "web_search_result_location", "url": "https://weir.example/", "title": "Weir",
             "encrypted_index": "Eo", "cited_text": "Weir is a gateway."}
        ]}),
    ];
    let mut usage = anthropic_wire::usage_json(40, 20, 0, 0);
    usage["server_tool_use"] = json!({"web_search_requests": 1});
    upstream.push(anthropic_wire::message(searched.clone(), "end_turn", usage));
    let asked = json!({"model": "claude-vertex", "max_tokens": 100, "tools": [tool],
        "messages": [{"role": "user", "content": "What is Weir?"}]});
    let (status, body) = post_messages(&gateway, &asked).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"], json!(searched), "{body}");
    assert_eq!(body["usage"]["server_tool_use"], json!({"web_search_requests": 1}), "{body}");
    assert_eq!(upstream.received()[0].json()["tools"], json!([tool]));

    // The next turn: the search's blocks go back to Vertex in place.
    upstream.push(anthropic_wire::text_message("You are welcome."));
    let next = |content: Vec<Value>| {
        json!({"model": "claude-vertex", "max_tokens": 100, "messages": [
            {"role": "user", "content": "What is Weir?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "Thanks."}
        ]})
    };
    let (status, body) = post_messages(&gateway, &next(searched.clone())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(upstream.received()[1].json()["messages"][1]["content"], json!(searched));

    // Another server tool's block is not Vertex's to read: refused, nothing sent.
    let execution = json!({"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_2", "content": {}});
    let (status, body) = post_messages(&gateway, &next(vec![searched[0].clone(), execution])).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["weir_category"], "capability_mismatch", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("code_execution_tool_result"), "{body}");
    assert_eq!(upstream.request_count(), 2);

    // Claude 3.7 on Vertex: the tool is dropped and named.
    upstream.push(anthropic_wire::text_message("Hello."));
    let hi = json!({"model": "claude-3-vertex", "max_tokens": 10, "tools": [tool],
        "messages": [{"role": "user", "content": "Hi"}]});
    let response = messages_request(&gateway, &hi).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers().get("x-weir-dropped-tools").unwrap(), "web_search_20250305");
    assert!(upstream.received()[2].json().get("tools").is_none(), "no tool reached Vertex");
}

fn messages_request(gateway: &Gateway, body: &Value) -> reqwest::RequestBuilder {
    reqwest::Client::new().post(gateway.url("/v1/messages")).header("anthropic-version", "2023-06-01").json(body)
}

async fn post_messages(gateway: &Gateway, body: &Value) -> (u16, Value) {
    let response = messages_request(gateway, body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn fifty_calls_arriving_while_the_token_is_expired_make_one_token_request() {
    let (google, upstream, gateway, _dir) = vertex_gateway().await;
    google.set_lifetime(2);
    upstream.push(anthropic_wire::text_message("first"));
    let (status, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(google.requests(), 1);
    // Past the token's life, every call needs a new one; the endpoint answers slowly so
    // all fifty arrive while the one request is in flight.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    google.set_lifetime(3600);
    google.set_delay(Duration::from_millis(500));
    for n in 0..50 {
        upstream.push(anthropic_wire::text_message(&format!("answer {n}")));
    }
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let url = gateway.url("/v1/chat/completions");
            tokio::spawn(async move {
                let response = reqwest::Client::new().post(url).json(&hello()).send().await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            })
        })
        .collect();
    for call in calls {
        let (status, body) = call.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(google.requests(), 2, "fifty waiting calls, one token request");
    assert_eq!(google.rejections(), Vec::<String>::new());
    let fresh = bearer(&google.last_token().unwrap());
    let received = upstream.received();
    assert_eq!(received.len(), 51);
    assert!(received[1..].iter().all(|request| request.header("authorization") == Some(fresh.as_str())));
    assert_ne!(received[0].header("authorization"), Some(fresh.as_str()), "the expired token is not reused");
}

#[tokio::test]
async fn a_failing_stalling_or_garbled_token_endpoint_is_a_typed_error_and_the_next_call_recovers() {
    let (google, upstream, gateway, _dir) = vertex_gateway().await;
    google.set_lifetime(2);
    upstream.push(anthropic_wire::text_message("first"));
    assert_eq!(post(&gateway, &hello()).await.0, 200);
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    for (mode, logged) in [
        (TokenMode::Fail, "the token endpoint answered HTTP 500"),
        (TokenMode::Garbage, "holds no usable token (not JSON)"),
        (TokenMode::Stall, "did not answer within 10 s"),
    ] {
        google.set_mode(mode);
        let (status, body) = post(&gateway, &hello()).await;
        assert_eq!(status, 424, "{mode:?}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("could not obtain an access token"), "{mode:?}: {message}");
        assert!(!message.contains("raw-upstream-text") && !message.contains("127.0.0.1"), "{message}");
        assert_eq!(body["error"]["type"], "credential_missing", "{body}");
        gateway.wait_for_stderr(logged, Duration::from_secs(5)).await;
    }
    gateway.wait_for_stderr("raw-upstream-text", Duration::from_secs(5)).await;
    assert_eq!(upstream.request_count(), 1, "nothing was sent without a token");

    google.set_mode(TokenMode::Issue);
    google.set_lifetime(3600);
    upstream.push(anthropic_wire::text_message("recovered"));
    let (status, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 200, "{body}");
    let token = google.last_token().unwrap();
    assert_eq!(upstream.received()[1].header("authorization"), Some(bearer(&token).as_str()));
    assert_eq!(google.rejections(), Vec::<String>::new());
}

#[tokio::test]
async fn a_token_past_its_life_is_refreshed_before_the_next_call() {
    let (google, upstream, gateway, _dir) = vertex_gateway().await;
    google.set_lifetime(2);
    for text in ["one", "two", "three"] {
        upstream.push(anthropic_wire::text_message(text));
    }
    assert_eq!(post(&gateway, &hello()).await.0, 200);
    assert_eq!(post(&gateway, &hello()).await.0, 200);
    assert_eq!(google.requests(), 1, "fresh: kept");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(post(&gateway, &hello()).await.0, 200);
    assert_eq!(google.requests(), 2, "past its life: minted again");
    let received = upstream.received();
    assert_eq!(received[0].header("authorization"), received[1].header("authorization"));
    assert_eq!(received[2].header("authorization"), Some(bearer("ya29.test-2").as_str()));
}

#[tokio::test]
async fn an_authorized_user_file_refreshes_with_its_refresh_token() {
    let key = TestKey::generate();
    let google = FakeTokenEndpoint::google(&key).await;
    let dir = tempfile::tempdir().unwrap();
    let adc = json!({
        "type": "authorized_user",
        "client_id": "test-client.apps.googleusercontent.com",
        "client_secret": "test-client-secret",
        "refresh_token": "test-refresh-token",
        "token_uri": google.token_uri(),
    });
    let file = write(dir.path(), "adc.json", &adc.to_string());
    let upstream = FakeUpstream::start().await;
    let table = format!("[credentials.vertex]\nkind = \"google\"\nauthorized_user_file = \"{}\"\n", file.display());
    let gateway = Gateway::start(&vertex_config(&upstream, &table)).await;
    upstream.push(anthropic_wire::text_message("ok"));
    let (status, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(google.grants(), vec!["refresh_token"]);
    assert_eq!(google.rejections(), Vec::<String>::new());
    assert_eq!(upstream.received()[0].header("authorization"), Some("Bearer ya29.test-1"));
}

#[tokio::test]
async fn the_metadata_server_is_asked_with_its_flavor_header_and_the_scope() {
    // GCE's metadata server, faked: `GCE_METADATA_HOST` points at it, as for Google's libraries.
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, Option<String>)>::new()));
    let seen = std::sync::Arc::clone(&asked);
    let router = axum::Router::new().route(
        "/computeMetadata/v1/instance/service-accounts/default/token",
        axum::routing::get(move |headers: axum::http::HeaderMap, uri: axum::http::Uri| {
            let seen = std::sync::Arc::clone(&seen);
            async move {
                let flavor = headers.get("metadata-flavor").and_then(|v| v.to_str().ok()).map(str::to_owned);
                seen.lock().unwrap().push((uri.query().unwrap_or_default().to_owned(), flavor));
                axum::Json(json!({"access_token": "ya29.metadata", "expires_in": 3599, "token_type": "Bearer"}))
            }
        }),
    );
    let metadata = weir_tests::serve_router(router).await;
    let host = metadata.trim_start_matches("http://").to_owned();
    let upstream = FakeUpstream::start().await;
    let table = "[credentials.vertex]\nkind = \"google\"\nmetadata_server = true\n";
    let gateway = Gateway::start_with(&vertex_config(&upstream, table), &[("GCE_METADATA_HOST", &host)], None).await;
    upstream.push(anthropic_wire::text_message("ok"));
    let (status, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(upstream.received()[0].header("authorization"), Some("Bearer ya29.metadata"));
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].0.contains("scopes=https%3A%2F%2Fwww.googleapis.com%2Fauth%2Fcloud-platform"), "{asked:?}");
    assert_eq!(asked[0].1.as_deref(), Some("Google"));
}

#[tokio::test]
async fn a_key_file_that_does_not_parse_stops_the_start_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let key = TestKey::generate();
    let cases = [
        ("missing.json", None, "cannot read"),
        ("broken.json", Some("{\"type\": \"service_account\", \"private_key\": "), "is not a JSON object (line 1"),
        ("user.json", Some("{\"type\": \"authorized_user\"}"), "is a `authorized_user` file; `service_account_file`"),
        ("no-email.json", Some(&*json!({"type": "service_account", "private_key": key.private_pem, "token_uri": "http://127.0.0.1:1/token"}).to_string()), "has no `client_email` string"),
        ("bad-key.json", Some(&*key.service_account_json("http://127.0.0.1:1/token").replace("MII", "XXX")), "private key"),
    ];
    for (name, contents, expected) in cases {
        let path = dir.path().join(name);
        if let Some(contents) = contents {
            std::fs::write(&path, contents).unwrap();
        }
        let config = format!(
            "{}\n[[model]]\nid = \"m\"\nprovider = \"anthropic-vertex\"\nwire_id = \"{WIRE_ID}\"\nendpoint = \"https://us-east5-aiplatform.googleapis.com/v1\"\ncredential = \"vertex\"\nmax_output_tokens = 10\ncontext_window = 100\n",
            service_account_table(&path)
        );
        let config_path = write(dir.path(), "weir.toml", &config);
        let output = weir_tests::run_cli(&["providers", "--config", config_path.to_str().unwrap()], &[]);
        assert!(!output.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("[credentials.vertex]") && stderr.contains(expected), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!stderr.contains("MII") || !stderr.contains("PRIVATE KEY"), "no key in the message: {stderr}");
    }
}

/// An Entra ID credential on the `openai` component's entry: what Azure OpenAI with Entra
/// ID is, short of the Azure URL shape (helper C's). `table` is the credential's source.
async fn entra_call(table: &str, env: &[(&str, &str)], entra: &FakeTokenEndpoint) -> (FakeUpstream, Gateway) {
    let upstream = FakeUpstream::start().await;
    let config = format!(
        r#"
[credentials.azure]
kind = "entra"
{table}

[[model]]
id = "gpt-azure"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{endpoint}"
credential = "azure"
max_output_tokens = 1000
context_window = 100000
max_retries = 0
"#,
        endpoint = upstream.base_url()
    );
    let gateway = Gateway::start_with(&config, env, None).await;
    let body = json!({"model": "gpt-azure", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]});
    let (status, text) = post(&gateway, &body).await;
    assert_eq!(status, 200, "{text}\n{}", gateway.stderr());
    assert_eq!(entra.rejections(), Vec::<String>::new());
    let token = entra.last_token().unwrap();
    assert_eq!(upstream.received()[0].header("authorization"), Some(bearer(&token).as_str()));
    (upstream, gateway)
}

fn entra_expect() -> EntraExpect {
    EntraExpect {
        tenant: "tenant-1".into(),
        client_id: "client-1".into(),
        client_secret: "azure-secret-value".into(),
        federated_token: "federated.jwt.from-kubernetes".into(),
        identity_header: "identity-header-value".into(),
    }
}

#[tokio::test]
async fn entra_id_client_secret_certificate_workload_and_managed_identity_each_mint_a_token() {
    let key = TestKey::generate();
    let entra = FakeTokenEndpoint::entra(&key, entra_expect()).await;
    let authority = format!("authority_host = \"{}\"", entra.base_url);
    let dir = tempfile::tempdir().unwrap();

    // Client secret: read from the secret store under the id the table names.
    let table = format!(
        "tenant_id = \"tenant-1\"\nclient_id = \"client-1\"\nclient_secret = \"azure-client-secret\"\n{authority}"
    );
    let (_upstream, gateway) = entra_call(&table, &[("AZURE_CLIENT_SECRET", "azure-secret-value")], &entra).await;
    assert!(!gateway.stderr().contains("azure-secret-value"));

    // Certificate: an RS256 client assertion with the certificate's thumbprint.
    let certificate = write(dir.path(), "cert.pem", &key.certificate_file());
    let table = format!(
        "tenant_id = \"tenant-1\"\nclient_id = \"client-1\"\ncertificate_file = \"{}\"\n{authority}",
        certificate.display()
    );
    entra_call(&table, &[], &entra).await;

    // Workload identity: the federated token file is the assertion (AZURE_FEDERATED_TOKEN_FILE).
    let federated = write(dir.path(), "token", "federated.jwt.from-kubernetes\n");
    let table = format!("tenant_id = \"tenant-1\"\nclient_id = \"client-1\"\nworkload_identity = true\n{authority}");
    entra_call(&table, &[("AZURE_FEDERATED_TOKEN_FILE", federated.to_str().unwrap())], &entra).await;

    // Managed identity: IDENTITY_ENDPOINT with its header.
    let endpoint = format!("{}/msi", entra.base_url);
    let env = [("IDENTITY_ENDPOINT", endpoint.as_str()), ("IDENTITY_HEADER", "identity-header-value")];
    entra_call("managed_identity = true", &env, &entra).await;

    assert_eq!(entra.grants(), vec!["client_secret", "client_assertion", "federated", "managed_identity"]);
}

#[tokio::test]
async fn a_wrong_client_secret_is_refused_upstream_of_the_model_and_the_secret_never_logged() {
    let key = TestKey::generate();
    let entra = FakeTokenEndpoint::entra(&key, entra_expect()).await;
    let upstream = FakeUpstream::start().await;
    let config = format!(
        "[credentials.azure]\nkind = \"entra\"\ntenant_id = \"tenant-1\"\nclient_id = \"client-1\"\nclient_secret = \"azure-client-secret\"\nauthority_host = \"{}\"\n\n[[model]]\nid = \"gpt-azure\"\nprovider = \"openai\"\nwire_id = \"gpt-4.1\"\nendpoint = \"{}\"\ncredential = \"azure\"\nmax_output_tokens = 1000\ncontext_window = 100000\nmax_retries = 0\n",
        entra.base_url,
        upstream.base_url()
    );
    let gateway = Gateway::start_with(&config, &[("AZURE_CLIENT_SECRET", "a-wrong-secret-value")], None).await;
    let body = json!({"model": "gpt-azure", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]});
    let (status, text) = post(&gateway, &body).await;
    assert_eq!(status, 424, "{text}");
    assert!(text.contains("could not obtain an access token"), "{text}");
    assert_eq!(upstream.request_count(), 0);
    let log = gateway.wait_for_stderr("the token endpoint answered HTTP 400", Duration::from_secs(5)).await;
    assert!(!log.contains("a-wrong-secret-value"), "the secret is never logged");

    // An unset client secret is its own typed error, naming where it was looked for.
    drop(gateway);
    let gateway = Gateway::start(&config).await;
    let (status, _) = post(&gateway, &body).await;
    assert_eq!(status, 424);
    let expected = "the client secret `azure-client-secret` is not set (environment variable AZURE_CLIENT_SECRET)";
    gateway.wait_for_stderr(expected, Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_minted_token_never_goes_to_a_components_default_endpoint_off_its_platform() {
    let dir = tempfile::tempdir().unwrap();
    // The `openai` component's default endpoint is api.openai.com: no Google token goes there.
    let config = "[credentials.vertex]\nkind = \"google\"\nmetadata_server = true\n\n[[model]]\nid = \"gpt\"\n\
                  provider = \"openai\"\nwire_id = \"gpt-4.1\"\ncredential = \"vertex\"\nmax_output_tokens = 10\n\
                  context_window = 100\n";
    let path = write(dir.path(), "weir.toml", config);
    let output = weir_tests::run_cli(&["providers", "--config", path.to_str().unwrap()], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("would send a minted google token to host `api.openai.com`")
            && stderr.contains("`googleapis.com`"),
        "{stderr}"
    );
}

#[test]
fn a_metadata_host_that_is_not_a_host_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[credentials.vertex]\nkind = \"google\"\nmetadata_server = true\n\n[[model]]\nid = \"m\"\n\
         provider = \"anthropic-vertex\"\nwire_id = \"{WIRE_ID}\"\n\
         endpoint = \"https://us-east5-aiplatform.googleapis.com/v1\"\ncredential = \"vertex\"\n\
         max_output_tokens = 10\ncontext_window = 100\n"
    );
    let path = write(dir.path(), "weir.toml", &config);
    let output =
        weir_tests::run_cli(&["providers", "--config", path.to_str().unwrap()], &[("GCE_METADATA_HOST", "not a host")]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("[credentials.vertex]: GCE_METADATA_HOST `not a host` is not a host"), "{stderr}");
}

/// Azure OpenAI with Microsoft Entra ID (issue 47, item 3): the `azure-openai`
/// component declares the `api-key` header, and an entry whose credential is an
/// Entra table sends the minted token as `authorization: Bearer` instead — no
/// `api-key` header at all — to the deployment URL with its `api-version`.
#[tokio::test]
async fn azure_openai_with_entra_id_sends_the_minted_token_and_no_api_key() {
    let key = TestKey::generate();
    let entra = FakeTokenEndpoint::entra(&key, entra_expect()).await;
    let upstream = FakeUpstream::start().await;
    upstream.push(weir_tests::openai_wire::completion("Hello from Azure."));
    let config = format!(
        "[credentials.azure]\nkind = \"entra\"\ntenant_id = \"tenant-1\"\nclient_id = \"client-1\"\n\
         client_secret = \"azure-client-secret\"\nauthority_host = \"{authority}\"\n\n\
         [[model]]\nid = \"gpt-azure\"\nprovider = \"azure-openai\"\nwire_id = \"gpt-41-prod\"\n\
         endpoint = \"http://{addr}\"\ncredential = \"azure\"\nmax_output_tokens = 1000\n\
         context_window = 100000\nmax_retries = 0\n",
        authority = entra.base_url,
        addr = upstream.addr(),
    );
    let gateway = Gateway::start_with(&config, &[("AZURE_CLIENT_SECRET", "azure-secret-value")], None).await;
    let body = json!({"model": "gpt-azure", "max_tokens": 20, "messages": [{"role": "user", "content": "Hi"}]});
    let (status, text) = post(&gateway, &body).await;
    assert_eq!(status, 200, "{text}\n{}", gateway.stderr());
    let request = &upstream.received()[0];
    assert_eq!(request.path, "/openai/deployments/gpt-41-prod/chat/completions");
    assert!(request.query.as_deref().unwrap_or_default().contains("api-version="), "{:?}", request.query);
    assert_eq!(request.header("authorization"), Some(bearer(&entra.last_token().unwrap()).as_str()));
    assert_eq!(request.header("api-key"), None, "the minted token replaces the api-key shape");
    assert_eq!(entra.grants(), vec!["client_secret"]);
}
