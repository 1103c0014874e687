//! Who receives the record. The ledger is one observer, the metrics and the
//! spans are others, and an embedding service may add its own: the call
//! template hands every opening and every closed record to all of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{CallOpening, CallRecord, HoldRecord};

/// An observer's acknowledgement: resolved once it holds the record (the
/// ledger: once it is committed). The call waits for it.
pub type Acknowledged = Pin<Box<dyn Future<Output = Result<(), ObserverError>> + Send>>;

/// Why an observer could not take a record. Only an observer that must hold
/// every record (the ledger with `on_error = "refuse"`) reports one: the call
/// then fails `ledger_unavailable`, since an unrecorded call cannot be accounted.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ObserverError(pub String);

/// Receives every call's opening and closed record.
///
/// Both methods run on the call's task: do slow work elsewhere (a channel, a
/// writer thread) or in the returned [`Acknowledged`] (the ledger commits
/// there), which resolves when it is done, or return [`acknowledged`] at
/// once. An acknowledgement may be dropped unpolled (a call closed by a
/// drop): what it must not lose, it finishes on drop.
pub trait CallObserver: Send + Sync + 'static {
    /// A call opened, before anything is spent on it.
    fn opened(&self, opening: &CallOpening) -> Acknowledged {
        let _ = opening;
        acknowledged()
    }

    /// A call's budget hold was taken (before anything is sent for it).
    fn held(&self, hold: &HoldRecord) -> Acknowledged {
        let _ = hold;
        acknowledged()
    }

    /// A call closed: every attempt made, its usage and outcome final.
    fn closed(&self, record: &Arc<CallRecord>) -> Acknowledged;
}

/// An acknowledgement that is already in.
pub fn acknowledged() -> Acknowledged {
    Box::pin(std::future::ready(Ok(())))
}

/// The observers of one [`crate::Weir`], in the order they were added.
#[derive(Clone, Default)]
pub struct Observers {
    observers: Vec<Arc<dyn CallObserver>>,
}

impl std::fmt::Debug for Observers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observers").field("count", &self.observers.len()).finish()
    }
}

impl Observers {
    pub fn push(&mut self, observer: Arc<dyn CallObserver>) {
        self.observers.push(observer);
    }

    /// Tells every observer a call opened, now; what they answer is awaited
    /// later ([`PendingOpen::settled`]), so the call's own work overlaps the
    /// ledger's commit.
    pub fn open(&self, opening: &CallOpening) -> PendingOpen {
        PendingOpen { acks: self.observers.iter().map(|observer| observer.opened(opening)).collect() }
    }

    /// Tells every observer a call opened and waits for them; the first refusal wins.
    pub async fn opened(&self, opening: &CallOpening) -> Result<(), ObserverError> {
        self.open(opening).settled().await
    }

    /// Tells every observer a call's hold was taken and waits for them; the
    /// first refusal wins.
    pub async fn held(&self, hold: &HoldRecord) -> Result<(), ObserverError> {
        first_error(self.observers.iter().map(|observer| observer.held(hold)).collect()).await
    }

    /// Hands every observer the closed record now (not when the answer is
    /// first polled, so a record closed on drop is still handed over); the
    /// future waits for them, and the first refusal wins.
    pub fn closed(&self, record: &Arc<CallRecord>) -> impl Future<Output = Result<(), ObserverError>> + use<> {
        let acks: Vec<Acknowledged> = self.observers.iter().map(|observer| observer.closed(record)).collect();
        first_error(acks)
    }
}

/// The observers' acknowledgements of a call's opening, not yet awaited.
pub struct PendingOpen {
    acks: Vec<Acknowledged>,
}

impl std::fmt::Debug for PendingOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingOpen").field("acks", &self.acks.len()).finish()
    }
}

impl PendingOpen {
    /// Waits for every observer; the first refusal wins.
    pub async fn settled(self) -> Result<(), ObserverError> {
        first_error(self.acks).await
    }
}

/// Waits for every acknowledgement (all of them: each observer gets its
/// record whatever another says) and keeps the first error.
async fn first_error(acks: Vec<Acknowledged>) -> Result<(), ObserverError> {
    let mut outcome = Ok(());
    for ack in acks {
        let result = ack.await;
        if outcome.is_ok() {
            outcome = result;
        }
    }
    outcome
}
