//! Where a secret may go (design invariant 11). A component is untrusted input:
//! the operator decides where a request goes and which secret it carries, and a
//! component contributes path, headers and body only. A component's own
//! defaults (`default-endpoint`, `default-credential-id`) are honoured only when
//! the operator vouched for the component: it is embedded in the binary, or its
//! digest is in `allowed_digests`.
//!
//! The rules, each checked before anything is sent:
//!
//! 1. An untrusted component's defaults are never used: its entry names
//!    `endpoint` and (when the component asks for a credential) `credential`.
//! 2. A non-loopback endpoint is `https`, unless its entry says `allow_http`;
//!    it has no fragment (`#…`, never sent). Its query is kept (see
//!    `transport::client`), and shown in messages without its values.
//! 3. SigV4 signs only for the Bedrock signing name ([`SIGNING_SERVICES`]), and
//!    only to a host under `amazonaws.com` / `api.aws` or an endpoint the entry
//!    names itself.
//! 4. A minted token (a `[credentials.ID]` the entry names; never a
//!    component's choice) goes only to its platform's hosts or an endpoint the
//!    entry names itself: a Google token to `*.googleapis.com`
//!    ([`GOOGLE_DOMAINS`]), an Entra ID token to Azure OpenAI / AI Services
//!    hosts ([`ENTRA_DOMAINS`]).
//!
//! [`destination`] applies rules 1–4 to an entry and its provider (at catalog
//! load and again per call, since a component can be swapped in at run time);
//! [`check_final`] applies 2 to 4 to the URL a call really uses, after the
//! AWS region has been filled in.

use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use crate::memo::Memo;
use crate::redact::redacted_endpoint;
use crate::types::{CredentialShape, ProviderInfo};

/// The placeholder an endpoint may carry for the resolved AWS region, e.g.
/// `https://bedrock-runtime.{region}.amazonaws.com`.
pub const REGION_PLACEHOLDER: &str = "{region}";

/// The SigV4 signing names the host signs for. Every Bedrock surface signs as
/// `bedrock`, even on the `bedrock-runtime` and `bedrock-mantle` hosts
/// (reference `provider-wire.md` §3.1: "SigV4 signing name is `bedrock` even
/// though the host prefix is `bedrock-runtime`").
pub const SIGNING_SERVICES: [&str; 1] = ["bedrock"];

/// The DNS suffixes SigV4 may sign for when the endpoint is a component's
/// default rather than the entry's own.
pub const AWS_DOMAINS: [&str; 2] = ["amazonaws.com", "api.aws"];

/// The DNS suffixes a minted Google token may go to when the endpoint is a
/// component's default rather than the entry's own.
pub const GOOGLE_DOMAINS: [&str; 1] = ["googleapis.com"];

/// The DNS suffixes a minted Entra ID token may go to when the endpoint is a
/// component's default rather than the entry's own.
pub const ENTRA_DOMAINS: [&str; 3] = ["openai.azure.com", "cognitiveservices.azure.com", "services.ai.azure.com"];

/// Which identity platform mints a credential's tokens (a `[credentials.ID]`
/// table's `kind`): it decides which hosts a minted token may go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    Google,
    Entra,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Google => "google",
            Self::Entra => "entra",
        }
    }
}

mod trust;

pub use trust::Trust;

/// Where one model's calls go and which secret id they carry, as the operator
/// (or a trusted component) chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The base URL; may still carry [`REGION_PLACEHOLDER`].
    pub endpoint: String,
    /// Whether the entry named the endpoint itself (else: a trusted default).
    pub entry_named_endpoint: bool,
    /// The secret id, `None` when the provider sends no credential.
    pub credential_id: Option<String>,
    /// The SigV4 signing name, when the provider signs.
    pub signing_service: Option<String>,
    /// The kind of token minted for the credential, when it is minted.
    pub minted: Option<TokenKind>,
}

/// Why a model's calls may not go where they would go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReachError {
    /// An untrusted component serves the entry and the entry leaves `what`
    /// (`endpoint` or `credential`) to the component.
    #[error(
        "provider `{provider}` is served by a component file that is not trusted ({component}): its default {what} is \
         never used, so the entry must name `{what}` itself (or add the file's digest to `allowed_digests`)"
    )]
    UntrustedDefault { provider: String, component: String, what: &'static str },
    /// Neither the entry nor a trusted component names an endpoint.
    #[error("provider `{provider}` has no default endpoint; set `endpoint`")]
    NoEndpoint { provider: String },
    /// The endpoint is not a URL the host can use.
    #[error("endpoint `{endpoint}` is not a usable http(s) URL")]
    BadEndpoint { endpoint: String },
    /// The endpoint has a fragment (`#…`): a fragment is never sent, so the
    /// URL cannot mean what it says.
    #[error("endpoint `{endpoint}` has a fragment (`#…`), which is never sent; remove it")]
    Fragment { endpoint: String },
    /// A plain-`http` endpoint off loopback without `allow_http`.
    #[error(
        "endpoint `{endpoint}` is plain http to a host that is not loopback; use https, or set `allow_http = true` \
         on the entry"
    )]
    PlainHttp { endpoint: String },
    /// The component asks the host to sign for a service other than Bedrock.
    #[error("provider `{provider}` asks to sign with SigV4 for service `{service}`; the host signs only for {allowed}")]
    SigningService { provider: String, service: String, allowed: String },
    /// A trusted component's default endpoint for a signed call is not an AWS host.
    #[error(
        "provider `{provider}` would sign with SigV4 for host `{host}`, which is not under {allowed} and not named \
         by the entry"
    )]
    SigningHost { provider: String, host: String, allowed: String },
    /// A minted token would go to a component's default endpoint off its
    /// platform's hosts.
    #[error(
        "provider `{provider}` would send a minted {kind} token to host `{host}`, which is not under {allowed} and not \
         named by the entry"
    )]
    TokenHost { provider: String, kind: &'static str, host: String, allowed: String },
}

/// What an operator wrote for one catalog entry that the rules read: its own
/// endpoint and credential id, if any, and whether it allows plain `http`.
#[derive(Debug, Clone, Copy)]
pub struct EntryReach<'a> {
    pub endpoint: Option<&'a str>,
    pub credential: Option<&'a str>,
    pub allow_http: bool,
    /// The kind of token the host mints for `credential`, when it is a
    /// `[credentials.ID]` (else it is a secret-store id).
    pub minted: Option<TokenKind>,
}

/// Applies the rules to an entry served by `provider` (whose component has
/// `trust`). `source` names the component in messages.
pub fn destination(
    model: EntryReach<'_>,
    provider: &ProviderInfo,
    trust: Trust,
    source: &(impl std::fmt::Display + ?Sized),
) -> Result<Destination, ReachError> {
    let untrusted =
        |what| ReachError::UntrustedDefault { provider: provider.key.clone(), component: source.to_string(), what };
    let (endpoint, entry_named_endpoint) = match (model.endpoint, &provider.default_endpoint) {
        (Some(endpoint), _) => (endpoint.to_owned(), true),
        (None, Some(default)) if trust.honours_defaults() => (default.clone(), false),
        (None, Some(_)) => return Err(untrusted("endpoint")),
        (None, None) => return Err(ReachError::NoEndpoint { provider: provider.key.clone() }),
    };
    let credential_id = match (model.credential, provider.credential.default_credential_id()) {
        (_, None) => None,
        (Some(id), Some(_)) => Some(id.to_owned()),
        (None, Some(default)) if trust.honours_defaults() => Some(default.to_owned()),
        (None, Some(_)) => return Err(untrusted("credential")),
    };
    let signing_service = match &provider.credential {
        CredentialShape::AwsSigv4(sigv4) if SIGNING_SERVICES.contains(&sigv4.service.as_str()) => {
            Some(sigv4.service.clone())
        }
        CredentialShape::AwsSigv4(sigv4) => {
            return Err(ReachError::SigningService {
                provider: provider.key.clone(),
                service: sigv4.service.clone(),
                allowed: quoted(&SIGNING_SERVICES),
            });
        }
        CredentialShape::None | CredentialShape::Header(_) => None,
    };
    // A token is minted only for the entry's own credential id.
    let minted = model.minted.filter(|_| credential_id.is_some() && model.credential.is_some());
    let destination = Destination { endpoint, entry_named_endpoint, credential_id, signing_service, minted };
    // The template is checked with a stand-in region; the filled URL again per call.
    let sample = destination.endpoint.replace(REGION_PLACEHOLDER, "region");
    check_final(&destination, &sample, model.allow_http, &provider.key)?;
    Ok(destination)
}

/// Checks the URL a call really uses (the destination's endpoint with its
/// region filled in): rules 2 and 3.
pub fn check_final(destination: &Destination, url: &str, allow_http: bool, provider: &str) -> Result<(), ReachError> {
    // Messages show the endpoint redacted: its query may hold a key.
    let shown = || redacted_endpoint(url);
    let facts = endpoint_facts(url).ok_or_else(|| ReachError::BadEndpoint { endpoint: shown() })?;
    match (facts.scheme, facts.loopback || allow_http) {
        (Scheme::Https, _) | (Scheme::Http, true) => {}
        (Scheme::Http, false) => return Err(ReachError::PlainHttp { endpoint: shown() }),
        (Scheme::Other, _) => return Err(ReachError::BadEndpoint { endpoint: shown() }),
    }
    if destination.signing_service.is_some() && !destination.entry_named_endpoint && !facts.aws {
        return Err(ReachError::SigningHost {
            provider: provider.to_owned(),
            host: facts.host.clone(),
            allowed: quoted(&AWS_DOMAINS),
        });
    }
    if let Some(kind) = destination.minted
        && !destination.entry_named_endpoint
    {
        let allowed: &[&str] = match kind {
            TokenKind::Google => &GOOGLE_DOMAINS,
            TokenKind::Entra => &ENTRA_DOMAINS,
        };
        if !under(&facts.host, allowed) {
            return Err(ReachError::TokenHost {
                provider: provider.to_owned(),
                kind: kind.as_str(),
                host: facts.host.clone(),
                allowed: quoted(allowed),
            });
        }
    }
    if facts.fragment {
        return Err(ReachError::Fragment { endpoint: shown() });
    }
    Ok(())
}

/// What the rules read of an endpoint URL.
#[derive(Debug)]
struct EndpointFacts {
    scheme: Scheme,
    host: String,
    loopback: bool,
    aws: bool,
    /// It has a fragment (`#…`).
    fragment: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Https,
    Http,
    Other,
}

/// Endpoints already parsed, by URL. A call's endpoint is one of the few its
/// catalog names (with a region filled in), so each is parsed — IDNA host
/// mapping included, a measured per-call cost — once, not on every call. The
/// facts depend on the URL alone; the rules that read them (an entry's
/// `allow_http`, its signing) are applied on every call. Bounded: beyond
/// [`ENDPOINTS_KEPT`] distinct URLs it starts over.
static ENDPOINTS: LazyLock<Memo<Option<Arc<EndpointFacts>>>> = LazyLock::new(|| Memo::new(ENDPOINTS_KEPT));

const ENDPOINTS_KEPT: usize = 4_096;

fn endpoint_facts(url: &str) -> Option<Arc<EndpointFacts>> {
    ENDPOINTS.get_or_insert_with(url, || parse_facts(url).map(Arc::new))
}

fn parse_facts(url: &str) -> Option<EndpointFacts> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str().filter(|host| !host.is_empty())?.to_owned();
    let scheme = match parsed.scheme() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        _ => Scheme::Other,
    };
    let fragment = parsed.fragment().is_some();
    Some(EndpointFacts { scheme, loopback: is_loopback(&host), aws: is_aws_host(&host), host, fragment })
}

/// Checks an endpoint as written in a catalog entry: rule 2 (and that it is a
/// URL at all), so a config names its mistake before anything loads.
pub fn check_entry_endpoint(endpoint: &str, allow_http: bool) -> Result<(), ReachError> {
    let entry_named = Destination {
        endpoint: endpoint.to_owned(),
        entry_named_endpoint: true,
        credential_id: None,
        signing_service: None,
        minted: None,
    };
    check_final(&entry_named, &endpoint.replace(REGION_PLACEHOLDER, "region"), allow_http, "")
}

/// 127.0.0.0/8, `::1` and `localhost`: traffic that never leaves the machine.
/// `host` is a parsed URL's host (an IPv6 address in brackets).
fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

fn is_aws_host(host: &str) -> bool {
    under(host, &AWS_DOMAINS)
}

/// Whether `host` is a name under one of `domains` (a subdomain, not the
/// domain itself nor a name that merely ends with its letters).
fn under(host: &str, domains: &[&str]) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    domains.iter().any(|domain| host.ends_with(&format!(".{domain}")))
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Capabilities, HeaderCredential, Sigv4, StreamFraming};

    fn header(default_id: &str) -> CredentialShape {
        CredentialShape::Header(HeaderCredential {
            default_credential_id: default_id.into(),
            header_name: "authorization".into(),
            prefix: "Bearer ".into(),
            required: true,
        })
    }

    fn sigv4(service: &str) -> CredentialShape {
        CredentialShape::AwsSigv4(Sigv4 { service: service.into(), default_credential_id: "aws-access-key-id".into() })
    }

    fn info(endpoint: Option<&str>, credential: CredentialShape) -> ProviderInfo {
        ProviderInfo {
            key: "p".into(),
            description: String::new(),
            default_endpoint: endpoint.map(str::to_owned),
            credential,
            capabilities: Capabilities::empty(),
            stream_framing: StreamFraming::Sse,
        }
    }

    fn entry<'a>(endpoint: Option<&'a str>, credential: Option<&'a str>) -> EntryReach<'a> {
        EntryReach { endpoint, credential, allow_http: false, minted: None }
    }

    const ATTACKER: &str = "https://attacker.example/v1";

    #[test]
    fn a_trusted_component_supplies_its_defaults() {
        for trust in [Trust::Embedded, Trust::AllowListed] {
            let found =
                destination(entry(None, None), &info(Some(ATTACKER), header("openai-api-key")), trust, "x").unwrap();
            assert_eq!(found.endpoint, ATTACKER);
            assert!(!found.entry_named_endpoint);
            assert_eq!(found.credential_id.as_deref(), Some("openai-api-key"));
        }
    }

    #[test]
    fn an_untrusted_component_never_chooses_the_endpoint_or_the_secret() {
        let provider = info(Some(ATTACKER), header("database-url"));
        let error = destination(entry(None, Some("k")), &provider, Trust::Untrusted, "drop.wasm").unwrap_err();
        assert!(matches!(error, ReachError::UntrustedDefault { what: "endpoint", .. }), "{error}");
        assert!(error.to_string().contains("drop.wasm"), "{error}");
        let error = destination(entry(Some("https://ok.example"), None), &provider, Trust::Untrusted, "x").unwrap_err();
        assert!(matches!(error, ReachError::UntrustedDefault { what: "credential", .. }), "{error}");
        let named = destination(entry(Some("https://ok.example"), Some("k")), &provider, Trust::Untrusted, "x");
        assert_eq!(named.unwrap().credential_id.as_deref(), Some("k"));
    }

    #[test]
    fn a_component_without_a_credential_needs_only_an_endpoint() {
        let provider = info(None, CredentialShape::None);
        let found = destination(entry(Some("https://ok.example"), None), &provider, Trust::Untrusted, "x").unwrap();
        assert_eq!(found.credential_id, None);
        let error = destination(entry(None, None), &provider, Trust::Embedded, "x").unwrap_err();
        assert!(matches!(error, ReachError::NoEndpoint { .. }), "{error}");
    }

    #[test]
    fn plain_http_is_for_loopback_unless_allowed() {
        for loopback in ["http://127.0.0.1:9/v1", "http://127.8.9.10/", "http://[::1]:8/", "http://LocalHost:1"] {
            check_entry_endpoint(loopback, false).unwrap();
        }
        for remote in
            ["http://10.0.0.5:8000/v1", "http://vllm.internal/v1", "http://[::2]/", "http://127.0.0.1.nip.io/"]
        {
            let error = check_entry_endpoint(remote, false).unwrap_err();
            assert!(matches!(error, ReachError::PlainHttp { .. }), "{remote}: {error}");
            check_entry_endpoint(remote, true).unwrap();
        }
        check_entry_endpoint("https://bedrock-runtime.{region}.amazonaws.com", false).unwrap();
        assert!(matches!(check_entry_endpoint("ftp://x/", true), Err(ReachError::BadEndpoint { .. })));
        assert!(matches!(check_entry_endpoint("not a url", true), Err(ReachError::BadEndpoint { .. })));
    }

    #[test]
    fn a_trusted_default_endpoint_is_held_to_https_too() {
        let provider = info(Some("http://10.1.2.3/v1"), header("k"));
        let error = destination(entry(None, None), &provider, Trust::Embedded, "x").unwrap_err();
        assert!(matches!(error, ReachError::PlainHttp { .. }), "{error}");
    }

    #[test]
    fn sigv4_signs_only_for_bedrock() {
        let endpoint = Some("https://bedrock-runtime.{region}.amazonaws.com");
        let found = destination(entry(None, None), &info(endpoint, sigv4("bedrock")), Trust::Embedded, "x").unwrap();
        assert_eq!(found.signing_service.as_deref(), Some("bedrock"));
        for service in ["s3", "sts", "bedrock-runtime", "iam"] {
            let named = entry(Some("https://s3.amazonaws.com"), Some("aws-access-key-id"));
            let error = destination(named, &info(endpoint, sigv4(service)), Trust::Embedded, "x").unwrap_err();
            assert!(matches!(error, ReachError::SigningService { .. }), "{service}: {error}");
        }
    }

    #[test]
    fn sigv4_to_a_default_endpoint_only_under_aws_domains() {
        let signed = |endpoint: &str| {
            destination(entry(None, None), &info(Some(endpoint), sigv4("bedrock")), Trust::AllowListed, "x")
        };
        signed("https://bedrock-runtime.{region}.amazonaws.com").unwrap();
        signed("https://bedrock-mantle.{region}.api.aws/anthropic").unwrap();
        for foreign in
            ["https://attacker.example", "https://amazonaws.com.attacker.example", "https://evilamazonaws.com"]
        {
            let error = signed(foreign).unwrap_err();
            assert!(matches!(error, ReachError::SigningHost { .. }), "{foreign}: {error}");
        }
        // The entry's own endpoint is the operator's choice (a proxy, a fake).
        let named = entry(Some("http://127.0.0.1:9"), Some("aws-access-key-id"));
        destination(named, &info(Some("https://attacker.example"), sigv4("bedrock")), Trust::Untrusted, "x").unwrap();
    }

    #[test]
    fn the_final_url_is_checked_after_the_region_is_filled() {
        let provider = info(Some("https://bedrock-runtime.{region}.amazonaws.com"), sigv4("bedrock"));
        let found = destination(entry(None, None), &provider, Trust::Embedded, "x").unwrap();
        check_final(&found, "https://bedrock-runtime.eu-west-3.amazonaws.com", false, "p").unwrap();
        let error = check_final(&found, "https://bedrock-runtime.x.attacker.example#.amazonaws.com", false, "p");
        assert!(matches!(error, Err(ReachError::SigningHost { .. })), "{error:?}");
    }

    /// An endpoint is parsed once and kept, but only its facts are: the same
    /// URL is judged again, by each entry's own rules, on every call.
    #[test]
    fn a_kept_endpoint_is_judged_by_each_calls_rules() {
        let url = "http://gpu.internal:8000/v1";
        let found = Destination {
            endpoint: url.to_owned(),
            entry_named_endpoint: true,
            credential_id: None,
            signing_service: None,
            minted: None,
        };
        for _ in 0..2 {
            let error = check_final(&found, url, false, "p").unwrap_err();
            assert!(matches!(error, ReachError::PlainHttp { .. }), "{error}");
            check_final(&found, url, true, "p").unwrap();
        }
        for bad in ["not a url", "file:///etc/passwd", "http://"] {
            for _ in 0..2 {
                let error = check_final(&found, bad, true, "p").unwrap_err();
                assert!(matches!(error, ReachError::BadEndpoint { .. }), "{bad}: {error}");
            }
        }
    }

    fn minted<'a>(endpoint: Option<&'a str>, kind: TokenKind) -> EntryReach<'a> {
        EntryReach { endpoint, credential: Some("token-id"), allow_http: false, minted: Some(kind) }
    }

    #[test]
    fn a_google_token_goes_only_to_googleapis_or_the_entrys_own_endpoint() {
        let to = |default: &str| {
            destination(minted(None, TokenKind::Google), &info(Some(default), header("k")), Trust::Embedded, "x")
        };
        let found = to("https://us-east5-aiplatform.googleapis.com/v1").unwrap();
        assert_eq!(found.minted, Some(TokenKind::Google));
        to("https://generativelanguage.googleapis.com/v1beta").unwrap();
        for foreign in [
            "https://api.openai.com/v1",
            "https://googleapis.com.attacker.example",
            "https://evilgoogleapis.com",
            "https://googleapis.com",
            "https://x.openai.azure.com",
        ] {
            let error = to(foreign).unwrap_err();
            assert!(matches!(error, ReachError::TokenHost { kind: "google", .. }), "{foreign}: {error}");
        }
        // The entry's own endpoint is the operator's choice (a proxy, a fake).
        let named = minted(Some("http://127.0.0.1:9/v1"), TokenKind::Google);
        destination(named, &info(Some(ATTACKER), header("k")), Trust::Untrusted, "drop.wasm").unwrap();
    }

    #[test]
    fn an_entra_token_goes_only_to_azure_ai_hosts_or_the_entrys_own_endpoint() {
        let to = |default: &str| {
            destination(minted(None, TokenKind::Entra), &info(Some(default), header("k")), Trust::AllowListed, "x")
        };
        for azure in [
            "https://my.openai.azure.com/openai/v1",
            "https://my.cognitiveservices.azure.com",
            "https://my.services.ai.azure.com/models",
        ] {
            to(azure).unwrap();
        }
        for foreign in
            ["https://aiplatform.googleapis.com", "https://openai.azure.com.attacker.example", "https://azure.com"]
        {
            let error = to(foreign).unwrap_err();
            assert!(matches!(error, ReachError::TokenHost { kind: "entra", .. }), "{foreign}: {error}");
        }
    }

    #[test]
    fn an_untrusted_component_gets_a_token_only_where_the_entry_names_both() {
        let provider = info(Some("https://aiplatform.googleapis.com"), header("vertex"));
        let no_endpoint = destination(minted(None, TokenKind::Google), &provider, Trust::Untrusted, "drop.wasm");
        assert!(matches!(no_endpoint, Err(ReachError::UntrustedDefault { what: "endpoint", .. })));
        let no_credential =
            EntryReach { credential: None, ..minted(Some("https://a.googleapis.com"), TokenKind::Google) };
        let error = destination(no_credential, &provider, Trust::Untrusted, "drop.wasm").unwrap_err();
        assert!(matches!(error, ReachError::UntrustedDefault { what: "credential", .. }), "{error}");
        // A component that sends no credential gets no token whatever the entry says.
        let found = destination(
            minted(Some("https://a.example"), TokenKind::Google),
            &info(None, CredentialShape::None),
            Trust::Embedded,
            "x",
        )
        .unwrap();
        assert_eq!(found.minted, None);
    }
}
