//! Property test: random sequences of every input, with OS failures, and
//! after EVERY step the invariants of SPEC TS-8, TS-9, TS-17, HO-4 and TS-4.

use std::collections::{BTreeMap, BTreeSet};

use dtp_codec::{AccessMode, SessionState};
use dtp_crypto::cred::Credential;
use proptest::prelude::*;

use super::*;
use crate::occupancy::is_exclusive;
use crate::{AccessGrant, AdminHandover, PolicyOutcome};

const FAYS: [&str; 3] = ["fay-0", "fay-1", "fay-2"];
const RESOURCES: [&str; 3] = ["arm", "cam", "screen"];
const MODES: [AccessMode; 4] = [
    AccessMode::Read,
    AccessMode::Write,
    AccessMode::Execute,
    AccessMode::Configure,
];

#[derive(Clone, Debug)]
enum Step {
    Auth {
        conn: u8,
        fay: u8,
        resource: u8,
        mode: u8,
        short: bool,
    },
    Release {
        conn: u8,
        pick: u8,
    },
    Heartbeat {
        conn: u8,
        pick: u8,
        seq: u8,
    },
    Up {
        conn: u8,
    },
    Down {
        conn: u8,
    },
    Transfer {
        conn: u8,
        pick: u8,
        target: u8,
    },
    Admin {
        pick: u8,
        target: u8,
    },
    Decide {
        pick: u8,
        outcome: u8,
    },
    Tick {
        ms: u32,
    },
    FailGrant,
    FailRevoke,
    Revoke {
        fay: u8,
        short: bool,
    },
    Available {
        resource: u8,
        available: bool,
    },
    Force {
        pick: u8,
    },
    /// Deferred OS only: answer an outstanding operation — 0 ok, 1 failed,
    /// 2 killed (applied, outcome unknown).
    Answer {
        pick: u8,
        how: u8,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..3u8, 0..3u8, 0..3u8, 0..4u8, any::<bool>()).prop_map(
            |(conn, fay, resource, mode, short)| Step::Auth { conn, fay, resource, mode, short }
        ),
        1 => (0..3u8, any::<u8>()).prop_map(|(conn, pick)| Step::Release { conn, pick }),
        2 => (0..3u8, any::<u8>(), 0..6u8)
            .prop_map(|(conn, pick, seq)| Step::Heartbeat { conn, pick, seq }),
        1 => (0..3u8).prop_map(|conn| Step::Up { conn }),
        1 => (0..3u8).prop_map(|conn| Step::Down { conn }),
        3 => (0..3u8, any::<u8>(), 0..4u8)
            .prop_map(|(conn, pick, target)| Step::Transfer { conn, pick, target }),
        2 => (any::<u8>(), 0..4u8).prop_map(|(pick, target)| Step::Admin { pick, target }),
        3 => (any::<u8>(), 0..3u8).prop_map(|(pick, outcome)| Step::Decide { pick, outcome }),
        2 => (0..40_000u32).prop_map(|ms| Step::Tick { ms }),
        1 => Just(Step::FailGrant),
        1 => Just(Step::FailRevoke),
        1 => (0..3u8, any::<bool>()).prop_map(|(fay, short)| Step::Revoke { fay, short }),
        1 => (0..3u8, any::<bool>())
            .prop_map(|(resource, available)| Step::Available { resource, available }),
        1 => any::<u8>().prop_map(|pick| Step::Force { pick }),
    ]
}

/// The steps with a deferred OS: answers are frequent, so most operations
/// complete, some late.
fn deferred_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => step(),
        2 => (any::<u8>(), prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)])
            .prop_map(|(pick, how)| Step::Answer { pick, how }),
    ]
}

/// Mostly a live session; sometimes any session seen so far (ended ones
/// included), or an unknown id before any.
fn choose(live: &[SessionId], seen: &[SessionId], pick: u8) -> SessionId {
    if pick < 192 && !live.is_empty() {
        return live[usize::from(pick) % live.len()];
    }
    if seen.is_empty() {
        return SessionId::from_u128(u128::from(pick));
    }
    seen[usize::from(pick) % seen.len()]
}

/// Handover target `n`: a Fay with its credential, or the human user.
fn target(creds: &[[Bytes; 2]], n: u8) -> (String, Bytes) {
    match FAYS.get(usize::from(n)) {
        Some(f) => ((*f).to_owned(), creds[usize::from(n)][0].clone()),
        None => ("human:t1".to_owned(), Bytes::new()),
    }
}

struct World {
    h: Harness,
    /// Per Fay: a long-lived and a 60-second credential.
    creds: Vec<[Bytes; 2]>,
    /// Every session id ever granted (ended ones included).
    seen: Vec<SessionId>,
    /// The OS access is deferred (answered by `Step::Answer`).
    deferred: bool,
}

impl World {
    fn new(deferred: bool) -> Self {
        let mut c = config();
        c.limits.per_fay = 3;
        c.limits.reads_per_resource = 2;
        c.handover.queue_capacity = 2;
        let mut h = Harness::with(c);
        h.t.access_mut().set_deferred(deferred);
        let creds = FAYS
            .iter()
            .map(|f| [h.cred(f), h.cred_with(f, all_grants(), 60)])
            .collect();
        World {
            h,
            creds,
            seen: Vec::new(),
            deferred,
        }
    }

    fn apply(&mut self, s: Step) {
        let World { h, creds, seen, .. } = self;
        let live: Vec<SessionId> = h.t.sessions().iter().map(|s| s.session_id).collect();
        let pick = |p: u8| choose(&live, seen, p);
        let target = |n: u8| target(creds, n);
        let now = h.now;
        match s {
            Step::Auth {
                conn,
                fay,
                resource,
                mode,
                short,
            } => {
                let cred = creds[usize::from(fay)][usize::from(short)].clone();
                let (f, r, m) = (
                    FAYS[usize::from(fay)],
                    RESOURCES[usize::from(resource)],
                    MODES[usize::from(mode)],
                );
                let req = h.auth_request(f, r, m, cred);
                h.t.handle_message(
                    ConnKey(u64::from(conn)),
                    ControlMessage::AuthRequest(req),
                    now,
                );
            }
            Step::Release { conn, pick: p } => {
                let id = pick(p);
                h.t.handle_message(
                    ConnKey(u64::from(conn)),
                    ControlMessage::SessionRelease(dtp_codec::SessionRelease { session_id: id }),
                    now,
                );
            }
            Step::Heartbeat { conn, pick: p, seq } => {
                let beats = vec![dtp_codec::Beat {
                    session_id: pick(p),
                    sequence_number: u64::from(seq),
                }];
                h.t.handle_message(
                    ConnKey(u64::from(conn)),
                    ControlMessage::Heartbeat(dtp_codec::Heartbeat { beats }),
                    now,
                );
            }
            Step::Up { conn } => h.t.connection_up(ConnKey(u64::from(conn)), now),
            Step::Down { conn } => h.t.connection_down(ConnKey(u64::from(conn)), now),
            Step::Transfer {
                conn,
                pick: p,
                target: n,
            } => {
                let (fay, cred) = target(n);
                let t = dtp_codec::SessionTransferRequest {
                    source_session_id: pick(p),
                    target_fay_id: fay,
                    target_credential: cred,
                    handover_reason: "p".into(),
                    handover_metadata: BTreeMap::new(),
                };
                h.t.handle_message(
                    ConnKey(u64::from(conn)),
                    ControlMessage::SessionTransferRequest(t),
                    now,
                );
            }
            Step::Admin { pick: p, target: n } => {
                let (fay, cred) = target(n);
                let req = AdminHandover {
                    source_session_id: pick(p),
                    target_fay_id: fay,
                    target_credential: cred,
                    reason: "p".into(),
                    metadata: BTreeMap::new(),
                };
                let _ = h.t.admin_handover(req, now);
            }
            Step::Decide { pick, outcome } => {
                let mut pending = h.t.pending_handovers();
                pending.retain(|p| p.phase == crate::HandoverPhase::Deciding);
                if let Some(p) = pending.get(usize::from(pick) % pending.len().max(1)) {
                    let outcome = match outcome {
                        0 => PolicyOutcome::allow(),
                        1 => PolicyOutcome::Reject { why: "p".into() },
                        _ => PolicyOutcome::RequireHuman,
                    };
                    h.t.policy_decided(p.handover_id, outcome, now).unwrap();
                }
            }
            Step::Tick { ms } => {
                h.advance(u64::from(ms));
            }
            Step::FailGrant => h.t.access_mut().fail_next_grant(),
            Step::FailRevoke => h.t.access_mut().fail_next_revoke(),
            Step::Revoke { fay, short } => {
                let cred = &creds[usize::from(fay)][usize::from(short)];
                let id = Credential::from_bytes(cred)
                    .unwrap()
                    .descriptor()
                    .descriptor_id;
                h.t.revoke(id, now).unwrap();
            }
            Step::Available {
                resource,
                available,
            } => {
                h.t.set_resource_available(RESOURCES[usize::from(resource)], available, now)
                    .unwrap();
            }
            Step::Force { pick: p } => {
                let _ = h.t.force_terminate(pick(p), now);
            }
            Step::Answer { pick, how } => {
                let ops = h.t.pending_os_ops();
                if let Some((op, operation, _)) = ops.get(usize::from(pick) % ops.len().max(1)) {
                    let a = h.t.access_mut();
                    match (how, operation) {
                        (1, crate::OsOperation::Grant) => a.fail_next_grant(),
                        (1, crate::OsOperation::Revoke) => a.fail_next_revoke(),
                        (2, crate::OsOperation::Grant) => a.kill_next_grant(),
                        (2, crate::OsOperation::Revoke) => a.kill_next_revoke(),
                        _ => {}
                    }
                    h.answer(*op);
                }
            }
        }
        for o in self.h.drain() {
            if let Output::StateChanged(c) = o
                && c.to == SessionState::Active
                && !self.seen.contains(&c.session_id)
            {
                self.seen.push(c.session_id);
            }
        }
    }

    fn check(&self) {
        if self.deferred {
            return self.check_deferred();
        }
        let t = &self.h.t;
        let sessions = t.sessions();
        // No transient state survives an input.
        for s in &sessions {
            assert!(
                matches!(s.state, SessionState::Active | SessionState::Terminating),
                "{s:?}"
            );
        }
        check_occupancy(t);
        // TS-4: the OS grants exactly the live sessions, never twice.
        let granted: BTreeSet<AccessGrant> = sessions
            .iter()
            .map(|s| AccessGrant {
                session_id: s.session_id,
                resource_id: s.resource_id.as_str().into(),
                access_mode: s.access_mode,
                holder: s.fay_id.as_str().into(),
            })
            .collect();
        assert_eq!(t.access().granted(), &granted);
        assert_eq!(t.access().violations(), 0);
        // TS-17: per Fay.
        for f in FAYS {
            assert!(sessions.iter().filter(|s| s.fay_id == f).count() <= 3);
        }
    }
}

/// TS-9, HO-4, TS-17 per resource, and TS-8: occupancy is exactly the live
/// sessions (returned as (session, resource, mode)).
fn check_occupancy(t: &Terminal<ScriptedAccess>) -> BTreeSet<(SessionId, String, u8)> {
    // TS-17's per-holder counts are the session table's, holder by holder
    // (zeros may linger until pruned).
    let mut counted: BTreeMap<&str, u32> = BTreeMap::new();
    for rec in t.sessions.values() {
        *counted.entry(rec.holder.id()).or_default() += 1;
    }
    for (holder, &n) in &t.per_holder {
        assert_eq!(
            counted.get(holder.as_str()).copied().unwrap_or(0),
            n,
            "{holder}"
        );
    }
    assert!(counted.keys().all(|h| t.per_holder.contains_key(*h)));
    let mut occupied = BTreeSet::new();
    for r in t.resources() {
        // An exclusive occupant is alone, so at most one controller, and
        // reads never coexist with a writer.
        let exclusive = r
            .occupancy
            .iter()
            .filter(|(_, m, _)| is_exclusive(*m))
            .count();
        assert!(exclusive == 0 || r.occupancy.len() == 1, "{r:?}");
        assert!(r.controllers.len() <= 1 || exclusive == 0, "{r:?}");
        // TS-17: reads per resource.
        assert!(r.occupancy.len() <= 2 || exclusive > 0, "{r:?}");
        for (id, mode, _) in &r.occupancy {
            occupied.insert((*id, r.resource_id.clone(), *mode as u8));
        }
    }
    let live: BTreeSet<_> = t
        .sessions()
        .iter()
        .map(|s| (s.session_id, s.resource_id.clone(), s.access_mode as u8))
        .collect();
    assert_eq!(occupied, live);
    live
}

impl World {
    /// The invariants with operations outstanding (and unknown outcomes):
    /// TS-8, HO-4 in the terminal's view and in the OS, and transient
    /// states only while their operation is out.
    fn check_deferred(&self) {
        let t = &self.h.t;
        let sessions = t.sessions();
        let ops = t.pending_os_ops();
        let pending = t.pending_handovers();
        for s in &sessions {
            match s.state {
                SessionState::Creating => assert!(
                    ops.iter().any(|(_, _, g)| g.session_id == s.session_id),
                    "{s:?} creating without its grant outstanding"
                ),
                SessionState::HandoverPending => assert!(
                    pending.iter().any(|p| p.source_session_id == s.session_id
                        && p.phase == crate::HandoverPhase::Releasing),
                    "{s:?} pending outside T1"
                ),
                _ => {}
            }
        }
        // At most one operation per session.
        let mut per = BTreeSet::new();
        for (_, _, g) in &ops {
            assert!(per.insert(g.session_id), "two operations for {g:?}");
        }
        let live = check_occupancy(t);
        // TS-4 / HO-4 in the OS: nothing granted to an ended session, and
        // an exclusive grant is alone on its resource.
        for g in t.access().granted() {
            assert!(
                live.contains(&(g.session_id, g.resource_id.to_string(), g.access_mode as u8)),
                "{g:?} granted to no live session"
            );
        }
        self.h.check_os_holders();
    }

    /// Answers everything (successfully) and lets the retries run: no
    /// transient state and no operation is left.
    fn settle(&mut self) {
        for _ in 0..64 {
            let ops = self.h.t.pending_os_ops();
            if ops.is_empty() {
                self.h.advance(60_000);
                if self.h.t.pending_os_ops().is_empty() {
                    break;
                }
                continue;
            }
            self.h.answer(ops[0].0);
            self.check();
        }
        assert!(self.h.t.pending_os_ops().is_empty());
        for s in self.h.t.sessions() {
            assert!(
                matches!(s.state, SessionState::Active | SessionState::Terminating),
                "{s:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step(steps in proptest::collection::vec(step(), 1..80)) {
        let mut w = World::new(false);
        for c in [A, B, C] {
            w.h.t.connection_down(c, w.h.now);
        }
        for conn in 0..3u64 {
            w.h.t.connection_up(ConnKey(conn), w.h.now);
        }
        for s in steps {
            w.apply(s);
            w.check();
        }
    }

    #[test]
    fn invariants_hold_with_deferred_os_answers(
        steps in proptest::collection::vec(deferred_step(), 1..100),
    ) {
        let mut w = World::new(true);
        for s in steps {
            w.apply(s);
            w.check();
        }
        w.settle();
    }
}
