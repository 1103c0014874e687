//! # weir-sdk: write a Weir provider component in Rust
//!
//! A provider is pure translation between Weir's normalized records and one HTTP
//! dialect. Implement [`ChatProvider`] on a unit struct, call [`export_provider!`]
//! once, and build with `cargo build --target wasm32-wasip2`: the result is a
//! component the host loads from its providers folder.
//!
//! The generated wit-bindgen code stays in the hidden [`bindings`] module; the
//! record types are re-exported in [`types`] and are plain Rust, so a provider's
//! encoders and decoders test natively with `cargo test`.
//!
//! ```text
//! struct MyProvider;
//! impl weir_sdk::ChatProvider for MyProvider { /* encode, decode, classify, ... */ }
//! weir_sdk::export_provider!(MyProvider);
//! ```

#[cfg(feature = "anthropic")]
pub mod anthropic;
pub mod bedrock;
pub mod errors;
pub mod fallback;
pub mod http;
pub mod json;
mod provider;
mod records;

pub use provider::{ChatProvider, NoStreaming, StreamDecoder, StreamDecoderResource};

/// The version of the `weir:provider` world this SDK builds components for.
pub const WORLD_VERSION: &str = "0.1.0";

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "chat-provider",
        pub_export_macro: true,
        export_macro_name: "export_chat_provider_raw",
        default_bindings_module: "weir_sdk::bindings",
        additional_derives: [PartialEq],
        generate_all,
    });
}

/// The records that cross the boundary, as plain Rust types.
pub mod types {
    pub use crate::bindings::weir::provider::types::*;
}

/// Exports a [`ChatProvider`] implementation as the component's `describe` and
/// `chat` interfaces. Call it once per crate.
#[macro_export]
macro_rules! export_provider {
    ($provider:ty) => {
        // The export glue exists only in the component build: natively the WIT
        // export names are not valid linker symbols, and native tests need none.
        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __weir_export {
        use super::*;

        pub struct __WeirExport;

        impl $crate::bindings::exports::weir::provider::describe::Guest for __WeirExport {
            fn providers() -> ::std::vec::Vec<$crate::types::ProviderInfo> {
                <$provider as $crate::ChatProvider>::providers()
            }
            fn serves(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::ChatProvider>::serves(&provider, &wire_id)
            }
            fn claims(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::ChatProvider>::claims(&provider, &wire_id)
            }
        }

        impl $crate::bindings::exports::weir::provider::chat::Guest for __WeirExport {
            type StreamDecoder =
                $crate::StreamDecoderResource<<$provider as $crate::ChatProvider>::StreamDecoder>;

            fn encode(
                provider: ::std::string::String,
                conversation: $crate::types::PreparedConversation,
                params: $crate::types::CallParams,
            ) -> ::std::result::Result<$crate::types::HttpRequest, $crate::types::CodecError> {
                <$provider as $crate::ChatProvider>::encode(&provider, conversation, params)
            }
            fn decode(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> ::std::result::Result<$crate::types::ChatResponse, $crate::types::CodecError> {
                <$provider as $crate::ChatProvider>::decode(&provider, response)
            }
            fn classify(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> $crate::types::ErrorClass {
                <$provider as $crate::ChatProvider>::classify(&provider, response)
            }
        }

        $crate::bindings::export_chat_provider_raw!(__WeirExport with_types_in $crate::bindings);
        }
    };
}
