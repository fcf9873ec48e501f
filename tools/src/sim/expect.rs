//! What an input must cause, predicted from what observers saw before it:
//! the answer to every beat of a heartbeat (LIV-2, LIV-3, LIV-5) and to a
//! release (TS-13); and the checks that need the simulation's own
//! knowledge — credentials (TS-16) and unanswered requests.

use dtp_codec::{Beat, ControlMessage, ErrorCode, SessionId, SessionState};
use dtp_terminal::RequestKind;

use super::notify::{CallLog, Ctx};
use super::world::World;

/// How one beat must be answered.
#[derive(Clone, Debug)]
pub(super) enum BeatAnswer {
    /// Acked, same sequence number (LIV-2).
    Ack,
    /// Refused with one of these codes.
    Refuse(&'static [ErrorCode], &'static str),
}

/// How a release must be answered.
#[derive(Clone, Copy, Debug)]
pub(super) enum ReleaseAnswer {
    /// The active session ends with client_release.
    Ends,
    /// Success: its current state is sent back (TS-13).
    Reply,
    /// Success, or E_SESSION_NOT_FOUND once the terminal forgot it.
    ReplyOrForgotten,
    /// Refused with one of these codes; nothing changes.
    Refuse(&'static [ErrorCode]),
}

/// The prediction for one input.
#[derive(Clone, Debug)]
pub(super) enum Expected {
    Nothing,
    Beats(Vec<(Beat, BeatAnswer)>),
    Release(SessionId, ReleaseAnswer),
}

const TERMINATED: &[ErrorCode] = &[ErrorCode::E_SESSION_TERMINATED];
const GONE: &[ErrorCode] = &[
    ErrorCode::E_SESSION_TERMINATED,
    ErrorCode::E_SESSION_NOT_FOUND,
];
const NOT_FOUND: &[ErrorCode] = &[ErrorCode::E_SESSION_NOT_FOUND];
const UNAUTHORIZED: &[ErrorCode] = &[ErrorCode::E_UNAUTHORIZED];
const UNAUTHORIZED_OR_GONE: &[ErrorCode] =
    &[ErrorCode::E_UNAUTHORIZED, ErrorCode::E_SESSION_NOT_FOUND];

impl World {
    /// Who holds `id` (live or ended) and whether it is live in `state`.
    fn holder_of(&self, id: SessionId) -> Option<(String, Option<SessionState>)> {
        if let Some(m) = self.watch.mirror.get(&id) {
            return Some((m.fay.clone(), Some(m.state)));
        }
        self.watch.ended.get(&id).map(|e| (e.0.clone(), None))
    }

    /// Predicts the answers to `ctx` from the state before it.
    pub(super) fn predict(&self, ctx: &Ctx) -> Expected {
        let speaker = |conn| {
            self.fay_on(conn)
                .and_then(|f| self.fays.get(f))
                .map(|f| f.id.clone())
        };
        match ctx {
            Ctx::Heartbeat { conn, beats } => {
                let me = speaker(*conn);
                let answers = beats
                    .iter()
                    .map(|b| {
                        let a = match self.holder_of(b.session_id) {
                            Some((h, Some(_))) if Some(&h) != me.as_ref() => {
                                BeatAnswer::Refuse(UNAUTHORIZED, "heartbeat.unauthorized")
                            }
                            Some((
                                _,
                                Some(SessionState::Active | SessionState::HandoverPending),
                            )) => {
                                let max = self.watch.hb_max.get(&b.session_id).copied();
                                if max.is_some_and(|m| b.sequence_number < m) {
                                    let code = &[ErrorCode::E_HEARTBEAT_REPLAY];
                                    BeatAnswer::Refuse(code, "heartbeat.replay_refused")
                                } else {
                                    BeatAnswer::Ack
                                }
                            }
                            Some((_, Some(_))) => {
                                BeatAnswer::Refuse(TERMINATED, "heartbeat.terminating")
                            }
                            Some((_, None)) => BeatAnswer::Refuse(GONE, "heartbeat.after_death"),
                            None => BeatAnswer::Refuse(NOT_FOUND, "heartbeat.unknown"),
                        };
                        (*b, a)
                    })
                    .collect();
                Expected::Beats(answers)
            }
            Ctx::Release { conn, id } => {
                let me = speaker(*conn);
                let a = match self.holder_of(*id) {
                    Some((h, _)) if Some(&h) != me.as_ref() => {
                        ReleaseAnswer::Refuse(UNAUTHORIZED_OR_GONE)
                    }
                    Some((_, Some(SessionState::Active))) => ReleaseAnswer::Ends,
                    Some((_, Some(_))) => ReleaseAnswer::Reply,
                    Some((_, None)) => ReleaseAnswer::ReplyOrForgotten,
                    None => ReleaseAnswer::Refuse(NOT_FOUND),
                };
                Expected::Release(*id, a)
            }
            _ => Expected::Nothing,
        }
    }

    /// Compares what `ctx` caused with the prediction.
    pub(super) fn check_expected(&mut self, ctx: &Ctx, expected: Expected, log: &CallLog) {
        match (ctx, expected) {
            (Ctx::Heartbeat { conn, .. }, Expected::Beats(answers)) => {
                self.check_beats(*conn, answers, log);
            }
            (Ctx::Release { conn, .. }, Expected::Release(id, a)) => {
                self.check_release(*conn, id, a, log);
            }
            _ => {}
        }
    }

    /// LIV-2, LIV-3, LIV-5: the acks and refusals of one heartbeat.
    fn check_beats(
        &mut self,
        conn: dtp_terminal::ConnKey,
        answers: Vec<(Beat, BeatAnswer)>,
        log: &CallLog,
    ) {
        let acked: Vec<Beat> = log
            .sent
            .iter()
            .filter_map(|(c, m)| match m {
                ControlMessage::HeartbeatAck(a) if *c == conn => Some(a.beats.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        let want_acked: Vec<Beat> = answers
            .iter()
            .filter(|(_, a)| matches!(a, BeatAnswer::Ack))
            .map(|(b, _)| *b)
            .collect();
        if acked != want_acked {
            self.violation(format!(
                "LIV-2/LIV-3: heartbeat acked {acked:?}, expected {want_acked:?}"
            ));
        }
        let refused: Vec<(SessionId, ErrorCode)> = log
            .refused
            .iter()
            .filter(|(c, r)| *c == conn && r.request == RequestKind::Heartbeat)
            .map(|(_, r)| (r.session_id.unwrap_or_default(), r.code))
            .collect();
        let mut want_refused = answers.iter().filter_map(|(b, a)| match a {
            BeatAnswer::Refuse(codes, label) => Some((b.session_id, *codes, *label)),
            BeatAnswer::Ack => None,
        });
        let mut ok = refused.len() == want_refused.clone().count();
        for (got, want) in refused.iter().zip(want_refused.by_ref()) {
            ok &= got.0 == want.0 && want.1.contains(&got.1);
            self.report.bump(want.2);
            if got.1 == ErrorCode::E_SESSION_TERMINATED || got.1 == ErrorCode::E_SESSION_NOT_FOUND {
                self.forget_session(got.0);
            }
        }
        if !ok {
            let want: Vec<_> = answers
                .iter()
                .map(|(b, a)| (b.session_id, a.clone()))
                .collect();
            self.violation(format!(
                "LIV-3/LIV-5: heartbeat refusals {refused:?}, expected {want:?}"
            ));
        }
        self.report.add("heartbeat.acked", acked.len() as u64);
        for b in acked {
            self.watch.hb_max.insert(b.session_id, b.sequence_number);
            for f in &mut self.fays {
                if let Some(k) = f.known.get_mut(&b.session_id) {
                    k.next_seq = k.next_seq.max(b.sequence_number + 1);
                }
            }
        }
    }

    /// TS-13: the answer to one release.
    fn check_release(
        &mut self,
        conn: dtp_terminal::ConnKey,
        id: SessionId,
        a: ReleaseAnswer,
        log: &CallLog,
    ) {
        let replied = log.sent.iter().any(|(c, m)| {
            *c == conn && matches!(m, ControlMessage::SessionStateChanged(s) if s.session_id == id)
        });
        let refused: Vec<ErrorCode> = log
            .refused
            .iter()
            .filter(|(c, r)| *c == conn && r.request == RequestKind::SessionRelease)
            .map(|(_, r)| r.code)
            .collect();
        let state = self.watch.mirror.get(&id).map(|m| m.state);
        let ok = match a {
            ReleaseAnswer::Ends => {
                self.report.bump("release.active");
                state != Some(SessionState::Active) && refused.is_empty()
            }
            ReleaseAnswer::Reply => {
                self.report.bump("release.repeated");
                replied && refused.is_empty()
            }
            ReleaseAnswer::ReplyOrForgotten => {
                self.report.bump("release.repeated");
                replied != (refused == [ErrorCode::E_SESSION_NOT_FOUND])
            }
            ReleaseAnswer::Refuse(codes) => {
                self.report.bump(if codes == NOT_FOUND {
                    "release.unknown"
                } else {
                    "release.wrong_conn"
                });
                !replied && refused.len() == 1 && refused.iter().all(|c| codes.contains(c))
            }
        };
        if !ok {
            self.violation(format!(
                "TS-13: release of {id} answered {refused:?} (replied: {replied}, now {state:?}), expected {a:?}"
            ));
        }
        if matches!(a, ReleaseAnswer::Ends | ReleaseAnswer::ReplyOrForgotten) && !replied {
            self.forget_session(id);
        }
    }

    /// Every runtime stops tracking `id`.
    fn forget_session(&mut self, id: SessionId) {
        for f in &mut self.fays {
            if f.known.contains_key(&id) {
                f.forget(id);
            }
        }
    }

    /// SPEC TS-16: no session stays active on an expired or revoked
    /// credential (judged only when every credential it may hold is).
    pub(super) fn check_credentials(&mut self) {
        let now = self.now;
        let mut found = Vec::new();
        for (id, m) in &self.watch.mirror {
            if m.state != SessionState::Active {
                continue;
            }
            let Some(cands) = self.watch.session_creds.get(id).filter(|c| !c.is_empty()) else {
                continue;
            };
            let creds: Vec<_> = cands.iter().filter_map(|c| self.creds.get(*c)).collect();
            if creds.iter().all(|c| c.not_after_s * 1000 <= now.0) {
                found.push(format!(
                    "TS-16: {id} ({}) still active past its credential's not_after",
                    m.fay
                ));
            } else if creds.iter().all(|c| c.revoked) {
                found.push(format!(
                    "TS-16: {id} ({}) still active on a revoked credential",
                    m.fay
                ));
            }
        }
        for v in found {
            self.violation(v);
        }
    }

    /// Every AuthRequest on a live connection is answered: queued ones
    /// within the queue's worth of hard timeouts.
    pub(super) fn check_unanswered(&mut self) {
        // Capacity + 1 handovers, each at most a model's 1 s then a human's
        // 30 s, and a margin.
        let limit = (self.config.handover.queue_capacity as u64 + 2) * 35_000;
        let now = self.now;
        let stale: Vec<u64> = self
            .watch
            .outstanding
            .iter()
            .filter(|((c, _), o)| self.fay_on(*c).is_some() && now.since(o.sent_at) > limit)
            .map(|((_, r), _)| *r)
            .collect();
        for r in stale {
            self.violation(format!(
                "TS-5: AuthRequest {r} unanswered for over {limit} ms"
            ));
            self.watch.outstanding.retain(|(_, id), _| *id != r);
        }
    }
}
