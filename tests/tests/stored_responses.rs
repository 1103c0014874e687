//! Stored responses (`store: true` on `POST /v1/responses`): through the real gateway
//! (create, read back, list input items, continue with `previous_response_id`, delete; a
//! key sees only its own; a stream's response is kept once it completes), and in the
//! fleet's PostgreSQL, where one gateway reads what another stored.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_host::stored::StoredResponse;
use weir_host::{Caller, Config, Weir};
use weir_tests::{FakeUpstream, Gateway, PostgresServer};

const ANA: &str = "weir-ana-token-0123456789abcdef";
const ANA_TOO: &str = "weir-ana-second-token-0123456789";
const BOB: &str = "weir-bob-token-0123456789abcdef";

fn keyed(upstream: &FakeUpstream, extra: &str) -> String {
    let hash = weir_host::identity::hash_of;
    format!(
        r#"{extra}
[[model]]
id = "gpt"
provider = "openai"
wire_id = "gpt-4.1"
endpoint = "{url}"
credential = "weir-test-key"
max_output_tokens = 1000
context_window = 100000
output_tokens = 100
max_retries = 0

[[key]]
id = "ana-key"
member = "ana"
hash = "{ana}"

[[key]]
id = "ana-second-key"
member = "ana"
hash = "{ana_too}"

[[key]]
id = "bob-key"
member = "bob"
hash = "{bob}"

[ledger]
path = "ledger.db"
"#,
        url = upstream.base_url(),
        ana = hash(ANA),
        ana_too = hash(ANA_TOO),
        bob = hash(BOB),
    )
}

async fn gateway(upstream: &FakeUpstream, extra: &str) -> Gateway {
    Gateway::start_with(&keyed(upstream, extra), &[("WEIR_TEST_KEY", "sk-upstream-0123456789")], None).await
}

async fn send(
    gateway: &Gateway,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, gateway.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn create(gateway: &Gateway, token: &str, body: Value) -> (u16, Value) {
    send(gateway, reqwest::Method::POST, "/v1/responses", token, Some(body)).await
}

async fn get(gateway: &Gateway, token: &str, path: &str) -> (u16, Value) {
    send(gateway, reqwest::Method::GET, path, token, None).await
}

#[tokio::test]
async fn a_stored_response_is_read_listed_continued_and_deleted_by_its_key_only() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "").await;

    let (status, first) = create(&gateway, ANA, json!({"model": "gpt", "input": "First question"})).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["store"], true, "OpenAI's default is to store: {first}");
    let id = first["id"].as_str().unwrap().to_owned();

    let (status, read) = get(&gateway, ANA, &format!("/v1/responses/{id}")).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read, first, "read back as it was answered");
    let (status, items) = get(&gateway, ANA, &format!("/v1/responses/{id}/input_items")).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"][0]["content"][0]["text"], "First question", "{items}");
    assert!(items["data"][0]["id"].is_string(), "{items}");

    // Another key, even of the same member, and another member: the same 404 as no id.
    for token in [ANA_TOO, BOB] {
        let (status, error) = get(&gateway, token, &format!("/v1/responses/{id}")).await;
        assert_eq!(status, 404, "{error}");
        assert_eq!(error["error"]["type"], "not_found");
        let continued = json!({"model": "gpt", "input": "x", "previous_response_id": id});
        assert_eq!(create(&gateway, token, continued).await.0, 404);
    }
    let (status, _) = get(&gateway, ANA, "/v1/responses/resp_never_made").await;
    assert_eq!(status, 404);

    let continued = json!({"model": "gpt", "input": "Second question", "previous_response_id": id, "store": false});
    let (status, second) = create(&gateway, ANA, continued).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], id.as_str());
    assert_eq!(second["store"], false);
    let sent = upstream.received().last().unwrap().json();
    let turns: Vec<(&str, String)> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].to_string()))
        .collect();
    assert_eq!(turns.len(), 3, "the stored question and answer, then the new question: {turns:?}");
    assert!(
        turns[0].1.contains("First question")
            && turns[1].0 == "assistant"
            && turns[1].1.contains("echo: First question")
    );
    assert!(turns[2].1.contains("Second question"));
    let (status, _) = get(&gateway, ANA, &format!("/v1/responses/{}", second["id"].as_str().unwrap())).await;
    assert_eq!(status, 404, "store: false keeps nothing");

    let (status, _) = send(&gateway, reqwest::Method::DELETE, &format!("/v1/responses/{id}"), BOB, None).await;
    assert_eq!(status, 404, "another key cannot delete it");
    let (status, deleted) = send(&gateway, reqwest::Method::DELETE, &format!("/v1/responses/{id}"), ANA, None).await;
    assert_eq!((status, deleted["deleted"].clone()), (200, json!(true)), "{deleted}");
    assert_eq!(get(&gateway, ANA, &format!("/v1/responses/{id}")).await.0, 404);
}

#[tokio::test]
async fn under_member_visibility_a_members_keys_share_and_a_stream_is_kept_once_complete() {
    let upstream = FakeUpstream::start().await;
    let gateway = gateway(&upstream, "[responses]\nvisible_to = \"member\"\n").await;

    let response = reqwest::Client::new()
        .post(gateway.url("/v1/responses"))
        .bearer_auth(ANA)
        .json(&json!({"model": "gpt", "input": "Streamed question", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let completed = text
        .split("\n\n")
        .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|event| event["type"] == "response.completed")
        .unwrap();
    let id = completed["response"]["id"].as_str().unwrap().to_owned();

    // Kept just after the completed event is written: poll briefly.
    let mut read = (0, Value::Null);
    for _ in 0..50 {
        read = get(&gateway, ANA_TOO, &format!("/v1/responses/{id}")).await;
        if read.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(read.0, 200, "ana's other key sees it under member visibility: {}", read.1);
    assert_eq!(read.1["output"], completed["response"]["output"]);
    assert_eq!(get(&gateway, BOB, &format!("/v1/responses/{id}")).await.0, 404);
}

#[tokio::test]
async fn retention_zero_stores_nothing_and_a_bad_page_is_the_callers_error() {
    let upstream = FakeUpstream::start().await;
    let off = gateway(&upstream, "[responses]\nretention_secs = 0\n").await;
    let (status, answer) = create(&off, ANA, json!({"model": "gpt", "input": "Hi"})).await;
    assert_eq!((status, answer["store"].clone()), (200, json!(false)), "{answer}");
    let (status, error) = get(&off, ANA, &format!("/v1/responses/{}", answer["id"].as_str().unwrap())).await;
    assert_eq!(status, 404, "{error}");

    let on = gateway(&upstream, "").await;
    let (_, answer) = create(&on, ANA, json!({"model": "gpt", "input": "Hi"})).await;
    let id = answer["id"].as_str().unwrap();
    for query in ["limit=0", "limit=101", "order=sideways", "after=nope"] {
        let (status, error) = get(&on, ANA, &format!("/v1/responses/{id}/input_items?{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
    }
    let (status, _) = get(&on, ANA, &format!("/v1/responses/{id}?stream=true")).await;
    assert_eq!(status, 400);
}

fn fleet_member(server: &PostgresServer, folder: &std::path::Path) -> Weir {
    let toml =
        format!("[ledger]\npath = \"{}\"\npostgres_url = \"{}\"\n", folder.join("ledger.db").display(), server.url());
    let config = Config::from_toml(&toml, "stored_responses test").unwrap();
    Weir::builder().config(config).build().unwrap()
}

fn caller(key_id: &str, member: &str) -> Caller {
    Caller { key_id: Some(key_id.to_owned()), member: member.to_owned(), team: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_stored_by_one_gateway_is_read_and_deleted_through_another() {
    let server = PostgresServer::start();
    let (first_folder, second_folder) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = fleet_member(&server, first_folder.path());
    let second = fleet_member(&server, second_folder.path());
    let ana = caller("ana-key", "ana");
    let stored = StoredResponse {
        id: "resp_fleet_1".to_owned(),
        model: "chat".to_owned(),
        created_at: 1_800_000_000,
        response: json!({"id": "resp_fleet_1", "object": "response", "status": "completed"}),
        input_items: vec![json!({"id": "msg_1", "type": "message", "role": "user", "content": "hi"})],
        context: vec![json!({"type": "message", "role": "user", "content": "hi"})],
    };
    first.stored_responses().unwrap().put(Some(&ana), stored.clone()).await.unwrap();

    let store = second.stored_responses().unwrap();
    assert_eq!(store.get(&store.owner(Some(&ana)), "resp_fleet_1").await.unwrap(), Some(stored));
    let bob = store.owner(Some(&caller("bob-key", "bob")));
    assert_eq!(store.get(&bob, "resp_fleet_1").await.unwrap(), None, "another key sees nothing");
    assert!(!store.delete(&bob, "resp_fleet_1").await.unwrap(), "nor may it delete");
    assert!(store.delete(&store.owner(Some(&ana)), "resp_fleet_1").await.unwrap());
    let first_store = first.stored_responses().unwrap();
    assert_eq!(first_store.get(&first_store.owner(Some(&ana)), "resp_fleet_1").await.unwrap(), None);
    assert_eq!(server.integer("SELECT COUNT(*) FROM stored_responses"), 0);
    assert!(!first_folder.path().join("responses.db").exists(), "in a fleet nothing is stored locally");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_an_error_and_the_store_recovers_when_it_returns() {
    let mut server = PostgresServer::start();
    let folder = tempfile::tempdir().unwrap();
    let weir = fleet_member(&server, folder.path());
    let store = weir.stored_responses().unwrap();
    let ana = caller("ana-key", "ana");
    server.stop();
    let error = store.get(&store.owner(Some(&ana)), "resp_x").await.unwrap_err();
    assert!(matches!(error, weir_host::stored::StoreError::Postgres(_)), "{error:?}");
    server.resume();
    assert_eq!(store.get(&store.owner(Some(&ana)), "resp_x").await.unwrap(), None);
}
