//! The report as a table for people: per workload one line per side, then
//! ours / each peer, the limit with every figure measured, memory, resume
//! counts; then the control rows, the notes and what failed.

use std::fmt::{self, Write as _};

use super::{Figures, Limit, Report, WorkloadReport};
use crate::control_report;

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_table(self, f)
    }
}

/// Writes the whole report as a table.
pub fn write_table(report: &Report, out: &mut impl fmt::Write) -> fmt::Result {
    let runs = report.runs.len();
    writeln!(
        out,
        "backend: {} · {}",
        report.backend,
        match runs {
            1 => "1 run".to_owned(),
            n => format!("medians of {n} runs"),
        }
    )?;
    if !report.workloads.is_empty() {
        header(out, "server", "goodput")?;
    }
    for w in &report.workloads {
        workload(out, w)?;
    }
    if let Some(c) = &report.control {
        control_report::write_rows(c, out)?;
    }
    for note in &report.notes {
        writeln!(out, "note: {note}")?;
    }
    if !report.failures.is_empty() {
        let n = report.failures.len();
        writeln!(out, "{n} failed {}:", if n == 1 { "step" } else { "steps" })?;
        for f in &report.failures {
            let run = f.run.map_or_else(String::new, |r| format!("run {r} · "));
            let side = f
                .side
                .as_ref()
                .map_or_else(String::new, |s| format!(" · {s}"));
            writeln!(out, "  {run}{}{side}: {}", f.workload, f.reason)?;
        }
    }
    Ok(())
}

fn workload(out: &mut impl fmt::Write, w: &WorkloadReport) -> fmt::Result {
    let mut name = w.name.as_str();
    for (side, f) in w.sides() {
        row(out, name, side, f)?;
        name = "";
    }
    if w.ours.is_none() {
        writeln!(
            out,
            "{:<12} {:<18} no figures (see the failures below)",
            w.name, "ours"
        )?;
    }
    for p in &w.peers {
        let r = &p.ratio;
        let memory = r
            .memory_per_connection
            .map_or_else(String::new, |m| format!(" · memory {}", times(Some(m))));
        let setup = r.setup_rate.map_or_else(String::new, |s| {
            format!(" · set-up rate {}", times(Some(s)))
        });
        writeln!(
            out,
            "{:<12} {:<18} throughput {} · CPU/op {} · p99 {}{memory}{setup}",
            "",
            format!("ours / {}", p.name),
            times(r.throughput),
            times(r.cpu_per_op),
            times(r.p99)
        )?;
    }
    if let Some(l) = &w.limit {
        limit(out, l)?;
    }
    for (side, f) in w.sides() {
        if let Some(m) = &f.memory {
            let from = m
                .counted_from
                .map_or_else(String::new, |n| format!(", counted from {n}"));
            let setup = m
                .setup_per_s
                .map_or_else(String::new, |s| format!(", {s:.0} set up/s"));
            let failed = if m.failed > 0 {
                format!(", {} connects failed", m.failed)
            } else {
                String::new()
            };
            writeln!(
                out,
                "{:<12} {:<18} {}: {}/conn (RSS {}, {} conns{from}{setup}{failed})",
                "",
                "memory",
                side,
                bytes(m.bytes_per_connection),
                bytes(m.rss_bytes as f64),
                m.connections
            )?;
        }
        if let (Some(n), Some(p50), Some(p99)) = (f.resumes, f.resume_p50_us, f.resume_p99_us) {
            writeln!(
                out,
                "{:<12} {:<18} {}: {n} resumes, p50 {p50:.0} µs, p99 {p99:.0} µs, {} lost, {} duplicated",
                "",
                "resume",
                side,
                f.lost.unwrap_or(0),
                f.duplicated.unwrap_or(0)
            )?;
        }
    }
    Ok(())
}

fn limit(out: &mut impl fmt::Write, l: &Limit) -> fmt::Result {
    let fractions: Vec<String> = l
        .fractions
        .iter()
        .map(|s| format!("{} {}", s.name, percent(s.fraction)))
        .collect();
    writeln!(
        out,
        "{:<12} {:<18} {} {} · {}",
        "",
        "limit",
        l.name,
        rate(l.bytes_per_s),
        fractions.join(" · ")
    )?;
    let others: Vec<String> = l
        .figures
        .iter()
        // The binding figure is on the line above (as ours, for a
        // per-side baseline).
        .filter(|f| f.name != l.name || f.side.as_deref().is_some_and(|s| s != super::OURS))
        .map(|f| match &f.side {
            Some(s) => format!("{} ({s}) {}", f.name, rate(f.bytes_per_s)),
            None => format!("{} {}", f.name, rate(f.bytes_per_s)),
        })
        .collect();
    if !others.is_empty() {
        writeln!(
            out,
            "{:<12} {:<18} also measured: {}",
            "",
            "",
            others.join(" · ")
        )?;
    }
    Ok(())
}

/// The table's header; the control rows name two columns differently.
pub(crate) fn header(out: &mut impl fmt::Write, second: &str, fourth: &str) -> fmt::Result {
    writeln!(
        out,
        "{:<12} {:<18} {:>10} {:>11} {:>8} {:>8} {:>10} {:>10} {:>10} {:>9} {:>12}",
        "workload",
        second,
        "ops/s",
        fourth,
        "p50 µs",
        "p99 µs",
        "CPU/op",
        "server CPU",
        "client CPU",
        "saturated",
        "ops"
    )
}

fn row(out: &mut impl fmt::Write, name: &str, side: &str, f: &Figures) -> fmt::Result {
    writeln!(
        out,
        "{:<12} {:<18} {:>10} {:>11} {:>8.1} {:>8.1} {:>10} {:>9.3}s {:>10} {:>9} {:>12}",
        name,
        side,
        si(f.ops_per_s),
        rate(f.bytes_per_s),
        f.p50_us,
        f.p99_us,
        nanos(f.cpu_ns_per_op),
        f.server_cpu_s,
        f.client_cpu_s
            .map_or_else(|| "-".to_owned(), |c| format!("{c:.3}s")),
        f.saturated.as_deref().unwrap_or("-"),
        f.ops
    )
}

/// 1234567 → "1.23 M".
pub(crate) fn si(x: f64) -> String {
    let mut s = String::new();
    let _ = match x {
        x if x >= 1e9 => write!(s, "{:.2} G", x / 1e9),
        x if x >= 1e6 => write!(s, "{:.2} M", x / 1e6),
        x if x >= 1e3 => write!(s, "{:.1} k", x / 1e3),
        x => write!(s, "{x:.0}"),
    };
    s
}

pub(crate) fn rate(bytes_per_s: f64) -> String {
    format!("{}B/s", si(bytes_per_s))
}

pub(crate) fn bytes(b: f64) -> String {
    match b {
        b if b >= 1024.0 * 1024.0 => format!("{:.1} MiB", b / (1024.0 * 1024.0)),
        b if b >= 1024.0 => format!("{:.1} KiB", b / 1024.0),
        b => format!("{b:.0} B"),
    }
}

pub(crate) fn nanos(ns: f64) -> String {
    if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

pub(crate) fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("×{r:.2}"))
}

pub(crate) fn percent(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".into(), |r| format!("{:.1} %", r * 100.0))
}
