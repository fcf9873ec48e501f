//! The control thread: the single writer of every decision that spans
//! connections and cores (terminal sessions, liveness, handover, realtime
//! ledgers — DESIGN.md §1).
//!
//! Each shard is linked to it by two bounded lock-free SPSC rings
//! (`dtp_pool::spsc`): requests core → control (connection up and down, the
//! control-plane messages its connections sent) and decisions control →
//! core (messages to send, connections to close). Nothing else crosses
//! threads. A full ring is backpressure, never growth: a shard stops reading
//! a connection whose control message it cannot forward, and the control
//! thread stops taking a shard's requests while that shard's decision ring
//! is full. Wake-ups follow the ring's park protocol: the control thread
//! parks its OS thread, a shard sleeps in its driver's poll, and the side
//! that pushes wakes the other only when it announced sleep.
//!
//! The decisions themselves are a [`ControlPlane`]'s: a sans-IO state
//! machine that takes requests and time and answers with decisions.
//!
//! Code off the control thread (an admin surface, a policy's worker
//! thread) reaches the plane through its own channels and wakes the thread
//! with the [`ControlWaker`] the plane is given once, before the loop
//! starts ([`ControlPlane::attach`]); a woken thread ticks the plane.
//!
//! The wake-up protocol of [`run`] and [`ShardLink`] over several rings,
//! and of the [`ControlWaker`], is model-checked by loom on this very code
//! (`loom_tests` below, run with `--cfg loom`): a lost wake-up there is a
//! loom deadlock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::{Arc as WakeArc, atomic::AtomicBool as WakeFlag};
#[cfg(not(loom))]
use std::thread::current as current_thread;
use std::time::{Duration, Instant};

use dtp_codec::ErrorCode;
use dtp_pool::{Consumer, Producer};
use dtp_transports::{ConnId, Waker};
// The waker's own state is loom's under `--cfg loom`, so the model checks it.
#[cfg(loom)]
use loom::sync::{Arc as WakeArc, atomic::AtomicBool as WakeFlag};
#[cfg(loom)]
use loom::thread::current as current_thread;

use crate::sync::Thread;

/// What a shard tells the control thread: the connection signals every
/// service has (SPEC LIV-1), and the service's own messages `U`, carried
/// without being looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<U> {
    /// A connection is up (SPEC LIV-1: the connection signal).
    Up {
        /// The connection.
        conn: ConnId,
    },
    /// A connection is down (closed by either side or failed).
    Down {
        /// The connection.
        conn: ConnId,
    },
    /// A message of the shard's service to its control-plane half
    /// ([`Outbox::to_control`](crate::Outbox::to_control)).
    Service(U),
}

/// What the control thread tells a shard: a close the shard carries out
/// itself, or a message `D` for the shard's service
/// ([`Service::decision`](crate::Service::decision)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<D> {
    /// Close the connection with a close frame carrying `code`.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, as a code.
        code: ErrorCode,
        /// Why, for people.
        reason: String,
    },
    /// A message for the shard's service.
    Service(D),
}

/// The decisions of a control plane, sans-IO: requests and time in,
/// decisions (addressed to a shard) out. `U` and `D` are the messages of
/// the services it serves, to it and from it; the runtime carries them
/// without looking inside.
pub trait ControlPlane<U, D>: Send + 'static {
    /// Handles one request from shard `shard`.
    fn handle(
        &mut self,
        shard: usize,
        request: Request<U>,
        now: Instant,
        out: &mut Vec<(usize, Decision<D>)>,
    );

    /// Called after every batch, at the deadline it returned last, and
    /// whenever its [`ControlWaker`] was woken; returns its next deadline
    /// (`None`: only when requests arrive or the waker is woken).
    fn tick(&mut self, now: Instant, out: &mut Vec<(usize, Decision<D>)>) -> Option<Instant> {
        let _ = (now, out);
        None
    }

    /// Called once on the control thread, before the first request: the
    /// handle other threads use to have [`ControlPlane::tick`] called soon.
    /// The default ignores it.
    fn attach(&mut self, waker: ControlWaker) {
        let _ = waker;
    }
}

impl<U, D, P: ControlPlane<U, D> + ?Sized> ControlPlane<U, D> for Box<P> {
    fn handle(
        &mut self,
        shard: usize,
        request: Request<U>,
        now: Instant,
        out: &mut Vec<(usize, Decision<D>)>,
    ) {
        (**self).handle(shard, request, now, out);
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<(usize, Decision<D>)>) -> Option<Instant> {
        (**self).tick(now, out)
    }

    fn attach(&mut self, waker: ControlWaker) {
        (**self).attach(waker);
    }
}

/// Wakes the control thread so that it ticks its plane: for threads that
/// hand the plane work through their own channel (push first, then
/// [`ControlWaker::wake`]).
///
/// A wake is never lost: the flag is set before the thread is unparked, and
/// the control loop reads (and clears) it on every turn before it parks; a
/// park after an unpark returns at once. Several wakes before the thread
/// looks make one tick.
#[derive(Clone, Debug)]
pub struct ControlWaker {
    inner: WakeArc<WakerInner>,
}

#[derive(Debug)]
struct WakerInner {
    thread: Thread,
    woken: WakeFlag,
}

impl ControlWaker {
    /// A waker of `thread` (the control loop makes its own; tests that drive
    /// a plane on their own thread make one of that thread).
    pub fn new(thread: Thread) -> Self {
        ControlWaker {
            inner: WakeArc::new(WakerInner {
                thread,
                woken: WakeFlag::new(false),
            }),
        }
    }

    /// Has the thread tick its plane soon (after whatever this thread
    /// published before the call).
    pub fn wake(&self) {
        // Release: what was pushed before is seen by the thread that takes
        // the flag (Acquire). A read-modify-write, like the taker's swap:
        // RMWs on one word are totally ordered, so the take after the unpark
        // reads this wake (with a plain store here the loom model below
        // found the take reading the old value). Unparking every time costs
        // one atomic swap when the thread is awake; wakes are rare (admin
        // calls, model replies).
        self.inner.woken.swap(true, Ordering::Release);
        self.inner.thread.unpark();
    }

    /// Whether a wake came since the last call (clearing it).
    pub(crate) fn take(&self) -> bool {
        self.inner.woken.swap(false, Ordering::Acquire)
    }
}

/// Counters of the control thread and its rings.
#[derive(Debug, Default)]
pub struct ControlMetrics {
    /// Requests taken off the rings.
    pub requests: AtomicU64,
    /// Decisions pushed onto the rings.
    pub decisions: AtomicU64,
    /// Times the control thread parked (nothing to do).
    pub parks: AtomicU64,
    /// Times a decision ring was full and the thread held back.
    pub decision_ring_full: AtomicU64,
}

/// A shard's end of its two control rings.
///
/// Field order matters on drop: the request ring's producer goes first,
/// marking the ring abandoned, and only then is the control thread woken to
/// notice (woken first, it could look, find the ring still open, and sleep
/// for good — found by the loom model below).
pub(crate) struct ShardLink<U, D> {
    pub(crate) requests: Producer<Request<U>>,
    #[cfg_attr(
        loom,
        allow(dead_code, reason = "the shard loop is not built under loom")
    )]
    pub(crate) decisions: Consumer<Decision<D>>,
    /// A request was pushed since the last [`ShardLink::wake`].
    pub(crate) pushed: bool,
    pub(crate) control: UnparkOnDrop,
}

impl<U, D> ShardLink<U, D> {
    /// Pushes a request; gives it back when the ring is full. The control
    /// thread is woken once per loop turn, by [`ShardLink::wake`].
    pub(crate) fn push(&mut self, r: Request<U>) -> Result<(), Request<U>> {
        self.requests.push(r).map_err(|full| full.into_inner())?;
        self.pushed = true;
        Ok(())
    }

    /// Wakes the control thread if a request was pushed since the last call
    /// and the control thread announced sleep (once per turn: the check is an
    /// atomic read-modify-write). A turn that pushed nothing costs nothing:
    /// a parked control thread has nothing new to see.
    pub(crate) fn wake(&mut self) {
        if std::mem::take(&mut self.pushed) && self.requests.needs_wake() {
            self.control.0.unpark();
        }
    }
}

/// The control thread's handle, which unparks it when dropped: a shard that
/// goes away (its link dropped) must be noticed.
pub(crate) struct UnparkOnDrop(pub(crate) Thread);

impl Drop for UnparkOnDrop {
    fn drop(&mut self) {
        self.0.unpark();
    }
}

/// Wakes a shard that sleeps in its driver's poll.
pub(crate) trait WakeShard: Send {
    /// Wakes it; a shard that cannot be woken notices at its next event.
    fn wake(&self);
}

impl WakeShard for Waker {
    fn wake(&self) {
        let _ = Waker::wake(self);
    }
}

/// The control thread's end of one shard's rings.
pub(crate) struct ControlLink<U, D> {
    pub(crate) requests: Consumer<Request<U>>,
    pub(crate) decisions: Producer<Decision<D>>,
    pub(crate) waker: Box<dyn WakeShard>,
    /// Decisions for this shard that did not fit its ring yet (at most one
    /// batch: while any wait here, the shard's requests are not taken).
    pub(crate) held: std::collections::VecDeque<Decision<D>>,
}

/// Requests taken from one shard per turn, so one busy shard cannot starve
/// the others.
const BATCH: usize = 256;

/// Decisions held back for one shard beyond which the thread takes no
/// request from any shard until they are delivered (bounded memory).
const HELD_CAP: usize = 4 * BATCH;

/// Runs the control thread until `stop` is set and every shard is gone.
pub(crate) fn run<U: 'static, D: 'static>(
    mut plane: Box<dyn ControlPlane<U, D>>,
    mut links: Vec<ControlLink<U, D>>,
    stop: Arc<AtomicBool>,
    metrics: Arc<ControlMetrics>,
) {
    let mut out: Vec<(usize, Decision<D>)> = Vec::new();
    let mut batch: Vec<Request<U>> = Vec::with_capacity(BATCH);
    let waker = ControlWaker::new(current_thread());
    plane.attach(waker.clone());
    // One tick at once: work handed to the plane before it was attached
    // (an admin call made while the loop was starting) found no waker to
    // wake, and must not wait for the next request to be seen.
    let mut deadline: Option<Instant> = Some(Instant::now());
    loop {
        let worked = serve_requests(
            &mut *plane,
            &mut links,
            &mut batch,
            &mut out,
            &metrics,
            Instant::now,
        );
        let now = Instant::now();
        // Read on every turn, before any park: a wake that comes after this
        // read unparks the park below (or the next one) and is read then.
        let woken = waker.take();
        if deadline.is_some_and(|d| now >= d) || worked || woken {
            deadline = plane.tick(now, &mut out);
            route(&mut links, &mut out, &metrics);
        }
        if worked {
            continue;
        }
        let all_gone = links
            .iter()
            .all(|l| l.requests.is_abandoned() && l.requests.is_empty());
        if all_gone || (stop.load(Ordering::Acquire) && links.iter().all(|l| l.requests.is_empty()))
        {
            return;
        }
        // Announce sleep on every ring, then sleep unless something arrived.
        let mut may_sleep = true;
        for l in &mut links {
            // A shard that left has nothing more to say: its ring must not
            // keep us awake (`prepare_park` refuses on an abandoned ring, so
            // counting it would spin this thread until every shard left —
            // found by the loom model below).
            if l.requests.is_abandoned() && l.requests.is_empty() {
                continue;
            }
            if !l.requests.prepare_park() {
                may_sleep = false;
            }
        }
        let held = links.iter().any(|l| !l.held.is_empty());
        if may_sleep {
            metrics.parks.fetch_add(1, Ordering::Relaxed);
            // Held decisions are retried soon; the shard frees room as it polls.
            let wait = match (deadline, held) {
                (_, true) => Some(Duration::from_millis(1)),
                (Some(d), false) => Some(d.saturating_duration_since(now)),
                (None, false) => None,
            };
            match wait {
                Some(w) => crate::sync::park_timeout(w),
                None => crate::sync::park(),
            }
        }
        for l in &mut links {
            l.requests.cancel_park();
        }
    }
}

/// Takes a batch of requests from every shard whose decision ring has
/// room, hands them to `plane` and routes its decisions; true when any
/// request was taken. While one shard's held decisions pile up, no shard's
/// requests are taken (bounded memory).
pub(crate) fn serve_requests<U: 'static, D: 'static>(
    plane: &mut dyn ControlPlane<U, D>,
    links: &mut [ControlLink<U, D>],
    batch: &mut Vec<Request<U>>,
    out: &mut Vec<(usize, Decision<D>)>,
    metrics: &ControlMetrics,
    clock: impl Fn() -> Instant,
) -> bool {
    let mut worked = false;
    let saturated = links.iter().any(|l| l.held.len() >= HELD_CAP);
    for shard in 0..links.len() {
        // Decisions held back for a full ring go first.
        if !flush_held(&mut links[shard], metrics) {
            metrics.decision_ring_full.fetch_add(1, Ordering::Relaxed);
            continue; // backpressure: take nothing more from this shard now
        }
        if saturated {
            continue;
        }
        batch.clear();
        links[shard].requests.pop_batch(batch, BATCH);
        if batch.is_empty() {
            continue;
        }
        worked = true;
        metrics
            .requests
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let now = clock();
        for r in batch.drain(..) {
            plane.handle(shard, r, now, out);
        }
        route(links, out, metrics);
    }
    worked
}

/// Pushes held decisions; true when none is left held.
fn flush_held<U, D>(link: &mut ControlLink<U, D>, metrics: &ControlMetrics) -> bool {
    let mut pushed = false;
    while let Some(d) = link.held.pop_front() {
        match link.decisions.push(d) {
            Ok(()) => {
                pushed = true;
                metrics.decisions.fetch_add(1, Ordering::Relaxed);
            }
            Err(full) => {
                link.held.push_front(full.into_inner());
                break;
            }
        }
    }
    if pushed && link.decisions.needs_wake() {
        link.waker.wake();
    }
    link.held.is_empty()
}

pub(crate) fn route<U, D>(
    links: &mut [ControlLink<U, D>],
    out: &mut Vec<(usize, Decision<D>)>,
    metrics: &ControlMetrics,
) {
    for (shard, d) in out.drain(..) {
        if let Some(link) = links.get_mut(shard) {
            link.held.push_back(d);
        }
    }
    for link in links.iter_mut() {
        if !link.held.is_empty() {
            flush_held(link, metrics);
        }
    }
}

/// Loom model checks of the real control loop ([`run`]) and the shard side
/// of the wake-up protocol ([`ShardLink::push`] / [`ShardLink::wake`]).
/// Run with `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test
/// -p dtp-engine --release --lib control::loom_tests`.
#[cfg(all(test, loom))]
mod loom_tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;
    use loom::thread;

    /// Counts requests; decides nothing.
    struct Count(loom::sync::Arc<loom::sync::atomic::AtomicUsize>);

    impl ControlPlane<(), ()> for Count {
        fn handle(
            &mut self,
            _: usize,
            _: Request<()>,
            _: Instant,
            _: &mut Vec<(usize, Decision<()>)>,
        ) {
            self.0.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A shard that never sleeps needs no wake-up.
    struct NoWake;

    impl WakeShard for NoWake {
        fn wake(&self) {}
    }

    fn up(i: usize) -> Request<()> {
        Request::Up {
            conn: ConnId::from_u64(i as u64),
        }
    }

    /// Shards push requests (`turns[i]` per loop turn, waking the control
    /// thread once per turn), then go away. In no interleaving may the
    /// control thread sleep through a request or miss that every shard
    /// left. Rings of two slots; a push that finds the ring full is retried
    /// on the next turn, as a shard's backlog would.
    fn model(turns: &'static [&'static [usize]]) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(move || {
            let count = loom::sync::Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let mut links = Vec::new();
            let mut shard_links = Vec::new();
            let (ltx, lrx) = loom::sync::mpsc::channel();
            let plane = Count(count.clone());
            let control = thread::spawn(move || {
                let links = lrx.recv().unwrap();
                run(
                    Box::new(plane),
                    links,
                    Arc::new(AtomicBool::new(false)),
                    Arc::new(ControlMetrics::default()),
                );
            });
            for _ in turns {
                let (req_tx, req_rx) = dtp_pool::spsc(2).unwrap();
                let (dec_tx, dec_rx) = dtp_pool::spsc(2).unwrap();
                links.push(ControlLink {
                    requests: req_rx,
                    decisions: dec_tx,
                    waker: Box::new(NoWake),
                    held: Default::default(),
                });
                shard_links.push(ShardLink {
                    requests: req_tx,
                    decisions: dec_rx,
                    pushed: false,
                    control: UnparkOnDrop(control.thread().clone()),
                });
            }
            ltx.send(links).unwrap();
            let shards: Vec<_> = shard_links
                .into_iter()
                .zip(turns)
                .map(|(mut link, &turns)| {
                    thread::spawn(move || {
                        let mut backlog = 0;
                        for &n in turns {
                            backlog += n;
                            while backlog > 0 && link.push(up(backlog)).is_ok() {
                                backlog -= 1;
                            }
                            link.wake();
                        }
                        // The last turns: drain the backlog, yielding while
                        // the ring is full.
                        while backlog > 0 {
                            if link.push(up(backlog)).is_ok() {
                                backlog -= 1;
                            } else {
                                thread::yield_now();
                            }
                            link.wake();
                        }
                        turns.iter().sum::<usize>()
                    })
                })
                .collect();
            let pushed: usize = shards.into_iter().map(|s| s.join().unwrap()).sum();
            control.join().unwrap();
            // Every request was handled.
            assert_eq!(count.load(loom::sync::atomic::Ordering::SeqCst), pushed);
        });
    }

    /// Hands its waker to another thread at attach; acknowledges the first
    /// tick that sees that thread's flag.
    struct Woken {
        waker_tx: loom::sync::mpsc::Sender<ControlWaker>,
        flag: loom::sync::Arc<loom::sync::atomic::AtomicBool>,
        ack: Option<loom::sync::mpsc::Sender<()>>,
    }

    impl ControlPlane<(), ()> for Woken {
        fn handle(
            &mut self,
            _: usize,
            _: Request<()>,
            _: Instant,
            _: &mut Vec<(usize, Decision<()>)>,
        ) {
        }

        fn tick(&mut self, _: Instant, _: &mut Vec<(usize, Decision<()>)>) -> Option<Instant> {
            if self.flag.load(loom::sync::atomic::Ordering::SeqCst)
                && let Some(ack) = self.ack.take()
            {
                ack.send(()).unwrap();
            }
            None
        }

        fn attach(&mut self, waker: ControlWaker) {
            self.waker_tx.send(waker).unwrap();
        }
    }

    /// Another thread publishes work (a flag) and wakes the control thread,
    /// which has no request and no deadline: in no interleaving may it
    /// sleep through the wake (the other thread waits for the tick's
    /// acknowledgement before its shard leaves, so a lost wake is a loom
    /// deadlock).
    #[test]
    fn loom_a_wake_is_never_lost() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let flag = loom::sync::Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let (waker_tx, waker_rx) = loom::sync::mpsc::channel();
            let (ack_tx, ack_rx) = loom::sync::mpsc::channel();
            let (ltx, lrx) = loom::sync::mpsc::channel();
            let plane = Woken {
                waker_tx,
                flag: flag.clone(),
                ack: Some(ack_tx),
            };
            let control = thread::spawn(move || {
                let links = lrx.recv().unwrap();
                run(
                    Box::new(plane),
                    links,
                    Arc::new(AtomicBool::new(false)),
                    Arc::new(ControlMetrics::default()),
                );
            });
            let (req_tx, req_rx) = dtp_pool::spsc(2).unwrap();
            let (dec_tx, dec_rx) = dtp_pool::spsc(2).unwrap();
            ltx.send(vec![ControlLink {
                requests: req_rx,
                decisions: dec_tx,
                waker: Box::new(NoWake),
                held: Default::default(),
            }])
            .unwrap();
            let link = ShardLink {
                requests: req_tx,
                decisions: dec_rx,
                pushed: false,
                control: UnparkOnDrop(control.thread().clone()),
            };
            let other = thread::spawn(move || {
                let waker: ControlWaker = waker_rx.recv().unwrap();
                flag.store(true, loom::sync::atomic::Ordering::SeqCst);
                waker.wake();
                ack_rx.recv().unwrap();
                drop(link);
            });
            other.join().unwrap();
            control.join().unwrap();
        });
    }

    #[test]
    fn loom_two_shards_one_request_each() {
        model(&[&[1], &[1]]);
    }

    #[test]
    fn loom_one_shard_two_turns() {
        model(&[&[1, 1]]);
    }

    #[test]
    fn loom_one_shard_overfills_its_ring() {
        model(&[&[3]]);
    }
}
