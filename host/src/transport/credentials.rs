//! Secrets: where they come from, and where the host puts them. A component only
//! declares the shape (header name and prefix, or SigV4); it never sees a value.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::aws::{AwsIdentity, SigV4};
use super::token::{TokenError, TokenSource};
use crate::types::CredentialShape;

/// A secret value. Its `Debug` never prints it. Shared, so a kept secret is
/// handed to a call without copying it.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where secrets come from. Implement it to read a vault; the default reads the
/// process environment.
pub trait SecretStore: Send + Sync + fmt::Debug {
    /// The secret under this credential id, if the store has one.
    fn get(&self, credential_id: &str) -> Option<Secret>;

    /// Where the store looks for this id, for error messages (never the value).
    fn location(&self, credential_id: &str) -> String;

    /// A two-part record under this id (a user and its secret, e.g. an AWS access
    /// key id and its secret access key): both halves or no record. The
    /// environment store has none: AWS's own variables are the default chain's.
    fn get_pair(&self, _credential_id: &str) -> Option<(String, Secret)> {
        None
    }
}

/// Reads credential `openai-api-key` from the environment variable `OPENAI_API_KEY`:
/// the id upper-cased, every character that is not a letter or digit made `_`.
#[derive(Debug, Default, Clone, Copy)]
pub struct EnvSecretStore;

impl EnvSecretStore {
    pub fn variable(credential_id: &str) -> String {
        credential_id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
    }
}

impl SecretStore for EnvSecretStore {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        std::env::var(Self::variable(credential_id)).ok().filter(|value| !value.is_empty()).map(Secret::new)
    }

    fn location(&self, credential_id: &str) -> String {
        format!("environment variable {}", Self::variable(credential_id))
    }
}

/// Why a call has no usable credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    #[error("credential `{credential}` for provider `{provider}` is not set ({location})")]
    Missing { provider: String, credential: String, location: String },
    #[error(
        "provider `{provider}` signs with AWS SigV4 and no region is chosen (secret store: {location}; then AWS's \
         default chain: AWS_REGION, a profile, instance metadata); none is ever assumed"
    )]
    NoRegion { provider: String, location: String },
    #[error(
        "provider `{provider}` found no AWS credentials (secret store record `{credential}`, then the default chain): {reason}"
    )]
    Aws { provider: String, credential: String, reason: String },
    /// The provider sends a credential and no id was chosen for it (the entry
    /// names none and the component's default is not trusted).
    #[error("provider `{provider}` sends a credential, and no credential id is named for it")]
    NotNamed { provider: String },
    /// The credential is minted (`[credentials.ID]`) and no token could be had.
    #[error("credential `{credential}` for provider `{provider}`: no {kind} token: {source}")]
    Token { provider: String, credential: String, kind: &'static str, source: Box<TokenError> },
    /// A minted credential is named for a provider that signs with SigV4.
    #[error(
        "credential `{credential}` is a minted {kind} token, and provider `{provider}` signs with AWS SigV4; name an \
         AWS credential id"
    )]
    TokenOnSigned { provider: String, credential: String, kind: &'static str },
}

impl CredentialShape {
    /// The credential id a provider uses when a catalog entry names none.
    pub fn default_credential_id(&self) -> Option<&str> {
        match self {
            Self::None => None,
            Self::Header(header) => Some(&header.default_credential_id),
            Self::AwsSigv4(sigv4) => Some(&sigv4.default_credential_id),
        }
    }
}

/// The headers a SigV4 signature writes (and the payload hash it may use).
const SIGV4_HEADERS: [&str; 4] = ["authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"];

/// The header a minted token travels in (as `Bearer <token>`).
const TOKEN_HEADER: &str = "authorization";

/// What replaces a sent credential's value in upstream text before it is logged.
pub const CREDENTIAL_MARKER: &str = "<credential>";

/// What the host attaches to one request.
#[derive(Debug, Clone)]
pub enum Credential {
    None,
    Header {
        name: String,
        /// The header's whole value: the shape's prefix and the secret.
        value: Secret,
        /// The secret alone, as the store gave it: what [`Credential::scrub`]
        /// also looks for (an upstream may echo it without the prefix).
        secret: Secret,
    },
    /// The request is signed as it leaves (see [`SigV4::sign`]).
    Sigv4(SigV4),
}

impl Credential {
    /// Resolves the credential a provider's shape asks for, under `credential_id`:
    /// the id the call's destination chose (the entry's `credential`, or a
    /// trusted component's default; see [`crate::reach::destination`]). The
    /// shape's own default id is never used here.
    ///
    /// `minted` is the id's token source when the entry named a
    /// `[credentials.ID]` (never a component's default: see
    /// [`crate::reach::Destination::minted`]). The token is then sent as
    /// `authorization: Bearer <token>` whatever header the shape names, since
    /// that is how Google and Entra ID tokens are carried.
    pub async fn resolve(
        provider: &str,
        shape: &CredentialShape,
        credential_id: Option<&str>,
        store: &dyn SecretStore,
        aws: &AwsIdentity,
        minted: Option<&TokenSource>,
    ) -> Result<Self, CredentialError> {
        let named = || credential_id.ok_or_else(|| CredentialError::NotNamed { provider: provider.to_owned() });
        match shape {
            CredentialShape::None => Ok(Self::None),
            CredentialShape::Header(header) => {
                let id = named()?;
                if let Some(source) = minted {
                    let minted = source.bearer(store).await.map_err(|source_error| CredentialError::Token {
                        provider: provider.to_owned(),
                        credential: id.to_owned(),
                        kind: source.kind().as_str(),
                        source: Box::new(source_error),
                    })?;
                    return Ok(Self::Header {
                        name: TOKEN_HEADER.to_owned(),
                        value: minted.bearer,
                        secret: minted.token,
                    });
                }
                match store.get(id) {
                    Some(secret) => Ok(Self::Header {
                        name: header.header_name.to_ascii_lowercase(),
                        value: Secret::new(format!("{}{}", header.prefix, secret.expose())),
                        secret,
                    }),
                    None if header.required => Err(CredentialError::Missing {
                        provider: provider.to_owned(),
                        credential: id.to_owned(),
                        location: store.location(id),
                    }),
                    None => Ok(Self::None),
                }
            }
            CredentialShape::AwsSigv4(sigv4) => {
                let id = named()?;
                if let Some(source) = minted {
                    return Err(CredentialError::TokenOnSigned {
                        provider: provider.to_owned(),
                        credential: id.to_owned(),
                        kind: source.kind().as_str(),
                    });
                }
                SigV4::resolve(aws, store, provider, &sigv4.service, id).await.map(Self::Sigv4)
            }
        }
    }

    /// `text` (an upstream's error detail, a message derived from its answer)
    /// with every secret value this credential sent replaced by
    /// [`CREDENTIAL_MARKER`], for the log: an upstream that echoes the key it
    /// was given ("Incorrect API key provided: sk-…") must not put it there.
    /// The values: a header credential's whole value and its bare secret; a
    /// signed call's secret access key and session token (the signature is
    /// derived, and the access key id is not secret).
    pub fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut scrubbed = Cow::Borrowed(text);
        let mut hide = |value: &str| {
            if !value.is_empty() && scrubbed.contains(value) {
                scrubbed = Cow::Owned(scrubbed.replace(value, CREDENTIAL_MARKER));
            }
        };
        match self {
            Self::None => {}
            Self::Header { value, secret, .. } => {
                // The longer first: the prefixed value holds the bare secret.
                hide(value.expose());
                hide(secret.expose());
            }
            Self::Sigv4(signer) => {
                hide(signer.credentials.secret_access_key());
                if let Some(token) = signer.credentials.session_token() {
                    hide(token);
                }
            }
        }
        scrubbed
    }

    /// Whether this credential owns header `name` (lowercase), so a component may
    /// not set it: the secret's header, or the headers a signature consists of.
    pub fn owns_header(&self, name: &str) -> bool {
        match self {
            Self::None => false,
            Self::Header { name: owned, .. } => owned == name,
            Self::Sigv4(_) => SIGV4_HEADERS.contains(&name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::HeaderCredential;

    #[derive(Debug)]
    struct OneSecret;
    impl SecretStore for OneSecret {
        fn get(&self, id: &str) -> Option<Secret> {
            (id == "known").then(|| Secret::new("s3cret"))
        }
        fn location(&self, id: &str) -> String {
            format!("test store `{id}`")
        }
    }

    fn header_shape(required: bool) -> CredentialShape {
        CredentialShape::Header(HeaderCredential {
            default_credential_id: "known".into(),
            header_name: "Authorization".into(),
            prefix: "Bearer ".into(),
            required,
        })
    }

    #[test]
    fn env_variable_names() {
        assert_eq!(EnvSecretStore::variable("openai-api-key"), "OPENAI_API_KEY");
        assert_eq!(EnvSecretStore::variable("team.a/key"), "TEAM_A_KEY");
    }

    #[tokio::test]
    async fn header_credential_is_prefixed_and_lowercased() {
        let credential =
            Credential::resolve("p", &header_shape(true), Some("known"), &OneSecret, &AwsIdentity::default(), None)
                .await
                .unwrap();
        let Credential::Header { name, value, .. } = credential else { panic!("expected a header") };
        assert_eq!(name, "authorization");
        assert_eq!(value.expose(), "Bearer s3cret");
        assert_eq!(format!("{value:?}"), "Secret(<redacted>)");
    }

    #[tokio::test]
    async fn missing_required_secret_names_the_id_never_a_value() {
        let error =
            Credential::resolve("p", &header_shape(true), Some("other"), &OneSecret, &AwsIdentity::default(), None)
                .await
                .unwrap_err();
        assert_eq!(error.to_string(), "credential `other` for provider `p` is not set (test store `other`)");
    }

    #[tokio::test]
    async fn a_credential_shape_with_no_chosen_id_is_refused_not_defaulted() {
        let error = Credential::resolve("p", &header_shape(true), None, &OneSecret, &AwsIdentity::default(), None)
            .await
            .unwrap_err();
        assert_eq!(error, CredentialError::NotNamed { provider: "p".into() });
    }

    #[tokio::test]
    async fn missing_optional_secret_sends_nothing() {
        let credential =
            Credential::resolve("p", &header_shape(false), Some("other"), &OneSecret, &AwsIdentity::default(), None)
                .await
                .unwrap();
        assert!(matches!(credential, Credential::None));
    }

    #[tokio::test]
    async fn a_header_credential_is_scrubbed_with_and_without_its_prefix() {
        let credential =
            Credential::resolve("p", &header_shape(true), Some("known"), &OneSecret, &AwsIdentity::default(), None)
                .await
                .unwrap();
        let echoed = r#"{"error": "Incorrect API key: Bearer s3cret (key s3cret)"}"#;
        assert_eq!(credential.scrub(echoed), r#"{"error": "Incorrect API key: <credential> (key <credential>)"}"#);
        assert!(matches!(credential.scrub("nothing sent here"), Cow::Borrowed("nothing sent here")));
        assert_eq!(Credential::None.scrub("s3cret"), "s3cret");
    }

    #[test]
    fn a_signed_calls_secret_key_and_session_token_are_scrubbed() {
        let credentials = aws_credential_types::Credentials::new(
            "AKIDEXAMPLE",
            "wJalrSECRET",
            Some("FwoGSESSION".into()),
            None,
            "test",
        );
        let signer = SigV4 {
            credentials,
            region: "eu-west-1".into(),
            service: "bedrock".into(),
            source: super::super::IdentitySource::SecretStore,
        };
        let echoed = "key AKIDEXAMPLE secret wJalrSECRET token FwoGSESSION";
        assert_eq!(Credential::Sigv4(signer).scrub(echoed), "key AKIDEXAMPLE secret <credential> token <credential>");
    }

    /// A minted token replaces whatever header the shape names (`api-key`, as
    /// Azure's component declares): it goes as `authorization: Bearer`, which the
    /// credential then owns, and it is scrubbed from upstream text.
    #[tokio::test]
    async fn a_minted_token_goes_as_a_bearer_authorization_whatever_the_shape_names() {
        use weir_tests::token_endpoints::{EntraExpect, FakeTokenEndpoint, TestKey};
        let expect = EntraExpect {
            tenant: "t".into(),
            client_id: "c".into(),
            client_secret: "s3cret".into(),
            ..EntraExpect::default()
        };
        let entra = FakeTokenEndpoint::entra(&TestKey::generate(), expect).await;
        let tables = format!(
            "[credentials.azure]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"known\"\n\
             authority_host = \"{}\"\n",
            entra.base_url
        );
        let config = crate::config::Config::from_toml(&tables, "t.toml").unwrap();
        let tokens = super::super::TokenCredentials::from_config(&config).unwrap();
        let shape = CredentialShape::Header(HeaderCredential {
            default_credential_id: "azure-openai-key".into(),
            header_name: "api-key".into(),
            prefix: String::new(),
            required: true,
        });
        let credential =
            Credential::resolve("p", &shape, Some("azure"), &OneSecret, &AwsIdentity::default(), tokens.get("azure"))
                .await
                .unwrap();
        let Credential::Header { name, value, .. } = &credential else { panic!("expected a header") };
        assert_eq!((name.as_str(), value.expose()), ("authorization", "Bearer entra-test-1"));
        assert!(credential.owns_header("authorization") && !credential.owns_header("api-key"));
        assert_eq!(credential.scrub("echo entra-test-1"), "echo <credential>");
        assert_eq!(entra.rejections(), Vec::<String>::new());
    }
}
