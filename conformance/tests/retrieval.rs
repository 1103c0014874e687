//! The embeddings and rerank checks catch what they promise to catch: a careless
//! retrieval provider fails exactly the checks its flaws break, a tidy one passes,
//! and only the operations a provider has are checked.

// Test code: the careless provider panics on purpose, and helpers fail the test.
#![allow(clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use weir_conformance::fixture::{Framing, ProviderSummary};
use weir_conformance::{Operation, Outcome, Report, dialect};
use weir_sdk::types::{
    Capabilities, CodecError, CredentialShape, EmbeddingParams, EmbeddingResponse, ErrorClass, HeaderCredential,
    HttpRequest, HttpResponse, ProviderInfo, Ranked, RerankParams, RerankResponse, Retry, StreamFraming,
};
use weir_sdk::{Describe, EmbeddingProvider, RerankProvider};

fn info(key: &str) -> ProviderInfo {
    ProviderInfo {
        key: key.to_owned(),
        description: "retrieval under test".to_owned(),
        default_endpoint: Some("https://retrieval.example".to_owned()),
        credential: CredentialShape::Header(HeaderCredential {
            default_credential_id: "retrieval-key".to_owned(),
            header_name: "authorization".to_owned(),
            prefix: "Bearer ".to_owned(),
            required: true,
        }),
        capabilities: Capabilities::empty(),
        stream_framing: StreamFraming::Sse,
    }
}

fn request(path: &str, headers: Vec<(String, String)>, body: &Value) -> HttpRequest {
    HttpRequest { method: "POST".into(), path_and_query: path.into(), headers, body: body.to_string().into_bytes() }
}

fn json_header() -> Vec<(String, String)> {
    vec![("content-type".to_owned(), "application/json".to_owned())]
}

/// What the tidy provider and the kit agree a status means.
fn tidy_class(response: &HttpResponse) -> ErrorClass {
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

fn object(response: &HttpResponse) -> Result<Value, CodecError> {
    match serde_json::from_slice::<Value>(&response.body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) | Err(_) => Err(CodecError::Malformed("not a JSON object".to_owned())),
    }
}

// ------------------------------------------------------------------ tidy

/// Does everything right: `{"model", "input", "dimensions"?}` to `/embed`,
/// `{"model", "query", "documents", "top_n"?}` to `/rank`.
struct Tidy;

impl Describe for Tidy {
    fn providers() -> Vec<ProviderInfo> {
        vec![info("tidy")]
    }
}

impl EmbeddingProvider for Tidy {
    fn serves(_: &str, _: &str) -> bool {
        true
    }

    fn max_batch(_: &str, _: &str) -> u32 {
        16
    }

    fn encode(_: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        let mut body = json!({"model": params.wire_model_id, "input": inputs});
        if let Some(dimensions) = params.dimensions {
            body["dimensions"] = json!(dimensions);
        }
        Ok(request("/embed", json_header(), &body))
    }

    fn decode(_: &str, response: HttpResponse) -> Result<EmbeddingResponse, CodecError> {
        let body = object(&response)?;
        let vectors: Vec<Vec<f32>> = serde_json::from_value(body["vectors"].clone())
            .map_err(|e| CodecError::Malformed(format!("no vectors: {e}")))?;
        Ok(EmbeddingResponse {
            vectors,
            input_tokens: body["tokens"].as_u64(),
            served_model: body["model"].as_str().map(str::to_owned),
            request_id: None,
        })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        tidy_class(&response)
    }
}

impl RerankProvider for Tidy {
    fn serves(_: &str, _: &str) -> bool {
        true
    }

    fn encode(_: &str, query: String, documents: Vec<String>, params: RerankParams) -> Result<HttpRequest, CodecError> {
        let mut body = json!({"model": params.wire_model_id, "query": query, "documents": documents});
        if let Some(top_n) = params.top_n {
            body["top_n"] = json!(top_n);
        }
        Ok(request("/rank", json_header(), &body))
    }

    fn decode(_: &str, response: HttpResponse) -> Result<RerankResponse, CodecError> {
        let body = object(&response)?;
        let results = body["results"].as_array().ok_or_else(|| CodecError::Malformed("no results".to_owned()))?;
        let results = results
            .iter()
            .map(|result| Ranked {
                index: result["index"].as_u64().unwrap_or_default() as u32,
                relevance_score: result["score"].as_f64().unwrap_or_default(),
            })
            .collect();
        Ok(RerankResponse { results, input_tokens: None, search_units: None, served_model: None, request_id: None })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        tidy_class(&response)
    }
}

// ------------------------------------------------------------------ careless

/// How many times the careless `max-batch` was asked: it answers a new number each time.
static ASKED: AtomicU32 = AtomicU32::new(0);

/// Two keys, each with its own flaws:
/// - `leaky` writes the credential header itself (embeddings and rerank), and
///   answers `max-batch` with a different number each time it is asked;
/// - `sloppy` sends only the first input and drops `dimensions` and `top-n`.
///
/// Both panic on a body that is not JSON, decode `[]` into an answer, and
/// classify every failure as transient with no hint and the whole body as detail.
struct Careless;

impl Describe for Careless {
    fn providers() -> Vec<ProviderInfo> {
        vec![info("leaky"), info("sloppy")]
    }
}

fn careless_headers(provider: &str) -> Vec<(String, String)> {
    let mut headers = json_header();
    if provider == "leaky" {
        headers.push(("Authorization".to_owned(), "Bearer sk-leaked".to_owned()));
    }
    headers
}

fn careless_class(response: HttpResponse) -> ErrorClass {
    ErrorClass::Transient(Retry { hint: None, detail: String::from_utf8_lossy(&response.body).into_owned() })
}

impl EmbeddingProvider for Careless {
    fn serves(_: &str, _: &str) -> bool {
        true
    }

    fn max_batch(provider: &str, _: &str) -> u32 {
        match provider {
            "leaky" => 2 + ASKED.fetch_add(1, Ordering::Relaxed),
            _ => 4,
        }
    }

    fn encode(provider: &str, inputs: Vec<String>, params: EmbeddingParams) -> Result<HttpRequest, CodecError> {
        let body = match provider {
            "sloppy" => json!({"model": params.wire_model_id, "input": inputs.first()}),
            _ => json!({"model": params.wire_model_id, "input": inputs, "dimensions": params.dimensions}),
        };
        Ok(request("/embed", careless_headers(provider), &body))
    }

    fn decode(_: &str, response: HttpResponse) -> Result<EmbeddingResponse, CodecError> {
        let _: Value = serde_json::from_slice(&response.body).expect("careless: the body is JSON");
        Ok(EmbeddingResponse { vectors: Vec::new(), input_tokens: None, served_model: None, request_id: None })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        careless_class(response)
    }
}

impl RerankProvider for Careless {
    fn serves(_: &str, _: &str) -> bool {
        true
    }

    fn encode(
        provider: &str,
        query: String,
        documents: Vec<String>,
        params: RerankParams,
    ) -> Result<HttpRequest, CodecError> {
        let body = match provider {
            "sloppy" => json!({"model": params.wire_model_id, "query": query, "documents": documents}),
            _ => json!({"model": params.wire_model_id, "query": query, "documents": documents, "top_n": params.top_n}),
        };
        Ok(request("/rank", careless_headers(provider), &body))
    }

    fn decode(_: &str, response: HttpResponse) -> Result<RerankResponse, CodecError> {
        let _: Value = serde_json::from_slice(&response.body).expect("careless: the body is JSON");
        Ok(RerankResponse {
            results: Vec::new(),
            input_tokens: None,
            search_units: None,
            served_model: None,
            request_id: None,
        })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        careless_class(response)
    }
}

// ------------------------------------------------------------------ the tests

fn outcome<'a>(report: &'a Report, provider: &str, name: &str) -> &'a Outcome {
    &report.find(provider, name).unwrap_or_else(|| panic!("no check {provider}: {name} in\n{report}")).outcome
}

fn failed_with(report: &Report, provider: &str, name: &str, reason: &str) {
    match outcome(report, provider, name) {
        Outcome::Failed(found) => assert!(found.contains(reason), "{provider}: {name}: {found}"),
        Outcome::Passed | Outcome::Refused(_) => panic!("{provider}: {name} passed; the kit missed a flaw\n{report}"),
    }
}

const MODEL: &str = weir_conformance::generic::MODEL;

fn embeddings(check: &str) -> String {
    format!("embeddings `{MODEL}`: {check}")
}

fn rerank(check: &str) -> String {
    format!("rerank `{MODEL}`: {check}")
}

#[test]
fn a_tidy_retrieval_provider_passes_and_only_its_operations_are_checked() {
    let report = weir_conformance::native::run_retrieval::<Tidy>(None).unwrap();
    assert!(report.passed(), "{report}");
    assert_eq!(report.operations, vec![Operation::Embeddings, Operation::Rerank]);
    assert_eq!(
        outcome(&report, "tidy", &embeddings("encode: max-batch (16) inputs are sent in one request")),
        &Outcome::Passed
    );
    assert_eq!(outcome(&report, "tidy", &embeddings("encode: dimensions (256) are sent exactly")), &Outcome::Passed);
    assert_eq!(outcome(&report, "tidy", &rerank("encode: top-n (2) is sent exactly")), &Outcome::Passed);
    assert_eq!(
        outcome(&report, "tidy", "rerank: classify: retry-after in an HTTP date becomes a hint"),
        &Outcome::Passed
    );
    assert!(report.checks.iter().all(|check| !check.name.starts_with("encode:")), "no chat check:\n{report}");
    assert!(report.to_string().starts_with("operations checked: embeddings, rerank\n"), "{report}");
}

#[test]
fn every_flaw_of_a_careless_retrieval_provider_is_caught() {
    let report = weir_conformance::native::run_retrieval::<Careless>(None).unwrap();
    assert!(!report.passed());

    let well_formed = "encode: one input gives a well-formed request without credentials";
    failed_with(&report, "leaky", &embeddings(well_formed), "carries `Authorization`");
    failed_with(
        &report,
        "leaky",
        &rerank("encode: a query and 3 documents give a well-formed request without credentials"),
        "carries `Authorization`",
    );
    assert_eq!(outcome(&report, "sloppy", &embeddings(well_formed)), &Outcome::Passed);
    failed_with(&report, "leaky", &embeddings("max-batch is at least 1 and the same when asked again"), ", then ");
    assert_eq!(
        outcome(&report, "sloppy", &embeddings("max-batch is at least 1 and the same when asked again")),
        &Outcome::Passed
    );
    failed_with(
        &report,
        "sloppy",
        &embeddings("encode: max-batch (4) inputs are sent in one request"),
        "does not carry \"input 2 of 4\"",
    );
    failed_with(&report, "sloppy", &embeddings("encode: dimensions (256) are sent exactly"), "the width was dropped");
    failed_with(&report, "sloppy", &rerank("encode: top-n (2) is sent exactly"), "top-n was dropped");
    failed_with(&report, "sloppy", "embeddings: decode: an HTML error page is malformed, not a fault", "panicked");
    failed_with(&report, "sloppy", "embeddings: decode: a JSON array is malformed, not a fault", "0 vectors");
    failed_with(&report, "sloppy", "rerank: decode: JSON null is malformed, not a fault", "0 results");
    failed_with(
        &report,
        "sloppy",
        "embeddings: classify: HTTP 429 with an unreadable body",
        "classified as `transient`",
    );
    failed_with(&report, "sloppy", "rerank: classify: retry-after in seconds becomes a hint", "hint None");
    failed_with(&report, "leaky", "rerank: classify: a 1 MiB error body gives a bounded detail", "at most 4096");
}

#[test]
fn retrieval_fixtures_compare_vectors_rankings_and_wire_ids() {
    let cases = dialect::parse(
        r#"[
        {"kind": "embeddings_encode", "name": "dimensions on the wire", "provider": "tidy", "inputs": ["a", "b"],
         "params": {"model": "embed-1", "purpose": "query", "dimensions": 512},
         "expect": {"method": "POST", "path": "/embed", "body": {"model": "embed-1", "input": ["a", "b"], "dimensions": 512}}},
        {"kind": "embeddings_decode", "name": "f32 vectors compare as written", "provider": "tidy",
         "response": {"status": 200, "json": {"vectors": [[0.1, -0.0069292835], [0.3, 0.7]], "tokens": 3, "model": "embed-1"}},
         "expect": {"count": 2, "width": 2, "vectors": [[0.1, -0.0069292835], [0.3, 0.7]], "input_tokens": 3,
                    "served_model": "embed-1", "request_id": null}},
        {"kind": "embeddings_decode", "name": "wrong width", "provider": "tidy",
         "response": {"status": 200, "json": {"vectors": [[0.1, 0.2]]}}, "expect": {"width": 3}},
        {"kind": "embeddings_decode", "name": "should decline", "provider": "tidy",
         "response": {"status": 200, "json": {"vectors": "none"}}, "expect": {"codec_error": "malformed"}},
        {"kind": "rerank_decode", "name": "a ranking", "provider": "tidy",
         "response": {"status": 200, "json": {"results": [{"index": 2, "score": 0.9}, {"index": 0, "score": 0.25}]}},
         "expect": {"results": [{"index": 2, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.25}],
                    "search_units": null}},
        {"kind": "rerank_classify", "name": "a 429", "provider": "tidy",
         "response": {"status": 429, "headers": [["retry-after", "2"]]},
         "expect": {"class": "rate-limited", "hint": {"delay_ms": 2000}}},
        {"kind": "rerank_encode", "name": "unserved key", "provider": "nobody", "query": "q", "documents": ["d"],
         "params": {"model": "rank-1"}, "expect": {}}
    ]"#,
    )
    .unwrap();
    let report =
        pollster::block_on(weir_conformance::run(&weir_conformance::native::NativeRetrieval::<Tidy>::default(), cases));
    assert_eq!(outcome(&report, "tidy", "fixture: dimensions on the wire"), &Outcome::Passed);
    assert_eq!(outcome(&report, "tidy", "fixture: f32 vectors compare as written"), &Outcome::Passed);
    failed_with(&report, "tidy", "fixture: wrong width", "$.width is 2, expected 3");
    assert_eq!(outcome(&report, "tidy", "fixture: should decline"), &Outcome::Passed);
    assert_eq!(outcome(&report, "tidy", "fixture: a ranking"), &Outcome::Passed);
    assert_eq!(outcome(&report, "tidy", "fixture: a 429"), &Outcome::Passed);
    failed_with(&report, "nobody", "fixture: unserved key", "does not serve `nobody`");
    // The encode case's wire id is checked generically too, at the case's width.
    assert_eq!(
        outcome(&report, "tidy", "embeddings `embed-1`: encode: dimensions (512) are sent exactly"),
        &Outcome::Passed
    );
}

/// A chat provider checked natively has no embeddings: a fixture of that kind
/// fails, naming the operation, rather than never running.
#[test]
fn a_fixture_of_an_operation_the_provider_lacks_fails() {
    let cases = dialect::parse(
        r#"{"kind": "embeddings_classify", "name": "stray", "provider": "tidy",
            "response": {"status": 429}, "expect": {"class": "rate-limited"}}"#,
    )
    .unwrap();
    let mut report = Report::default();
    pollster::block_on(dialect::run(
        &weir_conformance::native::Native::<ChatOnly>::default(),
        &[ProviderSummary {
            key: "tidy".to_owned(),
            default_endpoint: None,
            credential_header: None,
            streaming: false,
            framing: Framing::Sse,
            media: weir_conformance::fixture::MediaSources::default(),
            thinking: false,
        }],
        cases,
        &mut report,
    ));
    failed_with(&report, "tidy", "fixture: stray", "does not export `embeddings`");
}

/// The smallest chat provider, for the test above.
struct ChatOnly;

impl weir_sdk::ChatProvider for ChatOnly {
    type StreamDecoder = weir_sdk::NoStreaming;

    fn providers() -> Vec<ProviderInfo> {
        vec![info("tidy")]
    }

    fn encode(
        _: &str,
        _: weir_sdk::types::PreparedConversation,
        _: weir_sdk::types::CallParams,
    ) -> Result<HttpRequest, CodecError> {
        Err(CodecError::Unsupported("not under test".to_owned()))
    }

    fn decode(_: &str, _: HttpResponse) -> Result<weir_sdk::types::ChatResponse, CodecError> {
        Err(CodecError::Malformed("not under test".to_owned()))
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        tidy_class(&response)
    }
}
