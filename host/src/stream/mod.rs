//! Streaming: the host frames the transport (SSE, AWS event-stream) incrementally
//! with bounded buffers, the provider component's stream decoder turns each event
//! into normalized deltas, and provider-agnostic repair fixes wire shapes some
//! servers get wrong (cumulative snapshots, tool calls rendered as markup).

pub mod framing;
pub mod repair;
