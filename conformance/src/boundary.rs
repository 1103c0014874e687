//! Conversions between the kit's neutral records and the WIT world's records.
//!
//! The world's records exist twice in Rust: wit-bindgen generates them for guests
//! (`weir_sdk::types`) and wasmtime generates them for the host. Both come from the
//! same WIT, so their names and fields agree; this macro writes the conversions once
//! and expands them against either set.

/// Expands to a module `boundary` converting between [`crate::fixture`] records and
/// the WIT records at the given path (e.g. `weir_sdk::types`).
#[doc(hidden)]
#[macro_export]
macro_rules! boundary_conversions {
    ($($types:ident)::+) => {
        /// Conversions between the conformance kit's records and the WIT world's.
        pub(crate) mod boundary {
            use $($types)::+ as t;
            use $crate::fixture as n;

            pub fn conversation(conversation: &n::Conversation) -> t::PreparedConversation {
                t::PreparedConversation {
                    system: conversation.system.clone(),
                    cache_system: conversation.cache_system,
                    turns: conversation.turns.iter().map(turn).collect(),
                    tools: conversation.tools.iter().map(tool).collect(),
                    tool_choice: conversation.tool_choice.as_ref().map(tool_choice),
                }
            }

            fn turn(turn: &n::Turn) -> t::Turn {
                t::Turn {
                    role: match turn.role {
                        n::Role::User => t::TurnRole::User,
                        n::Role::Assistant => t::TurnRole::Assistant,
                    },
                    content: turn.content.iter().map(block).collect(),
                    cache: turn.cache,
                }
            }

            fn block(block: &n::Block) -> t::ContentBlock {
                match block {
                    n::Block::Text { text } => t::ContentBlock::Text(text.clone()),
                    n::Block::Image(m) => t::ContentBlock::Image(media(m)),
                    n::Block::Document(m) => t::ContentBlock::Document(media(m)),
                    n::Block::ToolUse { id, name, input } => t::ContentBlock::ToolUse(t::ToolUse {
                        id: id.clone(),
                        name: name.clone(),
                        input_json: input.to_string(),
                    }),
                    n::Block::ToolResult { tool_use_id, content, is_error } => {
                        t::ContentBlock::ToolResult(t::ToolResult {
                            tool_use_id: tool_use_id.clone(),
                            content: content.iter().map(leaf).collect(),
                            is_error: *is_error,
                        })
                    }
                    n::Block::Thinking { text, signature, redacted } => t::ContentBlock::Thinking(t::Thinking {
                        text: text.clone(),
                        signature: signature.clone(),
                        redacted: *redacted,
                    }),
                }
            }

            fn leaf(leaf: &n::Leaf) -> t::LeafBlock {
                match leaf {
                    n::Leaf::Text { text } => t::LeafBlock::Text(text.clone()),
                    n::Leaf::Image(m) => t::LeafBlock::Image(media(m)),
                    n::Leaf::Document(m) => t::LeafBlock::Document(media(m)),
                }
            }

            fn media(media: &n::Media) -> t::Media {
                t::Media {
                    mime_type: media.mime_type.clone(),
                    source: match &media.source {
                        n::Source::Base64(data) => t::MediaSource::Base64(data.clone()),
                        n::Source::Url(url) => t::MediaSource::Url(url.clone()),
                    },
                }
            }

            fn tool(tool: &n::Tool) -> t::ToolDefinition {
                t::ToolDefinition {
                    name: tool.name.clone(),
                    description: tool.description.clone(),
                    parameters_json: tool.parameters.to_string(),
                }
            }

            fn tool_choice(choice: &n::ToolChoice) -> t::ToolChoice {
                match choice {
                    n::ToolChoice::Auto => t::ToolChoice::Auto,
                    n::ToolChoice::None => t::ToolChoice::None,
                    n::ToolChoice::Required => t::ToolChoice::Required,
                    n::ToolChoice::Named(name) => t::ToolChoice::Named(name.clone()),
                }
            }

            pub fn params(params: &n::Params) -> t::CallParams {
                t::CallParams {
                    wire_model_id: params.model.clone(),
                    max_tokens: params.max_tokens,
                    thinking_budget: params.thinking_budget,
                    reasoning_effort: params.effort.map(|effort| match effort {
                        n::Effort::Minimal => t::Effort::Minimal,
                        n::Effort::Low => t::Effort::Low,
                        n::Effort::Medium => t::Effort::Medium,
                        n::Effort::High => t::Effort::High,
                        n::Effort::Max => t::Effort::Max,
                    }),
                    temperature: params.temperature,
                    stop: params.stop.clone(),
                    response_schema: params.response_schema.as_ref().map(|schema| t::ResponseSchema {
                        name: schema.name.clone(),
                        schema_json: schema.schema.to_string(),
                    }),
                    stream: params.stream,
                }
            }

            pub fn response(response: &n::Response) -> t::HttpResponse {
                t::HttpResponse {
                    status: response.status,
                    headers: response.headers.clone(),
                    body: response.body.clone(),
                }
            }

            pub fn request(request: t::HttpRequest) -> n::WireRequest {
                n::WireRequest {
                    method: request.method,
                    path_and_query: request.path_and_query,
                    headers: request.headers,
                    body: request.body,
                }
            }

            /// The stop reason in the world's spelling.
            fn stop_name(reason: t::StopReason) -> &'static str {
                match reason {
                    t::StopReason::EndTurn => "end-turn",
                    t::StopReason::MaxTokens => "max-tokens",
                    t::StopReason::StopSequence => "stop-sequence",
                    t::StopReason::ToolUse => "tool-use",
                    t::StopReason::ContentFiltered => "content-filtered",
                    t::StopReason::Pause => "pause",
                    t::StopReason::ContextWindowExceeded => "context-window-exceeded",
                    t::StopReason::Other => "other",
                }
            }

            fn usage(usage: t::Usage) -> n::Usage {
                n::Usage {
                    input: usage.input,
                    output: usage.output,
                    cache_read: usage.cache_read,
                    cache_write: usage.cache_write,
                    reasoning: usage.reasoning,
                }
            }

            pub fn decoded(response: t::ChatResponse) -> n::Decoded {
                let stop = stop_name(response.stop_reason);
                let mut decoded = n::Decoded::new(response.content.into_iter().map(block_back).collect(), stop.to_owned());
                decoded.raw_stop = response.raw_stop_reason;
                decoded.usage = response.usage.map(usage);
                decoded.refusal = response.refusal.map(refusal);
                decoded.served_model = response.served_model;
                decoded.request_id = response.request_id;
                decoded
            }

            fn refusal(refusal: t::Refusal) -> n::Refusal {
                n::Refusal { category: refusal.category, explanation: refusal.explanation }
            }

            fn block_back(block: t::ContentBlock) -> n::Block {
                match block {
                    t::ContentBlock::Text(text) => n::Block::Text { text },
                    t::ContentBlock::Image(m) => n::Block::Image(media_back(m)),
                    t::ContentBlock::Document(m) => n::Block::Document(media_back(m)),
                    t::ContentBlock::ToolUse(call) => n::Block::ToolUse {
                        id: call.id,
                        name: call.name,
                        // Arguments that are not JSON stay visible as the raw string.
                        input: ::serde_json::from_str(&call.input_json)
                            .unwrap_or(::serde_json::Value::String(call.input_json)),
                    },
                    t::ContentBlock::ToolResult(result) => n::Block::ToolResult {
                        tool_use_id: result.tool_use_id,
                        content: result.content.into_iter().map(leaf_back).collect(),
                        is_error: result.is_error,
                    },
                    t::ContentBlock::Thinking(thinking) => n::Block::Thinking {
                        text: thinking.text,
                        signature: thinking.signature,
                        redacted: thinking.redacted,
                    },
                }
            }

            fn leaf_back(leaf: t::LeafBlock) -> n::Leaf {
                match leaf {
                    t::LeafBlock::Text(text) => n::Leaf::Text { text },
                    t::LeafBlock::Image(m) => n::Leaf::Image(media_back(m)),
                    t::LeafBlock::Document(m) => n::Leaf::Document(media_back(m)),
                }
            }

            fn media_back(media: t::Media) -> n::Media {
                n::Media {
                    mime_type: media.mime_type,
                    source: match media.source {
                        t::MediaSource::Base64(data) => n::Source::Base64(data),
                        t::MediaSource::Url(url) => n::Source::Url(url),
                    },
                }
            }

            pub fn classified(class: t::ErrorClass) -> n::Classified {
                let retry = |name: &str, retry: t::Retry| n::Classified {
                    class: name.to_owned(),
                    hint: retry.hint.map(|hint| match hint {
                        t::RetryHint::DelayMs(ms) => n::Hint::DelayMs(ms),
                        t::RetryHint::AtUnixMs(ms) => n::Hint::AtUnixMs(ms),
                    }),
                    detail: retry.detail,
                };
                let plain = |name: &str, detail: String| n::Classified { class: name.to_owned(), hint: None, detail };
                match class {
                    t::ErrorClass::RateLimited(r) => retry("rate-limited", r),
                    t::ErrorClass::Overloaded(r) => retry("overloaded", r),
                    t::ErrorClass::Transient(r) => retry("transient", r),
                    t::ErrorClass::QuotaExhausted(d) => plain("quota-exhausted", d),
                    t::ErrorClass::Refused(r) => plain("refused", r.explanation.unwrap_or_default()),
                    t::ErrorClass::InvalidRequest(d) => plain("invalid-request", d),
                    t::ErrorClass::Authentication(d) => plain("authentication", d),
                    t::ErrorClass::NotFound(d) => plain("not-found", d),
                    t::ErrorClass::ContextOverflow(d) => plain("context-overflow", d),
                    t::ErrorClass::Uncorrectable(d) => plain("uncorrectable", d),
                }
            }

            pub fn stream_event(event: &n::StreamEvent) -> t::StreamEvent {
                t::StreamEvent { name: event.name.clone(), headers: event.headers.clone(), data: event.data.clone() }
            }

            pub fn deltas(deltas: Vec<t::StreamDelta>) -> Vec<n::Delta> {
                deltas.into_iter().map(delta).collect()
            }

            fn delta(delta: t::StreamDelta) -> n::Delta {
                match delta {
                    t::StreamDelta::Text(text) => n::Delta::Text(text),
                    t::StreamDelta::Thinking(text) => n::Delta::Thinking(text),
                    t::StreamDelta::ThinkingSignature(signature) => n::Delta::ThinkingSignature(signature),
                    t::StreamDelta::ToolCallStart(start) => {
                        n::Delta::ToolCallStart { index: start.index, id: start.id, name: start.name }
                    }
                    t::StreamDelta::ToolCallFragment(fragment) => {
                        n::Delta::ToolCallFragment { index: fragment.index, json: fragment.json }
                    }
                    t::StreamDelta::ToolCallEnd(index) => n::Delta::ToolCallEnd(index),
                    t::StreamDelta::Usage(counts) => n::Delta::Usage(usage(counts)),
                    t::StreamDelta::Stop(stop) => n::Delta::Stop(n::Stop {
                        reason: stop_name(stop.reason).to_owned(),
                        raw: stop.raw,
                        refusal: stop.refusal.map(refusal),
                    }),
                    t::StreamDelta::ServedModel(model) => n::Delta::ServedModel(model),
                    t::StreamDelta::RequestId(id) => n::Delta::RequestId(id),
                    t::StreamDelta::Error(error) => n::Delta::Error(n::InBand {
                        status: error.status,
                        status_from_prose: error.status_from_prose,
                        class: classified(error.class),
                    }),
                }
            }

            pub fn codec_failure(error: t::CodecError) -> n::CodecFailure {
                match error {
                    t::CodecError::Unsupported(reason) => n::CodecFailure::Unsupported(reason),
                    t::CodecError::Malformed(reason) => n::CodecFailure::Malformed(reason),
                }
            }

            pub fn embed_params(params: &n::EmbedParams) -> t::EmbeddingParams {
                t::EmbeddingParams {
                    wire_model_id: params.model.clone(),
                    purpose: match params.purpose {
                        n::Purpose::Document => t::EmbeddingPurpose::Document,
                        n::Purpose::Query => t::EmbeddingPurpose::Query,
                    },
                    dimensions: params.dimensions,
                }
            }

            pub fn embeddings(response: t::EmbeddingResponse) -> n::DecodedEmbeddings {
                n::DecodedEmbeddings::new(
                    &response.vectors,
                    response.input_tokens,
                    response.served_model,
                    response.request_id,
                )
            }

            pub fn rerank_params(params: &n::RerankParams) -> t::RerankParams {
                t::RerankParams { wire_model_id: params.model.clone(), top_n: params.top_n }
            }

            pub fn ranking(response: t::RerankResponse) -> n::DecodedRanking {
                n::DecodedRanking {
                    results: response
                        .results
                        .into_iter()
                        .map(|ranked| n::Ranked { index: ranked.index, relevance_score: ranked.relevance_score })
                        .collect(),
                    input_tokens: response.input_tokens,
                    search_units: response.search_units,
                    served_model: response.served_model,
                    request_id: response.request_id,
                }
            }

            pub fn native_support(support: t::NativeSupport) -> n::NativeSupportSummary {
                n::NativeSupportSummary {
                    dialect: support.dialect,
                    fields: support.fields,
                    betas: support.betas,
                    count_tokens: support.count_tokens,
                }
            }

            pub fn native_request(native: &n::NativeFields) -> t::NativeRequest {
                t::NativeRequest {
                    dialect: native.dialect.clone(),
                    fields_json: native.fields_json.clone(),
                    betas: native.betas.clone(),
                }
            }

            pub fn native_answer(answer: t::NativeAnswer) -> n::DecodedNative {
                n::DecodedNative {
                    response: decoded(answer.response),
                    blocks: answer
                        .blocks
                        .into_iter()
                        .map(|block| match block {
                            t::AnswerBlock::Neutral(index) => n::AnswerBlock::Neutral(index),
                            t::AnswerBlock::Native(json) => n::AnswerBlock::Native(json),
                        })
                        .collect(),
                    usage_json: answer.usage_json,
                }
            }

            pub fn summary(info: &t::ProviderInfo) -> n::ProviderSummary {
                n::ProviderSummary {
                    key: info.key.clone(),
                    default_endpoint: info.default_endpoint.clone(),
                    credential_header: match &info.credential {
                        t::CredentialShape::Header(header) => Some(header.header_name.clone()),
                        _ => None,
                    },
                    streaming: info.capabilities.contains(t::Capabilities::STREAMING),
                    media: n::MediaSources {
                        inline_images: info.capabilities.contains(t::Capabilities::INLINE_IMAGES),
                        image_urls: info.capabilities.contains(t::Capabilities::IMAGE_URLS),
                        inline_documents: info.capabilities.contains(t::Capabilities::INLINE_DOCUMENTS),
                        document_urls: info.capabilities.contains(t::Capabilities::DOCUMENT_URLS),
                    },
                    thinking: info.capabilities.contains(t::Capabilities::THINKING),
                    framing: match info.stream_framing {
                        t::StreamFraming::Sse => n::Framing::Sse,
                        t::StreamFraming::AwsEventStream => n::Framing::AwsEventStream,
                    },
                }
            }
        }
    };
}
