//! SPEC TS-10 … TS-16: ending sessions.

use dtp_codec::{AccessMode, ErrorCode, SessionId, SessionState};
use dtp_crypto::cred::Credential;

use super::*;
use crate::{AccessCall, AuditRecord, TerminationReason};

use AccessMode::{Read, Write};

/// The reason `id` ended with, from its terminated notice among `out`.
pub(crate) fn terminated_reason(out: &[Output], id: SessionId) -> Option<TerminationReason> {
    out.iter().find_map(|o| match o {
        Output::StateChanged(c) if c.session_id == id && c.to == SessionState::Terminated => {
            c.reason
        }
        _ => None,
    })
}

#[test]
fn release_follows_ts12_in_order() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    let out = h.release(A, id);
    // Runtime: terminating, then terminated, both with the reason.
    let reason = Some("client_release".to_owned());
    assert_eq!(
        state_changes(&Harness::sent(&out, A)),
        [
            (SessionState::Terminating, reason.clone()),
            (SessionState::Terminated, reason)
        ]
    );
    // OS revoke before terminated; occupancy gone; audit written last.
    assert!(matches!(
        h.t.access().calls(),
        [AccessCall::Grant(_, true), AccessCall::Revoke(_, true)]
    ));
    assert!(h.t.access().granted().is_empty());
    assert!(h.t.state_of("arm").unwrap().occupancy.is_empty());
    assert!(
        matches!(out.last(), Some(Output::Audit(AuditRecord::SessionTerminated(a)))
        if a.reason == TerminationReason::ClientRelease && a.session_id == id)
    );
    assert_eq!(h.state(id), None);
}

#[test]
fn release_is_idempotent_and_unknown_is_not_found() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.release(A, id);
    let again = h.release(A, id);
    assert_eq!(
        state_changes(&Harness::sent(&again, A)),
        [(SessionState::Terminated, Some("client_release".into()))]
    );
    assert!(refusals(&again).is_empty());
    let unknown = h.release(A, SessionId::from_u128(5));
    assert_eq!(refusals(&unknown), [ErrorCode::E_SESSION_NOT_FOUND]);
}

#[test]
fn release_from_a_stranger_is_unauthorized() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.session(B, "fay-b", "cam", Read);
    let out = h.release(B, id);
    assert_eq!(refusals(&out), [ErrorCode::E_UNAUTHORIZED]);
    assert_eq!(h.state(id), Some(SessionState::Active));
    h.release(A, id);
    let out = h.release(B, id);
    assert_eq!(refusals(&out), [ErrorCode::E_UNAUTHORIZED]);
}

#[test]
fn a_failed_os_revoke_keeps_the_session_terminating_until_a_retry_works() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.t.access_mut().fail_next_revoke();
    let out = h.release(A, id);
    assert_eq!(
        state_changes(&Harness::sent(&out, A)),
        [(SessionState::Terminating, Some("client_release".into()))]
    );
    assert_eq!(h.state(id), Some(SessionState::Terminating));
    // Still occupying: nobody else gets the resource meanwhile.
    assert_eq!(h.t.state_of("arm").unwrap().occupancy.len(), 1);
    assert_eq!(
        refused_code(h.auth(B, "fay-b", "arm", Write)),
        ErrorCode::E_RESOURCE_BUSY
    );
    // A second release is a success that reports terminating.
    let again = h.release(A, id);
    assert_eq!(
        state_changes(&Harness::sent(&again, A)),
        [(SessionState::Terminating, Some("client_release".into()))]
    );
    // Heartbeats for it get E_SESSION_TERMINATED.
    assert_eq!(
        refusals(&h.heartbeat(A, &[(id, 0)])),
        [ErrorCode::E_SESSION_TERMINATED]
    );
    assert_eq!(h.t.poll_timeout(), Some(h.now.plus(1_000)));
    h.t.access_mut().fail_next_revoke();
    h.advance(1_000);
    assert_eq!(h.state(id), Some(SessionState::Terminating));
    let out = h.advance(1_000);
    assert_eq!(
        terminated_reason(&out, id),
        Some(TerminationReason::ClientRelease)
    );
    assert!(h.t.access().granted().is_empty());
    assert_eq!(h.t.access().violations(), 0);
}

#[test]
fn credential_expiry_ends_the_session_at_not_after() {
    let mut h = Harness::new();
    let cred = h.cred_with("fay-a", all_grants(), 60);
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let Some(dtp_codec::AuthOutcome::Granted { session_id: id }) = h.auth_with(A, req) else {
        panic!()
    };
    let not_after = UnixMs((h.now.secs() + 60) * 1000);
    assert_eq!(h.t.poll_timeout(), Some(not_after));
    // Keep it alive by heartbeats: expiry does not care.
    h.advance(59_000);
    h.heartbeat(A, &[(id, 0)]);
    assert_eq!(h.state(id), Some(SessionState::Active));
    let out = h.advance(1_000);
    assert_eq!(
        terminated_reason(&out, id),
        Some(TerminationReason::CredentialExpired)
    );
    assert_eq!(h.now, not_after);
}

#[test]
fn a_revocation_ends_its_sessions_at_once_and_only_those() {
    let mut h = Harness::new();
    let cred = h.cred("fay-a");
    let descriptor = Credential::from_bytes(&cred)
        .unwrap()
        .descriptor()
        .descriptor_id;
    let req = h.auth_request("fay-a", "arm", Write, cred.clone());
    h.auth_with(A, req);
    let req = h.auth_request("fay-a", "cam", Read, cred);
    h.auth_with(A, req);
    let other = h.session(A, "fay-a", "screen", Read);
    assert_eq!(h.t.revoke(descriptor, h.now), Ok(2));
    let out = h.drain();
    let ended: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::StateChanged(c) if c.to == SessionState::Terminated => c.reason,
            _ => None,
        })
        .collect();
    assert_eq!(ended, [TerminationReason::CredentialRevoked; 2]);
    assert_eq!(h.t.sessions().len(), 1);
    assert_eq!(h.state(other), Some(SessionState::Active));
}

#[test]
fn a_full_revocation_list_still_ends_the_sessions() {
    let mut h = Harness::new();
    let cred = h.cred("fay-a");
    let descriptor = Credential::from_bytes(&cred)
        .unwrap()
        .descriptor()
        .descriptor_id;
    let req = h.auth_request("fay-a", "arm", Write, cred);
    h.auth_with(A, req);
    let mut verifier = dtp_crypto::cred::Verifier::new();
    verifier.trust(*h.issuer.public_key()).unwrap();
    verifier.set_revocations(dtp_crypto::cred::RevocationList::new(0));
    h.t.verifier = verifier;
    let err = h.t.revoke(descriptor, h.now).unwrap_err();
    assert_eq!(err.code, ErrorCode::LIMIT_EXCEEDED);
    assert!(h.t.sessions().is_empty());
}

#[test]
fn resource_loss_cascades_and_nothing_comes_back() {
    let mut h = Harness::new();
    let a = h.session(A, "fay-a", "cam", Read);
    let b = h.session(B, "fay-b", "cam", Read);
    let keep = h.session(A, "fay-a", "arm", Write);
    assert_eq!(h.t.set_resource_available("cam", false, h.now), Ok(2));
    let out = h.drain();
    for (conn, id) in [(A, a), (B, b)] {
        let msgs = Harness::sent(&out, conn);
        assert_eq!(
            state_changes(&msgs),
            [
                (
                    SessionState::Terminating,
                    Some("resource_unavailable".into())
                ),
                (
                    SessionState::Terminated,
                    Some("resource_unavailable".into())
                )
            ]
        );
        assert_eq!(
            terminated_reason(&out, id),
            Some(TerminationReason::ResourceUnavailable)
        );
    }
    assert!(!h.t.state_of("cam").unwrap().available);
    assert_eq!(h.state(keep), Some(SessionState::Active));
    assert_eq!(h.t.set_resource_available("cam", true, h.now), Ok(0));
    assert!(h.t.state_of("cam").unwrap().occupancy.is_empty());
    assert_eq!(
        refusals(&h.heartbeat(A, &[(a, 0)])),
        [ErrorCode::E_SESSION_TERMINATED]
    );
    h.session(A, "fay-a", "cam", Read);
    let unknown = h.t.set_resource_available("nope", false, h.now);
    assert_eq!(unknown.unwrap_err().code, ErrorCode::E_RESOURCE_UNKNOWN);
}

#[test]
fn force_terminate_is_forced_and_reports_unknown_and_ended() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    assert_eq!(h.t.force_terminate(id, h.now), Ok(()));
    let out = h.drain();
    assert_eq!(terminated_reason(&out, id), Some(TerminationReason::Forced));
    let ended = h.t.force_terminate(id, h.now).unwrap_err();
    assert_eq!(ended.code, ErrorCode::E_SESSION_TERMINATED);
    let unknown =
        h.t.force_terminate(SessionId::from_u128(1), h.now)
            .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::E_SESSION_NOT_FOUND);
}

#[test]
fn forgotten_sessions_become_not_found() {
    let mut c = config();
    c.tombstones = 1;
    let mut h = Harness::with(c);
    let first = h.session(A, "fay-a", "arm", Write);
    let second = h.session(A, "fay-a", "cam", Write);
    h.release(A, first);
    h.release(A, second);
    assert_eq!(
        refusals(&h.heartbeat(A, &[(first, 0), (second, 0)])),
        [
            ErrorCode::E_SESSION_NOT_FOUND,
            ErrorCode::E_SESSION_TERMINATED
        ]
    );
}

/// SPEC HO-4 across gateways: a gateway that may no longer hold grants
/// ends every active session, revoking each, with resource_unavailable.
#[test]
fn fencing_ends_every_active_session() {
    let mut h = Harness::new();
    let a = h.session(A, "fay-a", "arm", Write);
    let b = h.session(B, "fay-b", "cam", Write);
    assert_eq!(h.t.fence(h.now), 2);
    for id in [a, b] {
        assert_eq!(h.state(id), None, "ended");
    }
    assert!(h.t.access().granted().is_empty(), "every grant revoked");
    let out = h.drain();
    let reasons: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Audit(AuditRecord::SessionTerminated(s)) => Some(s.reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, [TerminationReason::ResourceUnavailable; 2]);
    assert_eq!(h.t.fence(h.now), 0, "nothing left to end");
}
