//! The embeddings checks every provider that exports `embeddings` passes,
//! whatever its dialect. They run per (provider key, wire id) the key embeds
//! with (see [`crate::target`]). Decode and classify take no wire id, so they run
//! once per key that embeds with any of them.
//!
//! - max-batch: at least 1, and the same when asked again (the host asks it once
//!   per load, so an answer that changes would change between reloads).
//! - encode: one input and `max-batch` inputs each give one well-formed request
//!   (a method, a path, no credential header, within the host's caps) carrying
//!   the wire id and every input byte for byte.
//! - dimensions: a width the host asks for is on the wire exactly, or the
//!   component refuses it as `unsupported`. Ignoring it fails: the host asks for
//!   a width only for an entry that pins one and refuses every vector of another
//!   length, so a dropped width is a call that fails at run time instead of a
//!   clear refusal at encode. A model that `needs-dimensions` must refuse a
//!   batch without a width.
//! - decode: garbage is `malformed`; classify: as for chat ([`crate::wire`]).

use std::collections::HashSet;

use serde_json::json;

use crate::fixture::{CodecFailure, EmbedParams, ProviderSummary, Purpose, WireRequest};
use crate::generic::HOSTILE_TEXT;
use crate::json::{excerpt, has_number, mentions, strings};
use crate::report::Report;
use crate::subject::{Operation, Subject};
use crate::target::{Target, none_served, served};
use crate::wire::{
    classify_checks, encoded, garbage_bodies, garbage_response, malformed, path_names, require, well_formed,
};

/// The width the dimensions check asks for when no fixture names one: every
/// dimension-capable model the first-party components serve accepts it
/// (OpenAI `text-embedding-3-*`, Titan V2, Cohere v3 and v4).
pub const WIDTH: u32 = 256;
/// The largest `max-batch` the kit encodes whole. No provider takes more inputs
/// in one request (OpenAI's limit, the largest known, is 2048).
pub const MAX_BATCH_CHECKED: u32 = 4096;

/// Runs the embeddings checks for every provider key and wire id in `targets`
/// the key embeds with. A component none of whose keys embeds with any of them
/// fails one check saying so: the kit checked nothing, and says why.
pub async fn run<S: Subject>(subject: &S, providers: &[ProviderSummary], targets: &[Target], report: &mut Report) {
    let mut checked_any = false;
    for provider in providers {
        let embeds_with = served(subject, Operation::Embeddings, provider, targets, report).await;
        for target in &embeds_with {
            wire_id_checks(subject, provider, target, report).await;
        }
        if embeds_with.is_empty() {
            continue;
        }
        checked_any = true;
        for (what, body) in garbage_bodies() {
            let answer = subject.embed_decode(&provider.key, &garbage_response(body)).await;
            let result = malformed(answer, |decoded| format!("{} vectors", decoded.count));
            report.record(&provider.key, format!("embeddings: decode: {what} is malformed, not a fault"), result);
        }
        classify_checks(subject, Operation::Embeddings, &provider.key, "embeddings: ", report).await;
    }
    if !checked_any {
        report.record(
            "*",
            "embeddings: some provider key embeds with a wire id the kit tries",
            Err(none_served(targets)),
        );
    }
}

fn params(wire_id: &str, dimensions: Option<u32>) -> EmbedParams {
    EmbedParams { model: wire_id.to_owned(), purpose: Purpose::Document, dimensions }
}

async fn wire_id_checks<S: Subject>(subject: &S, provider: &ProviderSummary, target: &Target, report: &mut Report) {
    let key = &provider.key;
    let id = &target.wire_id;
    let name = |check: &str| format!("embeddings `{id}`: {check}");

    let max_batch = max_batch(subject, key, id).await;
    report.record(key, name("max-batch is at least 1 and the same when asked again"), max_batch.clone().map(drop));

    let width = target.dimensions.unwrap_or(WIDTH);
    let needs = subject.needs_dimensions(key, id).await;
    let base = match &needs {
        Ok(true) => Some(width),
        Ok(false) | Err(_) => None,
    };
    if let Err(fault) = &needs {
        report.record(key, name("needs-dimensions answers"), Err(format!("fault: {}", fault.0)));
    }

    let one = vec!["What is the capital of France?".to_owned()];
    let result = encode_checked(subject, provider, &one, &params(id, base), |_, _| Ok(())).await;
    report.record(key, name("encode: one input gives a well-formed request without credentials"), result);

    let result = encode_checked(subject, provider, &one, &params(id, base), |body, request| {
        require(mentions(body, id) || path_names(&request.path_and_query, id), "the wire model id")
    })
    .await;
    report.record(key, name("encode: the wire model id is sent"), result);

    let hostile = vec![HOSTILE_TEXT.to_owned()];
    let result = encode_checked(subject, provider, &hostile, &params(id, base), |body, _| {
        require(mentions(body, HOSTILE_TEXT), "the input byte for byte")
    })
    .await;
    report.record(key, name("encode: quotes, escapes, NUL and emoji survive JSON exactly"), result);

    if let Ok(batch) = max_batch {
        let inputs: Vec<String> = (1..=batch).map(|i| format!("input {i} of {batch}")).collect();
        let result = encode_checked(subject, provider, &inputs, &params(id, base), |body, _| {
            let found: HashSet<&str> = strings(body).into_iter().collect();
            match inputs.iter().find(|input| !found.contains(input.as_str()) && !mentions(body, input)) {
                Some(missing) => Err(format!("the body does not carry {missing:?}")),
                None => Ok(()),
            }
        })
        .await;
        report.record(key, name(&format!("encode: max-batch ({batch}) inputs are sent in one request")), result);
    }

    match needs {
        Ok(true) => {
            let result = refuses_without_width(subject, provider, &one, id).await;
            report.record(key, name("encode: without dimensions it refuses as unsupported (it needs them)"), result);
            let result = encode_checked(subject, provider, &one, &params(id, Some(width)), |body, _| {
                require(has_number(body, u64::from(width)), &format!("the width asked for ({width}) as a number"))
            })
            .await;
            report.record(key, name(&format!("encode: dimensions ({width}) are sent exactly")), result);
        }
        Ok(false) => {
            let result = width_sent_or_refused(subject, provider, &one, id, width).await;
            report.record_or_refused(
                key,
                &name(&format!("encode: dimensions ({width}) are sent exactly")),
                &name(&format!("encode: dimensions ({width}) are refused as unsupported, not dropped")),
                result,
            );
        }
        Err(_) => {}
    }
}

/// `max-batch` asked twice: the answer when both agree and it is one the host
/// can batch by.
async fn max_batch<S: Subject>(subject: &S, key: &str, wire_id: &str) -> Result<u32, String> {
    let first = subject.max_batch(key, wire_id).await.map_err(|fault| format!("fault: {}", fault.0))?;
    let again =
        subject.max_batch(key, wire_id).await.map_err(|fault| format!("fault when asked again: {}", fault.0))?;
    match (first, again) {
        (0, _) => Err("max-batch is 0; the world promises at least 1".to_owned()),
        (first, again) if first != again => Err(format!("max-batch answered {first}, then {again}")),
        (batch, _) if batch > MAX_BATCH_CHECKED => {
            Err(format!("max-batch is {batch}; no provider takes more than {MAX_BATCH_CHECKED} inputs in one request"))
        }
        (batch, _) => Ok(batch),
    }
}

/// One encode the component must answer with a well-formed request that `check`
/// accepts.
async fn encode_checked<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    inputs: &[String],
    params: &EmbedParams,
    check: impl FnOnce(&serde_json::Value, &WireRequest) -> Result<(), String>,
) -> Result<(), String> {
    let request = encoded(subject.embed_encode(&provider.key, inputs, params).await)?;
    check(&well_formed(&request, provider)?, &request)
}

async fn refuses_without_width<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    inputs: &[String],
    wire_id: &str,
) -> Result<(), String> {
    match subject.embed_encode(&provider.key, inputs, &params(wire_id, None)).await {
        Err(fault) => Err(format!("fault: {}", fault.0)),
        Ok(Err(CodecFailure::Unsupported(_))) => Ok(()),
        Ok(Err(failure)) => Err(format!("refused as `{}` ({}), not `unsupported`", failure.kind(), failure.reason())),
        Ok(Ok(request)) => Err(format!(
            "encoded a request without a width ({}), though needs-dimensions says the model needs one",
            excerpt(&json!(String::from_utf8_lossy(&request.body)))
        )),
    }
}

/// `Ok(None)`: the width is on the wire and the request differs from one
/// without it; `Ok(Some(reason))`: refused as `unsupported`; an error otherwise.
async fn width_sent_or_refused<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    inputs: &[String],
    wire_id: &str,
    width: u32,
) -> Result<Option<String>, String> {
    let with = match subject.embed_encode(&provider.key, inputs, &params(wire_id, Some(width))).await {
        Err(fault) => return Err(format!("fault: {}", fault.0)),
        Ok(Err(CodecFailure::Unsupported(reason))) => return Ok(Some(reason)),
        Ok(Err(failure)) => {
            return Err(format!("refused to encode ({}): {}", failure.kind(), failure.reason()));
        }
        Ok(Ok(request)) => request,
    };
    let body = well_formed(&with, provider)?;
    let without = encoded(subject.embed_encode(&provider.key, inputs, &params(wire_id, None)).await)?;
    if with.body == without.body && with.path_and_query == without.path_and_query {
        return Err(format!(
            "the request with dimensions {width} is the one without: the width was dropped, so the host would \
             refuse every vector of another length at run time"
        ));
    }
    require(has_number(&body, u64::from(width)), &format!("the width asked for ({width}) as a number")).map(|()| None)
}
