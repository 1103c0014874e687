//! AWS Signature V4: where the identity and the region come from, and the
//! signature itself. A component only declares "AWS SigV4, service bedrock";
//! everything here is the host's.
//!
//! Sources, in order, and nothing is ever defaulted:
//!
//! | what | the deployment's secret store | else AWS's own default chains |
//! |---|---|---|
//! | credentials | the pair under the provider's credential id (both halves or no record) | environment, profile, web identity, ECS task role, EC2 instance profile |
//! | region | the value under [`REGION_ID`] | `AWS_REGION`, profile, instance metadata |
//!
//! A region the deployment did not choose would be a wrong region, and a wrong
//! region fails on the first call with an access error that says nothing about
//! regions; so a missing region is its own error, named before any request.
//! Credentials are a provider that refreshes (role credentials expire), not a
//! fixed pair: see [`AwsIdentity::credentials`]. Both chains can be slow (files,
//! metadata endpoints with timeouts), so neither is awaited under a lock a call
//! with a usable answer would wait on, and a failed lookup is asked again after
//! [`RETRY_AFTER_FAILURE`] instead of being remembered for the process's life.
//! An empty region (`AWS_REGION=""`, which the region chain returns as a
//! region) or one that is not a region name is no region.
//!
//! Built without the `sso` and `credentials-process` features of `aws-config`:
//! an SSO profile or a `credential_process` profile then fails with the chain's
//! own message rather than being resolved by code this gateway does not carry.

use std::future::Future;
use std::sync::PoisonError;
use std::time::{Duration, SystemTime};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::default_provider::region::DefaultRegionChain;
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::client::error_chain;
use super::credentials::{CredentialError, SecretStore};

/// The secret-store id of the AWS region.
pub const REGION_ID: &str = "aws-region";

/// The default secret-store id of an AWS access key pair.
pub const ACCESS_KEY_ID: &str = "aws-access-key-id";

/// Credentials are fetched again when they expire within this margin, so a
/// signed request never leaves with credentials about to lapse.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Credentials this close to expiry are not handed out even while another
/// call refreshes them: that call's answer is awaited instead.
const USABLE_MARGIN: Duration = Duration::from_secs(60);

/// How long a failed region or credential lookup is remembered before the
/// chain is asked again (a metadata endpoint that timed out, a profile fixed
/// by the operator).
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// Where a call's AWS identity came from (for logs and `weir providers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentitySource {
    SecretStore,
    DefaultChain,
}

/// The process's view of AWS's default chains: built once, asked on demand,
/// credentials cached until they near expiry.
#[derive(Debug, Default)]
pub struct AwsIdentity {
    chain: OnceCell<DefaultCredentialsChain>,
    credentials: Lookup<Credentials>,
    region: Lookup<String>,
}

impl AwsIdentity {
    /// The region: the secret store's record, else the default region chain.
    /// An empty or malformed value is no region.
    pub async fn region(&self, store: &dyn SecretStore) -> Option<String> {
        if let Some(region) = store.get(REGION_ID) {
            return usable_region(region.expose());
        }
        let chain = || async {
            let region = DefaultRegionChain::builder().build().region().await;
            region.and_then(|region| usable_region(region.as_ref())).ok_or_else(|| "no region".to_owned())
        };
        self.region.get(|_| true, |_| true, chain).await.ok()
    }

    /// The credentials for `credential_id`: the store's pair, else the default
    /// chain's, refreshed when they are within [`REFRESH_MARGIN`] of expiring.
    /// While one call refreshes, others keep using credentials that are still
    /// valid for [`USABLE_MARGIN`].
    pub async fn credentials(
        &self,
        store: &dyn SecretStore,
        credential_id: &str,
    ) -> Result<(Credentials, IdentitySource), String> {
        if let Some((access_key_id, secret)) = store.get_pair(credential_id) {
            let credentials = Credentials::new(access_key_id, secret.expose(), None, None, "weir-secret-store");
            return Ok((credentials, IdentitySource::SecretStore));
        }
        let fetch = || async {
            let chain = self.chain.get_or_init(|| DefaultCredentialsChain::builder().build()).await;
            chain.provide_credentials().await.map_err(|error| error_chain(&error))
        };
        let credentials = self.credentials.get(valid_for(REFRESH_MARGIN), valid_for(USABLE_MARGIN), fetch).await?;
        Ok((credentials, IdentitySource::DefaultChain))
    }
}

fn valid_for(margin: Duration) -> impl Fn(&Credentials) -> bool {
    move |credentials| credentials.expiry().is_none_or(|expiry| expiry > SystemTime::now() + margin)
}

/// A region name as AWS spells them (`eu-west-3`, `us-gov-west-1`): anything
/// else (empty, a URL fragment) is no region, so it can never reshape a host.
fn usable_region(value: &str) -> Option<String> {
    let value = value.trim();
    let valid = !value.is_empty()
        && value.len() <= 64
        && value.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if !valid && !value.is_empty() {
        tracing::warn!("the AWS region found is not a region name; treated as no region");
    }
    valid.then(|| value.to_owned())
}

/// A value fetched from a slow source and shared by every call. A reader of a
/// `fresh` value never waits; one refresh runs at a time (the others wait for
/// it, unless the value they hold is still `usable`); a failure is remembered
/// for [`RETRY_AFTER_FAILURE`], then the source is asked again. The state lock
/// is never held across an await.
#[derive(Debug)]
struct Lookup<T> {
    state: std::sync::Mutex<LookupState<T>>,
    refresh: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct LookupState<T> {
    value: Option<T>,
    failure: Option<(Instant, String)>,
}

impl<T> Default for Lookup<T> {
    fn default() -> Self {
        Self {
            state: std::sync::Mutex::new(LookupState { value: None, failure: None }),
            refresh: tokio::sync::Mutex::new(()),
        }
    }
}

impl<T: Clone> Lookup<T> {
    async fn get<Fetch, Fut>(
        &self,
        fresh: impl Fn(&T) -> bool,
        usable: impl Fn(&T) -> bool,
        fetch: Fetch,
    ) -> Result<T, String>
    where
        Fetch: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        if let Some(answer) = self.settled(&fresh) {
            return answer;
        }
        let _single_flight = match self.refresh.try_lock() {
            Ok(guard) => guard,
            Err(_) => {
                if let Some(value) = self.value_if(&usable) {
                    return Ok(value);
                }
                self.refresh.lock().await
            }
        };
        // Whoever held the refresh before may have settled it.
        if let Some(answer) = self.settled(&fresh) {
            return answer;
        }
        let fetched = fetch().await;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match &fetched {
            Ok(value) => *state = LookupState { value: Some(value.clone()), failure: None },
            Err(reason) => state.failure = Some((Instant::now(), reason.clone())),
        }
        fetched
    }

    /// A fresh value, or a failure too recent to ask again.
    fn settled(&self, fresh: &impl Fn(&T) -> bool) -> Option<Result<T, String>> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = state.value.as_ref().filter(|value| fresh(value)) {
            return Some(Ok(value.clone()));
        }
        match &state.failure {
            Some((at, reason)) if at.elapsed() < RETRY_AFTER_FAILURE => Some(Err(reason.clone())),
            _ => None,
        }
    }

    fn value_if(&self, usable: &impl Fn(&T) -> bool) -> Option<T> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.value.as_ref().filter(|value| usable(value)).cloned()
    }
}

/// Everything a SigV4 signature needs, resolved for one call.
#[derive(Debug, Clone)]
pub struct SigV4 {
    pub credentials: Credentials,
    pub region: String,
    pub service: String,
    pub source: IdentitySource,
}

impl SigV4 {
    /// Resolves the identity and region for a provider signing as `service`.
    pub async fn resolve(
        identity: &AwsIdentity,
        store: &dyn SecretStore,
        provider: &str,
        service: &str,
        credential_id: &str,
    ) -> Result<Self, CredentialError> {
        let region = identity.region(store).await.ok_or_else(|| CredentialError::NoRegion {
            provider: provider.to_owned(),
            location: store.location(REGION_ID),
        })?;
        let (credentials, source) = identity.credentials(store, credential_id).await.map_err(|reason| {
            CredentialError::Aws { provider: provider.to_owned(), credential: credential_id.to_owned(), reason }
        })?;
        Ok(Self { credentials, region, service: service.to_owned(), source })
    }

    /// Signs `request` as it will be sent: its method, URL, headers and body.
    /// Adds `x-amz-date`, `authorization` and, for temporary credentials,
    /// `x-amz-security-token`; the last two are marked sensitive.
    pub fn sign(&self, request: &mut reqwest::Request) -> Result<(), String> {
        let identity: Identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(&self.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|error| error.to_string())?
            .into();
        let body = request.body().and_then(reqwest::Body::as_bytes).unwrap_or_default();
        let headers = request.headers().iter().filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)));
        let signable =
            SignableRequest::new(request.method().as_str(), request.url().as_str(), headers, SignableBody::Bytes(body))
                .map_err(|error| error.to_string())?;
        let (instructions, _signature) = sign(signable, &params).map_err(|error| error.to_string())?.into_parts();
        for (name, value) in instructions.headers() {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|error| error.to_string())?;
            let mut value = HeaderValue::from_str(value).map_err(|error| error.to_string())?;
            value.set_sensitive(name == "authorization" || name == "x-amz-security-token");
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Secret;

    #[derive(Debug)]
    struct Store {
        pair: bool,
        region: Option<&'static str>,
    }

    impl SecretStore for Store {
        fn get(&self, id: &str) -> Option<Secret> {
            (id == REGION_ID).then_some(self.region).flatten().map(Secret::new)
        }
        fn location(&self, id: &str) -> String {
            format!("test store `{id}`")
        }
        fn get_pair(&self, id: &str) -> Option<(String, Secret)> {
            (self.pair && id == "aws-access-key-id").then(|| ("AKIDSTORE".to_owned(), Secret::new("store-secret")))
        }
    }

    #[test]
    fn a_region_is_a_region_name_or_nothing() {
        assert_eq!(usable_region(" eu-west-3 ").as_deref(), Some("eu-west-3"));
        assert_eq!(usable_region("us-gov-west-1").as_deref(), Some("us-gov-west-1"));
        for bad in ["", "   ", "x.attacker.example#", "us-east-1/", "US-EAST-1", "eu west"] {
            assert_eq!(usable_region(bad), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn an_empty_region_in_the_store_is_no_region() {
        let identity = AwsIdentity::default();
        assert_eq!(identity.region(&Store { pair: false, region: Some("") }).await, None);
        assert_eq!(identity.region(&Store { pair: false, region: Some("a.b#") }).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_lookup_is_asked_again_after_the_backoff() {
        let lookup = Lookup::<String>::default();
        let asked = std::sync::atomic::AtomicU32::new(0);
        let fetch = |answer: Result<String, String>| {
            let asked = &asked;
            move || async move {
                asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                answer
            }
        };
        let always = |_: &String| true;
        assert!(lookup.get(always, always, fetch(Err("down".into()))).await.is_err());
        // Within the backoff the failure answers without asking.
        assert_eq!(lookup.get(always, always, fetch(Ok("late".into()))).await, Err("down".to_owned()));
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        tokio::time::advance(RETRY_AFTER_FAILURE + Duration::from_secs(1)).await;
        assert_eq!(lookup.get(always, always, fetch(Ok("eu-west-3".into()))).await, Ok("eu-west-3".to_owned()));
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
        // A success is kept.
        assert_eq!(lookup.get(always, always, fetch(Err("x".into()))).await, Ok("eu-west-3".to_owned()));
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refresh_in_flight_blocks_no_caller_that_holds_a_usable_value() {
        let lookup = std::sync::Arc::new(Lookup::<u32>::default());
        let never_fresh = |_: &u32| false;
        let usable = |_: &u32| true;
        lookup.get(never_fresh, usable, || async { Ok(1) }).await.unwrap();
        // A refresh that does not finish until released.
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let refreshing = {
            let lookup = std::sync::Arc::clone(&lookup);
            tokio::spawn(async move {
                lookup
                    .get(never_fresh, usable, || async move {
                        released.await.ok();
                        Ok(2)
                    })
                    .await
            })
        };
        while lookup.refresh.try_lock().is_ok() {
            tokio::task::yield_now().await;
        }
        // Another caller is answered at once with the still-usable value.
        let quick = tokio::time::timeout(Duration::from_secs(5), lookup.get(never_fresh, usable, || async { Ok(3) }));
        assert_eq!(quick.await.unwrap(), Ok(1));
        release.send(()).unwrap();
        assert_eq!(refreshing.await.unwrap(), Ok(2));
    }

    #[tokio::test]
    async fn the_secret_store_comes_first_for_credentials_and_region() {
        let identity = AwsIdentity::default();
        let store = Store { pair: true, region: Some("eu-west-3") };
        let signer = SigV4::resolve(&identity, &store, "p", "bedrock", "aws-access-key-id").await.unwrap();
        assert_eq!(signer.region, "eu-west-3");
        assert_eq!(signer.source, IdentitySource::SecretStore);
        assert_eq!(signer.credentials.access_key_id(), "AKIDSTORE");
    }

    #[tokio::test]
    async fn signing_adds_the_date_and_a_sensitive_authorization_scoped_to_region_and_service() {
        let identity = AwsIdentity::default();
        let store = Store { pair: true, region: Some("eu-west-3") };
        let signer = SigV4::resolve(&identity, &store, "p", "bedrock", "aws-access-key-id").await.unwrap();
        let client = reqwest::Client::new();
        let mut request = client
            .post("https://bedrock-runtime.eu-west-3.amazonaws.com/model/a:b/invoke")
            .header("content-type", "application/json")
            .body("{}")
            .build()
            .unwrap();
        signer.sign(&mut request).unwrap();
        let authorization = request.headers().get("authorization").unwrap();
        assert!(authorization.is_sensitive());
        let text = authorization.to_str().unwrap();
        assert!(text.starts_with("AWS4-HMAC-SHA256 Credential=AKIDSTORE/"), "{text}");
        assert!(text.contains("/eu-west-3/bedrock/aws4_request"), "{text}");
        assert!(text.contains("content-type;host;x-amz-date"), "{text}");
        assert!(request.headers().contains_key("x-amz-date"));
        assert!(!request.headers().contains_key("x-amz-security-token"), "long-term keys carry no token");
    }
}
