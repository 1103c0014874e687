//! The console's single sign-on: OpenID Connect's authorization code flow
//! with PKCE, through `openidconnect`, against the provider `[console.oidc]`
//! names.
//!
//! - `GET /console/oidc/login` reads the provider's discovery document, keeps
//!   a fresh PKCE verifier and nonce under a fresh `state` (in this gateway's
//!   memory, and the `state` in a short-lived cookie bound to this browser),
//!   and sends the browser to the provider's authorization endpoint.
//! - `GET /console/oidc/callback` takes that `state` back once (it must be the
//!   cookie's too), redeems the code at the token endpoint with the verifier
//!   and the client secret, and checks the ID token: its signature against
//!   the provider's published keys (JWKS), its issuer, that its audience is
//!   this client, that it has not expired, and its nonce. The identity is an
//!   admin when the token's groups claim names one of `admin_groups`; then it
//!   gets the same session cookie a key's sign-in gets.
//!
//! Every failure answers a page in the gateway's own words ([`SignOnFailure`]);
//! what the provider said (its error codes and descriptions, a transport
//! error) goes to the log only.

use std::time::{Duration, SystemTime};

use axum::extract::{RawQuery, State};
use axum::http::header::{CONTENT_TYPE, LOCATION, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreErrorResponseType, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    RequestTokenError, Scope, StandardErrorResponse, TokenResponse,
};
use serde_json::Value;
use subtle::ConstantTimeEq;

use super::{PREFIX, cookie_named, open_session, session_cookie};
use crate::Weir;
use crate::config::OidcSettings;
use crate::identity::console_sessions::{Principal, SignedOn};
use crate::identity::sign_ons::SIGN_ON_LIFETIME;
use crate::transport::{SecretStore, error_chain};

/// The cookie that binds a sign-on's `state` to the browser that started it.
/// `SameSite=Lax`: the provider's redirect back is a cross-site navigation,
/// on which a `Strict` cookie would not be sent.
const STATE_COOKIE: &str = "weir_sign_on";
/// Where the state cookie is sent: the callback alone.
const STATE_COOKIE_PATH: &str = "/console/oidc";
/// The longest a request to the provider may take, and its connection.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
const PROVIDER_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from the provider (discovery, keys, tokens).
const MAX_PROVIDER_BYTES: usize = 512 << 10;

/// Why a sign-on did not sign anyone in, in the words the page shows (the
/// provider's own text is logged, never shown).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SignOnFailure {
    #[error("single sign-on is not configured on this gateway")]
    NotConfigured,
    #[error("the identity provider could not be reached, or its answer could not be used: try again shortly")]
    ProviderUnreachable,
    #[error("this gateway's single sign-on client secret is not set: tell its operator")]
    SecretMissing,
    #[error("this sign-in is unknown, expired or already used, or was started in another browser: sign in again")]
    UnknownState,
    #[error("the identity provider did not sign you in")]
    Denied,
    #[error("the identity provider refused to finish the sign-in: sign in again")]
    TokenRefused,
    #[error("the identity provider's ID token was refused: {0}")]
    InvalidToken(TokenCheck),
    #[error("{who} is not in a group allowed to use this console")]
    NotAdmin { who: String },
    #[error("too many sign-ins are in flight: try again shortly")]
    Busy,
}

/// Which of the ID token's checks failed.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub(crate) enum TokenCheck {
    #[error("the provider sent none")]
    Missing,
    #[error("its signature does not verify against the provider's published keys")]
    Signature,
    #[error("it was issued for another client")]
    Audience,
    #[error("it has expired")]
    Expired,
    #[error("it names another issuer")]
    Issuer,
    #[error("it does not belong to this sign-in (its nonce differs)")]
    Nonce,
    #[error("it could not be read")]
    Malformed,
}

impl TokenCheck {
    fn of(error: &ClaimsVerificationError) -> Self {
        match error {
            ClaimsVerificationError::SignatureVerification(_) => Self::Signature,
            ClaimsVerificationError::InvalidAudience(_) => Self::Audience,
            ClaimsVerificationError::Expired(_) => Self::Expired,
            ClaimsVerificationError::InvalidIssuer(_) => Self::Issuer,
            ClaimsVerificationError::InvalidNonce(_) => Self::Nonce,
            _ => Self::Malformed,
        }
    }
}

impl SignOnFailure {
    fn status(&self) -> StatusCode {
        match self {
            Self::NotConfigured => StatusCode::NOT_FOUND,
            Self::ProviderUnreachable | Self::TokenRefused => StatusCode::BAD_GATEWAY,
            Self::SecretMissing => StatusCode::INTERNAL_SERVER_ERROR,
            Self::UnknownState => StatusCode::BAD_REQUEST,
            Self::Denied | Self::InvalidToken(_) => StatusCode::UNAUTHORIZED,
            Self::NotAdmin { .. } => StatusCode::FORBIDDEN,
            Self::Busy => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A stable word for the page's `data-code` (tests and scripts read it).
    fn code(&self) -> &'static str {
        match self {
            Self::NotConfigured => "not_configured",
            Self::ProviderUnreachable => "provider_unreachable",
            Self::SecretMissing => "secret_missing",
            Self::UnknownState => "unknown_state",
            Self::Denied => "denied",
            Self::TokenRefused => "token_refused",
            Self::InvalidToken(_) => "invalid_token",
            Self::NotAdmin { .. } => "not_admin",
            Self::Busy => "busy",
        }
    }
}

impl IntoResponse for SignOnFailure {
    fn into_response(self) -> Response {
        let page = format!(
            "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>Weir console: not signed in</title>\n<link rel=\"stylesheet\" href=\"/console/console.css\">\n\
             </head>\n<body>\n<main>\n<h1>Not signed in</h1>\n\
             <p id=\"sign-on-error\" class=\"error\" data-code=\"{}\">{}</p>\n\
             <p><a href=\"{PREFIX}\">Back to the console</a></p>\n</main>\n</body>\n</html>\n",
            self.code(),
            escape_html(&self.to_string()),
        );
        let mut response = (self.status(), page).into_response();
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(SET_COOKIE, clear_state_cookie());
        response
    }
}

/// `GET /console/oidc/login`: starts a sign-on at the provider.
pub(in crate::server) async fn sign_on_start(State(weir): State<Weir>) -> Result<Response, SignOnFailure> {
    let settings = weir.config().console.oidc.clone().ok_or(SignOnFailure::NotConfigured)?;
    let client = provider_client(&weir, &settings).await?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request =
        client.authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random);
    for scope in ["email", "profile"].into_iter().map(str::to_owned).chain(settings.scopes.iter().cloned()) {
        request = request.add_scope(Scope::new(scope));
    }
    let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
    weir.sign_ons()
        .start(state.secret(), verifier.secret().clone(), nonce.secret().clone(), SystemTime::now())
        .map_err(|error| {
            tracing::warn!(%error, "a console single sign-on was not started");
            SignOnFailure::Busy
        })?;
    let location = HeaderValue::from_str(url.as_str()).map_err(|_| {
        tracing::warn!("the identity provider's authorization endpoint is not a valid header value");
        SignOnFailure::ProviderUnreachable
    })?;
    let mut response = StatusCode::SEE_OTHER.into_response();
    response.headers_mut().insert(LOCATION, location);
    response.headers_mut().insert(SET_COOKIE, state_cookie(state.secret()));
    Ok(response)
}

/// `GET /console/oidc/callback`: the provider's answer; signs the identity in.
pub(in crate::server) async fn sign_on_callback(
    State(weir): State<Weir>,
    RawQuery(query): RawQuery,
    head: Parts,
) -> Result<Response, SignOnFailure> {
    let settings = weir.config().console.oidc.clone().ok_or(SignOnFailure::NotConfigured)?;
    let answer = Answer::parse(query.as_deref());
    let pending = this_browsers_state(&weir, &head, answer.state.as_deref())?;
    if let Some(error) = &answer.error {
        tracing::info!(error = %error, description = answer.error_description.as_deref().unwrap_or(""),
            "the identity provider answered a console sign-on with an error");
        return Err(SignOnFailure::Denied);
    }
    let code = answer.code.ok_or_else(|| {
        tracing::info!("the identity provider's answer to a console sign-on carried no code");
        SignOnFailure::Denied
    })?;
    let client = provider_client(&weir, &settings).await?;
    let person = redeem(&client, &settings, code, pending).await?;
    let opened =
        open_session(&weir, Principal::SignOn(person.clone()), SystemTime::now()).map_err(|_| SignOnFailure::Busy)?;
    tracing::info!(who = %person.actor(), "signed in to the console by single sign-on");
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(LOCATION, HeaderValue::from_static(PREFIX));
    headers.append(SET_COOKIE, session_cookie(&opened.id));
    headers.append(SET_COOKIE, clear_state_cookie());
    Ok(response)
}

/// The query the provider sends the browser back with.
#[derive(Debug, Default)]
struct Answer {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl Answer {
    fn parse(query: Option<&str>) -> Self {
        let mut answer = Self::default();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let slot = match &*name {
                "state" => &mut answer.state,
                "code" => &mut answer.code,
                "error" => &mut answer.error,
                "error_description" => &mut answer.error_description,
                _ => continue,
            };
            *slot = Some(value.into_owned());
        }
        answer
    }
}

/// The sign-on `state` names, taken once, when it is also this browser's
/// state cookie (so a sign-on another browser started cannot be finished here).
fn this_browsers_state(
    weir: &Weir,
    head: &Parts,
    state: Option<&str>,
) -> Result<crate::identity::sign_ons::Pending, SignOnFailure> {
    let state = state.ok_or(SignOnFailure::UnknownState)?;
    let cookie = cookie_named(&head.headers, STATE_COOKIE).ok_or(SignOnFailure::UnknownState)?;
    if !bool::from(cookie.as_bytes().ct_eq(state.as_bytes())) {
        return Err(SignOnFailure::UnknownState);
    }
    weir.sign_ons().take(state, SystemTime::now()).ok_or(SignOnFailure::UnknownState)
}

/// A client built from a provider's discovery document: its authorization
/// endpoint set, its token and user info endpoints as the document has them.
type ProviderClient =
    CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointMaybeSet, EndpointMaybeSet>;

/// The provider's client, from its discovery document (and its keys), read now.
async fn provider_client(weir: &Weir, settings: &OidcSettings) -> Result<ProviderClient, SignOnFailure> {
    let http = http_client()?;
    let issuer = IssuerUrl::new(settings.issuer.clone()).map_err(|_| SignOnFailure::ProviderUnreachable)?;
    let metadata = CoreProviderMetadata::discover_async(issuer, &|request| send(http.clone(), request)).await.map_err(
        |error| {
            tracing::warn!(error = %error_chain(&error), "the identity provider's discovery failed");
            SignOnFailure::ProviderUnreachable
        },
    )?;
    let secret = weir.secrets().get(&settings.client_secret).ok_or_else(|| {
        tracing::error!(
            location = %weir.secrets().location(&settings.client_secret),
            "`[console.oidc] client_secret` names a secret that is not set"
        );
        SignOnFailure::SecretMissing
    })?;
    let redirect = RedirectUrl::new(settings.redirect_uri.clone()).map_err(|_| SignOnFailure::ProviderUnreachable)?;
    Ok(CoreClient::from_provider_metadata(
        metadata,
        ClientId::new(settings.client_id.clone()),
        Some(ClientSecret::new(secret.expose().to_owned())),
    )
    .set_redirect_uri(redirect))
}

/// Redeems `code` and checks the ID token; answers who signed in, when an admin.
async fn redeem(
    client: &ProviderClient,
    settings: &OidcSettings,
    code: String,
    pending: crate::identity::sign_ons::Pending,
) -> Result<SignedOn, SignOnFailure> {
    let http = http_client()?;
    let request = client.exchange_code(AuthorizationCode::new(code)).map_err(|error| {
        tracing::warn!(%error, "the identity provider's discovery document names no token endpoint");
        SignOnFailure::ProviderUnreachable
    })?;
    let tokens = request
        .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier))
        .request_async(&|request| send(http.clone(), request))
        .await
        .map_err(|error| token_failure(&error))?;
    let id_token = tokens.id_token().ok_or(SignOnFailure::InvalidToken(TokenCheck::Missing))?;
    let claims = id_token.claims(&client.id_token_verifier(), &Nonce::new(pending.nonce)).map_err(|error| {
        tracing::warn!(%error, "a console sign-on's ID token failed its checks");
        SignOnFailure::InvalidToken(TokenCheck::of(&error))
    })?;
    let person = SignedOn {
        subject: claims.subject().as_str().to_owned(),
        email: claims.email().map(|email| email.as_str().to_owned()),
    };
    // The token's signature, issuer, audience, expiry and nonce were checked above; its
    // other claims are read from the same verified payload.
    let payload = verified_payload(&id_token.to_string()).ok_or(SignOnFailure::InvalidToken(TokenCheck::Malformed))?;
    let groups = groups(&payload, &settings.groups_claim);
    if !settings.admin_groups.iter().any(|admin| groups.contains(admin)) {
        tracing::info!(who = %person.actor(), ?groups, "a console sign-on was refused: in no admin group");
        let who = person.email.clone().unwrap_or_else(|| person.subject.clone());
        return Err(SignOnFailure::NotAdmin { who });
    }
    Ok(person)
}

fn token_failure<E: std::error::Error + 'static>(
    error: &RequestTokenError<E, StandardErrorResponse<CoreErrorResponseType>>,
) -> SignOnFailure {
    match error {
        RequestTokenError::ServerResponse(answer) => {
            tracing::warn!(error = %answer, "the identity provider's token endpoint refused a console sign-on's code");
            SignOnFailure::TokenRefused
        }
        RequestTokenError::Request(error) => {
            tracing::warn!(error = %error_chain(error), "the identity provider's token endpoint could not be reached");
            SignOnFailure::ProviderUnreachable
        }
        other => {
            tracing::warn!(error = %error_chain(other), "the identity provider's token endpoint answered unusably");
            SignOnFailure::TokenRefused
        }
    }
}

/// A JWT's claims, decoded (only ever called on a token whose checks passed).
fn verified_payload(jwt: &str) -> Option<Value> {
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The groups `claim` lists: a string array, or one string; nothing else counts.
fn groups(payload: &Value, claim: &str) -> Vec<String> {
    match payload.get(claim) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Some(Value::String(group)) => vec![group.clone()],
        _ => Vec::new(),
    }
}

/// The client the provider is asked through: no redirects (a provider's
/// endpoints are its documents' URLs, never where a 30x points), bounded time.
fn http_client() -> Result<reqwest::Client, SignOnFailure> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(PROVIDER_CONNECT_TIMEOUT)
        .timeout(PROVIDER_TIMEOUT)
        .build()
        .map_err(|error| {
            tracing::error!(%error, "the single sign-on HTTP client could not be built");
            SignOnFailure::ProviderUnreachable
        })
}

/// Why a request to the provider failed (logged only).
#[derive(Debug, thiserror::Error)]
enum ProviderHttpError {
    #[error("the request could not be built: {0}")]
    Build(String),
    #[error(transparent)]
    Transport(#[from] reqwest::Error),
    #[error("the answer is larger than {MAX_PROVIDER_BYTES} bytes")]
    TooLarge,
}

/// One request to the provider over this gateway's reqwest, its answer read
/// to at most [`MAX_PROVIDER_BYTES`].
async fn send(http: reqwest::Client, request: HttpRequest) -> Result<HttpResponse, ProviderHttpError> {
    let request = reqwest::Request::try_from(request).map_err(|error| ProviderHttpError::Build(error.to_string()))?;
    let mut response = http.execute(request).await?;
    let mut answer = axum::http::Response::builder().status(response.status());
    if let Some(headers) = answer.headers_mut() {
        headers.extend(response.headers().iter().map(|(name, value)| (name.clone(), value.clone())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_PROVIDER_BYTES {
            return Err(ProviderHttpError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    answer.body(body).map_err(|error| ProviderHttpError::Build(error.to_string()))
}

fn state_cookie(state: &str) -> HeaderValue {
    let cookie = format!(
        "{STATE_COOKIE}={state}; HttpOnly; SameSite=Lax; Path={STATE_COOKIE_PATH}; Max-Age={}",
        SIGN_ON_LIFETIME.as_secs()
    );
    // A `state` is base64url: always a valid header value.
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| clear_state_cookie())
}

fn clear_state_cookie() -> HeaderValue {
    HeaderValue::from_static("weir_sign_on=; HttpOnly; SameSite=Lax; Path=/console/oidc; Max-Age=0")
}

fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '&' => escaped.push_str("&amp;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            other => escaped.push(other),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn groups_are_read_from_an_array_or_one_string_and_nothing_else() {
        let payload = json!({"groups": ["dev", "weir-admins", 7], "role": "weir-admins", "other": {"a": 1}});
        assert_eq!(groups(&payload, "groups"), ["dev", "weir-admins"]);
        assert_eq!(groups(&payload, "role"), ["weir-admins"]);
        assert!(groups(&payload, "other").is_empty());
        assert!(groups(&payload, "absent").is_empty());
    }

    #[test]
    fn a_payload_is_read_from_the_middle_of_a_jwt() {
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"sub":"s1","groups":["g"]}"#);
        assert_eq!(verified_payload(&format!("e30.{claims}.sig")).unwrap()["sub"], "s1");
        assert!(verified_payload("no-dots").is_none());
        assert!(verified_payload("e30.!!!.sig").is_none());
    }

    #[test]
    fn the_callback_query_is_read_by_name() {
        let answer = Answer::parse(Some("code=c1&state=s%2B1&ignored=x&error=access_denied&error_description=no+way"));
        assert_eq!(answer.code.as_deref(), Some("c1"));
        assert_eq!(answer.state.as_deref(), Some("s+1"));
        assert_eq!(answer.error.as_deref(), Some("access_denied"));
        assert_eq!(answer.error_description.as_deref(), Some("no way"));
        assert!(Answer::parse(None).state.is_none());
    }

    #[test]
    fn a_failure_page_escapes_what_it_shows_and_clears_the_state_cookie() {
        let response = SignOnFailure::NotAdmin { who: "<b>eve</b>@example.com".to_owned() }.into_response();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(response.headers()[SET_COOKIE], clear_state_cookie());
        let body = pollster::block_on(axum::body::to_bytes(response.into_body(), 1 << 16)).unwrap();
        let body = String::from_utf8(body.to_vec()).unwrap();
        assert!(body.contains("&lt;b&gt;eve&lt;/b&gt;@example.com is not in a group"), "{body}");
        assert!(body.contains("data-code=\"not_admin\""), "{body}");
        assert!(!body.contains("<b>"), "{body}");
    }
}
