//! The Anthropic Messages dialect at the gateway's door: `POST /v1/messages`
//! bodies in, `message` objects or named SSE events out, errors in the Anthropic
//! envelope. Pure mapping; the call itself is the library's, so any catalog model
//! answers, whichever provider serves it.

mod betas;
mod error;
mod events;
mod own_blocks;
mod request;
mod response;

pub use betas::take_betas;
pub use error::AnthropicError;
pub use events::Events;
pub use own_blocks::OwnBlockEvents;
pub use request::{DIALECT, Ingress, Purpose, into_chat_request};
pub use response::message_body;
