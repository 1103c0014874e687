//! The one place `bindgen!` runs. Everything else uses the curated re-exports in
//! [`crate::types`] and [`super`].

wasmtime::component::bindgen!({
    path: "../wit",
    world: "chat-provider",
    additional_derives: [PartialEq],
    // Async calls: a guest that writes to stderr (a panic message) suspends on an
    // async WASI stream instead of blocking a tokio worker with `block_on`.
    exports: { default: async },
});
