//! # Weir: one funnel for model calls
//!
//! Weir is a library a service embeds (and the `weir` binary runs as an HTTP
//! gateway). Every model call goes through one path owned by this host — the
//! output budget, credentials, network I/O and error normalization — while
//! everything that differs between providers lives in a provider *component*, a
//! WebAssembly component that only translates records to HTTP and back.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use weir_host::{ChatRequest, Config, Weir, types::Conversation};
//!
//! let weir = Weir::builder().config(Config::embedded_default()?).build()?;
//! let request = ChatRequest::new("gpt-4.1-mini", Conversation::user("Say hi")).max_output_tokens(64);
//! let answer = weir.chat(request).await?;
//! println!("{} ({:?})", answer.text(), answer.usage);
//! # Ok(()) }
//! ```
//!
//! ## Layers
//!
//! Each layer uses only itself and the layers below it; `tests/layers.rs`
//! reads the `crate::` graph and fails on an edge up, on a cycle of more than
//! two modules, and on a module no layer names. Lowest first:
//!
//! ```text
//! surfaces    server (the edge and the routes), check (`weir check`); the binary
//! operations  runtime (the Weir handle), call (the call template and its stages),
//!             stream, retrieval, decision, status, error (the call's error,
//!             composing every layer's own)
//! state       admission, identity (the key ring), fleet, budget, ledger, stored,
//!             metrics, telemetry, routing (roles and the picker), answer_cache,
//!             admin (the admin plane's store, its chain and its changes)
//! catalog     catalog (resolved entries and links), compliance, seal
//! boundaries  plugin (provider components), transport (HTTP, credentials, SigV4)
//! vocabulary  types, wit (the WIT records), failure (categories and retry policy
//!             as data), config (the schema and its shape checks; it builds
//!             nothing), reach (where a secret may go), record, chat, caller,
//!             accounting, estimate, redact, memo, log_writer
//! ```
//!
//! One pair is a cycle on purpose: `runtime` runs `call`, whose stages read
//! the handle's parts. Each subsystem is built from its settings in `config`
//! (by `runtime`'s builder); each layer fails with its own error
//! (`AdmissionError`, `ReserveError`, `BudgetError`, `ComplianceRefusal`,
//! `PluginError`, `TransportError`, `ReachError`, …), and `error::WeirError`
//! composes them for the caller, with the categories of `failure`.

mod accounting;
pub mod admin;
pub mod admission;
pub mod answer_cache;
pub mod budget;
mod call;
mod caller;
pub mod catalog;
mod chat;
pub mod check;
pub mod compliance;
mod config;
pub mod decision;
mod error;
mod estimate;
mod failure;
pub mod fleet;
pub mod identity;
pub mod ledger;
pub mod log_writer;
mod memo;
pub mod metrics;
pub mod plugin;
pub mod reach;
pub mod record;
pub mod redact;
pub mod retrieval;
pub mod routing;
mod runtime;
pub mod seal;
pub mod server;
mod status;
pub mod stored;
pub mod stream;
pub mod telemetry;
pub mod transport;
pub mod types;
mod wit;

pub use call::{CountedBy, InputCount};
pub use caller::Caller;
pub use catalog::{Catalog, Config, ConfigError, ModelSpec, PriceFile};
pub use chat::{CacheMultipliers, ChatRequest, ChatResponse, NativeAsk, NativeDropped, Stamp, Truncation};
pub use error::{CallError, Pending, WeirError};
pub use failure::{Category, SignalPolicy, UpstreamClass};
pub use metrics::Metrics;
pub use runtime::{BuildError, Weir, WeirBuilder, default_cache_dir};
pub use status::{
    ConnectionFact, DeploymentStatus, ModelStatus, ProviderStatus, Resolution, RoleStatus, UnsetCredential,
};
pub use stream::ChatStream;
