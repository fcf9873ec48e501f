//! SPEC TS-10 … TS-14, TS-16: ending sessions, for each of TS-11's reasons.

use dtp_codec::{ControlMessage, ErrorCode, SessionId, SessionState};
use uuid::Uuid;

use super::os_ops::Wait;
use super::{Holder, Terminal, Tombstone, state_changed};
use crate::os_access::OsAccess;
use crate::output::{ConnKey, Refusal, RequestKind};
use crate::session::{SessionEvent, TerminationReason};
use crate::time::UnixMs;

impl<A: OsAccess> Terminal<A> {
    /// SPEC TS-12: ends an active session for `reason` (a no-op in any other
    /// state). Steps: active → terminating (runtime told), OS revoke,
    /// occupancy removed, runtime told terminated, → terminated, audit.
    ///
    /// The reason stands even when the OS revoke fails: the session then
    /// stays terminating, keeps its occupancy (its holder may still reach the
    /// resource) and the revoke is retried every `revoke_retry_ms` — a
    /// terminated session always has its OS access withdrawn (TS-4).
    pub(crate) fn terminate(&mut self, id: SessionId, reason: TerminationReason, now: UnixMs) {
        if self.sessions.get(&id).map(|r| r.state) != Some(SessionState::Active) {
            return;
        }
        if !self.step(id, SessionEvent::Terminate(reason), now) {
            return;
        }
        self.finish_termination(id, now);
        self.source_gone(id, now);
    }

    /// SPEC TS-12 steps 2–6 for a terminating session: its revoke, whose
    /// answer continues in `os_ops` (release; or, on failure, a retry every
    /// `revoke_retry_ms`). A session with an operation outstanding waits
    /// for that answer first (one operation per session at a time).
    pub(crate) fn finish_termination(&mut self, id: SessionId, now: UnixMs) {
        if self.op_outstanding(id) {
            return;
        }
        let Some(rec) = self.sessions.get_mut(&id) else {
            return;
        };
        rec.revoke_retry_at = None;
        let grant = rec.grant();
        self.start_op(Wait::Terminate { session: id }, grant, now);
    }

    /// SPEC LIV-5: remembers an ended session (bounded, oldest forgotten).
    pub(crate) fn remember(
        &mut self,
        id: SessionId,
        fay_id: std::sync::Arc<str>,
        reason: TerminationReason,
    ) {
        self.tombstones.insert(
            id,
            Tombstone {
                fay_id,
                reason,
                notified: false,
            },
        );
        self.tomb_order.push_back(id);
        while self.tomb_order.len() > self.config.tombstones {
            if let Some(old) = self.tomb_order.pop_front() {
                self.tombstones.remove(&old);
            }
        }
    }

    /// SPEC TS-13: SessionRelease, idempotent. Active → ended with
    /// `client_release`; already terminating or terminated → success (the
    /// current state is sent back); unknown → E_SESSION_NOT_FOUND. Only a
    /// connection that speaks for the session's Fay may release it.
    pub(crate) fn on_release(&mut self, conn: ConnKey, id: SessionId, now: UnixMs) {
        let refuse = |code, m: &str| Refusal::new(RequestKind::SessionRelease, Some(id), code, m);
        if let Some(rec) = self.sessions.get(&id) {
            if !self.may_act(conn, rec.holder.id(), rec.conn()) {
                let r = refuse(ErrorCode::E_UNAUTHORIZED, "not this connection's session");
                return self.refuse(conn, r);
            }
            if rec.state == SessionState::Active {
                self.rebind(id, conn);
                return self.terminate(id, TerminationReason::ClientRelease, now);
            }
            let msg = state_changed(id, rec.state, rec.reason);
            return self.send(Some(conn), ControlMessage::SessionStateChanged(msg));
        }
        if let Some(t) = self.tombstones.get(&id) {
            if !self.speaks_for(conn, &t.fay_id) {
                let r = refuse(ErrorCode::E_UNAUTHORIZED, "not this connection's session");
                return self.refuse(conn, r);
            }
            let msg = state_changed(id, SessionState::Terminated, Some(t.reason));
            return self.send(Some(conn), ControlMessage::SessionStateChanged(msg));
        }
        let r = refuse(
            ErrorCode::E_SESSION_NOT_FOUND,
            "no such session (SPEC TS-13)",
        );
        self.refuse(conn, r);
    }

    /// Whether `conn` may act for a session held by `holder` and bound to
    /// `bound`.
    pub(crate) fn may_act(&self, conn: ConnKey, holder: &str, bound: Option<ConnKey>) -> bool {
        bound == Some(conn) || self.speaks_for(conn, holder)
    }

    /// Binds a session to the connection its runtime spoke on last.
    pub(crate) fn rebind(&mut self, id: SessionId, conn: ConnKey) {
        if let Some(rec) = self.sessions.get_mut(&id) {
            rec.binding = super::Binding::Conn(conn);
        }
    }

    /// SPEC TS-16: a revocation reached the terminal. The descriptor id joins
    /// the verifier's list (later AuthRequests fail) and every session
    /// granted on that credential ends at once with `credential_revoked`.
    /// Returns how many ended; an error if the list is full (the sessions
    /// still end).
    pub fn revoke(&mut self, descriptor_id: Uuid, now: UnixMs) -> Result<usize, Refusal> {
        self.begin(now);
        let listed = self.verifier.revoke(descriptor_id);
        let holders: Vec<SessionId> = self
            .sessions
            .values()
            .filter(
                |s| matches!(&s.holder, Holder::Fay(_, c) if c.descriptor_id() == descriptor_id),
            )
            .map(|s| s.id)
            .collect();
        let victims = self.only_active(holders);
        for id in &victims {
            self.terminate(*id, TerminationReason::CredentialRevoked, now);
        }
        self.end();
        listed.map(|_| victims.len()).map_err(|e| {
            Refusal::new(
                RequestKind::Admin,
                None,
                ErrorCode::LIMIT_EXCEEDED,
                e.to_string(),
            )
        })
    }

    /// SPEC TS-10: the resource became unavailable (every bound session
    /// ends at once with `resource_unavailable`, queued requests are
    /// refused) or available again (nothing is restored). Returns how many
    /// sessions ended.
    pub fn set_resource_available(
        &mut self,
        resource_id: &str,
        available: bool,
        now: UnixMs,
    ) -> Result<usize, Refusal> {
        self.begin(now);
        let Some(resource) = self.resources.get_mut(resource_id) else {
            self.end();
            return Err(unknown_resource(resource_id));
        };
        resource.set_available(available);
        let victims: Vec<SessionId> = if available {
            Vec::new()
        } else {
            let bound: Vec<SessionId> = resource.occupants().keys().copied().collect();
            self.only_active(bound)
        };
        for id in &victims {
            self.terminate(*id, TerminationReason::ResourceUnavailable, now);
        }
        self.end();
        Ok(victims.len())
    }

    /// SPEC HO-4 across gateways: this node may no longer hold grants
    /// ([`crate::OsAccess::may_hold`] is false: its cluster lease may have
    /// expired, so another gateway may take its resources). Every active
    /// session ends at once with `resource_unavailable`, its OS access
    /// revoked. Returns how many ended.
    pub fn fence(&mut self, now: UnixMs) -> usize {
        self.begin(now);
        let active: Vec<SessionId> = self.sessions.keys().copied().collect();
        let victims = self.only_active(active);
        for id in &victims {
            self.terminate(*id, TerminationReason::ResourceUnavailable, now);
        }
        self.end();
        victims.len()
    }

    /// The active ones among `ids` (terminating sessions are already ending).
    fn only_active(&self, ids: Vec<SessionId>) -> Vec<SessionId> {
        ids.into_iter()
            .filter(|id| self.sessions.get(id).map(|s| s.state) == Some(SessionState::Active))
            .collect()
    }

    /// An administrator ends a session (`forced`). Idempotent for a session
    /// already terminating; E_SESSION_TERMINATED for an ended one,
    /// E_SESSION_NOT_FOUND for an unknown one.
    pub fn force_terminate(&mut self, id: SessionId, now: UnixMs) -> Result<(), Refusal> {
        self.begin(now);
        let refuse = |code, m: &str| Err(Refusal::new(RequestKind::Admin, Some(id), code, m));
        let result = if self.sessions.contains_key(&id) {
            self.terminate(id, TerminationReason::Forced, now);
            Ok(())
        } else if self.tombstones.contains_key(&id) {
            refuse(ErrorCode::E_SESSION_TERMINATED, "the session has ended")
        } else {
            refuse(ErrorCode::E_SESSION_NOT_FOUND, "no such session")
        };
        self.end();
        result
    }
}

/// An admin call named a resource the terminal does not have.
pub(crate) fn unknown_resource(resource_id: &str) -> Refusal {
    Refusal::new(
        RequestKind::Admin,
        None,
        ErrorCode::E_RESOURCE_UNKNOWN,
        format!("this terminal has no resource {resource_id:?}"),
    )
}
