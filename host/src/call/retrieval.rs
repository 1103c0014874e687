//! Embeddings and reranking through the call template's own stages: the
//! record opened first, the target resolved (a role or entry of the
//! operation's kind), the budget held, then each upstream request through the
//! one retry loop and admission (in the call's lane), the component encoding,
//! the transport sending, the component decoding or classifying; the budget
//! settled and the record closed last. Only what is the operation's own lives
//! here: batching, the width check and the adapter, the ranking check.
//!
//! An embeddings call is split into upstream requests of at most the entry's
//! batch (the provider's own limit bounds it), up to [`BATCHES_IN_FLIGHT`] at
//! once, reassembled in input order. A failed batch fails the whole call with
//! its category (never a partial answer): no new batch starts after it, and
//! the ones already in flight finish, so every attempt made is on the record.

use std::ops::Range;
use std::time::Instant;

use crate::Weir;
use crate::admission::{Demand, Feedback, Lane};
use crate::catalog::{ModelSpec, RoleKind};
use crate::error::CallError;
use crate::error::WeirError;
use crate::plugin::Session;
use crate::record::Operation;
use crate::retrieval::{EmbedRequest, EmbedResponse, RerankRequest, RerankResponse, adapt};
use crate::types::{EmbeddingParams, EmbeddingPurpose, Ranked, RerankParams};

use super::attempt::{self, feed_back};
use super::attempt_log::Observed;
use super::opening::Opening;
use super::operation::{
    Answered, Bill, ESTIMATED, Sent, counted_within_window, exchange_in, in_order, input_only, logged, opened,
    recorded, retried, sent,
};
use super::retry::Try;
use super::spend::Spend;
use super::target::{self, Naming, Target};
use super::{Failure, Tally, hold, resolved};

/// Upstream requests one embeddings call keeps in flight at once: enough to
/// fill a model's admission, few enough that one bulk job cannot park
/// thousands of requests in its queue.
const BATCHES_IN_FLIGHT: usize = 8;

/// Runs one embeddings call end to end; its record is committed before the
/// answer (or the failure) is returned.
pub(crate) async fn embed(weir: &Weir, request: EmbedRequest) -> Result<EmbedResponse, CallError> {
    let content = weir
        .records_content()
        .then(|| serde_json::json!({ "inputs": request.inputs, "purpose": purpose_name(request.purpose) }));
    let what =
        opened(&request.model, request.caller.as_ref(), request.route, Operation::Embeddings, &request.traceparent);
    let run = async |tally: &mut Tally, opening: &Opening| run_embed(weir, &request, tally, opening).await;
    let (embedded, stamp) = recorded(weir, what, content, run).await?;
    Ok(EmbedResponse {
        vectors: embedded.vectors,
        dimensions: embedded.width,
        input_tokens: embedded.input_tokens,
        input_tokens_estimated: embedded.estimated,
        stamp,
    })
}

/// Runs one rerank call end to end, recorded like every other call.
pub(crate) async fn rerank(weir: &Weir, request: RerankRequest) -> Result<RerankResponse, CallError> {
    let content = weir
        .records_content()
        .then(|| serde_json::json!({ "query": request.query, "documents": request.documents, "top_n": request.top_n }));
    let what = opened(&request.model, request.caller.as_ref(), request.route, Operation::Rerank, &request.traceparent);
    let run = async |tally: &mut Tally, opening: &Opening| run_rerank(weir, &request, tally, opening).await;
    let (ranked, stamp) = recorded(weir, what, content, run).await?;
    Ok(RerankResponse {
        results: ranked.results,
        input_tokens: ranked.input_tokens,
        search_units: ranked.search_units,
        stamp,
    })
}

impl Answered for Embedded {
    fn served_model(&self) -> Option<String> {
        self.served_model.clone()
    }

    fn recorded(&self) -> serde_json::Value {
        serde_json::json!({ "vectors": self.vectors.len(), "dimensions": self.width })
    }
}

impl Answered for Reranked {
    fn served_model(&self) -> Option<String> {
        self.served_model.clone()
    }

    fn recorded(&self) -> serde_json::Value {
        let results = self.results.iter();
        results.map(|r| serde_json::json!({ "index": r.index, "relevance_score": r.relevance_score })).collect()
    }
}

fn purpose_name(purpose: EmbeddingPurpose) -> &'static str {
    match purpose {
        EmbeddingPurpose::Document => "document",
        EmbeddingPurpose::Query => "query",
    }
}

/// An embeddings call's answer before it is stamped.
struct Embedded {
    vectors: Vec<Vec<f32>>,
    width: u32,
    /// Billed input tokens, summed over the upstream requests.
    input_tokens: u64,
    /// Some upstream request reported no count: the host's estimate stands in.
    estimated: bool,
    served_model: Option<String>,
}

async fn run_embed(
    weir: &Weir,
    request: &EmbedRequest,
    tally: &mut Tally,
    opening: &Opening,
) -> Result<Embedded, WeirError> {
    if request.inputs.is_empty() {
        return Err(WeirError::InvalidRequest("`input` is empty: there is nothing to embed".to_owned()));
    }
    let naming = Naming {
        model: &request.model,
        caller: request.caller.as_ref(),
        route: request.route,
        kind: RoleKind::Embedding,
    };
    let target = target::resolve(weir, &naming, opening).await?;
    tally.resolved = Some(resolved(&target));
    let width = width_of(weir, target.model)?;
    if let Some(asked) = request.dimensions.filter(|asked| *asked != width) {
        return Err(WeirError::InvalidRequest(format!(
            "`dimensions` is {asked}, but model `{}` answers at {width}, the deployment's one width: send {width} \
             or leave it out",
            target.model.id
        )));
    }
    let lane = request.lane.or_else(|| role_lane(weir, &request.model)).unwrap_or(Lane::Interactive);
    let deadline = request.deadline.unwrap_or_else(|| lane_deadline(weir, lane));
    let estimates = estimates(&target, &request.inputs)?;
    let worst = crate::budget::worst_case(target.model, estimates.iter().sum(), 0);
    tally.hold = hold::take_worst(weir, request.caller.as_ref(), &target, worst, opening).await?;
    // Batches leave concurrently: the opening is in the record before any does.
    opening.settled().await?;
    let params = EmbeddingParams {
        wire_model_id: target.model.wire_id.clone(),
        purpose: request.purpose,
        dimensions: target.model.embedding_dimensions,
    };
    // Only the inputs the answer cache has no vector for are sent (see `answer_cache`).
    let lookups = super::answer_cache::look_up_inputs(weir, &target, request, &params, width, tally).await;
    let misses = lookups.as_ref().map_or_else(|| (0..request.inputs.len()).collect(), |found| found.misses());
    let embedded = if misses.is_empty() {
        Embedded { vectors: Vec::new(), width, input_tokens: 0, estimated: false, served_model: None }
    } else {
        let plan =
            Plan { target: &target, params, deadline, lane, max_retries: request.max_retries, started: tally.started };
        let per_request = batch_size(&target)?;
        let inputs: Vec<String> = misses.iter().map(|index| request.inputs[*index].clone()).collect();
        let estimates: Vec<u64> = misses.iter().map(|index| estimates[*index]).collect();
        let batches = send_batches(&plan, &inputs, &estimates, per_request, tally).await?;
        assemble(&target, batches, width, tally)?
    };
    let Some(lookups) = lookups else { return Ok(embedded) };
    super::answer_cache::store_inputs(weir, &lookups, &misses, &embedded.vectors, opening.call_id()).await;
    Ok(merged(lookups.found, embedded))
}

/// The cached vectors and the embedded ones (in the order of the inputs
/// that were sent), back in input order.
fn merged(found: Vec<Option<Vec<f32>>>, mut embedded: Embedded) -> Embedded {
    let mut sent = std::mem::take(&mut embedded.vectors).into_iter();
    embedded.vectors = found.into_iter().filter_map(|found| found.or_else(|| sent.next())).collect();
    embedded
}

/// The width every vector of this entry leaves at: its pinned one, else the
/// deployment's (checked at load; absent here only if the config changed under
/// a running gateway, which it cannot).
fn width_of(weir: &Weir, model: &ModelSpec) -> Result<u32, WeirError> {
    model.embedding_dimensions.or(weir.config().embeddings.dimensions).ok_or_else(|| {
        WeirError::InvalidRequest(format!(
            "model `{}` pins no `embedding_dimensions` and `[embeddings] dimensions` is not set",
            model.id
        ))
    })
}

/// The lane a role declares, when the caller named a role.
fn role_lane(weir: &Weir, name: &str) -> Option<Lane> {
    weir.roles().get(name).and_then(|role| role.lane)
}

fn lane_deadline(weir: &Weir, lane: Lane) -> tokio::time::Instant {
    let settings = &weir.config().embeddings;
    let budget = match lane {
        Lane::Interactive => settings.interactive_deadline(),
        Lane::Bulk => settings.bulk_deadline(),
    };
    tokio::time::Instant::now() + budget
}

/// Each text's estimated tokens; a text longer than the model reads is refused
/// before anything is admitted or sent (it would only come back as a 400).
fn estimates(target: &Target<'_>, texts: &[String]) -> Result<Vec<u64>, WeirError> {
    texts.iter().map(|text| counted_within_window(target.model, text)).collect()
}

/// Inputs per upstream request: the entry's `max_batch`, never more than the
/// provider's own limit (asked of the component at load).
fn batch_size(target: &Target<'_>) -> Result<usize, WeirError> {
    let limit = target
        .provider
        .max_batch(&target.model.wire_id)
        .map_err(|source| WeirError::Plugin { model: target.model.id.clone(), source })?;
    let size = target.model.max_batch.map_or(limit, |declared| declared.min(limit)).max(1);
    Ok(usize::try_from(size).unwrap_or(usize::MAX))
}

/// What every upstream request of one call shares.
struct Plan<'p, 't> {
    target: &'p Target<'t>,
    params: EmbeddingParams,
    deadline: tokio::time::Instant,
    lane: Lane,
    max_retries: Option<u32>,
    /// When the call started: every batch's attempts are timed from it.
    started: Instant,
}

/// One upstream request's answer: the native vectors and what it billed.
struct Batch {
    vectors: Vec<Vec<f32>>,
    tokens: u64,
    reported: bool,
    served_model: Option<String>,
}

/// Sends every batch (see the module doc) and collects them in input order;
/// the first failure is the call's, after the batches in flight have finished.
async fn send_batches(
    plan: &Plan<'_, '_>,
    inputs: &[String],
    estimates: &[u64],
    per_request: usize,
    tally: &mut Tally,
) -> Result<Vec<Batch>, WeirError> {
    let ranges: Vec<Range<usize>> =
        (0..inputs.len()).step_by(per_request).map(|start| start..(start + per_request).min(inputs.len())).collect();
    let batches = ranges.into_iter().map(|range| send_batch(plan, &inputs[range.clone()], &estimates[range]));
    in_order(batches, BATCHES_IN_FLIGHT, tally).await
}

/// One upstream request through the retry loop, with its own retry budget and
/// attempt ceiling (a call of many batches may need a retry in each).
async fn send_batch(plan: &Plan<'_, '_>, texts: &[String], tokens: &[u64]) -> Sent<Batch> {
    let attempt = EmbedTry { plan, texts, estimate: tokens.iter().sum() };
    sent(&attempt, plan.target, plan.max_retries, Some(plan.deadline), plan.started).await
}

/// One embeddings attempt, as the retry loop re-runs it.
struct EmbedTry<'a, 'p, 't> {
    plan: &'a Plan<'p, 't>,
    texts: &'a [String],
    /// The texts' estimated tokens: the demand admitted, and what is billed
    /// when the provider reports no count.
    estimate: u64,
}

impl Try for EmbedTry<'_, '_, '_> {
    type Output = Batch;

    async fn run(&self, spend: &mut Spend<'_>) -> Result<Batch, Failure> {
        logged(
            spend,
            async |observed: &mut Observed| self.attempt(observed).await,
            |batch| input_only(batch.tokens).into(),
        )
        .await
    }
}

impl EmbedTry<'_, '_, '_> {
    async fn attempt(&self, observed: &mut Observed) -> Result<Batch, WeirError> {
        let plan = self.plan;
        let target = plan.target;
        let demand = Demand { requests: 1, tokens: self.estimate };
        let mut session = target.provider.session();
        let deadline = Some(plan.deadline);
        let encode = async |session: &mut Session<'_>| session.embed_encode(self.texts, &plan.params, deadline).await;
        let response = exchange_in(target, &mut session, demand, deadline, plan.lane, observed, encode).await?;
        if !(200..300).contains(&response.status) {
            let class = session.embed_classify(&response).await;
            return Err(attempt::classified_failure(target, &response, class).await);
        }
        let decoded = session.embed_decode(&response).await.map_err(|source| plugin(target, source))?;
        check_vectors(target.model, &decoded.vectors, self.texts.len(), plan.params.dimensions)?;
        // Only an answer that is usable counts as the upstream serving well.
        feed_back(target.gate, Feedback::Success).await;
        if observed.request_id.is_none() {
            observed.request_id = decoded.request_id.as_deref().map(super::attempt_log::bounded);
        }
        Ok(Batch {
            vectors: decoded.vectors,
            tokens: decoded.input_tokens.unwrap_or(self.estimate),
            reported: decoded.input_tokens.is_some(),
            served_model: decoded.served_model,
        })
    }
}

/// A component's failure, its text scrubbed of the credential the request carried.
fn plugin(target: &Target<'_>, source: crate::plugin::PluginError) -> WeirError {
    super::classify::plugin_failure(target, source)
}

/// One vector per text, and each of the pinned width when one was asked for.
fn check_vectors(model: &ModelSpec, vectors: &[Vec<f32>], texts: usize, pinned: Option<u32>) -> Result<(), WeirError> {
    let unusable = |reason: String| WeirError::UnusableAnswer { model: model.id.clone(), reason };
    if vectors.len() != texts {
        return Err(unusable(format!("{} vectors for {texts} inputs", vectors.len())));
    }
    let Some(pinned) = pinned else { return Ok(()) };
    let wrong = vectors.iter().enumerate().find(|(_, vector)| u32::try_from(vector.len()).ok() != Some(pinned));
    match wrong {
        Some((index, vector)) => Err(unusable(format!(
            "vector {index} of a batch has {} values, but the endpoint was asked for {pinned}",
            vector.len()
        ))),
        None => Ok(()),
    }
}

/// The batches' vectors in input order, each adapted to the width.
fn assemble(target: &Target<'_>, batches: Vec<Batch>, width: u32, tally: &mut Tally) -> Result<Embedded, WeirError> {
    let served_model = batches.iter().find_map(|batch| batch.served_model.clone());
    let estimated = !batches.iter().all(|batch| batch.reported);
    if estimated {
        tally.notes.push(ESTIMATED);
    }
    let input_tokens = batches.iter().map(|batch| batch.tokens).sum();
    let width_len = usize::try_from(width).unwrap_or(usize::MAX);
    let mut vectors = Vec::with_capacity(batches.iter().map(|batch| batch.vectors.len()).sum());
    for (index, native) in batches.into_iter().flat_map(|batch| batch.vectors).enumerate() {
        let adapted = adapt(native, width_len).map_err(|reason| WeirError::UnusableAnswer {
            model: target.model.id.clone(),
            reason: format!("vector {index}: {reason}"),
        })?;
        vectors.push(adapted);
    }
    Ok(Embedded { vectors, width, input_tokens, estimated, served_model })
}

/// A rerank call's answer before it is stamped.
struct Reranked {
    results: Vec<Ranked>,
    input_tokens: Option<u64>,
    search_units: Option<u64>,
    served_model: Option<String>,
}

async fn run_rerank(
    weir: &Weir,
    request: &RerankRequest,
    tally: &mut Tally,
    opening: &Opening,
) -> Result<Reranked, WeirError> {
    if request.documents.is_empty() {
        return Err(WeirError::InvalidRequest("`documents` is empty: there is nothing to rank".to_owned()));
    }
    if request.top_n == Some(0) {
        return Err(WeirError::InvalidRequest("`top_n` must be at least 1".to_owned()));
    }
    let naming =
        Naming { model: &request.model, caller: request.caller.as_ref(), route: request.route, kind: RoleKind::Rerank };
    let target = target::resolve(weir, &naming, opening).await?;
    tally.resolved = Some(resolved(&target));
    let deadline = request.deadline.unwrap_or_else(|| lane_deadline(weir, Lane::Interactive));
    let texts: Vec<String> = std::iter::once(request.query.clone()).chain(request.documents.iter().cloned()).collect();
    let estimate = estimates(&target, &texts)?.iter().sum();
    let searches = crate::record::searches_for(request.documents.len());
    let worst = crate::budget::worst_case_of_searches(target.model, estimate, searches);
    tally.hold = hold::take_worst(weir, request.caller.as_ref(), &target, worst, opening).await?;
    let params = RerankParams { wire_model_id: target.model.wire_id.clone(), top_n: request.top_n };
    let mut lookup = super::answer_cache::look_up_ranking(weir, &target, request, &params, tally).await;
    if let Some(results) = lookup.as_mut().and_then(|lookup| lookup.found.take()) {
        // A hit: nothing sent, so nothing billed.
        return Ok(Reranked { results, input_tokens: Some(0), search_units: Some(0), served_model: None });
    }
    let attempt = RerankTry { target: &target, request, params, deadline, estimate, searches };
    let (reranked, reported) = retried(&attempt, &target, request.max_retries, Some(deadline), tally).await?;
    if !reported {
        tally.notes.push(ESTIMATED);
    }
    if let Some(lookup) = lookup {
        super::answer_cache::store_ranking(weir, lookup, &reranked.results, opening.call_id()).await;
    }
    Ok(reranked)
}

/// One rerank attempt, as the retry loop re-runs it.
struct RerankTry<'a, 't> {
    target: &'a Target<'t>,
    request: &'a RerankRequest,
    params: RerankParams,
    deadline: tokio::time::Instant,
    estimate: u64,
    /// The search units the documents make, counted: what the record bills
    /// when the provider reports none.
    searches: u64,
}

impl Try for RerankTry<'_, '_> {
    /// The ranking, and whether the provider reported its token count.
    type Output = (Reranked, bool);

    async fn run(&self, spend: &mut Spend<'_>) -> Result<Self::Output, Failure> {
        let attempt = async |observed: &mut Observed| self.attempt(observed).await;
        let billed = |(ranked, _): &(Reranked, bool)| Bill {
            tokens: input_only(ranked.input_tokens.unwrap_or(self.estimate)),
            searches: Some(ranked.search_units.unwrap_or(self.searches)),
        };
        logged(spend, attempt, billed).await
    }
}

impl RerankTry<'_, '_> {
    async fn attempt(&self, observed: &mut Observed) -> Result<(Reranked, bool), WeirError> {
        let target = self.target;
        let demand = Demand { requests: 1, tokens: self.estimate };
        let mut session = target.provider.session();
        let deadline = Some(self.deadline);
        let (query, documents) = (&self.request.query, &self.request.documents);
        let encode =
            async |session: &mut Session<'_>| session.rerank_encode(query, documents, &self.params, deadline).await;
        let response = exchange_in(target, &mut session, demand, deadline, Lane::Interactive, observed, encode).await?;
        if !(200..300).contains(&response.status) {
            let class = session.rerank_classify(&response).await;
            return Err(attempt::classified_failure(target, &response, class).await);
        }
        let decoded = session.rerank_decode(&response).await.map_err(|source| plugin(target, source))?;
        check_ranking(target.model, &decoded.results, self.request.documents.len(), self.request.top_n)?;
        feed_back(target.gate, Feedback::Success).await;
        if observed.request_id.is_none() {
            observed.request_id = decoded.request_id.as_deref().map(super::attempt_log::bounded);
        }
        let reported = decoded.input_tokens.is_some();
        let reranked = Reranked {
            results: decoded.results,
            input_tokens: decoded.input_tokens,
            search_units: decoded.search_units,
            served_model: decoded.served_model,
        };
        Ok((reranked, reported))
    }
}

/// Every result names a document that was sent, once, with a finite score, and
/// no more results than `top_n` asked for.
fn check_ranking(model: &ModelSpec, results: &[Ranked], documents: usize, top_n: Option<u32>) -> Result<(), WeirError> {
    let unusable = |reason: String| WeirError::UnusableAnswer { model: model.id.clone(), reason };
    let most = top_n.map_or(documents, |n| documents.min(usize::try_from(n).unwrap_or(usize::MAX)));
    if results.len() > most {
        return Err(unusable(format!("{} results where at most {most} were asked for", results.len())));
    }
    let mut seen = vec![false; documents];
    for result in results {
        let index = usize::try_from(result.index).unwrap_or(usize::MAX);
        match seen.get_mut(index) {
            None => return Err(unusable(format!("a result ranks document {index} of {documents}"))),
            Some(true) => return Err(unusable(format!("document {index} is ranked twice"))),
            Some(slot) => *slot = true,
        }
        if !result.relevance_score.is_finite() {
            return Err(unusable(format!("document {index}'s score is not a finite number")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(index: u32, relevance_score: f64) -> Ranked {
        Ranked { index, relevance_score }
    }

    #[test]
    fn a_vector_count_or_a_pinned_width_the_call_did_not_ask_for_is_refused() {
        let model = ModelSpec::sample();
        let two = vec![vec![0.1; 4], vec![0.2; 4]];
        assert!(check_vectors(&model, &two, 2, Some(4)).is_ok());
        assert!(check_vectors(&model, &two, 2, None).is_ok());
        let error = check_vectors(&model, &two, 3, None).unwrap_err();
        assert!(error.to_string().contains("2 vectors for 3 inputs"), "{error}");
        let error = check_vectors(&model, &two, 2, Some(8)).unwrap_err();
        assert!(error.to_string().contains("has 4 values, but the endpoint was asked for 8"), "{error}");
        assert_eq!(error.category().as_str(), "upstream_error");
    }

    #[test]
    fn a_ranking_of_documents_not_sent_or_ranked_twice_is_refused() {
        let model = ModelSpec::sample();
        assert!(check_ranking(&model, &[ranked(1, 0.9), ranked(0, 0.1)], 2, None).is_ok());
        assert!(check_ranking(&model, &[ranked(2, 0.9)], 2, None).is_err(), "index out of range");
        assert!(check_ranking(&model, &[ranked(0, 0.9), ranked(0, 0.8)], 2, None).is_err(), "twice");
        assert!(check_ranking(&model, &[ranked(0, 0.9), ranked(1, 0.8)], 2, Some(1)).is_err(), "past top_n");
        assert!(check_ranking(&model, &[ranked(0, f64::NAN)], 2, None).is_err(), "not finite");
    }
}
