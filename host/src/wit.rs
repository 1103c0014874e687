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

/// The records of the retired `weir:provider@0.4.0` (`wit/frozen/0.4.0`), for
/// the components of 0.1.0 to 0.4.0: each of those versions only added to the
/// one before, so their records are 0.4.0's, unchanged, and this one binding
/// set types all four. Only the records 0.5.0 changed are used
/// (`plugin::convert` converts them); every other record is structurally the
/// same as the current one and is passed as that.
pub(crate) mod v0_4 {
    #![allow(dead_code, reason = "only the records 0.5.0 changed are used; see above")]

    wasmtime::component::bindgen!({
        path: "../wit/frozen/0.4.0",
        world: "provider",
    });

    pub use self::weir::provider::types::*;
}
