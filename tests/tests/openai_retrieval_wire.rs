//! The OpenAI component's embeddings and rerank codecs, compiled natively, against the fake
//! upstream over real loopback HTTP: what the component encodes, the fake accepts; what the
//! fake answers, the component decodes. (The same component through wasmtime and the host
//! is for the end-to-end tests; this pins the wire both sides speak.)

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use weir_provider_openai::OpenAi;
use weir_sdk::types::{
    EmbeddingParams, EmbeddingPurpose, ErrorClass, HttpRequest, HttpResponse, RerankParams, RetryHint,
};
use weir_sdk::{EmbeddingProvider, RerankProvider};
use weir_tests::fake_upstream::{NATIVE_EMBEDDING_WIDTH, fake_embedding, fake_ranking};
use weir_tests::openai_wire::{self, approx_tokens};
use weir_tests::{FakeUpstream, Received};

/// Sends a component's request to the fake (its base URL ends in `/v1`, as a catalog
/// endpoint does) and hands the answer back as the host would.
async fn send(upstream: &FakeUpstream, request: HttpRequest) -> HttpResponse {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let method = reqwest::Method::from_bytes(request.method.as_bytes()).unwrap();
    let mut builder = client.request(method, format!("{}{}", upstream.base_url(), request.path_and_query));
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let response = builder.body(request.body).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap().to_owned()))
        .collect();
    HttpResponse { status, headers, body: response.bytes().await.unwrap().to_vec() }
}

fn params(wire_id: &str, dimensions: Option<u32>) -> EmbeddingParams {
    EmbeddingParams { wire_model_id: wire_id.to_owned(), purpose: EmbeddingPurpose::Query, dimensions }
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|text| (*text).to_owned()).collect()
}

fn only_request(upstream: &FakeUpstream) -> Received {
    let mut received = upstream.received();
    assert_eq!(received.len(), 1);
    received.remove(0)
}

#[tokio::test]
async fn embeddings_round_trip_in_input_order() {
    let upstream = FakeUpstream::start().await;
    let inputs = texts(&["alpha", "beta gamma", "delta"]);
    let request =
        <OpenAi as EmbeddingProvider>::encode("openai", inputs.clone(), params("text-embedding-3-small", None))
            .unwrap();
    let response = send(&upstream, request).await;
    assert_eq!(response.status, 200);
    let decoded = <OpenAi as EmbeddingProvider>::decode("openai", response).unwrap();
    let expected: Vec<Vec<f32>> = inputs.iter().map(|t| fake_embedding(t, NATIVE_EMBEDDING_WIDTH)).collect();
    assert_eq!(decoded.vectors, expected);
    assert_eq!(decoded.input_tokens, Some(inputs.iter().map(|t| approx_tokens(t)).sum()));
    assert_eq!(decoded.served_model.as_deref(), Some("text-embedding-3-small"));
    assert_eq!(decoded.request_id.as_deref(), Some(format!("req_{:032x}", 0).as_str()));

    let sent = only_request(&upstream);
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(sent.header("authorization"), None, "the component never sends a credential");
    assert_eq!(
        sent.json(),
        serde_json::json!({"model": "text-embedding-3-small", "input": inputs, "encoding_format": "float"})
    );
}

#[tokio::test]
async fn a_pinned_width_reaches_the_fake_and_comes_back() {
    let upstream = FakeUpstream::start().await;
    let request =
        <OpenAi as EmbeddingProvider>::encode("openai-compatible", texts(&["x", "y"]), params("BAAI/bge-m3", Some(64)))
            .unwrap();
    let decoded = <OpenAi as EmbeddingProvider>::decode("openai-compatible", send(&upstream, request).await).unwrap();
    assert_eq!(decoded.vectors, vec![fake_embedding("x", 64), fake_embedding("y", 64)]);
    assert_eq!(only_request(&upstream).json()["dimensions"], 64);
}

#[tokio::test]
async fn a_reversed_answer_is_put_back_in_order() {
    let upstream = FakeUpstream::start().await;
    let vectors = vec![vec![0.0_f32, 1.0], vec![1.0, 0.0], vec![0.6, 0.8]];
    upstream.push(openai_wire::embeddings_reversed(&vectors, 6));
    let request = <OpenAi as EmbeddingProvider>::encode(
        "openai",
        texts(&["a", "b", "c"]),
        params("text-embedding-3-small", None),
    )
    .unwrap();
    let decoded = <OpenAi as EmbeddingProvider>::decode("openai", send(&upstream, request).await).unwrap();
    assert_eq!(decoded.vectors, vectors);
    assert_eq!(decoded.input_tokens, Some(6));
    assert_eq!(decoded.request_id.as_deref(), Some(openai_wire::REQUEST_ID));
}

#[tokio::test]
async fn embeddings_failures_classify_from_the_fakes_answers() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::rate_limited(3));
    upstream.push(openai_wire::insufficient_quota());
    upstream.push(openai_wire::server_error());
    let mut classes = Vec::new();
    for _ in 0..3 {
        let request =
            <OpenAi as EmbeddingProvider>::encode("openai", texts(&["a"]), params("text-embedding-3-small", None))
                .unwrap();
        classes.push(<OpenAi as EmbeddingProvider>::classify("openai", send(&upstream, request).await));
    }
    assert!(
        matches!(&classes[0], ErrorClass::RateLimited(r) if r.hint == Some(RetryHint::DelayMs(3_000))),
        "{classes:?}"
    );
    assert!(matches!(classes[1], ErrorClass::QuotaExhausted(_)), "{classes:?}");
    assert!(matches!(classes[2], ErrorClass::Transient(_)), "{classes:?}");
    // The fake's own refusal of a width ada cannot give: the component refuses it first.
    let refused =
        <OpenAi as EmbeddingProvider>::encode("openai", texts(&["a"]), params("text-embedding-ada-002", Some(256)));
    assert!(refused.is_err());
    assert_eq!(upstream.received().len(), 3);
}

#[tokio::test]
async fn rerank_round_trip_best_first_with_top_n() {
    let upstream = FakeUpstream::start().await;
    let documents = texts(&["a cat", "the capital of Peru", "Paris is the capital of France"]);
    let rerank_params = RerankParams { wire_model_id: "BAAI/bge-reranker-v2-m3".to_owned(), top_n: Some(2) };
    let request = <OpenAi as RerankProvider>::encode(
        "openai-compatible",
        "capital of France".to_owned(),
        documents.clone(),
        rerank_params,
    )
    .unwrap();
    let response = send(&upstream, request).await;
    assert_eq!(response.status, 200);
    let decoded = <OpenAi as RerankProvider>::decode("openai-compatible", response).unwrap();
    let expected = fake_ranking("capital of France", &documents, Some(2));
    let got: Vec<(u32, f64)> = decoded.results.iter().map(|r| (r.index, r.relevance_score)).collect();
    assert_eq!(got, expected);
    assert_eq!(got.iter().map(|(index, _)| *index).collect::<Vec<_>>(), vec![2, 1]);
    let query_tokens = approx_tokens("capital of France");
    assert_eq!(decoded.input_tokens, Some(documents.iter().map(|d| query_tokens + approx_tokens(d)).sum()));
    assert_eq!(decoded.served_model.as_deref(), Some("BAAI/bge-reranker-v2-m3"));
    assert_eq!(decoded.request_id.as_deref(), Some(format!("rerank-weirfake{:020}", 0).as_str()));

    let sent = only_request(&upstream);
    assert_eq!(sent.path, "/v1/rerank");
    assert_eq!(
        sent.json(),
        serde_json::json!({"model": "BAAI/bge-reranker-v2-m3", "query": "capital of France", "documents": documents, "top_n": 2})
    );
}

#[tokio::test]
async fn a_rerank_failure_classifies() {
    let upstream = FakeUpstream::start().await;
    upstream.push(openai_wire::vllm_error(400, "The model does not support Rerank (Score) API"));
    let rerank_params = RerankParams { wire_model_id: "m".to_owned(), top_n: None };
    let request =
        <OpenAi as RerankProvider>::encode("openai-compatible", "q".to_owned(), texts(&["d"]), rerank_params).unwrap();
    let class = <OpenAi as RerankProvider>::classify("openai-compatible", send(&upstream, request).await);
    assert!(matches!(class, ErrorClass::InvalidRequest(_)), "{class:?}");
}
