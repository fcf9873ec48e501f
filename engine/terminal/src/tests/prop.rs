//! Property test: random sequences of every input, with OS failures, and
//! after EVERY step the invariants of SPEC TS-8, TS-9, TS-17, HO-4 and TS-4.

use std::collections::BTreeSet;

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
}

impl World {
    fn new() -> Self {
        let mut c = config();
        c.limits.per_fay = 3;
        c.limits.reads_per_resource = 2;
        c.handover.queue_capacity = 2;
        let mut h = Harness::with(c);
        let creds = FAYS
            .iter()
            .map(|f| [h.cred(f), h.cred_with(f, all_grants(), 60)])
            .collect();
        World {
            h,
            creds,
            seen: Vec::new(),
        }
    }

    fn apply(&mut self, s: Step) {
        let World { h, creds, seen } = self;
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
                let pending = h.t.pending_handovers();
                if let Some(p) = pending.get(usize::from(pick) % pending.len().max(1)) {
                    let outcome = match outcome {
                        0 => PolicyOutcome::Allow,
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
        let t = &self.h.t;
        let sessions = t.sessions();
        // No transient state survives an input.
        for s in &sessions {
            assert!(
                matches!(s.state, SessionState::Active | SessionState::Terminating),
                "{s:?}"
            );
        }
        let mut occupied = BTreeSet::new();
        for r in t.resources() {
            // TS-9 / HO-4: an exclusive occupant is alone, so at most one
            // controller, and reads never coexist with a writer.
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
        // TS-8: occupancy is exactly the live sessions.
        let live: BTreeSet<_> = sessions
            .iter()
            .map(|s| (s.session_id, s.resource_id.clone(), s.access_mode as u8))
            .collect();
        assert_eq!(occupied, live);
        // TS-4: the OS grants exactly the live sessions, never twice.
        let granted: BTreeSet<AccessGrant> = sessions
            .iter()
            .map(|s| AccessGrant {
                session_id: s.session_id,
                resource_id: s.resource_id.clone(),
                access_mode: s.access_mode,
                holder: s.fay_id.clone(),
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step(steps in proptest::collection::vec(step(), 1..80)) {
        let mut w = World::new();
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
}
