//! Google's three sources of an access token:
//!
//! - a service-account key file: the JWT bearer grant (RFC 7523) to the
//!   file's `token_uri`, an RS256 assertion with `iss` the account's email,
//!   `scope`, `aud` the token URI, `iat` now and `exp` an hour on;
//! - an authorized-user file (`gcloud auth application-default login`): the
//!   refresh-token grant to the file's `token_uri` (default Google's);
//! - the metadata server of the instance the gateway runs on (opt-in with
//!   `metadata_server = true`): `GET /computeMetadata/v1/instance/
//!   service-accounts/default/token` with `Metadata-Flavor: Google`, at
//!   `169.254.169.254` or the host in `GCE_METADATA_HOST`, as Google's own
//!   libraries read it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::assertion::SigningKey;
use super::{TokenError, TokenSetupError, epoch_seconds, read_file};
use crate::config::TokenSourceSpec;
use crate::transport::Secret;

/// Where an authorized-user file's refresh goes when it names no `token_uri`.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The metadata server's address when `GCE_METADATA_HOST` is unset.
const METADATA_HOST: &str = "169.254.169.254";

/// The variable Google's libraries read for another metadata host.
const METADATA_HOST_VARIABLE: &str = "GCE_METADATA_HOST";

/// How long an assertion is valid (Google's limit is an hour).
const ASSERTION_LIFE_SECS: u64 = 3600;

#[derive(Debug)]
pub(super) enum GoogleFlow {
    ServiceAccount {
        email: String,
        key_id: Option<String>,
        key: SigningKey,
        token_uri: String,
        scope: String,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: Secret,
        refresh_token: Secret,
        token_uri: String,
        scope: Option<String>,
    },
    Metadata {
        url: String,
    },
}

impl GoogleFlow {
    pub(super) fn from_spec(
        id: &str,
        spec: &TokenSourceSpec,
        resolve: impl Fn(&Path) -> PathBuf,
    ) -> Result<Self, TokenSetupError> {
        match spec {
            TokenSourceSpec::GoogleServiceAccount { file, scope } => {
                let path = resolve(file);
                let file = KeyFile::read(id, &path, "service_account_file", "service_account")?;
                let pem = file.field("private_key")?;
                let key = SigningKey::from_pem(pem.as_bytes()).map_err(|source| TokenSetupError::Key {
                    id: id.to_owned(),
                    path: file.shown.clone(),
                    source,
                })?;
                Ok(Self::ServiceAccount {
                    email: file.field("client_email")?,
                    key_id: file.optional("private_key_id"),
                    key,
                    token_uri: file.field("token_uri")?,
                    scope: scope.clone(),
                })
            }
            TokenSourceSpec::GoogleAuthorizedUser { file, scope } => {
                let path = resolve(file);
                let file = KeyFile::read(id, &path, "authorized_user_file", "authorized_user")?;
                Ok(Self::AuthorizedUser {
                    client_id: file.field("client_id")?,
                    client_secret: Secret::new(file.field("client_secret")?),
                    refresh_token: Secret::new(file.field("refresh_token")?),
                    token_uri: file.optional("token_uri").unwrap_or_else(|| GOOGLE_TOKEN_URI.to_owned()),
                    scope: scope.clone(),
                })
            }
            TokenSourceSpec::GoogleMetadata { scope } => {
                let host = std::env::var(METADATA_HOST_VARIABLE)
                    .ok()
                    .filter(|host| !host.trim().is_empty())
                    .unwrap_or_else(|| METADATA_HOST.to_owned());
                let mut url = reqwest::Url::parse(&format!(
                    "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
                ))
                .map_err(|error| TokenSetupError::MetadataHost {
                    id: id.to_owned(),
                    host: host.clone(),
                    reason: error.to_string(),
                })?;
                url.query_pairs_mut().append_pair("scopes", scope);
                Ok(Self::Metadata { url: url.into() })
            }
            _ => Err(TokenSetupError::WrongPlatform { id: id.to_owned(), kind: "Google" }),
        }
    }

    /// The token request this source sends.
    pub(super) fn request(&self, http: &reqwest::Client) -> Result<reqwest::RequestBuilder, TokenError> {
        match self {
            Self::ServiceAccount { email, key_id, key, token_uri, scope } => {
                let now = epoch_seconds();
                let claims = json!({
                    "iss": email,
                    "scope": scope,
                    "aud": token_uri,
                    "iat": now,
                    "exp": now + ASSERTION_LIFE_SECS,
                });
                let mut header = serde_json::Map::new();
                if let Some(key_id) = key_id {
                    header.insert("kid".to_owned(), Value::from(key_id.as_str()));
                }
                let assertion = key.sign_jwt(header, &claims).map_err(|reason| TokenError::Assertion { reason })?;
                let form = super::form(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &assertion),
                ]);
                Ok(super::post_form(http, token_uri, form))
            }
            Self::AuthorizedUser { client_id, client_secret, refresh_token, token_uri, scope } => {
                let mut pairs = vec![
                    ("grant_type", "refresh_token"),
                    ("client_id", client_id.as_str()),
                    ("client_secret", client_secret.expose()),
                    ("refresh_token", refresh_token.expose()),
                ];
                if let Some(scope) = scope {
                    pairs.push(("scope", scope));
                }
                Ok(super::post_form(http, token_uri, super::form(&pairs)))
            }
            Self::Metadata { url } => Ok(http.get(url).header("metadata-flavor", "Google")),
        }
    }

    /// `text` without the secrets this source sends.
    pub(super) fn scrub(&self, text: &str) -> String {
        match self {
            Self::AuthorizedUser { client_secret, refresh_token, .. } => {
                super::hide(text, &[client_secret.expose(), refresh_token.expose()])
            }
            Self::ServiceAccount { .. } | Self::Metadata { .. } => text.to_owned(),
        }
    }
}

/// A Google credentials file: a JSON object with a `type`.
struct KeyFile {
    id: String,
    shown: String,
    object: serde_json::Map<String, Value>,
}

impl KeyFile {
    fn read(id: &str, path: &Path, field: &'static str, expected: &'static str) -> Result<Self, TokenSetupError> {
        let bytes = read_file(id, path)?;
        let shown = path.display().to_string();
        // Only where it failed: serde_json's message may quote a value.
        let object = match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(object)) => object,
            Ok(_) => {
                return Err(TokenSetupError::NotJson {
                    id: id.to_owned(),
                    path: shown,
                    reason: "not an object".into(),
                });
            }
            Err(error) => {
                let reason = format!("line {}, column {}", error.line(), error.column());
                return Err(TokenSetupError::NotJson { id: id.to_owned(), path: shown, reason });
            }
        };
        let found = object.get("type").and_then(Value::as_str).unwrap_or("(no type)");
        if found != expected {
            return Err(TokenSetupError::WrongType {
                id: id.to_owned(),
                path: shown,
                field,
                expected,
                found: found.to_owned(),
            });
        }
        Ok(Self { id: id.to_owned(), shown, object })
    }

    fn field(&self, field: &'static str) -> Result<String, TokenSetupError> {
        self.optional(field).ok_or_else(|| TokenSetupError::MissingField {
            id: self.id.clone(),
            path: self.shown.clone(),
            field,
        })
    }

    fn optional(&self, field: &str) -> Option<String> {
        self.object.get(field).and_then(Value::as_str).filter(|value| !value.is_empty()).map(str::to_owned)
    }
}
