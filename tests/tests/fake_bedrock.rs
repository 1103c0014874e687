//! The fake Bedrock, exercised over real loopback HTTP with reqwest and requests signed by
//! the fake's own test signer: if these pass, a gateway test failing against the fake is the
//! gateway's fault (its signature, its parsing of frames), not the fake's.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant, SystemTime};

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::Message;
use base64::Engine as _;
use bytes::{Buf, Bytes, BytesMut};
use serde_json::{Value, json};
use weir_tests::Scripted;
use weir_tests::anthropic_wire;
use weir_tests::bedrock_wire::{
    self, Credentials, FakeBedrock, MODEL_ID, Operation, REGION, TestSigner, Verifier, retrieval,
};

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap()
}

/// Sends `body` to `path` (as written, e.g. with `:` raw or `%3A`), signed by `signer` at
/// `at`, with `extra` headers (signed too).
async fn send_signed_at(
    bedrock: &FakeBedrock,
    signer: &TestSigner,
    path: &str,
    body: &Value,
    extra: &[(&str, &str)],
    at: SystemTime,
) -> reqwest::Response {
    let body = body.to_string();
    let mut headers = vec![
        ("host".to_owned(), bedrock.addr().to_string()),
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "application/json".to_owned()),
    ];
    headers.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    signer.sign("POST", path, &mut headers, body.as_bytes(), at);
    let mut request = client().post(format!("{}{path}", bedrock.base_url())).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request.send().await.unwrap()
}

async fn send(bedrock: &FakeBedrock, path: &str, body: &Value) -> reqwest::Response {
    let signer = TestSigner::new(Credentials::fake(), REGION);
    send_signed_at(bedrock, &signer, path, body, &[], SystemTime::now()).await
}

fn invoke_request() -> Value {
    json!({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Hello"}]
    })
}

fn converse_request() -> Value {
    json!({"messages": [{"role": "user", "content": [{"text": "Hello"}]}], "inferenceConfig": {"maxTokens": 64}})
}

/// Decodes a whole event-stream body with AWS's streaming decoder, feeding it the bytes
/// in the pieces they arrived in.
async fn read_frames(mut response: reqwest::Response) -> Vec<Result<Message, String>> {
    let mut decoder = MessageFrameDecoder::new();
    let mut buffer = BytesMut::new();
    let mut out = Vec::new();
    while let Some(piece) = response.chunk().await.unwrap() {
        buffer.extend_from_slice(&piece);
        loop {
            match decoder.decode_frame(&mut buffer) {
                Ok(DecodedFrame::Complete(message)) => out.push(Ok(message)),
                Ok(DecodedFrame::Incomplete) => break,
                Err(error) => {
                    out.push(Err(error.to_string()));
                    return out;
                }
            }
        }
    }
    assert!(!buffer.has_remaining(), "{} bytes left over after the last frame", buffer.len());
    out
}

fn header(message: &Message, name: &str) -> String {
    let header = message.headers().iter().find(|h| h.name().as_str() == name).unwrap();
    header.value().as_string().unwrap().as_str().to_owned()
}

fn payload(message: &Message) -> Value {
    serde_json::from_slice(message.payload()).unwrap()
}

// ---------------------------------------------------------------------------------------
// Signed requests
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_signed_invoke_is_accepted_recorded_and_answered() {
    let bedrock = FakeBedrock::start().await;
    let path = format!("/model/{MODEL_ID}/invoke");
    let response = send(&bedrock, &path, &invoke_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-amzn-requestid"], bedrock_wire::REQUEST_ID);
    assert_eq!(response.headers()["x-amzn-bedrock-input-token-count"], "25");
    assert_eq!(response.json::<Value>().await.unwrap(), bedrock_wire::invoke_body());

    let received = bedrock.received();
    assert_eq!(received.len(), 1);
    let request = &received[0];
    let accepted = request.verdict.as_ref().unwrap();
    assert_eq!(accepted.access_key_id, bedrock_wire::ACCESS_KEY_ID);
    assert_eq!(accepted.region, REGION);
    assert_eq!(accepted.service, "bedrock");
    assert_eq!(accepted.signed_headers, ["accept", "content-type", "host", "x-amz-date"]);
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, path, "the raw path, `:` as sent");
    assert_eq!(request.operation, Operation::InvokeModel);
    assert_eq!(request.model_id.as_deref(), Some(MODEL_ID));
    assert_eq!(request.json(), invoke_request());
    assert!(request.header("authorization").unwrap().starts_with("AWS4-HMAC-SHA256 Credential="));
}

#[tokio::test]
async fn encoded_model_ids_are_verified_over_the_path_as_sent() {
    let bedrock = FakeBedrock::start().await;
    let encoded = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
    assert_eq!(send(&bedrock, encoded, &converse_request()).await.status(), 200);
    let arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123";
    let arn_path =
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse";
    let response = send(&bedrock, arn_path, &converse_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), bedrock_wire::converse_body());

    let received = bedrock.received();
    assert!(received.iter().all(|r| r.signed_ok()), "{received:#?}");
    assert_eq!(received[0].path, encoded);
    assert_eq!(received[0].model_id.as_deref(), Some(MODEL_ID));
    assert_eq!(received[1].path, arn_path);
    assert_eq!(received[1].model_id.as_deref(), Some(arn));
    assert_eq!(received[1].operation, Operation::Converse);
}

#[tokio::test]
async fn temporary_credentials_are_accepted_with_their_token() {
    let bedrock = FakeBedrock::start_with(Verifier::new(Credentials::fake_temporary(), "eu-west-3")).await;
    let signer = TestSigner::new(Credentials::fake_temporary(), "eu-west-3");
    let path = format!("/model/{MODEL_ID}/invoke");
    let response = send_signed_at(&bedrock, &signer, &path, &invoke_request(), &[], SystemTime::now()).await;
    assert_eq!(response.status(), 200);
    let request = &bedrock.received()[0];
    assert!(request.verdict.as_ref().unwrap().session_token);
    assert_eq!(request.header("x-amz-security-token"), Some(bedrock_wire::SESSION_TOKEN));
}

#[tokio::test]
async fn mantle_records_the_workspace_header_and_speaks_anthropic() {
    let bedrock = FakeBedrock::start().await;
    let signer = TestSigner::new(Credentials::fake(), REGION);
    let body =
        json!({"model": "anthropic.claude-opus-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]});
    let extra = [("anthropic-version", "2023-06-01"), ("anthropic-workspace-id", "wrkspc_strict_01")];
    bedrock.push(bedrock_wire::mantle_message(&anthropic_wire::message_body(
        vec![anthropic_wire::text_block("Hi there")],
        "end_turn",
        None,
        anthropic_wire::usage_json(8, 3, 0, 0),
    )));
    let response = send_signed_at(&bedrock, &signer, "/anthropic/v1/messages", &body, &extra, SystemTime::now()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["content"][0]["text"], "Hi there");

    // Unscripted and streaming: Anthropic's named SSE events.
    let mut streaming = body.clone();
    streaming["stream"] = json!(true);
    let response =
        send_signed_at(&bedrock, &signer, "/anthropic/v1/messages", &streaming, &extra, SystemTime::now()).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = anthropic_wire::sse_events(&response.text().await.unwrap());
    assert_eq!(events.first().unwrap().0, "message_start");
    assert_eq!(events.last().unwrap().0, "message_stop");

    let received = bedrock.received();
    for request in &received {
        assert_eq!(request.operation, Operation::MantleMessages);
        assert_eq!(request.model_id, None);
        assert_eq!(request.header("anthropic-workspace-id"), Some("wrkspc_strict_01"));
        assert!(request.signed_ok());
    }
    assert_eq!(received[0].json()["model"], "anthropic.claude-opus-5");
}

/// The product's signer (`weir_host::transport::SigV4`, on `aws-sigv4`) against the fake's
/// independent verifier: raw `:`, `%3A` and an ARN's `%2F` in the path, and a session token.
#[tokio::test]
async fn the_hosts_signer_is_accepted() {
    use weir_host::transport::{IdentitySource, SigV4};
    let cases =
        [(Credentials::fake(), None), (Credentials::fake_temporary(), Some(bedrock_wire::SESSION_TOKEN.to_owned()))];
    for (credentials, token) in cases {
        let bedrock = FakeBedrock::start_with(Verifier::new(credentials.clone(), "eu-west-3")).await;
        let signer = SigV4 {
            credentials: aws_credential_types::Credentials::new(
                &credentials.access_key_id,
                &credentials.secret_access_key,
                token,
                None,
                "fake-bedrock-test",
            ),
            region: "eu-west-3".to_owned(),
            service: "bedrock".to_owned(),
            source: IdentitySource::SecretStore,
        };
        let paths = [
            format!("/model/{MODEL_ID}/invoke"),
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse".to_owned(),
            "/model/arn%3Aaws%3Abedrock%3Aeu-west-3%3A123456789012%3Aapplication-inference-profile%2Fabc/converse-stream"
                .to_owned(),
            "/anthropic/v1/messages".to_owned(),
        ];
        for path in &paths {
            let mut request = client()
                .post(format!("{}{path}", bedrock.base_url()))
                .header("content-type", "application/json")
                .header("anthropic-workspace-id", "wrkspc_1")
                .body(invoke_request().to_string())
                .build()
                .unwrap();
            signer.sign(&mut request).unwrap();
            let response = client().execute(request).await.unwrap();
            let request = bedrock.received().pop().unwrap();
            assert_eq!(response.status(), 200, "{path}: {:#?}", request.verdict);
            assert_eq!(&request.path, path, "sent as written");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Rejections
// ---------------------------------------------------------------------------------------

/// Asserts an AWS `restJson1` error answer: status, `x-amzn-ErrorType`, request id, message.
async fn assert_aws_error(response: reqwest::Response, status: u16, error_type: &str, message_part: &str) {
    assert_eq!(response.status(), status);
    let headers = response.headers().clone();
    assert_eq!(
        headers["x-amzn-errortype"].to_str().unwrap(),
        format!("{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/")
    );
    assert_eq!(headers["x-amzn-requestid"], bedrock_wire::REQUEST_ID);
    assert_eq!(headers["content-type"], "application/json");
    let body: Value = response.json().await.unwrap();
    let message = body["message"].as_str().unwrap();
    assert!(message.contains(message_part), "{message}");
}

#[tokio::test]
async fn each_rejection_answers_like_aws_and_keeps_the_script() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(bedrock_wire::invoke_text("for a signed request only"));
    let path = format!("/model/{MODEL_ID}/invoke");
    let now = SystemTime::now();
    let signer = |credentials: Credentials, region: &str| TestSigner::new(credentials, region);

    let unknown_key = signer(Credentials::new("AKIAUNKNOWNKEY000000", bedrock_wire::SECRET_ACCESS_KEY), REGION);
    let response = send_signed_at(&bedrock, &unknown_key, &path, &invoke_request(), &[], now).await;
    assert_aws_error(response, 403, "UnrecognizedClientException", bedrock_wire::INVALID_TOKEN_MESSAGE).await;

    let wrong_secret = signer(Credentials::new(bedrock_wire::ACCESS_KEY_ID, "wrong"), REGION);
    let response = send_signed_at(&bedrock, &wrong_secret, &path, &invoke_request(), &[], now).await;
    assert_aws_error(response, 403, "InvalidSignatureException", "does not match the signature").await;

    let wrong_region = signer(Credentials::fake(), "us-west-2");
    let response = send_signed_at(&bedrock, &wrong_region, &path, &invoke_request(), &[], now).await;
    assert_aws_error(response, 403, "InvalidSignatureException", "scoped to a valid region, not 'us-west-2'").await;

    let mut wrong_service = signer(Credentials::fake(), REGION);
    wrong_service.service = "bedrock-runtime".to_owned();
    let response = send_signed_at(&bedrock, &wrong_service, &path, &invoke_request(), &[], now).await;
    assert_aws_error(response, 403, "InvalidSignatureException", "correct service: 'bedrock'").await;

    let stale = signer(Credentials::fake(), REGION);
    let response =
        send_signed_at(&bedrock, &stale, &path, &invoke_request(), &[], now - Duration::from_secs(600)).await;
    assert_aws_error(response, 403, "InvalidSignatureException", "Signature expired").await;

    let token = signer(Credentials::fake().with_session_token("not-expected"), REGION);
    let response = send_signed_at(&bedrock, &token, &path, &invoke_request(), &[], now).await;
    assert_aws_error(response, 403, "UnrecognizedClientException", bedrock_wire::INVALID_TOKEN_MESSAGE).await;

    let response = client()
        .post(format!("{}{path}", bedrock.base_url()))
        .header("content-type", "application/json")
        .body(invoke_request().to_string())
        .send()
        .await
        .unwrap();
    assert_aws_error(response, 403, "MissingAuthenticationTokenException", "Missing Authentication Token").await;

    // A signed request whose body changed on the way.
    let mut headers = vec![("host".to_owned(), bedrock.addr().to_string())];
    TestSigner::new(Credentials::fake(), REGION).sign("POST", &path, &mut headers, b"{\"a\":1}", now);
    let mut request = client().post(format!("{}{path}", bedrock.base_url())).body("{\"a\":2}");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    assert_aws_error(response, 403, "InvalidSignatureException", "does not match the signature").await;

    let received = bedrock.received();
    assert_eq!(received.len(), 8);
    assert!(received.iter().all(|r| r.verdict.is_err()));
    let last = received.last().unwrap().verdict.as_ref().unwrap_err();
    assert!(last.canonical_request.as_deref().unwrap().starts_with("POST\n/model/us.anthropic.claude-sonnet-4-5"));
    assert!(last.string_to_sign.as_deref().unwrap().starts_with("AWS4-HMAC-SHA256\n"));
    assert_eq!(bedrock.queued(), 1, "no rejected request reaches the model");

    let response = send(&bedrock, &path, &invoke_request()).await;
    assert_eq!(response.json::<Value>().await.unwrap()["content"][0]["text"], "for a signed request only");
}

#[tokio::test]
async fn unknown_routes_and_scripted_errors() {
    let bedrock = FakeBedrock::start().await;
    let response = send(&bedrock, &format!("/model/{MODEL_ID}/chat"), &json!({})).await;
    assert_aws_error(response, 404, "UnknownOperationException", "UnknownOperation").await;

    bedrock.push(bedrock_wire::throttling());
    bedrock.push(bedrock_wire::on_demand_not_supported("anthropic.claude-3-7-sonnet-20250219-v1:0"));
    bedrock.push(bedrock_wire::service_unavailable());
    let path = format!("/model/{MODEL_ID}/converse");
    let response = send(&bedrock, &path, &converse_request()).await;
    assert_aws_error(response, 429, "ThrottlingException", "Too many requests").await;
    let response = send(&bedrock, &path, &converse_request()).await;
    assert_aws_error(response, 400, "ValidationException", "on-demand throughput isn't supported").await;
    let response = send(&bedrock, &path, &converse_request()).await;
    assert_aws_error(response, 503, "ServiceUnavailableException", "unavailable").await;
}

#[tokio::test]
async fn drops_and_delays_are_played() {
    let bedrock = FakeBedrock::start().await;
    let path = format!("/model/{MODEL_ID}/invoke");
    bedrock.push(Scripted::Drop);
    bedrock.push(bedrock_wire::invoke_text("late").after(Duration::from_millis(300)));
    let signer = TestSigner::new(Credentials::fake(), REGION);
    let mut headers = vec![("host".to_owned(), bedrock.addr().to_string())];
    let body = invoke_request().to_string();
    signer.sign("POST", &path, &mut headers, body.as_bytes(), SystemTime::now());
    let mut request = client().post(format!("{}{path}", bedrock.base_url())).body(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    assert!(request.send().await.is_err(), "the connection is reset without an answer");

    let started = Instant::now();
    let response = send(&bedrock, &path, &invoke_request()).await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(response.json::<Value>().await.unwrap()["content"][0]["text"], "late");
}

// ---------------------------------------------------------------------------------------
// Event streams
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_converse_stream_split_into_small_writes_decodes_into_the_frames_written() {
    let bedrock = FakeBedrock::start().await;
    bedrock.push(bedrock_wire::event_stream_split(bedrock_wire::converse_stream_frames(), 7));
    let response = send(&bedrock, &format!("/model/{MODEL_ID}/converse-stream"), &converse_request()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], bedrock_wire::EVENT_STREAM_CONTENT_TYPE);
    let frames: Vec<Message> = read_frames(response).await.into_iter().map(Result::unwrap).collect();

    let expected = bedrock_wire::converse_stream_events();
    assert_eq!(frames.len(), expected.len());
    for (frame, (name, event)) in frames.iter().zip(&expected) {
        assert_eq!(header(frame, ":message-type"), "event");
        assert_eq!(header(frame, ":event-type"), *name);
        assert_eq!(header(frame, ":content-type"), "application/json");
        let mut body = payload(frame);
        assert!(body.as_object_mut().unwrap().remove("p").is_some(), "padded");
        assert_eq!(&body, event);
    }
    let tool_input: String = frames
        .iter()
        .filter_map(|frame| payload(frame).pointer("/delta/toolUse/input").and_then(Value::as_str).map(str::to_owned))
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&tool_input).unwrap(), json!({"city": "Paris"}));
    assert_eq!(bedrock.received()[0].operation, Operation::ConverseStream);
}

#[tokio::test]
async fn an_invoke_stream_carries_the_claude_events_in_base64() {
    let bedrock = FakeBedrock::start().await;
    // Unscripted: the canned Claude stream, one frame per write.
    let response = send(&bedrock, &format!("/model/{MODEL_ID}/invoke-with-response-stream"), &invoke_request()).await;
    assert_eq!(response.headers()["x-amzn-bedrock-content-type"], "application/json");
    let frames = read_frames(response).await;
    let events: Vec<Value> = frames
        .into_iter()
        .map(|frame| {
            let frame = frame.unwrap();
            assert_eq!(header(&frame, ":event-type"), "chunk");
            let bytes = payload(&frame)["bytes"].as_str().unwrap().to_owned();
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(bytes).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(events, bedrock_wire::claude_stream_events());
    assert_eq!(events.last().unwrap()["amazon-bedrock-invocationMetrics"]["outputTokenCount"], 42);
}

#[tokio::test]
async fn exceptions_and_a_corrupted_frame_arrive_as_written() {
    let bedrock = FakeBedrock::start().await;
    let frames = bedrock_wire::claude_text_stream_frames(&["Hel", "lo"], "end_turn", 10, 2);
    bedrock.push(bedrock_wire::event_stream(vec![
        frames[0].clone(),
        bedrock_wire::exception("ThrottlingException", "Too many tokens, please wait before trying again."),
        bedrock_wire::model_stream_error("Model stream failed", 529, "Overloaded"),
        bedrock_wire::error_frame("InternalFailure", "boom"),
        bedrock_wire::corrupt_message_crc(&frames[1]),
        frames[2].clone(),
    ]));
    let path = format!("/model/{MODEL_ID}/invoke-with-response-stream");
    let decoded = read_frames(send(&bedrock, &path, &invoke_request()).await).await;
    assert_eq!(decoded.len(), 5, "decoding stops at the corrupted frame: {decoded:?}");
    let throttling = decoded[1].as_ref().unwrap();
    assert_eq!(header(throttling, ":message-type"), "exception");
    assert_eq!(header(throttling, ":exception-type"), "throttlingException");
    assert_eq!(payload(throttling)["message"], "Too many tokens, please wait before trying again.");
    let stream_error = decoded[2].as_ref().unwrap();
    assert_eq!(header(stream_error, ":exception-type"), "modelStreamErrorException");
    assert_eq!(payload(stream_error)["originalStatusCode"], 529);
    let error = decoded[3].as_ref().unwrap();
    assert_eq!(header(error, ":message-type"), "error");
    assert_eq!(header(error, ":error-code"), "InternalFailure");
    let failure = decoded[4].as_ref().unwrap_err();
    assert!(failure.to_lowercase().contains("message checksum"), "{failure}");
}

#[tokio::test]
async fn a_dropped_stream_ends_without_its_body_end() {
    let bedrock = FakeBedrock::start().await;
    let frames =
        bedrock_wire::converse_text_stream_frames(&["a", "b"], "end_turn", bedrock_wire::converse_usage(1, 2, 0, 0));
    bedrock.push(bedrock_wire::event_stream_then_drop(frames[..2].to_vec()));
    let mut response = send(&bedrock, &format!("/model/{MODEL_ID}/converse-stream"), &converse_request()).await;
    assert_eq!(response.status(), 200);
    let mut received = Vec::<Bytes>::new();
    let failed = loop {
        match response.chunk().await {
            Ok(Some(piece)) => received.push(piece),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(failed, "the body ends in an error, not a clean end");
    assert_eq!(received.concat(), frames[..2].concat());
}

// ---------------------------------------------------------------------------------------
// Embedding and rerank models (InvokeModel)
// ---------------------------------------------------------------------------------------

fn invoke_path(model_id: &str) -> String {
    format!("/model/{model_id}/invoke")
}

fn floats(value: &Value) -> Vec<f32> {
    value.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
}

#[tokio::test]
async fn titan_answers_one_input_per_request_and_refuses_several() {
    let bedrock = FakeBedrock::start().await;
    let path = invoke_path(retrieval::TITAN_EMBED_V2);
    let response =
        send(&bedrock, &path, &json!({"inputText": "the quick fox", "dimensions": 512, "normalize": true})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-amzn-bedrock-input-token-count"], "3");
    assert_eq!(response.headers()["x-amzn-requestid"], bedrock_wire::REQUEST_ID);
    let body: Value = response.json().await.unwrap();
    assert_eq!(floats(&body["embedding"]), retrieval::titan_vector("the quick fox", 512, true));
    assert_eq!(body["inputTextTokenCount"], 3);

    let response = send(&bedrock, &path, &json!({"inputText": "no width"})).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["embedding"].as_array().unwrap().len(), retrieval::TITAN_NATIVE_DIMENSIONS);

    let response = send(&bedrock, &path, &json!({"inputText": ["one", "two"]})).await;
    assert_aws_error(response, 400, "ValidationException", "#/inputText: expected type: String, found: JSONArray")
        .await;
    let response = send(&bedrock, &path, &json!({"texts": ["one", "two"]})).await;
    assert_aws_error(response, 400, "ValidationException", "extraneous key [texts] is not permitted").await;
    let response = send(&bedrock, &path, &json!({"inputText": "x", "dimensions": 300})).await;
    assert_aws_error(response, 400, "ValidationException", "#/dimensions: 300 is not a valid enum value").await;

    let titan = bedrock.received_for_model(retrieval::TITAN_EMBED_V2);
    assert_eq!(titan.len(), 5);
    assert!(titan.iter().all(|r| r.signed_ok() && r.operation == Operation::InvokeModel));
    assert_eq!(titan[0].json()["dimensions"], 512);
    assert!(bedrock.received_for_model(retrieval::COHERE_EMBED_V4).is_empty());
}

#[tokio::test]
async fn cohere_embed_records_every_rule_and_answers_both_shapes() {
    let bedrock = FakeBedrock::start().await;
    let v4 = "us.cohere.embed-v4:0";
    let request = json!({"texts": ["alpha beta", "gamma"], "input_type": "search_query", "truncate": "NONE",
                         "output_dimension": 256, "embedding_types": ["float"]});
    let response = send(&bedrock, &invoke_path(v4), &request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-amzn-bedrock-input-token-count"], "3");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["response_type"], "embeddings_by_type");
    let vectors = body["embeddings"]["float"].as_array().unwrap();
    assert_eq!(floats(&vectors[0]), retrieval::cohere_vector("alpha beta", "search_query", 256));
    assert_eq!(floats(&vectors[1]), retrieval::cohere_vector("gamma", "search_query", 256));

    // v3, `:`-free id, no embedding_types: a plain list; the id sent `%3A`-encoded for v4 too.
    let v3 = json!({"texts": ["alpha beta"], "input_type": "search_document", "truncate": "NONE",
                    "output_dimension": 1024});
    let body: Value = send(&bedrock, &invoke_path(retrieval::COHERE_EMBED_ENGLISH_V3), &v3).await.json().await.unwrap();
    assert_eq!(body["response_type"], "embeddings_floats");
    assert_eq!(floats(&body["embeddings"][0]), retrieval::cohere_vector("alpha beta", "search_document", 1024));
    let encoded = "/model/us.cohere.embed-v4%3A0/invoke";
    assert_eq!(send(&bedrock, encoded, &request).await.status(), 200);

    let too_many: Vec<String> = (0..97).map(|i| format!("text {i}")).collect();
    let response = send(&bedrock, &invoke_path(v4), &json!({"texts": too_many, "input_type": "search_query"})).await;
    assert_aws_error(response, 400, "ValidationException", "expected maximum item count: 96, found: 97").await;
    let response =
        send(&bedrock, &invoke_path(v4), &json!({"texts": ["a"], "input_type": "search_query", "truncate": "END"}))
            .await;
    assert_aws_error(response, 400, "ValidationException", "#/truncate: END is not a valid enum value").await;

    let sent = bedrock.received_for_model(v4);
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[0].json()["input_type"], "search_query");
    assert_eq!(sent[0].json()["output_dimension"], 256);
    assert_eq!(sent[0].json()["truncate"], "NONE");
    assert_eq!(sent[1].path, encoded);
    assert_eq!(
        bedrock.received_for_model(retrieval::COHERE_EMBED_ENGLISH_V3)[0].json()["input_type"],
        "search_document"
    );
}

#[tokio::test]
async fn the_wrong_length_switch_shortens_every_vector_until_cleared() {
    let bedrock = FakeBedrock::start().await;
    bedrock.answer_wrong_length_vectors(true);
    let cohere = json!({"texts": ["a", "b"], "input_type": "search_document", "output_dimension": 512});
    let body: Value = send(&bedrock, &invoke_path(retrieval::COHERE_EMBED_V4), &cohere).await.json().await.unwrap();
    assert!(body["embeddings"].as_array().unwrap().iter().all(|v| v.as_array().unwrap().len() == 511));
    let body: Value =
        send(&bedrock, &invoke_path(retrieval::TITAN_EMBED_V2), &json!({"inputText": "a"})).await.json().await.unwrap();
    assert_eq!(body["embedding"].as_array().unwrap().len(), retrieval::TITAN_NATIVE_DIMENSIONS - 1);
    bedrock.answer_wrong_length_vectors(false);
    let body: Value = send(&bedrock, &invoke_path(retrieval::COHERE_EMBED_V4), &cohere).await.json().await.unwrap();
    assert_eq!(body["embeddings"][0].as_array().unwrap().len(), 512);
}

#[tokio::test]
async fn cohere_rerank_ranks_by_the_query() {
    let bedrock = FakeBedrock::start().await;
    let request = json!({
        "query": "capital of France",
        "documents": ["Berlin is in Germany", "Paris is the capital of France", "The capital of Spain is Madrid"],
        "top_n": 2,
        "api_version": 2,
    });
    let response = send(&bedrock, &invoke_path(retrieval::COHERE_RERANK_V3_5), &request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-amzn-bedrock-input-token-count"], "19");
    let body: Value = response.json().await.unwrap();
    let indices: Vec<u64> = body["results"].as_array().unwrap().iter().map(|r| r["index"].as_u64().unwrap()).collect();
    assert_eq!(indices, [1, 2]);
    assert_eq!(body["results"][0]["relevance_score"], 1.0);
    assert_eq!(body["meta"]["billed_units"]["search_units"], 1);

    let response =
        send(&bedrock, &invoke_path(retrieval::COHERE_RERANK_V3_5), &json!({"query": "q", "documents": ["d"]})).await;
    assert_aws_error(response, 400, "ValidationException", "required key [api_version] not found").await;
}

#[tokio::test]
async fn retrieval_models_are_signed_scripted_and_invoke_only() {
    let bedrock = FakeBedrock::start().await;
    let path = invoke_path(retrieval::COHERE_EMBED_V4);
    let body = json!({"texts": ["a"], "input_type": "search_query", "output_dimension": 256});
    let wrong_secret = TestSigner::new(Credentials::new(bedrock_wire::ACCESS_KEY_ID, "wrong"), REGION);
    let response = send_signed_at(&bedrock, &wrong_secret, &path, &body, &[], SystemTime::now()).await;
    assert_aws_error(response, 403, "InvalidSignatureException", "does not match the signature").await;

    // A scripted answer comes before the computed one.
    bedrock.push(bedrock_wire::throttling());
    let response = send(&bedrock, &path, &body).await;
    assert_aws_error(response, 429, "ThrottlingException", "Too many requests").await;
    assert_eq!(send(&bedrock, &path, &body).await.status(), 200);

    let converse = format!("/model/{}/converse", retrieval::TITAN_EMBED_V2);
    let response = send(&bedrock, &converse, &converse_request()).await;
    assert_aws_error(response, 400, "ValidationException", "doesn't support this operation").await;
    let stream = format!("/model/{}/invoke-with-response-stream", retrieval::COHERE_EMBED_V4);
    assert_aws_error(send(&bedrock, &stream, &body).await, 400, "ValidationException", "InvokeModel").await;

    let verdicts: Vec<bool> = bedrock.received().iter().map(|r| r.signed_ok()).collect();
    assert_eq!(verdicts, [false, true, true, true, true]);
}

/// The bedrock-retrieval component's codec (natively) and the host's SigV4 signer
/// against the fake: what `encode` writes passes the fake's schema checks, and `decode`
/// reads what the fake answers. The same codec runs in the component the host embeds.
#[tokio::test]
async fn the_retrieval_codec_and_the_host_signer_speak_the_fakes_wire() {
    use weir_host::transport::{IdentitySource, SigV4};
    use weir_provider_bedrock_retrieval::{BEDROCK_RETRIEVAL, BedrockRetrieval};
    use weir_sdk::types::{EmbeddingParams, EmbeddingPurpose, ErrorClass, HttpRequest, HttpResponse, RerankParams};
    use weir_sdk::{EmbeddingProvider, RerankProvider};

    let bedrock = FakeBedrock::start().await;
    let signer = SigV4 {
        credentials: aws_credential_types::Credentials::new(
            bedrock_wire::ACCESS_KEY_ID,
            bedrock_wire::SECRET_ACCESS_KEY,
            None,
            None,
            "fake-bedrock-test",
        ),
        region: REGION.to_owned(),
        service: "bedrock".to_owned(),
        source: IdentitySource::SecretStore,
    };
    let call = async |request: HttpRequest| -> HttpResponse {
        let mut builder = client().post(format!("{}{}", bedrock.base_url(), request.path_and_query)).body(request.body);
        for (name, value) in request.headers {
            builder = builder.header(name, value);
        }
        let mut request = builder.build().unwrap();
        signer.sign(&mut request).unwrap();
        let response = client().execute(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
            .collect();
        HttpResponse { status, headers, body: response.bytes().await.unwrap().to_vec() }
    };
    let params = |id: &str, purpose, dimensions| EmbeddingParams { wire_model_id: id.to_owned(), purpose, dimensions };
    let texts = |items: &[&str]| items.iter().map(|item| (*item).to_owned()).collect::<Vec<String>>();

    // Titan: one input, the width asked, tokens from the header.
    let request = <BedrockRetrieval as EmbeddingProvider>::encode(
        BEDROCK_RETRIEVAL,
        texts(&["hello there"]),
        params(retrieval::TITAN_EMBED_V2, EmbeddingPurpose::Query, Some(256)),
    )
    .unwrap();
    let response = call(request).await;
    assert_eq!(response.status, 200, "{}", String::from_utf8_lossy(&response.body));
    let decoded = <BedrockRetrieval as EmbeddingProvider>::decode(BEDROCK_RETRIEVAL, response).unwrap();
    assert_eq!(decoded.vectors, vec![retrieval::titan_vector("hello there", 256, true)]);
    assert_eq!(decoded.input_tokens, Some(2));
    assert_eq!(decoded.request_id.as_deref(), Some(bedrock_wire::REQUEST_ID));

    // Cohere v4 and v3: purpose → input_type, the pinned width, both accepted as sent.
    for (id, purpose, input_type, width) in [
        ("us.cohere.embed-v4:0", EmbeddingPurpose::Query, "search_query", 512),
        (retrieval::COHERE_EMBED_MULTILINGUAL_V3, EmbeddingPurpose::Document, "search_document", 1024),
    ] {
        let request = <BedrockRetrieval as EmbeddingProvider>::encode(
            BEDROCK_RETRIEVAL,
            texts(&["one", "two words"]),
            params(id, purpose, Some(width)),
        )
        .unwrap();
        let response = call(request).await;
        assert_eq!(response.status, 200, "{id}: {}", String::from_utf8_lossy(&response.body));
        let decoded = <BedrockRetrieval as EmbeddingProvider>::decode(BEDROCK_RETRIEVAL, response).unwrap();
        let expected: Vec<Vec<f32>> = ["one", "two words"]
            .iter()
            .map(|text| retrieval::cohere_vector(text, input_type, width as usize))
            .collect();
        assert_eq!(decoded.vectors, expected, "{id}");
        assert_eq!(decoded.input_tokens, Some(3), "{id}");
        let sent = bedrock.received_for_model(id).pop().unwrap();
        assert!(sent.signed_ok(), "{id}: {:?}", sent.verdict);
        assert_eq!(sent.json()["truncate"], "NONE");
    }

    // A wrong-length answer decodes as sent: refusing it is the host's length check.
    bedrock.answer_wrong_length_vectors(true);
    let request = <BedrockRetrieval as EmbeddingProvider>::encode(
        BEDROCK_RETRIEVAL,
        texts(&["x"]),
        params(retrieval::COHERE_EMBED_V4, EmbeddingPurpose::Query, Some(256)),
    )
    .unwrap();
    let decoded = <BedrockRetrieval as EmbeddingProvider>::decode(BEDROCK_RETRIEVAL, call(request).await).unwrap();
    assert_eq!(decoded.vectors[0].len(), 255);
    bedrock.answer_wrong_length_vectors(false);

    // Rerank.
    let rerank = RerankParams { wire_model_id: retrieval::COHERE_RERANK_V3_5.to_owned(), top_n: Some(1) };
    let request = <BedrockRetrieval as RerankProvider>::encode(
        BEDROCK_RETRIEVAL,
        "red apples".to_owned(),
        texts(&["green pears", "red apples and more"]),
        rerank,
    )
    .unwrap();
    let decoded = <BedrockRetrieval as RerankProvider>::decode(BEDROCK_RETRIEVAL, call(request).await).unwrap();
    assert_eq!(decoded.results.len(), 1);
    assert_eq!((decoded.results[0].index, decoded.results[0].relevance_score), (1, 1.0));
    assert_eq!(decoded.search_units, Some(1));

    // A throttled answer classifies as rate-limited.
    bedrock.push(bedrock_wire::throttling());
    let request = <BedrockRetrieval as EmbeddingProvider>::encode(
        BEDROCK_RETRIEVAL,
        texts(&["x"]),
        params(retrieval::TITAN_EMBED_V2, EmbeddingPurpose::Document, None),
    )
    .unwrap();
    let response = call(request).await;
    assert_eq!(response.status, 429);
    let class = <BedrockRetrieval as EmbeddingProvider>::classify(BEDROCK_RETRIEVAL, response);
    assert!(matches!(class, ErrorClass::RateLimited(_)), "{class:?}");
    assert!(bedrock.received().iter().all(|r| r.signed_ok()));
}
