//! The terminal control plane (`dtp_gateway::plane`) on the engine's control
//! thread: SPEC TS-1 … TS-17, LIV-1 … LIV-6 and HO-1 … HO-10 through the
//! `ControlPlane` trait in virtual time (this file, `plane/model.rs`,
//! `plane/admin.rs`), and end to end over real TCP with a Fay speaking DTP
//! to the engine's gateway shards (`plane/e2e.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "plane/admin.rs"]
mod admin;
#[path = "plane/audit.rs"]
mod audit;
#[path = "plane/e2e.rs"]
mod e2e;
#[path = "plane/model.rs"]
mod model;
#[path = "plane/os.rs"]
mod os;
#[path = "plane/rig.rs"]
mod rig;

use std::time::Duration;

use dtp_codec::{
    AuthOutcome, Beat, ControlMessage, ErrorCode, HandoverFailedReason, HeartbeatAck,
    SessionRelease, SessionState,
};
use dtp_gateway::plane::Admission;
use dtp_terminal::{AdminHandover, TerminationReason};

use model::closed_port;
use rig::{Rig, auth_result, config, sent_to};

/// The SessionStateChanged messages among `msgs`: (state, reason).
fn state_msgs(msgs: &[ControlMessage]) -> Vec<(SessionState, Option<String>)> {
    msgs.iter()
        .filter_map(|m| match m {
            ControlMessage::SessionStateChanged(s) => Some((s.new_state, s.reason.clone())),
            _ => None,
        })
        .collect()
}

/// SPEC TS-6, LIV-2, TS-13: an AuthRequest is granted (AuthResult on the
/// shard and connection it came from), a heartbeat is acked, a release ends
/// the session and the runtime hears `terminated` / `client_release`;
/// observers saw every transition.
#[test]
fn auth_heartbeat_release_through_the_control_plane_trait() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(1, 5);
    let (id, out) = rig.auth(1, 5, "fay-a", "lamp");
    let Some(AuthOutcome::Granted { session_id }) = auth_result(&out, 1, 5, id) else {
        panic!("not granted: {out:?}");
    };
    assert!(out.iter().all(|(shard, _)| *shard == 1), "{out:?}");
    assert_eq!(
        session_id.get_version_num(),
        7,
        "TS-6: a UUID v7 session id"
    );

    let out = rig.heartbeat(1, 5, session_id, 0);
    let beats = vec![Beat {
        session_id,
        sequence_number: 0,
    }];
    assert_eq!(
        sent_to(&out, 1, 5),
        [ControlMessage::HeartbeatAck(HeartbeatAck { beats })]
    );

    let out = rig.send(
        1,
        5,
        ControlMessage::SessionRelease(SessionRelease { session_id }),
    );
    let states = state_msgs(&sent_to(&out, 1, 5));
    assert_eq!(
        states.last(),
        Some(&(SessionState::Terminated, Some("client_release".into()))),
        "{states:?}"
    );
    assert!(rig.plane.terminal().sessions().is_empty());

    let changes = rig.plane.drain_state_changes();
    let path: Vec<SessionState> = changes.iter().map(|c| c.to).collect();
    assert_eq!(
        path,
        [
            SessionState::Creating,
            SessionState::Active,
            SessionState::Terminating,
            SessionState::Terminated
        ]
    );
    assert!(changes.iter().all(|c| c.session_id == session_id));
    assert!(rig.plane.drain_state_changes().is_empty(), "drained once");
    let m = rig.plane.metrics();
    assert_eq!((m.requests, m.state_changes, m.refused), (4, 4, 0));
    assert!(m.sent >= 3, "{m:?}");
}

/// Connection ids are per shard: the same id on two shards is two
/// connections, each answered on its own shard, each speaking for its own
/// Fay (LIV-1 binding).
#[test]
fn one_conn_id_on_two_shards_is_two_connections() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 7);
    rig.up(1, 7);
    let a = rig.session(0, 7, "fay-a", "lamp");
    let b = rig.session(1, 7, "fay-b", "arm");
    assert_eq!(rig.plane.connections(), 2);

    let out = rig.heartbeat(1, 7, b, 0);
    assert!(matches!(
        &sent_to(&out, 1, 7)[..],
        [ControlMessage::HeartbeatAck(_)]
    ));
    assert!(sent_to(&out, 0, 7).is_empty(), "{out:?}");
    // Shard 0's connection 7 speaks for fay-a only: E_UNAUTHORIZED, which
    // no message carries (logged and counted).
    let out = rig.heartbeat(0, 7, b, 1);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(rig.plane.metrics().refused, 1);

    rig.down(0, 7);
    assert_eq!(rig.plane.connections(), 1);
    let sessions = rig.plane.terminal().sessions();
    let of = |id| sessions.iter().find(|s| s.session_id == id).unwrap();
    assert!(of(a).conn.is_none() && of(a).conn_down_since.is_some());
    assert!(of(b).conn.is_some());
}

/// SPEC LIV-4: a session dies only once its connection has been down longer
/// than the threshold (and its last beat is as old); the plane's deadline
/// is the terminal's, converted back to the loop's instants.
#[test]
fn liveness_death_after_down_and_the_threshold() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    let s = rig.session(0, 1, "fay-a", "lamp");
    rig.advance(500);
    rig.down(0, 1);
    let (_, next) = rig.tick();
    assert_eq!(next, Some(rig.now + Duration::from_millis(3_001)));
    rig.advance(3_000);
    assert_eq!(
        rig.plane.terminal().sessions().len(),
        1,
        "still alive at the threshold"
    );
    rig.advance(1);
    assert!(rig.plane.terminal().sessions().is_empty());
    let last = rig.plane.drain_state_changes().pop().unwrap();
    assert_eq!(last.session_id, s);
    assert_eq!(last.to, SessionState::Terminated);
    assert_eq!(last.reason, Some(TerminationReason::LivenessTimeout));
}

/// SPEC HO-1, HO-3a, HO-4: another Fay's AuthRequest for a held resource
/// asks the priority script: fay-c loses (AuthResult refused, the holder
/// told by HandoverFailedNotification), fay-b wins (granted; the holder's
/// session ends `handed_over`).
#[test]
fn priority_script_handover_rejected_then_allowed() {
    let mut rig = Rig::new(config(closed_port()));
    for conn in [1, 2, 3] {
        rig.up(0, conn);
    }
    let a = rig.session(0, 1, "fay-a", "arm");

    let (id, out) = rig.auth(0, 3, "fay-c", "arm");
    match auth_result(&out, 0, 3, id) {
        Some(AuthOutcome::Refused { code, .. }) => {
            assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
        }
        other => panic!("{other:?} in {out:?}"),
    }
    let failed = sent_to(&out, 0, 1).into_iter().find_map(|m| match m {
        ControlMessage::HandoverFailedNotification(n) => Some(n),
        _ => None,
    });
    let failed = failed.unwrap();
    assert_eq!(
        (failed.source_session_id, failed.reason),
        (a, HandoverFailedReason::PolicyRejected)
    );
    assert_eq!(failed.target_fay_id, "fay-c");

    let (id, out) = rig.auth(0, 2, "fay-b", "arm");
    let Some(AuthOutcome::Granted { session_id: b }) = auth_result(&out, 0, 2, id) else {
        panic!("not granted: {out:?}");
    };
    let states = state_msgs(&sent_to(&out, 0, 1));
    assert_eq!(
        states.last(),
        Some(&(SessionState::Terminated, Some("handed_over".into())))
    );
    let arm = rig.plane.terminal().state_of("arm").unwrap();
    assert_eq!(arm.controllers, [b]);
    assert_eq!(rig.plane.metrics().policy_asked, 2);
}

/// SPEC HO-1 (the admin trigger), TS-16 and TS-10 through the handle: an
/// admin hands `arm` from fay-a to fay-b (the script allows), revoking
/// fay-b's credential ends its session, and a resource going unavailable
/// ends the session on it.
#[test]
fn admin_handover_revocation_and_availability_through_the_handle() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 2);
    let a = rig.session(0, 1, "fay-a", "arm");
    let request = AdminHandover {
        source_session_id: a,
        target_fay_id: "fay-b".into(),
        target_credential: rig.cred("fay-b"),
        reason: "shift change".into(),
        metadata: Default::default(),
    };
    let fay_b = rig.last_descriptor;
    let (admitted, out) = rig.admin(move |h| h.admin_handover(request));
    assert!(matches!(admitted.unwrap(), Admission::Evaluating { .. }));
    assert_eq!(
        state_msgs(&sent_to(&out, 0, 1)).last(),
        Some(&(SessionState::Terminated, Some("handed_over".into())))
    );
    let sessions = rig.plane.terminal().sessions();
    let b = sessions.iter().find(|s| s.fay_id == "fay-b").unwrap();
    assert_eq!(
        rig.plane.terminal().state_of("arm").unwrap().controllers,
        [b.session_id]
    );

    let (ended, _) = rig.admin(move |h| h.revoke(fay_b));
    assert_eq!(ended.unwrap().sessions_ended, 1);
    let last = rig.plane.drain_state_changes().pop().unwrap();
    assert_eq!(last.reason, Some(TerminationReason::CredentialRevoked));

    rig.session(0, 2, "fay-c", "lamp");
    let (ended, out) = rig.admin(|h| h.set_resource_available("lamp", false));
    assert_eq!(ended.unwrap().sessions_ended, 1);
    assert_eq!(
        state_msgs(&sent_to(&out, 0, 2)).last(),
        Some(&(
            SessionState::Terminated,
            Some("resource_unavailable".into())
        ))
    );
    assert!(rig.plane.terminal().sessions().is_empty());
}
