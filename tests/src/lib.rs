//! Test support for the Weir workspace: a scriptable fake OpenAI upstream, builders for the
//! OpenAI and Anthropic wire formats, a fake AWS Bedrock that verifies SigV4 and writes event
//! streams ([`bedrock_wire`]), and a harness that runs the real `weir` binary.
//!
//! Wiring in a gateway test: start a [`FakeUpstream`], write a config whose provider base URL
//! is [`FakeUpstream::base_url`], start a [`Gateway`] with it, send OpenAI requests to
//! [`Gateway::base_url`], then assert on [`FakeUpstream::received`] and the answers.
//! See `tests/README.md` for the kinds of tests and how to add one.

// This crate is test support, not product code: a failed setup step should stop the test at
// once with a message, which is what unwrap/expect/panic do. The workspace denies them for
// library code; here they are the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod agents;
pub mod anthropic_wire;
pub mod azure_wire;
pub mod bedrock_wire;
pub mod decision_wire;
pub mod fake_idp;
pub mod fake_upstream;
pub mod gateway;
pub mod gemini_wire;
pub mod ledger_tamper;
pub mod openai_wire;
pub mod postgres_server;
pub mod python;
pub mod raw_socket;
pub mod redis_cluster;
pub mod redis_server;
pub mod responses_wire;
pub mod token_endpoints;

pub use fake_upstream::{FakeUpstream, Received, Scripted};
pub use gateway::{
    Gateway, Posted, closed_records, free_port, hello_m, kill_mid_load, ledger_config, run_cli, serve_router,
    weir_binary,
};
pub use postgres_server::PostgresServer;
pub use redis_cluster::RedisCluster;
pub use redis_server::RedisServer;

/// The test components `tests/build.rs` builds that other crates' benches load too.
pub mod components {
    /// `tests/operations`' versioned chat component built against the frozen
    /// `weir:provider@0.4.0` (its changed records cross through the host's conversion).
    pub const CHAT_0_4: &str = env!("WEIR_CHAT_0_4_WASM");
    /// The same component built against the frozen `weir:provider@0.5.0` (`wit/frozen/0.5.0`).
    pub const CHAT_0_5: &str = env!("WEIR_CHAT_0_5_WASM");
}
