//! The bookkeeping of the send side that both socket backends share, in
//! the manner of monoio's ops: what a send, a wish to be told of room, and
//! chunks coming back do to a connection's queue and the backend's lists is
//! decided here once; the backends differ only in how bytes reach the
//! kernel (a submitted `sendmsg` on io_uring, `sendmsg` on readiness on
//! epoll).

use std::io;
use std::os::fd::RawFd;

use crate::buffers::Buffers;
use crate::driver::ConnId;
use crate::sendq::{GATHER_MAX, Head, Payload, SendError, SendQueue};
use crate::slots::Slots;
use crate::transport::Event;

/// A connection's sending half.
#[derive(Default)]
pub(crate) struct SendSide {
    /// The bytes queued, in pool chunks and shared segments.
    pub(crate) sendq: SendQueue,
    /// Listed in [`SendBook::dirty`] (has bytes to start sending).
    pub(crate) dirty: bool,
    /// Close requested: stop reading, finish sending, then close.
    pub(crate) close_after_flush: bool,
    /// A per-connection limit below the transport's own
    /// ([`Transport::limit_send_queue`](crate::Transport::limit_send_queue)).
    pub(crate) limit: Option<u32>,
}

impl SendSide {
    /// The most bytes this connection may queue, `default` being the
    /// transport's limit.
    pub(crate) fn max(&self, default: usize) -> usize {
        self.limit.map_or(default, |l| (l as usize).min(default))
    }

    /// After bytes went out: tells a producer that waits for room
    /// ([`SendQueue::want_writable`]) once the queue is at most half of
    /// `max`.
    pub(crate) fn report_room(&mut self, conn: ConnId, max: usize, events: &mut Vec<Event>) {
        let max = self.max(max);
        if self.sendq.wants_writable && self.sendq.queued() <= max / 2 {
            self.sendq.wants_writable = false;
            events.push(Event::Writable { conn });
        }
    }
}

/// What [`SendSide::write_now`] did.
#[derive(Default)]
pub(crate) struct Written {
    /// Bytes the kernel took.
    pub(crate) bytes: u64,
    /// Writes that gathered several segments.
    pub(crate) gathered: u64,
    /// At least one send chunk was freed.
    pub(crate) freed: bool,
    /// The socket failed with this OS error.
    pub(crate) failed: Option<i32>,
}

impl SendSide {
    /// Writes the queued bytes with non-blocking `sendmsg` calls until the
    /// queue is empty, the socket takes no more, or it fails: each call at
    /// most [`GATHER_MAX`] segments and `message` bytes (one SDU of a
    /// message-preserving socket; `usize::MAX` on a stream). The epoll
    /// backend's way of sending, and io_uring's for SDUs, which would
    /// otherwise take one ring round trip each.
    pub(crate) fn write_now(&mut self, fd: RawFd, bufs: &mut Buffers, message: usize) -> Written {
        let mut w = Written::default();
        while !self.sendq.is_empty() {
            let mut iov = [io::IoSlice::new(&[]); GATHER_MAX];
            let mut n = 0;
            for head in self.sendq.heads(GATHER_MAX, message) {
                iov[n] = io::IoSlice::new(match head {
                    Head::Chunk {
                        handle,
                        offset,
                        len,
                    } => bufs.send_bytes(handle, offset, len),
                    Head::Shared(b) => b,
                });
                n += 1;
            }
            if n > 1 {
                w.gathered += 1;
            }
            match send_vectored(fd, &iov[..n]) {
                Ok(sent) => {
                    w.bytes += sent as u64;
                    w.freed |= self.sendq.advance(bufs, sent);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    w.failed = Some(e.raw_os_error().unwrap_or(libc::EIO));
                    break;
                }
            }
        }
        w
    }
}

/// Sends the slices with one non-blocking `sendmsg` (no SIGPIPE on a
/// closed peer: the error comes back as EPIPE instead).
fn send_vectored(fd: RawFd, iov: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is a plain C struct; all zeroes is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with iovec (documented by std), and the
    // kernel only reads through msg_iov.
    msg.msg_iov = iov.as_ptr().cast_mut().cast();
    msg.msg_iovlen = iov.len();
    // SAFETY: `msg` points at `iov.len()` valid iovecs that outlive the call,
    // each over borrowed bytes (a pool chunk's, or a shared `Bytes` held by
    // the send queue) that stay alive and unchanged during it; `fd` is the
    // connection's open socket.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// A connection of a backend, as the send bookkeeping sees it.
pub(crate) trait HasSendSide {
    /// Its sending half.
    fn send_side(&mut self) -> &mut SendSide;

    /// Whether it is being torn down (no new sends are taken).
    fn tearing_down(&self) -> bool {
        false
    }
}

/// The backend's lists of connections with work on the send side.
#[derive(Default)]
pub(crate) struct SendBook {
    /// Connections with bytes to start sending.
    pub(crate) dirty: Vec<ConnId>,
    /// Connections refused because the core's send chunks ran out.
    pub(crate) chunk_waiters: Vec<ConnId>,
}

impl SendBook {
    /// SPEC TRN-2: queues `payload` on `conn`, all or nothing, within
    /// `max` bytes; a refusal for lack of the core's chunks puts the
    /// connection on the waiters' list.
    pub(crate) fn queue<C: HasSendSide>(
        &mut self,
        conns: &mut Slots<C>,
        bufs: &mut Buffers,
        conn: ConnId,
        payload: Payload<'_>,
        max: usize,
    ) -> Result<(), SendError> {
        let c = conns.get_mut(conn.0).ok_or(SendError::UnknownConnection)?;
        if c.tearing_down() {
            return Err(SendError::Closed);
        }
        let side = c.send_side();
        if side.close_after_flush {
            return Err(SendError::Closed);
        }
        let max = side.max(max);
        let listed = side.sendq.starved_for_chunks;
        if let Err(e) = side.sendq.push(bufs, payload, max) {
            // Listed once however often it retries: the waiters' list holds
            // at most one entry per connection.
            if side.sendq.starved_for_chunks && !listed {
                self.chunk_waiters.push(conn);
            }
            return Err(e);
        }
        self.mark_dirty(conn, side);
        Ok(())
    }

    /// Lists `conn` as having bytes to send (once).
    pub(crate) fn mark_dirty(&mut self, conn: ConnId, side: &mut SendSide) {
        if !side.dirty {
            side.dirty = true;
            self.dirty.push(conn);
        }
    }

    /// A producer asks to hear when `conn`'s queue is at most half of
    /// `max`: at once if it already is.
    pub(crate) fn want_writable<C: HasSendSide>(
        conns: &mut Slots<C>,
        conn: ConnId,
        max: usize,
        events: &mut Vec<Event>,
    ) {
        if conns.get_mut(conn.0).is_some_and(|c| {
            let side = c.send_side();
            let max = side.max(max);
            side.sendq.want_writable(max)
        }) {
            events.push(Event::Writable { conn });
        }
    }

    /// Sets `conn`'s own send limit (at most the transport's `max`).
    pub(crate) fn limit<C: HasSendSide>(
        conns: &mut Slots<C>,
        conn: ConnId,
        limit: usize,
        max: usize,
    ) {
        if let Some(c) = conns.get_mut(conn.0) {
            c.send_side().limit = Some(u32::try_from(limit.min(max)).unwrap_or(u32::MAX));
        }
    }

    /// Send chunks came back: every connection refused for lack of them
    /// may try again.
    pub(crate) fn wake_chunk_waiters<C: HasSendSide>(
        &mut self,
        conns: &mut Slots<C>,
        events: &mut Vec<Event>,
    ) {
        for conn in std::mem::take(&mut self.chunk_waiters) {
            if let Some(c) = conns.get_mut(conn.0) {
                let q = &mut c.send_side().sendq;
                if q.starved_for_chunks {
                    q.starved_for_chunks = false;
                    q.wants_writable = false;
                    events.push(Event::Writable { conn });
                }
            }
        }
    }
}
