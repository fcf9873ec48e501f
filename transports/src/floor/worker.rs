//! One floor thread: its ring, its listener, its connections.
//!
//! The loop turn is: resume what waited for memory, publish the buffers
//! given back, one `submit_and_wait(1)` (everything queued since the last
//! turn goes in the same call), then every completion. Connections live in
//! a table indexed by their direct descriptor (the kernel's fixed-file
//! table is the slab: accept picks a free slot, close frees it).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use io_uring::types::{CancelBuilder, Fd, Fixed, SubmitArgs, Timespec};
use io_uring::{IoUring, SubmissionQueue, Submitter, cqueue, opcode, squeue};
use socket2::Socket;

use super::frame::{Cutter, Fed, Sink};
use super::mem::{Memory, OutPool, RecvBufs};
use super::{FloorConfig, FloorStats};

const OP_ACCEPT: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;
const OP_CLOSE: u64 = 4;
const OP_CANCEL: u64 = 5;
const OP_STOP: u64 = 6;
const OP_BACKOFF: u64 = 7;

/// The buffer group of the receive buffers.
const BGID: u16 = 0;
/// No chunk, no buffer.
const NONE: u16 = u16::MAX;
/// How long accepting pauses when the connection table is full.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(5);
/// Bytes received in one turn from which the next wait holds out for a
/// batch of completions.
const STREAMING_BYTES: u64 = 32 * 1024;
/// How long shutdown waits for the kernel to finish every operation.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

fn ud(op: u64, idx: u32) -> u64 {
    op << 32 | u64::from(idx)
}

/// One connection's state; its index is its direct descriptor.
struct Conn {
    live: bool,
    recv_armed: bool,
    send_inflight: bool,
    closing: bool,
    eof: bool,
    /// Receive cancelled because too many buffers wait on this connection.
    paused: bool,
    /// In `Worker::starved` (the receive ended with ENOBUFS).
    starved: bool,
    /// In `Worker::out_waiters` (no output chunk was free).
    waiting_out: bool,
    cutter: Cutter,
    /// Output chunk (NONE: none held), bytes in it, bytes of it sent.
    out: u16,
    out_len: u32,
    out_sent: u32,
    /// Bytes the send in flight was given.
    inflight: u32,
    /// Received buffers not yet fully fed, oldest first (linked through
    /// `Worker::held_next`).
    held_head: u16,
    held_tail: u16,
    held_count: u16,
}

impl Conn {
    fn new() -> Self {
        Self {
            live: false,
            recv_armed: false,
            send_inflight: false,
            closing: false,
            eof: false,
            paused: false,
            starved: false,
            waiting_out: false,
            cutter: Cutter::default(),
            out: NONE,
            out_len: 0,
            out_sent: 0,
            inflight: 0,
            held_head: NONE,
            held_tail: NONE,
            held_count: 0,
        }
    }
}

/// The output chunk of one connection, taken from the pool on first use.
struct ConnSink<'a> {
    pool: &'a mut OutPool,
    out: &'a mut u16,
    len: &'a mut u32,
    no_chunk: bool,
}

impl Sink for ConnSink<'_> {
    fn room(&mut self) -> usize {
        if *self.out == NONE {
            match self.pool.take() {
                Some(id) => {
                    *self.out = id;
                    *self.len = 0;
                }
                None => {
                    self.no_chunk = true;
                    return 0;
                }
            }
        }
        self.pool.chunk_len().saturating_sub(*self.len) as usize
    }

    fn put(&mut self, bytes: &[u8]) {
        let dst = self.pool.tail_mut(*self.out, *self.len);
        let n = bytes.len().min(dst.len());
        dst[..n].copy_from_slice(&bytes[..n]);
        *self.len += n as u32;
    }
}

/// The submission side: pushes, and submits early only when the queue is
/// full.
struct Sq<'r> {
    submitter: Submitter<'r>,
    queue: SubmissionQueue<'r>,
}

impl Sq<'_> {
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        // SAFETY: every entry this worker builds points into `Memory`
        // (receive buffers through the buffer ring, output chunks, the
        // stop word, the back-off timespec) or at nothing; `Memory` is
        // freed only after every operation completed (or never).
        if unsafe { self.queue.push(&entry) }.is_ok() {
            return Ok(());
        }
        self.queue.sync();
        self.submitter.submit()?;
        self.queue.sync();
        // SAFETY: as above.
        unsafe { self.queue.push(&entry) }
            .map_err(|_| io::Error::other("submission queue full after a submit"))
    }
}

struct Worker<'m> {
    conns: Vec<Conn>,
    recv: &'m mut RecvBufs,
    out: &'m mut OutPool,
    /// Per receive buffer: the next held buffer of the same connection,
    /// and the part of it not yet fed.
    held_next: Vec<u16>,
    held_off: Vec<u32>,
    held_len: Vec<u32>,
    held_total: u32,
    max_held: u16,
    starved: Vec<u32>,
    out_waiters: Vec<u32>,
    listener: RawFd,
    accept_armed: bool,
    backoff_armed: bool,
    backoff: *const Timespec,
    stopping: bool,
    /// Bytes received in the current turn.
    turn_bytes: u64,
    /// Completions a streaming wait holds out for (1: the kernel has no
    /// min-wait).
    batch: u32,
    batch_wait_us: u32,
    stats: FloorStats,
}

/// Builds the ring with the cheapest completion model the kernel has.
fn build_ring(entries: u32) -> io::Result<IoUring> {
    // SINGLE_ISSUER + DEFER_TASKRUN (6.1): completions run only inside our
    // own enter, never as interrupts; NO_SQARRAY (6.6) drops an
    // indirection. Older kernels get the next best.
    let mut b = IoUring::builder();
    b.setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(entries * 4);
    let mut first = b.clone();
    first.setup_no_sqarray();
    if let Ok(r) = first.build(entries) {
        return Ok(r);
    }
    if let Ok(r) = b.build(entries) {
        return Ok(r);
    }
    let mut b = IoUring::builder();
    b.setup_coop_taskrun().setup_cqsize(entries * 4);
    match b.build(entries) {
        Ok(r) => Ok(r),
        Err(_) => IoUring::builder().setup_cqsize(entries * 4).build(entries),
    }
}

/// The kernel and the memory it may touch, dropped in that order; the
/// memory is leaked instead when an operation may still be running.
struct Rig {
    ring: Option<IoUring>,
    mem: Option<Memory>,
    clean: bool,
}

impl Drop for Rig {
    fn drop(&mut self) {
        // Closing the ring first ends every operation's claim on `mem`.
        drop(self.ring.take());
        if !self.clean {
            // An operation may still complete into these buffers while the
            // ring winds down: keep them rather than risk a write into
            // freed memory.
            std::mem::forget(self.mem.take());
        }
    }
}

/// Runs one worker until its stop event fires; `ready` is told once the
/// ring is set up (or why it could not be).
pub(super) fn run(
    listener: Socket,
    stop: OwnedFd,
    config: &FloorConfig,
    ready: impl FnOnce(io::Result<()>),
) -> io::Result<FloorStats> {
    let setup = || -> io::Result<(Rig, u32)> {
        let ring = build_ring(config.ring_entries)?;
        let mem = Memory {
            recv: RecvBufs::new(config.recv_buffer_len, config.recv_buffers)?,
            out: OutPool::new(config.out_chunk_len, config.out_chunks)?,
            stop_word: Box::new(0),
            backoff: Box::new(
                Timespec::new()
                    .sec(ACCEPT_BACKOFF.as_secs())
                    .nsec(ACCEPT_BACKOFF.subsec_nanos()),
            ),
        };
        let table = config.table_len();
        let submitter = ring.submitter();
        submitter.register_files_sparse(table)?;
        // SAFETY: the ring's memory is page-aligned, `recv_buffers`
        // entries long, and lives in `mem`, which outlives the ring (Rig).
        unsafe {
            submitter.register_buf_ring_with_flags(
                mem.recv.ring_addr(),
                mem.recv.count(),
                BGID,
                0,
            )?;
        }
        Ok((
            Rig {
                ring: Some(ring),
                mem: Some(mem),
                clean: false,
            },
            table,
        ))
    };
    let (mut rig, table) = match setup() {
        Ok(x) => {
            ready(Ok(()));
            x
        }
        Err(e) => {
            let msg = e.to_string();
            ready(Err(e));
            return Err(io::Error::other(msg));
        }
    };
    let Rig { ring, mem, clean } = &mut rig;
    let (Some(ring), Some(mem)) = (ring.as_mut(), mem.as_mut()) else {
        return Err(io::Error::other("the floor's ring is gone"));
    };
    let Memory {
        recv,
        out,
        stop_word,
        backoff,
    } = mem;
    let min_wait = ring.params().is_feature_min_timeout();
    let (mut submitter, queue, mut cq) = ring.split();
    // One less file lookup per enter; not fatal where unsupported.
    let _ = submitter.register_ring_fd();
    let mut sq = Sq { submitter, queue };
    let count = usize::from(recv.count());
    let batch = if min_wait {
        config.stream_batch.min(u32::from(recv.count()) / 2).max(1)
    } else {
        1
    };
    let mut w = Worker {
        conns: Vec::with_capacity(table as usize),
        recv,
        out,
        held_next: vec![NONE; count],
        held_off: vec![0; count],
        held_len: vec![0; count],
        held_total: 0,
        max_held: config.max_held.max(1),
        starved: Vec::with_capacity(table as usize),
        out_waiters: Vec::with_capacity(table as usize),
        listener: listener.as_raw_fd(),
        accept_armed: false,
        backoff_armed: false,
        backoff: &raw const **backoff,
        stopping: false,
        turn_bytes: 0,
        batch,
        batch_wait_us: config.stream_batch_wait_us,
        stats: FloorStats::default(),
    };
    let stop_ptr: *mut u64 = &mut **stop_word;
    sq.push(
        opcode::Read::new(Fd(stop.as_raw_fd()), stop_ptr.cast(), 8)
            .build()
            .user_data(ud(OP_STOP, 0)),
    )?;
    w.arm_accept(&mut sq)?;
    let result = w.serve(&mut sq, &mut cq);
    // Whatever ended the loop: cancel everything and wait for the kernel
    // to let go of the memory.
    *clean = w.shut_down(&mut sq, &mut cq).unwrap_or(false);
    drop(listener);
    result.map(|()| w.stats)
}

impl Worker<'_> {
    fn serve(&mut self, sq: &mut Sq<'_>, cq: &mut cqueue::CompletionQueue<'_>) -> io::Result<()> {
        while !self.stopping {
            self.before_enter(sq)?;
            sq.queue.sync();
            // Hold out for a batch only while streaming: request/response
            // traffic would pay the wait in latency.
            let entered = if self.batch > 1 && self.turn_bytes >= STREAMING_BYTES {
                sq.submitter.submit_with_args(
                    self.batch as usize,
                    &SubmitArgs::new().min_wait_usec(self.batch_wait_us),
                )
            } else {
                sq.submitter.submit_and_wait(1)
            };
            match entered {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EBUSY | libc::ETIME)
                    ) => {}
                Err(e) => return Err(e),
            }
            self.turn_bytes = 0;
            self.drain(sq, cq)?;
        }
        Ok(())
    }

    fn drain(&mut self, sq: &mut Sq<'_>, cq: &mut cqueue::CompletionQueue<'_>) -> io::Result<()> {
        cq.sync();
        for cqe in &mut *cq {
            self.complete(cqe.user_data(), cqe.result(), cqe.flags(), sq)?;
        }
        // Hand the slots back before the next wait, or the kernel would see
        // them as still full.
        cq.sync();
        Ok(())
    }

    /// Work that waited for memory, once per turn.
    fn before_enter(&mut self, sq: &mut Sq<'_>) -> io::Result<()> {
        while self.out.has_free() {
            let Some(idx) = self.out_waiters.pop() else {
                break;
            };
            if let Some(c) = self.conns.get_mut(idx as usize) {
                c.waiting_out = false;
                if c.live && !c.closing {
                    self.resume(idx, sq)?;
                }
            }
        }
        if !self.starved.is_empty() && self.held_total < u32::from(self.recv.count()) {
            let mut list = std::mem::take(&mut self.starved);
            for &idx in &list {
                if let Some(c) = self.conns.get_mut(idx as usize) {
                    c.starved = false;
                }
                self.arm_recv(idx, sq)?;
            }
            list.clear();
            self.starved = list;
        }
        self.recv.publish();
        Ok(())
    }

    fn complete(
        &mut self,
        user_data: u64,
        res: i32,
        flags: u32,
        sq: &mut Sq<'_>,
    ) -> io::Result<()> {
        let idx = user_data as u32;
        match user_data >> 32 {
            OP_ACCEPT => self.on_accept(res, flags, sq),
            OP_RECV => self.on_recv(idx, res, flags, sq),
            OP_SEND => self.on_send(idx, res, sq),
            OP_STOP => {
                self.stopping = true;
                Ok(())
            }
            OP_BACKOFF => {
                self.backoff_armed = false;
                self.arm_accept(sq)
            }
            // Close and cancel completions carry nothing to act on.
            _ => Ok(()),
        }
    }

    fn arm_accept(&mut self, sq: &mut Sq<'_>) -> io::Result<()> {
        if self.accept_armed || self.backoff_armed || self.stopping {
            return Ok(());
        }
        self.accept_armed = true;
        sq.push(
            opcode::AcceptMulti::new(Fd(self.listener))
                .allocate_file_index(true)
                .build()
                .user_data(ud(OP_ACCEPT, 0)),
        )
    }

    fn on_accept(&mut self, res: i32, flags: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        if !cqueue::more(flags) {
            self.accept_armed = false;
        }
        if res >= 0 {
            let idx = res as u32;
            if self.stopping || idx as usize >= self.conns.capacity() {
                return sq.push(
                    opcode::Close::new(Fixed(idx))
                        .build()
                        .user_data(ud(OP_CLOSE, idx)),
                );
            }
            while self.conns.len() <= idx as usize {
                // Within the capacity reserved at start: no reallocation.
                self.conns.push(Conn::new());
            }
            let c = &mut self.conns[idx as usize];
            // An entry of the slot's previous connection may still sit in
            // a waiting list: it now stands for this one (resuming or
            // re-arming a connection that needs neither does nothing), so
            // the lists never hold a slot twice and never grow.
            let (waiting_out, starved) = (c.waiting_out, c.starved);
            *c = Conn::new();
            c.live = true;
            c.waiting_out = waiting_out;
            c.starved = starved;
            self.stats.accepted += 1;
            return self.arm_recv(idx, sq);
        }
        if matches!(
            -res,
            libc::ENFILE | libc::EMFILE | libc::ENOMEM | libc::ENOBUFS
        ) {
            // The table is full: this connection is lost (the kernel closes
            // it); accept again after a pause instead of spinning.
            self.stats.refused += 1;
            if !self.accept_armed && !self.stopping {
                self.backoff_armed = true;
                return sq.push(
                    opcode::Timeout::new(self.backoff)
                        .build()
                        .user_data(ud(OP_BACKOFF, 0)),
                );
            }
            return Ok(());
        }
        // ECONNABORTED and the like: that connection is gone, not the
        // listener.
        self.arm_accept(sq)
    }

    fn arm_recv(&mut self, idx: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(idx as usize) else {
            return Ok(());
        };
        if !c.live || c.recv_armed || c.closing || c.eof || c.paused {
            return Ok(());
        }
        c.recv_armed = true;
        sq.push(
            opcode::RecvMulti::new(Fixed(idx), BGID)
                .build()
                .user_data(ud(OP_RECV, idx)),
        )
    }

    fn on_recv(&mut self, idx: u32, res: i32, flags: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        let more = cqueue::more(flags);
        let bid = cqueue::buffer_select(flags);
        let Some(c) = self.conns.get_mut(idx as usize) else {
            if let Some(bid) = bid {
                self.recv.give_back(bid);
            }
            return Ok(());
        };
        if !more {
            c.recv_armed = false;
        }
        let mut starved = false;
        match (res, bid) {
            (n, Some(bid)) if n > 0 && c.live && !c.closing => {
                self.turn_bytes += n as u64;
                self.hold(idx, bid, 0, n as u32);
                let c = &mut self.conns[idx as usize];
                if c.held_count == 1 {
                    // Nothing was waiting before it: feed it now.
                    self.resume(idx, sq)?;
                } else if c.held_count > self.max_held && c.recv_armed && !c.paused {
                    // The client sends faster than its answers drain: stop
                    // taking its bytes until they do.
                    c.paused = true;
                    sq.push(
                        opcode::AsyncCancel::new(ud(OP_RECV, idx))
                            .build()
                            .user_data(ud(OP_CANCEL, idx)),
                    )?;
                }
            }
            (n, bid) => {
                if let Some(bid) = bid {
                    self.recv.give_back(bid);
                }
                match n {
                    0 => c.eof = true,
                    n if n == -libc::ENOBUFS => {
                        // Every buffer is out: re-armed once some come back.
                        self.stats.recv_starved += 1;
                        starved = true;
                        if !c.starved {
                            c.starved = true;
                            self.starved.push(idx);
                        }
                    }
                    n if n == -libc::ECANCELED || n > 0 => {}
                    _ => self.begin_close(idx, sq)?,
                }
            }
        }
        if !more && !starved {
            self.arm_recv(idx, sq)?;
        }
        self.finish_if_done(idx, sq)
    }

    /// Appends buffer `bid` (its `len` bytes from `off`) to the
    /// connection's held list.
    fn hold(&mut self, idx: u32, bid: u16, off: u32, len: u32) {
        let b = usize::from(bid);
        self.held_next[b] = NONE;
        self.held_off[b] = off;
        self.held_len[b] = len;
        self.held_total += 1;
        let c = &mut self.conns[idx as usize];
        if c.held_tail == NONE {
            c.held_head = bid;
        } else {
            self.held_next[usize::from(c.held_tail)] = bid;
        }
        c.held_tail = bid;
        c.held_count += 1;
    }

    /// Removes the oldest held buffer and gives it back to the kernel.
    fn unhold_head(&mut self, idx: u32) {
        let c = &mut self.conns[idx as usize];
        let bid = c.held_head;
        if bid == NONE {
            return;
        }
        c.held_head = self.held_next[usize::from(bid)];
        if c.held_head == NONE {
            c.held_tail = NONE;
        }
        c.held_count -= 1;
        self.held_total -= 1;
        self.recv.give_back(bid);
    }

    /// Feeds the held buffers, oldest first, until they are all taken or
    /// the output is full; then sends.
    fn resume(&mut self, idx: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        loop {
            let c = &mut self.conns[idx as usize];
            let bid = c.held_head;
            if bid == NONE {
                break;
            }
            let b = usize::from(bid);
            let (off, len) = (self.held_off[b], self.held_len[b]);
            let data = self.recv.data(bid, off, len);
            let mut sink = ConnSink {
                pool: self.out,
                out: &mut c.out,
                len: &mut c.out_len,
                no_chunk: false,
            };
            let fed = c.cutter.feed(data, &mut sink);
            let no_chunk = sink.no_chunk;
            match fed {
                Ok(Fed::Done) => self.unhold_head(idx),
                Ok(Fed::Stalled(n)) => {
                    self.held_off[b] = off + n as u32;
                    self.held_len[b] = len - n as u32;
                    if no_chunk && !c.waiting_out {
                        c.waiting_out = true;
                        self.out_waiters.push(idx);
                    }
                    break;
                }
                Err(_) => {
                    self.stats.malformed += 1;
                    return self.begin_close(idx, sq);
                }
            }
        }
        let c = &mut self.conns[idx as usize];
        if c.held_count == 0 && c.paused {
            c.paused = false;
            self.arm_recv(idx, sq)?;
        }
        self.flush(idx, sq)
    }

    /// Starts a send of the unsent output, or gives an empty chunk back.
    fn flush(&mut self, idx: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        let c = &mut self.conns[idx as usize];
        if c.send_inflight || c.out == NONE || c.closing {
            return Ok(());
        }
        if c.out_sent < c.out_len {
            let len = c.out_len - c.out_sent;
            c.send_inflight = true;
            c.inflight = len;
            let ptr = self.out.ptr(c.out, c.out_sent);
            return sq.push(
                opcode::Send::new(Fixed(idx), ptr, len)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
                    .user_data(ud(OP_SEND, idx)),
            );
        }
        // All sent: an idle connection holds no chunk.
        self.out.give_back(c.out);
        c.out = NONE;
        c.out_len = 0;
        c.out_sent = 0;
        Ok(())
    }

    fn on_send(&mut self, idx: u32, res: i32, sq: &mut Sq<'_>) -> io::Result<()> {
        let Some(c) = self.conns.get_mut(idx as usize) else {
            return Ok(());
        };
        c.send_inflight = false;
        if res < 0 {
            if !c.closing {
                self.begin_close(idx, sq)?;
            }
            return self.finish_if_done(idx, sq);
        }
        if !c.closing {
            let sent = res as u32;
            if sent < c.inflight {
                // A short send: the rest goes in the next one.
                self.stats.short_sends += 1;
            }
            c.out_sent += sent.min(c.inflight);
            if c.out_sent >= c.out_len {
                c.out_sent = 0;
                c.out_len = 0;
            }
            self.resume(idx, sq)?;
        }
        self.finish_if_done(idx, sq)
    }

    /// Stops everything on the connection; it is closed once nothing runs.
    fn begin_close(&mut self, idx: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        let c = &mut self.conns[idx as usize];
        if c.closing || !c.live {
            return Ok(());
        }
        c.closing = true;
        while self.conns[idx as usize].held_head != NONE {
            self.unhold_head(idx);
        }
        let c = &self.conns[idx as usize];
        if c.recv_armed || c.send_inflight {
            sq.push(
                opcode::AsyncCancel2::new(CancelBuilder::fd(Fixed(idx)).all())
                    .build()
                    .user_data(ud(OP_CANCEL, idx)),
            )?;
        }
        self.finish_if_done(idx, sq)
    }

    /// Closes a connection with nothing left to do: closing and idle, or
    /// at end of input with every answer sent.
    fn finish_if_done(&mut self, idx: u32, sq: &mut Sq<'_>) -> io::Result<()> {
        let c = &mut self.conns[idx as usize];
        if !c.live || c.recv_armed || c.send_inflight {
            return Ok(());
        }
        let drained = c.held_count == 0 && c.out_sent >= c.out_len;
        if !(c.closing || (c.eof && drained)) {
            return Ok(());
        }
        c.live = false;
        if c.out != NONE {
            self.out.give_back(c.out);
            c.out = NONE;
        }
        self.stats.closed += 1;
        self.stats.frames += c.cutter.frames();
        self.stats.acks += c.cutter.acks();
        sq.push(
            opcode::Close::new(Fixed(idx))
                .build()
                .user_data(ud(OP_CLOSE, idx)),
        )
    }

    /// Cancels every operation and waits (bounded) until the kernel has
    /// completed them all; true when it did.
    fn shut_down(
        &mut self,
        sq: &mut Sq<'_>,
        cq: &mut cqueue::CompletionQueue<'_>,
    ) -> io::Result<bool> {
        self.stopping = true;
        sq.push(
            opcode::AsyncCancel2::new(CancelBuilder::any())
                .build()
                .user_data(ud(OP_CANCEL, 0)),
        )?;
        for idx in 0..self.conns.len() as u32 {
            self.begin_close(idx, sq)?;
        }
        let deadline = Instant::now() + SHUTDOWN_WAIT;
        loop {
            let pending =
                self.accept_armed || self.backoff_armed || self.conns.iter().any(|c| c.live);
            if !pending {
                // Let the closes themselves complete.
                sq.queue.sync();
                let _ = sq.submitter.submit();
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            sq.queue.sync();
            let ts = Timespec::new().nsec(10_000_000);
            match sq
                .submitter
                .submit_with_args(1, &SubmitArgs::new().timespec(&ts))
            {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            self.drain(sq, cq)?;
        }
    }
}
