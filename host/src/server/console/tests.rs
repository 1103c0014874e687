#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{Request, Response};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::identity::hash_of;
use crate::{Config, Weir};

const ADMIN: &str = "weir-test-admin-token";
const PLAIN: &str = "weir-test-plain-token";
const HOST: &str = "127.0.0.1:8080";

fn weir(dir: &std::path::Path) -> Weir {
    let toml = format!(
        "[ledger]\npath = {:?}\n[[key]]\nid = \"ops\"\nmember = \"ops\"\nadmin = true\nhash = \"{}\"\n\
         [[key]]\nid = \"dev\"\nmember = \"dev\"\nhash = \"{}\"\n",
        dir.join("ledger.db").to_str().unwrap(),
        hash_of(ADMIN),
        hash_of(PLAIN)
    );
    let config = Config::from_toml(&toml, "console test").unwrap();
    Weir::builder().config(config).providers_dir("/nonexistent-weir-console-test").cache_dir(None).build().unwrap()
}

/// One request through the router, as a browser on the gateway's own page sends it.
struct Ask<'a> {
    method: &'a str,
    uri: &'a str,
    cookie: Option<&'a str>,
    csrf: Option<&'a str>,
    origin: Option<&'a str>,
    body: Option<Value>,
}

impl<'a> Ask<'a> {
    fn new(method: &'a str, uri: &'a str) -> Self {
        Self { method, uri, cookie: None, csrf: None, origin: None, body: None }
    }

    async fn send(self, weir: &Weir) -> (u16, Response<Body>, Value) {
        let mut request = Request::builder().method(self.method).uri(self.uri).header("host", HOST);
        if let Some(cookie) = self.cookie {
            request = request.header("cookie", format!("other=1; weir_console={cookie}"));
        }
        if let Some(csrf) = self.csrf {
            request = request.header("x-weir-csrf", csrf);
        }
        if let Some(origin) = self.origin {
            request = request.header("origin", origin);
        }
        let body = match self.body {
            Some(body) => {
                request = request.header("content-type", "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        let response = crate::server::router(weir.clone()).oneshot(request.body(body).unwrap()).await.unwrap();
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, Response::from_parts(parts, Body::empty()), json)
    }
}

/// Signs in with `token`: the cookie's value and the CSRF token.
async fn sign_in(weir: &Weir, token: &str) -> (String, String) {
    let ask = Ask {
        body: Some(json!({"token": token})),
        origin: Some("http://127.0.0.1:8080"),
        ..Ask::new("POST", "/console/session")
    };
    let (status, response, body) = ask.send(weir).await;
    assert_eq!(status, 200, "{body}");
    let set_cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(set_cookie.contains("HttpOnly; SameSite=Strict; Path=/console; Max-Age=28800"), "{set_cookie}");
    let id = set_cookie.strip_prefix("weir_console=").unwrap().split(';').next().unwrap().to_owned();
    assert!(!body.to_string().contains(&id), "the session id is in the cookie alone");
    (id, body["csrf"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let dir = tempfile::tempdir().unwrap();
    let weir = weir(dir.path());
    for (uri, kind) in
        [("/console", "text/html"), ("/console/console.js", "text/javascript"), ("/console/console.css", "text/css")]
    {
        let (status, response, _) = Ask::new("GET", uri).send(&weir).await;
        assert_eq!(status, 200, "{uri}");
        let headers = response.headers();
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind), "{uri}");
        assert_eq!(headers["cache-control"], "no-store");
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("script-src 'self'") && policy.contains("default-src 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
    }
    assert!(!super::INDEX_HTML.contains("<script>"), "no inline script");
    assert!(!super::INDEX_HTML.contains("style="), "no inline style");
    for asset in [super::INDEX_HTML, super::CONSOLE_JS, super::CONSOLE_CSS] {
        // The SVG namespace is a name, never fetched.
        let asset = asset.replace("\"http://www.w3.org/2000/svg\"", "");
        assert!(!asset.contains("https://") && !asset.contains("http://"), "no third-party address");
    }
}

#[tokio::test]
async fn only_an_admin_key_signs_in_and_only_from_its_own_origin() {
    let dir = tempfile::tempdir().unwrap();
    let weir = weir(dir.path());
    let ask = |token: &str, origin: Option<&'static str>| Ask {
        body: Some(json!({"token": token})),
        origin,
        ..Ask::new("POST", "/console/session")
    };
    let (status, response, body) = ask(PLAIN, None).send(&weir).await;
    assert_eq!((status, body["error"]["type"].as_str()), (403, Some("permission_denied")), "{body}");
    assert!(response.headers().get("set-cookie").is_none());
    let (status, _, body) = ask("weir-not-a-key", None).send(&weir).await;
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("invalid_api_key")), "{body}");
    let (status, _, body) = ask(ADMIN, Some("http://evil.example")).send(&weir).await;
    assert_eq!((status, body["error"]["type"].as_str()), (403, Some("forbidden_origin")), "{body}");
    let (status, _, _) = ask(ADMIN, Some("http://127.0.0.1:9999")).send(&weir).await;
    assert_eq!(status, 403, "another port is another origin");
    let malformed = Ask { body: Some(json!({"key": ADMIN})), ..Ask::new("POST", "/console/session") };
    assert_eq!(malformed.send(&weir).await.0, 400);
    sign_in(&weir, ADMIN).await;

    let keyless = Config::from_toml("[ledger]\nenabled = false\n", "keyless").unwrap();
    let keyless = Weir::builder()
        .config(keyless)
        .providers_dir("/nonexistent-weir-console-test")
        .cache_dir(None)
        .build()
        .unwrap();
    let (status, _, body) = ask(ADMIN, None).send(&keyless).await;
    assert_eq!(status, 403, "{body}");
}

#[tokio::test]
async fn a_session_reads_with_its_cookie_and_changes_only_with_its_csrf_token() {
    let dir = tempfile::tempdir().unwrap();
    let weir = weir(dir.path());
    let (cookie, csrf) = sign_in(&weir, ADMIN).await;

    let (status, _, body) = Ask::new("GET", "/console/api/admin/v1/keys").send(&weir).await;
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("invalid_api_key")), "no cookie: {body}");
    let (status, _, _) =
        Ask { cookie: Some("weir-forged"), ..Ask::new("GET", "/console/api/v1/usage") }.send(&weir).await;
    assert_eq!(status, 401, "a cookie naming no session");
    let (status, response, body) =
        Ask { cookie: Some(&cookie), ..Ask::new("GET", "/console/api/admin/v1/keys") }.send(&weir).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(response.headers()["cache-control"], "no-store");
    let (status, _, body) = Ask { cookie: Some(&cookie), ..Ask::new("GET", "/console/api/v1/usage") }.send(&weir).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = Ask {
        cookie: Some(&cookie),
        origin: Some("http://evil.example"),
        ..Ask::new("GET", "/console/api/admin/v1/keys")
    }
    .send(&weir)
    .await;
    assert_eq!(status, 403, "a foreign origin is refused even with the cookie");

    let create = |csrf: Option<&'static str>| Ask {
        cookie: None,
        csrf,
        body: Some(json!({"member": "alice", "id": "alice-key"})),
        ..Ask::new("POST", "/console/api/admin/v1/keys")
    };
    let (status, _, body) = Ask { cookie: Some(&cookie), ..create(None) }.send(&weir).await;
    assert_eq!((status, body["error"]["type"].as_str()), (403, Some("permission_denied")), "{body}");
    let (status, _, _) = Ask { cookie: Some(&cookie), ..create(Some("weir-wrong")) }.send(&weir).await;
    assert_eq!(status, 403, "a wrong CSRF token");
    let (status, _, body) = Ask { cookie: Some(&cookie), csrf: Some(&csrf), ..create(None) }.send(&weir).await;
    assert_eq!(status, 201, "{body}");
    assert!(body["token"].as_str().unwrap().starts_with("weir-"));

    let (status, _, body) = Ask { cookie: Some(&cookie), ..Ask::new("GET", "/console/session") }.send(&weir).await;
    assert_eq!((status, body["csrf"].as_str(), body["key"].as_str()), (200, Some(csrf.as_str()), Some("ops")));
    let (status, _, _) = Ask { cookie: Some(&cookie), ..Ask::new("DELETE", "/console/session") }.send(&weir).await;
    assert_eq!(status, 403, "signing out is a change: it needs the CSRF token");
    let (status, response, _) =
        Ask { cookie: Some(&cookie), csrf: Some(&csrf), ..Ask::new("DELETE", "/console/session") }.send(&weir).await;
    assert_eq!(status, 204);
    assert!(response.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    let (status, _, _) =
        Ask { cookie: Some(&cookie), ..Ask::new("GET", "/console/api/admin/v1/keys") }.send(&weir).await;
    assert_eq!(status, 401, "signed out");
    let (status, _, _) = Ask { cookie: Some(&cookie), ..Ask::new("GET", "/console/session") }.send(&weir).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_session_ends_when_its_key_is_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let weir = weir(dir.path());
    let (cookie, csrf) = sign_in(&weir, ADMIN).await;
    let made = Ask {
        cookie: Some(&cookie),
        csrf: Some(&csrf),
        body: Some(json!({"member": "second", "id": "second-admin", "admin": true})),
        ..Ask::new("POST", "/console/api/admin/v1/keys")
    };
    let (status, _, body) = made.send(&weir).await;
    assert_eq!(status, 201, "{body}");
    let (second, _) = sign_in(&weir, body["token"].as_str().unwrap()).await;
    let (status, _, _) =
        Ask { cookie: Some(&second), ..Ask::new("GET", "/console/api/admin/v1/budgets") }.send(&weir).await;
    assert_eq!(status, 200);
    let revoke = Ask {
        cookie: Some(&cookie),
        csrf: Some(&csrf),
        body: Some(json!({})),
        ..Ask::new("POST", "/console/api/admin/v1/keys/second-admin/revoke")
    };
    assert_eq!(revoke.send(&weir).await.0, 200);
    let (status, _, body) =
        Ask { cookie: Some(&second), ..Ask::new("GET", "/console/api/admin/v1/budgets") }.send(&weir).await;
    assert_eq!(status, 401, "{body}");
}

#[tokio::test]
async fn a_signed_on_session_acts_as_an_admin_named_in_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    let weir = weir(dir.path());
    let person = crate::identity::console_sessions::SignedOn {
        subject: "s-42".to_owned(),
        email: Some("ana@example.com".to_owned()),
    };
    let opened = weir
        .console_sessions()
        .open(crate::identity::console_sessions::Principal::SignOn(person), std::time::SystemTime::now())
        .unwrap();
    let (status, _, body) = Ask { cookie: Some(&opened.id), ..Ask::new("GET", "/console/session") }.send(&weir).await;
    assert_eq!((status, body["via"].as_str(), body["key"].clone()), (200, Some("oidc"), Value::Null), "{body}");
    assert_eq!(body["who"], "oidc:s-42 <ana@example.com>");
    let create = |csrf| Ask {
        cookie: Some(&opened.id),
        csrf,
        body: Some(json!({"member": "dora", "id": "dora-key"})),
        ..Ask::new("POST", "/console/api/admin/v1/keys")
    };
    assert_eq!(create(None).send(&weir).await.0, 403, "a change needs the CSRF token");
    let (status, _, body) = create(Some(opened.session.csrf.as_str())).send(&weir).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["key"]["created_by"], "oidc:s-42 <ana@example.com>");
    let (_, _, changes) =
        Ask { cookie: Some(&opened.id), ..Ask::new("GET", "/console/api/admin/v1/changes") }.send(&weir).await;
    assert_eq!(changes["data"][0]["actor"], "oidc:s-42 <ana@example.com>", "{changes}");
}

#[tokio::test]
async fn key_sign_in_can_be_turned_off_beside_single_sign_on() {
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[ledger]\npath = {:?}\n[[key]]\nid = \"ops\"\nmember = \"ops\"\nadmin = true\nhash = \"{}\"\n\
         [console]\nkey_sign_in = false\n[console.oidc]\nissuer = \"https://idp.example\"\nclient_id = \"weir\"\n\
         client_secret = \"weir-oidc-secret\"\nredirect_uri = \"https://weir.example/console/oidc/callback\"\n\
         admin_groups = [\"weir-admins\"]\n",
        dir.path().join("ledger.db").to_str().unwrap(),
        hash_of(ADMIN),
    );
    let config = Config::from_toml(&toml, "console test").unwrap();
    let weir =
        Weir::builder().config(config).providers_dir("/nonexistent-weir-console-test").cache_dir(None).build().unwrap();
    let (status, response, body) =
        Ask { body: Some(json!({"token": ADMIN})), ..Ask::new("POST", "/console/session") }.send(&weir).await;
    assert_eq!((status, body["error"]["type"].as_str()), (403, Some("permission_denied")), "{body}");
    assert!(response.headers().get("set-cookie").is_none());
    let (status, _, body) = Ask::new("GET", "/console/sign-in").send(&weir).await;
    assert_eq!((status, body), (200, json!({"key": false, "oidc": true})));
    let refused = Config::from_toml("[console]\nkey_sign_in = false\n", "console test").unwrap_err();
    assert!(refused.to_string().contains("needs `[console.oidc]`"), "{refused}");
}
