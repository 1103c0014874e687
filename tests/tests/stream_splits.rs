//! Property: however the upstream's bytes are split into chunks on the wire, the
//! streamed answer decodes the same — through the host's SSE framing, the real
//! OpenAI component's stream decoder (instantiated by wasmtime, one instance held
//! for the stream) and the wire-shape repair, as a live stream runs them.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::json;
use weir_host::plugin::{PluginEngine, Provider, ProviderRegistry};
use weir_host::stream::Assembler;
use weir_host::stream::framing::FrameDecoder;
use weir_host::stream::repair::StreamRepair;
use weir_host::types::{DecodedResponse, StreamFraming};
use weir_tests::openai_wire::{COMPLETION_ID, MODEL, chunk_json, sse_done, sse_frame, usage_chunk_json, usage_json};

/// A stream exercising every path: reasoning, CRLF-framed text, multi-byte
/// characters, a tool call rendered as markup split across chunks, usage after
/// the finish, `[DONE]`.
fn upstream_body() -> Vec<u8> {
    let chunk = |delta: serde_json::Value| sse_frame(&chunk_json(COMPLETION_ID, MODEL, delta, None, None));
    let frames = [
        chunk(json!({"role": "assistant", "content": ""})),
        chunk(json!({"reasoning_content": "Weighing the options… "})),
        chunk(json!({"content": "Ça va? 🦀 Let me check."})),
        chunk(
            json!({"content": " <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"note\": \"a } brace\"}}"}),
        ),
        chunk(json!({"content": "</tool_call>"})),
        sse_frame(&chunk_json(COMPLETION_ID, MODEL, json!({}), Some("stop"), None)),
        sse_frame(&usage_chunk_json(COMPLETION_ID, MODEL, usage_json(12, 34, 0, 0))),
        sse_done(),
    ];
    let mut body: Vec<u8> = frames.iter().flat_map(|frame| frame.to_vec()).collect();
    // One event framed with CRLF line ends, as some servers send.
    body.extend_from_slice(b": keep-alive\r\n\r\n");
    body
}

fn provider() -> Arc<Provider> {
    static REGISTRY: OnceLock<ProviderRegistry> = OnceLock::new();
    let registry = REGISTRY.get_or_init(|| {
        let cache = std::env::temp_dir().join("weir-stream-splits-cache");
        ProviderRegistry::load(&PluginEngine::new(Some(cache)).unwrap(), None).unwrap()
    });
    Arc::clone(registry.get("openai-compatible").unwrap())
}

/// The body fed in the given chunks, decoded as a live stream decodes it.
async fn decode(chunks: &[&[u8]]) -> DecodedResponse {
    let mut framer = FrameDecoder::new(StreamFraming::Sse);
    let mut decoder = provider().open_stream().await.unwrap();
    let mut repair = StreamRepair::new();
    let mut deltas: Vec<weir_host::types::StreamDelta> = Vec::new();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(framer.push(chunk).unwrap());
    }
    events.extend(framer.finish().unwrap());
    for event in &events {
        for delta in decoder.feed(event).await.unwrap() {
            deltas.extend(repair.push(delta));
        }
    }
    for delta in decoder.finish().await.unwrap() {
        deltas.extend(repair.push(delta));
    }
    deltas.extend(repair.finish());
    let mut assembler = Assembler::default();
    deltas.into_iter().for_each(|delta| assembler.push(delta));
    assembler.finish()
}

fn split(body: &[u8], mut cuts: Vec<usize>) -> Vec<&[u8]> {
    cuts.iter_mut().for_each(|cut| *cut %= body.len() + 1);
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([body.len()]) {
        pieces.push(&body[start..cut]);
        start = cut;
    }
    pieces
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn the_unsplit_stream_decodes_to_the_expected_answer() {
    let body = upstream_body();
    let answer = runtime().block_on(decode(&[&body]));
    let text: String = answer
        .content
        .iter()
        .filter_map(|b| match b {
            weir_host::types::ContentBlock::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Ça va? 🦀 Let me check. ");
    let calls: Vec<_> = answer
        .content
        .iter()
        .filter_map(|b| match b {
            weir_host::types::ContentBlock::ToolUse(call) => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "get_weather");
    let input: serde_json::Value = serde_json::from_str(&calls[0].input_json).unwrap();
    assert_eq!(input, json!({"city": "Zürich", "note": "a } brace"}));
    assert_eq!(answer.stop_reason, weir_host::types::StopReason::ToolUse, "markup calls make a tool-use stop");
    assert_eq!(answer.usage.unwrap().output, 34);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_split_of_the_bytes_decodes_the_same(cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
        let body = upstream_body();
        let runtime = runtime();
        let whole = runtime.block_on(decode(&[&body]));
        let pieces = runtime.block_on(decode(&split(&body, cuts)));
        prop_assert_eq!(pieces, whole);
    }

}

#[test]
fn one_byte_at_a_time_decodes_the_same() {
    let body = upstream_body();
    let runtime = runtime();
    let whole = runtime.block_on(decode(&[&body]));
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    let pieces = runtime.block_on(decode(&bytes));
    assert_eq!(pieces, whole);
}
