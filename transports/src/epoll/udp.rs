//! UDP datagrams on epoll ([`Datagrams`]): non-blocking `recvmsg` into
//! the core's receive chunks on readiness, and `sendmsg` at once from the
//! socket's bounded queue, the rest on writability.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use mio::unix::SourceFd;
use mio::{Interest, Token};
use socket2::Socket;

use super::{Epoll, UDP_BIT};
use crate::buffers::RecvPool;
use crate::sendq::SendError;
use crate::slots::SlotId;
use crate::transport::TransportError;
use crate::udp::{Datagram, Datagrams, Offloads, OutQueue, RecvHeader, UdpEvent, UdpId};

/// Most datagrams read from one socket per poll, so that one busy socket
/// cannot starve the others.
const READS_PER_POLL: usize = 64;

/// A UDP socket registered with epoll.
pub(super) struct UdpSock {
    socket: Socket,
    offloads: Offloads,
    out: OutQueue,
    /// Readable and not yet drained to WouldBlock.
    readable: bool,
    queued_for_read: bool,
    header: Box<RecvHeader>,
}

impl Epoll {
    /// Readiness of UDP socket `packed`.
    pub(super) fn on_udp_ready(&mut self, packed: u64, readable: bool, writable: bool) {
        let Some(id) = self.udp.find_packed(packed) else {
            return;
        };
        if writable {
            self.flush_udp(id);
        }
        if let Some(s) = self.udp.get_mut(id)
            && readable
        {
            s.readable = true;
            if !s.queued_for_read {
                s.queued_for_read = true;
                self.udp_to_read.push(id);
            }
        }
    }

    /// Whether a UDP socket has datagrams waiting and buffers are free.
    pub(super) fn has_ready_udp(&self) -> bool {
        !self.free.is_empty() && !self.udp_to_read.is_empty()
    }

    /// Reads from the readable UDP sockets while receive buffers last.
    pub(super) fn read_udp(&mut self) {
        let list = std::mem::take(&mut self.udp_to_read);
        let mut again = Vec::new();
        for id in list {
            if self.read_udp_some(id) {
                again.push(id);
            } else if let Some(s) = self.udp.get_mut(id) {
                s.queued_for_read = false;
            }
        }
        self.udp_to_read = again;
    }

    /// Reads up to [`READS_PER_POLL`] datagrams; true if more may wait.
    fn read_udp_some(&mut self, id: SlotId) -> bool {
        for _ in 0..READS_PER_POLL {
            let Some(s) = self.udp.get_mut(id) else {
                return false;
            };
            if !s.readable {
                return false;
            }
            let Some(bid) = self.free.pop() else {
                self.stats.recv_starved += 1;
                return true;
            };
            let Some(span) = self.bufs.lent_span(bid) else {
                return false;
            };
            let msg = s.header.for_buffer(span.as_mut_ptr(), span.len() as usize);
            // SAFETY: buffer `bid` is lent to this backend (its pool request
            // holds the write lease until `filled`), so the kernel may write
            // its `span.len()` bytes; the header points at it and at the
            // header's own name and control room, all alive for the call.
            let n = unsafe { libc::recvmsg(s.socket.as_raw_fd(), msg, 0) };
            if n < 0 {
                self.free.push(bid);
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => {
                        s.readable = false;
                        return false;
                    }
                    io::ErrorKind::Interrupted => {}
                    _ => self.udp_events.push(UdpEvent::Error {
                        socket: UdpId(id),
                        errno: e.raw_os_error().unwrap_or(libc::EIO),
                    }),
                }
                continue;
            }
            let truncated = s.header.msg.msg_flags & libc::MSG_TRUNC != 0;
            let (from, segment) = s.header.source_and_segment();
            let chunk = match self.bufs.filled(bid, n as u32) {
                Ok(chunk) => chunk,
                Err(e) => {
                    tracing::error!(error = %e, "receive completion refused by the pool");
                    return false;
                }
            };
            match from {
                Some(from) if !truncated => {
                    self.stats.bytes_in += n as u64;
                    let data = self.deliver(chunk);
                    self.udp_events.push(UdpEvent::Datagram(Datagram {
                        socket: UdpId(id),
                        from,
                        segment: segment.unwrap_or(n as usize),
                        data,
                    }));
                }
                // Larger than a receive buffer, or of no family we know:
                // dropped, as UDP may.
                _ => self.recycle(chunk),
            }
        }
        true
    }

    /// Sends what `id` has queued until done or the socket is full.
    fn flush_udp(&mut self, id: SlotId) {
        let Some(s) = self.udp.get_mut(id) else {
            return;
        };
        while let Some(m) = s.out.front() {
            match crate::udp::send_now(s.socket.as_raw_fd(), m) {
                Ok(n) => self.stats.bytes_out += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::EIO) && m.segmented() => {
                    tracing::debug!("UDP GSO refused by the device; sending datagrams one by one");
                    s.offloads.gso = false;
                }
                // Lost, as UDP may lose it: QUIC sends again.
                Err(e) => tracing::trace!(error = %e, "UDP send failed"),
            }
            s.out.pop();
        }
    }
}

/// SPEC TRN-2 on epoll: datagrams on the core's epoll instance (see the
/// module docs).
impl Datagrams for Epoll {
    fn bind_udp(
        &mut self,
        at: SocketAddr,
        peer: Option<SocketAddr>,
        shared: bool,
    ) -> Result<(UdpId, SocketAddr), TransportError> {
        let gro = self.config.chunk_size >= 64 * 1024;
        let (socket, local, offloads) = crate::udp::udp_socket(at, peer, shared, true, gro)?;
        let fd = socket.as_raw_fd();
        let id = self
            .udp
            .insert(UdpSock {
                socket,
                offloads,
                out: OutQueue::default(),
                readable: false,
                queued_for_read: false,
                header: RecvHeader::new(),
            })
            .map_err(|_| TransportError::TooManyConnections)?;
        let token = Token((id.pack() | UDP_BIT) as usize);
        if let Err(e) = self.poll.registry().register(
            &mut SourceFd(&fd),
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            self.udp.remove(id);
            return Err(e.into());
        }
        Ok((UdpId(id), local))
    }

    fn send_to(
        &mut self,
        socket: UdpId,
        to: SocketAddr,
        data: &[u8],
        segment: usize,
    ) -> Result<(), SendError> {
        let s = self
            .udp
            .get_mut(socket.0)
            .ok_or(SendError::UnknownConnection)?;
        s.out.push(to, data, segment, s.offloads.gso)?;
        self.flush_udp(socket.0);
        Ok(())
    }

    fn max_segments(&self, socket: UdpId) -> usize {
        self.udp.get(socket.0).map_or(0, |s| s.offloads.segments())
    }

    fn udp_room(&self, socket: UdpId) -> bool {
        self.udp.get(socket.0).is_some_and(|s| s.out.has_room())
    }

    fn close_udp(&mut self, socket: UdpId) {
        if let Some(s) = self.udp.remove(socket.0) {
            let fd = s.socket.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        }
    }

    fn take_udp_events(&mut self, out: &mut Vec<UdpEvent>) {
        out.append(&mut self.udp_events);
    }
}
