//! The timers of SPEC TS-16 (credential expiry), LIV-4 (liveness), TS-12
//! (revoke retries) and HO-7 (handover deadlines): when the next one is due,
//! and running those that are.

use dtp_codec::{SessionId, SessionState};

use super::{Binding, Holder, SessionRecord, Terminal, liveness};
use crate::os_access::OsAccess;
use crate::session::TerminationReason;
use crate::time::UnixMs;

impl<A: OsAccess> Terminal<A> {
    /// Runs every timer due at `now`.
    pub(crate) fn run_timers(&mut self, now: UnixMs) {
        let ids: Vec<SessionId> = self.sessions.keys().copied().collect();
        for id in ids {
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
    }

    /// The earliest instant a timer is due.
    pub(crate) fn compute_next_timer(&self) -> Option<UnixMs> {
        let sessions = self.sessions.values().flat_map(|rec| match rec.state {
            SessionState::Active => [expiry(rec), self.dead_at(rec)],
            SessionState::Terminating => [rec.revoke_retry_at, None],
            _ => [None, None],
        });
        let handovers = self.evaluations.values().map(|e| Some(e.deadline.plus(1)));
        sessions.chain(handovers).flatten().min()
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
