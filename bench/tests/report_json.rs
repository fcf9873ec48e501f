//! The report's JSON form: exactly the keys issue 3 names, and a round trip.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

use std::collections::BTreeSet;
use std::time::Duration;

use dtp_bench::control_report::{ControlFigures, ControlReport};
use dtp_bench::latency::LatencySummary;
use dtp_bench::report::{Figures, Limit, Memory, Report, WorkloadReport, median_of};
use dtp_bench::workload::Workload;
use serde_json::Value;

fn figures(w: Workload, ops: u64, cpu_ns: u64) -> Figures {
    let lat = LatencySummary {
        p50_us: 41.0,
        p99_us: 97.0,
        ..LatencySummary::default()
    };
    Figures::from_run(w, ops, Duration::from_secs(2), cpu_ns, &lat)
}

fn report() -> Report {
    let s_ours = figures(Workload::Stream, 200_000, 900_000_000);
    let s_peer = figures(Workload::Stream, 150_000, 1_400_000_000);
    Report {
        backend: "io_uring".into(),
        workloads: vec![
            WorkloadReport::new(
                "pingpong",
                figures(Workload::Pingpong, 300_000, 1_000_000_000),
                "tokio",
                figures(Workload::Pingpong, 250_000, 1_600_000_000),
            ),
            WorkloadReport::new("stream", s_ours.clone(), "tokio", s_peer.clone())
                .with_limit(Limit::loopback(2.3e9, &s_ours, &s_peer)),
            WorkloadReport::new(
                "connections",
                figures(Workload::Idle, 10_000, 50_000_000).with_memory(Memory::from_rss(
                    10_000,
                    4 << 20,
                    40 << 20,
                    41 << 20,
                )),
                "tokio",
                figures(Workload::Idle, 10_000, 90_000_000).with_memory(Memory::from_rss(
                    10_000,
                    4 << 20,
                    140 << 20,
                    141 << 20,
                )),
            ),
        ],
        control: None,
    }
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn set(k: &[&'static str]) -> BTreeSet<&'static str> {
    k.iter().copied().collect()
}

const SIDE: [&str; 7] = [
    "ops_per_s",
    "bytes_per_s",
    "p50_us",
    "p99_us",
    "cpu_ns_per_op",
    "server_cpu_s",
    "ops",
];

#[test]
fn json_has_exactly_the_required_keys() {
    let v: Value = serde_json::from_str(&report().to_json().unwrap()).unwrap();
    assert_eq!(keys(&v), set(&["backend", "workloads"]));
    assert_eq!(v["backend"], "io_uring");
    let w = v["workloads"].as_array().unwrap();
    assert_eq!(w.len(), 3);

    let pingpong = &w[0];
    assert_eq!(keys(pingpong), set(&["name", "ours", "peer", "ratio"]));
    assert_eq!(keys(&pingpong["ours"]), set(&SIDE));
    let mut peer = set(&SIDE);
    peer.insert("name");
    assert_eq!(keys(&pingpong["peer"]), peer);
    assert_eq!(pingpong["peer"]["name"], "tokio");
    assert_eq!(
        keys(&pingpong["ratio"]),
        set(&["throughput", "cpu_per_op", "p99"])
    );
    assert!(pingpong["ours"]["ops"].is_u64());

    let stream = &w[1];
    assert_eq!(
        keys(stream),
        set(&["name", "ours", "peer", "ratio", "limit"])
    );
    assert_eq!(
        keys(&stream["limit"]),
        set(&["name", "bytes_per_s", "ours_fraction", "peer_fraction"])
    );
    assert_eq!(stream["limit"]["name"], "loopback");

    // `connections` adds its memory figures, and only it.
    let conns = &w[2];
    assert_eq!(keys(&conns["ours"]).len(), SIDE.len() + 1);
    assert_eq!(
        keys(&conns["ours"]["memory"]),
        set(&[
            "connections",
            "rss_bytes",
            "peak_rss_bytes",
            "bytes_per_connection"
        ])
    );
    assert!(conns["ratio"]["memory_per_connection"].is_f64());
}

#[test]
fn every_ratio_can_be_recomputed_from_the_sides() {
    let v: Value = serde_json::from_str(&report().to_json().unwrap()).unwrap();
    for w in v["workloads"].as_array().unwrap() {
        let (o, p) = (&w["ours"], &w["peer"]);
        let f = |x: &Value, k: &str| x[k].as_f64().unwrap();
        let cpu = |x: &Value| f(x, "server_cpu_s") * 1e9 / f(x, "ops");
        assert!((cpu(o) - f(o, "cpu_ns_per_op")).abs() < 1e-6);
        let r = f(&w["ratio"], "cpu_per_op");
        assert!((r - cpu(o) / cpu(p)).abs() < 1e-9);
        let r = f(&w["ratio"], "throughput");
        assert!((r - f(o, "ops_per_s") / f(p, "ops_per_s")).abs() < 1e-9);
    }
}

#[test]
fn json_round_trips() {
    let r = report();
    let back = Report::from_json(&r.to_json().unwrap()).unwrap();
    assert_eq!(back, r);
    // A null ratio (peer figure 0) survives too.
    let mut zero = report();
    zero.workloads[0] = WorkloadReport::new(
        "pingpong",
        figures(Workload::Pingpong, 1, 1),
        "tokio",
        Figures::default(),
    );
    let json = zero.to_json().unwrap();
    assert!(json.contains("\"throughput\": null"), "{json}");
    assert_eq!(Report::from_json(&json).unwrap(), zero);
}

#[test]
fn median_of_one_run_is_that_run() {
    let r = report();
    assert_eq!(median_of(std::slice::from_ref(&r)).unwrap(), r);
}

/// The `control` part: absent unless it ran; when it did, exactly its
/// documented keys, and medians of several runs.
#[test]
fn control_has_exactly_its_keys_and_no_ratio() {
    let lat = LatencySummary {
        p50_us: 120.0,
        p99_us: 480.0,
        ..LatencySummary::default()
    };
    let run = |k: u64| {
        let mut r = report();
        r.control = Some(ControlReport {
            decisions: ControlFigures::from_run(
                64,
                64,
                30_000 * k,
                Duration::from_secs(3),
                900_000_000,
                &lat,
                0,
            ),
            handovers: ControlFigures::from_run(
                64,
                32,
                6_000 * k,
                Duration::from_secs(3),
                600_000_000,
                &lat,
                1,
            ),
        });
        r
    };
    let v: Value = serde_json::from_str(&run(1).to_json().unwrap()).unwrap();
    assert_eq!(keys(&v), set(&["backend", "workloads", "control"]));
    assert_eq!(keys(&v["control"]), set(&["decisions", "handovers"]));
    let fields = [
        "fays",
        "resources",
        "ops_per_s",
        "p50_us",
        "p99_us",
        "cpu_ns_per_op",
        "server_cpu_s",
        "ops",
        "refused",
    ];
    for part in ["decisions", "handovers"] {
        assert_eq!(keys(&v["control"][part]), set(&fields), "{part}");
    }
    assert_eq!(v["control"]["decisions"]["ops_per_s"], 10_000.0);
    assert_eq!(v["control"]["handovers"]["cpu_ns_per_op"], 100_000.0);
    let r = run(1);
    assert_eq!(Report::from_json(&r.to_json().unwrap()).unwrap(), r);
    let m = median_of(&[run(1), run(3), run(2)]).unwrap();
    assert_eq!(m.control.as_ref().unwrap().decisions.ops, 60_000);
    assert!(median_of(&[run(1), report()]).is_err());
    assert!(m.to_string().contains("no peer"));
}
