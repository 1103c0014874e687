//! The one transparent retry loop. It re-runs an attempt for the upstream
//! signals — rate-limited, overloaded, transient — reading each signal's policy
//! as data ([`SignalPolicy`]): the jitter window of the wait, doubled per retry,
//! and the upstream's `retry-after` (or reset) when that is longer. The budget is
//! the call's [`Spend`]: one for the whole call however many payloads the gates
//! send (a correction does not bring fresh retries), and each retry is also an
//! attempt under the call's ceiling. When either is spent the caller gets the
//! last signal's category with the attempt count, never a bare 429. A failure
//! an attempt reports as settled (see [`Failure`]) is never retried. Nothing
//! else retries: not reqwest, not a component.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::chat::ChatRequest;
use crate::error::{Pending, SignalPolicy, WeirError};
use crate::record::AttemptReason;
use crate::types::{CallParams, Conversation, RetryHint};

use super::spend::Spend;
use super::target::{self, Deployed, Reached, Target};
use super::{Attempt, Failure, Outcome};
use crate::admission::deployment::{Tried, affinity_of};
use crate::admission::{Demand, input_bound};
use std::sync::atomic::{AtomicU64, Ordering};

/// No single wait is longer than this, whatever an upstream asks.
const MAX_WAIT: Duration = Duration::from_secs(120);

/// One attempt of some operation, already counted in `spend` and logged
/// there: what the retry loop re-runs.
pub(super) trait Try {
    type Output;

    async fn run(&self, spend: &mut Spend<'_>) -> Result<Self::Output, Failure>;

    /// Whether the next attempt goes somewhere the last one did not (another
    /// deployment): it is then sent at once, with no wait.
    fn moves_on(&self) -> bool {
        false
    }
}

/// A chat attempt with its payload, as the retry loop re-runs it.
struct ChatTry<'x, 't, A> {
    attempt: &'x A,
    target: &'x Target<'t>,
    conversation: &'x Conversation,
    params: &'x CallParams,
    request: &'x ChatRequest,
    /// The conversation's affinity, for an entry with deployments.
    affinity: Option<u64>,
    /// The deployments this call's attempts failed on with a retryable signal.
    tried: AtomicU64,
}

impl<A: Attempt> Try for ChatTry<'_, '_, A> {
    type Output = Outcome<A::Live>;

    async fn run(&self, spend: &mut Spend<'_>) -> Result<Self::Output, Failure> {
        let Some(deployed) = self.target.deployment else {
            return self.attempt.run(self.target, self.conversation, self.params, self.request, spend).await;
        };
        // Boxed: resolving another deployment's target is a future of its own
        // this state need not hold inline (only entries with deployments pay it).
        let (index, retargeted) = Box::pin(self.addressed(deployed)).await?;
        let target = retargeted.as_ref().unwrap_or(self.target);
        let Some(deployment) = deployed.pool.get(index) else {
            return Err(Failure::Settled(target::every_deployment_unavailable(deployed.entry)));
        };
        let logged_before = spend.log.len();
        let result = {
            let _in_flight = deployment.health.start();
            self.attempt.run(target, self.conversation, self.params, self.request, spend).await
        };
        spend.log.mark_deployment(logged_before, &deployment.id);
        let failure = match &result {
            Ok(_) => {
                deployed.pool.answered(index);
                return result;
            }
            Err(Failure::Signal(error) | Failure::Settled(error)) => error,
        };
        if deployed.pool.judge(index, failure.category(), failure.retry_policy()) {
            self.tried.fetch_or(Tried::default().with(index).bits(), Ordering::Relaxed);
        }
        result
    }

    fn moves_on(&self) -> bool {
        self.target
            .deployment
            .is_some_and(|deployed| deployed.pool.has_untried(Tried::from_bits(self.tried.load(Ordering::Relaxed))))
    }
}

impl<'t, A> ChatTry<'_, 't, A> {
    /// The demand a deployment's room is judged by: one request, and the
    /// input's byte bound (never below its token count) plus the output
    /// reserve — so a deployment said to have room has room for the demand
    /// admission will take, without tokenizing before the choice.
    fn demand(&self) -> Demand {
        Demand { requests: 1, tokens: input_bound(self.conversation) + u64::from(self.params.max_tokens) }
    }

    /// The deployment this attempt goes to, and its target when it is not
    /// the one the call resolved to. A deployment that cannot be addressed (a
    /// secret or region missing, a reach rule broken) counts as failed and
    /// another is chosen, nothing sent; when none is left, the last reason.
    async fn addressed(&self, deployed: Deployed<'t>) -> Result<(usize, Option<Target<'t>>), Failure> {
        let mut unaddressable = None;
        let demand = self.demand();
        for _ in 0..deployed.pool.deployments().len() {
            let tried = Tried::from_bits(self.tried.load(Ordering::Relaxed));
            let Some(index) = deployed.pool.choose(self.affinity, tried, demand) else { break };
            if index == deployed.index {
                return Ok((index, None));
            }
            match target::for_deployment(self.target, Deployed { index, ..deployed }).await {
                Ok(found) => return Ok((index, Some(found))),
                Err(error) => {
                    if let Some(deployment) = deployed.pool.get(index) {
                        deployment.health.failed(None);
                    }
                    self.tried.fetch_or(Tried::default().with(index).bits(), Ordering::Relaxed);
                    unaddressable = Some(error);
                }
            }
        }
        Err(Failure::Settled(unaddressable.unwrap_or_else(|| target::every_deployment_unavailable(deployed.entry))))
    }
}

pub(super) async fn with_retries<A: Attempt>(
    attempt: &A,
    target: &Target<'_>,
    conversation: &Conversation,
    params: &CallParams,
    request: &ChatRequest,
    spend: &mut Spend<'_>,
) -> Result<Outcome<A::Live>, WeirError> {
    let affinity = target.deployment.and_then(|_| {
        let caller = request.caller.as_ref().and_then(|caller| caller.key_id.as_deref());
        let cache_key = request.native.as_ref().and_then(|native| {
            native.fields.iter().find(|(name, _)| name == "prompt_cache_key").and_then(|(_, value)| value.as_str())
        });
        affinity_of(caller, cache_key, conversation.system.first().map(String::as_str))
    });
    let chat = ChatTry { attempt, target, conversation, params, request, affinity, tried: AtomicU64::new(0) };
    retrying(&chat, target, request.deadline, spend).await
}

/// Runs `attempt` until it succeeds, fails with a signal its policy does not
/// retry, or the call's retry budget, attempt ceiling or deadline is spent.
pub(super) async fn retrying<T: Try>(
    attempt: &T,
    target: &Reached<'_>,
    deadline: Option<tokio::time::Instant>,
    spend: &mut Spend<'_>,
) -> Result<T::Output, WeirError> {
    loop {
        // This attempt is already counted: by the caller for a payload's
        // first, below for a retry.
        let error = match attempt.run(spend).await {
            Ok(outcome) => return Ok(outcome),
            Err(Failure::Settled(error)) => return Err(error),
            Err(Failure::Signal(error)) => error,
        };
        let Some(policy) = error.retry_policy() else { return Err(error) };
        let wait = if attempt.moves_on() { Duration::ZERO } else { wait_before_retry(&error, policy, spend.retries()) };
        let past_deadline = deadline.is_some_and(|deadline| tokio::time::Instant::now() + wait > deadline);
        if past_deadline || !spend.take_retry() {
            return Err(WeirError::RetriesExhausted { attempts: spend.attempts(), last: Box::new(error) });
        }
        if !spend.has_room() {
            return Err(spend.ceiling(Pending::Retry(Box::new(error))));
        }
        tracing::info!(model = %target.model.id, attempt = spend.attempts(), ?wait, error = %error, "retrying");
        spend.next_attempt(AttemptReason::Retry, || Pending::Retry(Box::new(error)))?;
        tokio::time::sleep(wait).await;
    }
}

/// The signal's jitter window, doubled per retry already made; an upstream's
/// own hint wins when it asks for longer.
fn wait_before_retry(error: &WeirError, policy: SignalPolicy, retries: u32) -> Duration {
    let scale = 1_u32 << retries.min(6);
    let jitter = jitter(policy.jitter_min * scale, policy.jitter_max * scale);
    let hinted = match error {
        WeirError::Upstream { retry_hint: Some(hint), .. } => hint_delay(*hint),
        _ => Duration::ZERO,
    };
    jitter.max(hinted).min(MAX_WAIT)
}

fn jitter(min: Duration, max: Duration) -> Duration {
    let span = max.saturating_sub(min).as_millis();
    let span = u64::try_from(span).unwrap_or(u64::MAX);
    min + Duration::from_millis(fastrand::u64(0..=span))
}

/// A hint as a delay from now; an instant already past is no wait at all.
fn hint_delay(hint: RetryHint) -> Duration {
    match hint {
        RetryHint::DelayMs(ms) => Duration::from_millis(ms),
        RetryHint::AtUnixMs(at) => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            Duration::from_millis(at).saturating_sub(now)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::UpstreamClass;

    fn upstream(class: UpstreamClass, hint: Option<RetryHint>) -> WeirError {
        WeirError::Upstream {
            model: "m".into(),
            provider: "p".into(),
            credential: None,
            status: 429,
            class,
            retry_hint: hint,
        }
    }

    #[test]
    fn waits_fall_in_the_signal_window_and_double() {
        for _ in 0..100 {
            let first = wait_before_retry(&upstream(UpstreamClass::RateLimited, None), SignalPolicy::RATE_LIMITED, 0);
            assert!((SignalPolicy::RATE_LIMITED.jitter_min..=SignalPolicy::RATE_LIMITED.jitter_max).contains(&first));
            let third = wait_before_retry(&upstream(UpstreamClass::RateLimited, None), SignalPolicy::RATE_LIMITED, 2);
            assert!(third >= SignalPolicy::RATE_LIMITED.jitter_min * 4);
        }
        assert!(SignalPolicy::OVERLOADED.jitter_max > SignalPolicy::RATE_LIMITED.jitter_max, "overload waits wider");
    }

    #[test]
    fn a_longer_retry_after_wins_and_is_capped() {
        let hinted = upstream(UpstreamClass::RateLimited, Some(RetryHint::DelayMs(30_000)));
        assert_eq!(wait_before_retry(&hinted, SignalPolicy::RATE_LIMITED, 0), Duration::from_secs(30));
        let absurd = upstream(UpstreamClass::RateLimited, Some(RetryHint::DelayMs(86_400_000)));
        assert_eq!(wait_before_retry(&absurd, SignalPolicy::RATE_LIMITED, 0), MAX_WAIT);
        let now_ms = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
        let at = hint_delay(RetryHint::AtUnixMs(now_ms + 10_000));
        assert!(at <= Duration::from_secs(10) && at >= Duration::from_secs(9), "{at:?}");
        assert_eq!(hint_delay(RetryHint::AtUnixMs(0)), Duration::ZERO);
    }
}
