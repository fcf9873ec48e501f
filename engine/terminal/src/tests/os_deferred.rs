//! SPEC TS-4, HO-4, HO-6, HO-7 with a deferred OS access: the terminal asks
//! its driver for every grant and revoke and goes on meanwhile; the
//! resource is never doubly held while an operation is outstanding, HO-7's
//! deadline covers the OS steps, and late answers are settled.

use dtp_codec::{AccessMode, AuthOutcome, ControlMessage, ErrorCode, HandoverFailedReason};

use super::handover::{decide, question};
use super::handover_failures::{failed_code, hfns};
use super::termination::terminated_reason;
use super::*;
use crate::{AccessGrant, OsError, OsOpId, OsOperation, PolicyOutcome, UnknownOsOp};

use AccessMode::Write;

/// The OS requests among `out`.
pub(crate) fn os_requests(out: &[Output]) -> Vec<(OsOpId, OsOperation, AccessGrant)> {
    out.iter()
        .filter_map(|o| match o {
            Output::OsAccess {
                op,
                operation,
                grant,
                ..
            } => Some((*op, *operation, grant.clone())),
            _ => None,
        })
        .collect()
}

impl Harness {
    /// A harness whose OS access is deferred: every call waits for
    /// [`Harness::answer`].
    pub(crate) fn deferred() -> Self {
        let mut h = Harness::new();
        h.t.access_mut().set_deferred(true);
        h
    }

    /// Runs the outstanding operation `op` on the scripted OS (its failure
    /// scripts apply) and hands the answer to the terminal.
    pub(crate) fn answer(&mut self, op: OsOpId) -> Vec<Output> {
        let (_, operation, grant) = self
            .t
            .pending_os_ops()
            .into_iter()
            .find(|(id, _, _)| *id == op)
            .unwrap_or_else(|| panic!("{op:?} is not outstanding"));
        let result = operation.run(self.t.access_mut(), &grant, None);
        self.t.os_access_done(op, result, self.now).unwrap();
        self.drain()
    }

    /// The one outstanding operation.
    pub(crate) fn only_op(&self) -> (OsOpId, OsOperation) {
        let ops = self.t.pending_os_ops();
        assert_eq!(ops.len(), 1, "{ops:?}");
        (ops[0].0, ops[0].1)
    }

    /// SPEC HO-4 on the OS itself: per resource, an exclusive grant is
    /// alone.
    pub(crate) fn check_os_holders(&self) {
        let mut per: BTreeMap<&str, Vec<AccessMode>> = BTreeMap::new();
        for g in self.t.access().granted() {
            per.entry(&*g.resource_id).or_default().push(g.access_mode);
        }
        for (r, modes) in per {
            let exclusive = modes.iter().filter(|m| is_exclusive(**m)).count();
            assert!(
                exclusive == 0 || modes.len() == 1,
                "HO-4: the OS lets {modes:?} at {r}"
            );
        }
    }
}

pub(crate) fn granted_session(out: &[Output], conn: ConnKey, request_id: u64) -> SessionId {
    match auth_result(out, conn, request_id) {
        Some(AuthOutcome::Granted { session_id }) => session_id,
        other => panic!("expected a grant, got {other:?}"),
    }
}

/// fay-a holds `arm` (write) on A, granted through a deferred OS access.
pub(crate) fn held_deferred() -> (Harness, SessionId) {
    let mut h = Harness::deferred();
    let cred = h.cred("fay-a");
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let id = req.request_id;
    h.send(A, ControlMessage::AuthRequest(req));
    let (op, _) = h.only_op();
    let out = h.answer(op);
    let src = granted_session(&out, A, id);
    h.t.identify(B, "fay-b", h.now).unwrap();
    (h, src)
}

/// Starts a transfer of `src` to fay-b and allows it: T1's revoke is then
/// outstanding.
fn allowed_transfer(h: &mut Harness, src: SessionId) -> (uuid::Uuid, Vec<Output>) {
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    let (id, ..) = question(&out);
    (id, decide(h, id, PolicyOutcome::allow()))
}

#[test]
fn a_grant_waits_for_its_answer_and_holds_the_resource_meanwhile() {
    let mut h = Harness::deferred();
    let cam = {
        let cred = h.cred("fay-c");
        let req = h.auth_request("fay-c", "cam", AccessMode::Read, cred);
        h.send(C, ControlMessage::AuthRequest(req));
        let (op, _) = h.only_op();
        let out = h.answer(op);
        Harness::sent(&out, C)
            .into_iter()
            .find_map(|m| match m {
                ControlMessage::AuthResult(r) => Some(r.outcome),
                _ => None,
            })
            .unwrap()
    };
    let AuthOutcome::Granted { session_id: cam } = cam else {
        panic!("{cam:?}");
    };
    let cred = h.cred("fay-a");
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let first = req.request_id;
    let out = h.send(A, ControlMessage::AuthRequest(req));
    // TS-6: the grant is asked for; no AuthResult until it is answered.
    let ops = os_requests(&out);
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].1, OsOperation::Grant);
    assert_eq!(auth_result(&out, A, first), None);
    let info = h.t.state_of("arm").unwrap();
    assert_eq!(info.occupancy.len(), 1);
    assert_eq!(info.occupancy[0].2, SessionState::Creating);
    assert!(info.controllers.is_empty());
    // Meanwhile a second writer is refused (TS-9) …
    let second = h.auth(B, "fay-b", "arm", Write);
    assert_eq!(refused_code(second), ErrorCode::E_RESOURCE_BUSY);
    // … and other sessions go on.
    let out = h.heartbeat(C, &[(cam, 1)]);
    assert!(matches!(
        Harness::sent(&out, C).as_slice(),
        [ControlMessage::HeartbeatAck(_)]
    ));
    assert!(
        h.t.access()
            .granted()
            .iter()
            .all(|g| &*g.resource_id == "cam")
    );
    // The answer completes TS-6.
    let out = h.answer(ops[0].0);
    let id = granted_session(&out, A, first);
    assert_eq!(h.state(id), Some(SessionState::Active));
    assert_eq!(h.t.active_controllers("arm"), [id]);
    h.check_os_holders();
    // An answer is taken once.
    assert_eq!(
        h.t.os_access_done(ops[0].0, Ok(()), h.now),
        Err(UnknownOsOp)
    );
}

#[test]
fn a_failed_deferred_grant_refuses_the_request_and_leaves_nothing() {
    let mut h = Harness::deferred();
    let cred = h.cred("fay-a");
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let id = req.request_id;
    h.send(A, ControlMessage::AuthRequest(req));
    h.t.access_mut().fail_next_grant();
    let (op, _) = h.only_op();
    let out = h.answer(op);
    assert_eq!(
        refused_code(auth_result(&out, A, id)),
        ErrorCode::E_OS_INTEGRATION_FAILED
    );
    assert!(h.t.sessions().is_empty());
    assert!(h.t.state_of("arm").unwrap().reconciliation.is_empty());
}

/// HO-4 across gateways: a grant's fencing token, handed back with its
/// answer, is kept with the session and written to its audit record.
#[test]
fn a_grants_fencing_token_reaches_the_sessions_audit_record() {
    let mut h = Harness::deferred();
    let cred = h.cred("fay-a");
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let first = req.request_id;
    h.send(A, ControlMessage::AuthRequest(req));
    let (op, _) = h.only_op();
    let grant = h.t.pending_os_ops()[0].2.clone();
    OsOperation::Grant
        .run(h.t.access_mut(), &grant, None)
        .unwrap();
    h.t.os_access_fenced(op, Ok(Some(42)), h.now).unwrap();
    let out = h.drain();
    let id = granted_session(&out, A, first);
    h.release(A, id);
    let (op, _) = h.only_op();
    let out = h.answer(op);
    assert!(
        matches!(out.last(), Some(Output::Audit(crate::AuditRecord::SessionTerminated(a)))
        if a.session_id == id && a.fencing == Some(42)),
        "{out:?}"
    );
}

/// TS-9 across gateways: a grant refused because another gateway holds
/// the resource is E_RESOURCE_BUSY, and leaves nothing to reconcile.
#[test]
fn a_grant_busy_on_another_gateway_is_resource_busy() {
    let mut h = Harness::deferred();
    let cred = h.cred("fay-a");
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let id = req.request_id;
    h.send(A, ControlMessage::AuthRequest(req));
    let (op, _) = h.only_op();
    let busy = Err(OsError::Busy("held on node-b".into()));
    h.t.os_access_done(op, busy, h.now).unwrap();
    let out = h.drain();
    assert_eq!(
        refused_code(auth_result(&out, A, id)),
        ErrorCode::E_RESOURCE_BUSY
    );
    assert!(h.t.sessions().is_empty());
    assert!(h.t.state_of("arm").unwrap().reconciliation.is_empty());
}

#[test]
fn a_handover_waits_for_each_os_step_and_never_holds_the_resource_twice() {
    let (mut h, src) = held_deferred();
    let (id, out) = allowed_transfer(&mut h, src);
    // T0 done, T1's revoke (a release: the target follows here) asked for.
    let ops = os_requests(&out);
    assert_eq!(ops.len(), 1);
    assert_eq!((ops[0].1, ops[0].2.session_id), (OsOperation::Release, src));
    assert_eq!(h.state(src), Some(SessionState::HandoverPending));
    assert_eq!(h.t.active_controllers("arm"), [src]);
    h.check_os_holders();
    // The handover is still in progress: a second request queues (HO-6),
    // a late policy answer is not taken, the source's heartbeats are.
    let c = h.cred("fay-c");
    h.t.identify(C, "fay-c", h.now).unwrap();
    let out = h.transfer(A, src, "fay-c", c);
    assert!(refusals(&out).is_empty(), "{out:?}");
    assert_eq!(h.t.state_of("arm").unwrap().queued, 1);
    assert!(
        h.t.policy_decided(id, PolicyOutcome::allow(), h.now)
            .is_err()
    );
    let out = h.heartbeat(A, &[(src, 3)]);
    assert!(matches!(
        Harness::sent(&out, A).as_slice(),
        [ControlMessage::HeartbeatAck(_)]
    ));
    let other = h.auth(B, "fay-b", "cam", Write);
    assert!(matches!(other, None | Some(AuthOutcome::Refused { .. })));
    // T1 answered: T2 (no controller) and T3 (target creating), T4 asked.
    let (op, _) =
        h.t.pending_os_ops()
            .into_iter()
            .find(|(_, o, g)| *o == OsOperation::Release && g.session_id == src)
            .map(|(id, o, _)| (id, o))
            .unwrap();
    let out = h.answer(op);
    assert_eq!(h.state(src), None);
    assert!(h.t.active_controllers("arm").is_empty());
    let t4 = os_requests(&out);
    assert_eq!(t4.len(), 1);
    assert_eq!(t4[0].1, OsOperation::Grant);
    assert_eq!(&*t4[0].2.holder, "fay-b");
    assert_eq!(h.state(t4[0].2.session_id), Some(SessionState::Creating));
    assert!(
        h.t.access()
            .granted()
            .iter()
            .all(|g| &*g.resource_id != "arm")
    );
    // T4 answered: T5.
    let out = h.answer(t4[0].0);
    let target = t4[0].2.session_id;
    assert_eq!(h.state(target), Some(SessionState::Active));
    assert_eq!(h.t.active_controllers("arm"), [target]);
    assert!(
        Harness::sent(&out, B)
            .iter()
            .any(|m| matches!(m, ControlMessage::AuthResult(_)))
    );
    h.check_os_holders();
    // The queued request is evaluated now, against the new holder.
    assert_eq!(h.t.state_of("arm").unwrap().queued, 0);
}

#[test]
fn ho7_in_t1_restores_the_source_and_a_late_revoke_is_granted_back() {
    let (mut h, src) = held_deferred();
    let (_, out) = allowed_transfer(&mut h, src);
    let (op, _) = (os_requests(&out)[0].0, ());
    // The deadline (1 s, from the evaluation's start) passes with T1
    // outstanding.
    let out = h.advance(1_001);
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_TIMEOUT);
    let n = hfns(&out, A);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].reason, HandoverFailedReason::Timeout);
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(h.t.pending_handovers().is_empty());
    // The resource stays held for handovers until the answer: another
    // transfer queues.
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    assert!(refusals(&out).is_empty(), "{out:?}");
    assert_eq!(h.t.state_of("arm").unwrap().queued, 1);
    // The revoke went through after all: the source is granted again
    // (TS-4: the rollback is whole), then the queue moves on.
    let out = h.answer(op);
    let regrant = os_requests(&out);
    assert_eq!(regrant.len(), 1);
    assert_eq!(
        (regrant[0].1, regrant[0].2.session_id),
        (OsOperation::Grant, src)
    );
    let out = h.answer(regrant[0].0);
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(h.t.access().granted().iter().any(|g| g.session_id == src));
    assert_eq!(h.t.state_of("arm").unwrap().queued, 0);
    question(&out);
    h.check_os_holders();
}

#[test]
fn ho7_in_t1_with_a_late_failure_changes_nothing_more() {
    let (mut h, src) = held_deferred();
    let (_, out) = allowed_transfer(&mut h, src);
    let op = os_requests(&out)[0].0;
    h.advance(1_001);
    h.t.access_mut().fail_next_revoke();
    let out = h.answer(op);
    assert!(os_requests(&out).is_empty());
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(h.t.access().granted().iter().any(|g| g.session_id == src));
    assert!(h.t.pending_os_ops().is_empty());
}

#[test]
fn a_source_released_while_its_late_revoke_is_outstanding_waits_for_it() {
    let (mut h, src) = held_deferred();
    let (_, out) = allowed_transfer(&mut h, src);
    let op = os_requests(&out)[0].0;
    h.advance(1_001);
    // Released meanwhile: no second revoke while the first is out.
    let out = h.release(A, src);
    assert!(os_requests(&out).is_empty());
    assert_eq!(h.state(src), Some(SessionState::Terminating));
    // The late revoke is the release's revoke.
    h.answer(op);
    assert_eq!(h.state(src), None);
    assert!(h.t.access().granted().is_empty());
    assert_eq!(h.t.access().violations(), 0);
}

/// [`held_deferred`] with a shared occupancy (a cluster's), and the
/// transfer to fay-b allowed and timed out in T1: the late revoke `op` is
/// outstanding.
fn shared_t1_timed_out() -> (Harness, SessionId, OsOpId) {
    let (mut h, src) = held_deferred();
    h.t.access_mut().set_shared(true);
    let (_, out) = allowed_transfer(&mut h, src);
    let op = os_requests(&out)[0].0;
    let out = h.advance(1_001);
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_TIMEOUT);
    assert_eq!(hfns(&out, A)[0].reason, HandoverFailedReason::Timeout);
    (h, src, op)
}

#[test]
fn ho7_in_t1_on_a_shared_occupancy_restores_the_source_only_after_its_revoke_and_regrant() {
    let (mut h, src, op) = shared_t1_timed_out();
    // Not active while the revoke may still free the resource for another
    // gateway: no controller here that the others cannot see.
    assert_eq!(h.state(src), Some(SessionState::HandoverPending));
    // The revoke went through: the source is granted again first ...
    let out = h.answer(op);
    let regrant = os_requests(&out);
    assert_eq!(
        (regrant[0].1, regrant[0].2.session_id),
        (OsOperation::Grant, src)
    );
    assert_eq!(h.state(src), Some(SessionState::HandoverPending));
    // ... and active again only once that grant holds.
    h.answer(regrant[0].0);
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(h.t.access().granted().iter().any(|g| g.session_id == src));
    assert_eq!(h.t.access().violations(), 0);
    h.check_os_holders();
}

#[test]
fn ho7_in_t1_on_a_shared_occupancy_ends_the_source_whose_resource_went_elsewhere() {
    let (mut h, src, op) = shared_t1_timed_out();
    let out = h.answer(op);
    let regrant = os_requests(&out)[0].0;
    // Another gateway admitted a controller between the revoke and the
    // grant: the source cannot come back, and ends.
    h.t.access_mut().fail_next_grant();
    let out = h.answer(regrant);
    assert_eq!(
        terminated_reason(&out, src),
        Some(crate::TerminationReason::ResourceUnavailable)
    );
    assert_eq!(h.state(src), None);
    assert!(h.t.access().granted().is_empty());
    assert!(h.t.pending_os_ops().is_empty());
}

#[test]
fn ho7_in_t1_on_a_shared_occupancy_restores_the_source_at_once_when_the_revoke_failed() {
    let (mut h, src, op) = shared_t1_timed_out();
    h.t.access_mut().fail_next_revoke();
    let out = h.answer(op);
    assert!(os_requests(&out).is_empty());
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert!(h.t.access().granted().iter().any(|g| g.session_id == src));
}

#[test]
fn ho7_in_t1_on_a_shared_occupancy_ends_a_source_whose_revoke_outcome_is_unknown() {
    let (mut h, src, op) = shared_t1_timed_out();
    h.t.access_mut().kill_next_revoke();
    let out = h.answer(op);
    // Not restored: it ends, and its grant is revoked again (TS-4).
    assert_eq!(h.state(src), Some(SessionState::Terminating));
    let again = os_requests(&out);
    assert_eq!(
        (again[0].1, again[0].2.session_id),
        (OsOperation::Revoke, src)
    );
}

#[test]
fn ho7_in_t4_abandons_the_target_and_a_late_grant_is_revoked() {
    let (mut h, src) = held_deferred();
    let (_, out) = allowed_transfer(&mut h, src);
    let t1 = os_requests(&out)[0].0;
    let out = h.answer(t1);
    let (t4, _, grant) = os_requests(&out)[0].clone();
    let target = grant.session_id;
    let out = h.advance(1_001);
    // HO-5 for T3–T4: the source is not restored, the target is
    // abandoned, both runtimes hear `timeout`.
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_TIMEOUT);
    assert_eq!(hfns(&out, A).len(), 1);
    assert_eq!(hfns(&out, B).len(), 1);
    assert_eq!(hfns(&out, B)[0].reason, HandoverFailedReason::Timeout);
    assert_eq!(h.state(src), None);
    assert_eq!(h.state(target), Some(SessionState::Terminating));
    assert!(h.t.active_controllers("arm").is_empty());
    // Still held: no one else takes the resource before the answer.
    assert_eq!(
        refused_code(h.auth(C, "fay-c", "arm", Write)),
        ErrorCode::E_RESOURCE_BUSY
    );
    // The grant went through after all: it is revoked, then the
    // resource is free.
    let out = h.answer(t4);
    let revoke = os_requests(&out);
    assert_eq!(
        (revoke[0].1, revoke[0].2.session_id),
        (OsOperation::Revoke, target)
    );
    h.answer(revoke[0].0);
    assert_eq!(h.state(target), None);
    assert!(h.t.access().granted().is_empty());
    assert_eq!(h.t.access().violations(), 0);
    let cred = h.cred("fay-c");
    let req = h.auth_request("fay-c", "arm", Write, cred);
    h.send(C, ControlMessage::AuthRequest(req));
    assert_eq!(h.only_op().1, OsOperation::Grant);
}

#[test]
fn ho7_in_t4_with_a_late_failure_just_releases_the_target() {
    let (mut h, src) = held_deferred();
    let (_, out) = allowed_transfer(&mut h, src);
    let out = h.answer(os_requests(&out)[0].0);
    let (t4, _, grant) = os_requests(&out)[0].clone();
    h.advance(1_001);
    h.t.access_mut().fail_next_grant();
    let out = h.answer(t4);
    assert!(os_requests(&out).is_empty());
    assert_eq!(h.state(grant.session_id), None);
    assert!(h.t.sessions().is_empty());
}

#[test]
fn an_answer_for_an_unknown_operation_is_refused() {
    let mut h = Harness::deferred();
    assert_eq!(
        h.t.os_access_done(OsOpId(99), Ok(()), h.now),
        Err(UnknownOsOp)
    );
    assert_eq!(
        h.t.os_access_done(OsOpId(1), Err(OsError::Failed("x".into())), h.now),
        Err(UnknownOsOp)
    );
}
