//! UDP datagrams on io_uring ([`Datagrams`]): a multishot `recvmsg` per
//! socket into the core's provided buffer ring (the kernel lays out the
//! source address, a GRO control message and the payload in each buffer),
//! and one `sendmsg` in flight per socket from its bounded queue, with a
//! UDP_SEGMENT control message for a GSO batch.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use io_uring::types::{CancelBuilder, Fd, RecvMsgOut};
use io_uring::{cqueue, opcode};
use socket2::Socket;

use super::{BGID, Op, Uring, sys, user_data};
use crate::buffers::RecvPool;
use crate::sendq::SendError;
use crate::slots::SlotId;
use crate::transport::TransportError;
use crate::udp::{Datagram, Datagrams, Offloads, OutQueue, RecvHeader, UdpEvent, UdpId};

/// A UDP socket on the ring.
pub(super) struct UdpSock {
    socket: Socket,
    offloads: Offloads,
    out: OutQueue,
    /// The head of `out` is in flight.
    sending: bool,
    recv_armed: bool,
    /// The header the multishot `recvmsg` was built from (its name and
    /// control lengths lay out every buffer); kept for parsing.
    header: Box<RecvHeader>,
    /// Operations submitted and not yet finally completed.
    pub(super) ops: u32,
    closing: bool,
}

impl Uring {
    fn arm_udp_recv(&mut self, id: SlotId) -> std::io::Result<()> {
        let Some(s) = self.udp.get_mut(id) else {
            return Ok(());
        };
        if s.recv_armed || s.closing {
            return Ok(());
        }
        s.recv_armed = true;
        s.ops += 1;
        let e = opcode::RecvMsgMulti::new(Fd(s.socket.as_raw_fd()), &raw const s.header.msg, BGID)
            .build()
            .user_data(user_data(Op::UdpRecv, id));
        self.push(e)
    }

    fn submit_udp_send(&mut self, id: SlotId) -> std::io::Result<()> {
        let Some(s) = self.udp.get_mut(id) else {
            return Ok(());
        };
        if s.sending || s.closing {
            return Ok(());
        }
        let Some(m) = s.out.front() else {
            return Ok(());
        };
        s.sending = true;
        s.ops += 1;
        let e = opcode::SendMsg::new(Fd(s.socket.as_raw_fd()), m.header())
            .build()
            .user_data(user_data(Op::UdpSend, id));
        self.push(e)
    }

    /// Re-arms the receives that ran out of buffers.
    pub(super) fn rearm_starved_udp(&mut self) -> std::io::Result<()> {
        for id in std::mem::take(&mut self.udp_starved) {
            self.arm_udp_recv(id)?;
        }
        Ok(())
    }

    pub(super) fn on_udp_recv(&mut self, packed: u64, res: i32, flags: u32) -> std::io::Result<()> {
        let chunk = match cqueue::buffer_select(flags) {
            Some(bid) => Some({
                self.buf_ring.taken();
                self.bufs
                    .filled(bid, res.max(0) as u32)
                    .map_err(|e| std::io::Error::other(format!("receive buffer {bid}: {e}")))?
            }),
            None => None,
        };
        let Some(id) = self.udp.find_packed(packed) else {
            if let Some(chunk) = chunk {
                self.recycle(chunk);
            }
            return Ok(());
        };
        let more = cqueue::more(flags);
        if !more && let Some(s) = self.udp.get_mut(id) {
            s.recv_armed = false;
            s.ops = s.ops.saturating_sub(1);
        }
        let closing = self.udp.get(id).is_none_or(|s| s.closing);
        let mut starved = false;
        match chunk {
            Some(chunk) if closing => self.recycle(chunk),
            Some(chunk) => {
                // Where the kernel put the address, control data and payload.
                let parsed = self.udp.get(id).and_then(|s| {
                    let data = self.bufs.data(&chunk);
                    let out = RecvMsgOut::parse(data, &s.header.msg).ok()?;
                    if out.is_payload_truncated() {
                        return None;
                    }
                    let from = crate::udp::socket_addr(out.name_data())?;
                    let payload = out.payload_data();
                    let start = payload.as_ptr() as usize - data.as_ptr() as usize;
                    let segment = crate::udp::gro_segment(out.control_data());
                    Some((from, start, payload.len(), segment))
                });
                match parsed {
                    Some((from, start, len, segment)) => {
                        self.stats.bytes_in += len as u64;
                        let mut data = self.deliver(chunk);
                        drop(data.split_to(start));
                        let data = data.split_to(len);
                        self.udp_events.push(UdpEvent::Datagram(Datagram {
                            socket: UdpId(id),
                            from,
                            segment: segment.unwrap_or(len),
                            data,
                        }));
                    }
                    // A datagram larger than a receive buffer, or from an
                    // address of no family we know: dropped, as UDP may.
                    None => self.recycle(chunk),
                }
            }
            None if res == -libc::ENOBUFS => {
                self.stats.recv_starved += 1;
                self.udp_starved.push(id);
                starved = true;
            }
            None if res == -libc::ECANCELED || res >= 0 => {}
            None => self.udp_events.push(UdpEvent::Error {
                socket: UdpId(id),
                errno: sys(res),
            }),
        }
        if !more && !starved {
            self.arm_udp_recv(id)?;
        }
        self.maybe_free_udp(id);
        Ok(())
    }

    pub(super) fn on_udp_send(&mut self, packed: u64, res: i32) -> std::io::Result<()> {
        let Some(id) = self.udp.find_packed(packed) else {
            return Ok(());
        };
        let Some(s) = self.udp.get_mut(id) else {
            return Ok(());
        };
        s.ops = s.ops.saturating_sub(1);
        s.sending = false;
        if res >= 0 {
            self.stats.bytes_out += res as u64;
        } else if res == -libc::EIO && s.out.front().is_some_and(|m| m.segmented()) {
            // The device cannot offload segmentation (no checksum
            // offload): this batch is lost, the next ones go unsegmented.
            tracing::debug!("UDP GSO refused by the device; sending datagrams one by one");
            s.offloads.gso = false;
        } else {
            // Lost, as UDP may lose it (EAGAIN with a full socket buffer,
            // an ICMP error of an earlier datagram): QUIC sends again.
            tracing::trace!(errno = sys(res), "UDP send failed");
        }
        s.out.pop();
        if s.closing {
            s.out.clear();
        }
        self.submit_udp_send(id)?;
        self.maybe_free_udp(id);
        Ok(())
    }

    fn maybe_free_udp(&mut self, id: SlotId) {
        if self.udp.get(id).is_some_and(|s| s.closing && s.ops == 0) {
            self.udp.remove(id);
        }
    }

    /// UDP operations not yet finally completed (for the teardown).
    pub(super) fn udp_ops(&self) -> u32 {
        self.udp
            .ids()
            .filter_map(|id| self.udp.get(id))
            .map(|s| s.ops)
            .sum()
    }

    /// Closes every UDP socket, cancelling its operations.
    pub(super) fn close_all_udp(&mut self) {
        for id in self.udp.ids().collect::<Vec<_>>() {
            self.close_udp(UdpId(id));
        }
    }

    /// The ring closes with UDP operations pending: their headers and
    /// payloads are kept (leaked) rather than freed under the kernel.
    pub(super) fn abandon_udp(&mut self) {
        for id in self.udp.ids().collect::<Vec<_>>() {
            if let Some(s) = self.udp.remove(id)
                && s.ops > 0
            {
                std::mem::forget(s);
            }
        }
    }
}

/// SPEC TRN-2 on io_uring: datagrams on the core's ring (see the module docs).
impl Datagrams for Uring {
    fn bind_udp(
        &mut self,
        at: SocketAddr,
        peer: Option<SocketAddr>,
        shared: bool,
    ) -> Result<(UdpId, SocketAddr), TransportError> {
        // GRO only when a receive buffer holds a whole coalesced batch.
        let gro = self.config.chunk_size >= 64 * 1024;
        let (socket, local, offloads) = crate::udp::udp_socket(at, peer, shared, false, gro)?;
        let id = self
            .udp
            .insert(UdpSock {
                socket,
                offloads,
                out: OutQueue::default(),
                sending: false,
                recv_armed: false,
                header: RecvHeader::new(),
                ops: 0,
                closing: false,
            })
            .map_err(|_| TransportError::TooManyConnections)?;
        self.arm_udp_recv(id)?;
        Ok((UdpId(id), local))
    }

    fn send_to(
        &mut self,
        socket: UdpId,
        to: SocketAddr,
        data: &[u8],
        segment: usize,
    ) -> Result<(), SendError> {
        // A closing socket is gone for its user (it lingers only until
        // its operations complete).
        let s = self
            .udp
            .get_mut(socket.0)
            .filter(|s| !s.closing)
            .ok_or(SendError::UnknownConnection)?;
        s.out.push(to, data, segment, s.offloads.gso)?;
        // Submitted with the next poll's enter.
        self.submit_udp_send(socket.0)
            .map_err(|_| SendError::BufferFull)
    }

    fn max_segments(&self, socket: UdpId) -> usize {
        self.udp
            .get(socket.0)
            .filter(|s| !s.closing)
            .map_or(0, |s| s.offloads.segments())
    }

    fn udp_room(&self, socket: UdpId) -> bool {
        self.udp
            .get(socket.0)
            .is_some_and(|s| !s.closing && s.out.has_room())
    }

    fn close_udp(&mut self, socket: UdpId) {
        let Some(s) = self.udp.get_mut(socket.0) else {
            return;
        };
        if s.closing {
            return;
        }
        s.closing = true;
        if !s.sending {
            s.out.clear();
        }
        if s.ops > 0 {
            let fd = s.socket.as_raw_fd();
            let e = opcode::AsyncCancel2::new(CancelBuilder::fd(Fd(fd)).all())
                .build()
                .user_data(user_data(Op::Cancel, socket.0));
            if self.push(e).is_err() {
                tracing::warn!("could not submit a cancel; operations end when the ring closes");
            }
        }
        self.maybe_free_udp(socket.0);
    }

    fn take_udp_events(&mut self, out: &mut Vec<UdpEvent>) {
        out.append(&mut self.udp_events);
    }
}
