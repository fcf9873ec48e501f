//! What observers see of the plane: its counters ([`PlaneMetrics`]) and
//! the bounded ring of session state changes (SPEC TS-3, TS-14) that an
//! admin surface drains.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use dtp_terminal::StateChange;
use serde::Serialize;

/// Declares the counters once: the atomics and their plain snapshot.
macro_rules! counters {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Counters of the terminal plane (relaxed atomics, written by the
        /// control thread and the plane's workers).
        #[derive(Debug, Default)]
        pub struct PlaneMetrics {
            $($(#[doc = $doc])* pub $name: AtomicU64,)*
        }

        /// A plain copy of [`PlaneMetrics`] (serialises to JSON).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
        pub struct PlaneSnapshot {
            $($(#[doc = $doc])* pub $name: u64,)*
        }

        impl PlaneMetrics {
            /// Reads every counter.
            pub fn snapshot(&self) -> PlaneSnapshot {
                PlaneSnapshot {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

counters! {
    /// Requests taken from the shards.
    requests,
    /// Messages sent to connections (AuthResult, HeartbeatAck, …).
    sent,
    /// Connections closed for misuse.
    closed,
    /// Requests refused with a code no message carries (logged).
    refused,
    /// Decisions for connections that were gone by then (dropped).
    unroutable,
    /// Handover policies asked (SPEC HO-3).
    policy_asked,
    /// Policy answers the terminal refused (too late, HO-7, or unknown).
    policy_answers_refused,
    /// Model calls started (HO-3b).
    model_calls,
    /// Model calls not started: every worker busy (treated as unavailable).
    model_busy,
    /// Human decisions queued (HO-3c).
    human_asked,
    /// Human decisions that reached their deadline (default action).
    human_expired,
    /// Audit records written (TS-12, HO-10).
    audit_records,
    /// Audit records lost to a write failure, a log that could not be
    /// reopened, or a full queue to the audit thread.
    audit_failures,
    /// Torn last records the audit log repaired when it opened (a crash
    /// mid-append before; each also logged as a warning).
    audit_torn_repairs,
    /// Bytes those repairs moved out of the log (into `<name>.torn`).
    audit_torn_bytes,
    /// Session state changes published.
    state_changes,
    /// State changes dropped from a full ring before anyone drained them.
    state_changes_dropped,
    /// Built-in realtime events dropped: more than 65,536 waited between
    /// two drains (never while a realtime plane drains after every call).
    events_dropped,
    /// Admin commands run.
    admin_commands,
    /// OS access operations handed to the workers (SPEC TS-4).
    os_operations,
    /// OS access operations failed at once: every worker busy.
    os_busy,
}

impl PlaneMetrics {
    /// Adds one to `counter`.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The bounded ring of state changes: the control thread pushes, an
/// observer drains; when full, the oldest change is dropped and counted.
#[derive(Debug)]
pub(crate) struct StateRing {
    ring: Mutex<VecDeque<StateChange>>,
    capacity: usize,
}

impl StateRing {
    /// An empty ring of `capacity` changes (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        StateRing {
            ring: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
        }
    }

    /// Publishes one change.
    pub(crate) fn push(&self, change: StateChange, metrics: &PlaneMetrics) {
        // The lock guards plain pushes and pops: a panic under it cannot
        // leave the deque half-changed, so a poisoned lock is still sound.
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() >= self.capacity {
            ring.pop_front();
            PlaneMetrics::bump(&metrics.state_changes_dropped);
        }
        ring.push_back(change);
        PlaneMetrics::bump(&metrics.state_changes);
    }

    /// Takes every change published so far, oldest first.
    pub(crate) fn drain(&self) -> Vec<StateChange> {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.drain(..).collect()
    }
}
