//! The `control` part of the `dtp bench` report: decisions and
//! handovers of the terminal control plane, measured on our gateway only.
//!
//! No peer is named for this workload, so there is no ratio: the
//! figures are absolute, and the CPU time per operation (the OS's
//! accounting of the gateway process, as for the other workloads) is what
//! later changes are compared against. The table's row says so.
//!
//! ```json
//! "control": {
//!   "decisions": { "fays": 64, "resources": 64, "ops_per_s": …, "p50_us": …,
//!                  "p99_us": …, "cpu_ns_per_op": …, "server_cpu_s": …,
//!                  "control_cpu_ns_per_op": …,
//!                  "ops": …, "refused": 0 },
//!   "handovers": { …the same fields… },
//!   "decisions_streams": { …the same fields… } | null,
//!   "handovers_streams": { …the same fields… } | null,
//!   "decisions_etcd": { …the same fields… } | null,
//!   "handovers_etcd": { …the same fields… } | null,
//!   "etcd_not_run": "why" | null }
//! ```
//!
//! The first two are measured with the realtime front end off (`dtp
//! serve --no-realtime`): the decision itself. The `_streams` pair again
//! with it on, so that every committed change is also published on the
//! built-in streams (`sessions`, `handovers`, …: encoded, cursor-tagged,
//! appended to a ledger and offered to the shards), as `dtp serve` does by
//! default; `null` in a report written before they were measured.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::latency::LatencySummary;
use crate::report::median;

/// Both control runs of one `dtp bench` run (or their medians).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlReport {
    /// Decisions: one op is an AuthRequest answered by its AuthResult (in
    /// a loop that also releases each session).
    pub decisions: ControlFigures,
    /// Handovers under the priority script where the requester wins: one
    /// op is a grant that took the resource from the pair's other Fay.
    pub handovers: ControlFigures,
    /// Decisions with the built-in realtime streams published.
    #[serde(default)]
    pub decisions_streams: Option<ControlFigures>,
    /// Handovers with the built-in realtime streams published.
    #[serde(default)]
    pub handovers_streams: Option<ControlFigures>,
    /// Decisions with the gateway in a cluster through etcd.
    #[serde(default)]
    pub decisions_etcd: Option<ControlFigures>,
    /// Handovers with the gateway in a cluster through etcd.
    #[serde(default)]
    pub handovers_etcd: Option<ControlFigures>,
    /// Why the etcd pair was asked for and not run.
    #[serde(default)]
    pub etcd_not_run: Option<String>,
}

/// One control run's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlFigures {
    /// Fays (runtimes) connected, one connection each.
    pub fays: u64,
    /// Distinct resources they asked for.
    pub resources: u64,
    /// Operations per second over the measured interval.
    pub ops_per_s: f64,
    /// Median latency, µs: AuthRequest to its AuthResult.
    pub p50_us: f64,
    /// 99th-percentile latency, µs.
    pub p99_us: f64,
    /// The gateway's CPU time per operation, ns.
    pub cpu_ns_per_op: f64,
    /// The gateway's CPU time (user + system) over the measured interval, s.
    pub server_cpu_s: f64,
    /// The control thread's share of `cpu_ns_per_op`, ns (the rest is the
    /// shards' and the workers'); 0 when it could not be read.
    #[serde(default)]
    pub control_cpu_ns_per_op: f64,
    /// Operations in the measured interval.
    pub ops: u64,
    /// AuthRequests refused over the whole run (any code).
    pub refused: u64,
}

impl ControlFigures {
    /// The figures of a run of `fays` Fays on `resources` resources that
    /// completed `ops` operations in `elapsed`, during which the gateway
    /// used `server_cpu_ns` of CPU, `control_cpu_ns` of it on the control
    /// thread.
    pub fn from_run(
        fays: u64,
        resources: u64,
        ops: u64,
        elapsed: Duration,
        (server_cpu_ns, control_cpu_ns): (u64, u64),
        latency: &LatencySummary,
        refused: u64,
    ) -> Self {
        let secs = elapsed.as_secs_f64();
        Self {
            fays,
            resources,
            ops_per_s: if secs > 0.0 { ops as f64 / secs } else { 0.0 },
            p50_us: latency.p50_us,
            p99_us: latency.p99_us,
            cpu_ns_per_op: if ops > 0 {
                server_cpu_ns as f64 / ops as f64
            } else {
                0.0
            },
            server_cpu_s: server_cpu_ns as f64 / 1e9,
            control_cpu_ns_per_op: if ops > 0 {
                control_cpu_ns as f64 / ops as f64
            } else {
                0.0
            },
            ops,
            refused,
        }
    }
}

/// Every number the median of that number over `runs` (empty: zeros).
pub fn median_control(runs: &[&ControlReport]) -> ControlReport {
    let d: Vec<&ControlFigures> = runs.iter().map(|r| &r.decisions).collect();
    let h: Vec<&ControlFigures> = runs.iter().map(|r| &r.handovers).collect();
    let ds: Vec<&ControlFigures> = runs
        .iter()
        .filter_map(|r| r.decisions_streams.as_ref())
        .collect();
    let hs: Vec<&ControlFigures> = runs
        .iter()
        .filter_map(|r| r.handovers_streams.as_ref())
        .collect();
    let de: Vec<&ControlFigures> = runs
        .iter()
        .filter_map(|r| r.decisions_etcd.as_ref())
        .collect();
    let he: Vec<&ControlFigures> = runs
        .iter()
        .filter_map(|r| r.handovers_etcd.as_ref())
        .collect();
    let some = |v: &[&ControlFigures]| (!v.is_empty()).then(|| median_figures(v));
    ControlReport {
        decisions: median_figures(&d),
        handovers: median_figures(&h),
        decisions_streams: some(&ds),
        handovers_streams: some(&hs),
        decisions_etcd: some(&de),
        handovers_etcd: some(&he),
        etcd_not_run: runs.iter().find_map(|r| r.etcd_not_run.clone()),
    }
}

fn median_figures(runs: &[&ControlFigures]) -> ControlFigures {
    let f = |get: fn(&ControlFigures) -> f64| median(runs.iter().map(|r| get(r)));
    // Counts: the median as a float, rounded down (exact below 2^53).
    let n = |get: fn(&ControlFigures) -> u64| median(runs.iter().map(|r| get(r) as f64)) as u64;
    ControlFigures {
        fays: n(|r| r.fays),
        resources: n(|r| r.resources),
        ops_per_s: f(|r| r.ops_per_s),
        p50_us: f(|r| r.p50_us),
        p99_us: f(|r| r.p99_us),
        cpu_ns_per_op: f(|r| r.cpu_ns_per_op),
        server_cpu_s: f(|r| r.server_cpu_s),
        control_cpu_ns_per_op: f(|r| r.control_cpu_ns_per_op),
        ops: n(|r| r.ops),
        refused: n(|r| r.refused),
    }
}

/// Writes the control rows under the workload table: their own header
/// (Fays and resources where the others have goodput), one line per run,
/// then the line that says why there is no ratio.
pub fn write_rows(c: &ControlReport, out: &mut impl fmt::Write) -> fmt::Result {
    crate::report::table::header(out, "run", "Fays/res.")?;
    let rows = [
        ("control", "decisions", Some(&c.decisions)),
        ("", "handovers", Some(&c.handovers)),
        ("", "decisions+streams", c.decisions_streams.as_ref()),
        ("", "handovers+streams", c.handovers_streams.as_ref()),
        ("", "decisions+etcd", c.decisions_etcd.as_ref()),
        ("", "handovers+etcd", c.handovers_etcd.as_ref()),
    ];
    for (name, label, f) in rows {
        let Some(f) = f else { continue };
        writeln!(
            out,
            "{name:<12} {label:<18} {:>10} {:>11} {:>8.1} {:>8.1} {:>10} {:>9.3}s {:>10} {:>9} {:>12}",
            format!("{}/s", count(f.ops_per_s)),
            format!("{}/{}", f.fays, f.resources),
            f.p50_us,
            f.p99_us,
            nanos(f.cpu_ns_per_op),
            f.server_cpu_s,
            "-",
            "-",
            f.ops
        )?;
    }
    let control: Vec<String> = rows
        .iter()
        .filter_map(|(_, label, f)| {
            f.filter(|f| f.control_cpu_ns_per_op > 0.0)
                .map(|f| format!("{label} {}", nanos(f.control_cpu_ns_per_op)))
        })
        .collect();
    if !control.is_empty() {
        writeln!(
            out,
            "{:<12} {:<18} control thread's CPU/op (the rest is the shards'): {}",
            "",
            "",
            control.join(", ")
        )?;
    }
    if let Some(why) = &c.etcd_not_run {
        writeln!(out, "{:<12} {:<18} +etcd not run: {why}", "", "")?;
    }
    writeln!(
        out,
        "{:<12} {:<18} no peer: absolute figures, CPU/op is per decision / per handover; +streams: the built-in realtime streams published too; +etcd: in a cluster through a local etcd; {} + {} refused",
        "", "ours / peer", c.decisions.refused, c.handovers.refused
    )
}

fn count(x: f64) -> String {
    match x {
        x if x >= 1e6 => format!("{:.2} M", x / 1e6),
        x if x >= 1e3 => format!("{:.1} k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

fn nanos(ns: f64) -> String {
    if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(ops: u64, cpu_ns: u64) -> ControlFigures {
        let lat = LatencySummary {
            p50_us: 100.0,
            p99_us: 400.0,
            ..LatencySummary::default()
        };
        let control_ns = cpu_ns / 4;
        let cpu = (cpu_ns, control_ns);
        ControlFigures::from_run(64, 64, ops, Duration::from_secs(2), cpu, &lat, 0)
    }

    #[test]
    fn figures_are_per_second_and_per_op() {
        let f = figures(20_000, 1_000_000_000);
        assert_eq!(f.ops_per_s, 10_000.0);
        assert_eq!(f.cpu_ns_per_op, 50_000.0);
        assert_eq!(f.server_cpu_s, 1.0);
        assert_eq!(f.control_cpu_ns_per_op, 12_500.0);
        assert_eq!(figures(0, 5).cpu_ns_per_op, 0.0);
        assert_eq!(figures(0, 5).control_cpu_ns_per_op, 0.0);
    }

    #[test]
    fn medians_and_rows() {
        let runs: Vec<ControlReport> = [1, 3, 2]
            .iter()
            .map(|&k| ControlReport {
                decisions: figures(10_000 * k, 1_000_000_000),
                handovers: figures(1_000 * k, 500_000_000),
                // Only two runs measured the streams.
                decisions_streams: (k != 2).then(|| figures(4_000 * k, 1_000_000_000)),
                handovers_streams: None,
                // One run through etcd; another could not start it.
                decisions_etcd: (k == 3).then(|| figures(3_000, 1_500_000_000)),
                handovers_etcd: None,
                etcd_not_run: (k == 2).then(|| "etcd is not installed".to_owned()),
            })
            .collect();
        let m = median_control(&runs.iter().collect::<Vec<_>>());
        assert_eq!(m.decisions.ops, 20_000);
        assert_eq!(m.handovers.ops_per_s, 1_000.0);
        // The median of 4,000 and 12,000.
        assert_eq!(m.decisions_streams.as_ref().unwrap().ops, 8_000);
        assert_eq!(m.handovers_streams, None);
        let mut text = String::new();
        write_rows(&m, &mut text).unwrap();
        for needle in ["control", "decisions", "handovers", "10.0 k/s", "no peer"] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
        assert!(text.contains("decisions+streams"), "{text}");
        assert!(!text.contains("handovers+streams"), "{text}");
        assert_eq!(m.decisions_etcd.as_ref().unwrap().ops, 3_000);
        assert!(text.contains("decisions+etcd"), "{text}");
        assert!(!text.contains("handovers+etcd"), "{text}");
        assert!(
            text.contains("+etcd not run: etcd is not installed"),
            "{text}"
        );
        // 1 s of control thread over 20,000 and 2,000 ops.
        assert!(
            text.contains("control thread's CPU/op (the rest is the shards'): decisions 12.50 µs, handovers 62.50 µs"),
            "{text}"
        );
    }
}
