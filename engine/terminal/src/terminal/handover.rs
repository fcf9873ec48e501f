//! SPEC HO-1, HO-6, HO-8: handover requests — their triggers, retry limits
//! and serialisation. Evaluation (HO-2) is in `evaluate.rs`, the policy's
//! answer and the queue in `decide.rs`, the atomic sequence that follows an
//! `allow` (HO-4, HO-5) in `sequence.rs`.
//!
//! Order (seed §6.3, §6.10): validation (steps 1–2) and the policy (step 3)
//! run while the source is still `active`; pre-emption (step 4, T0) follows
//! the policy's `allow`. While a policy decides, the resource counts as
//! having a handover in progress: further handover requests for it queue or
//! are refused (HO-6). The hard timeout (HO-7) runs from the start of the
//! evaluation and covers T0 … T5: it can expire while the policy decides
//! (nothing to restore) or while an OS step is outstanding (`os_ops`:
//! HO-5's rollback for that step).

use bytes::Bytes;
use dtp_codec::{
    AccessMode, AuthRequest, ErrorCode, SessionId, SessionState, SessionTransferRequest, Terms,
};
use dtp_crypto::cred::VerifiedCredential;
use uuid::Uuid;

use super::Terminal;
use crate::audit::PolicyDecision;
use crate::config::ConcurrentHandovers;
use crate::os_access::OsAccess;
use crate::output::{ConnKey, Refusal, RequestKind};
use crate::policy::{HandoverContext, HandoverKind, HandoverTrigger, PolicyRef};
use crate::time::UnixMs;

/// SPEC HO-1: who asked, and where the answer goes.
#[derive(Clone, Debug)]
pub(crate) enum Origin {
    /// Another Fay's AuthRequest (answered with an AuthResult).
    Auth { conn: ConnKey, request: AuthRequest },
    /// The holder's SessionTransferRequest on `conn`.
    Transfer { conn: ConnKey },
    /// An administrator or the human user ([`Terminal::admin_handover`]).
    Admin,
    /// Another gateway's target's AuthRequest (answered through
    /// [`crate::Output::AnswerRemote`]; module `remote`).
    Remote { id: Uuid },
}

impl Origin {
    pub(crate) fn trigger(&self) -> HandoverTrigger {
        match self {
            Origin::Auth { .. } | Origin::Remote { .. } => HandoverTrigger::AuthRequest,
            Origin::Transfer { .. } => HandoverTrigger::TransferRequest,
            Origin::Admin => HandoverTrigger::Admin,
        }
    }

    pub(crate) fn request_kind(&self) -> RequestKind {
        match self {
            Origin::Auth { .. } | Origin::Remote { .. } => RequestKind::AuthRequest,
            Origin::Transfer { .. } => RequestKind::SessionTransferRequest,
            Origin::Admin => RequestKind::Admin,
        }
    }
}

/// SPEC HO-1: one handover request, as queued (HO-6).
#[derive(Clone, Debug)]
pub(crate) struct HandoverRequest {
    pub(crate) origin: Origin,
    pub(crate) source: SessionId,
    pub(crate) target_fay_id: String,
    pub(crate) target_credential: Bytes,
    pub(crate) reason: String,
    pub(crate) metadata: Terms,
}

/// SPEC HO-4: where a handover in progress is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoverPhase {
    /// Its policy decides (HO-2 (3)); the source is still active.
    Deciding,
    /// T1: the source's OS revoke is outstanding (source handover_pending).
    Releasing,
    /// T4: the target's OS grant is outstanding (source terminated, target
    /// creating).
    Acquiring,
}

/// A handover in progress (at most one per resource, HO-6): its policy
/// deciding, or its OS steps running.
#[derive(Clone, Debug)]
pub(crate) struct Evaluation {
    pub(crate) phase: HandoverPhase,
    pub(crate) id: Uuid,
    pub(crate) request: HandoverRequest,
    pub(crate) kind: HandoverKind,
    pub(crate) resource_id: String,
    pub(crate) mode: AccessMode,
    pub(crate) source_fay: String,
    pub(crate) source_conn: Option<ConnKey>,
    /// The target's verified credential; `None` for the human user (HO-9).
    pub(crate) target: Option<VerifiedCredential>,
    pub(crate) target_conn: Option<ConnKey>,
    pub(crate) policy_name: String,
    pub(crate) policy: PolicyRef,
    pub(crate) context: Box<HandoverContext>,
    pub(crate) deadline: UnixMs,
    pub(crate) started_at: UnixMs,
    pub(crate) decisions: Vec<PolicyDecision>,
}

/// SPEC HO-1: an administrator's (or the human user's) handover request.
/// For the human user as target, use `human:<terminal_id>` and an empty
/// credential (HO-9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminHandover {
    /// The session holding control.
    pub source_session_id: SessionId,
    /// Who takes over.
    pub target_fay_id: String,
    /// The target's credential (ignored for the human user).
    pub target_credential: Bytes,
    /// Why.
    pub reason: String,
    /// Metadata shown to the policy.
    pub metadata: Terms,
}

/// SPEC HO-6: what happened to an accepted handover request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverAdmission {
    /// Being evaluated: the policy was asked.
    Evaluating(Uuid),
    /// Waiting behind another handover of the resource (1 = next).
    Queued {
        /// The place in the FIFO queue.
        position: usize,
    },
}

/// Why [`Terminal::policy_decided`] refused an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyAnswerError {
    /// No handover with that id awaits a decision (never was, or ended).
    #[error("no handover with that id awaits a decision")]
    UnknownHandover,
    /// SPEC HO-7: the answer came after the hard deadline; the handover
    /// failed with `timeout`.
    #[error("the decision came after the handover's hard deadline (SPEC HO-7)")]
    TooLate,
}

impl<A: OsAccess> Terminal<A> {
    /// SPEC HO-1: the holder's SessionTransferRequest.
    pub(crate) fn on_transfer(&mut self, conn: ConnKey, t: SessionTransferRequest, now: UnixMs) {
        let id = t.source_session_id;
        if let Some(rec) = self.sessions.get(&id) {
            if !self.may_act(conn, rec.holder.id(), rec.conn()) {
                let r = Refusal::new(
                    RequestKind::SessionTransferRequest,
                    Some(id),
                    ErrorCode::E_HANDOVER_INVALID_SOURCE,
                    "this connection may not hand this session over (SPEC HO-2 (1))",
                );
                return self.refuse(conn, r);
            }
            if rec.state == SessionState::Active {
                self.rebind(id, conn);
            }
        }
        let req = HandoverRequest {
            origin: Origin::Transfer { conn },
            source: id,
            target_fay_id: t.target_fay_id,
            target_credential: t.target_credential,
            reason: t.handover_reason,
            metadata: t.handover_metadata,
        };
        if let Err(r) = self.request_handover(req, now, false) {
            self.refuse(conn, r);
        }
    }

    /// SPEC HO-1: an administrator's or the human user's handover request
    /// (the initiator is trusted: HO-2 (1) allows admins).
    pub fn admin_handover(
        &mut self,
        req: AdminHandover,
        now: UnixMs,
    ) -> Result<HandoverAdmission, Refusal> {
        self.begin(now);
        let request = HandoverRequest {
            origin: Origin::Admin,
            source: req.source_session_id,
            target_fay_id: req.target_fay_id,
            target_credential: req.target_credential,
            reason: req.reason,
            metadata: req.metadata,
        };
        let result = self.request_handover(request, now, false);
        self.end();
        result
    }

    /// SPEC HO-6, HO-8: admits a request — refused when its (source,
    /// target) pair is over the retry limit, queued or refused while another
    /// handover of the resource runs, else evaluated. `queued`: it comes
    /// back from the queue (already admitted).
    pub(crate) fn request_handover(
        &mut self,
        req: HandoverRequest,
        now: UnixMs,
        queued: bool,
    ) -> Result<HandoverAdmission, Refusal> {
        let refuse =
            |code, m: String| Refusal::new(req.origin.request_kind(), Some(req.source), code, m);
        let Some(src) = self.sessions.get(&req.source) else {
            return Err(self.missing_source(&req));
        };
        let resource_id = src.resource_id.to_string();
        if !queued {
            let key = (req.source, super::target_key(&req.target_fay_id));
            let h = self.config.handover;
            let targets = self
                .attempts
                .range((req.source, 0)..=(req.source, u64::MAX))
                .count();
            if targets >= super::MAX_TARGETS_PER_SOURCE && !self.attempts.contains_key(&key) {
                return Err(refuse(
                    ErrorCode::E_HANDOVER_RETRY_LIMIT,
                    format!(
                        "attempts for {} targets already from this source (SPEC HO-8)",
                        super::MAX_TARGETS_PER_SOURCE
                    ),
                ));
            }
            if let Some(&(n, last)) = self.attempts.get(&key) {
                if n > h.max_retries {
                    return Err(refuse(
                        ErrorCode::E_HANDOVER_RETRY_LIMIT,
                        format!("{n} attempts already for this source and target (SPEC HO-8)"),
                    ));
                }
                if now.since(last) < h.min_retry_interval_ms {
                    return Err(refuse(
                        ErrorCode::E_HANDOVER_RETRY_LIMIT,
                        format!(
                            "retry sooner than {} ms (SPEC HO-8)",
                            h.min_retry_interval_ms
                        ),
                    ));
                }
            }
            let busy =
                self.evaluations.contains_key(&resource_id) || self.abandoned_op_on(&resource_id);
            let queue_len = self.queues.get(&resource_id).map_or(0, |q| q.len());
            if busy
                && (h.concurrent == ConcurrentHandovers::Reject || queue_len >= h.queue_capacity)
            {
                return Err(refuse(
                    ErrorCode::E_HANDOVER_IN_PROGRESS,
                    "another handover of this resource is in progress (SPEC HO-6)".into(),
                ));
            }
            let entry = self.attempts.entry(key).or_insert((0, now));
            *entry = (entry.0 + 1, now);
            if busy {
                self.queues.entry(resource_id).or_default().push_back(req);
                return Ok(HandoverAdmission::Queued {
                    position: queue_len + 1,
                });
            }
        }
        self.evaluate(req, now).map(HandoverAdmission::Evaluating)
    }

    pub(crate) fn missing_source(&self, req: &HandoverRequest) -> Refusal {
        let (code, m) = if self.tombstones.contains_key(&req.source) {
            (
                ErrorCode::E_SESSION_TERMINATED,
                "the source session has ended (SPEC LIV-5)",
            )
        } else {
            (
                ErrorCode::E_HANDOVER_INVALID_SOURCE,
                "no such source session (SPEC HO-2 (1))",
            )
        };
        Refusal::new(req.origin.request_kind(), Some(req.source), code, m)
    }
}
