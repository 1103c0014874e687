//! Decisions through the call template's stages, like embeddings and rerank:
//! the record opened first, the request checked, the target resolved (a
//! decision role or entry), the budget held, then each upstream request
//! through the retry loop and admission; the budget settled and the record
//! closed last. Two backends: the decision wire (here: the host encodes the
//! request and checks the answer, [`crate::decision`], where a component
//! would, and classifies the endpoint's error status itself), and a chat
//! model's log-probabilities (`decision_logprobs`).
//!
//! The throttle is fed only by an entry that has something adaptive — an
//! `rpm` or `tpm` bucket for it to stretch. An entry bounded by a concurrency
//! cap alone has a gate and nothing to feed: its 429s are retried after their
//! `retry-after`, and its coefficient stays where it is.

use crate::Weir;
use crate::admission::{Demand, Feedback, Lane};
use crate::catalog::RoleKind;
use crate::decision::{DecideRequest, DecideResponse, Decision, DecisionRequest, Malformed, check_answer};
use crate::error::CallError;
use crate::error::WeirError;
use crate::plugin::PluginError;
use crate::record::Operation;
use crate::types::{ErrorClass, HttpRequest, HttpResponse};

use super::attempt::feed_back;
use super::attempt_log::{Observed, bounded};
use super::classify;
use super::opening::Opening;
use super::operation::{
    Answered, ESTIMATED, admit_encode_send, counted_within_window, input_only, logged, opened, recorded, retried,
};
use super::retry::Try;
use super::spend::Spend;
use super::target::{self, Naming, Reached, Resolution};
use super::{Failure, Tally, hold, resolved};

/// Where the wire's request goes, under the entry's endpoint.
const PATH: &str = "/decisions";

/// Runs one decision call end to end; its record is committed before the
/// answer (or the failure) is returned.
pub(crate) async fn decide(weir: &Weir, request: DecideRequest) -> Result<DecideResponse, CallError> {
    let content = weir.records_content().then(|| serde_json::to_value(&request.question).ok()).flatten();
    let question = &request.question;
    let what = opened(&question.model, request.caller.as_ref(), request.route, Operation::Decide, &request.traceparent);
    let run = async |tally: &mut Tally, opening: &Opening| run_decide(weir, &request, tally, opening).await;
    let (decided, stamp) = recorded(weir, what, content, run).await?;
    Ok(DecideResponse {
        decision: decided.decision,
        input_tokens: decided.input_tokens,
        input_tokens_estimated: decided.estimated,
        stamp,
    })
}

/// A decision call's answer before it is stamped.
pub(super) struct Decided {
    pub decision: Decision,
    /// Billed input tokens, summed over the upstream requests.
    pub input_tokens: u64,
    /// Some upstream request reported no count: the host's estimate stands in.
    pub estimated: bool,
}

impl Answered for Decided {
    fn served_model(&self) -> Option<String> {
        self.decision.served_model.clone()
    }

    /// The distributions, by question id.
    fn recorded(&self) -> serde_json::Value {
        serde_json::json!({ "answers": self.decision.answered() })
    }
}

/// The request checked, the entry resolved, then the entry's backend.
async fn run_decide(
    weir: &Weir,
    request: &DecideRequest,
    tally: &mut Tally,
    opening: &Opening,
) -> Result<Decided, WeirError> {
    request.question.validate().map_err(WeirError::InvalidRequest)?;
    let naming = Naming {
        model: &request.question.model,
        caller: request.caller.as_ref(),
        route: request.route,
        kind: RoleKind::Decision,
    };
    let resolution = target::resolve_any(weir, &naming, opening).await?;
    tally.resolved = Some(resolved(resolution.reached()));
    match &resolution {
        Resolution::Host(target) => by_wire(weir, request, target, tally, opening).await,
        Resolution::Component(target) => super::decision_logprobs::decide(weir, request, target, tally, opening).await,
    }
}

/// The decision wire's backend: one request to the endpoint, its answer
/// checked against the request.
async fn by_wire(
    weir: &Weir,
    request: &DecideRequest,
    target: &Reached<'_>,
    tally: &mut Tally,
    opening: &Opening,
) -> Result<Decided, WeirError> {
    let question = &request.question;
    let http_request = encode(target, question)?;
    let estimate = estimate(target, &http_request)?;
    let worst = crate::budget::worst_case(target.model, estimate, 0);
    tally.hold = hold::take_worst(weir, request.caller.as_ref(), target, worst, opening).await?;
    let attempt = DecideTry { target, question, http_request: &http_request, deadline: request.deadline, estimate };
    let decision = retried(&attempt, target, request.max_retries, request.deadline, tally).await?;
    let estimated = decision.input_tokens.is_none();
    if estimated {
        tally.notes.push(ESTIMATED);
    }
    Ok(Decided { input_tokens: decision.input_tokens.unwrap_or(estimate), estimated, decision })
}

/// The wire's request as the endpoint receives it: the caller's, with the
/// entry's wire id as its `model`.
fn encode(target: &Reached<'_>, question: &DecisionRequest) -> Result<HttpRequest, WeirError> {
    let wire = DecisionRequest { model: target.model.wire_id.clone(), ..question.clone() };
    let body = serde_json::to_vec(&wire)
        .map_err(|error| WeirError::InvalidRequest(format!("the decision request cannot be written: {error}")))?;
    Ok(HttpRequest {
        method: "POST".to_owned(),
        path_and_query: PATH.to_owned(),
        headers: vec![("content-type".to_owned(), "application/json".to_owned())],
        body,
    })
}

/// The request's input tokens by the entry's tokenizer, over the body the
/// endpoint reads (state and questions alike): the demand admitted, the
/// budget's hold, and the bill when the endpoint reports no count. A request
/// longer than the model reads is refused before anything is admitted or sent.
fn estimate(target: &Reached<'_>, request: &HttpRequest) -> Result<u64, WeirError> {
    counted_within_window(target.model, &String::from_utf8_lossy(&request.body))
}

/// One decision attempt, as the retry loop re-runs it.
struct DecideTry<'a, 't> {
    target: &'a Reached<'t>,
    question: &'a DecisionRequest,
    http_request: &'a HttpRequest,
    deadline: Option<tokio::time::Instant>,
    estimate: u64,
}

impl Try for DecideTry<'_, '_> {
    type Output = Decision;

    async fn run(&self, spend: &mut Spend<'_>) -> Result<Decision, Failure> {
        let attempt = async |observed: &mut Observed| self.attempt(observed).await;
        logged(spend, attempt, |decision| input_only(decision.input_tokens.unwrap_or(self.estimate)).into()).await
    }
}

impl DecideTry<'_, '_> {
    async fn attempt(&self, observed: &mut Observed) -> Result<Decision, WeirError> {
        let target = self.target;
        let demand = Demand { requests: 1, tokens: self.estimate };
        let encoded = std::future::ready(Ok(self.http_request.clone()));
        let response = admit_encode_send(target, demand, self.deadline, Lane::Interactive, observed, encoded).await?;
        if !(200..300).contains(&response.status) {
            return Err(failure(target, &response, Ok(crate::decision::classify(&response))).await);
        }
        let decision = check_answer(self.question, &response.body).map_err(|malformed| unusable(target, &malformed))?;
        feed(target, Feedback::Success).await;
        if observed.request_id.is_none() {
            observed.request_id = decision.request_id.as_deref().map(bounded);
        }
        Ok(decision)
    }
}

/// A non-2xx answer as `class` (the wire's table, or the chat component's
/// classification) says, fed to the throttle when the entry has one to feed.
pub(super) async fn failure(
    target: &Reached<'_>,
    response: &HttpResponse,
    class: Result<ErrorClass, PluginError>,
) -> WeirError {
    let error = classify::failure(target, response, class);
    feed(target, Feedback::Backpressure(error.backpressure_weight())).await;
    error
}

/// Feeds the throttle of an entry with a bucket for it to stretch (see the module doc).
pub(super) async fn feed(target: &Reached<'_>, signal: Feedback) {
    if target.model.rpm.is_some() || target.model.tpm.is_some() {
        feed_back(target.gate, signal).await;
    }
}

/// A malformed answer: the whole of it to the log (scrubbed of the credential
/// the request carried, which it may quote), the caller told in the
/// request's own terms; never repaired, never retried (the same request
/// would get the same answer).
fn unusable(target: &Reached<'_>, malformed: &Malformed) -> WeirError {
    let reason = malformed.to_string();
    let reason = target.credential.scrub(&reason);
    tracing::warn!(model = %target.model.id, %reason, "the decision endpoint's answer is malformed");
    WeirError::UnusableAnswer { model: target.model.id.clone(), reason: malformed.safe_reason() }
}
