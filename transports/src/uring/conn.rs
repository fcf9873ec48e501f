//! Connections and listeners on the ring: accept (direct descriptors where
//! the table has room), connect with its linked timeout, the receive's arm
//! and pause, and the close that cancels every operation and frees the
//! connection only after each has completed (SPEC MEM-7).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use io_uring::types::{CancelBuilder, Fd, Timespec};
use io_uring::{cqueue, opcode, squeue};
use socket2::SockAddr;

use super::fixed::{self, FixedTable, Sock};
use super::{BGID, Conn, Listener, Op, Uring, sys, user_data};
use crate::driver::{CloseReason, ConnId, ListenerId};
use crate::endpoint::Endpoint;
use crate::ops::SendSide;
use crate::slots::SlotId;
use crate::socket::Kind;
use crate::transport::{Event, TransportError};

impl Uring {
    pub(crate) fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        let (socket, bound) =
            crate::socket::listen(at, shared, self.config.chunk_size, "io_uring")?;
        if self.fixed.is_some() {
            socket.tune_accepted(&self.config);
        }
        let id = self
            .listeners
            .insert(Listener {
                socket,
                armed: false,
                direct: false,
                leaving_direct: false,
                no_direct: false,
            })
            .map_err(|_| io::Error::other("too many listeners"))?;
        self.arm_accept(id)?;
        Ok((ListenerId(id), bound))
    }

    pub(super) fn arm_accept(&mut self, id: SlotId) -> io::Result<()> {
        let Some(l) = self.listeners.get_mut(id) else {
            return Ok(());
        };
        let fd = l.socket.raw_fd();
        // Direct descriptors for stream sockets only: a message socket's
        // SDU sizes are read from its descriptor.
        let direct = !l.no_direct
            && l.socket.kind().sdu().is_none()
            && self.fixed.as_ref().is_some_and(FixedTable::room_for_accept);
        l.armed = true;
        l.direct = direct;
        l.leaving_direct = false;
        // A direct descriptor is in no descriptor table, so close-on-exec
        // does not apply (the kernel refuses the flag with one).
        let e = opcode::AcceptMulti::new(Fd(fd))
            .allocate_file_index(direct)
            .flags(if direct { 0 } else { libc::SOCK_CLOEXEC })
            .build()
            .user_data(user_data(Op::Accept, id));
        self.push(e)
    }

    pub(super) fn new_conn(
        &mut self,
        sock: Sock,
        kind: Kind,
        connecting: Option<Box<SockAddr>>,
    ) -> Option<ConnId> {
        // A direct descriptor inherited these from its listener.
        if kind == Kind::Tcp
            && let Sock::Fd(fd) = &sock
        {
            crate::socket::tune_socket(socket2::SockRef::from(fd), &self.config);
        }
        let mut sdu = kind.sdu();
        if connecting.is_none()
            && let (Some(sdu), Some(fd)) = (&mut sdu, sock.raw())
        {
            sdu.settle(fd);
        }
        let conn = Conn {
            sdu,
            sock,
            ops: 0,
            recv_armed: false,
            needs_recv: false,
            out: SendSide::default(),
            paused: false,
            closing: None,
            connecting,
            zc_result: None,
            gather: None,
            connect_timeout: None,
        };
        match self.conns.insert(conn) {
            Ok(id) => Some(ConnId(id)),
            Err(rejected) => {
                self.stats.refused += 1;
                self.close_sock(rejected.sock);
                None
            }
        }
    }

    /// Closes a socket no connection holds any more: an ordinary
    /// descriptor at once, a direct one through the ring.
    pub(super) fn close_sock(&mut self, sock: Sock) {
        match sock {
            Sock::Fd(fd) => drop(fd),
            Sock::Fixed(slot) => {
                let e = fixed::close_entry(slot).user_data((Op::CloseFixed as u64) << 56);
                if self.push(e).is_err() {
                    // The slot stays taken until the ring closes.
                    tracing::warn!("could not submit the close of a direct descriptor");
                }
            }
        }
    }

    pub(crate) fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let from = self.sources.pick(to);
        let (socket, sa, kind) =
            crate::socket::connect_socket(to, from, false, self.config.chunk_size, "io_uring")?;
        let sa = Box::new(sa);
        let fd: OwnedFd = socket.into();
        let raw = fd.as_raw_fd();
        let (ptr, len) = (sa.as_ptr(), sa.len());
        let id = self
            .new_conn(Sock::Fd(fd), kind, Some(sa))
            .ok_or(TransportError::TooManyConnections)?;
        // The connect and its linked timeout must go in one submission.
        let ring = self.ring()?;
        let free = {
            let sq = ring.submission();
            sq.capacity() - sq.len()
        };
        if free < 2 {
            ring.submit()?;
        }
        let t = self.config.connect_timeout;
        let ts = Box::new(Timespec::new().sec(t.as_secs()).nsec(t.subsec_nanos()));
        let connect = opcode::Connect::new(Fd(raw), ptr.cast(), len)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(user_data(Op::Connect, id.0));
        let timeout = opcode::LinkTimeout::new(&*ts)
            .build()
            .user_data(user_data(Op::ConnectTimeout, id.0));
        self.push(connect)?;
        self.push(timeout)?;
        if let Some(c) = self.conns.get_mut(id.0) {
            c.ops += 2;
            c.connect_timeout = Some(ts);
        }
        Ok(id)
    }

    pub(super) fn arm_recv(&mut self, id: ConnId) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(id.0) else {
            return Ok(());
        };
        if c.recv_armed || c.paused || c.closing.is_some() || c.out.close_after_flush {
            return Ok(());
        }
        c.recv_armed = true;
        c.needs_recv = false;
        c.ops += 1;
        let (fd, fixed) = c.sock.target();
        let e = Sock::entry(fixed, opcode::RecvMulti::new(fd, BGID).build())
            .user_data(user_data(Op::Recv, id.0));
        self.push(e)
    }

    pub(crate) fn set_paused(&mut self, conn: ConnId, paused: bool) {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        if c.paused == paused {
            return;
        }
        c.paused = paused;
        if paused && c.recv_armed {
            // The receive's final completion clears `recv_armed`; bytes it
            // already took are delivered as usual.
            let target = user_data(Op::Recv, conn.0);
            let e = opcode::AsyncCancel::new(target)
                .build()
                .user_data(user_data(Op::Cancel, conn.0));
            if self.push(e).is_err() {
                tracing::warn!("could not submit a receive cancel; reading goes on");
            }
        } else if !paused && !c.recv_armed {
            self.starved.push_back(conn);
        }
    }

    pub(crate) fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        if c.out.sendq.is_empty() {
            self.begin_close(conn, CloseReason::Local);
            let mut ev = std::mem::take(&mut self.pending);
            self.maybe_finish(conn, &mut ev);
            self.pending = ev;
        } else {
            c.out.close_after_flush = true;
        }
    }

    /// Stops everything on `conn`; it is freed once no operation is pending.
    pub(super) fn begin_close(&mut self, conn: ConnId, reason: CloseReason) {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        if c.closing.is_some() {
            return;
        }
        c.closing = Some(reason);
        if c.ops == 0 {
            return;
        }
        // Cancel every operation on the socket (receive, a send to a peer
        // that stopped reading, a connect); each still completes, and only
        // then is the connection and its memory freed. Each is cancelled by
        // its own user data, which the kernel finds in a hash table: a
        // cancel by file descriptor walks every pending operation of the
        // ring, so closing n connections at once would cost n².
        let pending = [
            (c.recv_armed, Op::Recv),
            (c.out.sendq.in_flight(), Op::Send),
            (c.connecting.is_some(), Op::Connect),
        ];
        let walk = c.sock.cancel_all();
        let mut any = false;
        for (_, op) in pending.into_iter().filter(|(on, _)| *on) {
            any = true;
            self.cancel(conn, CancelBuilder::user_data(user_data(op, conn.0)).all());
        }
        if !any {
            // An operation we keep no flag for: the walk it takes.
            self.stats.cancel_walks += 1;
            self.cancel(conn, walk);
        }
    }

    /// Submits one cancel of `conn`'s operations.
    pub(super) fn cancel(&mut self, conn: ConnId, which: CancelBuilder) {
        let e = opcode::AsyncCancel2::new(which)
            .build()
            .user_data(user_data(Op::Cancel, conn.0));
        if self.push(e).is_err() {
            tracing::warn!("could not submit a cancel; operations end when the ring closes");
        }
    }

    /// Frees a closing connection whose operations have all completed.
    pub(super) fn maybe_finish(&mut self, conn: ConnId, events: &mut Vec<Event>) {
        let done = matches!(self.conns.get(conn.0), Some(c) if c.closing.is_some() && c.ops == 0);
        if !done {
            return;
        }
        if let Some(mut c) = self.conns.remove(conn.0) {
            c.out.sendq.clear(&mut self.bufs);
            let reason = c.closing.unwrap_or(CloseReason::Local);
            self.close_sock(c.sock);
            events.push(Event::Closed { conn, reason });
            self.wake_chunk_waiters(events);
        }
    }

    pub(super) fn on_accept(
        &mut self,
        packed: u64,
        res: i32,
        flags: u32,
        events: &mut Vec<Event>,
    ) -> io::Result<()> {
        let lid = self.listeners.find_packed(packed);
        let direct = lid
            .and_then(|lid| self.listeners.get(lid))
            .is_some_and(|l| l.direct);
        let sock = (res >= 0).then(|| {
            if direct {
                if let Some(t) = &mut self.fixed {
                    t.taken();
                }
                Sock::Fixed(res as u32)
            } else {
                // SAFETY: a non-negative accept result that is not a table
                // slot is a new fd we own.
                Sock::Fd(unsafe { OwnedFd::from_raw_fd(res) })
            }
        });
        let Some(lid) = lid else {
            if let Some(sock) = sock {
                self.close_sock(sock);
            }
            return Ok(());
        };
        if let Some(sock) = sock {
            let kind = self
                .listeners
                .get(lid)
                .map_or(Kind::Tcp, |l| l.socket.kind());
            if let Some(conn) = self.new_conn(sock, kind, None) {
                self.arm_recv(conn)?;
                events.push(Event::Accepted {
                    listener: ListenerId(lid),
                    conn,
                });
            }
        } else if direct
            && matches!(
                sys(res),
                libc::EINVAL | libc::EOPNOTSUPP | libc::EBADF | libc::ENFILE
            )
        {
            // A kernel that cannot accept into the table (or a table full
            // against the count): ordinary descriptors from the re-arm on,
            // no loop of refusals.
            tracing::info!(
                errno = sys(res),
                "io_uring: direct accept refused; accepting ordinary descriptors"
            );
            if let Some(l) = self.listeners.get_mut(lid) {
                l.no_direct = true;
            }
        } else {
            tracing::debug!(errno = sys(res), "accept failed");
        }
        if !cqueue::more(flags) {
            if let Some(l) = self.listeners.get_mut(lid) {
                l.armed = false;
            }
            self.arm_accept(lid)?;
        } else if direct && !self.fixed.as_ref().is_some_and(FixedTable::room_for_accept) {
            // The table is nearly full: end the direct accept; its re-arm
            // takes ordinary descriptors.
            if let Some(l) = self.listeners.get_mut(lid)
                && !l.leaving_direct
            {
                l.leaving_direct = true;
                let target = user_data(Op::Accept, lid);
                let e = opcode::AsyncCancel::new(target)
                    .build()
                    .user_data(user_data(Op::Cancel, lid));
                self.push(e)?;
            }
        }
        Ok(())
    }

    pub(super) fn on_connect(
        &mut self,
        packed: u64,
        res: i32,
        events: &mut Vec<Event>,
    ) -> io::Result<()> {
        let Some(id) = self.conns.find_packed(packed) else {
            return Ok(());
        };
        let conn = ConnId(id);
        if let Some(c) = self.conns.get_mut(id) {
            c.ops = c.ops.saturating_sub(1);
            c.connecting = None;
            if res >= 0
                && let (Some(sdu), Some(fd)) = (&mut c.sdu, c.sock.raw())
            {
                sdu.settle(fd);
            }
        }
        if res < 0 {
            // Cancelled by its linked timeout: the connect timed out.
            let errno = if res == -libc::ECANCELED {
                libc::ETIMEDOUT
            } else {
                sys(res)
            };
            self.begin_close(conn, CloseReason::ConnectFailed(errno));
            self.maybe_finish(conn, events);
        } else {
            events.push(Event::Connected { conn });
            self.arm_recv(conn)?;
        }
        Ok(())
    }
}
