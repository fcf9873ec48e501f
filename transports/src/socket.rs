//! The sockets behind the fd transports (io_uring and epoll alike): making
//! listeners and outgoing sockets for an [`Endpoint`], sharing one Unix
//! listener between the cores of a process, and the checks that keep two
//! gateways off one port.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use socket2::{Domain, SockAddr, Socket, Type};

use crate::ble::Sdu;
use crate::driver::DriverConfig;
use crate::endpoint::Endpoint;
use crate::transport::TransportError;

/// What a connection's socket carries, which decides how a backend treats
/// it: TCP gets its socket options, a message-preserving (BLE) socket has
/// its sends cut into SDUs and its receives checked against the MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A TCP connection.
    Tcp,
    /// A Unix stream connection.
    Stream,
    /// A `SOCK_SEQPACKET` connection (BLE, or its simulation) and its SDU
    /// sizes.
    Messages(Sdu),
}

impl Kind {
    /// The kind of connection to or on `at`, refusing an MTU that the
    /// backend's receive buffers of `chunk_size` bytes could not check.
    fn of(at: &Endpoint, chunk_size: u32) -> io::Result<Self> {
        at.fits_receive_buffers(chunk_size)?;
        Ok(match at {
            Endpoint::Tcp(_) => Self::Tcp,
            Endpoint::Ble(a) => Self::Messages(Sdu::new(a.mtu, true)),
            Endpoint::BleSim { mtu, .. } => Self::Messages(Sdu::new(*mtu, false)),
            _ => Self::Stream,
        })
    }

    /// The SDU sizes of a message-preserving connection.
    pub(crate) fn sdu(self) -> Option<Sdu> {
        match self {
            Self::Messages(sdu) => Some(sdu),
            _ => None,
        }
    }
}

/// A listening socket of one backend: a TCP socket of its own (sharing the
/// port with SO_REUSEPORT), or a share of the process's one socket at a
/// Unix path or an L2CAP PSM (which have no SO_REUSEPORT).
pub(crate) enum ListenSocket {
    Tcp(Socket),
    Shared(Arc<SharedListenSocket>),
}

impl ListenSocket {
    pub(crate) fn raw_fd(&self) -> RawFd {
        match self {
            Self::Tcp(s) => s.as_raw_fd(),
            Self::Shared(u) => u.socket.as_raw_fd(),
        }
    }

    /// Sets the per-connection options of `config` on a TCP listener, so
    /// that the connections it accepts inherit them (Linux copies
    /// TCP_NODELAY and a congestion control set by `setsockopt` to every
    /// accepted socket): a connection accepted as a direct descriptor has
    /// no file descriptor to set them on.
    pub(crate) fn tune_accepted(&self, config: &DriverConfig) {
        if let Self::Tcp(s) = self {
            tune_socket(socket2::SockRef::from(s), config);
        }
    }

    /// What the accepted connections carry.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Self::Tcp(_) => Kind::Tcp,
            Self::Shared(u) => u.kind,
        }
    }
}

/// A listening socket every transport of the process that listens on its
/// endpoint with `shared` accepts from; the last share to go removes its
/// path (a Unix one's).
pub(crate) struct SharedListenSocket {
    socket: Socket,
    kind: Kind,
    path: Option<PathBuf>,
}

impl Drop for SharedListenSocket {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The shared listeners of this process that `shared` listens may join, by
/// endpoint (weak: the listeners own them).
static SHARED: Mutex<Vec<(Endpoint, Weak<SharedListenSocket>)>> = Mutex::new(Vec::new());

/// A listening socket for `at`, and the endpoint it is bound to. TCP with
/// `shared` sets SO_REUSEPORT, so that every core's transport listens on
/// the port; a Unix path (stream or BLE simulation) or an L2CAP PSM with
/// `shared` joins the socket another transport of this process made for
/// the same endpoint, if any. A Unix path left behind by a process that is
/// gone (nobody accepts on it) is replaced. A BLE MTU must stay below the
/// receive buffers' `chunk_size`.
pub(crate) fn listen(
    at: &Endpoint,
    shared: bool,
    chunk_size: u32,
    transport: &'static str,
) -> Result<(ListenSocket, Endpoint), TransportError> {
    let kind = Kind::of(at, chunk_size)?;
    let bind = match at {
        Endpoint::Tcp(addr) => {
            let socket = listener_socket(*addr, shared).map_err(|e| {
                if e.kind() == io::ErrorKind::AddrInUse {
                    TransportError::AddressInUse(at.clone())
                } else {
                    TransportError::Io(e)
                }
            })?;
            let local = socket
                .local_addr()?
                .as_socket()
                .ok_or_else(|| io::Error::other("listener has no socket address"))?;
            return Ok((ListenSocket::Tcp(socket), Endpoint::Tcp(local)));
        }
        Endpoint::Unix(path) => SharedBind::Path(path, Type::STREAM),
        Endpoint::BleSim { path, .. } => SharedBind::Path(path, Type::SEQPACKET),
        Endpoint::Ble(addr) => SharedBind::Psm(addr),
        other => {
            return Err(TransportError::UnsupportedEndpoint {
                transport,
                endpoint: other.clone(),
            });
        }
    };
    let mut registry = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    registry.retain(|(_, w)| w.strong_count() > 0);
    if shared
        && let Some(existing) = registry
            .iter()
            .find(|(e, _)| e == at)
            .and_then(|(_, w)| w.upgrade())
    {
        return Ok((ListenSocket::Shared(existing), at.clone()));
    }
    let (socket, path) = match bind {
        SharedBind::Path(path, ty) => (
            unix_listener(path, ty).map_err(|e| in_use_or(at, e, path.display()))?,
            Some(path.to_path_buf()),
        ),
        SharedBind::Psm(addr) => (
            crate::ble::l2cap_listener(addr).map_err(|e| in_use_or(at, e, at))?,
            None,
        ),
    };
    let shared_socket = Arc::new(SharedListenSocket { socket, kind, path });
    if shared {
        registry.push((at.clone(), Arc::downgrade(&shared_socket)));
    }
    Ok((ListenSocket::Shared(shared_socket), at.clone()))
}

/// Where a listener that the process's transports share is bound.
enum SharedBind<'a> {
    /// A Unix socket of this type at this path.
    Path(&'a Path, Type),
    /// An L2CAP PSM.
    Psm(&'a crate::BleAddr),
}

/// A listen's error: `AddressInUse`, or the OS error naming `what`.
fn in_use_or(at: &Endpoint, e: io::Error, what: impl std::fmt::Display) -> TransportError {
    if e.kind() == io::ErrorKind::AddrInUse {
        TransportError::AddressInUse(at.clone())
    } else {
        TransportError::Io(io::Error::new(e.kind(), format!("{what}: {e}")))
    }
}

/// A listening Unix socket of type `ty` (stream, or seqpacket for the BLE
/// simulation) at `path` (close-on-exec). A socket file already there that
/// no live process listens on ([`probe_unix`]) is removed first; one that
/// is alive is `AddrInUse`.
fn unix_listener(path: &Path, ty: Type) -> io::Result<Socket> {
    let addr = SockAddr::unix(path)?;
    let bind = || -> io::Result<Socket> {
        let socket = Socket::new(Domain::UNIX, ty.cloexec(), None)?;
        socket.bind(&addr)?;
        socket.listen(4096)?;
        Ok(socket)
    };
    match bind() {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                m.file_type().is_socket()
            });
            if is_socket && probe_unix(path).is_ok() {
                std::fs::remove_file(path)?;
                bind()
            } else {
                Err(e)
            }
        }
        other => other,
    }
}

/// Whether `path` is free to listen on for this process: `Ok` when nothing
/// is there, or a socket file nobody accepts on, or one whose listener's
/// process is gone (a gateway on io_uring that was killed keeps accepting
/// for some milliseconds after it exited, until the kernel closes its
/// rings: the listener's process, read with `SO_PEERCRED`, tells). A live
/// listener of another process, or of this one, is `AddrInUse`.
pub fn probe_unix(path: &Path) -> io::Result<()> {
    // A stream probe meets EPROTOTYPE at a seqpacket listener (the BLE
    // simulation's): then a seqpacket probe asks.
    let mut probed = Ok(());
    for ty in [Type::STREAM, Type::SEQPACKET] {
        probed = probe_unix_as(path, ty);
        if !matches!(&probed, Err(e) if e.raw_os_error() == Some(libc::EPROTOTYPE)) {
            break;
        }
    }
    probed
}

/// [`probe_unix`] with a probe socket of type `ty`.
fn probe_unix_as(path: &Path, ty: Type) -> io::Result<()> {
    let probe = Socket::new(Domain::UNIX, ty.cloexec(), None)?;
    match probe.connect(&SockAddr::unix(path)?) {
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ECONNREFUSED) | Some(libc::ENOENT)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
        Ok(()) => match listener_pid(&probe) {
            Some(pid) if !process_alive(pid) => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{}: another process listens there", path.display()),
            )),
        },
    }
}

/// The process that made the listener `connected` is connected to (its
/// credentials are taken when it listens), if the kernel says.
fn listener_pid(connected: &Socket) -> Option<libc::pid_t> {
    let empty = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let cred = get_option(connected, libc::SOL_SOCKET, libc::SO_PEERCRED, empty)?;
    (cred.pid > 0).then_some(cred.pid)
}

/// A plain C value a socket option holds: any bytes the kernel writes
/// into it make a valid value.
pub(crate) trait OptionValue: Copy {}

impl OptionValue for libc::c_int {}
impl OptionValue for u16 {}
impl OptionValue for libc::ucred {}

/// Sets socket option `name` of `level` on `socket` to `value`.
pub(crate) fn set_option<T: OptionValue>(
    socket: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: T,
) -> io::Result<()> {
    // SAFETY: the descriptor is the open socket borrowed for this call; the
    // value is a live local of plain C data, and its size is the length
    // passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads socket option `name` of `level` of `socket` into (a copy of)
/// `value`; `None` when the socket refuses it.
pub(crate) fn get_option<T: OptionValue>(
    socket: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    mut value: T,
) -> Option<T> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the descriptor is the open socket borrowed for this call;
    // `value` and `len` are live locals of the size the call may write,
    // and any bytes it writes make a valid `T` (`OptionValue`).
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    (rc == 0).then_some(value)
}

/// Whether process `pid` exists (a zombie counts as gone: it holds no
/// sockets of its own any more).
fn process_alive(pid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// The local addresses outgoing TCP connections bind to, taken in turn
/// ([`DriverConfig::bind_sources`]).
#[derive(Debug, Default)]
pub(crate) struct Sources {
    addrs: Vec<IpAddr>,
    next: usize,
}

impl Sources {
    /// Takes `addrs` in turn.
    pub(crate) fn new(addrs: &[IpAddr]) -> Self {
        Self {
            addrs: addrs.to_vec(),
            next: 0,
        }
    }

    /// The source of the next connection to `to`: the next address of its
    /// family; `None` (the kernel picks) for a Unix path, or when no
    /// address of that family is configured.
    pub(crate) fn pick(&mut self, to: &Endpoint) -> Option<IpAddr> {
        let Endpoint::Tcp(dst) = to else {
            return None;
        };
        for _ in 0..self.addrs.len() {
            let at = self.next % self.addrs.len();
            self.next = self.next.wrapping_add(1);
            let ip = self.addrs[at];
            if ip.is_ipv4() == dst.is_ipv4() {
                return Some(ip);
            }
        }
        None
    }
}

/// An outgoing socket for `to`, its address and what it carries,
/// non-blocking when asked (epoll) and close-on-exec; bound to `from`
/// (port chosen at connect) when given. A BLE MTU must stay below the
/// receive buffers' `chunk_size`.
pub(crate) fn connect_socket(
    to: &Endpoint,
    from: Option<IpAddr>,
    nonblocking: bool,
    chunk_size: u32,
    transport: &'static str,
) -> Result<(Socket, SockAddr, Kind), TransportError> {
    let kind = Kind::of(to, chunk_size)?;
    let with = |ty: Type| {
        if nonblocking {
            ty.cloexec().nonblocking()
        } else {
            ty.cloexec()
        }
    };
    let (socket, addr) = match to {
        Endpoint::Tcp(a) => (
            Socket::new(Domain::for_address(*a), with(Type::STREAM), None)?,
            SockAddr::from(*a),
        ),
        Endpoint::Unix(p) => (
            Socket::new(Domain::UNIX, with(Type::STREAM), None)?,
            SockAddr::unix(p)?,
        ),
        Endpoint::BleSim { path, .. } => (
            Socket::new(Domain::UNIX, with(Type::SEQPACKET), None)?,
            SockAddr::unix(path)?,
        ),
        Endpoint::Ble(a) => crate::ble::l2cap_connect_socket(a, nonblocking)
            .map_err(|e| io::Error::new(e.kind(), format!("{to}: {e}")))?,
        other => {
            return Err(TransportError::UnsupportedEndpoint {
                transport,
                endpoint: other.clone(),
            });
        }
    };
    if let Some(ip) = from {
        bind_address_no_port(&socket);
        socket.bind(&SocketAddr::new(ip, 0).into())?;
    }
    Ok((socket, addr, kind))
}

/// IP_BIND_ADDRESS_NO_PORT: a bind to a source address leaves the port to
/// the connect, which picks one free for that destination — so one
/// source address is not limited to one ephemeral range for all
/// destinations together. Best effort: without it the bind reserves a
/// port at once, which still works.
fn bind_address_no_port(socket: &Socket) {
    let _ = set_option(
        socket,
        libc::IPPROTO_IP,
        libc::IP_BIND_ADDRESS_NO_PORT,
        1 as libc::c_int,
    );
}

/// Applies the per-connection socket options of `config` (TCP_NODELAY,
/// TCP_CONGESTION) to a new TCP connection. A socket that refuses one still
/// works: latency or throughput suffer, nothing breaks.
pub(crate) fn tune_socket(sock: socket2::SockRef<'_>, config: &DriverConfig) {
    if config.nodelay {
        let _ = sock.set_tcp_nodelay(true);
    }
    if let Some(cc) = &config.tcp_congestion {
        let _ = sock.set_tcp_congestion(cc.as_bytes());
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

    /// A path of this process; a file an earlier process of the same id
    /// left there (ids are reused) is removed first.
    fn temp_sock(what: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("dtp-socket-{}-{what}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    #[test]
    fn shared_unix_listens_join_one_socket_and_the_last_removes_the_path() {
        let path = temp_sock("shared");
        let at = Endpoint::Unix(path.clone());
        let (a, _) = listen(&at, true, 1 << 16, "test").unwrap();
        let (b, _) = listen(&at, true, 1 << 16, "test").unwrap();
        assert_eq!(a.raw_fd(), b.raw_fd(), "one socket, accepted from by both");
        // Not shared: the path is taken by a live listener.
        assert!(matches!(
            listen(&at, false, 1 << 16, "test"),
            Err(TransportError::AddressInUse(_))
        ));
        drop(a);
        assert!(path.exists(), "still listened on by the other share");
        drop(b);
        assert!(!path.exists(), "removed with the last share");
    }

    #[test]
    fn a_stale_unix_socket_file_is_replaced_but_a_live_one_is_not() {
        let path = temp_sock("stale");
        let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(stale); // the file stays, nobody accepts on it
        let at = Endpoint::Unix(path.clone());
        let (live, _) = listen(&at, false, 1 << 16, "test").unwrap();
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        drop(live);
        // A regular file at the path is not ours to remove.
        std::fs::write(&path, b"not a socket").unwrap();
        assert!(listen(&at, false, 1 << 16, "test").is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
        std::fs::remove_file(&path).unwrap();
    }

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
