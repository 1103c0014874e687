//! The checks of the `native` interface (weir:provider 0.4.0 on), for a
//! component that exports it beside chat. What holds for any dialect:
//! `support` names each field and beta once; `encode` with no native fields
//! builds the request `chat.encode` builds; each field and beta `support`
//! declares is carried (the request changes) or refused, never dropped; every
//! request stays well-formed and without credentials; the token count leaves
//! the output reserve out; and garbage answers are `malformed`, not faults.
//! What a field means (where in the body it goes) is the dialect's, which the
//! provider's own fixtures check.

use serde_json::{Map, Value};

use crate::dialect::Case;
use crate::fixture::{
    AnswerBlock, Conversation, Decoded, DecodedNative, NativeFields, NativeSupportSummary, Params, ProviderSummary,
    WireRequest,
};
use crate::generic::{MAX_TOKENS, MODEL, params, text, user};
use crate::json::has_number;
use crate::report::Report;
use crate::subject::{Answer, Fault, NativeLevel, Subject};
use crate::wire::{garbage_bodies, garbage_response, malformed, require, well_formed};

/// The value each declared field is sent with: whatever a field takes, a
/// provider either carries it or refuses it.
const PROBE_VALUE: &str = r#"{"weir_kit":7}"#;

/// The beta sent to a key that takes any (`*`).
const PROBE_BETA: &str = "weir-kit-2026-01-01";

/// Runs the checks on every key of `subject`, which exports `native`, with
/// the fixtures' `cases` for their wire ids and answers.
pub async fn run<S: Subject>(subject: &S, providers: &[ProviderSummary], cases: &[Case], report: &mut Report) {
    for provider in providers {
        let key = &provider.key;
        // A key that takes nothing natively is never sent native fields,
        // hosted tools or a dialect's blocks: it is checked no further.
        let (wire_id, support) = match supported(subject, key, cases).await {
            Ok(Some(support)) => support,
            Ok(None) => continue,
            Err(fault) => {
                report.record(key, "native: support answers", Err(format!("fault: {}", fault.0)));
                continue;
            }
        };
        report.record(key, "native: support answers", Ok(()));
        fields_checks(subject, provider, &wire_id, &support, report).await;
        if subject.native_level() == NativeLevel::Answers {
            answers_checks(subject, key, cases, report).await;
        }
    }
}

/// The first wire id `support` answers for, of the kit's model and those of
/// the key's encode fixtures (a provider may serve only its own id forms).
async fn supported<S: Subject>(
    subject: &S,
    key: &str,
    cases: &[Case],
) -> Result<Option<(String, NativeSupportSummary)>, Fault> {
    let fixtures = cases.iter().filter_map(|case| match case {
        Case::Encode { provider, params, .. } if provider == key => Some(params.model.as_str()),
        _ => None,
    });
    for wire_id in std::iter::once(MODEL).chain(fixtures) {
        if let Some(support) = subject.native_support(key, wire_id).await? {
            return Ok(Some((wire_id.to_owned(), support)));
        }
    }
    Ok(None)
}

/// `decode-native` of garbage is `malformed`; of each decode fixture's
/// answer, chat's answer with every neutral block once, in order.
async fn answers_checks<S: Subject>(subject: &S, key: &str, cases: &[Case], report: &mut Report) {
    for (what, body) in garbage_bodies() {
        let answer = subject.decode_native(key, &garbage_response(body)).await;
        let result = malformed(answer, |decoded| format!("{} blocks", decoded.blocks.len()));
        report.record(key, format!("native: decode-native of {what} is malformed, not a fault"), result);
    }
    for case in cases {
        let Case::Decode { name, provider, response, .. } = case else { continue };
        if provider != key {
            continue;
        }
        let Ok(Ok(decoded)) = subject.decode(key, response).await else { continue };
        let result = match subject.decode_native(key, response).await {
            Err(fault) => Err(format!("fault: {}", fault.0)),
            Ok(Err(failure)) => Err(format!("refused ({}): {}", failure.kind(), failure.reason())),
            Ok(Ok(native)) => same_answer(&decoded, &native),
        };
        report.record(key, format!("native: decode-native of `{name}` is decode's answer, in order"), result);
    }
}

/// `native` holds `decoded`, and names each of its blocks once, in order.
fn same_answer(decoded: &Decoded, native: &DecodedNative) -> Result<(), String> {
    require(native.response == *decoded, "decode's answer")?;
    let neutral: Vec<u32> = native
        .blocks
        .iter()
        .filter_map(|block| match block {
            AnswerBlock::Neutral(index) => Some(*index),
            AnswerBlock::Native(_) => None,
        })
        .collect();
    let every = (0..decoded.content.len()).map(u32::try_from).collect::<Result<Vec<u32>, _>>();
    require(every.is_ok_and(|every| every == neutral), "each neutral block once, in order")
}

async fn fields_checks<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    wire_id: &str,
    support: &NativeSupportSummary,
    report: &mut Report,
) {
    let key = &provider.key;
    let params = || Params { model: wire_id.to_owned(), ..params() };
    report.record(key, "native: support names a dialect and each field and beta once", declared(support));
    let conversation = user(vec![text("What is the capital of France?")]);
    let none = NativeFields { dialect: support.dialect.clone(), fields_json: "{}".to_owned(), betas: Vec::new() };
    let chat = subject.encode(key, &conversation, &params()).await;
    let bare = subject.native_encode(key, &conversation, &params(), &none).await;
    report.record(
        key,
        "native: encode without native fields builds chat's request",
        same_request(&chat, &bare, provider),
    );
    let Ok(Ok(bare)) = bare else { return };
    for field in &support.fields {
        let fields_json = format!(r#"{{"{}":{PROBE_VALUE}}}"#, field.replace('\\', "\\\\").replace('"', "\\\""));
        let native = NativeFields { fields_json, ..none.clone() };
        let answer = subject.native_encode(key, &conversation, &params(), &native).await;
        report.record(key, format!("native: field `{field}` is carried or refused"), carried(answer, &bare, provider));
    }
    for beta in probe_betas(support) {
        let native = NativeFields { betas: vec![beta.clone()], ..none.clone() };
        let answer = subject.native_encode(key, &conversation, &params(), &native).await;
        report.record(key, format!("native: beta `{beta}` is carried or refused"), carried(answer, &bare, provider));
    }
    if support.count_tokens {
        count_checks(subject, provider, &conversation, &params(), &none, report).await;
    }
}

/// `support`'s answer is sound: a dialect, names without duplicates, and
/// `*` only alone.
fn declared(support: &NativeSupportSummary) -> Result<(), String> {
    require(!support.dialect.is_empty(), "a dialect name")?;
    for (what, names) in [("field", &support.fields), ("beta", &support.betas)] {
        for (index, name) in names.iter().enumerate() {
            require(!name.is_empty(), &format!("no empty {what} name"))?;
            require(!names[..index].contains(name), &format!("{what} `{name}` named once"))?;
        }
    }
    let any = support.betas.iter().any(|beta| beta == "*");
    require(!any || support.betas.len() == 1, "`*` alone among the betas")
}

/// The betas to send one at a time: each declared one, or a made-up one
/// where any is taken.
fn probe_betas(support: &NativeSupportSummary) -> Vec<String> {
    match support.betas.as_slice() {
        [any] if any == "*" => vec![PROBE_BETA.to_owned()],
        betas => betas.to_vec(),
    }
}

/// Chat's request and the native one with no fields: the same method, path,
/// headers (in any order) and body (as JSON), or both refused.
fn same_request(
    chat: &Answer<WireRequest>,
    native: &Answer<WireRequest>,
    provider: &ProviderSummary,
) -> Result<(), String> {
    match (chat, native) {
        (Err(fault), _) | (_, Err(fault)) => Err(format!("fault: {}", fault.0)),
        (Ok(Err(_)), Ok(Err(_))) => Ok(()),
        (Ok(Ok(_)), Ok(Err(failure))) => Err(format!("refused ({}): {}", failure.kind(), failure.reason())),
        (Ok(Err(_)), Ok(Ok(_))) => Err("built a request chat refuses".to_owned()),
        (Ok(Ok(chat)), Ok(Ok(native))) => {
            let body = well_formed(native, provider)?;
            require(native.method == chat.method, &format!("method {}", chat.method))?;
            require(native.path_and_query == chat.path_and_query, &format!("path {}", chat.path_and_query))?;
            require(sorted(&native.headers) == sorted(&chat.headers), "chat's headers")?;
            require(body == json_body(chat), "chat's body")
        }
    }
}

/// A request built with one native field or beta: refused, or well-formed
/// and unlike the request without it (the field or beta went somewhere).
fn carried(answer: Answer<WireRequest>, bare: &WireRequest, provider: &ProviderSummary) -> Result<(), String> {
    match answer {
        Err(fault) => Err(format!("fault: {}", fault.0)),
        Ok(Err(_)) => Ok(()),
        Ok(Ok(request)) => {
            let body = well_formed(&request, provider)?;
            let unchanged = body == json_body(bare)
                && sorted(&request.headers) == sorted(&bare.headers)
                && request.path_and_query == bare.path_and_query;
            require(!unchanged, "a change to the request (it was dropped)")
        }
    }
}

async fn count_checks<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    conversation: &Conversation,
    params: &Params,
    none: &NativeFields,
    report: &mut Report,
) {
    let key = &provider.key;
    let result = match subject.count_tokens_encode(key, conversation, params, none).await {
        Err(fault) => Err(format!("fault: {}", fault.0)),
        Ok(Err(failure)) => Err(format!("refused ({}): {}", failure.kind(), failure.reason())),
        Ok(Ok(request)) => well_formed(&request, provider)
            .and_then(|body| require(!has_number(&body, u64::from(MAX_TOKENS)), "no max-tokens (1234)")),
    };
    report.record(key, "native: a token count request is well-formed and leaves the output reserve out", result);
    for (what, body) in garbage_bodies() {
        let answer = subject.count_tokens_decode(key, &garbage_response(body)).await;
        let result = malformed(answer, |count| count.to_string());
        report.record(key, format!("native: count-tokens-decode of {what} is malformed, not a fault"), result);
    }
}

fn sorted(headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> =
        headers.iter().map(|(name, value)| (name.to_ascii_lowercase(), value.clone())).collect();
    headers.sort();
    headers
}

/// A request's body as JSON (an empty object for a body that is not).
fn json_body(request: &WireRequest) -> Value {
    serde_json::from_slice(&request.body).unwrap_or_else(|_| Value::Object(Map::new()))
}
