//! SPEC TS-4, HO-4, HO-7: OS operations in flight, and what each one's
//! answer continues.
//!
//! Every grant and revoke goes through [`Terminal::start_op`]. With an
//! inline [`OsAccess`] the answer is applied at once, inside the same input;
//! with a deferred one the terminal emits [`Output::OsAccess`] and the
//! answer comes back, later, through [`Terminal::os_access_done`]. Meanwhile
//! the resource is held so that HO-4 holds at every instant:
//!
//! | operation outstanding | session state | the resource meanwhile |
//! |---|---|---|
//! | TS-6 grant of a new session | `creating`, occupying | a conflicting AuthRequest gets E_RESOURCE_BUSY (TS-9) |
//! | TS-12 revoke of an ending session | `terminating`, occupying | likewise |
//! | HO-4 T1 revoke of a handover's source | `handover_pending` | other handover requests queue or get E_HANDOVER_IN_PROGRESS (HO-6) |
//! | HO-4 T4 grant of a handover's target | `creating` (the source is terminated: no controller) | likewise |
//!
//! Heartbeats, other sessions and other resources go on.
//!
//! An answer can arrive after the step it belonged to was abandoned (HO-7's
//! deadline passed): the handover has already failed and been reported,
//! and the late answer only settles the OS side — a restored source whose
//! revoke went through after all is granted again (TS-4: its rollback must
//! be whole), a target whose grant went through is revoked. At most one
//! operation is outstanding per session: a session that ends while one is
//! waits for it before its own revoke.

use std::sync::Arc;

use dtp_codec::{
    AuthOutcome, AuthRequest, AuthResult, ControlMessage, ErrorCode, HandoverFailedReason,
    SessionId, SessionState,
};

use super::Terminal;
use super::handover::{HandoverPhase, Origin};
use super::terminate::unknown_resource;
use crate::audit::{AuditRecord, ReconciliationAudit, ReconciliationEvent};
use crate::occupancy::Reconciliation;
use crate::os_access::{AccessGrant, OsAccess, OsError, OsOpId, OsOperation};
use crate::output::{ConnKey, Output, Refusal};
use crate::session::{SessionEvent, TerminationReason};
use crate::time::UnixMs;

/// Who hears how a new session's grant went.
#[derive(Clone, Debug)]
pub(crate) enum Purpose {
    /// An AuthRequest's sender (TS-6's AuthResult). `remote`: the request,
    /// kept where a resource held on another gateway may be asked of it
    /// (module `remote`).
    Auth {
        conn: ConnKey,
        request_id: u64,
        remote: Option<Box<AuthRequest>>,
    },
    /// The handover of this resource (HO-4 T4).
    Handover { resource: String },
}

/// What an outstanding operation's answer continues.
#[derive(Clone, Debug)]
pub(crate) enum Wait {
    /// SPEC TS-6: a new session's grant. `None`: abandoned by HO-7, the
    /// session is already terminating.
    Create {
        session: SessionId,
        purpose: Option<Purpose>,
    },
    /// SPEC TS-12: a terminating session's revoke.
    Terminate { session: SessionId },
    /// SPEC HO-4 T1: a handover source's revoke, the resource kept for
    /// `to` (the target holder). `live` is false once HO-7 abandoned the
    /// step and restored the source.
    Release {
        session: SessionId,
        resource: String,
        to: Option<Arc<str>>,
        live: bool,
    },
    /// SPEC TS-4: granting a restored source again, after its abandoned T1
    /// revoke went through.
    Regrant { session: SessionId },
}

impl Wait {
    fn session(&self) -> SessionId {
        match self {
            Wait::Create { session, .. }
            | Wait::Terminate { session }
            | Wait::Release { session, .. }
            | Wait::Regrant { session } => *session,
        }
    }

    /// Whether no live handover waits for it any more.
    fn abandoned(&self) -> bool {
        matches!(
            self,
            Wait::Create { purpose: None, .. }
                | Wait::Release { live: false, .. }
                | Wait::Regrant { .. }
        )
    }
}

/// One outstanding operation.
#[derive(Clone, Debug)]
pub(crate) struct PendingOp {
    pub(crate) wait: Wait,
    pub(crate) grant: AccessGrant,
}

/// Why [`Terminal::os_access_done`] refused an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no OS operation with that id is outstanding")]
pub struct UnknownOsOp;

impl<A: OsAccess> Terminal<A> {
    /// SPEC TS-4: the answer to a deferred [`Output::OsAccess`]. Each id is
    /// answered once; a second answer, or one for an id never issued, is
    /// refused and changes nothing. Timers due at `now` run first, so an
    /// answer after a handover's HO-7 deadline finds the step abandoned.
    pub fn os_access_done(
        &mut self,
        op: OsOpId,
        result: Result<(), OsError>,
        now: UnixMs,
    ) -> Result<(), UnknownOsOp> {
        self.os_access_fenced(op, result.map(|()| None), now)
    }

    /// As [`Terminal::os_access_done`], with a successful grant's fencing
    /// token (the worker's [`OsAccess::fencing`] after it).
    pub fn os_access_fenced(
        &mut self,
        op: OsOpId,
        result: Result<Option<u64>, OsError>,
        now: UnixMs,
    ) -> Result<(), UnknownOsOp> {
        self.begin(now);
        let found = self.ops.remove(&op);
        if let Some(p) = &found {
            self.complete(p.wait.clone(), p.grant.clone(), result, now);
        }
        self.end();
        found.map(|_| ()).ok_or(UnknownOsOp)
    }

    /// SPEC TS-4: the OS operations outstanding, oldest first.
    pub fn pending_os_ops(&self) -> Vec<(OsOpId, OsOperation, AccessGrant)> {
        self.ops
            .iter()
            .map(|(id, p)| (*id, operation_of(&p.wait), p.grant.clone()))
            .collect()
    }

    /// Starts `wait`'s operation on `grant`: answered at once by an inline
    /// access, or asked of the driver.
    pub(crate) fn start_op(&mut self, wait: Wait, grant: AccessGrant, now: UnixMs) {
        let operation = operation_of(&wait);
        let to = match &wait {
            Wait::Release { to, .. } => to.clone(),
            _ => None,
        };
        if !self.access.deferred() {
            let result = operation.run(&mut self.access, &grant, to.as_deref());
            let result = result.map(|()| self.access.fencing());
            return self.complete(wait, grant, result, now);
        }
        let op = OsOpId(self.next_op);
        self.next_op += 1;
        self.out.push_back(Output::OsAccess {
            op,
            operation,
            grant: grant.clone(),
            to,
        });
        self.ops.insert(op, PendingOp { wait, grant });
    }

    /// Whether `session` has an operation outstanding.
    pub(crate) fn op_outstanding(&self, session: SessionId) -> bool {
        self.ops.values().any(|p| p.wait.session() == session)
    }

    /// SPEC HO-6: whether an abandoned operation still holds `resource`
    /// (handovers of it wait until its answer).
    pub(crate) fn abandoned_op_on(&self, resource: &str) -> bool {
        self.ops
            .values()
            .any(|p| *p.grant.resource_id == *resource && p.wait.abandoned())
    }

    /// SPEC HO-7: the deadline passed with `resource`'s handover in an OS
    /// step. T1 outstanding: the source is restored (T0–T2); T4
    /// outstanding: the target's creation is abandoned and the source, gone
    /// at T2, is not restored (HO-5). Either way the handover fails with
    /// E_HANDOVER_TIMEOUT now; the late answer settles the OS side.
    pub(crate) fn abort_os_step(&mut self, resource: &str, now: UnixMs) {
        let Some(ev) = self.evaluations.remove(resource) else {
            return;
        };
        let phase = ev.phase;
        let mut abandoned = Vec::new();
        for p in self.ops.values_mut() {
            match &mut p.wait {
                Wait::Release {
                    resource: r, live, ..
                } if r == resource && *live => *live = false,
                Wait::Create {
                    session,
                    purpose: purpose @ Some(Purpose::Handover { .. }),
                } if *p.grant.resource_id == *resource => {
                    *purpose = None;
                    abandoned.push(*session);
                }
                _ => {}
            }
        }
        let step = match phase {
            // A shared occupancy: the revoke may still free the resource
            // for another gateway; the source waits for its answer.
            HandoverPhase::Releasing if self.access.shared() => {
                "T1 (the source's revoke): the source is restored once the revoke answers"
            }
            HandoverPhase::Releasing => {
                self.step(ev.request.source, SessionEvent::HandoverRolledBack, now);
                "T1 (the source's revoke): the source is restored"
            }
            HandoverPhase::Acquiring | HandoverPhase::Deciding => {
                for id in abandoned {
                    self.step(id, SessionEvent::InitFailed, now);
                }
                "T4 (the target's grant): the resource is left idle"
            }
        };
        let m = format!(
            "the OS step was still running at the deadline {} (SPEC HO-7), in {step}",
            ev.deadline.0
        );
        let reason = Some(HandoverFailedReason::Timeout);
        self.finish_failed(ev, ErrorCode::E_HANDOVER_TIMEOUT, reason, m, now);
    }

    /// Applies one answer (a grant's with its fencing token, if any).
    fn complete(
        &mut self,
        wait: Wait,
        grant: AccessGrant,
        result: Result<Option<u64>, OsError>,
        now: UnixMs,
    ) {
        let resource = grant.resource_id.clone();
        let fencing = result.as_ref().ok().copied().flatten();
        let result = result.map(|_| ());
        if let (Some(token), Wait::Create { session, .. } | Wait::Regrant { session }) =
            (fencing, &wait)
            && let Some(rec) = self.sessions.get_mut(session)
        {
            rec.fencing = Some(token);
        }
        match wait {
            Wait::Create { session, purpose } => self.created(session, purpose, result, now),
            Wait::Terminate { session } => self.revoked(session, &grant, result, now),
            Wait::Release {
                resource: r,
                live: true,
                ..
            } => self.released(&r, &grant, result, now),
            Wait::Release { session, .. } => self.late_release(session, grant, result, now),
            Wait::Regrant { session } => self.regranted(session, &grant, result, now),
        }
        self.advance_queue(&resource, now);
    }

    /// SPEC TS-6, TS-7: a new session's grant answered.
    fn created(
        &mut self,
        id: SessionId,
        purpose: Option<Purpose>,
        result: Result<(), OsError>,
        now: UnixMs,
    ) {
        let Some(purpose) = purpose else {
            // Abandoned (HO-7): the session is terminating already.
            return self.settle_ending(id, OsOperation::Grant, &result, now);
        };
        match result {
            Ok(()) => {
                self.step(id, SessionEvent::Initialised, now);
                if let Some(rec) = self.sessions.get_mut(&id) {
                    rec.created_at = now;
                    rec.last_heartbeat_at = now;
                    rec.announced = true;
                }
                match purpose {
                    Purpose::Auth {
                        conn, request_id, ..
                    } => {
                        let outcome = AuthOutcome::Granted { session_id: id };
                        self.auth_result(conn, request_id, outcome);
                    }
                    Purpose::Handover { resource } => {
                        if let Some(ev) = self.evaluations.remove(&resource) {
                            self.succeeded(ev, id, now);
                        }
                    }
                }
            }
            Err(e) => {
                self.step(id, SessionEvent::InitFailed, now);
                self.settle_ending(id, OsOperation::Grant, &Err(e.clone()), now);
                let code = match e {
                    OsError::Busy(_) => ErrorCode::E_RESOURCE_BUSY,
                    _ => ErrorCode::E_OS_INTEGRATION_FAILED,
                };
                match purpose {
                    // Held on another gateway: ask it for a handover.
                    Purpose::Auth {
                        conn,
                        remote: Some(req),
                        ..
                    } if matches!(e, OsError::Busy(_)) => self.ask_remote(conn, *req, now),
                    Purpose::Auth {
                        conn, request_id, ..
                    } => {
                        let message = e.to_string();
                        self.auth_result(conn, request_id, AuthOutcome::Refused { code, message });
                    }
                    Purpose::Handover { resource } => {
                        if let Some(ev) = self.evaluations.remove(&resource) {
                            // HO-5: the source is NOT restored; the resource
                            // stays idle.
                            let m = format!("{code}: {e}");
                            let code = ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE;
                            let reason = Some(HandoverFailedReason::AcquireFailed);
                            self.finish_failed(ev, code, reason, m, now);
                        }
                    }
                }
            }
        }
    }

    /// SPEC HO-4 T1 answered, the handover still live: on success T2 and
    /// on to T3; on failure the source is restored (HO-5).
    fn released(
        &mut self,
        resource: &str,
        grant: &AccessGrant,
        result: Result<(), OsError>,
        now: UnixMs,
    ) {
        let Some(ev) = self.evaluations.remove(resource) else {
            return;
        };
        let source = ev.request.source;
        match result {
            Ok(()) => {
                self.step(source, SessionEvent::HandoverSucceeded, now);
                self.cleared_by_revoke(grant, now);
                // T2: the source leaves the occupancy and reaches
                // terminated; the resource has no active session.
                self.release_records(source, now);
                match ev.request.origin {
                    Origin::Remote { id } => self.handed_across(ev, id, now),
                    _ => self.acquire(ev, now),
                }
            }
            Err(e) => {
                self.step(source, SessionEvent::HandoverRolledBack, now);
                if e.is_indeterminate() {
                    self.mark(grant, OsOperation::Revoke, &e, now);
                }
                let code = ErrorCode::E_HANDOVER_FAILED_AT_RELEASE;
                let reason = Some(HandoverFailedReason::ReleaseFailed);
                self.finish_failed(ev, code, reason, e.to_string(), now);
            }
        }
    }

    /// An abandoned T1 revoke answered: the source was restored at the
    /// deadline; make the OS agree (TS-4). With a shared occupancy the
    /// source still waits, `handover_pending`: restored now if the revoke
    /// failed, after a new grant if it went through.
    fn late_release(
        &mut self,
        id: SessionId,
        grant: AccessGrant,
        result: Result<(), OsError>,
        now: UnixMs,
    ) {
        match self.sessions.get(&id).map(|s| s.state) {
            Some(SessionState::Terminating) => {
                self.settle_ending(id, OsOperation::Revoke, &result, now)
            }
            Some(SessionState::HandoverPending) => match result {
                Ok(()) => self.start_op(Wait::Regrant { session: id }, grant, now),
                // Its access never left; restored unless the node was
                // fenced meanwhile.
                Err(OsError::Failed(_) | OsError::Busy(_)) if self.access.may_hold() => {
                    self.step(id, SessionEvent::HandoverRolledBack, now);
                }
                Err(OsError::Failed(_) | OsError::Busy(_)) => self.not_restored(id, now),
                Err(e) => {
                    self.mark(&grant, OsOperation::Revoke, &e, now);
                    self.not_restored(id, now);
                }
            },
            Some(_) => match result {
                // Its access is gone while it is active again: grant it back.
                Ok(()) => self.start_op(Wait::Regrant { session: id }, grant, now),
                Err(OsError::Failed(_) | OsError::Busy(_)) => {}
                Err(e) => self.mark(&grant, OsOperation::Revoke, &e, now),
            },
            None => {}
        }
    }

    /// The restored source's access granted back (or not). A source
    /// waiting on a shared occupancy is restored only now.
    fn regranted(
        &mut self,
        id: SessionId,
        grant: &AccessGrant,
        result: Result<(), OsError>,
        now: UnixMs,
    ) {
        match self.sessions.get(&id).map(|s| s.state) {
            Some(SessionState::Terminating) => {
                self.settle_ending(id, OsOperation::Grant, &result, now)
            }
            Some(SessionState::HandoverPending) => match result {
                Ok(()) => {
                    self.step(id, SessionEvent::HandoverRolledBack, now);
                }
                // Another gateway admitted a controller meanwhile.
                Err(OsError::Failed(_) | OsError::Busy(_)) => {
                    if self.step(id, SessionEvent::HandoverTimedOut, now) {
                        self.release_records(id, now);
                    }
                }
                Err(e) => {
                    self.mark(grant, OsOperation::Grant, &e, now);
                    self.not_restored(id, now);
                }
            },
            Some(_) => match result {
                Ok(()) => {}
                // It cannot reach its resource any more: it ends, as when
                // the OS reports a loss (TS-10); nothing is left to revoke.
                Err(OsError::Failed(_) | OsError::Busy(_)) => {
                    if self.step(
                        id,
                        SessionEvent::Terminate(TerminationReason::ResourceUnavailable),
                        now,
                    ) {
                        self.release_records(id, now);
                    }
                }
                Err(e) => self.mark(grant, OsOperation::Grant, &e, now),
            },
            None => {}
        }
    }

    /// SPEC TS-1, HO-7: a source that cannot be restored after a timed-out
    /// handover ends (handover_pending → terminating, "handover cancelled
    /// by timeout"), and its grant is revoked — the outcome of its last
    /// step is unknown.
    fn not_restored(&mut self, id: SessionId, now: UnixMs) {
        if self.step(id, SessionEvent::HandoverTimedOut, now) {
            self.finish_termination(id, now);
        }
    }

    /// SPEC TS-12: a terminating session's revoke answered. On failure the
    /// session keeps its occupancy and the revoke is retried.
    fn revoked(
        &mut self,
        id: SessionId,
        grant: &AccessGrant,
        result: Result<(), OsError>,
        now: UnixMs,
    ) {
        match result {
            Ok(()) => {
                if let Some(rec) = self.sessions.get_mut(&id) {
                    rec.revoke_retry_at = None;
                }
                self.cleared_by_revoke(grant, now);
                self.release_records(id, now);
            }
            Err(e) => {
                if e.is_indeterminate() {
                    self.mark(grant, OsOperation::Revoke, &e, now);
                }
                let retry = now.plus(self.config.revoke_retry_ms);
                if let Some(rec) = self.sessions.get_mut(&id) {
                    rec.revoke_retry_at = Some(retry);
                }
                self.arm(id);
            }
        }
    }

    /// A terminating session's operation answered: release it if it holds
    /// nothing, else revoke (an unknown outcome also marks the resource).
    fn settle_ending(
        &mut self,
        id: SessionId,
        op: OsOperation,
        result: &Result<(), OsError>,
        now: UnixMs,
    ) {
        let holds = match (op, result) {
            (OsOperation::Grant, Ok(()))
            | (
                OsOperation::Revoke | OsOperation::Release,
                Err(OsError::Failed(_) | OsError::Busy(_)),
            ) => true,
            (OsOperation::Grant, Err(OsError::Failed(_) | OsError::Busy(_)))
            | (OsOperation::Revoke | OsOperation::Release, Ok(())) => false,
            (_, Err(e)) => {
                if let Some(grant) = self.sessions.get(&id).map(|s| s.grant()) {
                    self.mark(&grant, op, e, now);
                }
                true
            }
        };
        if holds {
            self.finish_termination(id, now);
        } else {
            if op != OsOperation::Grant
                && let Some(grant) = self.sessions.get(&id).map(|s| s.grant())
            {
                self.cleared_by_revoke(&grant, now);
            }
            self.release_records(id, now);
        }
    }

    pub(crate) fn auth_result(&mut self, conn: ConnKey, request_id: u64, outcome: AuthOutcome) {
        let msg = ControlMessage::AuthResult(AuthResult {
            request_id,
            outcome,
        });
        self.send(Some(conn), msg);
    }

    /// SPEC TS-4: an operation's outcome is unknown — the resource takes no
    /// new grant until a successful revoke of `grant` or an operator clears
    /// it.
    fn mark(&mut self, grant: &AccessGrant, operation: OsOperation, e: &OsError, now: UnixMs) {
        let Some(r) = self.resources.get_mut(&*grant.resource_id) else {
            return;
        };
        let entry = Reconciliation {
            session_id: grant.session_id,
            holder: grant.holder.to_string(),
            operation,
            message: e.to_string(),
            since: now,
        };
        r.mark_for_reconciliation(entry.clone());
        let message = entry.message.clone();
        let event = ReconciliationEvent::Marked;
        self.audit_reconciliation(&grant.resource_id, entry, event, message, now);
    }

    /// SPEC TS-4: a revoke of `grant` succeeded: whatever it left unknown
    /// is known now.
    fn cleared_by_revoke(&mut self, grant: &AccessGrant, now: UnixMs) {
        let Some(r) = self.resources.get_mut(&*grant.resource_id) else {
            return;
        };
        if let Some(entry) = r.clear_reconciliation(&grant.session_id) {
            let event = ReconciliationEvent::ClearedByRevoke;
            let m = "a revoke of the same grant succeeded".to_owned();
            self.audit_reconciliation(&grant.resource_id, entry, event, m, now);
        }
    }

    /// SPEC TS-4: an operator checked `resource_id`'s OS state by hand and
    /// clears its reconciliation marks (each one audited); returns how
    /// many there were. New grants are admitted again.
    pub fn clear_reconciliation(
        &mut self,
        resource_id: &str,
        now: UnixMs,
    ) -> Result<usize, Refusal> {
        self.begin(now);
        let Some(r) = self.resources.get_mut(resource_id) else {
            self.end();
            return Err(unknown_resource(resource_id));
        };
        let cleared = r.clear_all_reconciliation();
        let n = cleared.len();
        for entry in cleared {
            let event = ReconciliationEvent::ClearedByOperator;
            let m = "an operator cleared it".to_owned();
            self.audit_reconciliation(resource_id, entry, event, m, now);
        }
        self.end();
        Ok(n)
    }

    fn audit_reconciliation(
        &mut self,
        resource_id: &str,
        entry: Reconciliation,
        event: ReconciliationEvent,
        message: String,
        at: UnixMs,
    ) {
        let record = ReconciliationAudit {
            resource_id: resource_id.to_owned(),
            session_id: entry.session_id,
            holder: entry.holder,
            operation: entry.operation,
            event,
            message,
            at,
        };
        self.out
            .push_back(Output::Audit(AuditRecord::Reconciliation(record)));
    }
}

fn operation_of(wait: &Wait) -> OsOperation {
    match wait {
        Wait::Create { .. } | Wait::Regrant { .. } => OsOperation::Grant,
        Wait::Terminate { .. } => OsOperation::Revoke,
        Wait::Release { .. } => OsOperation::Release,
    }
}
