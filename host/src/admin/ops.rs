//! The admin plane's changes, decided against the state as of now: request
//! bodies parsed and checked, then each operation as a function of the
//! state that answers the [`Edit`] or why it is refused.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::model::{Budget, Kind, RuntimeKey, ScopeBudget, State, to_ms};
use super::{AdminError, Edit};

/// The longest a rotation's old token keeps working (a day): a rotation
/// leaves two live tokens for at most this long.
pub const MAX_GRACE: Duration = Duration::from_secs(86_400);

/// What a change is checked against besides the plane's state: who makes
/// it, when, and what this gateway's config file and catalog define.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The admin key's id.
    pub actor: String,
    pub now: Option<SystemTime>,
    pub file_keys: BTreeSet<String>,
    pub file_members: BTreeSet<String>,
    pub file_teams: BTreeSet<String>,
    /// Catalog ids and role names a key's `models` may name.
    pub models: BTreeSet<String>,
}

impl Context {
    fn now(&self) -> SystemTime {
        self.now.unwrap_or_else(SystemTime::now)
    }

    pub fn now_ms(&self) -> i64 {
        to_ms(self.now())
    }
}

/// `POST /admin/v1/keys`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    #[serde(default)]
    pub id: Option<String>,
    pub member: String,
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub models: Option<Vec<String>>,
    #[serde(default)]
    pub rpm: Option<u32>,
    #[serde(default)]
    pub tpm: Option<u64>,
    #[serde(default)]
    pub expires: Option<String>,
    #[serde(default)]
    pub admin: bool,
    #[serde(default)]
    pub default_effort: Option<String>,
    #[serde(default)]
    pub budget: Budget,
}

/// `POST /admin/v1/keys/{id}`: only the fields present change; `null`
/// clears an optional one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateKey {
    #[serde(default)]
    pub member: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub team: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    pub models: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    pub rpm: Option<Option<u32>>,
    #[serde(default, deserialize_with = "present")]
    pub tpm: Option<Option<u64>>,
    #[serde(default, deserialize_with = "present")]
    pub expires: Option<Option<String>>,
    #[serde(default)]
    pub admin: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    pub default_effort: Option<Option<String>>,
    #[serde(default)]
    pub budget: Option<Budget>,
}

/// `POST /admin/v1/keys/{id}/rotate`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rotate {
    /// How long the old token keeps working (default 0: not at all).
    #[serde(default)]
    pub grace_secs: u64,
}

/// `POST /admin/v1/keys/{id}/expire`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expire {
    /// RFC 3339; default: now.
    #[serde(default)]
    pub at: Option<String>,
}

/// `POST /admin/v1/keys/{id}/revoke`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revoke {}

/// `POST /admin/v1/members/{name}` and `/admin/v1/teams/{name}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutBudget {
    pub budget: Budget,
}

/// A field that is present (`Some`), possibly `null` (`Some(None)`).
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<T>>, D::Error> {
    Ok(Some(Option::deserialize(deserializer)?))
}

/// A body as `T`; an empty body reads as `{}`.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, AdminError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) { b"{}".as_slice() } else { body };
    serde_json::from_slice(body).map_err(|error| AdminError::Malformed(error.to_string()))
}

/// Ids and names: 1 to 64 of ASCII letters, digits, `.`, `_`, `-`.
pub fn check_name(field: &'static str, name: &str) -> Result<(), AdminError> {
    let fits = (1..=64).contains(&name.len())
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'));
    match fits {
        true => Ok(()),
        false => Err(AdminError::Invalid {
            field,
            message: "must be 1 to 64 ASCII letters, digits, `.`, `_` or `-`".to_owned(),
        }),
    }
}

fn check_models(context: &Context, models: Option<&Vec<String>>) -> Result<(), AdminError> {
    for name in models.into_iter().flatten() {
        if !context.models.contains(name) {
            return Err(AdminError::UnknownModel(name.clone()));
        }
    }
    Ok(())
}

fn check_expires(expires: Option<&String>) -> Result<(), AdminError> {
    match expires {
        Some(text) => humantime::parse_rfc3339_weak(text).map(drop).map_err(|error| AdminError::Invalid {
            field: "expires",
            message: format!("not an RFC 3339 instant ({error})"),
        }),
        None => Ok(()),
    }
}

fn check_effort(effort: Option<&String>) -> Result<(), AdminError> {
    match effort {
        Some(word) if crate::types::effort_from_word(word).is_none() => Err(AdminError::Invalid {
            field: "default_effort",
            message: format!("unknown effort `{word}` (minimal, low, medium, high or max)"),
        }),
        _ => Ok(()),
    }
}

fn check_limits(rpm: Option<u32>, tpm: Option<u64>) -> Result<(), AdminError> {
    if rpm == Some(0) || tpm == Some(0) {
        return Err(AdminError::Invalid { field: "rpm", message: "`rpm` and `tpm` must be positive when set".into() });
    }
    Ok(())
}

fn check_budget(budget: &Budget) -> Result<(), AdminError> {
    budget.check().map_err(|message| AdminError::Invalid { field: "budget", message })
}

fn body(key: &RuntimeKey) -> Option<Value> {
    serde_json::to_value(key).ok()
}

/// The key `id` of the plane, or why it cannot be changed.
fn runtime_key<'a>(context: &Context, state: &'a State, id: &str) -> Result<&'a RuntimeKey, AdminError> {
    if context.file_keys.contains(id) {
        return Err(AdminError::DefinedInFile { kind: "key", id: id.to_owned() });
    }
    state.keys.get(id).ok_or_else(|| AdminError::NotFound { kind: "key", id: id.to_owned() })
}

/// A new key with `hash` (the token's; the token is not seen here).
pub fn create_key(
    context: &Context,
    request: CreateKey,
    hash: String,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    let id = match &request.id {
        Some(id) => id.clone(),
        None => generated_id()?,
    };
    check_name("id", &id)?;
    check_name("member", &request.member)?;
    if let Some(team) = &request.team {
        check_name("team", team)?;
    }
    check_models(context, request.models.as_ref())?;
    check_expires(request.expires.as_ref())?;
    check_limits(request.rpm, request.tpm)?;
    check_effort(request.default_effort.as_ref())?;
    check_budget(&request.budget)?;
    if context.file_keys.contains(&id) {
        return Err(AdminError::DefinedInFile { kind: "key", id });
    }
    let key = RuntimeKey {
        id: id.clone(),
        member: request.member,
        team: request.team,
        hash,
        previous_hash: None,
        previous_until_ms: None,
        models: request.models,
        rpm: request.rpm,
        tpm: request.tpm,
        expires: request.expires,
        admin: request.admin,
        default_effort: request.default_effort,
        budget: request.budget,
        created_ms: context.now_ms(),
        created_by: context.actor.clone(),
        revoked_ms: None,
    };
    Ok(move |state: &State| {
        if state.keys.contains_key(&id) {
            return Err(AdminError::Exists { kind: "key", id });
        }
        Ok(Edit { action: "key.create", kind: Kind::Key, id, before: None, after: body(&key) })
    })
}

/// Changes the fields the request carries.
pub fn update_key(
    context: &Context,
    id: String,
    request: UpdateKey,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    if let Some(member) = &request.member {
        check_name("member", member)?;
    }
    if let Some(Some(team)) = &request.team {
        check_name("team", team)?;
    }
    check_models(context, request.models.as_ref().and_then(Option::as_ref))?;
    check_expires(request.expires.as_ref().and_then(Option::as_ref))?;
    check_limits(request.rpm.flatten(), request.tpm.flatten())?;
    check_effort(request.default_effort.as_ref().and_then(Option::as_ref))?;
    if let Some(budget) = &request.budget {
        check_budget(budget)?;
    }
    let own = id == context.actor;
    if own && request.admin == Some(false) {
        return Err(AdminError::OwnKey { action: "demote" });
    }
    if own && matches!(request.expires, Some(Some(_))) {
        return Err(AdminError::OwnKey { action: "expire" });
    }
    let context = context.clone();
    Ok(move |state: &State| {
        let old = runtime_key(&context, state, &id)?;
        if old.revoked_ms.is_some() {
            return Err(AdminError::Revoked(id));
        }
        let mut key = old.clone();
        let UpdateKey { member, team, models, rpm, tpm, expires, admin, default_effort, budget } = request;
        key.member = member.unwrap_or(key.member);
        key.team = team.unwrap_or(key.team);
        key.models = models.unwrap_or(key.models);
        key.rpm = rpm.unwrap_or(key.rpm);
        key.tpm = tpm.unwrap_or(key.tpm);
        key.expires = expires.unwrap_or(key.expires);
        key.admin = admin.unwrap_or(key.admin);
        key.default_effort = default_effort.unwrap_or(key.default_effort);
        key.budget = budget.unwrap_or(key.budget);
        Ok(Edit { action: "key.update", kind: Kind::Key, id, before: body(old), after: body(&key) })
    })
}

/// A new token for the key: `hash` is the new token's; the old one keeps
/// working `grace_secs` (at most [`MAX_GRACE`]). Rotating again during a
/// grace ends that grace: at most two tokens are ever live.
pub fn rotate_key(
    context: &Context,
    id: String,
    request: Rotate,
    hash: String,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    let grace = Duration::from_secs(request.grace_secs);
    if grace > MAX_GRACE {
        return Err(AdminError::Invalid {
            field: "grace_secs",
            message: format!("at most {} (a day)", MAX_GRACE.as_secs()),
        });
    }
    let context = context.clone();
    Ok(move |state: &State| {
        let old = runtime_key(&context, state, &id)?;
        if old.revoked_ms.is_some() {
            return Err(AdminError::Revoked(id));
        }
        let mut key = old.clone();
        let until = to_ms(context.now() + grace);
        (key.previous_hash, key.previous_until_ms) =
            if grace.is_zero() { (None, None) } else { (Some(old.hash.clone()), Some(until)) };
        key.hash = hash;
        Ok(Edit { action: "key.rotate", kind: Kind::Key, id, before: body(old), after: body(&key) })
    })
}

/// Revokes the key: every token of it is refused from the next call on.
pub fn revoke_key(
    context: &Context,
    id: String,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    if id == context.actor {
        return Err(AdminError::OwnKey { action: "revoke" });
    }
    let context = context.clone();
    Ok(move |state: &State| {
        let old = runtime_key(&context, state, &id)?;
        if old.revoked_ms.is_some() {
            return Err(AdminError::Revoked(id));
        }
        let mut key = old.clone();
        key.revoked_ms = Some(context.now_ms());
        key.previous_hash = None;
        key.previous_until_ms = None;
        Ok(Edit { action: "key.revoke", kind: Kind::Key, id, before: body(old), after: body(&key) })
    })
}

/// Sets the key's expiry (`at`, default now).
pub fn expire_key(
    context: &Context,
    id: String,
    request: Expire,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    if id == context.actor {
        return Err(AdminError::OwnKey { action: "expire" });
    }
    check_expires(request.at.as_ref())?;
    let at = request.at.unwrap_or_else(|| humantime::format_rfc3339_seconds(context.now()).to_string());
    let context = context.clone();
    Ok(move |state: &State| {
        let old = runtime_key(&context, state, &id)?;
        if old.revoked_ms.is_some() {
            return Err(AdminError::Revoked(id));
        }
        let mut key = old.clone();
        key.expires = Some(at);
        Ok(Edit { action: "key.expire", kind: Kind::Key, id, before: body(old), after: body(&key) })
    })
}

/// Sets a member's (`kind` member) or team's budget.
pub fn put_budget(
    context: &Context,
    kind: Kind,
    name: String,
    request: PutBudget,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    check_name("name", &name)?;
    check_budget(&request.budget)?;
    let in_file = match kind {
        Kind::Member => context.file_members.contains(&name),
        Kind::Team => context.file_teams.contains(&name),
        Kind::Key => true,
    };
    if in_file {
        return Err(AdminError::DefinedInFile { kind: kind.as_str(), id: name });
    }
    let entry = ScopeBudget {
        name: name.clone(),
        budget: request.budget,
        updated_ms: context.now_ms(),
        updated_by: context.actor.clone(),
    };
    Ok(move |state: &State| {
        let before = state.body(kind, &name);
        let action = match kind {
            Kind::Member => "member.put",
            Kind::Team | Kind::Key => "team.put",
        };
        Ok(Edit { action, kind, id: name, before, after: serde_json::to_value(&entry).ok() })
    })
}

/// Removes a member's or team's budget (its calls are unlimited again).
pub fn delete_budget(
    context: &Context,
    kind: Kind,
    name: String,
) -> Result<impl FnOnce(&State) -> Result<Edit, AdminError> + use<>, AdminError> {
    let in_file = match kind {
        Kind::Member => context.file_members.contains(&name),
        Kind::Team => context.file_teams.contains(&name),
        Kind::Key => true,
    };
    if in_file {
        return Err(AdminError::DefinedInFile { kind: kind.as_str(), id: name });
    }
    Ok(move |state: &State| {
        let Some(before) = state.body(kind, &name) else {
            return Err(AdminError::NotFound { kind: kind.as_str(), id: name });
        };
        let action = match kind {
            Kind::Member => "member.delete",
            Kind::Team | Kind::Key => "team.delete",
        };
        Ok(Edit { action, kind, id: name, before: Some(before), after: None })
    })
}

/// `key-` and 16 random hex digits.
fn generated_id() -> Result<String, AdminError> {
    let mut bytes = [0_u8; 8];
    getrandom::fill(&mut bytes).map_err(|error| AdminError::Store(format!("no random source: {error}")))?;
    Ok(format!("key-{}", hex::encode(bytes)))
}

#[cfg(test)]
mod tests;
