//! The cost of the component boundary: one chat call's translation work —
//! instantiate a fresh component instance, encode a ~4 KB conversation, decode a
//! ~4 KB response — against the very same OpenAI codec compiled natively, which
//! is serde_json doing the same encode and decode. Both run in this process, in
//! this run, so the ratio is meaningful on a noisy machine.

// Benchmark setup: a failed step should stop the run with its message.
#![allow(clippy::expect_used, clippy::unreachable, clippy::print_stderr)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use weir_host::plugin::{PluginEngine, ProviderRegistry};
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
        b.iter(|| {
            runtime.block_on(async {
                let request = provider.encode(black_box(&conversation), black_box(&host_params)).await.expect("encode");
                let decoded = provider.decode(black_box(&host_response)).await.expect("decode");
                black_box((request, decoded))
            })
        })
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
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
