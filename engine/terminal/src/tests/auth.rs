//! SPEC TS-5 … TS-9, TS-17: AuthRequests and session creation.

use dtp_codec::{AccessMode, AuthOutcome, ControlMessage, ErrorCode, HeartbeatAck, SessionState};
use dtp_crypto::cred::{Grant, IssuerKeyPair, Verifier};

use super::*;
use crate::{AccessCall, AuditRecord, RandomSource, TerminationReason};

use AccessMode::{Configure, Execute, Read, Write};

#[test]
fn a_granted_auth_request_creates_an_active_v7_session() {
    let mut h = Harness::new();
    let cred = h.cred("fay-a");
    let req = h.auth_request("fay-a", "arm", Write, cred);
    let out = h.send(A, ControlMessage::AuthRequest(req));
    let Some(AuthOutcome::Granted { session_id }) = auth_result(&out, A, 1) else {
        panic!("{out:?}");
    };
    assert_eq!(session_id.get_version_num(), 7);
    // TS-6: creating → active, both observed, in that order, nothing sent
    // to the runtime but the AuthResult (TS-15: "or via AuthResult").
    let changes: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::StateChanged(c) => Some((c.from, c.to)),
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        [
            (None, SessionState::Creating),
            (Some(SessionState::Creating), SessionState::Active)
        ]
    );
    assert_eq!(Harness::sent(&out, A).len(), 1);
    let info = h.t.session(session_id).unwrap();
    assert_eq!(info.created_at, h.now);
    assert_eq!(info.last_heartbeat_at, h.now);
    assert_eq!(info.conn, Some(A));
    assert_eq!(h.t.access().granted().len(), 1);
    assert_eq!(h.t.active_controllers("arm"), [session_id]);
}

#[test]
fn each_credential_failure_has_its_own_code() {
    let mut h = Harness::new();
    let good = h.cred("fay-a");
    // Malformed bytes.
    let req = h.auth_request("fay-a", "arm", Write, Bytes::from_static(b"junk"));
    assert_eq!(
        refused_code(h.auth_with(A, req)),
        ErrorCode::CREDENTIAL_INVALID
    );
    // Unknown issuer.
    let stranger = IssuerKeyPair::from_seed(&[9; 32]).unwrap();
    let foreign = {
        let req = dtp_crypto::cred::CredentialRequest {
            fay_id: "fay-a".into(),
            noise_key: [1; 32],
            grants: all_grants(),
            not_before: h.now.secs() - 10,
            not_after: h.now.secs() + 100,
        };
        stranger.issue(req, [99; 16]).unwrap().as_bytes().clone()
    };
    let req = h.auth_request("fay-a", "arm", Write, foreign);
    assert_eq!(refused_code(h.auth_with(A, req)), ErrorCode::UNKNOWN_ISSUER);
    // Bad signature: flip the last byte.
    let mut bad = good.to_vec();
    *bad.last_mut().unwrap() ^= 1;
    let req = h.auth_request("fay-a", "arm", Write, Bytes::from(bad));
    assert_eq!(
        refused_code(h.auth_with(A, req)),
        ErrorCode::CREDENTIAL_INVALID
    );
    // Expired.
    let short = h.cred_with("fay-a", all_grants(), 1);
    h.now = h.now.plus(2_000);
    let req = h.auth_request("fay-a", "arm", Write, short);
    assert_eq!(
        refused_code(h.auth_with(A, req)),
        ErrorCode::CREDENTIAL_EXPIRED
    );
    // Revoked.
    let revoked = h.cred("fay-a");
    let id = dtp_crypto::cred::Credential::from_bytes(&revoked)
        .unwrap()
        .descriptor()
        .descriptor_id;
    assert_eq!(h.t.revoke(id, h.now), Ok(0));
    let req = h.auth_request("fay-a", "arm", Write, revoked);
    assert_eq!(
        refused_code(h.auth_with(A, req)),
        ErrorCode::CREDENTIAL_REVOKED
    );
    // Another Fay's credential.
    let req = h.auth_request("fay-b", "arm", Write, good.clone());
    assert_eq!(refused_code(h.auth_with(A, req)), ErrorCode::E_UNAUTHORIZED);
    // No grant for the mode.
    let read_only = vec![Grant {
        resource_id: "arm".into(),
        modes: [Read].into_iter().collect(),
    }];
    let ro = h.cred_with("fay-a", read_only, 100);
    let req = h.auth_request("fay-a", "arm", Write, ro);
    assert_eq!(refused_code(h.auth_with(A, req)), ErrorCode::E_UNAUTHORIZED);
    // Nothing was created by any of them.
    assert!(h.t.sessions().is_empty());
    assert_eq!(h.t.access().grant_count(), 0);
}

#[test]
fn unknown_unavailable_and_human_requests_are_refused() {
    let mut h = Harness::new();
    assert_eq!(
        refused_code(h.auth(A, "fay-a", "nope", Read)),
        ErrorCode::E_RESOURCE_UNKNOWN
    );
    assert_eq!(
        h.t.set_resource_available("nope", false, h.now)
            .unwrap_err()
            .code,
        ErrorCode::E_RESOURCE_UNKNOWN
    );
    assert_eq!(h.t.set_resource_available("cam", false, h.now), Ok(0));
    h.drain();
    assert_eq!(
        refused_code(h.auth(A, "fay-a", "cam", Read)),
        ErrorCode::E_RESOURCE_UNAVAILABLE
    );
    let cred = h.cred("human:t1");
    let req = h.auth_request("human:t1", "arm", Read, cred);
    assert_eq!(refused_code(h.auth_with(A, req)), ErrorCode::E_UNAUTHORIZED);
}

#[test]
fn ts9_matrix_through_the_terminal() {
    let modes = [Read, Write, Execute, Configure];
    for held in modes {
        for asked in modes {
            let mut h = Harness::new();
            h.session(A, "fay-a", "cam", held);
            let got = h.auth(B, "fay-b", "cam", asked);
            let shared = held == Read && asked == Read;
            match got {
                Some(AuthOutcome::Granted { .. }) => assert!(shared, "{held:?} then {asked:?}"),
                other => {
                    assert!(!shared, "{held:?} then {asked:?}");
                    assert_eq!(refused_code(other), ErrorCode::E_RESOURCE_BUSY);
                }
            }
        }
    }
}

#[test]
fn same_fay_is_busy_not_a_handover() {
    let mut h = Harness::new();
    h.session(A, "fay-a", "arm", Write);
    let got = h.auth(A, "fay-a", "arm", Write);
    assert_eq!(refused_code(got), ErrorCode::E_RESOURCE_BUSY);
}

#[test]
fn limits_per_terminal_per_fay_and_reads_per_resource() {
    let mut c = config();
    c.limits.per_terminal = 3;
    c.limits.per_fay = 2;
    c.limits.reads_per_resource = 2;
    let mut h = Harness::with(c);
    h.session(A, "fay-a", "cam", Read);
    h.session(A, "fay-a", "screen", Read);
    let over_fay = h.auth(A, "fay-a", "arm", Read);
    assert_eq!(refused_code(over_fay), ErrorCode::E_SESSION_LIMIT_EXCEEDED);
    h.session(B, "fay-b", "cam", Read);
    let over_reads = h.auth(C, "fay-c", "cam", Read);
    assert_eq!(
        refused_code(over_reads),
        ErrorCode::E_SESSION_LIMIT_EXCEEDED
    );
    let over_terminal = h.auth(C, "fay-c", "arm", Write);
    assert_eq!(
        refused_code(over_terminal),
        ErrorCode::E_SESSION_LIMIT_EXCEEDED
    );
    assert_eq!(h.t.sessions().len(), 3);
}

#[test]
fn os_grant_failure_rolls_creation_back() {
    let mut h = Harness::new();
    h.t.access_mut().fail_next_grant();
    let out = {
        let cred = h.cred("fay-a");
        let req = h.auth_request("fay-a", "arm", Write, cred);
        h.send(A, ControlMessage::AuthRequest(req))
    };
    assert_eq!(
        refused_code(auth_result(&out, A, 1)),
        ErrorCode::E_OS_INTEGRATION_FAILED
    );
    // TS-7: creating → terminating → terminated at once, nothing left.
    let path: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::StateChanged(c) => Some(c.to),
            _ => None,
        })
        .collect();
    assert_eq!(
        path,
        [
            SessionState::Creating,
            SessionState::Terminating,
            SessionState::Terminated
        ]
    );
    assert!(h.t.sessions().is_empty());
    assert!(h.t.state_of("arm").unwrap().occupancy.is_empty());
    assert!(h.t.access().granted().is_empty());
    assert!(matches!(
        h.t.access().calls(),
        [AccessCall::Grant(_, false)]
    ));
    let [AuditRecord::SessionTerminated(a)] = &audits(&out)[..] else {
        panic!("{out:?}");
    };
    assert_eq!(a.reason, TerminationReason::CreationFailed);
    // The resource is free again.
    h.session(A, "fay-a", "arm", Write);
}

/// A random source that always gives the same bytes.
struct Stuck;

impl RandomSource for Stuck {
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        dest.fill(0);
    }
}

#[test]
fn a_repeating_random_source_is_an_internal_error_not_a_duplicate_id() {
    let issuer = IssuerKeyPair::from_seed(&[7; 32]).unwrap();
    let mut v = Verifier::new();
    v.trust(*issuer.public_key()).unwrap();
    let mut h = Harness::new();
    h.t = Terminal::new(config(), v, ScriptedAccess::new(), Box::new(Stuck)).unwrap();
    h.t.connection_up(A, h.now);
    h.session(A, "fay-a", "cam", Read);
    let again = h.auth(A, "fay-b", "cam", Read);
    assert_eq!(refused_code(again), ErrorCode::INTERNAL);
    assert_eq!(h.t.sessions().len(), 1);
}

#[test]
fn terminal_only_messages_close_the_connection() {
    let mut h = Harness::new();
    let out = h.send(
        A,
        ControlMessage::HeartbeatAck(HeartbeatAck { beats: vec![] }),
    );
    assert!(matches!(
        out[..],
        [Output::Close {
            conn: A,
            code: ErrorCode::INVALID_VALUE,
            ..
        }]
    ));
}

#[test]
fn an_invalid_config_is_refused_at_construction() {
    let mut c = config();
    c.liveness.heartbeat_timeout_ms = 1;
    let r = Terminal::new(
        c,
        Verifier::new(),
        ScriptedAccess::new(),
        Box::new(SeededRandom::new(1)),
    );
    assert!(r.is_err());
}
