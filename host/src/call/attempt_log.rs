//! Every upstream attempt of a call, as the record lists it: why it ran, when,
//! how long admission held it, what the upstream said and what it billed.
//!
//! The log rides in the call's [`super::spend::Spend`], which every attempt
//! already receives: the reason of the next attempt is set where it is counted
//! (the gates, the retry loop, a stream's replay), and each way of attempting
//! pushes what it saw.

use std::time::{Duration, Instant};

use crate::error::WeirError;
use crate::record::{AttemptReason, AttemptRecord, Tokens, millis};
use crate::types::{DecodedResponse, HttpResponse};

/// Headers upstreams name their request id in (OpenAI, Anthropic, AWS, proxies).
const REQUEST_ID_HEADERS: [&str; 5] =
    ["x-request-id", "request-id", "x-amzn-requestid", "x-amz-request-id", "apim-request-id"];

/// What an attempt learned on its way, whatever its outcome.
#[derive(Debug, Default)]
pub(super) struct Observed {
    pub admission_wait: Duration,
    pub status: Option<u16>,
    pub request_id: Option<String>,
    /// The answer's own blocks, when it was decoded with them.
    pub native: Option<crate::chat::NativeBlocks>,
}

impl Observed {
    /// The status and request id of an upstream response (its headers only:
    /// never its body, which may hold anything).
    pub fn response(&mut self, response: &HttpResponse) {
        self.status = Some(response.status);
        self.request_id = request_id(&response.headers);
    }
}

/// The request id an upstream put in its headers, bounded so a hostile
/// upstream cannot fill the record.
pub(super) fn request_id(headers: &[(String, String)]) -> Option<String> {
    headers
        .iter()
        .find(|(name, _)| REQUEST_ID_HEADERS.iter().any(|known| name.eq_ignore_ascii_case(known)))
        .map(|(_, value)| bounded(value))
}

/// An upstream's request id as recorded: at most 128 characters.
pub(super) fn bounded(value: &str) -> String {
    value.chars().take(128).collect()
}

/// What an answer of another operation billed: tokens, and the search units
/// of a ranking (`None` for the rest).
pub(super) struct Bill {
    pub tokens: Tokens,
    pub searches: Option<u64>,
}

impl From<Tokens> for Bill {
    fn from(tokens: Tokens) -> Self {
        Self { tokens, searches: None }
    }
}

/// How an attempt ended.
pub(super) enum Ended<'a> {
    /// A whole answer (it may still fail a gate: the gates decide, the record
    /// says what the upstream gave).
    Answered(&'a DecodedResponse),
    /// A stream whose first output is in hand; its usage comes at its end.
    Live,
    /// An answer of another operation (embeddings, rerank) and what it billed
    /// (its request id, from a header or the body, is already observed).
    Billed(Bill),
    Failed(&'a WeirError),
}

#[derive(Debug)]
pub(super) struct AttemptLog {
    call_started: Instant,
    next: AttemptReason,
    records: Vec<AttemptRecord>,
    /// The last answer's own blocks (see [`Observed::native`]).
    native: Option<crate::chat::NativeBlocks>,
}

impl AttemptLog {
    pub fn new(call_started: Instant) -> Self {
        Self { call_started, next: AttemptReason::First, records: Vec::new(), native: None }
    }

    /// The own blocks of the last attempt that answered, if it had any.
    pub fn take_native(&mut self) -> Option<crate::chat::NativeBlocks> {
        self.native.take()
    }

    /// Why the next attempt runs.
    pub fn next_is(&mut self, reason: AttemptReason) {
        self.next = reason;
    }

    /// Adds the attempt that began at `began`.
    pub fn push(&mut self, began: Instant, mut observed: Observed, ended: Ended<'_>) {
        let mut web_searches = None;
        if let Ended::Answered(_) = ended {
            web_searches = super::web_search::count(observed.native.as_ref());
            self.native = observed.native.take();
        }
        let (category, usage, answer_id) = match &ended {
            Ended::Answered(answer) => {
                ("ok".to_owned(), answer.usage.as_ref().map(Tokens::of), answer.request_id.as_deref())
            }
            Ended::Live => ("ok".to_owned(), None, None),
            Ended::Billed(bill) => ("ok".to_owned(), Some(bill.tokens), None),
            Ended::Failed(error) => (error.category().as_str().to_owned(), None, None),
        };
        let searches = match &ended {
            Ended::Billed(bill) => bill.searches,
            Ended::Answered(_) | Ended::Live | Ended::Failed(_) => None,
        };
        let status = observed.status.or(match ended {
            Ended::Failed(WeirError::Upstream { status, .. }) => Some(*status),
            _ => None,
        });
        self.records.push(AttemptRecord {
            reason: self.next,
            started_ms: millis(began.saturating_duration_since(self.call_started)),
            latency_ms: millis(began.elapsed()),
            admission_wait_ms: millis(observed.admission_wait),
            status,
            category,
            request_id: observed.request_id.or_else(|| answer_id.map(bounded)),
            usage,
            searches,
            web_searches,
            deployment: None,
        });
    }

    /// How many attempts are logged.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Names the deployment the attempts logged from `from` on went to.
    pub fn mark_deployment(&mut self, from: usize, deployment: &str) {
        for record in self.records.iter_mut().skip(from) {
            record.deployment = Some(deployment.to_owned());
        }
    }

    /// What the attempts so far reported spending, every kind summed apart.
    pub fn usage(&self) -> Tokens {
        crate::record::Billed::of(&self.records).tokens
    }

    /// The web searches the attempts so far ran (see [`super::web_search`]).
    pub fn web_searches(&self) -> u64 {
        crate::record::Billed::of(&self.records).web_searches
    }

    pub fn into_records(self) -> Vec<AttemptRecord> {
        self.records
    }
}
