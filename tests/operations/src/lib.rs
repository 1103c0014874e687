//! Provider components that each export one operation, written against the WIT
//! with wit-bindgen directly, so the host's loading and calling of each world
//! version and operation mix is tested without the SDK in between:
//!
//! - `chat-0-1`: `describe` + `chat` of the frozen `weir:provider@0.1.0`, key
//!   `legacy`, with a stateful stream decoder;
//! - `embeddings`: `describe` + `embeddings` of 0.2.0, key `embed-only`;
//! - `rerank`: `describe` + `rerank` of 0.2.0, key `rerank-only`.
//!
//! Each speaks a small JSON dialect of its own (the tests' fakes speak it
//! back) and misbehaves for a few wire ids, named by the constants below.
//! Only the `wasm32` build has content: natively the WIT export names are not
//! valid linker symbols, and nothing native uses this crate.
#![allow(clippy::panic, reason = "panicking on a named wire id is a misbehaviour under test")]

/// The wire id every `serves` answers `false` for.
pub const NOT_SERVED: &str = "not-served";
/// The wire id `embeddings.serves` panics on.
pub const SERVES_PANICS: &str = "panics-in-serves";
/// The wire id `embeddings.max-batch` panics on.
pub const MAX_BATCH_PANICS: &str = "panics-in-max-batch";
/// The wire id `embeddings.max-batch` answers 0 for (a contract violation).
pub const MAX_BATCH_ZERO: &str = "zero-batch";
/// The wire id `embeddings.max-batch` answers 1 for (one input per request).
pub const ONE_PER_REQUEST: &str = "one-per-request";
/// What `embeddings.max-batch` answers for every other wire id.
pub const MAX_BATCH: u32 = 4;
/// The wire id whose `embeddings.encode` returns more headers than the host takes.
pub const TOO_MANY_HEADERS: &str = "too-many-headers";
/// How many headers it returns.
pub const ABSURD_HEADER_COUNT: usize = 100_000;

#[cfg(all(target_arch = "wasm32", feature = "chat-0-1"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod chat_0_1;

#[cfg(all(target_arch = "wasm32", feature = "embeddings"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod embeddings;

#[cfg(all(target_arch = "wasm32", feature = "rerank"))]
#[allow(unsafe_code, reason = "wit-bindgen's generated export glue")]
mod rerank;

/// A JSON body as bytes. Serializing a `serde_json::Value` cannot fail.
#[cfg(target_arch = "wasm32")]
fn body(value: &serde_json::Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The value of header `name` (case-insensitive).
#[cfg(all(target_arch = "wasm32", any(feature = "chat-0-1", feature = "embeddings")))]
fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
}
