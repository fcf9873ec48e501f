//! The IO driver: one per core thread, owning its ring (or epoll instance),
//! its memory pool and its connections. Two backends behind one
//! buffer-owning API; the engine cannot tell them apart.

use std::io;
use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::sendq::SendError;
use crate::slots::SlotId;
use crate::transport::{Event, Transport, TransportError};
use crate::{epoll, uring};

/// A connection of one driver (generational: stale ids are refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub(crate) SlotId);

/// A listening socket of one driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub(crate) SlotId);

impl ConnId {
    /// The slot the connection occupies: stable while it is open, so the
    /// engine can index a table with [`SlotId::index`].
    pub fn slot(self) -> SlotId {
        self.0
    }

    /// A number for logs and metrics (slot and generation).
    pub fn as_u64(self) -> u64 {
        (u64::from(self.0.generation()) << 32) | u64::from(self.0.index())
    }

    /// The id [`ConnId::as_u64`] made this number from (for ids that went
    /// through a log, a metric or another thread as numbers). A made-up
    /// number is at worst an unknown connection: every call taking a
    /// `ConnId` checks the generation.
    pub fn from_u64(v: u64) -> ConnId {
        ConnId(SlotId::from_parts(v as u32, (v >> 32) as u32))
    }
}

/// Which IO backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendPreference {
    /// io_uring when it can be set up, else epoll; `DTP_IO_BACKEND`
    /// (`uring` or `epoll`) overrides.
    Auto,
    /// io_uring or an error.
    Uring,
    /// epoll (through mio).
    Epoll,
}

/// The backend in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// io_uring.
    Uring,
    /// epoll, through mio.
    Epoll,
    /// The in-memory transport (tests).
    Memory,
}

impl BackendKind {
    /// `io_uring`, `epoll` or `memory`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uring => "io_uring",
            Self::Epoll => "epoll",
            Self::Memory => "memory",
        }
    }
}

/// The backend chosen, and why (logged at start-up, shown in metrics and bench output).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendChoice {
    /// The backend.
    pub kind: BackendKind,
    /// Why it was chosen.
    pub reason: String,
}

/// Driver settings. Every count is a hard ceiling fixed at start.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Which backend.
    pub backend: BackendPreference,
    /// Submission queue entries (io_uring).
    pub ring_entries: u32,
    /// Size of every pool chunk: the unit of receive and send buffers.
    pub chunk_size: u32,
    /// Receive buffers (a power of two, at most 32768): the core's whole
    /// receive memory; an idle connection holds none.
    pub recv_buffers: u16,
    /// Send chunks shared by all connections of the core.
    pub send_chunks: u32,
    /// Most bytes one connection may have queued for sending (backpressure
    /// beyond that: [`SendError::BufferFull`]).
    pub max_send_queue: usize,
    /// Most connections (accepted and connected) at once.
    pub max_connections: usize,
    /// Set TCP_NODELAY on every connection.
    pub nodelay: bool,
    /// The TCP congestion control of every connection (`TCP_CONGESTION`,
    /// e.g. `"reno"`, `"cubic"`, `"bbr"`); `None` keeps the system default.
    /// On loopback BBR's pacing caps one connection's large writes at about
    /// half of what reno reaches (perf/README.md). [`Driver::new`] fails
    /// when the kernel does not offer or allow the name.
    pub tcp_congestion: Option<String>,
    /// io_uring: while streaming (the last poll received 32 KiB or more),
    /// wait for this many completions at once (1: return at the first; at
    /// most half of `recv_buffers` is used, as a wait cannot hold out for
    /// more receives than the ring has buffers).
    pub batch: u32,
    /// io_uring: how long (µs) such a wait may hold out for `batch`
    /// completions once at least one is there: fewer wake-ups per byte, for
    /// at most this much added latency (kernel 6.12+; ignored elsewhere).
    pub batch_wait_us: u32,
    /// io_uring: send chunks of at least this many bytes with SEND_ZC
    /// (0: never). On loopback the kernel copies anyway, so it does not pay
    /// there (perf/README.md); it may on a real NIC with large frames.
    pub send_zc_threshold: usize,
    /// How long an outgoing connect may take before it fails with
    /// ETIMEDOUT (io_uring: a linked timeout; epoll: a deadline).
    pub connect_timeout: Duration,
    /// Local addresses that outgoing TCP connections bind to, in turn
    /// (those of the destination's family); empty: the kernel picks. One
    /// source address reaches one destination from at most the ephemeral
    /// port range (~28k ports by default, 64k at most), so a load
    /// generator holding more connections to one server spreads them over
    /// several (127.0.0.2, 127.0.0.3, … on loopback).
    pub bind_sources: Vec<std::net::IpAddr>,
    /// io_uring: accept TCP and Unix stream connections as direct
    /// descriptors (slots of the ring's registered file table, no entry in
    /// the process's descriptor table), so that no operation on them looks
    /// the file up and takes a reference to it. Used where the kernel has
    /// them (5.19+) and the table can be registered; otherwise, and once
    /// the table is nearly full, connections are accepted as ordinary
    /// descriptors.
    pub fixed_files: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            backend: BackendPreference::Auto,
            ring_entries: 1024,
            // 16 receive buffers of 64 KiB: a 1 MiB receive working set that
            // stays in cache (io_uring hands provided buffers out in ring
            // order, so a large ring cycles through cold memory), in chunks
            // large enough that most 16 KiB frames decode in place
            // (perf/README.md).
            chunk_size: 64 * 1024,
            recv_buffers: 16,
            send_chunks: 1024,
            max_send_queue: 4 * 1024 * 1024,
            max_connections: 16 * 1024,
            nodelay: true,
            tcp_congestion: None,
            batch: 8,
            batch_wait_us: 100,
            send_zc_threshold: 0,
            connect_timeout: Duration::from_secs(10),
            bind_sources: Vec::new(),
            fixed_files: true,
        }
    }
}

impl DriverConfig {
    /// Checks the settings; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if !self.recv_buffers.is_power_of_two() || self.recv_buffers > 32768 {
            return Err(format!(
                "recv_buffers {} must be a power of two ≤ 32768",
                self.recv_buffers
            ));
        }
        if self.chunk_size < 4096 || !self.chunk_size.is_power_of_two() {
            return Err(format!(
                "chunk_size {} must be a power of two ≥ 4096",
                self.chunk_size
            ));
        }
        if self.ring_entries < 8 || self.ring_entries > 32768 {
            return Err(format!(
                "ring_entries {} must be within 8 … 32768",
                self.ring_entries
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err("connect_timeout must be positive".to_owned());
        }
        if let Some(cc) = &self.tcp_congestion
            && (cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(format!(
                "tcp_congestion {cc:?} is not a congestion control name (1 to 15 printable characters)"
            ));
        }
        if self.send_chunks == 0 || self.max_send_queue == 0 || self.max_connections == 0 {
            return Err(
                "send_chunks, max_send_queue and max_connections must be positive".to_owned(),
            );
        }
        Ok(())
    }
}

/// Why a connection closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed its side (end of stream).
    PeerClosed,
    /// This side closed it.
    Local,
    /// The connection failed with this OS error (reset, broken pipe, …).
    Error(i32),
    /// An outgoing connection could not be made (OS error).
    ConnectFailed(i32),
}

/// Wakes a driver blocked in [`Driver::poll`] from another thread.
#[derive(Clone)]
pub struct Waker(pub(crate) WakerInner);

#[derive(Clone)]
pub(crate) enum WakerInner {
    EventFd(std::sync::Arc<crate::waker::EventFd>),
    Mio(std::sync::Arc<mio::Waker>),
    /// A flag the transport's next poll reads (the in-memory transport,
    /// which never sleeps).
    Flag(std::sync::Arc<std::sync::atomic::AtomicBool>),
}

impl Waker {
    /// Makes the driver's current or next `poll` return with [`Event::Woken`].
    pub fn wake(&self) -> io::Result<()> {
        match &self.0 {
            WakerInner::EventFd(e) => e.wake(),
            WakerInner::Mio(w) => w.wake(),
            WakerInner::Flag(f) => {
                f.store(true, std::sync::atomic::Ordering::Release);
                Ok(())
            }
        }
    }
}

/// Counters a driver keeps (for `/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Connections open now.
    pub connections: usize,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Receive re-arms after the core ran out of receive buffers (ENOBUFS).
    pub recv_starved: u64,
    /// Connections refused because the table was full.
    pub refused: u64,
    /// Calls into the kernel to submit and wait.
    pub enters: u64,
    /// Sends made with SEND_ZC.
    pub zc_sends: u64,
    /// Sends that gathered several queued segments into one system call.
    pub gathered_sends: u64,
    /// SPEC MEM-3: bytes of shared sends queued by reference on this
    /// driver's connections and not yet fully sent: memory outside the pool
    /// that the queues keep alive. A `Bytes` queued on N connections counts
    /// N times here (each connection's budget counts it), while its memory
    /// exists once.
    pub shared_bytes_queued: u64,
    /// Shared sends queued by reference (not copied) so far.
    pub shared_sends: u64,
    /// Sends refused because their connection already held its share of
    /// send chunks and only the core's reserve was left (SPEC TRN-2: a
    /// connection whose peer does not read cannot take the chunks every
    /// other connection needs).
    pub send_reserve_refusals: u64,
    /// io_uring: closes whose cancel had to walk every pending operation
    /// of the ring (by file descriptor), for want of knowing which of the
    /// connection's operations were pending. Closing many connections at
    /// once costs the square of their number this way, so it stays 0 in
    /// the normal course: each pending operation is cancelled by its own
    /// user data, which the kernel looks up in a hash table.
    pub cancel_walks: u64,
}

pub(crate) enum Backend {
    Uring(Box<uring::Uring>),
    Epoll(Box<epoll::Epoll>),
}

/// SPEC TRN-2/TRN-5: the IO driver of one core thread.
pub struct Driver {
    backend: Backend,
    choice: BackendChoice,
}

macro_rules! dispatch {
    ($self:expr, $b:ident => $e:expr) => {
        match &$self.backend {
            Backend::Uring($b) => $e,
            Backend::Epoll($b) => $e,
        }
    };
    (mut $self:expr, $b:ident => $e:expr) => {
        match &mut $self.backend {
            Backend::Uring($b) => $e,
            Backend::Epoll($b) => $e,
        }
    };
}

impl Driver {
    /// Sets up a driver with the backend `config` asks for, logging the choice.
    pub fn new(config: DriverConfig) -> io::Result<Self> {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if let Some(cc) = &config.tcp_congestion {
            // Try it on a scratch socket: a refused name is a start-up
            // error, not a silent default on every connection.
            let probe = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            probe.set_tcp_congestion(cc.as_bytes()).map_err(|e| {
                let why = match e.raw_os_error() {
                    Some(libc::ENOENT) => "not available in this kernel".to_owned(),
                    Some(libc::EPERM) => "not allowed for this process".to_owned(),
                    _ => e.to_string(),
                };
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "tcp_congestion {cc:?}: {why} (see net.ipv4.tcp_available_congestion_control and tcp_allowed_congestion_control)"
                    ),
                )
            })?;
        }
        let env = std::env::var("DTP_IO_BACKEND").ok();
        let wanted = match (config.backend, env.as_deref()) {
            (BackendPreference::Auto, Some("epoll")) => {
                (BackendPreference::Epoll, "DTP_IO_BACKEND=epoll")
            }
            (BackendPreference::Auto, Some("uring" | "io_uring")) => {
                (BackendPreference::Uring, "DTP_IO_BACKEND=uring")
            }
            (BackendPreference::Auto, Some("auto") | None) => (BackendPreference::Auto, "auto"),
            (BackendPreference::Auto, Some(other)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("DTP_IO_BACKEND={other}: expected `auto`, `uring` or `epoll`"),
                ));
            }
            (p, _) => (p, "configured"),
        };
        let (backend, choice) = match wanted {
            (BackendPreference::Epoll, why) => {
                let b = epoll::Epoll::new(&config)?;
                (
                    Backend::Epoll(Box::new(b)),
                    BackendChoice {
                        kind: BackendKind::Epoll,
                        reason: why.to_owned(),
                    },
                )
            }
            (BackendPreference::Uring, why) => {
                let b = uring::Uring::new(&config)?;
                (
                    Backend::Uring(Box::new(b)),
                    BackendChoice {
                        kind: BackendKind::Uring,
                        reason: why.to_owned(),
                    },
                )
            }
            (BackendPreference::Auto, _) => match uring::Uring::new(&config) {
                Ok(b) => (
                    Backend::Uring(Box::new(b)),
                    BackendChoice {
                        kind: BackendKind::Uring,
                        reason: "io_uring available".to_owned(),
                    },
                ),
                Err(e) => {
                    let b = epoll::Epoll::new(&config)?;
                    let reason = format!("io_uring unavailable ({e}); falling back to epoll");
                    (
                        Backend::Epoll(Box::new(b)),
                        BackendChoice {
                            kind: BackendKind::Epoll,
                            reason,
                        },
                    )
                }
            },
        };
        tracing::info!(backend = choice.kind.name(), reason = %choice.reason, "IO backend selected");
        Ok(Self { backend, choice })
    }

    /// Receive chunks lent out and not yet back (tests of the pool's
    /// lending).
    pub fn lent_chunks(&self) -> usize {
        dispatch!(self, b => b.lent_chunks())
    }
}

/// UDP datagrams on the backend chosen at start-up.
impl crate::udp::Datagrams for Driver {
    fn bind_udp(
        &mut self,
        at: std::net::SocketAddr,
        peer: Option<std::net::SocketAddr>,
        shared: bool,
    ) -> Result<(crate::udp::UdpId, std::net::SocketAddr), TransportError> {
        dispatch!(mut self, b => b.bind_udp(at, peer, shared))
    }

    fn send_to(
        &mut self,
        socket: crate::udp::UdpId,
        to: std::net::SocketAddr,
        data: &[u8],
        segment: usize,
    ) -> Result<(), SendError> {
        dispatch!(mut self, b => b.send_to(socket, to, data, segment))
    }

    fn max_segments(&self, socket: crate::udp::UdpId) -> usize {
        dispatch!(self, b => b.max_segments(socket))
    }

    fn udp_room(&self, socket: crate::udp::UdpId) -> bool {
        dispatch!(self, b => b.udp_room(socket))
    }

    fn close_udp(&mut self, socket: crate::udp::UdpId) {
        dispatch!(mut self, b => b.close_udp(socket))
    }

    fn take_udp_events(&mut self, out: &mut Vec<crate::udp::UdpEvent>) {
        dispatch!(mut self, b => b.take_udp_events(out))
    }
}

/// SPEC TRN-1 … TRN-5 over sockets: the backend chosen at start-up, TCP and
/// Unix stream sockets alike.
impl Transport for Driver {
    fn backend(&self) -> &BackendChoice {
        &self.choice
    }

    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        dispatch!(mut self, b => b.listen(at, shared))
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        dispatch!(mut self, b => b.connect(to))
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        dispatch!(mut self, b => b.send(conn, bytes))
    }

    fn send_shared(&mut self, conn: ConnId, bytes: &bytes::Bytes) -> Result<(), SendError> {
        dispatch!(mut self, b => b.send_shared(conn, bytes))
    }

    fn queued(&self, conn: ConnId) -> usize {
        dispatch!(self, b => b.queued(conn))
    }

    fn want_writable(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.want_writable(conn))
    }

    fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
        dispatch!(mut self, b => b.limit_send_queue(conn, max))
    }

    fn pause_reading(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.pause_reading(conn))
    }

    fn resume_reading(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.resume_reading(conn))
    }

    fn close(&mut self, conn: ConnId) {
        dispatch!(mut self, b => Transport::close(&mut **b, conn))
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        dispatch!(mut self, b => b.poll(events, timeout))
    }

    fn waker(&self) -> Waker {
        dispatch!(self, b => b.waker())
    }

    fn stats(&self) -> DriverStats {
        dispatch!(self, b => b.stats())
    }

    fn region(&self) -> Option<&dtp_pool::Region> {
        dispatch!(self, b => b.region())
    }

    fn receive_pressure(&self, untaken: usize) -> bool {
        dispatch!(self, b => b.receive_pressure(untaken))
    }
}
