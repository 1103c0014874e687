//! # weir-provider-anthropic-bedrock
//!
//! One provider key, `anthropic-bedrock`: Claude on Amazon Bedrock Runtime's
//! InvokeModel and InvokeModelWithResponseStream (`bedrock-runtime.{region}`),
//! addressed by inference-profile ids (`us.anthropic.claude-opus-5`), bare
//! foundation ids or ARNs. The body is the Messages API's with
//! `anthropic_version` instead of the model and the stream switch; streams are AWS
//! event-stream frames wrapping the Messages events; the host signs with SigV4.
//!
//! This file only describes the component and routes calls; the dialect lives in
//! `weir_sdk::anthropic`, shared with the other components that speak it.

use weir_sdk::anthropic::{Surface, SurfaceProvider};
use weir_sdk::bedrock;
use weir_sdk::types::{Capabilities, ProviderInfo, StreamFraming};

/// The surface this component serves.
const SURFACE: Surface = Surface::BedrockInvoke;

/// The provider key catalog entries name.
pub const ANTHROPIC_BEDROCK: &str = SURFACE.key();

/// The component's provider implementation.
#[derive(Debug)]
pub struct AnthropicBedrock;

impl SurfaceProvider for AnthropicBedrock {
    const SURFACE: Surface = SURFACE;

    /// The direct API's capabilities: InvokeModel carries the same body. No
    /// `structured-output`, as there (the codec refuses response schemas).
    fn info() -> ProviderInfo {
        ProviderInfo {
            key: ANTHROPIC_BEDROCK.to_owned(),
            description: "Claude on Amazon Bedrock InvokeModel (bedrock-runtime)".to_owned(),
            default_endpoint: Some(bedrock::RUNTIME_ENDPOINT.to_owned()),
            credential: bedrock::credential_shape(),
            capabilities: Capabilities::STREAMING
                | Capabilities::NATIVE_TOOLS
                | Capabilities::INLINE_IMAGES
                | Capabilities::IMAGE_URLS
                | Capabilities::INLINE_DOCUMENTS
                | Capabilities::DOCUMENT_URLS
                | Capabilities::THINKING
                | Capabilities::PROMPT_CACHE,
            stream_framing: StreamFraming::AwsEventStream,
        }
    }
}

weir_sdk::export_provider!(AnthropicBedrock, chat, native);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a failing test should stop loudly
mod tests {
    use weir_sdk::ChatProvider;
    use weir_sdk::types::{CallParams, CodecError, PreparedConversation};

    use weir_sdk::StreamDecoder;
    use weir_sdk::types::{ContentBlock, CredentialShape, Sigv4, StopInfo, StopReason, StreamDelta, StreamEvent, Turn};

    use super::*;

    #[test]
    fn describes_one_key_signed_for_bedrock() {
        let infos = AnthropicBedrock::providers();
        assert_eq!(infos.len(), 1);
        let info = &infos[0];
        assert_eq!(info.key, "anthropic-bedrock");
        assert_eq!(info.default_endpoint.as_deref(), Some("https://bedrock-runtime.{region}.amazonaws.com"));
        assert_eq!(
            info.credential,
            CredentialShape::AwsSigv4(Sigv4 {
                service: "bedrock".into(),
                default_credential_id: "aws-access-key-id".into()
            })
        );
        assert!(info.capabilities.contains(
            Capabilities::STREAMING
                | Capabilities::THINKING
                | Capabilities::INLINE_DOCUMENTS
                | Capabilities::DOCUMENT_URLS
        ));
        assert!(!info.capabilities.contains(Capabilities::STRUCTURED_OUTPUT));
        assert_eq!(info.stream_framing, StreamFraming::AwsEventStream);
    }

    #[test]
    fn serves_bedrock_id_forms_only() {
        let key = ANTHROPIC_BEDROCK;
        assert!(AnthropicBedrock::serves(key, "us.anthropic.claude-opus-5"));
        assert!(AnthropicBedrock::serves(key, "anthropic.claude-3-5-haiku-20241022-v1:0"));
        assert!(AnthropicBedrock::serves(key, "arn:aws:bedrock:us-east-1:1:application-inference-profile/a1b2c3"));
        assert!(!AnthropicBedrock::serves(key, "claude-opus-5"));
        assert!(!AnthropicBedrock::serves(key, "us.amazon.nova-pro-v1:0"));
        assert!(!AnthropicBedrock::serves("anthropic-bedrock-mantle", "us.anthropic.claude-opus-5"));
        assert!(AnthropicBedrock::claims(key, "global.anthropic.claude-sonnet-4-5-20250929-v1:0"));
        assert!(!AnthropicBedrock::claims(key, "claude-opus-5"));
    }

    #[test]
    fn unknown_key_does_not_encode() {
        let turn = Turn::user(vec![ContentBlock::Text("Hi".into())]);
        let conversation = PreparedConversation::of(vec![turn]);
        let params = CallParams::new("us.anthropic.claude-opus-5", 16);
        let encoded = AnthropicBedrock::encode("anthropic", conversation, params);
        assert!(matches!(encoded, Err(CodecError::Unsupported(m)) if m.contains("unknown provider key")));
    }

    /// The decoder the host builds for this key reads event-stream chunks.
    #[test]
    fn the_stream_decoder_reads_event_stream_chunks() {
        // base64 of {"type":"message_stop"}
        let chunk = StreamEvent {
            name: Some("chunk".into()),
            headers: vec![(":message-type".into(), "event".into()), (":event-type".into(), "chunk".into())],
            data: br#"{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0=","p":"abcdefgh"}"#.to_vec(),
        };
        let mut decoder = <AnthropicBedrock as ChatProvider>::StreamDecoder::new(ANTHROPIC_BEDROCK);
        assert_eq!(
            decoder.feed(chunk).unwrap(),
            vec![StreamDelta::Stop(StopInfo { reason: StopReason::Other, raw: None, refusal: None })]
        );
        assert_eq!(decoder.finish().unwrap(), vec![]);
    }
}
