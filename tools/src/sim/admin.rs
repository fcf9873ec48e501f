//! The inputs of the world around the runtimes: handover requests,
//! revocations and renewals, resource loss, admins, OS failures, clock
//! jumps, and the failures injected into handovers.

use std::collections::BTreeSet;

use dtp_codec::{
    AccessMode, ControlMessage, ErrorCode, SessionId, SessionState, SessionTransferRequest,
};
use dtp_terminal::AdminHandover;
use uuid::Uuid;

use super::creds::CredKind;
use super::handovers::Open;
use super::notify::Ctx;
use super::world::{HUMAN, World};

impl World {
    /// Revokes credential `c` at the terminal (SPEC TS-16).
    pub(super) fn revoke_cred(&mut self, c: usize) {
        let Some(d) = self
            .creds
            .get(c)
            .map(|c| c.descriptor)
            .filter(|d| !d.is_nil())
        else {
            return;
        };
        for x in self.creds.iter_mut().filter(|x| x.descriptor == d) {
            x.revoked = true;
        }
        self.report.bump("revocation");
        let r = self.call(Ctx::Revoke(d), |t, now| t.revoke(d, now));
        if let Err(e) = r {
            self.violation(format!("TS-16: revocation of {d} refused: {e}"));
        }
    }

    pub(super) fn revoke_some(&mut self) {
        let in_use: Vec<usize> = self
            .watch
            .session_creds
            .values()
            .filter(|v| v.len() == 1)
            .flatten()
            .copied()
            .collect();
        let pick = if self.rng.chance(75) {
            self.rng.pick(&in_use)
        } else {
            self.rng.index(self.creds.len())
        };
        if let Some(c) = pick {
            self.revoke_cred(c);
        }
    }

    /// SPEC TS-10: a resource is lost (`false`) or comes back.
    fn set_available(&mut self, available: bool) {
        let candidates: Vec<String> = self
            .t
            .resources()
            .into_iter()
            .filter(|r| r.available != available)
            .map(|r| r.resource_id)
            .collect();
        let Some(resource) = self.rng.pick(&candidates) else {
            return;
        };
        self.report.bump(if available {
            "resource.return"
        } else {
            "resource.loss"
        });
        let ctx = Ctx::Available {
            resource: resource.clone(),
            available,
        };
        let r = self.call(ctx, |t, now| {
            t.set_resource_available(&resource, available, now)
        });
        if let Err(e) = r {
            self.violation(format!("TS-10: marking {resource} refused: {e}"));
        }
    }

    pub(super) fn resource_loss(&mut self) {
        self.set_available(false);
    }

    pub(super) fn resource_return(&mut self) {
        self.set_available(true);
    }

    /// A target for a handover from `holder`: another Fay with a
    /// credential (mostly valid), or the human user.
    fn handover_target(&mut self, holder: &str, human: bool) -> (String, usize, bool) {
        if human {
            return (HUMAN.to_owned(), usize::MAX, true);
        }
        let others: Vec<usize> = (0..self.fays.len())
            .filter(|g| self.fays.get(*g).is_some_and(|x| x.id != holder))
            .collect();
        let g = self.rng.pick(&others).unwrap_or(0);
        let cred = match self.rng.below(100) {
            0..85 => self.valid_cred(g),
            85..90 => self.issue(g, CredKind::Full, 0),
            90..95 => self.issue(g, CredKind::Partial, 3_600),
            _ => {
                let h = (g + 1) % self.fays.len();
                self.valid_cred(h)
            }
        };
        let id = self.fays.get(g).map(|x| x.id.clone()).unwrap_or_default();
        (id, cred, false)
    }

    pub(super) fn transfer(&mut self) {
        let Some((f, conn)) = self.some_connected() else {
            return;
        };
        let holder = self.fays.get(f).map(|x| x.id.clone()).unwrap_or_default();
        let mine: Vec<SessionId> = self
            .fays
            .get(f)
            .map(|x| x.known.keys().copied().collect())
            .unwrap_or_default();
        let Some(source) = self.rng.pick(&mine) else {
            return;
        };
        let human = self.rng.chance(20);
        let (target, cred, _) = self.handover_target(&holder, human);
        let credential = self
            .creds
            .get(cred)
            .map(|c| c.bytes.clone())
            .unwrap_or_default();
        if cred != usize::MAX {
            let key = (source, target.clone());
            self.watch.target_creds.entry(key).or_default().push(cred);
        }
        let mut from = conn;
        if self.rng.chance(8) {
            let all = self.connected();
            if let Some(g) = self.rng.pick(&all).filter(|g| *g != f) {
                from = self.fays.get(g).and_then(|x| x.conn).unwrap_or(conn);
                self.report.bump("transfer.wrong_conn");
            }
        }
        self.report.bump(if human {
            "transfer.to_human"
        } else {
            "transfer.to_fay"
        });
        let msg = ControlMessage::SessionTransferRequest(SessionTransferRequest {
            source_session_id: source,
            target_fay_id: target,
            target_credential: credential,
            handover_reason: "sim transfer".into(),
            handover_metadata: Default::default(),
        });
        self.call(Ctx::Transfer { conn: from, source }, |t, now| {
            t.handle_message(from, msg, now);
        });
    }

    pub(super) fn admin_handover(&mut self) {
        let live: Vec<(SessionId, String)> = self
            .t
            .sessions()
            .into_iter()
            .filter(|s| s.state == SessionState::Active)
            .map(|s| (s.session_id, s.fay_id))
            .collect();
        let humans: Vec<(SessionId, String)> =
            live.iter().filter(|(_, f)| f == HUMAN).cloned().collect();
        let pick = if !humans.is_empty() && self.rng.chance(40) {
            self.rng.pick(&humans)
        } else {
            self.rng.pick(&live)
        };
        let Some((source, holder)) = pick else {
            return;
        };
        let from_human = holder == HUMAN;
        let to_human = !from_human && self.rng.chance(35);
        let (target, cred, _) = self.handover_target(&holder, to_human);
        self.report.bump(match (from_human, to_human) {
            (true, _) => "admin.human_to_fay",
            (false, true) => "admin.fay_to_human",
            (false, false) => "admin.fay_to_fay",
        });
        if cred != usize::MAX {
            let key = (source, target.clone());
            self.watch.target_creds.entry(key).or_default().push(cred);
        }
        let req = AdminHandover {
            source_session_id: source,
            target_fay_id: target,
            target_credential: self
                .creds
                .get(cred)
                .map(|c| c.bytes.clone())
                .unwrap_or_default(),
            reason: "sim admin".into(),
            metadata: Default::default(),
        };
        if let Err(r) = self.call(Ctx::Admin, |t, now| t.admin_handover(req, now)) {
            self.report.bump(&format!("admin.refused.{}", r.code));
        }
    }

    pub(super) fn force(&mut self) {
        let live: Vec<SessionId> = self.t.sessions().iter().map(|s| s.session_id).collect();
        let ended: Vec<SessionId> = self.watch.ended.keys().copied().collect();
        let (id, live_one) = match self.rng.below(10) {
            0..8 => (self.rng.pick(&live), true),
            8 => (self.rng.pick(&ended), false),
            _ => (
                Some(SessionId::from_u128(u128::from(self.rng.next_u64()))),
                false,
            ),
        };
        let Some(id) = id else {
            return;
        };
        self.report.bump("force_terminate");
        let r = self.call(Ctx::Force(id), |t, now| t.force_terminate(id, now));
        let ok = match (&r, live_one) {
            (Ok(()), true) => true,
            (Err(e), false) => matches!(
                e.code,
                ErrorCode::E_SESSION_TERMINATED | ErrorCode::E_SESSION_NOT_FOUND
            ),
            _ => false,
        };
        if !ok {
            self.violation(format!(
                "TS-11: forced termination of {id} (live: {live_one}) gave {r:?}"
            ));
        }
    }

    pub(super) fn arm_os_failure(&mut self) {
        if self.rng.chance(50) {
            self.t.access_mut().fail_next_grant();
            self.report.bump("os.armed_grant");
        } else {
            self.t.access_mut().fail_next_revoke();
            self.report.bump("os.armed_revoke");
        }
    }

    pub(super) fn renew(&mut self) {
        let f = self.rng.below(self.fays.len() as u64) as usize;
        let life = if self.rng.chance(50) {
            6 * 3_600
        } else {
            self.rng.range(20, 180)
        };
        self.report.bump("cred.issued");
        self.issue(f, CredKind::Full, life);
    }

    /// TS-16: moves the clock just past the earliest `not_after` (within
    /// half an hour) of a credential some live session holds.
    pub(super) fn jump_past_expiry(&mut self) {
        let now_s = self.now.secs();
        let next = self
            .watch
            .session_creds
            .values()
            .flatten()
            .filter_map(|c| self.creds.get(*c))
            .map(|c| c.not_after_s)
            .filter(|t| *t > now_s && *t <= now_s + 1_800)
            .min();
        if let Some(t) = next {
            self.report.bump("clock.jump_past_expiry");
            let ms = (t * 1000).saturating_sub(self.now.0) + self.rng.below(1_500);
            self.advance(ms);
        }
    }

    /// Before an `allow` reaches the terminal: maybe a failure in the
    /// handover it starts (see [`super::world`]'s notes on T0 … T5).
    pub(super) fn maybe_inject(&mut self, id: Uuid) {
        if !self.rng.chance(30) {
            return;
        }
        let Some(open) = self.watch.handovers.get(&id).cloned() else {
            return;
        };
        match self.rng.below(4) {
            0 if open.target != HUMAN => {
                let now = self.now;
                let descriptors: BTreeSet<usize> = self
                    .target_candidates(&open)
                    .into_iter()
                    .filter(|c| self.creds.get(*c).is_some_and(|c| c.valid_at(now)))
                    .collect();
                if !descriptors.is_empty() {
                    self.report.bump("inject.t0");
                }
                for c in descriptors {
                    self.revoke_cred(c);
                }
            }
            1 => {
                self.report.bump("inject.t1");
                self.t.access_mut().fail_next_revoke();
            }
            2 if open.target != HUMAN => self.fill_target(&open),
            3 => {
                self.report.bump("inject.t4");
                self.t.access_mut().fail_next_grant();
            }
            _ => {}
        }
    }

    /// T3: the target takes read sessions elsewhere until it is at its
    /// per-Fay limit, so the handover cannot create its session.
    fn fill_target(&mut self, open: &Open) {
        let Some(g) = self.fay_index(&open.target) else {
            return;
        };
        let Some(conn) = self.fays.get(g).and_then(|x| x.conn) else {
            return;
        };
        let limit = self.config.limits.per_fay;
        let reads = self.config.limits.reads_per_resource;
        for _ in 0..limit {
            let have = self
                .live_by_fay()
                .get(&open.target)
                .map_or(0, BTreeSet::len);
            if have >= limit {
                break;
            }
            let free: Vec<String> = self
                .t
                .resources()
                .into_iter()
                .filter(|r| {
                    r.available
                        && r.resource_id != open.resource
                        && super::checks::admits(r, AccessMode::Read, reads)
                })
                .map(|r| r.resource_id)
                .collect();
            let Some(r) = self.rng.pick(&free) else {
                break;
            };
            let cred = self.valid_cred(g);
            self.send_auth(g, conn, r, AccessMode::Read, cred);
        }
        if self
            .live_by_fay()
            .get(&open.target)
            .map_or(0, BTreeSet::len)
            >= limit
        {
            self.report.bump("inject.t3");
        }
    }
}
