//! Following every handover from the policy question to its audit record
//! (SPEC HO-2 … HO-10): serialised per resource, asked with the hard
//! deadline of its policy, ended within it, and ended observably — the
//! source runtime sees active → handover_pending → terminating →
//! terminated on success, HO-5's rollback or clean-up on failure, and the
//! target gets its AuthResult or a HandoverFailedNotification.

use std::collections::BTreeMap;

use dtp_codec::{
    AuthOutcome, ControlMessage, ErrorCode, HandoverFailedReason, SessionId, SessionState,
};
use dtp_terminal::{
    ConnKey, HandoverAudit, HandoverOutcome, HandoverTrigger, PolicyKind, SessionInfo,
    TerminationReason, UnixMs,
};

use super::notify::{CallLog, Ctx, PolicyEvent};
use super::policy::Question;
use super::world::{HUMAN, World};

/// A handover asked of a policy and not ended yet.
#[derive(Clone, Debug)]
pub(super) struct Open {
    pub(super) resource: String,
    pub(super) source: SessionId,
    pub(super) target: String,
    pub(super) trigger: HandoverTrigger,
    pub(super) kind: PolicyKind,
    /// SPEC HO-7: the hard deadline in force.
    pub(super) deadline: UnixMs,
    /// The source session's connection when the evaluation began.
    pub(super) source_conn0: Option<ConnKey>,
}

/// A trigger as counted.
fn trigger_name(t: HandoverTrigger) -> &'static str {
    match t {
        HandoverTrigger::AuthRequest => "auth_request",
        HandoverTrigger::TransferRequest => "transfer_request",
        HandoverTrigger::Admin => "admin",
    }
}

/// A policy kind as counted.
fn kind_name(k: PolicyKind) -> &'static str {
    match k {
        PolicyKind::PriorityScript => "priority_script",
        PolicyKind::AiModel => "ai_model",
        PolicyKind::HumanDecision => "human_decision",
    }
}

impl World {
    /// The credentials a handover's target may present: an AuthRequest's
    /// (outstanding), or those sent for the (source, target) pair.
    pub(super) fn target_candidates(&self, open: &Open) -> Vec<usize> {
        match open.trigger {
            HandoverTrigger::AuthRequest => {
                let fay = self.fay_index(&open.target);
                self.watch
                    .outstanding
                    .values()
                    .filter(|o| Some(o.fay) == fay && o.resource == open.resource)
                    .map(|o| o.cred)
                    .collect()
            }
            _ => self
                .watch
                .target_creds
                .get(&(open.source, open.target.clone()))
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// SPEC HO-2 (3), HO-3, HO-6, HO-7: the terminal asks a policy.
    pub(super) fn on_evaluate(&mut self, q: Question) {
        let now = self.now;
        let hard = self
            .config
            .policies
            .get(&q.policy_name)
            .map(|p| p.hard_timeout());
        if hard.map(|h| now.plus(h)) != Some(q.deadline) {
            self.violation(format!(
                "HO-7: handover {} asked {} with deadline {} (hard timeout {hard:?} from {})",
                q.id, q.policy_name, q.deadline.0, now.0
            ));
        }
        let ctx = &q.context;
        if let Some(open) = self.watch.handovers.get_mut(&q.id) {
            // HO-3b: a model's require_human goes to the human fallback.
            let was = open.kind;
            open.deadline = q.deadline;
            open.kind = q.kind;
            if was != PolicyKind::AiModel || q.kind != PolicyKind::HumanDecision {
                self.violation(format!(
                    "HO-3b: handover {} asked again ({was:?} then {:?})",
                    q.id, q.kind
                ));
            }
            self.report.bump("handover.escalated_to_human");
        } else {
            let resource = ctx.resource.resource_id.clone();
            if let Some((other, _)) = self
                .watch
                .handovers
                .iter()
                .find(|(_, h)| h.resource == resource)
            {
                self.violation(format!(
                    "HO-6: handover {} of {resource} evaluated while {other} is",
                    q.id
                ));
            }
            let source = ctx.source.session_id;
            let active = self
                .watch
                .mirror
                .get(&source)
                .is_some_and(|m| m.state == SessionState::Active);
            if !active {
                self.violation(format!(
                    "HO-2 (1): handover {} evaluated with source {source} not active",
                    q.id
                ));
            }
            let open = Open {
                resource,
                source,
                target: ctx.target_fay_id.clone(),
                trigger: ctx.trigger,
                kind: q.kind,
                deadline: q.deadline,
                source_conn0: self.t.session(source).and_then(|s| s.conn),
            };
            if open.target != HUMAN {
                let cands = self.target_candidates(&open);
                let mode = ctx.source.access_mode;
                let valid = cands.iter().any(|c| {
                    self.creds
                        .get(*c)
                        .is_some_and(|c| c.valid_at(now) && c.permits(&open.resource, mode))
                });
                if !cands.is_empty() && !valid {
                    self.violation(format!(
                        "HO-2 (2): handover {} evaluated for {} with no valid credential",
                        q.id, open.target
                    ));
                }
            }
            self.report
                .bump(&format!("handover.trigger.{}", trigger_name(open.trigger)));
            self.report
                .bump(&format!("handover.started.{}", kind_name(q.kind)));
            self.watch.handovers.insert(q.id, open);
        }
        self.watch.policy_events.push(PolicyEvent::Ask(q));
    }

    /// SPEC HO-4, HO-5, HO-7, HO-10: a handover's audit record — its end.
    pub(super) fn on_handover_end(
        &mut self,
        ctx: &Ctx,
        before: &BTreeMap<SessionId, SessionInfo>,
        a: &HandoverAudit,
        log: &mut CallLog,
    ) {
        let id = a.handover_id;
        let Some(open) = self.watch.handovers.remove(&id) else {
            self.violation(format!(
                "HO-10: audit record of {id}, which no policy was asked"
            ));
            return;
        };
        let now = self.now;
        if now > open.deadline.plus(1) || a.finished_at != now {
            self.violation(format!(
                "HO-7: handover {id} ended at {} (now {}), past its deadline {}",
                a.finished_at.0, now.0, open.deadline.0
            ));
        }
        let source = a.source_session_id;
        let source_fay = self.fay_index(&a.source_fay_id);
        let source_conn = source_fay
            .and_then(|f| self.fays.get(f))
            .and_then(|f| f.conn);
        let bound =
            before.get(&source).is_some_and(|s| s.conn.is_some()) || ctx.names(source).is_some();
        let target_conn = self
            .fay_index(&a.target_fay_id)
            .and_then(|f| self.fays.get(f))
            .and_then(|f| f.conn);
        let source_msgs: Vec<(u64, SessionState)> = log
            .sent
            .iter()
            .filter_map(|(c, m)| match m {
                ControlMessage::SessionStateChanged(s) if s.session_id == source => {
                    Some((c.0, s.new_state))
                }
                _ => None,
            })
            .collect();
        let hfn_to = |conn: Option<dtp_terminal::ConnKey>| {
            conn.is_some_and(|c| {
                log.sent.iter().any(|(to, m)| {
                    *to == c
                        && matches!(m, ControlMessage::HandoverFailedNotification(h) if h.handover_id == id)
                })
            })
        };
        match &a.outcome {
            HandoverOutcome::Succeeded => {
                self.report
                    .bump(&format!("handover.succeeded.{}", serde_kind(a.kind)));
                let Some(new) = a.target_session_id else {
                    self.violation(format!(
                        "HO-4: handover {id} succeeded with no target session"
                    ));
                    return;
                };
                log.handed_to.push(new);
                let target_ok = self.watch.mirror.get(&new).is_some_and(|m| {
                    m.state == SessionState::Active
                        && m.fay == a.target_fay_id
                        && m.resource == a.resource_id
                        && m.mode == a.access_mode
                });
                let source_ended = self.watch.ended.get(&source).map(|e| e.1);
                if !target_ok || source_ended != Some(TerminationReason::HandedOver) {
                    self.violation(format!(
                        "HO-4: handover {id} succeeded but target {new} is {:?} and source ended {source_ended:?}",
                        self.watch.mirror.get(&new).map(|m| m.state)
                    ));
                }
                let want: Vec<(u64, SessionState)> = match before.get(&source).and_then(|s| s.conn)
                {
                    Some(c) => [
                        SessionState::HandoverPending,
                        SessionState::Terminating,
                        SessionState::Terminated,
                    ]
                    .into_iter()
                    .map(|s| (c.0, s))
                    .collect(),
                    None => Vec::new(),
                };
                if source_msgs != want {
                    self.violation(format!(
                        "HO-10: source runtime of {id} was told {source_msgs:?}, not {want:?}"
                    ));
                }
                let granted = |c: dtp_terminal::ConnKey, zero: bool| {
                    log.sent.iter().any(|(to, m)| {
                        *to == c
                            && matches!(m, ControlMessage::AuthResult(r)
                                if r.outcome == (AuthOutcome::Granted { session_id: new })
                                    && (!zero || r.request_id == 0))
                    })
                };
                let told = match (open.trigger, target_conn) {
                    (_, None) => true,
                    (HandoverTrigger::AuthRequest, Some(c)) => granted(c, false),
                    (_, Some(c)) => granted(c, true),
                };
                if !told {
                    self.violation(format!(
                        "HO-10: target {} of {id} got no AuthResult for {new}",
                        a.target_fay_id
                    ));
                }
                if open.trigger != HandoverTrigger::AuthRequest && a.target_fay_id != HUMAN {
                    let cands = self.target_candidates(&open);
                    self.watch.session_creds.insert(new, cands);
                }
            }
            HandoverOutcome::Failed {
                code, notification, ..
            } => {
                let tag = notification.map_or("unnotified", |n| n.name());
                self.report.bump(&format!("handover.failed.{tag}"));
                self.check_failure(&open, a, *code, *notification);
                // HO-5, HO-10 (seed §6.10): a rollback in T1 shows the source
                // runtime handover_pending, then active again.
                if *code == ErrorCode::E_HANDOVER_FAILED_AT_RELEASE {
                    let want: Vec<(u64, SessionState)> =
                        match before.get(&source).and_then(|s| s.conn) {
                            Some(c) => vec![
                                (c.0, SessionState::HandoverPending),
                                (c.0, SessionState::Active),
                            ],
                            None => Vec::new(),
                        };
                    if source_msgs != want {
                        self.violation(format!(
                            "HO-10: source runtime of rolled-back {id} was told {source_msgs:?}, not {want:?}"
                        ));
                    }
                }
                if notification.is_some() {
                    if bound && source_conn.is_some() && !hfn_to(source_conn) {
                        self.violation(format!(
                            "HO-5/HO-7: source runtime of {id} got no HandoverFailedNotification on its current connection ({:?}; {:?} when the evaluation began)",
                            source_conn.map(|c| c.0),
                            open.source_conn0.map(|c| c.0)
                        ));
                    }
                    let other = target_conn.is_some() && target_conn != source_conn;
                    let missed = open.trigger != HandoverTrigger::AuthRequest
                        && other
                        && !hfn_to(target_conn);
                    if missed {
                        let sent_to: Vec<u64> = log
                            .sent
                            .iter()
                            .filter(|(_, m)| matches!(m, ControlMessage::HandoverFailedNotification(h) if h.handover_id == id))
                            .map(|(c, _)| c.0)
                            .collect();
                        self.violation(format!(
                            "HO-10: target {} (connection {:?}) of {id} ({:?}, {notification:?}, input {ctx:?}) got no HandoverFailedNotification; sent to {sent_to:?}",
                            a.target_fay_id,
                            target_conn.map(|c| c.0),
                            open.trigger
                        ));
                    }
                }
                match open.trigger {
                    HandoverTrigger::AuthRequest if !matches!(ctx, Ctx::Down(_)) => {
                        let told = log.sent.iter().any(|(to, m)| {
                            Some(*to) == target_conn
                                && matches!(m, ControlMessage::AuthResult(r)
                                    if matches!(&r.outcome, AuthOutcome::Refused { code: c, .. } if c == code))
                        });
                        if !told {
                            self.violation(format!(
                                "HO-10: requester {} of {id} got no refused AuthResult ({code})",
                                a.target_fay_id
                            ));
                        }
                    }
                    HandoverTrigger::TransferRequest if notification.is_none() => {
                        let told = log
                            .refused
                            .iter()
                            .any(|(_, r)| r.session_id == Some(source) && r.code == *code);
                        if !told {
                            self.violation(format!(
                                "HO-2: initiator of transfer {id} was not told {code}"
                            ));
                        }
                    }
                    HandoverTrigger::Admin if notification.is_none() => {
                        self.report.bump("handover.failed.unnotified_admin");
                    }
                    _ => {}
                }
            }
        }
    }

    /// SPEC HO-5, HO-7: what each failure must leave behind.
    fn check_failure(
        &mut self,
        open: &Open,
        a: &HandoverAudit,
        code: ErrorCode,
        notification: Option<HandoverFailedReason>,
    ) {
        let id = a.handover_id;
        let source = self.watch.mirror.get(&a.source_session_id).map(|m| m.state);
        let ok = match notification {
            Some(HandoverFailedReason::Timeout) => {
                self.now > open.deadline && code == ErrorCode::E_HANDOVER_TIMEOUT
            }
            Some(HandoverFailedReason::PolicyRejected) => {
                code == ErrorCode::E_HANDOVER_REJECTED_BY_POLICY
            }
            // HO-5: failure in T0–T2 restores the source.
            Some(HandoverFailedReason::ReleaseFailed)
                if code == ErrorCode::E_HANDOVER_FAILED_AT_RELEASE =>
            {
                source == Some(SessionState::Active)
            }
            // The source ended otherwise while the policy decided.
            Some(HandoverFailedReason::ReleaseFailed) => {
                code == ErrorCode::E_HANDOVER_INVALID_SOURCE && source != Some(SessionState::Active)
            }
            // HO-5: failure in T3–T4: the source is not restored and the
            // resource is idle.
            Some(HandoverFailedReason::AcquireFailed) => {
                // Idle: no controller at all after an exclusive handover
                // (readers of a shared resource keep their own sessions).
                let idle = !dtp_terminal::occupancy::is_exclusive(a.access_mode)
                    || !self.watch.mirror.values().any(|m| {
                        m.resource == a.resource_id
                            && dtp_terminal::session::is_controlling(m.state)
                    });
                code == ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE && source.is_none() && idle
            }
            None => matches!(
                code,
                ErrorCode::E_HANDOVER_INVALID_TARGET | ErrorCode::E_HANDOVER_INVALID_SOURCE
            ),
        };
        if !ok {
            self.violation(format!(
                "HO-5/HO-7: handover {id} ({} on {}) failed with {code} / {notification:?}, source now {source:?}",
                a.access_mode.name(),
                a.resource_id
            ));
        }
    }
}

/// The audit's spelling of a handover kind.
fn serde_kind(k: dtp_terminal::HandoverKind) -> &'static str {
    match k {
        dtp_terminal::HandoverKind::FayToFay => "fay_to_fay",
        dtp_terminal::HandoverKind::FayToHuman => "fay_to_human",
        dtp_terminal::HandoverKind::HumanToFay => "human_to_fay",
    }
}
