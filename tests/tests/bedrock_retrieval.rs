//! Embeddings and reranking on Bedrock through the real `weir serve` and the
//! embedded `bedrock-retrieval` component, to the fake Bedrock, which verifies
//! every request's SigV4 signature on its own: Titan Text Embeddings V2 (one
//! input per request), Cohere Embed v3 and v4 (purpose, `output_dimension` and
//! `truncate` on every request, the returned length checked) and Cohere Rerank.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use weir_tests::bedrock_wire::retrieval::{
    COHERE_EMBED_ENGLISH_V3, COHERE_EMBED_V4, COHERE_RERANK_V3_5, TITAN_EMBED_V2, cohere_vector, normalized,
    titan_vector, token_count,
};
use weir_tests::bedrock_wire::{ACCESS_KEY_ID, FakeBedrock, REGION, SECRET_ACCESS_KEY};
use weir_tests::{Gateway, run_cli};

fn config(bedrock: &FakeBedrock) -> String {
    let base = bedrock.base_url();
    let entry = |id: &str, kind: &str, wire: &str, more: &str| {
        format!(
            "[[model]]\nid = \"{id}\"\nprovider = \"bedrock-retrieval\"\nkind = \"{kind}\"\nwire_id = \"{wire}\"\n\
             endpoint = \"{base}\"\ncontext_window = 8192\nmax_retries = 0\n{more}\n"
        )
    };
    [
        "read_timeout_secs = 5\n".to_owned(),
        entry("titan", "embedding", TITAN_EMBED_V2, "embedding_dimensions = 512"),
        entry("cohere-v3", "embedding", COHERE_EMBED_ENGLISH_V3, "embedding_dimensions = 1024"),
        entry("cohere-v4", "embedding", COHERE_EMBED_V4, "embedding_dimensions = 256"),
        entry("cohere-rerank", "rerank", COHERE_RERANK_V3_5, ""),
    ]
    .concat()
}

fn aws_env() -> Vec<(&'static str, &'static str)> {
    vec![("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY), ("AWS_REGION", REGION)]
}

async fn post(gateway: &Gateway, path: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new().post(gateway.url(path)).json(body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

fn vectors(answer: &Value) -> Vec<Vec<f32>> {
    weir_tests::openai_wire::embedding_vectors(answer)
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
}

#[tokio::test]
async fn titan_is_sent_one_input_per_signed_request_in_order() {
    let bedrock = FakeBedrock::start().await;
    let gateway = Gateway::start_with(&config(&bedrock), &aws_env(), None).await;
    let inputs = ["the first text", "a second one", "and a third"];
    let (status, answer) = post(&gateway, "/v1/embeddings", &json!({"model": "titan", "input": inputs})).await;
    assert_eq!(status, 200, "{answer}");
    let sent = bedrock.received_for_model(TITAN_EMBED_V2);
    assert_eq!(sent.len(), 3, "one Titan request per input, never joined");
    let mut texts: Vec<String> = sent.iter().map(|r| r.json()["inputText"].as_str().unwrap().to_owned()).collect();
    texts.sort();
    let mut expected: Vec<String> = inputs.iter().map(|t| (*t).to_owned()).collect();
    expected.sort();
    assert_eq!(texts, expected);
    for request in &sent {
        assert!(request.verdict.is_ok(), "SigV4: {:?}", request.verdict);
        assert_eq!(request.json()["dimensions"], 512);
    }
    for (vector, text) in vectors(&answer).iter().zip(inputs) {
        assert_close(vector, &titan_vector(text, 512, true));
    }
    let tokens: u64 = inputs.iter().map(|t| token_count(t)).sum();
    assert_eq!(answer["usage"]["prompt_tokens"], tokens, "from x-amzn-bedrock-input-token-count");
}

#[tokio::test]
async fn cohere_gets_the_purpose_the_width_and_no_truncation_on_every_request() {
    let bedrock = FakeBedrock::start().await;
    let gateway = Gateway::start_with(&config(&bedrock), &aws_env(), None).await;
    let inputs: Vec<String> = (0..100).map(|i| format!("document {i}")).collect();
    let (status, answer) = post(&gateway, "/v1/embeddings", &json!({"model": "cohere-v4", "input": inputs})).await;
    assert_eq!(status, 200, "{answer}");
    let sent = bedrock.received_for_model(COHERE_EMBED_V4);
    assert_eq!(sent.len(), 2, "100 inputs at Cohere's 96 per request");
    for request in &sent {
        let body = request.json();
        assert_eq!(body["input_type"], "search_document");
        assert_eq!(body["output_dimension"], 256);
        assert_eq!(body["truncate"], "NONE");
        assert!(request.verdict.is_ok(), "SigV4: {:?}", request.verdict);
    }
    let got = vectors(&answer);
    assert_eq!(got.len(), 100);
    // Cohere's vectors are not normalized on the wire: the host normalizes them.
    assert_close(&got[99], &normalized(cohere_vector("document 99", "search_document", 256)));

    let query = json!({"model": "cohere-v3", "input": "where are the rivers", "input_type": "query"});
    let (status, answer) = post(&gateway, "/v1/embeddings", &query).await;
    assert_eq!(status, 200, "{answer}");
    let sent = bedrock.received_for_model(COHERE_EMBED_ENGLISH_V3);
    let body = sent[0].json();
    assert_eq!(body["input_type"], "search_query");
    assert_eq!(body["output_dimension"], 1024);
    assert_eq!(body["truncate"], "NONE");
    assert_close(&vectors(&answer)[0], &normalized(cohere_vector("where are the rivers", "search_query", 1024)));
}

#[tokio::test]
async fn a_cohere_vector_of_the_wrong_length_is_refused() {
    let bedrock = FakeBedrock::start().await;
    let gateway = Gateway::start_with(&config(&bedrock), &aws_env(), None).await;
    bedrock.answer_wrong_length_vectors(true);
    let (status, answer) = post(&gateway, "/v1/embeddings", &json!({"model": "cohere-v4", "input": ["a", "b"]})).await;
    assert_eq!(status, 502, "{answer}");
    assert_eq!(answer["error"]["code"], "upstream_error");
    assert!(
        answer["error"]["message"].as_str().unwrap().contains("has 255 values, but the endpoint was asked for 256")
    );
    assert!(answer.get("data").is_none());
}

#[tokio::test]
async fn cohere_rerank_ranks_the_documents_by_the_query() {
    let bedrock = FakeBedrock::start().await;
    let gateway = Gateway::start_with(&config(&bedrock), &aws_env(), None).await;
    let documents = ["snow on the hills", "rivers run to the sea", "the sea and its rivers"];
    let body = json!({"model": "cohere-rerank", "query": "sea rivers", "documents": documents, "top_n": 2});
    let (status, answer) = post(&gateway, "/v1/rerank", &body).await;
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_ne!(results[0]["index"], 0, "the document without the query's words is not best");
    assert!(results[0]["relevance_score"].as_f64() >= results[1]["relevance_score"].as_f64());
    let sent = bedrock.received_for_model(COHERE_RERANK_V3_5);
    assert_eq!(sent[0].json()["top_n"], 2);
    assert_eq!(sent[0].json()["query"], "sea rivers");
    assert!(sent[0].verdict.is_ok());
}

#[test]
fn a_cohere_entry_that_pins_no_width_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weir.toml");
    let config = format!(
        "[embeddings]\ndimensions = 512\n\n[[model]]\nid = \"cohere\"\nprovider = \"bedrock-retrieval\"\n\
         kind = \"embedding\"\nwire_id = \"{COHERE_EMBED_V4}\"\nendpoint = \"https://bedrock-runtime.us-east-1.amazonaws.com\"\n\
         context_window = 8192\n"
    );
    std::fs::write(&path, config).unwrap();
    let output = run_cli(&["providers", "--config", path.to_str().unwrap()], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("pin `embedding_dimensions`"), "{stderr}");
}

const ANA_TOKEN: &str = "sk-weir-ana-rerank";

/// The rerank entry priced by the search (USD 2 per thousand), a ledger,
/// and member `ana` whose one call may cost at most `max_call_usd`.
fn search_priced_config(bedrock: &FakeBedrock, max_call_usd: f64) -> String {
    let rerank = config(bedrock).replace(
        &format!("wire_id = \"{COHERE_RERANK_V3_5}\""),
        &format!("wire_id = \"{COHERE_RERANK_V3_5}\"\nsearch_price = 2.0\nprices_as_of = \"2026-12-06\""),
    );
    format!(
        "{rerank}\n[[key]]\nid = \"k\"\nmember = \"ana\"\nhash = \"{}\"\nmodels = [\"cohere-rerank\"]\n\n\
         [member.ana]\nmax_call_usd = {max_call_usd}\n\n[ledger]\npath = \"ledger.db\"\n",
        weir_host::identity::hash_of(ANA_TOKEN)
    )
}

async fn rerank(gateway: &Gateway, documents: usize) -> (u16, Value) {
    let documents: Vec<String> = (0..documents).map(|n| format!("document {n} about rivers")).collect();
    let body = json!({"model": "cohere-rerank", "query": "rivers", "documents": documents, "top_n": 1});
    let response =
        reqwest::Client::new().post(gateway.url("/v1/rerank")).bearer_auth(ANA_TOKEN).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// Cohere Rerank billed by the search: the record costs each call its search
/// units (one per 100 documents) at the entry's `search_price`, and the hold
/// reserves the searches a call's documents
/// make, so a call over the member's per-call ceiling is refused unsent.
#[tokio::test]
async fn a_ranking_priced_by_the_search_costs_its_searches_and_holds_them() {
    let bedrock = FakeBedrock::start().await;
    let mut gateway = Gateway::start_with(&search_priced_config(&bedrock, 0.005), &aws_env(), None).await;
    assert_eq!(rerank(&gateway, 3).await.0, 200);
    assert_eq!(rerank(&gateway, 150).await.0, 200);
    // 250 documents are 3 searches: USD 0.006 over the member's 0.005 a call.
    let (status, refused) = rerank(&gateway, 250).await;
    assert_eq!((status, &refused["error"]["code"]), (400, &json!("call_budget_exceeded")), "{refused}");
    assert_eq!(bedrock.received_for_model(COHERE_RERANK_V3_5).len(), 2, "the refused call sent nothing");

    assert!(gateway.terminate(std::time::Duration::from_secs(30)).is_some());
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let ranked: Vec<&Value> = records.iter().filter(|record| record["category"] == "ok").collect();
    let costs: Vec<f64> = ranked.iter().map(|record| record["cost_usd"].as_f64().unwrap()).collect();
    let searches: Vec<&Value> = ranked.iter().map(|record| &record["attempts"][0]["searches"]).collect();
    assert_eq!(searches, [&json!(1), &json!(2)]);
    assert!((costs[0] - 0.002).abs() < 1e-12 && (costs[1] - 0.004).abs() < 1e-12, "{costs:?}");
}

/// `search_price` is a rerank entry's alone, and never beside token prices.
#[test]
fn a_search_price_beside_token_prices_or_on_another_kind_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("rerank", "search_price = 2.0\ninput_price = 0.1", "are not declared together"),
        ("embedding", "search_price = 2.0\nembedding_dimensions = 512", "read only for rerank entries"),
    ];
    for (kind, fields, expected) in cases {
        let path = dir.path().join("weir.toml");
        let config = format!(
            "[[model]]\nid = \"m\"\nprovider = \"bedrock-retrieval\"\nkind = \"{kind}\"\nwire_id = \
             \"{TITAN_EMBED_V2}\"\nendpoint = \"https://bedrock-runtime.us-east-1.amazonaws.com\"\n\
             context_window = 8192\n{fields}\n"
        );
        std::fs::write(&path, config).unwrap();
        let output = run_cli(&["providers", "--config", path.to_str().unwrap()], &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(expected), "{kind}: {stderr}");
    }
}
