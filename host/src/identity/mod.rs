//! Who is calling: the caller identity a call carries, and the gateway's
//! `[[key]]` ring that turns a presented token into one.

mod keys;
mod reload;

pub use keys::{AuthError, Key, KeyRing, NewKey, hash_of, new_key};
pub use reload::{reload_keys, watch_keys};

/// The caller of one call. The gateway fills it from the key it checked; a
/// service embedding the library passes its own member id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// The key's id (never its token); `None` for a library caller without a key.
    pub key_id: Option<String>,
    pub member: String,
    pub team: Option<String>,
}
