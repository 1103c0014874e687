//! The record of a call: what every call, answered or failed, leaves behind.
//!
//! A call is *opened* before anything is spent ([`CallOpening`]) and *closed*
//! when it ends ([`CallRecord`]); both go to every [`CallObserver`] — the
//! ledger, the metrics, the spans, and whatever an embedding service adds. The
//! record holds who called, what was addressed, every upstream attempt and why
//! it ran, the usage summed over all of them, the cost from the entry's
//! declared prices, and how it ended. It never holds a secret or a provider's
//! raw text (that goes to the server log only); prompts and answers only when
//! the operator sets `record_content = true`.

pub(crate) mod content;
mod observer;
mod open;
mod price;
mod refusals;
mod time;

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

pub use observer::{Acknowledged, CallObserver, ObserverError, Observers, PendingOpen, acknowledged};

pub(crate) use content::{answer as answer_content, stop_reason as stop_reason_name};
pub(crate) use open::{CallLog, Ending, Opened, Resolved};
pub use price::{CacheMultipliers, DOCUMENTS_PER_SEARCH, Prices, searches_for};
pub use refusals::RECORDED_PER_SECOND as REFUSALS_RECORDED_PER_SECOND;
pub(crate) use refusals::RefusalWindow;

/// Which door a call came in by. A bounded set: it labels metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// `POST /v1/chat/completions`
    OpenaiChat,
    /// `POST /v1/messages`
    AnthropicMessages,
    /// `POST /v1/responses`
    Responses,
    /// `POST /v1/embeddings`
    OpenaiEmbeddings,
    /// `POST /v1/rerank`
    Rerank,
    /// `POST /v1/decisions`
    Decisions,
    /// The library API ([`crate::Weir::chat`]) called by an embedding service.
    Library,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenaiChat => "openai_chat",
            Self::AnthropicMessages => "anthropic_messages",
            Self::Responses => "responses",
            Self::OpenaiEmbeddings => "openai_embeddings",
            Self::Rerank => "rerank",
            Self::Decisions => "decisions",
            Self::Library => "library",
        }
    }
}

/// What kind of model call it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Chat,
    Embeddings,
    Rerank,
    /// Typed questions answered with probabilities (see [`crate::decision`]).
    Decide,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::Embeddings => "embeddings",
            Self::Rerank => "rerank",
            Self::Decide => "decide",
        }
    }
}

/// Why an upstream attempt ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptReason {
    /// The call's first attempt.
    First,
    /// The retry loop re-ran an upstream signal (429, overload, 5xx, reset, timeout).
    Retry,
    /// A truncated answer re-run at the model's output ceiling.
    Escalation,
    /// A correction turn for a structured answer that failed its schema.
    Correction,
    /// An empty answer re-run.
    EmptyRerun,
    /// A stream's in-band error before output, replayed once without streaming.
    Replay,
}

impl AttemptReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::Retry => "retry",
            Self::Escalation => "escalation",
            Self::Correction => "correction",
            Self::EmptyRerun => "empty_rerun",
            Self::Replay => "replay",
        }
    }
}

/// Token counts by kind. `reasoning` is a part of `output` (providers bill it
/// as output), reported separately where the provider says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

/// What a call's attempts billed together: their tokens, every kind summed
/// apart, a ranking's search units and a chat call's web searches. What a record's cost and a budget's
/// settlement are priced from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Billed {
    pub tokens: Tokens,
    pub searches: u64,
    pub web_searches: u64,
}

impl Billed {
    pub fn of(attempts: &[AttemptRecord]) -> Self {
        let mut billed = Self::default();
        for attempt in attempts {
            if let Some(tokens) = &attempt.usage {
                billed.tokens.add(tokens);
            }
            billed.searches += attempt.searches.unwrap_or(0);
            billed.web_searches += attempt.web_searches.unwrap_or(0);
        }
        billed
    }
}

impl Tokens {
    pub fn of(usage: &crate::types::Usage) -> Self {
        Self {
            input: usage.input,
            output: usage.output,
            cache_read: usage.cache_read,
            cache_write: usage.cache_write,
            reasoning: usage.reasoning.unwrap_or(0),
        }
    }

    pub fn add(&mut self, other: &Tokens) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.reasoning += other.reasoning;
    }
}

/// One upstream attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub reason: AttemptReason,
    /// When it started, in milliseconds after the call opened.
    pub started_ms: u64,
    pub latency_ms: u64,
    /// How long admission held it before it could go, in milliseconds.
    pub admission_wait_ms: u64,
    /// The upstream's HTTP status, when a response (or an in-band status) came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `ok`, or the failure's category (see [`crate::Category`]).
    pub category: String,
    /// The upstream's request id (a response header or the body's), when it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// What the upstream reported this attempt used; absent when it reported nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Tokens>,
    /// The search units a ranking billed (a reranker priced by the search):
    /// as the provider reported them, else counted from the documents sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub searches: Option<u64>,
    /// The web searches the provider ran itself for a chat answer (Anthropic's
    /// `usage.server_tool_use.web_search_requests`, OpenAI Responses'
    /// `web_search_call` items), billed per search on top of the tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_searches: Option<u64>,
    /// The deployment it went to, when its entry has deployments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<String>,
}

/// How a streamed answer ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEnd {
    /// Deltas handed to the caller.
    pub delivered: u64,
    /// Bytes read from the upstream.
    pub upstream_bytes: u64,
    /// The caller went away before the end.
    pub client_left: bool,
    /// The upstream stream reached its end (a stop).
    pub completed: bool,
}

/// The prompt and the answer, recorded only with `record_content = true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedContent {
    pub request: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<serde_json::Value>,
}

/// What a caller's request said about the caller beyond the call itself,
/// recorded as given: its body's `metadata` (the Messages API's `user_id`) and
/// the `anthropic-beta` values it asked for. Never who the caller is — that is
/// its key's ([`Who`]) — and never sent upstream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub betas: Vec<String>,
}

impl ClientFacts {
    /// Nothing to record.
    pub fn is_empty(&self) -> bool {
        self.metadata.is_none() && self.betas.is_empty()
    }
}

/// Who called: from the caller's key (gateway) or the embedding service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Who {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
}

/// A call as it opens, before anything is spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallOpening {
    pub call_id: String,
    #[serde(with = "time::rfc3339")]
    pub started_at: SystemTime,
    #[serde(flatten)]
    pub who: Who,
    pub route: Route,
    pub operation: Operation,
    /// The catalog id (or name) the caller addressed.
    pub model: String,
    pub stream: bool,
    /// The caller's W3C `traceparent`, when it sent a valid one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// A call's budget hold, once taken: its worst case, held against the
/// caller's budgets until the call's record settles it. The ledger keeps it so
/// that a call cut off by a crash (opened and held, never closed) still
/// counts its worst case when the budgets are rebuilt. A call that tops its
/// hold up before a later attempt (a retry, an escalation, a correction)
/// writes one more of these for the amount it added: the call's worst case is
/// the sum of its hold rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldRecord {
    pub call_id: String,
    /// The call's start (the hold counts in that period, as its record would).
    #[serde(with = "time::rfc3339")]
    pub started_at: SystemTime,
    #[serde(with = "time::rfc3339")]
    pub held_at: SystemTime,
    #[serde(flatten)]
    pub who: Who,
    /// The catalog id (or name) the caller addressed, as in the opening.
    pub model: String,
    /// The worst case this row holds (the first hold's, or what a top-up
    /// added): tokens of every kind together, and its price when the entry
    /// declares prices.
    pub tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

/// A closed call: the ledger's record. In its JSON (and the other records')
/// a field without a value is left out, not written as `null`: a reader takes
/// a missing field as absent. That is ~120 of a quick call's ~900 bytes,
/// which the ledger serializes, logs, hashes and stores for every call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub call_id: String,
    #[serde(with = "time::rfc3339")]
    pub started_at: SystemTime,
    #[serde(with = "time::rfc3339")]
    pub ended_at: SystemTime,
    #[serde(flatten)]
    pub who: Who,
    pub route: Route,
    pub operation: Operation,
    /// The catalog id that served the call (what the caller named, before it
    /// resolved).
    pub model: String,
    /// The role the caller named, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The entry's `identity` (the model behind it), once it resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model name sent on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wire_id: Option<String>,
    /// The upstream host the call went to (no path, no query, no credential).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_host: Option<String>,
    /// The model name the upstream echoed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_model: Option<String>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The output ceiling of the last attempt's wire request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    pub attempts: Vec<AttemptRecord>,
    /// Summed over every attempt, discarded ones included: each was billed.
    pub usage: Tokens,
    /// Input in input-token equivalents (cache reads and writes at the entry's
    /// multipliers); absent before the model resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub billable_input: Option<f64>,
    /// USD from the entry's declared prices; absent when it declares none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// `ok`, or the failure's category.
    pub category: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    pub latency_ms: u64,
    /// Streams: milliseconds from the open to the first output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_output_ms: Option<u64>,
    /// Streams: how the stream ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_end: Option<StreamEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<RecordedContent>,
    /// What the caller's request said about the caller (see [`ClientFacts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientFacts>,
    /// What the route or policy changed or withheld on the way
    /// (`field_dropped:context_management`, `tool_dropped:web_search`,
    /// `effort_not_applied`, `temperature_omitted`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The caller's budgets were charged the call's held worst case, not
    /// `usage`: what it spent was never reported (a stream without usage, a
    /// caller who left after a request went). The budgets' rebuild counts the
    /// call's hold row instead of its usage, as the running book did.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub charged_worst_case: bool,
    /// Answered from the answer cache: no attempt, no admission, no cost, no
    /// budget spent (see [`crate::answer_cache`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// A cached answer's origin: the call whose upstream answer it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<String>,
}

impl CallRecord {
    pub fn ok(&self) -> bool {
        self.category == "ok"
    }
}

/// Whether `value` is a W3C `traceparent` this gateway continues: version
/// `00`, a 32-hex trace id and a 16-hex parent id that are not all zeros, and
/// 2-hex flags (lower-case, as the specification requires).
pub fn valid_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |part: &str| part.bytes().any(|b| b != b'0');
    matches!(parts.as_slice(), [version, trace, parent, flags]
        if *version == "00" && hex(trace, 32) && nonzero(trace) && hex(parent, 16) && nonzero(parent) && hex(flags, 2))
}

/// A fresh call id: time-ordered (UUID v7), so ids sort by start.
pub fn new_call_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A duration in whole milliseconds, as records keep durations (saturating).
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_strict() {
        assert!(valid_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(!valid_traceparent(bad), "{bad}");
        }
    }
}
