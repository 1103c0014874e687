//! The WIT records, as wasmtime's `bindgen!` generates them: the vocabulary
//! every layer of the host speaks ([`crate::types`] re-exports them). The one
//! place `bindgen!` runs; it sits below the provider components' module
//! (`plugin`), which calls a component's functions with these records.
//!
//! It runs for the world `provider` (every interface) only for the records'
//! Rust types: the host calls a component's functions as typed functions by
//! export index (`plugin::exports`), so a component need not export every
//! interface of that world, and the generated world structs go unused.

#![allow(dead_code, reason = "only the generated record types are used; see above")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "provider",
    additional_derives: [PartialEq],
});

/// The records, by their WIT names.
pub(crate) mod records {
    pub use super::weir::provider::types::*;
}
