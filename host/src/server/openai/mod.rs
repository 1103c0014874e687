//! The OpenAI Chat Completions dialect at the gateway's door: requests in,
//! `chat.completion` objects out. Pure mapping; the call itself is the library's.

mod request;
mod response;

pub use request::into_chat_request;
pub use response::completion_body;
