//! What the calls that are not chat share: the record around the call
//! (opened first, closed before the answer is returned), an attempt logged in
//! the call's spend, and an attempt's request admitted, finalized and sent.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;

pub(super) use super::attempt_log::Bill;
use crate::Weir;
use crate::admission::{Demand, Lane};
use crate::catalog::ModelSpec;
use crate::error::CallError;
use crate::error::WeirError;
use crate::plugin::Session;
use crate::record::{AttemptRecord, Ending, Opened, Operation, Tokens};
use crate::types::HttpRequest;

use super::attempt;
use super::attempt_log::{Ended, Observed};
use super::opening::Opening;
use super::retry::{self, Try};
use super::spend::Spend;
use super::target::Reached;
use super::{Failure, Tally, stamp};

/// The record's note for a call whose provider reported no token count for
/// some upstream request: the host's estimate stands in, so a budget is never
/// settled at zero.
pub(super) const ESTIMATED: &str = "input_tokens_estimated";

/// What a finished call tells its record.
pub(super) trait Answered {
    fn served_model(&self) -> Option<String>;
    /// The answer as recorded when content is: never the vectors themselves.
    fn recorded(&self) -> serde_json::Value;
}

/// The record around one call: opened first, `run`, then closed (the budget
/// settled, every observer told) before the answer or the failure is returned.
pub(super) async fn recorded<T: Answered>(
    weir: &Weir,
    what: Opened<'_>,
    content: Option<serde_json::Value>,
    run: impl AsyncFnOnce(&mut Tally, &Opening) -> Result<T, WeirError>,
) -> Result<(T, crate::Stamp), CallError> {
    let model = what.model.to_owned();
    let mut call = super::Running::new(weir, crate::record::CallLog::open_operation(what, content));
    let result = run(&mut call.tally, &call.opening).await;
    let stamp = stamp(&call.log, &model, &call.tally);
    let notes = call.tally.notes.clone();
    let ending = match &result {
        Ok(answer) => Ending {
            category: "ok".to_owned(),
            served_model: answer.served_model(),
            answer: call.log.records_content().then(|| answer.recorded()),
            notes,
            cached_from: call.tally.cached_from.clone(),
            ..Ending::default()
        },
        Err(error) => Ending { category: error.category().as_str().to_owned(), notes, ..Ending::default() },
    };
    let closed = call.close(ending).await;
    match (result, closed) {
        (Ok(answer), Ok(())) => Ok((answer, stamp)),
        (Ok(_), Err(error)) | (Err(error), _) => Err(CallError { error, stamp }),
    }
}

pub(super) fn opened<'a>(
    model: &'a str,
    caller: Option<&'a crate::Caller>,
    route: crate::record::Route,
    operation: Operation,
    traceparent: &Option<String>,
) -> Opened<'a> {
    Opened { caller, route, operation, model, stream: false, traceparent: traceparent.clone() }
}

/// Runs one non-chat attempt and logs it in the call's spend with what it
/// observed, billed at the tokens `billed` reads off its answer.
pub(super) async fn logged<T>(
    spend: &mut Spend<'_>,
    attempt: impl AsyncFnOnce(&mut Observed) -> Result<T, WeirError>,
    billed: impl FnOnce(&T) -> Bill,
) -> Result<T, Failure> {
    let began = Instant::now();
    let mut observed = Observed::default();
    let result = attempt(&mut observed).await;
    let ended = match &result {
        Ok(answer) => Ended::Billed(billed(answer)),
        Err(error) => Ended::Failed(error),
    };
    spend.log.push(began, observed, ended);
    result.map_err(Failure::Signal)
}

/// A host-spoken attempt's request (no component) admitted in its lane,
/// finalized (see [`attempt::admit_and_finalize`]) and sent.
pub(super) async fn admit_encode_send(
    target: &Reached<'_>,
    demand: Demand,
    deadline: Option<tokio::time::Instant>,
    lane: Lane,
    observed: &mut Observed,
    encode: impl Future<Output = Result<HttpRequest, crate::plugin::PluginError>>,
) -> Result<crate::types::HttpResponse, WeirError> {
    let (grant, http_request) = attempt::admit_and_finalize(target, demand, deadline, lane, observed, encode).await?;
    attempt::send(target, grant, http_request, deadline, observed).await
}

/// A component's non-chat attempt: its request admitted in its lane, encoded
/// in `session`, finalized and sent, the session's instance kept for a prompt
/// answer ([`Session::while_waiting`]).
pub(super) async fn exchange_in<'p>(
    target: &Reached<'_>,
    session: &mut Session<'p>,
    demand: Demand,
    deadline: Option<tokio::time::Instant>,
    lane: Lane,
    observed: &mut Observed,
    encode: impl AsyncFnOnce(&mut Session<'p>) -> Result<HttpRequest, crate::plugin::PluginError>,
) -> Result<crate::types::HttpResponse, WeirError> {
    let encoded = encode(session);
    let (grant, http_request) = attempt::admit_and_finalize(target, demand, deadline, lane, observed, encoded).await?;
    session.while_waiting(attempt::send(target, grant, http_request, deadline, observed)).await
}

/// One upstream request's outcome with every attempt it made, whatever the outcome.
pub(super) struct Sent<T> {
    pub result: Result<T, WeirError>,
    pub attempts: u32,
    pub records: Vec<AttemptRecord>,
}

impl<T> Sent<T> {
    /// The outcome, its attempts added to the call's tally.
    fn onto(self, tally: &mut Tally) -> Result<T, WeirError> {
        tally.attempts += self.attempts;
        tally.attempt_records.extend(self.records);
        self.result
    }
}

/// One upstream request of a call: `attempt` through the retry loop, with its
/// own retry budget (the entry's, lowered by `max_retries`) and no corrections;
/// its attempts' offsets are counted from `started`.
pub(super) async fn sent<T: Try>(
    attempt: &T,
    target: &Reached<'_>,
    max_retries: Option<u32>,
    deadline: Option<tokio::time::Instant>,
    started: Instant,
) -> Sent<T::Output> {
    let mut spend = Spend::lowered_by(target.model, max_retries, Some(0), started);
    spend.first_attempt();
    let result = retry::retrying(attempt, target, deadline, &mut spend).await;
    Sent { result, attempts: spend.attempts(), records: spend.log.into_records() }
}

/// [`sent`], every attempt added to the call's tally.
pub(super) async fn retried<T: Try>(
    attempt: &T,
    target: &Reached<'_>,
    max_retries: Option<u32>,
    deadline: Option<tokio::time::Instant>,
    tally: &mut Tally,
) -> Result<T::Output, WeirError> {
    sent(attempt, target, max_retries, deadline, tally.started).await.onto(tally)
}

/// A call's several upstream requests, `in_flight` at once, their outcomes in
/// the requests' order and every attempt on the tally. The first failure is the
/// call's: no request starts after it, and those in flight finish.
pub(super) async fn in_order<T>(
    requests: impl Iterator<Item = impl Future<Output = Sent<T>>>,
    in_flight: usize,
    tally: &mut Tally,
) -> Result<Vec<T>, WeirError> {
    let failed = AtomicBool::new(false);
    let mut requests = requests;
    let mut running = FuturesOrdered::new();
    let (mut answered, mut first_failure) = (Vec::new(), None);
    // Refilled before each wait, as `buffered` does; pushed here rather than
    // through a stream's closure, which keeps the call's future `Send`.
    loop {
        while running.len() < in_flight {
            let Some(request) = requests.next() else { break };
            running.push_back(unless_failed(&failed, request));
        }
        let Some(outcome) = running.next().await else { break };
        let Some(sent) = outcome else { continue };
        match sent.onto(tally) {
            Ok(answer) => answered.push(answer),
            Err(error) => {
                first_failure.get_or_insert(error);
            }
        }
    }
    first_failure.map_or(Ok(answered), Err)
}

/// `request`, unless an earlier one failed the call: then it is not sent.
async fn unless_failed<T>(failed: &AtomicBool, request: impl Future<Output = Sent<T>>) -> Option<Sent<T>> {
    if failed.load(Ordering::Relaxed) {
        return None;
    }
    let sent = request.await;
    if sent.result.is_err() {
        failed.store(true, Ordering::Relaxed);
    }
    Some(sent)
}

/// Input tokens billed, and nothing else (an embeddings, rerank or decision
/// wire answer generates nothing).
pub(super) fn input_only(input: u64) -> Tokens {
    Tokens { input, ..Tokens::default() }
}

/// `text`'s tokens by the entry's tokenizer, refused before anything is
/// admitted or sent when they are more than the model reads (it would only
/// come back as a 400).
pub(super) fn counted_within_window(model: &ModelSpec, text: &str) -> Result<u64, WeirError> {
    let tokens = model.tokenizer.count(text);
    if tokens > u64::from(model.context_window) {
        return Err(WeirError::ContextOverflow {
            model: model.id.clone(),
            input: tokens,
            output: 0,
            margin: 0,
            window: model.context_window,
        });
    }
    Ok(tokens)
}
