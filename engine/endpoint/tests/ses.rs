//! SPEC SES-1 … SES-4 (with SEQ-2, SEQ-5, FSM-1, LIV-2) on the session
//! path the gateway runs: `DtpEndpoint`'s own, driven as a Fay and a
//! terminal in virtual time — no socket, no clock, every timer fired by
//! moving `now`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "ses/pair.rs"]
mod pair;

use std::time::Duration;

use bytes::Bytes;
use dtp_codec::{AccessMode, Beat, ControlMessage, ErrorCode, Heartbeat, HeartbeatAck};
use dtp_crypto::cap::NoiseKeypair;
use dtp_endpoint::{
    DEFAULT_IDLE_TIMEOUT, DtpEvent, EndpointConfig, EngineState, FailReason,
    MAX_HEARTBEAT_INTERVAL, SuspendedSession,
};
use dtp_test_kit::keys;
use pair::{Pair, terms};

fn config() -> EndpointConfig {
    EndpointConfig::terminal()
}

/// SPEC SES-1, SEQ-2: CAP gives both sides one Session_ID (UUID v4) in
/// SessionEstablished; a close ends the session on both sides (Idle,
/// NORMAL) and leaves nothing to resume.
#[test]
fn ses1_establish_then_close() {
    let mut p = Pair::established(config());
    let id = p.fay.ep.session_id().unwrap();
    assert_eq!(p.term.ep.session_id(), Some(id));
    assert_eq!(id.get_version_num(), 4);
    for end in [&p.fay, &p.term] {
        assert_eq!(end.ep.state(), EngineState::SessionEstablished);
    }
    p.fay.ep.close("done");
    p.drive();
    for end in [&p.fay, &p.term] {
        assert_eq!(end.ep.state(), EngineState::Idle);
        assert_eq!(end.closed(), Some(ErrorCode::NORMAL));
        assert_eq!(end.ep.session_id(), None);
    }
    p.cut();
    assert!(p.fay_suspended.is_none() && p.registry.is_empty());
}

/// SPEC SES-2, SEQ-5, FSM-1: a loss while Transmitting suspends the
/// session on both sides (Transmitting → Suspended, persist), with the
/// unacknowledged fragment cached and the suspend deadline stamped; its
/// byte form (what a directory store keeps) reads back the same.
#[test]
fn ses2_loss_while_transmitting_suspends_and_persists() {
    let (mut p, agreement) = Pair::transmitting(config());
    p.term
        .ep
        .send_fragment(agreement, 1, vec![], Bytes::from_static(b"one"))
        .unwrap();
    p.cut();
    assert_eq!(p.term.ep.state(), EngineState::Suspended);
    assert_eq!(p.fay.ep.state(), EngineState::Suspended);
    let id = p.fay.ep.session_id();
    assert!(id.is_none(), "the session left the connection");
    let fay = p.fay_suspended.as_ref().unwrap();
    assert_eq!(fay.state(), EngineState::Suspended);
    assert_eq!(fay.highest_received(), 0);
    let term = p.registry.take(fay.session_id(), p.now).unwrap();
    assert_eq!(term.cached_fragments(), 1, "RES-2: the lost fragment");
    assert_eq!(term.agreements().agreements.len(), 1);
    assert_eq!(term.expires_at(), Some(p.now + config().suspend_timeout));
    let bytes = term.to_bytes(p.now);
    let back = SuspendedSession::from_bytes(&bytes, &config(), p.now).unwrap();
    assert_eq!(back.session_id(), term.session_id());
    assert_eq!(back.peer(), term.peer());
    assert_eq!(back.cached_fragments(), 1);
    assert_eq!(back.key_version(), 1);
}

/// SPEC SES-2, FSM-1: a loss with no agreement leaves nothing to resume
/// and ends through the table — SessionEstablished's loss row (SPEC.md's,
/// for the seed's gap) → Idle — on both sides; nothing is parked.
#[test]
fn ses2_loss_without_an_agreement_closes_through_the_row() {
    let mut p = Pair::established(config());
    p.cut();
    for end in [&p.fay, &p.term] {
        assert_eq!(end.ep.state(), EngineState::Idle);
        assert!(end.ep.is_closed());
    }
    assert!(p.fay_suspended.is_none() && p.registry.is_empty());
}

/// SPEC FSM-1: a loss while Negotiating with no agreement in force fails
/// the negotiation (→ SessionEstablished, the request fails with
/// ConnectionLost) and then takes the loss row to Idle.
#[test]
fn ses2_loss_while_negotiating_fails_the_request_then_closes() {
    let mut p = Pair::established(config());
    let request = p.fay.ep.request_collection(terms("frames"), p.now).unwrap();
    assert_eq!(p.fay.ep.state(), EngineState::Negotiating);
    p.cut();
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
    assert!(p.fay.events.iter().any(|e| matches!(e,
        DtpEvent::RequestFailed { request_id, reason: FailReason::ConnectionLost }
            if *request_id == request)));
    assert!(p.fay_suspended.is_none());
}

/// SPEC FSM-1, SES-2: a loss while Negotiating an adjustment of an
/// agreement in force settles (agreement reached) and suspends.
#[test]
fn ses2_loss_while_adjusting_an_agreement_suspends() {
    let (mut p, agreement) = Pair::transmitting(config());
    p.fay
        .ep
        .request_adjustment(agreement, terms("more frames"), p.now)
        .unwrap();
    p.deliver_to_terminal();
    assert_eq!(p.term.ep.state(), EngineState::Negotiating);
    p.cut();
    assert_eq!(p.term.ep.state(), EngineState::Suspended);
    assert_eq!(p.registry.len(), 1);
    assert!(p.fay_suspended.is_some());
}

/// SPEC FSM-1: a loss during CAP takes WaitingForCAP's failure row.
#[test]
fn ses2_loss_during_cap_ends_idle() {
    let mut p = Pair::new(config());
    p.cut();
    for end in [&p.fay, &p.term] {
        assert_eq!(end.ep.state(), EngineState::Idle);
    }
}

/// SPEC SES-3, RES-1, RES-3: the same Fay resumes after CAP runs again:
/// a higher key version, the lost fragment delivered once, and sequence
/// numbers continuing where they stopped.
#[test]
fn ses3_resume_continues_sequences_under_a_new_key_version() {
    let (mut p, agreement) = Pair::transmitting(config());
    p.term
        .ep
        .send_fragment(agreement, 1, vec![], Bytes::from_static(b"one"))
        .unwrap();
    p.drive();
    p.term
        .ep
        .send_fragment(agreement, 2, vec![], Bytes::from_static(b"two"))
        .unwrap();
    p.cut();
    assert_eq!(p.fay.fragments(), vec![(1, 1)]);
    p.reconnect();
    assert!(
        p.fay
            .events
            .iter()
            .any(|e| matches!(e, DtpEvent::Established { resumed: true, .. }))
    );
    assert_eq!(p.fay.ep.key_version(), 2);
    assert_eq!(p.term.ep.key_version(), 2);
    assert_eq!(p.fay.ep.state(), EngineState::Transmitting);
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);
    p.term
        .ep
        .send_fragment(agreement, 3, vec![], Bytes::from_static(b"three"))
        .unwrap();
    p.drive();
    assert_eq!(p.fay.fragments(), vec![(2, 2), (3, 3)]);
    assert!(p.registry.is_empty(), "a resumed session is taken");
}

/// SPEC SES-3: CAP re-verification decides: another Fay (a valid
/// credential of the same issuer) naming the session is refused with
/// RESUME_FAILED and the session stays parked for its owner, who then
/// resumes it.
#[test]
fn ses3_resume_by_another_fay_is_refused_and_the_owner_resumes() {
    let (mut p, _) = Pair::transmitting(config());
    p.cut();
    let owner = p.fay_suspended.take().unwrap();
    let stolen = SuspendedSession::from_bytes(&owner.to_bytes(p.now), &config(), p.now).unwrap();
    let other_keys = NoiseKeypair::from_private([77; 32]).unwrap();
    let grants: &[(&str, &[AccessMode])] = &[("camera", &[AccessMode::Read])];
    let credential = keys::issue(
        &p.keys.issuer,
        "fay-2",
        *other_keys.public(),
        grants,
        [77; 16],
        keys::valid_now(),
    );
    let mut other = keys::fay_config(
        other_keys,
        credential,
        &p.keys.algorithms,
        *p.keys.terminal.public(),
    );
    other.endpoint.idle_timeout = config().idle_timeout;
    p.fay_suspended = Some(stolen);
    p.reconnect_as(&other);
    assert_eq!(p.term.closed(), Some(ErrorCode::RESUME_FAILED));
    assert_eq!(p.fay.closed(), Some(ErrorCode::RESUME_FAILED));
    assert_eq!(p.registry.len(), 1, "the owner's session is kept");
    p.fay_suspended = Some(owner);
    p.reconnect();
    assert!(p.fay.ep.is_established() && p.term.ep.is_established());
}

/// SPEC SES-2, SES-4: a suspended session not resumed within
/// `suspend_timeout` is gone: the registry releases it and the Fay's
/// resume is refused with RESUME_FAILED.
#[test]
fn ses4_suspend_timeout_releases_the_session() {
    let (mut p, _) = Pair::transmitting(config());
    p.cut();
    let deadline = p.registry.next_expiry().unwrap();
    assert_eq!(deadline, p.now + config().suspend_timeout);
    p.advance_to(deadline);
    assert_eq!(p.registry.expire(p.now), 1);
    p.reconnect();
    assert_eq!(p.fay.closed(), Some(ErrorCode::RESUME_FAILED));
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
}

/// SPEC SES-4: the idle timeout is the configured one: a session with no
/// agreement and no traffic is open a millisecond before it and closed
/// with SESSION_TIMEOUT at it, through SessionEstablished's timeout row.
#[test]
fn ses4_idle_timeout_is_the_configured_one() {
    let mut c = config();
    c.idle_timeout = Duration::from_secs(90);
    let mut p = Pair::established(c);
    let start = p.now;
    assert_eq!(p.term.ep.poll_timeout(), Some(start + c.idle_timeout));
    p.advance_to(start + c.idle_timeout - Duration::from_millis(1));
    assert!(p.fay.ep.is_established() && p.term.ep.is_established());
    p.advance_to(start + c.idle_timeout);
    for end in [&p.fay, &p.term] {
        assert_eq!(end.closed(), Some(ErrorCode::SESSION_TIMEOUT));
        assert_eq!(end.ep.state(), EngineState::Idle);
    }
}

/// SPEC SES-4: the idle timer runs only without an agreement: a silent
/// Transmitting session stays open (its loss is the transport's to tell).
#[test]
fn ses4_no_idle_timeout_while_transmitting() {
    let (mut p, _) = Pair::transmitting(config());
    p.advance(config().idle_timeout * 10);
    assert!(p.fay.ep.is_established() && p.term.ep.is_established());
}

/// SPEC SES-4, LIV-2, LIV-3: with the default idle timeout, a control-only
/// connection heartbeating at the longest interval LIV allows (each beat
/// acknowledged at once, as the terminal's control plane does) stays open
/// on both sides for ten beats — each lands a whole interval before the
/// timer — and closes once the beats stop. (Only frames received count as
/// traffic: the Fay's side is kept open by the acks.)
#[test]
fn ses4_heartbeats_at_the_longest_interval_keep_the_connection() {
    assert!(DEFAULT_IDLE_TIMEOUT >= MAX_HEARTBEAT_INTERVAL * 2);
    let mut p = Pair::established(config());
    let session_id = p.fay.ep.session_id().unwrap();
    for sequence_number in 0..10 {
        p.advance(MAX_HEARTBEAT_INTERVAL);
        let beat = Heartbeat {
            beats: vec![Beat {
                session_id,
                sequence_number,
            }],
        };
        p.fay
            .ep
            .send_control(ControlMessage::Heartbeat(beat.clone()))
            .unwrap();
        p.deliver_to_terminal();
        let got = p
            .term
            .take()
            .into_iter()
            .any(|e| matches!(e, DtpEvent::Control(ControlMessage::Heartbeat(b)) if b == beat));
        assert!(got, "beat {sequence_number} arrived");
        let ack = HeartbeatAck { beats: beat.beats };
        p.term
            .ep
            .send_control(ControlMessage::HeartbeatAck(ack))
            .unwrap();
        p.drive();
        assert!(
            p.fay.ep.is_established() && p.term.ep.is_established(),
            "closed before beat {sequence_number}"
        );
    }
    p.advance(DEFAULT_IDLE_TIMEOUT);
    assert_eq!(p.term.closed(), Some(ErrorCode::SESSION_TIMEOUT));
    assert_eq!(p.fay.closed(), Some(ErrorCode::SESSION_TIMEOUT));
}

/// SPEC SES-4, LIV-2: an idle timeout not above the longest heartbeat
/// interval is refused (it would race a control-only connection's beats).
#[test]
fn ses4_idle_timeout_not_above_the_heartbeat_maximum_is_refused() {
    for idle in [MAX_HEARTBEAT_INTERVAL, Duration::from_secs(1)] {
        let mut c = config();
        c.idle_timeout = idle;
        let err = c.validate().unwrap_err();
        assert!(err.contains("heartbeat"), "{err}");
    }
    let mut c = config();
    c.idle_timeout = MAX_HEARTBEAT_INTERVAL + Duration::from_millis(1);
    assert!(c.validate().is_ok());
}

/// SPEC SEQ-5, FSM-1: a resume the terminal never answers fails after
/// `resume_timeout` (Resuming → resume failed → Idle, RESUME_FAILED).
#[test]
fn seq5_unanswered_resume_fails_after_the_resume_timeout() {
    let (mut p, _) = Pair::transmitting(config());
    p.cut();
    p.auto_resume = false;
    p.reconnect();
    assert_eq!(p.fay.ep.state(), EngineState::Resuming);
    p.advance(config().resume_timeout);
    assert_eq!(p.fay.closed(), Some(ErrorCode::RESUME_FAILED));
    assert_eq!(p.fay.ep.state(), EngineState::Idle);
}
