//! The OpenAI Responses dialect at the gateway's door: `POST /v1/responses`
//! bodies in, `response` objects or typed SSE events out, errors in the OpenAI
//! envelope (the gateway's default, [`crate::server::ApiError`]). Pure mapping;
//! the call itself is the library's, so any catalog chat model answers,
//! whichever provider serves it: a body maps to a neutral
//! [`crate::chat::ChatRequest`] and the answer maps back.
//!
//! Reasoning a provider returns is sealed by the gateway ([`crate::seal`]) into
//! `reasoning` items and opened on the next turn; hosted tools go natively to a
//! provider that runs them (`openai-responses`), whose items come back in
//! place, and are dropped or refused elsewhere (see `tools`).

mod choice;
mod events;
mod request;
mod response;
mod tools;

pub use events::Events;
pub use request::{Body, Ingress, Unseal, input_items, into_chat_request};
pub use response::{Answer, output, response_body};
