//! Several runs into one [`Report`]: per workload and per side, the median
//! of every figure over the runs that measured it.
//!
//! Nothing here can refuse: a side that failed in one run is the median of
//! the others, a workload that failed everywhere is absent (its failures
//! say why), and a limit is combined figure by figure, the binding one
//! chosen after the medians. Ratios are the **medians of the per-run
//! ratios**, each from figures of the same run (which cancels drift between
//! runs on a shared machine), not the ratios of the medians; likewise each
//! side's fraction of a limit. With an even number of values the median is
//! the mean of the two middle ones (counts rounded down).

use super::{
    Failure, Figures, Limit, LimitFigure, Memory, OURS, PeerFigures, PeerReport, Ratio, Report,
    RunReport, RunWorkload, SideFraction, WorkloadReport, ratio,
};
use crate::control_report::{self, ControlReport};

/// Combines `runs` into one report; `failures` (before any run) and `notes`
/// are carried over, each run's failures appended to them.
pub fn combine(runs: Vec<RunReport>, failures: Vec<Failure>, notes: Vec<String>) -> Report {
    let mut backends: Vec<&str> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for r in &runs {
        push_new(&mut backends, &r.backend);
        for w in &r.workloads {
            push_new(&mut names, &w.name);
        }
    }
    let backend = match backends.as_slice() {
        [] => "unknown".to_owned(),
        [one] => (*one).to_owned(),
        many => format!("mixed ({})", many.join(", ")),
    };
    let workloads = names.iter().map(|n| workload(n, &runs)).collect();
    let controls: Vec<&ControlReport> = runs.iter().filter_map(|r| r.control.as_ref()).collect();
    let control = (!controls.is_empty()).then(|| control_report::median_control(&controls));
    let mut failures = failures;
    failures.extend(runs.iter().flat_map(|r| r.failures.iter().cloned()));
    Report {
        backend,
        workloads,
        control,
        failures,
        notes,
        runs,
    }
}

fn push_new<'a>(v: &mut Vec<&'a str>, s: &'a str) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn workload(name: &str, runs: &[RunReport]) -> WorkloadReport {
    let per_run: Vec<&RunWorkload> = runs
        .iter()
        .filter_map(|r| r.workloads.iter().find(|w| w.name == name))
        .collect();
    let mut sides: Vec<&str> = Vec::new();
    for w in &per_run {
        for s in &w.sides {
            push_new(&mut sides, &s.name);
        }
    }
    let of_side = |side: &str| -> Option<Figures> {
        let all: Vec<&Figures> = per_run.iter().filter_map(|w| w.side(side)).collect();
        (!all.is_empty()).then(|| median_figures(&all))
    };
    let peers: Vec<PeerReport> = sides
        .iter()
        .filter(|s| **s != OURS)
        .filter_map(|s| {
            Some(PeerReport {
                name: (*s).to_owned(),
                figures: of_side(s)?,
                ratio: median_ratio(&per_run, s),
            })
        })
        .collect();
    WorkloadReport {
        name: name.to_owned(),
        ours: of_side(OURS),
        peer: peers.first().map(|p| PeerFigures {
            name: p.name.clone(),
            figures: p.figures.clone(),
        }),
        ratio: peers.first().map(|p| p.ratio).unwrap_or_default(),
        limit: limit(&per_run, &sides),
        peers,
    }
}

/// The median of the per-run ratios of ours to `peer`.
fn median_ratio(per_run: &[&RunWorkload], peer: &str) -> Ratio {
    let all: Vec<Ratio> = per_run
        .iter()
        .filter_map(|w| Some(Ratio::between(w.side(OURS)?, w.side(peer)?)))
        .collect();
    let m = |get: fn(&Ratio) -> Option<f64>| median_opt(all.iter().map(get));
    Ratio {
        throughput: m(|r| r.throughput),
        cpu_per_op: m(|r| r.cpu_per_op),
        p99: m(|r| r.p99),
        memory_per_connection: m(|r| r.memory_per_connection),
        setup_rate: m(|r| r.setup_rate),
    }
}

/// Every limit figure's median; the binding one is the lowest of those
/// that apply to every side or to ours.
fn limit(per_run: &[&RunWorkload], sides: &[&str]) -> Option<Limit> {
    let mut keys: Vec<(&str, Option<&str>)> = Vec::new();
    for w in per_run {
        for l in &w.limits {
            let key = (l.name.as_str(), l.side.as_deref());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    let figures: Vec<LimitFigure> = keys
        .iter()
        .map(|&(name, side)| LimitFigure {
            name: name.to_owned(),
            bytes_per_s: median(
                per_run
                    .iter()
                    .flat_map(|w| &w.limits)
                    .filter(|l| l.name == name && l.side.as_deref() == side)
                    .map(|l| l.bytes_per_s),
            ),
            side: side.map(str::to_owned),
        })
        .collect();
    let binding = figures
        .iter()
        .filter(|f| f.bytes_per_s > 0.0 && f.side.as_deref().is_none_or(|s| s == OURS))
        .min_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s))?;
    // Each side's fraction: per run, its goodput over the binding figure
    // that applies to it (its own baseline, or the shared one).
    let fraction = |side: &str| {
        median_opt(per_run.iter().map(|w| {
            let f = w.side(side)?;
            let l = w
                .limits
                .iter()
                .filter(|l| l.name == binding.name)
                .find(|l| l.side.as_deref().is_none_or(|s| s == side))?;
            ratio(f.bytes_per_s, l.bytes_per_s)
        }))
    };
    let fractions: Vec<SideFraction> = sides
        .iter()
        .map(|s| SideFraction {
            name: (*s).to_owned(),
            fraction: fraction(s),
        })
        .collect();
    let first_peer = sides.iter().find(|s| **s != OURS);
    Some(Limit {
        name: binding.name.clone(),
        bytes_per_s: binding.bytes_per_s,
        ours_fraction: fraction(OURS),
        peer_fraction: first_peer.and_then(|p| fraction(p)),
        fractions,
        figures: figures.clone(),
    })
}

fn median_figures(runs: &[&Figures]) -> Figures {
    let f = |get: fn(&Figures) -> f64| median(runs.iter().map(|r| get(r)));
    let opt = |get: fn(&Figures) -> Option<f64>| median_opt(runs.iter().map(|r| get(r)));
    let count = |get: fn(&Figures) -> Option<u64>| {
        let v: Vec<u64> = runs.iter().filter_map(|r| get(r)).collect();
        (!v.is_empty()).then(|| median_u64(v))
    };
    let mems: Vec<Memory> = runs.iter().filter_map(|r| r.memory).collect();
    let memory = (!mems.is_empty()).then(|| Memory {
        connections: median_u64(mems.iter().map(|m| m.connections)),
        rss_bytes: median_u64(mems.iter().map(|m| m.rss_bytes)),
        peak_rss_bytes: median_u64(mems.iter().map(|m| m.peak_rss_bytes)),
        bytes_per_connection: median(mems.iter().map(|m| m.bytes_per_connection)),
        counted_from: (mems.iter().all(|m| m.counted_from.is_some()))
            .then(|| median_u64(mems.iter().filter_map(|m| m.counted_from))),
        setup_per_s: median_opt(mems.iter().map(|m| m.setup_per_s)),
        failed: median_u64(mems.iter().map(|m| m.failed)),
    });
    Figures {
        ops_per_s: f(|r| r.ops_per_s),
        bytes_per_s: f(|r| r.bytes_per_s),
        p50_us: f(|r| r.p50_us),
        p99_us: f(|r| r.p99_us),
        cpu_ns_per_op: f(|r| r.cpu_ns_per_op),
        server_cpu_s: f(|r| r.server_cpu_s),
        ops: median_u64(runs.iter().map(|r| r.ops)),
        client_cpu_s: opt(|r| r.client_cpu_s),
        saturated: most_common(runs.iter().filter_map(|r| r.saturated.as_deref())),
        memory,
        resumes: count(|r| r.resumes),
        lost: count(|r| r.lost),
        duplicated: count(|r| r.duplicated),
        resume_p50_us: opt(|r| r.resume_p50_us),
        resume_p99_us: opt(|r| r.resume_p99_us),
    }
}

/// The value seen most often (the first of them on a tie).
fn most_common<'a>(values: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for v in values {
        match counts.iter_mut().find(|(k, _)| *k == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    let best = counts.iter().map(|(_, n)| *n).max()?;
    counts
        .iter()
        .find(|(_, n)| *n == best)
        .map(|(k, _)| (*k).to_owned())
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

#[cfg(test)]
mod tests;
