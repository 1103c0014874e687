//! # weir-provider-ollama — the template for a new provider
//!
//! A whole provider for a simple dialect in one page: Ollama's native chat API
//! (`POST /api/chat`, `stream: false`). Copy this crate to start a new one; see
//! `docs/src/providers/writing-a-provider.md`. Images go natively; every other block the dialect
//! has no field for becomes faithful text (`block_as_text`), never nothing.

use serde::Deserialize;
use serde_json::{Value, json};
use weir_sdk::errors::{ErrorFields, class_for_status};
use weir_sdk::fallback::block_as_text;
use weir_sdk::json::{from_body, parse_value, sampling_number, to_body};
use weir_sdk::types::{
    CallParams, Capabilities, ChatResponse, CodecError, ContentBlock, CredentialShape, ErrorClass, HeaderCredential,
    HttpRequest, HttpResponse, MediaSource, PreparedConversation, ProviderInfo, StopReason, StreamFraming, ToolUse,
    Turn, TurnRole, Usage,
};
use weir_sdk::{ChatProvider, NoStreaming};

#[derive(Debug)]
pub struct Ollama;

impl ChatProvider for Ollama {
    type StreamDecoder = NoStreaming;

    fn providers() -> Vec<ProviderInfo> {
        vec![ProviderInfo {
            key: "ollama".to_owned(),
            description: "Ollama's native chat API (/api/chat)".to_owned(),
            // Ollama runs wherever its user put it: a catalog entry names the endpoint.
            default_endpoint: None,
            credential: CredentialShape::Header(HeaderCredential {
                default_credential_id: "ollama-api-key".to_owned(),
                header_name: "authorization".to_owned(),
                prefix: "Bearer ".to_owned(),
                required: false,
            }),
            capabilities: Capabilities::NATIVE_TOOLS | Capabilities::INLINE_IMAGES,
            stream_framing: StreamFraming::Sse,
        }]
    }

    fn encode(_: &str, conversation: PreparedConversation, params: CallParams) -> Result<HttpRequest, CodecError> {
        let mut messages: Vec<Value> =
            conversation.system.iter().map(|text| json!({"role": "system", "content": text})).collect();
        for turn in &conversation.turns {
            messages.push(message(turn)?);
        }
        let mut options = json!({"num_predict": params.max_tokens, "stop": params.stop});
        if let Some(temperature) = params.temperature {
            options["temperature"] = sampling_number(temperature, "temperature")?;
        }
        let tools = conversation.tools.iter().map(|tool| {
            let parameters = parse_value(&tool.parameters_json, "tool parameters")?;
            Ok(json!({"type": "function", "function":
                {"name": tool.name, "description": tool.description, "parameters": parameters}}))
        });
        let body = json!({"model": params.wire_model_id, "messages": messages, "stream": false,
            "options": options, "tools": tools.collect::<Result<Vec<Value>, CodecError>>()?});
        let headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        Ok(HttpRequest { method: "POST".into(), path_and_query: "/api/chat".into(), headers, body: to_body(&body)? })
    }

    fn decode(_: &str, response: HttpResponse) -> Result<ChatResponse, CodecError> {
        let reply: Reply = from_body(&response.body)?;
        let mut content: Vec<ContentBlock> = Vec::new();
        if !reply.message.content.is_empty() {
            content.push(ContentBlock::Text(reply.message.content));
        }
        for (i, call) in reply.message.tool_calls.into_iter().enumerate() {
            let (name, input_json) = (call.function.name, call.function.arguments.to_string());
            content.push(ContentBlock::ToolUse(ToolUse { id: format!("call_{i}"), name, input_json }));
        }
        let has_calls = content.iter().any(|block| matches!(block, ContentBlock::ToolUse(_)));
        let stop_reason = match reply.done_reason.as_deref() {
            Some("stop") if has_calls => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            Some("length") => StopReason::MaxTokens,
            _ => StopReason::Other,
        };
        let (input, output) = (reply.prompt_eval_count, reply.eval_count);
        let usage = Usage { input, output, cache_read: 0, cache_write: 0, reasoning: None };
        Ok(ChatResponse {
            content,
            stop_reason,
            raw_stop_reason: reply.done_reason,
            usage: Some(usage),
            refusal: None,
            served_model: reply.model,
            request_id: None,
        })
    }

    fn classify(_: &str, response: HttpResponse) -> ErrorClass {
        let detail = ErrorFields::parse(&response.body).detail(response.status);
        class_for_status(&response, detail)
    }
}

/// One turn as one message: text and fallbacks joined, base64 images in `images`,
/// the assistant's tool calls in `tool_calls` (Ollama has no call ids).
fn message(turn: &Turn) -> Result<Value, CodecError> {
    let (mut texts, mut images, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for block in &turn.content {
        match block {
            ContentBlock::Image(media) if matches!(media.source, MediaSource::Base64(_)) => {
                if let MediaSource::Base64(data) = &media.source {
                    images.push(data.clone());
                }
            }
            ContentBlock::ToolUse(call) if turn.role == TurnRole::Assistant => {
                let arguments = parse_value(&call.input_json, "tool arguments")?;
                calls.push(json!({"function": {"name": call.name, "arguments": arguments}}));
            }
            other => texts.push(block_as_text(other)),
        }
    }
    let role = if turn.role == TurnRole::User { "user" } else { "assistant" };
    Ok(json!({"role": role, "content": texts.join("\n\n"), "images": images, "tool_calls": calls}))
}

#[derive(Deserialize)]
struct Reply {
    model: Option<String>,
    message: ReplyMessage,
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: u64,
    #[serde(default)]
    eval_count: u64,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: String,
    #[serde(default)]
    tool_calls: Vec<ReplyCall>,
}

#[derive(Deserialize)]
struct ReplyCall {
    function: ReplyFunction,
}

#[derive(Deserialize)]
struct ReplyFunction {
    name: String,
    arguments: Value,
}

weir_sdk::export_provider!(Ollama);
