#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::Duration;

use super::*;
use crate::latency::LatencySummary;
use crate::report::{Cores, Side};
use crate::workload::Workload;

fn lat(p50: f64, p99: f64) -> LatencySummary {
    LatencySummary {
        p50_us: p50,
        p99_us: p99,
        ..LatencySummary::default()
    }
}

/// `ops` operations in 2 s at `cpu_ms` of server CPU.
fn fig(w: Workload, ops: u64, cpu_ms: u64) -> Figures {
    Figures::from_run(
        w,
        ops,
        Duration::from_secs(2),
        cpu_ms * 1_000_000,
        &lat(10.0, ops as f64 / 1000.0),
    )
}

fn side(name: &str, f: Figures) -> Side {
    Side {
        name: name.into(),
        figures: f,
    }
}

fn run(n: usize, workloads: Vec<RunWorkload>) -> RunReport {
    RunReport {
        run: n,
        backend: "io_uring".into(),
        workloads,
        control: None,
        failures: Vec::new(),
    }
}

fn stream(k: u64, limits: Vec<LimitFigure>) -> RunWorkload {
    RunWorkload {
        name: "dtp-stream".into(),
        sides: vec![
            side(OURS, fig(Workload::Stream, 100_000 * k, 1000)),
            side("tokio", fig(Workload::Stream, 80_000, 1000)),
        ],
        limits,
    }
}

/// The run of the first report of this bench that died: the binding limit
/// was the loopback in one run and the AEAD in another. Now each figure
/// has its median and the lower median binds.
#[test]
fn runs_whose_binding_limit_differs_still_combine() {
    let runs = vec![
        run(
            1,
            vec![stream(
                1,
                vec![
                    LimitFigure::new("loopback", 5e9),
                    LimitFigure::new("aead", 6e9),
                ],
            )],
        ),
        run(
            2,
            vec![stream(
                2,
                vec![
                    LimitFigure::new("loopback", 7e9),
                    LimitFigure::new("aead", 6.5e9),
                ],
            )],
        ),
        run(
            3,
            vec![stream(
                3,
                vec![
                    LimitFigure::new("loopback", 8e9),
                    LimitFigure::new("aead", 6.2e9),
                ],
            )],
        ),
    ];
    let r = combine(runs, Vec::new(), Vec::new());
    let l = r.workloads[0].limit.as_ref().unwrap();
    assert_eq!(l.name, "aead");
    assert_eq!(l.bytes_per_s, 6.2e9);
    assert_eq!(l.figures.len(), 2);
    assert_eq!(l.figures[0].bytes_per_s, 7e9);
    // Ours' fraction: the median of the per-run fractions against aead.
    let per_run = [1.0, 2.0, 3.0].map(|k| 100_000.0 * k / 2.0 * 16384.0);
    let fr = [per_run[0] / 6e9, per_run[1] / 6.5e9, per_run[2] / 6.2e9];
    let mut sorted = fr;
    sorted.sort_by(f64::total_cmp);
    assert!((l.ours_fraction.unwrap() - sorted[1]).abs() < 1e-12);
    assert_eq!(l.fractions.len(), 2);
    assert_eq!(l.fractions[1].name, "tokio");
    assert!(r.failures.is_empty());
}

/// A side that failed in one run is the median of the others; the failure
/// is listed; a peer that never succeeded has no entry; ours missing
/// everywhere leaves the peers' figures.
#[test]
fn a_failed_side_is_the_median_of_the_other_runs() {
    let pp = |sides: Vec<Side>| RunWorkload {
        name: "pingpong".into(),
        sides,
        limits: Vec::new(),
    };
    let mut r2 = run(
        2,
        vec![pp(vec![side(OURS, fig(Workload::Pingpong, 300_000, 900))])],
    );
    r2.failures.push(Failure {
        run: Some(2),
        workload: "pingpong".into(),
        side: Some("tokio".into()),
        reason: "the tokio server exited before listening".into(),
    });
    let runs = vec![
        run(
            1,
            vec![pp(vec![
                side(OURS, fig(Workload::Pingpong, 200_000, 1000)),
                side("tokio", fig(Workload::Pingpong, 100_000, 1000)),
            ])],
        ),
        r2,
        run(
            3,
            vec![pp(vec![
                side(OURS, fig(Workload::Pingpong, 400_000, 1000)),
                side("tokio", fig(Workload::Pingpong, 200_000, 1000)),
            ])],
        ),
    ];
    let r = combine(runs, Vec::new(), vec!["a note".into()]);
    let w = &r.workloads[0];
    assert_eq!(w.ours.as_ref().unwrap().ops, 300_000);
    assert_eq!(w.peers.len(), 1);
    assert_eq!(w.peers[0].figures.ops, 150_000);
    // Ratios from runs 1 and 3 only (where both sides ran): ×2 in each.
    assert_eq!(w.peers[0].ratio.throughput, Some(2.0));
    assert_eq!(w.ratio, w.peers[0].ratio);
    assert_eq!(w.peer.as_ref().unwrap().name, "tokio");
    assert_eq!(r.failures.len(), 1);
    assert_eq!(r.notes, ["a note"]);
    assert_eq!(r.runs.len(), 3);

    let only_peer = vec![run(
        1,
        vec![pp(vec![side("tokio", fig(Workload::Pingpong, 1, 1))])],
    )];
    let r = combine(only_peer, Vec::new(), Vec::new());
    assert!(r.workloads[0].ours.is_none());
    assert_eq!(r.workloads[0].ratio, Ratio::default());
}

/// `resume` is measured against each side's own dtp-stream goodput.
#[test]
fn resume_fractions_are_against_each_sides_own_baseline() {
    let resume = RunWorkload {
        name: "resume".into(),
        sides: vec![
            side(OURS, fig(Workload::Stream, 80_000, 1000)),
            side("tokio", fig(Workload::Stream, 60_000, 1000)),
        ],
        limits: vec![
            LimitFigure::of_side(
                "goodput",
                OURS,
                fig(Workload::Stream, 100_000, 1).bytes_per_s,
            ),
            LimitFigure::of_side(
                "goodput",
                "tokio",
                fig(Workload::Stream, 75_000, 1).bytes_per_s,
            ),
        ],
    };
    let r = combine(vec![run(1, vec![resume])], Vec::new(), Vec::new());
    let l = r.workloads[0].limit.as_ref().unwrap();
    assert!((l.ours_fraction.unwrap() - 0.8).abs() < 1e-12);
    assert!((l.peer_fraction.unwrap() - 0.8).abs() < 1e-12);
    assert_eq!(l.bytes_per_s, fig(Workload::Stream, 100_000, 1).bytes_per_s);
}

#[test]
fn medians_saturation_and_mixed_backends() {
    assert_eq!(median([1.0, 5.0, 2.0]), 2.0);
    assert_eq!(median([1.0, 2.0, 3.0, 10.0]), 2.5);
    assert_eq!(median([]), 0.0);
    assert_eq!(median_u64([u64::MAX, u64::MAX]), u64::MAX);
    assert_eq!(median_u64([1, 2]), 1);
    assert_eq!(median_opt([None, Some(4.0), Some(2.0)]), Some(3.0));
    assert_eq!(median_opt([None, None]), None);
    assert_eq!(
        most_common(["a", "b", "b"].into_iter()).as_deref(),
        Some("b")
    );
    assert_eq!(most_common(std::iter::empty()), None);

    let cores = Cores {
        machine: 2,
        server: 2,
        client: 2,
    };
    let secs = Duration::from_secs(2);
    // Server busy 1.9 of 2 cores: the server saturated.
    let f = Figures {
        server_cpu_s: 3.8,
        ..Figures::default()
    };
    assert_eq!(
        f.clone()
            .with_client(100_000_000, secs, cores)
            .saturated
            .as_deref(),
        Some("server")
    );
    // 1 + 0.9 cores of 2: the machine.
    let f = Figures {
        server_cpu_s: 2.0,
        ..Figures::default()
    };
    assert_eq!(
        f.clone()
            .with_client(1_800_000_000, secs, cores)
            .saturated
            .as_deref(),
        Some("machine")
    );
    assert_eq!(
        f.clone()
            .with_client(100_000_000, secs, cores)
            .saturated
            .as_deref(),
        Some("neither")
    );
    let client_one = Cores { client: 1, ..cores };
    assert_eq!(
        Figures::default()
            .with_client(1_900_000_000, secs, client_one)
            .saturated
            .as_deref(),
        Some("client")
    );

    let mut epoll = run(2, Vec::new());
    epoll.backend = "epoll".into();
    let r = combine(vec![run(1, Vec::new()), epoll], Vec::new(), Vec::new());
    assert_eq!(r.backend, "mixed (io_uring, epoll)");
    assert_eq!(
        combine(Vec::new(), Vec::new(), Vec::new()).backend,
        "unknown"
    );
}
