//! Sends on the ring: chunks queued by the engine go out as single or
//! gathered sends from pool memory, lent receive chunks come back, and a
//! send's completion advances the queue; a send never blocks (SPEC TRN-2).

use std::io;

use io_uring::{cqueue, opcode};

use super::fixed::Sock;
use super::{Gather, Op, Uring, sys, user_data};
use crate::buffers::{RecvChunk, RecvPool};
use crate::driver::{CloseReason, ConnId};
use crate::sendq::{GATHER_MAX, Head};
use crate::transport::Event;

impl Uring {
    /// Send chunks came back: every connection refused for lack of them may
    /// try again.
    pub(super) fn wake_chunk_waiters(&mut self, events: &mut Vec<Event>) {
        self.book.wake_chunk_waiters(&mut self.conns, events);
    }

    pub(crate) fn lent_chunks(&self) -> usize {
        self.returns.lent()
    }

    /// Gives the kernel back every chunk whose last `Bytes` was dropped.
    pub(super) fn take_returns(&mut self) {
        let mut ids = std::mem::take(&mut self.returned);
        self.returns.drain(&mut ids);
        for bid in ids.drain(..) {
            self.recycle(RecvChunk { bid, len: 0 });
        }
        self.returned = ids;
    }

    /// Starts the next send on every connection with queued bytes.
    pub(super) fn start_sends(&mut self, events: &mut Vec<Event>) -> io::Result<()> {
        let dirty = std::mem::take(&mut self.book.dirty);
        for conn in &dirty {
            let Some(c) = self.conns.get_mut(conn.0) else {
                continue;
            };
            c.out.dirty = false;
            if c.closing.is_some() || c.out.sendq.in_flight() {
                continue;
            }
            // SDUs go out at once while the socket takes them (a ring
            // round trip each would cap a link at one SDU per poll); what
            // it does not take is left to an asynchronous send below,
            // which waits for room (the peer's credits).
            if let (Some(sdu), Some(fd)) = (c.sdu, c.sock.raw())
                && !c.out.sendq.is_empty()
                && c.connecting.is_none()
            {
                let w = c.out.write_now(fd, &mut self.bufs, sdu.send);
                self.stats.bytes_out += w.bytes;
                self.stats.gathered_sends += w.gathered;
                c.out.report_room(*conn, self.config.max_send_queue, events);
                if w.freed {
                    self.wake_chunk_waiters(events);
                }
                if let Some(errno) = w.failed {
                    self.begin_close(*conn, CloseReason::Error(errno));
                    self.maybe_finish(*conn, events);
                    continue;
                }
            }
            let Some(c) = self.conns.get_mut(conn.0) else {
                continue;
            };
            if c.out.sendq.is_empty() {
                if c.out.close_after_flush {
                    self.begin_close(*conn, CloseReason::Local);
                    self.maybe_finish(*conn, events);
                }
                continue;
            }
            if let Err(e) = self.submit_send(*conn) {
                tracing::error!(error = %e, "send could not be admitted by the pool; closing the connection");
                self.begin_close(*conn, CloseReason::Error(libc::ENOBUFS));
                self.maybe_finish(*conn, events);
            }
        }
        self.book.dirty = dirty;
        self.book.dirty.clear();
        Ok(())
    }

    /// Starts one send of the head of `conn`'s queue: a plain `send` for one
    /// segment (zero-copy above the threshold), a gathered `sendmsg` over up
    /// to [`GATHER_MAX`] segments when more are queued, chunks and shared
    /// `Bytes` mixed. Each chunk it reads is leased to the send by its own
    /// pool request until the completion; each shared segment stays in the
    /// queue (its `Bytes` clone alive) until then.
    pub(super) fn submit_send(&mut self, conn: ConnId) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return Ok(());
        };
        let (fd, fixed) = c.sock.target();
        let mut spans = [(std::ptr::null::<u8>(), 0u32); GATHER_MAX];
        let mut tickets = [None; GATHER_MAX];
        let mut n = 0;
        // One send is one SDU on a message-preserving socket (one at a
        // time: the next starts when this one completes).
        let message = c.sdu.map_or(usize::MAX, |s| s.send);
        for head in c.out.sendq.heads(GATHER_MAX, message) {
            spans[n] = match head {
                Head::Chunk {
                    handle,
                    offset,
                    len,
                } => match self.bufs.start_send(handle, offset, len) {
                    Ok((ticket, span)) => {
                        tickets[n] = Some(ticket);
                        (span.as_ptr(), span.len())
                    }
                    Err(e) => {
                        // End what was admitted: nothing is in flight yet.
                        for t in tickets.iter().flatten() {
                            self.bufs.send_done(*t, true);
                        }
                        return Err(io::Error::other(e.to_string()));
                    }
                },
                // A longer rest goes out in pieces (a partial send).
                Head::Shared(b) => (b.as_ptr(), b.len().min(u32::MAX as usize) as u32),
            };
            n += 1;
        }
        c.out.sendq.begin_flight(n);
        for t in tickets.into_iter().flatten() {
            c.out.sendq.add_in_flight(t);
        }
        c.ops += 1;
        let data = user_data(Op::Send, conn.0);
        let zc = self.config.send_zc_threshold;
        let e = if n == 1 && zc > 0 && spans[0].1 as usize >= zc && c.sdu.is_none() {
            // The chunk stays leased (a shared segment queued) until the
            // kernel's notification says it no longer reads it.
            self.stats.zc_sends += 1;
            opcode::SendZc::new(fd, spans[0].0, spans[0].1)
                .flags(libc::MSG_NOSIGNAL)
                .build()
        } else if n == 1 {
            opcode::Send::new(fd, spans[0].0, spans[0].1)
                .flags(libc::MSG_NOSIGNAL)
                .build()
        } else {
            let g = c.gather.get_or_insert_with(|| {
                Box::new(Gather {
                    iov: [libc::iovec {
                        iov_base: std::ptr::null_mut(),
                        iov_len: 0,
                    }; GATHER_MAX],
                    // SAFETY: msghdr is a plain C struct; all zeroes is its
                    // empty value (no name, no control data).
                    msg: unsafe { std::mem::zeroed() },
                })
            });
            for (iov, &(ptr, len)) in g.iov.iter_mut().zip(&spans[..n]) {
                iov.iov_base = ptr.cast_mut().cast();
                iov.iov_len = len as usize;
            }
            g.msg.msg_iov = g.iov.as_mut_ptr();
            g.msg.msg_iovlen = n;
            self.stats.gathered_sends += 1;
            opcode::SendMsg::new(fd, &raw const g.msg)
                .flags(libc::MSG_NOSIGNAL as u32)
                .build()
        };
        self.push(Sock::entry(fixed, e).user_data(data))
    }

    pub(super) fn on_send(
        &mut self,
        packed: u64,
        res: i32,
        flags: u32,
        events: &mut Vec<Event>,
    ) -> io::Result<()> {
        let Some(id) = self.conns.find_packed(packed) else {
            return Ok(());
        };
        let conn = ConnId(id);
        let max = self.config.max_send_queue;
        let Some(c) = self.conns.get_mut(id) else {
            return Ok(());
        };
        // SEND_ZC completes twice: the result (with MORE), then a
        // notification once the kernel no longer reads the chunk. Only the
        // notification ends the operation and frees the chunk.
        if cqueue::more(flags) {
            c.zc_result = Some(res);
            return Ok(());
        }
        let res = if cqueue::notif(flags) {
            c.zc_result.take().unwrap_or(res)
        } else {
            res
        };
        c.ops = c.ops.saturating_sub(1);
        for ticket in c.out.sendq.take_in_flight() {
            self.bufs.send_done(ticket, res < 0);
        }
        let Some(c) = self.conns.get_mut(id) else {
            return Ok(());
        };
        if res < 0 {
            self.begin_close(conn, CloseReason::Error(sys(res)));
        } else {
            self.stats.bytes_out += res as u64;
            let freed = c.out.sendq.advance(&mut self.bufs, res as usize);
            c.out.report_room(conn, max, events);
            if (!c.out.sendq.is_empty() || c.out.close_after_flush) && !c.out.dirty {
                c.out.dirty = true;
                self.book.dirty.push(conn);
            }
            if freed {
                self.wake_chunk_waiters(events);
            }
        }
        self.maybe_finish(conn, events);
        Ok(())
    }
}
