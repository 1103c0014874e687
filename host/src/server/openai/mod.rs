//! The OpenAI Chat Completions dialect at the gateway's door: requests in,
//! `chat.completion` objects or `chat.completion.chunk` streams out. Pure mapping; the call itself is the library's.

mod chunks;
mod request;
mod response;
mod wire;

pub use chunks::ChunkWriter;
pub use request::{Ingress, into_chat_request};
pub use response::completion_body;
