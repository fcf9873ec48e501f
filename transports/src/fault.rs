//! A fault-injecting [`Transport`] wrapper for tests (STYLE.md: "a
//! fault-injecting wrapper (drop, cut at byte N, delay, reorder where the
//! transport allows) that every protocol test can use").
//!
//! [`FaultInjector`] sits between a protocol under test and any transport and,
//! per connection, following a [`FaultPlan`]:
//!
//! * **cut at byte N** ([`FaultPlan::cut_after_received`],
//!   [`FaultPlan::cut_after_sent`]): the first N bytes of that direction get
//!   through exactly, then the connection is cut. The wrapped connection is
//!   closed, the side that holds the injector sees
//!   `Closed(Error(ECONNRESET))` after the last of those bytes, and anything
//!   beyond byte N is discarded (and counted). When the cut is on the sending
//!   side the peer receives exactly N bytes, then `Closed(PeerClosed)`.
//! * **drop** ([`FaultPlan::drop_within`]): a cut at a point drawn from the
//!   injector's seeded generator: a direction and a byte in `0..=n`. The same
//!   seed and the same sequence of connections give the same points.
//! * **delay** ([`FaultPlan::delay_polls`], [`FaultInjector::hold`]): bytes
//!   that arrive during the injector's poll number p are delivered by poll
//!   number p + K, or held until [`FaultInjector::release`]. Polls are the
//!   injector's only clock, so a delay is the same on every machine. A
//!   connection's close waits behind its delayed bytes; delayed connections
//!   fall behind the others, which is the only reordering a byte stream
//!   allows (across connections, never within one).
//! * **split and coalesce** ([`FaultPlan::rechunk`]): the received stream is
//!   re-cut into deliveries that ignore where the transport's deliveries
//!   began and ended (merged into one, or of random sizes). Bytes are never
//!   reordered, altered, lost or duplicated (SPEC TRN-5): a protocol that
//!   frames its stream must not care.
//!
//! [`FaultStats`] counts what was done. With [`FaultPlan::NONE`] the wrapper
//! passes everything through unchanged.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::num::NonZeroUsize;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::driver::{BackendChoice, CloseReason, ConnId, DriverStats, ListenerId, Waker};
use crate::endpoint::Endpoint;
use crate::lent::RecvBuf;
use crate::sendq::SendError;
use crate::transport::{Event, Transport, TransportError};

/// How received bytes are re-cut into deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rechunk {
    /// Everything released in one poll goes out as one delivery.
    Coalesce,
    /// Deliveries of random sizes in `1..=max`, across the boundaries of the
    /// transport's own deliveries (splits some, merges others).
    Random {
        /// The largest delivery.
        max: NonZeroUsize,
    },
}

/// The faults to inject on one connection. Byte counts are from the start
/// of the connection, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Cut the connection once this many bytes have been received.
    pub cut_after_received: Option<u64>,
    /// Cut the connection once this many bytes have been sent.
    pub cut_after_sent: Option<u64>,
    /// Cut the connection at a random direction and byte in `0..=n`.
    pub drop_within: Option<u64>,
    /// Deliver received bytes this many polls after they arrived.
    pub delay_polls: u32,
    /// Re-cut received bytes into other deliveries.
    pub rechunk: Option<Rechunk>,
}

impl FaultPlan {
    /// No faults: everything passes through.
    pub const NONE: Self = Self {
        cut_after_received: None,
        cut_after_sent: None,
        drop_within: None,
        delay_polls: 0,
        rechunk: None,
    };
}

/// What a [`FaultInjector`] did, for tests to assert that a fault happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Connections seen.
    pub connections: u64,
    /// Connections cut at a planned byte.
    pub cuts: u64,
    /// Connections dropped at a random byte.
    pub drops: u64,
    /// Bytes discarded after a cut, both directions.
    pub bytes_discarded: u64,
    /// Deliveries from the wrapped transport.
    pub deliveries_in: u64,
    /// Deliveries passed on (differs from `deliveries_in` when re-cut).
    pub deliveries_out: u64,
    /// Deliveries held back for at least one poll.
    pub delayed: u64,
}

/// A cut that has not happened yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    Cut,
    Drop,
}

/// SplitMix64: tiny, seedable, good enough to pick fault points; not for
/// anything secret.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0), by the multiply-high method.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

struct Conn {
    plan: FaultPlan,
    rng: Rng,
    received: u64,
    sent: u64,
    recv_limit: Option<(u64, Cause)>,
    send_limit: Option<(u64, Cause)>,
    /// Received bytes not yet delivered, with the poll they may go at.
    held: VecDeque<(u64, RecvBuf)>,
    manual_hold: bool,
    /// The connection was cut: the wrapped one is closing, its bytes are discarded.
    cut: bool,
    /// `Closed` to report once the held bytes are out.
    down: Option<CloseReason>,
    /// The user has been told `Closed`: the id is dead to them.
    told_down: bool,
    /// The wrapped transport reported `Closed`: its id is dead.
    inner_down: bool,
}

impl Conn {
    fn new(plan: FaultPlan, rng: Rng) -> Self {
        let mut c = Self {
            plan,
            rng,
            received: 0,
            sent: 0,
            recv_limit: None,
            send_limit: None,
            held: VecDeque::new(),
            manual_hold: false,
            cut: false,
            down: None,
            told_down: false,
            inner_down: false,
        };
        c.set_plan(plan);
        c
    }

    fn set_plan(&mut self, plan: FaultPlan) {
        self.plan = plan;
        self.recv_limit = plan.cut_after_received.map(|n| (n, Cause::Cut));
        self.send_limit = plan.cut_after_sent.map(|n| (n, Cause::Cut));
        if let Some(within) = plan.drop_within {
            let at = self.rng.below(within.saturating_add(1).max(1));
            let limit = if self.rng.next() & 1 == 0 {
                &mut self.recv_limit
            } else {
                &mut self.send_limit
            };
            if limit.is_none_or(|(n, _)| at < n) {
                *limit = Some((at, Cause::Drop));
            }
        }
    }

    fn holds(&self) -> bool {
        self.plan.delay_polls > 0
            || self.plan.rechunk.is_some()
            || self.manual_hold
            || !self.held.is_empty()
    }

    /// A limit already reached: the connection must be cut.
    fn reached(&self) -> Option<Cause> {
        [
            self.recv_limit.filter(|(n, _)| self.received >= *n),
            self.send_limit.filter(|(n, _)| self.sent >= *n),
        ]
        .into_iter()
        .flatten()
        .map(|(_, cause)| cause)
        .next()
    }
}

fn reset() -> CloseReason {
    CloseReason::Error(libc::ECONNRESET)
}

/// A [`Transport`] that injects the faults of a [`FaultPlan`] into the
/// connections of the transport it wraps (see the module docs for what
/// each fault does). Deterministic: the same seed, calls and wrapped events
/// give the same faults. It is itself a transport (SPEC TRN-1 … TRN-5; it
/// never alters bytes, TRN-5), so protocol code cannot tell it is there.
pub struct FaultInjector<A> {
    inner: A,
    seed: u64,
    default_plan: FaultPlan,
    conns: BTreeMap<ConnId, Conn>,
    /// Polls so far: the injector's clock.
    polls: u64,
    raw: Vec<Event>,
    stats: FaultStats,
}

impl<A: Transport> FaultInjector<A> {
    /// Wraps `inner` with no faults; `seed` fixes every random choice made
    /// once a plan asks for one.
    pub fn new(inner: A, seed: u64) -> Self {
        Self::with_plan(inner, seed, FaultPlan::NONE)
    }

    /// Wraps `inner`, applying `plan` to every connection.
    pub fn with_plan(inner: A, seed: u64, plan: FaultPlan) -> Self {
        Self {
            inner,
            seed,
            default_plan: plan,
            conns: BTreeMap::new(),
            polls: 0,
            raw: Vec::new(),
            stats: FaultStats::default(),
        }
    }

    /// The plan for connections seen from now on.
    pub fn set_default_plan(&mut self, plan: FaultPlan) {
        self.default_plan = plan;
    }

    /// Replaces `id`'s plan, e.g. right after [`Transport::connect`];
    /// byte limits already passed cut the connection at once.
    pub fn set_plan(&mut self, id: ConnId, plan: FaultPlan) {
        self.conn(id).set_plan(plan);
        self.cut_if_reached(id);
    }

    /// Holds `id`'s received bytes (and its close) until [`Self::release`].
    pub fn hold(&mut self, id: ConnId) {
        self.conn(id).manual_hold = true;
    }

    /// Lets `id`'s held bytes go with the next poll.
    pub fn release(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.manual_hold = false;
        }
    }

    /// What was done so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// How many times [`Transport::poll`] was called: the clock that
    /// delays are measured in.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The wrapped transport, mutably (what is done through it bypasses the faults).
    pub fn inner_mut(&mut self) -> &mut A {
        &mut self.inner
    }

    /// Unwraps the transport.
    pub fn into_inner(self) -> A {
        self.inner
    }

    /// `id`'s state, made on first sight with the default plan and a
    /// generator seeded from the seed and the connection's ordinal.
    fn conn(&mut self, id: ConnId) -> &mut Conn {
        let Self {
            conns,
            stats,
            seed,
            default_plan,
            ..
        } = self;
        conns.entry(id).or_insert_with(|| {
            stats.connections += 1;
            let mut seeder = Rng(*seed ^ stats.connections.wrapping_mul(0xd6e8_feb8_6659_fd93));
            Conn::new(*default_plan, Rng(seeder.next()))
        })
    }

    fn cut_if_reached(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.cut || c.told_down || c.inner_down {
            return;
        }
        if let Some(cause) = c.reached() {
            self.cut(id, cause);
        }
    }

    /// Cuts `id`: the wrapped connection closes; the user hears
    /// `Closed(ECONNRESET)` after the bytes already let through.
    fn cut(&mut self, id: ConnId, cause: Cause) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.cut = true;
        c.down = Some(reset());
        match cause {
            Cause::Cut => self.stats.cuts += 1,
            Cause::Drop => self.stats.drops += 1,
        }
        self.inner.close(id);
    }

    fn on_inner_event(&mut self, event: Event, events: &mut Vec<Event>) {
        match event {
            Event::Accepted { conn, .. } => {
                self.conn(conn);
                events.push(event);
                self.cut_if_reached(conn);
            }
            Event::Connected { conn } => {
                if self.conn(conn).cut {
                    return; // cut before it was up: the user hears Closed only
                }
                events.push(event);
                self.cut_if_reached(conn);
            }
            Event::Closed { conn, reason } => {
                let Some(c) = self.conns.get_mut(&conn) else {
                    events.push(event);
                    return;
                };
                c.inner_down = true;
                if !c.cut {
                    c.down = Some(reason);
                }
            }
            Event::Received { conn, data } => self.on_received(conn, data, events),
            Event::Writable { conn } => {
                let c = self.conn(conn);
                if !c.cut && !c.told_down {
                    events.push(event);
                }
            }
            Event::Woken => events.push(event),
        }
    }

    fn on_received(&mut self, id: ConnId, mut bytes: RecvBuf, events: &mut Vec<Event>) {
        let polls = self.polls;
        self.conn(id);
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        if c.cut || c.told_down {
            self.stats.bytes_discarded += bytes.len() as u64;
            return;
        }
        let len = bytes.len() as u64;
        let mut cut = None;
        if let Some((n, cause)) = c.recv_limit {
            let room = n.saturating_sub(c.received);
            if len >= room {
                // `room` ≤ `len` ≤ usize::MAX.
                bytes = bytes.split_to(room as usize);
                cut = Some((cause, len - room));
            }
        }
        c.received += bytes.len() as u64;
        self.stats.deliveries_in += 1;
        if !bytes.is_empty() {
            if c.holds() {
                let at = polls + u64::from(c.plan.delay_polls);
                if c.plan.delay_polls > 0 || c.manual_hold {
                    self.stats.delayed += 1;
                }
                c.held.push_back((at, bytes));
            } else {
                self.stats.deliveries_out += 1;
                events.push(Event::Received {
                    conn: id,
                    data: bytes,
                });
            }
        }
        if let Some((cause, discarded)) = cut {
            self.stats.bytes_discarded += discarded;
            self.cut(id, cause);
        }
    }

    /// Delivers what is due, re-cut as planned, and the `Closed`s waiting
    /// behind it; forgets connections dead on both sides.
    fn deliver_due(&mut self, events: &mut Vec<Event>) {
        let polls = self.polls;
        for (&conn, c) in &mut self.conns {
            if !c.manual_hold {
                let mut due = Vec::new();
                while c.held.front().is_some_and(|(at, _)| *at <= polls) {
                    if let Some((_, bytes)) = c.held.pop_front() {
                        due.push(bytes);
                    }
                }
                let before = events.len();
                let concat = |due: Vec<RecvBuf>| {
                    let mut all = BytesMut::with_capacity(due.iter().map(|b| b.len()).sum());
                    for b in due {
                        all.extend_from_slice(&b);
                    }
                    all
                };
                match c.plan.rechunk {
                    _ if due.is_empty() => {}
                    None => {
                        events.extend(due.into_iter().map(|data| Event::Received { conn, data }))
                    }
                    Some(Rechunk::Coalesce) => events.push(Event::Received {
                        conn,
                        data: RecvBuf::from(concat(due)),
                    }),
                    Some(Rechunk::Random { max }) => {
                        let mut rest = concat(due);
                        while !rest.is_empty() {
                            let size = 1 + c.rng.below(max.get() as u64) as usize;
                            let now = rest.split_to(size.min(rest.len()));
                            events.push(Event::Received {
                                conn,
                                data: RecvBuf::from(now),
                            });
                        }
                    }
                }
                self.stats.deliveries_out += (events.len() - before) as u64;
            }
            if c.held.is_empty()
                && !c.told_down
                && let Some(reason) = c.down
            {
                c.told_down = true;
                events.push(Event::Closed { conn, reason });
            }
        }
        self.conns.retain(|_, c| !(c.told_down && c.inner_down));
    }

    /// Something will be due without the wrapped transport doing anything.
    fn due_soon(&self) -> bool {
        self.conns
            .values()
            .any(|c| !c.manual_hold && (!c.held.is_empty() || (c.down.is_some() && !c.told_down)))
    }
}

/// SPEC TRN-1 … TRN-5: any transport, with faults.
impl<A: Transport> Transport for FaultInjector<A> {
    fn backend(&self) -> &BackendChoice {
        self.inner.backend()
    }

    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        self.inner.listen(at, shared)
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let id = self.inner.connect(to)?;
        self.conn(id);
        Ok(id)
    }

    /// Closes `id` as the wrapped transport does; received bytes still held
    /// are discarded, as a closed connection's are.
    fn close(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(&id) {
            if c.cut || c.told_down {
                return;
            }
            c.held.clear();
            c.manual_hold = false;
        }
        self.inner.close(id);
    }

    /// Sends as the wrapped transport does; past a send-side cut point only
    /// the bytes before it go out, `Ok` is returned (as a kernel accepts
    /// bytes that a reset then loses), and the connection is cut.
    fn send(&mut self, id: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        let Some(c) = self.conns.get_mut(&id) else {
            return self.inner.send(id, bytes);
        };
        if c.told_down {
            return Err(SendError::UnknownConnection);
        }
        if c.cut {
            return Err(SendError::Closed);
        }
        let len = bytes.len() as u64;
        if let Some((n, cause)) = c.send_limit {
            let room = n.saturating_sub(c.sent);
            if len >= room {
                // `room` ≤ `len` = bytes.len().
                let (now, lost) = bytes.split_at(room as usize);
                if !now.is_empty() {
                    self.inner.send(id, now)?;
                }
                c.sent += room;
                self.stats.bytes_discarded += lost.len() as u64;
                self.cut(id, cause);
                return Ok(());
            }
        }
        self.inner.send(id, bytes)?;
        c.sent += len;
        Ok(())
    }

    fn queued(&self, id: ConnId) -> usize {
        self.inner.queued(id)
    }

    fn want_writable(&mut self, id: ConnId) {
        self.inner.want_writable(id);
    }

    fn limit_send_queue(&mut self, id: ConnId, max: usize) {
        self.inner.limit_send_queue(id, max);
    }

    fn pause_reading(&mut self, id: ConnId) {
        self.inner.pause_reading(id);
    }

    fn resume_reading(&mut self, id: ConnId) {
        self.inner.resume_reading(id);
    }

    fn send_shared(&mut self, id: ConnId, bytes: &Bytes) -> Result<(), SendError> {
        let limited = self
            .conns
            .get(&id)
            .is_some_and(|c| c.send_limit.is_some() || c.cut || c.told_down);
        if limited {
            // Through the byte-counting path (a cut may fall inside).
            return self.send(id, bytes);
        }
        self.inner.send_shared(id, bytes)?;
        if let Some(c) = self.conns.get_mut(&id) {
            c.sent += bytes.len() as u64;
        }
        Ok(())
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        self.polls += 1;
        let timeout = if self.due_soon() {
            Some(Duration::ZERO)
        } else {
            timeout
        };
        let mut raw = std::mem::take(&mut self.raw);
        let polled = self.inner.poll(&mut raw, timeout);
        for event in raw.drain(..) {
            self.on_inner_event(event, events);
        }
        self.raw = raw;
        self.deliver_due(events);
        polled
    }

    fn waker(&self) -> Waker {
        self.inner.waker()
    }

    fn stats(&self) -> DriverStats {
        self.inner.stats()
    }

    fn region(&self) -> Option<&dtp_pool::Region> {
        self.inner.region()
    }

    fn receive_pressure(&self, untaken: usize) -> bool {
        // Held bytes are lent too, and not the receiver's to count.
        self.inner.receive_pressure(untaken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_seeded_and_stays_in_range() {
        let (mut a, mut b) = (Rng(7), Rng(7));
        for _ in 0..1000 {
            let (x, y) = (a.below(10), b.below(10));
            assert_eq!(x, y);
            assert!(x < 10);
        }
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[a.below(10) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn a_drop_point_lies_within_its_bound_and_follows_the_seed() {
        let plan = FaultPlan {
            drop_within: Some(100),
            ..FaultPlan::NONE
        };
        let points = |seed| {
            let c = Conn::new(plan, Rng(seed));
            (c.recv_limit, c.send_limit)
        };
        assert_eq!(points(1), points(1));
        for seed in 0..50 {
            let (r, s) = points(seed);
            let (n, cause) = r.or(s).unwrap();
            assert!(r.is_none() || s.is_none());
            assert!(n <= 100);
            assert_eq!(cause, Cause::Drop);
        }
    }
}
