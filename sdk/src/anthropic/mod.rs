//! The Anthropic Messages dialect, shared by every component that speaks it.
//!
//! Behind the `anthropic` feature: components of other dialects do not compile it.
//! The codec uses nothing but the SDK's records and helpers, so it tests natively.
//!
//! Flow of a call: [`encode`] builds the request; the host sends it and hands a 2xx
//! body to [`decode`], anything else to [`classify`]; a stream's events go one by one
//! to an [`AnthropicStream`].

mod errors;
mod request;
mod response;
mod stream;

pub use errors::classify;
pub use request::encode;
pub use response::decode;
pub use stream::AnthropicStream;
