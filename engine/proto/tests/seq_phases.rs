//! SPEC SEQ-2 … SEQ-5 at the agreement/session level, in virtual time: a
//! Master and a Slave, each made of a `SessionManager` (with its engine
//! state machine) and an `AgreementManager`, exchange frames through a
//! lossless in-memory link. CAP is a stub that always succeeds; time only
//! moves when the test says so.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::{Duration, Instant};

use dtp_codec::{AgreementId, Body, ErrorCode, RequestType, ResumeFrame, SessionId, Terms};
use dtp_proto::agreement::{AgreementConfig, AgreementEvent, AgreementManager, EndedBy, Role};
use dtp_proto::fsm::{EngineEvent as E, EngineState as S};
use dtp_proto::session::{
    MemorySessionStore, PeerIdentity, ResumePositions, SessionConfig, SessionError, SessionEvent,
    SessionManager,
};

/// One engine: its sessions, its current session's agreements, and the
/// resume positions the Resume Manager would keep.
struct Engine {
    role: Role,
    sessions: SessionManager,
    agreements: AgreementManager,
    session: SessionId,
    peer: PeerIdentity,
    next_send_sequence: u64,
    highest_received: u64,
}

impl Engine {
    /// SEQ-1/SEQ-2: the CAP stub verified `peer`; the session starts.
    fn after_cap(role: Role, peer: &str, session_bytes: [u8; 16], now: Instant) -> Self {
        let peer = PeerIdentity::new(peer.as_bytes().to_vec()).unwrap();
        let config = SessionConfig {
            idle_timeout: Duration::from_secs(30),
            suspend_timeout: Duration::from_secs(120),
            ..SessionConfig::default()
        };
        let mut sessions = SessionManager::new(config, MemorySessionStore::new(16));
        let session = sessions
            .establish(peer.clone(), role, session_bytes, now, 1_700_000_000)
            .unwrap();
        Self {
            role,
            sessions,
            agreements: AgreementManager::new(role, AgreementConfig::default()),
            session,
            peer,
            next_send_sequence: 1,
            highest_received: 0,
        }
    }

    fn state(&self) -> S {
        self.sessions.state(self.session).unwrap()
    }

    fn fsm(&mut self, event: E, now: Instant) -> S {
        self.sessions
            .handle_event(self.session, event, now)
            .unwrap()
    }

    fn events(&mut self) -> Vec<AgreementEvent> {
        std::iter::from_fn(|| self.agreements.poll_event()).collect()
    }

    fn send_fragment(&mut self, agreement: AgreementId, now: Instant) -> u64 {
        self.agreements.check_active(agreement).unwrap();
        let seq = self.next_send_sequence;
        self.next_send_sequence += 1;
        self.fsm(E::FragmentSent, now);
        seq
    }
}

/// Moves every frame from `from` to `to`, feeding the receiver's engine the
/// table's events for what arrived (the driver's mapping, see fsm docs).
fn deliver(from: &mut Engine, to: &mut Engine, now: Instant) {
    while let Some(body) = from.agreements.poll_transmit() {
        to.sessions.touch(to.session, now).unwrap();
        match body {
            Body::Request(r) => {
                let adjustment = r.request_type == RequestType::Adjustment;
                to.agreements.handle_request(r, now).unwrap();
                match (to.state(), adjustment) {
                    (S::SessionEstablished, false) => {
                        to.fsm(E::RequestFrameSentOrReceived, now);
                    }
                    (S::Transmitting, true) if to.agreements.pending_incoming_count() > 0 => {
                        to.fsm(E::AdjustmentRequestReceived, now);
                    }
                    _ => {}
                }
            }
            Body::Response(r) => to.agreements.handle_response(r, now).unwrap(),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// After a negotiation ends on `side`: agreement in force → AgreementReached,
/// none → NegotiationFailed (only from Negotiating).
fn settle(side: &mut Engine, now: Instant) {
    if side.state() == S::Negotiating {
        let event = if side.agreements.active_count() > 0 {
            E::AgreementReached
        } else {
            E::NegotiationFailed
        };
        side.fsm(event, now);
    }
}

fn terms(kv: &[(&str, &str)]) -> Terms {
    kv.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// SPEC SEQ-2, SEQ-3a (with a counter-proposal), SEQ-3b, SEQ-4, an
/// adjustment, SEQ-5 (suspend, CAP re-verification, resume) and the end of
/// both agreements, then the idle timeout.
#[test]
fn seq_phases_master_and_slave() {
    let t0 = Instant::now();
    let mut now = t0;
    // SEQ-2: the stub CAP gives both ends the same session bytes.
    let mut master = Engine::after_cap(Role::Master, "slave-terminal", [0x5a; 16], now);
    let mut slave = Engine::after_cap(Role::Slave, "fay-master", [0x5a; 16], now);
    assert_eq!(master.session, slave.session);
    assert_eq!(master.session.get_version_num(), 4);
    assert_eq!(
        (master.state(), slave.state()),
        (S::SessionEstablished, S::SessionEstablished)
    );

    // SEQ-3a: collection, counter-proposed, then taken with a new request.
    master
        .agreements
        .request_collection(terms(&[("rate", "100")]), now)
        .unwrap();
    master.fsm(E::RequestFrameSentOrReceived, now);
    deliver(&mut master, &mut slave, now);
    assert_eq!(slave.state(), S::Negotiating);
    let [AgreementEvent::RequestReceived { request_id, .. }] = slave.events()[..] else {
        panic!()
    };
    slave
        .agreements
        .counter_propose(request_id, terms(&[("rate", "10")]))
        .unwrap();
    settle(&mut slave, now);
    deliver(&mut slave, &mut master, now);
    settle(&mut master, now);
    assert_eq!(
        (master.state(), slave.state()),
        (S::SessionEstablished, S::SessionEstablished)
    );
    let [AgreementEvent::CounterProposed { terms: offered, .. }] = &master.events()[..] else {
        panic!()
    };
    master
        .agreements
        .request_collection(offered.clone(), now)
        .unwrap();
    master.fsm(E::RequestFrameSentOrReceived, now);
    deliver(&mut master, &mut slave, now);
    let [AgreementEvent::RequestReceived { request_id, .. }] = slave.events()[..] else {
        panic!()
    };
    let collection = slave.agreements.accept(request_id, [1; 16], now).unwrap();
    settle(&mut slave, now);
    deliver(&mut slave, &mut master, now);
    settle(&mut master, now);
    assert_eq!(
        (master.state(), slave.state()),
        (S::Transmitting, S::Transmitting)
    );
    assert_eq!(
        master.agreements.agreement(collection).unwrap().terms,
        terms(&[("rate", "10")])
    );
    master.events();

    // SEQ-3b while transmitting: injection asked by the Slave (the table has
    // no row for a new request in Transmitting: the engine stays there).
    slave
        .agreements
        .request_injection(terms(&[("kind", "log")]), now)
        .unwrap();
    deliver(&mut slave, &mut master, now);
    let [
        AgreementEvent::RequestReceived {
            request_id,
            request_type: RequestType::Injection,
            ..
        },
    ] = master.events()[..]
    else {
        panic!()
    };
    let injection = master.agreements.accept(request_id, [2; 16], now).unwrap();
    deliver(&mut master, &mut slave, now);
    slave.events();
    assert_eq!(
        (
            master.agreements.active_count(),
            slave.agreements.active_count()
        ),
        (2, 2)
    );

    // SEQ-4: fragments flow under both agreements.
    for _ in 0..3 {
        now += Duration::from_millis(10);
        let seq = slave.send_fragment(collection, now);
        master.highest_received = seq;
    }
    slave.send_fragment(injection, now);
    assert_eq!(slave.state(), S::Transmitting);

    // Adjustment by the Master: the Slave negotiates, then transmits again.
    master
        .agreements
        .request_adjustment(collection, terms(&[("rate", "20")]), now)
        .unwrap();
    deliver(&mut master, &mut slave, now);
    assert_eq!(
        (master.state(), slave.state()),
        (S::Transmitting, S::Negotiating)
    );
    let [AgreementEvent::RequestReceived { request_id, .. }] = slave.events()[..] else {
        panic!()
    };
    assert_eq!(
        slave.agreements.accept(request_id, [0; 16], now).unwrap(),
        collection
    );
    settle(&mut slave, now);
    deliver(&mut slave, &mut master, now);
    assert_eq!(slave.state(), S::Transmitting);
    for side in [&master, &slave] {
        assert_eq!(
            side.agreements.agreement(collection).unwrap().terms,
            terms(&[("rate", "20")])
        );
    }
    master.events();

    // SEQ-5: the connection drops; both persist and suspend.
    now += Duration::from_secs(5);
    for side in [&mut master, &mut slave] {
        side.agreements.on_connection_lost();
        let positions = ResumePositions {
            next_send_sequence: side.next_send_sequence,
            highest_received: side.highest_received,
        };
        let snapshot = side.agreements.snapshot();
        side.sessions
            .suspend(side.session, snapshot, positions, now, 1_700_000_005)
            .unwrap();
        assert_eq!(side.state(), S::Suspended);
    }
    // Someone else asking for the Master's session is refused.
    let mallory = PeerIdentity::new(b"mallory".to_vec()).unwrap();
    let err = master
        .sessions
        .restore(master.session, &mallory, now, 1_700_000_006)
        .unwrap_err();
    assert!(matches!(err, SessionError::ResumeRefused { .. }));
    assert_eq!(err.code(), ErrorCode::RESUME_FAILED);

    // The connection comes back; the stub CAP re-verifies the same peers.
    now += Duration::from_secs(20);
    let mut reports = vec![];
    for side in [&mut master, &mut slave] {
        let peer = side.peer.clone();
        let back = side
            .sessions
            .restore(side.session, &peer, now, 1_700_000_025)
            .unwrap();
        assert_eq!(side.state(), S::Resuming);
        assert_eq!(back.key_version, 2);
        side.agreements =
            AgreementManager::restore(side.role, AgreementConfig::default(), back.agreements, now)
                .unwrap();
        side.next_send_sequence = back.positions.next_send_sequence;
        side.highest_received = back.positions.highest_received;
        // RES-3: each reports the highest sequence it received.
        reports.push(ResumeFrame {
            session_id: side.session,
            highest_received: side.highest_received,
        });
    }
    assert_eq!(
        reports[0].highest_received, 3,
        "the Master got fragments 1..=3"
    );
    for side in [&mut master, &mut slave] {
        side.fsm(E::ResumeHandshakeDone, now);
        assert_eq!(side.state(), S::Transmitting);
    }
    assert_eq!(
        slave.send_fragment(collection, now),
        5,
        "sequences continue"
    );
    assert_eq!(
        master.agreements.agreement(injection).unwrap().terms,
        terms(&[("kind", "log")])
    );
    assert_eq!(
        slave.agreements.agreement(collection).unwrap().terms,
        terms(&[("rate", "20")])
    );

    // Both agreements end; the last one takes the engines back to
    // SessionEstablished.
    master
        .agreements
        .terminate(collection, "enough", now)
        .unwrap();
    deliver(&mut master, &mut slave, now);
    deliver(&mut slave, &mut master, now);
    slave.agreements.terminate(injection, "done", now).unwrap();
    deliver(&mut slave, &mut master, now);
    deliver(&mut master, &mut slave, now);
    for side in [&mut master, &mut slave] {
        let ended: Vec<_> = side
            .events()
            .into_iter()
            .filter(|e| {
                matches!(
                    e,
                    AgreementEvent::Terminated {
                        by: EndedBy::Local | EndedBy::Peer,
                        ..
                    }
                )
            })
            .collect();
        assert_eq!(ended.len(), 2);
        assert_eq!(side.agreements.active_count(), 0);
        side.fsm(E::AgreementEndedNoOtherActive, now);
        assert_eq!(side.state(), S::SessionEstablished);
    }

    // SES-4: no traffic for the idle timeout closes the session.
    let wake = master.sessions.poll_timeout().unwrap();
    assert_eq!(wake, now + Duration::from_secs(30));
    master.sessions.handle_timeout(wake);
    let ev = master.sessions.poll_event().unwrap();
    assert_eq!(
        ev,
        SessionEvent::IdleTimeout {
            session_id: master.session
        }
    );
    assert_eq!(ev.code(), ErrorCode::SESSION_TIMEOUT);
    assert!(master.sessions.is_empty());
    assert!(
        master.sessions.store().is_empty(),
        "the store is cleaned on close"
    );
    assert!(now > t0);
}

/// SPEC SEQ-5, SES-4: a suspended session whose peer never comes back is
/// released after the suspend timeout, and cannot be resumed afterwards.
#[test]
fn seq5_suspended_session_not_resumed_is_released() {
    let mut now = Instant::now();
    let mut slave = Engine::after_cap(Role::Slave, "fay", [7; 16], now);
    slave
        .agreements
        .request_injection(Terms::new(), now)
        .unwrap();
    slave.fsm(E::RequestFrameSentOrReceived, now);
    slave.agreements.poll_transmit().unwrap();
    slave.fsm(E::AgreementReached, now);
    slave.agreements.on_connection_lost();
    let snapshot = slave.agreements.snapshot();
    slave
        .sessions
        .suspend(slave.session, snapshot, ResumePositions::default(), now, 0)
        .unwrap();
    now += Duration::from_secs(120);
    assert_eq!(slave.sessions.poll_timeout(), Some(now));
    slave.sessions.handle_timeout(now);
    assert_eq!(
        slave.sessions.poll_event(),
        Some(SessionEvent::SuspendExpired {
            session_id: slave.session
        })
    );
    let peer = slave.peer.clone();
    assert!(
        slave
            .sessions
            .restore(slave.session, &peer, now, 1)
            .is_err()
    );
}
