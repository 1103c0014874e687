//! The call's side of the answer cache (see [`crate::answer_cache`]): where in
//! the funnel a call looks up and stores, and which answers are worth storing.
//!
//! The lookup runs in [`super::run`] after every stage that can refuse the
//! caller — the key, its model list, the role, the policy, and the budget
//! hold — so the cache never answers a caller who could not have made the
//! call. A hit then skips admission and the attempts; its hold is settled
//! from its record, which bills nothing (no attempt), so it spends nothing.
//! A miss goes on as any call: held, admitted, sent and settled as before,
//! and only then stored. Only a complete answer is stored: a stop at the end
//! of its turn, a stop sequence or a tool call, from first attempts and
//! retries of upstream signals alone — never a truncated, refused, escalated,
//! corrected, re-run, failed or cut-off answer.

use std::time::Duration;

use crate::Weir;
use crate::answer_cache::{
    AnswerCache, CacheAsk, CacheKey, CacheMark, EntryCaching, KeyWriter, NotStored, ScopeName, StoredAnswer,
};
use crate::chat::ChatRequest;
use crate::error::WeirError;
use crate::record::{AttemptReason, AttemptRecord};
use crate::types::{DecodedResponse, StopReason};

use super::Tally;
use super::gates::{self, Wire};
use super::policy::Policy;
use super::target::Target;

/// How a call on `target` caches: its entry's `cache_ttl_secs`, else the
/// role's the caller named; `None` when neither caches, or no `[cache]`.
fn caching<'w>(weir: &'w Weir, target: &Target<'_>) -> Option<(EntryCaching, &'w AnswerCache)> {
    let cache = weir.answer_cache()?;
    let role = || target.role.and_then(|name| weir.config().roles.get(name)).and_then(|role| role.caching());
    Some((target.model.answer_cache.or_else(role)?, cache))
}

/// A miss the call may store once it has a complete answer.
#[derive(Debug, Clone)]
pub(crate) struct ToStore {
    key: CacheKey,
    ttl: Duration,
}

/// Looks the call up when its entry caches: a hit's answer, or `None` (the
/// call goes on). Sets the stamp's mark and, for a miss the caller lets be
/// stored, what to store under.
pub(super) async fn look_up(
    weir: &Weir,
    target: &Target<'_>,
    request: &ChatRequest,
    policy: &Policy,
    tally: &mut Tally,
) -> Result<Option<DecodedResponse>, WeirError> {
    // A role's fallback runs the call again on its own entry: what the first
    // entry looked up is not this one's.
    tally.to_store = None;
    tally.cache_mark = None;
    let Some((caching, cache)) = caching(weir, target) else { return Ok(None) };
    // A call whose provider may answer with its own blocks (hosted tools, a
    // history's own blocks) is neither read nor stored: the stored value holds
    // the neutral answer only, so a hit would lose them.
    let mark = if request.cache == CacheAsk::NoStore || target.native_answer {
        CacheMark::Bypass
    } else {
        let key = key(target, request, policy, caching.scope)?;
        tally.to_store = Some(ToStore { key, ttl: caching.ttl });
        if request.cache == CacheAsk::NoRead {
            CacheMark::Bypass
        } else if let Some(StoredAnswer { answer, call_id }) = cache.get(&key).await {
            tally.to_store = None;
            tally.cached_from = Some(call_id);
            tally.cache_mark = Some(CacheMark::Hit);
            cache.mark(CacheMark::Hit);
            return Ok(Some(answer));
        } else {
            CacheMark::Miss
        }
    };
    tally.cache_mark = Some(mark);
    cache.mark(mark);
    Ok(None)
}

/// The key of the request as it would be sent (see [`crate::answer_cache::KeyWriter`]).
fn key(
    target: &Target<'_>,
    request: &ChatRequest,
    policy: &Policy,
    scope: crate::config::CacheScope,
) -> Result<CacheKey, WeirError> {
    let scope = ScopeName::of(scope, request.caller.as_ref());
    let mut writer = KeyWriter::new("chat", &target.model.id, &scope);
    let mut params = gates::first_params(target, request, Wire { schema: !policy.prompted_schema })?;
    // The entry, not the deployment: every deployment serves the entry's model.
    params.wire_model_id.clear();
    writer.record(&params);
    writer.record(&request.conversation);
    // A schema described in the prompt is not in the wire parameters.
    writer.record(&request.response_schema);
    writer.record(&(policy.prompted_tools, policy.prompted_schema));
    writer.record(&target.native);
    Ok(writer.finish())
}

/// What to store once the call ends, when its attempts leave its answer
/// worth storing (see the module's comment): `None` otherwise. An answer with
/// the provider's own blocks (hosted tools, `decode-native`) is never stored:
/// the stored value holds the neutral answer only, so a hit would lose them.
pub(super) fn pending(tally: &mut Tally) -> Option<ToStore> {
    let plain = tally.attempt_records.iter().all(plain_attempt) && tally.native_answer.is_none();
    tally.to_store.take().filter(|_| plain)
}

/// Stores a whole call's `answer` under `to_store`, if it is complete.
pub(super) async fn store(weir: &Weir, to_store: ToStore, answer: &DecodedResponse, call_id: &str) {
    if !complete(answer) {
        return;
    }
    let Some(cache) = weir.answer_cache() else { return };
    let stored = StoredAnswer { answer: answer.clone(), call_id: call_id.to_owned() };
    match cache.put(to_store.key, stored, to_store.ttl).await {
        Ok(()) => {}
        Err(NotStored::TooLarge) => tracing::debug!(call_id, "answer above [cache] max_entry_bytes: not stored"),
        Err(NotStored::Unencodable) => tracing::debug!(call_id, "answer holds what is never stored: not stored"),
    }
}

/// An embeddings call's lookups, one per input: the vectors found, and
/// where to store the others once embedded.
pub(super) struct InputLookups {
    keys: Vec<CacheKey>,
    pub found: Vec<Option<Vec<f32>>>,
    ttl: Duration,
}

impl InputLookups {
    /// The positions of the inputs that must be sent, in input order.
    pub fn misses(&self) -> Vec<usize> {
        self.found.iter().enumerate().filter(|(_, found)| found.is_none()).map(|(index, _)| index).collect()
    }
}

/// Looks up each input of an embeddings call whose entry caches: keyed by the
/// entry, the scope, the wire parameters (the deployment's wire id left out),
/// the width the vectors leave at, and the text. `None` when the entry does
/// not cache. The stamp's mark: `hit` when every input was found, `miss` when
/// any was not, `bypass` when the caller's `cache-control` skipped the lookup.
pub(super) async fn look_up_inputs(
    weir: &Weir,
    target: &Target<'_>,
    request: &crate::retrieval::EmbedRequest,
    params: &crate::types::EmbeddingParams,
    width: u32,
    tally: &mut Tally,
) -> Option<InputLookups> {
    let (caching, cache) = caching(weir, target)?;
    let inputs = request.inputs.len();
    if request.cache == CacheAsk::NoStore {
        tally.cache_mark = Some(CacheMark::Bypass);
        cache.mark_many(CacheMark::Bypass, inputs);
        return None;
    }
    let scope = ScopeName::of(caching.scope, request.caller.as_ref());
    let mut wire = params.clone();
    wire.wire_model_id.clear();
    let keys: Vec<CacheKey> = request
        .inputs
        .iter()
        .map(|text| {
            let mut writer = KeyWriter::new("embeddings", &target.model.id, &scope);
            writer.record(&wire);
            writer.record(&width);
            writer.part(text);
            writer.finish()
        })
        .collect();
    let mut found = Vec::with_capacity(inputs);
    let mut origin = None;
    for key in &keys {
        let vector = match request.cache {
            CacheAsk::Use => cache.get_vector(key).await,
            CacheAsk::NoRead | CacheAsk::NoStore => None,
        };
        if let Some(stored) = vector {
            origin.get_or_insert(stored.call_id);
            found.push(Some(stored.vector));
        } else {
            found.push(None);
        }
    }
    let hits = found.iter().filter(|found| found.is_some()).count();
    let mark = match request.cache {
        CacheAsk::NoRead | CacheAsk::NoStore => CacheMark::Bypass,
        CacheAsk::Use if hits == inputs => CacheMark::Hit,
        CacheAsk::Use => CacheMark::Miss,
    };
    let unfound = if request.cache == CacheAsk::Use { CacheMark::Miss } else { CacheMark::Bypass };
    cache.mark_many(CacheMark::Hit, hits);
    cache.mark_many(unfound, inputs - hits);
    tally.cache_mark = Some(mark);
    if mark == CacheMark::Hit {
        tally.cached_from = origin;
    }
    Some(InputLookups { keys, found, ttl: caching.ttl })
}

/// Stores the vectors the call embedded (`embedded[i]` is input
/// `misses[i]`'s), once the whole call succeeded.
pub(super) async fn store_inputs(
    weir: &Weir,
    lookups: &InputLookups,
    misses: &[usize],
    embedded: &[Vec<f32>],
    call_id: &str,
) {
    let Some(cache) = weir.answer_cache() else { return };
    for (index, vector) in misses.iter().zip(embedded) {
        let Some(key) = lookups.keys.get(*index) else { continue };
        let stored = crate::answer_cache::StoredVector { vector: vector.clone(), call_id: call_id.to_owned() };
        if let Err(reason) = cache.put_vector(*key, stored, lookups.ttl).await {
            tracing::debug!(call_id, ?reason, "an input's vector was not stored");
        }
    }
}

/// A rerank call's lookup: the ranking found, and where to store one.
pub(super) struct RankingLookup {
    key: CacheKey,
    ttl: Duration,
    store: bool,
    pub found: Option<Vec<crate::types::Ranked>>,
}

/// Looks up a rerank call whose entry caches, keyed by the entry, the scope,
/// the wire parameters (`top_n`; the deployment's wire id left out), the query
/// and the documents in order. `None` when the entry does not cache.
pub(super) async fn look_up_ranking(
    weir: &Weir,
    target: &Target<'_>,
    request: &crate::retrieval::RerankRequest,
    params: &crate::types::RerankParams,
    tally: &mut Tally,
) -> Option<RankingLookup> {
    let (caching, cache) = caching(weir, target)?;
    let scope = ScopeName::of(caching.scope, request.caller.as_ref());
    let mut wire = params.clone();
    wire.wire_model_id.clear();
    let mut writer = KeyWriter::new("rerank", &target.model.id, &scope);
    writer.record(&wire);
    writer.part(&request.query);
    writer.record(&request.documents);
    let key = writer.finish();
    let found = match request.cache {
        CacheAsk::Use => cache.get_ranking(&key).await,
        CacheAsk::NoRead | CacheAsk::NoStore => None,
    };
    let mark = match (&found, request.cache) {
        (Some(_), _) => CacheMark::Hit,
        (None, CacheAsk::Use) => CacheMark::Miss,
        (None, CacheAsk::NoRead | CacheAsk::NoStore) => CacheMark::Bypass,
    };
    cache.mark(mark);
    tally.cache_mark = Some(mark);
    let found = found.map(|stored| {
        tally.cached_from = Some(stored.call_id);
        stored.results
    });
    let store = request.cache != CacheAsk::NoStore && found.is_none();
    Some(RankingLookup { key, ttl: caching.ttl, store, found })
}

/// Stores a rerank call's ranking, once the call succeeded.
pub(super) async fn store_ranking(weir: &Weir, lookup: RankingLookup, results: &[crate::types::Ranked], call_id: &str) {
    let Some(cache) = weir.answer_cache().filter(|_| lookup.store) else { return };
    let stored = crate::answer_cache::StoredRanking { results: results.to_vec(), call_id: call_id.to_owned() };
    if let Err(reason) = cache.put_ranking(lookup.key, stored, lookup.ttl).await {
        tracing::debug!(call_id, ?reason, "a ranking was not stored");
    }
}

/// An attempt whose answer is the request's own: a first attempt, a retry
/// of an upstream signal, or a stream's replay without streaming.
fn plain_attempt(attempt: &AttemptRecord) -> bool {
    match attempt.reason {
        AttemptReason::First | AttemptReason::Retry | AttemptReason::Replay => true,
        AttemptReason::Escalation | AttemptReason::Correction | AttemptReason::EmptyRerun => false,
    }
}

/// A stop that ends a whole answer.
fn complete(answer: &DecodedResponse) -> bool {
    let stopped = match answer.stop_reason {
        StopReason::EndTurn | StopReason::StopSequence | StopReason::ToolUse => true,
        StopReason::MaxTokens
        | StopReason::ContentFiltered
        | StopReason::Pause
        | StopReason::ContextWindowExceeded
        | StopReason::Other => false,
    };
    stopped && answer.refusal.is_none() && !answer.content.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ContentBlock;

    fn answer(stop_reason: StopReason) -> DecodedResponse {
        DecodedResponse {
            content: vec![ContentBlock::Text("a".into())],
            stop_reason,
            raw_stop_reason: None,
            usage: None,
            refusal: None,
            served_model: None,
            request_id: None,
        }
    }

    #[test]
    fn only_a_whole_answer_is_complete() {
        assert!(complete(&answer(StopReason::EndTurn)));
        assert!(complete(&answer(StopReason::ToolUse)));
        assert!(complete(&answer(StopReason::StopSequence)));
        for cut in [StopReason::MaxTokens, StopReason::ContentFiltered, StopReason::Pause, StopReason::Other] {
            assert!(!complete(&answer(cut)), "{cut:?}");
        }
        let mut empty = answer(StopReason::EndTurn);
        empty.content.clear();
        assert!(!complete(&empty));
        let mut refused = answer(StopReason::EndTurn);
        refused.refusal = Some(crate::types::Refusal { category: None, explanation: None });
        assert!(!complete(&refused));
    }

    #[test]
    fn an_answer_with_the_providers_own_blocks_is_not_stored() {
        let to_store = || Some(ToStore { key: CacheKey([7; 32]), ttl: Duration::from_secs(60) });
        let mut tally = Tally::new(std::time::Instant::now());
        tally.to_store = to_store();
        assert!(pending(&mut tally).is_some(), "a plain answer is stored");
        let mut tally = Tally::new(std::time::Instant::now());
        tally.to_store = to_store();
        tally.native_answer = Some(std::sync::Arc::new(crate::chat::NativeBlocks {
            dialect: "anthropic-messages".into(),
            blocks: Vec::new(),
            content: Vec::new(),
            usage: None,
        }));
        assert!(pending(&mut tally).is_none());
    }
}
