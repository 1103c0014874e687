//! `[console]`: how operators sign in to the console (`/console`): with an
//! `admin` key's token, and, when `[console.oidc]` is set, through an OpenID
//! Connect identity provider whose groups decide who is an admin.

use serde::Deserialize;

/// The path the gateway serves the identity provider's redirect back on;
/// `redirect_uri` must end with it.
pub const OIDC_CALLBACK_PATH: &str = "/console/oidc/callback";

/// `[console]`: how operators sign in to the console: an `admin` key's
/// token, single sign-on (`[console.oidc]`), or both.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSettings {
    /// Whether an `admin` key's token signs in to the console. Default true;
    /// false (only with `[console.oidc]`) leaves single sign-on the one way in,
    /// so a leaked admin key opens the API but not the console.
    #[serde(default = "key_sign_in_default")]
    pub key_sign_in: bool,
    /// `[console.oidc]`: single sign-on through an OpenID Connect provider.
    pub oidc: Option<OidcSettings>,
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        Self { key_sign_in: true, oidc: None }
    }
}

fn key_sign_in_default() -> bool {
    true
}

/// `[console.oidc]`: the authorization code flow with PKCE against one
/// provider. A signed-in identity is an admin when its ID token's
/// `groups_claim` names one of `admin_groups`.
#[derive(Debug, Clone, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OidcSettings {
    /// The provider's issuer URL, exactly as its discovery document's `issuer`
    /// says (e.g. `https://keycloak.example/realms/ops`,
    /// `https://accounts.google.com`). `https://`, or `http://` to a loopback
    /// address only.
    pub issuer: String,
    /// The client id registered with the provider for this gateway.
    pub client_id: String,
    /// The secret-store id of the client's secret (e.g. `weir-oidc-secret`,
    /// read from `WEIR_OIDC_SECRET`), never the secret itself.
    pub client_secret: String,
    /// The URL the provider sends the browser back to: this gateway's address
    /// as browsers reach it, ending in `/console/oidc/callback` (register the
    /// same URL with the provider).
    pub redirect_uri: String,
    /// The ID token claim that lists the identity's groups (a string array or
    /// one string). Default `groups`.
    #[serde(default = "groups_claim_default")]
    pub groups_claim: String,
    /// The groups whose members are console admins; at least one. An identity
    /// in none of them is refused.
    pub admin_groups: Vec<String>,
    /// Scopes asked for besides `openid`, `email` and `profile` (e.g. a scope
    /// the provider needs before it adds the groups claim).
    #[serde(default)]
    pub scopes: Vec<String>,
}

fn groups_claim_default() -> String {
    "groups".to_owned()
}

impl ConsoleSettings {
    /// Whether the section holds together: key sign-in off only beside
    /// single sign-on, and single sign-on's own fields well-formed.
    pub fn check(&self) -> Result<(), String> {
        if !self.key_sign_in && self.oidc.is_none() {
            return Err("`[console] key_sign_in = false` needs `[console.oidc]`: nobody could sign in".to_owned());
        }
        self.oidc.as_ref().map_or(Ok(()), OidcSettings::check)
    }
}

impl OidcSettings {
    fn check(&self) -> Result<(), String> {
        let issuer =
            url::Url::parse(&self.issuer).map_err(|error| format!("`[console.oidc] issuer` is not a URL ({error})"))?;
        if !secure_or_loopback(&issuer) {
            return Err("`[console.oidc] issuer` must be `https://` (or `http://` to a loopback address)".to_owned());
        }
        let redirect = url::Url::parse(&self.redirect_uri)
            .map_err(|error| format!("`[console.oidc] redirect_uri` is not a URL ({error})"))?;
        if !matches!(redirect.scheme(), "https" | "http") || !redirect.path().ends_with(OIDC_CALLBACK_PATH) {
            return Err(format!(
                "`[console.oidc] redirect_uri` must be an http(s) URL ending in `{OIDC_CALLBACK_PATH}`, where the \
                 gateway receives the provider's answer"
            ));
        }
        for (field, value) in [("client_id", &self.client_id), ("client_secret", &self.client_secret)] {
            if value.trim().is_empty() {
                return Err(format!("`[console.oidc] {field}` is empty"));
            }
        }
        if self.groups_claim.trim().is_empty() {
            return Err("`[console.oidc] groups_claim` is empty".to_owned());
        }
        if self.admin_groups.iter().all(|group| group.trim().is_empty()) {
            return Err("`[console.oidc] admin_groups` names no group: nobody could sign in".to_owned());
        }
        Ok(())
    }
}

/// `https://`, or `http://` to `localhost` or a loopback address (a provider
/// on the same machine, as in tests).
fn secure_or_loopback(url: &url::Url) -> bool {
    match (url.scheme(), url.host()) {
        ("https", Some(_)) => true,
        ("http", Some(url::Host::Domain(name))) => name == "localhost",
        ("http", Some(url::Host::Ipv4(address))) => address.is_loopback(),
        ("http", Some(url::Host::Ipv6(address))) => address.is_loopback(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn oidc() -> OidcSettings {
        OidcSettings {
            issuer: "https://idp.example/realms/ops".to_owned(),
            client_id: "weir".to_owned(),
            client_secret: "weir-oidc-secret".to_owned(),
            redirect_uri: "https://weir.example/console/oidc/callback".to_owned(),
            groups_claim: "groups".to_owned(),
            admin_groups: vec!["weir-admins".to_owned()],
            scopes: Vec::new(),
        }
    }

    fn refused(settings: ConsoleSettings) -> String {
        settings.check().unwrap_err()
    }

    #[test]
    fn a_whole_section_passes_and_key_sign_in_may_be_off_beside_it() {
        ConsoleSettings::default().check().unwrap();
        ConsoleSettings { key_sign_in: false, oidc: Some(oidc()) }.check().unwrap();
        let local = OidcSettings { issuer: "http://127.0.0.1:9000".to_owned(), ..oidc() };
        ConsoleSettings { key_sign_in: true, oidc: Some(local) }.check().unwrap();
    }

    #[test]
    fn each_unusable_field_is_named() {
        let with = |oidc: OidcSettings| ConsoleSettings { key_sign_in: true, oidc: Some(oidc) };
        assert!(refused(ConsoleSettings { key_sign_in: false, oidc: None }).contains("key_sign_in"));
        assert!(refused(with(OidcSettings { issuer: "idp".to_owned(), ..oidc() })).contains("issuer"));
        let plain = OidcSettings { issuer: "http://idp.example".to_owned(), ..oidc() };
        assert!(refused(with(plain)).contains("https"));
        let elsewhere = OidcSettings { redirect_uri: "https://weir.example/callback".to_owned(), ..oidc() };
        assert!(refused(with(elsewhere)).contains(OIDC_CALLBACK_PATH));
        assert!(refused(with(OidcSettings { client_secret: " ".to_owned(), ..oidc() })).contains("client_secret"));
        assert!(refused(with(OidcSettings { client_id: String::new(), ..oidc() })).contains("client_id"));
        assert!(refused(with(OidcSettings { groups_claim: String::new(), ..oidc() })).contains("groups_claim"));
        assert!(refused(with(OidcSettings { admin_groups: Vec::new(), ..oidc() })).contains("admin_groups"));
    }
}
