//! The one place `bindgen!` runs. Everything else uses the curated re-exports in
//! [`crate::types`] and [`super`].
//!
//! It runs for the world `provider` (every interface) only for the WIT records'
//! Rust types: the host calls a component's functions as typed functions by
//! export index ([`super::exports`]), so a component need not export every
//! interface of that world, and the generated world structs go unused.

#![allow(dead_code, reason = "only the generated record types are used; see above")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "provider",
    additional_derives: [PartialEq],
});
