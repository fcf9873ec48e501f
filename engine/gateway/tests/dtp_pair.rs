//! SPEC SEQ-1 … SEQ-5 end to end through two `DtpEndpoint`s (a Fay and a
//! terminal) joined by a simulated in-order link, in virtual time: CAP with
//! real keys, sessions, agreements, fragments through the DAG, resume after
//! cuts at any byte, and the negative paths.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_codec::{
    Body, DataFrame, ErrorCode, HandshakeFrame, Limits, LogicalFrame, Relation, RelationType,
    RequestType, decode_frame,
};
use dtp_crypto::cap::NoiseKeypair;
use dtp_crypto::cred::{Credential, IssuerKeyPair};
use dtp_gateway::dtp::{DtpEndpoint, DtpError, DtpEvent, EngineState, FayConfig};
use proptest::prelude::*;

#[path = "dtp_pair/harness.rs"]
mod harness;

use harness::*;

// ----- SEQ-1 … SEQ-5, every phase -----

/// SPEC SEQ-1 … SEQ-5, FSM-1, AGR-1 … AGR-4, DAG-1 … DAG-3, RES-1 … RES-3,
/// SES-1 … SES-4: a Master (Fay) and a Slave (terminal) through CAP, the
/// session, collection with a counter-proposal then accept, injection,
/// fragments out of DAG order, an adjustment, a disconnect and resume under
/// a new key version, termination and the idle timeout.
#[test]
fn seq_every_phase_master_and_slave() {
    let mut p = Pair::new(World::new());
    assert_eq!(p.fay.ep.state(), EngineState::WaitingForCap);
    assert_eq!(p.term.ep.state(), EngineState::WaitingForCap);

    // SEQ-1, SEQ-2: CAP, then one Session_ID on both sides.
    p.drive();
    let (fay_sid, fay_resumed) = established(&p.fay.take_events()).unwrap();
    let (term_sid, _) = established(&p.term.take_events()).unwrap();
    assert_eq!(fay_sid, term_sid);
    assert!(!fay_resumed);
    assert_eq!(fay_sid.get_version_num(), 4);
    assert_eq!(p.fay.ep.state(), EngineState::SessionEstablished);
    assert_eq!(p.term.ep.state(), EngineState::SessionEstablished);
    assert_eq!(p.term.ep.peer().unwrap().as_bytes(), b"fay-1");
    assert_eq!(p.term.ep.peer_credential().unwrap().fay_id(), "fay-1");
    assert_eq!(p.fay.ep.key_version(), 1);
    assert_eq!(p.term.ep.key_version(), 1);

    // SEQ-3a: collection; the Slave counter-proposes, the Master takes it.
    let req = p
        .fay
        .ep
        .request_collection(terms(&[("rate", "10")]), p.now)
        .unwrap();
    assert_eq!(p.fay.ep.state(), EngineState::Negotiating);
    p.drive();
    assert_eq!(p.term.ep.state(), EngineState::Negotiating);
    let (their_req, kind) = requested(&p.term.take_events()).unwrap();
    assert_eq!(kind, RequestType::Collection);
    p.term
        .ep
        .counter_propose(their_req, terms(&[("rate", "5")]), p.now)
        .unwrap();
    assert_eq!(p.term.ep.state(), EngineState::SessionEstablished);
    p.drive();
    let counter = p.fay.take_events();
    assert!(counter.iter().any(|e| matches!(e,
        DtpEvent::CounterProposal { request_id, terms, .. }
            if *request_id == req && terms.get("rate").map(String::as_str) == Some("5"))));
    assert_eq!(p.fay.ep.state(), EngineState::SessionEstablished);
    p.fay
        .ep
        .request_collection(terms(&[("rate", "5")]), p.now)
        .unwrap();
    p.drive();
    let (their_req, _) = requested(&p.term.take_events()).unwrap();
    let random = p.rng.bytes16();
    let collection = p.term.ep.accept(their_req, random, p.now).unwrap();
    assert_eq!(collection.get_version_num(), 4);
    p.drive();
    assert_eq!(active(&p.fay.take_events()), vec![(collection, false)]);
    assert_eq!(active(&p.term.take_events()), vec![(collection, false)]);
    assert_eq!(p.fay.ep.state(), EngineState::Transmitting);
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);

    // SEQ-3b: injection, requested by the Slave.
    p.term
        .ep
        .request_injection(terms(&[("what", "config")]), p.now)
        .unwrap();
    p.drive();
    let (their_req, kind) = requested(&p.fay.take_events()).unwrap();
    assert_eq!(kind, RequestType::Injection);
    let random = p.rng.bytes16();
    let injection = p.fay.ep.accept(their_req, random, p.now).unwrap();
    p.drive();
    assert_eq!(active(&p.term.take_events()), vec![(injection, false)]);
    assert_eq!(p.fay.ep.agreements().count(), 2);

    // SEQ-4, DAG-2, DAG-3: fragment 3 (derived from 2) before 2 (annotates 1).
    p.term
        .ep
        .send_fragment(collection, 1, vec![], Bytes::from_static(b"one"))
        .unwrap();
    p.term
        .ep
        .send_fragment(collection, 3, derived_from(2), Bytes::from_static(b"three"))
        .unwrap();
    let annotates_1 = vec![Relation {
        kind: RelationType::Annotates,
        target: 1,
    }];
    p.term
        .ep
        .send_fragment(collection, 2, annotates_1, Bytes::from_static(b"two"))
        .unwrap();
    p.fay
        .ep
        .send_fragment(injection, 10, vec![], Bytes::from_static(b"cfg"))
        .unwrap();
    p.drive();
    assert_eq!(
        p.fay.fragments(),
        vec![(collection, 1), (collection, 2), (collection, 3)]
    );
    assert_eq!(p.term.fragments(), vec![(injection, 10)]);
    let payloads: Vec<Bytes> = p
        .fay
        .events
        .iter()
        .filter_map(|e| match e {
            DtpEvent::Fragment { payload, .. } => Some(payload.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(payloads, [&b"one"[..], b"two", b"three"]);
    p.fay.take_events();
    p.term.take_events();

    // An adjustment: the receiver goes Negotiating, then back.
    p.fay
        .ep
        .request_adjustment(collection, terms(&[("rate", "7")]), p.now)
        .unwrap();
    assert_eq!(p.fay.ep.state(), EngineState::Transmitting);
    p.drive();
    assert_eq!(p.term.ep.state(), EngineState::Negotiating);
    let (their_req, kind) = requested(&p.term.take_events()).unwrap();
    assert_eq!(kind, RequestType::Adjustment);
    let random = p.rng.bytes16();
    assert_eq!(
        p.term.ep.accept(their_req, random, p.now).unwrap(),
        collection
    );
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);
    p.drive();
    assert_eq!(active(&p.fay.take_events()), vec![(collection, true)]);
    assert_eq!(active(&p.term.take_events()), vec![(collection, true)]);

    // SEQ-5: fragments 4 and 5 sent; the cut loses the middle of 5.
    p.term
        .ep
        .send_fragment(collection, 4, derived_from(3), Bytes::from_static(b"four"))
        .unwrap();
    p.transmit();
    let first = p.term.in_flight.len();
    p.term
        .ep
        .send_fragment(collection, 5, derived_from(4), Bytes::from_static(b"five"))
        .unwrap();
    p.transmit();
    p.cut(0, first + 10);
    assert_eq!(p.fay.fragments(), vec![(collection, 4)]);
    assert_eq!(p.fay.ep.state(), EngineState::Suspended);
    assert_eq!(p.term.ep.state(), EngineState::Suspended);
    assert_eq!(p.registry.len(), 1);
    let suspended = p.fay_suspended.as_ref().unwrap();
    assert_eq!(suspended.session_id(), fay_sid);
    assert_eq!(suspended.state(), EngineState::Suspended);
    p.fay.take_events();
    p.term.take_events();

    // SES-3: CAP again, new keys at key version 2, RESUME both ways; 5 is
    // resent, 4 is not delivered twice.
    p.reconnect();
    p.drive();
    assert_eq!(established(&p.fay.events), Some((fay_sid, true)));
    assert_eq!(p.fay.fragments(), vec![(collection, 5)]);
    p.fay.take_events();
    let term_events = p.term.take_events();
    assert_eq!(established(&term_events), Some((fay_sid, true)));
    assert_eq!(p.fay.ep.key_version(), 2);
    assert_eq!(p.term.ep.key_version(), 2);
    assert_eq!(p.fay.ep.state(), EngineState::Transmitting);
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);
    assert_eq!(p.registry.len(), 0);
    p.term
        .ep
        .send_fragment(collection, 6, derived_from(5), Bytes::from_static(b"six"))
        .unwrap();
    p.drive();
    assert_eq!(p.fay.fragments(), vec![(collection, 6)]);
    p.fay.take_events();

    // AGR-2: termination, from either side; then SessionEstablished.
    p.fay.ep.terminate(injection, "done", p.now).unwrap();
    p.drive();
    assert!(p.term.take_events().iter().any(|e| matches!(e,
        DtpEvent::AgreementEnded { agreement_id, .. } if *agreement_id == injection)));
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);
    p.term.ep.terminate(collection, "done", p.now).unwrap();
    p.drive();
    assert!(p.fay.take_events().iter().any(|e| matches!(e,
        DtpEvent::AgreementEnded { agreement_id, .. } if *agreement_id == collection)));
    assert_eq!(p.fay.ep.state(), EngineState::SessionEstablished);
    assert_eq!(p.term.ep.state(), EngineState::SessionEstablished);

    // SES-4: no agreement, no traffic: the idle timeout closes with 3003.
    while p.advance() {}
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
    assert_eq!(p.term.ep.state(), EngineState::Idle);
    assert_eq!(p.fay.closed_code(), Some(ErrorCode::SESSION_TIMEOUT));
    assert_eq!(p.term.closed_code(), Some(ErrorCode::SESSION_TIMEOUT));
}

/// SPEC RES-4: at the cache's ceiling `send_fragment` fails with
/// BUFFER_FULL (6001); acks drain it and `Writable` follows.
#[test]
fn res4_buffer_full_then_writable() {
    let mut world = World::new();
    world.endpoint.resume_cache.max_fragments = 4;
    world.endpoint.resume_cache.low_water_fragments = 2;
    world.endpoint.ack.every = 1;
    let (mut p, collection, _) = pair_with_agreements(world);
    for id in 1..=4 {
        p.term
            .ep
            .send_fragment(collection, id, vec![], Bytes::from_static(b"x"))
            .unwrap();
    }
    let err = p
        .term
        .ep
        .send_fragment(collection, 5, vec![], Bytes::from_static(b"x"))
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::BUFFER_FULL);
    assert_eq!(p.term.ep.resume_cache().0, 4);
    p.drive();
    assert!(p.term.events.contains(&DtpEvent::Writable));
    assert_eq!(p.term.ep.resume_cache().0, 0);
    p.term
        .ep
        .send_fragment(collection, 5, vec![], Bytes::from_static(b"x"))
        .unwrap();
}

/// SPEC DAG-1: a fragment closing a cycle is refused with 4001 and not
/// delivered; the connection goes on.
#[test]
fn dag1_cycle_is_reported_and_the_connection_goes_on() {
    let (mut p, collection, _) = pair_with_agreements(World::new());
    p.term
        .ep
        .send_fragment(collection, 1, derived_from(2), Bytes::from_static(b"a"))
        .unwrap();
    p.term
        .ep
        .send_fragment(collection, 2, derived_from(1), Bytes::from_static(b"b"))
        .unwrap();
    p.term
        .ep
        .send_fragment(collection, 3, vec![], Bytes::from_static(b"c"))
        .unwrap();
    p.drive();
    assert!(p.fay.events.iter().any(|e| matches!(e,
        DtpEvent::Error(e) if e.code() == ErrorCode::DAG_CYCLE_DETECTED)));
    assert_eq!(p.fay.fragments(), vec![(collection, 3)]);
    assert!(!p.fay.ep.is_closed());
}

/// SPEC SEQ-5, SES-2: a cut in the middle of the resume handshake (the
/// terminal resumed, the Fay never saw its RESUME) keeps the session on
/// both sides; the next connection resumes it under a higher key version
/// and every fragment still arrives exactly once.
#[test]
fn seq5_cut_during_the_resume_handshake_keeps_the_session() {
    let (mut p, collection, _) = pair_with_agreements(World::new());
    p.term
        .ep
        .send_fragment(collection, 1, vec![], Bytes::from_static(b"1"))
        .unwrap();
    p.transmit();
    let first = p.term.in_flight.len();
    p.term
        .ep
        .send_fragment(collection, 2, derived_from(1), Bytes::from_static(b"2"))
        .unwrap();
    p.transmit();
    p.cut(0, first);
    assert_eq!(p.fay.fragments(), vec![(collection, 1)]);
    p.reconnect();
    p.transmit();
    for _ in 0..10 {
        p.deliver(true, usize::MAX);
        if p.term.ep.state() == EngineState::Transmitting {
            break;
        }
        p.deliver(false, usize::MAX);
    }
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);
    assert_eq!(p.fay.ep.state(), EngineState::Resuming);
    p.cut(0, 0);
    let kept = p.fay_suspended.as_ref().unwrap();
    assert_eq!(kept.key_version(), 2, "the aborted attempt's version");
    assert_eq!(p.registry.len(), 1);
    p.reconnect();
    p.drive();
    assert!(p.fay.ep.is_established() && p.term.ep.is_established());
    assert_eq!(p.fay.ep.key_version(), 3);
    assert_eq!(p.fay.fragments(), vec![(collection, 1), (collection, 2)]);
}

/// SPEC SEQ-5: an acceptance lost in a cut, with data already sent under
/// the new agreement: after the resume the Fay learns of the agreement
/// first (the terminal replays its answers before resending data), gets
/// the data once, and its application hears "active" exactly once.
#[test]
fn seq5_acceptance_lost_in_a_cut_is_replayed_before_the_data() {
    let (mut p, _, _) = pair_with_agreements(World::new());
    p.fay
        .ep
        .request_collection(terms(&[("what", "audio")]), p.now)
        .unwrap();
    p.drive();
    let (req, _) = requested(&p.term.take_events()).unwrap();
    let random = p.rng.bytes16();
    let audio = p.term.ep.accept(req, random, p.now).unwrap();
    p.term
        .ep
        .send_fragment(audio, 1, vec![], Bytes::from_static(b"a1"))
        .unwrap();
    p.transmit();
    p.cut(usize::MAX, 0); // the Accepted and the fragment are lost
    assert!(active(&p.fay.take_events()).is_empty());
    p.reconnect();
    p.drive();
    assert!(p.fay.ep.is_established() && p.term.ep.is_established());
    assert_eq!(p.fay.closed_code(), None);
    assert_eq!(p.fay.fragments(), vec![(audio, 1)]);
    let events = p.fay.take_events();
    assert_eq!(active(&events), vec![(audio, false)], "{events:?}");
}

// ----- negative paths -----

fn decode_close(bytes: &[u8]) -> Option<ErrorCode> {
    let bytes = Bytes::copy_from_slice(bytes);
    match decode_frame(&bytes, &Limits::default()) {
        Ok((
            LogicalFrame {
                body: Body::Close(c),
                ..
            },
            _,
        )) => Some(c.code),
        _ => None,
    }
}

fn plaintext_data_frame() -> BytesMut {
    let frame = LogicalFrame::plain(
        1,
        Body::Data(DataFrame {
            agreement_id: Some(uuid::Uuid::from_u128(1)),
            fragment_id: 1,
            sequence: 1,
            relations: vec![],
            payload: Bytes::from_static(b"early"),
        }),
    );
    BytesMut::from(&frame.to_bytes(&Limits::default()).unwrap()[..])
}

/// SPEC SEQ-1: a data frame before CAP aborts CAP: Idle, close 2001.
#[test]
fn seq1_data_before_cap_closes_with_cap_failed() {
    let world = World::new();
    let now = Instant::now();
    let mut rng = Rng(1);
    let mut term =
        DtpEndpoint::terminal(&world.terminal_config(), now, UNIX, &mut |b| rng.fill(b)).unwrap();
    term.handle_frame(plaintext_data_frame(), now);
    let mut out = BytesMut::new();
    term.poll_transmit(&mut out);
    assert_eq!(decode_close(&out), Some(ErrorCode::CAP_FAILED));
    assert_eq!(term.state(), EngineState::Idle);
    let events: Vec<_> = std::iter::from_fn(|| term.poll_event()).collect();
    assert!(matches!(
        events[0],
        DtpEvent::Error(DtpError::FrameBeforeCap { .. })
    ));
    assert_eq!(
        events[1],
        DtpEvent::Closed {
            code: ErrorCode::CAP_FAILED
        }
    );
    // Nothing more happens after the close.
    term.handle_frame(plaintext_data_frame(), now);
    assert!(term.poll_event().is_none());
}

/// SPEC SEQ-1, ENC-2: after CAP a plaintext frame is refused (5002).
#[test]
fn seq1_plaintext_after_cap_closes() {
    let (mut p, _, _) = pair_with_agreements(World::new());
    p.fay.ep.handle_frame(plaintext_data_frame(), p.now);
    p.fay.drain_events();
    assert_eq!(p.fay.closed_code(), Some(ErrorCode::DECRYPT_FAILED));
    p.drive();
    // The terminal gets the (sealed) close.
    assert_eq!(p.term.closed_code(), Some(ErrorCode::DECRYPT_FAILED));
    assert_eq!(p.term.ep.state(), EngineState::Idle);
}

/// SPEC ENC-2: a sealed frame altered in transit fails authentication.
#[test]
fn enc2_tampered_sealed_frame_closes() {
    let (mut p, collection, _) = pair_with_agreements(World::new());
    p.term
        .ep
        .send_fragment(collection, 1, vec![], Bytes::from_static(b"secret"))
        .unwrap();
    p.transmit();
    let last = p.term.in_flight.len() - 1;
    p.term.in_flight[last - 20] ^= 0x01;
    p.drive();
    assert_eq!(p.fay.closed_code(), Some(ErrorCode::DECRYPT_FAILED));
    assert!(p.fay.fragments().is_empty());
}

/// SPEC ENC-2, SEQ-5: a frame sealed on the previous connection does not
/// open on the resumed one.
#[test]
fn enc2_replayed_frame_from_previous_connection_closes() {
    let (mut p, collection, _) = pair_with_agreements(World::new());
    p.term
        .ep
        .send_fragment(collection, 1, vec![], Bytes::from_static(b"old"))
        .unwrap();
    p.drive();
    let old = p.term_frames.last().unwrap().clone();
    p.cut(0, 0);
    p.reconnect();
    p.drive();
    assert!(p.fay.ep.is_established());
    p.fay.ep.handle_frame(old, p.now);
    p.fay.drain_events();
    let code = p.fay.closed_code().unwrap();
    assert!(
        code == ErrorCode::DECRYPT_FAILED || code == ErrorCode::KEY_VERSION_MISMATCH,
        "{code}"
    );
    assert_eq!(p.fay.fragments(), vec![(collection, 1)]);
}

/// SPEC SEQ-5: RESUME for a session the terminal does not hold.
#[test]
fn seq5_resume_of_unknown_session_fails() {
    let (mut p, _, _) = pair_with_agreements(World::new());
    p.cut(0, 0);
    assert_eq!(p.registry.len(), 1);
    let dropped = p
        .registry
        .take(p.fay_suspended.as_ref().unwrap().session_id(), p.now);
    assert!(dropped.is_some());
    p.reconnect();
    p.drive();
    assert_eq!(p.term.closed_code(), Some(ErrorCode::RESUME_FAILED));
    assert_eq!(p.fay.closed_code(), Some(ErrorCode::RESUME_FAILED));
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
    // The terminal refused: the Fay's copy of the session is gone too.
    assert!(p.fay.ep.take_suspended().is_none());
}

/// SPEC SEQ-5, SES-3: another Fay naming the session is refused
/// (RESUME_FAILED), the session stays in the registry untouched, and its
/// own Fay then resumes it with nothing lost or repeated.
#[test]
fn seq5_resume_by_another_fay_is_refused() {
    let (mut p, collection, _) = pair_with_agreements(World::new());
    p.term
        .ep
        .send_fragment(collection, 1, vec![], Bytes::from_static(b"1"))
        .unwrap();
    p.transmit();
    p.cut(0, 0);
    // An intruder with its own valid credential names the session.
    let own = p.fay_config.clone();
    let intruder_keys = NoiseKeypair::from_private([9; 32]).unwrap();
    let cred = p
        .world
        .credential(&p.world.issuer, &intruder_keys, "fay-2", UNIX + 3600);
    p.fay_config = p.world.fay_config_with(&intruder_keys, cred);
    p.reconnect();
    p.transmit();
    for _ in 0..10 {
        p.deliver(true, usize::MAX);
        if p.term.ep.is_closed() {
            break;
        }
        p.deliver(false, usize::MAX);
    }
    assert_eq!(p.term.closed_code(), Some(ErrorCode::RESUME_FAILED));
    assert!(p.term.events.iter().any(|e| matches!(e,
        DtpEvent::Error(DtpError::ResumeFailed { reason }) if reason.contains("another peer"))));
    assert_eq!(p.registry.len(), 1, "the session is kept for its own Fay");
    // (The intruder's driver gets its copy back: the test reuses it as the
    // rightful Fay's, which is what it is.)
    p.cut(0, 0);
    p.fay.take_events();
    p.term.take_events();
    p.fay_config = own;
    p.reconnect();
    p.drive();
    assert_eq!(established(&p.fay.events).map(|(_, r)| r), Some(true));
    assert_eq!(p.fay.fragments(), vec![(collection, 1)]);
}

fn cap_failure(world: World, fay_config: FayConfig, code: ErrorCode) {
    let mut p = Pair::with_fay(world, fay_config);
    p.drive();
    assert_eq!(p.term.closed_code(), Some(code), "terminal");
    assert_eq!(p.fay.closed_code(), Some(code), "fay");
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
    assert_eq!(p.term.ep.state(), EngineState::Idle);
    assert!(
        p.fay
            .events
            .iter()
            .any(|e| matches!(e, DtpEvent::Error(DtpError::Cap(_))))
    );
}

/// SPEC SEQ-1, FSM: a credential whose signature does not verify (2003).
#[test]
fn cap_bad_credential_ends_idle_with_2003() {
    let world = World::new();
    let cred = world.credential(&world.issuer, &world.fay, "fay-1", UNIX + 3600);
    let mut bytes = cred.as_bytes().to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let forged = Credential::from_bytes(&bytes).unwrap();
    let config = world.fay_config_with(&world.fay, forged);
    cap_failure(world, config, ErrorCode::CREDENTIAL_INVALID);
}

/// SPEC SEQ-1, FSM: an expired credential (2004).
#[test]
fn cap_expired_credential_ends_idle_with_2004() {
    let world = World::new();
    let cred = world.credential(&world.issuer, &world.fay, "fay-1", UNIX - 1);
    let config = world.fay_config_with(&world.fay, cred);
    cap_failure(world, config, ErrorCode::CREDENTIAL_EXPIRED);
}

/// SPEC SEQ-1, FSM: a revoked credential (2005).
#[test]
fn cap_revoked_credential_ends_idle_with_2005() {
    let mut world = World::new();
    let cred = world.credential(&world.issuer, &world.fay, "fay-1", UNIX + 3600);
    world
        .verifier
        .revoke(cred.descriptor().descriptor_id)
        .unwrap();
    let config = world.fay_config_with(&world.fay, cred);
    cap_failure(world, config, ErrorCode::CREDENTIAL_REVOKED);
}

/// SPEC SEQ-1, FSM: a credential from an issuer the terminal does not
/// trust (2006).
#[test]
fn cap_unknown_issuer_ends_idle_with_2006() {
    let world = World::new();
    let stranger = IssuerKeyPair::from_seed(&[8; 32]).unwrap();
    let cred = world.credential(&stranger, &world.fay, "fay-1", UNIX + 3600);
    let config = world.fay_config_with(&world.fay, cred);
    cap_failure(world, config, ErrorCode::UNKNOWN_ISSUER);
}

/// SPEC SEQ-1, FSM: CAP that never finishes times out (2002) on both sides.
#[test]
fn cap_timeout_ends_idle_with_2002() {
    let mut p = Pair::new(World::new());
    // The Fay's first message is lost.
    p.transmit();
    p.fay.in_flight.clear();
    while p.advance() {}
    assert_eq!(p.fay.closed_code(), Some(ErrorCode::CAP_TIMEOUT));
    assert_eq!(p.term.closed_code(), Some(ErrorCode::CAP_TIMEOUT));
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
    assert_eq!(p.term.ep.state(), EngineState::Idle);
}

/// SPEC SEQ-1: a handshake message out of order fails CAP.
#[test]
fn cap_out_of_order_handshake_fails() {
    let world = World::new();
    let now = Instant::now();
    let mut rng = Rng(3);
    let mut term =
        DtpEndpoint::terminal(&world.terminal_config(), now, UNIX, &mut |b| rng.fill(b)).unwrap();
    let frame = LogicalFrame::plain(
        0,
        Body::Handshake(HandshakeFrame {
            stage: 3,
            message: Bytes::from_static(b"nonsense"),
        }),
    );
    term.handle_frame(
        BytesMut::from(&frame.to_bytes(&Limits::default()).unwrap()[..]),
        now,
    );
    assert_eq!(term.state(), EngineState::Idle);
    assert_eq!(term.close_code(), Some(ErrorCode::CAP_FAILED));
}

/// Ends the injection on the Fay's side only (its termination request is
/// held back until it times out), then lets the terminal send under it.
fn data_after_local_end(world: World) -> Pair {
    let (mut p, collection, _) = pair_with_agreements(world);
    p.fay.ep.terminate(collection, "bye", p.now).unwrap();
    p.transmit();
    let held = std::mem::take(&mut p.fay.in_flight);
    p.now += Duration::from_secs(11);
    let now = p.now;
    p.fay.ep.handle_timeout(now);
    p.fay.drain_events();
    assert!(
        p.fay
            .events
            .iter()
            .any(|e| matches!(e, DtpEvent::AgreementEnded { .. }))
    );
    p.term
        .ep
        .send_fragment(collection, 1, vec![], Bytes::from_static(b"late"))
        .unwrap();
    p.transmit();
    p.deliver(false, usize::MAX);
    drop(held);
    p
}

/// SPEC SEQ-4: a data frame naming an agreement that is not active closes
/// the connection with UNKNOWN_AGREEMENT (3002); the application's own
/// send under an unknown agreement is refused with the same code.
#[test]
fn seq4_data_for_unknown_agreement_closes_with_3002() {
    let mut world = World::new();
    world.endpoint.recently_ended = 0;
    let mut p = data_after_local_end(world);
    assert_eq!(p.fay.closed_code(), Some(ErrorCode::UNKNOWN_AGREEMENT));
    assert!(p.fay.fragments().is_empty());
    let err = p
        .term
        .ep
        .send_fragment(uuid::Uuid::from_u128(5), 1, vec![], Bytes::new())
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::UNKNOWN_AGREEMENT);
    p.drive();
}

/// Data the peer sent before it learnt an agreement ended is dropped, not
/// treated as an error.
#[test]
fn data_for_a_recently_ended_agreement_is_dropped() {
    let p = data_after_local_end(World::new());
    assert!(p.fay.closed_code().is_none());
    assert!(p.fay.fragments().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Nothing panics on peer input after CAP either: random frames, sealed
    /// or not, end the connection with a typed close.
    #[test]
    fn hostile_frames_after_cap_close_cleanly(
        kind in 1u8..=8,
        aead in 0u8..=2,
        body in prop::collection::vec(any::<u8>(), 24..96),
    ) {
        let (mut p, _, _) = pair_with_agreements(World::new());
        let mut wire = BytesMut::new();
        wire.extend_from_slice(&[0xD7, 0x50, 1, kind, 0, aead, 0, u8::from(aead != 0), 0, 0, 0, 1]);
        wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
        wire.extend_from_slice(&body);
        p.fay.ep.handle_frame(wire, p.now);
        p.fay.drain_events();
        if let Some(code) = p.fay.closed_code() {
            prop_assert_ne!(code, ErrorCode::NORMAL);
            prop_assert_eq!(p.fay.ep.state(), EngineState::Idle);
        }
        p.drive();
    }
}

// ----- random schedules of cuts -----

#[derive(Clone, Debug)]
enum Op {
    /// The terminal (true) or the Fay sends `n` fragments.
    Send { terminal: bool, n: u8 },
    /// Up to `n` bytes travel one way.
    Deliver { to_terminal: bool, n: u16 },
    /// The connection is cut after these fractions (per mille) of the
    /// bytes in flight each way; a new connection resumes.
    Cut {
        keep_to_terminal: u16,
        keep_to_fay: u16,
    },
    /// Time moves to the next timer (delayed acks).
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 1u8..6).prop_map(|(terminal, n)| Op::Send { terminal, n }),
        4 => (any::<bool>(), 1u16..400).prop_map(|(to_terminal, n)| Op::Deliver { to_terminal, n }),
        1 => (0u16..=1000, 0u16..=1000)
            .prop_map(|(keep_to_terminal, keep_to_fay)| Op::Cut { keep_to_terminal, keep_to_fay }),
        2 => Just(Op::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

    /// SPEC RES-1 … RES-4, SEQ-5, DAG-3: over random schedules of sends,
    /// partial deliveries, ack timing and cuts at any byte (mid-frame
    /// included), each application sees every fragment of every agreement
    /// exactly once and in order; the resume cache never exceeds its
    /// ceiling, and BUFFER_FULL is what a send at the ceiling gets.
    #[test]
    fn res_every_fragment_exactly_once_in_order_across_cuts(ops in prop::collection::vec(op(), 1..60)) {
        let mut world = World::new();
        world.endpoint.resume_cache.max_fragments = 6;
        world.endpoint.resume_cache.low_water_fragments = 3;
        world.endpoint.ack.every = 3;
        world.endpoint.ack.delay = Duration::from_millis(5);
        let max = world.endpoint.resume_cache.max_fragments;
        let (mut p, collection, injection) = pair_with_agreements(world);
        let mut sent_by_term: Vec<u64> = Vec::new();
        let mut sent_by_fay: Vec<u64> = Vec::new();
        let mut next_id = 1u64;
        // SPEC RES-4 with hysteresis: the first BUFFER_FULL comes at the
        // ceiling; the sender stays paused until Writable.
        let mut paused = [false, false];
        let mut writable_seen = [0usize, 0usize];
        for op in ops {
            for (i, end) in [&p.fay, &p.term].into_iter().enumerate() {
                let n = end.events.iter().filter(|e| **e == DtpEvent::Writable).count();
                if n > writable_seen[i] {
                    writable_seen[i] = n;
                    paused[i] = false;
                }
            }
            match op {
                Op::Send { terminal, n } => {
                    for _ in 0..n {
                        let (end, agreement, sent) = if terminal {
                            (&mut p.term, collection, &mut sent_by_term)
                        } else {
                            (&mut p.fay, injection, &mut sent_by_fay)
                        };
                        let relations = sent.last().map(|prev| derived_from(*prev)).unwrap_or_default();
                        let payload = Bytes::from(next_id.to_be_bytes().to_vec());
                        match end.ep.send_fragment(agreement, next_id, relations, payload) {
                            Ok(_) => { sent.push(next_id); next_id += 1; }
                            Err(e) if e.code() == ErrorCode::BUFFER_FULL => {
                                let side = usize::from(terminal);
                                if !paused[side] {
                                    prop_assert_eq!(end.ep.resume_cache().0, max);
                                    paused[side] = true;
                                }
                                break;
                            }
                            Err(DtpError::NotEstablished { .. }) => break,
                            Err(e) => prop_assert!(false, "send failed: {e}"),
                        }
                        prop_assert!(end.ep.resume_cache().0 <= max);
                    }
                    p.transmit();
                }
                Op::Deliver { to_terminal, n } => p.deliver(to_terminal, usize::from(n)),
                Op::Cut { keep_to_terminal, keep_to_fay } => {
                    let a = p.fay.in_flight.len() * usize::from(keep_to_terminal) / 1000;
                    let b = p.term.in_flight.len() * usize::from(keep_to_fay) / 1000;
                    p.cut(a, b);
                    prop_assert!(p.fay_suspended.is_some(), "the Fay always keeps its session");
                    p.reconnect();
                    p.transmit();
                }
                Op::Tick => p.tick(5),
            }
            prop_assert!(p.fay.ep.resume_cache().0 <= max);
            prop_assert!(p.term.ep.resume_cache().0 <= max);
            prop_assert!(p.fay.closed_code().is_none(), "fay closed: {:?}", p.fay.events);
            prop_assert!(p.term.closed_code().is_none(), "terminal closed: {:?}", p.term.events);
        }
        // Heal: run the link and the timers until everything arrived.
        for _ in 0..50 {
            p.drive();
            p.now += Duration::from_millis(5);
            let now = p.now;
            p.fay.ep.handle_timeout(now);
            p.term.ep.handle_timeout(now);
        }
        p.drive();
        prop_assert!(p.fay.ep.is_established() && p.term.ep.is_established());
        let got_by_fay: Vec<u64> = p.fay.fragments().into_iter().map(|(a, id)| { assert_eq!(a, collection); id }).collect();
        let got_by_term: Vec<u64> = p.term.fragments().into_iter().map(|(a, id)| { assert_eq!(a, injection); id }).collect();
        prop_assert_eq!(got_by_fay, sent_by_term);
        prop_assert_eq!(got_by_term, sent_by_fay);
        prop_assert_eq!(p.fay.ep.resume_cache().0, 0);
        prop_assert_eq!(p.term.ep.resume_cache().0, 0);
    }
}
