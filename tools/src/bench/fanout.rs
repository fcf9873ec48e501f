//! The `fanout-sse` and `fanout-ws` workloads: one publisher, thousands of
//! subscribers (SSE streams or `realtime.v1` sessions), ours and the
//! tokio/axum peer (`dtp_bench::peer_realtime`) driven by the same
//! subscriber load generator (`crate::load_rt`) in the same run.
//!
//! The figures: events delivered per second (over all subscribers), the
//! publish → apply latency (p50, p99), the server's CPU time per delivered
//! event (the OS's accounting, from the window's start to the moment every
//! window event was delivered), and its memory per subscriber (RSS with
//! every subscriber subscribed, less RSS before the first, per
//! subscriber). Nothing may be missing.
//!
//! With `--fanout-nats` ours also runs with its realtime ledgers in NATS
//! JetStream (`[cluster] nats`, a local nats-server the bench starts):
//! side [`NATS_SAME`], one gateway that the publisher and the subscribers
//! share (each publication waits for JetStream's acknowledgement), and
//! side [`NATS_ACROSS`], two gateways of one cluster, the publisher on
//! one and the subscribers on the other (which reads the publications
//! from JetStream with its follower). The latency is the same publish →
//! apply time, across gateways for [`NATS_ACROSS`]; its CPU per event is
//! both gateways' CPU summed, its memory the subscribers' gateway's.

use std::time::Duration;

use dtp_bench::procstat::{self, Sample};
use dtp_bench::report::{Cores, Figures, Memory};

use super::Server;
use crate::load_rt::{self, Mode, RtPhase, RtSpec};
use crate::text::plural;

/// Deliveries per second offered (publish rate × subscribers): what two
/// cores shared by a server and the load generator sustain with room to
/// spare, so that latency measures the servers, not a saturated machine.
pub(super) const OFFERED_DELIVERIES: f64 = 50_000.0;

/// Events published per second for `subscribers`: [`OFFERED_DELIVERIES`]
/// spread over them, between 1 and 50 per second.
pub(super) fn publish_rate(subscribers: usize) -> f64 {
    (OFFERED_DELIVERIES / subscribers.max(1) as f64).clamp(1.0, 50.0)
}

/// Subscribers, before the open-file limit is applied.
pub(super) const SUBSCRIBERS: usize = 10_000;

/// The side of ours with its ledgers in JetStream, the publisher and the
/// subscribers on the same gateway.
pub(super) const NATS_SAME: &str = "ours+nats";

/// The side of two gateways sharing their ledgers through JetStream, the
/// publisher on one and the subscribers on the other.
pub(super) const NATS_ACROSS: &str = "ours+nats-across";

/// What one side of a fan-out run needs.
pub(super) struct Run {
    pub(super) mode: Mode,
    pub(super) subscribers: usize,
    pub(super) shards: usize,
    pub(super) warmup: Duration,
    pub(super) duration: Duration,
}

/// Runs the subscribers against `server`, the publisher against
/// `publisher` (another gateway of its cluster) or `server`, and returns
/// the figures: the CPU is both gateways' summed.
pub(super) fn measure(
    server: &Server,
    publisher: Option<&Server>,
    r: &Run,
) -> Result<Figures, String> {
    let spec = RtSpec {
        target: server.tcp_addr()?,
        publish_to: publisher.map(Server::tcp_addr).transpose()?,
        mode: r.mode,
        subscribers: r.subscribers,
        stream: "demo".into(),
        event_type: "demo.tick".into(),
        token: crate::realtime_cfg::DEMO_TOKEN.into(),
        subscriber_token: None,
        // Both servers run their embedded defaults (the peer serves no
        // snapshots to read it from).
        scope: Some(crate::realtime_cfg::DEMO_SCOPE.into()),
        rate: publish_rate(r.subscribers),
        payload: 64,
        warmup: r.warmup,
        duration: r.duration,
        shards: r.shards,
        driver: crate::load_cmd::load_driver(r.subscribers, 0, crate::load_cmd::LOAD_CONGESTION),
        policy: dtp_realtime::ReconnectConfig::default(),
        kick: false,
    };
    let mut samples: Vec<(RtPhase, Option<Sample>, Option<Sample>)> = Vec::new();
    let mut publisher_cpu: Vec<Result<Sample, String>> = Vec::new();
    let result = load_rt::run(&spec, |_| {}, &mut |p| {
        samples.push((p, server.sample().ok(), procstat::sample_self().ok()));
        if let Some(g) = publisher
            && matches!(p, RtPhase::WindowStart | RtPhase::WindowEnd)
        {
            publisher_cpu.push(g.sample());
        }
    })
    .map_err(|e| format!("{} fan-out: {e}", server.name))?;
    let at = |phase: RtPhase| -> Result<&Sample, String> {
        match samples.iter().find(|(p, _, _)| *p == phase) {
            Some((_, Some(s), _)) => Ok(s),
            _ => Err(format!("{}: no server sample at {phase:?}", server.name)),
        }
    };
    let (idle, subscribed) = (at(RtPhase::Idle)?, at(RtPhase::Subscribed)?);
    let (start, end) = (at(RtPhase::WindowStart)?, at(RtPhase::WindowEnd)?);
    let mut cpu = procstat::delta(start, end).map_err(|e| e.to_string())?;
    if publisher.is_some() {
        let [a, b] = <[_; 2]>::try_from(publisher_cpu)
            .map_err(|_| format!("{}: no publishing gateway samples", server.name))?;
        cpu.cpu_ns += procstat::delta(&a?, &b?).map_err(|e| e.to_string())?.cpu_ns;
    }
    let client = |phase: RtPhase| {
        samples
            .iter()
            .find(|(p, _, _)| *p == phase)
            .and_then(|(_, _, c)| c.as_ref())
    };
    let client_cpu = match (client(RtPhase::WindowStart), client(RtPhase::WindowEnd)) {
        (Some(a), Some(b)) => procstat::delta(a, b).ok().map(|d| d.cpu_ns),
        _ => None,
    };
    let t = &result.tally;
    if t.missing > 0 || t.conflicts > 0 || t.failed > 0 {
        return Err(format!(
            "{} fan-out: {} missing, {}, {} failed",
            server.name,
            plural(t.missing, "event"),
            plural(t.conflicts, "conflict"),
            plural(t.failed, "subscriber")
        ));
    }
    let delivered = t.in_window;
    let q = |p: f64| t.latency.value_at_quantile(p) as f64;
    let figures = Figures {
        ops_per_s: result.delivered_per_sec(),
        bytes_per_s: 0.0,
        p50_us: q(0.5),
        p99_us: q(0.99),
        cpu_ns_per_op: if delivered > 0 {
            cpu.cpu_ns as f64 / delivered as f64
        } else {
            0.0
        },
        server_cpu_s: cpu.cpu_ns as f64 / 1e9,
        ops: delivered,
        memory: Some(Memory::from_rss(
            result.subscribed,
            idle.rss_bytes,
            subscribed.rss_bytes,
            end.peak_rss_bytes,
        )),
        ..Figures::default()
    };
    let cores = Cores {
        machine: r.shards,
        server: r.shards,
        client: r.shards,
    };
    Ok(match client_cpu {
        Some(ns) => figures.with_client(ns, end.at.duration_since(start.at), cores),
        None => figures,
    })
}
