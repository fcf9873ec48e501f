//! The report's JSON form: exactly the documented keys (perf/bench-harness.md
//! §4), a round trip, and the combining of recorded runs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

use std::collections::BTreeSet;
use std::time::Duration;

use dtp_bench::control_report::{ControlFigures, ControlReport};
use dtp_bench::latency::LatencySummary;
use dtp_bench::report::{
    Failure, Figures, LimitFigure, Memory, OURS, Report, RunReport, RunWorkload, Side, combine,
};
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

fn side(name: &str, f: Figures) -> Side {
    Side {
        name: name.into(),
        figures: f,
    }
}

fn one_run(k: u64) -> RunReport {
    let peers = |w: Workload, ops: u64| {
        vec![
            side(OURS, figures(w, ops * k, 1_000_000_000)),
            side("tokio", figures(w, ops, 1_600_000_000)),
            side("tokio-uring", figures(w, ops, 1_400_000_000)),
            side("floor", figures(w, ops * 2, 800_000_000)),
        ]
    };
    let mem = |f: Figures, grown: u64| {
        f.with_memory(Memory::from_rss(
            10_000,
            4 << 20,
            (4 << 20) + grown,
            41 << 20,
        ))
    };
    let mut resume_ours = figures(Workload::Stream, 90_000, 900_000_000);
    resume_ours.resumes = Some(40);
    resume_ours.lost = Some(0);
    resume_ours.duplicated = Some(0);
    resume_ours.resume_p50_us = Some(900.0);
    resume_ours.resume_p99_us = Some(2500.0);
    let mut resume_peer = resume_ours.clone();
    resume_peer.resume_p99_us = Some(3000.0);
    RunReport {
        run: k as usize,
        backend: "io_uring".into(),
        workloads: vec![
            RunWorkload {
                name: "pingpong".into(),
                sides: peers(Workload::Pingpong, 250_000),
                limits: Vec::new(),
            },
            RunWorkload {
                name: "stream".into(),
                sides: peers(Workload::Stream, 150_000),
                limits: vec![LimitFigure::new("loopback", 2.3e9 * k as f64)],
            },
            RunWorkload {
                name: "connections".into(),
                sides: vec![
                    side(
                        OURS,
                        mem(figures(Workload::Idle, 10_000, 50_000_000), 5 << 20),
                    ),
                    side(
                        "tokio",
                        mem(figures(Workload::Idle, 10_000, 90_000_000), 50 << 20),
                    ),
                ],
                limits: Vec::new(),
            },
            RunWorkload {
                name: "resume".into(),
                sides: vec![side(OURS, resume_ours), side("tokio", resume_peer)],
                limits: vec![
                    LimitFigure::of_side("dtp-stream goodput without disconnects", OURS, 2e9),
                    LimitFigure::of_side("dtp-stream goodput without disconnects", "tokio", 1.8e9),
                ],
            },
        ],
        control: None,
        failures: Vec::new(),
    }
}

fn report() -> Report {
    combine(
        vec![one_run(1), one_run(2), one_run(3)],
        Vec::new(),
        Vec::new(),
    )
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
fn json_has_exactly_the_documented_keys() {
    let v: Value = serde_json::from_str(&report().to_json().unwrap()).unwrap();
    assert_eq!(
        keys(&v),
        set(&["backend", "workloads", "failures", "notes", "runs"])
    );
    assert_eq!(v["backend"], "io_uring");
    let w = v["workloads"].as_array().unwrap();
    assert_eq!(w.len(), 4);

    let pingpong = &w[0];
    assert_eq!(
        keys(pingpong),
        set(&["name", "ours", "peer", "ratio", "peers"])
    );
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
    // Every peer, each with its own ratio.
    let peers = pingpong["peers"].as_array().unwrap();
    let names: Vec<&str> = peers.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tokio", "tokio-uring", "floor"]);
    let mut with_ratio = peer.clone();
    with_ratio.insert("ratio");
    for p in peers {
        assert_eq!(keys(p), with_ratio);
    }
    assert_eq!(peers[2]["ratio"]["cpu_per_op"], 1.25);

    let stream = &w[1];
    assert_eq!(
        keys(stream),
        set(&["name", "ours", "peer", "ratio", "peers", "limit"])
    );
    assert_eq!(
        keys(&stream["limit"]),
        set(&[
            "name",
            "bytes_per_s",
            "ours_fraction",
            "peer_fraction",
            "fractions",
            "figures"
        ])
    );
    assert_eq!(stream["limit"]["name"], "loopback");
    assert_eq!(stream["limit"]["bytes_per_s"], 4.6e9);
    assert_eq!(stream["limit"]["fractions"].as_array().unwrap().len(), 4);

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

    // `resume`: the resume counts on both sides, goodput kept against
    // each side's own dtp-stream.
    let resume = &w[3];
    for s in [&resume["ours"], &resume["peer"]] {
        for k in [
            "resumes",
            "lost",
            "duplicated",
            "resume_p50_us",
            "resume_p99_us",
        ] {
            assert!(s[k].is_number(), "{k} in {s}");
        }
    }
    assert_eq!(resume["peer"]["resume_p99_us"], 3000.0);
    assert_eq!(
        resume["limit"]["peer_fraction"].as_f64().unwrap(),
        resume["peer"]["bytes_per_s"].as_f64().unwrap() / 1.8e9
    );

    // The raw runs.
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(
        keys(&runs[0]),
        set(&["run", "backend", "workloads", "failures"])
    );
    assert_eq!(
        keys(&runs[0]["workloads"][0]),
        set(&["name", "sides", "limits"])
    );
}

#[test]
fn every_ratio_can_be_recomputed_from_the_sides_of_one_run() {
    let r = combine(vec![one_run(1)], Vec::new(), Vec::new());
    let v: Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
    for w in v["workloads"].as_array().unwrap() {
        let o = &w["ours"];
        for p in w["peers"].as_array().unwrap() {
            let f = |x: &Value, k: &str| x[k].as_f64().unwrap();
            let cpu = |x: &Value| f(x, "server_cpu_s") * 1e9 / f(x, "ops");
            assert!((cpu(o) - f(o, "cpu_ns_per_op")).abs() < 1e-6);
            let r = f(&p["ratio"], "cpu_per_op");
            assert!((r - cpu(o) / cpu(p)).abs() < 1e-9);
            let r = f(&p["ratio"], "throughput");
            assert!((r - f(o, "ops_per_s") / f(p, "ops_per_s")).abs() < 1e-9);
        }
    }
}

#[test]
fn json_round_trips_with_failures_and_nulls() {
    let r = report();
    assert_eq!(Report::from_json(&r.to_json().unwrap()).unwrap(), r);
    let mut run = one_run(1);
    run.workloads[0].sides[1].figures = Figures::default();
    run.failures.push(Failure {
        run: Some(1),
        workload: "stream".into(),
        side: Some("floor".into()),
        reason: "the floor server exited before listening".into(),
    });
    let r = combine(vec![run], Vec::new(), vec!["note".into()]);
    let json = r.to_json().unwrap();
    assert!(json.contains("\"throughput\": null"), "{json}");
    assert_eq!(Report::from_json(&json).unwrap(), r);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        keys(&v["failures"][0]),
        set(&["run", "workload", "side", "reason"])
    );
    assert!(r.to_string().contains("1 failed step:"), "{r}");
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
        let mut r = one_run(1);
        r.control = Some(ControlReport {
            decisions: ControlFigures::from_run(
                64,
                64,
                30_000 * k,
                Duration::from_secs(3),
                (900_000_000, 300_000_000),
                &lat,
                0,
            ),
            handovers: ControlFigures::from_run(
                64,
                32,
                6_000 * k,
                Duration::from_secs(3),
                (600_000_000, 200_000_000),
                &lat,
                1,
            ),
            decisions_streams: Some(ControlFigures::from_run(
                64,
                64,
                12_000 * k,
                Duration::from_secs(3),
                (900_000_000, 300_000_000),
                &lat,
                0,
            )),
            handovers_streams: None,
            ..ControlReport::default()
        });
        r
    };
    let one = combine(vec![run(1)], Vec::new(), Vec::new());
    let v: Value = serde_json::from_str(&one.to_json().unwrap()).unwrap();
    assert_eq!(
        keys(&v),
        set(&[
            "backend",
            "workloads",
            "control",
            "failures",
            "notes",
            "runs"
        ])
    );
    assert_eq!(
        keys(&v["control"]),
        set(&[
            "decisions",
            "handovers",
            "decisions_streams",
            "handovers_streams",
            "decisions_etcd",
            "handovers_etcd",
            "etcd_not_run"
        ])
    );
    // Not measured: null, not left out.
    assert_eq!(v["control"]["handovers_streams"], Value::Null);
    assert_eq!(v["control"]["decisions_etcd"], Value::Null);
    assert_eq!(v["control"]["etcd_not_run"], Value::Null);
    let fields = [
        "fays",
        "resources",
        "ops_per_s",
        "p50_us",
        "p99_us",
        "cpu_ns_per_op",
        "server_cpu_s",
        "control_cpu_ns_per_op",
        "ops",
        "refused",
    ];
    for part in ["decisions", "handovers", "decisions_streams"] {
        assert_eq!(keys(&v["control"][part]), set(&fields), "{part}");
    }
    assert_eq!(v["control"]["decisions"]["ops_per_s"], 10_000.0);
    assert_eq!(v["control"]["handovers"]["cpu_ns_per_op"], 100_000.0);
    assert_eq!(v["control"]["decisions"]["control_cpu_ns_per_op"], 10_000.0);
    let m = combine(vec![run(1), run(3), run(2)], Vec::new(), Vec::new());
    assert_eq!(m.control.as_ref().unwrap().decisions.ops, 60_000);
    let streams = m.control.as_ref().unwrap().decisions_streams.as_ref();
    assert_eq!(streams.unwrap().ops, 24_000);
    // A run without it (control failed there) does not stop the others.
    let m = combine(vec![run(1), one_run(2)], Vec::new(), Vec::new());
    assert_eq!(m.control.as_ref().unwrap().decisions.ops, 30_000);
    assert!(m.to_string().contains("no peer"));
}

/// Reports recorded from real `dtp bench` runs (bench/tests/data): the
/// runs they hold combine again into exactly the report that was written,
/// every side that measured anything in a run is in the combined report,
/// and every failure keeps its reason.
#[test]
fn recorded_reports_combine_again_to_what_was_written() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let recorded =
            Report::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let before: Vec<Failure> = recorded
            .failures
            .iter()
            .filter(|f| f.run.is_none())
            .cloned()
            .collect();
        let again = combine(recorded.runs.clone(), before, recorded.notes.clone());
        assert_eq!(again, recorded, "{}", path.display());
        for run in &recorded.runs {
            for w in &run.workloads {
                let combined = recorded.workload(&w.name).unwrap();
                for s in &w.sides {
                    assert!(
                        combined.sides().any(|(n, _)| n == s.name),
                        "{} {} {}",
                        path.display(),
                        w.name,
                        s.name
                    );
                }
            }
        }
        for f in &recorded.failures {
            assert!(!f.reason.is_empty());
        }
    }
    assert!(seen > 0, "no recorded reports in {}", dir.display());
}
