//! What the control flows of a shard measure, merged across shards at
//! the end of a run.

use std::collections::BTreeMap;

use dtp_bench::latency::LatencyRecorder;

use crate::load::Failures;

/// What the flows of a shard measured; the driver owns one and lends it
/// to every input.
#[derive(Clone, Debug)]
pub(crate) struct ControlStats {
    /// AuthResults inside the measured window (granted or refused).
    pub(crate) decisions: u64,
    /// Handovers won inside the measured window.
    pub(crate) handovers: u64,
    /// AuthRequest → AuthResult, inside the window.
    pub(crate) decision_latency: LatencyRecorder,
    /// AuthRequest → AuthResult of the handovers won, inside the window.
    pub(crate) handover_latency: LatencyRecorder,
    /// SessionRelease → SessionStateChanged(terminated), inside the window.
    pub(crate) release_latency: LatencyRecorder,
    /// Refused AuthRequests by code, over the whole run.
    pub(crate) refused: BTreeMap<u16, u64>,
    /// Requests or releases not answered within [`STALL`](super::flow::STALL).
    pub(crate) timeouts: u64,
    /// HandoverFailedNotifications received.
    pub(crate) handover_failures: u64,
    /// Protocol errors, unexpected answers, sessions ended by the
    /// terminal for a reason other than a handover, lost connections.
    pub(crate) errors: u64,
    /// AuthRequests granted, over the whole run.
    pub(crate) granted: u64,
    /// Fays whose DTP session was established.
    pub(crate) established: u64,
    /// Refusals and connection closes by code, with the terminal's message.
    pub(crate) failures: Failures,
    /// `idle`: heartbeats sent and HeartbeatAcks received, over the run.
    pub(crate) heartbeats_sent: u64,
    pub(crate) heartbeats_answered: u64,
    /// `idle`: heartbeat → its HeartbeatAck, inside the window.
    pub(crate) heartbeat_latency: LatencyRecorder,
    /// Sessions held whose connection was lost or closed by the terminal.
    pub(crate) lost: u64,
    /// Sessions held that the terminal ended (other than by a handover).
    pub(crate) ended: u64,
}

impl ControlStats {
    /// Nothing measured yet.
    pub(crate) fn new() -> Self {
        Self {
            decisions: 0,
            handovers: 0,
            decision_latency: LatencyRecorder::new(),
            handover_latency: LatencyRecorder::new(),
            release_latency: LatencyRecorder::new(),
            refused: BTreeMap::new(),
            timeouts: 0,
            handover_failures: 0,
            errors: 0,
            granted: 0,
            established: 0,
            failures: Failures::default(),
            heartbeats_sent: 0,
            heartbeats_answered: 0,
            heartbeat_latency: LatencyRecorder::new(),
            lost: 0,
            ended: 0,
        }
    }

    /// Adds `o`'s counts.
    pub(crate) fn merge(&mut self, o: &ControlStats) {
        self.decisions += o.decisions;
        self.handovers += o.handovers;
        self.decision_latency.merge(&o.decision_latency);
        self.handover_latency.merge(&o.handover_latency);
        self.release_latency.merge(&o.release_latency);
        for (code, n) in &o.refused {
            *self.refused.entry(*code).or_default() += n;
        }
        self.timeouts += o.timeouts;
        self.handover_failures += o.handover_failures;
        self.errors += o.errors;
        self.granted += o.granted;
        self.established += o.established;
        self.failures.merge(&o.failures);
        self.heartbeats_sent += o.heartbeats_sent;
        self.heartbeats_answered += o.heartbeats_answered;
        self.heartbeat_latency.merge(&o.heartbeat_latency);
        self.lost += o.lost;
        self.ended += o.ended;
    }

    /// Refusals in all.
    pub(crate) fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }
}
