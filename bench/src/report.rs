//! The report of `dtp bench`: its JSON form (issue 3, documented in
//! `perf/bench-harness.md`), the median of several runs, and a table for
//! people.
//!
//! This module owns the schema and the arithmetic from raw figures (ops,
//! elapsed time, server CPU time, latency summary) to the reported ones; it
//! measures nothing itself.
//!
//! ```json
//! { "backend": "io_uring",
//!   "workloads": [
//!     { "name": "stream",
//!       "ours": { "ops_per_s": …, "bytes_per_s": …, "p50_us": …, "p99_us": …,
//!                 "cpu_ns_per_op": …, "server_cpu_s": …, "ops": … },
//!       "peer": { "name": "tokio", …the same fields… },
//!       "ratio": { "throughput": …, "cpu_per_op": …, "p99": … },
//!       "limit": { "name": "loopback", "bytes_per_s": …,
//!                  "ours_fraction": …, "peer_fraction": … } } ] }
//! ```
//!
//! - An *operation* is one answered `pingpong` request, one acked `stream`
//!   frame, or one idle connection's round trip.
//! - `bytes_per_s` is client payload bytes per second of those operations
//!   ([`Workload::payload_per_op`]): goodput, headers not counted.
//! - `cpu_ns_per_op = server_cpu_s × 10⁹ / ops`, with `server_cpu_s` the OS's
//!   user + system time of the server process over the measured interval.
//! - Every `ratio` is ours / peer: `throughput` from `ops_per_s` (higher is
//!   better), `cpu_per_op` from `cpu_ns_per_op` and `p99` from `p99_us`
//!   (lower is better). A ratio whose denominator is 0 is `null`.
//! - `limit` (only `stream`): the loopback limit measured in the same run and
//!   each side's `bytes_per_s` as a fraction of it.
//! - `memory` (only `connections`, absent elsewhere): per side, RSS with every
//!   connection open and idle, peak RSS, the connection count, and
//!   `bytes_per_connection` = (RSS with the connections − RSS before them) /
//!   connections; `ratio.memory_per_connection` is ours / peer of the latter.

use std::fmt::{self, Write as _};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::control_report::{self, ControlReport};
use crate::latency::LatencySummary;
use crate::workload::Workload;

/// The whole report of one `dtp bench` run (or the median of several).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Our engine's IO backend in this run (`io_uring` or `epoll`).
    pub backend: String,
    /// One entry per workload, in the order they ran.
    pub workloads: Vec<WorkloadReport>,
    /// The `control` workload (ours only: it has no peer), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlReport>,
}

/// One workload, both servers, their ratio and (for `stream`) the limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// `pingpong`, `stream` or `connections`.
    pub name: String,
    /// Our server's figures.
    pub ours: Figures,
    /// The peer's figures.
    pub peer: PeerFigures,
    /// Ours / peer.
    pub ratio: Ratio,
    /// The machine's limit for this workload, where one is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// One server's figures for one workload.
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
    /// Memory figures (`connections` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
}

/// The peer's figures: its name and the same fields as [`Figures`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerFigures {
    /// The peer's name (`tokio`).
    pub name: String,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
}

/// Memory held by a server with many idle connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Connections open (and idle) when `rss_bytes` was read.
    pub connections: u64,
    /// RSS with the connections open.
    pub rss_bytes: u64,
    /// Peak RSS of the server process.
    pub peak_rss_bytes: u64,
    /// (RSS with the connections − RSS before them) / connections.
    pub bytes_per_connection: f64,
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
    /// `memory.bytes_per_connection` ours / peer (`connections` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_connection: Option<f64>,
}

/// A machine limit measured in the same run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// What was measured (`loopback`).
    pub name: String,
    /// The limit, bytes per second.
    pub bytes_per_s: f64,
    /// Our `bytes_per_s` / the limit.
    pub ours_fraction: Option<f64>,
    /// The peer's `bytes_per_s` / the limit.
    pub peer_fraction: Option<f64>,
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
            memory: None,
        }
    }

    /// The same figures with memory figures attached.
    pub fn with_memory(mut self, memory: Memory) -> Self {
        self.memory = Some(memory);
        self
    }
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
        }
    }
}

impl Ratio {
    /// Ours / peer for every figure.
    pub fn between(ours: &Figures, peer: &Figures) -> Self {
        let memory_per_connection = match (&ours.memory, &peer.memory) {
            (Some(o), Some(p)) => ratio(o.bytes_per_connection, p.bytes_per_connection),
            _ => None,
        };
        Self {
            throughput: ratio(ours.ops_per_s, peer.ops_per_s),
            cpu_per_op: ratio(ours.cpu_ns_per_op, peer.cpu_ns_per_op),
            p99: ratio(ours.p99_us, peer.p99_us),
            memory_per_connection,
        }
    }
}

impl Limit {
    /// The loopback limit and each side's fraction of it.
    pub fn loopback(bytes_per_s: f64, ours: &Figures, peer: &Figures) -> Self {
        Self::named("loopback", bytes_per_s, ours, peer)
    }

    /// A limit called `name` (e.g. `min(loopback, aead)` for an encrypted
    /// stream) and each side's fraction of it.
    pub fn named(name: &str, bytes_per_s: f64, ours: &Figures, peer: &Figures) -> Self {
        Self {
            name: name.into(),
            bytes_per_s,
            ours_fraction: ratio(ours.bytes_per_s, bytes_per_s),
            peer_fraction: ratio(peer.bytes_per_s, bytes_per_s),
        }
    }
}

impl WorkloadReport {
    /// A workload's entry, its ratio computed from the two sides.
    pub fn new(name: &str, ours: Figures, peer_name: &str, peer: Figures) -> Self {
        Self {
            name: name.into(),
            ratio: Ratio::between(&ours, &peer),
            ours,
            peer: PeerFigures {
                name: peer_name.into(),
                figures: peer,
            },
            limit: None,
        }
    }

    /// The same entry with a limit attached.
    pub fn with_limit(mut self, limit: Limit) -> Self {
        self.limit = Some(limit);
        self
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
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    let r = num / den;
    (den != 0.0 && r.is_finite()).then_some(r)
}

// ---------------------------------------------------------------------------
// Median of several runs.

/// Why runs cannot be combined.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MedianError {
    /// No runs.
    #[error("no runs to take the median of")]
    Empty,
    /// The runs differ in shape (backend, workloads, peer, limit).
    #[error("run {run} differs from run 0: {what}")]
    Mismatch {
        /// The index of the odd run.
        run: usize,
        /// What differs.
        what: &'static str,
    },
}

/// One report whose every number is the median of that number over `runs`.
///
/// The runs must have the same backend and the same workloads (names, peer
/// names, which have a limit and memory figures) in the same order. Ratios
/// are the medians of the per-run ratios, each computed from figures of the
/// same run (which cancels drift between runs on a shared machine), not the
/// ratio of the medians; so a ratio recomputed from the median figures can
/// differ slightly from the reported one. With an even number of runs the
/// median is the mean of the two middle values (`ops` rounded down). A ratio
/// that is `null` in some runs is the median of the others (`null` if all).
pub fn median_of(runs: &[Report]) -> Result<Report, MedianError> {
    let first = runs.first().ok_or(MedianError::Empty)?;
    for (run, r) in runs.iter().enumerate().skip(1) {
        check_shape(first, r).map_err(|what| MedianError::Mismatch { run, what })?;
    }
    let workloads = (0..first.workloads.len())
        .map(|i| {
            let all: Vec<&WorkloadReport> = runs.iter().map(|r| &r.workloads[i]).collect();
            let w0 = all[0];
            let ours: Vec<&Figures> = all.iter().map(|w| &w.ours).collect();
            let peer: Vec<&Figures> = all.iter().map(|w| &w.peer.figures).collect();
            let ratios: Vec<&Ratio> = all.iter().map(|w| &w.ratio).collect();
            WorkloadReport {
                name: w0.name.clone(),
                ours: median_figures(&ours),
                peer: PeerFigures {
                    name: w0.peer.name.clone(),
                    figures: median_figures(&peer),
                },
                ratio: Ratio {
                    throughput: median_opt(ratios.iter().map(|r| r.throughput)),
                    cpu_per_op: median_opt(ratios.iter().map(|r| r.cpu_per_op)),
                    p99: median_opt(ratios.iter().map(|r| r.p99)),
                    memory_per_connection: median_opt(
                        ratios.iter().map(|r| r.memory_per_connection),
                    ),
                },
                limit: w0.limit.as_ref().map(|l| {
                    let limits: Vec<&Limit> = all.iter().filter_map(|w| w.limit.as_ref()).collect();
                    Limit {
                        name: l.name.clone(),
                        bytes_per_s: median(limits.iter().map(|l| l.bytes_per_s)),
                        ours_fraction: median_opt(limits.iter().map(|l| l.ours_fraction)),
                        peer_fraction: median_opt(limits.iter().map(|l| l.peer_fraction)),
                    }
                }),
            }
        })
        .collect();
    let controls: Vec<&ControlReport> = runs.iter().filter_map(|r| r.control.as_ref()).collect();
    Ok(Report {
        backend: first.backend.clone(),
        workloads,
        control: first
            .control
            .as_ref()
            .map(|_| control_report::median_control(&controls)),
    })
}

fn check_shape(a: &Report, b: &Report) -> Result<(), &'static str> {
    if a.backend != b.backend {
        return Err("backend");
    }
    if a.workloads.len() != b.workloads.len() {
        return Err("number of workloads");
    }
    if a.control.is_some() != b.control.is_some() {
        return Err("control workload");
    }
    for (x, y) in a.workloads.iter().zip(&b.workloads) {
        if x.name != y.name {
            return Err("workload names or order");
        }
        if x.peer.name != y.peer.name {
            return Err("peer name");
        }
        match (&x.limit, &y.limit) {
            (Some(l), Some(m)) if l.name == m.name => {}
            (None, None) => {}
            _ => return Err("limit"),
        }
        if x.ours.memory.is_some() != y.ours.memory.is_some()
            || x.peer.figures.memory.is_some() != y.peer.figures.memory.is_some()
        {
            return Err("memory figures");
        }
    }
    Ok(())
}

fn median_figures(runs: &[&Figures]) -> Figures {
    let f = |get: fn(&Figures) -> f64| median(runs.iter().map(|r| get(r)));
    let memory = runs[0].memory.map(|_| {
        let mems: Vec<Memory> = runs.iter().filter_map(|r| r.memory).collect();
        let m = |get: fn(&Memory) -> f64| median(mems.iter().map(get));
        Memory {
            connections: median_u64(mems.iter().map(|m| m.connections)),
            rss_bytes: median_u64(mems.iter().map(|m| m.rss_bytes)),
            peak_rss_bytes: median_u64(mems.iter().map(|m| m.peak_rss_bytes)),
            bytes_per_connection: m(|m| m.bytes_per_connection),
        }
    });
    Figures {
        ops_per_s: f(|r| r.ops_per_s),
        bytes_per_s: f(|r| r.bytes_per_s),
        p50_us: f(|r| r.p50_us),
        p99_us: f(|r| r.p99_us),
        cpu_ns_per_op: f(|r| r.cpu_ns_per_op),
        server_cpu_s: f(|r| r.server_cpu_s),
        ops: median_u64(runs.iter().map(|r| r.ops)),
        memory,
    }
}

/// The median (mean of the two middle values for an even count; 0 when
/// empty).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn median_u64(values: impl IntoIterator<Item = u64>) -> u64 {
    let mut v: Vec<u64> = values.into_iter().collect();
    v.sort_unstable();
    let n = v.len();
    match n {
        0 => 0,
        _ if n % 2 == 1 => v[n / 2],
        // Halves first: the sum of two u64 could overflow.
        _ => v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2,
    }
}

fn median_opt(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = values.into_iter().flatten().collect();
    (!v.is_empty()).then(|| median(v))
}

// ---------------------------------------------------------------------------
// Table for people.

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_table(self, f)
    }
}

/// Writes the report as a table: per workload one line per server, then the
/// ratios, the limit and the memory figures where present.
pub fn write_table(report: &Report, out: &mut impl fmt::Write) -> fmt::Result {
    writeln!(out, "backend: {}", report.backend)?;
    if !report.workloads.is_empty() {
        header(out, "server", "goodput")?;
    }
    for w in &report.workloads {
        row(out, &w.name, "ours", &w.ours)?;
        let peer = format!("peer ({})", w.peer.name);
        row(out, "", &peer, &w.peer.figures)?;
        let r = &w.ratio;
        writeln!(
            out,
            "{:<12} {:<14} throughput {} · CPU/op {} · p99 {}",
            "",
            "ours / peer",
            times(r.throughput),
            times(r.cpu_per_op),
            times(r.p99)
        )?;
        if let Some(l) = &w.limit {
            writeln!(
                out,
                "{:<12} {:<14} {} {} · ours {} · peer {}",
                "",
                "limit",
                l.name,
                rate(l.bytes_per_s),
                percent(l.ours_fraction),
                percent(l.peer_fraction)
            )?;
        }
        if let (Some(o), Some(p)) = (&w.ours.memory, &w.peer.figures.memory) {
            writeln!(
                out,
                "{:<12} {:<14} ours {}/conn (RSS {}, {} conns) · peer {}/conn (RSS {}) · ratio {}",
                "",
                "memory",
                bytes(o.bytes_per_connection),
                bytes(o.rss_bytes as f64),
                o.connections,
                bytes(p.bytes_per_connection),
                bytes(p.rss_bytes as f64),
                times(r.memory_per_connection)
            )?;
        }
    }
    if let Some(c) = &report.control {
        control_report::write_rows(c, out)?;
    }
    Ok(())
}

/// The table's header; the control rows name two columns differently.
pub(crate) fn header(out: &mut impl fmt::Write, second: &str, fourth: &str) -> fmt::Result {
    writeln!(
        out,
        "{:<12} {:<14} {:>10} {:>11} {:>8} {:>8} {:>10} {:>10} {:>12}",
        "workload", second, "ops/s", fourth, "p50 µs", "p99 µs", "CPU/op", "server CPU", "ops"
    )
}

fn row(out: &mut impl fmt::Write, name: &str, side: &str, f: &Figures) -> fmt::Result {
    writeln!(
        out,
        "{:<12} {:<14} {:>10} {:>11} {:>8.1} {:>8.1} {:>10} {:>9.3}s {:>12}",
        name,
        side,
        si(f.ops_per_s),
        rate(f.bytes_per_s),
        f.p50_us,
        f.p99_us,
        nanos(f.cpu_ns_per_op),
        f.server_cpu_s,
        f.ops
    )
}

/// 1234567 → "1.23 M".
fn si(x: f64) -> String {
    let mut s = String::new();
    let _ = match x {
        x if x >= 1e9 => write!(s, "{:.2} G", x / 1e9),
        x if x >= 1e6 => write!(s, "{:.2} M", x / 1e6),
        x if x >= 1e3 => write!(s, "{:.1} k", x / 1e3),
        x => write!(s, "{x:.0}"),
    };
    s
}

fn rate(bytes_per_s: f64) -> String {
    format!("{}B/s", si(bytes_per_s))
}

fn bytes(b: f64) -> String {
    match b {
        b if b >= 1024.0 * 1024.0 => format!("{:.1} MiB", b / (1024.0 * 1024.0)),
        b if b >= 1024.0 => format!("{:.1} KiB", b / 1024.0),
        b => format!("{b:.0} B"),
    }
}

fn nanos(ns: f64) -> String {
    if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("×{r:.2}"))
}

fn percent(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("{:.1} %", r * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency(p50: f64, p99: f64) -> LatencySummary {
        LatencySummary {
            p50_us: p50,
            p99_us: p99,
            ..LatencySummary::default()
        }
    }

    /// A report whose figures are scaled by `k`.
    fn sample(k: f64) -> Report {
        let secs = Duration::from_secs(2);
        let ours = Figures::from_run(
            Workload::Pingpong,
            (200_000.0 * k) as u64,
            secs,
            (1e9 * k) as u64,
            &latency(40.0 * k, 90.0 * k),
        );
        let peer = Figures::from_run(
            Workload::Pingpong,
            100_000,
            secs,
            2_000_000_000,
            &latency(50.0, 100.0),
        );
        let s_ours = Figures::from_run(
            Workload::Stream,
            100_000,
            secs,
            (1e9 * k) as u64,
            &latency(1000.0, 2000.0),
        );
        let s_peer = Figures::from_run(
            Workload::Stream,
            80_000,
            secs,
            1_500_000_000,
            &latency(1200.0, 3000.0),
        );
        let limit = Limit::loopback(1e9 * k, &s_ours, &s_peer);
        let c_ours = Figures::from_run(
            Workload::Idle,
            10_000,
            secs,
            (1e8 * k) as u64,
            &latency(30.0, 60.0),
        )
        .with_memory(Memory::from_rss(
            10_000,
            1 << 20,
            (1 << 20) + 30_000_000,
            50 << 20,
        ));
        let c_peer = Figures::from_run(
            Workload::Idle,
            10_000,
            secs,
            200_000_000,
            &latency(30.0, 60.0),
        )
        .with_memory(Memory::from_rss(
            10_000,
            1 << 20,
            (1 << 20) + 90_000_000,
            99 << 20,
        ));
        Report {
            backend: "io_uring".into(),
            workloads: vec![
                WorkloadReport::new("pingpong", ours, "tokio", peer),
                WorkloadReport::new("stream", s_ours, "tokio", s_peer).with_limit(limit),
                WorkloadReport::new("connections", c_ours, "tokio", c_peer),
            ],
            control: None,
        }
    }

    #[test]
    fn figures_from_a_run() {
        let f = Figures::from_run(
            Workload::Stream,
            1000,
            Duration::from_secs(2),
            4_000_000,
            &latency(10.0, 20.0),
        );
        assert_eq!(f.ops_per_s, 500.0);
        assert_eq!(f.bytes_per_s, 500.0 * 16384.0);
        assert_eq!(f.cpu_ns_per_op, 4000.0);
        assert_eq!(f.server_cpu_s, 0.004);
        let none = Figures::from_run(Workload::Stream, 0, Duration::ZERO, 0, &latency(0.0, 0.0));
        assert_eq!((none.ops_per_s, none.cpu_ns_per_op), (0.0, 0.0));
    }

    #[test]
    fn ratios_are_ours_over_peer_and_null_on_zero() {
        let r = sample(1.0);
        let p = &r.workloads[0].ratio;
        assert_eq!(p.throughput, Some(2.0));
        assert_eq!(p.cpu_per_op, Some(0.25));
        assert_eq!(p.p99, Some(0.9));
        let zero = Ratio::between(&Figures::default(), &Figures::default());
        assert_eq!(zero, Ratio::default());
        let l = r.workloads[1].limit.as_ref().unwrap();
        assert!((l.ours_fraction.unwrap() - 0.8192).abs() < 1e-9);
        let m = r.workloads[2].ratio.memory_per_connection.unwrap();
        assert!((m - 1.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn median_of_known_runs() {
        let runs = [sample(3.0), sample(1.0), sample(2.0)];
        let m = median_of(&runs).unwrap();
        assert_eq!(m, sample(2.0));
        // Even count: the mean of the two middle values.
        let m = median_of(&[sample(1.0), sample(2.0), sample(3.0), sample(10.0)]).unwrap();
        let pp = &m.workloads[0];
        assert_eq!(pp.ours.p50_us, 40.0 * 2.5);
        assert_eq!(pp.ours.ops, 500_000);
        assert_eq!(pp.ratio.throughput, Some(5.0));
        assert_eq!(m.workloads[1].limit.as_ref().unwrap().bytes_per_s, 2.5e9);
        assert_eq!(median([1.0, 5.0, 2.0]), 2.0);
        assert_eq!(median([]), 0.0);
        assert_eq!(median_u64([u64::MAX, u64::MAX]), u64::MAX);
        assert_eq!(median_u64([1, 2]), 1);
        assert_eq!(median_opt([None, Some(4.0), Some(2.0)]), Some(3.0));
        assert_eq!(median_opt([None, None]), None);
    }

    #[test]
    fn median_of_refuses_mixed_runs() {
        assert_eq!(median_of(&[]), Err(MedianError::Empty));
        let mut other = sample(1.0);
        other.backend = "epoll".into();
        let err = median_of(&[sample(1.0), other]).unwrap_err();
        assert_eq!(
            err,
            MedianError::Mismatch {
                run: 1,
                what: "backend"
            }
        );
        let mut other = sample(1.0);
        other.workloads.swap(0, 1);
        assert!(median_of(&[sample(1.0), other]).is_err());
        let mut other = sample(1.0);
        other.workloads[1].limit = None;
        assert!(median_of(&[sample(1.0), other]).is_err());
    }

    #[test]
    fn table_shows_every_workload() {
        let text = sample(1.0).to_string();
        for needle in [
            "backend: io_uring",
            "pingpong",
            "peer (tokio)",
            "×2.00",
            "loopback",
            "81.9 %",
            "KiB/conn",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
        assert_eq!(si(1_234_567.0), "1.23 M");
        assert_eq!(nanos(812.0), "812 ns");
        assert_eq!(times(None), "n/a");
    }
}
