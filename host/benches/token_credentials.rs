//! What a minted credential adds to a call once its token is kept: resolving a
//! `[credentials.ID]` Google or Entra ID token (the kept token's freshness
//! check and handing out its prebuilt `Bearer` value) vs resolving a plain
//! bearer key from the secret store (through the same scoped, cached store a
//! call uses), in one run. The tokens are minted once, before timing, from the
//! fake token endpoints the integration tests use; minting itself is never
//! on a timed path. Printed as µs per call and a ratio; the absolute figures are
//! this machine's.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::Config;
use weir_host::transport::{
    AwsIdentity, ConfiguredIds, Credential, EnvSecretStore, Secret, SecretCache, SecretStore, TokenCredentials,
    TokenSource,
};
use weir_host::types::{CredentialShape, HeaderCredential};
use weir_tests::token_endpoints::{EntraExpect, FakeTokenEndpoint, TestKey};

/// The store behind the scope: the bearer key and the Entra client secret.
#[derive(Debug)]
struct Store;

impl SecretStore for Store {
    fn get(&self, id: &str) -> Option<Secret> {
        match id {
            "bench-key" => Some(Secret::new("sk-bench-0123456789")),
            "azure-secret" => Some(Secret::new("azure-secret-value")),
            _ => None,
        }
    }
    fn location(&self, id: &str) -> String {
        EnvSecretStore.location(id)
    }
}

fn shape() -> CredentialShape {
    CredentialShape::Header(HeaderCredential {
        default_credential_id: "bench-key".to_owned(),
        header_name: "authorization".to_owned(),
        prefix: "Bearer ".to_owned(),
        required: true,
    })
}

/// Google and Entra ID credentials against fake endpoints, each token minted once.
fn minted(runtime: &tokio::runtime::Runtime, dir: &std::path::Path) -> TokenCredentials {
    runtime.block_on(async {
        let key = TestKey::generate();
        let google = FakeTokenEndpoint::google(&key).await;
        let entra = FakeTokenEndpoint::entra(
            &key,
            EntraExpect {
                tenant: "t".into(),
                client_id: "c".into(),
                client_secret: "azure-secret-value".into(),
                ..EntraExpect::default()
            },
        )
        .await;
        let file = dir.join("sa.json");
        std::fs::write(&file, key.service_account_json(&google.token_uri())).expect("write the key file");
        let tables = format!(
            "[credentials.vertex]\nkind = \"google\"\nservice_account_file = \"{}\"\n\n[credentials.azure]\n\
             kind = \"entra\"\ntenant_id = \"t\"\nclient_id = \"c\"\nclient_secret = \"azure-secret\"\n\
             authority_host = \"{}\"\n",
            file.display(),
            entra.base_url
        );
        let config = Config::from_toml(&tables, "bench.toml").expect("config");
        let tokens = TokenCredentials::from_config(&config).expect("token credentials");
        let ids = ConfiguredIds::new(["azure-secret"]);
        let cache = SecretCache::new(Duration::from_secs(30));
        let store = ids.scope(&Store, &cache, Arc::new(BTreeSet::new()));
        for id in ["vertex", "azure"] {
            tokens.get(id).expect("declared").bearer(&store).await.expect("minted once");
        }
        tokens
    })
}

/// Mean time of one resolution over `iterations`, after a warm-up, on `runtime`.
fn mean(
    runtime: &tokio::runtime::Runtime,
    iterations: u32,
    id: &str,
    source: Option<&TokenSource>,
    store: &dyn SecretStore,
) -> Duration {
    let aws = AwsIdentity::default();
    let shape = shape();
    runtime.block_on(async {
        let resolve = || Credential::resolve("p", &shape, Some(id), store, &aws, source);
        for _ in 0..iterations / 10 {
            black_box(resolve().await.expect("resolved"));
        }
        let started = Instant::now();
        for _ in 0..iterations {
            black_box(resolve().await.expect("resolved"));
        }
        started.elapsed() / iterations
    })
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = minted(&runtime, dir.path());
    let ids = ConfiguredIds::new(["bench-key", "azure-secret"]);
    let cache = SecretCache::new(Duration::from_secs(30));
    let store = ids.scope(&Store, &cache, Arc::new(BTreeSet::new()));
    let (google, entra) = (tokens.get("vertex"), tokens.get("azure"));

    let mut group = c.benchmark_group("resolve_credential");
    group.bench_function("bearer_key", |b| b.iter(|| mean(&runtime, 100, "bench-key", None, &store)));
    group.bench_function("google_token", |b| b.iter(|| mean(&runtime, 100, "vertex", google, &store)));
    group.bench_function("entra_token", |b| b.iter(|| mean(&runtime, 100, "azure", entra, &store)));
    group.finish();

    // Interleaved batches, so every side sees the same machine load.
    let (mut key, mut google_total, mut entra_total) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    const ROUNDS: u32 = 5;
    for _ in 0..ROUNDS {
        key += mean(&runtime, 20_000, "bench-key", None, &store);
        google_total += mean(&runtime, 20_000, "vertex", google, &store);
        entra_total += mean(&runtime, 20_000, "azure", entra, &store);
    }
    let micros = |total: Duration| total.as_secs_f64() * 1e6 / f64::from(ROUNDS);
    for (name, total) in [("Google", google_total), ("Entra ID", entra_total)] {
        eprintln!(
            "resolve a credential: bearer key {:.3} µs, kept {name} token {:.3} µs: the token adds {:.3} µs ({:.2}x)",
            micros(key),
            micros(total),
            micros(total) - micros(key),
            total.as_secs_f64() / key.as_secs_f64()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
