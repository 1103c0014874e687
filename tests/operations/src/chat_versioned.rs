//! `describe` + `chat` + `native` + `logprobs` of one world version, the same code for two builds:
//! feature `chat-0-4` against the frozen `weir:provider@0.4.0` (a component
//! built before 0.5.0 changed `call-params` and `capabilities`), feature
//! `chat-0-5` against the frozen `weir:provider@0.5.0` (0.6.0 only added), feature
//! `chat-0-6` against the frozen 0.6.0 (with `native.decode-native`, every block neutral,
//! and no `native-stream`: 0.7.0 added it). Key `versioned`; it speaks
//! `POST /complete` with `{"model", "max_tokens", "temperature", "prompt"}`
//! and reads `{"text", "input", "output"}`; its stream is one text piece per
//! event, `[DONE]` the stop, `finish` the usage. `native` (dialect `versioned`)
//! takes the field `extra` and counts tokens: its encodes write the same body
//! with the fields merged in (to `/complete` and `/count`), and the count is
//! `{"tokens"}`. `logprobs` writes the chat body with `top_logprobs` to
//! `/complete` and reads `{"candidates": [[token, logprob], ...]}`.
//!
//! It writes `temperature` as the number it was given, widened to JSON's
//! `f64`: 0.4.0 gives it an `f32` (the caller's 0.3 goes out as
//! 0.30000001192092896), 0.5.0 the caller's `f64` (0.3). The tests read what
//! crossed the boundary from the body; the bench times the two builds' round
//! trips side by side (the difference is the host's conversion).

use std::cell::Cell;

use serde_json::{Value, json};

use exports::weir::provider::chat::{Guest as Chat, GuestStreamDecoder};
use exports::weir::provider::describe::Guest as Describe;
use exports::weir::provider::logprobs::Guest as Logprobs;
use exports::weir::provider::native::Guest as Native;
use weir::provider::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ContentBlock, CredentialShape, ErrorClass, FirstToken,
    HttpRequest, HttpResponse, NativeRequest, NativeSupport, PreparedConversation, ProviderInfo, Retry, StopInfo,
    StopReason, StreamDelta, StreamEvent, StreamFraming, TokenCandidate, Usage,
};

// One world with every interface `call-params` crosses: chat, native and
// logprobs (the package defines no such mix, so it is written here).
#[cfg(feature = "chat-0-4")]
wit_bindgen::generate!({
    path: "../../wit/frozen/0.4.0",
    inline: "package weir:versioned-test;
        world versioned {
            export weir:provider/describe@0.4.0;
            export weir:provider/chat@0.4.0;
            export weir:provider/native@0.4.0;
            export weir:provider/logprobs@0.4.0;
        }",
    world: "weir:versioned-test/versioned",
    generate_all,
});

#[cfg(all(feature = "chat-0-6", not(feature = "chat-0-4"), not(feature = "chat-0-5")))]
wit_bindgen::generate!({
    path: "../../wit/frozen/0.6.0",
    inline: "package weir:versioned-test;
        world versioned {
            export weir:provider/describe@0.6.0;
            export weir:provider/chat@0.6.0;
            export weir:provider/native@0.6.0;
            export weir:provider/logprobs@0.6.0;
        }",
    world: "weir:versioned-test/versioned",
    generate_all,
});

#[cfg(all(feature = "chat-0-5", not(feature = "chat-0-4")))]
wit_bindgen::generate!({
    path: "../../wit/frozen/0.5.0",
    inline: "package weir:versioned-test;
        world versioned {
            export weir:provider/describe@0.5.0;
            export weir:provider/chat@0.5.0;
            export weir:provider/native@0.5.0;
            export weir:provider/logprobs@0.5.0;
        }",
    world: "weir:versioned-test/versioned",
    generate_all,
});

/// What it declares: streaming and images. 0.4.0's one `images` flag; in
/// 0.5.0 both sources, so the host reads the same from either build.
#[cfg(feature = "chat-0-4")]
fn capabilities() -> Capabilities {
    Capabilities::STREAMING | Capabilities::IMAGES
}

#[cfg(all(any(feature = "chat-0-5", feature = "chat-0-6"), not(feature = "chat-0-4")))]
fn capabilities() -> Capabilities {
    Capabilities::STREAMING | Capabilities::INLINE_IMAGES | Capabilities::IMAGE_URLS
}

struct Versioned;

impl Describe for Versioned {
    fn providers() -> Vec<ProviderInfo> {
        vec![ProviderInfo {
            key: "versioned".to_owned(),
            description: "a chat component built against one world version (test suite only)".to_owned(),
            default_endpoint: None,
            credential: CredentialShape::None,
            capabilities: capabilities(),
            stream_framing: StreamFraming::Sse,
        }]
    }

    fn serves(_: String, wire_id: String) -> bool {
        wire_id != crate::NOT_SERVED
    }

    fn claims(_: String, _: String) -> bool {
        false
    }
}

impl Chat for Versioned {
    type StreamDecoder = Decoder;

    fn encode(_: String, conversation: PreparedConversation, params: CallParams) -> Result<HttpRequest, CodecError> {
        Ok(request("/complete", &body(&conversation, &params)))
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
            429 => ErrorClass::RateLimited(Retry { hint: None, detail }),
            _ => ErrorClass::InvalidRequest(detail),
        }
    }
}

/// The body every encode writes: what crossed the boundary, as it came.
fn body(conversation: &PreparedConversation, params: &CallParams) -> Value {
    let prompt: String = conversation
        .turns
        .iter()
        .flat_map(|turn| turn.content.iter())
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    json!({"model": params.wire_model_id, "max_tokens": params.max_tokens,
           "temperature": params.temperature, "stream": params.stream, "prompt": prompt})
}

fn request(path: &str, body: &Value) -> HttpRequest {
    HttpRequest {
        method: "POST".to_owned(),
        path_and_query: path.to_owned(),
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body: crate::body(body),
    }
}

/// `body` with the caller's native fields merged in.
fn with_native(mut body: Value, native: &NativeRequest) -> Result<Value, CodecError> {
    let fields: serde_json::Map<String, Value> = serde_json::from_str(&native.fields_json)
        .map_err(|e| CodecError::Unsupported(format!("native fields are not a JSON object: {e}")))?;
    if let Value::Object(map) = &mut body {
        map.extend(fields);
    }
    Ok(body)
}

impl Native for Versioned {
    fn support(_: String, _: String) -> Option<NativeSupport> {
        Some(NativeSupport {
            dialect: "versioned".to_owned(),
            fields: vec!["extra".to_owned()],
            betas: Vec::new(),
            count_tokens: true,
        })
    }

    fn encode(
        _: String,
        conversation: PreparedConversation,
        params: CallParams,
        native: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        Ok(request("/complete", &with_native(body(&conversation, &params), &native)?))
    }

    fn count_tokens_encode(
        _: String,
        conversation: PreparedConversation,
        params: CallParams,
        native: NativeRequest,
    ) -> Result<HttpRequest, CodecError> {
        Ok(request("/count", &with_native(body(&conversation, &params), &native)?))
    }

    fn count_tokens_decode(_: String, response: HttpResponse) -> Result<u64, CodecError> {
        let value: Value =
            serde_json::from_slice(&response.body).map_err(|e| CodecError::Malformed(format!("not JSON: {e}")))?;
        value["tokens"].as_u64().ok_or_else(|| CodecError::Malformed("no `tokens`".to_owned()))
    }

    /// 0.6.0's: `decode`'s answer, every block neutral, no own usage.
    #[cfg(all(feature = "chat-0-6", not(feature = "chat-0-4"), not(feature = "chat-0-5")))]
    fn decode_native(
        provider: String,
        response: HttpResponse,
    ) -> Result<weir::provider::types::NativeAnswer, CodecError> {
        let response = <Versioned as Chat>::decode(provider, response)?;
        let blocks = (0..response.content.len())
            .filter_map(|index| u32::try_from(index).ok())
            .map(weir::provider::types::AnswerBlock::Neutral)
            .collect();
        Ok(weir::provider::types::NativeAnswer { response, blocks, usage_json: None })
    }
}

impl Logprobs for Versioned {
    fn serves(_: String, wire_id: String) -> bool {
        wire_id != crate::NOT_SERVED
    }

    fn encode(
        _: String,
        conversation: PreparedConversation,
        params: CallParams,
        top: u8,
    ) -> Result<HttpRequest, CodecError> {
        let mut body = body(&conversation, &params);
        body["top_logprobs"] = json!(top);
        Ok(request("/complete", &body))
    }

    fn decode(_: String, response: HttpResponse) -> Result<FirstToken, CodecError> {
        let value: Value =
            serde_json::from_slice(&response.body).map_err(|e| CodecError::Malformed(format!("not JSON: {e}")))?;
        let candidates = value["candidates"]
            .as_array()
            .ok_or_else(|| CodecError::Malformed("no `candidates`".to_owned()))?
            .iter()
            .map(|pair| match (pair[0].as_str(), pair[1].as_f64()) {
                (Some(token), Some(logprob)) => Ok(TokenCandidate { token: token.to_owned(), logprob }),
                _ => Err(CodecError::Malformed("a candidate is not [token, logprob]".to_owned())),
            })
            .collect::<Result<_, _>>()?;
        Ok(FirstToken { candidates, usage: None, served_model: None, request_id: None })
    }
}

/// Each event's data is a piece of text, `[DONE]` ends the stream; `finish`
/// reports how many pieces came.
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

export!(Versioned);
