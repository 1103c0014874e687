//! Provider components: the engine and linker (once), each component compiled
//! and linked into an `InstancePre` (once per file), a fresh `Store` per
//! attempt ([`Session`]).
//!
//! ```text
//! PluginEngine::new ──► ProviderRegistry::load ──► Provider::session ──► Session::{encode, decode, classify}
//!   engine, linker        embedded + folder          new Store + instance per attempt
//!   artifact cache        (file overrides by key)
//! ```

mod bounded;
mod cache;
mod convert;
mod embedded;
mod engine;
mod exports;
mod native;
mod provider;
mod registry;
mod retrieval;
mod sandbox;
mod session;
mod world;

pub use crate::config::DECISION_PROVIDER;
pub use crate::reach::Trust;
pub use embedded::{EMBEDDED, Embedded};
pub use engine::{ComponentSource, LoadedComponent, PluginEngine, component_digest};
pub use provider::{ComponentStream, PluginError, Provider, WireAnswers, addressing_of};
pub use registry::{LoadFailure, ProviderRegistry, Route, folder_fingerprint};
pub use session::{HOLD_WHILE_WAITING, KEPT_MEMORY_MAX, Session};
pub use world::{Operation, WORLD_VERSION, WORLD_VERSIONS};

/// The first-party components compiled into this binary: what `weir` runs
/// with when its providers folder is empty.
pub fn embedded_components() -> &'static [Embedded] {
    embedded::EMBEDDED
}
