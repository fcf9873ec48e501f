//! The conformance suite's harness: the transports under test, a server
//! and a client polled in turn, and a record of what each side saw, checked
//! against the event order every transport promises.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dtp_transports::{
    BackendPreference, CertPin, ConnId, ConnectionState, Driver, DriverConfig, Endpoint, Event,
    FaultInjector, FaultPlan, ListenerId, MemoryConfig, MemoryHub, Quic, QuicConfig, Rtsp,
    RtspConfig, SendError, Transport, WebSocket, WsConfig,
};

/// Every transport's send queue holds this much (so TRN-2 reads the same on all).
pub(crate) const QUEUE: usize = 64 * 1024;
pub(crate) const BLOCK: usize = 16 * 1024;
pub(crate) const SERVER: usize = 0;
pub(crate) const CLIENT: usize = 1;

pub(crate) fn econnrefused() -> i32 {
    libc::ECONNREFUSED
}

pub(crate) fn econnreset() -> i32 {
    libc::ECONNRESET
}

/// SplitMix64, for reproducible payloads.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The transports under test (each may also be wrapped in a `FaultInjector`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    TcpUring,
    TcpEpoll,
    UnixUring,
    UnixEpoll,
    Memory,
    /// DTP over WebSocket on TCP, io_uring and epoll.
    WsUring,
    WsEpoll,
    /// DTP over QUIC on UDP, io_uring and epoll.
    QuicUring,
    QuicEpoll,
    /// DTP over RTSP-interleaved TCP, io_uring and epoll.
    RtspUring,
    RtspEpoll,
    /// The simulated BLE link (SDUs of at most 247 bytes on a Unix
    /// `SOCK_SEQPACKET` socket), io_uring and epoll.
    BleSimUring,
    BleSimEpoll,
}

impl Base {
    fn backend(self) -> BackendPreference {
        match self {
            Self::TcpUring
            | Self::UnixUring
            | Self::WsUring
            | Self::QuicUring
            | Self::RtspUring
            | Self::BleSimUring => BackendPreference::Uring,
            _ => BackendPreference::Epoll,
        }
    }
}

/// A transport chosen at run time.
pub(crate) type Boxed = Box<dyn Transport>;

/// A fresh Unix socket path (in the system's temporary directory, unique
/// to this process and call). Listeners remove theirs; the stale files made
/// for refused connects stay, a few bytes each — so a file left at this
/// path by an earlier process that had the same id (ids are reused) is
/// removed first.
pub(crate) fn unix_path(what: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let path =
        std::env::temp_dir().join(format!("dtp-conf-{}-{n}-{what}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// A server and a client transport of one kind, the endpoint the server
/// listens on, and one where nothing listens.
pub(crate) fn adapters(base: Base) -> (Boxed, Boxed, Endpoint, Endpoint) {
    let driver = |backend, max_send_queue| DriverConfig {
        backend,
        chunk_size: 16 * 1024,
        recv_buffers: 16,
        send_chunks: 64,
        max_send_queue,
        ..DriverConfig::default()
    };
    let tcp = |backend| Box::new(Driver::new(driver(backend, QUEUE)).unwrap()) as Boxed;
    // The inner connection holds the payload budget plus its frames' headers.
    let ws = |backend| {
        let inner = Driver::new(driver(backend, 2 * QUEUE)).unwrap();
        let config = WsConfig {
            max_send_queue: QUEUE,
            ..WsConfig::default()
        };
        Box::new(WebSocket::new(inner, config)) as Boxed
    };
    let rtsp = |backend| {
        let inner = Driver::new(driver(backend, 2 * QUEUE)).unwrap();
        let config = RtspConfig {
            max_send_queue: QUEUE,
            ..RtspConfig::default()
        };
        Box::new(Rtsp::new(inner, config)) as Boxed
    };
    let closed_port = || {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    match base {
        Base::QuicUring | Base::QuicEpoll => {
            let backend = base.backend();
            let (server, client) = quic_pair(
                Driver::new(driver(backend, QUEUE)).unwrap(),
                Driver::new(driver(backend, QUEUE)).unwrap(),
            );
            let listen = Endpoint::Quic("127.0.0.1:0".parse().unwrap());
            // A UDP port nobody listens on: the connected client socket
            // hears the ICMP refusal.
            let nowhere = std::net::UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            (
                Box::new(server) as Boxed,
                Box::new(client) as Boxed,
                listen,
                Endpoint::Quic(nowhere),
            )
        }
        Base::WsUring | Base::WsEpoll => {
            let backend = base.backend();
            let listen = Endpoint::Ws {
                addr: "127.0.0.1:0".parse().unwrap(),
                path: "/dtp".to_owned(),
            };
            let nowhere = Endpoint::Ws {
                addr: closed_port(),
                path: "/dtp".to_owned(),
            };
            (ws(backend), ws(backend), listen, nowhere)
        }
        Base::RtspUring | Base::RtspEpoll => {
            let backend = base.backend();
            let listen = Endpoint::Rtsp("127.0.0.1:0".parse().unwrap());
            let nowhere = Endpoint::Rtsp(closed_port());
            (rtsp(backend), rtsp(backend), listen, nowhere)
        }
        Base::BleSimUring | Base::BleSimEpoll => {
            let backend = base.backend();
            let listen = Endpoint::BleSim {
                path: unix_path("ble"),
                mtu: dtp_transports::BLE_DEFAULT_MTU,
            };
            // A socket file nobody listens on, as for Unix sockets.
            let path = unix_path("ble-nowhere");
            drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
            let nowhere = Endpoint::BleSim {
                path,
                mtu: dtp_transports::BLE_DEFAULT_MTU,
            };
            (tcp(backend), tcp(backend), listen, nowhere)
        }
        Base::UnixUring | Base::UnixEpoll => {
            let backend = base.backend();
            let listen = Endpoint::Unix(unix_path("server"));
            // A socket file nobody listens on (left by a socket that is
            // gone): connects to it are refused, as to a closed TCP port.
            let path = unix_path("nowhere");
            let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
            drop(stale);
            let nowhere = Endpoint::Unix(path);
            (tcp(backend), tcp(backend), listen, nowhere)
        }
        Base::TcpUring | Base::TcpEpoll => {
            let backend = base.backend();
            // A port that was free a moment ago and has nobody listening now.
            let nowhere = Endpoint::Tcp(closed_port());
            let listen = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
            (tcp(backend), tcp(backend), listen, nowhere)
        }
        Base::Memory => {
            let hub = MemoryHub::new();
            let config = MemoryConfig {
                queue_capacity: QUEUE,
                max_delivery: 16 * 1024,
                ..MemoryConfig::default()
            };
            (
                Box::new(hub.transport_with(config.clone())),
                Box::new(hub.transport_with(config)),
                Endpoint::Memory("server".to_owned()),
                Endpoint::Memory("nowhere".to_owned()),
            )
        }
    }
}

/// A QUIC server and a client that pins the server's certificate, each
/// on its inner transport, with the suite's send queue and a small
/// receive window (so that a paused reader stops its peer soon).
pub(crate) fn quic_pair<T>(server: T, client: T) -> (Quic<T>, Quic<T>)
where
    T: Transport + dtp_transports::Datagrams,
{
    let config = QuicConfig {
        max_send_queue: QUEUE,
        receive_window: 4 * QUEUE as u32,
        ..QuicConfig::default()
    };
    let server = Quic::new(server, config.clone()).unwrap();
    let client = Quic::new(
        client,
        QuicConfig {
            pins: vec![CertPin::Sha256(server.fingerprint().unwrap())],
            ..config
        },
    )
    .unwrap();
    (server, client)
}

/// What one side has seen, checked as it arrives against the event order
/// every transport promises (TRN-3: `Down` is final, bytes come while `Up`).
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) accepted: Vec<(ListenerId, ConnId)>,
    pub(crate) states: BTreeMap<ConnId, Vec<ConnectionState>>,
    pub(crate) bytes: BTreeMap<ConnId, Vec<u8>>,
    pub(crate) deliveries: usize,
    pub(crate) writable: usize,
}

impl Seen {
    /// An outgoing connection was started (its first state).
    pub(crate) fn connecting(&mut self, id: ConnId) {
        let states = self.states.entry(id).or_default();
        assert!(states.is_empty(), "{id:?} connecting after {states:?}");
        states.push(ConnectionState::Connecting);
    }

    pub(crate) fn record(&mut self, side: &str, event: Event) {
        if let Event::Accepted { listener, conn } = event {
            assert!(
                !self.states.contains_key(&conn),
                "{side}: {conn:?} accepted after other events for it"
            );
            self.accepted.push((listener, conn));
        }
        if let Some((id, state)) = event.state() {
            let accepted = self.accepted.iter().any(|(_, a)| *a == id);
            let states = self.states.entry(id).or_default();
            if state == ConnectionState::Up {
                assert!(
                    states.is_empty() && accepted
                        || states.as_slice() == [ConnectionState::Connecting],
                    "{side}: {id:?} up after {states:?}"
                );
            }
            assert!(
                !matches!(states.last(), Some(ConnectionState::Down(_))),
                "{side}: {state:?} for {id:?} after Down"
            );
            states.push(state);
        }
        match event {
            Event::Received { conn: id, data } => {
                assert_eq!(
                    self.state(id),
                    Some(ConnectionState::Up),
                    "{side}: bytes for {id:?} while not up"
                );
                assert!(!data.is_empty(), "{side}: an empty delivery");
                self.deliveries += 1;
                self.bytes.entry(id).or_default().extend_from_slice(&data);
            }
            Event::Writable { conn: id } => {
                assert!(
                    !matches!(self.state(id), Some(ConnectionState::Down(_))),
                    "{side}: Writable for {id:?} after Down"
                );
                self.writable += 1;
            }
            _ => {}
        }
    }

    pub(crate) fn state(&self, id: ConnId) -> Option<ConnectionState> {
        self.states.get(&id).and_then(|s| s.last().copied())
    }

    pub(crate) fn is_down(&self, id: ConnId) -> bool {
        matches!(self.state(id), Some(ConnectionState::Down(_)))
    }

    pub(crate) fn got(&self, id: ConnId) -> &[u8] {
        self.bytes.get(&id).map_or(&[], Vec::as_slice)
    }
}

/// A server and a client, polled in turn.
pub(crate) struct Net<S, C> {
    pub(crate) server: S,
    pub(crate) client: C,
    pub(crate) listener: ListenerId,
    pub(crate) listen_at: Endpoint,
    pub(crate) nowhere: Endpoint,
    pub(crate) seen: [Seen; 2],
    pub(crate) events: Vec<Event>,
}

impl<S: Transport, C: Transport> Net<S, C> {
    pub(crate) fn new(mut server: S, client: C, listen: &Endpoint, nowhere: Endpoint) -> Self {
        let (listener, listen_at) = server.listen(listen, false).unwrap();
        Self {
            server,
            client,
            listener,
            listen_at,
            nowhere,
            seen: Default::default(),
            events: Vec::new(),
        }
    }

    pub(crate) fn step(&mut self) {
        let wait = Some(Duration::from_millis(1));
        self.server.poll(&mut self.events, wait).unwrap();
        for e in self.events.drain(..) {
            self.seen[SERVER].record("server", e);
        }
        self.client.poll(&mut self.events, wait).unwrap();
        for e in self.events.drain(..) {
            self.seen[CLIENT].record("client", e);
        }
    }

    /// Steps until `done` (which may send) says so.
    pub(crate) fn until(&mut self, what: &str, mut done: impl FnMut(&mut Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(self) {
            assert!(Instant::now() < deadline, "no progress within 20 s: {what}");
            self.step();
        }
    }

    /// Connects the client; returns its id and the server's, once both are up.
    pub(crate) fn connect(&mut self) -> (ConnId, ConnId) {
        let known = self.seen[SERVER].accepted.len();
        let id = self.client_connect(&self.listen_at.clone());
        // "Was up", not "is up": a fault may cut a connection at once.
        let up = |seen: &Seen, id| {
            seen.states
                .get(&id)
                .is_some_and(|s| s.contains(&ConnectionState::Up))
        };
        self.until("connection up on both sides", |n| {
            up(&n.seen[CLIENT], id)
                && n.seen[SERVER]
                    .accepted
                    .get(known)
                    .is_some_and(|(_, a)| up(&n.seen[SERVER], *a))
        });
        (id, self.seen[SERVER].accepted[known].1)
    }

    /// Starts a client connection to `to`, recording it as connecting.
    pub(crate) fn client_connect(&mut self, to: &Endpoint) -> ConnId {
        let id = self.client.connect(to).unwrap();
        self.seen[CLIENT].connecting(id);
        id
    }
}

pub(crate) fn net(base: Base, wrapped: bool) -> Net<Boxed, Boxed> {
    let (server, client, listen, nowhere) = adapters(base);
    if wrapped {
        let server = Box::new(FaultInjector::new(server, 1)) as Boxed;
        let client = Box::new(FaultInjector::new(client, 2)) as Boxed;
        Net::new(server, client, &listen, nowhere)
    } else {
        Net::new(server, client, &listen, nowhere)
    }
}

pub(crate) type Faulty = FaultInjector<Boxed>;

pub(crate) fn fault_net(base: Base, server: FaultPlan, client: FaultPlan) -> Net<Faulty, Faulty> {
    let (s, c, listen, nowhere) = adapters(base);
    Net::new(
        FaultInjector::with_plan(s, 11, server),
        FaultInjector::with_plan(c, 12, client),
        &listen,
        nowhere,
    )
}

/// Sends as much of `out` as the queue takes, in all-or-nothing pieces of
/// at most `piece` bytes; returns how much went.
pub(crate) fn send_some(a: &mut impl Transport, id: ConnId, out: &[u8], piece: usize) -> usize {
    let mut sent = 0;
    while sent < out.len() {
        let n = piece.min(out.len() - sent);
        match a.send(id, &out[sent..sent + n]) {
            Ok(()) => sent += n,
            // Closed: the peer is gone and our Down is on its way.
            Err(SendError::BufferFull | SendError::Closed) => break,
            Err(e) => panic!("send: {e}"),
        }
    }
    sent
}
