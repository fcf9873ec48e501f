//! SPEC TS-4: an OS operation killed at its timeout proves nothing — its
//! step fails, and the resource is marked for reconciliation until a
//! successful revoke of the same grant or an operator clears it.

use dtp_codec::{AccessMode, AuthOutcome, ErrorCode};

use super::handover::{decide, question};
use super::handover_failures::{failed_code, held};
use super::*;
use crate::{AuditRecord, OsOperation, PolicyOutcome, ReconciliationEvent};

use AccessMode::Write;

fn reconciliation_events(out: &[Output]) -> Vec<(ReconciliationEvent, OsOperation)> {
    audits(out)
        .into_iter()
        .filter_map(|a| match a {
            AuditRecord::Reconciliation(r) => Some((r.event, r.operation)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_killed_grant_fails_the_request_and_blocks_the_resource_until_a_revoke_works() {
    let mut h = Harness::new();
    h.t.access_mut().kill_next_grant();
    // The cleanup revoke fails once: the mark must outlive it.
    h.t.access_mut().fail_next_revoke();
    let out_code = h.auth(A, "fay-a", "arm", Write);
    let out = h.log.clone();
    assert_eq!(refused_code(out_code), ErrorCode::E_OS_INTEGRATION_FAILED);
    assert_eq!(
        reconciliation_events(&out),
        [(ReconciliationEvent::Marked, OsOperation::Grant)]
    );
    // Not a clean failure: the session is still ending (its grant may be
    // live), and the resource shows the mark and admits nobody.
    let info = h.t.state_of("arm").unwrap();
    assert_eq!(info.reconciliation.len(), 1);
    assert_eq!(info.reconciliation[0].operation, OsOperation::Grant);
    assert_eq!(info.occupancy[0].2, SessionState::Terminating);
    assert!(info.controllers.is_empty());
    for mode in [Write, AccessMode::Read] {
        assert_eq!(
            refused_code(h.auth(B, "fay-b", "arm", mode)),
            ErrorCode::E_OS_INTEGRATION_FAILED
        );
    }
    // Other resources are unaffected.
    assert!(matches!(
        h.auth(B, "fay-b", "cam", Write),
        Some(AuthOutcome::Granted { .. })
    ));
    // The revoke retry succeeds: the grant is known gone, the mark cleared.
    let out = h.advance(h.t.config().revoke_retry_ms);
    assert_eq!(
        reconciliation_events(&out),
        [(ReconciliationEvent::ClearedByRevoke, OsOperation::Grant)]
    );
    assert!(h.t.state_of("arm").unwrap().reconciliation.is_empty());
    assert!(matches!(
        h.auth(B, "fay-b", "arm", Write),
        Some(AuthOutcome::Granted { .. })
    ));
}

#[test]
fn a_killed_release_revoke_is_retried_and_clears_its_mark() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.t.access_mut().kill_next_revoke();
    let out = h.release(A, id);
    assert_eq!(
        reconciliation_events(&out),
        [(ReconciliationEvent::Marked, OsOperation::Revoke)]
    );
    assert_eq!(h.state(id), Some(SessionState::Terminating));
    assert_eq!(
        refused_code(h.auth(B, "fay-b", "arm", Write)),
        ErrorCode::E_OS_INTEGRATION_FAILED
    );
    let out = h.advance(h.t.config().revoke_retry_ms);
    assert_eq!(
        reconciliation_events(&out),
        [(ReconciliationEvent::ClearedByRevoke, OsOperation::Revoke)]
    );
    assert_eq!(h.state(id), None);
}

#[test]
fn a_killed_t1_revoke_fails_at_release_and_an_operator_clears_it() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    let (id, ..) = question(&out);
    h.t.access_mut().kill_next_revoke();
    let out = decide(&mut h, id, PolicyOutcome::allow());
    // HO-5 for T0–T2: the source is restored; TS-4: marked, not clean.
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_FAILED_AT_RELEASE);
    assert_eq!(h.state(src), Some(SessionState::Active));
    assert_eq!(
        reconciliation_events(&out),
        [(ReconciliationEvent::Marked, OsOperation::Revoke)]
    );
    assert_eq!(
        refused_code(h.auth(C, "fay-c", "arm", AccessMode::Read)),
        ErrorCode::E_OS_INTEGRATION_FAILED
    );
    // An operator checked the OS and clears the mark (audited).
    assert_eq!(h.t.clear_reconciliation("arm", h.now), Ok(1));
    let out = h.drain();
    assert_eq!(
        reconciliation_events(&out),
        [(ReconciliationEvent::ClearedByOperator, OsOperation::Revoke)]
    );
    assert!(h.t.state_of("arm").unwrap().reconciliation.is_empty());
    assert_eq!(
        h.t.clear_reconciliation("nope", h.now).unwrap_err().code,
        ErrorCode::E_RESOURCE_UNKNOWN
    );
    // The state view serialises the mark for the admin surface.
    h.t.access_mut().kill_next_revoke();
    h.release(A, src);
    let json = serde_json::to_string(&h.t.state_of("arm").unwrap()).unwrap();
    assert!(json.contains("\"reconciliation\":[{"), "{json}");
    assert!(json.contains("\"operation\":\"revoke\""), "{json}");
}

#[test]
fn a_killed_t4_grant_fails_at_acquire_and_is_revoked() {
    let (mut h, src) = held();
    let cred = h.cred("fay-b");
    let out = h.transfer(A, src, "fay-b", cred);
    let (id, ..) = question(&out);
    h.t.access_mut().kill_next_grant();
    let out = decide(&mut h, id, PolicyOutcome::allow());
    assert_eq!(failed_code(&out), ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE);
    assert_eq!(h.state(src), None);
    // Marked, then cleared by the cleanup revoke within the same input.
    assert_eq!(
        reconciliation_events(&out),
        [
            (ReconciliationEvent::Marked, OsOperation::Grant),
            (ReconciliationEvent::ClearedByRevoke, OsOperation::Grant)
        ]
    );
    assert!(h.t.sessions().is_empty());
    assert!(h.t.access().granted().is_empty());
}
