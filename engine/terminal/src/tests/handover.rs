//! SPEC HO-1 … HO-4, HO-9, HO-10: successful handovers.

use dtp_codec::{AccessMode, AuthOutcome, ControlMessage, SessionState};
use uuid::Uuid;

use super::*;
use crate::{
    AccessCall, AdminHandover, AuditRecord, HandoverAdmission, HandoverContext, HandoverKind,
    HandoverOutcome, HandoverTrigger, PolicyKind, PolicyOutcome, TerminationReason,
};

use AccessMode::Write;

/// The policy question among `out`.
pub(crate) fn question(out: &[Output]) -> (Uuid, PolicyRef, HandoverContext, UnixMs) {
    out.iter()
        .find_map(|o| match o {
            Output::EvaluatePolicy {
                handover_id,
                policy,
                context,
                deadline,
                ..
            } => Some((*handover_id, policy.clone(), (**context).clone(), *deadline)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no EvaluatePolicy in {out:?}"))
}

pub(crate) fn decide(h: &mut Harness, id: Uuid, outcome: PolicyOutcome) -> Vec<Output> {
    h.t.policy_decided(id, outcome, h.now).unwrap();
    h.drain()
}

/// The controllers of `resource` after each observed transition of `out`.
fn controllers_after_each_step(out: &[Output], resource: &str) -> Vec<usize> {
    let mut states = BTreeMap::new();
    out.iter()
        .filter_map(|o| match o {
            Output::StateChanged(c) if *c.resource_id == *resource => {
                states.insert(c.session_id, c.to);
                Some(
                    states
                        .values()
                        .filter(|s| crate::session::is_controlling(**s))
                        .count(),
                )
            }
            _ => None,
        })
        .collect()
}

#[test]
fn fay_to_fay_by_transfer_request() {
    let mut h = Harness::new();
    let src = h.session(A, "fay-a", "arm", Write);
    h.t.identify(B, "fay-b", h.now).unwrap();
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    let (id, policy, ctx, deadline) = question(&out);
    assert_eq!(id.get_version_num(), 4);
    assert_eq!(policy.kind(), PolicyKind::PriorityScript);
    assert_eq!(deadline, h.now.plus(1_000));
    // HO-3a's inputs.
    assert_eq!(ctx.source.session_id, src);
    assert_eq!(ctx.source.fay_id, "fay-a");
    assert_eq!(ctx.source.access_mode, Write);
    assert_eq!(ctx.target_fay_id, "fay-b");
    assert!(ctx.target_grants.iter().any(|g| g.resource_id == "arm"));
    assert_eq!(ctx.now, h.now);
    assert_eq!(ctx.resource.metadata["kind"], "arm");
    assert_eq!(ctx.reason, "test");
    assert_eq!(
        (ctx.kind, ctx.trigger),
        (HandoverKind::FayToFay, HandoverTrigger::TransferRequest)
    );
    // Pre-emption waits for the policy.
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert_eq!(h.t.pending_handovers().len(), 1);

    let out = decide(&mut h, id, PolicyOutcome::allow());
    // HO-10: the source hears handover_pending → terminating → terminated.
    let handed = Some("handed_over".to_owned());
    assert_eq!(
        state_changes(&Harness::sent(&out, A)),
        [
            (SessionState::HandoverPending, None),
            (SessionState::Terminating, handed.clone()),
            (SessionState::Terminated, handed)
        ]
    );
    // The target hears AuthResult (unsolicited: request 0), then active.
    let to_b = Harness::sent(&out, B);
    let Some(ControlMessage::AuthResult(r)) = to_b.first() else {
        panic!("{to_b:?}")
    };
    let AuthOutcome::Granted { session_id: new } = r.outcome else {
        panic!()
    };
    assert_eq!(r.request_id, 0);
    assert_eq!(state_changes(&to_b), [(SessionState::Active, None)]);
    // HO-4: one controller at most, none between T2 and T3.
    assert_eq!(controllers_after_each_step(&out, "arm"), [1, 0, 0, 0, 1]);
    assert_eq!(h.t.active_controllers("arm"), [new]);
    assert_eq!(h.t.session(new).unwrap().fay_id, "fay-b");
    assert_eq!(h.t.session(new).unwrap().conn, Some(B));
    // OS: grant source, revoke source, grant target.
    let calls: Vec<_> =
        h.t.access()
            .calls()
            .iter()
            .map(|c| match c {
                AccessCall::Grant(g, ok) => ("grant", g.holder.clone(), *ok),
                AccessCall::Revoke(g, ok) => ("revoke", g.holder.clone(), *ok),
            })
            .collect();
    assert_eq!(
        calls,
        [
            ("grant", "fay-a".into(), true),
            ("revoke", "fay-a".into(), true),
            ("grant", "fay-b".into(), true)
        ]
    );
    // HO-10 audit: the source's termination and the full handover record.
    let records = audits(&out);
    assert!(matches!(&records[0], AuditRecord::SessionTerminated(s)
        if s.session_id == src && s.reason == TerminationReason::HandedOver));
    let AuditRecord::Handover(a) = &records[1] else {
        panic!()
    };
    assert_eq!(a.handover_id, id);
    assert_eq!(a.target_session_id, Some(new));
    assert_eq!(a.outcome, HandoverOutcome::Succeeded);
    assert_eq!(a.policy, "prio");
    assert_eq!(a.decisions.len(), 1);
    assert_eq!(a.decisions[0].decision, "allow");
    assert!(h.t.pending_handovers().is_empty());
}

#[test]
fn fay_to_fay_by_auth_request() {
    let mut h = Harness::new();
    let src = h.session(A, "fay-a", "arm", Write);
    let cred = h.cred("fay-b");
    let req = h.auth_request("fay-b", "arm", Write, cred);
    let request_id = req.request_id;
    let out = h.send(B, ControlMessage::AuthRequest(req));
    assert_eq!(auth_result(&out, B, request_id), None);
    let (id, _, ctx, _) = question(&out);
    assert_eq!(ctx.trigger, HandoverTrigger::AuthRequest);
    assert_eq!(ctx.source.session_id, src);
    let out = decide(&mut h, id, PolicyOutcome::allow());
    let Some(AuthOutcome::Granted { session_id }) = auth_result(&out, B, request_id) else {
        panic!("{out:?}")
    };
    assert_eq!(h.t.active_controllers("arm"), [session_id]);
    assert_eq!(h.state(src), None);
}

#[test]
fn an_auth_request_in_another_mode_does_not_start_a_handover() {
    let mut h = Harness::new();
    h.session(A, "fay-a", "arm", Write);
    let got = h.auth(B, "fay-b", "arm", AccessMode::Read);
    assert_eq!(refused_code(got), dtp_codec::ErrorCode::E_RESOURCE_BUSY);
    let mut c = config();
    c.policies.get_mut("prio").unwrap().on_auth_request = false;
    let mut h = Harness::with(c);
    h.session(A, "fay-a", "arm", Write);
    let got = h.auth(B, "fay-b", "arm", Write);
    assert_eq!(refused_code(got), dtp_codec::ErrorCode::E_RESOURCE_BUSY);
}

#[test]
fn fay_to_fay_by_admin() {
    let mut h = Harness::new();
    let src = h.session(A, "fay-a", "arm", Write);
    h.t.identify(B, "fay-b", h.now).unwrap();
    let cred = h.cred("fay-b");
    let req = AdminHandover {
        source_session_id: src,
        target_fay_id: "fay-b".into(),
        target_credential: cred,
        reason: "operator".into(),
        metadata: BTreeMap::new(),
    };
    let HandoverAdmission::Evaluating(id) = h.t.admin_handover(req, h.now).unwrap() else {
        panic!()
    };
    let out = h.drain();
    assert_eq!(question(&out).2.trigger, HandoverTrigger::Admin);
    let out = decide(&mut h, id, PolicyOutcome::allow());
    assert!(matches!(
        auth_result(&out, B, 0),
        Some(AuthOutcome::Granted { .. })
    ));
}

/// HO-9 both ways: a Fay hands `screen` to the human user, then another
/// Fay takes it back from the human (and an admin hands it on).
#[test]
fn fay_to_human_and_human_to_fay() {
    let mut h = Harness::new();
    let src = h.session(A, "fay-a", "screen", Write);
    let out = h.transfer(A, src, "human:t1", Bytes::new());
    let (id, policy, ctx, deadline) = question(&out);
    assert_eq!(policy.kind(), PolicyKind::HumanDecision);
    assert_eq!(deadline, h.now.plus(30_000));
    assert_eq!(ctx.kind, HandoverKind::FayToHuman);
    assert!(ctx.target_human && ctx.target_grants.is_empty());
    let out = decide(&mut h, id, PolicyOutcome::allow());
    let human = h.t.active_controllers("screen")[0];
    let info = h.t.session(human).unwrap();
    assert!(info.human);
    assert_eq!((info.fay_id.as_str(), info.conn), ("human:t1", None));
    assert_eq!(state_changes(&Harness::sent(&out, A)).len(), 3);
    assert!(
        h.t.access()
            .granted()
            .iter()
            .any(|g| &*g.holder == "human:t1")
    );
    // The human user's session has no liveness to lose.
    h.advance(600_000);
    assert_eq!(h.state(human), Some(SessionState::Active));
    // No runtime may hand the human's session over.
    let cred = h.cred("fay-b");
    let out = h.transfer(A, human, "fay-b", cred);
    assert_eq!(
        refusals(&out),
        [dtp_codec::ErrorCode::E_HANDOVER_INVALID_SOURCE]
    );
    // Human → Fay, triggered by the Fay's AuthRequest.
    let cred = h.cred("fay-c");
    let req = h.auth_request("fay-c", "screen", Write, cred);
    let rid = req.request_id;
    let out = h.send(C, ControlMessage::AuthRequest(req));
    let (id, _, ctx, _) = question(&out);
    assert_eq!(ctx.kind, HandoverKind::HumanToFay);
    assert!(ctx.source.human);
    let out = decide(&mut h, id, PolicyOutcome::allow());
    let Some(AuthOutcome::Granted { session_id: c }) = auth_result(&out, C, rid) else {
        panic!("{out:?}")
    };
    assert_eq!(h.t.active_controllers("screen"), [c]);
    assert!(h.t.access().granted().iter().all(|g| &*g.holder == "fay-c"));
}

#[test]
fn admin_hands_the_human_session_to_a_fay() {
    let mut h = Harness::new();
    let src = h.session(A, "fay-a", "screen", Write);
    let out = h.transfer(A, src, "human:t1", Bytes::new());
    decide(&mut h, question(&out).0, PolicyOutcome::allow());
    let human = h.t.active_controllers("screen")[0];
    h.now = h.now.plus(1);
    let cred = h.cred("fay-b");
    let req = AdminHandover {
        source_session_id: human,
        target_fay_id: "fay-b".into(),
        target_credential: cred,
        reason: "done".into(),
        metadata: BTreeMap::new(),
    };
    let HandoverAdmission::Evaluating(id) = h.t.admin_handover(req, h.now).unwrap() else {
        panic!()
    };
    h.drain();
    decide(&mut h, id, PolicyOutcome::allow());
    // fay-b has no connection yet: its session starts detached, and the
    // liveness clock runs from its creation.
    let new = h.t.active_controllers("screen")[0];
    let info = h.t.session(new).unwrap();
    assert_eq!(
        (info.fay_id.as_str(), info.conn_down_since),
        ("fay-b", Some(h.now))
    );
    h.advance(30_001);
    assert_eq!(h.state(new), None);
}

#[test]
fn require_human_asks_the_fallback_with_a_new_deadline() {
    let mut c = config();
    let ai = PolicyRef::AiModel {
        model_endpoint: "http://model".into(),
        context_fields: vec![],
        decision_timeout_ms: 500,
    };
    let mut p = HandoverPolicyConfig::new(ai);
    p.human_fallback = Some("ask".into());
    c.policies.insert("ai".into(), p);
    c.resources[0].handover_policy = Some("ai".into());
    let mut h = Harness::with(c);
    let src = h.session(A, "fay-a", "arm", Write);
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    let (id, policy, _, _) = question(&out);
    assert_eq!(policy.kind(), PolicyKind::AiModel);
    h.now = h.now.plus(400);
    let out = decide(&mut h, id, PolicyOutcome::RequireHuman);
    let (again, policy, ctx, deadline) = question(&out);
    assert_eq!(again, id);
    assert_eq!(policy.kind(), PolicyKind::HumanDecision);
    assert_eq!((ctx.now, deadline), (h.now, h.now.plus(30_000)));
    // Long past the model's deadline, the human still has time.
    h.advance(20_000);
    let out = decide(&mut h, id, PolicyOutcome::allow());
    let AuditRecord::Handover(a) = audits(&out).pop().unwrap() else {
        panic!()
    };
    let decisions: Vec<_> = a
        .decisions
        .iter()
        .map(|d| (d.policy.as_str(), d.decision))
        .collect();
    assert_eq!(decisions, [("ai", "require_human"), ("ask", "allow")]);
    assert_eq!(a.outcome, HandoverOutcome::Succeeded);
}
