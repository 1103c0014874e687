//! The answer cache's series (see [`crate::answer_cache`]): lookups by what
//! they found, the bytes stored and held, evictions for room, and Redis failures.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::Metrics;
use crate::answer_cache::{AnswerCacheMeter, CacheMark};

/// The cache's counters, registered once.
pub(super) struct AnswerCacheSeries {
    hits: Counter,
    misses: Counter,
    bypasses: Counter,
    stored_bytes: Counter,
    held_bytes: Gauge,
    evictions: Counter,
    shared_failures: Counter,
}

impl AnswerCacheSeries {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let series = Self {
            hits: Counter::default(),
            misses: Counter::default(),
            bypasses: Counter::default(),
            stored_bytes: Counter::default(),
            held_bytes: Gauge::default(),
            evictions: Counter::default(),
            shared_failures: Counter::default(),
        };
        let r = registry;
        r.register("answer_cache_hits", "Calls answered from the answer cache", series.hits.clone());
        r.register("answer_cache_misses", "Answer cache lookups that found nothing", series.misses.clone());
        r.register(
            "answer_cache_bypasses",
            "Calls whose cache-control skipped the answer cache's lookup",
            series.bypasses.clone(),
        );
        r.register_with_unit(
            "answer_cache_stored",
            "Bytes of answers stored in the answer cache",
            Unit::Bytes,
            series.stored_bytes.clone(),
        );
        r.register_with_unit(
            "answer_cache_held",
            "Bytes of answers the answer cache's memory holds, as of its last store",
            Unit::Bytes,
            series.held_bytes.clone(),
        );
        r.register(
            "answer_cache_evictions",
            "Answers evicted from the answer cache's memory for room",
            series.evictions.clone(),
        );
        r.register(
            "answer_cache_shared_failures",
            "Answer cache operations on Redis that failed or read a value that did not decode (each a miss)",
            series.shared_failures.clone(),
        );
        series
    }
}

impl AnswerCacheMeter for Metrics {
    fn looked_up(&self, mark: CacheMark) {
        let series = &self.inner.answer_cache;
        match mark {
            CacheMark::Hit => series.hits.inc(),
            CacheMark::Miss => series.misses.inc(),
            CacheMark::Bypass => series.bypasses.inc(),
        };
    }

    fn stored(&self, bytes: u64, held: u64) {
        self.inner.answer_cache.stored_bytes.inc_by(bytes);
        self.inner.answer_cache.held_bytes.set(i64::try_from(held).unwrap_or(i64::MAX));
    }

    fn evicted(&self) {
        self.inner.answer_cache.evictions.inc();
    }

    fn shared_failed(&self) {
        self.inner.answer_cache.shared_failures.inc();
    }
}
