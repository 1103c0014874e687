//! Who is calling: the caller identity a call carries, and the gateway's
//! `[[key]]` ring that turns a presented token into one.

pub(crate) mod console_sessions;
mod keys;
mod reload;
pub(crate) mod sign_ons;

pub(crate) use console_sessions::Sessions as ConsoleSessions;
pub use keys::{AuthError, Key, KeyRing, KeySource, NewKey, RuntimeKeyEntry, hash_of, new_key};
pub use reload::{KeyHolder, reload_keys, watch_keys};
pub(crate) use sign_ons::PendingSignOns;

pub use crate::caller::Caller;
