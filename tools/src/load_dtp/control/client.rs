//! The application of `dtp load --dtp --control` on one client shard, run
//! by the gateway crate's Fay-side service ([`DtpClient`]): one
//! [`ControlFlow`] per Fay of its share, started in waves, each on its own
//! transport connection; what they measure goes to the run loop through
//! [`Shared`] about ten times a second.
//!
//! **Owns**: the shard's Fays not yet started, how many of its flows are
//! opening (bounded: `max_opening`), and its share of the counters. **Never touches**: a flow's protocol (`super::flow`), the run
//! loop (`super::run`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use dtp_bench::control_workload::ControlMode;
use dtp_engine::{Framed, Outbox};
use dtp_gateway::dtp::{
    ConnCounts, DtpClient, DtpEndpoint, DtpEvent, FayApp, FayConfig, OpenFailure, SuspendedSession,
};

use super::flow::{self, ControlFlow, ControlFlowConfig, FaySetup};
use super::stats::ControlStats;
use crate::load::Tally;

/// What a shard shares with the run loop.
pub(super) struct Shared {
    pub(super) tally: Tally,
    pub(super) stats: ControlStats,
    pub(super) failed_flows: u64,
    pub(super) unfinished: u64,
    /// Flows that still held their session when the window ended.
    pub(super) held_at_end: u64,
    /// Sessions the shard's Fays hold at its last report.
    pub(super) held: u64,
}

/// The application of one shard's [`DtpClient`]: one flow per Fay of its
/// share.
pub(super) struct ControlClient {
    template: ControlFlowConfig,
    /// The Fays of this shard not yet started, last first.
    pending: Vec<FaySetup>,
    /// Flows opening now ([`ControlFlow::is_opening`]), and the most at once.
    opening: usize,
    max_opening: usize,
    stats: ControlStats,
    shared: Arc<Mutex<Shared>>,
}

impl Shared {
    /// Nothing counted yet.
    pub(super) fn new() -> Self {
        Self {
            tally: Tally::new(),
            stats: ControlStats::new(),
            failed_flows: 0,
            unfinished: 0,
            held_at_end: 0,
            held: 0,
        }
    }
}

impl ControlClient {
    /// A shard's client service to `target`: `pending` are its Fays,
    /// started last first, at most `max_opening` opening at once; it
    /// reports to `shared` and gives up waiting at `drain_until`.
    pub(super) fn new(
        target: dtp_transports::Endpoint,
        template: ControlFlowConfig,
        pending: Vec<FaySetup>,
        max_opening: usize,
        shared: Arc<Mutex<Shared>>,
        start: Instant,
        drain_until: Instant,
    ) -> Framed<DtpClient<Self>> {
        let app = Self {
            template,
            pending,
            opening: 0,
            max_opening,
            stats: ControlStats::new(),
            shared,
        };
        Framed::new(DtpClient::new(app, target, start, drain_until))
    }

    /// Runs `f` on `flow` and its counters; a flow that stops opening
    /// frees its place for the next.
    fn settle(
        &mut self,
        flow: &mut ControlFlow,
        f: impl FnOnce(&mut ControlFlow, &mut ControlStats),
    ) {
        let before = flow.is_opening();
        f(flow, &mut self.stats);
        if before && !flow.is_opening() {
            self.opening = self.opening.saturating_sub(1);
        }
    }
}

impl FayApp for ControlClient {
    type Flow = ControlFlow;

    fn new_flow(&mut self) -> Option<ControlFlow> {
        if self.opening >= self.max_opening {
            return None;
        }
        let setup = self.pending.pop()?;
        self.opening += 1;
        Some(ControlFlow::new(self.template.clone(), setup))
    }

    fn has_more_flows(&self) -> bool {
        !self.pending.is_empty()
    }

    fn wants_connection(&self, flow: &ControlFlow) -> bool {
        flow.phase() == flow::Phase::Waiting
    }

    fn connecting(&mut self, flow: &mut ControlFlow) {
        flow.connecting();
    }

    fn connect_failed(&mut self, flow: &mut ControlFlow) {
        self.settle(flow, |f, _| f.handle_connect_failed());
    }

    fn is_finished(&self, flow: &ControlFlow) -> bool {
        flow.is_finished()
    }

    fn fay<'a>(&'a self, flow: &'a ControlFlow) -> &'a FayConfig {
        flow.fay()
    }

    fn connected(&mut self, flow: &mut ControlFlow, _: &mut DtpEndpoint, _: Instant) {
        flow.connected();
    }

    fn open_failed(
        &mut self,
        flow: &mut ControlFlow,
        why: OpenFailure,
        _: Option<SuspendedSession>,
        _: Instant,
    ) {
        self.settle(flow, |f, stats| f.open_failed(why, stats));
    }

    fn event(
        &mut self,
        flow: &mut ControlFlow,
        _: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
    ) {
        self.settle(flow, |f, stats| f.handle_event(event, now, stats));
    }

    fn events_done(&mut self, flow: &mut ControlFlow, _: &mut DtpEndpoint, _: Instant) {
        flow.events_done();
    }

    fn transmit(
        &mut self,
        flow: &mut ControlFlow,
        ep: &mut DtpEndpoint,
        out: &mut Outbox<'_>,
        now: Instant,
        _: &mut dyn FnMut(&mut [u8]),
    ) {
        let mut close = false;
        self.settle(flow, |f, stats| {
            close = f.poll_transmit(ep, out.wire(), now, stats);
        });
        if close {
            out.close();
        }
    }

    fn timer(&self, flow: &ControlFlow, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        flow.poll_timeout(ep, now)
    }

    fn lost(&mut self, flow: &mut ControlFlow, ep: Option<DtpEndpoint>, _: Instant) {
        self.settle(flow, |f, stats| f.handle_lost(ep, stats));
    }

    fn report(&mut self, flows: &[ControlFlow], counts: ConnCounts, last: bool) {
        let mut delta = Tally::new();
        delta.connected = counts.connected;
        delta.failed = counts.failed;
        delta.last_errno = counts.last_errno;
        let stats = std::mem::replace(&mut self.stats, ControlStats::new());
        let (ops, latency) = match self.template.mode {
            ControlMode::Decisions => (stats.decisions, &stats.decision_latency),
            ControlMode::Handovers => (stats.handovers, &stats.handover_latency),
            ControlMode::Idle => (stats.heartbeat_latency.count(), &stats.heartbeat_latency),
        };
        delta.ops += ops;
        delta.latency.merge(latency);
        delta.errors += stats.errors + stats.timeouts + counts.bad_random;
        let (mut failed, mut unfinished, mut held_at_end) = (0, 0, 0);
        if last {
            failed = flows
                .iter()
                .filter(|f| f.phase() == flow::Phase::Failed)
                .count();
            unfinished = flows.iter().filter(|f| !f.is_finished()).count();
            held_at_end = flows.iter().filter(|f| f.held_to_end()).count();
            delta.done = true;
        }
        let held = flows.iter().filter(|f| f.is_holding()).count() as u64;
        let Ok(mut shared) = self.shared.lock() else {
            return;
        };
        shared.held = held;
        let done = shared.tally.done || delta.done;
        shared.tally.merge(&delta);
        shared.tally.done = done;
        shared.stats.merge(&stats);
        shared.failed_flows += failed as u64;
        shared.unfinished += unfinished as u64;
        shared.held_at_end += held_at_end as u64;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use std::time::Duration;

    use dtp_bench::control_workload::ControlPlan;
    use dtp_bench::dtp_workload::BenchKeys;
    use dtp_codec::AccessMode;

    use super::*;
    use crate::load_dtp::control::ControlSpec;
    use crate::load_dtp::flow::MAX_FRESH_ATTEMPTS;

    /// At most `max_opening` flows open at once; one that settles (here:
    /// gives up after its connects failed) lets the next start, and the
    /// client is told more are held back until all have started.
    #[test]
    fn the_ramp_is_bounded_by_the_flows_opening() {
        let keys = BenchKeys::generate().unwrap();
        let plan = ControlPlan::new(ControlMode::Idle, 3, "r-");
        let spec = ControlSpec::mint(plan, AccessMode::Write, &keys.issuer, None).unwrap();
        let now = Instant::now();
        let mut pending = spec.fays.clone();
        pending.reverse();
        let mut app = ControlClient {
            template: ControlFlowConfig {
                mode: ControlMode::Idle,
                access: AccessMode::Write,
                measure_from: now,
                end: now + Duration::from_secs(1),
                heartbeat: Duration::from_secs(1),
            },
            pending,
            opening: 0,
            max_opening: 2,
            stats: ControlStats::new(),
            shared: Arc::new(Mutex::new(Shared::new())),
        };
        let mut first = app.new_flow().unwrap();
        let _second = app.new_flow().unwrap();
        assert!(app.new_flow().is_none(), "two are opening");
        assert!(app.has_more_flows());
        for _ in 0..MAX_FRESH_ATTEMPTS {
            app.connecting(&mut first);
            app.connect_failed(&mut first);
        }
        assert_eq!(first.phase(), flow::Phase::Failed);
        let third = app
            .new_flow()
            .expect("the first gave up: room for the third");
        assert!(third.is_opening());
        assert!(!app.has_more_flows());
        assert!(app.new_flow().is_none());
    }
}
