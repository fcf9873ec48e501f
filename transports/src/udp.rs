//! UDP datagram sockets on the core's own backends: what QUIC (and any
//! other datagram protocol) runs on, with no second runtime.
//!
//! One small API, [`Datagrams`], that both backends and [`Driver`]
//! implement: bind a socket, send a batch of datagrams to an address
//! (several equal segments in one call go out with one `sendmsg` and UDP
//! GSO where the kernel has it), and datagrams received, each with its
//! source address and its bytes lent from the core's receive chunks, taken
//! after each poll ([`Datagrams::take_udp_events`]). They are not
//! [`Event`](crate::Event)s: the runtime's event loop knows connections
//! only, and a datagram belongs to whichever protocol bound the socket.
//!
//! What both backends share lives here, once: making the socket (with its
//! offloads probed), the bounded queue of outgoing messages (each message
//! holds the `msghdr` the kernel reads, boxed so its address is stable
//! while io_uring sends from it), and reading the kernel's answers (the
//! source address, the GRO segment size). The backends differ only in how
//! a message reaches the kernel: a submitted `sendmsg` / multishot
//! `recvmsg` on io_uring, `sendmsg` / `recvmsg` on readiness on epoll.
//!
//! [`Driver`]: crate::Driver

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::lent::RecvBuf;
use crate::sendq::SendError;
use crate::slots::SlotId;
use crate::transport::TransportError;

/// A UDP socket of one driver (generational, like [`ConnId`](crate::ConnId)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpId(pub(crate) SlotId);

/// Datagrams received on a UDP socket: one, or with GRO several of
/// `segment` bytes each (the last may be shorter), all from `from`.
#[derive(Debug)]
pub struct Datagram {
    /// The socket.
    pub socket: UdpId,
    /// Who sent them.
    pub from: SocketAddr,
    /// The payload, exactly as sent (lent from the core's receive memory:
    /// drop it promptly).
    pub data: RecvBuf,
    /// The size of each datagram in `data` (its whole length when GRO did
    /// not coalesce several).
    pub segment: usize,
}

impl Datagram {
    /// The datagrams one by one.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.data.chunks(self.segment.max(1))
    }
}

/// What a UDP socket reports after a poll.
#[derive(Debug)]
pub enum UdpEvent {
    /// Datagrams arrived.
    Datagram(Datagram),
    /// The kernel reported an error on the socket: on a connected socket,
    /// `ECONNREFUSED` means an ICMP port unreachable came back (nobody
    /// listens at the peer's port). The socket stays usable.
    Error {
        /// The socket.
        socket: UdpId,
        /// The OS error.
        errno: i32,
    },
}

/// UDP datagram sockets, driven by the same thread and the same poll as a
/// transport's connections (SPEC TRN-2: nothing here blocks).
pub trait Datagrams {
    /// Binds a UDP socket to `at` (port 0: a free port) and, with `peer`,
    /// connects it there (only `peer`'s datagrams arrive, and an ICMP
    /// refusal comes back as [`UdpEvent::Error`]). With `shared`, every
    /// socket of this process bound to the same address with `shared`
    /// takes a share of its traffic (SO_REUSEPORT). Returns the socket and
    /// the address it is bound to.
    fn bind_udp(
        &mut self,
        at: SocketAddr,
        peer: Option<SocketAddr>,
        shared: bool,
    ) -> Result<(UdpId, SocketAddr), TransportError>;

    /// Queues `data` for `to`: one datagram, or when `segment` is smaller
    /// than `data`, datagrams of `segment` bytes each (the last may be
    /// shorter), sent with one system call and UDP GSO where the socket
    /// has it ([`Datagrams::max_segments`] > 1). A full queue is
    /// [`SendError::BufferFull`]: the caller waits for the next poll (UDP
    /// may also just lose it; QUIC recovers either way).
    fn send_to(
        &mut self,
        socket: UdpId,
        to: SocketAddr,
        data: &[u8],
        segment: usize,
    ) -> Result<(), SendError>;

    /// How many segments one [`Datagrams::send_to`] may carry on `socket`
    /// (1 without GSO; 0 for an unknown socket).
    fn max_segments(&self, socket: UdpId) -> usize;

    /// Whether `socket`'s queue has room for another message now.
    fn udp_room(&self, socket: UdpId) -> bool;

    /// Closes `socket`; what is queued is dropped.
    fn close_udp(&mut self, socket: UdpId);

    /// Appends what the UDP sockets received (or reported) since the last
    /// call; called after each [`Transport::poll`](crate::Transport::poll).
    fn take_udp_events(&mut self, out: &mut Vec<UdpEvent>);
}

/// `SOL_UDP` options of Linux (`linux/udp.h`), not in the libc crate.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Most segments one GSO send carries (the kernel's UDP_MAX_SEGMENTS is
/// 64 on older kernels).
pub(crate) const GSO_MAX_SEGMENTS: usize = 64;

/// Most messages a socket's send queue holds, and most bytes.
const QUEUE_MESSAGES: usize = 256;
const QUEUE_BYTES: usize = 4 << 20;

/// Socket buffer sizes asked for (best effort: the kernel caps them at
/// `net.core.{r,w}mem_max`). A burst of QUIC packets is many datagrams.
const SOCKET_BUFFER: usize = 2 << 20;

/// The aligned length of a control message's data, as `CMSG_ALIGN`.
const fn cmsg_align(len: usize) -> usize {
    let a = std::mem::size_of::<usize>();
    (len + a - 1) & !(a - 1)
}

const CMSG_HDR: usize = cmsg_align(std::mem::size_of::<libc::cmsghdr>());

/// Room for one control message of `len` data bytes, as `CMSG_SPACE`.
const fn cmsg_space(len: usize) -> usize {
    CMSG_HDR + cmsg_align(len)
}

/// Control-message room of a receive: a GRO segment size (an int).
pub(crate) const RECV_CONTROL: usize = cmsg_space(std::mem::size_of::<libc::c_int>()) * 2;

/// Name room of a receive.
pub(crate) const RECV_NAME: usize = std::mem::size_of::<libc::sockaddr_storage>();

/// What a new socket can do.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Offloads {
    /// UDP_SEGMENT (GSO) works.
    pub(crate) gso: bool,
}

impl Offloads {
    /// How many segments one send may carry ([`Datagrams::max_segments`]).
    pub(crate) fn segments(self) -> usize {
        if self.gso { GSO_MAX_SEGMENTS } else { 1 }
    }
}

/// A UDP socket for `at` (close-on-exec, non-blocking when asked), bound,
/// connected to `peer` if given, with its offloads probed: GSO when the
/// kernel takes UDP_SEGMENT, GRO only when asked (`gro`: the receive
/// buffers hold a coalesced 64 KiB).
pub(crate) fn udp_socket(
    at: SocketAddr,
    peer: Option<SocketAddr>,
    shared: bool,
    nonblocking: bool,
    gro: bool,
) -> Result<(Socket, SocketAddr, Offloads), TransportError> {
    let ty = if nonblocking {
        Type::DGRAM.cloexec().nonblocking()
    } else {
        Type::DGRAM.cloexec()
    };
    let socket = Socket::new(Domain::for_address(at), ty, Some(Protocol::UDP))?;
    if shared {
        socket.set_reuse_port(true)?;
    }
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    // Datagrams never fragmented, so QUIC's path MTU discovery may probe
    // (a probe too large is lost, not split).
    if at.is_ipv4() {
        set_int(
            &socket,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        );
    } else {
        set_int(
            &socket,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        );
    }
    socket.bind(&at.into()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            TransportError::AddressInUse(crate::Endpoint::Quic(at))
        } else {
            TransportError::Io(io::Error::new(e.kind(), format!("udp {at}: {e}")))
        }
    })?;
    if let Some(peer) = peer {
        socket.connect(&peer.into())?;
    }
    let local = socket
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::other("UDP socket has no address"))?;
    if gro {
        // Best effort: without it every datagram is a receive of its own.
        set_int(&socket, libc::SOL_UDP, UDP_GRO, 1);
    }
    let offloads = Offloads {
        gso: get_int(&socket, libc::SOL_UDP, UDP_SEGMENT).is_some(),
    };
    Ok((socket, local, offloads))
}

/// Sets an int socket option; whether the kernel took it.
fn set_int(socket: &Socket, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> bool {
    crate::socket::set_option(socket, level, name, value).is_ok()
}

/// An int socket option, if the socket has it.
fn get_int(socket: &Socket, level: libc::c_int, name: libc::c_int) -> Option<libc::c_int> {
    crate::socket::get_option(socket, level, name, 0)
}

/// The address in a `sockaddr_in` / `sockaddr_in6` the kernel wrote, read
/// field by field (no cast of the bytes to a struct).
pub(crate) fn socket_addr(name: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_ne_bytes(name.get(0..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(name.get(2..4)?.try_into().ok()?);
    match libc::c_int::from(family) {
        libc::AF_INET => {
            let ip: [u8; 4] = name.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 => {
            let flow = u32::from_be_bytes(name.get(4..8)?.try_into().ok()?);
            let ip: [u8; 16] = name.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(name.get(24..28)?.try_into().ok()?);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                flow,
                scope,
            )))
        }
        _ => None,
    }
}

/// The GRO segment size among the control messages the kernel wrote
/// (read field by field, bounded by `control`'s length).
pub(crate) fn gro_segment(control: &[u8]) -> Option<usize> {
    let word = std::mem::size_of::<usize>();
    let mut at = 0;
    while at + CMSG_HDR <= control.len() {
        let len = usize::from_ne_bytes(control.get(at..at + word)?.try_into().ok()?);
        let level = i32::from_ne_bytes(control.get(at + word..at + word + 4)?.try_into().ok()?);
        let kind = i32::from_ne_bytes(control.get(at + word + 4..at + word + 8)?.try_into().ok()?);
        if len < CMSG_HDR {
            return None;
        }
        if level == libc::SOL_UDP && kind == UDP_GRO {
            let data = control.get(at + CMSG_HDR..at + CMSG_HDR + 4)?;
            let size = i32::from_ne_bytes(data.try_into().ok()?);
            return usize::try_from(size).ok().filter(|s| *s > 0);
        }
        at += cmsg_align(len);
    }
    None
}

/// A control buffer aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; cmsg_space(2)]);

/// One outgoing message and the `msghdr` that describes it to the kernel.
/// Boxed in the queue: io_uring reads the header, the iovec, the address
/// and the control message while the send is in flight, so none of them
/// may move until it completes.
pub(crate) struct OutMsg {
    to: SockAddr,
    data: Vec<u8>,
    control: Control,
    iov: libc::iovec,
    msg: libc::msghdr,
}

impl OutMsg {
    fn new() -> Box<Self> {
        Box::new(Self {
            to: SockAddr::from(SocketAddr::from(([0, 0, 0, 0], 0))),
            data: Vec::new(),
            control: Control([0; cmsg_space(2)]),
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            // SAFETY: msghdr is a plain C struct; all zeroes is its empty
            // value (no name, no iovec, no control data).
            msg: unsafe { std::mem::zeroed() },
        })
    }

    /// Fills the message for `data` to `to`, with a UDP_SEGMENT control
    /// message when `segment` cuts it into several datagrams, and points
    /// the header at its own fields (their addresses are stable: `self`
    /// is boxed and not moved until the send completes).
    fn fill(&mut self, to: SocketAddr, data: &[u8], segment: Option<u16>) {
        self.to = SockAddr::from(to);
        self.data.clear();
        self.data.extend_from_slice(data);
        self.iov.iov_base = self.data.as_mut_ptr().cast();
        self.iov.iov_len = self.data.len();
        self.msg.msg_name = self.to.as_ptr().cast_mut().cast();
        self.msg.msg_namelen = self.to.len();
        self.msg.msg_iov = &raw mut self.iov;
        self.msg.msg_iovlen = 1;
        match segment {
            Some(size) => {
                let word = std::mem::size_of::<usize>();
                let c = &mut self.control.0;
                c[..word].copy_from_slice(&(CMSG_HDR + 2).to_ne_bytes());
                c[word..word + 4].copy_from_slice(&libc::SOL_UDP.to_ne_bytes());
                c[word + 4..word + 8].copy_from_slice(&UDP_SEGMENT.to_ne_bytes());
                c[CMSG_HDR..CMSG_HDR + 2].copy_from_slice(&size.to_ne_bytes());
                self.msg.msg_control = c.as_mut_ptr().cast();
                self.msg.msg_controllen = cmsg_space(2);
            }
            None => {
                self.msg.msg_control = std::ptr::null_mut();
                self.msg.msg_controllen = 0;
            }
        }
    }

    /// The header to hand to `sendmsg`; valid while `self` is neither
    /// moved nor refilled.
    pub(crate) fn header(&self) -> *const libc::msghdr {
        &raw const self.msg
    }

    /// Whether the message carries a GSO batch.
    pub(crate) fn segmented(&self) -> bool {
        !self.msg.msg_control.is_null()
    }
}

/// A socket's bounded queue of outgoing messages, in order; on io_uring
/// the head one may be in flight.
#[derive(Default)]
pub(crate) struct OutQueue {
    msgs: VecDeque<Box<OutMsg>>,
    bytes: usize,
    /// Emptied messages kept for reuse (a few: their buffers are the size
    /// of a GSO batch). Boxed as in `msgs`, so reuse moves no header.
    #[allow(
        clippy::vec_box,
        reason = "the boxes move between the queue and this list"
    )]
    spare: Vec<Box<OutMsg>>,
}

impl OutQueue {
    /// Queues `data` for `to`, cut into `segment`-byte datagrams when
    /// `gso` allows and `data` is longer; all or nothing. Without GSO a
    /// batch is queued as one message per datagram.
    pub(crate) fn push(
        &mut self,
        to: SocketAddr,
        data: &[u8],
        segment: usize,
        gso: bool,
    ) -> Result<(), SendError> {
        let segment = segment.clamp(1, data.len().max(1));
        let pieces = data.len().div_ceil(segment).max(1);
        let messages = if gso { 1 } else { pieces };
        if (gso && pieces > GSO_MAX_SEGMENTS)
            || segment > usize::from(u16::MAX)
            || self.msgs.len() + messages > QUEUE_MESSAGES
            || self.bytes + data.len() > QUEUE_BYTES
        {
            return Err(SendError::BufferFull);
        }
        if gso {
            let seg = (pieces > 1).then_some(segment as u16);
            self.push_one(to, data, seg);
        } else if data.is_empty() {
            self.push_one(to, data, None);
        } else {
            for piece in data.chunks(segment) {
                self.push_one(to, piece, None);
            }
        }
        Ok(())
    }

    fn push_one(&mut self, to: SocketAddr, data: &[u8], segment: Option<u16>) {
        let mut m = self.spare.pop().unwrap_or_else(OutMsg::new);
        m.fill(to, data, segment);
        self.bytes += data.len();
        self.msgs.push_back(m);
    }

    /// Whether another message fits.
    pub(crate) fn has_room(&self) -> bool {
        self.msgs.len() < QUEUE_MESSAGES && self.bytes < QUEUE_BYTES
    }

    /// The oldest message, if any.
    pub(crate) fn front(&self) -> Option<&OutMsg> {
        self.msgs.front().map(|m| &**m)
    }

    /// The oldest message was sent (or given up): frees it for reuse.
    pub(crate) fn pop(&mut self) {
        if let Some(m) = self.msgs.pop_front() {
            self.bytes -= m.data.len();
            if self.spare.len() < 4 {
                self.spare.push(m);
            }
        }
    }

    /// Drops everything queued (a closed socket).
    pub(crate) fn clear(&mut self) {
        self.msgs.clear();
        self.bytes = 0;
    }
}

/// Sends `m` with one non-blocking `sendmsg` (epoll): the bytes sent.
pub(crate) fn send_now(fd: std::os::fd::RawFd, m: &OutMsg) -> io::Result<usize> {
    // SAFETY: the header points at `m`'s own iovec, data, address and
    // control buffer, all alive and unmoved for the call (`m` is borrowed);
    // `fd` is the socket's open descriptor.
    let n = unsafe { libc::sendmsg(fd, m.header(), 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The `msghdr` of a receive: room for the source address and a GRO
/// control message. For io_uring's multishot `recvmsg` only its lengths
/// matter (the kernel lays name, control and payload out in each provided
/// buffer); epoll points it at a buffer of its own with [`RecvHeader::for_buffer`].
pub(crate) struct RecvHeader {
    pub(crate) msg: libc::msghdr,
    name: libc::sockaddr_storage,
    control: [usize; RECV_CONTROL / std::mem::size_of::<usize>()],
    iov: libc::iovec,
}

impl RecvHeader {
    /// A header with the name and control lengths set and no buffers.
    pub(crate) fn new() -> Box<Self> {
        // SAFETY: msghdr is a plain C struct; all zeroes is its empty value.
        let msg = unsafe { std::mem::zeroed() };
        // SAFETY: as above, for sockaddr_storage.
        let name = unsafe { std::mem::zeroed() };
        let mut h = Box::new(Self {
            msg,
            name,
            control: [0; RECV_CONTROL / std::mem::size_of::<usize>()],
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
        });
        h.msg.msg_namelen = RECV_NAME as libc::socklen_t;
        h.msg.msg_controllen = RECV_CONTROL;
        h
    }

    /// Points the header at its own name and control room and at `len`
    /// bytes at `buf` for the payload (a `recvmsg` on epoll).
    pub(crate) fn for_buffer(&mut self, buf: *mut u8, len: usize) -> *mut libc::msghdr {
        self.iov.iov_base = buf.cast();
        self.iov.iov_len = len;
        self.msg.msg_name = (&raw mut self.name).cast();
        self.msg.msg_namelen = RECV_NAME as libc::socklen_t;
        self.msg.msg_control = self.control.as_mut_ptr().cast();
        self.msg.msg_controllen = RECV_CONTROL;
        self.msg.msg_iov = &raw mut self.iov;
        self.msg.msg_iovlen = 1;
        self.msg.msg_flags = 0;
        &raw mut self.msg
    }

    /// After a `recvmsg` into [`RecvHeader::for_buffer`]: the source
    /// address and GRO segment size the kernel wrote.
    pub(crate) fn source_and_segment(&self) -> (Option<SocketAddr>, Option<usize>) {
        let name_len = (self.msg.msg_namelen as usize).min(RECV_NAME);
        // SAFETY: `name` is a live sockaddr_storage of RECV_NAME bytes, and
        // `name_len` is at most that; u8 has no alignment or validity needs.
        let name =
            unsafe { std::slice::from_raw_parts((&raw const self.name).cast::<u8>(), name_len) };
        let control_len = self.msg.msg_controllen.min(RECV_CONTROL);
        // SAFETY: as above, over the live control array of RECV_CONTROL bytes.
        let control =
            unsafe { std::slice::from_raw_parts(self.control.as_ptr().cast::<u8>(), control_len) };
        (socket_addr(name), gro_segment(control))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn addresses_read_back_from_kernel_layout() {
        for addr in ["127.0.0.1:4433", "[::1]:80", "[fe80::1%3]:9"] {
            let addr: SocketAddr = addr.parse().unwrap();
            let sa = SockAddr::from(addr);
            // SAFETY: the pointer and length describe `sa`'s own storage.
            let bytes =
                unsafe { std::slice::from_raw_parts(sa.as_ptr().cast::<u8>(), sa.len() as usize) };
            assert_eq!(socket_addr(bytes), Some(addr));
        }
        assert_eq!(socket_addr(&[0; 3]), None);
    }

    #[test]
    fn gro_segment_is_found_among_control_messages_and_garbage_is_refused() {
        let word = std::mem::size_of::<usize>();
        let mut c = vec![0u8; RECV_CONTROL];
        c[..word].copy_from_slice(&(CMSG_HDR + 4).to_ne_bytes());
        c[word..word + 4].copy_from_slice(&libc::SOL_UDP.to_ne_bytes());
        c[word + 4..word + 8].copy_from_slice(&UDP_GRO.to_ne_bytes());
        c[CMSG_HDR..CMSG_HDR + 4].copy_from_slice(&1200i32.to_ne_bytes());
        assert_eq!(gro_segment(&c), Some(1200));
        assert_eq!(gro_segment(&c[..CMSG_HDR]), None, "cut short");
        c[..word].copy_from_slice(&1usize.to_ne_bytes());
        assert_eq!(gro_segment(&c), None, "a length below the header");
        assert_eq!(gro_segment(&[]), None);
    }

    #[test]
    fn the_queue_is_bounded_and_keeps_order() {
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut q = OutQueue::default();
        q.push(to, &[1; 3000], 1200, true).unwrap();
        assert!(q.front().unwrap().segmented());
        q.push(to, &[2; 3000], 1200, false).unwrap();
        assert_eq!(q.msgs.len(), 4, "three datagrams without GSO");
        assert_eq!(
            q.push(to, &[0; 1200 * 65], 1200, true),
            Err(SendError::BufferFull),
            "more segments than one GSO send carries"
        );
        while q.has_room() {
            q.push(to, &[3; 10], 10, true).unwrap();
        }
        assert_eq!(q.push(to, &[3; 10], 10, true), Err(SendError::BufferFull));
        q.pop();
        assert_eq!(q.front().unwrap().data.len(), 1200);
        q.clear();
        assert!(q.msgs.is_empty() && q.has_room());
    }
}
