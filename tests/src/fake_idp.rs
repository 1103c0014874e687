//! A fake OpenID Connect identity provider that speaks the real wire over loopback, for the
//! console's single sign-on:
//!
//! - `GET /.well-known/openid-configuration` — the discovery document (issuer = the base URL);
//! - `GET /jwks` — the RS256 signing key's public half (`kid` `k1`);
//! - `GET /authorize` — checks the request as a provider does (`response_type=code`, the
//!   registered client and redirect URI, `openid` in the scope, an S256 PKCE challenge, a
//!   `state` and a `nonce`), then sends the browser straight back to the redirect URI with a
//!   one-use code and the `state` (no login form: the person is [`FakeIdp::set_user`]'s, or
//!   the next of [`FakeIdp::set_users`]');
//! - `POST /token` — the authorization code grant: client authentication (HTTP Basic, the
//!   client id and secret form-urlencoded as RFC 6749 says), the code (once), its redirect URI
//!   and the PKCE verifier against the challenge; answers an RS256-signed ID token carrying
//!   `iss`, `sub`, `aud`, `exp`, `iat`, the `nonce`, `email` and `groups`.
//!
//! [`IdpMode`] makes it misbehave the ways a test needs: a token signed with another key, for
//! another audience, already expired, a token endpoint error, or a refusal at the
//! authorization endpoint. Every error it answers carries [`IDP_RAW_TEXT`], so a test can
//! check that none of the provider's own text reaches a page. A request that fails a check is
//! answered as a provider would (400 / 401 with an OAuth error) and its reason kept
//! ([`FakeIdp::rejections`]). The keys are generated per test: no private key is committed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256, RsaKeyPair};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::header::{AUTHORIZATION, LOCATION};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::gateway::serve_router;

/// Text in every error the fake answers: it must never reach a page or an API answer.
pub const IDP_RAW_TEXT: &str = "idp-internal-detail-do-not-show";

/// The client the fake has registered.
pub const CLIENT_ID: &str = "weir-console";
/// That client's secret.
pub const CLIENT_SECRET: &str = "idp-client-secret-0123456789";

/// How the fake answers a request that passes its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdpMode {
    /// A correct ID token.
    Issue,
    /// An ID token signed with a key the JWKS does not hold (same `kid`).
    WrongSignature,
    /// An ID token for another client (`aud`).
    WrongAudience,
    /// An ID token whose `exp` has passed.
    Expired,
    /// The token endpoint answers 400 `invalid_grant`.
    TokenError,
    /// The authorization endpoint sends the browser back with `error=access_denied`.
    Deny,
}

/// The person the authorization endpoint signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpUser {
    pub subject: String,
    pub email: String,
    pub groups: Vec<String>,
}

/// A running fake provider.
#[derive(Clone)]
pub struct FakeIdp {
    /// `http://127.0.0.1:PORT`: the issuer and the base of every endpoint.
    pub issuer: String,
    shared: Arc<Shared>,
}

struct Shared {
    issuer: Mutex<String>,
    redirect_uri: Mutex<String>,
    signing: RsaKeyPair,
    stranger: RsaKeyPair,
    mode: Mutex<IdpMode>,
    /// Who the next sign-ins are: the first is taken while more than one is left.
    users: Mutex<Vec<IdpUser>>,
    codes: Mutex<HashMap<String, Grant>>,
    issued: AtomicU64,
    token_requests: AtomicU64,
    rejections: Mutex<Vec<String>>,
}

/// What a code was issued for.
struct Grant {
    challenge: String,
    nonce: String,
    user: IdpUser,
}

impl FakeIdp {
    /// A provider whose registered client redirects to `redirect_uri`, signing in `user`.
    pub async fn start(redirect_uri: &str, user: IdpUser) -> Self {
        let key = || RsaKeyPair::generate(KeySize::Rsa2048).expect("an RSA key");
        let shared = Arc::new(Shared {
            issuer: Mutex::new(String::new()),
            redirect_uri: Mutex::new(redirect_uri.to_owned()),
            signing: key(),
            stranger: key(),
            mode: Mutex::new(IdpMode::Issue),
            users: Mutex::new(vec![user]),
            codes: Mutex::new(HashMap::new()),
            issued: AtomicU64::new(0),
            token_requests: AtomicU64::new(0),
            rejections: Mutex::new(Vec::new()),
        });
        let router = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(Arc::clone(&shared));
        let issuer = serve_router(router).await;
        *shared.issuer.lock().unwrap() = issuer.clone();
        Self { issuer, shared }
    }

    /// The redirect URI the client is registered with (known once the gateway's port is).
    pub fn set_redirect_uri(&self, redirect_uri: &str) {
        *self.shared.redirect_uri.lock().unwrap() = redirect_uri.to_owned();
    }

    pub fn set_mode(&self, mode: IdpMode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    /// Signs in `user` from now on.
    pub fn set_user(&self, user: IdpUser) {
        self.set_users(vec![user]);
    }

    /// Signs in each of `users` in turn, the last from then on.
    pub fn set_users(&self, users: Vec<IdpUser>) {
        assert!(!users.is_empty(), "at least one user");
        *self.shared.users.lock().unwrap() = users;
    }

    /// Requests to the token endpoint so far.
    pub fn token_requests(&self) -> u64 {
        self.shared.token_requests.load(Ordering::SeqCst)
    }

    /// Why requests were refused, in order.
    pub fn rejections(&self) -> Vec<String> {
        self.shared.rejections.lock().unwrap().clone()
    }
}

impl Shared {
    fn reject(&self, status: StatusCode, error: &str, reason: String) -> Response {
        self.rejections.lock().unwrap().push(reason.clone());
        let body = json!({"error": error, "error_description": format!("{IDP_RAW_TEXT}: {reason}")});
        (status, axum::Json(body)).into_response()
    }

    fn issuer(&self) -> String {
        self.issuer.lock().unwrap().clone()
    }

    /// A signed ID token for `grant`, as the mode wants it.
    fn id_token(&self, grant: &Grant, mode: IdpMode) -> String {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let audience = if mode == IdpMode::WrongAudience { "another-client" } else { CLIENT_ID };
        let (issued_at, expires) = if mode == IdpMode::Expired { (now - 7200, now - 3600) } else { (now, now + 300) };
        let claims = json!({
            "iss": self.issuer(),
            "sub": grant.user.subject,
            "aud": audience,
            "iat": issued_at,
            "exp": expires,
            "nonce": grant.nonce,
            "email": grant.user.email,
            "email_verified": true,
            "groups": grant.user.groups,
        });
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": "k1"});
        let signed =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let key = if mode == IdpMode::WrongSignature { &self.stranger } else { &self.signing };
        let mut signature = vec![0; key.public_modulus_len()];
        key.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), signed.as_bytes(), &mut signature).expect("RS256 signing");
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
    }
}

async fn discovery(State(shared): State<Arc<Shared>>) -> Response {
    let issuer = shared.issuer();
    axum::Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "email", "profile"],
        "claims_supported": ["sub", "email", "groups"],
    }))
    .into_response()
}

async fn jwks(State(shared): State<Arc<Shared>>) -> Response {
    let (modulus, exponent) = rsa_public_numbers(shared.signing.public_key().as_ref());
    axum::Json(json!({"keys": [{
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k1",
        "n": URL_SAFE_NO_PAD.encode(modulus), "e": URL_SAFE_NO_PAD.encode(exponent),
    }]}))
    .into_response()
}

async fn authorize(State(shared): State<Arc<Shared>>, Query(query): Query<HashMap<String, String>>) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let redirect_uri = shared.redirect_uri.lock().unwrap().clone();
    let checks = [
        (field("response_type") == "code", "response_type is not `code`"),
        (field("client_id") == CLIENT_ID, "an unknown client_id"),
        (field("redirect_uri") == redirect_uri, "a redirect_uri the client did not register"),
        (field("scope").split(' ').any(|scope| scope == "openid"), "no `openid` scope"),
        (field("code_challenge_method") == "S256", "no S256 PKCE challenge"),
        (!field("code_challenge").is_empty(), "no PKCE challenge"),
        (!field("state").is_empty(), "no state"),
        (!field("nonce").is_empty(), "no nonce"),
    ];
    if let Some((_, reason)) = checks.iter().find(|(passed, _)| !passed) {
        return shared.reject(StatusCode::BAD_REQUEST, "invalid_request", (*reason).to_owned());
    }
    let state = field("state");
    let mut back = reqwest::Url::parse(&redirect_uri).expect("the registered redirect URI parses");
    if *shared.mode.lock().unwrap() == IdpMode::Deny {
        back.query_pairs_mut()
            .append_pair("error", "access_denied")
            .append_pair("error_description", &format!("{IDP_RAW_TEXT}: the user said no"))
            .append_pair("state", &state);
    } else {
        let code = format!("code-{}", shared.issued.fetch_add(1, Ordering::SeqCst) + 1);
        let user = {
            let mut users = shared.users.lock().unwrap();
            if users.len() > 1 { users.remove(0) } else { users[0].clone() }
        };
        let grant = Grant { challenge: field("code_challenge"), nonce: field("nonce"), user };
        shared.codes.lock().unwrap().insert(code.clone(), grant);
        back.query_pairs_mut().append_pair("code", &code).append_pair("state", &state);
    }
    (StatusCode::FOUND, [(LOCATION, back.to_string())]).into_response()
}

async fn token(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    shared.token_requests.fetch_add(1, Ordering::SeqCst);
    if !client_authenticated(&headers) {
        return shared.reject(StatusCode::UNAUTHORIZED, "invalid_client", "wrong client credentials".to_owned());
    }
    let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("grant_type") != "authorization_code" {
        return shared.reject(StatusCode::BAD_REQUEST, "unsupported_grant_type", field("grant_type"));
    }
    if field("redirect_uri") != *shared.redirect_uri.lock().unwrap() {
        return shared.reject(StatusCode::BAD_REQUEST, "invalid_grant", "another redirect_uri".to_owned());
    }
    let Some(grant) = shared.codes.lock().unwrap().remove(&field("code")) else {
        return shared.reject(StatusCode::BAD_REQUEST, "invalid_grant", "an unknown or used code".to_owned());
    };
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes()));
    if challenge != grant.challenge {
        return shared.reject(StatusCode::BAD_REQUEST, "invalid_grant", "the PKCE verifier does not match".to_owned());
    }
    let mode = *shared.mode.lock().unwrap();
    if mode == IdpMode::TokenError {
        return shared.reject(StatusCode::BAD_REQUEST, "invalid_grant", "told to refuse".to_owned());
    }
    let id_token = shared.id_token(&grant, mode);
    axum::Json(
        json!({"access_token": "idp-access-token", "token_type": "Bearer", "expires_in": 300, "id_token": id_token}),
    )
    .into_response()
}

/// HTTP Basic with the client id and secret, each form-urlencoded (RFC 6749 §2.3.1).
fn client_authenticated(headers: &HeaderMap) -> bool {
    let Some(encoded) = headers.get(AUTHORIZATION).and_then(|value| value.to_str().ok()?.strip_prefix("Basic ")) else {
        return false;
    };
    let Ok(decoded) = STANDARD.decode(encoded) else { return false };
    let Ok(pair) = String::from_utf8(decoded) else { return false };
    let Some((id, secret)) = pair.split_once(':') else { return false };
    let unescape =
        |text: &str| form_urlencoded::parse(format!("x={text}").as_bytes()).next().map(|(_, v)| v.into_owned());
    unescape(id).as_deref() == Some(CLIENT_ID) && unescape(secret).as_deref() == Some(CLIENT_SECRET)
}

/// The modulus and exponent of a PKCS#1 `RSAPublicKey` (DER: a SEQUENCE of two INTEGERs),
/// without leading zero bytes.
fn rsa_public_numbers(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (sequence, _) = der_item(der, 0x30);
    let (modulus, rest) = der_item(sequence, 0x02);
    let (exponent, _) = der_item(rest, 0x02);
    let strip = |number: &[u8]| number.iter().skip_while(|byte| **byte == 0).copied().collect::<Vec<u8>>();
    (strip(modulus), strip(exponent))
}

/// One DER item of `tag` at the start of `bytes`: its contents and what follows.
fn der_item(bytes: &[u8], tag: u8) -> (&[u8], &[u8]) {
    assert_eq!(bytes[0], tag, "a DER tag");
    let (length, header) = match bytes[1] {
        short if short < 0x80 => (usize::from(short), 2),
        long => {
            let count = usize::from(long & 0x7f);
            let length = bytes[2..2 + count].iter().fold(0_usize, |sum, byte| (sum << 8) | usize::from(*byte));
            (length, 2 + count)
        }
    };
    (&bytes[header..header + length], &bytes[header + length..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_numbers_of_a_pkcs1_key_are_read() {
        let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let (modulus, exponent) = rsa_public_numbers(key.public_key().as_ref());
        assert_eq!(modulus.len(), 256);
        assert_eq!(exponent, [1, 0, 1]);
    }
}
