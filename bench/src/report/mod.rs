//! The report of `dtp bench`: what one run measured ([`RunReport`]), the
//! report that combines several runs ([`Report`], its JSON form documented
//! in `perf/bench-harness.md`), a table for people ([`table`]) and an HTML
//! page with SVG plots ([`html`]).
//!
//! This module owns the schema and the arithmetic from raw figures (ops,
//! elapsed time, CPU time, latency summary) to the reported ones; it
//! measures nothing itself.
//!
//! **Runs always combine** ([`combine`]): every figure is the median of that
//! figure over the runs that measured it, per workload and per side, so a
//! run in which one side failed, or a limit came out differently, still
//! counts for everything it did measure. A limit is a set of figures
//! (`loopback`, `aead`, `sealed`, … each measured every run); the binding
//! one is chosen after the medians. What failed is listed in
//! [`Report::failures`] with its reason; nothing measured is thrown away.
//!
//! - An *operation* is one answered `pingpong` request, one acked `stream`
//!   frame, one idle connection's round trip, one delivered DTP fragment, or
//!   one delivered fan-out event.
//! - `bytes_per_s` is client payload bytes per second of those operations
//!   ([`Workload::payload_per_op`]): goodput, headers not counted.
//! - `cpu_ns_per_op = server_cpu_s × 10⁹ / ops`, with `server_cpu_s` the OS's
//!   user + system time of the server process over the measured interval;
//!   `client_cpu_s` the same for the load generator.
//! - Every ratio is ours / that peer: `throughput` from `ops_per_s` (higher
//!   is better), `cpu_per_op` from `cpu_ns_per_op` and `p99` from `p99_us`
//!   (lower is better). A ratio whose denominator is 0 is `null`.

mod combine;
pub mod html;
mod svg;
pub mod table;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::combine::{combine, median};
pub use self::table::write_table;
use crate::control_report::ControlReport;
use crate::latency::LatencySummary;
use crate::workload::Workload;

/// The name of our side in every workload.
pub const OURS: &str = "ours";

/// The report of a `dtp bench` invocation: the medians of its runs, what
/// failed, and the raw runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Our engine's IO backend (`io_uring` or `epoll`; `mixed (…)` if runs
    /// differed).
    pub backend: String,
    /// One entry per workload that measured anything, in the order they ran.
    pub workloads: Vec<WorkloadReport>,
    /// The `control` workload (ours only: it has no peer), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlReport>,
    /// Every run, workload or side that failed, with its reason.
    #[serde(default)]
    pub failures: Vec<Failure>,
    /// Things a reader of the figures must know (a peer that links part of
    /// our code, a workload fitted to the open-file limit, …).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The raw report of every run, in order.
    #[serde(default)]
    pub runs: Vec<RunReport>,
}

/// One workload: our figures, every peer's, ratios and the limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// `pingpong`, `stream`, `connections`, `dtp-stream`, `fanout-sse`, …
    pub name: String,
    /// Our server's figures (absent if ours failed in every run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ours: Option<Figures>,
    /// The first peer (tokio), as in the report's first schema; every peer
    /// is in [`Self::peers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerFigures>,
    /// Ours / [`Self::peer`].
    pub ratio: Ratio,
    /// Every peer measured, in the order they ran, each with its ratio.
    #[serde(default)]
    pub peers: Vec<PeerReport>,
    /// The machine's limit for this workload, where one is measured: the
    /// binding (lowest) of its figures, chosen after the medians.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// One server's figures for one workload (the median over runs in a
/// [`Report`], one run's in a [`RunReport`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Operations per second.
    pub ops_per_s: f64,
    /// Client payload bytes per second.
    pub bytes_per_s: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th-percentile latency, µs.
    pub p99_us: f64,
    /// Server CPU time per operation, ns.
    pub cpu_ns_per_op: f64,
    /// Server CPU time (user + system) over the measured interval, s.
    pub server_cpu_s: f64,
    /// Operations completed in the measured interval.
    pub ops: u64,
    /// The load generator's CPU time over the same interval, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_s: Option<f64>,
    /// Which side used up the CPU it could use: `server`, `client`,
    /// `machine` (both together used every core) or `neither`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturated: Option<String>,
    /// Memory figures (`connections` and the fan-out workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// `resume` only: sessions resumed after a cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumes: Option<u64>,
    /// `resume` only: fragments lost (must be 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    /// `resume` only: fragments delivered twice (must be 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicated: Option<u64>,
    /// `resume` only: median time from a cut to the resumed session, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_p50_us: Option<f64>,
    /// `resume` only: 99th percentile of the same, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_p99_us: Option<f64>,
}

/// The first peer's figures: its name and the same fields as [`Figures`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerFigures {
    /// The peer's name (`tokio`).
    pub name: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
}

/// One peer of a workload: its name, figures and ours / its figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerReport {
    /// `tokio`, `tokio-uring`, `floor`, …
    pub name: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// Ours / this peer.
    pub ratio: Ratio,
}

/// Memory held by a server with many idle connections or subscribers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Connections open (and idle) when `rss_bytes` was read.
    pub connections: u64,
    /// RSS with the connections open.
    pub rss_bytes: u64,
    /// Peak RSS of the server process.
    pub peak_rss_bytes: u64,
    /// User-space memory per connection: (RSS with the connections − RSS
    /// before them) / connections; with `counted_from` set, the same
    /// between that many connections and all of them (the cost of one more
    /// connection, without the server's first-use costs).
    pub bytes_per_connection: f64,
    /// The connection count of the first RSS reading, when it was not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_from: Option<u64>,
    /// `connections`: connections set up per second (the second half of a
    /// staged run: connect, one round trip), as the load generator saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_per_s: Option<f64>,
    /// `connections`: connects that failed (e.g. no file descriptor left).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Ours / peer, per figure; `null` where the peer's figure is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// `ops_per_s` ours / peer (higher is better).
    pub throughput: Option<f64>,
    /// `cpu_ns_per_op` ours / peer (lower is better).
    pub cpu_per_op: Option<f64>,
    /// `p99_us` ours / peer (lower is better).
    pub p99: Option<f64>,
    /// `memory.bytes_per_connection` ours / peer (where both have memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_connection: Option<f64>,
    /// `memory.setup_per_s` ours / peer (higher is better).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_rate: Option<f64>,
}

/// A workload's limit after the medians: the binding figure, every side's
/// fraction of it, and every figure measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// The binding figure's name (`loopback`, `sealed (AES-256-GCM, two
    /// cores)`, …).
    pub name: String,
    /// The binding limit, bytes per second (median over runs).
    pub bytes_per_s: f64,
    /// Our `bytes_per_s` / the limit (median of the per-run fractions).
    pub ours_fraction: Option<f64>,
    /// The first peer's `bytes_per_s` / the limit.
    pub peer_fraction: Option<f64>,
    /// Every side's fraction, ours first.
    #[serde(default)]
    pub fractions: Vec<SideFraction>,
    /// Every limit figure measured (medians), the binding one among them.
    #[serde(default)]
    pub figures: Vec<LimitFigure>,
}

/// One side's fraction of a limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideFraction {
    /// The side (`ours`, `tokio`, …).
    pub name: String,
    /// Its `bytes_per_s` / the limit.
    pub fraction: Option<f64>,
}

/// One limit figure as measured in one run (or its median).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LimitFigure {
    /// What was measured (`loopback`, `aead (AES-256-GCM, one core)`, …).
    pub name: String,
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// Set when the figure is one side's own baseline (for `resume`: that
    /// side's `dtp-stream` goodput); that side's fraction is taken of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<String>,
}

/// Something that did not produce figures, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The run (1-based), or none for something before the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<usize>,
    /// The workload.
    pub workload: String,
    /// The side (`ours`, `tokio`, …), or none when the whole workload failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<String>,
    /// One line: what went wrong.
    pub reason: String,
}

/// What one run measured, before any combining.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The run's number, from 1.
    pub run: usize,
    /// Our engine's IO backend in this run.
    pub backend: String,
    /// Every workload of the run that measured anything.
    pub workloads: Vec<RunWorkload>,
    /// The `control` workload, when it ran and succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlReport>,
    /// What failed in this run.
    #[serde(default)]
    pub failures: Vec<Failure>,
}

/// One workload of one run: every side that succeeded and every limit
/// figure measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunWorkload {
    /// The workload.
    pub name: String,
    /// Every side that succeeded, in the order they ran.
    pub sides: Vec<Side>,
    /// Limit figures measured in this run.
    #[serde(default)]
    pub limits: Vec<LimitFigure>,
}

/// One side's figures in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// `ours`, `tokio`, `tokio-uring`, `floor`, …
    pub name: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
}

impl Figures {
    /// The figures of a run of `workload` that completed `ops` operations in
    /// `elapsed`, during which the server used `server_cpu_ns` of CPU.
    pub fn from_run(
        workload: Workload,
        ops: u64,
        elapsed: Duration,
        server_cpu_ns: u64,
        latency: &LatencySummary,
    ) -> Self {
        let secs = elapsed.as_secs_f64();
        let ops_per_s = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
        Self {
            ops_per_s,
            bytes_per_s: ops_per_s * workload.payload_per_op() as f64,
            p50_us: latency.p50_us,
            p99_us: latency.p99_us,
            cpu_ns_per_op: if ops > 0 {
                server_cpu_ns as f64 / ops as f64
            } else {
                0.0
            },
            server_cpu_s: server_cpu_ns as f64 / 1e9,
            ops,
            ..Self::default()
        }
    }

    /// The same figures with memory figures attached.
    pub fn with_memory(mut self, memory: Memory) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The same figures with the load generator's CPU over a window of
    /// `elapsed`, and which side saturated: a process saturates when it was
    /// busy at least 90 % of the cores it could use (`server_cores`,
    /// `client_cores`: its threads, at most the machine's `cores`); the
    /// machine, when the two together were busy 90 % of its cores.
    pub fn with_client(mut self, client_cpu_ns: u64, elapsed: Duration, cores: Cores) -> Self {
        let secs = elapsed.as_secs_f64();
        let client = client_cpu_ns as f64 / 1e9;
        self.client_cpu_s = Some(client);
        if secs > 0.0 {
            let busy = |cpu_s: f64| cpu_s / secs;
            let full =
                |busy: f64, threads: usize| busy >= 0.9 * threads.min(cores.machine).max(1) as f64;
            let (s, c) = (busy(self.server_cpu_s), busy(client));
            self.saturated = Some(
                if full(s, cores.server) {
                    "server"
                } else if full(c, cores.client) {
                    "client"
                } else if full(s + c, cores.machine) {
                    "machine"
                } else {
                    "neither"
                }
                .to_owned(),
            );
        }
        self
    }
}

/// The cores each process could use, for [`Figures::with_client`].
#[derive(Clone, Copy, Debug)]
pub struct Cores {
    /// The machine's cores.
    pub machine: usize,
    /// The server's threads doing the work (shards, workers).
    pub server: usize,
    /// The load generator's threads.
    pub client: usize,
}

impl Memory {
    /// Memory figures from RSS before and after opening `connections`.
    pub fn from_rss(connections: u64, rss_before: u64, rss_after: u64, peak: u64) -> Self {
        let grown = rss_after.saturating_sub(rss_before) as f64;
        Self {
            connections,
            rss_bytes: rss_after,
            peak_rss_bytes: peak,
            bytes_per_connection: if connections > 0 {
                grown / connections as f64
            } else {
                0.0
            },
            counted_from: None,
            setup_per_s: None,
            failed: 0,
        }
    }

    /// As [`Memory::from_rss`] between `from` connections (RSS `rss_from`)
    /// and `connections` (RSS `rss_after`): the marginal cost of a
    /// connection.
    pub fn between(from: u64, rss_from: u64, connections: u64, rss_after: u64, peak: u64) -> Self {
        let mut m = Self::from_rss(connections.saturating_sub(from), rss_from, rss_after, peak);
        m.connections = connections;
        m.counted_from = Some(from);
        m
    }
}

impl Ratio {
    /// Ours / peer for every figure.
    pub fn between(ours: &Figures, peer: &Figures) -> Self {
        let memory_per_connection = match (&ours.memory, &peer.memory) {
            (Some(o), Some(p)) => ratio(o.bytes_per_connection, p.bytes_per_connection),
            _ => None,
        };
        let setup_rate = match (&ours.memory, &peer.memory) {
            (Some(o), Some(p)) => o
                .setup_per_s
                .zip(p.setup_per_s)
                .and_then(|(o, p)| ratio(o, p)),
            _ => None,
        };
        Self {
            throughput: ratio(ours.ops_per_s, peer.ops_per_s),
            cpu_per_op: ratio(ours.cpu_ns_per_op, peer.cpu_ns_per_op),
            p99: ratio(ours.p99_us, peer.p99_us),
            memory_per_connection,
            setup_rate,
        }
    }
}

impl LimitFigure {
    /// A figure every side is measured against.
    pub fn new(name: &str, bytes_per_s: f64) -> Self {
        Self {
            name: name.into(),
            bytes_per_s,
            side: None,
        }
    }

    /// A figure only `side` is measured against (its own baseline).
    pub fn of_side(name: &str, side: &str, bytes_per_s: f64) -> Self {
        Self {
            name: name.into(),
            bytes_per_s,
            side: Some(side.into()),
        }
    }
}

impl RunWorkload {
    /// The figures of `side`, if it succeeded.
    pub fn side(&self, side: &str) -> Option<&Figures> {
        self.sides
            .iter()
            .find(|s| s.name == side)
            .map(|s| &s.figures)
    }
}

impl Report {
    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(self)
    }

    /// A report from its JSON form.
    pub fn from_json(json: &str) -> serde_json::Result<Self> {
        serde_json::from_str(json)
    }

    /// The workload called `name`.
    pub fn workload(&self, name: &str) -> Option<&WorkloadReport> {
        self.workloads.iter().find(|w| w.name == name)
    }
}

impl WorkloadReport {
    /// Ours first, then every peer, as (name, figures).
    pub fn sides(&self) -> impl Iterator<Item = (&str, &Figures)> {
        self.ours
            .iter()
            .map(|f| (OURS, f))
            .chain(self.peers.iter().map(|p| (p.name.as_str(), &p.figures)))
    }
}

/// `num / den`, or `None` when `den` is 0 or the result is not finite.
pub(crate) fn ratio(num: f64, den: f64) -> Option<f64> {
    let r = num / den;
    (den != 0.0 && r.is_finite()).then_some(r)
}
