//! Stored responses (`weir_host::stored`) in the fleet's PostgreSQL: a response one
//! gateway stores, another gateway of the fleet reads, scoped to its owner, and deletes;
//! the SQLite store beside the ledger is covered by the host's own tests.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use weir_host::stored::StoredResponse;
use weir_host::{Caller, Config, Weir};
use weir_tests::PostgresServer;

fn gateway(server: &PostgresServer, folder: &std::path::Path) -> Weir {
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
    let first = gateway(&server, first_folder.path());
    let second = gateway(&server, second_folder.path());
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
    let weir = gateway(&server, folder.path());
    let store = weir.stored_responses().unwrap();
    let ana = caller("ana-key", "ana");
    server.stop();
    let error = store.get(&store.owner(Some(&ana)), "resp_x").await.unwrap_err();
    assert!(matches!(error, weir_host::stored::StoreError::Postgres(_)), "{error:?}");
    server.resume();
    assert_eq!(store.get(&store.owner(Some(&ana)), "resp_x").await.unwrap(), None);
}
