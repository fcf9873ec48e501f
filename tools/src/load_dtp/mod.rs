//! `dtp load --dtp`: the load generator over the full DTP protocol (SPEC
//! §1) — per connection a Fay endpoint, CAP, a collection agreement naming
//! the workload (`dtp_workload::dtp`), encrypted fragments, resume
//! acks — with forced disconnects (`--disconnect-every N`) that cut the
//! transport inside a frame and resume the session on a new connection.
//! `--control MODE` loads the terminal control plane instead (module
//! [`control`]: AuthRequests and handovers, no fragments).
//!
//! **Owns**: the [`FayApp`] that runs one [`flow::Flow`] per logical
//! connection on the gateway crate's Fay-side service ([`DtpClient`], the
//! twin of [`DtpGateway`](dtp_gateway::dtp::DtpGateway)), the run loop, and
//! the DTP counters. **Never touches**: the protocol's rules (the endpoint's), the
//! plaintext load generator's behaviour (`crate::load`, whose `LoadSpec`,
//! `Tally` and `LoadResult` it reuses), the gateway or the bench.
//!
//! # Design choices
//!
//! - **Sans-IO core, thin driver.** [`flow::Flow`] is fed inputs and
//!   drained for wire bytes; it never reads a clock or draws random bytes.
//!   The [`DtpClient`] service is the one place that does (like the
//!   gateway): it reads the shard's clock per callback and fills CAP seeds
//!   and cut offsets from `ring`'s system generator. The unit tests drive the same flows
//!   against an in-memory terminal in virtual time.
//! - **A cut is a torn frame.** At the N-th fragment sent on a transport
//!   connection, everything queued goes out whole, then the fragment's
//!   sealed frame goes out only up to a random byte inside it
//!   (1 ..= len − 1), then the transport closes (`Outbox::close`). The
//!   fragment is in the resume cache (it counts as sent) and is resent on
//!   the resumed connection. The flow reconnects at once (`Ctl::connect`
//!   from `tick`) and resumes with `DtpEndpoint::fay_resume`; a resume
//!   attempt lost before it finished hands the session back
//!   (`connection_lost` / `take_suspended`) for the next attempt.
//! - **Counters over the whole run.** `sent`, `delivered`, `duplicated` and
//!   `resumes` count from the first fragment to the end of the drain
//!   (warm-up included) so that `lost = sent − delivered` means what it
//!   says; throughput and latency count only the measured window. After the
//!   window no fragment is sent; each flow closes its session once all it
//!   sent is delivered (answered or acknowledged), or at the drain deadline
//!   ([`flow::DRAIN`]), after which what is left counts as lost.
//! - **Closed loop only.** DTP pingpong keeps one fragment in flight per
//!   connection (the responder closes a connection that sends more), so an
//!   open-loop `--rate` cannot be honoured; the CLI refuses it.
//! - **Flow control is DTP's own** for the stream: fragments go out until
//!   the resume cache is full (`BUFFER_FULL`, 6001), then wait for acks
//!   (`DtpEvent::Writable`); `--window` does not apply. Each connection's
//!   send queue is raised to hold a whole resume cache, sealed: the resend
//!   after a resume is one batch, and a batch larger than the queue could
//!   never be sent.
//! - **Latency.** Pingpong: each round trip, from `send_fragment` to the
//!   answer, including those that crossed a cut (that is what the
//!   application saw; the resume's own cost is reported separately).
//!   Stream: from the first fragment of an acknowledged batch to the ack.
//!   Bytes are payload bytes (both directions for pingpong).

mod cli;
pub(crate) mod control;
mod flow;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_bench::latency::{LatencyRecorder, LatencySummary};
use dtp_engine::{Engine, EngineConfig, Framed, Outbox};
use dtp_gateway::dtp::{
    ConnCounts, DtpClient, DtpEndpoint, DtpEvent, FayApp, FayConfig, OpenFailure, SuspendedSession,
};
use dtp_transports::DriverConfig;
use dtp_workload::dtp::DtpWorkload;
use dtp_workload::plain::{self as workload, Workload};

use crate::load::{LoadResult, LoadSpec, Phase, Share, Tally};
use flow::{Flow, FlowConfig, FlowCounters, Stats};

pub(crate) use cli::{DtpCliArgs, run_cli};
pub(crate) use control::ControlCli;

/// What DTP mode adds to a [`LoadSpec`].
#[derive(Clone, Debug)]
pub(crate) struct DtpSpec {
    /// The Fay's keys, credential and endpoint settings (the bench passes
    /// `BenchKeys::fay_config()`; the CLI reads files).
    pub(crate) fay: FayConfig,
    /// Cut every connection at its N-th fragment sent (`None`: never).
    pub(crate) disconnect_every: Option<u64>,
}

/// The DTP counters of a run (see the module docs for their meaning).
#[derive(Clone, Debug)]
pub(crate) struct DtpCounters {
    /// Fragments sent.
    pub(crate) sent: u64,
    /// Pingpong: answers received; stream: fragments acknowledged.
    pub(crate) delivered: u64,
    /// Sent and never delivered once the run drained.
    pub(crate) lost: u64,
    /// Pingpong answers received twice.
    pub(crate) duplicated: u64,
    /// Sessions resumed.
    pub(crate) resumes: u64,
    /// Cuts made.
    pub(crate) cuts: u64,
    /// Flows that gave up (their session ended, or no connection).
    pub(crate) failed_flows: u64,
    /// Flows that established a DTP session at least once.
    pub(crate) established_flows: u64,
    /// From a cut to `Established { resumed: true }`.
    pub(crate) resume_latency: LatencyRecorder,
}

impl DtpCounters {
    fn new() -> Self {
        Self {
            sent: 0,
            delivered: 0,
            lost: 0,
            duplicated: 0,
            resumes: 0,
            cuts: 0,
            failed_flows: 0,
            established_flows: 0,
            resume_latency: LatencyRecorder::new(),
        }
    }

    fn add_flow(&mut self, c: FlowCounters, failed: bool) {
        self.sent += c.sent;
        self.delivered += c.delivered;
        self.lost += c.sent.saturating_sub(c.delivered);
        self.duplicated += c.duplicated;
        self.resumes += c.resumes;
        self.cuts += c.cuts;
        self.failed_flows += u64::from(failed);
        self.established_flows += u64::from(c.sessions > 0);
    }

    fn merge(&mut self, o: &DtpCounters) {
        self.sent += o.sent;
        self.delivered += o.delivered;
        self.lost += o.lost;
        self.duplicated += o.duplicated;
        self.resumes += o.resumes;
        self.cuts += o.cuts;
        self.failed_flows += o.failed_flows;
        self.established_flows += o.established_flows;
        self.resume_latency.merge(&o.resume_latency);
    }

    /// Resume latency p50 and p99 in microseconds (0 without resumes).
    pub(crate) fn resume_p50_p99_us(&self) -> (u64, u64) {
        flow::resume_quantiles(&self.resume_latency)
    }
}

/// The result of a DTP run: the plaintext load's figures and the DTP
/// counters.
#[derive(Clone, Debug)]
pub(crate) struct DtpLoadResult {
    /// Throughput, latency, connections, errors.
    pub(crate) load: LoadResult,
    /// Sent, delivered, lost, duplicated, resumes.
    pub(crate) dtp: DtpCounters,
}

impl DtpLoadResult {
    /// Whether the run worked: at least `min` of the connections
    /// established a DTP session, of the fragments sent were delivered,
    /// and something was measured; else why not (CAP and close codes by
    /// name, or why connections failed).
    pub(crate) fn verdict(&self, spec: &LoadSpec, min: f64) -> Result<(), String> {
        let (t, d) = (&self.load.tally, &self.dtp);
        let connect =
            (t.failed > 0).then(|| crate::load::connect_failure(&spec.target, t.last_errno));
        let shares = [
            Share {
                what: "connections established a DTP session",
                attempted: spec.connections as u64,
                succeeded: d.established_flows,
            },
            Share {
                what: "fragments sent were delivered",
                attempted: d.sent,
                succeeded: d.delivered,
            },
        ];
        crate::load::status::check(&shares, min, &t.failures, connect)?;
        if t.ops == 0 {
            return Err(format!(
                "no fragment was delivered in the measured window ({} errors)",
                t.errors
            ));
        }
        Ok(())
    }
}

/// What a shard shares with the run loop.
struct Shared {
    tally: Tally,
    dtp: DtpCounters,
}

/// The application of one shard's [`DtpClient`]: one flow per logical
/// connection, its share of the run's.
struct Client {
    fay: Arc<FayConfig>,
    template: FlowConfig,
    share: usize,
    /// Flows started so far.
    started: usize,
    stats: Stats,
    shared: Arc<Mutex<Shared>>,
}

impl FayApp for Client {
    type Flow = Flow;

    fn new_flow(&mut self) -> Option<Flow> {
        (self.started < self.share).then(|| {
            self.started += 1;
            Flow::new(self.template.clone())
        })
    }

    fn wants_connection(&self, flow: &Flow) -> bool {
        flow.wants_connection()
    }

    fn connecting(&mut self, flow: &mut Flow) {
        flow.connecting();
    }

    fn connect_failed(&mut self, flow: &mut Flow) {
        flow.handle_connect_failed();
    }

    fn is_finished(&self, flow: &Flow) -> bool {
        flow.is_finished()
    }

    fn fay<'a>(&'a self, _: &'a Flow) -> &'a FayConfig {
        &self.fay
    }

    fn take_session(&mut self, flow: &mut Flow) -> Option<SuspendedSession> {
        flow.take_session()
    }

    fn connected(&mut self, flow: &mut Flow, _: &mut DtpEndpoint, _: Instant) {
        flow.connected();
    }

    fn open_failed(
        &mut self,
        flow: &mut Flow,
        why: OpenFailure,
        session: Option<SuspendedSession>,
        now: Instant,
    ) {
        flow.open_failed(why, session, now, &mut self.stats);
    }

    fn event(&mut self, flow: &mut Flow, ep: &mut DtpEndpoint, event: DtpEvent, now: Instant) {
        flow.handle_event(ep, event, now, &mut self.stats);
    }

    fn events_done(&mut self, flow: &mut Flow, ep: &mut DtpEndpoint, now: Instant) {
        flow.events_done(ep, now, &mut self.stats);
    }

    fn transmit(
        &mut self,
        flow: &mut Flow,
        ep: &mut DtpEndpoint,
        out: &mut Outbox<'_>,
        now: Instant,
        rng: &mut dyn FnMut(&mut [u8]),
    ) {
        let room = out.room();
        let t = flow.poll_transmit(ep, out.wire(), room, now, rng, &mut self.stats);
        if t.want_writable {
            out.want_writable();
        }
        if t.close {
            out.close();
        }
    }

    fn timer(&self, flow: &Flow, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        flow.poll_timeout(ep, now)
    }

    fn lost(&mut self, flow: &mut Flow, ep: Option<DtpEndpoint>, now: Instant) {
        flow.handle_lost(ep, now, &mut self.stats);
    }

    fn report(&mut self, flows: &[Flow], counts: ConnCounts, last: bool) {
        let mut delta = Tally::new();
        delta.connected = counts.connected;
        delta.failed = counts.failed;
        delta.last_errno = counts.last_errno;
        delta.ops = self.stats.ops;
        delta.bytes = self.stats.bytes;
        delta.errors = self.stats.errors + counts.bad_random;
        delta.latency.merge(&self.stats.latency);
        delta.failures.merge(&self.stats.failures);
        let mut dtp = DtpCounters::new();
        dtp.resume_latency.merge(&self.stats.resume_latency);
        if last {
            for f in flows {
                dtp.add_flow(f.counters(), f.has_failed());
            }
            delta.done = true;
        }
        self.stats = Stats::new();
        let Ok(mut shared) = self.shared.lock() else {
            return;
        };
        let done = shared.tally.done || delta.done;
        shared.tally.merge(&delta);
        shared.tally.done = done;
        shared.dtp.merge(&dtp);
    }
}

/// The payload of every fragment: `--payload` bytes, or the workload's
/// standard size (66 B pingpong, 16 KiB stream).
fn payload(workload: DtpWorkload, size: Option<usize>) -> Bytes {
    match (workload, size) {
        (_, Some(n)) => (0..n).map(|i| (i % 251) as u8).collect(),
        (DtpWorkload::Stream, None) => workload::stream_payload(),
        (DtpWorkload::Pingpong, None) => workload::pingpong_payload(),
    }
}

/// The load generator's IO settings in DTP mode: a connection's send queue
/// must take a whole resume cache at once, sealed (the resend after a
/// resume is one batch; a batch larger than the queue could never be sent).
fn driver_for(base: &DriverConfig, fay: &FayConfig) -> DriverConfig {
    let cache = fay.endpoint.resume_cache;
    let sealed = cache
        .max_bytes
        .saturating_add(cache.max_fragments.saturating_mul(flow::FRAME_OVERHEAD));
    let frame = fay.endpoint.limits.max_frame_len as usize;
    DriverConfig {
        max_send_queue: base
            .max_send_queue
            .max(sealed.saturating_add(2 * frame).saturating_mul(2)),
        ..base.clone()
    }
}

/// The DTP workload of a plaintext workload name (`connections` has none).
pub(crate) fn dtp_workload(w: Workload) -> Option<DtpWorkload> {
    match w {
        Workload::Pingpong => Some(DtpWorkload::Pingpong),
        Workload::Stream => Some(DtpWorkload::Stream),
        Workload::Idle => None,
    }
}

/// Runs `spec` over DTP and returns what it measured; the entry point for
/// the bench (with `BenchKeys::fay_config()`) and the CLI. `progress` is
/// called about ten times a second with the seconds elapsed and the
/// operations so far; `phase` at the two edges of the measured window.
/// `spec.rate` must be `None` (closed loop only) and the workload pingpong
/// or stream.
pub(crate) fn run(
    spec: &LoadSpec,
    dtp: &DtpSpec,
    progress: impl FnMut(f64, u64),
    mut phase: impl FnMut(Phase),
) -> Result<DtpLoadResult, String> {
    let Some(workload) = dtp_workload(spec.workload) else {
        return Err("DTP mode runs the pingpong and stream workloads only".to_owned());
    };
    if spec.rate.is_some() {
        return Err(
            "DTP pingpong runs closed loop (one fragment in flight per connection): --rate is not supported with --dtp"
                .to_owned(),
        );
    }
    if dtp.disconnect_every == Some(0) {
        return Err("--disconnect-every must be at least 1".to_owned());
    }
    let shards = spec.shards.max(1).min(spec.connections.max(1));
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let drain_until = end + flow::DRAIN;
    let shared: Vec<Arc<Mutex<Shared>>> = (0..shards)
        .map(|_| {
            Arc::new(Mutex::new(Shared {
                tally: Tally::new(),
                dtp: DtpCounters::new(),
            }))
        })
        .collect();
    let factory_shared = shared.clone();
    let template = FlowConfig {
        workload,
        payload: payload(workload, spec.payload),
        disconnect_every: dtp.disconnect_every,
        measure_from,
        end,
    };
    let fay = Arc::new(dtp.fay.clone());
    let (target, connections) = (spec.target.clone(), spec.connections);
    let config = EngineConfig {
        shards,
        pin: false,
        listen: Vec::new(),
        driver: driver_for(&spec.driver, &dtp.fay),
        limits: dtp_codec::Limits::default(),
        drain: Duration::from_secs(2),
        control_ring: 1024,
        quic: spec.quic.clone(),
    };
    let engine = Engine::start(config, move |i| {
        let client = Client {
            fay: fay.clone(),
            template: template.clone(),
            share: connections / shards + usize::from(i < connections % shards),
            started: 0,
            stats: Stats::new(),
            shared: factory_shared[i].clone(),
        };
        Framed::new(DtpClient::new(client, target.clone(), start, drain_until))
    })
    .map_err(|e| format!("could not start the load generator: {e}"))?;
    let times = (start, measure_from, end, drain_until);
    let (backend, client_cpu_ns) = measure(
        engine,
        &shared,
        |s: &Shared| &s.tally,
        times,
        progress,
        &mut phase,
    )?;
    let mut tally = Tally::new();
    let mut counters = DtpCounters::new();
    for s in &shared {
        if let Ok(s) = s.lock() {
            tally.merge(&s.tally);
            counters.merge(&s.dtp);
        }
    }
    crate::load::no_connection_is_an_error(&tally, &spec.target)?;
    let latency: LatencySummary = tally.latency.summary();
    Ok(DtpLoadResult {
        load: LoadResult {
            staged: None,
            tally,
            elapsed: spec.duration,
            latency,
            backend,
            client_cpu_ns,
        },
        dtp: counters,
    })
}

/// The measuring window of a DTP load run over its client shards' shared
/// tallies (`tally_of` picks a shard's), then the engine's stop: the
/// backend's name and this process's CPU time over the window
/// ([`LoadResult::client_cpu_ns`]). `times` are start, measure-from, end
/// and drain-until.
pub(super) fn measure<S>(
    engine: dtp_engine::EngineHandle,
    shared: &[Arc<Mutex<S>>],
    tally_of: impl Fn(&S) -> &Tally,
    times: (Instant, Instant, Instant, Instant),
    progress: impl FnMut(f64, u64),
    phase: &mut impl FnMut(Phase),
) -> Result<(String, Option<u64>), String> {
    let (start, measure_from, end, drain_until) = times;
    let backend = engine.backend().kind.name().to_owned();
    let deadline = drain_until + Duration::from_secs(5);
    let poll = || {
        shared
            .iter()
            .fold((0, true), |(ops, done), s| match s.lock() {
                Ok(s) => (ops + tally_of(&s).ops, done && tally_of(&s).done),
                Err(_) => (ops, done),
            })
    };
    let window = crate::load::run_window(start, measure_from, end, deadline, poll, progress, phase);
    // Flows left mid-phase at the edges still report through `MeasureEnd`.
    for (_, p) in window.missed.into_iter().rev() {
        phase(p);
    }
    engine.stop();
    engine
        .join()
        .map_err(|e| format!("load generator failed: {e}"))?;
    Ok((backend, window.client_cpu_ns))
}
