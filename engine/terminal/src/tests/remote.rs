//! SPEC HO-1, HO-4 across gateways: a target on one gateway ("B") takes a
//! resource whose source session is on another ("A"). Two terminals over
//! a shared occupancy, the cluster's answers played by hand: B's grant
//! finds the resource held elsewhere (Busy) and asks A; A runs the
//! handover to T2 and keeps the resource for the target; B grants it.

use dtp_codec::{AccessMode, ControlMessage, ErrorCode};

use super::handover::{decide, question};
use super::os_deferred::{granted_session, held_deferred, os_requests};
use super::*;
use crate::{
    AuditRecord, HandoverOutcome, OsError, OsOperation, PolicyOutcome, REMOTE_SLACK_MS,
    RemoteAnswer, RemoteHandover, UnknownRemote,
};

use AccessMode::Write;

/// A holds `arm` for fay-a (`src`); B is a second gateway. Both shared.
fn two_gateways() -> (Harness, Harness, SessionId) {
    let (mut a, src) = held_deferred();
    a.t.access_mut().set_shared(true);
    let mut b = Harness::deferred();
    b.t.access_mut().set_shared(true);
    (a, b, src)
}

/// fay-t asks B for `resource` on B's connection A; B's grant answers
/// Busy (held on gateway A). The request id and what B did.
fn ask_on_b(b: &mut Harness, resource: &str) -> (u64, Vec<Output>) {
    let cred = b.cred("fay-t");
    let req = b.auth_request("fay-t", resource, Write, cred);
    let id = req.request_id;
    b.send(A, ControlMessage::AuthRequest(req));
    let (op, _) = b.only_op();
    let busy = OsError::Busy("held on node-a".into());
    b.t.os_access_done(op, Err(busy), b.now).unwrap();
    (id, b.drain())
}

fn asked(out: &[Output]) -> RemoteHandover {
    out.iter()
        .find_map(|o| match o {
            Output::AskRemote(ask) => Some(ask.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no AskRemote in {out:?}"))
}

fn answered(out: &[Output]) -> Option<(uuid::Uuid, RemoteAnswer)> {
    out.iter().find_map(|o| match o {
        Output::AnswerRemote { id, answer } => Some((*id, answer.clone())),
        _ => None,
    })
}

#[test]
fn a_target_on_another_gateway_takes_the_resource_through_the_holders_handover() {
    let (mut a, mut b, src) = two_gateways();
    let (request_id, out) = ask_on_b(&mut b, "arm");
    // No AuthResult yet: B asked A.
    assert_eq!(auth_result(&out, A, request_id), None);
    let ask = asked(&out);
    assert_eq!(
        (ask.resource_id.as_str(), ask.target_fay_id.as_str()),
        ("arm", "fay-t")
    );

    // A: the same policy as a local AuthRequest, then T0, T1.
    a.t.remote_handover(ask.clone(), a.now);
    let out = a.drain();
    let (hid, ..) = question(&out);
    let out = decide(&mut a, hid, PolicyOutcome::allow());
    let t1: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::OsAccess {
                op,
                operation: OsOperation::Release,
                to,
                ..
            } => Some((*op, to.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(t1.len(), 1, "{out:?}");
    assert_eq!(t1[0].1.as_deref(), Some("fay-t"), "kept for the target");
    // T1 answered: the source ends and A answers Released; A grants
    // nothing itself (T3 … T5 are B's).
    let out = a.answer(t1[0].0);
    assert_eq!(answered(&out), Some((ask.id, RemoteAnswer::Released)));
    assert!(os_requests(&out).is_empty(), "{out:?}");
    assert_eq!(a.state(src), None);
    let handover = audits(&out)
        .into_iter()
        .find_map(|r| match r {
            AuditRecord::Handover(h) => Some(h),
            _ => None,
        })
        .unwrap();
    assert_eq!(handover.outcome, HandoverOutcome::Succeeded);
    assert_eq!(handover.target_session_id, None);

    // B: the AuthRequest runs again, and its grant takes the kept
    // resource.
    b.t.remote_answered(ask.id, RemoteAnswer::Released, b.now)
        .unwrap();
    let (op, operation) = b.only_op();
    assert_eq!(operation, OsOperation::Grant);
    let out = b.answer(op);
    let new = granted_session(&out, A, request_id);
    assert_eq!(b.state(new), Some(SessionState::Active));
    // Answered once.
    assert_eq!(
        b.t.remote_answered(ask.id, RemoteAnswer::Released, b.now),
        Err(UnknownRemote)
    );
}

#[test]
fn a_refusal_on_the_holders_gateway_reaches_the_target() {
    let (mut a, mut b, src) = two_gateways();
    let (request_id, out) = ask_on_b(&mut b, "arm");
    let ask = asked(&out);
    a.t.remote_handover(ask.clone(), a.now);
    let out = a.drain();
    let (hid, ..) = question(&out);
    let why = "S_target <= S_source".to_owned();
    let out = decide(&mut a, hid, PolicyOutcome::Reject { why });
    let (id, answer) = answered(&out).unwrap();
    assert_eq!(id, ask.id);
    assert_eq!(a.state(src), Some(SessionState::Active));
    b.t.remote_answered(id, answer, b.now).unwrap();
    let out = b.drain();
    assert_eq!(
        refused_code(auth_result(&out, A, request_id)),
        ErrorCode::E_HANDOVER_REJECTED_BY_POLICY
    );
    assert!(b.t.pending_os_ops().is_empty());
}

#[test]
fn a_holder_with_no_session_to_take_over_refuses_at_once() {
    let (mut a, _, _) = two_gateways();
    // fay-a asks for its own resource: no other holder to take it from.
    let ask = RemoteHandover {
        id: uuid::Uuid::from_u128(9),
        resource_id: "arm".into(),
        access_mode: Write,
        target_fay_id: "fay-a".into(),
        target_credential: a.cred("fay-a"),
    };
    a.t.remote_handover(ask, a.now);
    let (_, answer) = answered(&a.drain()).unwrap();
    assert!(
        matches!(answer, RemoteAnswer::Refused { code, .. } if code == ErrorCode::E_RESOURCE_BUSY)
    );
}

#[test]
fn an_unanswered_question_times_out_the_targets_auth_request() {
    let (_, mut b, _) = two_gateways();
    let (request_id, out) = ask_on_b(&mut b, "arm");
    let ask = asked(&out);
    // The priority script's hard timeout (1 s) plus the slack.
    let out = b.advance(1_000 + REMOTE_SLACK_MS);
    assert_eq!(
        refused_code(auth_result(&out, A, request_id)),
        ErrorCode::E_HANDOVER_TIMEOUT
    );
    assert_eq!(
        b.t.remote_answered(ask.id, RemoteAnswer::Released, b.now),
        Err(UnknownRemote)
    );
}

#[test]
fn busy_stays_busy_without_a_shared_occupancy_a_handover_policy_or_a_second_chance() {
    // Not a cluster: nobody to ask.
    let (_, mut b, _) = two_gateways();
    b.t.access_mut().set_shared(false);
    let (request_id, out) = ask_on_b(&mut b, "arm");
    assert_eq!(
        refused_code(auth_result(&out, A, request_id)),
        ErrorCode::E_RESOURCE_BUSY
    );
    // A resource without a handover policy.
    b.t.access_mut().set_shared(true);
    let (request_id, out) = ask_on_b(&mut b, "cam");
    assert_eq!(
        refused_code(auth_result(&out, A, request_id)),
        ErrorCode::E_RESOURCE_BUSY
    );
    // Released, yet taken by someone else meanwhile: busy, not asked again.
    let (request_id, out) = ask_on_b(&mut b, "arm");
    let ask = asked(&out);
    b.t.remote_answered(ask.id, RemoteAnswer::Released, b.now)
        .unwrap();
    let (op, _) = b.only_op();
    let busy = OsError::Busy("held on node-c".into());
    b.t.os_access_done(op, Err(busy), b.now).unwrap();
    let out = b.drain();
    assert!(!out.iter().any(|o| matches!(o, Output::AskRemote(_))));
    assert_eq!(
        refused_code(auth_result(&out, A, request_id)),
        ErrorCode::E_RESOURCE_BUSY
    );
}
