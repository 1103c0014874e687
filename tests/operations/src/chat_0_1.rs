//! `describe` + `chat` of the frozen `weir:provider@0.1.0`: what a component
//! built before 0.2.0 exports. Key `legacy`; it speaks `POST /complete` with
//! `{"model", "max_tokens", "prompt"}` and reads `{"text", "input", "output"}`.

use std::cell::Cell;

use serde_json::{Value, json};

use exports::weir::provider::chat::{Guest as Chat, GuestStreamDecoder};
use exports::weir::provider::describe::Guest as Describe;
use weir::provider::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ContentBlock, CredentialShape, ErrorClass, HttpRequest,
    HttpResponse, PreparedConversation, ProviderInfo, Retry, RetryHint, StopInfo, StopReason, StreamDelta, StreamEvent,
    StreamFraming, Usage,
};

wit_bindgen::generate!({
    path: "../../wit/frozen/0.1.0",
    world: "chat-provider",
});

struct Legacy;

impl Describe for Legacy {
    fn providers() -> Vec<ProviderInfo> {
        vec![ProviderInfo {
            key: "legacy".to_owned(),
            description: "a weir:provider@0.1.0 chat component (test suite only)".to_owned(),
            default_endpoint: None,
            credential: CredentialShape::None,
            capabilities: Capabilities::STREAMING,
            stream_framing: StreamFraming::Sse,
        }]
    }

    fn serves(_: String, wire_id: String) -> bool {
        wire_id != crate::NOT_SERVED
    }

    fn claims(_: String, wire_id: String) -> bool {
        wire_id.starts_with("legacy-")
    }
}

impl Chat for Legacy {
    type StreamDecoder = Decoder;

    fn encode(_: String, conversation: PreparedConversation, params: CallParams) -> Result<HttpRequest, CodecError> {
        let prompt: String = conversation
            .turns
            .iter()
            .flat_map(|turn| turn.content.iter())
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let body = json!({"model": params.wire_model_id, "max_tokens": params.max_tokens, "prompt": prompt});
        Ok(HttpRequest {
            method: "POST".to_owned(),
            path_and_query: "/complete".to_owned(),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: crate::body(&body),
        })
    }

    fn decode(_: String, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        let value: Value =
            serde_json::from_slice(&response.body).map_err(|e| CodecError::Malformed(format!("not JSON: {e}")))?;
        let text = value["text"].as_str().ok_or_else(|| CodecError::Malformed("no `text`".to_owned()))?;
        Ok(ChatResponse {
            content: vec![ContentBlock::Text(text.to_owned())],
            stop_reason: StopReason::EndTurn,
            raw_stop_reason: None,
            usage: Some(Usage {
                input: value["input"].as_u64().unwrap_or(0),
                output: value["output"].as_u64().unwrap_or(0),
                cache_read: 0,
                cache_write: 0,
                reasoning: None,
            }),
            refusal: None,
            served_model: value["model"].as_str().map(str::to_owned),
            request_id: crate::header(&response.headers, "x-request-id").map(str::to_owned),
        })
    }

    fn classify(_: String, response: HttpResponse) -> ErrorClass {
        let detail = String::from_utf8_lossy(&response.body).into_owned();
        match response.status {
            429 => ErrorClass::RateLimited(Retry {
                hint: crate::header(&response.headers, "retry-after")
                    .and_then(|seconds| seconds.parse::<u64>().ok())
                    .map(|seconds| RetryHint::DelayMs(seconds * 1000)),
                detail,
            }),
            401 => ErrorClass::Authentication(detail),
            _ => ErrorClass::InvalidRequest(detail),
        }
    }
}

/// Each event's data is a piece of text, `[DONE]` ends the stream; `finish`
/// reports how many pieces came, so the decoder's state across events shows.
pub struct Decoder {
    pieces: Cell<u64>,
}

impl GuestStreamDecoder for Decoder {
    fn new(_: String) -> Self {
        Self { pieces: Cell::new(0) }
    }

    fn feed(&self, event: StreamEvent) -> Result<Vec<StreamDelta>, CodecError> {
        let data = String::from_utf8(event.data).map_err(|_| CodecError::Malformed("not UTF-8".to_owned()))?;
        if data == "[DONE]" {
            return Ok(vec![StreamDelta::Stop(StopInfo { reason: StopReason::EndTurn, raw: None, refusal: None })]);
        }
        self.pieces.set(self.pieces.get() + 1);
        Ok(vec![StreamDelta::Text(data)])
    }

    fn finish(&self) -> Result<Vec<StreamDelta>, CodecError> {
        let output = self.pieces.get();
        Ok(vec![StreamDelta::Usage(Usage { input: 0, output, cache_read: 0, cache_write: 0, reasoning: None })])
    }
}

export!(Legacy);
