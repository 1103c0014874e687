use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::*;
use crate::catalog::ResponsesSettings;

fn store(folder: &Path, visible_to: Option<ResponsesVisibility>) -> ResponseStore {
    let settings = ResponsesSettings { retention_secs: None, visible_to, ..ResponsesSettings::default() };
    ResponseStore::new(&folder.join("ledger.db"), None, &settings)
}

fn caller(key_id: &str, member: &str) -> Caller {
    Caller { key_id: Some(key_id.to_owned()), member: member.to_owned(), team: None }
}

fn response(id: &str) -> StoredResponse {
    StoredResponse {
        id: id.to_owned(),
        model: "claude".to_owned(),
        created_at: 1_700_000_000,
        response: json!({"id": id, "object": "response", "output": [{"type": "message"}]}),
        input_items: vec![json!({"id": "msg_1", "type": "message", "role": "user"})],
        context: vec![json!({"type": "message", "role": "user"}), json!({"type": "message", "role": "assistant"})],
    }
}

#[tokio::test]
async fn a_stored_response_reads_back_whole_for_its_key_only() {
    let folder = tempfile::tempdir().unwrap();
    let store = store(folder.path(), None);
    let alice = caller("alice-key", "alice");
    store.put(Some(&alice), response("resp_1")).await.unwrap();

    let read = store.get(&store.owner(Some(&alice)), "resp_1").await.unwrap();
    assert_eq!(read, Some(response("resp_1")));
    // Another key of the same member, another member, the open gateway: absent.
    for other in [Some(caller("alice-other-key", "alice")), Some(caller("bob-key", "bob")), None] {
        assert_eq!(store.get(&store.owner(other.as_ref()), "resp_1").await.unwrap(), None, "{other:?}");
    }
    assert_eq!(store.get(&store.owner(Some(&alice)), "resp_missing").await.unwrap(), None);
}

#[tokio::test]
async fn under_member_visibility_every_key_of_the_member_sees_it() {
    let folder = tempfile::tempdir().unwrap();
    let store = store(folder.path(), Some(ResponsesVisibility::Member));
    store.put(Some(&caller("alice-key", "alice")), response("resp_1")).await.unwrap();

    let other_key = caller("alice-other-key", "alice");
    assert!(store.get(&store.owner(Some(&other_key)), "resp_1").await.unwrap().is_some());
    let bob = caller("bob-key", "bob");
    assert_eq!(store.get(&store.owner(Some(&bob)), "resp_1").await.unwrap(), None);
}

#[tokio::test]
async fn only_the_owner_deletes_and_a_deleted_response_is_gone() {
    let folder = tempfile::tempdir().unwrap();
    let store = store(folder.path(), None);
    let alice = caller("alice-key", "alice");
    store.put(Some(&alice), response("resp_1")).await.unwrap();

    let bob = store.owner(Some(&caller("bob-key", "bob")));
    assert!(!store.delete(&bob, "resp_1").await.unwrap());
    let owner = store.owner(Some(&alice));
    assert!(store.get(&owner, "resp_1").await.unwrap().is_some());
    assert!(store.delete(&owner, "resp_1").await.unwrap());
    assert_eq!(store.get(&owner, "resp_1").await.unwrap(), None);
    assert!(!store.delete(&owner, "resp_1").await.unwrap());
}

#[tokio::test]
async fn an_open_gateways_responses_are_not_a_keyed_callers() {
    let folder = tempfile::tempdir().unwrap();
    let store = store(folder.path(), None);
    store.put(None, response("resp_open")).await.unwrap();

    assert!(store.get(&Owner::Open, "resp_open").await.unwrap().is_some());
    let alice = store.owner(Some(&caller("alice-key", "alice")));
    assert_eq!(store.get(&alice, "resp_open").await.unwrap(), None);
}

#[test]
fn an_expired_response_reads_as_absent_and_is_purged_by_the_next_put() {
    let folder = tempfile::tempdir().unwrap();
    let store = sqlite::SqliteStore::new(folder.path().join(FILE_NAME));
    let writer = Writer { key_id: Some("k".to_owned()), member: Some("m".to_owned()) };
    let owner = Owner::Key("k".to_owned());
    store.put(&writer, &response("resp_old"), 100, 200).unwrap();

    assert!(store.get(&owner, "resp_old", 199).unwrap().is_some());
    assert_eq!(store.get(&owner, "resp_old", 200).unwrap(), None);
    assert!(!store.delete(&owner, "resp_old", 200).unwrap());

    store.put(&writer, &response("resp_new"), 300, 400).unwrap();
    let connection = rusqlite::Connection::open(folder.path().join(FILE_NAME)).unwrap();
    let ids: Vec<String> = connection
        .prepare("SELECT id FROM stored_responses")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids, ["resp_new"]);
}

#[tokio::test]
async fn the_file_is_owner_only_beside_the_ledger() {
    let folder = tempfile::tempdir().unwrap();
    let store = store(folder.path(), None);
    store.put(None, response("resp_1")).await.unwrap();
    let mode = std::fs::metadata(folder.path().join(FILE_NAME)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_an_error_and_the_store_recovers_once_it_is_fixed() {
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join(FILE_NAME);
    std::fs::write(&path, b"not a sqlite database, just text that is long enough to have a header").unwrap();
    let store = store(folder.path(), None);
    let error = store.put(None, response("resp_1")).await.unwrap_err();
    assert!(matches!(error, StoreError::Sqlite(_)), "{error:?}");

    std::fs::remove_file(&path).unwrap();
    store.put(None, response("resp_1")).await.unwrap();
    assert!(store.get(&Owner::Open, "resp_1").await.unwrap().is_some());
}

#[test]
fn retention_zero_turns_storing_off() {
    let folder = tempfile::tempdir().unwrap();
    let settings = ResponsesSettings { retention_secs: Some(0), ..ResponsesSettings::default() };
    assert!(!ResponseStore::new(&folder.path().join("ledger.db"), None, &settings).enabled());
    assert!(store(folder.path(), None).enabled());
}
