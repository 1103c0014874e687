//! The kit catches what it promises to catch: a deliberately careless provider
//! fails exactly the checks its flaws break, and fixtures compare what they say.

// Test code: the careless provider panics on purpose, and helpers fail the test.
#![allow(clippy::expect_used, clippy::panic)]

use std::path::Path;

use weir_conformance::fixture::{Framing, MediaSources, ProviderSummary};
use weir_conformance::{Outcome, Report, dialect};
use weir_sdk::ChatProvider;
use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ContentBlock, CredentialShape, ErrorClass, HeaderCredential,
    HttpRequest, HttpResponse, MediaSource, NativeAnswer, NativeRequest, NativeSupport, PreparedConversation,
    ProviderInfo, Retry, StopReason, StreamFraming,
};

/// Two keys, each with its own flaws:
/// - `leaky` writes the credential header itself;
/// - `sloppy` builds JSON by string formatting (no escaping), drops every block
///   that is not text, and never writes `max_tokens`.
///
/// Both panic on a body that is not JSON, decode `[]` into an answer, and classify
/// every failure as transient with the whole body as detail and no hint.
struct Careless;

fn info(key: &str) -> ProviderInfo {
    ProviderInfo {
        key: key.to_owned(),
        description: "careless".to_owned(),
        default_endpoint: Some("https://careless.example".to_owned()),
        credential: CredentialShape::Header(HeaderCredential {
            default_credential_id: "careless-key".to_owned(),
            header_name: "authorization".to_owned(),
            prefix: "Bearer ".to_owned(),
            required: true,
        }),
        capabilities: Capabilities::empty(),
        stream_framing: StreamFraming::Sse,
    }
}

impl ChatProvider for Careless {
    type StreamDecoder = weir_sdk::NoStreaming;

    fn providers() -> Vec<ProviderInfo> {
        vec![info("leaky"), info("sloppy")]
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        let texts: Vec<String> = conversation
            .system
            .iter()
            .cloned()
            .chain(conversation.turns.iter().flat_map(|turn| turn.content.iter()).filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.clone()),
                _ => None,
            }))
            .collect();
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        let body = if provider == "leaky" {
            headers.push(("Authorization".to_owned(), "Bearer sk-leaked".to_owned()));
            serde_json::json!({"model": params.wire_model_id, "max_tokens": params.max_tokens, "texts": texts})
                .to_string()
        } else {
            let quoted: Vec<String> = texts.iter().map(|text| format!("\"{text}\"")).collect();
            format!(r#"{{"model": "{}", "texts": [{}]}}"#, params.wire_model_id, quoted.join(","))
        };
        Ok(HttpRequest { method: "POST".into(), path_and_query: "/chat".into(), headers, body: body.into_bytes() })
    }

    fn decode(_provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        let _: serde_json::Value = serde_json::from_slice(&response.body).expect("careless: the body is JSON");
        Ok(ChatResponse {
            content: vec![ContentBlock::Text("fine".into())],
            stop_reason: StopReason::EndTurn,
            raw_stop_reason: None,
            usage: None,
            refusal: None,
            served_model: None,
            request_id: None,
        })
    }

    fn classify(_provider: &str, response: HttpResponse) -> ErrorClass {
        ErrorClass::Transient(Retry { hint: None, detail: String::from_utf8_lossy(&response.body).into_owned() })
    }
}

/// What the kit reads of a key's description.
fn summary(info: &ProviderInfo) -> ProviderSummary {
    ProviderSummary {
        key: info.key.clone(),
        default_endpoint: info.default_endpoint.clone(),
        credential_header: Some("authorization".to_owned()),
        streaming: false,
        framing: Framing::Sse,
        media: MediaSources::default(),
        thinking: false,
    }
}

fn outcome<'a>(report: &'a Report, provider: &str, name: &str) -> &'a Outcome {
    &report.find(provider, name).unwrap_or_else(|| panic!("no check {provider}: {name} in\n{report}")).outcome
}

fn failed_with(report: &Report, provider: &str, name: &str, reason: &str) {
    match outcome(report, provider, name) {
        Outcome::Failed(found) => assert!(found.contains(reason), "{provider}: {name}: {found}"),
        Outcome::Passed | Outcome::Refused(_) => panic!("{provider}: {name} passed; the kit missed a flaw\n{report}"),
    }
}

#[test]
fn every_flaw_of_a_careless_provider_is_caught() {
    let report = weir_conformance::native::run::<Careless>(None).unwrap();
    assert!(!report.passed());

    failed_with(
        &report,
        "leaky",
        "encode: a plain conversation gives a well-formed request without credentials",
        "carries `Authorization`",
    );
    assert_eq!(
        outcome(&report, "sloppy", "encode: a plain conversation gives a well-formed request without credentials"),
        &Outcome::Passed
    );
    assert_eq!(outcome(&report, "sloppy", "encode: the wire model id is sent"), &Outcome::Passed);
    failed_with(&report, "sloppy", "encode: the host's output reserve is written exactly", "max-tokens (1234)");
    failed_with(&report, "sloppy", "encode: quotes, escapes, NUL and emoji survive JSON exactly", "not JSON");
    failed_with(&report, "sloppy", "encode: image (base64): sent, natively or as text", "image/png");
    failed_with(&report, "sloppy", "encode: tool use and tool result: sent, natively or as text", "get_weather");
    failed_with(&report, "sloppy", "decode: an HTML error page is malformed, not a fault", "panicked");
    failed_with(&report, "sloppy", "decode: a JSON array is malformed, not a fault", "decoded it into an answer");
    failed_with(&report, "sloppy", "classify: HTTP 429 with an unreadable body", "classified as `transient`");
    assert_eq!(outcome(&report, "sloppy", "classify: HTTP 503 with an unreadable body"), &Outcome::Passed);
    failed_with(&report, "sloppy", "classify: retry-after in seconds becomes a hint", "hint None");
    failed_with(&report, "sloppy", "classify: a 1 MiB error body gives a bounded detail", "at most 4096");
    assert_eq!(outcome(&report, "*", "describe: serves at least one provider key"), &Outcome::Passed);
}

#[test]
fn fixtures_compare_subsets_and_name_the_difference() {
    let cases = dialect::parse(
        r#"[
        {"kind": "decode", "name": "text and stop", "provider": "sloppy",
         "response": {"status": 200, "json": {}}, "expect": {"text": "fine", "stop": "end-turn"}},
        {"kind": "decode", "name": "wrong stop", "provider": "sloppy",
         "response": {"status": 200, "json": {}}, "expect": {"stop": "tool-use"}},
        {"kind": "decode", "name": "should decline", "provider": "sloppy",
         "response": {"status": 200, "json": {}}, "expect": {"codec_error": "malformed"}},
        {"kind": "encode", "name": "path and body", "provider": "leaky",
         "conversation": {"turns": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]},
         "params": {"model": "m-1", "max_tokens": 9},
         "expect": {"method": "POST", "path": "/chat", "headers": {"content-type": "application/json"},
                    "body": {"model": "m-1", "max_tokens": 9, "texts": ["Hi"]}}},
        {"kind": "encode", "name": "wrong path", "provider": "leaky",
         "conversation": {"turns": []}, "params": {"model": "m", "max_tokens": 1},
         "expect": {"path": "/v1/chat"}},
        {"kind": "classify", "name": "class subset", "provider": "leaky",
         "response": {"status": 429, "text": "slow down"}, "expect": {"class": "transient", "detail": "slow down"}},
        {"kind": "classify", "name": "unserved key", "provider": "nobody",
         "response": {"status": 429}, "expect": {}}
    ]"#,
    )
    .unwrap();
    let served: Vec<ProviderSummary> = Careless::providers().iter().map(summary).collect();
    let mut report = Report::default();
    pollster::block_on(dialect::run(
        &weir_conformance::native::Native::<Careless>::default(),
        &served,
        cases,
        &mut report,
    ));

    assert_eq!(outcome(&report, "sloppy", "fixture: text and stop"), &Outcome::Passed);
    failed_with(&report, "sloppy", "fixture: wrong stop", r#"$.stop is "end-turn", expected "tool-use""#);
    failed_with(&report, "sloppy", "fixture: should decline", "answered; expected it to decline as `malformed`");
    assert_eq!(outcome(&report, "leaky", "fixture: path and body"), &Outcome::Passed);
    failed_with(&report, "leaky", "fixture: wrong path", "path /chat, expected /v1/chat");
    assert_eq!(outcome(&report, "leaky", "fixture: class subset"), &Outcome::Passed);
    failed_with(&report, "nobody", "fixture: unserved key", "does not serve `nobody`");
}

#[test]
fn a_fixture_folder_that_does_not_exist_is_an_error_not_a_pass() {
    let error = weir_conformance::native::run::<Careless>(Some(Path::new("/no/such/fixtures"))).unwrap_err();
    assert!(error.to_string().contains("/no/such/fixtures"), "{error}");
}

/// A provider that sends text properly and refuses everything else as
/// `unsupported`: it passes, and the report says each refusal as a refusal.
struct Declining;

impl ChatProvider for Declining {
    type StreamDecoder = weir_sdk::NoStreaming;

    fn providers() -> Vec<ProviderInfo> {
        vec![info("declining")]
    }

    fn encode(_: &str, conversation: PreparedConversation, params: CallParams) -> Result<HttpRequest, CodecError> {
        if !conversation.tools.is_empty() {
            return Err(CodecError::Unsupported("no tools in this dialect".to_owned()));
        }
        let mut texts = conversation.system.clone();
        for block in conversation.turns.iter().flat_map(|turn| turn.content.iter()) {
            match block {
                ContentBlock::Text(text) => texts.push(text.clone()),
                _ => return Err(CodecError::Unsupported("text only".to_owned())),
            }
        }
        let body = serde_json::json!({"model": params.wire_model_id, "max_tokens": params.max_tokens, "texts": texts});
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        Ok(HttpRequest {
            method: "POST".into(),
            path_and_query: "/chat".into(),
            headers,
            body: body.to_string().into(),
        })
    }

    fn decode(_: &str, _: HttpResponse) -> Result<ChatResponse, CodecError> {
        Err(CodecError::Malformed("declining decodes nothing".to_owned()))
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        let retry = |hint| Retry { hint, detail: String::new() };
        match response.status {
            401 | 403 => ErrorClass::Authentication(String::new()),
            404 => ErrorClass::NotFound(String::new()),
            429 => ErrorClass::RateLimited(retry(weir_sdk::http::retry_hint(&response.headers))),
            529 => ErrorClass::Overloaded(retry(None)),
            500.. => ErrorClass::Transient(retry(None)),
            _ => ErrorClass::InvalidRequest(String::new()),
        }
    }
}

#[test]
fn a_refusal_passes_and_is_reported_as_a_refusal_not_as_sent() {
    let report = weir_conformance::native::run::<Declining>(None).unwrap();
    assert!(report.passed(), "{report}");
    assert_eq!(
        outcome(&report, "declining", "encode: tool definitions and tool choice are refused as unsupported"),
        &Outcome::Refused("no tools in this dialect".to_owned())
    );
    assert_eq!(
        outcome(
            &report,
            "declining",
            "encode: image (base64): refused as unsupported, as declared (no `inline-images`)"
        ),
        &Outcome::Refused("text only".to_owned())
    );
    assert!(report.find("declining", "encode: tool definitions and tool choice are sent").is_none());
    let printed = report.to_string();
    assert!(
        printed.contains(
            "ok    declining: encode: tool definitions and tool choice are refused as unsupported — no tools in this dialect"
        ),
        "{printed}"
    );
    assert!(!printed.contains("are sent"), "nothing refused is reported as sent:\n{printed}");
    assert!(printed.ends_with("passed (7 by refusing as unsupported), 0 failed"), "{printed}");
}

/// Media declared by source (weir:provider 0.5.0), two keys:
/// - `says-inline` declares `inline-images` and refuses every image;
/// - `inline-only` declares `inline-images` and `inline-documents`, sends
///   inline media and refuses media by URL.
struct MediaBySource;

impl ChatProvider for MediaBySource {
    type StreamDecoder = weir_sdk::NoStreaming;

    fn providers() -> Vec<ProviderInfo> {
        let with = |key: &str, capabilities| ProviderInfo { capabilities, ..info(key) };
        vec![
            with("says-inline", Capabilities::INLINE_IMAGES),
            with("inline-only", Capabilities::INLINE_IMAGES | Capabilities::INLINE_DOCUMENTS),
        ]
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        let mut parts = Vec::new();
        for block in conversation.turns.iter().flat_map(|turn| turn.content.iter()) {
            match block {
                ContentBlock::Text(text) => parts.push(serde_json::json!({"text": text})),
                ContentBlock::Image(_) if provider == "says-inline" => {
                    return Err(CodecError::Unsupported("no images after all".to_owned()));
                }
                ContentBlock::Image(media) | ContentBlock::Document(media) => match &media.source {
                    MediaSource::Base64(data) => {
                        parts.push(serde_json::json!({"inline": {"mime": media.mime_type, "data": data}}));
                    }
                    MediaSource::Url(_) => return Err(CodecError::Unsupported("inline media only".to_owned())),
                },
                _ => return Err(CodecError::Unsupported("text and media only".to_owned())),
            }
        }
        if !conversation.tools.is_empty() {
            return Err(CodecError::Unsupported("no tools".to_owned()));
        }
        let body = serde_json::json!({"model": params.wire_model_id, "max_tokens": params.max_tokens,
                                      "system": conversation.system, "parts": parts});
        Ok(HttpRequest {
            method: "POST".into(),
            path_and_query: "/chat".into(),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: body.to_string().into(),
        })
    }

    fn decode(provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        Declining::decode(provider, response)
    }

    fn classify(provider: &str, response: HttpResponse) -> ErrorClass {
        Declining::classify(provider, response)
    }
}

/// The kit compares each media refusal with the key's declaration: refusing a
/// declared source fails under the check that names the flag; refusing an
/// undeclared one passes, named as the declaration's.
#[test]
fn each_media_refusal_is_compared_with_the_declaration() {
    let report = weir_conformance::native::run::<MediaBySource>(None).unwrap();
    assert!(!report.passed(), "{report}");
    failed_with(
        &report,
        "says-inline",
        "encode: image (base64): sent, as `inline-images` declares",
        "it declares `inline-images` but refused this as unsupported: no images after all",
    );
    // Not declared: its refusal of an image by URL passes, named as the declaration's.
    assert_eq!(
        outcome(&report, "says-inline", "encode: image (URL): refused as unsupported, as declared (no `image-urls`)"),
        &Outcome::Refused("no images after all".to_owned())
    );
    assert_eq!(
        outcome(&report, "inline-only", "encode: image (base64): sent, as `inline-images` declares"),
        &Outcome::Passed
    );
    assert_eq!(
        outcome(&report, "inline-only", "encode: document: sent, as `inline-documents` declares"),
        &Outcome::Passed
    );
    for (name, flag) in [("image (URL)", "image-urls"), ("document (URL)", "document-urls")] {
        assert_eq!(
            outcome(
                &report,
                "inline-only",
                &format!("encode: {name}: refused as unsupported, as declared (no `{flag}`)")
            ),
            &Outcome::Refused("inline media only".to_owned())
        );
    }
    let failing: Vec<&str> = report.failures().map(|check| check.name.as_str()).collect();
    assert!(
        report.failures().all(|check| check.provider == "says-inline"),
        "only the key whose refusal contradicts its declaration fails: {failing:?}\n{report}"
    );
    assert_eq!(failing, ["encode: image (base64): sent, as `inline-images` declares"], "{report}");
}

/// A provider whose `native` interface is careless, over [`Declining`]'s chat:
/// `support` names `top_k` twice and takes any beta and a token count;
/// `encode` adds a header of its own even without native fields, carries
/// `top_k` but drops `dropped` and every beta; the count sends `max_tokens`
/// and panics on a count it cannot read; `decode_native` panics on garbage.
struct CarelessFields;

impl ChatProvider for CarelessFields {
    type StreamDecoder = weir_sdk::NoStreaming;

    fn providers() -> Vec<ProviderInfo> {
        vec![info("fields")]
    }

    fn encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
    ) -> Result<HttpRequest, CodecError> {
        Declining::encode(provider, conversation, params)
    }

    fn decode(provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        Declining::decode(provider, response)
    }

    fn classify(provider: &str, response: HttpResponse) -> ErrorClass {
        Declining::classify(provider, response)
    }
}

impl weir_sdk::NativeProvider for CarelessFields {
    type NativeStream = weir_sdk::NoNativeStream;

    fn native_support(_: &str, _: &str) -> Option<NativeSupport> {
        let names = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect();
        Some(NativeSupport {
            dialect: "careless".to_owned(),
            fields: names(&["top_k", "dropped", "top_k"]),
            betas: names(&["*"]),
            count_tokens: true,
        })
    }

    fn encode_native(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        native: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        let mut request = Self::encode(provider, conversation, params)?;
        request.headers.push(("x-careless".to_owned(), "1".to_owned()));
        let fields: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&native.fields_json).expect("careless: the fields are an object");
        if let Some(top_k) = fields.get("top_k") {
            let mut body: serde_json::Value = serde_json::from_slice(&request.body).expect("careless: its own JSON");
            body["top_k"] = top_k.clone();
            request.body = body.to_string().into_bytes();
        }
        Ok(request)
    }

    fn count_tokens_encode(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        _: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        Self::encode(provider, conversation, params)
    }

    fn count_tokens_decode(_: &str, response: HttpResponse) -> Result<u64, CodecError> {
        let count: serde_json::Value = serde_json::from_slice(&response.body).expect("careless: a count is JSON");
        Ok(count["input_tokens"].as_u64().unwrap_or(0))
    }

    fn decode_native(_: &str, response: HttpResponse) -> Result<NativeAnswer, CodecError> {
        let _: serde_json::Value = serde_json::from_slice(&response.body).expect("careless: the answer is JSON");
        Err(CodecError::Malformed("careless decodes nothing".to_owned()))
    }
}

#[test]
fn every_flaw_of_a_careless_native_interface_is_caught() {
    let report = weir_conformance::native::run_dialect::<CarelessFields>(None).unwrap();
    let key = "fields";
    failed_with(&report, key, "native: support names a dialect and each field and beta once", "`top_k` named once");
    failed_with(&report, key, "native: encode without native fields builds chat's request", "chat's headers");
    // Each field and beta is judged on its own: the carried one passes.
    failed_with(&report, key, "native: field `dropped` is carried or refused", "dropped");
    failed_with(&report, key, "native: beta `weir-kit-2026-01-01` is carried or refused", "dropped");
    assert_eq!(outcome(&report, key, "native: field `top_k` is carried or refused"), &Outcome::Passed);
    let count = "native: a token count request is well-formed and leaves the output reserve out";
    failed_with(&report, key, count, "no max-tokens (1234)");
    failed_with(
        &report,
        key,
        "native: count-tokens-decode of an HTML error page is malformed, not a fault",
        "panicked",
    );
    failed_with(&report, key, "native: decode-native of an empty body is malformed, not a fault", "panicked");
    // JSON it can read is refused as `malformed`, as it should be.
    assert_eq!(outcome(&report, key, "native: decode-native of JSON null is malformed, not a fault"), &Outcome::Passed);
    // Declining's own chat checks are unaffected by its native flaws.
    assert_eq!(outcome(&report, key, "encode: system text is sent"), &Outcome::Passed);
}
