//! `[credentials.ID]`: a credential id whose value the host mints (an OAuth
//! access token) instead of reading it from the secret store. The table says
//! which kind (`google`, `entra`) and which source of that kind; an entry's
//! `credential = "ID"` then sends the minted token as `authorization: Bearer`.
//!
//! Strict like the rest of the file: an unknown field is a parse error naming
//! its line; a field another kind or source reads, two sources at once, or no
//! source is an error naming the table's line (see [`check`]). The files named
//! here are read when the gateway is built (`transport::TokenCredentials`), so
//! a file that does not parse stops the start with a typed error.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Google's scope for every Vertex AI call: the default of a `google` table.
pub const GOOGLE_CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Azure OpenAI's (Cognitive Services') scope: the default of an `entra` table.
pub const COGNITIVE_SERVICES_SCOPE: &str = "https://cognitiveservices.azure.com/.default";

/// Which identity platform mints a credential's tokens: `reach`'s, where the
/// rule of where each may go lives.
pub use crate::reach::TokenKind;

/// One `[credentials.ID]` table as written. Fields are explicit: each source
/// has its own field, and [`check`] accepts exactly one.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCredentialEntry {
    /// Which identity platform mints the tokens: `google` or `entra`.
    pub kind: TokenKind,
    /// google: a service-account key file (JSON, `"type": "service_account"`).
    pub service_account_file: Option<PathBuf>,
    /// google: an authorized-user file (`gcloud auth application-default
    /// login`'s, `"type": "authorized_user"`).
    pub authorized_user_file: Option<PathBuf>,
    /// google: the instance's metadata server (opt-in; a network call to
    /// `169.254.169.254`, or `GCE_METADATA_HOST`).
    #[serde(default)]
    pub metadata_server: bool,
    /// entra: the directory (tenant) id.
    pub tenant_id: Option<String>,
    /// entra: the application (client) id; with `managed_identity`, a
    /// user-assigned identity's client id (absent: the system-assigned one).
    pub client_id: Option<String>,
    /// entra: the secret-store id of the client secret (never the value).
    pub client_secret: Option<String>,
    /// entra: a PEM file with the client certificate and its private key.
    pub certificate_file: Option<PathBuf>,
    /// entra: workload identity: the federated token file is the assertion.
    #[serde(default)]
    pub workload_identity: bool,
    /// entra, with `workload_identity`: the token file (absent:
    /// `AZURE_FEDERATED_TOKEN_FILE`).
    pub federated_token_file: Option<PathBuf>,
    /// entra: the managed identity endpoint (`IDENTITY_ENDPOINT`, else IMDS).
    #[serde(default)]
    pub managed_identity: bool,
    /// entra: the authority (absent: `AZURE_AUTHORITY_HOST`, else
    /// `https://login.microsoftonline.com`).
    pub authority_host: Option<String>,
    /// The scope asked for (absent: [`GOOGLE_CLOUD_PLATFORM_SCOPE`] or
    /// [`COGNITIVE_SERVICES_SCOPE`]).
    pub scope: Option<String>,
}

/// A checked table: the one source it names, with what that source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSourceSpec {
    GoogleServiceAccount {
        file: PathBuf,
        scope: String,
    },
    GoogleAuthorizedUser {
        file: PathBuf,
        scope: Option<String>,
    },
    GoogleMetadata {
        scope: String,
    },
    EntraSecret {
        tenant_id: String,
        client_id: String,
        secret_id: String,
        authority: Option<String>,
        scope: String,
    },
    EntraCertificate {
        tenant_id: String,
        client_id: String,
        file: PathBuf,
        authority: Option<String>,
        scope: String,
    },
    EntraWorkload {
        tenant_id: String,
        client_id: String,
        token_file: Option<PathBuf>,
        authority: Option<String>,
        scope: String,
    },
    EntraManaged {
        client_id: Option<String>,
        scope: String,
    },
}

impl TokenSourceSpec {
    pub fn kind(&self) -> TokenKind {
        match self {
            Self::GoogleServiceAccount { .. } | Self::GoogleAuthorizedUser { .. } | Self::GoogleMetadata { .. } => {
                TokenKind::Google
            }
            Self::EntraSecret { .. }
            | Self::EntraCertificate { .. }
            | Self::EntraWorkload { .. }
            | Self::EntraManaged { .. } => TokenKind::Entra,
        }
    }

    /// The secret-store id this source reads, if any (the client secret).
    pub fn secret_id(&self) -> Option<&str> {
        match self {
            Self::EntraSecret { secret_id, .. } => Some(secret_id),
            _ => None,
        }
    }
}

impl TokenCredentialEntry {
    /// The fields this table sets, by name (for the conflict messages).
    fn set_fields(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        let mut mark = |name, is_set: bool| {
            if is_set {
                set.push(name);
            }
        };
        mark("service_account_file", self.service_account_file.is_some());
        mark("authorized_user_file", self.authorized_user_file.is_some());
        mark("metadata_server", self.metadata_server);
        mark("tenant_id", self.tenant_id.is_some());
        mark("client_id", self.client_id.is_some());
        mark("client_secret", self.client_secret.is_some());
        mark("certificate_file", self.certificate_file.is_some());
        mark("workload_identity", self.workload_identity);
        mark("federated_token_file", self.federated_token_file.is_some());
        mark("managed_identity", self.managed_identity);
        mark("authority_host", self.authority_host.is_some());
        mark("scope", self.scope.is_some());
        set
    }

    /// The one source this table names, or why it names none or several, or
    /// sets a field its source does not read. Paths stay as written (the
    /// builder makes them relative to the config file).
    pub fn check(&self) -> Result<TokenSourceSpec, String> {
        let set = self.set_fields();
        let (sources, source) = match self.kind {
            TokenKind::Google => {
                (["service_account_file", "authorized_user_file", "metadata_server"].as_slice(), self.google_source())
            }
            TokenKind::Entra => (
                ["client_secret", "certificate_file", "workload_identity", "managed_identity"].as_slice(),
                self.entra_source(),
            ),
        };
        let named: Vec<&str> = set.iter().copied().filter(|field| sources.contains(field)).collect();
        match named.as_slice() {
            [] => return Err(format!("kind `{}` needs one source: {}", self.kind.as_str(), listed(sources))),
            [_] => {}
            several => return Err(format!("sets {}: set exactly one source", listed(several))),
        }
        let reads = source.reads();
        if let Some(stray) = set.iter().find(|field| !reads.contains(field)) {
            return Err(format!("`{stray}` is not read with `{}` (it reads {})", named[0], listed(reads)));
        }
        if self.scope.as_deref().is_some_and(|scope| scope.trim().is_empty()) {
            return Err("`scope` is empty".to_owned());
        }
        if self.client_secret.as_deref().is_some_and(str::is_empty) {
            return Err("`client_secret` names a secret-store id, and it is empty".to_owned());
        }
        source.spec(self)
    }

    fn google_source(&self) -> Source {
        match (&self.service_account_file, &self.authorized_user_file) {
            (Some(_), _) => Source::GoogleServiceAccount,
            (None, Some(_)) => Source::GoogleAuthorizedUser,
            (None, None) => Source::GoogleMetadata,
        }
    }

    fn entra_source(&self) -> Source {
        if self.client_secret.is_some() {
            Source::EntraSecret
        } else if self.certificate_file.is_some() {
            Source::EntraCertificate
        } else if self.workload_identity {
            Source::EntraWorkload
        } else {
            Source::EntraManaged
        }
    }
}

/// The sources, each with the fields it reads.
#[derive(Debug, Clone, Copy)]
enum Source {
    GoogleServiceAccount,
    GoogleAuthorizedUser,
    GoogleMetadata,
    EntraSecret,
    EntraCertificate,
    EntraWorkload,
    EntraManaged,
}

impl Source {
    fn reads(self) -> &'static [&'static str] {
        match self {
            Self::GoogleServiceAccount => &["service_account_file", "scope"],
            Self::GoogleAuthorizedUser => &["authorized_user_file", "scope"],
            Self::GoogleMetadata => &["metadata_server", "scope"],
            Self::EntraSecret => &["tenant_id", "client_id", "client_secret", "authority_host", "scope"],
            Self::EntraCertificate => &["tenant_id", "client_id", "certificate_file", "authority_host", "scope"],
            Self::EntraWorkload => {
                &["tenant_id", "client_id", "workload_identity", "federated_token_file", "authority_host", "scope"]
            }
            Self::EntraManaged => &["managed_identity", "client_id", "scope"],
        }
    }

    fn spec(self, entry: &TokenCredentialEntry) -> Result<TokenSourceSpec, String> {
        let google_scope = || entry.scope.clone().unwrap_or_else(|| GOOGLE_CLOUD_PLATFORM_SCOPE.to_owned());
        let entra_scope = || entry.scope.clone().unwrap_or_else(|| COGNITIVE_SERVICES_SCOPE.to_owned());
        let required = |value: &Option<String>, name: &str| {
            value.clone().filter(|value| !value.trim().is_empty()).ok_or_else(|| format!("`{name}` is required here"))
        };
        let path = |value: &Option<PathBuf>| value.clone().unwrap_or_default();
        let authority = entry.authority_host.clone();
        if let Some(host) = &authority
            && !(host.starts_with("https://") || host.starts_with("http://"))
        {
            return Err(format!("`authority_host` `{host}` is not an http(s) URL"));
        }
        Ok(match self {
            Self::GoogleServiceAccount => {
                TokenSourceSpec::GoogleServiceAccount { file: path(&entry.service_account_file), scope: google_scope() }
            }
            Self::GoogleAuthorizedUser => TokenSourceSpec::GoogleAuthorizedUser {
                file: path(&entry.authorized_user_file),
                scope: entry.scope.clone(),
            },
            Self::GoogleMetadata => TokenSourceSpec::GoogleMetadata { scope: google_scope() },
            Self::EntraSecret => TokenSourceSpec::EntraSecret {
                tenant_id: required(&entry.tenant_id, "tenant_id")?,
                client_id: required(&entry.client_id, "client_id")?,
                secret_id: required(&entry.client_secret, "client_secret")?,
                authority,
                scope: entra_scope(),
            },
            Self::EntraCertificate => TokenSourceSpec::EntraCertificate {
                tenant_id: required(&entry.tenant_id, "tenant_id")?,
                client_id: required(&entry.client_id, "client_id")?,
                file: path(&entry.certificate_file),
                authority,
                scope: entra_scope(),
            },
            Self::EntraWorkload => TokenSourceSpec::EntraWorkload {
                tenant_id: required(&entry.tenant_id, "tenant_id")?,
                client_id: required(&entry.client_id, "client_id")?,
                token_file: entry.federated_token_file.clone(),
                authority,
                scope: entra_scope(),
            },
            Self::EntraManaged => {
                TokenSourceSpec::EntraManaged { client_id: entry.client_id.clone(), scope: entra_scope() }
            }
        })
    }
}

fn listed(names: &[&str]) -> String {
    names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
}

/// Checks every `[credentials.*]` table of a file whose text is `text`: each
/// names one source; a table's id is not a secret-store id another table
/// reads. Messages name the table and its line.
pub fn check(
    text: &str,
    tables: &BTreeMap<String, toml::Spanned<TokenCredentialEntry>>,
) -> Result<BTreeMap<String, TokenSourceSpec>, String> {
    let mut specs = BTreeMap::new();
    for (id, table) in tables {
        let line = text.get(..table.span().start).map_or(0, |before| before.matches('\n').count() + 1);
        let spec = table.get_ref().check().map_err(|message| format!("[credentials.{id}] (line {line}): {message}"))?;
        if let Some(secret_id) = spec.secret_id()
            && tables.contains_key(secret_id)
        {
            return Err(format!(
                "[credentials.{id}] (line {line}): `client_secret` names `{secret_id}`, which is itself a minted \
                 credential, not a secret-store id"
            ));
        }
        specs.insert(id.clone(), spec);
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn load(tables: &str) -> Result<Config, String> {
        Config::from_toml(tables, "t.toml").map_err(|error| error.to_string())
    }

    #[test]
    fn each_source_is_read_with_its_fields() {
        let config = load(
            "[credentials.vertex]\nkind = \"google\"\nservice_account_file = \"/etc/weir/sa.json\"\n\n\
             [credentials.adc]\nkind = \"google\"\nauthorized_user_file = \"adc.json\"\nscope = \"s\"\n\n\
             [credentials.gce]\nkind = \"google\"\nmetadata_server = true\n\n\
             [credentials.azure]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"azure-secret\"\n\n\
             [credentials.cert]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\ncertificate_file = \"/c.pem\"\nauthority_host = \"https://login.example\"\n\n\
             [credentials.wi]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nworkload_identity = true\n\n\
             [credentials.mi]\nkind = \"entra\"\nmanaged_identity = true\nscope = \"https://x/.default\"\n",
        )
        .unwrap();
        let specs = &config.token_credentials;
        assert_eq!(
            specs["vertex"],
            TokenSourceSpec::GoogleServiceAccount {
                file: "/etc/weir/sa.json".into(),
                scope: GOOGLE_CLOUD_PLATFORM_SCOPE.into()
            }
        );
        assert_eq!(
            specs["adc"],
            TokenSourceSpec::GoogleAuthorizedUser { file: "adc.json".into(), scope: Some("s".into()) }
        );
        assert_eq!(specs["gce"], TokenSourceSpec::GoogleMetadata { scope: GOOGLE_CLOUD_PLATFORM_SCOPE.into() });
        assert_eq!(specs["azure"].secret_id(), Some("azure-secret"));
        assert_eq!(specs["azure"].kind(), TokenKind::Entra);
        assert!(
            matches!(&specs["cert"], TokenSourceSpec::EntraCertificate { authority: Some(a), .. } if a == "https://login.example")
        );
        assert!(matches!(&specs["wi"], TokenSourceSpec::EntraWorkload { token_file: None, .. }));
        assert_eq!(specs["mi"], TokenSourceSpec::EntraManaged { client_id: None, scope: "https://x/.default".into() });
    }

    #[test]
    fn every_mistake_names_the_table_and_its_line() {
        let cases = [
            // An unknown field: the parser's own error, at its line.
            ("[credentials.v]\nkind = \"google\"\nservice_account_file = \"a\"\ncolour = \"red\"\n", "line 4"),
            ("[credentials.v]\nkind = \"aws\"\n", "line 2"),
            ("\n[credentials.v]\nkind = \"google\"\n", "[credentials.v] (line 2): kind `google` needs one source"),
            (
                "[credentials.v]\nkind = \"google\"\nservice_account_file = \"a\"\nmetadata_server = true\n",
                "sets `service_account_file`, `metadata_server`: set exactly one source",
            ),
            (
                "[credentials.v]\nkind = \"google\"\nservice_account_file = \"a\"\ntenant_id = \"t\"\n",
                "`tenant_id` is not read with `service_account_file`",
            ),
            ("[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\n", "kind `entra` needs one source"),
            (
                "[credentials.e]\nkind = \"entra\"\nclient_id = \"c\"\nclient_secret = \"s\"\n",
                "`tenant_id` is required here",
            ),
            (
                "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_secret = \"s\"\n",
                "`client_id` is required here",
            ),
            (
                "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"s\"\nmanaged_identity = true\n",
                "set exactly one source",
            ),
            (
                "[credentials.e]\nkind = \"entra\"\nmanaged_identity = true\ntenant_id = \"t\"\n",
                "`tenant_id` is not read with `managed_identity`",
            ),
            (
                "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\ncertificate_file = \"c\"\nfederated_token_file = \"f\"\n",
                "`federated_token_file` is not read with `certificate_file`",
            ),
            ("[credentials.e]\nkind = \"entra\"\nmanaged_identity = true\nscope = \" \"\n", "`scope` is empty"),
            (
                "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"\"\n",
                "it is empty",
            ),
            (
                "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"s\"\nauthority_host = \"login.example\"\n",
                "is not an http(s) URL",
            ),
            (
                "[credentials.e]\nkind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"g\"\n\n[credentials.g]\nkind = \"google\"\nmetadata_server = true\n",
                "which is itself a minted credential",
            ),
        ];
        for (text, expected) in cases {
            let message = load(text).unwrap_err();
            assert!(message.contains(expected), "{text:?}: {message}");
            assert!(message.contains("line "), "{text:?}: {message}");
        }
    }

    /// The embedded catalog's Claude on Vertex AI block, uncommented as its
    /// header says, loads: the entries name the `vertex` token credential,
    /// share their model's identity and carry prices.
    #[test]
    fn the_embedded_vertex_block_loads_once_uncommented() {
        let catalog = crate::config::EMBEDDED_DEFAULT;
        let block = catalog.split("# Claude on Vertex AI").nth(1).expect("the block's header");
        let entries = &block[block.find("# [[model]]").expect("its entries")..];
        let uncommented: String = entries
            .lines()
            .map(|line| line.strip_prefix("# ").unwrap_or(line.trim_start_matches('#')))
            .map(|line| format!("{line}\n"))
            .collect();
        let text =
            format!("{catalog}\n{uncommented}\n[credentials.vertex]\nkind = \"google\"\nmetadata_server = true\n");
        let config = Config::from_toml(&text, "t.toml").unwrap();
        for (id, identity, input) in [
            ("claude-sonnet-4-5-vertex", "claude-sonnet-4-5", 3.0),
            ("claude-haiku-4-5-vertex", "claude-haiku-4-5", 1.0),
        ] {
            let entry = config.models.iter().find(|m| m.id == id).unwrap();
            assert_eq!(entry.identity.as_deref(), Some(identity));
            assert_eq!(entry.input_price, Some(input));
            assert_eq!(config.token_kind(entry.credential.as_deref().unwrap()), Some(TokenKind::Google));
        }
        assert!(
            config
                .models
                .iter()
                .any(|m| m.identity.as_deref() == Some("claude-sonnet-4-5") && m.provider == "anthropic")
        );
    }
}
