//! The answer cache (issue 51) through the real gateway binary: callers with
//! keys, the fake OpenAI upstream (its echo answers each request from its
//! last user turn, with usage), and the ledger. Each test asserts how many
//! requests reached the upstream and what the ledger recorded.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, Posted, RedisServer, closed_records, openai_wire};

const ANA: &str = "sk-weir-ana-1";
const ANA_OTHER_KEY: &str = "sk-weir-ana-2";
const BOB: &str = "sk-weir-bob-1";

fn hash(token: &str) -> String {
    weir_host::identity::hash_of(token)
}

/// Entry `cached` (caching for 300 s, `cached_fields` added), entry `plain`
/// (no caching), members `ana` (two keys) and `bob` (admin, for `/metrics`),
/// `[cache]` with `cache_fields`, and `tail` (budgets, `[fleet]`, the ledger).
fn config(upstream: &FakeUpstream, cached_fields: &str, cache_fields: &str, tail: &str) -> String {
    format!(
        r#"
[[model]]
id = "cached"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = 4000
context_window = 100000
input_price = 2.0
output_price = 8.0
max_retries = 0
cache_ttl_secs = 300
{cached_fields}

[[model]]
id = "plain"
provider = "openai-compatible"
wire_id = "qwen3"
endpoint = "{url}"
max_output_tokens = 4000
context_window = 100000
max_retries = 0

[[key]]
id = "k1"
member = "ana"
team = "search"
hash = "{ana}"

[[key]]
id = "k2"
member = "ana"
team = "search"
hash = "{ana2}"

[[key]]
id = "k3"
member = "bob"
team = "search"
hash = "{bob}"
admin = true

[cache]
{cache_fields}

{tail}
"#,
        url = upstream.base_url(),
        ana = hash(ANA),
        ana2 = hash(ANA_OTHER_KEY),
        bob = hash(BOB),
    )
}

fn ledger_table(dir: &tempfile::TempDir) -> String {
    format!("[ledger]\npath = {:?}\n", ledger_path(dir).to_str().unwrap())
}

fn ledger_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("ledger.db")
}

fn ask(model: &str, text: &str) -> Value {
    json!({"model": model, "max_tokens": 200, "messages": [{"role": "user", "content": text}]})
}

async fn post(gateway: &Gateway, token: &str, body: &Value, headers: &[(&str, &str)]) -> Posted {
    let auth = format!("Bearer {token}");
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(headers);
    gateway.post_json("/v1/chat/completions", body, &all).await
}

fn mark(posted: &Posted) -> Option<&str> {
    posted.headers.get("x-weir-cache").map(|value| value.to_str().unwrap())
}

fn call_id(posted: &Posted) -> &str {
    posted.headers.get("x-weir-call-id").unwrap().to_str().unwrap()
}

fn text(posted: &Posted) -> &str {
    posted.body["choices"][0]["message"]["content"].as_str().unwrap_or_else(|| panic!("no text in {}", posted.body))
}

/// The record whose call id is `id`.
fn record<'a>(records: &'a [Value], id: &str) -> &'a Value {
    records.iter().find(|record| record["call_id"] == id).unwrap_or_else(|| panic!("no record {id}"))
}

fn total_tokens(record: &Value) -> u64 {
    let usage = &record["usage"];
    ["input", "output", "cache_read", "cache_write"].iter().map(|kind| usage[kind].as_u64().unwrap()).sum()
}

/// Identical calls from one member (by either of its keys) reach the upstream
/// once; the same body from another member is its own miss. The hit's record
/// is marked, names the call that paid, and bills nothing.
#[tokio::test]
async fn identical_calls_from_one_member_reach_the_upstream_once_and_never_cross_members() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(&config(&upstream, "", "", &ledger_table(&dir))).await;
    let body = ask("cached", "What is the capital of France?");

    let first = post(&gateway, ANA, &body, &[]).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(mark(&first), Some("miss"));
    let again = post(&gateway, ANA, &body, &[]).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(mark(&again), Some("hit"));
    assert_eq!(again.headers.get("x-weir-attempts").unwrap(), "0");
    assert_eq!(text(&again), text(&first));
    assert_eq!(again.body["usage"], first.body["usage"], "the answer as it was, usage included");
    let other_key = post(&gateway, ANA_OTHER_KEY, &body, &[]).await;
    assert_eq!(mark(&other_key), Some("hit"), "the member's scope covers its keys");
    assert_eq!(upstream.request_count(), 1);

    let bob = post(&gateway, BOB, &body, &[]).await;
    assert_eq!(bob.status, 200, "{}", bob.body);
    assert_eq!(mark(&bob), Some("miss"), "another member never reads ana's answer");
    assert_eq!(upstream.request_count(), 2);

    let records = closed_records(&ledger_path(&dir));
    let paid = record(&records, call_id(&first));
    assert!(paid.get("cached").is_none(), "{paid}");
    assert!(total_tokens(paid) > 0);
    for hit in [&again, &other_key] {
        let row = record(&records, call_id(hit));
        assert_eq!(row["cached"], true, "{row}");
        assert_eq!(row["cached_from"], call_id(&first));
        assert_eq!(row["category"], "ok");
        assert_eq!(row["operation"], "chat");
        assert_eq!(row["member"], "ana");
        assert_eq!(row["attempts"].as_array().unwrap().len(), 0, "no attempt, no admission");
        assert_eq!(total_tokens(row), 0);
        assert_eq!(row["cost_usd"], 0.0);
    }
    assert_eq!(record(&records, call_id(&other_key))["key_id"], "k2");
    assert!(record(&records, call_id(&bob)).get("cached").is_none());
}

/// `cache-control: no-store` neither reads nor stores; `no-cache` skips the
/// read and still stores the answer.
#[tokio::test]
async fn no_store_skips_both_and_no_cache_skips_only_the_read() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "", "", "[ledger]\nenabled = false\n")).await;
    let first = ask("cached", "first question");
    let second = ask("cached", "second question");

    let unstored = post(&gateway, ANA, &first, &[("cache-control", "no-store")]).await;
    assert_eq!(unstored.status, 200, "{}", unstored.body);
    assert_eq!(mark(&unstored), Some("bypass"));
    let after = post(&gateway, ANA, &first, &[]).await;
    assert_eq!(mark(&after), Some("miss"), "no-store stored nothing");
    assert_eq!(upstream.request_count(), 2);
    let stored_anyway = post(&gateway, ANA, &first, &[("cache-control", "no-store")]).await;
    assert_eq!(mark(&stored_anyway), Some("bypass"), "no-store does not read what is there");
    assert_eq!(upstream.request_count(), 3);

    let fresh = post(&gateway, ANA, &second, &[("cache-control", "max-age=0, no-cache")]).await;
    assert_eq!(mark(&fresh), Some("bypass"));
    assert_eq!(upstream.request_count(), 4);
    let hit = post(&gateway, ANA, &second, &[]).await;
    assert_eq!(mark(&hit), Some("hit"), "no-cache still stored its answer");
    assert_eq!(upstream.request_count(), 4);
    let refreshed = post(&gateway, ANA, &second, &[("cache-control", "no-cache")]).await;
    assert_eq!(mark(&refreshed), Some("bypass"));
    assert_eq!(upstream.request_count(), 5, "no-cache skips the read");
}

/// An entry without `cache_ttl_secs` never caches, whatever the caller's
/// `cache-control` says; its answers carry no `x-weir-cache`.
#[tokio::test]
async fn an_entry_without_caching_never_caches_whatever_the_caller_asks() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(&config(&upstream, "", "", &ledger_table(&dir))).await;
    let body = ask("plain", "same question");
    for headers in [&[][..], &[("cache-control", "max-age=3600")][..], &[("cache-control", "only-if-cached")][..]] {
        let answer = post(&gateway, ANA, &body, headers).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(mark(&answer), None);
    }
    assert_eq!(upstream.request_count(), 3);
    let records = closed_records(&ledger_path(&dir));
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|record| record.get("cached").is_none() && total_tokens(record) > 0));
}

/// A failed, a refused, a truncated and an oversize answer are not stored:
/// the same request goes upstream again.
#[tokio::test]
async fn a_failed_refused_truncated_or_oversize_answer_is_not_stored() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(&config(&upstream, "", "max_entry_bytes = 600", &ledger_table(&dir))).await;

    let body = ask("cached", "fails first");
    upstream.push(openai_wire::server_error());
    let failed = post(&gateway, ANA, &body, &[]).await;
    assert_eq!(failed.status, 502, "{}", failed.body);
    assert_eq!(mark(&failed), Some("miss"));
    let retried = post(&gateway, ANA, &body, &[]).await;
    assert_eq!((retried.status, mark(&retried)), (200, Some("miss")), "{}", retried.body);
    assert_eq!(upstream.request_count(), 2);

    let body = ask("cached", "refused first");
    upstream.push(openai_wire::content_filtered("no"));
    let refused = post(&gateway, ANA, &body, &[]).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert_eq!(mark(&post(&gateway, ANA, &body, &[]).await), Some("miss"));
    assert_eq!(upstream.request_count(), 4);

    let body = ask("cached", "truncated first");
    upstream.push(openai_wire::length_truncated("cut sh"));
    let cut = post(&gateway, ANA, &body, &[("x-weir-truncation", "accept")]).await;
    assert_eq!(cut.status, 200, "{}", cut.body);
    assert_eq!(cut.body["choices"][0]["finish_reason"], "length");
    assert_eq!(mark(&post(&gateway, ANA, &body, &[]).await), Some("miss"), "a truncated answer is not stored");
    assert_eq!(upstream.request_count(), 6);

    let body = ask("cached", "long answer");
    upstream.push(openai_wire::completion(&"word ".repeat(200)));
    let long = post(&gateway, ANA, &body, &[]).await;
    assert_eq!((long.status, mark(&long)), (200, Some("miss")), "{}", long.body);
    assert_eq!(mark(&post(&gateway, ANA, &body, &[]).await), Some("miss"), "above max_entry_bytes: not stored");
    assert_eq!(upstream.request_count(), 8);

    let records = closed_records(&ledger_path(&dir));
    assert!(records.iter().all(|record| record.get("cached").is_none()), "no hit at all");
}

/// A whole call stores the neutral answer; the same request streamed is a hit
/// replayed as chunks, with the usage chunk and `[DONE]`.
#[tokio::test]
async fn a_whole_answer_serves_the_same_request_streamed() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "", "", "[ledger]\nenabled = false\n")).await;
    let body = ask("cached", "stream me later");
    let whole = post(&gateway, ANA, &body, &[]).await;
    assert_eq!(mark(&whole), Some("miss"));

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let response = reqwest::Client::new()
        .post(gateway.url("/v1/chat/completions"))
        .bearer_auth(ANA)
        .json(&streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers().get("x-weir-cache").unwrap(), "hit");
    let sse = response.text().await.unwrap();
    let chunks: Vec<Value> = sse
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let replayed: String =
        chunks.iter().filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str()).collect::<String>();
    assert_eq!(replayed, text(&whole));
    assert_eq!(chunks.last().unwrap()["usage"], whole.body["usage"], "the usage chunk closes the stream");
    assert!(sse.trim_end().ends_with("data: [DONE]"), "{sse}");
    assert_eq!(upstream.request_count(), 1);
}

/// A stream served from the cache parses in the official `openai` and
/// `anthropic` clients: each client's second run is a hit (one upstream
/// request each) with the same text and usage as its first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_from_the_cache_parses_in_the_official_clients() {
    let upstream = FakeUpstream::start().await;
    let toml = format!(
        r#"
allow_unauthenticated = true

[[model]]
id = "cached"
provider = "openai-compatible"
endpoint = "{url}"
max_output_tokens = 4000
context_window = 100000
output_tokens = 500
cache_ttl_secs = 60

[cache]

[ledger]
enabled = false
"#,
        url = upstream.base_url()
    );
    let gateway = Gateway::start(&toml).await;
    let base = gateway.url("/v1");
    let first = weir_tests::python::run_openai_client(&base, "cached", "stream");
    assert_eq!(upstream.request_count(), 1);
    let second = weir_tests::python::run_openai_client(&base, "cached", "stream");
    assert_eq!(upstream.request_count(), 1, "the second stream came from the cache");
    assert_eq!(second[0]["text"], first[0]["text"]);
    assert!(second[0]["usage"].is_object(), "{}", second[0]);
    assert_eq!(second[0]["usage"], first[0]["usage"]);

    let root = gateway.url("");
    let first = weir_tests::python::run_anthropic_client(&root, "cached", "stream");
    assert_eq!(upstream.request_count(), 2);
    let second = weir_tests::python::run_anthropic_client(&root, "cached", "stream");
    assert_eq!(upstream.request_count(), 2, "the second stream came from the cache");
    assert_eq!(second[0]["text"], first[0]["text"]);
    assert_eq!(second[0]["usage"], first[0]["usage"]);

    let metrics = reqwest::get(gateway.url("/metrics")).await.unwrap().text().await.unwrap();
    let count = |name: &str| -> f64 {
        let line = metrics.lines().find(|line| line.starts_with(name)).unwrap_or_else(|| panic!("{name}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(count("weir_answer_cache_hits_total"), 2.0);
    assert_eq!(count("weir_answer_cache_misses_total"), 2.0);
    let stored = count("weir_answer_cache_stored_bytes_total");
    assert!(stored > 0.0);
    assert_eq!(count("weir_answer_cache_held_bytes"), stored, "both answers are still held");
}

/// A member's budget after hits: a hit spends nothing (the ledger's usage
/// and the member's spend count the misses only), and a caller whose budget
/// cannot hold the call's worst case gets no hit either: the cache never
/// answers a caller who could not have made the call.
#[tokio::test]
async fn hits_spend_no_budget_and_a_caller_over_budget_gets_no_hit() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let tail = format!("[member.ana]\ndaily_tokens = 2500\n\n{}", ledger_table(&dir));
    let gateway = Gateway::start(&config(&upstream, "", "", &tail)).await;
    let budgeted =
        |text: &str| json!({"model": "cached", "max_tokens": 1000, "messages": [{"role": "user", "content": text}]});
    let (first_body, second_body) = (budgeted("first"), budgeted("second"));

    upstream.push(openai_wire::completion_with_usage("Hello", 10, 990, 0, 0));
    let first = post(&gateway, ANA, &first_body, &[]).await;
    assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{}", first.body);
    let mut hits = Vec::new();
    for _ in 0..3 {
        let hit = post(&gateway, ANA, &first_body, &[]).await;
        assert_eq!((hit.status, mark(&hit)), (200, Some("hit")), "{}", hit.body);
        hits.push(hit);
    }
    // Had the hits spent, 4 000 tokens would be gone and this refused.
    upstream.push(openai_wire::completion_with_usage("Hello again", 10, 990, 0, 0));
    let second = post(&gateway, ANA, &second_body, &[]).await;
    assert_eq!((second.status, mark(&second)), (200, Some("miss")), "{}", second.body);
    assert_eq!(upstream.request_count(), 2);

    // 500 tokens left: less than the call's worst case, so no hit.
    let refused = post(&gateway, ANA, &first_body, &[]).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "budget_exhausted");
    assert_eq!(mark(&refused), None, "refused before the lookup");
    assert_eq!(upstream.request_count(), 2);

    let records = closed_records(&ledger_path(&dir));
    let spent: u64 = records.iter().map(total_tokens).sum();
    assert_eq!(spent, 2000, "only the two misses spent");
    for hit in &hits {
        let row = record(&records, call_id(hit));
        assert_eq!((row["cached"].as_bool(), total_tokens(row)), (Some(true), 0), "{row}");
    }
    assert_eq!(record(&records, call_id(&refused))["category"], "budget_exhausted");
}

/// Three gateways sharing one Redis share a hit. A value damaged in Redis is
/// a miss (answered, counted), and Redis going away is a miss too, never a
/// failed call: the answer is then kept in the gateway's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_with_redis_share_a_hit_and_survive_a_bad_or_absent_redis() {
    let mut redis = RedisServer::start().await;
    let upstream = FakeUpstream::start().await;
    let fleet = format!(
        "[ledger]\nenabled = false\n\n[fleet]\nredis_url = \"{}\"\non_shared_error = \"local\"\nfleet_size = 3\n",
        redis.url()
    );
    let toml = config(&upstream, "", "", &fleet);
    let gateways = [Gateway::start(&toml).await, Gateway::start(&toml).await, Gateway::start(&toml).await];
    let body = ask("cached", "shared question");

    let first = post(&gateways[0], ANA, &body, &[]).await;
    assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{}", first.body);
    for gateway in &gateways[1..] {
        let hit = post(gateway, ANA, &body, &[]).await;
        assert_eq!((hit.status, mark(&hit)), (200, Some("hit")), "{}", hit.body);
        assert_eq!(text(&hit), text(&first));
    }
    assert_eq!(upstream.request_count(), 1, "three gateways, one upstream request");
    let bob = post(&gateways[2], BOB, &body, &[]).await;
    assert_eq!(mark(&bob), Some("miss"), "no member reads another's answer through Redis either");
    assert_eq!(upstream.request_count(), 2);

    // Damage ana's value: gateway 1 (which holds nothing in memory) misses.
    let mut connection = redis.connection().await;
    let keys: Vec<String> = redis::cmd("KEYS").arg("weir:answer:*").query_async(&mut connection).await.unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in &keys {
        let () = redis::cmd("SET").arg(key).arg("not an answer").query_async(&mut connection).await.unwrap();
    }
    let damaged = post(&gateways[1], ANA, &body, &[]).await;
    assert_eq!((damaged.status, mark(&damaged)), (200, Some("miss")), "{}", damaged.body);
    assert_eq!(upstream.request_count(), 3);
    let metrics = reqwest::Client::new()
        .get(gateways[1].url("/metrics"))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let failures = metrics.lines().find(|line| line.starts_with("weir_answer_cache_shared_failures_total")).unwrap();
    assert_eq!(failures.rsplit(' ').next().unwrap(), "1", "{failures}");
    // The miss stored a good value again, which the others read.
    let healed = post(&gateways[2], ANA, &body, &[]).await;
    assert_eq!(mark(&healed), Some("hit"));
    assert_eq!(upstream.request_count(), 3);

    // Redis gone: a miss, answered; kept in the gateway's memory.
    redis.stop();
    let body = ask("cached", "asked while redis is down");
    let without = post(&gateways[2], ANA, &body, &[]).await;
    assert_eq!((without.status, mark(&without)), (200, Some("miss")), "{}", without.body);
    let from_memory = post(&gateways[2], ANA, &body, &[]).await;
    assert_eq!((from_memory.status, mark(&from_memory)), (200, Some("hit")), "{}", from_memory.body);
    let elsewhere = post(&gateways[0], ANA, &body, &[]).await;
    assert_eq!((elsewhere.status, mark(&elsewhere)), (200, Some("miss")), "{}", elsewhere.body);
    assert_eq!(upstream.request_count(), 5);
}

/// Embeddings are cached per input: a batch of ten with three already
/// embedded sends only the seven others (in batches of four), and the answer
/// keeps the input order; the same ten again send nothing, and that call's
/// record is a hit that billed nothing.
#[tokio::test]
async fn embeddings_with_a_partial_hit_send_only_the_misses_and_keep_the_order() {
    use weir_tests::fake_upstream::fake_embedding;
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let entry = openai_wire::embeddings_config(&upstream.base_url(), 64)
        .replace("embedding_dimensions = 64", "embedding_dimensions = 64\nmax_batch = 4\ncache_ttl_secs = 60");
    let toml = format!("{entry}\n[cache]\n\n{}", ledger_table(&dir));
    let gateway = Gateway::start(&toml).await;
    let inputs: Vec<String> = (0..10).map(|i| format!("passage number {i} about rivers")).collect();
    let embeddings = |upstream: &FakeUpstream| -> Vec<Value> {
        upstream.received().into_iter().filter(|r| r.path == "/v1/embeddings").map(|r| r.json()).collect()
    };

    let some: Vec<&String> = [2, 5, 8].iter().map(|i| &inputs[*i]).collect();
    let first = gateway.post_json("/v1/embeddings", &json!({"model": "embed", "input": some}), &[]).await;
    assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{}", first.body);
    assert_eq!(embeddings(&upstream).len(), 1);

    let all = gateway.post_json("/v1/embeddings", &json!({"model": "embed", "input": inputs}), &[]).await;
    assert_eq!((all.status, mark(&all)), (200, Some("miss")), "{}", all.body);
    let sent = embeddings(&upstream);
    assert_eq!(sent.len(), 3, "seven misses in batches of four");
    let mut texts: Vec<String> = sent[1..]
        .iter()
        .flat_map(|body| body["input"].as_array().unwrap().clone())
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    texts.sort();
    let mut misses: Vec<String> =
        inputs.iter().enumerate().filter(|(i, _)| ![2, 5, 8].contains(i)).map(|(_, t)| t.clone()).collect();
    misses.sort();
    assert_eq!(texts, misses, "only the inputs not cached were sent");
    let vectors = openai_wire::embedding_vectors(&all.body);
    assert_eq!(vectors.len(), 10);
    for (vector, text) in vectors.iter().zip(&inputs) {
        let want = fake_embedding(text, 64);
        assert!(vector.iter().zip(&want).all(|(got, want)| (got - want).abs() < 1e-5), "{text}: order kept");
    }
    let miss_tokens: u64 = misses.iter().map(|text| openai_wire::approx_tokens(text)).sum();
    assert_eq!(all.body["usage"]["prompt_tokens"], miss_tokens, "only what was sent is billed");

    let again = gateway.post_json("/v1/embeddings", &json!({"model": "embed", "input": inputs}), &[]).await;
    assert_eq!((again.status, mark(&again)), (200, Some("hit")), "{}", again.body);
    assert_eq!(openai_wire::embedding_vectors(&again.body), vectors);
    assert_eq!(embeddings(&upstream).len(), 3, "every input cached: nothing sent");

    let records = closed_records(&ledger_path(&dir));
    let hit = record(&records, call_id(&again));
    assert_eq!((hit["cached"].as_bool(), hit["operation"].as_str()), (Some(true), Some("embeddings")), "{hit}");
    assert_eq!(hit["cached_from"], call_id(&all), "the last call that embedded is named");
    assert_eq!((hit["attempts"].as_array().unwrap().len(), total_tokens(hit)), (0, 0));
    assert!(record(&records, call_id(&all)).get("cached").is_none());
}

/// The operator's `cache_scope` decides who shares: `team` (ana and bob are
/// both in team `search`), `key` (ana's two keys apart), `global` (everyone).
#[tokio::test]
async fn the_entrys_scope_decides_who_shares_an_answer() {
    let body = ask("cached", "scoped question");
    for (scope, second, shared) in [("team", BOB, true), ("key", ANA_OTHER_KEY, false), ("global", BOB, true)] {
        let upstream = FakeUpstream::start().await;
        let fields = format!("cache_scope = \"{scope}\"");
        let gateway = Gateway::start(&config(&upstream, &fields, "", "[ledger]\nenabled = false\n")).await;
        let first = post(&gateway, ANA, &body, &[]).await;
        assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{scope}: {}", first.body);
        let other = post(&gateway, second, &body, &[]).await;
        let expected = if shared { "hit" } else { "miss" };
        assert_eq!(mark(&other), Some(expected), "{scope}");
        assert_eq!(upstream.request_count(), if shared { 1 } else { 2 }, "{scope}");
    }
}

/// On the Responses route a hit is a response of its own: `store: true`
/// keeps it under its own id (readable back), and a continuation by
/// `previous_response_id` is keyed by the whole conversation it makes.
#[tokio::test]
async fn the_responses_route_stores_and_continues_a_hit() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(&config(&upstream, "", "", &ledger_table(&dir))).await;
    let auth = format!("Bearer {ANA}");
    let headers = [("authorization", auth.as_str())];
    let create = |body: Value| {
        let gateway = &gateway;
        async move { gateway.post_json("/v1/responses", &body, &headers).await }
    };
    let output_text = |posted: &Posted| posted.body["output"][0]["content"][0]["text"].as_str().unwrap().to_owned();

    let question =
        json!({"model": "cached", "input": "What is two plus two?", "store": true, "max_output_tokens": 200});
    let first = create(question.clone()).await;
    assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{}", first.body);
    let again = create(question).await;
    assert_eq!((again.status, mark(&again)), (200, Some("hit")), "{}", again.body);
    assert_eq!(output_text(&again), output_text(&first));
    assert_ne!(again.body["id"], first.body["id"], "a response of its own");
    assert_eq!(again.body["store"], true);
    assert_eq!(upstream.request_count(), 1);

    let id = again.body["id"].as_str().unwrap();
    let read =
        reqwest::Client::new().get(gateway.url(&format!("/v1/responses/{id}"))).bearer_auth(ANA).send().await.unwrap();
    assert_eq!(read.status(), 200, "the hit was stored");
    let stored: Value = read.json().await.unwrap();
    assert_eq!(stored["id"], id);

    let follow_up = json!({"model": "cached", "input": "And three plus three?", "previous_response_id": id, "max_output_tokens": 200});
    let continued = create(follow_up.clone()).await;
    assert_eq!((continued.status, mark(&continued)), (200, Some("miss")), "{}", continued.body);
    assert_eq!(upstream.request_count(), 2);
    let sent = upstream.received().last().unwrap().json();
    let sent_text = sent["messages"].to_string();
    assert!(sent_text.contains("two plus two") && sent_text.contains("three plus three"), "{sent_text}");
    let repeated = create(follow_up).await;
    assert_eq!((repeated.status, mark(&repeated)), (200, Some("hit")), "{}", repeated.body);
    assert_eq!(output_text(&repeated), output_text(&continued));
    assert_eq!(upstream.request_count(), 2);
}

/// A role's fallback serves from its own entry: the primary's miss is not
/// filled with the fallback's answer (which is not stored at all when the
/// fallback does not cache), and the next call asks the primary again.
#[tokio::test]
async fn a_fallbacks_answer_is_never_stored_under_the_primarys_key() {
    let (primary, backup) = (FakeUpstream::start().await, FakeUpstream::start().await);
    let toml = format!(
        r#"
[[model]]
id = "primary"
provider = "openai-compatible"
endpoint = "{primary}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20
max_retries = 0
cache_ttl_secs = 60

[[model]]
id = "backup"
provider = "openai-compatible"
endpoint = "{backup}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20

[role.chat]
model = "primary"
fallback = ["backup"]

[[key]]
id = "k1"
member = "ana"
hash = "{ana}"

[cache]

[ledger]
enabled = false
"#,
        primary = primary.base_url(),
        backup = backup.base_url(),
        ana = hash(ANA),
    );
    let gateway = Gateway::start(&toml).await;
    let body = ask("chat", "fall back once");
    primary.push(openai_wire::server_error());
    let fell_back = post(&gateway, ANA, &body, &[]).await;
    assert_eq!(fell_back.status, 200, "{}", fell_back.body);
    assert_eq!(fell_back.headers.get("x-weir-model").unwrap(), "backup");
    assert_eq!(mark(&fell_back), None, "the entry that served does not cache");

    let next = post(&gateway, ANA, &body, &[]).await;
    assert_eq!((next.status, mark(&next)), (200, Some("miss")), "{}", next.body);
    assert_eq!(next.headers.get("x-weir-model").unwrap(), "primary");
    assert_eq!((primary.request_count(), backup.request_count()), (2, 1));
    let hit = post(&gateway, ANA, &body, &[]).await;
    assert_eq!((mark(&hit), text(&hit)), (Some("hit"), text(&next)), "the primary's own answer is stored");
    assert_eq!((primary.request_count(), backup.request_count()), (2, 1));
}

/// A rerank call is cached whole: the same query, documents and `top_n` from
/// the same member are answered from the cache (the same ranking, the
/// documents written back as asked); another `top_n` is its own call.
#[tokio::test]
async fn a_repeated_rerank_is_answered_from_the_cache() {
    let upstream = FakeUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let entry = openai_wire::embeddings_config(&upstream.base_url(), 16)
        .replace("wire_id = \"bge-reranker-v2-m3\"", "wire_id = \"bge-reranker-v2-m3\"\ncache_ttl_secs = 60");
    let gateway = Gateway::start(&format!("{entry}\n[cache]\n\n{}", ledger_table(&dir))).await;
    let documents: Vec<String> =
        ["rivers and lakes", "mountains", "rivers of the north and lakes"].map(str::to_owned).to_vec();
    let body = json!({"model": "rerank", "query": "northern rivers and lakes", "documents": documents, "top_n": 2,
                      "return_documents": true});
    let reranks = |upstream: &FakeUpstream| upstream.received().iter().filter(|r| r.path == "/v1/rerank").count();

    let first = gateway.post_json("/v1/rerank", &body, &[]).await;
    assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{}", first.body);
    let again = gateway.post_json("/v1/rerank", &body, &[]).await;
    assert_eq!((again.status, mark(&again)), (200, Some("hit")), "{}", again.body);
    assert_eq!(openai_wire::rerank_results(&again.body), openai_wire::rerank_results(&first.body));
    assert_eq!(again.body["results"][0]["document"], first.body["results"][0]["document"]);
    assert_eq!(reranks(&upstream), 1);

    let mut three = body.clone();
    three["top_n"] = json!(3);
    let other = gateway.post_json("/v1/rerank", &three, &[]).await;
    assert_eq!((other.status, mark(&other)), (200, Some("miss")), "{}", other.body);
    assert_eq!(reranks(&upstream), 2);

    let records = closed_records(&ledger_path(&dir));
    let hit = record(&records, call_id(&again));
    assert_eq!((hit["cached"].as_bool(), hit["operation"].as_str()), (Some(true), Some("rerank")), "{hit}");
    assert_eq!(hit["cached_from"], call_id(&first));
    assert_eq!(hit["attempts"].as_array().unwrap().len(), 0);
}

/// A role may opt its calls in: naming role `fast` (whose entry `plain` does
/// not cache) caches, keyed by the entry that served; naming `plain` itself
/// does not.
#[tokio::test]
async fn a_role_opts_its_calls_in_and_the_entry_named_directly_stays_uncached() {
    let upstream = FakeUpstream::start().await;
    let role = "[role.fast]\nmodel = \"plain\"\ncache_ttl_secs = 60\n\n[ledger]\nenabled = false\n";
    let gateway = Gateway::start(&config(&upstream, "", "", role)).await;
    let by_role = ask("fast", "role question");
    let first = post(&gateway, ANA, &by_role, &[]).await;
    assert_eq!((first.status, mark(&first)), (200, Some("miss")), "{}", first.body);
    assert_eq!(first.headers.get("x-weir-model").unwrap(), "plain");
    let again = post(&gateway, ANA, &by_role, &[]).await;
    assert_eq!((again.status, mark(&again)), (200, Some("hit")), "{}", again.body);
    assert_eq!(upstream.request_count(), 1);

    let direct = ask("plain", "role question");
    for _ in 0..2 {
        let answer = post(&gateway, ANA, &direct, &[]).await;
        assert_eq!((answer.status, mark(&answer)), (200, None), "{}", answer.body);
    }
    assert_eq!(upstream.request_count(), 3, "the entry named directly does not cache");
}
