//! Streaming: the host frames the transport (SSE, AWS event-stream) incrementally
//! with bounded buffers, the provider component's stream decoder turns each event
//! into normalized deltas, and provider-agnostic repair fixes wire shapes some
//! servers get wrong (cumulative snapshots, tool calls rendered as markup).

mod assemble;
mod chat_stream;
pub mod framing;
pub mod repair;
mod upstream;

pub use assemble::{Assembler, InPlace, deltas_of};
pub use chat_stream::ChatStream;
pub(crate) use chat_stream::{Ready, STREAM_BUFFER};
pub use upstream::{StreamFailure, UpstreamStream};
