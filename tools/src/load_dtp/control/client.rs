//! The engine service of `dtp load --dtp --control` on one client shard:
//! one [`ControlFlow`] per Fay of its share, started in waves, each on its
//! own transport connection; what they measure goes to the run loop
//! through [`Shared`] about ten times a second.
//!
//! **Owns**: the shard's flows, their connections and its share of the
//! counters. **Never touches**: a flow's protocol (`super::flow`), the run
//! loop (`super::run`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dtp_bench::control_workload::ControlMode;
use dtp_codec::{ErrorCode, LogicalFrame};
use dtp_engine::{Ctl, Origin, Outbox, Service};
use dtp_transports::{CloseReason, ConnId, RecvBuf};
use ring::rand::{SecureRandom, SystemRandom};

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

/// The client service of one shard: one flow per Fay of its share.
pub(super) struct ControlClient {
    target: dtp_transports::Endpoint,
    template: ControlFlowConfig,
    /// The Fays of this shard not yet started, last first.
    pending: Vec<FaySetup>,
    flows: Vec<ControlFlow>,
    /// Flows waiting for a transport connection.
    to_connect: VecDeque<usize>,
    /// Connections being opened, and their flow.
    connecting: HashMap<ConnId, usize>,
    /// Flows that had a transport connection at least once.
    ever_connected: Vec<bool>,
    stats: ControlStats,
    tally: Tally,
    shared: Arc<Mutex<Shared>>,
    rng: SystemRandom,
    drain_until: Instant,
    last_flush: Instant,
    finished: bool,
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
    /// A shard's client: `pending` are its Fays, started last first;
    /// it reports to `shared` and gives up waiting at `drain_until`.
    pub(super) fn new(
        target: dtp_transports::Endpoint,
        template: ControlFlowConfig,
        pending: Vec<FaySetup>,
        shared: Arc<Mutex<Shared>>,
        start: Instant,
        drain_until: Instant,
    ) -> Self {
        Self {
            target,
            template,
            pending,
            flows: Vec::new(),
            to_connect: VecDeque::new(),
            connecting: HashMap::new(),
            ever_connected: Vec::new(),
            stats: ControlStats::new(),
            tally: Tally::new(),
            shared,
            rng: SystemRandom::new(),
            drain_until,
            last_flush: start,
            finished: false,
        }
    }

    /// After an input: transmit, the next deadline, close.
    fn drive(&mut self, idx: usize, out: &mut Outbox<'_>, now: Instant) {
        let Some(flow) = self.flows.get_mut(idx) else {
            out.close();
            return;
        };
        if flow.poll_transmit(out.wire(), now, &mut self.stats) {
            out.close();
        }
        out.set_timer(flow.poll_timeout(now));
    }

    fn queue_if_waiting(&mut self, idx: usize) {
        if self
            .flows
            .get(idx)
            .is_some_and(|f| f.phase() == flow::Phase::Waiting)
        {
            self.to_connect.push_back(idx);
        }
    }

    fn flush(&mut self, final_flush: bool) {
        let mut delta = Tally::new();
        std::mem::swap(&mut delta, &mut self.tally);
        let stats = std::mem::replace(&mut self.stats, ControlStats::new());
        let (ops, latency) = match self.template.mode {
            ControlMode::Decisions => (stats.decisions, &stats.decision_latency),
            ControlMode::Handovers => (stats.handovers, &stats.handover_latency),
        };
        delta.ops += ops;
        delta.latency.merge(latency);
        delta.errors += stats.errors + stats.timeouts;
        let (mut failed, mut unfinished) = (0, 0);
        if final_flush {
            failed = self
                .flows
                .iter()
                .filter(|f| f.phase() == flow::Phase::Failed)
                .count();
            unfinished = self.flows.iter().filter(|f| !f.is_finished()).count();
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

impl Service for ControlClient {
    type Conn = Option<usize>;
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, out: &mut Outbox<'_>) -> Option<usize> {
        let now = Instant::now();
        let Some(idx) = self.connecting.remove(&conn) else {
            out.close();
            return None;
        };
        if let Some(first) = self.ever_connected.get_mut(idx)
            && !*first
        {
            *first = true;
            self.tally.connected += 1;
        }
        let flow = self.flows.get_mut(idx)?;
        let rng = &self.rng;
        let mut ok = true;
        let started = flow.handle_connected(now, &mut |b| {
            if rng.fill(b).is_err() {
                ok = false;
            }
        });
        if let Err(e) = started {
            tracing::warn!(error = %e, "no DTP endpoint for a control load connection");
            self.stats.errors += 1;
            out.close();
            return Some(idx);
        }
        if !ok {
            // The CAP seed is not random: never run the handshake with it.
            self.stats.errors += 1;
            flow.handle_lost(&mut self.stats);
            out.close();
            return Some(idx);
        }
        self.drive(idx, out, now);
        Some(idx)
    }

    fn frame(
        &mut self,
        _: &mut Option<usize>,
        _: LogicalFrame,
        _: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        // Never called: frames come as wire bytes (`wants_wire`).
        Err(ErrorCode::INCONSISTENT)
    }

    fn wants_wire(&self) -> bool {
        true
    }

    fn frame_wire(
        &mut self,
        state: &mut Option<usize>,
        wire: RecvBuf,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        let Some(idx) = *state else {
            out.close();
            return Ok(());
        };
        let now = Instant::now();
        if let Some(flow) = self.flows.get_mut(idx) {
            flow.handle_frame(wire, now, &mut self.stats);
        }
        self.drive(idx, out, now);
        Ok(())
    }

    fn timeout(&mut self, state: &mut Option<usize>, now: Instant, out: &mut Outbox<'_>) {
        let Some(idx) = *state else { return };
        if let Some(flow) = self.flows.get_mut(idx) {
            flow.handle_timeout(now, &mut self.stats);
        }
        self.drive(idx, out, now);
    }

    fn writable(&mut self, state: &mut Option<usize>, out: &mut Outbox<'_>) {
        if let Some(idx) = *state {
            self.drive(idx, out, Instant::now());
        }
    }

    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        self.tally.failed += 1;
        self.tally.last_errno = errno;
        if let Some(idx) = self.connecting.remove(&conn) {
            if let Some(flow) = self.flows.get_mut(idx) {
                flow.handle_connect_failed();
            }
            self.queue_if_waiting(idx);
        }
    }

    fn close(&mut self, state: Option<usize>, _: CloseReason) {
        let Some(idx) = state else { return };
        if let Some(flow) = self.flows.get_mut(idx) {
            flow.handle_lost(&mut self.stats);
        }
        self.queue_if_waiting(idx);
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        if self.finished {
            return None;
        }
        // Start Fays in waves, so a large count does not flood the backlog.
        for _ in 0..256 {
            let Some(setup) = self.pending.pop() else {
                break;
            };
            self.to_connect.push_back(self.flows.len());
            self.flows
                .push(ControlFlow::new(self.template.clone(), setup));
            self.ever_connected.push(false);
        }
        if !ctl.stopping() {
            for _ in 0..self.to_connect.len() {
                let Some(idx) = self.to_connect.pop_front() else {
                    break;
                };
                let Some(flow) = self.flows.get_mut(idx) else {
                    continue;
                };
                if flow.phase() != flow::Phase::Waiting {
                    continue;
                }
                flow.connecting();
                match ctl.connect(&self.target) {
                    Ok(conn) => {
                        self.connecting.insert(conn, idx);
                    }
                    Err(_) => {
                        self.tally.failed += 1;
                        flow.handle_connect_failed();
                        self.queue_if_waiting(idx);
                    }
                }
            }
        }
        let all_done = self.pending.is_empty() && self.flows.iter().all(ControlFlow::is_finished);
        if all_done || now >= self.drain_until {
            self.flush(true);
            self.finished = true;
            return None;
        }
        if now.duration_since(self.last_flush) >= Duration::from_millis(100) {
            self.last_flush = now;
            self.flush(false);
        }
        Some(if !self.pending.is_empty() || !self.to_connect.is_empty() {
            now + Duration::from_millis(1)
        } else {
            now + Duration::from_millis(20)
        })
    }
}
