//! Single sign-ons in flight: between the redirect to the identity provider
//! and its answer, what the gateway must remember to finish the flow — the
//! PKCE verifier (proving the code is redeemed by whoever started the flow)
//! and the nonce (binding the ID token to this sign-in). Kept in this
//! gateway's memory by the SHA-256 of the `state` parameter, taken once, and
//! dropped after [`SIGN_ON_LIFETIME`]; the browser's answer must come back to
//! the gateway that sent it (as console sessions do).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// How long a person has at the identity provider before the flow must start again.
pub(crate) const SIGN_ON_LIFETIME: Duration = Duration::from_secs(600);

/// The most sign-ons kept in flight at once: a bound on the memory that
/// unauthenticated requests to start one can take.
pub(crate) const MAX_IN_FLIGHT: usize = 10_000;

/// What finishing one sign-on needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) pkce_verifier: String,
    pub(crate) nonce: String,
    pub(crate) expires: SystemTime,
}

/// Why a sign-on could not be started.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SignOnError {
    #[error("{MAX_IN_FLIGHT} single sign-ons are already in flight")]
    Full,
}

/// The sign-ons in flight, by the SHA-256 of their `state`.
#[derive(Debug, Default)]
pub(crate) struct PendingSignOns {
    by_state: Mutex<HashMap<[u8; 32], Pending>>,
}

impl PendingSignOns {
    /// Remembers a sign-on started at `now` under `state`. Expired ones are
    /// dropped on the way; when [`MAX_IN_FLIGHT`] are still live, refused.
    pub(crate) fn start(
        &self,
        state: &str,
        pkce_verifier: String,
        nonce: String,
        now: SystemTime,
    ) -> Result<(), SignOnError> {
        let mut pending = self.lock();
        pending.retain(|_, kept| kept.expires > now);
        if pending.len() >= MAX_IN_FLIGHT {
            return Err(SignOnError::Full);
        }
        pending.insert(digest(state), Pending { pkce_verifier, nonce, expires: now + SIGN_ON_LIFETIME });
        Ok(())
    }

    /// The live sign-on `state` names, removed: a `state` finishes at most once.
    pub(crate) fn take(&self, state: &str, now: SystemTime) -> Option<Pending> {
        self.lock().remove(&digest(state)).filter(|pending| pending.expires > now)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Pending>> {
        // A panic while holding the map cannot leave it half-written: insert and remove are whole.
        self.by_state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn digest(state: &str) -> [u8; 32] {
    Sha256::digest(state.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_state_is_taken_once_and_only_before_it_expires() {
        let pending = PendingSignOns::default();
        let now = SystemTime::now();
        pending.start("s1", "verifier".to_owned(), "nonce".to_owned(), now).unwrap();
        pending.start("s2", "v2".to_owned(), "n2".to_owned(), now).unwrap();
        assert!(pending.take("other", now).is_none());
        let taken = pending.take("s1", now).unwrap();
        assert_eq!((taken.pkce_verifier.as_str(), taken.nonce.as_str()), ("verifier", "nonce"));
        assert!(pending.take("s1", now).is_none(), "a state finishes once");
        assert!(pending.take("s2", now + SIGN_ON_LIFETIME).is_none(), "expired");
    }

    #[test]
    fn no_more_than_the_bound_are_kept_and_expired_ones_make_room() {
        let pending = PendingSignOns::default();
        let now = SystemTime::now();
        for index in 0..MAX_IN_FLIGHT {
            pending.start(&index.to_string(), String::new(), String::new(), now).unwrap();
        }
        assert_eq!(pending.start("one more", String::new(), String::new(), now), Err(SignOnError::Full));
        let later = now + SIGN_ON_LIFETIME;
        pending.start("one more", String::new(), String::new(), later).unwrap();
        assert_eq!(pending.lock().len(), 1);
    }
}
