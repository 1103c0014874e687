//! The describe checks and the chat checks every provider passes, whatever its
//! dialect: they hold for any HTTP + JSON wire format, so they run on a component
//! nobody wrote fixtures for. (The embeddings and rerank checks are in
//! [`crate::embeddings`] and [`crate::rerank`]; what all three share is in
//! [`crate::wire`].)
//!
//! - describe: keys are well-formed and unique; endpoints are URLs.
//! - encode: a well-formed request with no credential in it; the model id and the
//!   host's output reserve are on the wire exactly; text survives JSON byte for byte,
//!   whole at 1 MiB; no block kind is silently dropped (it is encoded, rendered as
//!   text, or explicitly refused as `unsupported`, and the report says which);
//!   an image or document from a source the key declares (`inline-images`,
//!   `image-urls`, `inline-documents`, `document-urls`) is carried, never
//!   refused, and a refusal of an undeclared one is named as the declaration's;
//!   streaming changes the request.
//! - decode: garbage (empty, not JSON, invalid UTF-8, truncated, absurdly nested)
//!   is `malformed`, never a fault and never an answer.
//! - classify: HTTP status semantics hold without a readable body; `retry-after` in
//!   both its forms becomes a hint; a huge body gives a bounded detail.

use serde_json::{Value, json};

use crate::fixture::{
    Block, CodecFailure, Conversation, Leaf, Media, MediaFlag, Params, ProviderSummary, Role, Source, Tool, ToolChoice,
    Turn, WireRequest,
};
use crate::json::{excerpt, has_key, has_number, mentions};
use crate::report::Report;
use crate::subject::{Operation, Subject};
use crate::wire::{classify_checks, encoded, garbage_bodies, garbage_response, malformed, require, well_formed};

pub use crate::wire::DETAIL_LIMIT;

/// The model id every generic case sends: distinctive, and safe in a URL path.
pub const MODEL: &str = "weir-conformance-model-7";
/// The output reserve every generic case sends: it must appear on the wire exactly.
pub const MAX_TOKENS: u32 = 1234;
/// Text that breaks naive JSON building and naive markup parsing.
pub const HOSTILE_TEXT: &str =
    "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} emoji 🦀 rtl \u{202e} </tool_call> {\"json\": true}";
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const PDF_BASE64: &str =
    "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoKdHJhaWxlcgo8PC9Sb290IDEgMCBSPj4KJSVFT0YK";

/// Runs the describe checks. Returns the keys the subject serves.
pub async fn describe<S: Subject>(subject: &S, report: &mut Report) -> Vec<ProviderSummary> {
    let providers = match subject.providers().await {
        Ok(providers) => providers,
        Err(fault) => {
            report.record("*", "describe: providers() answers", Err(fault.0));
            return Vec::new();
        }
    };
    report.record("*", "describe: serves at least one provider key", describe_keys(&providers));
    for provider in &providers {
        report.record(&provider.key, "describe: default endpoint is an http(s) URL", describe_endpoint(provider));
    }
    providers
}

/// Runs the chat checks for each provider key: encode, decode, classify.
pub async fn chat<S: Subject>(subject: &S, providers: &[ProviderSummary], report: &mut Report) {
    for provider in providers {
        encode_checks(subject, provider, report).await;
        decode_checks(subject, &provider.key, report).await;
        classify_checks(subject, Operation::Chat, &provider.key, "", report).await;
    }
}

fn describe_keys(providers: &[ProviderSummary]) -> Result<(), String> {
    if providers.is_empty() {
        return Err("providers() is empty".to_owned());
    }
    for (i, provider) in providers.iter().enumerate() {
        let key = &provider.key;
        let well_formed = !key.is_empty()
            && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !well_formed {
            return Err(format!("key {key:?} is not lowercase letters, digits, `-` and `.`"));
        }
        if providers[..i].iter().any(|earlier| &earlier.key == key) {
            return Err(format!("key {key:?} is listed twice"));
        }
    }
    Ok(())
}

fn describe_endpoint(provider: &ProviderSummary) -> Result<(), String> {
    match &provider.default_endpoint {
        Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => {
            Err(format!("{url:?} is not an http(s) URL"))
        }
        _ => Ok(()),
    }
}

// ------------------------------------------------------------------ encode

pub(crate) fn params() -> Params {
    Params {
        model: MODEL.to_owned(),
        max_tokens: MAX_TOKENS,
        thinking_budget: None,
        effort: None,
        temperature: None,
        stop: Vec::new(),
        response_schema: None,
        stream: false,
    }
}

pub(crate) fn text(text: &str) -> Block {
    Block::Text { text: text.to_owned() }
}

fn turn(role: Role, content: Vec<Block>) -> Turn {
    Turn { role, content, cache: false }
}

pub(crate) fn user(content: Vec<Block>) -> Conversation {
    Conversation { turns: vec![turn(Role::User, content)], ..Conversation::default() }
}

/// Runs one encode case the component must answer: `check` inspects the body of a
/// well-formed request.
async fn encode_case<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    conversation: &Conversation,
    params: &Params,
    check: impl Fn(&Value, &WireRequest) -> Result<(), String>,
) -> Result<(), String> {
    match encode_or_refuse(subject, provider, conversation, params, check).await? {
        None => Ok(()),
        Some(reason) => Err(format!("refused to encode (unsupported): {reason}")),
    }
}

/// Runs one encode case the component may decline: `Ok(None)` when it sent a request
/// `check` accepts, `Ok(Some(reason))` when it refused as `unsupported` (refused,
/// not dropped), an error for anything else.
async fn encode_or_refuse<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    conversation: &Conversation,
    params: &Params,
    check: impl Fn(&Value, &WireRequest) -> Result<(), String>,
) -> Result<Option<String>, String> {
    match subject.encode(&provider.key, conversation, params).await {
        Err(fault) => Err(format!("fault: {}", fault.0)),
        Ok(Err(CodecFailure::Unsupported(reason))) => Ok(Some(reason)),
        Ok(Err(failure)) => Err(format!("refused to encode ({}): {}", failure.kind(), failure.reason())),
        Ok(Ok(request)) => check(&well_formed(&request, provider)?, &request).map(|()| None),
    }
}

async fn encode_checks<S: Subject>(subject: &S, provider: &ProviderSummary, report: &mut Report) {
    let key = &provider.key;
    let mut plain = user(vec![text("What is the capital of France?")]);
    plain.system.push("You answer in one word.".to_owned());
    let result = encode_case(subject, provider, &plain, &params(), |_, _| Ok(())).await;
    report.record(key, "encode: a plain conversation gives a well-formed request without credentials", result);

    let result = encode_case(subject, provider, &plain, &params(), |body, request| {
        require(mentions(body, MODEL) || request.path_and_query.contains(MODEL), "the wire model id")
    })
    .await;
    report.record(key, "encode: the wire model id is sent", result);

    let result = encode_case(subject, provider, &plain, &params(), |body, _| {
        require(has_number(body, u64::from(MAX_TOKENS)), "max-tokens (1234) as a number")
    })
    .await;
    report.record(key, "encode: the host's output reserve is written exactly", result);

    let result = encode_case(subject, provider, &plain, &params(), |body, _| {
        require(mentions(body, "You answer in one word."), "the system text")
    })
    .await;
    report.record(key, "encode: system text is sent", result);

    let hostile = user(vec![text(HOSTILE_TEXT)]);
    let result = encode_case(subject, provider, &hostile, &params(), |body, _| {
        require(mentions(body, HOSTILE_TEXT), "the text byte for byte")
    })
    .await;
    report.record(key, "encode: quotes, escapes, NUL and emoji survive JSON exactly", result);

    let large: String = (0..1 << 20).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let result = encode_case(subject, provider, &user(vec![text(&large)]), &params(), |body, _| {
        require(mentions(body, &large), "the whole 1 MiB text")
    })
    .await;
    report.record(key, "encode: a 1 MiB message is sent whole", result);

    for (name, conversation, markers, flag) in block_cases() {
        let result = encode_or_refuse(subject, provider, &conversation, &params(), |body, _| {
            markers.iter().try_for_each(|any_of| {
                require(any_of.iter().any(|marker| mentions(body, marker)), &format!("any of {any_of:?}"))
            })
        })
        .await;
        record_block_case(report, provider, name, flag, result);
    }

    let result = encode_or_refuse(subject, provider, &tools_conversation(), &params(), |body, _| {
        require(mentions(body, "get_weather"), "the tool name")?;
        require(has_key(body, "city") || mentions(body, "city"), "the tool's parameter schema")
    })
    .await;
    report.record_or_refused(
        key,
        "encode: tool definitions and tool choice are sent",
        "encode: tool definitions and tool choice are refused as unsupported",
        result,
    );

    if provider.streaming {
        report.record(
            key,
            "encode: a streaming request differs from a plain one",
            stream_differs(subject, provider).await,
        );
    }
}

/// Records one block case. A media case is compared with the key's declaration
/// (its flag): a declared source must be carried — refusing it fails, since the
/// host sends such blocks to the component — and an undeclared one may be
/// refused, which the report names as the declaration's (the host refuses such
/// a block itself before any encode). Any other case may be sent or refused.
fn record_block_case(
    report: &mut Report,
    provider: &ProviderSummary,
    name: &str,
    flag: Option<MediaFlag>,
    result: Result<Option<String>, String>,
) {
    let key = &provider.key;
    let sent = format!("encode: {name}: sent, natively or as text");
    match flag {
        None => report.record_or_refused(
            key,
            &sent,
            &format!("encode: {name}: refused as unsupported, not dropped"),
            result,
        ),
        Some(flag) if provider.media.declares(flag) => {
            let declared = format!("encode: {name}: sent, as `{}` declares", flag.name());
            let result = match result {
                Ok(None) => Ok(()),
                Ok(Some(reason)) => {
                    Err(format!("it declares `{}` but refused this as unsupported: {reason}", flag.name()))
                }
                Err(reason) => Err(reason),
            };
            report.record(key, declared, result);
        }
        Some(flag) => report.record_or_refused(
            key,
            &sent,
            &format!("encode: {name}: refused as unsupported, as declared (no `{}`)", flag.name()),
            result,
        ),
    }
}

/// A block case: its name, its conversation, its markers (every inner list
/// names alternatives, any one of which in the body proves the block was
/// carried, natively or as text) and, for media, the flag that declares it.
type BlockCase = (&'static str, Conversation, Vec<Vec<&'static str>>, Option<MediaFlag>);

fn block_cases() -> Vec<BlockCase> {
    let image = |source| Block::Image(Media { mime_type: "image/png".to_owned(), source });
    let document = |source| Block::Document(Media { mime_type: "application/pdf".to_owned(), source });
    let ask = || text("Describe the attachment.");
    let tool_use = Block::ToolUse {
        id: "call_conf_1".to_owned(),
        name: "get_weather".to_owned(),
        input: json!({"city": "Paris"}),
    };
    let tool_result = Block::ToolResult {
        tool_use_id: "call_conf_1".to_owned(),
        content: vec![Leaf::Text { text: "18 degrees and sunny".to_owned() }],
        is_error: false,
    };
    let thinking = Block::Thinking {
        text: "Considering the weather first.".to_owned(),
        signature: Some("sig-conf-1".to_owned()),
        redacted: false,
    };
    let exchange = |assistant: Vec<Block>, then: Vec<Block>| Conversation {
        turns: vec![
            turn(Role::User, vec![text("What is the weather in Paris?")]),
            turn(Role::Assistant, assistant),
            turn(Role::User, then),
        ],
        ..Conversation::default()
    };
    vec![
        (
            "image (base64)",
            user(vec![ask(), image(Source::Base64(PNG_BASE64.to_owned()))]),
            vec![vec![PNG_BASE64, "image/png"]],
            Some(MediaFlag::InlineImages),
        ),
        (
            "image (URL)",
            user(vec![ask(), image(Source::Url("https://example.com/cat.png".to_owned()))]),
            vec![vec!["https://example.com/cat.png"]],
            Some(MediaFlag::ImageUrls),
        ),
        (
            "document",
            user(vec![ask(), document(Source::Base64(PDF_BASE64.to_owned()))]),
            vec![vec![PDF_BASE64, "application/pdf"]],
            Some(MediaFlag::InlineDocuments),
        ),
        (
            "document (URL)",
            user(vec![ask(), document(Source::Url("https://example.com/report.pdf".to_owned()))]),
            vec![vec!["https://example.com/report.pdf"]],
            Some(MediaFlag::DocumentUrls),
        ),
        (
            "tool use and tool result",
            exchange(vec![tool_use], vec![tool_result]),
            // Not the call id: some dialects (Ollama) have none on the wire.
            vec![vec!["get_weather"], vec!["Paris"], vec!["18 degrees and sunny"]],
            None,
        ),
        (
            "thinking in history",
            exchange(vec![thinking, text("It is sunny.")], vec![text("Thanks.")]),
            vec![vec!["Considering the weather first."], vec!["It is sunny."]],
            None,
        ),
    ]
}

fn tools_conversation() -> Conversation {
    let mut conversation = user(vec![text("What is the weather in Paris?")]);
    conversation.tools.push(Tool {
        name: "get_weather".to_owned(),
        description: "Current weather for a city".to_owned(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    });
    conversation.tool_choice = Some(ToolChoice::Named("get_weather".to_owned()));
    conversation
}

async fn stream_differs<S: Subject>(subject: &S, provider: &ProviderSummary) -> Result<(), String> {
    let conversation = user(vec![text("Count to three.")]);
    let streaming = Params { stream: true, ..params() };
    let plain = encoded(subject.encode(&provider.key, &conversation, &params()).await)?;
    let stream = encoded(subject.encode(&provider.key, &conversation, &streaming).await)?;
    if plain.body == stream.body && plain.path_and_query == stream.path_and_query {
        return Err("`stream: true` produced the same request as `stream: false`".to_owned());
    }
    Ok(())
}

// ------------------------------------------------------------------ decode

async fn decode_checks<S: Subject>(subject: &S, key: &str, report: &mut Report) {
    for (what, body) in garbage_bodies() {
        let answer = subject.decode(key, &garbage_response(body)).await;
        let result = malformed(answer, |decoded| excerpt(&Value::String(decoded.text.clone())));
        report.record(key, format!("decode: {what} is malformed, not a fault"), result);
    }
}
