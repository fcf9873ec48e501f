//! SPEC LIV-1 … LIV-6: heartbeats, binding and the dual judgment.

use dtp_codec::{AccessMode, Beat, ControlMessage, ErrorCode, SessionState};

use super::*;
use crate::TerminationReason;

use AccessMode::Write;

/// The default threshold (30 s).
const THRESHOLD: u64 = 30_000;

fn acks(out: &[Output], conn: ConnKey) -> Vec<Beat> {
    Harness::sent(out, conn)
        .into_iter()
        .flat_map(|m| match m {
            ControlMessage::HeartbeatAck(a) => a.beats,
            _ => vec![],
        })
        .collect()
}

#[test]
fn heartbeats_are_acked_at_once_with_the_same_numbers() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.now = h.now.plus(5_000);
    let out = h.heartbeat(A, &[(id, 0)]);
    assert_eq!(
        acks(&out, A),
        [Beat {
            session_id: id,
            sequence_number: 0
        }]
    );
    assert_eq!(h.t.session(id).unwrap().last_heartbeat_at, h.now);
}

#[test]
fn aggregated_heartbeats_ack_the_good_beats_and_refuse_the_rest() {
    let mut h = Harness::new();
    let a = h.session(A, "fay-a", "arm", Write);
    let b = h.session(A, "fay-a", "cam", Write);
    let stranger = h.session(B, "fay-b", "screen", Write);
    let unknown = SessionId::from_u128(77);
    let out = h.heartbeat(A, &[(a, 3), (unknown, 0), (b, 9), (stranger, 1)]);
    let got: Vec<_> = acks(&out, A)
        .iter()
        .map(|b| (b.session_id, b.sequence_number))
        .collect();
    assert_eq!(got, [(a, 3), (b, 9)]);
    assert_eq!(
        refusals(&out),
        [ErrorCode::E_SESSION_NOT_FOUND, ErrorCode::E_UNAUTHORIZED]
    );
}

#[test]
fn a_lower_sequence_number_is_a_replay_an_equal_one_is_not() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.heartbeat(A, &[(id, 5)]);
    let before = h.t.session(id).unwrap().last_heartbeat_at;
    h.now = h.now.plus(1_000);
    let replay = h.heartbeat(A, &[(id, 4)]);
    assert_eq!(refusals(&replay), [ErrorCode::E_HEARTBEAT_REPLAY]);
    assert!(acks(&replay, A).is_empty());
    assert_eq!(h.t.session(id).unwrap().last_heartbeat_at, before);
    let same = h.heartbeat(A, &[(id, 5)]);
    assert_eq!(acks(&same, A).len(), 1);
    assert_eq!(h.t.session(id).unwrap().last_heartbeat_at, h.now);
}

/// LIV-4 through the whole terminal: the session survives a connection
/// that stays up without heartbeats, heartbeats without the connection it
/// was bound to (they arrive on another connection of its Fay), and of
/// course both; it dies only with neither.
#[test]
fn dual_judgment_in_the_terminal() {
    for (conn_down, beats) in [(false, true), (false, false), (true, true), (true, false)] {
        let mut h = Harness::new();
        let id = h.session(A, "fay-a", "arm", Write);
        h.t.identify(B, "fay-a", h.now).unwrap();
        if conn_down {
            h.t.connection_down(A, h.now);
        }
        for n in 0..4 {
            h.advance(10_000);
            if beats {
                h.heartbeat(if conn_down { B } else { A }, &[(id, n)]);
            }
        }
        let dead = conn_down && !beats;
        let ended = h.log.iter().any(|o| {
            matches!(o, Output::StateChanged(c)
                if c.reason == Some(TerminationReason::LivenessTimeout)
                    && c.to == SessionState::Terminated)
        });
        assert_eq!(ended, dead, "down {conn_down}, beats {beats}");
        assert_eq!(
            h.state(id).is_none(),
            dead,
            "down {conn_down}, beats {beats}"
        );
    }
}

#[test]
fn death_comes_exactly_when_both_clocks_pass_the_threshold() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.now = h.now.plus(10_000);
    h.heartbeat(A, &[(id, 0)]);
    let last = h.now;
    h.now = h.now.plus(5_000);
    h.t.connection_down(A, h.now);
    let down = h.now;
    // Both must exceed: the later of the two clocks decides.
    assert_eq!(h.t.poll_timeout(), Some(down.max(last).plus(THRESHOLD + 1)));
    h.advance(THRESHOLD);
    assert_eq!(h.state(id), Some(SessionState::Active));
    let out = h.advance(1);
    assert!(h.state(id).is_none());
    // LIV-5: revoked, released, audited.
    assert!(h.t.access().granted().is_empty());
    assert!(audits(&out).len() == 1);
}

#[test]
fn after_death_requests_get_terminated_and_one_state_change() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.t.connection_down(A, h.now);
    h.advance(THRESHOLD + 1);
    assert!(h.state(id).is_none());
    // The runtime comes back on a new connection of the same Fay.
    h.t.identify(B, "fay-a", h.now).unwrap();
    let first = h.heartbeat(B, &[(id, 1)]);
    assert_eq!(refusals(&first), [ErrorCode::E_SESSION_TERMINATED]);
    assert_eq!(
        state_changes(&Harness::sent(&first, B)),
        [(SessionState::Terminated, Some("liveness_timeout".into()))]
    );
    let second = h.heartbeat(B, &[(id, 2)]);
    assert_eq!(refusals(&second), [ErrorCode::E_SESSION_TERMINATED]);
    assert!(state_changes(&Harness::sent(&second, B)).is_empty());
    // Its resource is free for anyone.
    h.session(C, "fay-c", "arm", Write);
}

#[test]
fn a_connection_drop_alone_never_ends_a_session() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.t.connection_down(A, h.now);
    assert!(h.drain().is_empty());
    assert_eq!(h.state(id), Some(SessionState::Active));
    assert_eq!(h.t.session(id).unwrap().conn_down_since, Some(h.now));
    // And a live connection keeps a silent session (LIV-4 is a conjunction).
    let quiet = h.session(B, "fay-b", "cam", Write);
    h.advance(10 * THRESHOLD);
    assert_eq!(h.state(quiet), Some(SessionState::Active));
}

#[test]
fn a_heartbeat_on_another_connection_of_the_same_fay_rebinds() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.t.connection_down(A, h.now);
    h.now = h.now.plus(THRESHOLD - 1);
    // C does not speak for fay-a yet.
    assert_eq!(
        refusals(&h.heartbeat(C, &[(id, 0)])),
        [ErrorCode::E_UNAUTHORIZED]
    );
    h.t.identify(C, "fay-a", h.now).unwrap();
    let out = h.heartbeat(C, &[(id, 0)]);
    assert_eq!(acks(&out, C).len(), 1);
    let info = h.t.session(id).unwrap();
    assert_eq!((info.conn, info.conn_down_since), (Some(C), None));
    // Notifications now go to C.
    let out = h.release(C, id);
    assert_eq!(state_changes(&Harness::sent(&out, C)).len(), 2);
}

#[test]
fn identify_refuses_the_human_id() {
    let mut h = Harness::new();
    let err = h.t.identify(A, "human:t1", h.now).unwrap_err();
    assert_eq!(err.code, ErrorCode::E_UNAUTHORIZED);
    assert!(h.t.identify(A, "", h.now).is_err());
}

#[test]
fn inputs_run_due_timers_even_without_a_tick() {
    let mut h = Harness::new();
    let id = h.session(A, "fay-a", "arm", Write);
    h.t.connection_down(A, h.now);
    // Jump past the deadline without handle_timeout: the next input runs it.
    h.now = h.now.plus(THRESHOLD + 1);
    h.t.identify(B, "fay-a", h.now).unwrap();
    let out = h.heartbeat(B, &[(id, 0)]);
    assert_eq!(refusals(&out), [ErrorCode::E_SESSION_TERMINATED]);
}

/// Session timers are filed, not scanned: a session whose liveness clock
/// started (connection down) and was then stopped by a heartbeat on
/// another connection leaves an early entry behind. The terminal wakes for
/// it, finds nothing due, and its next timer is the other session's death;
/// after that, the credential expiry of the one left.
#[test]
fn a_stale_timer_wakes_once_and_the_next_one_is_found() {
    let mut h = Harness::new();
    let a = h.session(A, "fay-a", "arm", Write);
    let b = h.session(B, "fay-b", "cam", Write);
    let expiry = h.t.poll_timeout().unwrap();
    h.t.connection_down(A, h.now);
    let a_dead = h.now.plus(THRESHOLD + 1);
    assert_eq!(h.t.poll_timeout(), Some(a_dead));
    h.now = h.now.plus(1_000);
    h.t.connection_down(B, h.now);
    let b_dead = h.now.plus(THRESHOLD + 1);
    assert_eq!(h.t.poll_timeout(), Some(a_dead), "the earlier of the two");
    h.t.identify(C, "fay-a", h.now).unwrap();
    h.heartbeat(C, &[(a, 0)]);
    h.advance(a_dead.0 - h.now.0);
    assert_eq!(h.state(a), Some(SessionState::Active));
    assert_eq!(h.t.poll_timeout(), Some(b_dead));
    h.advance(b_dead.0 - h.now.0);
    assert!(h.state(b).is_none(), "b died on time");
    assert_eq!(h.state(a), Some(SessionState::Active));
    assert_eq!(h.t.poll_timeout(), Some(expiry));
    assert!(expiry > b_dead);
}

/// A heartbeat moves no deadline earlier, so it files no timer: the
/// timer heap does not grow with the beats of many sessions.
#[test]
fn heartbeats_file_no_timers() {
    let mut h = Harness::new();
    let ids: Vec<_> = ["arm", "cam", "screen"]
        .iter()
        .enumerate()
        .map(|(i, r)| h.session(A, &format!("fay-{i}"), r, Write))
        .collect();
    let filed = h.t.timers.len();
    for n in 0..100 {
        h.now = h.now.plus(1_000);
        for id in &ids {
            h.heartbeat(A, &[(*id, n)]);
        }
    }
    assert_eq!(h.t.timers.len(), filed);
    assert!(filed <= 2 * ids.len(), "{filed}");
}
