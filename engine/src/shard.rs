//! One core's loop: the driver's events in, the service's frames out.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use dtp_codec::{
    Body, CloseFrame, DecodeError, ErrorCode, FrameBuf, FrameDecoder, Limits, LogicalFrame,
    decode_frame, peek_frame_len,
};
use dtp_transports::{ConnId, Driver, Event, RecvBuf, SendError};

use crate::control::{Decision, Request, ShardLink};
use crate::runtime::ShardMetrics;
use crate::service::{Ctl, Finished, Origin, Outbox, Service, ToControl};

/// Receives up to this many bytes are copied out of their chunk rather
/// than lent (see `Event::Received` in `handle`).
const SMALL_RECEIVE: usize = 4096;

/// How soon a shard with requests waiting for the control ring looks again.
const BACKLOG_RETRY: Duration = Duration::from_millis(1);

/// One received frame, as the service wants it.
enum Input {
    /// Its wire bytes, to modify in place ([`Service::frame_wire`]): still
    /// in the receive chunk when the frame lay wholly inside one.
    Wire(RecvBuf),
    /// Decoded ([`Service::frame`]).
    Frame(LogicalFrame),
}

/// A connection's place on the shard.
struct Slot<C> {
    id: ConnId,
    app: C,
    /// Bytes received and not yet decoded: empty (and unallocated) whenever
    /// the connection is between frames, so idle connections hold nothing.
    rx: BytesMut,
    /// Encoded frames the driver refused (backpressure); sent first on Writable.
    pending: BytesMut,
    paused: bool,
    closing: bool,
    /// The deadline the service asked for ([`Outbox::set_timer`]); the
    /// shard's timer heap may hold stale entries, this is the live one.
    timer: Option<Instant>,
}

/// The shard's connection table, indexed by the driver's slot index.
struct Table<C> {
    slots: Vec<Option<Slot<C>>>,
    len: usize,
}

impl<C> Table<C> {
    fn get_mut(&mut self, id: ConnId) -> Option<&mut Slot<C>> {
        match self.slots.get_mut(id.slot().index() as usize) {
            Some(Some(s)) if s.id == id => Some(s),
            _ => None,
        }
    }

    fn insert(&mut self, slot: Slot<C>) {
        let i = slot.id.slot().index() as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(slot).is_none() {
            self.len += 1;
        }
    }

    fn remove(&mut self, id: ConnId) -> Option<Slot<C>> {
        let cell = self.slots.get_mut(id.slot().index() as usize)?;
        if cell.as_ref().is_some_and(|s| s.id == id) {
            self.len -= 1;
            cell.take()
        } else {
            None
        }
    }

    fn ids(&self) -> Vec<ConnId> {
        self.slots.iter().flatten().map(|s| s.id).collect()
    }
}

/// A core shard: owns a driver, a service and the connections between them.
pub struct Shard<S: Service> {
    driver: Driver,
    service: S,
    conns: Table<S::Conn>,
    decoder: FrameDecoder,
    limits: Limits,
    /// The current connection's outgoing batch.
    out: BytesMut,
    events: Vec<Event>,
    max_send_queue: usize,
    metrics: Arc<ShardMetrics>,
    stopping: bool,
    /// The rings to and from the control thread, if the engine has one.
    control: Option<ShardLink>,
    /// Requests the control ring had no room for, in order. Bounded: each
    /// connection adds at most an Up, a Down and one message before it is
    /// paused (see `waiting_for_control`).
    backlog: std::collections::VecDeque<Request>,
    /// Connections paused until the backlog drains.
    waiting_for_control: Vec<ConnId>,
    decisions: Vec<Decision>,
    /// Per-connection deadlines, earliest first (`ConnId::as_u64`); stale
    /// entries (the slot's `timer` changed) are skipped when they come up.
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
}

impl<S: Service> Shard<S> {
    /// A shard over `driver` running `service`.
    pub fn new(
        driver: Driver,
        service: S,
        limits: Limits,
        max_send_queue: usize,
        metrics: Arc<ShardMetrics>,
    ) -> Self {
        Self {
            driver,
            service,
            conns: Table {
                slots: Vec::new(),
                len: 0,
            },
            decoder: FrameDecoder::new(limits),
            limits,
            out: BytesMut::new(),
            events: Vec::new(),
            max_send_queue,
            metrics,
            stopping: false,
            control: None,
            backlog: std::collections::VecDeque::new(),
            waiting_for_control: Vec::new(),
            decisions: Vec::new(),
            timers: BinaryHeap::new(),
        }
    }

    /// Links the shard to the control thread.
    pub(crate) fn set_control(&mut self, link: ShardLink) {
        self.control = Some(link);
    }

    /// The shard's driver (to listen or connect before running).
    pub fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The service, e.g. to read its results after [`Shard::run`].
    pub fn service(&self) -> &S {
        &self.service
    }

    /// Runs until `stop` is set, then closes every connection (sending what
    /// is queued) and returns once all are closed or `drain` has passed.
    pub fn run(&mut self, stop: &AtomicBool, drain: Duration) -> io::Result<()> {
        let mut next_tick = self.tick(Instant::now());
        let mut drain_deadline = None;
        loop {
            let now = Instant::now();
            let next = match (next_tick, self.next_timer()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timeout = match (drain_deadline, next) {
                (Some(_), _) => Some(Duration::from_millis(10)),
                (None, Some(t)) => Some(t.saturating_duration_since(now)),
                (None, None) => None,
            };
            // Announce sleep on the decision ring; sleep only if still empty.
            let may_sleep = self
                .control
                .as_mut()
                .is_none_or(|link| link.decisions.prepare_park());
            let timeout = if !may_sleep {
                Some(Duration::ZERO)
            } else if !self.backlog.is_empty() {
                // The control thread frees ring slots without waking us (we
                // are its producer): look again soon.
                Some(timeout.map_or(BACKLOG_RETRY, |t| t.min(BACKLOG_RETRY)))
            } else {
                timeout
            };
            self.driver.poll(&mut self.events, timeout)?;
            if let Some(link) = &mut self.control {
                link.decisions.cancel_park();
            }
            let mut events = std::mem::take(&mut self.events);
            for e in events.drain(..) {
                self.handle(e);
            }
            self.events = events;
            self.control_turn();
            let now = Instant::now();
            self.fire_timers(now);
            next_tick = self.tick(now);
            self.publish_metrics();
            if stop.load(Ordering::Acquire) && drain_deadline.is_none() {
                self.stopping = true;
                drain_deadline = Some(now + drain);
                for id in self.conns.ids() {
                    self.driver.close(id);
                }
            }
            if let Some(deadline) = drain_deadline
                && (self.conns.len == 0 || now >= deadline)
            {
                return Ok(());
            }
        }
    }

    /// Sends what waits for the control ring, resumes connections that
    /// waited for room, and applies the control thread's decisions.
    fn control_turn(&mut self) {
        let Some(link) = &mut self.control else {
            return;
        };
        while let Some(r) = self.backlog.pop_front() {
            if let Err(r) = link.push(r) {
                self.backlog.push_front(r);
                break;
            }
        }
        link.wake();
        let queued = link.requests.len() + self.backlog.len();
        self.metrics
            .control_pending
            .store(queued as u64, Ordering::Relaxed);
        let mut decisions = std::mem::take(&mut self.decisions);
        link.decisions.pop_batch(&mut decisions, usize::MAX);
        if self.backlog.is_empty() {
            for conn in std::mem::take(&mut self.waiting_for_control) {
                if let Some(slot) = self.conns.get_mut(conn)
                    && slot.paused
                    && slot.pending.is_empty()
                {
                    slot.paused = false;
                    self.driver.resume_reading(conn);
                    if !slot.rx.is_empty() {
                        self.process(conn, RecvBuf::default());
                    }
                }
            }
        }
        for d in decisions.drain(..) {
            self.apply(d);
        }
        self.decisions = decisions;
    }

    /// Carries out one decision of the control thread.
    fn apply(&mut self, d: Decision) {
        match d {
            Decision::Send { conn, msg } => {
                self.out.clear();
                let room = self.max_send_queue.saturating_sub(self.driver.queued(conn));
                let Some(slot) = self.conns.get_mut(conn) else {
                    return; // closed meanwhile: the control thread hears Down
                };
                if slot.closing {
                    return;
                }
                let mut outbox = Outbox::new(&mut self.out, &self.limits, room);
                self.service.control(&mut slot.app, *msg, &mut outbox);
                let done = outbox.finish();
                self.after(conn, done);
            }
            Decision::Close { conn, code, reason } => self.close_with(conn, code, &reason),
        }
    }

    /// Tells the control thread; what its ring cannot take waits in order.
    fn tell_control(&mut self, r: Request) {
        let Some(link) = &mut self.control else {
            return;
        };
        if !self.backlog.is_empty() {
            self.backlog.push_back(r);
        } else if let Err(r) = link.push(r) {
            self.backlog.push_back(r);
        }
    }

    fn tick(&mut self, now: Instant) -> Option<Instant> {
        let mut ctl = ShardCtl {
            driver: &mut self.driver,
            limits: &self.limits,
            out: &mut self.out,
            stopping: self.stopping,
        };
        self.service.tick(now, &mut ctl)
    }

    fn publish_metrics(&self) {
        let s = self.driver.stats();
        let m = &self.metrics;
        m.connections
            .store(self.conns.len as u64, Ordering::Relaxed);
        m.bytes_in.store(s.bytes_in, Ordering::Relaxed);
        m.bytes_out.store(s.bytes_out, Ordering::Relaxed);
        m.polls.store(s.enters, Ordering::Relaxed);
        let r = self.driver.region().report();
        m.pool_bytes_used.store(r.chunks_used, Ordering::Relaxed);
        m.pool_bytes_high_water
            .fetch_max(r.chunks_used, Ordering::Relaxed);
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Accepted { conn, .. } => {
                if self.stopping {
                    self.driver.close(conn);
                } else {
                    self.open(conn, Origin::Accepted);
                }
            }
            Event::Connected { conn } => self.open(conn, Origin::Connected),
            Event::Received { conn, chunk } => {
                let Some(slot) = self.conns.get_mut(conn) else {
                    self.driver.recycle(chunk);
                    return;
                };
                if slot.closing {
                    self.driver.recycle(chunk);
                    return;
                }
                // The chunk itself, lent: frames wholly inside it are
                // decoded (or decrypted) in place, without a copy.
                let lent = self.driver.lent_chunks();
                let mut data = if chunk.len() <= SMALL_RECEIVE
                    || lent.saturating_mul(2) >= self.driver.recv_buffers()
                {
                    // Small reads (requests, acks) are cheaper copied than
                    // lent: the chunk goes straight back to the kernel. So
                    // is everything while half the receive chunks are out:
                    // an application that keeps payloads (slices of them)
                    // must not starve the connection of receive memory.
                    let copy = BytesMut::from(self.driver.recv_data(&chunk));
                    self.driver.recycle(chunk);
                    RecvBuf::from(copy)
                } else {
                    self.driver.recv_buf(chunk)
                };
                if slot.paused {
                    slot.rx.extend_from_slice(&data);
                    return;
                }
                // A frame begun in an earlier chunk is completed by copying
                // only the bytes it lacks.
                while !slot.rx.is_empty() && !data.is_empty() {
                    let want = match peek_frame_len(&slot.rx, &self.limits) {
                        Ok(total) => total,
                        Err(DecodeError::Incomplete { needed }) => needed,
                        Err(_) => break, // malformed: `process` reports it
                    };
                    if slot.rx.len() >= want {
                        break;
                    }
                    let take = (want - slot.rx.len()).min(data.len());
                    slot.rx.extend_from_slice(&data.split_to(take));
                }
                self.process(conn, data);
            }
            Event::Writable { conn } => self.writable(conn),
            Event::Closed { conn, reason } => {
                if let Some(slot) = self.conns.remove(conn) {
                    self.metrics.closed.fetch_add(1, Ordering::Relaxed);
                    self.tell_control(Request::Down { conn });
                    self.service.close(slot.app, reason);
                } else if let dtp_transports::CloseReason::ConnectFailed(errno) = reason {
                    self.service.connect_failed(conn, errno);
                }
            }
            Event::Woken => {}
        }
    }

    fn open(&mut self, conn: ConnId, origin: Origin) {
        self.metrics.opened.fetch_add(1, Ordering::Relaxed);
        self.tell_control(Request::Up { conn });
        self.out.clear();
        let mut outbox = Outbox::new(&mut self.out, &self.limits, self.max_send_queue);
        let app = self.service.open(conn, origin, &mut outbox);
        let done = outbox.finish();
        let slot = Slot {
            id: conn,
            app,
            rx: BytesMut::new(),
            pending: BytesMut::new(),
            paused: false,
            closing: false,
            timer: None,
        };
        self.conns.insert(slot);
        self.after(conn, done);
    }

    /// Carries out what a service callback asked for besides frames: its
    /// timer, its requests to the control thread, the send, a wish to be
    /// told when writable, a close.
    fn after(&mut self, conn: ConnId, done: Finished) {
        self.set_timer(conn, done.timer);
        self.forward_to_control(conn, done.to_control);
        self.flush(conn);
        if done.wants_writable {
            self.driver.want_writable(conn);
        }
        if done.close {
            self.close_quietly(conn);
        }
    }

    /// Forwards a service's requests about `conn` to the control thread;
    /// while they wait for ring room, the connection is not read.
    fn forward_to_control(&mut self, conn: ConnId, items: Vec<ToControl>) {
        if items.is_empty() {
            return;
        }
        for item in items {
            self.tell_control(match item {
                ToControl::Identified(fay_id) => Request::Identified { conn, fay_id },
                ToControl::Message(msg) => Request::Message {
                    conn,
                    msg: Box::new(msg),
                },
            });
        }
        if !self.backlog.is_empty()
            && let Some(slot) = self.conns.get_mut(conn)
            && !slot.paused
        {
            slot.paused = true;
            self.driver.pause_reading(conn);
            self.waiting_for_control.push(conn);
        }
    }

    /// Decodes and serves every whole frame of the connection's input, until
    /// the input runs out or the connection's send budget is half used (then
    /// reading pauses until the driver reports it writable).
    ///
    /// Frames come first from the connection's assembly buffer, then from
    /// `data` in place; whatever is left of `data` (a partial frame, or input
    /// held back by a pause) is copied into the assembly buffer.
    fn process(&mut self, conn: ConnId, data: RecvBuf) {
        self.out.clear();
        let soft_limit = self.max_send_queue / 2;
        let queued = self.driver.queued(conn);
        let Some(slot) = self.conns.get_mut(conn) else {
            return;
        };
        let mut failure = None;
        let mut held_back = false;
        let mut timer = None;
        let mut close = false;
        let mut to_control = Vec::new();
        let wire = self.service.wants_wire();
        // Frames are split off `data` itself for a service that wants wire
        // bytes (it decrypts them in place, in the receive chunk), and
        // decoded from shared bytes otherwise.
        let (mut data, mut shared) = if wire {
            (data, Bytes::new())
        } else {
            (RecvBuf::default(), data.freeze())
        };
        loop {
            if queued + slot.pending.len() + self.out.len() >= soft_limit {
                slot.paused = true;
                held_back = true;
                self.driver.pause_reading(conn);
                self.metrics.paused.fetch_add(1, Ordering::Relaxed);
                break;
            }
            let next = if wire && !slot.rx.is_empty() {
                match peek_frame_len(&slot.rx, &self.limits) {
                    Ok(len) if len <= slot.rx.len() => {
                        Ok(Some(Input::Wire(RecvBuf::from(slot.rx.split_to(len)))))
                    }
                    Ok(_) | Err(DecodeError::Incomplete { .. }) if !data.is_empty() => {
                        // A frame begun earlier goes on in `data` (after a
                        // pause): assemble the rest behind it.
                        slot.rx.extend_from_slice(&data);
                        data = RecvBuf::default();
                        continue;
                    }
                    Ok(_) | Err(DecodeError::Incomplete { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            } else if wire {
                match peek_frame_len(&data, &self.limits) {
                    Ok(len) if len <= data.len() => Ok(Some(Input::Wire(data.split_to(len)))),
                    Ok(_) | Err(DecodeError::Incomplete { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            } else if !slot.rx.is_empty() {
                self.decoder
                    .decode(&mut slot.rx)
                    .map(|f| f.map(Input::Frame))
            } else {
                match decode_frame(&shared, &self.limits) {
                    Ok((frame, used)) => {
                        shared.advance(used);
                        Ok(Some(Input::Frame(frame)))
                    }
                    Err(DecodeError::Incomplete { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            };
            match next {
                Ok(Some(Input::Frame(LogicalFrame {
                    body: Body::Control(msg),
                    ..
                }))) if self.control.is_some() => {
                    self.metrics.frames_in.fetch_add(1, Ordering::Relaxed);
                    // Control-plane messages belong to the control thread.
                    let r = Request::Message {
                        conn,
                        msg: Box::new(msg),
                    };
                    let refused = match &mut self.control {
                        Some(l) if self.backlog.is_empty() => l.push(r).err(),
                        _ => Some(r),
                    };
                    if let Some(r) = refused {
                        // Keep this one, and read no more from the connection
                        // until the ring has room again.
                        self.backlog.push_back(r);
                        slot.paused = true;
                        self.driver.pause_reading(conn);
                        self.waiting_for_control.push(conn);
                        break;
                    }
                }
                Ok(Some(input)) => {
                    self.metrics.frames_in.fetch_add(1, Ordering::Relaxed);
                    let room = self.max_send_queue.saturating_sub(queued);
                    let mut outbox = Outbox::new(&mut self.out, &self.limits, room);
                    let result = match input {
                        Input::Wire(w) => self.service.frame_wire(&mut slot.app, w, &mut outbox),
                        Input::Frame(f) => self.service.frame(&mut slot.app, f, &mut outbox),
                    };
                    let done = outbox.finish();
                    held_back |= done.wants_writable;
                    timer = done.timer.or(timer);
                    to_control.extend(done.to_control);
                    if done.close {
                        close = true;
                        break;
                    }
                    if let Err(code) = result {
                        failure = Some((code, "the service refused a frame"));
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    self.metrics.decode_errors.fetch_add(1, Ordering::Relaxed);
                    failure = Some((e.code(), "malformed frame"));
                    break;
                }
            }
        }
        if failure.is_none() && !(data.is_empty() && shared.is_empty()) {
            // A partial frame (or input held back by a pause) waits here; the
            // chunk it came in goes back to the kernel.
            slot.rx.extend_from_slice(&data);
            slot.rx.extend_from_slice(&shared);
        } else if slot.rx.is_empty() {
            slot.rx = BytesMut::new(); // free the assembly buffer between frames
        }
        self.set_timer(conn, timer);
        self.forward_to_control(conn, to_control);
        self.flush(conn);
        if held_back {
            self.driver.want_writable(conn);
        }
        if let Some((code, why)) = failure {
            self.close_with(conn, code, why);
        } else if close {
            self.close_quietly(conn);
        }
    }

    /// Closes `conn` after what is queued, on the service's request
    /// ([`Outbox::close`]: it wrote its own close frame, if any).
    fn close_quietly(&mut self, conn: ConnId) {
        if self.begin_closing(conn) {
            self.driver.close(conn);
        }
    }

    /// Marks `conn` closing (its input is dropped); false if it already was,
    /// or is gone.
    fn begin_closing(&mut self, conn: ConnId) -> bool {
        let Some(slot) = self.conns.get_mut(conn) else {
            return false;
        };
        if slot.closing {
            return false;
        }
        slot.closing = true;
        slot.rx = BytesMut::new();
        true
    }

    /// Records a service's timer request for `conn` (`None`: no change).
    fn set_timer(&mut self, conn: ConnId, change: Option<Option<Instant>>) {
        let Some(at) = change else {
            return;
        };
        let Some(slot) = self.conns.get_mut(conn) else {
            return;
        };
        if slot.timer == at {
            // Already armed for exactly this instant (a protocol asks again
            // after every frame): its heap entry is there and live.
            return;
        }
        slot.timer = at;
        if let Some(at) = at {
            self.timers.push(Reverse((at, conn.as_u64())));
        }
    }

    /// The earliest live per-connection deadline (stale heap entries are
    /// dropped on the way).
    fn next_timer(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, id))) = self.timers.peek().copied() {
            let live = self
                .conns
                .get_mut(ConnId::from_u64(id))
                .is_some_and(|s| s.timer == Some(at));
            if live {
                return Some(at);
            }
            self.timers.pop();
        }
        None
    }

    /// Runs [`Service::timeout`] for every connection whose deadline passed.
    fn fire_timers(&mut self, now: Instant) {
        while let Some(at) = self.next_timer() {
            if at > now {
                return;
            }
            let Some(Reverse((_, id))) = self.timers.pop() else {
                return;
            };
            let conn = ConnId::from_u64(id);
            self.out.clear();
            let room = self.max_send_queue.saturating_sub(self.driver.queued(conn));
            let Some(slot) = self.conns.get_mut(conn) else {
                continue;
            };
            slot.timer = None;
            let mut outbox = Outbox::new(&mut self.out, &self.limits, room);
            self.service.timeout(&mut slot.app, now, &mut outbox);
            let done = outbox.finish();
            self.after(conn, done);
        }
    }

    /// Sends the current batch; what the driver refuses waits in `pending`.
    fn flush(&mut self, conn: ConnId) {
        if self.out.is_empty() {
            return;
        }
        let out = std::mem::take(&mut self.out);
        let backed_up = self
            .conns
            .get_mut(conn)
            .is_some_and(|slot| !slot.pending.is_empty());
        let sent = if backed_up {
            0
        } else {
            self.send_some(conn, &out)
        };
        if sent < out.len()
            && let Some(slot) = self.conns.get_mut(conn)
        {
            slot.pending.extend_from_slice(&out[sent..]);
            if !slot.paused {
                slot.paused = true;
                self.driver.pause_reading(conn);
                self.metrics.paused.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.out = out;
        self.out.clear();
    }

    /// Queues as much of `bytes` as the connection's send budget takes now
    /// and returns how much: a batch larger than the whole budget (a resend
    /// after a resume can be) goes out in pieces instead of waiting forever.
    /// When not all went, the driver reports Writable once there is room.
    fn send_some(&mut self, conn: ConnId, bytes: &[u8]) -> usize {
        let room = self.max_send_queue.saturating_sub(self.driver.queued(conn));
        let n = bytes.len().min(room);
        let sent = match n {
            0 => 0,
            n => match self.driver.send(conn, &bytes[..n]) {
                Ok(()) => n,
                Err(_) => 0, // the core's send chunks ran out: Writable comes
            },
        };
        if sent < bytes.len() {
            self.driver.want_writable(conn);
        }
        sent
    }

    fn writable(&mut self, conn: ConnId) {
        let Some(slot) = self.conns.get_mut(conn) else {
            return;
        };
        if !slot.pending.is_empty() {
            let mut pending = std::mem::take(&mut slot.pending);
            let sent = self.send_some(conn, &pending);
            let Some(slot) = self.conns.get_mut(conn) else {
                return;
            };
            if sent < pending.len() {
                pending.advance(sent);
                slot.pending = pending;
                return; // the rest when the driver reports room again
            }
        }
        let Some(slot) = self.conns.get_mut(conn) else {
            return;
        };
        if slot.paused && !slot.closing {
            slot.paused = false;
            self.driver.resume_reading(conn);
            if !slot.rx.is_empty() {
                self.process(conn, RecvBuf::default());
            }
        }
        let Some(slot) = self.conns.get_mut(conn) else {
            return;
        };
        self.out.clear();
        let room = self.max_send_queue.saturating_sub(self.driver.queued(conn));
        let mut outbox = Outbox::new(&mut self.out, &self.limits, room);
        self.service.writable(&mut slot.app, &mut outbox);
        let done = outbox.finish();
        self.after(conn, done);
    }

    /// Tells the peer why (a close frame) and closes after what is queued.
    fn close_with(&mut self, conn: ConnId, code: ErrorCode, why: &str) {
        if !self.begin_closing(conn) {
            return;
        }
        tracing::debug!(conn = conn.as_u64(), %code, why, "closing connection");
        let frame = LogicalFrame::plain(
            0,
            Body::Close(CloseFrame {
                code,
                reason: why.to_owned(),
            }),
        );
        if let Ok(bytes) = frame.to_bytes(&self.limits) {
            // Best effort: a connection too backed up to take its close frame
            // is closed without it.
            let _ = self.driver.send(conn, &bytes);
        }
        self.driver.close(conn);
    }
}

/// [`Ctl`] over a shard's driver, for [`Service::tick`].
struct ShardCtl<'a> {
    driver: &'a mut Driver,
    limits: &'a Limits,
    out: &'a mut BytesMut,
    stopping: bool,
}

impl Ctl for ShardCtl<'_> {
    fn connect(&mut self, addr: SocketAddr) -> Result<ConnId, ErrorCode> {
        self.driver.connect(addr).map_err(|_| ErrorCode::INTERNAL)
    }

    fn send(&mut self, conn: ConnId, frame: &LogicalFrame) -> Result<(), ErrorCode> {
        self.out.clear();
        frame
            .encode(self.out, self.limits)
            .map_err(|_| ErrorCode::LIMIT_EXCEEDED)?;
        let r = self.driver.send(conn, self.out).map_err(|e| match e {
            SendError::BufferFull => ErrorCode::BUFFER_FULL,
            SendError::Closed | SendError::UnknownConnection => ErrorCode::E_SESSION_NOT_FOUND,
        });
        self.out.clear();
        r
    }

    fn close(&mut self, conn: ConnId) {
        self.driver.close(conn);
    }

    fn stopping(&self) -> bool {
        self.stopping
    }
}
