//! Operations by export, through real components instantiated by wasmtime: a
//! `weir:provider@0.1.0` chat component still loads and answers every chat
//! call (`tests/operations`, feature `chat-0-1`, built against
//! `wit/frozen/0.1.0`), and 0.3.0 components exporting only embeddings or only
//! rerank load, say which operations they export, and round-trip their calls.
//! Each guest is written with wit-bindgen directly, without the SDK.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use weir_host::plugin::{
    ComponentSource, Operation, PluginEngine, PluginError, Provider, ProviderRegistry, component_digest,
};
use weir_host::reach::Trust;
use weir_host::types::{
    AnswerBlock, CallParams, Capabilities, CodecError, ContentBlock, Conversation, Effort, EmbeddingParams,
    EmbeddingPurpose, ErrorClass, HttpRequest, HttpResponse, NativeRequest, Ranked, RerankParams, RetryHint,
    StopReason, StreamDelta, StreamEvent,
};

fn cache_dir() -> PathBuf {
    std::env::temp_dir().join("weir-operations-test-cache")
}

fn engine() -> PluginEngine {
    PluginEngine::new(Some(cache_dir())).expect("engine")
}

/// The one provider key of the component at `path`, freshly loaded (so with
/// an empty answer cache of its own).
fn load(engine: &PluginEngine, path: &str) -> Provider {
    let bytes = std::fs::read(path).expect("built by tests/build.rs");
    let component = engine
        .load(ComponentSource::File(PathBuf::from(path)), &bytes, component_digest(&bytes))
        .unwrap_or_else(|reason| panic!("{path} loads: {reason}"));
    let component = Arc::new(component);
    assert_eq!(component.providers.len(), 1, "{:?}", component.providers);
    Provider::new(component.providers[0].clone(), Arc::clone(&component), Trust::Untrusted)
}

fn chat_0_1() -> Provider {
    load(&engine(), env!("WEIR_CHAT_0_1_WASM"))
}

fn embed_only() -> Provider {
    load(&engine(), env!("WEIR_EMBED_ONLY_WASM"))
}

fn rerank_only() -> Provider {
    load(&engine(), env!("WEIR_RERANK_ONLY_WASM"))
}

fn response(status: u16, headers: &[(&str, &str)], body: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        body: body.as_bytes().to_vec(),
    }
}

fn json_body(request: &HttpRequest) -> serde_json::Value {
    serde_json::from_slice(&request.body).expect("request body is JSON")
}

fn embedding_params(wire: &str) -> EmbeddingParams {
    EmbeddingParams { wire_model_id: wire.to_owned(), purpose: EmbeddingPurpose::Query, dimensions: Some(3) }
}

fn inputs(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|text| (*text).to_owned()).collect()
}

fn fault_reason(result: Result<impl std::fmt::Debug, PluginError>) -> String {
    match result {
        Err(PluginError::Fault { reason, .. }) => reason,
        other => panic!("expected a fault, got {other:?}"),
    }
}

fn sse(data: &str) -> StreamEvent {
    StreamEvent { name: None, headers: Vec::new(), data: data.as_bytes().to_vec() }
}

#[tokio::test]
async fn a_0_1_0_chat_component_loads_and_answers_encode_decode_classify_and_streams() {
    let legacy = chat_0_1();
    assert_eq!(legacy.key(), "legacy");
    assert_eq!(legacy.component().world_version, "0.1.0");
    assert_eq!(legacy.component().operations(), vec![Operation::Chat]);
    assert!(legacy.exports(Operation::Chat) && !legacy.exports(Operation::Embeddings));
    assert!(!legacy.exports(Operation::Rerank));

    // `describe`, through the same typed functions as a 0.3.0 component's.
    let answers = legacy.answers("legacy-small").unwrap();
    assert!(answers.serves && answers.claims, "{answers:?}");
    assert!(!legacy.serves("not-served").unwrap());
    assert!(legacy.serves_operation(Operation::Chat, "legacy-small").unwrap());
    assert!(!legacy.serves_operation(Operation::Embeddings, "legacy-small").unwrap(), "it exports no embeddings");

    let params = CallParams {
        wire_model_id: "legacy-small".to_owned(),
        max_tokens: 7,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: None,
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    };
    let request = legacy.encode(&Conversation::user("Hello, 0.1.0"), &params).await.unwrap();
    assert_eq!((request.method.as_str(), request.path_and_query.as_str()), ("POST", "/complete"));
    assert_eq!(
        json_body(&request),
        serde_json::json!({"model": "legacy-small", "max_tokens": 7, "prompt": "Hello, 0.1.0"})
    );

    let decoded = legacy
        .decode(&response(200, &[("x-request-id", "req-1")], r#"{"text":"hi back","input":4,"output":2,"model":"m1"}"#))
        .await
        .unwrap();
    assert_eq!(decoded.content, vec![ContentBlock::Text("hi back".to_owned())]);
    assert_eq!(decoded.stop_reason, StopReason::EndTurn);
    assert_eq!(decoded.usage.map(|usage| (usage.input, usage.output)), Some((4, 2)));
    assert_eq!((decoded.served_model.as_deref(), decoded.request_id.as_deref()), (Some("m1"), Some("req-1")));
    match legacy.decode(&response(200, &[], "not json")).await {
        Err(PluginError::Codec { error: CodecError::Malformed(_), .. }) => {}
        other => panic!("a malformed body is the component's codec error: {other:?}"),
    }

    match legacy.classify(&response(429, &[("retry-after", "3")], "slow down")).await.unwrap() {
        ErrorClass::RateLimited(retry) => {
            assert_eq!(retry.hint, Some(RetryHint::DelayMs(3_000)));
            assert_eq!(retry.detail, "slow down");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(legacy.classify(&response(401, &[], "no")).await.unwrap(), ErrorClass::Authentication(_)));

    // The stream decoder resource: constructor and both methods, with state kept
    // across events in its one instance.
    let mut stream = legacy.open_stream().await.unwrap();
    assert_eq!(stream.feed(&sse("Hel")).await.unwrap(), vec![StreamDelta::Text("Hel".to_owned())]);
    assert_eq!(stream.feed(&sse("lo")).await.unwrap(), vec![StreamDelta::Text("lo".to_owned())]);
    assert!(matches!(stream.feed(&sse("[DONE]")).await.unwrap().as_slice(), [StreamDelta::Stop(_)]));
    match stream.finish().await.unwrap().as_slice() {
        [StreamDelta::Usage(usage)] => assert_eq!(usage.output, 2, "the decoder counted both pieces"),
        other => panic!("{other:?}"),
    }

    // It exports no embeddings and no rerank: asking for them is a fault naming the operation.
    let reason = fault_reason(legacy.session().embed_encode(&inputs(&["a"]), &embedding_params("m"), None).await);
    assert!(reason.contains("does not export `embeddings`"), "{reason}");
    let reason = fault_reason(legacy.session().rerank_decode(&response(200, &[], "{}")).await);
    assert!(reason.contains("does not export `rerank`"), "{reason}");
    let reason = fault_reason(legacy.max_batch("m"));
    assert!(reason.contains("does not export `embeddings`"), "{reason}");
}

/// The same chat component built against the frozen 0.4.0 WIT and against
/// 0.5.0: the first takes 0.4.0's `call-params` and gives 0.4.0's
/// `provider-info` through the host's conversion, so its `temperature` is the
/// `f32` it always got and its one `images` flag reads as both sources; the
/// second gets the caller's `f64`. Both encode, decode, classify and stream.
#[tokio::test]
async fn a_0_4_0_component_loads_through_the_conversion_and_gets_an_f32_temperature() {
    for (path, version, temperature) in [
        (env!("WEIR_CHAT_0_4_WASM"), "0.4.0", serde_json::json!(f64::from(0.3_f32))),
        (env!("WEIR_CHAT_0_5_WASM"), "0.5.0", serde_json::json!(0.3)),
        (env!("WEIR_CHAT_0_6_WASM"), "0.6.0", serde_json::json!(0.3)),
    ] {
        let versioned = load(&engine(), path);
        assert_eq!(versioned.key(), "versioned");
        assert_eq!(versioned.component().world_version, version);
        assert_eq!(versioned.component().operations(), vec![Operation::Chat, Operation::Logprobs, Operation::Native]);
        assert_eq!(
            versioned.info().capabilities,
            Capabilities::STREAMING | Capabilities::INLINE_IMAGES | Capabilities::IMAGE_URLS,
            "{version}: 0.4.0's `images` is both sources"
        );
        assert!(versioned.serves("versioned-small").unwrap() && !versioned.serves("not-served").unwrap());

        let params = CallParams {
            temperature: Some(0.3),
            reasoning_effort: Some(Effort::High),
            thinking_budget: Some(2048),
            stop: vec!["END".to_owned()],
            ..CallParams::new("versioned-small", 9)
        };
        let request = versioned.encode(&Conversation::user("Hello"), &params).await.unwrap();
        let body = json_body(&request);
        assert_eq!(body["temperature"], temperature, "{version}: {body}");
        assert_eq!(
            (body["model"].clone(), body["max_tokens"].clone()),
            (serde_json::json!("versioned-small"), serde_json::json!(9))
        );
        assert_eq!(body["prompt"], "Hello");
        let text = String::from_utf8(request.body.clone()).unwrap();
        match version {
            "0.4.0" => assert!(text.contains("\"temperature\":0.30000001192092896"), "{text}"),
            _ => assert!(text.contains("\"temperature\":0.3") && !text.contains("0.30000001"), "{text}"),
        }
        let streaming = CallParams { stream: true, ..params.clone() };
        assert_eq!(json_body(&versioned.encode(&Conversation::user("Hi"), &streaming).await.unwrap())["stream"], true);

        let decoded =
            versioned.decode(&response(200, &[], r#"{"text":"hi back","input":3,"output":2}"#)).await.unwrap();
        assert_eq!(decoded.content, vec![ContentBlock::Text("hi back".to_owned())]);
        assert_eq!(decoded.usage.map(|usage| (usage.input, usage.output)), Some((3, 2)));
        assert!(matches!(versioned.classify(&response(429, &[], "slow")).await.unwrap(), ErrorClass::RateLimited(_)));

        let mut stream = versioned.open_stream().await.unwrap();
        assert_eq!(stream.feed(&sse("Hel")).await.unwrap(), vec![StreamDelta::Text("Hel".to_owned())]);
        assert_eq!(stream.feed(&sse("lo")).await.unwrap(), vec![StreamDelta::Text("lo".to_owned())]);
        assert!(matches!(stream.feed(&sse("[DONE]")).await.unwrap().as_slice(), [StreamDelta::Stop(_)]));
        match stream.finish().await.unwrap().as_slice() {
            [StreamDelta::Usage(usage)] => assert_eq!(usage.output, 2, "{version}"),
            other => panic!("{version}: {other:?}"),
        }

        // `native`'s encodes take `call-params` too: converted alike.
        let support = versioned.native_support("versioned-small").unwrap().expect("it exports native");
        assert_eq!((support.dialect.as_str(), support.fields.as_slice()), ("versioned", &["extra".to_owned()][..]));
        let native = NativeRequest {
            dialect: "versioned".to_owned(),
            fields_json: r#"{"extra":1}"#.to_owned(),
            betas: Vec::new(),
        };
        let conversation = Conversation::user("Hello");
        let mut session = versioned.session();
        let sent = session.encode_native(&conversation, &params, &native, None).await.unwrap();
        let body = json_body(&sent);
        assert_eq!((sent.path_and_query.as_str(), body["extra"].clone()), ("/complete", serde_json::json!(1)));
        assert_eq!(body["temperature"], temperature, "{version}: native.encode");
        let count = session.count_tokens_encode(&conversation, &params, &native, None).await.unwrap();
        assert_eq!(count.path_and_query, "/count");
        assert_eq!(json_body(&count)["temperature"], temperature, "{version}: native.count-tokens-encode");
        assert_eq!(session.count_tokens_decode(&response(200, &[], r#"{"tokens":12}"#)).await.unwrap(), 12);

        // And `logprobs.encode`.
        let sent = session.logprobs_encode(&conversation, &params, 5, None).await.unwrap();
        let body = json_body(&sent);
        assert_eq!((body["temperature"].clone(), body["top_logprobs"].clone()), (temperature, serde_json::json!(5)));
        let first = session.logprobs_decode(&response(200, &[], r#"{"candidates":[["yes",-0.25]]}"#)).await.unwrap();
        assert_eq!(first.candidates.len(), 1);
        assert_eq!((first.candidates[0].token.as_str(), first.candidates[0].logprob), ("yes", -0.25));
    }
}

/// A 0.6.0 component answers `decode-native` but has no `native-stream` (0.7.0 added it):
/// its streams with hosted tools are taken whole, as before. Of the first-party
/// components, the Anthropic direct API's key and OpenAI's Responses key open one,
/// InvokeModel's and Chat Completions' none (their such streams are taken whole).
#[tokio::test]
async fn a_0_6_0_component_decodes_native_answers_and_opens_no_native_stream() {
    let versioned = load(&engine(), env!("WEIR_CHAT_0_6_WASM"));
    assert_eq!(versioned.component().world_version, "0.6.0");
    assert!(versioned.decodes_native());
    assert!(!versioned.streams_native().unwrap());
    let mut session = versioned.session();
    let answered = response(200, &[], r#"{"text":"hi","input":1,"output":1}"#);
    let answer = session.decode_native(&answered).await.unwrap();
    assert_eq!(answer.blocks, vec![AnswerBlock::Neutral(0)]);
    let registry = ProviderRegistry::load(&engine(), None).unwrap();
    assert!(registry.get("anthropic").unwrap().streams_native().unwrap());
    assert!(!registry.get("anthropic-bedrock").unwrap().streams_native().unwrap());
    assert!(registry.get("openai-responses").unwrap().streams_native().unwrap());
    assert!(!registry.get("openai").unwrap().streams_native().unwrap(), "Chat Completions carries no hosted items");
}

#[tokio::test]
async fn the_first_party_components_target_the_current_world() {
    let registry = ProviderRegistry::load(&engine(), None).unwrap();
    let openai = registry.get("openai").unwrap();
    assert_eq!(openai.component().world_version, "0.7.0");
    assert!(openai.exports(Operation::Chat));
    assert!(openai.serves_operation(Operation::Chat, "gpt-4.1").unwrap());
}

#[tokio::test]
async fn an_embeddings_only_component_loads_and_round_trips_its_calls() {
    let embed = embed_only();
    assert_eq!(embed.key(), "embed-only");
    assert_eq!(embed.component().world_version, "0.3.0");
    assert_eq!(embed.component().operations(), vec![Operation::Embeddings]);
    assert!(embed.exports(Operation::Embeddings));
    assert!(!embed.exports(Operation::Chat) && !embed.exports(Operation::Rerank));

    assert!(embed.serves_operation(Operation::Embeddings, "embed-small").unwrap());
    assert!(!embed.serves_operation(Operation::Embeddings, "not-served").unwrap());
    assert!(!embed.serves_operation(Operation::Chat, "embed-small").unwrap(), "it exports no chat");
    assert!(!embed.serves_operation(Operation::Rerank, "embed-small").unwrap(), "it exports no rerank");
    assert_eq!(embed.max_batch("embed-small").unwrap(), 4);
    assert_eq!(embed.max_batch("one-per-request").unwrap(), 1);

    let request = embed
        .session()
        .embed_encode(&inputs(&["first", "second"]), &embedding_params("embed-small"), None)
        .await
        .unwrap();
    assert_eq!((request.method.as_str(), request.path_and_query.as_str()), ("POST", "/embeddings"));
    assert_eq!(
        json_body(&request),
        serde_json::json!({"model": "embed-small", "input": ["first", "second"], "input_type": "query", "dimensions": 3})
    );
    let document = EmbeddingParams { purpose: EmbeddingPurpose::Document, dimensions: None, ..embedding_params("e") };
    let request = embed.session().embed_encode(&inputs(&["doc"]), &document, None).await.unwrap();
    assert_eq!(json_body(&request)["input_type"], "document");
    assert_eq!(json_body(&request)["dimensions"], serde_json::Value::Null);
    match embed.session().embed_encode(&[], &embedding_params("embed-small"), None).await {
        Err(PluginError::Codec { error: CodecError::Unsupported(_), .. }) => {}
        other => panic!("a refusal is the component's codec error: {other:?}"),
    }

    let body = r#"{"data":[{"embedding":[0.5,-1.0,2.0]},{"embedding":[0.0,0.25,1.5]}],"usage":{"prompt_tokens":9},"model":"embed-small-v1"}"#;
    let decoded = embed.session().embed_decode(&response(200, &[("x-request-id", "emb-1")], body)).await.unwrap();
    assert_eq!(decoded.vectors, vec![vec![0.5, -1.0, 2.0], vec![0.0, 0.25, 1.5]]);
    assert_eq!(decoded.input_tokens, Some(9));
    assert_eq!(decoded.served_model.as_deref(), Some("embed-small-v1"));
    assert_eq!(decoded.request_id.as_deref(), Some("emb-1"));
    let without_usage = embed.session().embed_decode(&response(200, &[], r#"{"data":[]}"#)).await.unwrap();
    assert_eq!((without_usage.vectors.len(), without_usage.input_tokens), (0, None));
    match embed.session().embed_decode(&response(200, &[], r#"{"data":[{"embedding":"no"}]}"#)).await {
        Err(PluginError::Codec { error: CodecError::Malformed(_), .. }) => {}
        other => panic!("{other:?}"),
    }

    assert!(matches!(
        embed.session().embed_classify(&response(429, &[], "busy")).await.unwrap(),
        ErrorClass::RateLimited(_)
    ));
    assert!(matches!(
        embed.session().embed_classify(&response(401, &[], "bad key")).await.unwrap(),
        ErrorClass::Authentication(detail) if detail == "bad key"
    ));

    // No chat, no rerank: each is a fault naming the operation, never a panic.
    let params = CallParams {
        wire_model_id: "embed-small".to_owned(),
        max_tokens: 5,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: None,
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    };
    let reason = fault_reason(embed.encode(&Conversation::user("hi"), &params).await);
    assert!(reason.contains("does not export `chat`"), "{reason}");
    assert!(fault_reason(embed.decode(&response(200, &[], "{}")).await).contains("`chat`"));
    assert!(fault_reason(embed.open_stream().await).contains("`chat`"));
    let reason = fault_reason(embed.session().rerank_encode("q", &inputs(&["d"]), &rerank_params(None), None).await);
    assert!(reason.contains("does not export `rerank`"), "{reason}");
}

fn rerank_params(top_n: Option<u32>) -> RerankParams {
    RerankParams { wire_model_id: "rerank-v1".to_owned(), top_n }
}

#[tokio::test]
async fn a_rerank_only_component_loads_and_round_trips_its_calls() {
    let rerank = rerank_only();
    assert_eq!(rerank.key(), "rerank-only");
    assert_eq!(rerank.component().world_version, "0.3.0");
    assert_eq!(rerank.component().operations(), vec![Operation::Rerank]);
    assert!(rerank.exports(Operation::Rerank) && !rerank.exports(Operation::Chat));
    assert!(!rerank.exports(Operation::Embeddings));
    assert!(rerank.serves_operation(Operation::Rerank, "rerank-v1").unwrap());
    assert!(!rerank.serves_operation(Operation::Rerank, "not-served").unwrap());
    assert!(!rerank.serves_operation(Operation::Embeddings, "rerank-v1").unwrap());

    let documents = inputs(&["a cat", "a dog", "a car"]);
    let request = rerank.session().rerank_encode("pets", &documents, &rerank_params(Some(2)), None).await.unwrap();
    assert_eq!((request.method.as_str(), request.path_and_query.as_str()), ("POST", "/rerank"));
    assert_eq!(
        json_body(&request),
        serde_json::json!({"model": "rerank-v1", "query": "pets", "documents": ["a cat", "a dog", "a car"], "top_n": 2})
    );

    let body = r#"{"id":"rr-1","results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":0.4}],"meta":{"billed_units":{"search_units":1}}}"#;
    let decoded = rerank.session().rerank_decode(&response(200, &[], body)).await.unwrap();
    assert_eq!(
        decoded.results,
        vec![Ranked { index: 1, relevance_score: 0.9 }, Ranked { index: 0, relevance_score: 0.4 }]
    );
    assert_eq!((decoded.search_units, decoded.input_tokens), (Some(1), None));
    assert_eq!(decoded.request_id.as_deref(), Some("rr-1"));
    match rerank.session().rerank_decode(&response(200, &[], r#"{"results":[{"index":1}]}"#)).await {
        Err(PluginError::Codec { error: CodecError::Malformed(_), .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        rerank.session().rerank_classify(&response(429, &[], "busy")).await.unwrap(),
        ErrorClass::RateLimited(_)
    ));
    assert!(matches!(
        rerank.session().rerank_classify(&response(400, &[], "bad")).await.unwrap(),
        ErrorClass::InvalidRequest(_)
    ));

    let reason = fault_reason(rerank.session().embed_classify(&response(429, &[], "")).await);
    assert!(reason.contains("does not export `embeddings`"), "{reason}");
    assert!(fault_reason(rerank.classify(&response(429, &[], "")).await).contains("does not export `chat`"));
}

#[test]
fn a_trapping_embeddings_serves_is_kept_as_the_components_fault() {
    let embed = embed_only();
    let reason = fault_reason(embed.serves_operation(Operation::Embeddings, "panics-in-serves"));
    assert!(reason.contains("trapped in `embeddings.serves`"), "{reason}");
    // Every later question, of any interface, gets the kept fault without a call.
    assert_eq!(fault_reason(embed.serves_operation(Operation::Embeddings, "embed-small")), reason);
    assert_eq!(fault_reason(embed.max_batch("embed-small")), reason);
    assert_eq!(fault_reason(embed.answers("embed-small")), reason);
}

#[test]
fn a_trapping_max_batch_is_kept_as_the_components_fault() {
    let embed = embed_only();
    let reason = fault_reason(embed.max_batch("panics-in-max-batch"));
    assert!(reason.contains("trapped in `embeddings.max-batch`"), "{reason}");
    assert_eq!(fault_reason(embed.serves_operation(Operation::Embeddings, "embed-small")), reason);
    assert_eq!(fault_reason(embed.max_batch("embed-small")), reason);
}

#[test]
fn a_max_batch_of_zero_is_a_fault_for_that_model_only() {
    let embed = embed_only();
    let reason = fault_reason(embed.max_batch("zero-batch"));
    assert!(reason.contains("max-batch 0"), "{reason}");
    assert!(fault_reason(embed.max_batch("zero-batch")).contains("max-batch 0"), "answered again from the cache");
    assert_eq!(embed.max_batch("embed-small").unwrap(), 4, "the component answers for its other models");
}

#[tokio::test]
async fn an_embed_encode_past_the_caps_is_refused_before_it_is_copied() {
    let embed = embed_only();
    let reason =
        fault_reason(embed.session().embed_encode(&inputs(&["x"]), &embedding_params("too-many-headers"), None).await);
    assert!(reason.contains("embeddings.encode") && reason.contains("headers (at most 64)"), "{reason}");
    assert!(reason.contains("100001"), "the length claimed, read before the lift: {reason}");
    // Only that call failed: the next one, in a fresh instance, is served.
    assert!(embed.session().embed_encode(&inputs(&["x"]), &embedding_params("embed-small"), None).await.is_ok());
}
