//! Tests of the Agreement Manager: one per requirement and rule, negative
//! tests for every bad input, and a property test over random exchanges.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod breaks;
mod prop;
mod timers;

use std::time::Instant;

use dtp_codec::{Body, Decision, ErrorCode, RequestFrame, RequestType, ResponseFrame, Terms};

use super::*;

pub(super) fn terms(kv: &[(&str, &str)]) -> Terms {
    kv.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub(super) fn rnd(n: u8) -> [u8; 16] {
    [n; 16]
}

/// Moves every queued frame of `from` into `to`; returns how many.
pub(super) fn deliver(
    from: &mut AgreementManager,
    to: &mut AgreementManager,
    now: Instant,
) -> usize {
    let mut n = 0;
    while let Some(body) = from.poll_transmit() {
        n += 1;
        match body {
            Body::Request(r) => to.handle_request(r, now).unwrap(),
            Body::Response(r) => to.handle_response(r, now).unwrap(),
            other => panic!("unexpected frame {other:?}"),
        }
    }
    n
}

pub(super) fn events(m: &mut AgreementManager) -> Vec<AgreementEvent> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

pub(super) fn pair(config: AgreementConfig) -> (AgreementManager, AgreementManager) {
    (
        AgreementManager::new(Role::Master, config),
        AgreementManager::new(Role::Slave, config),
    )
}

/// Master asks collection, Slave's app accepts: the agreement id.
pub(super) fn agree(
    master: &mut AgreementManager,
    slave: &mut AgreementManager,
    now: Instant,
    r: u8,
) -> AgreementId {
    let req = master
        .request_collection(terms(&[("rate", "10")]), now)
        .unwrap();
    deliver(master, slave, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = slave.poll_event() else {
        panic!("no request event");
    };
    let id = slave.accept(request_id, rnd(r), now).unwrap();
    deliver(slave, master, now);
    let ev = master.poll_event().unwrap();
    assert!(
        matches!(ev, AgreementEvent::Accepted { request_id, agreement_id, .. } if request_id == req && agreement_id == id)
    );
    id
}

/// SPEC SEQ-3a, AGR-1, AGR-3: collection asked by the Master, decided by the
/// Slave's application, with a UUID v4 minted from the caller's bytes.
#[test]
fn seq3a_collection_accepted_by_the_slave_application() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let req = m
        .request_collection(terms(&[("what", "camera")]), now)
        .unwrap();
    assert_eq!(req, 1);
    assert_eq!(deliver(&mut m, &mut s, now), 1);
    // The receiver does not decide by itself: nothing was answered yet.
    assert!(s.poll_transmit().is_none());
    assert_eq!(
        events(&mut s),
        vec![AgreementEvent::RequestReceived {
            request_id: 1,
            request_type: RequestType::Collection,
            agreement_id: None,
            terms: terms(&[("what", "camera")]),
        }]
    );
    let id = s.accept(1, rnd(7), now).unwrap();
    assert_eq!(id, uuid::Builder::from_random_bytes(rnd(7)).into_uuid());
    assert_eq!(id.get_version_num(), 4);
    deliver(&mut s, &mut m, now);
    assert_eq!(
        events(&mut m),
        vec![AgreementEvent::Accepted {
            request_id: 1,
            agreement_id: id,
            request_type: RequestType::Collection,
            terms: terms(&[("what", "camera")]),
        }]
    );
    for side in [&m, &s] {
        let a = side.check_active(id).unwrap();
        assert_eq!(a.kind, AgreementKind::Collection);
        assert_eq!(a.initiator, Role::Master);
        assert_eq!(a.terms, terms(&[("what", "camera")]));
    }
}

/// SPEC SEQ-3b: injection asked by the Slave, answered by the Master.
#[test]
fn seq3b_injection_answered_by_the_master() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    s.request_injection(terms(&[("k", "v")]), now).unwrap();
    deliver(&mut s, &mut m, now);
    let Some(AgreementEvent::RequestReceived {
        request_id,
        request_type,
        ..
    }) = m.poll_event()
    else {
        panic!()
    };
    assert_eq!(request_type, RequestType::Injection);
    let id = m.accept(request_id, rnd(1), now).unwrap();
    deliver(&mut m, &mut s, now);
    assert!(
        matches!(s.poll_event(), Some(AgreementEvent::Accepted { agreement_id, .. }) if agreement_id == id)
    );
    assert_eq!(s.agreement(id).unwrap().initiator, Role::Slave);
    assert_eq!(m.agreement(id).unwrap().kind, AgreementKind::Injection);
}

/// SPEC SEQ-3a: a rejection and its reason reach the requester.
#[test]
fn seq3a_rejection_reaches_the_requester() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    m.request(Terms::new(), now).unwrap();
    deliver(&mut m, &mut s, now);
    s.poll_event().unwrap();
    s.reject(1, "camera busy").unwrap();
    deliver(&mut s, &mut m, now);
    assert_eq!(
        events(&mut m),
        vec![AgreementEvent::Rejected {
            request_id: 1,
            reason: "camera busy".into()
        }]
    );
    assert_eq!(m.active_count(), 0);
    assert_eq!(m.outstanding_count(), 0);
}

/// SPEC SEQ-3a: a counter-proposal is taken with a new request.
#[test]
fn seq3a_counter_proposal_taken_with_a_new_request() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    m.request(terms(&[("rate", "100")]), now).unwrap();
    deliver(&mut m, &mut s, now);
    s.poll_event().unwrap();
    s.counter_propose(1, terms(&[("rate", "10")])).unwrap();
    deliver(&mut s, &mut m, now);
    let Some(AgreementEvent::CounterProposed {
        request_id: 1,
        terms: t,
        agreement_id: None,
        ..
    }) = m.poll_event()
    else {
        panic!()
    };
    assert_eq!(
        m.outstanding_count(),
        0,
        "a counter-proposal closes the request"
    );
    let second = m.request(t, now).unwrap();
    assert_eq!(second, 2);
    deliver(&mut m, &mut s, now);
    let Some(AgreementEvent::RequestReceived {
        request_id: 2,
        terms: t2,
        ..
    }) = s.poll_event()
    else {
        panic!()
    };
    assert_eq!(t2, terms(&[("rate", "10")]));
    let id = s.accept(2, rnd(3), now).unwrap();
    deliver(&mut s, &mut m, now);
    assert_eq!(m.agreement(id).unwrap().terms, terms(&[("rate", "10")]));
}

/// SPEC SEQ-3a/3b: a request of the wrong role is refused, locally and from the peer.
#[test]
fn wrong_role_is_refused() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    assert!(matches!(
        s.request_collection(Terms::new(), now),
        Err(AgreementError::WrongRole { .. })
    ));
    assert!(matches!(
        m.request_injection(Terms::new(), now),
        Err(AgreementError::WrongRole { .. })
    ));
    let bad = RequestFrame {
        request_id: 1,
        request_type: RequestType::Collection,
        agreement_id: None,
        terms: Terms::new(),
    };
    let err = m.handle_request(bad, now).unwrap_err();
    assert!(matches!(
        err,
        AgreementError::WrongRole {
            role: Role::Slave,
            ..
        }
    ));
    assert_eq!(err.code(), ErrorCode::INCONSISTENT);
    let bad = RequestFrame {
        request_id: 1,
        request_type: RequestType::Injection,
        agreement_id: None,
        terms: Terms::new(),
    };
    assert!(matches!(
        s.handle_request(bad, now),
        Err(AgreementError::WrongRole { .. })
    ));
}

/// SPEC AGR-2: an adjustment of an unknown agreement is UNKNOWN_AGREEMENT (3002).
#[test]
fn adjustment_of_unknown_agreement_is_3002_locally_and_rejected_from_the_peer() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let ghost = uuid::Builder::from_random_bytes(rnd(9)).into_uuid();
    let err = m.request_adjustment(ghost, Terms::new(), now).unwrap_err();
    assert_eq!(err.code(), ErrorCode::UNKNOWN_AGREEMENT);
    let err = m.terminate(ghost, "", now).unwrap_err();
    assert_eq!(err.code(), ErrorCode::UNKNOWN_AGREEMENT);
    let frame = RequestFrame {
        request_id: 1,
        request_type: RequestType::Adjustment,
        agreement_id: Some(ghost),
        terms: Terms::new(),
    };
    // From the peer it is a race, not a fault (the agreement may have just
    // ended here): the request is answered with a rejection.
    s.handle_request(frame, now).unwrap();
    match s.poll_transmit() {
        Some(Body::Response(r)) => {
            assert_eq!(r.request_id, 1);
            assert!(
                matches!(&r.decision, Decision::Rejected { reason } if reason.contains("no such active agreement")),
                "{r:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// SPEC AGR-2: an accepted adjustment keeps the id and changes the terms on
/// both sides; a rejected one keeps the old terms.
#[test]
fn adjustment_accepted_then_rejected() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let id = agree(&mut m, &mut s, now, 1);
    let r = s
        .request_adjustment(id, terms(&[("rate", "5")]), now)
        .unwrap();
    assert!(matches!(
        s.request_adjustment(id, Terms::new(), now),
        Err(AgreementError::AdjustmentInProgress { .. })
    ));
    deliver(&mut s, &mut m, now);
    let Some(AgreementEvent::RequestReceived {
        request_id,
        request_type: RequestType::Adjustment,
        agreement_id: Some(a),
        ..
    }) = m.poll_event()
    else {
        panic!()
    };
    assert_eq!(a, id);
    assert_eq!(m.accept(request_id, rnd(99), now).unwrap(), id);
    deliver(&mut m, &mut s, now);
    assert!(
        matches!(s.poll_event(), Some(AgreementEvent::Accepted { request_id, request_type: RequestType::Adjustment, .. }) if request_id == r)
    );
    assert_eq!(s.agreement(id).unwrap().terms, terms(&[("rate", "5")]));
    assert_eq!(m.agreement(id).unwrap().terms, terms(&[("rate", "5")]));

    m.request_adjustment(id, terms(&[("rate", "50")]), now)
        .unwrap();
    deliver(&mut m, &mut s, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!()
    };
    s.reject(request_id, "too fast").unwrap();
    deliver(&mut s, &mut m, now);
    assert!(matches!(
        m.poll_event(),
        Some(AgreementEvent::Rejected { .. })
    ));
    assert_eq!(m.agreement(id).unwrap().terms, terms(&[("rate", "5")]));
    assert_eq!(m.active_count(), 1);
}

/// Adjustment glare: both sides adjust at once, the Master's wins.
#[test]
fn adjustment_glare_master_wins() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let id = agree(&mut m, &mut s, now, 1);
    m.request_adjustment(id, terms(&[("by", "master")]), now)
        .unwrap();
    s.request_adjustment(id, terms(&[("by", "slave")]), now)
        .unwrap();
    deliver(&mut m, &mut s, now);
    deliver(&mut s, &mut m, now);
    // The Master rejected the Slave's on its own.
    deliver(&mut m, &mut s, now);
    assert!(events(&mut m).is_empty());
    let ev = events(&mut s);
    assert!(
        ev.iter().any(
            |e| matches!(e, AgreementEvent::Rejected { reason, .. } if reason.contains("glare"))
        )
    );
    let rid = ev
        .iter()
        .find_map(|e| match e {
            AgreementEvent::RequestReceived { request_id, .. } => Some(*request_id),
            _ => None,
        })
        .unwrap();
    s.accept(rid, rnd(0), now).unwrap();
    deliver(&mut s, &mut m, now);
    assert_eq!(m.agreement(id).unwrap().terms, terms(&[("by", "master")]));
    assert_eq!(s.agreement(id).unwrap().terms, terms(&[("by", "master")]));
}

/// SPEC AGR-2: termination is an adjustment with `dtp.terminate`; both
/// sides reach `terminated`, and the id is no longer usable for data.
#[test]
fn agr2_termination_ends_the_agreement_on_both_sides() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let id = agree(&mut m, &mut s, now, 1);
    let id2 = agree(&mut m, &mut s, now, 2);
    m.terminate(id, "done", now).unwrap();
    assert_eq!(m.agreement(id).unwrap().state, AgreementState::Terminating);
    assert_eq!(
        m.check_active(id).unwrap_err().code(),
        ErrorCode::UNKNOWN_AGREEMENT
    );
    let Some(Body::Request(frame)) = m.poll_transmit() else {
        panic!()
    };
    assert_eq!(frame.terms, terms(&[(TERMINATE_KEY, "done")]));
    s.handle_request(frame, now).unwrap();
    assert_eq!(
        events(&mut s),
        vec![AgreementEvent::Terminated {
            agreement_id: id,
            by: EndedBy::Peer
        }]
    );
    assert!(s.agreement(id).is_none());
    deliver(&mut s, &mut m, now);
    assert_eq!(
        events(&mut m),
        vec![AgreementEvent::Terminated {
            agreement_id: id,
            by: EndedBy::Local
        }]
    );
    assert!(m.agreement(id).is_none());
    // The other agreement is untouched (AGR-4).
    assert!(m.check_active(id2).is_ok() && s.check_active(id2).is_ok());
}

/// Request ids: a response to an unknown id, a duplicate id, inconsistent frames.
#[test]
fn bad_peer_frames_are_typed_errors() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let resp = ResponseFrame {
        request_id: 42,
        decision: Decision::Rejected {
            reason: String::new(),
        },
    };
    let err = m.handle_response(resp, now).unwrap_err();
    assert_eq!(err, AgreementError::UnknownRequest { request_id: 42 });
    assert_eq!(err.code(), ErrorCode::INVALID_VALUE);

    let req = |request_id, request_type, agreement_id| RequestFrame {
        request_id,
        request_type,
        agreement_id,
        terms: Terms::new(),
    };
    s.handle_request(req(5, RequestType::Collection, None), now)
        .unwrap();
    for dup in [5, 4, 0] {
        let err = s
            .handle_request(req(dup, RequestType::Collection, None), now)
            .unwrap_err();
        assert!(
            matches!(err, AgreementError::DuplicateRequestId { highest: 5, .. }),
            "{dup}"
        );
    }
    let some = Some(uuid::Builder::from_random_bytes(rnd(1)).into_uuid());
    assert!(matches!(
        s.handle_request(req(6, RequestType::Collection, some), now),
        Err(AgreementError::Inconsistent(_))
    ));
    assert!(matches!(
        s.handle_request(req(7, RequestType::Adjustment, None), now),
        Err(AgreementError::Inconsistent(_))
    ));
    // Reserved keys from the peer.
    let mut f = req(8, RequestType::Collection, None);
    f.terms = terms(&[("dtp.other", "x")]);
    assert!(matches!(
        s.handle_request(f, now),
        Err(AgreementError::ReservedTerm { .. })
    ));
    let mut f = req(9, RequestType::Collection, None);
    f.terms = terms(&[(TERMINATE_KEY, "")]);
    assert!(matches!(
        s.handle_request(f, now),
        Err(AgreementError::Inconsistent(_))
    ));
    // The app answering a request that is not pending.
    assert!(matches!(
        s.accept(77, rnd(1), now),
        Err(AgreementError::UnknownRequest { .. })
    ));
    assert!(matches!(
        s.reject(77, ""),
        Err(AgreementError::UnknownRequest { .. })
    ));
    assert!(matches!(
        s.counter_propose(77, Terms::new()),
        Err(AgreementError::UnknownRequest { .. })
    ));
}

/// Accepted responses must carry a fresh UUID v4; adjustments echo the id.
#[test]
fn bad_accepted_ids_are_refused() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    m.request(Terms::new(), now).unwrap();
    m.poll_transmit();
    let nil = ResponseFrame {
        request_id: 1,
        decision: Decision::Accepted {
            agreement_id: uuid::Uuid::nil(),
        },
    };
    assert!(matches!(
        m.handle_response(nil, now),
        Err(AgreementError::InvalidAgreementId { .. })
    ));
    let id = agree(&mut m, &mut s, now, 1);
    // A second Accepted naming the same id is a duplicate.
    m.request(Terms::new(), now).unwrap();
    let Some(Body::Request(r)) = m.poll_transmit() else {
        panic!()
    };
    let dup = ResponseFrame {
        request_id: r.request_id,
        decision: Decision::Accepted { agreement_id: id },
    };
    assert!(matches!(
        m.handle_response(dup, now),
        Err(AgreementError::DuplicateAgreementId { .. })
    ));
    // An adjustment answered with another id.
    let r = m.request_adjustment(id, Terms::new(), now).unwrap();
    let other = uuid::Builder::from_random_bytes(rnd(2)).into_uuid();
    let bad = ResponseFrame {
        request_id: r,
        decision: Decision::Accepted {
            agreement_id: other,
        },
    };
    assert!(matches!(
        m.handle_response(bad, now),
        Err(AgreementError::Inconsistent(_))
    ));
    // The app minting an id already in use.
    let (mut m2, mut s2) = pair(AgreementConfig::default());
    agree(&mut m2, &mut s2, now, 4);
    m2.request(Terms::new(), now).unwrap();
    deliver(&mut m2, &mut s2, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s2.poll_event() else {
        panic!()
    };
    assert!(matches!(
        s2.accept(request_id, rnd(4), now),
        Err(AgreementError::DuplicateAgreementId { .. })
    ));
    assert!(
        s2.accept(request_id, rnd(5), now).is_ok(),
        "still pending after the refusal"
    );
}

/// Reserved keys and oversize input from the application.
#[test]
fn bad_application_input_is_refused() {
    let now = Instant::now();
    let config = AgreementConfig {
        max_terms: 2,
        ..AgreementConfig::default()
    };
    let (mut m, _) = pair(config);
    assert!(matches!(
        m.request(terms(&[("dtp.x", "1")]), now),
        Err(AgreementError::ReservedTerm { .. })
    ));
    let err = m
        .request(terms(&[("a", ""), ("b", ""), ("c", "")]), now)
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::LIMIT_EXCEEDED);
    let (mut m, mut s) = pair(AgreementConfig::default());
    let id = agree(&mut m, &mut s, now, 1);
    let long = "x".repeat(MAX_REASON_LEN + 1);
    assert!(matches!(
        m.terminate(id, &long, now),
        Err(AgreementError::TooLarge { what: "reason", .. })
    ));
    m.request(Terms::new(), now).unwrap();
    deliver(&mut m, &mut s, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!()
    };
    assert!(matches!(
        s.reject(request_id, &long),
        Err(AgreementError::TooLarge { .. })
    ));
    assert!(matches!(
        s.counter_propose(request_id, terms(&[("dtp.y", "")])),
        Err(AgreementError::ReservedTerm { .. })
    ));
}

/// SPEC AGR-4: several agreements at once, bounded by the ceiling (requests
/// in flight hold a slot); the peer's extra requests are rejected.
#[test]
fn agr4_concurrent_agreements_within_the_ceiling() {
    let now = Instant::now();
    let config = AgreementConfig {
        max_active_agreements: 3,
        ..AgreementConfig::default()
    };
    let (mut m, mut s) = pair(config);
    let a = agree(&mut m, &mut s, now, 1);
    let b = agree(&mut m, &mut s, now, 2);
    assert_ne!(a, b);
    m.request(Terms::new(), now).unwrap();
    let err = m.request(Terms::new(), now).unwrap_err();
    assert_eq!(err, AgreementError::TooManyAgreements { max: 3 });
    deliver(&mut m, &mut s, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!()
    };
    s.accept(request_id, rnd(3), now).unwrap();
    deliver(&mut s, &mut m, now);
    assert_eq!((m.active_count(), s.active_count()), (3, 3));
    // The Slave (a peer of another implementation) gets a fourth request: auto-rejected.
    let extra = RequestFrame {
        request_id: 100,
        request_type: RequestType::Collection,
        agreement_id: None,
        terms: Terms::new(),
    };
    s.handle_request(extra, now).unwrap();
    let Some(Body::Response(ResponseFrame {
        decision: Decision::Rejected { reason },
        ..
    })) = s.poll_transmit()
    else {
        panic!()
    };
    assert!(reason.contains("too many"));
    assert!(s.poll_event().is_none());
}

/// Ceilings on requests in flight, pending peer requests and queued frames.
#[test]
fn request_ceilings_are_typed_errors() {
    let now = Instant::now();
    let config = AgreementConfig {
        max_outstanding_requests: 2,
        max_pending_incoming: 1,
        max_queued_transmits: 3,
        ..AgreementConfig::default()
    };
    let (mut m, mut s) = pair(config);
    m.request(Terms::new(), now).unwrap();
    m.request(Terms::new(), now).unwrap();
    assert_eq!(
        m.request(Terms::new(), now).unwrap_err(),
        AgreementError::TooManyOutstanding { max: 2 }
    );
    deliver(&mut m, &mut s, now);
    // The second request found the pending slot taken: auto-rejected "busy".
    assert_eq!(s.pending_incoming_count(), 1);
    let Some(Body::Response(ResponseFrame {
        request_id: 2,
        decision: Decision::Rejected { reason },
    })) = s.poll_transmit()
    else {
        panic!()
    };
    assert!(reason.contains("busy"));
    // Fill the Slave's transmit queue with rejections, then the next request errs.
    for id in 3..=5 {
        let f = RequestFrame {
            request_id: id,
            request_type: RequestType::Collection,
            agreement_id: None,
            terms: Terms::new(),
        };
        s.handle_request(f, now).unwrap();
    }
    let f = RequestFrame {
        request_id: 6,
        request_type: RequestType::Collection,
        agreement_id: None,
        terms: Terms::new(),
    };
    let err = s.handle_request(f, now).unwrap_err();
    assert_eq!(err, AgreementError::TransmitQueueFull { max: 3 });
    assert_eq!(err.code(), ErrorCode::LIMIT_EXCEEDED);
    assert!(matches!(
        s.accept(1, rnd(1), now),
        Err(AgreementError::TransmitQueueFull { .. })
    ));
}
