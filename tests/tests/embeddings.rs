//! Embeddings and reranking through the real `weir serve` to the fake OpenAI
//! upstream (`POST /v1/embeddings`, `POST /v1/rerank`), asserting what the
//! caller got and what the upstream received: batches and their order, the one
//! width and its adapter, the refusals that send nothing, retries, the lanes,
//! budgets and the ledger's record.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::fake_upstream::{fake_embedding, fake_ranking};
use weir_tests::{FakeUpstream, Gateway, Posted, Received, openai_wire};

/// `n` distinct texts.
fn texts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("passage number {i} about rivers")).collect()
}

async fn post(gateway: &Gateway, path: &str, body: &Value, headers: &[(&str, &str)]) -> Posted {
    gateway.post_json(path, body, headers).await
}

fn embedding_requests(upstream: &FakeUpstream) -> Vec<Received> {
    upstream.received().into_iter().filter(|r| r.path == "/v1/embeddings").collect()
}

fn norm(vector: &[f32]) -> f64 {
    vector.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>().sqrt()
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
}

#[tokio::test]
async fn a_pinned_entry_answers_unit_vectors_of_its_width_in_input_order() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 256)).await;
    let inputs = texts(3);
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": inputs}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let vectors = openai_wire::embedding_vectors(&answer.body);
    assert_eq!(vectors.len(), 3);
    for (vector, text) in vectors.iter().zip(&inputs) {
        assert!((norm(vector) - 1.0).abs() < 1e-5);
        assert_close(vector, &fake_embedding(text, 256));
    }
    let tokens: u64 = inputs.iter().map(|t| openai_wire::approx_tokens(t)).sum();
    assert_eq!(answer.body["usage"]["prompt_tokens"], tokens);
    assert!(answer.headers.contains_key("x-weir-call-id"));
    assert_eq!(answer.headers["x-weir-model"], "embed");
    let sent = embedding_requests(&upstream);
    assert_eq!(sent.len(), 1, "three inputs fit one batch");
    let body = sent[0].json();
    assert_eq!(body["dimensions"], 256, "a pinned width is asked of the endpoint");
    assert_eq!(body["model"], "text-embedding-3-small");
    assert_eq!(body["input"], json!(inputs));
}

#[tokio::test]
async fn ten_inputs_with_max_batch_four_are_three_upstream_requests_and_the_order_is_kept() {
    let upstream = FakeUpstream::start().await;
    let config = openai_wire::embeddings_config(&upstream.base_url(), 64)
        .replace("embedding_dimensions = 64", "embedding_dimensions = 64\nmax_batch = 4");
    let gateway = Gateway::start(&config).await;
    let inputs = texts(10);
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": inputs}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let sent = embedding_requests(&upstream);
    let mut sizes: Vec<usize> = sent.iter().map(|r| r.json()["input"].as_array().unwrap().len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![2, 4, 4]);
    let vectors = openai_wire::embedding_vectors(&answer.body);
    for (vector, text) in vectors.iter().zip(&inputs) {
        assert_close(vector, &fake_embedding(text, 64));
    }
    assert_eq!(answer.headers["x-weir-attempts"], "3", "one attempt per batch");
}

#[tokio::test]
async fn an_unpinned_entry_folds_the_native_vector_to_the_deployment_width() {
    let upstream = FakeUpstream::start().await;
    let config = openai_wire::embeddings_config(&upstream.base_url(), 1)
        .replace("embedding_dimensions = 1\n", "")
        .replace("read_timeout_secs = 5", "read_timeout_secs = 5\n[embeddings]\ndimensions = 512\n");
    let gateway = Gateway::start(&config).await;
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": "rivers"}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let vectors = openai_wire::embedding_vectors(&answer.body);
    // The fake's native 1536 folded: its leading 512 values, renormalized.
    assert_close(&vectors[0], &fake_embedding("rivers", 512));
    let sent = embedding_requests(&upstream);
    assert!(sent[0].json().get("dimensions").is_none(), "an unpinned entry asks for the native width");
}

#[tokio::test]
async fn requests_the_gateway_cannot_serve_are_refused_and_send_nothing() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 256)).await;
    let cases = [
        ("/v1/embeddings", json!({"model": "embed", "input": "x", "dimensions": 128}), "dimensions"),
        ("/v1/embeddings", json!({"model": "embed", "input": [[1, 2, 3]]}), "token arrays"),
        ("/v1/embeddings", json!({"model": "embed", "input": []}), "empty"),
        ("/v1/embeddings", json!({"model": "embed", "input": "x", "encoding_format": "int8"}), "encoding_format"),
        ("/v1/embeddings", json!({"model": "rerank", "input": "x"}), "rerank entry"),
        ("/v1/rerank", json!({"model": "embed", "query": "q", "documents": ["d"]}), "embedding entry"),
        ("/v1/rerank", json!({"model": "rerank", "query": "q", "documents": []}), "empty"),
        (
            "/v1/chat/completions",
            json!({"model": "embed", "messages": [{"role": "user", "content": "hi"}]}),
            "embedding entry",
        ),
    ];
    for (path, body, needle) in cases {
        let answer = post(&gateway, path, &body, &[]).await;
        assert_eq!(answer.status, 400, "{path} {body}: {}", answer.body);
        let message = answer.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{path} {body}: `{message}` lacks `{needle}`");
    }
    let answer =
        post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": "x"}), &[("x-weir-lane", "fast")]).await;
    assert_eq!(answer.status, 400);
    assert!(upstream.received().is_empty(), "nothing was sent for a refused request");
}

#[tokio::test]
async fn a_vector_of_another_length_than_the_pinned_width_fails_the_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 256)).await;
    upstream.push(openai_wire::embeddings(&[fake_embedding("a", 100)], 3));
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": "a"}), &[]).await;
    assert_eq!(answer.body["error"]["code"], "upstream_error", "{}", answer.body);
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("has 100 values, but the endpoint was asked for 256"), "{message}");
    assert_eq!(embedding_requests(&upstream).len(), 1, "never retried, never coerced");
}

#[tokio::test]
async fn a_rate_limited_batch_is_retried_and_a_refused_batch_fails_the_whole_call() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 32)).await;
    upstream.push(openai_wire::rate_limited(0));
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": ["a", "b"]}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.headers["x-weir-attempts"], "2");
    assert_eq!(embedding_requests(&upstream).len(), 2);

    let config = openai_wire::embeddings_config(&upstream.base_url(), 32)
        .replace("embedding_dimensions = 32", "embedding_dimensions = 32\nmax_batch = 1");
    let gateway = Gateway::start(&config).await;
    upstream.push(openai_wire::error(400, "invalid_request_error", None, "bad input"));
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": ["a", "b", "c"]}), &[]).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(answer.body.get("data").is_none(), "no partial answer");
    let message = answer.body["error"]["message"].as_str().unwrap();
    assert!(!message.contains("bad input"), "the upstream's words stay in the log: {message}");
}

#[tokio::test]
async fn base64_answers_are_the_little_endian_floats_of_the_same_vectors() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 16)).await;
    let body = json!({"model": "embed", "input": ["a", "b"], "encoding_format": "base64"});
    let answer = post(&gateway, "/v1/embeddings", &body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let encoded = answer.body["data"][1]["embedding"].as_str().unwrap();
    assert_close(&openai_wire::vector_from_base64(encoded), &fake_embedding("b", 16));
}

#[tokio::test]
async fn a_rerank_call_answers_the_upstreams_ranking_best_first() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 16)).await;
    let documents: Vec<String> =
        ["rivers and lakes", "mountains", "rivers of the north and lakes"].map(str::to_owned).to_vec();
    let body = json!({"model": "rerank", "query": "northern rivers and lakes", "documents": documents, "top_n": 2,
                      "return_documents": true});
    let answer = post(&gateway, "/v1/rerank", &body, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let results = openai_wire::rerank_results(&answer.body);
    assert_eq!(results, fake_ranking("northern rivers and lakes", &documents, Some(2)));
    let best = usize::try_from(results[0].0).unwrap();
    assert_eq!(answer.body["results"][0]["document"]["text"], documents[best]);
    let sent: Vec<Received> = upstream.received().into_iter().filter(|r| r.path == "/v1/rerank").collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["top_n"], 2);
    assert_eq!(sent[0].json()["documents"], json!(documents));
}

#[tokio::test]
async fn a_member_budget_caps_embedding_spend_before_the_call() {
    let upstream = FakeUpstream::start().await;
    let token = "sk-weir-embed-budget";
    let config = format!(
        "{}\n[[key]]\nid = \"k\"\nmember = \"ana\"\nhash = \"{}\"\n\n[member.ana]\ndaily_tokens = 30\n",
        openai_wire::embeddings_config(&upstream.base_url(), 16),
        weir_host::identity::hash_of(token)
    );
    let gateway = Gateway::start(&config).await;
    let auth = format!("Bearer {token}");
    // 80 characters: about 20 tokens by the fake's count and the host's estimate alike.
    let text = "a".repeat(80);
    let first =
        post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": text}), &[("authorization", &auth)]).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let second =
        post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": text}), &[("authorization", &auth)]).await;
    assert_eq!(second.status, 429, "{}", second.body);
    assert_eq!(second.body["error"]["code"], "budget_exhausted");
    assert!(second.headers.contains_key("retry-after"));
    assert_eq!(embedding_requests(&upstream).len(), 1, "the refused call sent nothing");
}

#[tokio::test]
async fn every_call_is_in_the_ledger_with_its_operation_and_billed_tokens() {
    let upstream = FakeUpstream::start().await;
    let config = format!(
        "{}\n[ledger]\npath = \"ledger.db\"\n",
        openai_wire::embeddings_config(&upstream.base_url(), 16)
            .replace("context_window = 8192\nmax_retries", "context_window = 8192\ninput_price = 0.02\nmax_retries")
    );
    let gateway = Gateway::start(&config).await;
    let inputs = texts(5);
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": inputs}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let rerank = json!({"model": "rerank", "query": "rivers", "documents": ["rivers", "hills"]});
    assert_eq!(post(&gateway, "/v1/rerank", &rerank, &[]).await.status, 200);
    let ledger = gateway.dir().join("ledger.db");
    let records = weir_tests::closed_records(&ledger);
    let embedded = records.iter().find(|r| r["operation"] == "embeddings").expect("an embeddings record");
    let tokens: u64 = inputs.iter().map(|t| openai_wire::approx_tokens(t)).sum();
    assert_eq!(embedded["usage"]["input"], tokens);
    assert_eq!(embedded["route"], "openai_embeddings");
    assert_eq!(embedded["category"], "ok");
    assert_eq!(embedded["attempts"].as_array().unwrap().len(), 1);
    let cost = embedded["cost_usd"].as_f64().unwrap();
    assert!((cost - tokens as f64 * 0.02 / 1e6).abs() < 1e-12, "{cost}");
    let reranked = records.iter().find(|r| r["operation"] == "rerank").expect("a rerank record");
    assert_eq!(reranked["route"], "rerank");
    assert_eq!(reranked["category"], "ok");
}

/// The lanes in one model's queue: a bulk job of 2,000 inputs (63 batches)
/// holds the model's bulk share (two of four permits, each answer taking
/// 100 ms) while six more of its batches park. An interactive call sent while
/// it runs is admitted ahead of those parked batches: between its sending and
/// its arrival upstream, no parked bulk batch gets in (at most the two running
/// ones finish and are replaced); in one FIFO queue it would wait behind all six.
#[tokio::test]
async fn interactive_calls_go_ahead_of_a_running_bulk_job_of_two_thousand_inputs() {
    let upstream = FakeUpstream::start().await;
    upstream.delay_answers(Duration::from_millis(100));
    let config = openai_wire::embeddings_config(&upstream.base_url(), 8)
        .replace("embedding_dimensions = 8", "embedding_dimensions = 8\nmax_concurrency = 4\ninteractive_share = 0.5");
    let gateway = Gateway::start(&config).await;
    let bulk_inputs = texts(2_000);
    let bulk = {
        let body = json!({"model": "embed", "input": bulk_inputs});
        let url = gateway.url("/v1/embeddings");
        tokio::spawn(async move {
            let response =
                reqwest::Client::new().post(url).header("x-weir-lane", "bulk").json(&body).send().await.unwrap();
            (response.status().as_u16(), response.json::<Value>().await.unwrap())
        })
    };
    upstream.wait_for_requests(4, Duration::from_secs(20)).await;
    let is_bulk = |r: &Received| r.json()["input"].as_array().is_some_and(|inputs| inputs.len() > 1);
    for i in 0..5 {
        let query = format!("interactive query {i}");
        let before = upstream.received().len();
        let answer =
            post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": [query], "input_type": "query"}), &[])
                .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let sent = upstream.received();
        let arrived = sent.iter().position(|r| r.json()["input"] == json!([query])).unwrap();
        let bulk_between = sent[before..arrived].iter().filter(|r| is_bulk(r)).count();
        assert!(bulk_between <= 2, "interactive call {i} waited behind {bulk_between} bulk batches");
        if i == 0 {
            // The bulk job goes on after the interactive call: its next batch arrives
            // (waited for, bounded: under load it may leave just after the answer).
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while !upstream.received()[arrived..].iter().any(is_bulk) {
                assert!(tokio::time::Instant::now() < deadline, "the bulk job was still running");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    let (status, body) = bulk.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let vectors = openai_wire::embedding_vectors(&body);
    assert_eq!(vectors.len(), 2_000);
    assert_close(&vectors[1_999], &fake_embedding(&bulk_inputs[1_999], 8));
    let bulk_requests = embedding_requests(&upstream).into_iter().filter(is_bulk).count();
    assert_eq!(bulk_requests, 63, "2,000 inputs at the compatible provider's batch of 32");
}

/// The official `openai` Python client, unmodified: `embeddings.create` as it
/// sends it by default (base64, which it decodes itself) and with `float`.
#[tokio::test]
async fn the_official_openai_client_reads_the_vectors_in_both_encodings() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&openai_wire::embeddings_config(&upstream.base_url(), 32)).await;
    let base_url = gateway.url("/v1");
    let answers = tokio::task::spawn_blocking(move || {
        weir_tests::python::run_openai_client(&base_url, "embed", "embed,embed_float")
    })
    .await
    .unwrap();
    let to_f32 = |vector: &Value| -> Vec<f32> {
        vector.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect()
    };
    let default = &answers[0];
    assert_eq!(default["indices"], json!([0, 1]));
    assert_close(&to_f32(&default["vectors"][0]), &fake_embedding("the first passage", 32));
    assert_close(&to_f32(&default["vectors"][1]), &fake_embedding("a second passage", 32));
    assert_eq!(default["model"], "embed");
    assert!(default["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert_close(&to_f32(&answers[1]["vectors"][0]), &fake_embedding("the first passage", 32));
    let sent = embedding_requests(&upstream);
    assert_eq!(sent.len(), 2, "the client's base64 is answered by the gateway, not passed upstream");
    assert!(sent.iter().all(|r| r.json()["encoding_format"] == "float"));
}

/// What an embedding service sees in process: `embed_vector` and `rerank`
/// through the library, each call's record handed to its own observer (the
/// operation, the billed tokens, the attempt), as the gateway's ledger gets it.
#[tokio::test]
async fn the_library_embeds_and_reranks_and_every_call_reaches_the_observers() {
    use std::sync::{Arc, Mutex};
    use weir_host::record::{Acknowledged, CallObserver, CallOpening, CallRecord, Operation, acknowledged};

    #[derive(Default)]
    struct Collect(Mutex<Vec<Arc<CallRecord>>>);
    impl CallObserver for Collect {
        fn opened(&self, _opening: &CallOpening) -> Acknowledged {
            acknowledged()
        }
        fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged {
            self.0.lock().unwrap().push(Arc::clone(record));
            acknowledged()
        }
    }

    let upstream = FakeUpstream::start().await;
    let records = Arc::new(Collect::default());
    let config =
        weir_host::Config::from_toml(&openai_wire::embeddings_config(&upstream.base_url(), 24), "test").unwrap();
    let weir = weir_host::Weir::builder()
        .config(config)
        .providers_dir("/nonexistent-weir-providers")
        .observer(Arc::clone(&records) as Arc<dyn CallObserver>)
        .build()
        .unwrap();
    let vector = weir.embed_vector("embed", "a query", weir_host::types::EmbeddingPurpose::Query).await.unwrap();
    assert_close(&vector, &fake_embedding("a query", 24));
    let documents = vec!["a b".to_owned(), "query words".to_owned()];
    let ranked = weir.rerank(weir_host::retrieval::RerankRequest::new("rerank", "query", documents)).await.unwrap();
    assert_eq!(ranked.results[0].index, 1);
    let error = weir.embed_vector("rerank", "x", weir_host::types::EmbeddingPurpose::Query).await.unwrap_err();
    assert_eq!(error.category().as_str(), "invalid_request", "a rerank entry does not embed");

    let records = records.0.lock().unwrap();
    assert_eq!(records.len(), 3, "the refused call is recorded too");
    assert_eq!(records[0].operation, Operation::Embeddings);
    assert_eq!(records[0].usage.input, openai_wire::approx_tokens("a query"));
    assert_eq!(records[0].attempts.len(), 1);
    assert_eq!(records[1].operation, Operation::Rerank);
    assert_eq!(records[1].category, "ok");
    assert_eq!(records[2].category, "invalid_request");
    assert!(records[2].attempts.is_empty(), "nothing was sent for it");
}

/// An interactive call whose upstream is slower than the lane's deadline fails
/// fast with the deadline's category (`timeout`), so its caller can degrade.
#[tokio::test]
async fn an_interactive_call_past_its_deadline_fails_fast() {
    let upstream = FakeUpstream::start().await;
    upstream.delay_answers(Duration::from_secs(3));
    let config = openai_wire::embeddings_config(&upstream.base_url(), 8)
        .replace("read_timeout_secs = 5", "read_timeout_secs = 5\n[embeddings]\ninteractive_deadline_secs = 1\n");
    let gateway = Gateway::start(&config).await;
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": "q"}), &[]).await;
    assert_eq!(answer.status, 504, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], "timeout");
    assert_eq!(embedding_requests(&upstream).len(), 1, "a deadline is final: no retry");
}

/// Every attempt in the record is timed from the call's start, whichever
/// batch it belongs to: with one input per batch and eight batches in
/// flight, the ninth batch starts once the first answer (200 ms late) is in.
#[tokio::test]
async fn each_batchs_attempts_are_timed_from_the_calls_start() {
    let upstream = FakeUpstream::start().await;
    let config = format!(
        "{}\n[ledger]\npath = \"ledger.db\"\n",
        openai_wire::embeddings_config(&upstream.base_url(), 16)
            .replace("embedding_dimensions = 16", "embedding_dimensions = 16\nmax_batch = 1")
    );
    let gateway = Gateway::start(&config).await;
    upstream.delay_answers(Duration::from_millis(200));
    let answer = post(&gateway, "/v1/embeddings", &json!({"model": "embed", "input": texts(9)}), &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let records = weir_tests::closed_records(&gateway.dir().join("ledger.db"));
    let embedded = records.iter().find(|r| r["operation"] == "embeddings").expect("an embeddings record");
    let mut starts: Vec<u64> =
        embedded["attempts"].as_array().unwrap().iter().map(|a| a["started_ms"].as_u64().unwrap()).collect();
    starts.sort_unstable();
    assert_eq!(starts.len(), 9);
    assert!(starts[8] >= 200, "the ninth batch started after the first answer: {starts:?}");
    assert!(starts[..8].iter().all(|&start| start < 200), "eight started at once: {starts:?}");
}
