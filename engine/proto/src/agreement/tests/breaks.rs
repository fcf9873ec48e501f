//! Agreements across a connection break (SPEC SES-2, SES-3, SEQ-5): what the
//! snapshot keeps, and how requests and answers lost with the connection
//! are sent again so that both sides end up agreeing.

use std::time::{Duration, Instant};

use dtp_codec::{Body, RequestFrame, RequestType, Terms};

use super::{agree, deliver, events, pair, rnd, terms};
use crate::agreement::*;

/// Both sides lose the connection and are restored from their snapshots.
fn cut(m: &mut AgreementManager, s: &mut AgreementManager, config: AgreementConfig, now: Instant) {
    for side in [m, s] {
        side.on_connection_lost();
        let role = side.role();
        *side = AgreementManager::restore(role, config, side.snapshot(), now).unwrap();
    }
}

fn ids(m: &AgreementManager) -> Vec<(AgreementId, Terms)> {
    m.agreements().map(|a| (a.id, a.terms.clone())).collect()
}

/// SPEC SES-2, SES-3: agreements in force, request ids and a termination in
/// progress survive a break; a request in flight is sent again with its id.
#[test]
fn snapshot_keeps_agreements_ids_and_requests_in_flight() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let a = agree(&mut m, &mut s, now, 1);
    let b = agree(&mut m, &mut s, now, 2);
    m.terminate(b, "", now).unwrap();
    let pending = m.request(terms(&[("k", "v")]), now).unwrap();
    m.on_connection_lost();
    assert_eq!(events(&mut m), vec![], "nothing is decided by a break");
    assert!(
        m.poll_transmit().is_none(),
        "unsent frames go with the connection"
    );
    let snap = m.snapshot();
    assert_eq!(snap.agreements.len(), 2);
    assert_eq!(snap.terminating, vec![b]);
    assert_eq!(snap.in_flight.len(), 1);
    let mut m2 =
        AgreementManager::restore(Role::Master, AgreementConfig::default(), snap, now).unwrap();
    assert!(m2.check_active(a).is_ok());
    // The request in flight goes again with the same id, then the
    // termination in progress, with a new one.
    let Some(Body::Request(r)) = m2.poll_transmit() else {
        panic!("request in flight not re-sent")
    };
    assert_eq!((r.request_id, r.terms), (pending, terms(&[("k", "v")])));
    let Some(Body::Request(t)) = m2.poll_transmit() else {
        panic!("termination not re-sent")
    };
    assert_eq!(
        (t.agreement_id, t.terms.contains_key(TERMINATE_KEY)),
        (Some(b), true)
    );
    assert!(t.request_id > pending, "request ids continue");
    assert!(m2.request(Terms::new(), now).unwrap() > t.request_id);
    // Restoring too many agreements, or a non-v4 id, is refused.
    s.on_connection_lost();
    let tight = AgreementConfig {
        max_active_agreements: 0,
        ..AgreementConfig::default()
    };
    assert!(matches!(
        AgreementManager::restore(Role::Slave, tight, s.snapshot(), now),
        Err(AgreementError::TooManyAgreements { .. })
    ));
    let mut bad = s.snapshot();
    bad.agreements[0].id = uuid::Uuid::nil();
    assert!(matches!(
        AgreementManager::restore(Role::Slave, AgreementConfig::default(), bad, now),
        Err(AgreementError::InvalidAgreementId { .. })
    ));
    let mut bad = s.snapshot();
    bad.in_flight.push(PersistedRequest {
        request_id: 99,
        adjusts: None,
        terms: Terms::new(),
    });
    assert!(
        matches!(
            AgreementManager::restore(Role::Slave, AgreementConfig::default(), bad, now),
            Err(AgreementError::UnknownRequest { request_id: 99 })
        ),
        "a request id this side never used"
    );
}

/// SPEC SEQ-5: an `Accepted` lost with the connection is replayed after the
/// resume: both sides run the same agreement, and the requester's
/// application hears of it exactly once.
#[test]
fn acceptance_lost_in_a_break_is_replayed() {
    let now = Instant::now();
    let config = AgreementConfig::default();
    let (mut m, mut s) = pair(config);
    let req = m.request_collection(terms(&[("rate", "5")]), now).unwrap();
    deliver(&mut m, &mut s, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!("no request")
    };
    let id = s.accept(request_id, rnd(7), now).unwrap();
    cut(&mut m, &mut s, config, now); // the Accepted never left
    assert_eq!(ids(&m), vec![]);
    // The Slave's replay goes first; the Master's resend is answered again.
    deliver(&mut s, &mut m, now);
    deliver(&mut m, &mut s, now);
    deliver(&mut s, &mut m, now);
    let ev = events(&mut m);
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e, AgreementEvent::Accepted { request_id, agreement_id, .. } if *request_id == req && *agreement_id == id))
            .count(),
        1,
        "{ev:?}"
    );
    assert_eq!(ids(&m), ids(&s));
    assert_eq!(m.outstanding_count(), 0);
    assert!(m.poll_transmit().is_none() && s.poll_transmit().is_none());
}

/// SPEC SEQ-5: an adjustment's answer lost in a break is replayed: the
/// terms match on both sides.
#[test]
fn adjustment_answer_lost_in_a_break_is_replayed() {
    let now = Instant::now();
    let config = AgreementConfig::default();
    let (mut m, mut s) = pair(config);
    let a = agree(&mut m, &mut s, now, 1);
    m.request_adjustment(a, terms(&[("rate", "99")]), now)
        .unwrap();
    deliver(&mut m, &mut s, now);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!("no request")
    };
    s.accept(request_id, rnd(0), now).unwrap();
    cut(&mut m, &mut s, config, now);
    assert_ne!(
        ids(&m),
        ids(&s),
        "the adjustment is applied on one side only"
    );
    for _ in 0..2 {
        deliver(&mut s, &mut m, now);
        deliver(&mut m, &mut s, now);
    }
    assert_eq!(ids(&m), ids(&s));
    assert_eq!(m.agreement(a).unwrap().terms, terms(&[("rate", "99")]));
}

/// SPEC SEQ-5: a peer request undecided at the break is decided afresh
/// when it comes again; a request that never arrived is simply resent.
#[test]
fn undecided_and_unsent_requests_are_decided_after_the_break() {
    let now = Instant::now();
    let config = AgreementConfig::default();
    let (mut m, mut s) = pair(config);
    let first = m.request_collection(Terms::new(), now).unwrap();
    deliver(&mut m, &mut s, now);
    assert!(matches!(
        s.poll_event(),
        Some(AgreementEvent::RequestReceived { .. })
    ));
    let second = m.request_collection(Terms::new(), now).unwrap(); // lost
    cut(&mut m, &mut s, config, now);
    assert_eq!(events(&mut s), vec![], "the undelivered decision is gone");
    deliver(&mut m, &mut s, now);
    let asked: Vec<u64> = events(&mut s)
        .into_iter()
        .filter_map(|e| match e {
            AgreementEvent::RequestReceived { request_id, .. } => Some(request_id),
            _ => None,
        })
        .collect();
    assert_eq!(asked, vec![first, second]);
    s.accept(first, rnd(1), now).unwrap();
    s.reject(second, "no").unwrap();
    deliver(&mut s, &mut m, now);
    assert_eq!(ids(&m), ids(&s));
    assert_eq!(m.outstanding_count(), 0);
}

/// A request id seen before that is neither answered (in the replay window)
/// nor undecided is still a duplicate, after a break too.
#[test]
fn repeated_id_outside_the_replay_window_is_a_duplicate() {
    let now = Instant::now();
    let config = AgreementConfig {
        max_outstanding_requests: 1,
        max_active_agreements: 8,
        ..AgreementConfig::default()
    };
    let (mut m, mut s) = pair(config);
    for r in 0..6 {
        agree(&mut m, &mut s, now, r);
    }
    cut(&mut m, &mut s, config, now);
    let replay = |request_id| RequestFrame {
        request_id,
        request_type: RequestType::Collection,
        agreement_id: None,
        terms: Terms::new(),
    };
    while s.poll_transmit().is_some() {}
    // The latest answers (4 × 1) are replayed on request …
    s.handle_request(replay(6), now).unwrap();
    assert!(matches!(s.poll_transmit(), Some(Body::Response(r)) if r.request_id == 6));
    // … older ones are not remembered.
    assert!(matches!(
        s.handle_request(replay(1), now),
        Err(AgreementError::DuplicateRequestId { request_id: 1, .. })
    ));
}

/// SPEC SEQ-5 with a timeout: a request that timed out, whose acceptance
/// was lost in a break, ends the orphan agreement on the accepter.
#[test]
fn acceptance_of_a_timed_out_request_lost_in_a_break_is_ended() {
    let t0 = Instant::now();
    let config = AgreementConfig::default();
    let (mut m, mut s) = pair(config);
    let req = m.request_collection(Terms::new(), t0).unwrap();
    deliver(&mut m, &mut s, t0);
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!("no request")
    };
    s.accept(request_id, rnd(3), t0).unwrap();
    let late = t0 + config.request_timeout + Duration::from_secs(1);
    m.handle_timeout(late);
    assert!(matches!(
        m.poll_event(),
        Some(AgreementEvent::RequestFailed { request_id, reason: FailReason::TimedOut }) if request_id == req
    ));
    cut(&mut m, &mut s, config, late);
    for _ in 0..3 {
        deliver(&mut s, &mut m, late);
        deliver(&mut m, &mut s, late);
    }
    assert_eq!(ids(&m), vec![]);
    assert_eq!(ids(&s), vec![], "the orphan was ended");
}
