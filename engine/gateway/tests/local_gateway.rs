//! A whole gateway in virtual time, on one thread (DESIGN.md §2): the DTP
//! gateway and the realtime front end on a shard, the terminal plane and
//! the realtime plane on its control plane, all over the in-memory
//! transport with a fault injector on the Fay's side, turned by hand on a
//! clock that only the test moves — no socket, no thread, no sleep.
//!
//! A Fay does CAP, opens an agreement and streams fragments; its
//! connection is cut mid-stream and it resumes its session on a new one;
//! every fragment reaches the gateway's application exactly once. It asks
//! for a terminal session (AuthRequest → AuthResult), and the session's
//! change reaches an SSE subscriber of the built-in `sessions` stream.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use dtp_codec::{AccessMode, AuthOutcome, AuthRequest, ControlMessage, Limits, Terms};
use dtp_engine::{Clock, Framed, Listener, Local, ManualClock, Routed, Shard, ShardMetrics};
use dtp_gateway::TerminalPlane;
use dtp_gateway::app::WithRealtime;
use dtp_gateway::dtp::{
    DtpApp, DtpEndpoint, DtpEvent, DtpGateway, FayConfig, SessionRegistry, SuspendedSession,
};
use dtp_gateway::plane::{OffsetClock, PlaneConfig, built_in_specs};
use dtp_gateway::realtime::{FrontMetrics, RealtimeFront, RealtimePlane, RtClient, RtConfig};
use dtp_realtime::StreamSpec;
use dtp_terminal::{ResourceConfig, ScriptedAccess, SeededRandom, TerminalConfig, UnixMs};
use dtp_test_kit::keys::Keys;
use dtp_transports::{
    ConnId, Endpoint, Event, FaultInjector, FaultPlan, MemoryHub, MemoryTransport, Transport,
};

const TOKEN: &str = "dashboard-token";
const FRAGMENTS: u64 = 60;
/// Where the Fay's first connection is cut: after this many fragments.
const CUT_AFTER: u64 = 25;

/// The gateway's application: accepts every agreement, records every
/// fragment id it is handed.
struct Recorder(Rc<RefCell<Vec<u64>>>);

impl DtpApp for Recorder {
    type Session = ();

    fn event(&mut self, _: &mut (), ep: &mut DtpEndpoint, event: DtpEvent, now: Instant) {
        match event {
            DtpEvent::AgreementRequested { request_id, .. } => {
                ep.accept(request_id, [7; 16], now).unwrap();
            }
            DtpEvent::Fragment { fragment_id, .. } => self.0.borrow_mut().push(fragment_id),
            _ => {}
        }
    }
}

/// The Fay: an endpoint on one connection of its transport at a time.
struct Fay {
    net: FaultInjector<MemoryTransport>,
    conn: ConnId,
    ep: DtpEndpoint,
    rx: BytesMut,
    tx: BytesMut,
    events: Vec<DtpEvent>,
    down: bool,
}

fn fill(b: &mut [u8]) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(31).wrapping_add(5);
    }
}

impl Fay {
    fn connect(mut net: FaultInjector<MemoryTransport>, ep: DtpEndpoint) -> Self {
        let conn = net.connect(&Endpoint::Memory("dtp".into())).unwrap();
        Self {
            net,
            conn,
            ep,
            rx: BytesMut::new(),
            tx: BytesMut::new(),
            events: Vec::new(),
            down: false,
        }
    }

    /// Moves bytes both ways and runs the endpoint at `now`.
    fn step(&mut self, now: Instant) {
        let mut got = Vec::new();
        self.net.poll(&mut got, None).unwrap();
        for e in got {
            match e {
                Event::Received { data, .. } => self.rx.extend_from_slice(&data),
                Event::Closed { .. } => self.down = true,
                _ => {}
            }
        }
        dtp_test_kit::feed(&mut self.ep, &mut self.rx, now);
        self.ep.poll_transmit(&mut self.tx);
        if !self.tx.is_empty() && !self.down && self.net.send(self.conn, &self.tx).is_ok() {
            self.tx.clear();
        }
        self.events
            .extend(std::iter::from_fn(|| self.ep.poll_event()));
    }
}

/// The gateway's realtime clients: one dashboard that reads every stream.
fn rt_config() -> Arc<RtConfig> {
    let specs = specs();
    Arc::new(RtConfig {
        clients: vec![RtClient {
            token: TOKEN.into(),
            streams: vec!["*".into()],
            publish: false,
            admin: false,
        }],
        cookie: "dtp_session".into(),
        login: dtp_gateway::realtime::LoginKey::new([5; 32], std::time::Instant::now()),
        origins: Vec::new(),
        own_origins: Default::default(),
        echo_max_message: None,
        scopes: specs
            .into_iter()
            .map(|s| (s.id, s.scope))
            .collect::<HashMap<_, _>>(),
        limits: Default::default(),
    })
}

fn specs() -> Vec<StreamSpec> {
    built_in_specs("terminal")
}

#[test]
fn a_whole_gateway_streams_resumes_grants_and_publishes_in_virtual_time() {
    let clock = ManualClock::new(Instant::now());
    let hub = MemoryHub::new();
    let keys = Keys::new(3, "fay-1", &[("arm", &[AccessMode::Write])]);
    let fay_config: FayConfig = keys.fay_config();

    // The gateway: DTP and realtime on one shard, routed by listener name.
    let listeners = vec![
        Listener::new("dtp", Endpoint::Memory("dtp".into())),
        Listener::new("realtime", Endpoint::Memory("rt".into())),
    ];
    let fragments = Rc::new(RefCell::new(Vec::new()));
    let service = Routed::by_name(
        &listeners,
        "realtime",
        Framed::new(DtpGateway::new(
            Arc::new(keys.terminal_config()),
            Arc::new(SessionRegistry::new(16)),
            Recorder(fragments.clone()),
        )),
        RealtimeFront::new(rt_config(), 0, Arc::new(FrontMetrics::default())),
    );
    let mut shard = Shard::on_clock(
        hub.transport(),
        service,
        Limits::default(),
        4 << 20,
        Arc::new(ShardMetrics::default()),
        clock.clone(),
    );
    for l in &listeners {
        shard.listen(&l.at).unwrap();
    }
    // The control plane: the terminal plane (on the same virtual time, in
    // Unix ms of today, which the credential is valid at) beside the
    // realtime plane.
    let mut terminal = TerminalConfig::new("t1");
    terminal.resources.push(ResourceConfig::new("arm"));
    let unix_now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (terminal, _handle) = TerminalPlane::with_parts(
        PlaneConfig::new(terminal),
        keys.verifier(),
        ScriptedAccess::new(),
        Box::new(OffsetClock::new(clock.now(), UnixMs(unix_now))),
        Box::new(SeededRandom::new(5)),
    )
    .unwrap();
    let mut seed = 11u64;
    let mut random = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        seed
    };
    let realtime = RealtimePlane::new(specs(), 1, &mut random).unwrap();
    let plane = WithRealtime::new(terminal, realtime);
    let mut gw = Local::new(vec![shard], Box::new(plane), clock.clone(), 64).unwrap();

    // A dashboard subscribes to the `sessions` stream over SSE.
    let mut dash = hub.transport();
    let dconn = dash.connect(&Endpoint::Memory("rt".into())).unwrap();
    let get = format!(
        "GET /v1/streams/sessions/sse HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    dash.send(dconn, get.as_bytes()).unwrap();
    let mut sse = Vec::new();

    // The Fay, through a fault injector that will cut its first connection.
    let net = FaultInjector::new(hub.transport(), 1);
    let ep = DtpEndpoint::fay(&fay_config, clock.now(), &mut fill).unwrap();
    let mut fay = Fay::connect(net, ep);
    let mut agreement = None;
    let mut next = 1;
    let mut suspended: Option<SuspendedSession> = None;
    let mut cut = false;
    let mut granted = None;
    let mut asked = false;

    for _ in 0..20_000 {
        clock.advance(Duration::from_millis(1));
        let now = clock.now();
        gw.turn().unwrap();
        fay.step(now);
        let mut got = Vec::new();
        dash.poll(&mut got, None).unwrap();
        for e in got {
            if let Event::Received { data, .. } = e {
                sse.extend_from_slice(&data);
            }
        }
        for event in std::mem::take(&mut fay.events) {
            match event {
                DtpEvent::Established { resumed: false, .. } => {
                    fay.ep.request_collection(Terms::new(), now).unwrap();
                }
                DtpEvent::AgreementActive { agreement_id, .. } => agreement = Some(agreement_id),
                DtpEvent::Control(ControlMessage::AuthResult(r)) => {
                    if let AuthOutcome::Granted { session_id } = r.outcome {
                        granted = Some(session_id);
                    } else {
                        panic!("not granted: {r:?}");
                    }
                }
                _ => {}
            }
        }
        if fay.down {
            // The cut: the session is suspended, and resumed on a new
            // connection of the same transport.
            let s = fay
                .ep
                .connection_lost(now)
                .or(suspended.take())
                .expect("a session to resume");
            let ep = DtpEndpoint::fay_resume(&fay_config, s, now, &mut fill).unwrap();
            fay = Fay::connect(fay.net, ep);
            agreement = fay.ep.agreements().next().map(|a| a.id);
            continue;
        }
        if agreement.is_none() {
            // A resumed session brings its agreements back with it.
            agreement = fay.ep.agreements().next().map(|a| a.id);
        }
        let Some(a) = agreement.filter(|_| fay.ep.is_established()) else {
            continue;
        };
        if !asked && cut {
            // On the resumed connection (a control message is not resent
            // after a cut: a Fay asks again).
            asked = true;
            fay.ep
                .send_control(ControlMessage::AuthRequest(AuthRequest {
                    request_id: 1,
                    fay_id: "fay-1".into(),
                    resource_id: "arm".into(),
                    access_mode: AccessMode::Write,
                    credential: keys.credential.as_bytes().clone(),
                }))
                .unwrap();
        }
        while next <= FRAGMENTS {
            if fay
                .ep
                .send_fragment(a, next, vec![], vec![next as u8; 300].into())
                .is_err()
            {
                break; // backpressure: again next turn
            }
            next += 1;
            if next == CUT_AFTER + 1 && !cut {
                // Cut the connection after what is queued now.
                cut = true;
                fay.net.set_plan(
                    fay.conn,
                    FaultPlan {
                        cut_after_sent: Some(0),
                        ..FaultPlan::NONE
                    },
                );
                break;
            }
        }
        let sse_text = String::from_utf8_lossy(&sse);
        if fragments.borrow().len() as u64 >= FRAGMENTS
            && granted.is_some()
            && sse_text.contains("session.state")
            && fay.ep.resume_cache().0 == 0
        {
            break;
        }
    }
    let got = fragments.borrow().clone();
    let want: Vec<u64> = (1..=FRAGMENTS).collect();
    assert!(cut, "the connection was cut");
    assert_eq!(
        got, want,
        "every fragment exactly once, in order, across the cut"
    );
    assert!(granted.is_some(), "the terminal session was granted");
    let sse_text = String::from_utf8_lossy(&sse);
    assert!(sse_text.starts_with("HTTP/1.1 200"), "{sse_text}");
    assert!(
        sse_text.contains("session.state"),
        "the session's change reached the dashboard: {sse_text}"
    );
}
