//! What the admin plane keeps: runtime keys, member and team budgets, as
//! JSON bodies one row each (`admin_objects`), and the state they make.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::catalog::BudgetFields;

/// The kinds of object the plane keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Key,
    Member,
    Team,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Member => "member",
            Self::Team => "team",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "key" => Some(Self::Key),
            "member" => Some(Self::Member),
            "team" => Some(Self::Team),
            _ => None,
        }
    }
}

/// A scope's budget, as the config's budget fields (0 or absent: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_call_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_call_usd: Option<f64>,
}

impl Budget {
    pub fn fields(&self) -> BudgetFields {
        BudgetFields {
            daily_tokens: self.daily_tokens,
            monthly_tokens: self.monthly_tokens,
            daily_usd: self.daily_usd,
            monthly_usd: self.monthly_usd,
            max_call_tokens: self.max_call_tokens,
            max_call_usd: self.max_call_usd,
        }
    }

    pub fn from_fields(fields: &BudgetFields) -> Self {
        Self {
            daily_tokens: fields.daily_tokens,
            monthly_tokens: fields.monthly_tokens,
            daily_usd: fields.daily_usd,
            monthly_usd: fields.monthly_usd,
            max_call_tokens: fields.max_call_tokens,
            max_call_usd: fields.max_call_usd,
        }
    }

    /// The USD amounts are finite and none is negative.
    pub fn check(&self) -> Result<(), String> {
        let usd = [self.daily_usd, self.monthly_usd, self.max_call_usd];
        if usd.into_iter().flatten().any(|usd| !usd.is_finite() || usd < 0.0) {
            return Err("USD budgets must be finite and not negative".to_owned());
        }
        Ok(())
    }
}

/// A key the admin plane made. Only the token's hash is kept; a rotation
/// keeps the old hash until `previous_until_ms` (its grace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeKey {
    pub id: String,
    pub member: String,
    #[serde(default)]
    pub team: Option<String>,
    /// `sha256:<64 hex>` of the token.
    pub hash: String,
    #[serde(default)]
    pub previous_hash: Option<String>,
    #[serde(default)]
    pub previous_until_ms: Option<i64>,
    #[serde(default)]
    pub models: Option<Vec<String>>,
    #[serde(default)]
    pub rpm: Option<u32>,
    #[serde(default)]
    pub tpm: Option<u64>,
    /// RFC 3339.
    #[serde(default)]
    pub expires: Option<String>,
    #[serde(default)]
    pub admin: bool,
    /// The effort its calls run at when they name none (a word
    /// `types::effort_from_word` reads; checked when written). Left out of
    /// the stored body when unset, so keys written before it hash the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_effort: Option<String>,
    #[serde(default)]
    pub budget: Budget,
    pub created_ms: i64,
    pub created_by: String,
    #[serde(default)]
    pub revoked_ms: Option<i64>,
}

impl RuntimeKey {
    /// The key's expiry, parsed (a stored one was checked when written).
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires.as_deref().and_then(|text| humantime::parse_rfc3339_weak(text).ok())
    }

    /// `active`, `expired` or `revoked` at `now`.
    pub fn status(&self, now: SystemTime) -> &'static str {
        if self.revoked_ms.is_some() {
            "revoked"
        } else if self.expires_at().is_some_and(|expires| now >= expires) {
            "expired"
        } else {
            "active"
        }
    }

    /// The key as the ring takes it: a `[[key]]` entry, and the old hash
    /// while its grace lasts.
    pub fn entry(&self, now: SystemTime) -> crate::identity::RuntimeKeyEntry {
        let previous = match (&self.previous_hash, self.previous_until_ms) {
            (Some(hash), Some(until)) if from_ms(until) > now => Some((hash.clone(), from_ms(until))),
            _ => None,
        };
        let fields = self.budget;
        crate::identity::RuntimeKeyEntry {
            entry: crate::catalog::KeyEntry {
                id: self.id.clone(),
                member: self.member.clone(),
                team: self.team.clone(),
                hash: self.hash.clone(),
                models: self.models.clone(),
                rpm: self.rpm,
                tpm: self.tpm,
                expires: self.expires.clone(),
                admin: self.admin,
                default_effort: self.default_effort.as_deref().and_then(crate::types::effort_from_word),
                daily_tokens: fields.daily_tokens,
                monthly_tokens: fields.monthly_tokens,
                daily_usd: fields.daily_usd,
                monthly_usd: fields.monthly_usd,
                max_call_tokens: fields.max_call_tokens,
                max_call_usd: fields.max_call_usd,
            },
            previous,
        }
    }
}

/// A member's or team's budget made through the plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeBudget {
    pub name: String,
    pub budget: Budget,
    pub updated_ms: i64,
    pub updated_by: String,
}

/// Everything the plane holds, as of change `version` (the newest change's
/// sequence number; 0 before the first).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub version: i64,
    pub keys: BTreeMap<String, RuntimeKey>,
    pub members: BTreeMap<String, ScopeBudget>,
    pub teams: BTreeMap<String, ScopeBudget>,
}

impl State {
    /// The state of the stored rows.
    pub fn from_rows(version: i64, rows: Vec<(String, String, String)>) -> Result<Self, String> {
        let mut state = Self { version, ..Self::default() };
        for (kind, id, body) in rows {
            let bad = |error: serde_json::Error| format!("the admin row {kind} `{id}` does not parse: {error}");
            match Kind::parse(&kind) {
                Some(Kind::Key) => {
                    let value = serde_json::from_str(&body).map_err(bad)?;
                    state.keys.insert(id, value);
                }
                Some(Kind::Member) => {
                    let value = serde_json::from_str(&body).map_err(bad)?;
                    state.members.insert(id, value);
                }
                Some(Kind::Team) => {
                    let value = serde_json::from_str(&body).map_err(bad)?;
                    state.teams.insert(id, value);
                }
                None => return Err(format!("an admin row has an unknown kind `{kind}`")),
            }
        }
        Ok(state)
    }

    /// The budget limits the plane sets, by scope (a revoked key's are gone).
    pub fn limits(&self) -> std::collections::HashMap<crate::budget::Scope, crate::budget::Limits> {
        use crate::budget::{Limits, Scope};
        let keys = self.keys.values().filter(|key| key.revoked_ms.is_none());
        let keys = keys.map(|key| (Scope::Key(key.id.clone()), Limits::from_fields(&key.budget.fields())));
        let members =
            self.members.iter().map(|(name, m)| (Scope::Member(name.clone()), Limits::from_fields(&m.budget.fields())));
        let teams =
            self.teams.iter().map(|(name, t)| (Scope::Team(name.clone()), Limits::from_fields(&t.budget.fields())));
        keys.chain(members).chain(teams).collect()
    }

    /// The stored body of one object, when it exists.
    pub fn body(&self, kind: Kind, id: &str) -> Option<serde_json::Value> {
        let value = match kind {
            Kind::Key => self.keys.get(id).map(serde_json::to_value),
            Kind::Member => self.members.get(id).map(serde_json::to_value),
            Kind::Team => self.teams.get(id).map(serde_json::to_value),
        };
        value.and_then(Result::ok)
    }
}

/// Unix milliseconds.
pub fn to_ms(time: SystemTime) -> i64 {
    let millis = time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis());
    i64::try_from(millis).unwrap_or(i64::MAX)
}

pub fn from_ms(millis: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// An instant as RFC 3339 (seconds).
pub fn rfc3339_ms(millis: i64) -> String {
    humantime::format_rfc3339_seconds(from_ms(millis)).to_string()
}
