//! SPEC HO-3, HO-6, HO-7: the policy's answer, timeouts, failed
//! evaluations and the FIFO queue behind them.

use dtp_codec::{ErrorCode, HandoverFailedReason, SessionId};
use uuid::Uuid;

use super::Terminal;
use super::handover::{HandoverPhase, Origin, PolicyAnswerError};
use crate::audit::PolicyDecision;
use crate::os_access::OsAccess;
use crate::output::Output;
use crate::policy::{PolicyKind, PolicyOutcome};
use crate::time::UnixMs;

impl<A: OsAccess> Terminal<A> {
    fn find_evaluation(&self, id: Uuid) -> Option<(String, UnixMs)> {
        self.evaluations
            .iter()
            .find(|(_, e)| e.id == id && e.phase == HandoverPhase::Deciding)
            .map(|(r, e)| (r.clone(), e.deadline))
    }

    /// SPEC HO-2 (3), HO-3: the policy's answer for `handover_id`. `allow`
    /// runs the atomic sequence (HO-4) at once; `reject` fails the handover
    /// (E_HANDOVER_REJECTED_BY_POLICY, `policy_rejected`); `require_human`
    /// asks the policy's `human_fallback`, with a new hard deadline.
    pub fn policy_decided(
        &mut self,
        handover_id: Uuid,
        outcome: PolicyOutcome,
        now: UnixMs,
    ) -> Result<(), PolicyAnswerError> {
        let late = self.find_evaluation(handover_id).map(|(_, d)| d < now);
        self.begin(now);
        let result = match (late, self.find_evaluation(handover_id)) {
            (Some(true), found) => {
                if let Some((resource, _)) = found {
                    self.time_out(&resource, now);
                }
                Err(PolicyAnswerError::TooLate)
            }
            (Some(false), Some((resource, _))) => {
                self.decide(&resource, outcome, now);
                Ok(())
            }
            _ => Err(PolicyAnswerError::UnknownHandover),
        };
        self.end();
        result
    }

    fn decide(&mut self, resource: &str, outcome: PolicyOutcome, now: UnixMs) {
        let Some(ev) = self.evaluations.get_mut(resource) else {
            return;
        };
        let (decision, why) = match &outcome {
            PolicyOutcome::Allow { why } => ("allow", why.clone()),
            PolicyOutcome::Reject { why } => ("reject", Some(why.clone())),
            PolicyOutcome::RequireHuman => ("require_human", None),
        };
        ev.decisions.push(PolicyDecision {
            policy: ev.policy_name.clone(),
            kind: ev.policy.kind(),
            decision,
            why,
            at: now,
        });
        match outcome {
            PolicyOutcome::Allow { .. } => {
                if let Some(ev) = self.evaluations.remove(resource) {
                    self.run_sequence(ev, now);
                }
            }
            PolicyOutcome::Reject { why } => {
                let code = ErrorCode::E_HANDOVER_REJECTED_BY_POLICY;
                let reason = Some(HandoverFailedReason::PolicyRejected);
                self.fail_evaluation(resource, code, reason, why, false, now);
            }
            PolicyOutcome::RequireHuman => {
                let fallback = (ev.policy.kind() != PolicyKind::HumanDecision)
                    .then(|| self.config.policies.get(&ev.policy_name))
                    .flatten()
                    .and_then(|p| p.human_fallback.clone())
                    .and_then(|n| self.config.policies.get(&n).cloned().map(|c| (n, c)));
                match fallback {
                    Some((name, cfg)) => {
                        ev.policy_name = name;
                        ev.deadline = now.plus(cfg.hard_timeout());
                        ev.policy = cfg.policy;
                        ev.context.now = now;
                        let ev = ev.clone();
                        self.ask_policy(&ev);
                    }
                    None => self.fail_evaluation(
                        resource,
                        ErrorCode::E_HANDOVER_REJECTED_BY_POLICY,
                        Some(HandoverFailedReason::PolicyRejected),
                        "the policy asked for a human decision and none is configured".into(),
                        false,
                        now,
                    ),
                }
            }
        }
    }

    /// SPEC HO-7: the hard deadline passed — with no decision, or with an
    /// OS step outstanding (`abort_os_step`).
    pub(crate) fn time_out(&mut self, resource: &str, now: UnixMs) {
        let Some(ev) = self.evaluations.get_mut(resource) else {
            return;
        };
        if ev.phase != HandoverPhase::Deciding {
            return self.abort_os_step(resource, now);
        }
        ev.decisions.push(PolicyDecision {
            policy: ev.policy_name.clone(),
            kind: ev.policy.kind(),
            decision: "timeout",
            why: None,
            at: now,
        });
        let m = format!("no decision by {} (SPEC HO-7)", ev.deadline.0);
        let code = ErrorCode::E_HANDOVER_TIMEOUT;
        self.fail_evaluation(
            resource,
            code,
            Some(HandoverFailedReason::Timeout),
            m,
            true,
            now,
        );
    }

    /// The source of a handover under evaluation left `active` for another
    /// reason (release, liveness, revocation, …): the handover fails.
    pub(crate) fn source_gone(&mut self, session: SessionId, now: UnixMs) {
        let found = self
            .evaluations
            .iter()
            .find(|(_, e)| e.request.source == session && e.phase == HandoverPhase::Deciding)
            .map(|(r, _)| r.clone());
        if let Some(resource) = found {
            // The seed's reason enum is closed (timeout, policy_rejected,
            // release_failed, acquire_failed: seed 002 §6.9) and has no
            // "source ended": release_failed is the one that fits (the
            // source was never released to the target), and the error code
            // in the details says why.
            self.fail_evaluation(
                &resource,
                ErrorCode::E_HANDOVER_INVALID_SOURCE,
                Some(HandoverFailedReason::ReleaseFailed),
                "the source session ended during the evaluation".into(),
                true,
                now,
            );
        }
    }

    /// Ends the evaluation of `resource` with a failure and serves the next
    /// queued request (HO-6). `cancel`: the policy may still be deciding.
    pub(crate) fn fail_evaluation(
        &mut self,
        resource: &str,
        code: ErrorCode,
        notification: Option<HandoverFailedReason>,
        message: String,
        cancel: bool,
        now: UnixMs,
    ) {
        let Some(ev) = self.evaluations.remove(resource) else {
            return;
        };
        if cancel {
            self.out
                .push_back(Output::CancelPolicy { handover_id: ev.id });
        }
        self.finish_failed(ev, code, notification, message, now);
        self.advance_queue(resource, now);
    }

    /// SPEC HO-6: evaluates queued requests, FIFO, until one is being
    /// evaluated or the queue is empty — once no abandoned OS operation
    /// holds the resource (its answer calls this again).
    pub(crate) fn advance_queue(&mut self, resource: &str, now: UnixMs) {
        while !self.evaluations.contains_key(resource) && !self.abandoned_op_on(resource) {
            let Some(req) = self.queues.get_mut(resource).and_then(|q| q.pop_front()) else {
                return;
            };
            match req.origin.clone() {
                Origin::Auth { conn, request } => self.on_auth_request(conn, request, now, true),
                origin => match (self.evaluate(req, now), origin) {
                    (Err(r), Origin::Transfer { conn }) => self.refuse(conn, r),
                    (Err(r), Origin::Remote { id }) => self.answer_remote(id, r.code, r.message),
                    _ => {}
                },
            }
        }
    }
}
