//! End to end over real TCP: the engine's shards run `DtpGateway`, the
//! control thread runs the `TerminalPlane`, and a Fay (a `DtpEndpoint`
//! driven over a std `TcpStream`) establishes a DTP session, asks for a
//! terminal session (SPEC TS-6), beats (LIV-2) and releases it (TS-13).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use dtp_codec::{
    AccessMode, AeadAlgorithm, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage,
    Heartbeat, HeartbeatAck, Limits, SessionRelease, SessionState, peek_frame_len,
};
use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair, ResponderConfig};
use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair, Verifier};
use dtp_engine::dtp::{
    DtpApp, DtpEndpoint, DtpEvent, DtpGateway, EndpointConfig, FayConfig, SessionRegistry,
    SuspendedSessions,
};
use dtp_engine::plane::PlaneConfig;
use dtp_engine::{Engine, EngineConfig, TerminalPlane};
use dtp_terminal::{NoopAccess, ResourceConfig};
use dtp_transports::DriverConfig;

/// The gateway's application: the control plane does the work.
struct Quiet;

impl DtpApp for Quiet {
    type Session = ();
    fn event(&mut self, _: &mut (), _: &mut DtpEndpoint, _: DtpEvent, _: Instant) {}
}

/// Distinct bytes per call (ids and seeds need only be unique here).
fn fill(buf: &mut [u8]) {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = n.wrapping_mul(31) ^ (i as u8).wrapping_mul(7);
    }
}

/// A Fay on one TCP connection: its endpoint, the socket, what it received.
struct Fay {
    ep: DtpEndpoint,
    sock: TcpStream,
    rx: BytesMut,
    events: Vec<DtpEvent>,
}

impl Fay {
    /// One turn: send what is queued, read what came (20 ms at most), feed
    /// whole frames, run timers, collect events.
    fn turn(&mut self) {
        let mut tx = BytesMut::new();
        self.ep.poll_transmit(&mut tx);
        if !tx.is_empty() {
            self.sock.write_all(&tx).unwrap();
        }
        let mut buf = [0u8; 16 * 1024];
        match self.sock.read(&mut buf) {
            Ok(0) => panic!(
                "the terminal closed the connection; events {:?}",
                self.events
            ),
            Ok(n) => self.rx.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("read: {e}"),
        }
        let now = Instant::now();
        while let Ok(len) = peek_frame_len(&self.rx, &Limits::default()) {
            if len > self.rx.len() {
                break;
            }
            self.ep.handle_frame(self.rx.split_to(len), now);
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        while let Some(e) = self.ep.poll_event() {
            self.events.push(e);
        }
    }

    /// Turns until an event matches `f` (taking it); fails after 10 s.
    fn wait<T>(&mut self, what: &str, mut f: impl FnMut(&DtpEvent) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = self.events.iter().position(|e| f(e).is_some()) {
                let e = self.events.remove(i);
                return f(&e).unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within 10 s; state {:?}, events {:?}",
                self.ep.state(),
                self.events
            );
            self.turn();
        }
    }

    /// The next control message matching `f`.
    fn control<T>(&mut self, what: &str, mut f: impl FnMut(&ControlMessage) -> Option<T>) -> T {
        self.wait(what, |e| match e {
            DtpEvent::Control(m) => f(m),
            _ => None,
        })
    }
}

#[test]
fn a_fay_gets_a_session_beats_and_releases_over_tcp() {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let issuer = IssuerKeyPair::from_seed(&[9; 32]).unwrap();
    let fay_keys = NoiseKeypair::from_private([5; 32]).unwrap();
    let terminal_keys = NoiseKeypair::from_private([6; 32]).unwrap();
    let request = CredentialRequest {
        fay_id: "fay-e2e".into(),
        noise_key: *fay_keys.public(),
        grants: vec![Grant {
            resource_id: "stream".into(),
            modes: [AccessMode::Read].into_iter().collect(),
        }],
        not_before: unix - 60,
        not_after: unix + 3600,
    };
    let credential = issuer.issue(request, [3; 16]).unwrap();
    let credential_bytes = credential.as_bytes().clone();
    let verifier = || {
        let mut v = Verifier::new();
        v.trust(*issuer.public_key()).unwrap();
        v
    };
    let algorithms = vec![AeadAlgorithm::ChaCha20Poly1305];
    let gateway_config = Arc::new(dtp_engine::dtp::TerminalConfig {
        cap: ResponderConfig {
            static_keypair: terminal_keys.clone(),
            algorithms: algorithms.clone(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        verifier: Arc::new(verifier()),
        endpoint: EndpointConfig::terminal(),
    });
    let fay_config = FayConfig {
        cap: InitiatorConfig {
            static_keypair: fay_keys,
            credential,
            algorithms,
            pinned_responder_key: Some(*terminal_keys.public()),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        endpoint: EndpointConfig::fay(),
    };

    let mut control = dtp_terminal::TerminalConfig::new("t-e2e");
    control.resources.push(ResourceConfig::new("stream"));
    let (plane, handle) =
        TerminalPlane::new(PlaneConfig::new(control), verifier(), NoopAccess).unwrap();
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
        },
        move |_| DtpGateway::new(gateway_config.clone(), registry.clone(), Quiet),
        Box::new(plane),
    )
    .unwrap();

    let sock = TcpStream::connect(engine.tcp_addr(0).unwrap()).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let ep = DtpEndpoint::fay(&fay_config, Instant::now(), &mut fill).unwrap();
    let mut fay = Fay {
        ep,
        sock,
        rx: BytesMut::new(),
        events: Vec::new(),
    };
    fay.wait("DTP session", |e| {
        matches!(e, DtpEvent::Established { resumed: false, .. }).then_some(())
    });

    // SPEC TS-6: a terminal session on `stream`.
    let auth = AuthRequest {
        request_id: 41,
        fay_id: "fay-e2e".into(),
        resource_id: "stream".into(),
        access_mode: AccessMode::Read,
        credential: credential_bytes,
    };
    fay.ep
        .send_control(ControlMessage::AuthRequest(auth))
        .unwrap();
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
        fay.ep.send_control(ControlMessage::Heartbeat(hb)).unwrap();
        let ack = fay.control("HeartbeatAck", |m| match m {
            ControlMessage::HeartbeatAck(a) => Some(a.clone()),
            _ => None,
        });
        assert_eq!(ack, HeartbeatAck { beats });
    }

    // SPEC TS-13: released; the runtime hears terminated.
    let release = SessionRelease { session_id };
    fay.ep
        .send_control(ControlMessage::SessionRelease(release))
        .unwrap();
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
