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
//! fixed pair: see [`AwsIdentity::credentials`].
//!
//! Built without the `sso` and `credentials-process` features of `aws-config`:
//! an SSO profile or a `credential_process` profile then fails with the chain's
//! own message rather than being resolved by code this gateway does not carry.

use std::time::{Duration, SystemTime};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_config::default_provider::region::DefaultRegionChain;
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use reqwest::header::{HeaderName, HeaderValue};
use tokio::sync::{Mutex, OnceCell};

use super::client::error_chain;
use super::credentials::{CredentialError, SecretStore};

/// The secret-store id of the AWS region.
pub const REGION_ID: &str = "aws-region";

/// Credentials are fetched again when they expire within this margin, so a
/// signed request never leaves with credentials about to lapse.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

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
    cached: Mutex<Option<Credentials>>,
    region: OnceCell<Option<String>>,
}

impl AwsIdentity {
    /// The region: the secret store's record, else the default region chain.
    pub async fn region(&self, store: &dyn SecretStore) -> Option<String> {
        if let Some(region) = store.get(REGION_ID) {
            return Some(region.expose().trim().to_owned()).filter(|region| !region.is_empty());
        }
        let chain = || async { DefaultRegionChain::builder().build().region().await.map(|region| region.to_string()) };
        self.region.get_or_init(chain).await.clone()
    }

    /// The credentials for `credential_id`: the store's pair, else the default
    /// chain's, refreshed when they are within [`REFRESH_MARGIN`] of expiring.
    pub async fn credentials(
        &self,
        store: &dyn SecretStore,
        credential_id: &str,
    ) -> Result<(Credentials, IdentitySource), String> {
        if let Some((access_key_id, secret)) = store.get_pair(credential_id) {
            let credentials = Credentials::new(access_key_id, secret.expose(), None, None, "weir-secret-store");
            return Ok((credentials, IdentitySource::SecretStore));
        }
        let mut cached = self.cached.lock().await;
        if let Some(credentials) = cached.as_ref().filter(|credentials| fresh(credentials)) {
            return Ok((credentials.clone(), IdentitySource::DefaultChain));
        }
        let chain = self.chain.get_or_init(|| DefaultCredentialsChain::builder().build()).await;
        let credentials = chain.provide_credentials().await.map_err(|error| error_chain(&error))?;
        *cached = Some(credentials.clone());
        Ok((credentials, IdentitySource::DefaultChain))
    }
}

fn fresh(credentials: &Credentials) -> bool {
    credentials.expiry().is_none_or(|expiry| expiry > SystemTime::now() + REFRESH_MARGIN)
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
