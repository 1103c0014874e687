//! The calls of this process that wrote a hold row and have not closed:
//! what lets the ledger mark a closing row as standing alone
//! ([`super::store::Row::stands_alone`]), so that the fill skips the lookup
//! of the call's earlier rows for every call that held nothing.
//!
//! A call's rows all come from the process that serves it, and a call
//! holds (awaiting the hold's acknowledgement) before it closes, so this
//! set is complete for the calls this process closes. A call that never
//! closes (the process ends first) leaves its id here until then; that
//! costs only the lookup for an id no closing row will carry.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use rustc_hash::FxHashSet;

#[derive(Debug, Default)]
pub(super) struct HeldCalls {
    ids: Mutex<FxHashSet<String>>,
    /// How many ids the set holds: a closing row reads it first, so that
    /// without budgets (no hold, ever) no call takes the lock.
    count: AtomicUsize,
}

impl HeldCalls {
    /// Notes that `call_id` wrote a hold row.
    pub(super) fn held(&self, call_id: &str) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        if ids.insert(call_id.to_owned()) {
            self.count.store(ids.len(), Ordering::Release);
        }
    }

    /// Whether `call_id`, now closing, wrote a hold row (forgotten here).
    pub(super) fn closing(&self, call_id: &str) -> bool {
        if self.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        let held = ids.remove(call_id);
        self.count.store(ids.len(), Ordering::Release);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_held_until_it_closes() {
        let calls = HeldCalls::default();
        assert!(!calls.closing("a"), "nothing held");
        calls.held("a");
        calls.held("a");
        calls.held("b");
        assert!(calls.closing("a"));
        assert!(!calls.closing("a"), "forgotten once closed");
        assert!(calls.closing("b"));
        assert_eq!(calls.count.load(Ordering::Acquire), 0);
    }
}
