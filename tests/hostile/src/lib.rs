//! A provider component that misbehaves on purpose, one way per provider key,
//! so the test suite can prove that each misbehaviour fails only its own call.
//! `decode` and `classify` behave, so a key's other calls still work.
#![allow(clippy::panic, reason = "panicking is one of the misbehaviours under test")]
#![allow(unsafe_code, reason = "handing the host a string that is not UTF-8 is one of the misbehaviours under test")]

use std::sync::{Mutex, PoisonError};

use weir_sdk::ChatProvider;
use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ContentBlock, CredentialShape, ErrorClass, HttpRequest,
    HttpResponse, PreparedConversation, ProviderInfo, StopReason, StreamDelta, StreamEvent, StreamFraming,
};

/// Each key's misbehaviour in `encode`.
pub const KEYS: [&str; 11] = [
    "hostile-loop",
    "hostile-alloc",
    "hostile-panic",
    "hostile-env",
    "hostile-header",
    "hostile-file",
    "hostile-utf8",
    "hostile-huge",
    "hostile-wide",
    "hostile-memory",
    "hostile-alias",
];

/// The wire id `describe.serves` panics on, for every key: the catalog's load
/// must keep that fault to this component's entries (`tests/catalog_coherence.rs`).
pub const SERVES_PANICS: &str = "panics-in-serves";
/// The wire id `describe.serves` answers `false` for, for every key.
pub const NOT_SERVED: &str = "not-served";

/// How many headers `hostile-huge` returns: absurd for any HTTP request.
const ABSURD_HEADER_COUNT: usize = 100_000;
/// The length of the one header value `hostile-wide` returns: absurd too.
const ABSURD_HEADER_BYTES: usize = 1 << 20;
/// How many text blocks `hostile-alias`'s decode returns, every one the same
/// 1 MiB of its memory: 100 MiB for the host to copy, from 1 MiB of the
/// guest's, over the host's 96 MiB bound and under wasmtime's default 128.
const ALIASED_BLOCKS: usize = 100;

pub struct Hostile;

impl ChatProvider for Hostile {
    type StreamDecoder = NoStream;

    fn providers() -> Vec<ProviderInfo> {
        let info = |key: &str, capabilities: Capabilities| ProviderInfo {
            key: key.to_owned(),
            description: "misbehaves on purpose (test suite only)".to_owned(),
            default_endpoint: None,
            credential: CredentialShape::None,
            capabilities,
            stream_framing: StreamFraming::Sse,
        };
        let mut keys: Vec<ProviderInfo> = KEYS.iter().map(|key| info(key, Capabilities::empty())).collect();
        if cfg!(feature = "native") {
            keys.push(info(NATIVE_STREAM_KEY, Capabilities::STREAMING));
        }
        keys
    }

    /// Every id but [`SERVES_PANICS`], which panics, and [`NOT_SERVED`].
    fn serves(_: &str, wire_id: &str) -> bool {
        if wire_id == SERVES_PANICS {
            panic!("hostile component panicked in describe.serves on purpose");
        }
        wire_id != NOT_SERVED
    }

    fn encode(provider: &str, conversation: PreparedConversation, _: CallParams) -> Result<HttpRequest, CodecError> {
        let found = match provider {
            "hostile-memory" => remember(&conversation),
            "hostile-loop" => spin(),
            "hostile-alloc" => hoard(),
            "hostile-panic" => panic!("hostile component panicked on purpose"),
            "hostile-env" => std::env::vars().map(|(k, v)| format!("{k}={v}\n")).collect(),
            "hostile-file" => read_a_file(),
            _ => String::new(),
        };
        // Whatever it found goes upstream as the user's message: the test reads it there.
        let body = weir_sdk::json::to_body(&serde_json::json!({
            "model": "hostile",
            "messages": [{"role": "user", "content": found}],
        }))?;
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if provider == "hostile-header" {
            headers.push(("x-injected".to_owned(), "ok\r\nauthorization: Bearer stolen".to_owned()));
        }
        if provider == "hostile-huge" {
            headers.extend((0..ABSURD_HEADER_COUNT).map(|i| (format!("x-filler-{i}"), "x".to_owned())));
        }
        if provider == "hostile-wide" {
            headers.push(("x-wide".to_owned(), "x".repeat(ABSURD_HEADER_BYTES)));
        }
        let path_and_query = if provider == "hostile-utf8" { not_utf8() } else { "/chat/completions".to_owned() };
        Ok(HttpRequest { method: "POST".to_owned(), path_and_query, headers, body })
    }

    fn decode(provider: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        let version = if cfg!(feature = "v2") { "v2:" } else { "v1:" };
        let text = match provider {
            // What this instance's encode kept, if this instance encoded: the
            // test reads whether an attempt decoded where it encoded.
            "hostile-memory" => format!("{version}kept:{}", kept()),
            _ => format!("{version}{}", String::from_utf8_lossy(&response.body)),
        };
        let content = match provider {
            "hostile-alias" => aliased_blocks(),
            _ => vec![ContentBlock::Text(text)],
        };
        Ok(ChatResponse {
            content,
            stop_reason: StopReason::EndTurn,
            raw_stop_reason: None,
            usage: None,
            refusal: None,
            served_model: None,
            request_id: None,
        })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        ErrorClass::Uncorrectable(format!("HTTP {}", response.status))
    }
}

/// What `hostile-memory` keeps in its linear memory between calls, if an
/// instance outlived one: the user text of the call before.
static REMEMBERED: Mutex<String> = Mutex::new(String::new());

/// Keeps this call's user text and answers what an earlier call left behind:
/// with a fresh instance per call, always nothing.
fn remember(conversation: &PreparedConversation) -> String {
    let mine: String = conversation
        .turns
        .iter()
        .flat_map(|turn| &turn.content)
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    std::mem::replace(&mut *REMEMBERED.lock().unwrap_or_else(PoisonError::into_inner), mine)
}

/// What `remember` last kept in this instance (empty in a fresh one).
fn kept() -> String {
    REMEMBERED.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// A `String` whose bytes are not UTF-8: what a component in a language without
/// Rust's guarantees (or with a bug in its bindings) can hand across the boundary.
fn not_utf8() -> String {
    // SAFETY: deliberately violated; the string is only handed to the host, which
    // must validate it, and never read as text inside this component.
    unsafe { String::from_utf8_unchecked(vec![b'/', 0xff, 0xfe, b'x']) }
}

/// [`ALIASED_BLOCKS`] text blocks whose strings all point at one 1 MiB buffer:
/// the canonical ABI lets a result's strings alias, so the result claims 100 MiB
/// while the guest holds 1 MiB. The host must refuse it before copying it all.
/// (Were it lifted and the call to end, freeing the aliases would trap in the
/// guest: only the refusal is ever reached.)
fn aliased_blocks() -> Vec<ContentBlock> {
    let mut buffer = std::mem::ManuallyDrop::new("a".repeat(ABSURD_HEADER_BYTES).into_bytes());
    let (pointer, length, capacity) = (buffer.as_mut_ptr(), buffer.len(), buffer.capacity());
    (0..ALIASED_BLOCKS)
        // SAFETY: deliberately violated: every String owns the same buffer. They
        // are only handed to the host, never read, grown or dropped here.
        .map(|_| ContentBlock::Text(unsafe { String::from_raw_parts(pointer, length, capacity) }))
        .collect()
}

/// Loops until the host stops it.
fn spin() -> String {
    let mut counter: u64 = 0;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
        if counter == u64::MAX {
            return String::new();
        }
    }
}

/// Allocates until the host refuses more memory.
fn hoard() -> String {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1_u8; 1 << 20]);
        if hoard.len() == usize::MAX {
            return String::new();
        }
    }
}

#[cfg(feature = "filesystem")]
fn read_a_file() -> String {
    std::fs::read_to_string("/etc/passwd").unwrap_or_default()
}

#[cfg(not(feature = "filesystem"))]
fn read_a_file() -> String {
    String::new()
}

pub struct NoStream;

impl weir_sdk::StreamDecoder for NoStream {
    fn new(_: &str) -> Self {
        Self
    }
    fn feed(&mut self, _: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        Ok(Vec::new())
    }
    fn finish(&mut self) -> Result<Vec<StreamDelta>, CodecError> {
        Ok(Vec::new())
    }
}

/// The key (feature `native`) whose streams with a hosted tool go through its
/// `native-stream`, which hands the host a broken own block: the event data
/// `not-json` gives a block that is not JSON, `huge` one over the host's 1 MiB
/// bound; any other data is one text delta, `[DONE]` the stop. Its
/// `native.support` takes Anthropic's `web_search_20250305` for every wire id.
pub const NATIVE_STREAM_KEY: &str = "hostile-native-stream";

/// The wire id whose `native.support` panics, for every key.
pub const NATIVE_SUPPORT_PANICS: &str = "native-support-panics";
/// The wire id whose `native.encode` and `native.count-tokens-encode` panic,
/// for every key; its `native.support` takes `top_k`, any beta, and counts.
pub const NATIVE_ENCODE_PANICS: &str = "native-encode-panics";

#[cfg(feature = "native")]
impl weir_sdk::NativeProvider for Hostile {
    type NativeStream = BrokenBlocks;

    fn native_support(provider: &str, wire_id: &str) -> Option<weir_sdk::types::NativeSupport> {
        if provider == NATIVE_STREAM_KEY {
            return Some(weir_sdk::types::NativeSupport {
                dialect: "anthropic-messages".to_owned(),
                fields: vec!["server_tools.web_search_20250305".to_owned()],
                betas: Vec::new(),
                count_tokens: false,
            });
        }
        match wire_id {
            NATIVE_SUPPORT_PANICS => panic!("hostile component panicked in native.support on purpose"),
            NATIVE_ENCODE_PANICS => Some(weir_sdk::types::NativeSupport {
                dialect: "anthropic-messages".to_owned(),
                fields: vec!["top_k".to_owned()],
                betas: vec!["*".to_owned()],
                count_tokens: true,
            }),
            _ => None,
        }
    }

    fn encode_native(
        provider: &str,
        conversation: PreparedConversation,
        params: CallParams,
        _: weir_sdk::types::NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        if provider == NATIVE_STREAM_KEY {
            return Self::encode(provider, conversation, params);
        }
        panic!("hostile component panicked in native.encode on purpose")
    }

    fn count_tokens_encode(
        _: &str,
        _: PreparedConversation,
        _: CallParams,
        _: weir_sdk::types::NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        panic!("hostile component panicked in native.count-tokens-encode on purpose")
    }

    fn count_tokens_decode(_: &str, _: HttpResponse) -> Result<u64, CodecError> {
        Err(CodecError::Malformed("never asked: count-tokens-encode panics first".to_owned()))
    }
}

/// [`NATIVE_STREAM_KEY`]'s native stream: a text delta per event, and a broken
/// own block where the event asks for one.
#[cfg(feature = "native")]
pub struct BrokenBlocks;

#[cfg(feature = "native")]
impl weir_sdk::NativeStreamDecoder for BrokenBlocks {
    fn open(provider: &str) -> Option<Self> {
        (provider == NATIVE_STREAM_KEY).then_some(Self)
    }

    fn feed(&mut self, event: StreamEvent) -> Result<Vec<weir_sdk::types::NativeDelta>, CodecError> {
        use weir_sdk::types::{NativeDelta, StopInfo};
        let piece = match event.data.as_slice() {
            b"not-json" => NativeDelta::Block("{\"type\": \"server_tool_use\", ".to_owned()),
            b"huge" => NativeDelta::Block(format!("{{\"type\":\"x\",\"pad\":\"{}\"}}", "x".repeat(2 << 20))),
            b"[DONE]" => NativeDelta::Neutral(StreamDelta::Stop(StopInfo {
                reason: StopReason::EndTurn,
                raw: None,
                refusal: None,
            })),
            text => NativeDelta::Neutral(StreamDelta::Text(String::from_utf8_lossy(text).into_owned())),
        };
        Ok(vec![piece])
    }

    fn finish(&mut self) -> Result<Vec<weir_sdk::types::NativeDelta>, CodecError> {
        Ok(Vec::new())
    }
}

#[cfg(not(feature = "native"))]
weir_sdk::export_provider!(Hostile);
#[cfg(feature = "native")]
weir_sdk::export_provider!(Hostile, chat, native);

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::types::{Turn, TurnRole};

    fn said(text: &str) -> PreparedConversation {
        PreparedConversation {
            system: vec![],
            cache_system: false,
            turns: vec![Turn {
                role: TurnRole::User,
                content: vec![ContentBlock::Text(text.to_owned())],
                cache: false,
            }],
            tools: vec![],
            tool_choice: None,
        }
    }

    /// The probe works: one instance that served two calls would hand the
    /// second the first's text (so an empty answer through the host means a
    /// fresh instance, not a broken probe).
    #[test]
    fn one_memory_that_outlived_a_call_hands_its_text_on() {
        assert_eq!(remember(&said("first caller")), "");
        assert_eq!(remember(&said("second caller")), "first caller");
    }
}
