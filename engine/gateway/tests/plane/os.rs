//! SPEC TS-4, DESIGN §3: OS access commands run on the plane's workers —
//! while one is running, the control thread decides for everyone else.

use dtp_codec::{AuthOutcome, ControlMessage};
use dtp_gateway::plane::CommandAccess;
use dtp_terminal::CommandAccessConfig;

use super::rig::{Rig, auth_result, config, scratch, sent_to};

/// Grants on `arm` wait until `gate` exists; everything else succeeds at
/// once.
fn gated_access(gate: &std::path::Path) -> CommandAccess {
    let script = r#"test "$0" != arm || while [ ! -e "$1" ]; do sleep 0.02; done"#;
    let gate = gate.to_str().unwrap().replace('{', "{{").replace('}', "}}");
    CommandAccess::new(CommandAccessConfig {
        grant: vec![
            "sh".into(),
            "-c".into(),
            script.into(),
            "{resource_id}".into(),
            gate,
        ],
        revoke: vec!["true".into()],
        timeout_ms: 30_000,
    })
    .unwrap()
}

#[test]
fn a_running_os_command_blocks_nobody_else() {
    let dir = scratch("os-gate");
    let gate = dir.join("open");
    let mut rig = Rig::with_access(config(1), gated_access(&gate));
    rig.up(0, 1);
    rig.up(1, 2);
    // fay-a's grant on arm hangs: no AuthResult yet, and the call returned.
    let (slow, out) = rig.auth(0, 1, "fay-a", "arm");
    assert_eq!(auth_result(&out, 0, 1, slow), None);
    // Meanwhile fay-b gets lamp, on another shard, and its heartbeat is
    // acked at once.
    let (fast, _) = rig.auth(1, 2, "fay-b", "lamp");
    let out = rig.tick_until("lamp's grant", |o| auth_result(o, 1, 2, fast).is_some());
    let Some(AuthOutcome::Granted { session_id }) = auth_result(&out, 1, 2, fast) else {
        panic!("{out:?}");
    };
    let out = rig.heartbeat(1, 2, session_id, 0);
    assert!(matches!(
        sent_to(&out, 1, 2).as_slice(),
        [ControlMessage::HeartbeatAck(_)]
    ));
    assert_eq!(
        rig.plane
            .terminal()
            .state_of("arm")
            .unwrap()
            .occupancy
            .len(),
        1
    );
    assert!(rig.plane.metrics().os_operations >= 2);
    // The command finishes: arm's AuthResult follows.
    std::fs::write(&gate, b"").unwrap();
    let out = rig.tick_until("arm's grant", |o| auth_result(o, 0, 1, slow).is_some());
    assert!(matches!(
        auth_result(&out, 0, 1, slow),
        Some(AuthOutcome::Granted { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

/// SPEC TS-4: a grant killed at its timeout fails the AuthRequest, marks
/// the resource for reconciliation (shown by the admin view) and only an
/// operator, through the handle, clears it while the revoke keeps failing.
#[test]
fn a_killed_command_marks_the_resource_until_an_operator_clears_it() {
    let access = CommandAccess::new(CommandAccessConfig {
        grant: vec!["sleep".into(), "5".into()],
        revoke: vec!["false".into()],
        timeout_ms: 100,
    })
    .unwrap();
    let mut rig = Rig::with_access(config(1), access);
    rig.up(0, 1);
    let (id, _) = rig.auth(0, 1, "fay-a", "lamp");
    let out = rig.tick_until("the killed grant", |o| auth_result(o, 0, 1, id).is_some());
    match auth_result(&out, 0, 1, id) {
        Some(AuthOutcome::Refused { code, message }) => {
            assert_eq!(code, dtp_codec::ErrorCode::E_OS_INTEGRATION_FAILED);
            assert!(message.contains("killed"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let (resources, _) = rig.admin(|h| h.resources());
    let resources = resources.unwrap();
    let lamp = resources.iter().find(|r| r.resource_id == "lamp").unwrap();
    assert_eq!(lamp.reconciliation.len(), 1);
    let (cleared, _) = rig.admin(|h| h.clear_reconciliation("lamp"));
    assert_eq!(cleared.unwrap(), 1);
    let (resources, _) = rig.admin(|h| h.resources());
    let resources = resources.unwrap();
    let lamp = resources.iter().find(|r| r.resource_id == "lamp").unwrap();
    assert!(lamp.reconciliation.is_empty());
}
