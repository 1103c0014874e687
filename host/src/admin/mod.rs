//! The admin plane: caller keys, member and team budgets changed at run
//! time through `/admin/v1/...` (see `server::admin`) and `weir admin ...`,
//! kept beside the ledger ([`store`]) and applied to every gateway that
//! shares the store at a fleet's notice or within a poll
//! (`server::watch_admin`).
//!
//! ```text
//! request ─► an admin key (403 otherwise) ─► body parsed (typed 400s)
//!   ─► ops: the change decided against the state as of now, in the store's
//!      exclusive transaction (409s: exists, defined in the file, own key)
//!   ─► the object written, the change appended to its hash chain (`chain`)
//!   ─► this gateway applies the new state at once (ring, budgets) and,
//!      under `[fleet]`, announces it through Redis; every other gateway
//!      sharing the store applies it at the notice, or within one poll
//! ```
//!
//! The config file and the plane each own what they define: a key id (or a
//! member or team budget) defined in both is refused — by the API when it
//! would create one, at start and at a reload of the file when the file
//! would (the reload keeps the previous keys, as for any invalid file).
//!
//! Here: the errors and the decided change; `model`: the stored objects and
//! the state; `ops`: request bodies and each operation; `store`: SQLite or
//! PostgreSQL; `chain`: the changes' hash chain; `client`: `weir admin`.

pub mod chain;
pub mod client;
pub mod model;
pub mod ops;
pub mod store;

pub use chain::{ChainBreak, ChangeRow};
pub use model::{Budget, Kind, RuntimeKey, ScopeBudget, State};
pub use ops::Context;
pub use store::{AdminBreak, AdminReport, AdminStore, StoreError};

/// How often a gateway asks the store whether the plane changed (see
/// `server::watch_admin`).
pub const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// One change as decided: what it does to which object, the object before
/// and after (`None`: absent). The token of a created or rotated key is
/// never here: it is answered once and not kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub action: &'static str,
    pub kind: Kind,
    pub id: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

/// Why an admin request was refused. Each answers its own status and a
/// stable `code`; the message never holds a token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdminError {
    /// The body is not JSON, or not the shape the route takes.
    #[error("the request body is not valid: {0}")]
    Malformed(String),
    /// A field's value is not allowed.
    #[error("`{field}`: {message}")]
    Invalid { field: &'static str, message: String },
    /// A key's `models` names neither a catalog entry nor a role.
    #[error("`models`: `{0}` is neither a model of the catalog nor a role")]
    UnknownModel(String),
    #[error("there is no {kind} `{id}` in the admin plane")]
    NotFound { kind: &'static str, id: String },
    #[error("the {kind} `{id}` already exists")]
    Exists { kind: &'static str, id: String },
    /// The object is the config file's: edit the file instead.
    #[error("the {kind} `{id}` is defined in the config file; change it there")]
    DefinedInFile { kind: &'static str, id: String },
    /// An admin key may not revoke, expire or demote itself: the plane would
    /// lose the key changing it, and possibly its last admin.
    #[error("an admin key may not {action} itself; use another admin key")]
    OwnKey { action: &'static str },
    #[error("the key `{0}` is revoked")]
    Revoked(String),
    /// The gateway keeps no ledger, so no admin plane.
    #[error("the admin plane is kept beside the ledger; this gateway keeps none (`[ledger] enabled = false`)")]
    Unavailable,
    /// The store could not be read or written (details in the log).
    #[error("the admin store cannot be reached; retry shortly")]
    Store(String),
}

impl AdminError {
    pub(crate) fn store(error: StoreError) -> Self {
        tracing::error!(%error, "the admin store failed");
        Self::Store(error.to_string())
    }

    pub fn status(&self) -> u16 {
        match self {
            Self::Malformed(_) | Self::Invalid { .. } | Self::UnknownModel(_) => 400,
            Self::NotFound { .. } => 404,
            Self::Exists { .. } | Self::DefinedInFile { .. } | Self::OwnKey { .. } | Self::Revoked(_) => 409,
            Self::Unavailable | Self::Store(_) => 503,
        }
    }

    /// The stable code a client branches on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed_body",
            Self::Invalid { .. } => "invalid_field",
            Self::UnknownModel(_) => "unknown_model",
            Self::NotFound { .. } => "not_found",
            Self::Exists { .. } => "already_exists",
            Self::DefinedInFile { .. } => "defined_in_file",
            Self::OwnKey { .. } => "own_key",
            Self::Revoked(_) => "key_revoked",
            Self::Unavailable => "admin_unavailable",
            Self::Store(_) => "admin_store_unavailable",
        }
    }
}
