//! The random inputs: one per step, after the clock moved.

use dtp_codec::{
    AccessMode, AuthRequest, Beat, ControlMessage, Heartbeat, SessionId, SessionRelease,
    SessionState,
};
use dtp_terminal::ConnKey;

use super::creds::{Cred, CredKind};
use super::notify::{Ctx, Outstanding};
use super::world::{RESOURCES, World};

const MODES: [AccessMode; 3] = [
    AccessMode::Write,
    AccessMode::Execute,
    AccessMode::Configure,
];

impl World {
    /// One step: the clock moves, then one random input.
    pub(super) fn run_step(&mut self) {
        let dt = match self.rng.below(100) {
            0..60 => self.rng.range(0, 300),
            60..90 => self.rng.range(300, 3_000),
            90..99 => self.rng.range(3_000, 20_000),
            _ => self.rng.range(20_000, 120_000),
        };
        self.advance(dt);
        match self.rng.below(1000) {
            0..230 => self.auth(),
            230..430 => self.heartbeat(),
            430..450 => self.drop_conn(),
            450..500 => self.return_conn(),
            500..560 => self.release(),
            560..580 => self.revoke_some(),
            580..592 => self.resource_loss(),
            592..612 => self.resource_return(),
            612..690 => self.transfer(),
            690..760 => self.admin_handover(),
            760..770 => self.force(),
            770..800 => self.arm_os_failure(),
            800..830 => self.renew(),
            830..840 => self.jump_past_expiry(),
            _ => self.auth_for_held(),
        }
        self.settle();
        self.check_unanswered();
    }

    pub(super) fn connected(&self) -> Vec<usize> {
        (0..self.fays.len())
            .filter(|f| self.fays.get(*f).is_some_and(|x| x.conn.is_some()))
            .collect()
    }

    /// A connected Fay and its connection (one reconnects if none is).
    pub(super) fn some_connected(&mut self) -> Option<(usize, ConnKey)> {
        let all = self.connected();
        let f = match self.rng.pick(&all) {
            Some(f) => f,
            None => {
                self.return_conn();
                self.rng.pick(&self.connected())?
            }
        };
        Some((f, self.fays.get(f)?.conn?))
    }

    /// An existing credential of `fay` satisfying `want`, or a new one.
    fn cred_like(
        &mut self,
        fay: usize,
        want: impl Fn(&Cred) -> bool,
        make: impl FnOnce(&mut Self) -> usize,
    ) -> usize {
        let found = self.fays.get(fay).and_then(|f| {
            f.creds
                .iter()
                .copied()
                .find(|c| self.creds.get(*c).is_some_and(&want))
        });
        found.unwrap_or_else(|| make(self))
    }

    /// An AuthRequest for a random resource and mode.
    fn auth(&mut self) {
        let resource = RESOURCES[self.rng.below(RESOURCES.len() as u64) as usize].0;
        let mode = if self.rng.chance(50) {
            AccessMode::Read
        } else {
            MODES[self.rng.below(3) as usize]
        };
        self.auth_with(resource.to_owned(), mode);
    }

    /// SPEC HO-1: an AuthRequest for a resource another Fay holds, in its
    /// mode — a handover trigger.
    fn auth_for_held(&mut self) {
        let held: Vec<(String, AccessMode)> = self
            .t
            .sessions()
            .into_iter()
            .filter(|s| s.state == SessionState::Active && s.access_mode != AccessMode::Read)
            .map(|s| (s.resource_id, s.access_mode))
            .collect();
        match self.rng.pick(&held) {
            Some((r, m)) => self.auth_with(r, m),
            None => self.auth(),
        }
    }

    /// An AuthRequest from a connected Fay, with a credential that is
    /// valid or bad in one of the ways the terminal must refuse.
    fn auth_with(&mut self, resource: String, mut mode: AccessMode) {
        let Some((f, conn)) = self.some_connected() else {
            return;
        };
        let now = self.now;
        let (cred, label) = match self.rng.below(100) {
            0..70 => (self.valid_cred(f), "auth.valid"),
            70..74 => {
                let c = self.cred_like(
                    f,
                    |c| c.kind == CredKind::Full && c.not_after_s <= now.secs(),
                    |w| w.issue(f, CredKind::Full, 0),
                );
                (c, "auth.expired")
            }
            74..77 => {
                let c =
                    self.issue_window(f, CredKind::Full, now.secs() + 3_600, now.secs() + 7_200);
                (c, "auth.not_yet_valid")
            }
            77..81 => {
                let c = self.cred_like(
                    f,
                    |c| c.revoked,
                    |w| {
                        let c = w.issue(f, CredKind::Full, 3_600);
                        w.revoke_cred(c);
                        c
                    },
                );
                (c, "auth.revoked")
            }
            81..85 => {
                let c = self.cred_like(
                    f,
                    |c| c.kind == CredKind::UnknownIssuer,
                    |w| w.issue(f, CredKind::UnknownIssuer, 6 * 3_600),
                );
                (c, "auth.unknown_issuer")
            }
            85..90 => {
                mode = MODES[self.rng.below(3) as usize];
                let c = self.cred_like(
                    f,
                    |c| c.kind == CredKind::ReadOnly && c.valid_at(now),
                    |w| w.issue(f, CredKind::ReadOnly, 6 * 3_600),
                );
                (c, "auth.wrong_grants")
            }
            90..95 => {
                let other =
                    (f + 1 + self.rng.below(self.fays.len() as u64 - 1) as usize) % self.fays.len();
                (self.valid_cred(other), "auth.wrong_fay")
            }
            _ => {
                let c = self.cred_like(
                    f,
                    |c| c.kind == CredKind::Garbage,
                    |w| w.issue(f, CredKind::Garbage, 3_600),
                );
                (c, "auth.garbage")
            }
        };
        self.report.bump(label);
        self.send_auth(f, conn, resource, mode, cred);
    }

    /// Sends one AuthRequest and remembers it until answered.
    pub(super) fn send_auth(
        &mut self,
        f: usize,
        conn: ConnKey,
        resource: String,
        mode: AccessMode,
        cred: usize,
    ) {
        let request_id = self.next_request;
        self.next_request += 1;
        let out = Outstanding {
            fay: f,
            resource: resource.clone(),
            mode,
            cred,
            sent_at: self.now,
        };
        self.watch.outstanding.insert((conn, request_id), out);
        let req = AuthRequest {
            request_id,
            fay_id: self.fays.get(f).map(|x| x.id.clone()).unwrap_or_default(),
            resource_id: resource,
            access_mode: mode,
            credential: self
                .creds
                .get(cred)
                .map(|c| c.bytes.clone())
                .unwrap_or_default(),
        };
        self.call(Ctx::Auth { conn, request_id }, |t, now| {
            t.handle_message(conn, ControlMessage::AuthRequest(req), now);
        });
    }

    /// A heartbeat: single, aggregated, retransmitted, replayed, for an
    /// ended session, or from the wrong connection.
    fn heartbeat(&mut self) {
        let Some((f, conn)) = self.some_connected() else {
            return;
        };
        let Some(fay) = self.fays.get(f) else {
            return;
        };
        let known: Vec<(SessionId, u64)> =
            fay.known.iter().map(|(s, k)| (*s, k.next_seq)).collect();
        let ended = fay.ended.clone();
        let beat = |s: SessionId, n: u64| Beat {
            session_id: s,
            sequence_number: n,
        };
        let roll = self.rng.below(100);
        let beats: Vec<Beat> = match roll {
            0..55 => self
                .rng
                .pick(&known)
                .map(|(s, n)| beat(s, n))
                .into_iter()
                .collect(),
            55..70 => {
                self.report.bump("heartbeat.aggregated");
                known.iter().take(4).map(|(s, n)| beat(*s, *n)).collect()
            }
            70..78 => {
                self.report.bump("heartbeat.retransmit");
                let pick = self.rng.pick(&known);
                pick.map(|(s, n)| beat(s, n.saturating_sub(1)))
                    .into_iter()
                    .collect()
            }
            78..88 => {
                let replayable: Vec<(SessionId, u64)> = known
                    .iter()
                    .filter_map(|(s, _)| {
                        self.watch
                            .hb_max
                            .get(s)
                            .filter(|m| **m > 0)
                            .map(|m| (*s, *m))
                    })
                    .collect();
                let pick = self.rng.pick(&replayable);
                let seq = pick.map(|(_, m)| self.rng.below(m)).unwrap_or(0);
                if pick.is_some() {
                    self.report.bump("heartbeat.replay");
                }
                pick.map(|(s, _)| beat(s, seq)).into_iter().collect()
            }
            88..95 => self
                .rng
                .pick(&ended)
                .map(|s| beat(s, 1_000))
                .into_iter()
                .collect(),
            _ => {
                let others: Vec<SessionId> = self
                    .t
                    .sessions()
                    .into_iter()
                    .filter(|s| self.fays.get(f).is_none_or(|x| x.id != s.fay_id))
                    .map(|s| s.session_id)
                    .collect();
                self.report.bump("heartbeat.wrong_conn");
                self.rng
                    .pick(&others)
                    .map(|s| beat(s, 1_000))
                    .into_iter()
                    .collect()
            }
        };
        if beats.is_empty() {
            return;
        }
        self.report.add("heartbeat.beats", beats.len() as u64);
        let msg = ControlMessage::Heartbeat(Heartbeat {
            beats: beats.clone(),
        });
        self.call(Ctx::Heartbeat { conn, beats }, |t, now| {
            t.handle_message(conn, msg, now);
        });
    }

    /// SPEC LIV-1: a runtime's connection drops.
    fn drop_conn(&mut self) {
        let all = self.connected();
        let Some(f) = self.rng.pick(&all) else {
            return;
        };
        let Some(conn) = self.fays.get_mut(f).and_then(|x| x.conn.take()) else {
            return;
        };
        self.watch.outstanding.retain(|(c, _), _| *c != conn);
        self.report.bump("conn.drop");
        self.call(Ctx::Down(conn), |t, now| t.connection_down(conn, now));
    }

    pub(super) fn return_conn(&mut self) {
        let down: Vec<usize> = (0..self.fays.len())
            .filter(|f| self.fays.get(*f).is_some_and(|x| x.conn.is_none()))
            .collect();
        if let Some(f) = self.rng.pick(&down) {
            self.report.bump("conn.return");
            self.connect(f);
        }
    }

    /// SPEC TS-13: a release — own, repeated, unknown or from the wrong
    /// connection.
    fn release(&mut self) {
        let Some((f, conn)) = self.some_connected() else {
            return;
        };
        let Some(fay) = self.fays.get(f) else {
            return;
        };
        let known: Vec<SessionId> = fay.known.keys().copied().collect();
        let ended = fay.ended.clone();
        let id = match self.rng.below(100) {
            0..60 => self.rng.pick(&known),
            60..80 => self.rng.pick(&ended),
            80..90 => Some(SessionId::from_u128(u128::from(self.rng.next_u64()))),
            _ => {
                let all: Vec<SessionId> = self.t.sessions().iter().map(|s| s.session_id).collect();
                self.rng.pick(&all)
            }
        };
        let Some(id) = id else {
            return;
        };
        let msg = ControlMessage::SessionRelease(SessionRelease { session_id: id });
        self.call(Ctx::Release { conn, id }, |t, now| {
            t.handle_message(conn, msg, now)
        });
    }
}
