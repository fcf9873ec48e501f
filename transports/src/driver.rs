//! The IO driver: one per core thread, owning its ring (or epoll instance),
//! its memory pool and its connections. Two backends behind one
//! buffer-owning API; the engine cannot tell them apart.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::buffers::RecvChunk;
use crate::sendq::SendError;
use crate::slots::SlotId;
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
}

impl BackendKind {
    /// `io_uring` or `epoll`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uring => "io_uring",
            Self::Epoll => "epoll",
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

/// What happened, as reported by [`Driver::poll`] (SPEC TRN-1/TRN-3: the
/// receive and connection-state "callbacks" as polled events).
#[derive(Debug)]
pub enum Event {
    /// A listener accepted a connection.
    Accepted {
        /// The listener.
        listener: ListenerId,
        /// The new connection.
        conn: ConnId,
    },
    /// An outgoing connection is established.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// Bytes arrived; read them with [`Driver::recv_data`] and give the chunk
    /// back with [`Driver::recycle`] promptly (it is the core's receive memory).
    Received {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        chunk: RecvChunk,
    },
    /// A producer refused with [`SendError::BufferFull`] may send again.
    Writable {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is closed and its id dead; nothing more will arrive.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// Another thread called [`Waker::wake`].
    Woken,
}

/// Wakes a driver blocked in [`Driver::poll`] from another thread.
#[derive(Clone)]
pub struct Waker(pub(crate) WakerInner);

#[derive(Clone)]
pub(crate) enum WakerInner {
    EventFd(std::sync::Arc<crate::waker::EventFd>),
    Mio(std::sync::Arc<mio::Waker>),
}

impl Waker {
    /// Makes the driver's current or next `poll` return with [`Event::Woken`].
    pub fn wake(&self) -> io::Result<()> {
        match &self.0 {
            WakerInner::EventFd(e) => e.wake(),
            WakerInner::Mio(w) => w.wake(),
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
    /// Sends that gathered several queued chunks into one system call.
    pub gathered_sends: u64,
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

/// Applies the per-connection socket options of `config` (TCP_NODELAY,
/// TCP_CONGESTION) to a new connection. A socket that refuses one still
/// works: latency or throughput suffer, nothing breaks.
pub(crate) fn tune_socket(sock: socket2::SockRef<'_>, config: &DriverConfig) {
    if config.nodelay {
        let _ = sock.set_tcp_nodelay(true);
    }
    if let Some(cc) = &config.tcp_congestion {
        let _ = sock.set_tcp_congestion(cc.as_bytes());
    }
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
            (BackendPreference::Auto, Some(other)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("DTP_IO_BACKEND={other}: expected `uring` or `epoll`"),
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

    /// The backend in use and why.
    pub fn backend(&self) -> &BackendChoice {
        &self.choice
    }

    /// Listens on `addr` (with SO_REUSEPORT when `reuse_port`, so every core
    /// can listen on the same port); returns the listener and its address.
    pub fn listen(
        &mut self,
        addr: SocketAddr,
        reuse_port: bool,
    ) -> io::Result<(ListenerId, SocketAddr)> {
        dispatch!(mut self, b => b.listen(addr, reuse_port))
    }

    /// Starts connecting to `addr`; [`Event::Connected`] or
    /// [`Event::Closed`] with [`CloseReason::ConnectFailed`] follows.
    pub fn connect(&mut self, addr: SocketAddr) -> io::Result<ConnId> {
        dispatch!(mut self, b => b.connect(addr))
    }

    /// SPEC TRN-2, TRN-5: queues `bytes` on `conn` without blocking and
    /// without altering them; they go out on the next [`Driver::poll`].
    /// All or nothing: a full queue is [`SendError::BufferFull`].
    pub fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        dispatch!(mut self, b => b.send(conn, bytes))
    }

    /// Bytes queued on `conn` and not yet sent.
    pub fn queued(&self, conn: ConnId) -> usize {
        dispatch!(self, b => b.queued(conn))
    }

    /// Stops reading from `conn` (its producer is backpressured); bytes
    /// already in flight may still arrive. The peer's TCP window fills up
    /// and it slows down: nothing is lost and no memory grows.
    pub fn pause_reading(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.set_paused(conn, true))
    }

    /// Asks for an [`Event::Writable`] once `conn`'s send queue is at most
    /// half full (as after a refused send), e.g. for a producer that held
    /// back on its own.
    pub fn want_writable(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.want_writable(conn))
    }

    /// Starts reading from `conn` again after [`Driver::pause_reading`].
    pub fn resume_reading(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.set_paused(conn, false))
    }

    /// Closes `conn` once its queued bytes are sent; [`Event::Closed`] follows.
    pub fn close(&mut self, conn: ConnId) {
        dispatch!(mut self, b => b.close(conn))
    }

    /// The bytes of a received chunk.
    pub fn recv_data(&self, chunk: &RecvChunk) -> &[u8] {
        dispatch!(self, b => b.recv_data(chunk))
    }

    /// Gives a received chunk back to the kernel.
    pub fn recycle(&mut self, chunk: RecvChunk) {
        dispatch!(mut self, b => b.recycle(chunk))
    }

    /// The bytes of a received chunk as [`bytes::Bytes`], without a copy.
    /// The chunk goes back to the kernel at the first poll after the last
    /// `Bytes` sharing it is dropped (on any thread): hold them briefly, as
    /// the core's receive memory is what they hold.
    pub fn recv_bytes(&mut self, chunk: RecvChunk) -> bytes::Bytes {
        dispatch!(mut self, b => b.recv_bytes(chunk))
    }

    /// Receive chunks lent out ([`Driver::recv_bytes`],
    /// [`Driver::recv_buf`]) and not yet back: a receiver that holds on to
    /// received bytes pins the pool's receive memory, and should copy
    /// rather than lend as this nears `recv_buffers`.
    pub fn lent_chunks(&self) -> usize {
        dispatch!(self, b => b.lent_chunks())
    }

    /// The receive buffers this driver was configured with.
    pub fn recv_buffers(&self) -> usize {
        dispatch!(self, b => usize::from(b.config.recv_buffers))
    }

    /// The bytes of a received chunk as a [`RecvBuf`](crate::RecvBuf),
    /// without a copy, for a receiver that modifies them in place (decrypts)
    /// before freezing them. The chunk goes back to the kernel as with
    /// [`Driver::recv_bytes`], once every piece split off it is dropped.
    pub fn recv_buf(&mut self, chunk: RecvChunk) -> crate::RecvBuf {
        dispatch!(mut self, b => b.recv_buf(chunk))
    }

    /// Submits what is queued, waits up to `timeout` (`None`: until something
    /// happens) and appends what happened to `events`.
    pub fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        dispatch!(mut self, b => b.poll(events, timeout))
    }

    /// A handle other threads use to wake this driver.
    pub fn waker(&self) -> Waker {
        dispatch!(self, b => b.waker())
    }

    /// Counters.
    pub fn stats(&self) -> DriverStats {
        dispatch!(self, b => b.stats())
    }

    /// The driver's memory pool, for its accounting report (SPEC MEM-3).
    pub fn region(&self) -> &dtp_pool::Region {
        dispatch!(self, b => b.bufs().region())
    }
}

/// A listening TCP socket on `addr` (close-on-exec, SO_REUSEADDR, and
/// SO_REUSEPORT when asked, so every shard can listen on one port). Its
/// errors name the address (`127.0.0.1:7700: Address already in use`).
pub(crate) fn listener_socket(
    addr: std::net::SocketAddr,
    reuse_port: bool,
) -> std::io::Result<socket2::Socket> {
    let listen = || -> io::Result<socket2::Socket> {
        let socket = bindable_socket(addr)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(4096)?;
        Ok(socket)
    };
    listen().map_err(|e| io::Error::new(e.kind(), format!("{addr}: {e}")))
}

/// Whether `addr` is free for this process alone: binds a plain socket
/// (SO_REUSEADDR as our listeners have, but no SO_REUSEPORT) and lets it
/// go. A listener of another process on the port — even one with
/// SO_REUSEPORT, which our shards' sockets would otherwise join, splitting
/// the traffic between two gateways — makes the bind fail with
/// `AddrInUse`. Port 0 always passes (the kernel picks a free port); call
/// it before the shards listen, and [`foreign_listeners`] after.
pub fn probe_listen(addr: SocketAddr) -> io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    bindable_socket(addr)?.bind(&addr.into())
}

/// A TCP socket for `addr`'s family, close-on-exec, with SO_REUSEADDR (a
/// port whose old connections linger in TIME_WAIT can be listened on).
fn bindable_socket(addr: SocketAddr) -> io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM.cloexec(),
        None,
    )?;
    socket.set_reuse_address(true)?;
    Ok(socket)
}

/// The listening TCP sockets of other processes that share a port with one
/// of `addrs` (same address family; same address, or either the wildcard):
/// read from `/proc/net/tcp{,6}`, a socket counting as ours when one of
/// this process's file descriptors is it. Run after every shard listens, it
/// closes the gap [`probe_listen`] leaves: two gateways started at the
/// same instant both find the other, and port 0. An error: `/proc` could
/// not be read.
pub fn foreign_listeners(addrs: &[SocketAddr]) -> io::Result<Vec<SocketAddr>> {
    let mut ours = std::collections::HashSet::new();
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Ok(link) = std::fs::read_link(entry?.path()) else {
            continue; // closed since the listing
        };
        let link = link.to_string_lossy();
        if let Some(inode) = link
            .strip_prefix("socket:[")
            .and_then(|l| l.strip_suffix(']'))
            .and_then(|i| i.parse::<u64>().ok())
        {
            ours.insert(inode);
        }
    }
    let mut foreign = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // no IPv6
            Err(e) => return Err(e),
        };
        for (local, inode) in text.lines().skip(1).filter_map(proc_net_listener) {
            let shares = addrs.iter().any(|a| {
                a.port() == local.port()
                    && a.is_ipv4() == local.is_ipv4()
                    && (a.ip() == local.ip()
                        || a.ip().is_unspecified()
                        || local.ip().is_unspecified())
            });
            if shares && !ours.contains(&inode) {
                foreign.push(local);
            }
        }
    }
    Ok(foreign)
}

/// A line of `/proc/net/tcp{,6}` that is a listener: its local address and
/// socket inode. Addresses are hex, in 32-bit words of host byte order.
fn proc_net_listener(line: &str) -> Option<(SocketAddr, u64)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
    if *state != "0A" {
        return None; // TCP_LISTEN
    }
    let (ip, port) = local.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for i in (0..ip.len()).step_by(8) {
        let word = u32::from_str_radix(ip.get(i..i + 8)?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip: std::net::IpAddr = match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok()?.into(),
        16 => <[u8; 16]>::try_from(bytes).ok()?.into(),
        _ => return None,
    };
    Some((SocketAddr::new(ip, port), inode.parse().ok()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn proc_net_lines_give_listeners_and_their_inodes() {
        // As the kernel prints them on a little-endian machine.
        let v4 = "   0: 0100007F:1E14 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0";
        let v6 = "   1: 00000000000000000000000001000000:1E15 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1 0000000000000000 100 0 0 10 0";
        let established = v4.replace(" 0A ", " 01 ");
        if cfg!(target_endian = "little") {
            assert_eq!(
                proc_net_listener(v4),
                Some(("127.0.0.1:7700".parse().unwrap(), 4242))
            );
            assert_eq!(
                proc_net_listener(v6),
                Some(("[::1]:7701".parse().unwrap(), 77))
            );
        }
        assert_eq!(proc_net_listener(&established), None);
        assert_eq!(proc_net_listener("  sl  local_address rem_address"), None);
    }

    #[test]
    fn a_port_shared_with_reuseport_is_refused_by_the_probe_but_ours_is_not_foreign() {
        let held = listener_socket("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let addr = held.local_addr().unwrap().as_socket().unwrap();
        // A second SO_REUSEPORT listener could join this port; the probe cannot.
        assert!(listener_socket(addr, true).is_ok());
        let e = probe_listen(addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        // Every listener on the port is this process's own.
        assert_eq!(foreign_listeners(&[addr]).unwrap(), Vec::new());
        drop(held);
        // Bind errors name the address.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let e = listener_socket(addr, true).unwrap_err();
        assert!(e.to_string().starts_with(&addr.to_string()), "{e}");
        assert!(probe_listen(SocketAddr::new(addr.ip(), 0)).is_ok());
    }
}
