//! The application of `dtp load --dtp --control` on one client shard, run
//! by the gateway crate's Fay-side service ([`DtpClient`]): one
//! [`ControlFlow`] per Fay of its share, started in waves, each on its own
//! transport connection; what they measure goes to the run loop through
//! [`Shared`] about ten times a second.
//!
//! **Owns**: the shard's Fays not yet started and its share of the
//! counters. **Never touches**: a flow's protocol (`super::flow`), the run
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
}

/// The application of one shard's [`DtpClient`]: one flow per Fay of its
/// share.
pub(super) struct ControlClient {
    template: ControlFlowConfig,
    /// The Fays of this shard not yet started, last first.
    pending: Vec<FaySetup>,
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
        }
    }
}

impl ControlClient {
    /// A shard's client service to `target`: `pending` are its Fays,
    /// started last first; it reports to `shared` and gives up waiting at
    /// `drain_until`.
    pub(super) fn new(
        target: dtp_transports::Endpoint,
        template: ControlFlowConfig,
        pending: Vec<FaySetup>,
        shared: Arc<Mutex<Shared>>,
        start: Instant,
        drain_until: Instant,
    ) -> Framed<DtpClient<Self>> {
        let app = Self {
            template,
            pending,
            stats: ControlStats::new(),
            shared,
        };
        Framed::new(DtpClient::new(app, target, start, drain_until))
    }
}

impl FayApp for ControlClient {
    type Flow = ControlFlow;

    fn new_flow(&mut self) -> Option<ControlFlow> {
        let setup = self.pending.pop()?;
        Some(ControlFlow::new(self.template.clone(), setup))
    }

    fn wants_connection(&self, flow: &ControlFlow) -> bool {
        flow.phase() == flow::Phase::Waiting
    }

    fn connecting(&mut self, flow: &mut ControlFlow) {
        flow.connecting();
    }

    fn connect_failed(&mut self, flow: &mut ControlFlow) {
        flow.handle_connect_failed();
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
        flow.open_failed(why, &mut self.stats);
    }

    fn event(
        &mut self,
        flow: &mut ControlFlow,
        _: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
    ) {
        flow.handle_event(event, now, &mut self.stats);
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
        if flow.poll_transmit(ep, out.wire(), now, &mut self.stats) {
            out.close();
        }
    }

    fn timer(&self, flow: &ControlFlow, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        flow.poll_timeout(ep, now)
    }

    fn lost(&mut self, flow: &mut ControlFlow, ep: Option<DtpEndpoint>, _: Instant) {
        flow.handle_lost(ep, &mut self.stats);
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
        };
        delta.ops += ops;
        delta.latency.merge(latency);
        delta.errors += stats.errors + stats.timeouts + counts.bad_random;
        let (mut failed, mut unfinished) = (0, 0);
        if last {
            failed = flows
                .iter()
                .filter(|f| f.phase() == flow::Phase::Failed)
                .count();
            unfinished = flows.iter().filter(|f| !f.is_finished()).count();
            delta.done = true;
        }
        let Ok(mut shared) = self.shared.lock() else {
            return;
        };
        let done = shared.tally.done || delta.done;
        shared.tally.merge(&delta);
        shared.tally.done = done;
        shared.stats.merge(&stats);
        shared.failed_flows += failed as u64;
        shared.unfinished += unfinished as u64;
    }
}
