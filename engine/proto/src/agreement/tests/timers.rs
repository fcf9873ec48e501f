//! Agreement Manager tests of time and breaks: request timeouts, late
//! answers, unilateral termination, connection loss, restore and close.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use dtp_codec::{Body, Decision, ResponseFrame, Terms};

use super::{agree, deliver, events, pair, rnd, terms};
use crate::agreement::*;

/// A termination without an answer completes when it times out; a peer's
/// adjustment of a terminating agreement is rejected.
#[test]
fn termination_is_unilateral() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let id = agree(&mut m, &mut s, now, 1);
    s.request_adjustment(id, Terms::new(), now).unwrap();
    m.terminate(id, "", now).unwrap();
    deliver(&mut s, &mut m, now);
    let Some(Body::Request(_)) = m.poll_transmit() else {
        panic!()
    };
    let Some(Body::Response(ResponseFrame {
        decision: Decision::Rejected { .. },
        ..
    })) = m.poll_transmit()
    else {
        panic!()
    };
    let later = now + Duration::from_secs(11);
    assert_eq!(m.poll_timeout(), Some(now + Duration::from_secs(10)));
    m.handle_timeout(later);
    assert_eq!(
        events(&mut m),
        vec![AgreementEvent::Terminated {
            agreement_id: id,
            by: EndedBy::Local
        }]
    );
}

/// A timed-out adjustment the peer accepted late is applied on both sides.
#[test]
fn late_accepted_adjustment_converges() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let id = agree(&mut m, &mut s, now, 1);
    let r = m
        .request_adjustment(id, terms(&[("rate", "1")]), now)
        .unwrap();
    deliver(&mut m, &mut s, now);
    let t = now + Duration::from_secs(10);
    m.handle_timeout(t);
    assert_eq!(
        events(&mut m),
        vec![AgreementEvent::RequestFailed {
            request_id: r,
            reason: FailReason::TimedOut
        }]
    );
    let Some(AgreementEvent::RequestReceived { request_id, .. }) = s.poll_event() else {
        panic!()
    };
    s.accept(request_id, rnd(0), t).unwrap();
    deliver(&mut s, &mut m, t);
    assert!(
        matches!(m.poll_event(), Some(AgreementEvent::Accepted { request_id, .. }) if request_id == r)
    );
    assert_eq!(
        m.agreement(id).unwrap().terms,
        s.agreement(id).unwrap().terms
    );
}

/// A request without an answer fails at its deadline; a late Accepted is
/// answered with a termination so both sides converge.
#[test]
fn request_timeout_and_late_answer() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let req = m.request(Terms::new(), now).unwrap();
    deliver(&mut m, &mut s, now);
    s.poll_event().unwrap();
    assert_eq!(m.poll_timeout(), Some(now + Duration::from_secs(10)));
    m.handle_timeout(now + Duration::from_secs(9));
    assert!(m.poll_event().is_none());
    let t = now + Duration::from_secs(10);
    m.handle_timeout(t);
    assert_eq!(
        events(&mut m),
        vec![AgreementEvent::RequestFailed {
            request_id: req,
            reason: FailReason::TimedOut
        }]
    );
    assert_eq!(m.poll_timeout(), None);
    // The Slave's app accepts just before its own deadline.
    let id = s.accept(req, rnd(1), t).unwrap();
    deliver(&mut s, &mut m, t);
    assert!(m.agreement(id).is_none());
    let Some(Body::Request(r)) = m.poll_transmit() else {
        panic!("expected a termination")
    };
    assert_eq!(r.agreement_id, Some(id));
    s.handle_request(r, t).unwrap();
    assert!(s.agreement(id).is_none());
    // A second late answer is ignored; an answer to an id never used is an error.
    m.handle_response(
        ResponseFrame {
            request_id: req,
            decision: Decision::Rejected {
                reason: String::new(),
            },
        },
        t,
    )
    .unwrap();
    let err = m
        .handle_response(
            ResponseFrame {
                request_id: 1000,
                decision: Decision::Rejected {
                    reason: String::new(),
                },
            },
            t,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        AgreementError::UnknownRequest { request_id: 1000 }
    ));
}

/// A peer request the application leaves undecided is rejected at its
/// deadline, so the requester always gets an answer.
#[test]
fn undecided_peer_request_is_rejected_at_its_deadline() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    m.request(Terms::new(), now).unwrap();
    deliver(&mut m, &mut s, now);
    s.poll_event().unwrap();
    let t = now + Duration::from_secs(10);
    assert_eq!(s.poll_timeout(), Some(t));
    s.handle_timeout(t);
    assert_eq!(
        events(&mut s),
        vec![AgreementEvent::RequestWithdrawn { request_id: 1 }]
    );
    assert!(matches!(
        s.accept(1, rnd(1), t),
        Err(AgreementError::UnknownRequest { .. })
    ));
    deliver(&mut s, &mut m, t);
    assert!(matches!(
        m.poll_event(),
        Some(AgreementEvent::Rejected { .. })
    ));
}

/// SPEC SES-1: closing the session ends every agreement.
#[test]
fn close_terminates_every_agreement() {
    let now = Instant::now();
    let (mut m, mut s) = pair(AgreementConfig::default());
    let a = agree(&mut m, &mut s, now, 1);
    let b = agree(&mut m, &mut s, now, 2);
    m.close();
    let ended: BTreeSet<_> = events(&mut m)
        .into_iter()
        .filter_map(|e| match e {
            AgreementEvent::Terminated {
                agreement_id,
                by: EndedBy::SessionClosed,
            } => Some(agreement_id),
            _ => None,
        })
        .collect();
    assert_eq!(ended, BTreeSet::from([a, b]));
    assert_eq!(m.agreements().count(), 0);
}
