//! The three AWS surfaces through the real gateway, in front of the fake Bedrock
//! (`weir_tests::bedrock_wire`), which verifies every SigV4 signature with its own
//! implementation: `anthropic-bedrock` (InvokeModel and its event stream),
//! `anthropic-bedrock-mantle` (the Messages API, with the host's retention binding and
//! compliance envelope) and `bedrock-converse` (Converse and ConverseStream).
//!
//! The gateway gets its AWS identity the way a deployment does: from AWS's own variables
//! through `aws-config`'s default chain (the harness strips the machine's AWS variables and
//! profile files), or, in process, from a secret store that holds the pair.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::{Value, json};
use weir_host::transport::{Secret, SecretStore};
use weir_host::types::Conversation;
use weir_host::{Category, ChatRequest, Config, Weir};
use weir_tests::bedrock_wire::{
    self, ACCESS_KEY_ID, Credentials, FakeBedrock, MODEL_ID, Operation, REGION, SECRET_ACCESS_KEY, SESSION_TOKEN,
    TEMPORARY_ACCESS_KEY_ID, Verifier,
};
use weir_tests::{Gateway, run_cli};

const MANTLE_ID: &str = "anthropic.claude-opus-5";
const NOVA_ID: &str = "us.amazon.nova-pro-v1:0";

/// One entry per surface (plus a data-sharing-only Mantle model), all on the fake; `extra`
/// goes before the models (top-level keys and tables).
fn config(bedrock: &FakeBedrock, extra: &str) -> String {
    let base = bedrock.base_url();
    let entry = |id: &str, provider: &str, wire: &str, endpoint: &str, more: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nwire_id = \"{wire}\"\nendpoint = \"{endpoint}\"\n\
             max_output_tokens = 8000\ncontext_window = 200000\noutput_tokens = 100\nmax_retries = 0\n{more}\n"
        )
    };
    // Mantle binds retention (a `requires_lax` entry needs that); projects only when `extra` sets them.
    let retention = if extra.contains("[retention.") { "" } else { UNBOUND };
    [
        format!("read_timeout_secs = 5\n{extra}\n{retention}\n"),
        entry("claude-bedrock", "anthropic-bedrock", MODEL_ID, &base, ""),
        entry("claude-mantle", "anthropic-bedrock-mantle", MANTLE_ID, &format!("{base}/anthropic"), ""),
        entry(
            "fable-mantle",
            "anthropic-bedrock-mantle",
            "anthropic.fable-5",
            &format!("{base}/anthropic"),
            "requires_lax = true",
        ),
        entry("nova", "bedrock-converse", NOVA_ID, &base, ""),
    ]
    .concat()
}

const UNBOUND: &str = "[retention.anthropic-bedrock-mantle]\nheader = \"anthropic-workspace-id\"\n";

const PROJECTS: &str = "[retention.anthropic-bedrock-mantle]\nheader = \"anthropic-workspace-id\"\n\
                        strict_project = \"proj-strict\"\nlax_project = \"proj-lax\"\n";

fn aws_env() -> Vec<(&'static str, &'static str)> {
    vec![("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY), ("AWS_REGION", REGION)]
}

async fn gateway(bedrock: &FakeBedrock, extra: &str, env: &[(&str, &str)]) -> Gateway {
    Gateway::start_with(&config(bedrock, extra), env, None).await
}

async fn post(gateway: &Gateway, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {body}"))
}

fn ask(model: &str) -> Value {
    json!({"model": model, "messages": [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Hello"}
    ]})
}

/// The `data:` payloads of an SSE body, `[DONE]` excluded.
fn sse_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

fn streamed_text(events: &[Value]) -> String {
    events.iter().filter_map(|event| event["choices"][0]["delta"]["content"].as_str()).collect()
}

#[tokio::test]
async fn invoke_model_is_signed_for_the_region_and_speaks_the_bedrock_body() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(bedrock_wire::invoke_text("Hello from Bedrock"));
    let gateway = gateway(&bedrock, "prompt_cache = \"shared\"", &aws_env()).await;

    let (status, body) = post(&gateway, &ask("claude-bedrock")).await;
    assert_eq!(status, 200, "{body}");
    let answer = parse(&body);
    assert_eq!(answer["choices"][0]["message"]["content"], "Hello from Bedrock");
    assert_eq!(answer["model"], "claude-bedrock");

    let request = &bedrock.received()[0];
    assert!(request.signed_ok(), "{:?}", request.verdict);
    assert_eq!(request.operation, Operation::InvokeModel);
    assert_eq!(request.model_id.as_deref(), Some(MODEL_ID));
    let sent = request.json();
    assert_eq!(sent["anthropic_version"], "bedrock-2023-05-31");
    assert_eq!(sent["max_tokens"], 100);
    assert!(sent.get("model").is_none() && sent.get("stream").is_none(), "{sent}");
    assert_eq!(sent["system"][0]["cache_control"]["type"], "ephemeral", "system prefix cached (shared): {sent}");
    assert!(request.header("authorization").unwrap().contains(&format!("/{REGION}/bedrock/aws4_request")));
}

#[tokio::test]
async fn the_event_stream_is_decoded_across_split_frames() {
    let bedrock = FakeBedrock::start().await;
    let frames = bedrock_wire::claude_text_stream_frames(&["Hel", "lo, ", "Bedrock"], "end_turn", 12, 5);
    bedrock.push(bedrock_wire::event_stream_split(frames, 7));
    let gateway = gateway(&bedrock, "", &aws_env()).await;

    let mut request = ask("claude-bedrock");
    request["stream"] = json!(true);
    request["stream_options"] = json!({"include_usage": true});
    let (status, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    assert_eq!(streamed_text(&events), "Hello, Bedrock");
    assert!(events.iter().any(|event| event["choices"][0]["finish_reason"] == "stop"), "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let received = bedrock.received();
    assert_eq!(received[0].operation, Operation::InvokeModelWithResponseStream);
    assert!(received[0].signed_ok());
}

#[tokio::test]
async fn a_corrupted_frame_crc_is_a_typed_failure_and_the_gateway_stays_healthy() {
    let bedrock = FakeBedrock::start().await;
    let mut frames = bedrock_wire::claude_text_stream_frames(&["never seen"], "end_turn", 3, 2);
    frames[0] = bedrock_wire::corrupt_message_crc(&frames[0]);
    bedrock.push(bedrock_wire::event_stream(frames));
    let gateway = gateway(&bedrock, "", &aws_env()).await;

    let mut request = ask("claude-bedrock");
    request["stream"] = json!(true);
    let (status, body) = post(&gateway, &request).await;
    // A broken frame is a broken transport (like a reset): typed, and retryable when the
    // entry allows retries (this one allows none).
    assert_eq!(status, 502, "{body}");
    let error = parse(&body);
    assert_eq!(error["error"]["code"], "upstream_unavailable", "{body}");
    // The caller gets the category's fixed sentence; the log has the frame's fault.
    assert!(error["error"]["message"].as_str().unwrap().contains("connection to the provider failed"), "{body}");
    gateway.wait_for_stderr("checksum", std::time::Duration::from_secs(5)).await;
    assert!(!body.contains("never seen"), "nothing from the corrupted frame reaches the caller: {body}");

    bedrock.push(bedrock_wire::invoke_text("still serving"));
    let (status, body) = post(&gateway, &ask("claude-bedrock")).await;
    assert_eq!((status, parse(&body)["choices"][0]["message"]["content"].clone()), (200, json!("still serving")));
}

#[tokio::test]
async fn a_wrong_region_or_key_is_rejected_like_aws_and_answers_authentication_failed() {
    let bedrock = FakeBedrock::start().await;
    let wrong_region = [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_REGION", "eu-west-1"),
    ];
    let wrong_key =
        [("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", "not-the-secret"), ("AWS_REGION", REGION)];
    for (case, env) in [("region", &wrong_region), ("key", &wrong_key)] {
        let gateway = gateway(&bedrock, "", env).await;
        let (status, body) = post(&gateway, &ask("claude-bedrock")).await;
        assert_eq!(status, 424, "{case}: {body}");
        assert_eq!(parse(&body)["error"]["code"], "authentication_failed", "{case}: {body}");
        assert!(!body.contains("signature"), "{case}: AWS's words stay in the log: {body}");
    }
    let received = bedrock.received();
    assert_eq!(received.len(), 2);
    assert!(received.iter().all(|request| request.verdict.is_err()), "both were refused by the verifier");
}

#[tokio::test]
async fn temporary_credentials_send_and_sign_their_session_token() {
    let bedrock = FakeBedrock::start_with(Verifier::new(Credentials::fake_temporary(), REGION)).await;
    bedrock.push(bedrock_wire::converse_text("from a role"));
    let env = [
        ("AWS_ACCESS_KEY_ID", TEMPORARY_ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_SESSION_TOKEN", SESSION_TOKEN),
        ("AWS_REGION", REGION),
    ];
    let gateway = gateway(&bedrock, "", &env).await;
    let (status, body) = post(&gateway, &ask("nova")).await;
    assert_eq!(status, 200, "{body}");
    let request = &bedrock.received()[0];
    assert!(request.signed_ok(), "{:?}", request.verdict);
    assert_eq!(request.header("x-amz-security-token"), Some(SESSION_TOKEN));
}

#[tokio::test]
async fn no_region_fails_before_any_request_and_says_so() {
    let bedrock = FakeBedrock::start().await;
    let env = [("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)];
    let gateway = gateway(&bedrock, "", &env).await;
    let (status, body) = post(&gateway, &ask("nova")).await;
    assert_eq!(status, 424, "{body}");
    let error = parse(&body);
    assert_eq!(error["error"]["code"], "credential_missing", "{body}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("no AWS region") && !message.contains("AWS_REGION"), "{body}");
    // Where it looked is the operator's to read, in the log.
    gateway.wait_for_stderr("no region is chosen", std::time::Duration::from_secs(5)).await;
    assert!(bedrock.received().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn converse_renders_cache_points_and_maps_cache_usage() {
    let bedrock = FakeBedrock::start().await;
    let usage = bedrock_wire::converse_usage(30, 8, 1024, 12);
    let content = vec![json!({"text": "Bonjour"})];
    bedrock.push(bedrock_wire::converse(&bedrock_wire::converse_response_body(content, "end_turn", usage)));
    let gateway = gateway(&bedrock, "prompt_cache = \"shared\"", &aws_env()).await;

    let (status, body) = post(&gateway, &ask("nova")).await;
    assert_eq!(status, 200, "{body}");
    let answer = parse(&body);
    assert_eq!(answer["choices"][0]["message"]["content"], "Bonjour");
    assert_eq!(answer["usage"]["prompt_tokens"], 30 + 1024 + 12, "{answer}");
    assert_eq!(answer["usage"]["prompt_tokens_details"]["cached_tokens"], 1024, "{answer}");

    let request = &bedrock.received()[0];
    assert!(request.signed_ok(), "{:?}", request.verdict);
    assert_eq!(request.operation, Operation::Converse);
    assert_eq!(request.model_id.as_deref(), Some(NOVA_ID));
    let sent = request.json();
    assert_eq!(sent["system"], json!([{"text": "Be terse."}, {"cachePoint": {"type": "default"}}]), "{sent}");
    assert_eq!(sent["inferenceConfig"]["maxTokens"], 100);
}

#[tokio::test]
async fn converse_stream_carries_text_and_a_tool_call() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(bedrock_wire::event_stream_split(bedrock_wire::converse_stream_frames(), 5));
    let gateway = gateway(&bedrock, "", &aws_env()).await;

    let mut request = ask("nova");
    request["stream"] = json!(true);
    request["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let (status, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    let events = sse_events(&body);
    assert_eq!(streamed_text(&events), "Let me check the weather.");
    let arguments: String = events
        .iter()
        .filter_map(|event| event["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&arguments).unwrap(), json!({"city": "Paris"}));
    assert!(events.iter().any(|event| event["choices"][0]["finish_reason"] == "tool_calls"), "{body}");
    assert_eq!(bedrock.received()[0].operation, Operation::ConverseStream);
    assert_eq!(bedrock.received()[0].json()["toolConfig"]["tools"][0]["toolSpec"]["name"], "get_weather");
}

#[tokio::test]
async fn mantle_binds_the_strict_project_and_signs_the_header() {
    let bedrock = FakeBedrock::start().await;
    let message = bedrock_wire::claude_message_body(
        vec![json!({"type": "text", "text": "from Mantle"})],
        "end_turn",
        weir_tests::anthropic_wire::usage_json(10, 3, 0, 0),
    );
    bedrock.push(bedrock_wire::mantle_message(&message));
    let gateway = gateway(&bedrock, PROJECTS, &aws_env()).await;

    let (status, body) = post(&gateway, &ask("claude-mantle")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["choices"][0]["message"]["content"], "from Mantle");
    let request = &bedrock.received()[0];
    assert!(request.signed_ok(), "{:?}", request.verdict);
    assert_eq!(request.operation, Operation::MantleMessages);
    assert_eq!(request.header("anthropic-workspace-id"), Some("proj-strict"));
    assert!(request.header("authorization").unwrap().contains("anthropic-workspace-id"), "the binding is signed");
    assert_eq!(request.json()["model"], MANTLE_ID);
}

/// A Mantle call is recorded and stamped under Bedrock's provider key, as the runtime seed
/// keeps Mantle's provider Bedrock's: the ledger's per-provider view keeps Bedrock whole,
/// and the entry id tells the two surfaces apart.
#[tokio::test]
async fn a_mantle_call_is_recorded_under_bedrock_and_told_apart_by_its_entry() {
    let bedrock = FakeBedrock::start().await;
    let usage = weir_tests::anthropic_wire::usage_json(10, 3, 0, 0);
    let message = bedrock_wire::claude_message_body(vec![json!({"type": "text", "text": "ok"})], "end_turn", usage);
    bedrock.push(bedrock_wire::invoke_message(&message));
    bedrock.push(bedrock_wire::mantle_message(&message));
    let text = format!("{}\n[ledger]\npath = \"ledger.db\"\n", config(&bedrock, PROJECTS));
    let gateway = Gateway::start_with(&text, &aws_env(), None).await;
    for model in ["claude-bedrock", "claude-mantle"] {
        let response =
            reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&ask(model)).send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200, "{model}");
        assert_eq!(response.headers()["x-weir-provider"], "anthropic-bedrock", "{model}");
    }
    let operations: Vec<Operation> = bedrock.received().iter().map(|request| request.operation).collect();
    assert_eq!(operations, [Operation::InvokeModel, Operation::MantleMessages], "each surface's own wire");

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let recorded: Vec<(&str, &str)> = records
        .iter()
        .map(|record| (record["model"].as_str().unwrap(), record["provider"].as_str().unwrap()))
        .collect();
    assert_eq!(recorded, [("claude-bedrock", "anthropic-bedrock"), ("claude-mantle", "anthropic-bedrock")]);
}

#[tokio::test]
async fn a_data_sharing_model_is_refused_before_any_request_under_the_default_envelope() {
    let bedrock = FakeBedrock::start().await;
    let gateway = gateway(&bedrock, PROJECTS, &aws_env()).await;
    let (status, body) = post(&gateway, &ask("fable-mantle")).await;
    assert_eq!(status, 403, "{body}");
    let error = parse(&body);
    assert_eq!(error["error"]["code"], "compliance_refused", "{body}");
    assert!(error["error"]["message"].as_str().unwrap().contains("compliance envelope"), "{body}");
    assert!(bedrock.received().is_empty(), "no request existed");
}

#[tokio::test]
async fn a_permitting_envelope_sends_data_sharing_traffic_to_the_lax_project_only() {
    let bedrock = FakeBedrock::start().await;
    let message = bedrock_wire::claude_message_body(
        vec![json!({"type": "text", "text": "shared"})],
        "end_turn",
        weir_tests::anthropic_wire::usage_json(10, 3, 0, 0),
    );
    bedrock.push(bedrock_wire::mantle_message(&message));
    bedrock.push(bedrock_wire::mantle_message(&message));
    let extra = format!("[compliance]\nallow_data_sharing = true\n{PROJECTS}");
    let gateway = gateway(&bedrock, &extra, &aws_env()).await;

    assert_eq!(post(&gateway, &ask("fable-mantle")).await.0, 200);
    assert_eq!(post(&gateway, &ask("claude-mantle")).await.0, 200);
    let received = bedrock.received();
    assert_eq!(received[0].header("anthropic-workspace-id"), Some("proj-lax"));
    assert_eq!(received[1].header("anthropic-workspace-id"), Some("proj-strict"), "ordinary traffic stays strict");
}

#[tokio::test]
async fn weir_providers_shows_the_resolved_region_and_host_next_to_configured() {
    let env = [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_REGION", "eu-central-1"),
    ];
    let output = run_cli(&["providers", "--resolve"], &env);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("host: bedrock-runtime.eu-central-1.amazonaws.com"), "{text}");
    assert!(text.contains("host: bedrock-mantle.eu-central-1.api.aws"), "{text}");
    assert!(text.contains("region: eu-central-1"), "{text}");
    let converse = text.lines().find(|line| line.starts_with("bedrock-converse")).unwrap();
    assert!(converse.contains(" yes "), "configured from the default chain: {converse}");

    let output = run_cli(&["providers", "--resolve"], &[]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("region: unresolved: no region chosen"), "{text}");
    let converse = text.lines().find(|line| line.starts_with("bedrock-converse")).unwrap();
    assert!(converse.contains(" no "), "no credentials anywhere: {converse}");
}

/// A deployment's secret store, holding the AWS pair and the region.
#[derive(Debug)]
struct Vault;

impl SecretStore for Vault {
    fn get(&self, id: &str) -> Option<Secret> {
        (id == "aws-region").then(|| Secret::new(REGION))
    }
    fn location(&self, id: &str) -> String {
        format!("vault `{id}`")
    }
    fn get_pair(&self, id: &str) -> Option<(String, Secret)> {
        (id == "aws-access-key-id").then(|| (ACCESS_KEY_ID.to_owned(), Secret::new(SECRET_ACCESS_KEY)))
    }
}

#[tokio::test]
async fn the_secret_store_is_asked_before_the_default_chain() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(bedrock_wire::converse_text("from the vault"));
    let config = Config::from_toml(&config(&bedrock, ""), "test").unwrap();
    let weir = Weir::builder().config(config).cache_dir(None).secret_store(Arc::new(Vault)).build().unwrap();
    let answer = weir.chat(ChatRequest::new("nova", Conversation::user("Hello"))).await.unwrap();
    assert_eq!(answer.text(), "from the vault");
    let request = &bedrock.received()[0];
    assert!(request.signed_ok(), "{:?}", request.verdict);
    assert!(request.header("authorization").unwrap().contains(ACCESS_KEY_ID));
}

/// The embedded catalog declares each model's capabilities: Nova Micro reads text only,
/// so an image to it is refused `capability_mismatch` with nothing sent, although its
/// component (`bedrock-converse`) carries images; the same image to Nova Pro goes out. The
/// embedded entries as shipped, each Nova entry only pointed at the fake.
#[tokio::test]
async fn an_image_to_the_embedded_text_only_nova_micro_is_refused_before_anything_is_sent() {
    let bedrock = FakeBedrock::start().await;
    let mut catalog = weir_host::catalog::EMBEDDED_DEFAULT.to_owned();
    for wire_id in ["us.amazon.nova-micro-v1:0", "us.amazon.nova-pro-v1:0"] {
        let line = format!("wire_id = \"{wire_id}\"\n");
        assert!(catalog.contains(&line), "{wire_id} is in the embedded catalog");
        catalog = catalog.replace(&line, &format!("{line}endpoint = \"{}\"\n", bedrock.base_url()));
    }
    let text = format!("{catalog}\n[ledger]\npath = \"ledger.db\"\n");
    let gateway = Gateway::start_with(&text, &aws_env(), None).await;
    const PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let image = |model: &str| {
        json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}
        ]}]})
    };

    let (status, body) = post(&gateway, &image("nova-micro")).await;
    assert_eq!(status, 400, "{body}");
    let error = &parse(&body)["error"];
    assert_eq!(error["code"], "capability_mismatch", "{body}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("vision") && message.contains("nova-micro"), "{message}");
    assert!(bedrock.received().is_empty(), "nothing was sent");

    bedrock.push(bedrock_wire::converse_text("A pixel."));
    let (status, body) = post(&gateway, &image("nova-pro")).await;
    assert_eq!(status, 200, "{body}");
    let sent = bedrock.received()[0].json();
    assert!(
        sent["messages"][0]["content"].as_array().unwrap().iter().any(|block| block.get("image").is_some()),
        "{sent}"
    );
}

#[tokio::test]
async fn cache_multipliers_price_billable_input() {
    let bedrock = FakeBedrock::start().await;
    let usage = weir_tests::anthropic_wire::usage_json(100, 10, 200, 1000);
    let message = bedrock_wire::claude_message_body(vec![json!({"type": "text", "text": "ok"})], "end_turn", usage);
    bedrock.push(bedrock_wire::invoke_message(&message));
    let text = config(&bedrock, "").replace(
        "provider = \"anthropic-bedrock\"\n",
        "provider = \"anthropic-bedrock\"\ncache_read_multiplier = 0.1\ncache_write_multiplier = 1.25\n",
    );
    let config = Config::from_toml(&text, "test").unwrap();
    let weir = Weir::builder().config(config).cache_dir(None).secret_store(Arc::new(Vault)).build().unwrap();
    let answer = weir.chat(ChatRequest::new("claude-bedrock", Conversation::user("Hello"))).await.unwrap();
    let usage = answer.usage.unwrap();
    assert_eq!((usage.input, usage.cache_read, usage.cache_write), (100, 1000, 200), "{usage:?}");
    let billable = answer.billable_input().unwrap();
    assert!((billable - (100.0 + 0.1 * 1000.0 + 1.25 * 200.0)).abs() < 1e-9, "{billable}");
    let error = weir.chat(ChatRequest::new("fable-mantle", Conversation::user("Hello"))).await.unwrap_err();
    assert_eq!(error.category(), Category::ComplianceRefused);
}

#[tokio::test]
async fn aws_error_types_answer_their_categories() {
    let bedrock = FakeBedrock::start().await;
    let gateway = gateway(&bedrock, "", &aws_env()).await;
    let cases = [
        (bedrock_wire::throttling(), 429, "rate_limited"),
        (bedrock_wire::access_denied(), 424, "authentication_failed"),
        (bedrock_wire::validation("messages: field required"), 400, "invalid_request"),
        // A service quota is capacity, not an exhausted account (this entry has no retries).
        (bedrock_wire::aws_error(400, "ServiceQuotaExceededException", "quota"), 429, "rate_limited"),
        (bedrock_wire::aws_error(404, "ResourceNotFoundException", "no such model"), 404, "model_not_found"),
        (bedrock_wire::model_not_ready(), 502, "upstream_unavailable"),
        (bedrock_wire::service_unavailable(), 503, "overloaded"),
        (bedrock_wire::internal_server(), 502, "upstream_unavailable"),
    ];
    for (model, cases) in [("nova", &cases), ("claude-bedrock", &cases)] {
        for (scripted, status, category) in cases.iter() {
            bedrock.push(scripted.clone());
            let (got, body) = post(&gateway, &ask(model)).await;
            assert_eq!((got, parse(&body)["error"]["code"].clone()), (*status, json!(category)), "{model}: {body}");
            assert!(!body.contains("field required") && !body.contains("no such model"), "{body}");
        }
    }
}

#[tokio::test]
async fn an_exception_frame_after_output_ends_the_stream_with_an_error_event() {
    let bedrock = FakeBedrock::start().await;
    let mut frames = bedrock_wire::converse_text_stream_frames(&["partial"], "end_turn", json!({}));
    frames.truncate(2);
    frames.push(bedrock_wire::exception("ThrottlingException", "Too many tokens, please wait before trying again."));
    bedrock.push(bedrock_wire::event_stream(frames));
    let gateway = gateway(&bedrock, "", &aws_env()).await;

    let mut request = ask("nova");
    request["stream"] = json!(true);
    let (status, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "the stream had begun: {body}");
    assert!(body.contains("partial"), "{body}");
    assert!(body.contains("event: error") || body.contains("\"error\""), "{body}");
    assert!(!body.contains("[DONE]"), "a failed stream is not passed off as complete: {body}");
    assert!(!body.contains("Too many tokens"), "AWS's words stay in the log: {body}");
}

#[tokio::test]
async fn an_exception_frame_before_output_is_replayed_whole() {
    let bedrock = FakeBedrock::start().await;
    let frames = vec![bedrock_wire::exception("ServiceUnavailableException", "busy")];
    bedrock.push(bedrock_wire::event_stream(frames));
    bedrock.push(bedrock_wire::converse_text("replayed whole"));
    let gateway = gateway(&bedrock, "", &aws_env()).await;

    let mut request = ask("nova");
    request["stream"] = json!(true);
    let (status, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(streamed_text(&sse_events(&body)), "replayed whole");
    let operations: Vec<Operation> = bedrock.received().iter().map(|request| request.operation).collect();
    assert_eq!(operations, [Operation::ConverseStream, Operation::Converse]);
}

/// Anthropic's own fields and betas on `/v1/messages`, as each AWS surface carries them:
/// InvokeModel takes the betas AWS lists in the body (`anthropic_beta`), Mantle in the
/// signed `anthropic-beta` header, both `top_k` but neither `container`; Converse takes
/// none. What a surface does not take is named back to the caller and in the record.
#[tokio::test]
async fn anthropic_fields_and_betas_reach_each_aws_surface_as_it_carries_them() {
    let bedrock = FakeBedrock::start().await;
    let usage = weir_tests::anthropic_wire::usage_json(10, 3, 0, 0);
    let message = bedrock_wire::claude_message_body(vec![json!({"type": "text", "text": "ok"})], "end_turn", usage);
    bedrock.push(bedrock_wire::invoke_message(&message));
    bedrock.push(bedrock_wire::mantle_message(&message));
    bedrock.push(bedrock_wire::converse_text("ok"));
    let text = format!("{}\n[ledger]\npath = \"ledger.db\"\n", config(&bedrock, PROJECTS));
    let gateway = Gateway::start_with(&text, &aws_env(), None).await;
    let mut dropped = Vec::new();
    for model in ["claude-bedrock", "claude-mantle", "nova"] {
        let body = json!({"model": model, "max_tokens": 50, "top_k": 4, "container": "ctr_1",
            "messages": [{"role": "user", "content": "Hi"}]});
        let response = reqwest::Client::new()
            .post(gateway.url("/v1/messages"))
            .header("anthropic-beta", "interleaved-thinking-2025-05-14,claude-code-20250219")
            .json(&body)
            .send()
            .await
            .unwrap();
        let headers = response.headers().clone();
        assert_eq!(response.status().as_u16(), 200, "{model}: {}", response.text().await.unwrap());
        let named = |name: &str| headers.get(name).map(|value| value.to_str().unwrap().to_owned());
        dropped.push((named("x-weir-dropped-fields"), named("x-weir-dropped-betas")));
    }
    let some = |text: &str| Some(text.to_owned());
    assert_eq!(
        dropped,
        [
            (some("container"), some("claude-code-20250219")),
            (some("container"), some("claude-code-20250219")),
            (some("top_k, container"), some("interleaved-thinking-2025-05-14, claude-code-20250219")),
        ]
    );

    let received = bedrock.received();
    let invoke = received.iter().find(|request| request.operation == Operation::InvokeModel).unwrap();
    let sent = invoke.json();
    assert_eq!(sent["anthropic_beta"], json!(["interleaved-thinking-2025-05-14"]), "{sent}");
    assert_eq!(sent["top_k"], 4);
    assert!(sent.get("container").is_none() && invoke.header("anthropic-beta").is_none(), "{sent}");

    let mantle = received.iter().find(|request| request.operation == Operation::MantleMessages).unwrap();
    assert_eq!(mantle.header("anthropic-beta"), Some("interleaved-thinking-2025-05-14"));
    assert!(mantle.header("authorization").unwrap().contains("anthropic-beta"), "the beta header is signed");
    assert_eq!(mantle.json()["top_k"], 4);
    assert!(mantle.json().get("anthropic_beta").is_none());

    let converse = received.iter().find(|request| request.operation == Operation::Converse).unwrap().json();
    assert!(!converse.to_string().contains("top_k") && !converse.to_string().contains("interleaved"), "{converse}");

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    // What was dropped leads the notes; the policy's (`effort_not_applied`) follow.
    let notes: Vec<Vec<&str>> = records
        .iter()
        .map(|record| record["notes"].as_array().unwrap().iter().map(|note| note.as_str().unwrap()).collect())
        .collect();
    assert_eq!(notes[0][..2], ["field_dropped:container", "beta_dropped:claude-code-20250219"]);
    assert_eq!(
        notes[2][..4],
        [
            "field_dropped:top_k",
            "field_dropped:container",
            "beta_dropped:interleaved-thinking-2025-05-14",
            "beta_dropped:claude-code-20250219"
        ]
    );
}

/// Bedrock checks betas per model ("invalid beta flag" for one the model does not take):
/// each Claude model on InvokeModel and Mantle is sent only the betas AWS lists for it
/// (the cross-region prefix and the version read past), and the rest are named back to the
/// caller and in the record instead of becoming Bedrock's 400.
#[tokio::test]
async fn each_claude_model_on_bedrock_is_sent_only_the_betas_aws_lists_for_it() {
    let bedrock = FakeBedrock::start().await;
    let usage = weir_tests::anthropic_wire::usage_json(10, 3, 0, 0);
    let message = bedrock_wire::claude_message_body(vec![json!({"type": "text", "text": "ok"})], "end_turn", usage);
    bedrock.push(bedrock_wire::invoke_message(&message));
    bedrock.push(bedrock_wire::invoke_message(&message));
    bedrock.push(bedrock_wire::mantle_message(&message));
    let base = bedrock.base_url();
    let entry = |id: &str, provider: &str, wire: &str, endpoint: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"{provider}\"\nwire_id = \"{wire}\"\nendpoint = \"{endpoint}\"\n\
             max_output_tokens = 8000\ncontext_window = 200000\noutput_tokens = 100\nmax_retries = 0\n"
        )
    };
    let text = [
        config(&bedrock, ""),
        entry("opus-bedrock", "anthropic-bedrock", "global.anthropic.claude-opus-4-5-20251101-v1:0", &base),
        entry(
            "haiku-mantle",
            "anthropic-bedrock-mantle",
            "anthropic.claude-haiku-4-5-20251001-v1:0",
            &format!("{base}/anthropic"),
        ),
        "[ledger]\npath = \"ledger.db\"\n".to_owned(),
    ]
    .join("\n");
    let gateway = Gateway::start_with(&text, &aws_env(), None).await;
    let betas = "context-1m-2025-08-07,effort-2025-11-24,interleaved-thinking-2025-05-14";
    let mut dropped = Vec::new();
    for model in ["claude-bedrock", "opus-bedrock", "haiku-mantle"] {
        let body = json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "Hi"}]});
        let response = reqwest::Client::new()
            .post(gateway.url("/v1/messages"))
            .header("anthropic-beta", betas)
            .json(&body)
            .send()
            .await
            .unwrap();
        let headers = response.headers().clone();
        assert_eq!(response.status().as_u16(), 200, "{model}: {}", response.text().await.unwrap());
        dropped.push(headers.get("x-weir-dropped-betas").map(|value| value.to_str().unwrap().to_owned()));
    }
    let some = |text: &str| Some(text.to_owned());
    assert_eq!(
        dropped,
        [some("effort-2025-11-24"), some("context-1m-2025-08-07"), some("context-1m-2025-08-07, effort-2025-11-24")],
        "effort is Opus 4.5's; 1M is Sonnet 4's, kept for Sonnet 4.5 (see bedrock_betas.rs); Haiku 4.5 takes neither"
    );

    let received = bedrock.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    assert_eq!(received[0].model_id.as_deref(), Some(MODEL_ID));
    assert_eq!(
        received[0].json()["anthropic_beta"],
        json!(["context-1m-2025-08-07", "interleaved-thinking-2025-05-14"])
    );
    assert_eq!(received[1].model_id.as_deref(), Some("global.anthropic.claude-opus-4-5-20251101-v1:0"));
    assert_eq!(received[1].json()["anthropic_beta"], json!(["effort-2025-11-24", "interleaved-thinking-2025-05-14"]));
    assert_eq!(received[2].operation, Operation::MantleMessages);
    assert_eq!(received[2].header("anthropic-beta"), Some("interleaved-thinking-2025-05-14"));

    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let beta_notes: Vec<Vec<&str>> = records
        .iter()
        .map(|record| {
            let notes = record["notes"].as_array().unwrap().iter().filter_map(Value::as_str);
            notes.filter(|note| note.starts_with("beta_dropped:")).collect()
        })
        .collect();
    assert_eq!(
        beta_notes,
        [
            vec!["beta_dropped:effort-2025-11-24"],
            vec!["beta_dropped:context-1m-2025-08-07"],
            vec!["beta_dropped:context-1m-2025-08-07", "beta_dropped:effort-2025-11-24"],
        ]
    );
}

/// gpt-oss on Converse is sent the call's effort, as `reasoning_effort` in
/// `additionalModelRequestFields`, when its entry declares `reasoning = "effort"`
/// (so the headroom the entry books is for reasoning that was asked for); an entry
/// that declares none is sent no effort, whatever the caller asks.
#[tokio::test]
async fn gpt_oss_on_converse_is_sent_the_calls_effort_only_where_its_entry_declares_one() {
    let bedrock = FakeBedrock::start().await;
    let entry = |id: &str, more: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"bedrock-converse\"\nwire_id = \"openai.gpt-oss-120b-1:0\"\n\
             endpoint = \"{base}\"\nmax_output_tokens = 8000\ncontext_window = 128000\noutput_tokens = 100\n{more}\n",
            base = bedrock.base_url()
        )
    };
    let toml =
        ["read_timeout_secs = 5\n".to_owned(), entry("oss", "reasoning = \"effort\""), entry("oss-plain", "")].concat();
    let gateway = Gateway::start_with(&toml, &aws_env(), None).await;
    for model in ["oss", "oss-plain"] {
        bedrock.push(bedrock_wire::converse_text("Reasoned."));
        let mut request = ask(model);
        request["reasoning_effort"] = json!("high");
        let (status, body) = post(&gateway, &request).await;
        assert_eq!(status, 200, "{model}: {body}");
    }
    let sent: Vec<Value> =
        bedrock.received().iter().map(|r| r.json()["additionalModelRequestFields"].clone()).collect();
    assert_eq!(sent, [json!({"reasoning_effort": "high"}), Value::Null]);
}

/// A response schema to a Converse model (issue 49, item 9): the component carries no
/// native structured output, so the schema is described in the system prompt and the
/// answer passes the same gate as a native one — a reply that is not JSON gets a
/// correction turn, and a schema-echo reply (Nova's habit) is normalized.
#[tokio::test]
async fn a_response_schema_to_converse_is_described_in_the_prompt_and_its_answer_validated() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(bedrock_wire::converse_text("Sure! The city is Paris."));
    bedrock.push(bedrock_wire::converse_text(r#"{"@type": "object", "@fields": {"city": "Paris"}}"#));
    let gateway = gateway(&bedrock, "", &aws_env()).await;

    let mut request = ask("nova");
    request["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "place", "schema": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
    let response =
        reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(&request).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-weir-attempts"], "2", "the answer that was not JSON was corrected");
    let answer: Value = response.json().await.unwrap();
    let content: Value = serde_json::from_str(answer["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"city": "Paris"}), "the echo normalized: {answer}");

    let sent: Vec<Value> = bedrock.received().iter().map(|r| r.json()).collect();
    let system = sent[0]["system"].to_string();
    assert!(system.contains("Be terse.") && system.contains("Schema `place`"), "{system}");
    assert!(sent[0].get("outputConfig").is_none() && sent[0].get("toolConfig").is_none(), "{}", sent[0]);
    let turns = sent[1]["messages"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "the question, the rejected answer, the correction: {}", sent[1]);
}
