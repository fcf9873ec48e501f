//! `/healthz` and `/readyz` on the admin port, for supervisors and load
//! balancers; neither needs the admin token.
//!
//! - `GET /healthz` (liveness): `200 ok` whenever the admin port answers —
//!   the process is alive and serving.
//! - `GET /readyz` (readiness): `200 ready` only while every core shard
//!   runs and the control thread answers a probe within
//!   [`CONTROL_PROBE`]; otherwise `503` and one line saying why
//!   (`draining`, `shard 1 is not running`, `the control thread does not
//!   answer`).
//!
//! How it knows, without reaching into the engine: a shard is up from the
//! moment the engine calls the service factory on the shard's own thread
//! (the engine makes each shard's service there) until that thread exits,
//! which drops a guard kept in a thread-local; the control thread is
//! probed through [`Probed`], a wrapper of its plane that answers on the
//! next tick the probe's wake-up causes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::app::{Decisions, GatewayDown, GatewayPlane, GatewayRequest, GatewayUp, PlaneEvent};
use dtp_engine::{ControlPlane, ControlWaker};

/// The longest `/readyz` waits for the control thread.
pub(super) const CONTROL_PROBE: Duration = Duration::from_secs(1);

/// What `/readyz` looks at.
pub struct Health {
    /// Per shard: its thread runs.
    shards: Vec<AtomicBool>,
    /// SIGINT/SIGTERM came: no new connections.
    draining: AtomicBool,
    probe: Arc<ControlProbe>,
}

/// The control thread's side of the readiness probe.
#[derive(Default)]
pub(super) struct ControlProbe {
    /// Set once the control loop attaches its plane.
    waker: OnceLock<ControlWaker>,
    /// Probes asked / answered (the highest asked number seen by a tick).
    asked: AtomicU64,
    answered: AtomicU64,
}

impl Health {
    /// Health of a gateway of `shards` shards, none of them up yet.
    pub fn new(shards: usize) -> Arc<Self> {
        Arc::new(Health {
            shards: (0..shards).map(|_| AtomicBool::new(false)).collect(),
            draining: AtomicBool::new(false),
            probe: Arc::default(),
        })
    }

    /// Called on shard `index`'s own thread as it starts: the shard counts
    /// as up until that thread exits.
    pub fn shard_started(self: &Arc<Self>, index: usize) {
        if let Some(up) = self.shards.get(index) {
            up.store(true, Ordering::Release);
        }
        let guard = ShardUp {
            health: self.clone(),
            index,
        };
        SHARD_UP.with(|s| *s.borrow_mut() = Some(guard));
    }

    /// The gateway stops taking connections.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }

    /// `plane` with the readiness probe answered on its control thread.
    pub fn probed(&self, plane: Box<dyn GatewayPlane>) -> Box<dyn GatewayPlane> {
        Box::new(Probed {
            inner: plane,
            probe: self.probe.clone(),
        })
    }

    /// `Ok(())` when ready, else why not (one line).
    pub fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::Acquire) {
            return Err("draining: the gateway is stopping".to_owned());
        }
        if let Some(i) = self.shards.iter().position(|s| !s.load(Ordering::Acquire)) {
            return Err(format!("shard {i} is not running"));
        }
        if !self.probe.answers(CONTROL_PROBE) {
            return Err(format!(
                "the control thread does not answer (waited {} ms)",
                CONTROL_PROBE.as_millis()
            ));
        }
        Ok(())
    }
}

impl ControlProbe {
    /// Wakes the control thread and waits up to `within` for a tick (and,
    /// just after start-up, for its loop to attach).
    fn answers(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut asked = None;
        loop {
            match (asked, self.waker.get()) {
                (Some(n), _) if self.answered.load(Ordering::Acquire) >= n => return true,
                (None, Some(waker)) => {
                    asked = Some(self.asked.fetch_add(1, Ordering::AcqRel) + 1);
                    waker.wake();
                    continue;
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

thread_local! {
    /// On a shard's thread: marks the shard down when the thread exits.
    static SHARD_UP: RefCell<Option<ShardUp>> = const { RefCell::new(None) };
}

struct ShardUp {
    health: Arc<Health>,
    index: usize,
}

impl Drop for ShardUp {
    fn drop(&mut self) {
        if let Some(up) = self.health.shards.get(self.index) {
            up.store(false, Ordering::Release);
        }
    }
}

/// A control plane that also answers readiness probes: every tick (which
/// a probe's wake-up causes) records the probes asked so far.
struct Probed {
    inner: Box<dyn GatewayPlane>,
    probe: Arc<ControlProbe>,
}

impl ControlPlane<GatewayUp, GatewayDown> for Probed {
    fn handle(&mut self, shard: usize, request: GatewayRequest, now: Instant, out: &mut Decisions) {
        self.inner.handle(shard, request, now, out);
    }

    fn tick(&mut self, now: Instant, out: &mut Decisions) -> Option<Instant> {
        let asked = self.probe.asked.load(Ordering::Acquire);
        self.probe.answered.store(asked, Ordering::Release);
        self.inner.tick(now, out)
    }

    fn attach(&mut self, waker: ControlWaker) {
        let _ = self.probe.waker.set(waker.clone());
        self.inner.attach(waker);
    }
}

impl GatewayPlane for Probed {
    fn enable_events(&mut self) {
        self.inner.enable_events();
    }

    fn drain_events(&mut self, out: &mut Vec<PlaneEvent>) {
        self.inner.drain_events(out);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::app::{Decisions, GatewayDown, GatewayPlane, GatewayRequest, GatewayUp};

    /// Decides nothing: the probe's ticks are what is tested.
    struct MinimalControl;

    impl GatewayPlane for MinimalControl {}

    impl ControlPlane<GatewayUp, GatewayDown> for MinimalControl {
        fn handle(&mut self, _: usize, _: GatewayRequest, _: Instant, _: &mut Decisions) {}
    }

    #[test]
    fn ready_needs_every_shard_and_a_ticking_control_thread() {
        let health = Health::new(2);
        assert_eq!(health.ready().unwrap_err(), "shard 0 is not running");
        let h = health.clone();
        std::thread::spawn(move || h.shard_started(0))
            .join()
            .unwrap();
        // That shard's thread is gone again.
        assert_eq!(health.ready().unwrap_err(), "shard 0 is not running");
        // Two shard threads that run until told to stop.
        let (up_tx, up_rx) = std::sync::mpsc::channel();
        let mut stops = Vec::new();
        let shards: Vec<_> = (0..2)
            .map(|i| {
                let (h, up) = (health.clone(), up_tx.clone());
                let (stop, stopped) = std::sync::mpsc::channel::<()>();
                stops.push(stop);
                std::thread::spawn(move || {
                    h.shard_started(i);
                    up.send(()).unwrap();
                    let _ = stopped.recv();
                })
            })
            .collect();
        up_rx.recv().unwrap();
        up_rx.recv().unwrap();
        // No control loop attached yet: not ready.
        assert!(health.ready().unwrap_err().contains("control thread"));
        // A control loop of our own that ticks when woken.
        let mut plane = health.probed(Box::new(MinimalControl));
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (attached_tx, attached_rx) = std::sync::mpsc::channel();
        let control = std::thread::spawn(move || {
            plane.attach(ControlWaker::new(std::thread::current()));
            attached_tx.send(()).unwrap();
            while stop_rx.try_recv().is_err() {
                std::thread::park();
                plane.tick(Instant::now(), &mut Vec::new());
            }
        });
        attached_rx.recv().unwrap();
        assert_eq!(health.ready(), Ok(()));
        // A control thread that no longer ticks does not answer.
        stop_tx.send(()).unwrap();
        control.thread().unpark();
        control.join().unwrap();
        assert!(health.ready().unwrap_err().contains("does not answer"));
        // A shard whose thread ends is not running.
        let mut shards = shards.into_iter();
        let (first, second) = (shards.next().unwrap(), shards.next().unwrap());
        drop(stops.pop());
        second.join().unwrap();
        assert_eq!(health.ready().unwrap_err(), "shard 1 is not running");
        health.set_draining();
        assert!(health.ready().unwrap_err().starts_with("draining"));
        drop(stops);
        first.join().unwrap();
    }
}
