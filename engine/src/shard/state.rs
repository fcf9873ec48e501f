//! The shard's state apart from its service: the driver, the connection
//! table, the control rings and the timers, with everything done to a
//! connection that needs no service callback (sending, timers, closing,
//! forwarding to the control thread).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use dtp_codec::Limits;
use dtp_transports::{ConnId, Event, ListenerId, Transport};

use crate::control::{Decision, Request, ShardLink};
use crate::runtime::ShardMetrics;
use crate::service::{Finished, Outbox};

/// A connection's place on the shard.
pub(super) struct Slot<C> {
    pub(super) id: ConnId,
    pub(super) app: C,
    /// Bytes received while reading was paused, for the service once it
    /// resumes.
    pub(super) rx: Held,
    /// Encoded frames the driver refused (backpressure); sent first on Writable.
    pub(super) pending: Held,
    pub(super) paused: bool,
    pub(super) closing: bool,
    /// The deadline the service asked for ([`Outbox::set_timer`]); the
    /// shard's timer heap may hold stale entries, this is the live one.
    pub(super) timer: Option<Instant>,
    /// Its send budget: the shard's, or less ([`Outbox::limit_send_queue`]).
    pub(super) budget: u32,
    /// Bytes handed to it over its life ([`Outbox::position`]).
    pub(super) handed: u64,
}

impl<C> Slot<C> {
    /// A new connection's slot, with the shard's send budget `budget`.
    pub(super) fn new(id: ConnId, app: C, budget: usize) -> Self {
        Slot {
            id,
            app,
            rx: Held::default(),
            pending: Held::default(),
            paused: false,
            closing: false,
            timer: None,
            budget: u32::try_from(budget).unwrap_or(u32::MAX),
            handed: 0,
        }
    }

    /// Its send budget in bytes.
    pub(super) fn budget(&self) -> usize {
        self.budget as usize
    }
}

/// Bytes a connection holds only now and then (input received while it
/// was paused, output the transport refused): boxed, so that the many
/// connections holding none pay one pointer each, and freed when emptied.
#[derive(Default)]
pub(super) struct Held(Option<Box<BytesMut>>);

impl Held {
    pub(super) fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|b| b.is_empty())
    }

    pub(super) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |b| b.len())
    }

    pub(super) fn extend_from_slice(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            self.0.get_or_insert_default().extend_from_slice(bytes);
        }
    }

    /// Takes the bytes out, leaving nothing held.
    pub(super) fn take(&mut self) -> BytesMut {
        self.0.take().map(|b| *b).unwrap_or_default()
    }

    /// Holds `bytes` (nothing, if they are empty).
    pub(super) fn put(&mut self, bytes: BytesMut) {
        self.0 = (!bytes.is_empty()).then(|| Box::new(bytes));
    }
}

/// The shard's connection table, indexed by the driver's slot index.
pub(super) struct Table<C> {
    pub(super) slots: Vec<Option<Slot<C>>>,
    pub(super) len: usize,
}

impl<C> Table<C> {
    pub(super) fn get_mut(&mut self, id: ConnId) -> Option<&mut Slot<C>> {
        match self.slots.get_mut(id.slot().index() as usize) {
            Some(Some(s)) if s.id == id => Some(s),
            _ => None,
        }
    }

    pub(super) fn insert(&mut self, slot: Slot<C>) {
        let i = slot.id.slot().index() as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(slot).is_none() {
            self.len += 1;
        }
    }

    pub(super) fn remove(&mut self, id: ConnId) -> Option<Slot<C>> {
        let cell = self.slots.get_mut(id.slot().index() as usize)?;
        if cell.as_ref().is_some_and(|s| s.id == id) {
            self.len -= 1;
            cell.take()
        } else {
            None
        }
    }

    pub(super) fn ids(&self) -> Vec<ConnId> {
        self.slots.iter().flatten().map(|s| s.id).collect()
    }
}

/// Stale timer entries the heap may hold beyond two per connection before
/// it is rebuilt ([`Core::compact_timers`]).
pub(super) const TIMERS_SLACK: usize = 1024;

/// The most [`Core::send_some`] hands the driver in one call.
const SEND_PIECE: usize = 256 * 1024;

/// Everything of a shard but its service (`C`: its connection state; `U`,
/// `D`: its messages to and from the control thread).
pub(super) struct Core<T, C, U, D> {
    pub(super) driver: T,
    /// The clock's reading at this turn of the loop: every callback of the
    /// turn sees it ([`Outbox::now`]).
    pub(super) now: Instant,
    /// Lent receive buffers of the batch being handled that are not taken
    /// yet ([`Transport::receive_pressure`]).
    pub(super) untaken: usize,
    pub(super) conns: Table<C>,
    pub(super) limits: Limits,
    /// The current connection's outgoing batch.
    pub(super) out: BytesMut,
    /// The list of shared bytes a callback queues ([`Outbox::send_shared`]),
    /// kept empty between callbacks so that its memory is reused.
    pub(super) shared: Vec<(usize, Bytes)>,
    pub(super) events: Vec<Event>,
    pub(super) max_send_queue: usize,
    pub(super) metrics: Arc<ShardMetrics>,
    pub(super) stopping: bool,
    /// The rings to and from the control thread, if the engine has one.
    pub(super) control: Option<ShardLink<U, D>>,
    /// Requests the control ring had no room for, in order. Bounded: each
    /// connection adds at most an Up, a Down and one message before it is
    /// paused (see `waiting_for_control`).
    pub(super) backlog: VecDeque<Request<U>>,
    /// Connections paused until the backlog drains.
    pub(super) waiting_for_control: Vec<ConnId>,
    pub(super) decisions: Vec<Decision<D>>,
    /// Per-connection deadlines, earliest first (`ConnId::as_u64`); stale
    /// entries (the slot's `timer` changed) are skipped when they come up.
    pub(super) timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The listeners, in the order of `EngineConfig::listen` ([`Origin::Accepted`](crate::Origin)).
    pub(super) listeners: Vec<ListenerId>,
}

impl<T: Transport, C, U, D> Core<T, C, U, D> {
    /// Tells the control thread; what its ring cannot take waits in order.
    pub(super) fn tell_control(&mut self, r: Request<U>) {
        let Some(link) = &mut self.control else {
            return;
        };
        if !self.backlog.is_empty() {
            self.backlog.push_back(r);
        } else if let Err(r) = link.push(r) {
            self.backlog.push_back(r);
        }
    }

    pub(super) fn publish_metrics(&self) {
        let s = self.driver.stats();
        let m = &self.metrics;
        m.connections
            .store(self.conns.len as u64, Ordering::Relaxed);
        m.bytes_in.store(s.bytes_in, Ordering::Relaxed);
        m.bytes_out.store(s.bytes_out, Ordering::Relaxed);
        m.polls.store(s.enters, Ordering::Relaxed);
        m.send_reserve_refusals
            .store(s.send_reserve_refusals, Ordering::Relaxed);
        if let Some(region) = self.driver.region() {
            let report = region.report();
            let used = report.chunks_used;
            m.pool_bytes_used.store(used, Ordering::Relaxed);
            m.pool_bytes_high_water.fetch_max(used, Ordering::Relaxed);
            m.pool_bytes_reserved
                .store(report.backing_reserved, Ordering::Relaxed);
            m.pool_metadata_bytes
                .store(report.metadata.total(), Ordering::Relaxed);
            m.pool_live_bytes.store(report.live_data, Ordering::Relaxed);
        }
    }

    /// Carries out what a service callback asked for besides frames: its
    /// timer, its requests to the control thread, the send, a wish to be
    /// told when writable, a close.
    pub(super) fn after(&mut self, conn: ConnId, done: Finished<U>) {
        if done.frames > 0 {
            self.metrics
                .frames_in
                .fetch_add(done.frames, Ordering::Relaxed);
        }
        if done.decode_errors > 0 {
            self.metrics
                .decode_errors
                .fetch_add(done.decode_errors, Ordering::Relaxed);
        }
        self.set_timer(conn, done.timer);
        if let Some(limit) = done.send_limit {
            let limit = limit.min(self.max_send_queue);
            if let Some(slot) = self.conns.get_mut(conn) {
                slot.budget = u32::try_from(limit).unwrap_or(u32::MAX);
                self.driver.limit_send_queue(conn, limit);
            }
        }
        self.forward_to_control(conn, done.to_control);
        let mut shared = done.shared;
        self.flush(conn, &mut shared);
        if shared.capacity() > self.shared.capacity() {
            self.shared = shared;
        }
        if done.wants_writable {
            self.driver.want_writable(conn);
        }
        if done.close {
            self.close_quietly(conn);
        }
    }

    /// Forwards a service's requests about `conn` to the control thread;
    /// while they wait for ring room, the connection is not read.
    pub(super) fn forward_to_control(&mut self, conn: ConnId, items: Vec<U>) {
        if items.is_empty() {
            return;
        }
        for item in items {
            self.tell_control(Request::Service(item));
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

    /// Closes `conn` after what is queued, on the service's request
    /// ([`Outbox::close`]: it wrote its own close frame, if any).
    ///
    /// Bytes the driver refused for the moment (in `pending`: the core's
    /// send chunks ran out, as when thousands of connections are told
    /// goodbye at once) are sent first: the driver is told to close once
    /// they have gone, or after [`CLOSE_LINGER`] if the peer takes none.
    pub(super) fn close_quietly(&mut self, conn: ConnId) {
        if !self.begin_closing(conn) {
            return;
        }
        let waiting = self
            .conns
            .get_mut(conn)
            .is_some_and(|slot| !slot.pending.is_empty());
        if waiting {
            let at = self.now + CLOSE_LINGER;
            self.set_timer(conn, Some(Some(at)));
        } else {
            self.driver.close(conn);
        }
    }

    /// Marks `conn` closing (its input is dropped); false if it already was,
    /// or is gone.
    pub(super) fn begin_closing(&mut self, conn: ConnId) -> bool {
        let Some(slot) = self.conns.get_mut(conn) else {
            return false;
        };
        if slot.closing {
            return false;
        }
        slot.closing = true;
        slot.rx = Held::default();
        true
    }

    /// Records a service's timer request for `conn` (`None`: no change).
    pub(super) fn set_timer(&mut self, conn: ConnId, change: Option<Option<Instant>>) {
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
            if self.timers.len() > 2 * self.conns.len + TIMERS_SLACK {
                self.compact_timers();
            }
        }
    }

    /// Rebuilds the timer heap from the live deadlines: a connection that
    /// moves its deadline on every frame leaves a stale entry each time,
    /// which would otherwise wait in the heap until it came due. Amortised
    /// over the pushes that made the heap twice the connections.
    fn compact_timers(&mut self) {
        let live: Vec<_> = self
            .conns
            .slots
            .iter()
            .flatten()
            .filter_map(|s| s.timer.map(|at| Reverse((at, s.id.as_u64()))))
            .collect();
        self.timers = BinaryHeap::from(live);
    }

    /// The earliest live per-connection deadline (stale heap entries are
    /// dropped on the way).
    pub(super) fn next_timer(&mut self) -> Option<Instant> {
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

    /// Sends the current batch, with the shared bytes queued among it
    /// (each after the batch's first `offset` bytes); what the transport
    /// refuses waits in `pending`.
    /// `shared` is left empty.
    pub(super) fn flush(&mut self, conn: ConnId, shared: &mut Vec<(usize, Bytes)>) {
        if self.out.is_empty() && shared.is_empty() {
            return;
        }
        let out = std::mem::take(&mut self.out);
        let Some(slot) = self.conns.get_mut(conn) else {
            self.out = out;
            self.out.clear();
            shared.clear();
            return;
        };
        slot.handed += (out.len() + shared.iter().map(|(_, b)| b.len()).sum::<usize>()) as u64;
        let budget = slot.budget();
        let mut backed_up = !slot.pending.is_empty();
        // Bytes that had to wait in `pending`, this batch.
        let mut waiting = 0;
        let mut start = 0;
        let mut shared = shared.drain(..);
        loop {
            let next = shared.next();
            let end = next.as_ref().map_or(out.len(), |(offset, _)| *offset);
            let piece = &out[start..end];
            let sent = if backed_up {
                0
            } else {
                self.send_some(conn, piece)
            };
            if sent < piece.len() {
                backed_up = true;
                waiting += piece.len() - sent;
                self.hold(conn, &piece[sent..]);
            }
            start = end;
            let Some((_, bytes)) = next else {
                break;
            };
            if backed_up || self.driver.send_shared(conn, &bytes).is_err() {
                // Behind bytes that wait, or refused: it waits too, copied
                // (it must keep its place in the stream).
                if !backed_up {
                    self.driver.want_writable(conn);
                }
                backed_up = true;
                waiting += bytes.len();
                self.hold(conn, &bytes);
            }
        }
        let budget_left = budget.saturating_sub(self.driver.queued(conn));
        if waiting > 0
            && let Some(slot) = self.conns.get_mut(conn)
        {
            // Reading pauses when the connection's own budget is used up or
            // its backlog reaches half of it. A send refused only because the
            // core's send chunks ran out for the moment (a fan-out to many
            // connections at once) does not pause it: the connection gets
            // Writable when chunks come back, and cancelling and re-arming
            // its receive would cost more than the wait.
            let over = budget_left < waiting || slot.pending.len() >= budget / 2;
            if over && !slot.paused {
                slot.paused = true;
                self.driver.pause_reading(conn);
                self.metrics.paused.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.out = out;
        self.out.clear();
    }

    /// Keeps `bytes` in `conn`'s `pending`, sent first when it is writable.
    fn hold(&mut self, conn: ConnId, bytes: &[u8]) {
        if let Some(slot) = self.conns.get_mut(conn) {
            slot.pending.extend_from_slice(bytes);
        }
    }

    /// Queues as much of `bytes` as the connection's send budget takes now
    /// and returns how much: a batch larger than the whole budget (a resend
    /// after a resume can be, or a large HTTP answer) goes out in pieces
    /// instead of waiting forever. Pieces are at most [`SEND_PIECE`] bytes,
    /// so a batch larger than all of the core's send chunks together is
    /// never asked for at once (that would wait for chunks forever). When
    /// not all went, the driver reports Writable once there is room.
    pub(super) fn send_some(&mut self, conn: ConnId, bytes: &[u8]) -> usize {
        let budget = self.conns.get_mut(conn).map_or(0, |s| s.budget());
        let room = budget.saturating_sub(self.driver.queued(conn));
        let n = bytes.len().min(room);
        let mut sent = 0;
        while sent < n {
            let piece = (n - sent).min(SEND_PIECE);
            match self.driver.send(conn, &bytes[sent..sent + piece]) {
                Ok(()) => sent += piece,
                Err(_) => break, // the core's send chunks ran out: Writable comes
            }
        }
        if sent < bytes.len() {
            self.driver.want_writable(conn);
        }
        sent
    }
}

/// How long a connection closing with bytes still waiting for the driver
/// may wait for them to go (its timer then closes it regardless).
pub(super) const CLOSE_LINGER: std::time::Duration = std::time::Duration::from_secs(10);

/// The shard's connections, for a service handling a decision addressed to
/// the whole shard rather than one connection (e.g. an event to fan out to
/// every subscriber on this core).
pub struct Conns<'a, T, C, U, D> {
    pub(super) core: &'a mut Core<T, C, U, D>,
}

impl<T: Transport, C, U, D> crate::service::Connections<C, U> for Conns<'_, T, C, U, D> {
    fn visit(&mut self, conn: ConnId, f: &mut dyn FnMut(&mut C, &mut Outbox<'_, U>)) -> bool {
        self.with(conn, f).is_some()
    }
}

impl<T: Transport, C, U, D> Conns<'_, T, C, U, D> {
    /// Runs `f` on `conn`'s state with an outbox, then carries out what it
    /// queued or asked for, as after any callback. `None` (and `f` not run)
    /// if the connection is gone or closing.
    pub fn with<R>(
        &mut self,
        conn: ConnId,
        f: impl FnOnce(&mut C, &mut Outbox<'_, U>) -> R,
    ) -> Option<R> {
        let core = &mut *self.core;
        core.out.clear();
        let queued = core.driver.queued(conn);
        let slot = core.conns.get_mut(conn)?;
        if slot.closing {
            return None;
        }
        // What waits in `pending` (refused by the driver) counts as queued.
        let budget = slot.budget();
        let room = budget.saturating_sub(queued + slot.pending.len());
        let mut outbox = Outbox::new(&mut core.out, &core.limits, room, budget, core.now)
            .handed(slot.handed)
            .reusing(std::mem::take(&mut core.shared));
        let r = f(&mut slot.app, &mut outbox);
        let done = outbox.finish();
        core.after(conn, done);
        Some(r)
    }
}
