//! Pre-emptive admission through the real gateway: capacity is debited before a
//! call goes upstream, so a burst becomes a paced queue instead of a storm of 429s.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use serde_json::{Value, json};
use weir_tests::{FakeUpstream, Gateway, openai_wire};

fn config(upstream: &FakeUpstream, limits: &str) -> String {
    format!(
        r#"
[[model]]
id = "paced"
provider = "openai-compatible"
wire_id = "any"
endpoint = "{url}"
max_output_tokens = 1000
context_window = 100000
output_tokens = 20
max_retries = 0
{limits}
"#,
        url = upstream.base_url()
    )
}

fn hello() -> Value {
    json!({"model": "paced", "messages": [{"role": "user", "content": "Hello"}]})
}

async fn post(client: &reqwest::Client, gateway: &Gateway, body: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = client.post(gateway.url("/v1/chat/completions")).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn coefficient(gateway: &Gateway) -> f64 {
    let models: Value = reqwest::get(gateway.url("/v1/models")).await.unwrap().json().await.unwrap();
    let model = models["data"].as_array().unwrap().iter().find(|m| m["id"] == "paced").unwrap();
    model["weir"]["admission"]["throttle_coefficient"].as_f64().unwrap()
}

/// 200 calls at once against `rpm = 60`, in front of an upstream that answers 429
/// past 60 requests per minute: the first 60 go at once, the rest are paced one a
/// second, no 429 ever reaches the upstream's counter, and every call succeeds.
/// (Real time: about 140 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_calls_at_rpm_60_never_see_a_429() {
    let upstream = FakeUpstream::start().await;
    upstream.limit_requests_per_minute(60);
    let gateway = Gateway::start(&config(&upstream, "rpm = 60")).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(400)).build().unwrap();

    let calls: Vec<_> = (0..200)
        .map(|_| {
            let client = client.clone();
            let url = gateway.url("/v1/chat/completions");
            tokio::spawn(async move {
                let response = client.post(url).json(&hello()).send().await.unwrap();
                response.status().as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.unwrap());
    }
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    assert_eq!(upstream.rate_limited_count(), 0, "no 429 reached the upstream");
    assert_eq!(upstream.request_count(), 200);
}

#[tokio::test]
async fn a_scripted_429_and_529_move_the_coefficient_by_their_weight() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "")).await;
    let client = reqwest::Client::new();
    assert_eq!(coefficient(&gateway).await, 0.0);

    upstream.push(openai_wire::rate_limited(1));
    let (status, _) = post(&client, &gateway, &hello(), &[]).await;
    assert_eq!(status, 429);
    assert_eq!(coefficient(&gateway).await, 0.5, "a 429 adds 0.5");

    upstream.push(openai_wire::json_response(
        529,
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ));
    let (status, _) = post(&client, &gateway, &hello(), &[]).await;
    assert_eq!(status, 503);
    assert_eq!(coefficient(&gateway).await, 2.0, "an overload adds 1.5");

    upstream.push(openai_wire::server_error());
    post(&client, &gateway, &hello(), &[]).await;
    assert_eq!(coefficient(&gateway).await, 2.0, "a transient 5xx feeds nothing");

    for _ in 0..3 {
        let (status, _) = post(&client, &gateway, &hello(), &[]).await;
        assert_eq!(status, 200);
    }
    let after = coefficient(&gateway).await;
    assert!((after - 1.8).abs() < 1e-9, "every third success subtracts 0.2: {after}");
}

#[tokio::test]
async fn a_demand_beyond_the_budget_fails_at_once_naming_both_numbers() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "tpm = 100")).await;
    let mut body = hello();
    body["max_tokens"] = json!(500);
    let (status, answer) = post(&reqwest::Client::new(), &gateway, &body, &[]).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["type"], "capacity_exceeded");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("100 per minute") && message.contains("tokens"), "{message}");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn a_deadline_before_capacity_frees_fails_at_once() {
    let upstream = FakeUpstream::start().await;
    let gateway = Gateway::start(&config(&upstream, "rpm = 1")).await;
    let client = reqwest::Client::new();
    let (status, _) = post(&client, &gateway, &hello(), &[]).await;
    assert_eq!(status, 200);
    // The next request slot frees up in ~60 s; the caller waits 200 ms at most.
    let (status, answer) = post(&client, &gateway, &hello(), &[("x-weir-deadline-ms", "200")]).await;
    assert_eq!(status, 504, "{answer}");
    assert_eq!(answer["error"]["type"], "timeout");
    assert!(answer["error"]["message"].as_str().unwrap().contains("after the caller's deadline"), "{answer}");
    assert_eq!(upstream.request_count(), 1);

    let (status, answer) = post(&client, &gateway, &hello(), &[("x-weir-deadline-ms", "soon")]).await;
    assert_eq!(status, 400, "{answer}");
}
