//! A whole engine on the calling thread, turned by hand: the shards and
//! their control plane linked by the same rings as in [`Engine`], but no
//! thread, no sleep and, on a [`ManualClock`](crate::ManualClock), no real
//! time (DESIGN.md §2: quinn's `Pair`, for the whole stack). For tests of a
//! whole gateway over the in-memory transport and the fault injector.
//!
//! [`Engine`]: crate::Engine

use std::io;
use std::time::{Duration, Instant};

use dtp_transports::Transport;

use crate::clock::Clock;
use crate::control::{
    self, ControlLink, ControlMetrics, ControlPlane, ControlWaker, Decision, Request, ShardLink,
    UnparkOnDrop,
};
use crate::service::Service;
use crate::shard::Shard;

/// Shards and their control plane, on one thread and one clock.
pub struct Local<T: Transport, S: Service, C: Clock> {
    shards: Vec<Shard<T, S, C>>,
    plane: Box<dyn ControlPlane<S::Up, S::Down>>,
    links: Vec<ControlLink<S::Up, S::Down>>,
    clock: C,
    metrics: ControlMetrics,
    batch: Vec<Request<S::Up>>,
    out: Vec<(usize, Decision<S::Down>)>,
    /// The plane's next deadline (`Some(now)` at first: one tick at once).
    deadline: Option<Instant>,
    waker: ControlWaker,
}

/// A shard never waits for the control ring here: nobody sleeps.
struct NoWake;

impl control::WakeShard for NoWake {
    fn wake(&self) {}
}

impl<T: Transport, S: Service, C: Clock + Clone> Local<T, S, C> {
    /// Links `shards` (made with [`Shard::on_clock`] on clones of `clock`)
    /// to `plane` through rings of `ring` slots each way.
    pub fn new(
        mut shards: Vec<Shard<T, S, C>>,
        mut plane: Box<dyn ControlPlane<S::Up, S::Down>>,
        clock: C,
        ring: usize,
    ) -> io::Result<Self> {
        let mut links = Vec::with_capacity(shards.len());
        let thread = std::thread::current();
        for shard in &mut shards {
            let err = |e: dtp_pool::RingError| io::Error::other(e.to_string());
            let (req_tx, req_rx) = dtp_pool::spsc(ring).map_err(err)?;
            let (dec_tx, dec_rx) = dtp_pool::spsc(ring).map_err(err)?;
            shard.set_control(ShardLink {
                requests: req_tx,
                decisions: dec_rx,
                pushed: false,
                control: UnparkOnDrop(thread.clone()),
            });
            links.push(ControlLink {
                requests: req_rx,
                decisions: dec_tx,
                waker: Box::new(NoWake),
                held: Default::default(),
            });
        }
        let waker = ControlWaker::new(thread);
        plane.attach(waker.clone());
        let deadline = Some(clock.now());
        Ok(Self {
            shards,
            plane,
            links,
            clock,
            metrics: ControlMetrics::default(),
            batch: Vec::new(),
            out: Vec::new(),
            deadline,
            waker,
        })
    }

    /// Shard `i`, e.g. to listen or to read its service.
    pub fn shard(&mut self, i: usize) -> &mut Shard<T, S, C> {
        &mut self.shards[i]
    }

    /// One turn of every shard (their transports polled without waiting),
    /// then of the control plane: its requests handled, its deadline or a
    /// wake-up ticked. Returns the earliest deadline of them all.
    pub fn turn(&mut self) -> io::Result<Option<Instant>> {
        let mut next: Option<Instant> = None;
        for shard in &mut self.shards {
            if let Some(at) = shard.turn(Some(Duration::ZERO))? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        let clock = self.clock.clone();
        let worked = control::serve_requests(
            &mut *self.plane,
            &mut self.links,
            &mut self.batch,
            &mut self.out,
            &self.metrics,
            || clock.now(),
        );
        let now = self.clock.now();
        let woken = self.waker.take();
        if self.deadline.is_some_and(|d| now >= d) || worked || woken {
            self.deadline = self.plane.tick(now, &mut self.out);
            control::route(&mut self.links, &mut self.out, &self.metrics);
        }
        Ok(match (next, self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// Turns until `done` holds or `turns` turns have passed; whether it
    /// held.
    pub fn turn_until(
        &mut self,
        turns: usize,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> io::Result<bool> {
        for _ in 0..turns {
            if done(self) {
                return Ok(true);
            }
            self.turn()?;
        }
        Ok(done(self))
    }

    /// The plane's counters.
    pub fn control_metrics(&self) -> &ControlMetrics {
        &self.metrics
    }
}
