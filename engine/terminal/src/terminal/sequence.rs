//! SPEC HO-4, HO-5, HO-10: the atomic handover sequence T0 … T5 after the
//! policy allowed it, its rollbacks, and the handover's notifications and
//! audit record.
//!
//! T1's revoke and T4's grant may be answered later (a deferred
//! [`crate::OsAccess`]); `os_ops` continues the sequence from each answer.
//!
//! Each step commits its OS operation before its state change (TS-4), so an
//! observer — [`crate::Terminal::state_of`] or the
//! [`crate::Output::StateChanged`] stream — sees at most one controller of
//! the resource at every step, and none between T2 and T3.

use std::collections::BTreeMap;
use std::sync::Arc;

use dtp_codec::{
    AuthOutcome, AuthResult, ControlMessage, ErrorCode, HandoverFailedNotification,
    HandoverFailedReason, SessionId, SessionState,
};

use super::create::NewSession;
use super::handover::{Evaluation, HandoverPhase, Origin};
use super::os_ops::{Purpose, Wait};
use super::{Binding, Holder, Terminal, state_changed};
use crate::audit::{AuditRecord, HandoverAudit, HandoverOutcome};
use crate::os_access::OsAccess;
use crate::output::{Output, Refusal, RequestKind};
use crate::session::SessionEvent;
use crate::time::UnixMs;

impl<A: OsAccess> Terminal<A> {
    /// SPEC HO-4: T0 … T5 for an allowed handover, with HO-5's rollbacks.
    pub(crate) fn run_sequence(&mut self, mut ev: Evaluation, now: UnixMs) {
        let resource = ev.resource_id.clone();
        let source = ev.request.source;
        // The policy may have taken seconds: re-check the target's
        // credential now (a revocation or expiry in between fails it).
        if let Some(cred) = &ev.target
            && let Err(e) = self.verifier.recheck(cred, now.secs())
        {
            let m = format!("target credential: {e}");
            self.finish_failed(ev, ErrorCode::E_HANDOVER_INVALID_TARGET, None, m, now);
            return self.advance_queue(&resource, now);
        }
        let Some(grant) = self
            .sessions
            .get(&source)
            .filter(|s| s.state == SessionState::Active)
            .map(|s| s.grant())
        else {
            // Unreachable: a source leaving `active` ends its evaluation
            // (`source_gone`); kept as a refusal rather than a panic.
            let m = "the source session is no longer active".to_owned();
            self.finish_failed(ev, ErrorCode::E_HANDOVER_INVALID_SOURCE, None, m, now);
            return self.advance_queue(&resource, now);
        };
        ev.source_conn = self.sessions.get(&source).and_then(|s| s.conn());
        // A transfer's or admin's target is reached on its Fay's latest
        // connection as of now (it may have reconnected while the policy
        // decided).
        if !matches!(ev.request.origin, Origin::Auth { .. }) {
            ev.target_conn = self
                .last_conn_of
                .get(ev.request.target_fay_id.as_str())
                .copied();
        }
        // T0: pre-emption.
        self.step(source, SessionEvent::HandoverRequested, now);
        // T1: revoke the source's OS access; the answer continues in
        // `os_ops` (T2 … on success, HO-5's rollback on failure). The
        // handover stays in `evaluations` meanwhile, so the resource keeps
        // counting as handed over (HO-6) and HO-7's deadline still runs.
        // The resource is kept for this node's T4, and for a target whose
        // grant is another gateway's (module `remote`).
        let to = matches!(ev.request.origin, Origin::Remote { .. })
            .then(|| Arc::from(ev.request.target_fay_id.as_str()));
        ev.phase = HandoverPhase::Releasing;
        self.evaluations.insert(resource.clone(), ev);
        let wait = Wait::Release {
            session: source,
            resource,
            to,
            live: true,
        };
        self.start_op(wait, grant, now);
    }

    /// SPEC HO-4 T3 … T5 after T2: the target's session, per TS-6; its
    /// grant's answer (T4) continues in `os_ops`.
    pub(crate) fn acquire(&mut self, mut ev: Evaluation, now: UnixMs) {
        let resource = ev.resource_id.clone();
        let holder = match &ev.target {
            Some(cred) => Holder::Fay(ev.request.target_fay_id.as_str().into(), cred.clone()),
            None => Holder::Human(ev.request.target_fay_id.as_str().into()),
        };
        let binding = match (&holder, ev.target_conn) {
            (Holder::Human(_), _) => Binding::Local,
            (_, Some(c)) if self.conns.contains_key(&c) => Binding::Conn(c),
            _ => Binding::Detached(now),
        };
        let spec = NewSession {
            holder,
            resource_id: resource.as_str().into(),
            mode: ev.mode,
            binding,
        };
        ev.phase = HandoverPhase::Acquiring;
        self.evaluations.insert(resource.clone(), ev);
        let purpose = Purpose::Handover {
            resource: resource.clone(),
        };
        if let Err((code, m)) = self.create_session(spec, purpose, now)
            && let Some(ev) = self.evaluations.remove(&resource)
        {
            // HO-5: the source is NOT restored; the resource stays idle.
            let m = format!("{code}: {m}");
            let code = ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE;
            let reason = Some(HandoverFailedReason::AcquireFailed);
            self.finish_failed(ev, code, reason, m, now);
        }
    }

    /// SPEC HO-10: the target hears AuthResult then SessionStateChanged
    /// (active) — seed §6.10 — and the audit log gets the record.
    pub(crate) fn succeeded(&mut self, ev: Evaluation, new: SessionId, now: UnixMs) {
        let conn = self.sessions.get(&new).and_then(|s| s.conn());
        let request_id = match &ev.request.origin {
            Origin::Auth { request, .. } => request.request_id,
            // Unsolicited: the target's runtime asked nothing; 0 marks it.
            _ => 0,
        };
        let result = ControlMessage::AuthResult(AuthResult {
            request_id,
            outcome: AuthOutcome::Granted { session_id: new },
        });
        self.send(conn, result);
        let active = state_changed(new, SessionState::Active, None);
        self.send(conn, ControlMessage::SessionStateChanged(active));
        self.audit_handover(ev, Some(new), HandoverOutcome::Succeeded, now);
    }

    /// SPEC HO-5, HO-7, HO-10: tells the parties a handover failed and
    /// records it. With a `notification` reason, the source runtime and a
    /// transfer's target get a HandoverFailedNotification (its details carry
    /// the E_* code); an AuthRequest's sender always gets its AuthResult; a
    /// transfer refused for a reason the notification cannot name
    /// (invalid target, …) is refused to its initiator.
    pub(crate) fn finish_failed(
        &mut self,
        ev: Evaluation,
        code: ErrorCode,
        notification: Option<HandoverFailedReason>,
        message: String,
        now: UnixMs,
    ) {
        // HO-10: the parties are told on their latest connections (a runtime
        // may have reconnected while the policy decided).
        let source_conn = match self.sessions.get(&ev.request.source) {
            Some(s) => s.conn(),
            None => self
                .last_conn_of
                .get(ev.source_fay.as_str())
                .copied()
                .or(ev.source_conn),
        };
        let mut ev = ev;
        if !matches!(ev.request.origin, Origin::Auth { .. })
            && let Some(conn) = self.last_conn_of.get(ev.request.target_fay_id.as_str())
        {
            ev.target_conn = Some(*conn);
        }
        if let Some(reason) = notification {
            let mut details = BTreeMap::new();
            details.insert("code".to_owned(), code.name().unwrap_or("").to_owned());
            details.insert("message".to_owned(), message.clone());
            let hfn = ControlMessage::HandoverFailedNotification(HandoverFailedNotification {
                handover_id: ev.id,
                source_session_id: ev.request.source,
                target_fay_id: ev.request.target_fay_id.clone(),
                reason,
                details,
            });
            self.send(source_conn, hfn.clone());
            if !matches!(ev.request.origin, Origin::Auth { .. }) && ev.target_conn != source_conn {
                self.send(ev.target_conn, hfn);
            }
        }
        match &ev.request.origin {
            Origin::Auth { conn, request } => {
                let msg = ControlMessage::AuthResult(AuthResult {
                    request_id: request.request_id,
                    outcome: AuthOutcome::Refused {
                        code,
                        message: message.clone(),
                    },
                });
                self.send(Some(*conn), msg);
            }
            Origin::Remote { id } => self.answer_remote(*id, code, message.clone()),
            Origin::Transfer { conn } if notification.is_none() => {
                let kind = RequestKind::SessionTransferRequest;
                let r = Refusal::new(kind, Some(ev.request.source), code, message.clone());
                self.refuse(*conn, r);
            }
            _ => {}
        }
        let outcome = HandoverOutcome::Failed {
            code,
            notification,
            message,
        };
        self.audit_handover(ev, None, outcome, now);
    }

    /// SPEC HO-1 across gateways: T2 done for another gateway's target —
    /// the resource is kept for it (its cluster reservation), and its
    /// gateway runs T3 … T5. This gateway's part succeeded.
    pub(crate) fn handed_across(&mut self, ev: Evaluation, id: uuid::Uuid, now: UnixMs) {
        let answer = crate::RemoteAnswer::Released;
        self.out.push_back(Output::AnswerRemote { id, answer });
        self.audit_handover(ev, None, HandoverOutcome::Succeeded, now);
    }

    fn audit_handover(
        &mut self,
        ev: Evaluation,
        target_session_id: Option<SessionId>,
        outcome: HandoverOutcome,
        now: UnixMs,
    ) {
        self.out
            .push_back(Output::Audit(AuditRecord::Handover(HandoverAudit {
                handover_id: ev.id,
                kind: ev.kind,
                trigger: ev.request.origin.trigger(),
                source_session_id: ev.request.source,
                source_fay_id: ev.source_fay,
                target_fay_id: ev.request.target_fay_id,
                target_session_id,
                resource_id: ev.resource_id,
                access_mode: ev.mode,
                policy: ev.policy_name,
                decisions: ev.decisions,
                outcome,
                started_at: ev.started_at,
                finished_at: now,
            })));
    }
}
