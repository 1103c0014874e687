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

pub use provider::{
    ChatProvider, Describe, EmbeddingProvider, LogprobsProvider, NativeProvider, NativeStreamDecoder,
    NativeStreamResource, NoNativeStream, NoStreaming, RerankProvider, StreamDecoder, StreamDecoderResource,
};

/// The version of the `weir:provider` world this SDK builds components for.
pub const WORLD_VERSION: &str = "0.7.0";

/// The generated bindings, for the one world the crate's features select: a
/// component exports `describe` and the operations it implements, never stubs
/// of the others. Features, not macro arguments, pick the world because the
/// world's description is a custom section of the SDK's own object code: one
/// build of the SDK can describe one world only. (Cargo unifies features across
/// the packages of one build, so components of different worlds are built in
/// separate invocations; see `build-support/wasm_guest.rs`.)
#[doc(hidden)]
pub mod bindings {
    /// One `generate!` per world; exactly one is compiled.
    macro_rules! world_bindings {
        ($world:literal) => {
            wit_bindgen::generate!({
                path: "../wit",
                world: $world,
                pub_export_macro: true,
                export_macro_name: "export_world_raw",
                default_bindings_module: "weir_sdk::bindings",
                additional_derives: [PartialEq],
                generate_all,
            });
        };
    }

    #[cfg(all(
        feature = "chat",
        not(feature = "embeddings"),
        not(feature = "rerank"),
        not(feature = "logprobs"),
        not(feature = "native")
    ))]
    world_bindings!("chat-provider");
    #[cfg(all(feature = "native", not(feature = "embeddings"), not(feature = "rerank"), not(feature = "logprobs")))]
    world_bindings!("chat-native-provider");
    #[cfg(all(feature = "chat", not(feature = "embeddings"), not(feature = "rerank"), feature = "logprobs"))]
    world_bindings!("chat-logprobs-provider");
    #[cfg(all(not(feature = "chat"), feature = "embeddings", not(feature = "rerank")))]
    world_bindings!("embedding-provider");
    #[cfg(all(not(feature = "chat"), not(feature = "embeddings"), feature = "rerank"))]
    world_bindings!("rerank-provider");
    #[cfg(all(not(feature = "chat"), feature = "embeddings", feature = "rerank"))]
    world_bindings!("retrieval-provider");
    #[cfg(all(feature = "chat", feature = "embeddings", not(feature = "rerank"), not(feature = "logprobs")))]
    world_bindings!("chat-embedding-provider");
    #[cfg(all(feature = "chat", not(feature = "embeddings"), feature = "rerank", not(feature = "logprobs")))]
    world_bindings!("chat-rerank-provider");
    #[cfg(all(feature = "chat", feature = "embeddings", feature = "rerank", not(feature = "logprobs")))]
    world_bindings!("chat-retrieval-provider");
    #[cfg(all(
        feature = "chat",
        feature = "embeddings",
        feature = "rerank",
        feature = "logprobs",
        not(feature = "native")
    ))]
    world_bindings!("chat-logprobs-retrieval-provider");
    // Every operation: what a build of the whole workspace unifies the features to.
    #[cfg(all(feature = "chat", feature = "embeddings", feature = "rerank", feature = "logprobs", feature = "native"))]
    world_bindings!("provider");
    #[cfg(not(any(feature = "chat", feature = "embeddings", feature = "rerank")))]
    compile_error!("weir-sdk: enable at least one of the features `chat`, `embeddings`, `rerank`");
    #[cfg(all(feature = "logprobs", not(feature = "chat")))]
    compile_error!("weir-sdk: `logprobs` needs `chat` (its failures are classified by chat's `classify`)");
    #[cfg(all(
        feature = "native",
        any(feature = "embeddings", feature = "rerank", feature = "logprobs"),
        not(all(feature = "embeddings", feature = "rerank", feature = "logprobs"))
    ))]
    compile_error!("weir-sdk: `native` goes with chat alone, or with every other operation");
    #[cfg(all(
        feature = "logprobs",
        feature = "chat",
        any(feature = "embeddings", feature = "rerank"),
        not(all(feature = "embeddings", feature = "rerank"))
    ))]
    compile_error!("weir-sdk: `logprobs` goes with chat alone, or with chat, embeddings and rerank together");
}

/// The records that cross the boundary, as plain Rust types.
pub mod types {
    pub use crate::bindings::weir::provider::types::*;
}

/// Exports a provider's interfaces: `describe` and the operations named. Call
/// it once per crate.
///
/// - `export_provider!(T)`: chat only (`T: ChatProvider`), world `chat-provider`.
/// - `export_provider!(T, chat, embeddings, rerank)`, or any non-empty mix of the
///   three in that order: `T` implements [`ChatProvider`] for `chat`,
///   [`EmbeddingProvider`] for `embeddings`, [`RerankProvider`] for `rerank`.
/// - `logprobs` last, after `chat` (`export_provider!(T, chat, logprobs)` or
///   `export_provider!(T, chat, embeddings, rerank, logprobs)`): `T` also
///   implements [`LogprobsProvider`].
/// - `native` after `chat` alone (`export_provider!(T, chat, native)`, with
///   the SDK's `native` feature): `T` also implements [`NativeProvider`].
///   Without `chat`, `T` implements [`Describe`] instead, and its
///   `describe.serves` is true when an operation it exports serves the wire id.
#[macro_export]
macro_rules! export_provider {
    ($provider:ty) => {
        $crate::export_provider!($provider, chat);
    };
    ($provider:ty, chat $(, $part:ident)*) => {
        $crate::__weir_export!($provider, chat_describe, [chat $(, $part)*]);
    };
    ($provider:ty, $($part:ident),+) => {
        $crate::__weir_export!($provider, plain_describe, [$($part),+]);
    };
}

/// The export glue of [`export_provider!`]: one `Guest` impl per interface,
/// then the world's raw export macro.
#[doc(hidden)]
#[macro_export]
macro_rules! __weir_export {
    ($provider:ty, $describe:ident, [$($part:ident),+]) => {
        // The export glue exists only in the component build: natively the WIT
        // export names are not valid linker symbols, and native tests need none.
        #[cfg(target_arch = "wasm32")]
        #[doc(hidden)]
        mod __weir_export {
            use super::*;

            pub struct __WeirExport;

            $crate::__weir_describe!($describe, $provider, [$($part),+]);
            $( $crate::__weir_part!($part, $provider); )+

            $crate::bindings::export_world_raw!(__WeirExport with_types_in $crate::bindings);
        }
    };
}

/// `describe`: from [`ChatProvider`] when the component chats, else from
/// [`Describe`] with `serves` answered by the operations it exports.
#[doc(hidden)]
#[macro_export]
macro_rules! __weir_describe {
    (chat_describe, $provider:ty, [$($part:ident),+]) => {
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
    };
    (plain_describe, $provider:ty, [$($part:ident),+]) => {
        impl $crate::bindings::exports::weir::provider::describe::Guest for __WeirExport {
            fn providers() -> ::std::vec::Vec<$crate::types::ProviderInfo> {
                <$provider as $crate::Describe>::providers()
            }
            fn serves(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                false $( || $crate::__weir_serves!($part, $provider, &provider, &wire_id) )+
            }
            fn claims(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::Describe>::claims(&provider, &wire_id)
            }
        }
    };
}

/// Whether one exported operation serves a wire id, for a plain `describe`.
#[doc(hidden)]
#[macro_export]
macro_rules! __weir_serves {
    (embeddings, $provider:ty, $key:expr, $wire_id:expr) => {
        <$provider as $crate::EmbeddingProvider>::serves($key, $wire_id)
    };
    (rerank, $provider:ty, $key:expr, $wire_id:expr) => {
        <$provider as $crate::RerankProvider>::serves($key, $wire_id)
    };
}

/// One operation interface's `Guest` impl, for [`__weir_export!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __weir_part {
    (chat, $provider:ty) => {
        impl $crate::bindings::exports::weir::provider::chat::Guest for __WeirExport {
            type StreamDecoder = $crate::StreamDecoderResource<<$provider as $crate::ChatProvider>::StreamDecoder>;

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
    };
    (embeddings, $provider:ty) => {
        impl $crate::bindings::exports::weir::provider::embeddings::Guest for __WeirExport {
            fn serves(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::EmbeddingProvider>::serves(&provider, &wire_id)
            }
            fn max_batch(provider: ::std::string::String, wire_id: ::std::string::String) -> u32 {
                <$provider as $crate::EmbeddingProvider>::max_batch(&provider, &wire_id)
            }
            fn needs_dimensions(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::EmbeddingProvider>::needs_dimensions(&provider, &wire_id)
            }
            fn encode(
                provider: ::std::string::String,
                inputs: ::std::vec::Vec<::std::string::String>,
                params: $crate::types::EmbeddingParams,
            ) -> ::std::result::Result<$crate::types::HttpRequest, $crate::types::CodecError> {
                <$provider as $crate::EmbeddingProvider>::encode(&provider, inputs, params)
            }
            fn decode(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> ::std::result::Result<$crate::types::EmbeddingResponse, $crate::types::CodecError> {
                <$provider as $crate::EmbeddingProvider>::decode(&provider, response)
            }
            fn classify(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> $crate::types::ErrorClass {
                <$provider as $crate::EmbeddingProvider>::classify(&provider, response)
            }
        }
    };
    (rerank, $provider:ty) => {
        impl $crate::bindings::exports::weir::provider::rerank::Guest for __WeirExport {
            fn serves(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::RerankProvider>::serves(&provider, &wire_id)
            }
            fn encode(
                provider: ::std::string::String,
                query: ::std::string::String,
                documents: ::std::vec::Vec<::std::string::String>,
                params: $crate::types::RerankParams,
            ) -> ::std::result::Result<$crate::types::HttpRequest, $crate::types::CodecError> {
                <$provider as $crate::RerankProvider>::encode(&provider, query, documents, params)
            }
            fn decode(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> ::std::result::Result<$crate::types::RerankResponse, $crate::types::CodecError> {
                <$provider as $crate::RerankProvider>::decode(&provider, response)
            }
            fn classify(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> $crate::types::ErrorClass {
                <$provider as $crate::RerankProvider>::classify(&provider, response)
            }
        }
    };
    (native, $provider:ty) => {
        impl $crate::bindings::exports::weir::provider::native::Guest for __WeirExport {
            type NativeStream = $crate::NativeStreamResource<<$provider as $crate::NativeProvider>::NativeStream>;

            fn support(
                provider: ::std::string::String,
                wire_id: ::std::string::String,
            ) -> ::std::option::Option<$crate::types::NativeSupport> {
                <$provider as $crate::NativeProvider>::native_support(&provider, &wire_id)
            }
            fn encode(
                provider: ::std::string::String,
                conversation: $crate::types::PreparedConversation,
                params: $crate::types::CallParams,
                native: $crate::types::NativeRequest,
            ) -> ::std::result::Result<$crate::types::HttpRequest, $crate::types::CodecError> {
                <$provider as $crate::NativeProvider>::encode_native(&provider, conversation, params, native)
            }
            fn count_tokens_encode(
                provider: ::std::string::String,
                conversation: $crate::types::PreparedConversation,
                params: $crate::types::CallParams,
                native: $crate::types::NativeRequest,
            ) -> ::std::result::Result<$crate::types::HttpRequest, $crate::types::CodecError> {
                <$provider as $crate::NativeProvider>::count_tokens_encode(&provider, conversation, params, native)
            }
            fn count_tokens_decode(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> ::std::result::Result<u64, $crate::types::CodecError> {
                <$provider as $crate::NativeProvider>::count_tokens_decode(&provider, response)
            }
            fn decode_native(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> ::std::result::Result<$crate::types::NativeAnswer, $crate::types::CodecError> {
                <$provider as $crate::NativeProvider>::decode_native(&provider, response)
            }
        }
    };
    (logprobs, $provider:ty) => {
        impl $crate::bindings::exports::weir::provider::logprobs::Guest for __WeirExport {
            fn serves(provider: ::std::string::String, wire_id: ::std::string::String) -> bool {
                <$provider as $crate::LogprobsProvider>::serves_logprobs(&provider, &wire_id)
            }
            fn encode(
                provider: ::std::string::String,
                conversation: $crate::types::PreparedConversation,
                params: $crate::types::CallParams,
                top: u8,
            ) -> ::std::result::Result<$crate::types::HttpRequest, $crate::types::CodecError> {
                <$provider as $crate::LogprobsProvider>::encode_logprobs(&provider, conversation, params, top)
            }
            fn decode(
                provider: ::std::string::String,
                response: $crate::types::HttpResponse,
            ) -> ::std::result::Result<$crate::types::FirstToken, $crate::types::CodecError> {
                <$provider as $crate::LogprobsProvider>::decode_logprobs(&provider, response)
            }
        }
    };
}
