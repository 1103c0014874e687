use super::*;
use crate::admin::model::State;

fn context(actor: &str) -> Context {
    Context {
        actor: actor.into(),
        now: Some(humantime::parse_rfc3339("2026-06-01T00:00:00Z").unwrap()),
        file_keys: ["file-admin".to_owned()].into(),
        file_members: ["filed".to_owned()].into(),
        file_teams: BTreeSet::new(),
        models: ["gpt".to_owned(), "fast".to_owned()].into(),
    }
}

fn request(member: &str) -> CreateKey {
    parse(format!(r#"{{"id": "k1", "member": "{member}"}}"#).as_bytes()).unwrap()
}

fn state_with(edit: Edit) -> State {
    let mut state = State::default();
    let key: RuntimeKey = serde_json::from_value(edit.after.unwrap()).unwrap();
    state.keys.insert(key.id.clone(), key);
    state
}

#[test]
fn bodies_are_typed_and_unknown_fields_refused() {
    assert!(matches!(parse::<CreateKey>(b"not json"), Err(AdminError::Malformed(_))));
    assert!(matches!(parse::<CreateKey>(br#"{"member": "a", "colour": 1}"#), Err(AdminError::Malformed(_))));
    assert!(matches!(parse::<CreateKey>(br#"{"member": 7}"#), Err(AdminError::Malformed(_))));
    let empty: Revoke = parse(b"").unwrap();
    let _ = empty;
    let update: UpdateKey = parse(br#"{"team": null, "rpm": 5}"#).unwrap();
    assert_eq!(update.team, Some(None), "null clears");
    assert_eq!(update.rpm, Some(Some(5)));
    assert_eq!(update.models, None, "absent leaves it");
}

#[test]
fn a_model_list_naming_nothing_known_is_refused() {
    let mut bad = request("ana");
    bad.models = Some(vec!["gpt".into(), "no-such-model".into()]);
    let refused = create_key(&context("root"), bad, "sha256:00".into()).err().unwrap();
    assert_eq!(refused, AdminError::UnknownModel("no-such-model".into()));
    let mut role = request("ana");
    role.models = Some(vec!["fast".into()]);
    assert!(create_key(&context("root"), role, "sha256:00".into()).is_ok(), "a role is a name a key may hold");
}

#[test]
fn ids_of_the_file_and_taken_ids_are_refused() {
    let mut file = request("ana");
    file.id = Some("file-admin".into());
    assert!(matches!(create_key(&context("root"), file, "h".into()), Err(AdminError::DefinedInFile { .. })));
    let edit = create_key(&context("root"), request("ana"), "h".into()).unwrap()(&State::default()).unwrap();
    let state = state_with(edit);
    let again = create_key(&context("root"), request("ana"), "h2".into()).unwrap()(&state);
    assert!(matches!(again, Err(AdminError::Exists { .. })));
    let mut bad = request("ana");
    bad.id = Some("has space".into());
    assert!(matches!(create_key(&context("root"), bad, "h".into()), Err(AdminError::Invalid { field: "id", .. })));
}

#[test]
fn an_admin_key_cannot_revoke_expire_or_demote_itself() {
    let me = context("k1");
    assert_eq!(revoke_key(&me, "k1".into()).err(), Some(AdminError::OwnKey { action: "revoke" }));
    assert_eq!(expire_key(&me, "k1".into(), Expire::default()).err(), Some(AdminError::OwnKey { action: "expire" }));
    let demote = UpdateKey { admin: Some(false), ..UpdateKey::default() };
    assert_eq!(update_key(&me, "k1".into(), demote).err(), Some(AdminError::OwnKey { action: "demote" }));
}

#[test]
fn a_rotation_keeps_one_old_hash_for_its_grace_and_a_revoke_ends_it() {
    let root = context("root");
    let state =
        state_with(create_key(&root, request("ana"), "sha256:first".into()).unwrap()(&State::default()).unwrap());
    let long = Rotate { grace_secs: MAX_GRACE.as_secs() + 1 };
    assert!(matches!(rotate_key(&root, "k1".into(), long, "x".into()), Err(AdminError::Invalid { .. })));
    let rotated = rotate_key(&root, "k1".into(), Rotate { grace_secs: 60 }, "sha256:second".into()).unwrap()(&state);
    let state = state_with(rotated.unwrap());
    let key = &state.keys["k1"];
    assert_eq!((key.hash.as_str(), key.previous_hash.as_deref()), ("sha256:second", Some("sha256:first")));
    assert_eq!(key.previous_until_ms, Some(root.now_ms() + 60_000));
    let again = rotate_key(&root, "k1".into(), Rotate { grace_secs: 60 }, "sha256:third".into()).unwrap()(&state);
    let twice = state_with(again.unwrap());
    assert_eq!(twice.keys["k1"].previous_hash.as_deref(), Some("sha256:second"), "the first token is gone");
    let revoked = state_with(revoke_key(&root, "k1".into()).unwrap()(&twice).unwrap());
    assert!(revoked.keys["k1"].previous_hash.is_none() && revoked.keys["k1"].revoked_ms.is_some());
    let after = rotate_key(&root, "k1".into(), Rotate::default(), "y".into()).unwrap()(&revoked);
    assert_eq!(after.err(), Some(AdminError::Revoked("k1".into())));
}

#[test]
fn a_budget_of_the_file_is_the_file_s() {
    let root = context("root");
    let put = put_budget(&root, Kind::Member, "filed".into(), PutBudget::default());
    assert!(matches!(put, Err(AdminError::DefinedInFile { .. })));
    let bad = PutBudget { budget: Budget { daily_usd: Some(-1.0), ..Budget::default() } };
    assert!(matches!(put_budget(&root, Kind::Team, "t".into(), bad), Err(AdminError::Invalid { .. })));
    let gone = delete_budget(&root, Kind::Team, "t".into()).unwrap()(&State::default());
    assert!(matches!(gone, Err(AdminError::NotFound { .. })));
}

#[test]
fn a_runtime_keys_default_effort_is_checked_kept_and_given_to_the_ring() {
    let mut unknown = request("ana");
    unknown.default_effort = Some("extreme".into());
    let refused = create_key(&context("root"), unknown, "h".into()).err().unwrap();
    assert!(matches!(refused, AdminError::Invalid { field: "default_effort", .. }), "{refused:?}");
    let mut low = request("ana");
    low.default_effort = Some("low".into());
    let edit = create_key(&context("root"), low, "h".into()).unwrap()(&State::default()).unwrap();
    let state = state_with(edit);
    let now = SystemTime::now();
    assert_eq!(state.keys["k1"].entry(now).entry.default_effort, Some(crate::types::Effort::Low));

    let bad: UpdateKey = parse(br#"{"default_effort": "loud"}"#).unwrap();
    assert!(update_key(&context("root"), "k1".into(), bad).is_err());
    let cleared: UpdateKey = parse(br#"{"default_effort": null}"#).unwrap();
    let edit = update_key(&context("root"), "k1".into(), cleared).unwrap()(&state).unwrap();
    let key: RuntimeKey = serde_json::from_value(edit.after.unwrap()).unwrap();
    assert_eq!(key.entry(now).entry.default_effort, None, "null clears it");
    let stored = serde_json::to_value(&key).unwrap();
    assert!(stored.get("default_effort").is_none(), "an unset effort is left out of the stored body");
}
