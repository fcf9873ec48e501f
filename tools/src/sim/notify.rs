//! Checks on what the terminal says, after every input: the observer
//! stream (TS-1, TS-3, HO-4 at every observable instant), the
//! SessionStateChanged messages (TS-15: only on the listed transitions, in
//! order, to the holder's runtime; LIV-5's one message after death), the
//! AuthResults (every one answers a request; no bad credential is ever
//! granted), and why each session ended (TS-10, TS-11, TS-16, LIV-4).
//! The messages themselves are checked in [`super::messages`], handovers
//! followed in [`super::handovers`], the answers to heartbeats and
//! releases predicted in [`super::expect`].

use std::collections::{BTreeMap, BTreeSet};

use dtp_codec::{AccessMode, Beat, ControlMessage, SessionId, SessionState};
use dtp_terminal::{
    AuditRecord, ConnKey, Output, Refusal, ResourceInfo, SessionInfo, StateChange,
    TerminationReason, UnixMs,
};
use uuid::Uuid;

use super::policy::Question;
use super::world::{LIVENESS_MS, World};

/// The input a call gave the terminal (what its outputs are judged on).
#[derive(Clone, Debug)]
#[allow(
    dead_code,
    reason = "some fields are only read through Debug, in violation messages"
)]
pub(super) enum Ctx {
    /// Timers ran.
    Timeout,
    /// A connection came up (and was identified).
    Up(ConnKey),
    /// A connection went down.
    Down(ConnKey),
    /// An AuthRequest.
    Auth { conn: ConnKey, request_id: u64 },
    /// A Heartbeat with these beats.
    Heartbeat { conn: ConnKey, beats: Vec<Beat> },
    /// A SessionRelease.
    Release { conn: ConnKey, id: SessionId },
    /// A SessionTransferRequest.
    Transfer { conn: ConnKey, source: SessionId },
    /// An admin handover.
    Admin,
    /// A policy's answer.
    Answer(Uuid),
    /// A credential revocation (descriptor id).
    Revoke(Uuid),
    /// A resource lost or back.
    Available { resource: String, available: bool },
    /// An admin ended a session.
    Force(SessionId),
}

impl Ctx {
    /// The session a message of this input names, with its connection.
    pub(super) fn names(&self, id: SessionId) -> Option<ConnKey> {
        match self {
            Ctx::Release { conn, id: s } | Ctx::Transfer { conn, source: s } if *s == id => {
                Some(*conn)
            }
            Ctx::Heartbeat { conn, beats } if beats.iter().any(|b| b.session_id == id) => {
                Some(*conn)
            }
            _ => None,
        }
    }
}

/// A live session as observers saw it.
#[derive(Clone, Debug)]
pub(super) struct Mirrored {
    pub(super) fay: String,
    pub(super) resource: String,
    pub(super) mode: AccessMode,
    pub(super) state: SessionState,
}

/// An AuthRequest not yet answered.
#[derive(Clone, Debug)]
pub(super) struct Outstanding {
    pub(super) fay: usize,
    pub(super) resource: String,
    pub(super) mode: AccessMode,
    pub(super) cred: usize,
    pub(super) sent_at: UnixMs,
}

/// A question for the policy side, or the withdrawal of one, in order.
#[derive(Clone, Debug)]
pub(super) enum PolicyEvent {
    Ask(Question),
    Cancel(Uuid),
}

/// What the checks remember between inputs.
#[derive(Default)]
pub(super) struct Watch {
    /// Live sessions, from the observer stream.
    pub(super) mirror: BTreeMap<SessionId, Mirrored>,
    /// Ended sessions: holder and reason.
    pub(super) ended: BTreeMap<SessionId, (String, TerminationReason)>,
    /// Ended sessions whose runtime got LIV-5's one message.
    pub(super) liv5_told: BTreeSet<SessionId>,
    /// The highest accepted sequence number per session (LIV-3).
    pub(super) hb_max: BTreeMap<SessionId, u64>,
    /// Handovers asked of a policy and not ended.
    pub(super) handovers: BTreeMap<Uuid, super::handovers::Open>,
    /// AuthRequests not answered, by (connection, request id).
    pub(super) outstanding: BTreeMap<(ConnKey, u64), Outstanding>,
    /// The credentials each live session may hold (one when known exactly).
    pub(super) session_creds: BTreeMap<SessionId, Vec<usize>>,
    /// The credentials sent for each (source session, target) request.
    pub(super) target_creds: BTreeMap<(SessionId, String), Vec<usize>>,
    /// Questions and withdrawals for the policy side.
    pub(super) policy_events: Vec<PolicyEvent>,
}

/// What one input caused, as far as later checks of the same input need.
#[derive(Default)]
pub(super) struct CallLog {
    /// Messages sent, in order.
    pub(super) sent: Vec<(ConnKey, ControlMessage)>,
    /// Refusals, in order.
    pub(super) refused: Vec<(ConnKey, Refusal)>,
    /// Sessions granted with AuthResult request_id 0 (handover targets).
    pub(super) unsolicited: Vec<SessionId>,
    /// Handover targets created in this input.
    pub(super) handed_to: Vec<SessionId>,
}

/// SPEC TS-1: the legal transitions as observers see them.
fn legal(from: Option<SessionState>, to: SessionState) -> bool {
    use SessionState as S;
    matches!(
        (from, to),
        (None, S::Creating)
            | (Some(S::Creating), S::Active | S::Terminating)
            | (Some(S::Active), S::HandoverPending | S::Terminating)
            | (Some(S::HandoverPending), S::Active | S::Terminating)
            | (Some(S::Terminating), S::Terminated)
    )
}

/// SPEC TS-15: the transitions a SessionStateChanged is sent on (creating
/// → active goes by AuthResult; creating → terminating is never told: the
/// runtime does not know the session yet).
pub(super) fn ts15_listed(from: Option<SessionState>, to: SessionState) -> bool {
    use SessionState as S;
    matches!(
        (from, to),
        (Some(S::Active), S::HandoverPending)
            | (Some(S::HandoverPending), S::Active)
            | (Some(S::Active | S::HandoverPending), S::Terminating)
            | (Some(S::Terminating), S::Terminated)
    )
}

impl World {
    /// Checks the outputs of one input, in order, then what the input
    /// itself should have caused.
    pub(super) fn watch_outputs(
        &mut self,
        ctx: &Ctx,
        before: &BTreeMap<SessionId, SessionInfo>,
        resources: Option<&[ResourceInfo]>,
        outs: Vec<Output>,
    ) {
        let expected = self.predict(ctx);
        let mut log = CallLog::default();
        for (i, o) in outs.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|j| outs.get(j));
            match o {
                Output::StateChanged(c) => self.on_change(ctx, before, c),
                Output::Send { conn, msg } => {
                    self.on_send(ctx, *conn, msg, prev, resources, &mut log);
                    log.sent.push((*conn, msg.clone()));
                }
                Output::Refused { conn, refusal } => log.refused.push((*conn, refusal.clone())),
                Output::Close { conn, reason, .. } => self.violation(format!(
                    "the terminal closed connection {} ({reason}) though only runtime messages were sent",
                    conn.0
                )),
                Output::EvaluatePolicy {
                    handover_id,
                    policy_name,
                    policy,
                    deadline,
                    context,
                } => {
                    let q = Question {
                        id: *handover_id,
                        policy_name: policy_name.clone(),
                        kind: policy.kind(),
                        deadline: *deadline,
                        context: context.clone(),
                    };
                    self.on_evaluate(q);
                }
                Output::CancelPolicy { handover_id } => {
                    self.watch
                        .policy_events
                        .push(PolicyEvent::Cancel(*handover_id));
                }
                Output::Audit(AuditRecord::Handover(a)) => {
                    self.on_handover_end(ctx, before, a, &mut log);
                }
                // The simulated OS answers inline and never kills a call:
                // neither appears.
                Output::OsAccess { .. } | Output::Audit(AuditRecord::Reconciliation(_)) => {
                    self.violation(format!("unexpected output from an inline OS: {o:?}"));
                }
                // One gateway, whose OS access is not shared: nobody to ask.
                Output::AskRemote(_) | Output::AnswerRemote { .. } => {
                    self.violation(format!("a question to another gateway without one: {o:?}"));
                }
                Output::Audit(AuditRecord::SessionTerminated(a)) => {
                    let seen = self.watch.ended.get(&a.session_id).map(|e| e.1);
                    if seen != Some(a.reason) {
                        self.violation(format!(
                            "TS-12: audit record for {} says {} but observers saw {seen:?}",
                            a.session_id, a.reason
                        ));
                    }
                }
            }
        }
        self.check_expected(ctx, expected, &log);
        for s in &log.unsolicited {
            if !log.handed_to.contains(s) {
                self.violation(format!(
                    "HO-10: unsolicited AuthResult for {s}, which no handover created"
                ));
            }
        }
    }

    /// One observer event: legal, in order, justified; HO-4 after it.
    fn on_change(&mut self, ctx: &Ctx, before: &BTreeMap<SessionId, SessionInfo>, c: &StateChange) {
        let id = c.session_id;
        let prev = self.watch.mirror.get(&id).map(|m| m.state);
        if prev != c.from {
            self.violation(format!(
                "TS-3: observers saw {id} go from {:?} but it was {prev:?}",
                c.from
            ));
        }
        if !legal(c.from, c.to) {
            self.violation(format!(
                "TS-1/TS-2: illegal transition {:?} -> {} of {id}",
                c.from,
                c.to.name()
            ));
        }
        let ending = matches!(c.to, SessionState::Terminating | SessionState::Terminated);
        if ending != c.reason.is_some() {
            self.violation(format!(
                "TS-11: transition to {} of {id} with reason {:?}",
                c.to.name(),
                c.reason
            ));
        }
        if c.to == SessionState::Terminating
            && let Some(reason) = c.reason
        {
            self.justify(ctx, before, c, reason);
        }
        if c.to == SessionState::Terminated {
            self.watch.mirror.remove(&id);
            let reason = c.reason.unwrap_or(TerminationReason::Forced);
            self.watch.ended.insert(id, (c.fay_id.to_string(), reason));
            self.watch.session_creds.remove(&id);
            self.watch.hb_max.remove(&id);
            self.report.bump(&format!("session.ended.{reason}"));
        } else {
            let m = Mirrored {
                fay: c.fay_id.to_string(),
                resource: c.resource_id.to_string(),
                mode: c.access_mode,
                state: c.to,
            };
            self.watch.mirror.insert(id, m);
        }
        // HO-4: at this observable instant, at most one controller holds
        // the resource exclusively, and then it is its only controller.
        let controlling: Vec<(SessionId, AccessMode)> = self
            .watch
            .mirror
            .iter()
            .filter(|(_, m)| {
                *m.resource == *c.resource_id && dtp_terminal::session::is_controlling(m.state)
            })
            .map(|(id, m)| (*id, m.mode))
            .collect();
        let exclusive = controlling
            .iter()
            .filter(|(_, m)| dtp_terminal::occupancy::is_exclusive(*m))
            .count();
        if exclusive > 1 || (exclusive == 1 && controlling.len() > 1) {
            self.violation(format!(
                "HO-4: observers saw {} with controllers {controlling:?}",
                c.resource_id
            ));
        }
    }

    /// SPEC TS-10, TS-11, TS-16, LIV-4: a session ends only for a reason
    /// that holds.
    fn justify(
        &mut self,
        ctx: &Ctx,
        before: &BTreeMap<SessionId, SessionInfo>,
        c: &StateChange,
        reason: TerminationReason,
    ) {
        use TerminationReason as R;
        let id = c.session_id;
        let now = self.now;
        let creds: Vec<&super::creds::Cred> = self
            .watch
            .session_creds
            .get(&id)
            .map(|v| v.iter().filter_map(|i| self.creds.get(*i)).collect())
            .unwrap_or_default();
        let ok = match reason {
            R::ClientRelease => matches!(ctx, Ctx::Release { id: s, .. } if *s == id),
            R::Forced => matches!(ctx, Ctx::Force(s) if *s == id),
            R::ResourceUnavailable => matches!(
                ctx,
                Ctx::Available { resource, available: false } if **resource == *c.resource_id
            ),
            R::CredentialRevoked => match ctx {
                Ctx::Revoke(d) => creds.is_empty() || creds.iter().any(|c| c.descriptor == *d),
                _ => false,
            },
            // TS-16 "at once": this driver runs every timer at its instant,
            // so a credential known exactly ends its session at not_after.
            R::CredentialExpired => match creds.as_slice() {
                [] => true,
                [one] => one.not_after_s * 1000 == now.0,
                many => many.iter().any(|c| c.not_after_s * 1000 <= now.0),
            },
            // LIV-4: dead once both silences pass the threshold — not
            // before, and (timers run on time) not later either.
            R::LivenessTimeout => before.get(&id).is_some_and(|s| {
                s.conn_down_since.is_some_and(|d| {
                    now.since(d) > LIVENESS_MS
                        && now == d.max(s.last_heartbeat_at).plus(LIVENESS_MS + 1)
                }) && now.since(s.last_heartbeat_at) > LIVENESS_MS
                    && !s.human
            }),
            R::HandedOver => c.from == Some(SessionState::HandoverPending),
            R::CreationFailed => c.from == Some(SessionState::Creating),
        };
        if !ok {
            self.violation(format!(
                "TS-11: {id} ({}) ended for {reason} without cause, or not at the instant it arose (input {ctx:?})",
                c.fay_id
            ));
        }
    }
}
