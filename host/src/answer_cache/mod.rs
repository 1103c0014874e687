//! The answer cache: a repeat of the same request, by a caller allowed to
//! read the first one's answer, is answered from memory (or the fleet's
//! Redis) instead of the upstream.
//!
//! ```text
//! call: keys, model list, role, policy ─► key (key.rs) ─► memory ─► Redis (shared.rs) ─► hit | miss
//! miss: hold, admission, attempts, gates ─► a complete answer ─► codec.rs ─► memory + Redis
//! ```
//!
//! Not to be confused with the provider's prompt cache (`call::cache_plan`)
//! or the compiled components' cache (`plugin::cache`). The operator turns it
//! on per entry (`cache_ttl_secs`) under `[cache]`; a caller may only turn it
//! off for its own call (`cache-control: no-cache` / `no-store`). What is
//! stored is the neutral answer, so every route writes a hit in its own shape,
//! whole or streamed. Memory is bounded by bytes (moka, with a weigher), each
//! answer expires after its entry's TTL; Redis values expire by `SET … EX`.

mod codec;
mod key;
mod shared;

use std::sync::Arc;
use std::time::Duration;

pub use codec::{StoredAnswer, StoredRanking, StoredVector};
pub use key::{CacheKey, KeyWriter, ScopeName};

pub use crate::chat::{CacheAsk, CacheMark};
use crate::config::{AnswerCacheSettings, FleetSettings};
pub use crate::config::{CacheScope, EntryCaching};
use crate::fleet::RedisTarget;
use shared::SharedAnswers;

/// Why an answer was not stored; logged at debug, counted nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStored {
    /// It holds a refusal or a block answers do not carry.
    Unencodable,
    /// Larger than `[cache] max_entry_bytes`.
    TooLarge,
}

/// Counts what the cache does (the metrics implement it).
pub trait AnswerCacheMeter: Send + Sync {
    /// A call's lookup, by its mark.
    fn looked_up(&self, mark: CacheMark);
    /// An answer stored, its size in bytes, and the bytes memory holds after
    /// it (evictions by expiry since show at the next store).
    fn stored(&self, bytes: u64, held: u64);
    /// An answer evicted from memory for room.
    fn evicted(&self);
    /// Redis failed (unreachable, slow) or held a value that did not decode.
    fn shared_failed(&self);
}

/// What memory holds under a key: a chat answer, an input's vector or a ranking.
enum Value {
    Answer(StoredAnswer),
    Vector(StoredVector),
    Ranking(StoredRanking),
}

/// One stored value in memory.
struct Held {
    value: Value,
    /// The weight moka bounds the memory by (the encoded size and the key).
    bytes: u32,
    ttl: Duration,
}

/// Expires each answer after its own entry's TTL.
struct PerEntryTtl;

impl moka::Expiry<CacheKey, Arc<Held>> for PerEntryTtl {
    fn expire_after_create(
        &self,
        _key: &CacheKey,
        value: &Arc<Held>,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// The cache: memory, and Redis under `[fleet]`.
pub struct AnswerCache {
    memory: moka::sync::Cache<CacheKey, Arc<Held>>,
    shared: Option<SharedAnswers>,
    max_entry_bytes: u64,
    meter: Option<Arc<dyn AnswerCacheMeter>>,
}

impl std::fmt::Debug for AnswerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerCache")
            .field("max_entry_bytes", &self.max_entry_bytes)
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl AnswerCache {
    /// The cache `[cache]` describes, sharing answers through `fleet`'s Redis
    /// when there is one.
    pub fn new(
        settings: &AnswerCacheSettings,
        fleet: Option<&FleetSettings>,
        meter: Option<Arc<dyn AnswerCacheMeter>>,
    ) -> Result<Self, String> {
        let evictions = meter.clone();
        let memory = moka::sync::Cache::builder()
            .max_capacity(settings.max_bytes())
            .weigher(|_key: &CacheKey, held: &Arc<Held>| held.bytes)
            .expire_after(PerEntryTtl)
            .eviction_listener(move |_key, _held, cause| {
                if cause == moka::notification::RemovalCause::Size
                    && let Some(meter) = &evictions
                {
                    meter.evicted();
                }
            })
            .build();
        let shared = match fleet {
            Some(fleet) => {
                let target = RedisTarget::new(fleet).map_err(|error| error.to_string())?;
                Some(SharedAnswers::new(target, fleet.key_prefix.as_deref().unwrap_or("weir")))
            }
            None => None,
        };
        Ok(Self { memory, shared, max_entry_bytes: settings.max_entry_bytes(), meter })
    }

    /// The answer stored under `key`: memory first, then Redis. A Redis
    /// failure or a value that does not decode is a miss (logged, counted).
    pub async fn get(&self, key: &CacheKey) -> Option<StoredAnswer> {
        if let Some(held) = self.memory.get(key) {
            return match &held.value {
                Value::Answer(answer) => Some(answer.clone()),
                Value::Vector(_) | Value::Ranking(_) => None,
            };
        }
        let found = self.shared.as_ref()?.get(key).await;
        self.shared_found(found)
    }

    /// The vector stored under `key`, as [`Self::get`] finds an answer.
    pub async fn get_vector(&self, key: &CacheKey) -> Option<StoredVector> {
        if let Some(held) = self.memory.get(key) {
            return match &held.value {
                Value::Vector(vector) => Some(vector.clone()),
                Value::Answer(_) | Value::Ranking(_) => None,
            };
        }
        let found = self.shared.as_ref()?.get_vector(key).await;
        self.shared_found(found)
    }

    /// The ranking stored under `key`, as [`Self::get`] finds an answer.
    pub async fn get_ranking(&self, key: &CacheKey) -> Option<StoredRanking> {
        if let Some(held) = self.memory.get(key) {
            return match &held.value {
                Value::Ranking(ranking) => Some(ranking.clone()),
                Value::Answer(_) | Value::Vector(_) => None,
            };
        }
        let found = self.shared.as_ref()?.get_ranking(key).await;
        self.shared_found(found)
    }

    fn shared_found<T>(&self, found: Result<Option<T>, shared::SharedError>) -> Option<T> {
        match found {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "the answer cache's Redis lookup failed: a miss");
                self.shared_failed();
                None
            }
        }
    }

    /// Stores `answer` under `key` for `ttl`: in memory, and in Redis (awaited,
    /// bounded by its timeout; a failure is logged and counted, never the call's).
    pub async fn put(&self, key: CacheKey, answer: StoredAnswer, ttl: Duration) -> Result<(), NotStored> {
        let json = codec::encode(&answer).ok_or(NotStored::Unencodable)?;
        self.put_encoded(key, Value::Answer(answer), json, ttl).await
    }

    /// Stores one input's `vector` under `key` for `ttl`, as [`Self::put`].
    pub async fn put_vector(&self, key: CacheKey, vector: StoredVector, ttl: Duration) -> Result<(), NotStored> {
        let json = codec::encode_vector(&vector).ok_or(NotStored::Unencodable)?;
        self.put_encoded(key, Value::Vector(vector), json, ttl).await
    }

    /// Stores a ranking under `key` for `ttl`, as [`Self::put`].
    pub async fn put_ranking(&self, key: CacheKey, ranking: StoredRanking, ttl: Duration) -> Result<(), NotStored> {
        let json = codec::encode_ranking(&ranking).ok_or(NotStored::Unencodable)?;
        self.put_encoded(key, Value::Ranking(ranking), json, ttl).await
    }

    async fn put_encoded(&self, key: CacheKey, value: Value, json: Vec<u8>, ttl: Duration) -> Result<(), NotStored> {
        let bytes = json.len() as u64 + std::mem::size_of::<CacheKey>() as u64;
        if bytes > self.max_entry_bytes {
            return Err(NotStored::TooLarge);
        }
        let weight = u32::try_from(bytes).map_err(|_| NotStored::TooLarge)?;
        self.memory.insert(key, Arc::new(Held { value, bytes: weight, ttl }));
        if let Some(meter) = &self.meter {
            // Pending inserts and evictions applied first, so the size is
            // current (a store is a miss's, far rarer than lookups).
            meter.stored(bytes, self.memory_bytes());
        }
        if let Some(shared) = &self.shared
            && let Err(error) = shared.set(&key, &json, ttl).await
        {
            tracing::warn!(%error, "the answer cache's Redis store failed: kept in this gateway's memory only");
            self.shared_failed();
        }
        Ok(())
    }

    /// Counts a lookup's mark.
    pub fn mark(&self, mark: CacheMark) {
        self.mark_many(mark, 1);
    }

    /// Counts `count` lookups of one mark (an embeddings call's inputs).
    pub fn mark_many(&self, mark: CacheMark, count: usize) {
        if let Some(meter) = &self.meter {
            for _ in 0..count {
                meter.looked_up(mark);
            }
        }
    }

    fn shared_failed(&self) {
        if let Some(meter) = &self.meter {
            meter.shared_failed();
        }
    }

    /// The bytes held in memory now (pending evictions applied first).
    pub fn memory_bytes(&self) -> u64 {
        self.memory.run_pending_tasks();
        self.memory.weighted_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ContentBlock, DecodedResponse, StopReason};

    fn answer(text: &str) -> StoredAnswer {
        StoredAnswer {
            answer: DecodedResponse {
                content: vec![ContentBlock::Text(text.to_owned())],
                stop_reason: StopReason::EndTurn,
                raw_stop_reason: None,
                usage: None,
                refusal: None,
                served_model: None,
                request_id: None,
            },
            call_id: "c1".to_owned(),
        }
    }

    fn settings(max_bytes: u64, max_entry_bytes: u64) -> AnswerCacheSettings {
        AnswerCacheSettings { max_bytes: Some(max_bytes), max_ttl_secs: None, max_entry_bytes: Some(max_entry_bytes) }
    }

    fn key(n: u8) -> CacheKey {
        CacheKey([n; 32])
    }

    #[tokio::test]
    async fn an_answer_is_found_under_its_key_only() {
        let cache = AnswerCache::new(&settings(1 << 20, 1 << 16), None, None).unwrap();
        cache.put(key(1), answer("one"), Duration::from_secs(60)).await.unwrap();
        assert_eq!(cache.get(&key(1)).await, Some(answer("one")));
        assert_eq!(cache.get(&key(2)).await, None);
    }

    #[tokio::test]
    async fn an_answer_larger_than_the_entry_bound_is_not_stored() {
        let cache = AnswerCache::new(&settings(1 << 20, 200), None, None).unwrap();
        let big = "x".repeat(300);
        assert_eq!(cache.put(key(1), answer(&big), Duration::from_secs(60)).await, Err(NotStored::TooLarge));
        assert_eq!(cache.get(&key(1)).await, None);
    }

    #[tokio::test]
    async fn memory_stays_within_its_bytes() {
        let cache = AnswerCache::new(&settings(2_000, 1_000), None, None).unwrap();
        for n in 0..20 {
            cache.put(key(n), answer(&"y".repeat(400)), Duration::from_secs(60)).await.unwrap();
        }
        assert!(cache.memory_bytes() <= 2_000, "{}", cache.memory_bytes());
    }

    #[tokio::test]
    async fn an_answer_expires_after_its_ttl() {
        let cache = AnswerCache::new(&settings(1 << 20, 1 << 16), None, None).unwrap();
        cache.put(key(1), answer("short"), Duration::from_millis(1)).await.unwrap();
        cache.put(key(2), answer("long"), Duration::from_secs(600)).await.unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(cache.get(&key(1)).await, None);
        assert_eq!(cache.get(&key(2)).await, Some(answer("long")));
    }
}
