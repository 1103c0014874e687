//! The `openai-responses` key: OpenAI's Responses API (`POST /responses`) for
//! the same models. Why a second wire for them: reasoning. Chat Completions
//! returns none of a reasoning model's reasoning, so each turn of a tool loop
//! reasons again from nothing; the Responses API returns it as an encrypted
//! `reasoning` item the next turn sends back. Here that item travels as a
//! thinking block whose signature is the item's `id` and `encrypted_content`
//! (see [`signature`]), the way a Claude thinking block carries its own: the
//! host keeps it with the conversation and hands it back verbatim.
//!
//! Weir never asks OpenAI to keep anything (`store: false`): the gateway holds
//! the conversation, and the encrypted reasoning is what makes that work.

mod answer;
pub mod hosted;
pub mod native;
mod native_stream;
mod request;
pub mod signature;
mod stream;

/// An SSE event as the host frames one of the Responses stream's `data`
/// objects (its `type` as the event name), for the stream decoders' tests.
#[cfg(test)]
fn test_event(data: &serde_json::Value) -> weir_sdk::types::StreamEvent {
    weir_sdk::types::StreamEvent {
        name: data["type"].as_str().map(str::to_owned),
        headers: vec![],
        data: data.to_string().into_bytes(),
    }
}

pub use answer::decode;
pub use native_stream::ResponsesNativeStream;
pub use request::encode;
pub use stream::ResponsesStream;
