//! The record of a call while it runs: opened before anything is spent,
//! closed once, with what the stages reported.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::CacheMultipliers;
use super::{
    AttemptRecord, Billed, CallOpening, CallRecord, Operation, Prices, RecordedContent, StreamEnd, Who, new_call_id,
};

/// What the call resolved to: where it went and what it is billed at.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// The catalog id that served the call.
    pub model: String,
    /// The role the caller named, when it named one.
    pub role: Option<String>,
    pub identity: String,
    pub provider: String,
    pub wire_id: String,
    pub endpoint_host: Option<String>,
    pub prices: Prices,
    pub multipliers: CacheMultipliers,
    /// The role's entries passed over before this one (see `call::target`).
    pub passed_over: Vec<String>,
    /// The entry the role's fallback stood in for, when it did (see `call::fallback`).
    pub fallback_from: Option<String>,
}

impl Resolved {
    /// What `billed` costs at the entry's declared prices (`None`: it declares
    /// none): its tokens (or a ranking's searches) plus its web searches.
    pub fn cost(&self, billed: &Billed) -> Option<f64> {
        let cost = self.prices.cost(&billed.tokens, billed.searches, self.multipliers)?;
        Some(cost + self.prices.web_search_cost(billed.web_searches))
    }
}

/// How the call ended, as its record says.
#[derive(Debug, Default)]
pub(crate) struct Ending {
    /// `ok`, a failure's category, or `client_left` for a stream the caller left.
    pub category: String,
    pub stop_reason: Option<String>,
    pub served_model: Option<String>,
    pub max_tokens: Option<u32>,
    pub first_output: Option<Duration>,
    pub stream_end: Option<StreamEnd>,
    /// The answer, already rendered, when content is recorded.
    pub answer: Option<serde_json::Value>,
    /// What policy changed or withheld.
    pub notes: Vec<&'static str>,
    /// The budgets are charged the held worst case (see
    /// [`super::CallRecord::charged_worst_case`]).
    pub charged_worst_case: bool,
    /// Answered from the answer cache: the call whose answer it is.
    pub cached_from: Option<String>,
}

/// What a call's opening says: who, by which door, what operation, which name.
#[derive(Debug)]
pub(crate) struct Opened<'a> {
    pub caller: Option<&'a crate::caller::Caller>,
    pub route: super::Route,
    pub operation: Operation,
    pub model: &'a str,
    pub stream: bool,
    pub traceparent: Option<String>,
}

/// A call between its opening and its record.
#[derive(Debug)]
pub(crate) struct CallLog {
    /// Shared with the call's [`crate::call`] opening handle (for its hold's
    /// record) without a copy per call.
    opening: Arc<CallOpening>,
    started: Instant,
    /// The request as recorded, when the operator records content.
    request: Option<serde_json::Value>,
    /// What the route noted before the call, and what the caller said about
    /// itself, from the request (see `ChatRequest::route_notes`).
    route_notes: Vec<String>,
    client: Option<super::ClientFacts>,
}

impl CallLog {
    /// Opens the record of a chat call: `content` is its request as recorded
    /// (when content is recorded), `route_notes` what the route noted before
    /// the call, `client` what the caller said about itself.
    pub fn open_chat(
        what: Opened<'_>,
        content: Option<serde_json::Value>,
        route_notes: Vec<String>,
        client: Option<super::ClientFacts>,
    ) -> Self {
        let mut log = Self::open_operation(what, content);
        log.route_notes = route_notes;
        log.client = client.filter(|client| !client.is_empty());
        log
    }

    /// Opens the record of a call of any operation; `request` is its content,
    /// already rendered, when content is recorded.
    pub fn open_operation(what: Opened<'_>, request: Option<serde_json::Value>) -> Self {
        let who = match what.caller {
            Some(caller) => {
                Who { key_id: caller.key_id.clone(), member: Some(caller.member.clone()), team: caller.team.clone() }
            }
            None => Who::default(),
        };
        let opening = CallOpening {
            call_id: new_call_id(),
            started_at: SystemTime::now(),
            who,
            route: what.route,
            operation: what.operation,
            model: what.model.to_owned(),
            stream: what.stream,
            traceparent: what.traceparent,
        };
        Self { opening: Arc::new(opening), started: Instant::now(), request, route_notes: Vec::new(), client: None }
    }

    /// Opens the record of a request refused before it became a call (a
    /// caller key the gateway does not accept): no model, no caller.
    pub fn refused(route: super::Route, traceparent: Option<String>) -> Self {
        let opening = CallOpening {
            call_id: new_call_id(),
            started_at: SystemTime::now(),
            who: Who::default(),
            route,
            operation: Operation::Chat,
            model: String::new(),
            stream: false,
            traceparent,
        };
        Self {
            opening: Arc::new(opening),
            started: Instant::now(),
            request: None,
            route_notes: Vec::new(),
            client: None,
        }
    }

    pub fn opening(&self) -> &Arc<CallOpening> {
        &self.opening
    }

    /// Notes the call adds to the route's once it knows them (what the serving
    /// provider was not handed of the caller's native fields).
    pub fn add_route_notes(&mut self, notes: impl IntoIterator<Item = String>) {
        self.route_notes.extend(notes);
    }

    pub fn call_id(&self) -> &str {
        &self.opening.call_id
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn records_content(&self) -> bool {
        self.request.is_some()
    }

    /// This log as a new value, for whoever closes it next (a live stream); its
    /// recorded request goes with it.
    pub fn detach(&mut self) -> Self {
        Self {
            opening: self.opening.clone(),
            started: self.started,
            request: self.request.take(),
            route_notes: std::mem::take(&mut self.route_notes),
            client: self.client.take(),
        }
    }

    /// The closed record: usage summed over every attempt (each was billed),
    /// priced from the entry's declared prices. By reference, so that a guard
    /// holding the log can close it on drop; the opening's fields are copied
    /// and the recorded request taken, so call it once.
    pub fn close(&mut self, resolved: Option<&Resolved>, attempts: Vec<AttemptRecord>, ending: Ending) -> CallRecord {
        let billed = Billed::of(&attempts);
        let usage = billed.tokens;
        let billable_input = resolved.map(|r| r.multipliers.billable(&usage));
        let cost_usd = resolved.and_then(|r| r.cost(&billed));
        let CallOpening { call_id, started_at, who, route, operation, model, stream, traceparent } =
            (*self.opening).clone();
        let latency = self.started.elapsed();
        CallRecord {
            call_id,
            started_at,
            ended_at: started_at + latency,
            who,
            route,
            operation,
            model: resolved.map_or(model, |r| r.model.clone()),
            role: resolved.and_then(|r| r.role.clone()),
            identity: resolved.map(|r| r.identity.clone()),
            provider: resolved.map(|r| r.provider.clone()),
            wire_id: resolved.map(|r| r.wire_id.clone()),
            endpoint_host: resolved.and_then(|r| r.endpoint_host.clone()),
            served_model: ending.served_model,
            stream,
            traceparent,
            max_tokens: ending.max_tokens,
            attempts,
            usage,
            billable_input,
            cost_usd,
            category: ending.category,
            stop_reason: ending.stop_reason,
            latency_ms: super::millis(latency),
            first_output_ms: ending.first_output.map(super::millis),
            stream_end: ending.stream_end,
            content: self.request.take().map(|request| RecordedContent { request, answer: ending.answer }),
            client: self.client.take(),
            notes: std::mem::take(&mut self.route_notes)
                .into_iter()
                .chain(
                    resolved.into_iter().flat_map(|r| r.passed_over.iter().map(|entry| format!("passed_over:{entry}"))),
                )
                .chain(resolved.and_then(|r| r.fallback_from.as_ref()).map(|entry| format!("fallback_from:{entry}")))
                .chain(ending.notes.into_iter().map(str::to_owned))
                .collect(),
            charged_worst_case: ending.charged_worst_case,
            cached: ending.cached_from.is_some(),
            cached_from: ending.cached_from,
        }
    }
}
