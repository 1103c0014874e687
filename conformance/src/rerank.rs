//! The rerank checks every provider that exports `rerank` passes, whatever its
//! dialect. They run per (provider key, wire id) the key reranks with (see
//! [`crate::target`]); decode and classify once per key that reranks with any.
//!
//! - encode: a query and three documents give one well-formed request (a method,
//!   a path, no credential header, within the host's caps) carrying the wire id,
//!   the query and every document byte for byte.
//! - top-n: asked for, it is on the wire exactly, or refused as `unsupported`;
//!   ignoring it fails (the host would get more results than it asked for).
//! - decode: garbage is `malformed`; classify: as for chat ([`crate::wire`]).

use serde_json::Value;

use crate::fixture::{CodecFailure, ProviderSummary, RerankParams, WireRequest};
use crate::generic::HOSTILE_TEXT;
use crate::json::{has_number, mentions};
use crate::report::Report;
use crate::subject::{Operation, Subject};
use crate::target::{Target, none_served, served};
use crate::wire::{
    classify_checks, encoded, garbage_bodies, garbage_response, malformed, path_names, require, well_formed,
};

/// The query every generic case sends.
pub const QUERY: &str = "Which city is the capital of France?";
/// The `top-n` the top-n check asks for: fewer than [`documents`] gives.
pub const TOP_N: u32 = 2;

/// The three documents every generic case ranks.
pub fn documents() -> Vec<String> {
    ["Paris is the capital of France.", "Berlin is the capital of Germany.", "The Seine flows through Paris."]
        .map(str::to_owned)
        .to_vec()
}

/// Runs the rerank checks for every provider key and wire id in `targets` the
/// key reranks with; a component none of whose keys reranks with any fails one
/// check saying so.
pub async fn run<S: Subject>(subject: &S, providers: &[ProviderSummary], targets: &[Target], report: &mut Report) {
    let mut checked_any = false;
    for provider in providers {
        let reranks_with = served(subject, Operation::Rerank, provider, targets, report).await;
        for target in &reranks_with {
            wire_id_checks(subject, provider, &target.wire_id, report).await;
        }
        if reranks_with.is_empty() {
            continue;
        }
        checked_any = true;
        for (what, body) in garbage_bodies() {
            let answer = subject.rerank_decode(&provider.key, &garbage_response(body)).await;
            let result = malformed(answer, |decoded| format!("{} results", decoded.results.len()));
            report.record(&provider.key, format!("rerank: decode: {what} is malformed, not a fault"), result);
        }
        classify_checks(subject, Operation::Rerank, &provider.key, "rerank: ", report).await;
    }
    if !checked_any {
        report.record("*", "rerank: some provider key reranks with a wire id the kit tries", Err(none_served(targets)));
    }
}

fn params(wire_id: &str, top_n: Option<u32>) -> RerankParams {
    RerankParams { model: wire_id.to_owned(), top_n }
}

async fn wire_id_checks<S: Subject>(subject: &S, provider: &ProviderSummary, id: &str, report: &mut Report) {
    let key = &provider.key;
    let name = |check: &str| format!("rerank `{id}`: {check}");
    let documents = documents();

    let result = encode_checked(subject, provider, QUERY, &documents, &params(id, None), |_, _| Ok(())).await;
    report.record(key, name("encode: a query and 3 documents give a well-formed request without credentials"), result);

    let result = encode_checked(subject, provider, QUERY, &documents, &params(id, None), |body, request| {
        require(mentions(body, id) || path_names(&request.path_and_query, id), "the wire model id")
    })
    .await;
    report.record(key, name("encode: the wire model id is sent"), result);

    let result = encode_checked(subject, provider, QUERY, &documents, &params(id, None), |body, _| {
        require(mentions(body, QUERY), "the query")?;
        documents.iter().try_for_each(|document| require(mentions(body, document), &format!("{document:?}")))
    })
    .await;
    report.record(key, name("encode: the query and every document are sent"), result);

    let hostile = vec![HOSTILE_TEXT.to_owned(), documents[0].clone()];
    let result = encode_checked(subject, provider, HOSTILE_TEXT, &hostile, &params(id, None), |body, _| {
        let found = body_strings_with(body, HOSTILE_TEXT);
        if found >= 2 { Ok(()) } else { Err("the body does not carry the query and the document byte for byte".into()) }
    })
    .await;
    report.record(key, name("encode: quotes, escapes, NUL and emoji survive JSON exactly"), result);

    let result = top_n_sent_or_refused(subject, provider, id, &documents).await;
    report.record_or_refused(
        key,
        &name(&format!("encode: top-n ({TOP_N}) is sent exactly")),
        &name(&format!("encode: top-n ({TOP_N}) is refused as unsupported, not dropped")),
        result,
    );
}

/// How many string values of `body` contain `needle`.
fn body_strings_with(body: &Value, needle: &str) -> usize {
    crate::json::strings(body).iter().filter(|text| text.contains(needle)).count()
}

async fn encode_checked<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    query: &str,
    documents: &[String],
    params: &RerankParams,
    check: impl FnOnce(&Value, &WireRequest) -> Result<(), String>,
) -> Result<(), String> {
    let request = encoded(subject.rerank_encode(&provider.key, query, documents, params).await)?;
    check(&well_formed(&request, provider)?, &request)
}

/// `Ok(None)`: top-n is on the wire and the request differs from one without
/// it; `Ok(Some(reason))`: refused as `unsupported`; an error otherwise.
async fn top_n_sent_or_refused<S: Subject>(
    subject: &S,
    provider: &ProviderSummary,
    wire_id: &str,
    documents: &[String],
) -> Result<Option<String>, String> {
    let with = match subject.rerank_encode(&provider.key, QUERY, documents, &params(wire_id, Some(TOP_N))).await {
        Err(fault) => return Err(format!("fault: {}", fault.0)),
        Ok(Err(CodecFailure::Unsupported(reason))) => return Ok(Some(reason)),
        Ok(Err(failure)) => return Err(format!("refused to encode ({}): {}", failure.kind(), failure.reason())),
        Ok(Ok(request)) => request,
    };
    let body = well_formed(&with, provider)?;
    let without = encoded(subject.rerank_encode(&provider.key, QUERY, documents, &params(wire_id, None)).await)?;
    if with.body == without.body && with.path_and_query == without.path_and_query {
        return Err(format!("the request with top-n {TOP_N} is the one without: top-n was dropped"));
    }
    require(has_number(&body, u64::from(TOP_N)), &format!("top-n ({TOP_N}) as a number")).map(|()| None)
}
