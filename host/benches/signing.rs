//! What SigV4 adds to a request: building a 4 KB JSON request with a header
//! credential (the baseline every other provider pays) vs building it and signing
//! it (`aws-sigv4`: canonical request, body hash, HMAC chain), in one run. Printed
//! as a ratio; the absolute figures are this machine's.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::print_stderr, reason = "a benchmark reports on stderr")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use aws_credential_types::Credentials;
use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::transport::{IdentitySource, SigV4};

const URL: &str = "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-opus-5/invoke";

fn body() -> Vec<u8> {
    let text = "lorem ipsum dolor sit amet ".repeat(150);
    format!(r#"{{"anthropic_version":"bedrock-2023-05-31","max_tokens":512,"messages":[{{"role":"user","content":"{text}"}}]}}"#)
        .into_bytes()
}

fn request(client: &reqwest::Client, body: &[u8]) -> reqwest::Request {
    client
        .post(URL)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_vec())
        .build()
        .expect("request")
}

fn signer() -> SigV4 {
    SigV4 {
        credentials: Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "bench"),
        region: "us-east-1".to_owned(),
        service: "bedrock".to_owned(),
        source: IdentitySource::SecretStore,
    }
}

fn header_credential(client: &reqwest::Client, body: &[u8]) -> reqwest::Request {
    let mut request = request(client, body);
    let mut value = reqwest::header::HeaderValue::from_static("Bearer sk-bench");
    value.set_sensitive(true);
    request.headers_mut().insert("authorization", value);
    request
}

fn signed(client: &reqwest::Client, body: &[u8], signer: &SigV4) -> reqwest::Request {
    let mut request = request(client, body);
    signer.sign(&mut request).expect("sign");
    request
}

/// Mean time of `f` over `iterations`, after a warm-up.
fn mean(iterations: u32, mut f: impl FnMut()) -> Duration {
    for _ in 0..iterations / 10 {
        f();
    }
    let started = Instant::now();
    for _ in 0..iterations {
        f();
    }
    started.elapsed() / iterations
}

fn bench(c: &mut Criterion) {
    let client = reqwest::Client::new();
    let body = body();
    let signer = signer();
    let mut group = c.benchmark_group("request_credential");
    group.bench_function("header", |b| b.iter(|| black_box(header_credential(&client, &body))));
    group.bench_function("sigv4", |b| b.iter(|| black_box(signed(&client, &body, &signer))));
    group.finish();

    // Interleaved batches, so both sides see the same machine load.
    let (mut header, mut sigv4) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..5 {
        header += mean(2_000, || drop(black_box(header_credential(&client, &body))));
        sigv4 += mean(2_000, || drop(black_box(signed(&client, &body, &signer))));
    }
    eprintln!(
        "4 KB request: header credential {:.1} µs, SigV4 {:.1} µs: signing adds {:.1} µs ({:.2}x)",
        header.as_secs_f64() * 1e6 / 5.0,
        sigv4.as_secs_f64() * 1e6 / 5.0,
        (sigv4.as_secs_f64() - header.as_secs_f64()) * 1e6 / 5.0,
        sigv4.as_secs_f64() / header.as_secs_f64()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
