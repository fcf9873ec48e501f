//! End to end over real TCP: the engine's shards run `DtpGateway`, the
//! control thread runs the `TerminalPlane`, and a Fay (a `DtpEndpoint`
//! driven over a std `TcpStream`) establishes a DTP session, asks for a
//! terminal session (SPEC TS-6), beats (LIV-2) and releases it (TS-13).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dtp_codec::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage, Heartbeat,
    HeartbeatAck, Limits, SessionRelease, SessionState,
};
use dtp_engine::{Engine, EngineConfig, Framed};
use dtp_gateway::TerminalPlane;
use dtp_gateway::dtp::{
    DtpApp, DtpEndpoint, DtpEvent, DtpGateway, SessionRegistry, SuspendedSessions,
};
use dtp_gateway::plane::PlaneConfig;
use dtp_terminal::{NoopAccess, ResourceConfig};
use dtp_test_kit::{Fay, Keys};
use dtp_transports::DriverConfig;

/// The gateway's application: the control plane does the work.
struct Quiet;

impl DtpApp for Quiet {
    type Session = ();
    fn event(&mut self, _: &mut (), _: &mut DtpEndpoint, _: DtpEvent, _: Instant) {}
}

#[test]
fn a_fay_gets_a_session_beats_and_releases_over_tcp() {
    let keys = Keys::new(9, "fay-e2e", &[("stream", &[AccessMode::Read])]);
    let credential_bytes = keys.credential.as_bytes().clone();
    let gateway_config = Arc::new(keys.terminal_config());
    let fay_config = keys.fay_config();

    let mut control = dtp_terminal::TerminalConfig::new("t-e2e");
    control.resources.push(ResourceConfig::new("stream"));
    let (plane, handle) =
        TerminalPlane::new(PlaneConfig::new(control), keys.verifier(), NoopAccess).unwrap();
    let registry: Arc<dyn SuspendedSessions> = Arc::new(SessionRegistry::new(16));
    let engine = Engine::start_with_control(
        EngineConfig {
            shards: 2,
            pin: false,
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            driver: DriverConfig::default(),
            limits: Limits::default(),
            drain: Duration::from_secs(2),
            control_ring: 64,
            quic: None,
        },
        move |_| {
            Framed::new(DtpGateway::new(
                gateway_config.clone(),
                registry.clone(),
                Quiet,
            ))
        },
        Box::new(plane),
    )
    .unwrap();

    let mut fay = Fay::connect(engine.tcp_addr(0).unwrap(), &fay_config);

    // SPEC TS-6: a terminal session on `stream`.
    let auth = AuthRequest {
        request_id: 41,
        fay_id: "fay-e2e".into(),
        resource_id: "stream".into(),
        access_mode: AccessMode::Read,
        credential: credential_bytes,
    };
    fay.send_control(ControlMessage::AuthRequest(auth));
    let outcome = fay.control("AuthResult", |m| match m {
        ControlMessage::AuthResult(AuthResult {
            request_id: 41,
            outcome,
        }) => Some(outcome.clone()),
        _ => None,
    });
    let AuthOutcome::Granted { session_id } = outcome else {
        panic!("refused: {outcome:?}");
    };
    let sessions = handle.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        (sessions[0].session_id, sessions[0].fay_id.as_str()),
        (session_id, "fay-e2e")
    );

    // SPEC LIV-2: every beat acked, in order.
    for seq in 0..3 {
        let beats = vec![Beat {
            session_id,
            sequence_number: seq,
        }];
        let hb = Heartbeat {
            beats: beats.clone(),
        };
        fay.send_control(ControlMessage::Heartbeat(hb));
        let ack = fay.control("HeartbeatAck", |m| match m {
            ControlMessage::HeartbeatAck(a) => Some(a.clone()),
            _ => None,
        });
        assert_eq!(ack, HeartbeatAck { beats });
    }

    // SPEC TS-13: released; the runtime hears terminated.
    let release = SessionRelease { session_id };
    fay.send_control(ControlMessage::SessionRelease(release));
    let reason = fay.control("SessionStateChanged(terminated)", |m| match m {
        ControlMessage::SessionStateChanged(c)
            if c.session_id == session_id && c.new_state == SessionState::Terminated =>
        {
            Some(c.reason.clone())
        }
        _ => None,
    });
    assert_eq!(reason.as_deref(), Some("client_release"));
    assert!(handle.sessions().unwrap().is_empty());
    let changes: Vec<SessionState> = handle.drain_state_changes().iter().map(|c| c.to).collect();
    assert_eq!(changes.last(), Some(&SessionState::Terminated));
    let m = handle.metrics();
    assert_eq!(m.refused, 0, "{m:?}");

    drop(fay);
    engine.stop();
    engine.join().unwrap();
}
