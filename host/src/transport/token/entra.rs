//! Microsoft Entra ID's sources of an access token, each a request to the
//! tenant's v2.0 token endpoint (`{authority}/{tenant}/oauth2/v2.0/token`;
//! the authority is the table's `authority_host`, else `AZURE_AUTHORITY_HOST`,
//! else Microsoft's public cloud) or to a managed identity endpoint:
//!
//! - client secret: the client credentials grant with `client_secret` (read
//!   from the secret store under the id the table names, on every mint);
//! - certificate: the same grant with a client assertion, an RS256 JWT whose
//!   header carries the certificate's SHA-1 thumbprint (`x5t`), `aud` the
//!   token endpoint, `iss` = `sub` = the client id, a fresh `jti`;
//! - workload identity: the same grant whose assertion is the federated token
//!   file (read on every mint: the platform rotates it);
//! - managed identity: `IDENTITY_ENDPOINT` with `X-IDENTITY-HEADER` (App
//!   Service, Functions, Container Apps) when both are set, else the instance
//!   metadata service (`169.254.169.254`, `Metadata: true`); the scope is
//!   asked for as a `resource` (the scope without `/.default`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::assertion::{SigningKey, certificate_thumbprint};
use super::{TokenError, TokenSetupError, epoch_seconds, read_file};
use crate::config::TokenSourceSpec;
use crate::transport::SecretStore;

/// Microsoft's public cloud authority.
const PUBLIC_AUTHORITY: &str = "https://login.microsoftonline.com";

/// The variable Azure's SDKs read for another authority (a sovereign cloud).
const AUTHORITY_VARIABLE: &str = "AZURE_AUTHORITY_HOST";

/// The variable that names the workload identity token file.
const FEDERATED_TOKEN_FILE_VARIABLE: &str = "AZURE_FEDERATED_TOKEN_FILE";

const IMDS_ENDPOINT: &str = "http://169.254.169.254/metadata/identity/oauth2/token";
const IMDS_API_VERSION: &str = "2018-02-01";
const IDENTITY_API_VERSION: &str = "2019-08-01";

/// How long a client assertion is valid.
const ASSERTION_LIFE_SECS: u64 = 600;

#[derive(Debug)]
pub(super) struct EntraFlow {
    /// The tenant's token endpoint (unused by managed identity).
    token_endpoint: String,
    client_id: Option<String>,
    scope: String,
    secret: EntraSecret,
}

#[derive(Debug)]
enum EntraSecret {
    ClientSecret { secret_id: String },
    Certificate { key: SigningKey, thumbprint: String },
    Workload { token_file: PathBuf },
    Managed(ManagedEndpoint),
}

#[derive(Debug)]
enum ManagedEndpoint {
    /// `IDENTITY_ENDPOINT`, and the name of the variable holding its header.
    Identity {
        endpoint: String,
    },
    Imds,
}

impl EntraFlow {
    pub(super) fn from_spec(
        id: &str,
        spec: &TokenSourceSpec,
        resolve: impl Fn(&Path) -> PathBuf,
    ) -> Result<Self, TokenSetupError> {
        let endpoint = |tenant: &str, authority: &Option<String>| {
            let authority = authority
                .clone()
                .or_else(|| std::env::var(AUTHORITY_VARIABLE).ok().filter(|host| !host.trim().is_empty()))
                .unwrap_or_else(|| PUBLIC_AUTHORITY.to_owned());
            format!("{}/{tenant}/oauth2/v2.0/token", authority.trim_end_matches('/'))
        };
        match spec {
            TokenSourceSpec::EntraSecret { tenant_id, client_id, secret_id, authority, scope } => Ok(Self {
                token_endpoint: endpoint(tenant_id, authority),
                client_id: Some(client_id.clone()),
                scope: scope.clone(),
                secret: EntraSecret::ClientSecret { secret_id: secret_id.clone() },
            }),
            TokenSourceSpec::EntraCertificate { tenant_id, client_id, file, authority, scope } => {
                let path = resolve(file);
                let pem = read_file(id, &path)?;
                let key_error =
                    |source| TokenSetupError::Key { id: id.to_owned(), path: path.display().to_string(), source };
                let key = SigningKey::from_pem(&pem).map_err(key_error)?;
                let thumbprint = certificate_thumbprint(&pem).map_err(key_error)?;
                Ok(Self {
                    token_endpoint: endpoint(tenant_id, authority),
                    client_id: Some(client_id.clone()),
                    scope: scope.clone(),
                    secret: EntraSecret::Certificate { key, thumbprint },
                })
            }
            TokenSourceSpec::EntraWorkload { tenant_id, client_id, token_file, authority, scope } => {
                let token_file = token_file
                    .as_deref()
                    .map(&resolve)
                    .or_else(|| {
                        std::env::var_os(FEDERATED_TOKEN_FILE_VARIABLE).filter(|f| !f.is_empty()).map(PathBuf::from)
                    })
                    .ok_or_else(|| TokenSetupError::NoFederatedTokenFile { id: id.to_owned() })?;
                Ok(Self {
                    token_endpoint: endpoint(tenant_id, authority),
                    client_id: Some(client_id.clone()),
                    scope: scope.clone(),
                    secret: EntraSecret::Workload { token_file },
                })
            }
            TokenSourceSpec::EntraManaged { client_id, scope } => {
                let managed = match std::env::var("IDENTITY_ENDPOINT") {
                    Ok(endpoint) if !endpoint.is_empty() && std::env::var_os("IDENTITY_HEADER").is_some() => {
                        ManagedEndpoint::Identity { endpoint }
                    }
                    _ => ManagedEndpoint::Imds,
                };
                Ok(Self {
                    token_endpoint: String::new(),
                    client_id: client_id.clone(),
                    scope: scope.clone(),
                    secret: EntraSecret::Managed(managed),
                })
            }
            _ => Err(TokenSetupError::WrongPlatform { id: id.to_owned(), kind: "Entra ID" }),
        }
    }

    /// The token request this source sends.
    pub(super) async fn request(
        &self,
        http: &reqwest::Client,
        store: &dyn SecretStore,
    ) -> Result<reqwest::RequestBuilder, TokenError> {
        let client_id = self.client_id.as_deref().unwrap_or_default();
        let grant = |extra: &[(&str, &str)]| {
            let mut pairs =
                vec![("grant_type", "client_credentials"), ("client_id", client_id), ("scope", self.scope.as_str())];
            pairs.extend_from_slice(extra);
            super::post_form(http, &self.token_endpoint, super::form(&pairs))
        };
        const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
        match &self.secret {
            EntraSecret::ClientSecret { secret_id } => {
                let secret = store.get(secret_id).ok_or_else(|| TokenError::SecretMissing {
                    secret_id: secret_id.clone(),
                    location: store.location(secret_id),
                })?;
                Ok(grant(&[("client_secret", secret.expose())]))
            }
            EntraSecret::Certificate { key, thumbprint } => {
                let now = epoch_seconds();
                let claims = json!({
                    "aud": self.token_endpoint,
                    "iss": client_id,
                    "sub": client_id,
                    "jti": uuid::Uuid::now_v7().to_string(),
                    "iat": now,
                    "nbf": now,
                    "exp": now + ASSERTION_LIFE_SECS,
                });
                let mut header = serde_json::Map::new();
                header.insert("x5t".to_owned(), Value::from(thumbprint.as_str()));
                let assertion = key.sign_jwt(header, &claims).map_err(|reason| TokenError::Assertion { reason })?;
                Ok(grant(&[("client_assertion_type", ASSERTION_TYPE), ("client_assertion", &assertion)]))
            }
            EntraSecret::Workload { token_file } => {
                let assertion = std::fs::read_to_string(token_file).map_err(|error| TokenError::Assertion {
                    reason: format!("cannot read the federated token file {}: {error}", token_file.display()),
                })?;
                Ok(grant(&[("client_assertion_type", ASSERTION_TYPE), ("client_assertion", assertion.trim())]))
            }
            EntraSecret::Managed(managed) => {
                let resource = self.scope.strip_suffix("/.default").unwrap_or(&self.scope);
                let (base, version) = match managed {
                    ManagedEndpoint::Identity { endpoint } => (endpoint.as_str(), IDENTITY_API_VERSION),
                    ManagedEndpoint::Imds => (IMDS_ENDPOINT, IMDS_API_VERSION),
                };
                let mut url = reqwest::Url::parse(base).map_err(|error| TokenError::Unreachable {
                    reason: format!("managed identity endpoint: {error}"),
                })?;
                url.query_pairs_mut().append_pair("api-version", version).append_pair("resource", resource);
                if let Some(client_id) = &self.client_id {
                    url.query_pairs_mut().append_pair("client_id", client_id);
                }
                let request = http.get(url);
                Ok(match managed {
                    ManagedEndpoint::Identity { .. } => {
                        let header = std::env::var("IDENTITY_HEADER").unwrap_or_default();
                        request.header("x-identity-header", header)
                    }
                    ManagedEndpoint::Imds => request.header("metadata", "true"),
                })
            }
        }
    }

    /// `text` without the secrets this source sends.
    pub(super) fn scrub(&self, text: &str, store: &dyn SecretStore) -> String {
        match &self.secret {
            EntraSecret::ClientSecret { secret_id } => match store.get(secret_id) {
                Some(secret) => super::hide(text, &[secret.expose()]),
                None => text.to_owned(),
            },
            EntraSecret::Managed(ManagedEndpoint::Identity { .. }) => {
                let header = std::env::var("IDENTITY_HEADER").unwrap_or_default();
                super::hide(text, &[&header])
            }
            _ => text.to_owned(),
        }
    }
}
