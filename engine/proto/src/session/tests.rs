//! Tests of the Session Manager: one per requirement, negative tests for
//! every bad input, and a property test over random session lifecycles.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use dtp_codec::{ErrorCode, SessionId, Terms};
use proptest::prelude::*;

use super::*;
use crate::agreement::{AgreementKind, PersistedAgreement};
use crate::fsm::{EngineEvent as E, EngineState as S};

/// A store shared by several managers (two nodes over one etcd, say).
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<MemorySessionStore>>);

impl SessionStore for Shared {
    fn load(&self, id: SessionId) -> Result<Option<(SessionSnapshot, Revision)>, StoreError> {
        self.0.borrow().load(id)
    }
    fn save(&mut self, s: &SessionSnapshot, e: Option<Revision>) -> Result<Revision, StoreError> {
        self.0.borrow_mut().save(s, e)
    }
    fn delete(&mut self, id: SessionId, e: Revision) -> Result<(), StoreError> {
        self.0.borrow_mut().delete(id, e)
    }
}

fn peer(name: &str) -> PeerIdentity {
    PeerIdentity::new(name.as_bytes().to_vec()).unwrap()
}

fn manager() -> SessionManager {
    SessionManager::new(SessionConfig::default(), MemorySessionStore::new(8))
}

fn agreements() -> AgreementSnapshot {
    AgreementSnapshot {
        agreements: vec![PersistedAgreement {
            id: uuid::Builder::from_random_bytes([3; 16]).into_uuid(),
            kind: AgreementKind::Collection,
            initiator: Role::Master,
            terms: Terms::from([("rate".to_owned(), "10".to_owned())]),
        }],
        terminating: vec![],
        next_request_id: 4,
        highest_peer_request_id: 2,
        ..AgreementSnapshot::default()
    }
}

const POS: ResumePositions = ResumePositions {
    next_send_sequence: 42,
    highest_received: 17,
};

/// Establish a session for `who` and drive it to Transmitting.
fn transmitting<St: SessionStore>(
    m: &mut SessionManager<St>,
    who: &str,
    r: u8,
    now: Instant,
) -> SessionId {
    let id = m
        .establish(peer(who), Role::Master, [r; 16], now, 1_000)
        .unwrap();
    m.handle_event(id, E::RequestFrameSentOrReceived, now)
        .unwrap();
    assert_eq!(
        m.handle_event(id, E::AgreementReached, now).unwrap(),
        S::Transmitting
    );
    id
}

/// SPEC SEQ-2, SES-1: after CAP, a UUID v4 Session_ID and SessionEstablished.
#[test]
fn seq2_establish_gives_a_v4_session_in_session_established() {
    let now = Instant::now();
    let mut m = manager();
    let id = m
        .establish(peer("fay-1"), Role::Slave, [9; 16], now, 1_000)
        .unwrap();
    assert_eq!(id, uuid::Builder::from_random_bytes([9; 16]).into_uuid());
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(m.state(id), Some(S::SessionEstablished));
    assert_eq!(m.peer(id), Some(&peer("fay-1")));
    assert_eq!(m.key_version(id), Some(1));
    let err = m
        .establish(peer("fay-2"), Role::Slave, [9; 16], now, 1_000)
        .unwrap_err();
    assert_eq!(err, SessionError::DuplicateSessionId { session_id: id });
}

/// SPEC SES-1: close ends the session and cleans its stored record.
#[test]
fn ses1_close_cleans_the_store() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    m.suspend(id, agreements(), POS, now, 1_010).unwrap();
    assert_eq!(m.store().len(), 1);
    m.close(id).unwrap();
    assert_eq!(m.store().len(), 0);
    assert_eq!(m.state(id), None);
    let err = m.close(id).unwrap_err();
    assert_eq!(err.code(), ErrorCode::E_SESSION_NOT_FOUND);
}

/// SPEC SES-2, SEQ-5: a dropped connection persists everything needed.
#[test]
fn ses2_suspend_persists_the_session() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    let rev = m.suspend(id, agreements(), POS, now, 1_010).unwrap();
    assert_eq!(m.state(id), Some(S::Suspended));
    let (snap, stored_rev) = m.store().load(id).unwrap().unwrap();
    assert_eq!(stored_rev, rev);
    assert_eq!(
        snap,
        SessionSnapshot {
            session_id: id,
            peer: peer("fay"),
            role: Role::Master,
            agreements: agreements(),
            positions: POS,
            key_version: 1,
            established_at_unix: 1_000,
            suspended_at_unix: 1_010,
            expires_at_unix: 1_310,
            live: false,
        }
    );
}

/// SPEC FSM-2, SES-2: only a transmitting session is suspended.
#[test]
fn ses2_suspend_outside_transmitting_is_illegal() {
    let now = Instant::now();
    let mut m = manager();
    let id = m
        .establish(peer("fay"), Role::Master, [1; 16], now, 0)
        .unwrap();
    let err = m.suspend(id, agreements(), POS, now, 0).unwrap_err();
    assert!(matches!(err, SessionError::Illegal(_)));
    assert_eq!(m.state(id), Some(S::SessionEstablished));
    assert_eq!(m.store().len(), 0);
    let ghost = uuid::Builder::from_random_bytes([7; 16]).into_uuid();
    assert!(matches!(
        m.suspend(ghost, agreements(), POS, now, 0),
        Err(SessionError::UnknownSession { .. })
    ));
}

/// SPEC SES-3: the same peer restores, sequences continue, the key version
/// goes up; the resume handshake then returns to Transmitting.
#[test]
fn ses3_restore_continues_sequences_and_bumps_the_key_version() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    m.suspend(id, agreements(), POS, now, 1_010).unwrap();
    let back = m.restore(id, &peer("fay"), now, 1_020).unwrap();
    assert_eq!(back.positions, POS);
    assert_eq!(back.agreements, agreements());
    assert_eq!(back.key_version, 2);
    assert_eq!(m.key_version(id), Some(2));
    assert_eq!(m.state(id), Some(S::Resuming));
    assert_eq!(
        m.handle_event(id, E::ResumeHandshakeDone, now).unwrap(),
        S::Transmitting
    );
    // A second break persists again, fenced by the restore's revision.
    m.suspend(
        id,
        agreements(),
        ResumePositions {
            next_send_sequence: 50,
            highest_received: 20,
        },
        now,
        1_030,
    )
    .unwrap();
    let again = m.restore(id, &peer("fay"), now, 1_040).unwrap();
    assert_eq!(again.key_version, 3);
    assert_eq!(again.positions.next_send_sequence, 50);
}

/// SPEC SES-3: another peer asking for the session is refused, with the
/// same code as an unknown session, and the session stays restorable.
#[test]
fn ses3_restore_by_another_peer_is_refused() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    m.suspend(id, agreements(), POS, now, 1_010).unwrap();
    let err = m.restore(id, &peer("mallory"), now, 1_020).unwrap_err();
    assert_eq!(
        err,
        SessionError::ResumeRefused {
            session_id: id,
            reason: ResumeRefusal::PeerMismatch
        }
    );
    let ghost = uuid::Builder::from_random_bytes([8; 16]).into_uuid();
    let unknown = m.restore(ghost, &peer("mallory"), now, 1_020).unwrap_err();
    assert_eq!(err.code(), ErrorCode::RESUME_FAILED);
    assert_eq!(unknown.code(), ErrorCode::RESUME_FAILED);
    assert_eq!(m.state(id), Some(S::Suspended));
    assert!(m.restore(id, &peer("fay"), now, 1_020).is_ok());
}

/// SPEC SES-3: a live session is not restored a second time; an expired
/// record is refused and deleted; exhausted key versions are refused.
#[test]
fn ses3_restore_refusals() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    let err = m.restore(id, &peer("fay"), now, 1_000).unwrap_err();
    assert_eq!(
        err,
        SessionError::ResumeRefused {
            session_id: id,
            reason: ResumeRefusal::NotSuspended
        }
    );
    m.suspend(id, agreements(), POS, now, 1_000).unwrap();
    let err = m.restore(id, &peer("fay"), now, 1_301).unwrap_err();
    assert_eq!(
        err,
        SessionError::ResumeRefused {
            session_id: id,
            reason: ResumeRefusal::Expired
        }
    );
    assert_eq!(m.store().len(), 0);
    assert_eq!(m.state(id), None);

    let id = transmitting(&mut m, "fay", 2, now);
    m.suspend(id, agreements(), POS, now, 1_000).unwrap();
    let (mut snap, rev) = m.store().load(id).unwrap().unwrap();
    snap.key_version = u16::MAX;
    m.store_mut().save(&snap, Some(rev)).unwrap();
    let err = m.restore(id, &peer("fay"), now, 1_000).unwrap_err();
    assert!(matches!(
        err,
        SessionError::ResumeRefused {
            reason: ResumeRefusal::KeyVersionsExhausted,
            ..
        }
    ));
}

/// SPEC SES-3, DESIGN §3: a session suspended on one node is restored on
/// another through a shared store, and the first node, now a stale writer,
/// is refused.
#[test]
fn ses3_restore_on_another_node_fences_the_stale_one() {
    let now = Instant::now();
    let store = Shared::default();
    let mut a = SessionManager::new(SessionConfig::default(), store.clone());
    let mut b = SessionManager::new(SessionConfig::default(), store.clone());
    let id = transmitting(&mut a, "fay", 1, now);
    a.suspend(id, agreements(), POS, now, 1_000).unwrap();
    let back = b.restore(id, &peer("fay"), now, 1_001).unwrap();
    assert_eq!((back.key_version, back.positions), (2, POS));
    assert_eq!(b.state(id), Some(S::Resuming));
    // While b serves it, nobody else restores it.
    let err = a.restore(id, &peer("fay"), now, 1_002).unwrap_err();
    assert!(matches!(
        err,
        SessionError::ResumeRefused {
            reason: ResumeRefusal::NotSuspended,
            ..
        }
    ));
    // b loses its connection too and persists; a, still holding the old
    // revision, is now a stale writer and is fenced off.
    b.handle_event(id, E::ResumeHandshakeDone, now).unwrap();
    b.suspend(id, agreements(), POS, now, 1_003).unwrap();
    let err = a.restore(id, &peer("fay"), now, 1_004).unwrap_err();
    assert!(
        matches!(err, SessionError::Store(StoreError::Conflict { .. })),
        "{err}"
    );
    assert_eq!(err.code(), ErrorCode::RESUME_FAILED);
    let back = b.restore(id, &peer("fay"), now, 1_005).unwrap();
    assert_eq!(back.key_version, 3);
    // A third node cannot take the live session either.
    let mut c = SessionManager::new(SessionConfig::default(), store.clone());
    let err = c.restore(id, &peer("fay"), now, 1_002).unwrap_err();
    assert!(matches!(
        err,
        SessionError::ResumeRefused {
            reason: ResumeRefusal::NotSuspended,
            ..
        }
    ));
    // The stale node's timer releases its copy without deleting b's record.
    a.handle_timeout(now + Duration::from_secs(300));
    assert_eq!(
        a.poll_event(),
        Some(SessionEvent::SuspendExpired { session_id: id })
    );
    assert_eq!(store.0.borrow().len(), 1);
}

/// SPEC SES-4: a SessionEstablished session without traffic is closed with
/// SESSION_TIMEOUT; traffic postpones it; transmitting sessions are not idle-timed.
#[test]
fn ses4_idle_timeout() {
    let now = Instant::now();
    let config = SessionConfig {
        idle_timeout: Duration::from_secs(30),
        ..SessionConfig::default()
    };
    let mut m = SessionManager::new(config, MemorySessionStore::new(8));
    let quiet = m
        .establish(peer("a"), Role::Master, [1; 16], now, 0)
        .unwrap();
    let busy = transmitting(&mut m, "b", 2, now);
    assert_eq!(m.poll_timeout(), Some(now + Duration::from_secs(30)));
    m.touch(quiet, now + Duration::from_secs(20)).unwrap();
    m.handle_timeout(now + Duration::from_secs(30));
    assert_eq!(m.poll_event(), None);
    let t = now + Duration::from_secs(50);
    assert_eq!(m.poll_timeout(), Some(t));
    m.handle_timeout(t);
    let ev = m.poll_event().unwrap();
    assert_eq!(ev, SessionEvent::IdleTimeout { session_id: quiet });
    assert_eq!(ev.code(), ErrorCode::SESSION_TIMEOUT);
    assert_eq!(m.state(quiet), None);
    assert_eq!(m.state(busy), Some(S::Transmitting));
    assert_eq!(m.poll_timeout(), None);
}

/// SPEC SES-4: a suspended session not restored in time is released and
/// its record deleted.
#[test]
fn ses4_suspend_timeout_releases_the_session() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    m.suspend(id, agreements(), POS, now, 0).unwrap();
    let deadline = now + SessionConfig::default().suspend_timeout;
    assert_eq!(m.poll_timeout(), Some(deadline));
    m.handle_timeout(deadline - Duration::from_secs(1));
    assert_eq!(m.state(id), Some(S::Suspended));
    m.handle_timeout(deadline);
    assert_eq!(
        m.poll_event(),
        Some(SessionEvent::SuspendExpired { session_id: id })
    );
    assert_eq!(m.store().len(), 0);
    assert!(matches!(
        m.restore(id, &peer("fay"), now, 0),
        Err(SessionError::ResumeRefused {
            reason: ResumeRefusal::UnknownSession,
            ..
        })
    ));
}

/// SPEC SEQ-5: a failed resume closes the session and deletes its record.
#[test]
fn seq5_resume_failure_closes() {
    let now = Instant::now();
    let mut m = manager();
    let id = transmitting(&mut m, "fay", 1, now);
    assert!(matches!(m.resume_failed(id), Err(SessionError::Illegal(_))));
    m.suspend(id, agreements(), POS, now, 0).unwrap();
    m.restore(id, &peer("fay"), now, 0).unwrap();
    m.resume_failed(id).unwrap();
    assert_eq!(m.state(id), None);
    assert_eq!(m.store().len(), 0);
}

/// Negative tests: dedicated events, unknown sessions, ceilings.
#[test]
fn bad_inputs_are_typed_errors() {
    let now = Instant::now();
    let config = SessionConfig {
        max_sessions: 1,
        ..SessionConfig::default()
    };
    let mut m = SessionManager::new(config, MemorySessionStore::new(0));
    let id = m
        .establish(peer("a"), Role::Master, [1; 16], now, 0)
        .unwrap();
    for event in [
        E::ConnectionLost,
        E::ConnectionBackCapReverified,
        E::ResumeFailed,
        E::SessionTimeout,
        E::CapVerified,
        E::ConnectionRequestReceived,
        E::CapFailedOrTimeout,
    ] {
        assert_eq!(
            m.handle_event(id, event, now).unwrap_err(),
            SessionError::DedicatedEntryPoint { event }
        );
    }
    let err = m.handle_event(id, E::FragmentSent, now).unwrap_err();
    assert_eq!(err.code(), ErrorCode::INCONSISTENT);
    let ghost = uuid::Builder::from_random_bytes([2; 16]).into_uuid();
    assert!(matches!(
        m.touch(ghost, now),
        Err(SessionError::UnknownSession { .. })
    ));
    assert!(matches!(
        m.handle_event(ghost, E::FragmentSent, now),
        Err(SessionError::UnknownSession { .. })
    ));
    let err = m
        .establish(peer("b"), Role::Master, [2; 16], now, 0)
        .unwrap_err();
    assert_eq!(err, SessionError::TooManySessions { max: 1 });
    assert_eq!(err.code(), ErrorCode::LIMIT_EXCEEDED);
    // The store is full: suspend fails and the session stays transmitting.
    m.handle_event(id, E::RequestFrameSentOrReceived, now)
        .unwrap();
    m.handle_event(id, E::AgreementReached, now).unwrap();
    let err = m.suspend(id, agreements(), POS, now, 0).unwrap_err();
    assert_eq!(err, SessionError::Store(StoreError::Full { max: 0 }));
    assert_eq!(m.state(id), Some(S::Transmitting));
    let long = PeerIdentity::new(vec![0u8; MAX_PEER_IDENTITY_LEN + 1]).unwrap_err();
    assert_eq!(long.code(), ErrorCode::LIMIT_EXCEEDED);
}

/// The store refuses stale and blind writes (fencing).
#[test]
fn memory_store_fences_writes() {
    let mut store = MemorySessionStore::new(2);
    let snap = SessionSnapshot {
        session_id: uuid::Builder::from_random_bytes([1; 16]).into_uuid(),
        peer: peer("a"),
        role: Role::Slave,
        agreements: AgreementSnapshot::default(),
        positions: POS,
        key_version: 1,
        established_at_unix: 0,
        suspended_at_unix: 0,
        expires_at_unix: 10,
        live: false,
    };
    let r1 = store.save(&snap, None).unwrap();
    assert!(matches!(
        store.save(&snap, None),
        Err(StoreError::Conflict { .. })
    ));
    let r2 = store.save(&snap, Some(r1)).unwrap();
    assert!(r2 > r1);
    assert!(matches!(
        store.save(&snap, Some(r1)),
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        store.delete(snap.session_id, r1),
        Err(StoreError::Conflict { .. })
    ));
    store.delete(snap.session_id, r2).unwrap();
    store.delete(snap.session_id, r2).unwrap();
    assert!(store.is_empty());
}

/// Timers wait while the event queue is full (bounded memory).
#[test]
fn session_events_are_bounded() {
    let now = Instant::now();
    let config = SessionConfig {
        max_queued_events: 1,
        idle_timeout: Duration::from_secs(1),
        ..SessionConfig::default()
    };
    let mut m = SessionManager::new(config, MemorySessionStore::new(8));
    m.establish(peer("a"), Role::Master, [1; 16], now, 0)
        .unwrap();
    m.establish(peer("b"), Role::Master, [2; 16], now, 0)
        .unwrap();
    let t = now + Duration::from_secs(1);
    m.handle_timeout(t);
    assert_eq!(m.len(), 1);
    m.handle_timeout(t);
    assert_eq!(m.len(), 1, "waits for the queue to drain");
    assert!(m.poll_event().is_some());
    m.handle_timeout(t);
    assert!(m.is_empty());
}

#[derive(Clone, Debug)]
enum Op {
    Establish(u8),
    Event(usize, usize),
    Suspend(usize),
    Restore(usize, bool),
    Close(usize),
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u8>().prop_map(Op::Establish),
        (0usize..4, 0usize..14).prop_map(|(s, e)| Op::Event(s, e)),
        (0usize..4).prop_map(Op::Suspend),
        (0usize..4, any::<bool>()).prop_map(|(s, p)| Op::Restore(s, p)),
        (0usize..4).prop_map(Op::Close),
        (0u64..40).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// SPEC FSM-2, SES-1 … SES-4: on random lifecycles, sessions stay within
    /// the ceiling, every suspended session has its record, no record
    /// outlives its session, and no error ever panics.
    #[test]
    fn session_random_lifecycles_keep_invariants(ops in prop::collection::vec(op(), 1..100)) {
        let config = SessionConfig {
            max_sessions: 3,
            idle_timeout: Duration::from_secs(30),
            suspend_timeout: Duration::from_secs(60),
            max_queued_events: 4,
        };
        let mut m = SessionManager::new(config, MemorySessionStore::new(3));
        let mut now = Instant::now();
        let mut unix = 1_000u64;
        let mut ids: Vec<(SessionId, String)> = vec![];
        for op in ops {
            let pick = |i: usize| ids.get(i % ids.len().max(1)).cloned();
            match op {
                Op::Establish(r) => {
                    let who = format!("fay-{}", r % 3);
                    if let Ok(id) = m.establish(peer(&who), Role::Master, [r; 16], now, unix) { ids.push((id, who)); }
                }
                Op::Event(i, e) => if let Some((id, _)) = pick(i) {
                    let before = m.state(id);
                    match m.handle_event(id, E::ALL[e], now) {
                        Ok(after) => prop_assert_eq!(crate::fsm::next(before.unwrap(), E::ALL[e]).ok(), Some(after)),
                        Err(_) => prop_assert_eq!(m.state(id), before),
                    }
                }
                Op::Suspend(i) => if let Some((id, _)) = pick(i) {
                    let _ = m.suspend(id, agreements(), POS, now, unix);
                }
                Op::Restore(i, right) => if let Some((id, who)) = pick(i) {
                    let asker = if right { who } else { "mallory".to_owned() };
                    let r = m.restore(id, &peer(&asker), now, unix);
                    if !right { prop_assert!(r.is_err()); }
                }
                Op::Close(i) => if let Some((id, _)) = pick(i) { let _ = m.close(id); }
                Op::Advance(s) => {
                    now += Duration::from_secs(s);
                    unix += s;
                    m.handle_timeout(now);
                    while m.poll_event().is_some() {}
                }
            }
            prop_assert!(m.len() <= config.max_sessions);
            for (id, _) in &ids {
                let stored = m.store().load(*id).unwrap();
                match m.state(*id) {
                    Some(S::Suspended) => prop_assert!(stored.is_some()),
                    None => prop_assert!(stored.is_none(), "record outlived its session"),
                    _ => {}
                }
            }
        }
    }
}
