//! The console's single sign-on (`[console.oidc]`) through the real gateway binary against a
//! fake OpenID Connect provider on loopback that speaks the real wire (`weir_tests::fake_idp`:
//! discovery, JWKS, an authorization endpoint that redirects back with a code, a token endpoint
//! that answers an RS256-signed ID token). The flow is followed here over HTTP as a browser
//! follows it (redirects and the cookies they set); `console.rs` drives it in a real browser.
//!
//! Proven: a member of an admin group gets the console's session cookie (HttpOnly,
//! SameSite=Strict) and its CSRF token, and the admin audit names the person (subject and
//! email) as the actor of a change. Refused, each with the gateway's own page and no session:
//! a wrong or replayed `state`, a token signed with another key, for another audience or
//! expired, a provider that cannot be reached, a member of no admin group, a token endpoint
//! that answers an error, a provider that refuses at its authorization endpoint, and an unset
//! client secret. None of the provider's own error text reaches a page. `key_sign_in = false`
//! refuses an admin key's sign-in and keeps the API's keys working.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::PathBuf;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use weir_tests::fake_idp::{CLIENT_ID, CLIENT_SECRET, FakeIdp, IDP_RAW_TEXT, IdpMode, IdpUser};
use weir_tests::python::run_browser_script;
use weir_tests::{FakeUpstream, Gateway, free_port};

const ROOT: &str = "weir-root-oidc-token-0123456789abcdef";

fn admin() -> IdpUser {
    IdpUser {
        subject: "f1e2d3c4-ana".to_owned(),
        email: "ana@example.com".to_owned(),
        groups: vec!["staff".to_owned(), "weir-admins".to_owned()],
    }
}

fn outsider() -> IdpUser {
    IdpUser { subject: "b0b".to_owned(), email: "bob@example.com".to_owned(), groups: vec!["staff".to_owned()] }
}

fn config(issuer: &str, listen: SocketAddr, key_sign_in: bool) -> String {
    format!(
        r#"[[key]]
id = "root"
member = "ops"
hash = "{root}"
admin = true

[ledger]
path = "ledger.db"

[console]
key_sign_in = {key_sign_in}

[console.oidc]
issuer = "{issuer}"
client_id = "{CLIENT_ID}"
client_secret = "weir-oidc-secret"
redirect_uri = "http://{listen}/console/oidc/callback"
admin_groups = ["weir-admins"]
"#,
        root = weir_host::identity::hash_of(ROOT),
    )
}

/// A provider and a gateway that signs in through it (its client secret in the environment).
async fn started(key_sign_in: bool) -> (FakeIdp, Gateway) {
    let listen = free_port();
    let idp = FakeIdp::start(&format!("http://{listen}/console/oidc/callback"), admin()).await;
    let gateway =
        Gateway::start_on(listen, &config(&idp.issuer, listen, key_sign_in), &[("WEIR_OIDC_SECRET", CLIENT_SECRET)])
            .await;
    (idp, gateway)
}

/// A client that follows no redirect and keeps no cookie: each hop is looked at.
fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// The `name=value` of a `Set-Cookie` named `name`, with its whole line.
fn set_cookie(headers: &HeaderMap, name: &str) -> Option<(String, String)> {
    headers.get_all(SET_COOKIE).iter().map(|value| value.to_str().unwrap().to_owned()).find_map(|line| {
        let pair = line.split(';').next().unwrap().trim().to_owned();
        (pair.starts_with(&format!("{name}=")) && pair.len() > name.len() + 1).then_some((pair, line))
    })
}

/// The end of one sign-on: the gateway's answer to the provider's redirect back.
struct Finished {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Finished {
    async fn read(answer: reqwest::Response) -> Self {
        Self { status: answer.status(), headers: answer.headers().clone(), body: answer.text().await.unwrap() }
    }

    /// The failure page's `data-code`.
    fn code(&self) -> &str {
        let start = self.body.find("data-code=\"").map(|at| at + "data-code=\"".len()).unwrap_or(0);
        self.body[start..].split('"').next().unwrap_or("")
    }

    fn session(&self) -> Option<(String, String)> {
        set_cookie(&self.headers, "weir_console")
    }

    /// A refusal: the page's code, no session, none of the provider's text.
    fn assert_refused(&self, status: u16, code: &str) {
        assert_eq!((self.status.as_u16(), self.code()), (status, code), "{}", self.body);
        assert!(self.session().is_none(), "a refused sign-on opened a session: {:?}", self.headers);
        assert!(!self.body.contains(IDP_RAW_TEXT), "the provider's text reached the page: {}", self.body);
        assert!(self.body.contains("Not signed in"), "{}", self.body);
    }
}

/// `GET /console/oidc/login`, then the provider's authorization endpoint: the URL the
/// provider sends the browser back to, and the state cookie the gateway set.
async fn to_provider_and_back(gateway: &Gateway) -> (String, String) {
    let client = client();
    let login = client.get(gateway.url("/console/oidc/login")).send().await.unwrap();
    assert_eq!(login.status(), 303, "{:?}", login.text().await);
    let (state_cookie, line) = set_cookie(login.headers(), "weir_sign_on").expect("a state cookie");
    assert!(
        line.contains("HttpOnly") && line.contains("SameSite=Lax") && line.contains("Path=/console/oidc"),
        "{line}"
    );
    let authorize = login.headers()[LOCATION].to_str().unwrap().to_owned();
    let url = reqwest::Url::parse(&authorize).unwrap();
    let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
    assert_eq!(query["code_challenge_method"], "S256", "{authorize}");
    assert!(query["scope"].split(' ').any(|scope| scope == "openid"), "{authorize}");
    let back = client.get(authorize).send().await.unwrap();
    assert_eq!(back.status(), 302, "the provider refused the authorization request: {:?}", back.text().await);
    (back.headers()[LOCATION].to_str().unwrap().to_owned(), state_cookie)
}

/// The gateway's answer to `callback`, sent with `cookie`.
async fn finish(callback: &str, cookie: Option<&str>) -> Finished {
    let mut request = client().get(callback);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    Finished::read(request.send().await.unwrap()).await
}

/// A whole sign-on as a browser makes it.
async fn sign_on(gateway: &Gateway) -> Finished {
    let (callback, cookie) = to_provider_and_back(gateway).await;
    finish(&callback, Some(&cookie)).await
}

#[tokio::test]
async fn an_admin_group_member_signs_in_and_the_audit_names_them() {
    let (idp, gateway) = started(true).await;
    let finished = sign_on(&gateway).await;
    assert_eq!(finished.status, 303, "{}", finished.body);
    assert_eq!(finished.headers[LOCATION], "/console");
    let (session, line) = finished.session().expect("the session cookie");
    assert!(line.contains("HttpOnly") && line.contains("SameSite=Strict") && line.contains("Path=/console"), "{line}");
    assert!(set_cookie(&finished.headers, "weir_sign_on").is_none(), "the state cookie is cleared");
    assert!(idp.rejections().is_empty(), "the provider refused part of the flow: {:?}", idp.rejections());

    // The session says who, and carries a CSRF token every change needs.
    let client = client();
    let current: Value = client
        .get(gateway.url("/console/session"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(current["who"], "oidc:f1e2d3c4-ana <ana@example.com>", "{current}");
    assert_eq!(current["via"], "oidc");
    let csrf = current["csrf"].as_str().unwrap().to_owned();
    let create = |csrf: Option<String>| {
        let mut request = client
            .post(gateway.url("/console/api/admin/v1/keys"))
            .header("cookie", &session)
            .json(&json!({"member": "dora", "id": "dora-key"}));
        if let Some(csrf) = csrf {
            request = request.header("x-weir-csrf", csrf);
        }
        request.send()
    };
    assert_eq!(create(None).await.unwrap().status(), 403, "a change without the CSRF token");
    let created = create(Some(csrf.clone())).await.unwrap();
    assert_eq!(created.status(), 201);
    let token = created.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_owned();

    // The audit names the person; the key made works.
    let changes: Value =
        client.get(gateway.url("/admin/v1/changes")).bearer_auth(ROOT).send().await.unwrap().json().await.unwrap();
    let row = changes["data"].as_array().unwrap().iter().find(|row| row["target"] == "dora-key").unwrap();
    assert_eq!(row["actor"], "oidc:f1e2d3c4-ana <ana@example.com>", "{changes}");
    let key: Value = client
        .get(gateway.url("/admin/v1/keys/dora-key"))
        .bearer_auth(ROOT)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(key["created_by"], "oidc:f1e2d3c4-ana <ana@example.com>", "{key}");
    let models = client.get(gateway.url("/v1/models")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(models.status(), 200);

    // Sign-out ends the session.
    let out = client
        .delete(gateway.url("/console/session"))
        .header("cookie", &session)
        .header("x-weir-csrf", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    let after = client.get(gateway.url("/console/api/v1/usage")).header("cookie", &session).send().await.unwrap();
    assert_eq!(after.status(), 401);

    // Both ways in are offered.
    let methods: Value = client.get(gateway.url("/console/sign-in")).send().await.unwrap().json().await.unwrap();
    assert_eq!(methods, json!({"key": true, "oidc": true}));
}

#[tokio::test]
async fn a_wrong_missing_or_replayed_state_is_refused() {
    let (_idp, gateway) = started(true).await;

    // The provider's answer with another state than the browser's cookie.
    let (callback, cookie) = to_provider_and_back(&gateway).await;
    let forged = callback.replace("state=", "state=forged");
    finish(&forged, Some(&cookie)).await.assert_refused(400, "unknown_state");
    // Without the state cookie (a sign-on started in another browser).
    finish(&callback, None).await.assert_refused(400, "unknown_state");
    // The real answer signs in once; the same answer again is refused.
    let (callback, cookie) = to_provider_and_back(&gateway).await;
    assert_eq!(finish(&callback, Some(&cookie)).await.status, 303);
    finish(&callback, Some(&cookie)).await.assert_refused(400, "unknown_state");
    // A state cookie and query that agree but that this gateway never issued.
    let invented = gateway.url("/console/oidc/callback?code=code-1&state=invented");
    finish(&invented, Some("weir_sign_on=invented")).await.assert_refused(400, "unknown_state");
}

#[tokio::test]
async fn id_tokens_that_fail_a_check_and_provider_errors_are_refused_in_the_gateways_words() {
    let (idp, gateway) = started(true).await;
    let cases = [
        (IdpMode::WrongSignature, 401, "invalid_token", "signature does not verify"),
        (IdpMode::WrongAudience, 401, "invalid_token", "issued for another client"),
        (IdpMode::Expired, 401, "invalid_token", "has expired"),
        (IdpMode::TokenError, 502, "token_refused", "refused to finish the sign-in"),
        (IdpMode::Deny, 401, "denied", "did not sign you in"),
    ];
    for (mode, status, code, words) in cases {
        idp.set_mode(mode);
        let finished = sign_on(&gateway).await;
        finished.assert_refused(status, code);
        assert!(finished.body.contains(words), "{mode:?}: {}", finished.body);
    }
    assert!(idp.rejections().iter().any(|reason| reason == "told to refuse"), "{:?}", idp.rejections());

    // A member of no admin group is told so, by name.
    idp.set_mode(IdpMode::Issue);
    idp.set_user(outsider());
    let finished = sign_on(&gateway).await;
    finished.assert_refused(403, "not_admin");
    assert!(
        finished.body.contains("bob@example.com is not in a group allowed to use this console"),
        "{}",
        finished.body
    );

    // The gateway stays healthy, and an admin still signs in.
    idp.set_user(admin());
    assert_eq!(sign_on(&gateway).await.status, 303);
}

#[tokio::test]
async fn a_provider_that_cannot_be_reached_or_a_missing_secret_is_a_clear_page() {
    // Nothing listens at the issuer.
    let listen = free_port();
    let nowhere = format!("http://{}", free_port());
    let gateway =
        Gateway::start_on(listen, &config(&nowhere, listen, true), &[("WEIR_OIDC_SECRET", CLIENT_SECRET)]).await;
    let login = client().get(gateway.url("/console/oidc/login")).send().await.unwrap();
    let finished = Finished::read(login).await;
    finished.assert_refused(502, "provider_unreachable");
    assert!(!finished.body.contains(&nowhere[7..]), "the page does not name the provider's address: {}", finished.body);
    drop(gateway);

    // The client secret's variable is unset.
    let listen = free_port();
    let idp = FakeIdp::start(&format!("http://{listen}/console/oidc/callback"), admin()).await;
    let gateway = Gateway::start_on(listen, &config(&idp.issuer, listen, true), &[]).await;
    let login = client().get(gateway.url("/console/oidc/login")).send().await.unwrap();
    let finished = Finished::read(login).await;
    finished.assert_refused(500, "secret_missing");
    assert_eq!(idp.token_requests(), 0);
}

#[tokio::test]
async fn with_key_sign_in_off_only_single_sign_on_opens_the_console() {
    let (_idp, gateway) = started(false).await;
    let client = client();
    let refused = client.post(gateway.url("/console/session")).json(&json!({"token": ROOT})).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(set_cookie(refused.headers(), "weir_console").is_none());
    let refused: Value = refused.json().await.unwrap();
    assert!(refused["error"]["message"].as_str().unwrap().contains("single sign-on"), "{refused}");
    let methods: Value = client.get(gateway.url("/console/sign-in")).send().await.unwrap().json().await.unwrap();
    assert_eq!(methods, json!({"key": false, "oidc": true}));
    // The key still works on the API, and single sign-on still opens the console.
    let keys = client.get(gateway.url("/admin/v1/keys")).bearer_auth(ROOT).send().await.unwrap();
    assert_eq!(keys.status(), 200);
    assert_eq!(sign_on(&gateway).await.status, 303);
}

#[tokio::test]
async fn without_single_sign_on_its_routes_say_so() {
    let gateway = Gateway::start(&format!(
        "[[key]]\nid = \"root\"\nmember = \"ops\"\nhash = \"{}\"\nadmin = true\n",
        weir_host::identity::hash_of(ROOT)
    ))
    .await;
    let login = client().get(gateway.url("/console/oidc/login")).send().await.unwrap();
    let finished = Finished::read(login).await;
    finished.assert_refused(404, "not_configured");
    let methods: Value = client().get(gateway.url("/console/sign-in")).send().await.unwrap().json().await.unwrap();
    assert_eq!(methods, json!({"key": true, "oidc": false}));
}

/// Two catalog entries on the fake upstream, for keys whose model lists the browser edits.
fn models(upstream: &FakeUpstream) -> String {
    ["gpt", "gpt-mini"]
        .iter()
        .map(|id| {
            format!(
                "[[model]]\nid = \"{id}\"\nprovider = \"openai\"\nwire_id = \"gpt-4.1\"\nendpoint = \"{url}\"\n\
                 credential = \"weir-test-key\"\nmax_output_tokens = 1000\ncontext_window = 100000\nmax_retries = 0\n\n",
                url = upstream.base_url()
            )
        })
        .collect()
}

async fn admin_get(gateway: &Gateway, path: &str) -> Value {
    client().get(gateway.url(path)).bearer_auth(ROOT).send().await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn single_sign_on_and_editing_in_a_real_browser() {
    let upstream = FakeUpstream::start().await;
    let listen = free_port();
    let idp = FakeIdp::start(&format!("http://{listen}/console/oidc/callback"), admin()).await;
    idp.set_users(vec![outsider(), admin()]);
    let toml = format!("{}{}", models(&upstream), config(&idp.issuer, listen, true));
    let env = [("WEIR_OIDC_SECRET", CLIENT_SECRET), ("WEIR_TEST_KEY", "sk-upstream-0123456789")];
    let gateway = Gateway::start_on(listen, &toml, &env).await;

    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots");
    std::fs::create_dir_all(&out).unwrap();
    let args = json!({"base": gateway.url(""), "out": out.to_str().unwrap()});
    let seen = tokio::task::spawn_blocking(move || run_browser_script("console_sso_browser.py", args)).await.unwrap();

    // The sign-in page offered both ways; the outsider was refused on the gateway's page.
    assert_eq!((seen["sign_on_link_visible"].as_bool(), seen["key_form_visible"].as_bool()), (Some(true), Some(true)));
    assert_eq!(seen["refused"]["code"], "not_admin", "{seen}");
    assert_eq!(seen["refused"]["path"], "/console/oidc/callback");
    assert!(seen["refused"]["text"].as_str().unwrap().contains("bob@example.com is not in a group"), "{seen}");
    assert_eq!(seen["nav_hidden_after_refusal"], true);

    // The admin landed on the console, named, with a cookie no script can read.
    assert_eq!(seen["landed_path"], "/console");
    assert_eq!(seen["who"], "oidc:f1e2d3c4-ana <ana@example.com>", "{seen}");
    assert_eq!(seen["cookie_readable_by_script"], "", "the session cookie is HttpOnly");

    // The key's model list, edited in the page, holds at once.
    assert_eq!(seen["before_edit"], json!({"gpt-mini": 200, "gpt": 200}), "{seen}");
    assert_eq!(seen["edit_prefilled_models"], "gpt, gpt-mini");
    assert_eq!(seen["after_edit"], json!({"gpt-mini": 403, "gpt": 200}), "{seen}");
    let key = admin_get(&gateway, "/admin/v1/keys/dev-key").await;
    assert_eq!((key["models"].clone(), key["rpm"].clone()), (json!(["gpt"]), json!(30)), "{key}");
    let edited = (key["team"].clone(), key["expires"].clone(), key["default_effort"].clone());
    assert_eq!(edited, (json!("search"), json!("2099-01-31T00:00:00Z"), json!("low")), "{key}");
    assert_eq!(key["budget"], json!({"daily_tokens": 9000}), "{key}");
    assert!(seen["bad_edit_error"].as_str().unwrap().contains("no-such-model"), "{seen}");
    assert_eq!(
        admin_get(&gateway, "/admin/v1/keys/dev-key").await["models"],
        json!(["gpt"]),
        "a refused edit changes nothing"
    );

    // The budgets set in the page are the plane's; the deleted team is gone.
    let members = admin_get(&gateway, "/admin/v1/members").await;
    let dev = members["data"].as_array().unwrap().iter().find(|row| row["name"] == "dev").unwrap();
    assert_eq!(
        (dev["source"].clone(), dev["budget"].clone()),
        (json!("runtime"), json!({"daily_tokens": 5000})),
        "{members}"
    );
    assert!(seen["member_row"].as_str().unwrap().contains("5000"), "{seen}");
    let teams = admin_get(&gateway, "/admin/v1/teams").await;
    let names: Vec<&str> = teams["data"].as_array().unwrap().iter().map(|row| row["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["research"], "{teams}");
    assert_eq!(seen["team_rows_after_delete"], 1);
    assert!(seen["team_row"].as_str().unwrap().contains("2.5"), "{seen}");

    // Every change the page made is in the audit under the person's name.
    let changes = admin_get(&gateway, "/admin/v1/changes").await;
    let rows = changes["data"].as_array().unwrap();
    assert!(rows.len() >= 6, "{changes}");
    for row in rows {
        assert_eq!(row["actor"], "oidc:f1e2d3c4-ana <ana@example.com>", "{row}");
    }

    assert_eq!(seen["after_sign_out"], 401, "{seen}");
    assert_eq!(seen["console_errors"], json!([]), "{seen}");
    // Nothing but the gateway and the identity provider was asked.
    for url in seen["requests"].as_array().unwrap() {
        let url = url.as_str().unwrap();
        assert!(url.starts_with(&gateway.url("")) || url.starts_with(&idp.issuer), "a request left: {url}");
    }
    for (page, shots) in seen["pages"].as_object().unwrap() {
        for width in ["1280", "390"] {
            assert!(shots[width]["overflow"].as_i64().unwrap() <= 0, "{page} scrolls sideways at {width} px: {shots}");
            assert!(PathBuf::from(shots[width]["path"].as_str().unwrap()).is_file(), "{page} {width}");
        }
    }
    assert!(idp.rejections().is_empty(), "{:?}", idp.rejections());
}
