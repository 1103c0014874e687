//! The console's sign-in sessions, kept in this gateway's memory: a restart
//! signs everyone out, and a fleet's gateways do not share them (a browser
//! signs in to the gateway it talks to).
//!
//! A session is opened either from an `admin` key's token, naming that key by
//! id (each request looks the key up in the ring as of now, so a key revoked,
//! expired or no longer `admin` ends its sessions from the next request), or
//! by single sign-on, naming the identity the provider vouched for (its
//! admin group was checked at sign-in; the session lasts its lifetime). Only
//! the SHA-256 of a session's id is kept (the id lives in the browser's
//! `HttpOnly` cookie alone), so a dump of this memory cannot be replayed. The
//! CSRF token is handed to the page's script; every change must carry it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::identity::new_key;

/// How long a session lasts from sign-in.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// Who a session acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Principal {
    /// The `admin` key signed in with, by id.
    Key(String),
    /// An identity an OpenID Connect provider vouched for, in an admin group.
    SignOn(SignedOn),
}

/// The identity a single sign-on opened a session for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignedOn {
    /// The ID token's `sub`: the provider's stable id for the person.
    pub(crate) subject: String,
    /// The ID token's `email`, when it carries one.
    pub(crate) email: Option<String>,
}

impl SignedOn {
    /// How the admin audit names this identity as the actor of a change:
    /// `oidc:SUBJECT` and the email when known, so a row says who, even after
    /// an email changes. (`:` is never in a key id, so no key reads the same.)
    pub(crate) fn actor(&self) -> String {
        match &self.email {
            Some(email) => format!("oidc:{} <{email}>", self.subject),
            None => format!("oidc:{}", self.subject),
        }
    }
}

/// One signed-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// Who signed in: an admin key or a single sign-on identity.
    pub(crate) principal: Principal,
    /// Sent back by the page on every change (`x-weir-csrf`).
    pub(crate) csrf: String,
    pub(crate) expires: SystemTime,
}

/// A new session: the id for the cookie (shown once) and the session.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) id: String,
    pub(crate) session: Session,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    #[error("the operating system's random source failed: {0}")]
    Random(String),
}

/// The sessions, by the SHA-256 of their id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_hash: Mutex<HashMap<[u8; 32], Session>>,
}

impl Sessions {
    /// Opens a session for `principal`, lasting [`SESSION_LIFETIME`] from `now`.
    /// Expired sessions are dropped on the way.
    pub(crate) fn open(&self, principal: Principal, now: SystemTime) -> Result<Opened, SessionError> {
        let id = new_key().map_err(SessionError::Random)?.token;
        let csrf = new_key().map_err(SessionError::Random)?.token;
        let session = Session { principal, csrf, expires: now + SESSION_LIFETIME };
        let mut sessions = self.lock();
        sessions.retain(|_, kept| kept.expires > now);
        sessions.insert(digest(&id), session.clone());
        Ok(Opened { id, session })
    }

    /// The live session a cookie's id names.
    pub(crate) fn find(&self, id: &str, now: SystemTime) -> Option<Session> {
        let sessions = self.lock();
        sessions.get(&digest(id)).filter(|session| session.expires > now).cloned()
    }

    /// Ends the session `id` names; whether there was one.
    pub(crate) fn close(&self, id: &str) -> bool {
        self.lock().remove(&digest(id)).is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        // A panic while holding the map cannot leave it half-written: insert and remove are whole.
        self.by_hash.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Session {
    /// Whether `presented` is this session's CSRF token (compared in constant time).
    pub(crate) fn csrf_matches(&self, presented: Option<&str>) -> bool {
        presented.is_some_and(|token| bool::from(token.as_bytes().ct_eq(self.csrf.as_bytes())))
    }
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_session_is_found_by_its_id_until_it_expires_or_closes() {
        let sessions = Sessions::default();
        let now = SystemTime::now();
        let opened = sessions.open(Principal::Key("ops".to_owned()), now).unwrap();
        let found = sessions.find(&opened.id, now).unwrap();
        assert_eq!(found.principal, Principal::Key("ops".to_owned()));
        assert!(sessions.find("weir-not-a-session", now).is_none());
        assert!(sessions.find(&opened.id, now + SESSION_LIFETIME).is_none(), "expired");
        assert!(sessions.close(&opened.id));
        assert!(sessions.find(&opened.id, now).is_none(), "closed");
        assert!(!sessions.close(&opened.id));
    }

    #[test]
    fn only_the_hash_of_an_id_is_kept_and_the_csrf_token_must_match() {
        let sessions = Sessions::default();
        let opened = sessions.open(Principal::Key("ops".to_owned()), SystemTime::now()).unwrap();
        assert!(!sessions.lock().keys().any(|hash| hash.as_slice() == opened.id.as_bytes()));
        assert!(sessions.lock().contains_key(&digest(&opened.id)));
        assert!(opened.session.csrf_matches(Some(&opened.session.csrf)));
        assert!(!opened.session.csrf_matches(Some("weir-other")));
        assert!(!opened.session.csrf_matches(None));
        assert_ne!(opened.id, opened.session.csrf);
    }

    #[test]
    fn a_signed_on_identity_is_named_by_subject_and_email_in_the_audit() {
        let with_email = SignedOn { subject: "f3a1".to_owned(), email: Some("ana@example.com".to_owned()) };
        assert_eq!(with_email.actor(), "oidc:f3a1 <ana@example.com>");
        assert_eq!(SignedOn { subject: "f3a1".to_owned(), email: None }.actor(), "oidc:f3a1");
    }
}
