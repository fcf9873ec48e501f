//! The epoll backend (through mio): the fallback where io_uring cannot be
//! set up, and the baseline it is measured against. It keeps the same
//! contract as the io_uring backend: reads land in the core's pool chunks
//! (lent as pool requests, like provided buffers), sends go out of pool
//! chunks, and a connection's bytes are written in one batch per poll.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use dtp_pool::RawSpan;
use mio::unix::SourceFd;
use mio::{Interest, Poll, Token};
use socket2::Socket;

use crate::ble::Sdu;
use crate::buffers::{Buffers, RecvChunk, RecvPool};
use crate::driver::{
    BackendChoice, BackendKind, CloseReason, ConnId, DriverConfig, DriverStats, ListenerId, Waker,
    WakerInner,
};
use crate::endpoint::Endpoint;
use crate::ops::{HasSendSide, SendBook, SendSide};
use crate::sendq::SendError;
use crate::slots::Slots;
use crate::socket::{Kind, ListenSocket};
use crate::transport::{Event, Transport, TransportError};

mod udp;

const WAKE: Token = Token(usize::MAX);
const LISTENER_BIT: u64 = 1 << 62;
/// Tokens of UDP sockets ([`crate::Datagrams`]).
const UDP_BIT: u64 = 1 << 61;
/// Most chunks read from one connection per poll, so one busy peer cannot
/// starve the others.
const READS_PER_POLL: usize = 4;

struct Conn {
    /// A non-blocking TCP or Unix stream socket, registered by its fd.
    stream: Socket,
    out: SendSide,
    /// Readable and not yet drained to WouldBlock.
    readable: bool,
    queued_for_read: bool,
    connecting: bool,
    /// Reading paused by the engine (backpressure).
    paused: bool,
    /// A message-preserving (BLE) socket's SDU sizes: each write is one
    /// SDU of at most `send` bytes, a read of more than `recv` an error.
    sdu: Option<Sdu>,
}

impl HasSendSide for Conn {
    fn send_side(&mut self) -> &mut SendSide {
        &mut self.out
    }
}

/// SPEC TRN-1 … TRN-5 on epoll (through mio): TCP and Unix stream
/// sockets, where io_uring cannot be set up.
pub struct Epoll {
    choice: BackendChoice,
    poll: Poll,
    mio_events: mio::Events,
    bufs: Buffers,
    /// Receive buffers lent and ready for a read.
    free: Vec<u16>,
    conns: Slots<Conn>,
    listeners: Slots<ListenSocket>,
    book: SendBook,
    to_read: Vec<ConnId>,
    /// UDP sockets ([`crate::Datagrams`]).
    udp: Slots<udp::UdpSock>,
    /// UDP sockets readable and not yet drained.
    udp_to_read: Vec<crate::slots::SlotId>,
    /// What the UDP sockets received, for `take_udp_events`.
    udp_events: Vec<crate::udp::UdpEvent>,
    /// Outgoing connects and when they time out.
    connect_deadlines: Vec<(ConnId, std::time::Instant)>,
    /// Chunks lent as `Bytes` come back here.
    returns: std::sync::Arc<crate::lent::Returns>,
    returned: Vec<u16>,
    /// Events produced outside `poll` or not yet handed out.
    pending: Vec<Event>,
    waker: Arc<mio::Waker>,
    pub(crate) config: DriverConfig,
    /// The source addresses of outgoing TCP connections, in turn.
    sources: crate::socket::Sources,
    stats: DriverStats,
}

impl Epoll {
    /// An epoll instance set up from `config`.
    pub fn new(config: &DriverConfig) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKE)?);
        let mut bufs = Buffers::new(config.chunk_size, config.recv_buffers, config.send_chunks)
            .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
        let mut free = Vec::with_capacity(config.recv_buffers.into());
        for bid in 0..bufs.recv_count() {
            bufs.lend(bid)
                .map_err(|e| io::Error::other(e.to_string()))?;
            free.push(bid);
        }
        Ok(Self {
            choice: BackendChoice {
                kind: BackendKind::Epoll,
                reason: "configured".to_owned(),
            },
            poll,
            mio_events: mio::Events::with_capacity(1024),
            bufs,
            free,
            conns: Slots::with_capacity(config.max_connections),
            listeners: Slots::with_capacity(64),
            book: SendBook::default(),
            to_read: Vec::new(),
            udp: Slots::with_capacity(config.max_connections),
            udp_to_read: Vec::new(),
            udp_events: Vec::new(),
            pending: Vec::new(),
            connect_deadlines: Vec::new(),
            returns: Default::default(),
            returned: Vec::new(),
            waker,
            config: config.clone(),
            sources: crate::socket::Sources::new(&config.bind_sources),
            stats: DriverStats::default(),
        })
    }

    pub(crate) fn waker(&self) -> Waker {
        Waker(WakerInner::Mio(self.waker.clone()))
    }

    pub(crate) fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        let (socket, bound) = crate::socket::listen(at, shared, self.config.chunk_size, "epoll")?;
        let fd = socket.raw_fd();
        // A shared Unix socket is non-blocking for every sharer: accepts
        // that find nothing return WouldBlock instead of waiting.
        socket2::SockRef::from(&BorrowedRaw(fd)).set_nonblocking(true)?;
        let id = self
            .listeners
            .insert(socket)
            .map_err(|_| io::Error::other("too many listeners"))?;
        let token = Token((id.pack() | LISTENER_BIT) as usize);
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut SourceFd(&fd), token, Interest::READABLE)
        {
            self.listeners.remove(id);
            return Err(e.into());
        }
        Ok((ListenerId(id), bound))
    }

    fn add_conn(
        &mut self,
        stream: Socket,
        kind: Kind,
        connecting: bool,
    ) -> io::Result<Option<ConnId>> {
        if kind == Kind::Tcp {
            crate::socket::tune_socket(socket2::SockRef::from(&stream), &self.config);
        }
        let mut sdu = kind.sdu();
        if !connecting && let Some(sdu) = &mut sdu {
            sdu.settle(stream.as_raw_fd());
        }
        let conn = Conn {
            sdu,
            stream,
            out: SendSide::default(),
            readable: false,
            queued_for_read: false,
            connecting,
            paused: false,
        };
        let Ok(id) = self.conns.insert(conn) else {
            self.stats.refused += 1;
            return Ok(None);
        };
        if let Some(c) = self.conns.get_mut(id) {
            let token = Token(id.pack() as usize);
            let fd = c.stream.as_raw_fd();
            if let Err(e) = self.poll.registry().register(
                &mut SourceFd(&fd),
                token,
                Interest::READABLE | Interest::WRITABLE,
            ) {
                self.conns.remove(id);
                return Err(e);
            }
        }
        Ok(Some(ConnId(id)))
    }

    pub(crate) fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let from = self.sources.pick(to);
        let (stream, addr, kind) =
            crate::socket::connect_socket(to, from, true, self.config.chunk_size, "epoll")?;
        let failed = match stream.connect(&addr) {
            Ok(()) => None,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => None,
            // A Unix socket's backlog is full: the connect would block.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) => Some(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
        };
        let conn = self
            .add_conn(stream, kind, true)?
            .ok_or(TransportError::TooManyConnections)?;
        if let Some(errno) = failed {
            // Refused at once (a Unix path nobody listens on): reported as
            // io_uring reports it, by the next poll (SPEC TRN-3).
            self.finish(conn, CloseReason::ConnectFailed(errno));
            return Ok(conn);
        }
        let deadline = std::time::Instant::now() + self.config.connect_timeout;
        self.connect_deadlines.push((conn, deadline));
        Ok(conn)
    }

    pub(crate) fn set_paused(&mut self, conn: ConnId, paused: bool) {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        c.paused = paused;
        if !paused && c.readable && !c.queued_for_read {
            c.queued_for_read = true;
            self.to_read.push(conn);
        }
    }

    pub(crate) fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        if c.out.sendq.is_empty() {
            self.finish(conn, CloseReason::Local);
        } else {
            c.out.close_after_flush = true;
        }
    }

    /// Closes `conn` now; its Closed event goes out with the next poll.
    fn finish(&mut self, conn: ConnId, reason: CloseReason) {
        if let Some(c) = self.conns.remove(conn.0) {
            let fd = c.stream.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            let mut c = c;
            c.out.sendq.clear(&mut self.bufs);
            self.pending.push(Event::Closed { conn, reason });
            self.wake_chunk_waiters();
        }
    }

    /// Send chunks came back: every connection refused for lack of them may
    /// try again.
    fn wake_chunk_waiters(&mut self) {
        self.book
            .wake_chunk_waiters(&mut self.conns, &mut self.pending);
    }

    pub(crate) fn lent_chunks(&self) -> usize {
        self.returns.lent()
    }

    /// Gives the kernel back every chunk whose last `Bytes` was dropped.
    fn take_returns(&mut self) {
        let mut ids = std::mem::take(&mut self.returned);
        self.returns.drain(&mut ids);
        for bid in ids.drain(..) {
            self.recycle(RecvChunk { bid, len: 0 });
        }
        self.returned = ids;
    }

    pub(crate) fn poll(
        &mut self,
        events: &mut Vec<Event>,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        self.take_returns();
        self.flush_all();
        self.read_ready();
        self.read_udp();
        let busy = !self.pending.is_empty()
            || !events.is_empty()
            || !self.udp_events.is_empty()
            || self.has_ready_reads()
            || self.has_ready_udp();
        let timeout = if busy { Some(Duration::ZERO) } else { timeout };
        // Wake in time for the first connect deadline.
        let timeout = match self.connect_deadlines.iter().map(|(_, d)| *d).min() {
            Some(d) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                Some(timeout.map_or(left, |t| t.min(left)))
            }
            None => timeout,
        };
        self.stats.enters += 1;
        match self.poll.poll(&mut self.mio_events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        let ready: Vec<(Token, bool, bool)> = self
            .mio_events
            .iter()
            .map(|e| {
                (
                    e.token(),
                    e.is_readable() || e.is_read_closed() || e.is_error(),
                    e.is_writable(),
                )
            })
            .collect();
        for (token, readable, writable) in ready {
            if token == WAKE {
                self.pending.push(Event::Woken);
            } else if token.0 as u64 & LISTENER_BIT != 0 {
                self.accept_all(token.0 as u64 & !LISTENER_BIT)?;
            } else if token.0 as u64 & UDP_BIT != 0 {
                self.on_udp_ready(token.0 as u64 & !UDP_BIT, readable, writable);
            } else if let Some(id) = self.conns.find_packed(token.0 as u64) {
                self.on_ready(ConnId(id), readable, writable);
            }
        }
        self.read_ready();
        self.read_udp();
        self.flush_all();
        self.expire_connects();
        crate::transport::hand_over(&mut self.pending, events);
        Ok(())
    }

    /// Fails connects past their deadline with ETIMEDOUT; forgets the ones
    /// that completed or closed.
    fn expire_connects(&mut self) {
        if self.connect_deadlines.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        let mut expired = Vec::new();
        let conns = &self.conns;
        self.connect_deadlines
            .retain(|(conn, deadline)| match conns.get(conn.0) {
                Some(c) if c.connecting => {
                    if now >= *deadline {
                        expired.push(*conn);
                        false
                    } else {
                        true
                    }
                }
                _ => false,
            });
        for conn in expired {
            self.finish(conn, CloseReason::ConnectFailed(libc::ETIMEDOUT));
        }
    }

    fn has_ready_reads(&self) -> bool {
        !self.free.is_empty() && !self.to_read.is_empty()
    }

    fn accept_all(&mut self, packed: u64) -> io::Result<()> {
        let Some(lid) = self.listeners.find_packed(packed) else {
            return Ok(());
        };
        loop {
            let Some(l) = self.listeners.get_mut(lid) else {
                return Ok(());
            };
            let kind = l.kind();
            let accepted = socket2::SockRef::from(&BorrowedRaw(l.raw_fd())).accept();
            match accepted {
                Ok((stream, _)) => {
                    stream.set_nonblocking(true)?;
                    if let Some(conn) = self.add_conn(stream, kind, false)? {
                        self.pending.push(Event::Accepted {
                            listener: ListenerId(lid),
                            conn,
                        });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: log, and try again on the next readiness.
                    tracing::warn!(error = %e, "accept failed");
                    return Ok(());
                }
            }
        }
    }

    fn on_ready(&mut self, conn: ConnId, readable: bool, writable: bool) {
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        if c.connecting && (writable || readable) {
            c.connecting = false;
            match c.stream.take_error() {
                Ok(None) if c.stream.peer_addr().is_ok() => {
                    if let Some(sdu) = &mut c.sdu {
                        sdu.settle(c.stream.as_raw_fd());
                    }
                    self.pending.push(Event::Connected { conn })
                }
                Ok(Some(e)) | Err(e) => {
                    self.finish(
                        conn,
                        CloseReason::ConnectFailed(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)),
                    );
                    return;
                }
                Ok(None) => {
                    self.finish(conn, CloseReason::ConnectFailed(libc::ECONNREFUSED));
                    return;
                }
            }
        }
        let Some(c) = self.conns.get_mut(conn.0) else {
            return;
        };
        if readable {
            c.readable = true;
            if !c.queued_for_read {
                c.queued_for_read = true;
                self.to_read.push(conn);
            }
        }
        if writable && !c.out.sendq.is_empty() && !c.out.dirty {
            c.out.dirty = true;
            self.book.dirty.push(conn);
        }
    }

    /// Reads from readable connections while receive buffers last.
    fn read_ready(&mut self) {
        let list = std::mem::take(&mut self.to_read);
        let mut again = Vec::new();
        for conn in list {
            if self.read_some(conn) {
                again.push(conn);
            } else if let Some(c) = self.conns.get_mut(conn.0) {
                c.queued_for_read = false;
            }
        }
        self.to_read = again;
    }

    /// Reads up to `READS_PER_POLL` chunks; true if the socket may hold more.
    fn read_some(&mut self, conn: ConnId) -> bool {
        for _ in 0..READS_PER_POLL {
            let Some(c) = self.conns.get_mut(conn.0) else {
                return false;
            };
            if !c.readable || c.out.close_after_flush || c.paused {
                return false;
            }
            let Some(bid) = self.free.pop() else {
                self.stats.recv_starved += 1;
                return true;
            };
            let Some(span) = self.bufs.lent_span(bid) else {
                return false;
            };
            // SAFETY: buffer `bid` is lent to this backend: its pool request
            // holds the write lease until `filled` posts the completion, so
            // nothing else reads or writes these bytes meanwhile.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(span.as_mut_ptr(), span.len() as usize) };
            match (&c.stream).read(dst) {
                Ok(0) => {
                    self.free.push(bid);
                    self.finish(conn, CloseReason::PeerClosed);
                    return false;
                }
                Ok(n) if c.sdu.is_some_and(|s| s.refuses(n)) => {
                    // Longer than the MTU (or cut short by the buffer,
                    // which is longer still): never passed on in part.
                    self.free.push(bid);
                    self.finish(conn, CloseReason::Error(libc::EMSGSIZE));
                    return false;
                }
                Ok(n) => match self.receive(bid, n as u32) {
                    Ok(data) => {
                        self.stats.bytes_in += n as u64;
                        self.pending.push(Event::Received { conn, data });
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "receive completion refused by the pool");
                        return false;
                    }
                },
                Err(e) => {
                    self.free.push(bid);
                    match e.kind() {
                        io::ErrorKind::WouldBlock => {
                            c.readable = false;
                            return false;
                        }
                        io::ErrorKind::Interrupted => {}
                        _ => {
                            self.finish(
                                conn,
                                CloseReason::Error(e.raw_os_error().unwrap_or(libc::EIO)),
                            );
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    /// Writes every connection's queued bytes until done or WouldBlock.
    fn flush_all(&mut self) {
        let dirty = std::mem::take(&mut self.book.dirty);
        let max = self.config.max_send_queue;
        for conn in &dirty {
            let Some(c) = self.conns.get_mut(conn.0) else {
                continue;
            };
            c.out.dirty = false;
            if c.connecting {
                continue;
            }
            // One write is one SDU on a message-preserving socket.
            let message = c.sdu.map_or(usize::MAX, |s| s.send);
            let w = c
                .out
                .write_now(c.stream.as_raw_fd(), &mut self.bufs, message);
            self.stats.bytes_out += w.bytes;
            self.stats.gathered_sends += w.gathered;
            let (freed, failed) = (w.freed, w.failed);
            c.out.report_room(*conn, max, &mut self.pending);
            let flushed_close = c.out.close_after_flush && c.out.sendq.is_empty();
            if freed {
                self.wake_chunk_waiters();
            }
            if let Some(errno) = failed {
                self.finish(*conn, CloseReason::Error(errno));
            } else if flushed_close {
                self.finish(*conn, CloseReason::Local);
            }
        }
        self.book.dirty = dirty;
        self.book.dirty.clear();
    }
}

/// An fd borrowed for one socket2 call (a listener's, which its
/// [`ListenSocket`] owns).
struct BorrowedRaw(std::os::fd::RawFd);

impl std::os::fd::AsFd for BorrowedRaw {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the fd belongs to a listener that outlives this value,
        // which lives only for the call it is made for.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.0) }
    }
}

impl RecvPool for Epoll {
    fn pool(&self) -> (&Buffers, &Arc<crate::lent::Returns>) {
        (&self.bufs, &self.returns)
    }

    fn pool_mut(&mut self) -> &mut Buffers {
        &mut self.bufs
    }

    fn relend(&mut self, bid: u16, _: RawSpan) {
        // `read_some` finds where to read through `lent_span`.
        self.free.push(bid);
    }
}

crate::forward::socket_transport!(
    Epoll,
    "SPEC TRN-1 … TRN-5: TCP and Unix stream sockets on epoll."
);
