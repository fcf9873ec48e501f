//! SPEC HO-6 … HO-8: serialisation, hard timeouts and retry limits; and
//! handovers overtaken by events while their policy decides.

use dtp_codec::{
    AccessMode, AuthOutcome, ControlMessage, ErrorCode, HandoverFailedReason, SessionState,
};
use dtp_crypto::cred::Credential;

use super::handover::{decide, question};
use super::handover_failures::{failed_code, held, hfns};
use super::*;
use crate::{
    AdminHandover, AuditRecord, ConcurrentHandovers, HandoverAdmission, HandoverOutcome,
    PolicyAnswerError, PolicyOutcome,
};

use AccessMode::{Read, Write};

#[test]
fn ho6_queue_of_eight_fifo_then_in_progress() {
    let (mut h, _src) = held();
    // Nine more Fays ask, each on its own connection.
    let mut ids = Vec::new();
    for n in 0..10u64 {
        let fay = format!("fay-{n}");
        let conn = ConnKey(100 + n);
        h.t.connection_up(conn, h.now);
        let cred = h.cred(&fay);
        let req = h.auth_request(&fay, "arm", Write, cred);
        ids.push(req.request_id);
        let out = h.send(conn, ControlMessage::AuthRequest(req));
        match n {
            0 => assert_eq!(question(&out).2.target_fay_id, "fay-0"),
            1..=8 => assert!(out.is_empty(), "queued silently: {out:?}"),
            _ => assert_eq!(
                refused_code(auth_result(&out, conn, ids[9])),
                ErrorCode::E_HANDOVER_IN_PROGRESS
            ),
        }
    }
    assert_eq!(h.t.state_of("arm").unwrap().queued, 8);
    // An admin request is refused too while the queue is full.
    let src = h.t.active_controllers("arm")[0];
    let cred = h.cred("fay-x");
    let admin = AdminHandover {
        source_session_id: src,
        target_fay_id: "fay-x".into(),
        target_credential: cred,
        reason: String::new(),
        metadata: BTreeMap::new(),
    };
    let err = h.t.admin_handover(admin, h.now).unwrap_err();
    assert_eq!(err.code, ErrorCode::E_HANDOVER_IN_PROGRESS);
    // FIFO: each answer brings the next target to the policy.
    let mut order = Vec::new();
    let mut pending = h.t.pending_handovers();
    while let Some(p) = pending.pop() {
        order.push(p.target_fay_id.clone());
        h.now = h.now.plus(1);
        decide(
            &mut h,
            p.handover_id,
            PolicyOutcome::Reject { why: "no".into() },
        );
        pending = h.t.pending_handovers();
    }
    let want: Vec<String> = (0..9).map(|n| format!("fay-{n}")).collect();
    assert_eq!(order, want);
}

#[test]
fn ho6_queued_requests_are_re_evaluated_against_the_new_holder() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let (first, ..) = question(&h.transfer(A, src, "fay-b", cred));
    let cred = h.cred("fay-x");
    let admin = AdminHandover {
        source_session_id: src,
        target_fay_id: "fay-x".into(),
        target_credential: cred,
        reason: String::new(),
        metadata: BTreeMap::new(),
    };
    assert_eq!(
        h.t.admin_handover(admin, h.now),
        Ok(HandoverAdmission::Queued { position: 1 })
    );
    let cred = h.cred("fay-c");
    let req = h.auth_request("fay-c", "arm", Write, cred);
    assert!(h.send(C, ControlMessage::AuthRequest(req)).is_empty());
    assert_eq!(h.t.state_of("arm").unwrap().queued, 2);
    // The first succeeds. The queued admin request names a source that has
    // ended and is dropped; the queued AuthRequest now asks to take over
    // from fay-b, the new holder.
    decide(&mut h, first, PolicyOutcome::allow());
    let holder = h.t.active_controllers("arm")[0];
    let pending = h.t.pending_handovers();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].source_session_id, holder);
    assert_eq!(pending[0].target_fay_id, "fay-c");
    assert_eq!(h.t.state_of("arm").unwrap().queued, 0);
}

#[test]
fn ho6_reject_mode() {
    let mut c = config();
    c.handover.concurrent = ConcurrentHandovers::Reject;
    let mut h = Harness::with(c);
    let src = h.session(A, "fay-a", "arm", Write);
    let cred = h.cred("fay-b");
    h.transfer(A, src, "fay-b", cred);
    let out = h.auth(C, "fay-c", "arm", Write);
    assert_eq!(refused_code(out), ErrorCode::E_HANDOVER_IN_PROGRESS);
}

#[test]
fn ho7_hard_timeout_then_late_answers_are_refused() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let (id, _, _, deadline) = question(&h.transfer(A, src, "fay-b", cred));
    assert_eq!(h.t.poll_timeout(), Some(deadline.plus(1)));
    assert!(h.advance(1_000).is_empty());
    let out = h.advance(1);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::CancelPolicy { handover_id } if *handover_id == id))
    );
    for conn in [A, B] {
        assert_eq!(hfns(&out, conn)[0].reason, HandoverFailedReason::Timeout);
    }
    let AuditRecord::Handover(a) = audits(&out).pop().unwrap() else {
        panic!()
    };
    assert_eq!(a.decisions[0].decision, "timeout");
    assert!(matches!(
        a.outcome,
        HandoverOutcome::Failed {
            code: ErrorCode::E_HANDOVER_TIMEOUT,
            ..
        }
    ));
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert_eq!(
        h.t.policy_decided(id, PolicyOutcome::allow(), h.now),
        Err(PolicyAnswerError::UnknownHandover)
    );
}

#[test]
fn ho7_an_answer_after_the_deadline_times_out_even_without_a_tick() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let (id, ..) = question(&h.transfer(A, src, "fay-b", cred));
    h.now = h.now.plus(1_001);
    assert_eq!(
        h.t.policy_decided(id, PolicyOutcome::allow(), h.now),
        Err(PolicyAnswerError::TooLate)
    );
    let out = h.drain();
    assert_eq!(hfns(&out, A)[0].reason, HandoverFailedReason::Timeout);
    assert_eq!(h.state(src), Some(SessionState::Active));
}

#[test]
fn ho8_retry_limit_per_pair_and_interval() {
    let (mut h, src) = held();
    for attempt in 0..5 {
        h.now = h.now.plus(1);
        let cred = h.cred("fay-b");
        let out = h.transfer(A, src, "fay-b", cred);
        if attempt < 4 {
            decide(
                &mut h,
                question(&out).0,
                PolicyOutcome::Reject { why: "no".into() },
            );
        } else {
            assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_RETRY_LIMIT]);
        }
    }
    // Another target is another pair.
    let cred = h.cred("fay-c");
    let out = h.transfer(A, src, "fay-c", cred);
    let (id, ..) = question(&out);
    decide(&mut h, id, PolicyOutcome::Reject { why: "no".into() });
    // Made-up targets (refused for their credential) still count, up to a
    // bound per source: the table a peer can grow stays bounded.
    for n in 2..crate::MAX_TARGETS_PER_SOURCE {
        h.now = h.now.plus(1);
        let out = h.transfer(A, src, &format!("made-up-{n:04000}"), Bytes::new());
        assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_INVALID_TARGET]);
    }
    let out = h.transfer(A, src, "one-too-many", Bytes::new());
    assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_RETRY_LIMIT]);
    assert_eq!(h.t.attempts.len(), crate::MAX_TARGETS_PER_SOURCE);
    // A target already counted is still judged on its own count.
    h.now = h.now.plus(1);
    let cred = h.cred("fay-c");
    question(&h.transfer(A, src, "fay-c", cred));

    let mut c = config();
    c.handover.min_retry_interval_ms = 1_000;
    let mut h = Harness::with(c);
    let src = h.session(A, "fay-a", "arm", Write);
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred.clone());
    decide(
        &mut h,
        question(&out).0,
        PolicyOutcome::Reject { why: "no".into() },
    );
    h.now = h.now.plus(999);
    let out = h.transfer(A, src, "fay-b", cred.clone());
    assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_RETRY_LIMIT]);
    h.now = h.now.plus(1);
    question(&h.transfer(A, src, "fay-b", cred));
}

#[test]
fn the_source_ending_during_evaluation_fails_the_handover() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let (id, ..) = question(&h.transfer(A, src, "fay-b", cred));
    let out = h.release(A, src);
    assert!(out.iter().any(|o| matches!(o, Output::CancelPolicy { .. })));
    let n = hfns(&out, B);
    // The seed's closed reasons have no "source ended": release_failed,
    // with the code in the details.
    assert_eq!(n[0].reason, dtp_codec::HandoverFailedReason::ReleaseFailed);
    assert_eq!(n[0].details["code"], "E_HANDOVER_INVALID_SOURCE");
    assert!(h.t.pending_handovers().is_empty());
    assert_eq!(
        h.t.policy_decided(id, PolicyOutcome::allow(), h.now),
        Err(PolicyAnswerError::UnknownHandover)
    );
}

#[test]
fn the_target_connection_closing_drops_its_auth_requests() {
    let (mut h, _src) = held();
    let cred = h.cred("fay-b");
    let req = h.auth_request("fay-b", "arm", Write, cred);
    h.send(B, ControlMessage::AuthRequest(req));
    let cred = h.cred("fay-c");
    let req = h.auth_request("fay-c", "arm", Write, cred);
    h.send(B, ControlMessage::AuthRequest(req));
    assert_eq!(h.t.state_of("arm").unwrap().queued, 1);
    h.t.connection_down(B, h.now);
    let out = h.drain();
    assert!(out.iter().any(|o| matches!(o, Output::CancelPolicy { .. })));
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_INVALID_TARGET);
    assert!(h.t.pending_handovers().is_empty());
    assert_eq!(h.t.state_of("arm").unwrap().queued, 0);
}

#[test]
fn a_target_credential_revoked_during_evaluation_fails_after_allow() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let descriptor = Credential::from_bytes(&cred)
        .unwrap()
        .descriptor()
        .descriptor_id;
    let (id, ..) = question(&h.transfer(A, src, "fay-b", cred));
    h.t.revoke(descriptor, h.now).unwrap();
    let out = decide(&mut h, id, PolicyOutcome::allow());
    assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_INVALID_TARGET]);
    assert!(state_changes(&Harness::sent(&out, A)).is_empty());
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(matches!(
        h.auth(C, "fay-c", "cam", Read),
        Some(AuthOutcome::Granted { .. })
    ));
}
