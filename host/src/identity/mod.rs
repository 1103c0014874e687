//! Who is calling: the caller identity a call carries, and the gateway's
//! `[[key]]` ring that turns a presented token into one.

mod keys;
mod reload;

pub use keys::{AuthError, Key, KeyRing, KeySource, NewKey, RuntimeKeyEntry, hash_of, new_key};
pub use reload::{KeyHolder, reload_keys, watch_keys};

pub use crate::caller::Caller;
