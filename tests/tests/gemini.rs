//! The embedded `gemini` component (keys `gemini` and `vertex-gemini`) driven through the
//! real `weir serve` binary, in front of the fake upstream scripted with Gemini's real wire
//! (`weir_tests::gemini_wire`): the official `openai` and `anthropic` Python clients on one
//! side, and on the other what the upstream received — the AI Studio and Vertex AI paths,
//! `alt=sse` for a stream, the API key in `x-goog-api-key` (or a bearer token for Vertex),
//! the exact `maxOutputTokens`, the thought signature sent back on its part, function
//! responses by name — and what callers get for Gemini's safety blocks, `MAX_TOKENS` and
//! both kinds of `RESOURCE_EXHAUSTED`.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::gemini_wire::{
    self, answer, blocked_prompt, call_part, resource_exhausted, response_body, sse_chunk, text_part, text_stream,
    thought_part, usage,
};
use weir_tests::python::{run_anthropic_client, run_openai_client};
use weir_tests::{FakeUpstream, Gateway, Received};

/// The fake key the gateway reads from `WEIR_GEMINI_KEY` (credential `weir-gemini-key`).
const KEY: &str = "AIzaSyWeirFakeGeminiKey0123456789abcdef";
/// The fake Vertex token the gateway reads from `WEIR_VERTEX_TOKEN`.
const TOKEN: &str = "ya29.weir-fake-vertex-token";
/// The thought signature the scripted calls carry.
const SIGNATURE: &str = "CiQB0e2Kb2xZy8weirFakeThoughtSignature==";
/// Google's error text, which must never reach a caller.
const GOOGLE_PROSE: &str = "You exceeded your current quota";

/// A `gemini` chat entry and a `gemini` embedding entry, both routed to the fake's `/v1beta`.
fn config(upstream: &FakeUpstream) -> String {
    format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "flash"
provider = "gemini"
wire_id = "gemini-2.5-flash"
endpoint = "http://{addr}/v1beta"
credential = "weir-gemini-key"
max_output_tokens = 8000
context_window = 1048576
output_tokens = 100
max_retries = 0
reasoning = "thinking"

[[model]]
id = "pro3"
provider = "gemini"
wire_id = "gemini-3.1-pro-preview"
endpoint = "http://{addr}/v1beta"
credential = "weir-gemini-key"
max_output_tokens = 8000
context_window = 200000
output_tokens = 100
max_retries = 0
reasoning = "effort"

[[model]]
id = "gemini-embed"
provider = "gemini"
wire_id = "gemini-embedding-001"
kind = "embedding"
endpoint = "http://{addr}/v1beta"
credential = "weir-gemini-key"
embedding_dimensions = 2
context_window = 2048
"#,
        addr = upstream.addr()
    )
}

async fn gateway(upstream: &FakeUpstream) -> Gateway {
    Gateway::start_with(&config(upstream), &[("WEIR_GEMINI_KEY", KEY)], None).await
}

/// Posts an OpenAI chat request; returns the status, the headers and the body.
async fn post(gateway: &Gateway, body: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = reqwest::Client::new().post(gateway.url("/v1/chat/completions")).json(body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (status, headers, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

fn hello() -> Value {
    json!({"model": "flash", "messages": [{"role": "user", "content": "Hello"}]})
}

/// Every request went to AI Studio's shape with the key in `x-goog-api-key` only.
fn assert_studio_key(received: &[Received]) {
    for request in received {
        assert_eq!(request.header("x-goog-api-key"), Some(KEY), "{}", request.path);
        assert_eq!(request.header("authorization"), None, "the key goes in x-goog-api-key only");
        assert!(request.query.as_deref().is_none_or(|query| !query.contains(KEY)), "never in the query");
    }
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(KEY) && !text.contains(TOKEN), "a secret reached the caller in {what}: {text}");
}

#[tokio::test]
async fn the_openai_client_plain_streamed_and_a_streamed_tool_call_through_gemini() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(answer(
        vec![thought_part("The capital is well known."), text_part("Paris.")],
        "STOP",
        usage(120, 2, 30, 100),
    ));
    upstream.push(gemini_wire::stream(text_stream(&["One, ", "two, ", "three."], "STOP", usage(9, 6, 0, 0))));
    upstream.push(gemini_wire::stream(vec![
        sse_chunk(&response_body(
            vec![call_part("get_weather", json!({"city": "Paris"}), Some(SIGNATURE))],
            None,
            None,
        )),
        sse_chunk(&response_body(vec![text_part("")], Some("STOP"), Some(usage(40, 8, 0, 0)))),
    ]));

    let steps = run_openai_client(&gateway.url("/v1"), "flash", "plain,stream,stream_tools");
    assert_no_secret("the client's answers", &serde_json::to_string(&steps).unwrap());

    let plain = &steps[0];
    assert_eq!(plain["text"], "Paris.", "{plain}");
    assert_eq!(plain["finish_reason"], "stop");
    assert_eq!(plain["model"], "flash", "the catalog id, never Gemini's modelVersion");
    // prompt = 20 uncached + 100 cached; completion = 2 answer + 30 thinking, billed as output.
    assert_eq!(plain["usage"]["prompt_tokens"], 120, "{plain}");
    assert_eq!(plain["usage"]["prompt_tokens_details"]["cached_tokens"], 100, "{plain}");
    assert_eq!(plain["usage"]["completion_tokens"], 32, "{plain}");
    assert_eq!(plain["usage"]["completion_tokens_details"]["reasoning_tokens"], 30, "{plain}");

    let stream = &steps[1];
    assert_eq!(stream["text"], "One, two, three.", "{stream}");
    assert_eq!(stream["finish_reason"], "stop");
    assert_eq!(stream["usage"]["prompt_tokens"], 9);
    assert_eq!(stream["usage"]["completion_tokens"], 6);

    let tools = &steps[2];
    assert_eq!(tools["tool_calls"].as_array().unwrap().len(), 1, "{tools}");
    assert_eq!(tools["tool_calls"][0]["name"], "get_weather");
    assert_eq!(tools["tool_calls"][0]["arguments"], json!({"city": "Paris"}));
    assert!(!tools["tool_calls"][0]["id"].as_str().unwrap().is_empty(), "a call id is made: {tools}");
    assert_eq!(tools["finish_reason"], "tool_calls");

    let received = upstream.received();
    assert_eq!(received.len(), 3);
    assert_studio_key(&received);
    assert_eq!(received[0].path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(received[0].query, None);
    let plain_body = received[0].json();
    assert_eq!(plain_body["generationConfig"]["maxOutputTokens"], 100, "the entry's output budget, exactly");
    assert_eq!(plain_body["systemInstruction"], json!({"parts": [{"text": "Answer briefly."}]}));
    assert_eq!(
        plain_body["contents"],
        json!([{"role": "user", "parts": [{"text": "What is the capital of France?"}]}])
    );
    for streamed in &received[1..] {
        assert_eq!(streamed.path, "/v1beta/models/gemini-2.5-flash:streamGenerateContent");
        assert_eq!(streamed.query.as_deref(), Some("alt=sse"));
    }
    let tool_body = received[2].json();
    assert_eq!(tool_body["tools"][0]["functionDeclarations"][0]["name"], "get_weather", "{tool_body}");
    assert_eq!(
        tool_body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["additionalProperties"], false,
        "the caller's JSON Schema as it is"
    );
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn the_anthropic_client_tool_loop_sends_the_thought_signature_back_on_its_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(answer(
        vec![
            thought_part("The user wants the weather; call the tool."),
            call_part("get_weather", json!({"city": "Paris"}), Some(SIGNATURE)),
        ],
        "STOP",
        usage(50, 10, 20, 0),
    ));
    upstream.push(answer(vec![text_part("It is 18C and sunny in Paris.")], "STOP", usage(90, 12, 0, 0)));
    upstream.push(gemini_wire::stream(vec![
        sse_chunk(&response_body(vec![thought_part("Calling.")], None, None)),
        sse_chunk(&response_body(
            vec![call_part("get_weather", json!({"city": "Paris"}), Some(SIGNATURE))],
            Some("STOP"),
            Some(usage(40, 8, 4, 0)),
        )),
    ]));

    let steps = run_anthropic_client(&gateway.base_url, "flash", "tools,stream_tools");
    assert_no_secret("the client's answers", &serde_json::to_string(&steps).unwrap());

    let tools = &steps[0];
    assert_eq!(tools["stop_reason"], "tool_use", "{tools}");
    assert_eq!(tools["tool_calls"][0]["name"], "get_weather");
    assert_eq!(tools["tool_calls"][0]["input"], json!({"city": "Paris"}));
    assert_eq!(tools["answer"], "It is 18C and sunny in Paris.");
    assert_eq!(tools["answer_stop_reason"], "end_turn");

    let streamed = &steps[1];
    assert_eq!(streamed["stop_reason"], "tool_use", "{streamed}");
    assert_eq!(streamed["tool_calls"][0]["input"], json!({"city": "Paris"}));

    let received = upstream.received();
    assert_eq!(received.len(), 3);
    assert_studio_key(&received);
    // The second turn: the model's turn as Gemini gave it, the signature on the call's part,
    // and the result as a functionResponse named after the call.
    let second = received[1].json();
    assert_eq!(second["generationConfig"]["maxOutputTokens"], 200, "the client's max_tokens, exactly");
    assert_eq!(
        second["contents"],
        json!([
            {"role": "user", "parts": [{"text": "What is the weather in Paris?"}]},
            {"role": "model", "parts": [
                {"text": "The user wants the weather; call the tool.", "thought": true},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"output": "18C, sunny"}}}
            ]}
        ]),
        "{second}"
    );
    assert_eq!(received[2].query.as_deref(), Some("alt=sse"));
}

#[tokio::test]
async fn safety_blocks_are_refusals_and_a_max_tokens_stop_with_nothing_escalates_to_the_ceiling() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;

    upstream.push(blocked_prompt("PROHIBITED_CONTENT", 12));
    let (status, headers, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "refused", "{body}");
    assert_eq!(body["error"]["refusal"]["category"], "PROHIBITED_CONTENT", "{body}");
    assert_eq!(headers["x-weir-provider"], "gemini");

    upstream.push(gemini_wire::json_response(
        200,
        &json!({"candidates": [{"finishReason": "SAFETY", "index": 0,
                                "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                                                   "probability": "HIGH", "blocked": true}]}],
                "usageMetadata": usage(12, 0, 0, 0), "modelVersion": gemini_wire::MODEL_VERSION}),
    ));
    let (status, _, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["refusal"]["category"], "SAFETY", "{body}");

    // Cut at the declared 100 with text: the gateway returns it as it is (its default).
    upstream.push(answer(vec![text_part("Hello, this answer is cut")], "MAX_TOKENS", usage(5, 100, 0, 0)));
    let (status, headers, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello, this answer is cut");
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    assert_eq!(headers["x-weir-attempts"], "1");

    // Cut with nothing said (the budget went to thoughts): escalated once to the ceiling.
    upstream.push(answer(vec![], "MAX_TOKENS", usage(5, 0, 100, 0)));
    upstream.push(answer(vec![text_part("Hello, this answer is whole.")], "STOP", usage(5, 7, 0, 0)));
    let (status, headers, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello, this answer is whole.");
    assert_eq!(headers["x-weir-attempts"], "2");
    let budgets: Vec<Value> =
        upstream.received()[3..].iter().map(|r| r.json()["generationConfig"]["maxOutputTokens"].clone()).collect();
    assert_eq!(budgets, [json!(100), json!(8000)]);

    // Nothing said at the ceiling either: `output_truncated`, nothing more is tried.
    upstream.push(answer(vec![], "MAX_TOKENS", usage(5, 0, 100, 0)));
    upstream.push(answer(vec![], "MAX_TOKENS", usage(5, 0, 8000, 0)));
    let (status, _, body) = post(&gateway, &hello()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("output_truncated")), "{body}");
    assert_eq!(upstream.queued(), 0);
}

#[tokio::test]
async fn resource_exhausted_per_minute_is_rate_limited_and_per_day_is_out_of_quota() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;

    upstream.push(resource_exhausted("GenerateRequestsPerMinutePerProjectPerModel", "7s"));
    let (status, headers, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(!body.to_string().contains(GOOGLE_PROSE), "Google's prose never reaches a caller: {body}");
    assert!(headers.get("x-weir-call-id").is_some());

    upstream.push(resource_exhausted("GenerateRequestsPerDayPerProjectPerModel", "20s"));
    let (status, _, body) = post(&gateway, &hello()).await;
    assert_eq!(status, 402, "{body}");
    assert_eq!(body["error"]["code"], "provider_credit_exhausted", "{body}");
    assert!(!body.to_string().contains(GOOGLE_PROSE), "{body}");

    // A wrong key (a 400 INVALID_ARGUMENT with API_KEY_INVALID) is the gateway's credential.
    upstream.push(gemini_wire::error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                "domain": "googleapis.com"}]),
        &[],
    ));
    let (status, _, body) = post(&gateway, &hello()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (424, Some("authentication_failed")), "{body}");
    assert_no_secret("an error", &body.to_string());
    assert_studio_key(&upstream.received());
}

#[tokio::test]
async fn vertex_gemini_calls_the_vertex_url_with_a_bearer_token() {
    let upstream = FakeUpstream::start().await;
    let base = format!("http://{}/v1/projects/weir-test/locations/us-central1/publishers/google", upstream.addr());
    let config = format!(
        r#"
read_timeout_secs = 5

[[model]]
id = "vertex-pro"
provider = "vertex-gemini"
wire_id = "gemini-2.5-pro"
endpoint = "{base}"
credential = "weir-vertex-token"
max_output_tokens = 8000
context_window = 1048576
output_tokens = 64
max_retries = 0

[[model]]
id = "vertex-embed"
provider = "vertex-gemini"
wire_id = "gemini-embedding-001"
kind = "embedding"
endpoint = "{base}"
credential = "weir-vertex-token"
embedding_dimensions = 2
context_window = 2048
"#
    );
    let gateway = Gateway::start_with(&config, &[("WEIR_VERTEX_TOKEN", TOKEN)], None).await;
    upstream.push(answer(vec![text_part("Bonjour.")], "STOP", usage(4, 2, 0, 0)));
    upstream.push(gemini_wire::stream(text_stream(&["Bon", "jour."], "STOP", usage(4, 2, 0, 0))));

    let steps = run_openai_client(&gateway.url("/v1"), "vertex-pro", "plain,stream");
    assert_eq!(steps[0]["text"], "Bonjour.");
    assert_eq!(steps[1]["text"], "Bonjour.");
    assert_no_secret("the client's answers", &serde_json::to_string(&steps).unwrap());

    // Vertex embeds through `:predict`, one input per request for gemini-embedding-001.
    for values in [[3.0, 4.0], [0.0, 1.0]] {
        upstream.push(gemini_wire::json_response(
            200,
            &json!({"predictions": [{"embeddings": {"statistics": {"truncated": false, "token_count": 3},
                                                    "values": values}}]}),
        ));
    }
    let embedded = run_openai_client(&gateway.url("/v1"), "vertex-embed", "embed");
    assert_eq!(embedded[0]["vectors"].as_array().unwrap().len(), 2, "{embedded:?}");
    assert_eq!(embedded[0]["usage"]["prompt_tokens"], 6, "the token counts Vertex reported: {embedded:?}");

    let received = upstream.received();
    assert_eq!(received.len(), 4);
    let embed_path =
        "/v1/projects/weir-test/locations/us-central1/publishers/google/models/gemini-embedding-001:predict";
    for request in &received[2..] {
        assert_eq!(request.path, embed_path);
        let body = request.json();
        assert_eq!(body["instances"].as_array().unwrap().len(), 1, "{body}");
        assert_eq!(body["parameters"], json!({"autoTruncate": false, "outputDimensionality": 2}));
    }
    let prefix = "/v1/projects/weir-test/locations/us-central1/publishers/google/models/gemini-2.5-pro";
    assert_eq!(received[0].path, format!("{prefix}:generateContent"));
    assert_eq!(
        (received[1].path.clone(), received[1].query.as_deref()),
        (format!("{prefix}:streamGenerateContent"), Some("alt=sse"))
    );
    for request in &received {
        assert_eq!(request.header("authorization"), Some(format!("Bearer {TOKEN}").as_str()));
        assert_eq!(request.header("x-goog-api-key"), None);
    }
    for request in &received[..2] {
        assert_eq!(request.json()["generationConfig"]["maxOutputTokens"], 64);
    }
}

#[tokio::test]
async fn embeddings_through_v1_embeddings_reach_batch_embed_contents() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(gemini_wire::batch_embeddings(&[vec![3.0, 4.0], vec![0.0, -2.0]]));

    let steps = run_openai_client(&gateway.url("/v1"), "gemini-embed", "embed");
    let vectors = steps[0]["vectors"].as_array().unwrap();
    assert_eq!(vectors.len(), 2, "{steps:?}");
    // The host normalizes what the model sent: [3, 4] → [0.6, 0.8].
    let first: Vec<f64> = vectors[0].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!((first[0] - 0.6).abs() < 1e-6 && (first[1] - 0.8).abs() < 1e-6, "{first:?}");
    assert_eq!(steps[0]["model"], "gemini-embed");

    let received = upstream.received();
    assert_eq!(received.len(), 1);
    assert_studio_key(&received);
    assert_eq!(received[0].path, "/v1beta/models/gemini-embedding-001:batchEmbedContents");
    let body = received[0].json();
    let requests = body["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2, "one request per input: {body}");
    for request in requests {
        assert_eq!(request["model"], "models/gemini-embedding-001");
        assert_eq!(request["outputDimensionality"], 2, "the entry's pinned width");
        assert_eq!(request["taskType"], "RETRIEVAL_DOCUMENT", "{request}");
    }
}

/// A caller's thinking budget (Anthropic's `thinking.budget_tokens`) on an entry declared
/// `reasoning = "thinking"` goes as `thinkingConfig`, and the thought summary comes back as
/// a thinking block carrying the answer's signature.
#[tokio::test]
async fn a_thinking_budget_becomes_thinking_config_and_thoughts_come_back_signed() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(answer(
        vec![thought_part("Two and two."), call_part("add", json!({"a": 2, "b": 2}), Some(SIGNATURE))],
        "STOP",
        usage(30, 5, 40, 0),
    ));
    let request = json!({
        "model": "flash",
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "add", "description": "Adds", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "What is 2 + 2?"}]
    });
    let response = reqwest::Client::new().post(gateway.url("/v1/messages")).json(&request).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["content"][0],
        json!({"type": "thinking", "thinking": "Two and two.", "signature": format!("gemini:{SIGNATURE}")}),
        "{body}"
    );
    assert_eq!(body["content"][1]["type"], "tool_use", "{body}");
    assert_eq!(body["stop_reason"], "tool_use");
    assert_eq!(body["usage"]["output_tokens"], 45, "thinking is billed as output: {body}");

    let sent = upstream.received()[0].json();
    assert_eq!(
        sent["generationConfig"],
        json!({"maxOutputTokens": 2048, "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}}),
        "{sent}"
    );
}

/// On Gemini 3 an effort goes as a `thinkingLevel` (never with a budget), the
/// level every Gemini 3 model takes: `minimal` as `low`.
#[tokio::test]
async fn a_gemini_3_entry_sends_the_callers_effort_as_a_thinking_level() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    for (effort, level) in [("medium", "medium"), ("minimal", "low")] {
        upstream.push(answer(vec![json!({"text": "Four."})], "STOP", usage(12, 2, 30, 0)));
        let request = json!({"model": "pro3", "reasoning_effort": effort,
                             "messages": [{"role": "user", "content": "What is 2 + 2?"}]});
        let (status, _, body) = post(&gateway, &request).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["choices"][0]["message"]["content"], "Four.");
        let sent = upstream.received().last().unwrap().json();
        assert_eq!(
            sent["generationConfig"]["thinkingConfig"],
            json!({"thinkingLevel": level, "includeThoughts": true}),
            "{effort}: {sent}"
        );
        assert!(upstream.received().last().unwrap().path.contains("gemini-3.1-pro-preview:generateContent"));
    }
}

/// A caller's JSON Schema (`response_format`) goes as `responseMimeType` and
/// `responseJsonSchema`, and the answer Gemini writes to it comes back checked.
#[tokio::test]
async fn a_response_schema_goes_as_response_json_schema() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream).await;
    upstream.push(answer(vec![text_part(r#"{"city": "Paris"}"#)], "STOP", usage(20, 6, 0, 0)));
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                        "additionalProperties": false});
    let request = json!({
        "model": "flash",
        "messages": [{"role": "user", "content": "Name the capital of France."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": true}}
    });
    let (status, _, body) = post(&gateway, &request).await;
    assert_eq!(status, 200, "{body}");
    let content: Value = serde_json::from_str(body["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({"city": "Paris"}));

    let config = &upstream.received()[0].json()["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json", "{config}");
    assert_eq!(config["responseJsonSchema"], schema, "the caller's schema as it is: {config}");
}
