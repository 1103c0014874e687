//! The cost of the component boundary: one chat call's translation work —
//! instantiate a fresh component instance, encode a ~4 KB conversation, decode a
//! ~4 KB response — against the very same OpenAI codec compiled natively, which
//! is serde_json doing the same encode and decode. Both run in this process, in
//! this run, so the ratio is meaningful on a noisy machine.
//!
//! The group `sandbox_limits_4k` prices the sandbox's limits (fuel, memory
//! ceiling, instance and table caps) the same way: the same round trip on an
//! engine with the limits and on the measurement-only engine without them, and
//! what yielding to the async runtime between fuel slices costs, against an
//! engine with the same limits whose calls never yield.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::unreachable, clippy::print_stderr)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tokio::runtime::Runtime;
use weir_host::plugin::{PluginEngine, Provider, ProviderRegistry};
use weir_host::types as host;
use weir_provider_openai::OpenAi;
use weir_sdk::ChatProvider;
use weir_sdk::types as sdk;

const TURNS: usize = 6;

fn sentence(turn: usize) -> String {
    format!("Turn {turn}: the quick brown fox jumps over the lazy dog while the gateway meters tokens. ").repeat(6)
}

fn host_conversation() -> host::Conversation {
    let mut conversation =
        host::Conversation::user(sentence(0)).with_system("You are a careful assistant. ".repeat(12));
    for turn in 1..TURNS {
        let block = vec![host::ContentBlock::Text(sentence(turn))];
        conversation.turns.push(if turn % 2 == 1 { host::Turn::assistant(block) } else { host::Turn::user(block) });
    }
    conversation.tools.push(host::ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        parameters_json: r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#.into(),
    });
    conversation
}

/// The same conversation in the SDK's types (what the component receives).
fn sdk_conversation(conversation: &host::Conversation) -> sdk::PreparedConversation {
    let text = |blocks: &[host::ContentBlock]| -> Vec<sdk::ContentBlock> {
        blocks
            .iter()
            .map(|block| match block {
                host::ContentBlock::Text(text) => sdk::ContentBlock::Text(text.clone()),
                _ => unreachable!("the benchmark conversation is text only"),
            })
            .collect()
    };
    sdk::PreparedConversation {
        system: conversation.system.clone(),
        cache_system: conversation.cache_system,
        turns: conversation
            .turns
            .iter()
            .map(|turn| sdk::Turn {
                role: match turn.role {
                    host::TurnRole::User => sdk::TurnRole::User,
                    host::TurnRole::Assistant => sdk::TurnRole::Assistant,
                },
                content: text(&turn.content),
                cache: turn.cache,
            })
            .collect(),
        tools: conversation
            .tools
            .iter()
            .map(|tool| sdk::ToolDefinition {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters_json: tool.parameters_json.clone(),
            })
            .collect(),
        tool_choice: None,
    }
}

fn response_body() -> Vec<u8> {
    let answer = "The gateway answered with a long and thoughtful paragraph. ".repeat(60);
    serde_json::to_vec(&serde_json::json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer, "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1117, "completion_tokens": 846, "total_tokens": 1963,
                  "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
    }))
    .expect("static JSON serializes")
}

/// What one chat call asks of its component: encode on a fresh instance, then
/// decode the response on another.
fn component_round_trip(
    runtime: &Runtime,
    provider: &Provider,
    conversation: &host::Conversation,
    params: &host::CallParams,
    response: &host::HttpResponse,
) -> (host::HttpRequest, host::DecodedResponse) {
    runtime.block_on(async {
        let request = provider.encode(black_box(conversation), black_box(params)).await.expect("encode");
        let decoded = provider.decode(black_box(response)).await.expect("decode");
        black_box((request, decoded))
    })
}

/// Criterion measures one engine after the other, so a burst of load from other
/// work on this shared machine can land on one of them only. This alternates the
/// two in short batches, swapping which goes first every round so that neither
/// always follows the other, and returns the median of the per-round ratios
/// (limited / unlimited), which such a burst moves far less.
fn paired_limits_overhead(mut limited: impl FnMut(), mut unlimited: impl FnMut()) -> f64 {
    const ROUNDS: usize = 41;
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|round| {
            let (on, off) = if round % 2 == 0 {
                let on = time_batch(&mut limited);
                (on, time_batch(&mut unlimited))
            } else {
                let off = time_batch(&mut unlimited);
                (time_batch(&mut limited), off)
            };
            on.as_secs_f64() / off.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ROUNDS / 2]
}

/// The time of 100 calls in a row.
fn time_batch(call: &mut impl FnMut()) -> Duration {
    let started = Instant::now();
    for _ in 0..100 {
        call();
    }
    started.elapsed()
}

fn round_trip(c: &mut Criterion) {
    let cache = std::env::temp_dir().join("weir-bench-cache");
    let engine = PluginEngine::new(Some(cache)).expect("engine");
    let registry = ProviderRegistry::load(&engine, None).expect("embedded components");
    let provider = registry.get("openai").expect("openai provider");

    let conversation = host_conversation();
    let host_params = host::CallParams {
        wire_model_id: "gpt-4.1".into(),
        max_tokens: 1024,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: Some(0.2),
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    };
    let body = response_body();
    let host_response =
        host::HttpResponse { status: 200, headers: vec![("x-request-id".into(), "req_1".into())], body: body.clone() };
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let encoded_size = runtime.block_on(provider.encode(&conversation, &host_params)).expect("encode").body.len();
    eprintln!("request body {encoded_size} bytes, response body {} bytes", body.len());

    let sdk_conv = sdk_conversation(&conversation);
    let sdk_params = sdk::CallParams {
        wire_model_id: "gpt-4.1".into(),
        max_tokens: 1024,
        thinking_budget: None,
        reasoning_effort: None,
        temperature: Some(0.2),
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    };
    let sdk_response = sdk::HttpResponse { status: 200, headers: vec![("x-request-id".into(), "req_1".into())], body };

    let mut group = c.benchmark_group("chat_round_trip_4k");
    group.bench_function("component: instantiate + encode + decode", |b| {
        b.iter(|| component_round_trip(&runtime, provider, &conversation, &host_params, &host_response))
    });
    let tiny = host::HttpResponse { status: 418, headers: Vec::new(), body: Vec::new() };
    group.bench_function("component: instantiate + trivial call (classify an empty 418)", |b| {
        b.iter(|| black_box(runtime.block_on(provider.classify(black_box(&tiny))).expect("classify")))
    });
    group.bench_function("component: instantiate + encode", |b| {
        b.iter(|| {
            black_box(
                runtime.block_on(provider.encode(black_box(&conversation), black_box(&host_params))).expect("encode"),
            )
        })
    });
    group.bench_function("component: instantiate + decode", |b| {
        b.iter(|| black_box(runtime.block_on(provider.decode(black_box(&host_response))).expect("decode")))
    });
    group.bench_function("native: serde_json encode + decode (same codec)", |b| {
        b.iter(|| {
            let request =
                OpenAi::encode("openai", black_box(sdk_conv.clone()), black_box(sdk_params.clone())).expect("encode");
            let decoded = OpenAi::decode("openai", black_box(sdk_response.clone())).expect("decode");
            black_box((request, decoded))
        })
    });
    group.finish();

    // The same components on an engine without fuel or store limits. Its own
    // cache entries: fuel changes the compiled code, hence the engine's hash.
    let unlimited_engine =
        PluginEngine::without_limits_for_measurement(Some(std::env::temp_dir().join("weir-bench-cache")))
            .expect("engine without limits");
    let unlimited_registry = ProviderRegistry::load(&unlimited_engine, None).expect("embedded components");
    let unlimited = unlimited_registry.get("openai").expect("openai provider");
    let mut group = c.benchmark_group("sandbox_limits_4k");
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("limits enforced: instantiate + encode + decode", |b| {
        b.iter(|| component_round_trip(&runtime, provider, &conversation, &host_params, &host_response))
    });
    group.bench_function("limits off (measurement only): instantiate + encode + decode", |b| {
        b.iter(|| component_round_trip(&runtime, unlimited, &conversation, &host_params, &host_response))
    });
    group.finish();
    let round_trip = paired_limits_overhead(
        || {
            black_box(component_round_trip(&runtime, provider, &conversation, &host_params, &host_response));
        },
        || {
            black_box(component_round_trip(&runtime, unlimited, &conversation, &host_params, &host_response));
        },
    );
    // Next to a call that runs almost no guest code: what the limits cost per
    // store, apart from fuel metering the guest's instructions.
    let trivial_call = paired_limits_overhead(
        || {
            black_box(runtime.block_on(provider.classify(black_box(&tiny))).expect("classify"));
        },
        || {
            black_box(runtime.block_on(unlimited.classify(black_box(&tiny))).expect("classify"));
        },
    );
    // What yielding to the async runtime between fuel slices costs a normal
    // call: the serving engine against one whose stores never yield.
    let no_yield_engine =
        PluginEngine::without_yield_for_measurement(Some(std::env::temp_dir().join("weir-bench-cache")))
            .expect("engine without yielding");
    let no_yield_registry = ProviderRegistry::load(&no_yield_engine, None).expect("embedded components");
    let no_yield = no_yield_registry.get("openai").expect("openai provider");
    let yielding = paired_limits_overhead(
        || {
            black_box(component_round_trip(&runtime, provider, &conversation, &host_params, &host_response));
        },
        || {
            black_box(component_round_trip(&runtime, no_yield, &conversation, &host_params, &host_response));
        },
    );
    eprintln!("sandbox limits, enforced / off, median of interleaved batches:");
    eprintln!("  instantiate + encode + decode: {round_trip:.3} ({:+.1}%)", (round_trip - 1.0) * 100.0);
    eprintln!("  instantiate + trivial call:    {trivial_call:.3} ({:+.1}%)", (trivial_call - 1.0) * 100.0);
    eprintln!("yielding between fuel slices, serving engine / never yielding, median of interleaved batches:");
    eprintln!("  instantiate + encode + decode: {yielding:.3} ({:+.1}%)", (yielding - 1.0) * 100.0);
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
