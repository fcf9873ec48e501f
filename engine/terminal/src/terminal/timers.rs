//! The timers of SPEC TS-16 (credential expiry), LIV-4 (liveness), TS-12
//! (revoke retries) and HO-7 (handover deadlines): when the next one is due,
//! and running those that are.
//!
//! Session timers are filed in a min-heap ([`Terminal::timers`]) by due
//! instant, so that an input costs O(log n) however many sessions there
//! are (a full scan per input made every heartbeat O(sessions): with many
//! sessions, the control thread's whole time). An entry may be stale — the
//! session ended, or its deadline moved later (a heartbeat, a rebind) —
//! and is checked when it reaches the top: a stale one is dropped, or
//! filed again at the session's real deadline. So every change that can
//! bring a session's deadline *earlier* files it ([`Terminal::arm`]): a
//! session becoming active, a connection going down, a revoke to retry.
//! Handover deadlines are few (one per resource at most) and scanned.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use dtp_codec::{SessionId, SessionState};

use super::{Binding, Holder, SessionRecord, Terminal, liveness};
use crate::os_access::OsAccess;
use crate::session::TerminationReason;
use crate::time::UnixMs;

impl<A: OsAccess> Terminal<A> {
    /// Runs every timer due at `now`.
    pub(crate) fn run_timers(&mut self, now: UnixMs) {
        let mut due = BTreeSet::new();
        while let Some(&Reverse((at, id))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            due.insert(id);
        }
        for id in due {
            let Some(rec) = self.sessions.get(&id) else {
                continue;
            };
            match rec.state {
                SessionState::Active => {
                    if expiry(rec).is_some_and(|t| t <= now) {
                        self.terminate(id, TerminationReason::CredentialExpired, now);
                    } else if liveness::is_dead(
                        match rec.binding {
                            Binding::Detached(since) => Some(since),
                            Binding::Conn(_) | Binding::Local => None,
                        },
                        rec.last_heartbeat_at,
                        now,
                        self.config.liveness.heartbeat_timeout_ms,
                    ) {
                        self.terminate(id, TerminationReason::LivenessTimeout, now);
                    }
                }
                SessionState::Terminating if rec.revoke_retry_at.is_some_and(|t| t <= now) => {
                    self.finish_termination(id, now);
                }
                _ => {}
            }
            // Not due after all (a stale entry), or due again later.
            self.arm(id);
        }
        let late: Vec<String> = self
            .evaluations
            .iter()
            .filter(|(_, e)| e.deadline < now)
            .map(|(r, _)| r.clone())
            .collect();
        for resource in late {
            self.time_out(&resource, now);
        }
        self.expire_remote_waits(now);
    }

    /// The earliest instant a timer is due: the first session entry that
    /// is not stale (stale ones are dropped or filed again on the way), or
    /// a handover deadline.
    pub(crate) fn compute_next_timer(&mut self) -> Option<UnixMs> {
        let session = loop {
            let Some(&Reverse((at, id))) = self.timers.peek() else {
                break None;
            };
            match self.sessions.get(&id).and_then(|rec| self.deadline(rec)) {
                Some(d) if d == at => break Some(at),
                other => {
                    self.timers.pop();
                    if let Some(d) = other {
                        self.timers.push(Reverse((d, id)));
                    }
                }
            }
        };
        let handovers = self.evaluations.values().map(|e| e.deadline.plus(1)).min();
        let remote = self.next_remote_deadline();
        session.into_iter().chain(handovers).chain(remote).min()
    }

    /// Files session `id` at its next deadline, if it has one: called
    /// wherever that deadline may have come earlier (see the module docs).
    pub(crate) fn arm(&mut self, id: SessionId) {
        if let Some(d) = self.sessions.get(&id).and_then(|rec| self.deadline(rec)) {
            self.timers.push(Reverse((d, id)));
        }
    }

    /// A session's next deadline: credential expiry or liveness while
    /// active, the revoke retry while terminating.
    fn deadline(&self, rec: &SessionRecord) -> Option<UnixMs> {
        match rec.state {
            SessionState::Active => [expiry(rec), self.dead_at(rec)].into_iter().flatten().min(),
            SessionState::Terminating => rec.revoke_retry_at,
            _ => None,
        }
    }

    /// SPEC LIV-4: when a session whose connection is down is judged dead.
    fn dead_at(&self, rec: &SessionRecord) -> Option<UnixMs> {
        match rec.binding {
            Binding::Detached(since) => Some(liveness::dead_at(
                since,
                rec.last_heartbeat_at,
                self.config.liveness.heartbeat_timeout_ms,
            )),
            Binding::Conn(_) | Binding::Local => None,
        }
    }
}

/// SPEC TS-16: when a Fay session's credential expires (`now >= not_after`).
fn expiry(rec: &SessionRecord) -> Option<UnixMs> {
    match &rec.holder {
        Holder::Fay(_, cred) => Some(UnixMs(cred.validity().1.saturating_mul(1000))),
        Holder::Human(_) => None,
    }
}
