//! Credentials whose value the host mints: OAuth access tokens from Google
//! (Vertex AI) and Microsoft Entra ID (Azure OpenAI), declared by
//! `[credentials.ID]` tables. A component never sees one: it declares a header
//! shape as for any key, and the host sends `authorization: Bearer <token>`
//! (see [`super::Credential::resolve`]).
//!
//! The flow of one call:
//!
//! 1. [`TokenSource::bearer`] reads the kept token: while it is fresh (more
//!    than the refresh margin left) it is returned at once, no lock awaited.
//! 2. Otherwise one caller mints (the single-flight lock); a caller that
//!    finds a refresh in flight keeps using a token that is still usable, or
//!    awaits that refresh and takes its answer — a failure included, so 50
//!    waiting calls make one token request, not 50.
//! 3. A failure is a typed [`TokenError`] with our own words; the token
//!    endpoint's body goes to the log, scrubbed and cut short. Nothing of a
//!    failure is kept: the next call that arrives mints again.
//!
//! The flows are a form POST (or a metadata GET) each, written here over the
//! crate's `reqwest` with the RS256 assertion signed by aws-lc-rs
//! ([`assertion`]); no OAuth crate is linked (see Cargo.toml for why).

mod assertion;
mod entra;
mod google;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use super::client::error_chain;
use super::credentials::{Secret, SecretStore};
use crate::config::{Config, TokenKind, TokenSourceSpec};

pub use assertion::KeyError;

/// A token is minted again once less than this is left of its life (or less
/// than half of it, for a token issued for under ten minutes).
pub const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// A token this close to its expiry is not handed out even while another call
/// refreshes it: that refresh is awaited instead (a quarter of a short life).
pub const USABLE_MARGIN: Duration = Duration::from_secs(60);

/// The longest one token request may take, connection included.
pub const MINT_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of a token endpoint's error body reaches the log.
const LOGGED_BODY: usize = 512;

/// Why no token could be minted. Our own words: the endpoint's body is logged,
/// never carried here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token endpoint answered HTTP {status}")]
    Refused { status: u16 },
    #[error("the token endpoint could not be reached: {reason}")]
    Unreachable { reason: String },
    #[error("the token endpoint did not answer within {} s", MINT_TIMEOUT.as_secs())]
    TimedOut,
    #[error("the token endpoint's answer holds no usable token ({what})")]
    Garbage { what: &'static str },
    #[error("the client secret `{secret_id}` is not set ({location})")]
    SecretMissing { secret_id: String, location: String },
    #[error("the client assertion could not be made: {reason}")]
    Assertion { reason: String },
}

/// Why a `[credentials.ID]` table cannot be used (found when the gateway is
/// built). Never holds a key or a file's contents.
#[derive(Debug, thiserror::Error)]
pub enum TokenSetupError {
    #[error("[credentials.{id}]: cannot read {path}: {source}")]
    Read { id: String, path: String, source: std::io::Error },
    #[error("[credentials.{id}]: {path} is not a JSON object ({reason})")]
    NotJson { id: String, path: String, reason: String },
    #[error("[credentials.{id}]: {path} is a `{found}` file; `{field}` names a `{expected}` file")]
    WrongType { id: String, path: String, field: &'static str, expected: &'static str, found: String },
    #[error("[credentials.{id}]: {path} has no `{field}` string")]
    MissingField { id: String, path: String, field: &'static str },
    #[error("[credentials.{id}]: {path}: {source}")]
    Key { id: String, path: String, source: KeyError },
    #[error(
        "[credentials.{id}]: `workload_identity` needs the federated token file: set `federated_token_file` or \
         AZURE_FEDERATED_TOKEN_FILE"
    )]
    NoFederatedTokenFile { id: String },
    #[error("[credentials.{id}]: GCE_METADATA_HOST `{host}` is not a host: {reason}")]
    MetadataHost { id: String, host: String, reason: String },
    /// A table's source handed to the other platform's flow (a bug, not a config).
    #[error("[credentials.{id}]: not a {kind} source")]
    WrongPlatform { id: String, kind: &'static str },
    #[error("cannot build the token client: {0}")]
    Client(String),
}

/// A minted token and the header value that carries it (built once per token,
/// not per call).
#[derive(Debug, Clone)]
pub struct Minted {
    pub token: Secret,
    pub bearer: Secret,
}

/// Every `[credentials.*]` table, ready to mint. Empty when the config
/// declares none.
#[derive(Debug, Default)]
pub struct TokenCredentials {
    sources: HashMap<String, Arc<TokenSource>>,
}

impl TokenCredentials {
    /// Reads every file the tables name (a service-account key, a
    /// certificate), so a file that does not parse stops the build here.
    pub fn from_config(config: &Config) -> Result<Self, TokenSetupError> {
        if config.token_credentials.is_empty() {
            return Ok(Self::default());
        }
        let http = reqwest::Client::builder()
            .connect_timeout(MINT_TIMEOUT)
            .timeout(MINT_TIMEOUT)
            .build()
            .map_err(|error| TokenSetupError::Client(error_chain(&error)))?;
        let mut sources = HashMap::new();
        for (id, spec) in &config.token_credentials {
            let flow = Flow::from_spec(id, spec, |path| config.resolve_path(path))?;
            let source = TokenSource { id: id.clone(), flow, cache: TokenCache::default(), http: http.clone() };
            sources.insert(id.clone(), Arc::new(source));
        }
        Ok(Self { sources })
    }

    /// The source minting under `credential_id`, if the config declares one.
    pub fn get(&self, credential_id: &str) -> Option<&TokenSource> {
        self.sources.get(credential_id).map(Arc::as_ref)
    }

    /// Drops the kept token under `credential_id`: the upstream rejected it.
    pub fn forget(&self, credential_id: &str) {
        if let Some(source) = self.sources.get(credential_id) {
            source.cache.forget();
        }
    }
}

/// One credential id's flow and its kept token.
#[derive(Debug)]
pub struct TokenSource {
    id: String,
    flow: Flow,
    cache: TokenCache,
    http: reqwest::Client,
}

impl TokenSource {
    pub fn kind(&self) -> TokenKind {
        match self.flow {
            Flow::Google(_) => TokenKind::Google,
            Flow::Entra(_) => TokenKind::Entra,
        }
    }

    /// The token to send: the kept one while fresh, else a new one (one
    /// request however many calls wait). `store` answers a client secret.
    pub async fn bearer(&self, store: &dyn SecretStore) -> Result<Minted, TokenError> {
        self.cache.get(|| self.mint(store)).await
    }

    async fn mint(&self, store: &dyn SecretStore) -> Result<(Secret, Duration), TokenError> {
        let request = match &self.flow {
            Flow::Google(flow) => flow.request(&self.http),
            Flow::Entra(flow) => flow.request(&self.http, store).await,
        };
        let failed = |error: TokenError, body: Option<&[u8]>| {
            self.log_failure(&error, body, store);
            error
        };
        let request = request.map_err(|error| failed(error, None))?;
        let unreachable = |error: reqwest::Error| {
            if error.is_timeout() {
                TokenError::TimedOut
            } else {
                TokenError::Unreachable { reason: error_chain(&error) }
            }
        };
        let sent = request.send().await.map_err(|error| failed(unreachable(error), None))?;
        let status = sent.status();
        let body = sent.bytes().await.map_err(|error| failed(unreachable(error), None))?;
        if !status.is_success() {
            return Err(failed(TokenError::Refused { status: status.as_u16() }, Some(&body)));
        }
        let answer = read_answer(&body).map_err(|what| failed(TokenError::Garbage { what }, Some(&body)))?;
        tracing::debug!(credential = %self.id, kind = self.kind().as_str(), lifetime_secs = answer.1.as_secs(), "token minted");
        Ok(answer)
    }

    /// The failure and the endpoint's body, scrubbed of what this flow sends
    /// and cut to [`LOGGED_BODY`] bytes, for the log only.
    fn log_failure(&self, error: &TokenError, body: Option<&[u8]>, store: &dyn SecretStore) {
        let body = body.map(|body| {
            let text = String::from_utf8_lossy(body);
            let scrubbed = self.flow.scrub(&text, store);
            let mut end = scrubbed.len().min(LOGGED_BODY);
            while !scrubbed.is_char_boundary(end) {
                end -= 1;
            }
            scrubbed[..end].to_owned()
        });
        tracing::warn!(
            credential = %self.id,
            kind = self.kind().as_str(),
            reason = %error,
            body = body.as_deref().unwrap_or(""),
            "no token minted"
        );
    }
}

/// A token endpoint's answer: `access_token` and its life, from `expires_in`
/// (seconds, a number or a string: Azure's managed identity sends strings)
/// or `expires_on` (seconds since the epoch).
fn read_answer(body: &[u8]) -> Result<(Secret, Duration), &'static str> {
    let answer: serde_json::Value = serde_json::from_slice(body).map_err(|_| "not JSON")?;
    let token = answer
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .filter(|token| !token.is_empty() && token.bytes().all(|byte| byte.is_ascii_graphic()))
        .ok_or("no `access_token` string")?;
    let seconds = |field: &str| match answer.get(field) {
        Some(serde_json::Value::Number(number)) => number.as_u64(),
        Some(serde_json::Value::String(text)) => text.trim().parse().ok(),
        _ => None,
    };
    let lifetime = match (seconds("expires_in"), seconds("expires_on")) {
        (Some(expires_in), _) => expires_in,
        (None, Some(expires_on)) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            expires_on.saturating_sub(now.as_secs())
        }
        (None, None) => return Err("no `expires_in`"),
    };
    if lifetime == 0 {
        return Err("the token has already expired");
    }
    Ok((Secret::new(token), Duration::from_secs(lifetime)))
}

/// How one credential id mints.
#[derive(Debug)]
enum Flow {
    Google(google::GoogleFlow),
    Entra(entra::EntraFlow),
}

impl Flow {
    fn from_spec(
        id: &str,
        spec: &TokenSourceSpec,
        resolve: impl Fn(&Path) -> std::path::PathBuf,
    ) -> Result<Self, TokenSetupError> {
        match spec.kind() {
            TokenKind::Google => google::GoogleFlow::from_spec(id, spec, resolve).map(Self::Google),
            TokenKind::Entra => entra::EntraFlow::from_spec(id, spec, resolve).map(Self::Entra),
        }
    }

    fn scrub(&self, text: &str, store: &dyn SecretStore) -> String {
        match self {
            Self::Google(flow) => flow.scrub(text),
            Self::Entra(flow) => flow.scrub(text, store),
        }
    }
}

/// An `application/x-www-form-urlencoded` body.
fn form(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

fn post_form(http: &reqwest::Client, url: &str, body: String) -> reqwest::RequestBuilder {
    http.post(url).header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body)
}

/// `text` with each of `secrets` replaced by [`super::credentials::CREDENTIAL_MARKER`].
fn hide(text: &str, secrets: &[&str]) -> String {
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
        text = text.replace(secret, super::credentials::CREDENTIAL_MARKER);
    }
    text
}

/// Reads a file named by a table, for the setup errors.
fn read_file(id: &str, path: &Path) -> Result<Vec<u8>, TokenSetupError> {
    std::fs::read(path).map_err(|source| TokenSetupError::Read {
        id: id.to_owned(),
        path: path.display().to_string(),
        source,
    })
}

/// Seconds since the epoch, for assertion claims.
fn epoch_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// The kept token of one credential id, and the single-flight refresh.
#[derive(Debug, Default)]
struct TokenCache {
    held: RwLock<Option<Held>>,
    refresh: tokio::sync::Mutex<()>,
    /// Mints finished: a caller that waited on a refresh and sees this moved
    /// since it arrived takes that refresh's answer instead of minting again.
    settled: AtomicU64,
    last_failure: std::sync::Mutex<Option<TokenError>>,
}

#[derive(Debug, Clone)]
struct Held {
    minted: Minted,
    refresh_at: Instant,
    usable_until: Instant,
}

impl TokenCache {
    async fn get<Mint, Fut>(&self, mint: Mint) -> Result<Minted, TokenError>
    where
        Mint: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(Secret, Duration), TokenError>>,
    {
        if let Some(minted) = self.held_until(|held| held.refresh_at) {
            return Ok(minted);
        }
        let seen = self.settled.load(Ordering::Acquire);
        let _single_flight = match self.refresh.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                if let Some(minted) = self.held_until(|held| held.usable_until) {
                    return Ok(minted);
                }
                self.refresh.lock().await
            }
        };
        // Whoever held the refresh before may have settled it, either way.
        if let Some(minted) = self.held_until(|held| held.refresh_at) {
            return Ok(minted);
        }
        if self.settled.load(Ordering::Acquire) != seen
            && let Some(failure) = self.last_failure.lock().unwrap_or_else(PoisonError::into_inner).clone()
        {
            return Err(failure);
        }
        let minted = mint().await;
        let answer = match minted {
            Ok((token, lifetime)) => {
                let now = Instant::now();
                let minted = Minted { bearer: Secret::new(format!("Bearer {}", token.expose())), token };
                let held = Held {
                    minted: minted.clone(),
                    refresh_at: now + lifetime - REFRESH_MARGIN.min(lifetime / 2),
                    usable_until: now + lifetime - USABLE_MARGIN.min(lifetime / 4),
                };
                *self.held.write().unwrap_or_else(PoisonError::into_inner) = Some(held);
                *self.last_failure.lock().unwrap_or_else(PoisonError::into_inner) = None;
                Ok(minted)
            }
            Err(error) => {
                *self.last_failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(error.clone());
                Err(error)
            }
        };
        self.settled.fetch_add(1, Ordering::AcqRel);
        answer
    }

    /// The kept token, if `until` of it is still ahead.
    fn held_until(&self, until: impl Fn(&Held) -> Instant) -> Option<Minted> {
        let held = self.held.read().unwrap_or_else(PoisonError::into_inner);
        held.as_ref().filter(|held| Instant::now() < until(held)).map(|held| held.minted.clone())
    }

    fn forget(&self) {
        *self.held.write().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    /// A mint that counts itself and answers `answer` after a pause.
    async fn mint(
        minted: &AtomicU32,
        answer: Result<(&'static str, u64), TokenError>,
    ) -> Result<(Secret, Duration), TokenError> {
        minted.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(10)).await;
        answer.map(|(token, secs)| (Secret::new(token), Duration::from_secs(secs)))
    }

    #[tokio::test(start_paused = true)]
    async fn a_fresh_token_is_kept_and_refreshed_before_it_expires() {
        let cache = TokenCache::default();
        let minted = AtomicU32::new(0);
        let first = cache.get(|| mint(&minted, Ok(("one", 3600)))).await.unwrap();
        assert_eq!(first.bearer.expose(), "Bearer one");
        assert_eq!(cache.get(|| mint(&minted, Ok(("two", 3600)))).await.unwrap().token.expose(), "one");
        assert_eq!(minted.load(Ordering::SeqCst), 1);
        // Inside the refresh margin: minted again, before the hour is out.
        tokio::time::advance(Duration::from_secs(3600) - REFRESH_MARGIN + Duration::from_secs(1)).await;
        assert_eq!(cache.get(|| mint(&minted, Ok(("two", 3600)))).await.unwrap().token.expose(), "two");
        assert_eq!(minted.load(Ordering::SeqCst), 2);
        // A short-lived token is refreshed at half its life.
        cache.forget();
        cache.get(|| mint(&minted, Ok(("short", 10)))).await.unwrap();
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(cache.get(|| mint(&minted, Ok(("x", 10)))).await.unwrap().token.expose(), "short");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(cache.get(|| mint(&minted, Ok(("later", 10)))).await.unwrap().token.expose(), "later");
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_calls_share_one_refresh_and_its_failure_and_the_next_call_recovers() {
        let cache = Arc::new(TokenCache::default());
        let minted = Arc::new(AtomicU32::new(0));
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let (cache, minted) = (Arc::clone(&cache), Arc::clone(&minted));
                tokio::spawn(async move {
                    cache
                        .get(|| mint(&minted, Err(TokenError::Refused { status: 500 })))
                        .await
                        .map(|m| m.token.expose().to_owned())
                })
            })
            .collect();
        for call in calls {
            assert_eq!(call.await.unwrap(), Err(TokenError::Refused { status: 500 }));
        }
        assert_eq!(minted.load(Ordering::SeqCst), 1, "one request for fifty waiting calls");
        // Nothing of the failure is kept: the next call mints again.
        assert_eq!(cache.get(|| mint(&minted, Ok(("ok", 3600)))).await.unwrap().token.expose(), "ok");
        assert_eq!(minted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_answer_is_a_token_and_its_life_or_a_typed_garbage() {
        let (token, life) =
            read_answer(br#"{"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"}"#).unwrap();
        assert_eq!((token.expose(), life.as_secs()), ("ya29.x", 3599));
        let (_, life) = read_answer(br#"{"access_token":"t","expires_in":"86399"}"#).unwrap();
        assert_eq!(life.as_secs(), 86399);
        let in_an_hour = epoch_seconds() + 3600;
        let (_, life) =
            read_answer(format!(r#"{{"access_token":"t","expires_on":"{in_an_hour}"}}"#).as_bytes()).unwrap();
        assert!((3590..=3600).contains(&life.as_secs()), "{life:?}");
        assert_eq!(read_answer(b"<html>").unwrap_err(), "not JSON");
        assert_eq!(read_answer(br#"{"token":"t"}"#).unwrap_err(), "no `access_token` string");
        assert_eq!(read_answer(br#"{"access_token":"a b","expires_in":1}"#).unwrap_err(), "no `access_token` string");
        assert_eq!(read_answer(br#"{"access_token":"t"}"#).unwrap_err(), "no `expires_in`");
        assert_eq!(
            read_answer(br#"{"access_token":"t","expires_in":0}"#).unwrap_err(),
            "the token has already expired"
        );
    }

    /// A store with nothing in it.
    #[derive(Debug)]
    struct Empty;
    impl SecretStore for Empty {
        fn get(&self, _: &str) -> Option<Secret> {
            None
        }
        fn location(&self, id: &str) -> String {
            format!("test store `{id}`")
        }
    }

    fn sources(tables: &str) -> Result<TokenCredentials, TokenSetupError> {
        TokenCredentials::from_config(&Config::from_toml(tables, "t.toml").unwrap())
    }

    #[test]
    fn workload_identity_without_a_token_file_is_a_setup_error() {
        if std::env::var_os("AZURE_FEDERATED_TOKEN_FILE").is_some() {
            return; // The machine's own setting would answer; nothing to test here.
        }
        let error = sources(
            "[credentials.w]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nworkload_identity = true\n",
        )
        .unwrap_err();
        assert!(matches!(error, TokenSetupError::NoFederatedTokenFile { .. }), "{error}");
        assert!(error.to_string().contains("AZURE_FEDERATED_TOKEN_FILE"), "{error}");
    }

    #[tokio::test]
    async fn an_unreadable_federated_token_file_or_an_unset_client_secret_is_a_typed_error() {
        let tables = "[credentials.w]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nworkload_identity = true\n\
                      federated_token_file = \"/nonexistent/weir-token\"\nauthority_host = \"http://127.0.0.1:1\"\n\n\
                      [credentials.s]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"secret-s\"\n\
                      authority_host = \"http://127.0.0.1:1\"\n";
        let sources = sources(tables).unwrap();
        let error = sources.get("w").unwrap().bearer(&Empty).await.unwrap_err();
        assert!(
            matches!(&error, TokenError::Assertion { reason } if reason.contains("/nonexistent/weir-token")),
            "{error}"
        );
        let error = sources.get("s").unwrap().bearer(&Empty).await.unwrap_err();
        assert_eq!(
            error,
            TokenError::SecretMissing { secret_id: "secret-s".into(), location: "test store `secret-s`".into() }
        );
        assert!(sources.get("nope").is_none());
    }

    /// A store holding one client secret.
    #[derive(Debug)]
    struct OneSecret;
    impl SecretStore for OneSecret {
        fn get(&self, id: &str) -> Option<Secret> {
            (id == "client-secret").then(|| Secret::new("secret-value"))
        }
        fn location(&self, id: &str) -> String {
            format!("test store `{id}`")
        }
    }

    #[tokio::test]
    async fn a_token_endpoint_that_cannot_be_reached_is_unreachable() {
        let tables = "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\n\
                      client_secret = \"client-secret\"\nauthority_host = \"http://127.0.0.1:1\"\n";
        let sources = sources(tables).unwrap();
        let error = sources.get("e").unwrap().bearer(&OneSecret).await.unwrap_err();
        assert!(matches!(&error, TokenError::Unreachable { reason } if reason.contains("127.0.0.1:1")), "{error}");
        assert!(!error.to_string().contains("secret-value"), "{error}");
    }

    #[test]
    fn a_source_of_the_other_platform_is_refused_by_each_flow() {
        let entra = TokenSourceSpec::EntraManaged { client_id: None, scope: "s".into() };
        let error = google::GoogleFlow::from_spec("x", &entra, Path::to_path_buf).unwrap_err();
        assert!(matches!(error, TokenSetupError::WrongPlatform { kind: "Google", .. }), "{error}");
        let google = TokenSourceSpec::GoogleMetadata { scope: "s".into() };
        let error = entra::EntraFlow::from_spec("x", &google, Path::to_path_buf).unwrap_err();
        assert!(matches!(error, TokenSetupError::WrongPlatform { kind: "Entra ID", .. }), "{error}");
    }

    #[tokio::test]
    async fn a_minted_credential_on_a_signed_provider_is_refused() {
        let sources = sources("[credentials.g]\nkind = \"google\"\nmetadata_server = true\n").unwrap();
        let shape = crate::types::CredentialShape::AwsSigv4(crate::types::Sigv4 {
            service: "bedrock".into(),
            default_credential_id: "aws-access-key-id".into(),
        });
        let error = crate::transport::Credential::resolve(
            "p",
            &shape,
            Some("g"),
            &Empty,
            &crate::transport::AwsIdentity::default(),
            sources.get("g"),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, crate::transport::CredentialError::TokenOnSigned { kind: "google", .. }), "{error}");
    }
}
