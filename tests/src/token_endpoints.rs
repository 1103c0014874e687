//! Fake OAuth token endpoints that check what a client sends as the real ones do:
//!
//! - Google's (`POST /token`): the JWT bearer grant; the assertion's RS256 signature is
//!   verified with the test key's public half, and its claims (`iss`, `scope`, `aud` = the
//!   token URI, `iat` near now, `exp` = `iat` + 3600); or the refresh-token grant.
//! - Entra ID's (`POST /{tenant}/oauth2/v2.0/token`): client credentials with the expected
//!   secret, or a client assertion (RS256 verified, `x5t` = the certificate's thumbprint,
//!   `aud` = the endpoint, `iss` = `sub` = the client id), or the federated token; and a
//!   managed identity endpoint (`GET /msi`, `X-IDENTITY-HEADER`).
//!
//! Each issues numbered tokens (`{prefix}-1`, `{prefix}-2`, …) that expire after the
//! lifetime set ([`FakeTokenEndpoint::set_lifetime`]), counts every request, and can be told
//! to fail, stall or answer garbage ([`TokenMode`]). A request that fails a check is
//! answered 400 `invalid_grant` and its reason kept ([`FakeTokenEndpoint::rejections`]).
//!
//! The RSA key is generated per test ([`TestKey::generate`]): no private key is committed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_2048_8192_SHA256, RsaKeyPair, UnparsedPublicKey};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::gateway::serve_router;

/// Google's cloud-platform scope, the default a `google` credential asks for.
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Azure's Cognitive Services scope, the default an `entra` credential asks for.
pub const COGNITIVE_SERVICES: &str = "https://cognitiveservices.azure.com/.default";

/// An RSA key made for one test, with a self-signed certificate over it.
#[derive(Clone)]
pub struct TestKey {
    /// The private key, PKCS#8 PEM (what a service-account file's `private_key` holds).
    pub private_pem: String,
    /// The self-signed certificate, PEM.
    pub certificate_pem: String,
    /// The certificate's SHA-1 thumbprint, base64url (an assertion's `x5t`).
    pub thumbprint: String,
    /// The public key, PKCS#1 `RSAPublicKey` DER.
    public: Vec<u8>,
}

impl TestKey {
    pub fn generate() -> Self {
        let key = RsaKeyPair::generate(KeySize::Rsa2048).expect("an RSA key");
        let pkcs8: Pkcs8V1Der<'static> = key.as_der().expect("its PKCS#8");
        let private_pem = pem(pkcs8.as_ref(), "PRIVATE KEY");
        let signer = rcgen::KeyPair::try_from(pkcs8.as_ref()).expect("rcgen reads the key");
        let params = rcgen::CertificateParams::new(vec!["weir-test".to_owned()]).expect("certificate params");
        let certificate = params.self_signed(&signer).expect("a self-signed certificate");
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, certificate.der());
        Self {
            private_pem,
            certificate_pem: pem(certificate.der(), "CERTIFICATE"),
            thumbprint: URL_SAFE_NO_PAD.encode(digest.as_ref()),
            public: key.public_key().as_ref().to_vec(),
        }
    }

    /// A Google service-account key file for this key, its token URI `token_uri`.
    pub fn service_account_json(&self, token_uri: &str) -> String {
        json!({
            "type": "service_account",
            "project_id": "weir-test",
            "private_key_id": "test-key-1",
            "private_key": self.private_pem,
            "client_email": SERVICE_ACCOUNT,
            "client_id": "1234567890",
            "token_uri": token_uri,
        })
        .to_string()
    }

    /// The certificate and the key in one PEM file, as Entra ID's certificate credential reads it.
    pub fn certificate_file(&self) -> String {
        format!("{}{}", self.certificate_pem, self.private_pem)
    }

    /// Verifies an RS256 JWT with the public half; answers its header and claims.
    fn verify(&self, jwt: &str) -> Result<(Value, Value), String> {
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, claims, signature] = parts.as_slice() else { return Err("not three parts".into()) };
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|e| format!("not base64url: {e}"));
        let signed = format!("{header}.{claims}");
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &self.public)
            .verify(signed.as_bytes(), &decode(signature)?)
            .map_err(|_| "the RS256 signature does not verify".to_owned())?;
        let json = |bytes: Vec<u8>| serde_json::from_slice::<Value>(&bytes).map_err(|e| format!("not JSON: {e}"));
        let header = json(decode(header)?)?;
        if header["alg"] != "RS256" || header["typ"] != "JWT" {
            return Err(format!("header {header}"));
        }
        Ok((header, json(decode(claims)?)?))
    }
}

/// The service account's email in [`TestKey::service_account_json`].
pub const SERVICE_ACCOUNT: &str = "weir-test@weir-test.iam.gserviceaccount.com";

fn pem(der: &[u8], label: &str) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
}

/// How the fake answers a request that passes its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenMode {
    /// A token with the set lifetime.
    Issue,
    /// 500 with an OAuth error body.
    Fail,
    /// No answer for a minute.
    Stall,
    /// 200 with an HTML page.
    Garbage,
}

/// What an Entra ID client must present.
#[derive(Debug, Clone, Default)]
pub struct EntraExpect {
    pub tenant: String,
    pub client_id: String,
    pub client_secret: String,
    pub federated_token: String,
    pub identity_header: String,
}

struct Shared {
    key: TestKey,
    prefix: &'static str,
    /// The URL an assertion's `aud` must name (Google: the token URI; Entra: the endpoint).
    audience: Mutex<String>,
    entra: EntraExpect,
    mode: Mutex<TokenMode>,
    lifetime: AtomicU64,
    delay: Mutex<Duration>,
    requests: AtomicU64,
    issued: AtomicU64,
    rejections: Mutex<Vec<String>>,
    /// Each request's grant, as seen: `jwt-bearer`, `refresh_token`, `client_secret`,
    /// `client_assertion`, `federated`, `managed_identity`.
    grants: Mutex<Vec<String>>,
}

/// A running fake token endpoint (Google's or Entra ID's).
#[derive(Clone)]
pub struct FakeTokenEndpoint {
    /// `http://127.0.0.1:PORT`.
    pub base_url: String,
    shared: Arc<Shared>,
}

impl FakeTokenEndpoint {
    /// Google's token endpoint at `{base_url}/token`, for tokens `ya29.test-N`.
    pub async fn google(key: &TestKey) -> Self {
        let router = Router::new().route("/token", post(google_token));
        Self::start(key, "ya29.test", EntraExpect::default(), router, |base| format!("{base}/token")).await
    }

    /// Entra ID's token endpoint at `{base_url}/{tenant}/oauth2/v2.0/token` and a managed
    /// identity endpoint at `{base_url}/msi`, for tokens `entra-test-N`.
    pub async fn entra(key: &TestKey, expect: EntraExpect) -> Self {
        let tenant = expect.tenant.clone();
        let router =
            Router::new().route("/{tenant}/oauth2/v2.0/token", post(entra_token)).route("/msi", get(managed_identity));
        Self::start(key, "entra-test", expect, router, move |base| format!("{base}/{tenant}/oauth2/v2.0/token")).await
    }

    async fn start(
        key: &TestKey,
        prefix: &'static str,
        entra: EntraExpect,
        router: Router<Arc<Shared>>,
        audience: impl FnOnce(&str) -> String,
    ) -> Self {
        let shared = Arc::new(Shared {
            key: key.clone(),
            prefix,
            audience: Mutex::new(String::new()),
            entra,
            mode: Mutex::new(TokenMode::Issue),
            lifetime: AtomicU64::new(3600),
            delay: Mutex::new(Duration::ZERO),
            requests: AtomicU64::new(0),
            issued: AtomicU64::new(0),
            rejections: Mutex::new(Vec::new()),
            grants: Mutex::new(Vec::new()),
        });
        let base_url = serve_router(router.with_state(Arc::clone(&shared))).await;
        *shared.audience.lock().unwrap() = audience(&base_url);
        Self { base_url, shared }
    }

    /// The token URI (Google) or token endpoint (Entra ID) an assertion's `aud` names.
    pub fn token_uri(&self) -> String {
        self.shared.audience.lock().unwrap().clone()
    }

    pub fn set_mode(&self, mode: TokenMode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    /// The `expires_in` of the tokens issued from now on.
    pub fn set_lifetime(&self, seconds: u64) {
        self.shared.lifetime.store(seconds, Ordering::SeqCst);
    }

    /// How long each answer waits (so many calls arrive while one request is in flight).
    pub fn set_delay(&self, delay: Duration) {
        *self.shared.delay.lock().unwrap() = delay;
    }

    /// Every request received, answered or not.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// The last token issued (`None` before the first).
    pub fn last_token(&self) -> Option<String> {
        let issued = self.shared.issued.load(Ordering::SeqCst);
        (issued > 0).then(|| format!("{}-{issued}", self.shared.prefix))
    }

    /// Why requests were refused by the checks (empty when every one passed).
    pub fn rejections(&self) -> Vec<String> {
        self.shared.rejections.lock().unwrap().clone()
    }

    /// The grant of each request, in order.
    pub fn grants(&self) -> Vec<String> {
        self.shared.grants.lock().unwrap().clone()
    }
}

impl Shared {
    /// The answer for a request whose checks gave `checked`.
    async fn answer(&self, grant: &str, checked: Result<(), String>) -> Response {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.grants.lock().unwrap().push(grant.to_owned());
        let delay = *self.delay.lock().unwrap();
        tokio::time::sleep(delay).await;
        if let Err(reason) = checked {
            self.rejections.lock().unwrap().push(reason.clone());
            let body = json!({"error": "invalid_grant", "error_description": reason});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
        let mode = *self.mode.lock().unwrap();
        match mode {
            TokenMode::Issue => {
                let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
                let lifetime = self.lifetime.load(Ordering::SeqCst);
                let body = json!({
                    "access_token": format!("{}-{n}", self.prefix),
                    "expires_in": lifetime,
                    "token_type": "Bearer",
                });
                (StatusCode::OK, axum::Json(body)).into_response()
            }
            TokenMode::Fail => {
                let body = json!({"error": "temporarily_unavailable", "error_description": "token service down (raw-upstream-text)"});
                (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
            }
            TokenMode::Stall => {
                tokio::time::sleep(Duration::from_secs(60)).await;
                StatusCode::GATEWAY_TIMEOUT.into_response()
            }
            TokenMode::Garbage => (StatusCode::OK, "<html>raw-upstream-text</html>").into_response(),
        }
    }
}

fn form(body: &Bytes) -> std::collections::HashMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn check(condition: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if condition { Ok(()) } else { Err(what()) }
}

async fn google_token(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let fields = form(&body);
    let grant = fields.get("grant_type").cloned().unwrap_or_default();
    let form_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let checked = (|| {
        check(form_type == "application/x-www-form-urlencoded", || format!("content-type {form_type}"))?;
        match grant.as_str() {
            "urn:ietf:params:oauth:grant-type:jwt-bearer" => {
                let assertion = fields.get("assertion").ok_or("no assertion")?;
                let (header, claims) = shared.key.verify(assertion)?;
                check(header["kid"] == "test-key-1", || format!("kid {}", header["kid"]))?;
                check(claims["iss"] == SERVICE_ACCOUNT, || format!("iss {}", claims["iss"]))?;
                check(claims["scope"] == CLOUD_PLATFORM, || format!("scope {}", claims["scope"]))?;
                let audience = shared.audience.lock().unwrap().clone();
                check(claims["aud"] == audience.as_str(), || format!("aud {} is not {audience}", claims["aud"]))?;
                let (iat, exp) = (claims["iat"].as_u64().unwrap_or(0), claims["exp"].as_u64().unwrap_or(0));
                check(iat.abs_diff(now()) <= 60, || format!("iat {iat} is not now"))?;
                check(exp == iat + 3600, || format!("exp {exp} is not iat + 3600"))
            }
            "refresh_token" => {
                check(fields.get("refresh_token").map(String::as_str) == Some("test-refresh-token"), || {
                    "wrong refresh token".into()
                })?;
                check(fields.get("client_secret").map(String::as_str) == Some("test-client-secret"), || {
                    "wrong client secret".into()
                })
            }
            other => Err(format!("grant_type {other}")),
        }
    })();
    let grant = if grant == "refresh_token" { "refresh_token" } else { "jwt-bearer" };
    shared.answer(grant, checked).await
}

async fn entra_token(State(shared): State<Arc<Shared>>, Path(tenant): Path<String>, body: Bytes) -> Response {
    let fields = form(&body);
    let expect = &shared.entra;
    let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
    let mut grant = "client_secret";
    let checked = (|| {
        check(tenant == expect.tenant, || format!("tenant {tenant}"))?;
        check(field("grant_type") == "client_credentials", || format!("grant_type {}", field("grant_type")))?;
        check(field("client_id") == expect.client_id, || format!("client_id {}", field("client_id")))?;
        check(field("scope") == COGNITIVE_SERVICES, || format!("scope {}", field("scope")))?;
        if let Some(secret) = fields.get("client_secret") {
            return check(*secret == expect.client_secret, || "wrong client secret".into());
        }
        check(field("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer", || {
            format!("client_assertion_type {}", field("client_assertion_type"))
        })?;
        let assertion = field("client_assertion");
        if assertion == expect.federated_token {
            grant = "federated";
            return Ok(());
        }
        grant = "client_assertion";
        let (header, claims) = shared.key.verify(&assertion)?;
        check(header["x5t"] == shared.key.thumbprint.as_str(), || format!("x5t {}", header["x5t"]))?;
        let audience = shared.audience.lock().unwrap().clone();
        check(claims["aud"] == audience.as_str(), || format!("aud {} is not {audience}", claims["aud"]))?;
        check(claims["iss"] == expect.client_id.as_str() && claims["sub"] == expect.client_id.as_str(), || {
            format!("iss {} sub {}", claims["iss"], claims["sub"])
        })?;
        check(claims["jti"].as_str().is_some_and(|jti| !jti.is_empty()), || "no jti".into())?;
        let exp = claims["exp"].as_u64().unwrap_or(0);
        check(exp > now(), || format!("exp {exp} has passed"))
    })();
    shared.answer(grant, checked).await
}

async fn managed_identity(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let header = headers.get("x-identity-header").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let checked = (|| {
        check(header == shared.entra.identity_header, || format!("x-identity-header {header}"))?;
        check(field("api-version") == "2019-08-01", || format!("api-version {}", field("api-version")))?;
        check(field("resource") == "https://cognitiveservices.azure.com", || format!("resource {}", field("resource")))
    })();
    shared.answer("managed_identity", checked).await
}
