//! A call's opening in the record. It is handed to the observers as the call
//! starts, and its acknowledgement is awaited only as the first request is
//! about to leave: resolution, admission and encoding overlap it, and nothing
//! is sent upstream for a call whose opening an observer refused. (The
//! ledger acknowledges an opening at once under `sync = "normal"` and commits
//! it with the next batch; see [`crate::ledger::Ledger`].)

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use crate::budget::Spend;
use crate::error::WeirError;
use crate::record::{CallOpening, HoldRecord, Observers, PendingOpen};

#[derive(Debug)]
pub(super) struct Opening {
    pending: Mutex<Option<PendingOpen>>,
    /// The observers' answer, once awaited (later attempts read it).
    settled: OnceLock<Result<(), String>>,
    /// The call as it opened (for the hold's record); none for a preview.
    call: Option<Arc<CallOpening>>,
}

impl Opening {
    pub fn new(pending: PendingOpen, call: &Arc<CallOpening>) -> Self {
        Self { pending: Mutex::new(Some(pending)), settled: OnceLock::new(), call: Some(Arc::clone(call)) }
    }

    /// An opening with nothing to wait for: a resolution that sends nothing
    /// (the preview of what a role resolves to).
    pub fn none() -> Self {
        Self { pending: Mutex::new(None), settled: OnceLock::new(), call: None }
    }

    /// The call's id (empty for a preview, which records nothing).
    pub fn call_id(&self) -> &str {
        self.call.as_deref().map_or("", |call| call.call_id.as_str())
    }

    /// Tells the observers this call's budget hold of `worst` was taken (the
    /// ledger keeps it, so a call a crash cuts off still counts). A refusal
    /// fails the call before it is sent, as `ledger_unavailable`.
    pub async fn held(&self, observers: &Observers, worst: Spend) -> Result<(), WeirError> {
        let Some(call) = &self.call else { return Ok(()) };
        let hold = HoldRecord {
            call_id: call.call_id.clone(),
            started_at: call.started_at,
            held_at: SystemTime::now(),
            who: call.who.clone(),
            model: call.model.clone(),
            tokens: worst.tokens,
            usd: worst.usd,
        };
        observers.held(&hold).await.map_err(|refusal| WeirError::LedgerUnavailable(refusal.0))
    }

    /// Whether a request was about to leave for this call (its opening was
    /// waited for, as every first request does before it is sent).
    pub fn sent(&self) -> bool {
        self.settled.get().is_some()
    }

    /// Waits for the opening's acknowledgement (once per call): a refusal fails
    /// the attempt before it is sent, as `ledger_unavailable`.
    pub async fn settled(&self) -> Result<(), WeirError> {
        if let Some(outcome) = self.settled.get() {
            return outcome.clone().map_err(WeirError::LedgerUnavailable);
        }
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner).take();
        let outcome = match pending {
            Some(pending) => pending.settled().await.map_err(|refusal| refusal.0),
            None => Ok(()),
        };
        let outcome = self.settled.get_or_init(|| outcome).clone();
        outcome.map_err(WeirError::LedgerUnavailable)
    }
}
