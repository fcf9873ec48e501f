//! SPEC TRN-3/TRN-5 over RTSP beyond the conformance suite: what an RTSP
//! peer of our own making (a plain socket speaking the protocol through
//! `dtp_codec::rtsp`) sees of [`Rtsp`] — refusals, keep-alives, session
//! and handshake timeouts, TEARDOWN, packets on other channels and
//! payloads larger than one packet — and a stack of wrappers.
//!
//! Nothing sleeps to synchronise: each test polls until the event it
//! waits for, with a deadline that fails loudly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use dtp_codec::rtsp::{
    InterleavedDecoder, Item, Message, Method, Request, Response, RtspLimits, write_interleaved,
};
use dtp_transports::{
    BackendPreference, CloseReason, ConnId, Driver, DriverConfig, Endpoint, Event, Rtsp,
    RtspConfig, Transport, WebSocket, WsConfig,
};

fn driver(backend: BackendPreference) -> Driver {
    Driver::new(DriverConfig {
        backend,
        ..DriverConfig::default()
    })
    .unwrap()
}

fn rtsp(backend: BackendPreference, config: RtspConfig) -> Rtsp<Driver> {
    Rtsp::new(driver(backend), config)
}

fn backends() -> [BackendPreference; 2] {
    [BackendPreference::Uring, BackendPreference::Epoll]
}

/// An RTSP peer on a plain socket: what it received, decoded.
struct Raw {
    sock: TcpStream,
    rx: Vec<u8>,
    decoder: InterleavedDecoder,
    /// Payload of the packets received, by channel.
    packets: Vec<(u8, Vec<u8>)>,
    messages: Vec<Message>,
    eof: bool,
}

impl Raw {
    fn new(sock: TcpStream) -> Self {
        sock.set_nonblocking(true).unwrap();
        Self {
            sock,
            rx: Vec::new(),
            decoder: InterleavedDecoder::new(RtspLimits::default()),
            packets: Vec::new(),
            messages: Vec::new(),
            eof: false,
        }
    }

    fn connect(addr: SocketAddr) -> Self {
        Self::new(TcpStream::connect(addr).unwrap())
    }

    fn send(&mut self, bytes: &[u8]) {
        self.sock.set_nonblocking(false).unwrap();
        self.sock.write_all(bytes).unwrap();
        self.sock.set_nonblocking(true).unwrap();
    }

    fn request(&mut self, req: &Request) {
        self.send(&req.to_bytes().unwrap());
    }

    /// Reads what has come and decodes it.
    fn pump(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match self.sock.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.rx.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.eof = true;
                    break;
                }
            }
        }
        while let Ok((item, used)) = self.decoder.decode(&self.rx) {
            match item {
                Item::Message(m) => self.messages.push(m),
                Item::Data {
                    channel, skip, len, ..
                } => {
                    let payload = &self.rx[skip..skip + len];
                    match self.packets.last_mut() {
                        Some((c, p)) if *c == channel && skip == 0 => p.extend_from_slice(payload),
                        _ => self.packets.push((channel, payload.to_vec())),
                    }
                }
            }
            self.rx.drain(..used);
        }
    }

    fn responses(&self) -> Vec<&Response> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                Message::Response(r) => Some(r),
                Message::Request(_) => None,
            })
            .collect()
    }

    fn requests(&self) -> Vec<&Request> {
        self.messages
            .iter()
            .filter_map(|m| match m {
                Message::Request(r) => Some(r),
                Message::Response(_) => None,
            })
            .collect()
    }

    /// The body of a whole stream of payloads on `channel`.
    fn payload(&self, channel: u8) -> Vec<u8> {
        self.packets
            .iter()
            .filter(|(c, _)| *c == channel)
            .flat_map(|(_, p)| p.iter().copied())
            .collect()
    }
}

/// Polls `t` and pumps `raw` until `done` says so; returns the events.
fn drive<T: Transport>(
    t: &mut T,
    raws: &mut [&mut Raw],
    what: &str,
    mut done: impl FnMut(&[Event], &mut [&mut Raw]) -> bool,
) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut events = Vec::new();
    loop {
        t.poll(&mut events, Some(Duration::from_millis(2))).unwrap();
        for raw in raws.iter_mut() {
            raw.pump();
        }
        if done(&events, raws) {
            return events;
        }
        assert!(Instant::now() < deadline, "no progress within 20 s: {what}");
    }
}

fn uri(addr: SocketAddr) -> String {
    format!("rtsp://{addr}/dtp")
}

/// OPTIONS, SETUP and RECORD from `raw`, until the server accepts it;
/// returns the server's connection and the session the SETUP answer gave.
fn open(t: &mut Rtsp<Driver>, raw: &mut Raw, addr: SocketAddr) -> (ConnId, String) {
    let setup = Request::new(Method::Setup, uri(addr), 2).with(
        "Transport",
        "RTP/AVP/TCP;unicast;interleaved=0-1;mode=record",
    );
    raw.request(&Request::new(Method::Options, uri(addr), 1));
    raw.request(&setup);
    drive(t, &mut [raw], "the SETUP answer", |_, r| {
        r[0].responses().len() == 2
    });
    let session = raw.responses()[1].headers.session().unwrap().unwrap();
    let record = Request::new(Method::Record, uri(addr), 3).with("Session", session.id.clone());
    raw.request(&record);
    let events = drive(t, &mut [raw], "accepted", |e, _| {
        e.iter().any(|e| matches!(e, Event::Accepted { .. }))
    });
    let conn = events
        .iter()
        .find_map(|e| match e {
            Event::Accepted { conn, .. } => Some(*conn),
            _ => None,
        })
        .unwrap();
    (conn, session.to_string())
}

fn listen(t: &mut Rtsp<Driver>) -> SocketAddr {
    let (_, bound) = t
        .listen(&"rtsp:127.0.0.1:0".parse().unwrap(), false)
        .unwrap();
    match bound {
        Endpoint::Rtsp(addr) => addr,
        other => panic!("{other}"),
    }
}

fn closed(events: &[Event], conn: ConnId) -> Option<CloseReason> {
    events.iter().find_map(|e| match e {
        Event::Closed { conn: c, reason } if *c == conn => Some(*reason),
        _ => None,
    })
}

/// A UDP SETUP is refused with 461; a TCP one opens the session; packets
/// on channel 1 are dropped, a payload cut into packets with a keep-alive
/// between them arrives whole; TEARDOWN is answered and reported as the
/// peer closing.
#[test]
fn a_raw_rtsp_peer_is_refused_then_carried_then_torn_down() {
    for backend in backends() {
        let mut t = rtsp(backend, RtspConfig::default());
        let addr = listen(&mut t);
        let mut raw = Raw::connect(addr);
        let udp = Request::new(Method::Setup, uri(addr), 1)
            .with("Transport", "RTP/AVP;unicast;client_port=4588-4589");
        raw.request(&udp);
        drive(&mut t, &mut [&mut raw], "461", |_, r| {
            !r[0].responses().is_empty()
        });
        assert_eq!(raw.responses()[0].status, 461, "{backend:?}");
        raw.messages.clear();
        let (conn, session) = open(&mut t, &mut raw, addr);
        assert!(session.ends_with(";timeout=60"), "{session}");
        let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        write_interleaved(1, b"an RTCP report", &mut wire);
        write_interleaved(0, &big[..30_000], &mut wire);
        let keep_alive =
            Request::new(Method::GetParameter, uri(addr), 4).with("Session", session.clone());
        keep_alive.write(&mut wire).unwrap();
        write_interleaved(0, &big[30_000..], &mut wire);
        raw.send(&wire);
        let mut got = Vec::new();
        drive(&mut t, &mut [&mut raw], "the payload", |e, _| {
            for e in e {
                if let Event::Received { conn: c, data } = e {
                    assert_eq!(*c, conn);
                    got.extend_from_slice(data);
                }
            }
            got.len() >= big.len()
        });
        assert!(got == big, "{backend:?}: the payload changed");
        raw.messages.clear();
        raw.request(&Request::new(Method::Teardown, uri(addr), 5).with("Session", session));
        let events = drive(&mut t, &mut [&mut raw], "teardown", |e, _| {
            closed(e, conn).is_some()
        });
        assert_eq!(closed(&events, conn), Some(CloseReason::PeerClosed));
        drive(&mut t, &mut [&mut raw], "the answer and EOF", |_, r| {
            r[0].eof
        });
        let statuses: Vec<_> = raw.responses().iter().map(|r| (r.status, r.cseq)).collect();
        assert_eq!(statuses, [(200, Some(4)), (200, Some(5))], "{backend:?}");
    }
}

/// SPEC TRN-3: a peer that sends nothing for the session timeout is cut
/// (ETIMEDOUT); one that sends keep-alives stays; one that never finishes
/// the exchange is cut at the handshake timeout without being reported.
#[test]
fn silent_peers_are_cut_and_kept_alive_ones_stay() {
    for backend in backends() {
        let config = RtspConfig {
            session_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_millis(500),
            ..RtspConfig::default()
        };
        let mut t = rtsp(backend, config);
        let addr = listen(&mut t);
        // The live one first: without its keep-alives it would be cut
        // before the silent one.
        let mut alive = Raw::connect(addr);
        let (alive_conn, alive_session) = open(&mut t, &mut alive, addr);
        assert!(alive_session.ends_with(";timeout=1"), "{alive_session}");
        let mut silent = Raw::connect(addr);
        let (silent_conn, _) = open(&mut t, &mut silent, addr);
        let mut stalled = Raw::connect(addr);
        let mut last = Instant::now();
        let mut cseq = 10;
        let events = drive(
            &mut t,
            &mut [&mut alive, &mut stalled],
            "the cut",
            |e, raws| {
                if last.elapsed() > Duration::from_millis(200) {
                    cseq += 1;
                    let req = Request::new(Method::GetParameter, uri(addr), cseq)
                        .with("Session", alive_session.clone());
                    raws[0].request(&req);
                    last = Instant::now();
                }
                closed(e, silent_conn).is_some() && raws[1].eof
            },
        );
        assert_eq!(
            closed(&events, silent_conn),
            Some(CloseReason::Error(libc::ETIMEDOUT)),
            "{backend:?}"
        );
        assert_eq!(closed(&events, alive_conn), None, "{backend:?}");
        assert!(alive.responses().iter().all(|r| r.status == 200));
        assert!(
            !events.iter().any(|e| matches!(e, Event::Accepted { .. })),
            "{backend:?}: the stalled peer was reported"
        );
    }
}

/// An RTSP server of our own making (a plain socket) answering our client:
/// the client asks OPTIONS, SETUP (TCP interleaved 0-1), RECORD, then
/// sends GET_PARAMETER keep-alives in the session when idle, packets of at
/// most 65,535 bytes, and TEARDOWN when closed.
#[test]
fn our_client_sets_up_keeps_alive_splits_and_tears_down() {
    for backend in backends() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut t = rtsp(backend, RtspConfig::default());
        let conn = t.connect(&Endpoint::Rtsp(addr)).unwrap();
        let big: Vec<u8> = (0..150_000u32).map(|i| (i % 253) as u8).collect();
        t.send(conn, &big).unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut accepted = None;
        drive(&mut t, &mut [], "the accept", |_, _| {
            accepted = listener.accept().ok();
            accepted.is_some()
        });
        let mut raw = Raw::new(accepted.unwrap().0);
        let mut answered = 0;
        let events = drive(&mut t, &mut [&mut raw], "connected", |e, r| {
            let reqs: Vec<Request> = r[0].requests().into_iter().cloned().collect();
            for req in &reqs[answered..] {
                let mut resp = Response::new(200, req.cseq);
                if req.method == Method::Setup {
                    resp = resp
                        .with("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")
                        .with("Session", "s42;timeout=1");
                }
                r[0].send(&resp.to_bytes().unwrap());
            }
            answered = reqs.len();
            e.iter().any(|e| matches!(e, Event::Connected { .. }))
        });
        assert!(closed(&events, conn).is_none());
        // Idle: keep-alives within the second the server allows.
        drive(&mut t, &mut [&mut raw], "two keep-alives", |_, r| {
            r[0].requests().len() >= 5 && r[0].payload(0).len() == big.len()
        });
        let methods: Vec<Method> = raw.requests().iter().map(|r| r.method.clone()).collect();
        assert_eq!(
            methods[..5],
            [
                Method::Options,
                Method::Setup,
                Method::Record,
                Method::GetParameter,
                Method::GetParameter
            ],
            "{backend:?}"
        );
        let setup = &raw.requests()[1];
        let spec = setup.headers.transport().unwrap().unwrap().remove(0);
        assert!(spec.is_rtp_avp_tcp() && spec.interleaved.is_some_and(|c| c.first == 0));
        assert!(
            raw.requests()[2..]
                .iter()
                .all(|r| r.headers.get("Session") == Some("s42"))
        );
        assert!(raw.payload(0) == big, "{backend:?}: the payload changed");
        assert!(
            raw.packets
                .iter()
                .all(|(c, p)| *c == 0 && p.len() <= 65_535)
        );
        t.close(conn);
        drive(&mut t, &mut [&mut raw], "teardown", |e, r| {
            closed(e, conn).is_some() && r[0].eof
        });
        let last = raw.requests().last().unwrap().method.clone();
        assert_eq!(last, Method::Teardown, "{backend:?}");
    }
}

/// A client whose server never answers is cut at the handshake timeout
/// and told it could not connect.
#[test]
fn a_client_whose_server_never_answers_fails_to_connect() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let config = RtspConfig {
        handshake_timeout: Duration::from_millis(300),
        ..RtspConfig::default()
    };
    let mut t = rtsp(BackendPreference::Epoll, config);
    let conn = t
        .connect(&Endpoint::Rtsp(listener.local_addr().unwrap()))
        .unwrap();
    let events = drive(&mut t, &mut [], "the timeout", |e, _| {
        closed(e, conn).is_some()
    });
    assert_eq!(
        closed(&events, conn),
        Some(CloseReason::ConnectFailed(libc::ETIMEDOUT))
    );
}

/// Wrappers stack: `Rtsp<WebSocket<Driver>>` speaks `rtsp:`, `ws:` and
/// `tcp:` endpoints side by side, each carrying its bytes unaltered.
#[test]
fn rtsp_over_websocket_over_the_driver_speaks_every_scheme() {
    let stack = || {
        let ws = WebSocket::new(driver(BackendPreference::Epoll), WsConfig::default());
        Rtsp::new(ws, RtspConfig::default())
    };
    let (mut server, mut client) = (stack(), stack());
    for at in ["rtsp:127.0.0.1:0", "ws:127.0.0.1:0/dtp", "tcp:127.0.0.1:0"] {
        let (_, bound) = server.listen(&at.parse().unwrap(), false).unwrap();
        assert_eq!(bound.scheme(), at.split(':').next().unwrap());
        let conn = client.connect(&bound).unwrap();
        client.send(conn, at.as_bytes()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut events = Vec::new();
        let mut got = Vec::new();
        while got != at.as_bytes() {
            assert!(Instant::now() < deadline, "{at}: no bytes");
            server
                .poll(&mut events, Some(Duration::from_millis(2)))
                .unwrap();
            client
                .poll(&mut events, Some(Duration::from_millis(2)))
                .unwrap();
            for e in events.drain(..) {
                if let Event::Received { data, .. } = e {
                    got.extend_from_slice(&data);
                }
            }
        }
    }
}
