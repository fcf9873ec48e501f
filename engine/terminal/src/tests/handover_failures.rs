//! SPEC HO-2, HO-5: a handover refused at evaluation, or rolled back.

use dtp_codec::{
    AccessMode, ControlMessage, ErrorCode, HandoverFailedNotification, HandoverFailedReason,
    SessionState,
};
use dtp_crypto::cred::Grant;

use super::handover::{decide, question};
use super::*;
use crate::{AdminHandover, AuditRecord, HandoverAudit, HandoverOutcome, PolicyOutcome};

use AccessMode::{Read, Write};

pub(crate) fn hfns(out: &[Output], conn: ConnKey) -> Vec<HandoverFailedNotification> {
    Harness::sent(out, conn)
        .into_iter()
        .filter_map(|m| match m {
            ControlMessage::HandoverFailedNotification(n) => Some(n),
            _ => None,
        })
        .collect()
}

pub(crate) fn failed_code(out: &[Output]) -> ErrorCode {
    audits(out)
        .into_iter()
        .find_map(|a| match a {
            AuditRecord::Handover(HandoverAudit {
                outcome: HandoverOutcome::Failed { code, .. },
                ..
            }) => Some(code),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no failed handover audited in {out:?}"))
}

/// fay-a holds `arm` on A; fay-b is known on B.
pub(crate) fn held() -> (Harness, SessionId) {
    let mut h = Harness::new();
    let src = h.session(A, "fay-a", "arm", Write);
    h.t.identify(B, "fay-b", h.now).unwrap();
    (h, src)
}

#[test]
fn step1_invalid_source() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let out = h.transfer(A, SessionId::from_u128(9), "fay-b", cred.clone());
    assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_INVALID_SOURCE]);
    // Another Fay's connection may not hand fay-a's session over.
    let out = h.transfer(B, src, "fay-b", cred.clone());
    assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_INVALID_SOURCE]);
    // An admin naming an unknown session.
    let req = AdminHandover {
        source_session_id: SessionId::from_u128(9),
        target_fay_id: "fay-b".into(),
        target_credential: cred.clone(),
        reason: String::new(),
        metadata: BTreeMap::new(),
    };
    let err = h.t.admin_handover(req, h.now).unwrap_err();
    assert_eq!(err.code, ErrorCode::E_HANDOVER_INVALID_SOURCE);
    // A source that has ended (LIV-5).
    h.release(A, src);
    let out = h.transfer(A, src, "fay-b", cred);
    assert_eq!(refusals(&out), [ErrorCode::E_SESSION_TERMINATED]);
    assert!(h.t.pending_handovers().is_empty());
}

#[test]
fn step2_invalid_target() {
    let (mut h, src) = held();
    let other = h.cred("fay-c");
    let read_only = h.cred_with(
        "fay-b",
        vec![Grant {
            resource_id: "arm".into(),
            modes: [Read].into_iter().collect(),
        }],
        100,
    );
    let cases: Vec<(&str, Bytes)> = vec![
        ("fay-b", Bytes::from_static(b"junk")),
        ("fay-b", other),
        ("fay-b", read_only),
        ("human:t2", Bytes::new()),
        ("fay-a", h.cred("fay-a")),
    ];
    for (target, cred) in cases {
        h.now = h.now.plus(1);
        let out = h.transfer(A, src, target, cred);
        assert_eq!(
            refusals(&out),
            [ErrorCode::E_HANDOVER_INVALID_TARGET],
            "{target}"
        );
    }
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(h.t.pending_handovers().is_empty());
}

#[test]
fn step2_target_over_its_session_limit() {
    let mut c = config();
    c.limits.per_fay = 1;
    let mut h = Harness::with(c);
    let src = h.session(A, "fay-a", "arm", Write);
    h.session(B, "fay-b", "cam", Read);
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    assert_eq!(refusals(&out), [ErrorCode::E_SESSION_LIMIT_EXCEEDED]);
}

#[test]
fn step3_no_policy_and_policy_rejects() {
    let mut h = Harness::new();
    let cam = h.session(A, "fay-a", "cam", Write);
    let cred = h.cred("fay-b");
    let out = h.transfer(A, cam, "fay-b", cred.clone());
    assert_eq!(refusals(&out), [ErrorCode::E_HANDOVER_REJECTED_BY_POLICY]);

    let (mut h, src) = held();
    let out = h.transfer(A, src, "fay-b", cred);
    let (id, ..) = question(&out);
    let out = decide(
        &mut h,
        id,
        PolicyOutcome::Reject {
            why: "S_target <= S_source".into(),
        },
    );
    // Source and target hear it; the source never left active.
    for conn in [A, B] {
        let n = hfns(&out, conn);
        assert_eq!(n.len(), 1, "{conn:?}");
        assert_eq!(n[0].reason, HandoverFailedReason::PolicyRejected);
        assert_eq!(n[0].details["code"], "E_HANDOVER_REJECTED_BY_POLICY");
        assert_eq!(n[0].handover_id, id);
    }
    assert!(state_changes(&Harness::sent(&out, A)).is_empty());
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
}

#[test]
fn require_human_without_fallback_or_from_a_human_is_a_rejection() {
    for resource in ["arm", "screen"] {
        let mut h = Harness::new();
        let src = h.session(A, "fay-a", resource, Write);
        let cred = h.cred("fay-b");
        let (id, ..) = question(&h.transfer(A, src, "fay-b", cred));
        let out = decide(&mut h, id, PolicyOutcome::RequireHuman);
        assert_eq!(
            hfns(&out, A)[0].reason,
            HandoverFailedReason::PolicyRejected
        );
        assert_eq!(h.state(src), Some(SessionState::Active));
    }
}

#[test]
fn ho5_failure_at_release_restores_the_source() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let (id, ..) = question(&h.transfer(A, src, "fay-b", cred));
    h.t.access_mut().fail_next_revoke();
    let out = decide(&mut h, id, PolicyOutcome::allow());
    // Seed §6.10 rollback: handover_pending, active, then the notification.
    let to_a = Harness::sent(&out, A);
    assert_eq!(
        state_changes(&to_a),
        [
            (SessionState::HandoverPending, None),
            (SessionState::Active, None)
        ]
    );
    assert!(
        matches!(to_a.last(), Some(ControlMessage::HandoverFailedNotification(n))
        if n.reason == HandoverFailedReason::ReleaseFailed)
    );
    assert_eq!(hfns(&out, B).len(), 1);
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_FAILED_AT_RELEASE);
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert_eq!(h.t.access().granted().len(), 1);
    assert_eq!(h.t.active_controllers("arm"), [src]);
}

#[test]
fn ho5_failure_at_release_answers_an_auth_request() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let req = h.auth_request("fay-b", "arm", Write, cred);
    let rid = req.request_id;
    let out = h.send(B, ControlMessage::AuthRequest(req));
    h.t.access_mut().fail_next_revoke();
    let out = decide(&mut h, question(&out).0, PolicyOutcome::allow());
    assert_eq!(
        refused_code(auth_result(&out, B, rid)),
        ErrorCode::E_HANDOVER_FAILED_AT_RELEASE
    );
    assert_eq!(h.state(src), Some(SessionState::Active));
}

#[test]
fn ho5_failure_at_acquire_leaves_the_resource_idle() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let req = h.auth_request("fay-b", "arm", Write, cred);
    let rid = req.request_id;
    let out = h.send(B, ControlMessage::AuthRequest(req));
    h.t.access_mut().fail_next_grant();
    let out = decide(&mut h, question(&out).0, PolicyOutcome::allow());
    assert_eq!(
        refused_code(auth_result(&out, B, rid)),
        ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE
    );
    let to_a = Harness::sent(&out, A);
    assert_eq!(state_changes(&to_a).len(), 3, "source ended: {to_a:?}");
    assert_eq!(hfns(&out, A)[0].reason, HandoverFailedReason::AcquireFailed);
    // Not restored; nobody holds the resource; the OS grants nothing.
    assert_eq!(h.state(src), None);
    assert!(h.t.state_of("arm").unwrap().occupancy.is_empty());
    assert!(h.t.access().granted().is_empty());
    // Next comer takes it.
    h.session(C, "fay-c", "arm", Write);
}

#[test]
fn ho5_acquire_failure_by_transfer_notifies_both_runtimes() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let (id, ..) = question(&h.transfer(A, src, "fay-b", cred));
    h.t.access_mut().fail_next_grant();
    let out = decide(&mut h, id, PolicyOutcome::allow());
    for conn in [A, B] {
        assert_eq!(
            hfns(&out, conn)[0].reason,
            HandoverFailedReason::AcquireFailed
        );
    }
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE);
}
