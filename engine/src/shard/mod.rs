//! One core's loop: the driver's events in, the service's frames out.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use dtp_codec::{ErrorCode, Limits, LogicalFrame};
use dtp_transports::{ConnId, EVENTS_KEPT, Endpoint, Event, RecvBuf, SendError, Transport};

use crate::Notifier;
use crate::control::{Decision, Request, ShardLink};

mod state;
mod stream;
#[cfg(test)]
mod tests;

use crate::clock::{Clock, SystemClock};
use crate::runtime::ShardMetrics;
use crate::service::{Ctl, Origin, Outbox, Service};
pub use state::Conns;
use state::{Core, Slot, Table};

/// How soon a shard with requests waiting for the control ring looks again.
const BACKLOG_RETRY: Duration = Duration::from_millis(1);

/// A core shard: owns a transport, a service and the connections between
/// them, on a clock.
pub struct Shard<T: Transport, S: Service, C: Clock = SystemClock> {
    service: S,
    clock: C,
    core: Core<T, S::Conn, S::Up, S::Down>,
    /// Connections other threads asked the service to look at
    /// ([`Service::notified`]).
    notifier: Notifier,
    /// Those taken this turn (kept for its capacity).
    notified: Vec<ConnId>,
}

impl<T: Transport, S: Service> Shard<T, S> {
    /// A shard over `driver` running `service`, on the system's clock.
    pub fn new(
        driver: T,
        service: S,
        limits: Limits,
        max_send_queue: usize,
        metrics: Arc<ShardMetrics>,
    ) -> Self {
        Self::on_clock(
            driver,
            service,
            limits,
            max_send_queue,
            metrics,
            SystemClock,
        )
    }
}

impl<T: Transport, S: Service, C: Clock> Shard<T, S, C> {
    /// A shard over `driver` running `service`, its time read from `clock`.
    pub fn on_clock(
        driver: T,
        service: S,
        limits: Limits,
        max_send_queue: usize,
        metrics: Arc<ShardMetrics>,
        clock: C,
    ) -> Self {
        let now = clock.now();
        let mut service = service;
        let notifier = Notifier::new(Box::new(driver.waker()));
        service.attach(notifier.clone());
        Self {
            service,
            clock,
            notifier,
            notified: Vec::new(),
            core: Core {
                now,
                untaken: 0,
                driver,
                conns: Table {
                    slots: Vec::new(),
                    len: 0,
                },
                limits,
                out: BytesMut::new(),
                shared: Vec::new(),
                events: Vec::new(),
                max_send_queue,
                metrics,
                stopping: false,
                control: None,
                backlog: VecDeque::new(),
                waiting_for_control: Vec::new(),
                decisions: Vec::new(),
                timers: BinaryHeap::new(),
                listeners: Vec::new(),
            },
        }
    }

    /// Links the shard to the control thread.
    pub(crate) fn set_control(&mut self, link: ShardLink<S::Up, S::Down>) {
        self.core.control = Some(link);
    }

    /// Listens on `at` (before running), sharing it with every shard of
    /// the process that listens there; connections it accepts are opened
    /// with [`Origin::Accepted`] naming the listener by the order of these
    /// calls. Returns the endpoint bound (port resolved).
    pub fn listen(&mut self, at: &Endpoint) -> io::Result<Endpoint> {
        let (id, local) = self.core.driver.listen(at, true)?;
        self.core.listeners.push(id);
        Ok(local)
    }

    /// The shard's transport (to listen or connect before running).
    pub fn transport(&mut self) -> &mut T {
        &mut self.core.driver
    }

    /// The service, e.g. to read its results after [`Shard::run`].
    pub fn service(&self) -> &S {
        &self.service
    }

    /// Runs until `stop` is set, then closes every connection (sending what
    /// is queued) and returns once all are closed or `drain` has passed.
    /// Between turns it sleeps in the transport's poll until the next
    /// deadline, on a real clock; on a virtual one it never sleeps.
    pub fn run(&mut self, stop: &AtomicBool, drain: Duration) -> io::Result<()> {
        self.core.now = self.clock.now();
        let mut next = self.tick(self.core.now);
        let mut drain_deadline = None;
        loop {
            let now = self.clock.now();
            let timeout = match (drain_deadline, next) {
                (Some(_), _) => Some(Duration::from_millis(10)),
                _ if !self.clock.is_real() => Some(Duration::ZERO),
                (None, Some(t)) => Some(t.saturating_duration_since(now)),
                (None, None) => None,
            };
            next = self.turn(timeout)?;
            let now = self.core.now;
            if stop.load(Ordering::Acquire) && drain_deadline.is_none() {
                self.core.stopping = true;
                drain_deadline = Some(now + drain);
                for id in self.core.conns.ids() {
                    // The service's last words first (they are sent before
                    // the close takes effect).
                    let service = &mut self.service;
                    Conns {
                        core: &mut self.core,
                    }
                    .with(id, |app, out| service.stopping(app, out));
                    self.core.driver.close(id);
                }
            }
            if let Some(deadline) = drain_deadline
                && (self.core.conns.len == 0 || now >= deadline)
            {
                return Ok(());
            }
        }
    }

    /// One turn of the loop: polls the transport (waiting up to `timeout`,
    /// less when the control rings need it), reads the clock, handles what
    /// happened, exchanges requests and decisions with the control thread,
    /// fires the connections' timers and ticks the service. Returns the
    /// next deadline (a timer or the service's tick). A test drives a shard
    /// on a [`ManualClock`](crate::ManualClock) turn by turn.
    pub fn turn(&mut self, timeout: Option<Duration>) -> io::Result<Option<Instant>> {
        // Announce sleep on the decision ring; sleep only if still empty.
        let may_sleep = self
            .core
            .control
            .as_mut()
            .is_none_or(|link| link.decisions.prepare_park());
        let timeout = if !may_sleep {
            Some(Duration::ZERO)
        } else if !self.core.backlog.is_empty() {
            // The control thread frees ring slots without waking us (we
            // are its producer): look again soon.
            Some(timeout.map_or(BACKLOG_RETRY, |t| t.min(BACKLOG_RETRY)))
        } else {
            timeout
        };
        self.core.driver.poll(&mut self.core.events, timeout)?;
        if let Some(link) = &mut self.core.control {
            link.decisions.cancel_park();
        }
        self.core.now = self.clock.now();
        let mut events = std::mem::take(&mut self.core.events);
        // Lent receive buffers in this batch not looked at yet: they are
        // not the receive memory this shard keeps.
        self.core.untaken = events
            .iter()
            .filter(|e| matches!(e, Event::Received { data, .. } if data.is_lent()))
            .count();
        for e in events.drain(..) {
            self.handle(e);
        }
        if events.capacity() > EVENTS_KEPT {
            events.shrink_to(EVENTS_KEPT); // a burst's room given back
        }
        self.core.events = events;
        self.notices();
        self.control_turn();
        let now = self.core.now;
        self.fire_timers(now);
        let next_tick = self.tick(now);
        self.core.publish_metrics();
        Ok(match (next_tick, self.core.next_timer()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// Runs [`Service::notified`] for every connection another thread
    /// named since the last turn (module `notify`).
    fn notices(&mut self) {
        self.notifier.take(&mut self.notified);
        if self.notified.is_empty() {
            return;
        }
        let mut notified = std::mem::take(&mut self.notified);
        for conn in notified.drain(..) {
            let service = &mut self.service;
            Conns {
                core: &mut self.core,
            }
            .with(conn, |app, out| service.notified(app, out));
        }
        self.notified = notified;
    }

    /// Sends what waits for the control ring, resumes connections that
    /// waited for room, and applies the control thread's decisions.
    fn control_turn(&mut self) {
        let Some(link) = &mut self.core.control else {
            return;
        };
        while let Some(r) = self.core.backlog.pop_front() {
            if let Err(r) = link.push(r) {
                self.core.backlog.push_front(r);
                break;
            }
        }
        link.wake();
        let queued = link.requests.len() + self.core.backlog.len();
        self.core
            .metrics
            .control_pending
            .store(queued as u64, Ordering::Relaxed);
        let mut decisions = std::mem::take(&mut self.core.decisions);
        link.decisions.pop_batch(&mut decisions, usize::MAX);
        if self.core.backlog.is_empty() {
            for conn in std::mem::take(&mut self.core.waiting_for_control) {
                if let Some(slot) = self.core.conns.get_mut(conn)
                    && slot.paused
                    && slot.pending.is_empty()
                {
                    slot.paused = false;
                    self.core.driver.resume_reading(conn);
                    if !slot.rx.is_empty() {
                        self.process_stream(conn, RecvBuf::default());
                    }
                }
            }
        }
        for d in decisions.drain(..) {
            self.apply(d);
        }
        self.core.decisions = decisions;
        self.service.decisions_done(&mut Conns {
            core: &mut self.core,
        });
        // A decision's callback may have asked the control thread again (a
        // paced replay's next page): wake it now, not at the next turn.
        if let Some(link) = &mut self.core.control {
            link.wake();
        }
    }

    /// Carries out one decision of the control thread.
    fn apply(&mut self, d: Decision<S::Down>) {
        match d {
            Decision::Service(d) => {
                let unclaimed = self.service.decision(
                    d,
                    &mut Conns {
                        core: &mut self.core,
                    },
                );
                if unclaimed.is_some() {
                    tracing::debug!("a decision no service of this shard takes");
                }
            }
            Decision::Close { conn, code, reason } => {
                // What the service held back of the decisions before this
                // one goes first.
                self.service.decisions_done(&mut Conns {
                    core: &mut self.core,
                });
                let service = &mut self.service;
                Conns {
                    core: &mut self.core,
                }
                .with(conn, |app, out| {
                    tracing::debug!(conn = conn.as_u64(), %code, %reason, "closing by decision");
                    service.close_with(app, code, &reason, out);
                    out.close();
                });
            }
        }
    }

    fn tick(&mut self, now: Instant) -> Option<Instant> {
        let mut ctl = ShardCtl {
            driver: &mut self.core.driver,
            limits: &self.core.limits,
            out: &mut self.core.out,
            stopping: self.core.stopping,
        };
        self.service.tick(now, &mut ctl)
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Accepted { conn, listener } => {
                if self.core.stopping {
                    self.core.driver.close(conn);
                } else {
                    let listener = self
                        .core
                        .listeners
                        .iter()
                        .position(|l| *l == listener)
                        .unwrap_or(0);
                    self.open(conn, Origin::Accepted { listener });
                }
            }
            Event::Connected { conn } => self.open(conn, Origin::Connected),
            Event::Received { conn, mut data } => {
                if data.is_lent() {
                    self.core.untaken = self.core.untaken.saturating_sub(1);
                }
                // Dropping `data` gives a lent chunk back to the transport.
                let Some(slot) = self.core.conns.get_mut(conn) else {
                    return;
                };
                if slot.closing {
                    return;
                }
                if data.is_lent() && self.core.driver.receive_pressure(self.core.untaken) {
                    // Half the receive memory is out: what this connection
                    // keeps must not hold on to more of it.
                    data = RecvBuf::from(BytesMut::from(&data[..]));
                }
                if slot.paused {
                    slot.rx.extend_from_slice(&data);
                    return;
                }
                self.process_stream(conn, data);
            }
            Event::Writable { conn } => self.writable(conn),
            Event::Closed { conn, reason } => {
                if let Some(slot) = self.core.conns.remove(conn) {
                    self.core.metrics.closed.fetch_add(1, Ordering::Relaxed);
                    self.core.tell_control(Request::Down { conn });
                    self.service.close(slot.app, reason, self.core.now);
                } else if let dtp_transports::CloseReason::ConnectFailed(errno) = reason {
                    self.service.connect_failed(conn, errno);
                }
            }
            Event::Woken => {}
        }
    }

    fn open(&mut self, conn: ConnId, origin: Origin) {
        self.core.metrics.opened.fetch_add(1, Ordering::Relaxed);
        self.core.tell_control(Request::Up { conn });
        self.core.out.clear();
        let budget = self.core.max_send_queue;
        let mut outbox = Outbox::new(
            &mut self.core.out,
            &self.core.limits,
            budget,
            budget,
            self.core.now,
        )
        .reusing(std::mem::take(&mut self.core.shared));
        let app = self.service.open(conn, origin, &mut outbox);
        let done = outbox.finish();
        self.core.conns.insert(Slot::new(conn, app, budget));
        self.core.after(conn, done);
    }

    /// Runs [`Service::timeout`] for every connection whose deadline passed.
    fn fire_timers(&mut self, now: Instant) {
        while let Some(at) = self.core.next_timer() {
            if at > now {
                return;
            }
            let Some(Reverse((_, id))) = self.core.timers.pop() else {
                return;
            };
            let conn = ConnId::from_u64(id);
            let Some(slot) = self.core.conns.get_mut(conn) else {
                continue;
            };
            slot.timer = None;
            if slot.closing {
                // A close that waited for refused bytes: done waiting.
                self.core.driver.close(conn);
                continue;
            }
            let service = &mut self.service;
            Conns {
                core: &mut self.core,
            }
            .with(conn, |app, out| service.timeout(app, now, out));
        }
    }

    fn writable(&mut self, conn: ConnId) {
        let Some(slot) = self.core.conns.get_mut(conn) else {
            return;
        };
        if !slot.pending.is_empty() {
            let mut pending = slot.pending.take();
            let sent = self.core.send_some(conn, &pending);
            let Some(slot) = self.core.conns.get_mut(conn) else {
                return;
            };
            if sent < pending.len() {
                pending.advance(sent);
                slot.pending.put(pending);
                return; // the rest when the driver reports room again
            }
        }
        let Some(slot) = self.core.conns.get_mut(conn) else {
            return;
        };
        if slot.closing {
            // A close that waited for its refused bytes: they have gone.
            self.core.driver.close(conn);
            return;
        }
        if slot.paused && !slot.closing {
            slot.paused = false;
            self.core.driver.resume_reading(conn);
            if !slot.rx.is_empty() {
                self.process_stream(conn, RecvBuf::default());
            }
        }
        let service = &mut self.service;
        Conns {
            core: &mut self.core,
        }
        .with(conn, |app, out| service.writable(app, out));
    }
}

/// [`Ctl`] over a shard's transport, for [`Service::tick`].
struct ShardCtl<'a, T> {
    driver: &'a mut T,
    limits: &'a Limits,
    out: &'a mut BytesMut,
    stopping: bool,
}

impl<T: Transport> Ctl for ShardCtl<'_, T> {
    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, ErrorCode> {
        self.driver.connect(to).map_err(|e| {
            tracing::debug!(%to, error = %e, "connect refused by the transport");
            ErrorCode::INTERNAL
        })
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
