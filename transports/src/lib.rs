//! DTP transports: the IO driver and the Transport_Adapters (SPEC TRN-1 … TRN-5).
//!
//! This crate is the only part of DTP that touches the operating system's
//! IO interfaces. It owns:
//!
//! * the [`Transport`] trait (SPEC TRN-1 … TRN-5, the seed's
//!   Transport_Adapter): listen and connect by [`Endpoint`], receive into
//!   buffers the transport lends ([`RecvBuf`]), non-blocking sends of owned
//!   or shared bytes into a bounded queue, connection-state [`Event`]s. The
//!   runtime, the clients and the tests all drive transports through it;
//! * the socket transports, TCP and Unix stream sockets and BLE's
//!   message-preserving ones alike ([`Endpoint::Ble`]: L2CAP channels;
//!   [`Endpoint::BleSim`]: their simulation on Unix `SOCK_SEQPACKET`
//!   sockets; SDUs of at most the MTU, see [`BleAddr`]), on two
//!   backends: [`Uring`] (multishot accept and receive into a provided
//!   buffer ring made of the core's pool chunks, batched submission,
//!   cancellation that waits for the cancelled operation's own completion)
//!   and [`Epoll`] through mio; [`Driver`] picks one at start-up
//!   (`DTP_IO_BACKEND=epoll` forces the fallback). Sends are bounded per
//!   connection in pool chunks: a full queue is [`SendError::BufferFull`],
//!   never growth (SPEC TRN-2, MEM-8);
//! * UDP datagram sockets on the same two backends ([`Datagrams`]:
//!   multishot `recvmsg` into the provided buffer ring on io_uring,
//!   `recvmsg` on readiness on epoll, `sendmsg` with UDP GSO where the
//!   kernel has it), what QUIC runs on;
//! * DTP over QUIC ([`Quic`]): quinn-proto driven on those UDP sockets by
//!   the core's own thread, one bidirectional stream per connection,
//!   TLS 1.3 through rustls with a made or loaded certificate that
//!   clients pin;
//! * the wrappers that carry a byte stream over a framed protocol on
//!   another transport, speaking their own endpoint scheme and passing
//!   every other one through (so they stack): [`WebSocket`] (`ws:`, RFC
//!   6455 binary messages) and [`Rtsp`] (`rtsp:`, RFC 2326 interleaved
//!   `$` packets after OPTIONS, SETUP and RECORD);
//! * the in-memory transport ([`MemoryHub`], [`MemoryTransport`]) for
//!   deterministic tests, and the [`FaultInjector`] that wraps any
//!   transport to cut, drop, delay and re-chunk;
//! * the raw io_uring [`floor`] server the benchmarks measure against.
//!
//! A transport never interprets the bytes it moves (SPEC TRN-5). Where a
//! new transport goes: a module here implementing [`Transport`], a variant
//! of [`Endpoint`], and nothing else.

mod ble;
mod buffers;
mod driver;
mod endpoint;
mod epoll;
mod fault;
pub mod floor;
mod forward;
mod framing;
mod lent;
mod mem;
mod ops;
mod quic;
mod rtsp;
mod sendq;
mod slots;
mod socket;
mod sockets;
mod transport;
mod udp;
mod uring;
mod waker;
mod ws;

pub use ble::{BdAddr, BleAddr, DEFAULT_MTU as BLE_DEFAULT_MTU, MIN_MTU as BLE_MIN_MTU, probe_ble};
pub use driver::{
    BackendChoice, BackendKind, BackendPreference, CloseReason, ConnId, Driver, DriverConfig,
    DriverStats, ListenerId, Waker,
};
pub use endpoint::{Endpoint, ParseEndpointError};
pub use epoll::Epoll;
pub use fault::{FaultInjector, FaultPlan, FaultStats, Rechunk};
pub use lent::RecvBuf;
pub use mem::{MemoryConfig, MemoryHub, MemoryTransport};
pub use quic::{
    ALPN as QUIC_ALPN, CertPin, Quic, QuicConfig, QuicConfigError, QuicIdentity, SecretDer,
    cert_sha256,
};
pub use rtsp::{Rtsp, RtspConfig};
pub use sendq::SendError;
pub use slots::SlotId;
pub use socket::{foreign_listeners, probe_listen, probe_unix};
pub use sockets::{Sockets, sockets};
pub use transport::{Callbacks, ConnectionState, EVENTS_KEPT, Event, Transport, TransportError};
pub use udp::{Datagram, Datagrams, UdpEvent, UdpId};
pub use uring::Uring;
pub use ws::{SUBPROTOCOL as WS_SUBPROTOCOL, WebSocket, WsConfig};

/// Pins the calling thread to CPU `cpu` (thread-per-core shards).
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above; `set` is a live local.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks the kernel to kill this process when the thread that started it
/// exits (Linux `PR_SET_PDEATHSIG`), so a server started by `dtp bench`
/// never outlives a bench that was killed. Returns `false` (and changes
/// nothing) if the parent is already gone, so the caller can stop at once.
pub fn die_with_parent() -> std::io::Result<bool> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // The parent may have exited before the call: then we were re-parented
    // and no signal will come.
    // SAFETY: getppid has no preconditions.
    Ok(unsafe { libc::getppid() } != 1)
}

/// Raises this process's open-file limit (RLIMIT_NOFILE) to its hard limit
/// and returns the new soft limit: a gateway or load generator with many
/// connections needs one descriptor each.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live, writable rlimit the call fills in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim = raised;
    }
    Ok(lim.rlim_cur)
}
