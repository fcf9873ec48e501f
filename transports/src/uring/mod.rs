//! The io_uring backend: multishot accept (into the ring's file table where
//! the kernel has direct descriptors: `fixed`) and receive into a provided
//! buffer ring whose buffers are the core's pool chunks, batched submission (one
//! `io_uring_enter` per poll), sends from pool chunks, and cancellation that
//! waits for the cancelled operation's own completion before any buffer it
//! may touch is reused (SPEC MEM-7).

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use dtp_pool::RawSpan;
use io_uring::types::{Fd, SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode, squeue};
use socket2::SockAddr;

use crate::ble::Sdu;
use crate::buffers::{Buffers, RecvPool};
use crate::driver::{
    BackendChoice, BackendKind, CloseReason, ConnId, DriverConfig, DriverStats, ListenerId, Waker,
    WakerInner,
};
use crate::endpoint::Endpoint;
use crate::ops::{HasSendSide, SendBook, SendSide};
use crate::sendq::{GATHER_MAX, SendError};
use crate::slots::{SlotId, Slots};
use crate::socket::ListenSocket;
use crate::transport::{Event, Transport, TransportError};
use crate::waker::EventFd;

mod bufring;
mod conn;
mod fixed;
mod send;
mod udp;
use bufring::BufRing;
use fixed::{FixedTable, Sock};

/// Bytes received in one poll from which the next wait holds out for a
/// batch of completions (see [`DriverConfig::batch`]).
const STREAMING_BYTES: u64 = 32 * 1024;

/// The iovecs and message header of a connection's gathered send. The
/// kernel reads them while the send is in flight, so they live in the
/// connection (boxed: their address must not move) until it completes.
struct Gather {
    iov: [libc::iovec; GATHER_MAX],
    msg: libc::msghdr,
}

/// Buffer group id of the core's provided buffer ring.
const BGID: u16 = 0;

/// The operation kind in the top byte of `user_data`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Op {
    Accept = 1,
    Recv = 2,
    Send = 3,
    Connect = 4,
    Cancel = 5,
    Wake = 6,
    /// The timeout linked to a connect.
    ConnectTimeout = 7,
    /// A UDP socket's multishot `recvmsg`.
    UdpRecv = 8,
    /// A UDP socket's `sendmsg`.
    UdpSend = 9,
    /// The close of a direct descriptor.
    CloseFixed = 10,
}

fn user_data(op: Op, id: SlotId) -> u64 {
    (op as u64) << 56 | id.pack()
}

fn split(user_data: u64) -> (u8, u64) {
    ((user_data >> 56) as u8, user_data & 0x00ff_ffff_ffff_ffff)
}

struct Listener {
    socket: ListenSocket,
    armed: bool,
    /// The armed accept takes direct descriptors.
    direct: bool,
    /// A cancel of the direct accept is under way (the table is nearly
    /// full): its re-arm takes ordinary descriptors.
    leaving_direct: bool,
    /// The kernel refused a direct accept on this listener: it takes
    /// ordinary descriptors from now on.
    no_direct: bool,
}

struct Conn {
    sock: Sock,
    /// Operations submitted and not yet finally completed.
    ops: u32,
    recv_armed: bool,
    /// Re-arm the receive when buffers come back (ENOBUFS or a final CQE).
    needs_recv: bool,
    out: SendSide,
    /// Reading paused by the engine (backpressure).
    paused: bool,
    /// Tearing down: no new operations; freed when `ops` reaches 0.
    closing: Option<CloseReason>,
    /// The address of an outgoing connect, kept alive until it completes.
    connecting: Option<Box<SockAddr>>,
    /// A zero-copy send's result, held until its notification.
    zc_result: Option<i32>,
    /// Storage for gathered sends, allocated by the first one: an idle
    /// connection does not pay for it.
    gather: Option<Box<Gather>>,
    /// The timespec of a connect's linked timeout, alive until it completes.
    connect_timeout: Option<Box<Timespec>>,
    /// A message-preserving (BLE) socket's SDU sizes: each send is one SDU
    /// of at most `send` bytes, a receive of more than `recv` an error.
    sdu: Option<Sdu>,
}

impl HasSendSide for Conn {
    fn send_side(&mut self) -> &mut SendSide {
        &mut self.out
    }

    fn tearing_down(&self) -> bool {
        self.closing.is_some()
    }
}

/// SPEC TRN-1 … TRN-5 on io_uring: TCP and Unix stream sockets driven by
/// one ring per core (see the module docs).
pub struct Uring {
    choice: BackendChoice,
    ring: Option<IoUring>,
    buf_ring: BufRing,
    bufs: Buffers,
    conns: Slots<Conn>,
    listeners: Slots<Listener>,
    book: SendBook,
    /// Connections whose receive waits for buffers, in the order they
    /// began to wait.
    starved: VecDeque<ConnId>,
    /// UDP sockets ([`crate::Datagrams`]).
    udp: Slots<udp::UdpSock>,
    /// UDP sockets whose receive waits for buffers.
    udp_starved: Vec<SlotId>,
    /// What the UDP sockets received, for `take_udp_events`.
    udp_events: Vec<crate::udp::UdpEvent>,
    waker: Arc<EventFd>,
    wake_buf: Box<u64>,
    wake_armed: bool,
    /// Events produced outside `poll` (a close with nothing in flight).
    pending: Vec<Event>,
    /// Chunks lent as `Bytes` come back here.
    returns: std::sync::Arc<crate::lent::Returns>,
    returned: Vec<u16>,
    /// Completions taken off the queue, reused across polls.
    cqes: Vec<cqueue::Entry>,
    pub(crate) config: DriverConfig,
    /// The source addresses of outgoing TCP connections, in turn.
    sources: crate::socket::Sources,
    stats: DriverStats,
    /// Completions a wait holds out for (1 where the kernel lacks min-wait).
    batch: u32,
    /// The last poll received at least [`STREAMING_BYTES`].
    streaming: bool,
    /// The registered file table for direct descriptors, if any.
    fixed: Option<FixedTable>,
}

fn sys(res: i32) -> i32 {
    -res
}

impl Uring {
    /// A ring set up from `config` (its receive buffers lent to the kernel
    /// at once); fails where io_uring cannot be set up.
    pub fn new(config: &DriverConfig) -> io::Result<Self> {
        let ring = build_ring(config.ring_entries)?;
        let bufs = Buffers::new(config.chunk_size, config.recv_buffers, config.send_chunks)
            .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
        let mut buf_ring = BufRing::new(config.recv_buffers)?;
        // SAFETY: the ring memory is page-aligned, `recv_buffers` entries
        // long, and lives until after the IoUring is dropped (Drop below).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                buf_ring.address(),
                config.recv_buffers,
                BGID,
                0,
            )?;
        }
        let fixed = if config.fixed_files {
            FixedTable::register(&ring, config.max_connections)
        } else {
            None
        };
        let batch = if ring.params().is_feature_min_timeout() && config.batch_wait_us > 0 {
            config.batch.min(u32::from(config.recv_buffers) / 2).max(1)
        } else {
            1
        };
        let mut this = Self {
            choice: BackendChoice {
                kind: BackendKind::Uring,
                reason: "configured".to_owned(),
            },
            batch,
            streaming: false,
            fixed,
            ring: Some(ring),
            buf_ring: BufRing::new(1)?, // replaced below
            bufs,
            conns: Slots::with_capacity(config.max_connections),
            listeners: Slots::with_capacity(64),
            book: SendBook::default(),
            starved: VecDeque::new(),
            udp: Slots::with_capacity(config.max_connections),
            udp_starved: Vec::new(),
            udp_events: Vec::new(),
            waker: Arc::new(EventFd::new()?),
            wake_buf: Box::new(0),
            wake_armed: false,
            pending: Vec::new(),
            returns: Default::default(),
            returned: Vec::new(),
            cqes: Vec::with_capacity(256),
            config: config.clone(),
            sources: crate::socket::Sources::new(&config.bind_sources),
            stats: DriverStats::default(),
        };
        for bid in 0..this.bufs.recv_count() {
            let span = this
                .bufs
                .lend(bid)
                .map_err(|e| io::Error::other(e.to_string()))?;
            buf_ring.push(span.as_mut_ptr() as u64, span.len(), bid);
        }
        buf_ring.publish();
        this.buf_ring = buf_ring;
        this.arm_waker()?;
        Ok(this)
    }

    fn ring(&mut self) -> io::Result<&mut IoUring> {
        self.ring
            .as_mut()
            .ok_or_else(|| io::Error::other("ring closed"))
    }

    /// Pushes an entry, submitting first if the queue is full.
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        let ring = self.ring()?;
        // SAFETY: every pointer in the entries built by this backend refers
        // to memory that outlives the operation: pool chunks leased to the
        // request; shared `Bytes` whose clones stay in the connection's send
        // queue (and whose memory never moves or changes while a clone
        // lives) until the send's final completion, or are never freed if
        // the ring closes first (`abandon_shared`); the boxed iovecs,
        // connect address and wake buffer; all freed only after the
        // operation's final completion.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            ring.submit()?;
            // SAFETY: as above.
            unsafe { ring.submission().push(&entry) }
                .map_err(|_| io::Error::other("submission queue full after submit"))?;
        }
        Ok(())
    }

    fn arm_waker(&mut self) -> io::Result<()> {
        let fd = self.waker.fd();
        let buf: *mut u64 = &mut *self.wake_buf;
        let e = opcode::Read::new(Fd(fd), buf.cast(), 8)
            .build()
            .user_data((Op::Wake as u64) << 56);
        self.push(e)?;
        self.wake_armed = true;
        Ok(())
    }

    pub(crate) fn waker(&self) -> Waker {
        Waker(WakerInner::EventFd(self.waker.clone()))
    }

    pub(crate) fn poll(
        &mut self,
        events: &mut Vec<Event>,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        self.take_returns();
        crate::transport::hand_over(&mut self.pending, events);
        // Receives that starved for buffers get another chance first, as
        // many as the ring has buffers for, longest waiting first. Re-arming
        // every one when few buffers came back would only see most fail
        // with ENOBUFS again: a storm of submissions, poll after poll, when
        // thousands of connections receive at the same moment.
        let mut room = self.buf_ring.available();
        while room > 0
            && let Some(conn) = self.starved.pop_front()
        {
            self.arm_recv(conn)?;
            room -= 1;
        }
        self.rearm_starved_udp()?;
        self.start_sends(events)?;
        self.buf_ring.publish();
        let wait_for = if events.is_empty() {
            timeout
        } else {
            Some(Duration::ZERO)
        };
        self.enter(wait_for)?;
        let bytes_before = self.stats.bytes_in;
        self.drain(events)?;
        self.streaming = self.stats.bytes_in - bytes_before >= STREAMING_BYTES;
        // Sends queued by completions (e.g. the next chunk) start at once.
        if !self.book.dirty.is_empty() {
            self.start_sends(events)?;
            self.ring()?.submit()?;
        }
        self.buf_ring.publish();
        Ok(())
    }

    /// One `io_uring_enter`: submit everything and wait for at least one
    /// completion or the timeout.
    fn enter(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.stats.enters += 1;
        // Hold out for a batch only while streaming: request/response
        // traffic would pay the wait in latency and gain nothing.
        let batch = if self.streaming { self.batch } else { 1 };
        let wait_us = self.config.batch_wait_us;
        let ring = self.ring()?;
        let res = match timeout {
            Some(t) if t.is_zero() => {
                let ts = Timespec::new();
                ring.submitter()
                    .submit_with_args(1, &SubmitArgs::new().timespec(&ts))
            }
            None if batch <= 1 => ring.submit_and_wait(1),
            None => ring
                .submitter()
                .submit_with_args(batch as usize, &SubmitArgs::new().min_wait_usec(wait_us)),
            Some(t) => {
                let ts = Timespec::new().sec(t.as_secs()).nsec(t.subsec_nanos());
                let args = SubmitArgs::new().timespec(&ts).min_wait_usec(if batch > 1 {
                    wait_us
                } else {
                    0
                });
                ring.submitter()
                    .submit_with_args(batch.max(1) as usize, &args)
            }
        };
        match res {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn drain(&mut self, events: &mut Vec<Event>) -> io::Result<()> {
        let mut batch = std::mem::take(&mut self.cqes);
        let result = loop {
            batch.clear();
            match self.ring.as_mut() {
                Some(r) => batch.extend(r.completion().take(256)),
                None => break Ok(()),
            }
            if batch.is_empty() {
                break Ok(());
            }
            if let Err(e) = batch
                .drain(..)
                .try_for_each(|cqe| self.complete(cqe, events))
            {
                break Err(e);
            }
        };
        self.cqes = batch;
        result
    }

    fn complete(&mut self, cqe: cqueue::Entry, events: &mut Vec<Event>) -> io::Result<()> {
        let (op, packed) = split(cqe.user_data());
        let (res, flags) = (cqe.result(), cqe.flags());
        match op {
            x if x == Op::Accept as u8 => self.on_accept(packed, res, flags, events),
            x if x == Op::Recv as u8 => self.on_recv(packed, res, flags, events),
            x if x == Op::Send as u8 => self.on_send(packed, res, flags, events),
            x if x == Op::Connect as u8 => self.on_connect(packed, res, events),
            x if x == Op::UdpRecv as u8 => self.on_udp_recv(packed, res, flags),
            x if x == Op::UdpSend as u8 => self.on_udp_send(packed, res),
            x if x == Op::ConnectTimeout as u8 => {
                if let Some(id) = self.conns.find_packed(packed) {
                    if let Some(c) = self.conns.get_mut(id) {
                        c.ops = c.ops.saturating_sub(1);
                        c.connect_timeout = None;
                    }
                    self.maybe_finish(ConnId(id), events);
                }
                Ok(())
            }
            x if x == Op::CloseFixed as u8 => {
                if let Some(t) = &mut self.fixed {
                    t.freed();
                }
                if res < 0 {
                    tracing::debug!(errno = sys(res), "closing a direct descriptor failed");
                }
                Ok(())
            }
            x if x == Op::Wake as u8 => {
                self.wake_armed = false;
                events.push(Event::Woken);
                self.arm_waker()
            }
            _ => Ok(()), // cancel completions carry nothing to act on
        }
    }

    fn on_recv(
        &mut self,
        packed: u64,
        res: i32,
        flags: u32,
        events: &mut Vec<Event>,
    ) -> io::Result<()> {
        let conn = self.conns.find_packed(packed).map(ConnId);
        // The receive buffer the kernel filled, and how many bytes.
        let chunk = cqueue::buffer_select(flags).map(|bid| {
            self.buf_ring.taken();
            (bid, res.max(0) as u32)
        });
        let more = cqueue::more(flags);
        let Some(conn) = conn else {
            if let Some((bid, len)) = chunk {
                self.discard(bid, len);
            }
            return Ok(());
        };
        if !more && let Some(c) = self.conns.get_mut(conn.0) {
            c.recv_armed = false;
            c.ops = c.ops.saturating_sub(1);
        }
        let closing = self.conns.get(conn.0).is_some_and(|c| c.closing.is_some());
        let mut starved = false;
        match (res, chunk) {
            (n, Some((bid, len)))
                if self
                    .conns
                    .get(conn.0)
                    .and_then(|c| c.sdu)
                    .is_some_and(|s| s.refuses(n as usize)) =>
            {
                // Longer than the MTU (or cut short by the buffer, which is
                // longer still): never passed on in part.
                self.discard(bid, len);
                self.begin_close(conn, CloseReason::Error(libc::EMSGSIZE));
            }
            (n, Some((bid, len))) if n > 0 && !closing => {
                self.stats.bytes_in += n as u64;
                let data = self
                    .receive(bid, len)
                    .map_err(|e| io::Error::other(format!("receive buffer {bid}: {e}")))?;
                events.push(Event::Received { conn, data });
            }
            (n, Some((bid, len))) => {
                self.discard(bid, len);
                if n == 0 {
                    self.begin_close(conn, CloseReason::PeerClosed);
                }
            }
            (0, None) => self.begin_close(conn, CloseReason::PeerClosed),
            (n, None) if n == -libc::ENOBUFS => {
                self.stats.recv_starved += 1;
                if let Some(c) = self.conns.get_mut(conn.0) {
                    c.needs_recv = true;
                }
                self.starved.push_back(conn);
                starved = true;
            }
            // Cancelled by a pause (or a close): re-armed below unless paused.
            (n, None) if n == -libc::ECANCELED => {}
            (n, None) if n < 0 => self.begin_close(conn, CloseReason::Error(sys(n))),
            _ => {}
        }
        // A multishot receive that ended for any other reason than a lack of
        // buffers starts again, unless the connection is paused or closing
        // (arm_recv checks both).
        if !more && !starved {
            self.arm_recv(conn)?;
        }
        self.maybe_finish(conn, events);
        Ok(())
    }
}

impl RecvPool for Uring {
    fn pool(&self) -> (&Buffers, &Arc<crate::lent::Returns>) {
        (&self.bufs, &self.returns)
    }

    fn pool_mut(&mut self) -> &mut Buffers {
        &mut self.bufs
    }

    fn relend(&mut self, bid: u16, span: RawSpan) {
        self.buf_ring
            .push(span.as_mut_ptr() as u64, span.len(), bid);
    }
}

crate::forward::socket_transport!(
    Uring,
    "SPEC TRN-1 … TRN-5: TCP and Unix stream sockets on io_uring."
);

fn build_ring(entries: u32) -> io::Result<IoUring> {
    // SINGLE_ISSUER + DEFER_TASKRUN: completions are processed only in our
    // own io_uring_enter, on this thread, with no interrupts (kernel 6.1+).
    let mut b = IoUring::builder();
    b.setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(entries * 4);
    match b.build(entries) {
        Ok(r) => Ok(r),
        Err(_) => {
            let mut b = IoUring::builder();
            b.setup_coop_taskrun().setup_cqsize(entries * 4);
            b.build(entries)
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // Close every socket so no receive can start, cancel what runs, and
        // wait (bounded) for the final completions before the memory the
        // kernel may touch goes away.
        let ids: Vec<SlotId> = self.conns.ids().collect();
        for id in &ids {
            self.begin_close(ConnId(*id), CloseReason::Local);
        }
        self.close_all_udp();
        let mut sink = Vec::new();
        for _ in 0..50 {
            let pending: u32 = self
                .conns
                .ids()
                .filter_map(|id| self.conns.get(id))
                .map(|c| c.ops)
                .sum::<u32>()
                + self.udp_ops();
            if pending == 0 {
                break;
            }
            if self.enter(Some(Duration::from_millis(10))).is_err()
                || self.drain(&mut sink).is_err()
            {
                break;
            }
        }
        let pending: u32 = self
            .conns
            .ids()
            .filter_map(|id| self.conns.get(id))
            .map(|c| c.ops)
            .sum::<u32>()
            + self.udp_ops();
        if pending > 0 {
            self.abandon_udp();
            // A send may still read a shared segment after the ring closes:
            // its memory is kept (leaked), as the pool keeps its chunks.
            for id in self.conns.ids().collect::<Vec<_>>() {
                if let Some(c) = self.conns.get_mut(id)
                    && c.ops > 0
                {
                    c.out.sendq.abandon_shared();
                }
            }
        }
        // Closing the ring ends every remaining operation.
        self.ring.take();
        if pending == 0 {
            // No operation can touch a receive buffer any more: end their
            // requests so the pool frees its backing. Otherwise the pool
            // keeps (leaks) it rather than risk a late write.
            self.bufs.retire_lent();
        }
    }
}
