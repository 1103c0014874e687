//! The one place `bindgen!` runs. Everything else uses the curated re-exports in
//! [`crate::types`] and [`super`].

wasmtime::component::bindgen!({
    path: "../wit",
    world: "chat-provider",
    additional_derives: [PartialEq],
});
