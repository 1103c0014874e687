//! The secret cache through the wire: a secret is read from the store once and
//! kept, a changed value is picked up after the refresh interval or at once after
//! the upstream rejects the kept one, and a secret set after start is used by the
//! next call. The fake upstream reads the `Authorization` header each call sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_host::transport::{Secret, SecretStore};
use weir_host::{Category, ChatRequest, Config, Weir, types::Conversation};
use weir_tests::{FakeUpstream, openai_wire};

const CREDENTIAL: &str = "rotating-key";

/// A vault whose value the test changes, counting how often it is asked.
#[derive(Debug, Default)]
struct Vault {
    value: Mutex<String>,
    reads: AtomicUsize,
}

impl Vault {
    fn set(&self, value: &str) {
        *self.value.lock().unwrap() = value.to_owned();
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl SecretStore for Vault {
    fn get(&self, credential_id: &str) -> Option<Secret> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let value = self.value.lock().unwrap().clone();
        (credential_id == CREDENTIAL && !value.is_empty()).then(|| Secret::new(value))
    }

    fn location(&self, credential_id: &str) -> String {
        format!("the test's vault `{credential_id}`")
    }
}

fn weir(upstream: &FakeUpstream, vault: &Arc<Vault>, refresh: Duration) -> Weir {
    let toml = format!(
        "[[model]]\nid = \"m\"\nprovider = \"openai\"\nendpoint = \"{}\"\ncredential = \"{CREDENTIAL}\"\n\
         max_output_tokens = 10\ncontext_window = 10000\noutput_tokens = 5\nmax_retries = 0\n",
        upstream.base_url()
    );
    Weir::builder()
        .config(Config::from_toml(&toml, "secrets test").unwrap())
        .providers_dir("/nonexistent-weir-providers")
        .cache_dir(Some(std::env::temp_dir().join("weir-secrets-test-cache")))
        .secret_store(Arc::clone(vault) as Arc<dyn SecretStore>)
        .secret_refresh(refresh)
        .build()
        .unwrap()
}

async fn call(weir: &Weir) -> Result<(), weir_host::CallError> {
    weir.chat(ChatRequest::new("m", Conversation::user("hi"))).await.map(|_| ())
}

/// The `Authorization` header of every request the upstream received, in order.
fn sent_keys(upstream: &FakeUpstream) -> Vec<String> {
    upstream.received().iter().map(|r| r.header("authorization").unwrap_or("<none>").to_owned()).collect()
}

#[tokio::test]
async fn a_kept_secret_is_read_once_and_a_rejected_one_is_read_again() {
    let upstream = FakeUpstream::start().await;
    let vault = Arc::new(Vault::default());
    vault.set("sk-one");
    let weir = weir(&upstream, &vault, Duration::from_secs(3600));
    for _ in 0..3 {
        call(&weir).await.unwrap();
    }
    assert_eq!(vault.reads(), 1, "three calls, one read of the store");

    // Rotated in the vault: the kept value is still sent (the interval is an
    // hour) until the upstream rejects it.
    vault.set("sk-two");
    upstream.push(openai_wire::error(401, "invalid_request_error", Some("invalid_api_key"), "Incorrect API key"));
    let rejected = call(&weir).await.unwrap_err();
    assert_eq!(rejected.category(), Category::AuthenticationFailed, "{rejected}");
    call(&weir).await.unwrap();
    assert_eq!(
        sent_keys(&upstream),
        ["Bearer sk-one", "Bearer sk-one", "Bearer sk-one", "Bearer sk-one", "Bearer sk-two"],
        "the call after the rejection reads the store again"
    );
    assert_eq!(vault.reads(), 2);
}

#[tokio::test]
async fn a_changed_secret_is_picked_up_once_the_kept_one_is_older_than_the_refresh() {
    let upstream = FakeUpstream::start().await;
    let vault = Arc::new(Vault::default());
    vault.set("sk-one");
    let weir = weir(&upstream, &vault, Duration::from_millis(50));
    call(&weir).await.unwrap();
    vault.set("sk-two");
    tokio::time::sleep(Duration::from_millis(60)).await;
    call(&weir).await.unwrap();
    assert_eq!(sent_keys(&upstream), ["Bearer sk-one", "Bearer sk-two"]);
}

#[tokio::test]
async fn a_secret_set_after_start_is_used_by_the_next_call() {
    let upstream = FakeUpstream::start().await;
    let vault = Arc::new(Vault::default());
    let weir = weir(&upstream, &vault, Duration::from_secs(3600));
    let missing = call(&weir).await.unwrap_err();
    assert_eq!(missing.category(), Category::CredentialMissing, "{missing}");
    assert!(upstream.received().is_empty(), "nothing is sent without the credential");
    vault.set("sk-late");
    call(&weir).await.unwrap();
    assert_eq!(sent_keys(&upstream), ["Bearer sk-late"], "an unset secret was not kept as unset");
}
