//! `dtp bench` as a user runs it: every workload against every peer, the
//! documented JSON, the HTML report; a failed step reported while every
//! other figure is still printed and written; bad arguments refused before
//! any work.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn dtp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("dtp-bench-test-{}-{name}", std::process::id()))
}

/// A quick bench with small crowds.
fn bench(extra: &[&str], fault: Option<&str>) -> (Output, Value) {
    let path = temp(&format!("{}.json", fault.unwrap_or("ok").replace(':', "-")));
    let mut cmd = dtp();
    cmd.args([
        "bench",
        "--quick",
        "--duration",
        "0.3",
        "--idle-connections",
        "50",
        "--subscribers",
        "50",
        "--json",
        path.to_str().unwrap(),
    ])
    .args(extra);
    if let Some(f) = fault {
        cmd.env("DTP_BENCH_FAULT", f);
    }
    let out = cmd.output().unwrap();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    std::fs::remove_file(&path).unwrap();
    (out, serde_json::from_str(&text).unwrap())
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect()
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
fn bench_writes_the_documented_json_with_every_peer() {
    let report = temp("report");
    let (out, v) = bench(&["--report", report.to_str().unwrap()], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{v:#}");
    assert_eq!(v["failures"].as_array().unwrap().len(), 0, "{v:#}");
    assert!(v["backend"].is_string());
    assert_eq!(
        names(&v["workloads"]),
        [
            "pingpong",
            "stream",
            "connections",
            "dtp-pingpong",
            "dtp-stream",
            "resume",
            "dtp-pingpong-ws",
            "dtp-stream-ws",
            "dtp-pingpong-quic",
            "dtp-stream-quic",
            "dtp-pingpong-rtsp",
            "dtp-stream-rtsp",
            "dtp-pingpong-unix",
            "dtp-stream-unix",
            "fanout-sse",
            "fanout-ws",
            "push"
        ]
    );
    for w in v["workloads"].as_array().unwrap() {
        let mut sides = vec![&w["ours"]];
        // Push has no peer unless built with the `webpush-peer` feature.
        let peerless = w["name"] == "push" && !cfg!(feature = "webpush-peer");
        if !peerless {
            sides.push(&w["peer"]);
        }
        sides.extend(w["peers"].as_array().unwrap());
        for side in sides {
            for key in SIDE {
                assert!(side[key].is_number(), "{key} missing in {w}");
            }
            assert!(side["ops"].as_u64().unwrap() > 0, "{w}");
            assert!(side["client_cpu_s"].is_number(), "{w}");
            assert!(side["saturated"].is_string(), "{w}");
        }
        assert!(peerless || w["ratio"].is_object(), "{w}");
    }
    let w = &v["workloads"];
    for i in [0, 1, 2] {
        assert_eq!(
            names(&w[i]["peers"]),
            ["tokio", "tokio-uring", "floor"],
            "{}",
            w[i]
        );
    }
    assert_eq!(names(&w[4]["peers"]), ["tokio"]);
    for i in [6, 7] {
        assert_eq!(names(&w[i]["peers"]), ["tokio-tungstenite"], "{}", w[i]);
    }
    for i in [8, 9] {
        assert_eq!(names(&w[i]["peers"]), ["quinn"], "{}", w[i]);
    }
    // RTSP and Unix against our own TCP figures of the same run.
    for (i, tcp) in [(10, 3), (11, 4), (12, 3), (13, 4)] {
        assert_eq!(names(&w[i]["peers"]), ["ours-tcp"], "{}", w[i]);
        assert_eq!(w[i]["peer"]["ops"], w[tcp]["ours"]["ops"], "{}", w[i]);
    }
    // stream against loopback; dtp-stream against the lowest of its limit
    // figures; resume against each side's own dtp-stream goodput.
    assert!(w[1]["limit"]["bytes_per_s"].as_f64().unwrap() > 0.0);
    assert!(
        w[4]["limit"]["figures"].as_array().unwrap().len() >= 2,
        "{}",
        w[4]
    );
    // dtp-stream-ws against the same run's dtp-stream limit figures.
    assert_eq!(
        w[7]["limit"]["figures"], w[4]["limit"]["figures"],
        "{}",
        w[7]
    );
    // dtp-stream-quic against UDP loopback and the same run's AEAD figure.
    let quic_limits = w[9]["limit"]["figures"].as_array().unwrap();
    assert!(
        quic_limits[0]["name"]
            .as_str()
            .unwrap()
            .starts_with("udp loopback"),
        "{}",
        w[9]
    );
    assert!(quic_limits[0]["bytes_per_s"].as_f64().unwrap() > 0.0);
    assert!(w[5]["limit"]["ours_fraction"].as_f64().unwrap() > 0.0);
    for side in [&w[5]["ours"], &w[5]["peer"]] {
        assert_eq!(side["lost"], 0);
        assert_eq!(side["duplicated"], 0);
        assert!(side["resumes"].as_u64().unwrap() > 0, "{side}");
        assert!(side["resume_p99_us"].is_number());
    }
    assert!(w[2]["ours"]["memory"]["bytes_per_connection"].is_number());
    for i in [14, 15] {
        for side in ["ours", "peer"] {
            let m = &w[i][side]["memory"];
            assert_eq!(m["connections"], 50, "{i} {side}: {m}");
        }
    }
    assert_eq!(v["runs"].as_array().unwrap().len(), 1);
    // The HTML report: the page and its plots.
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(
        page.contains("pingpong-cpu.svg") && page.contains("Nothing failed"),
        "{page}"
    );
    let svg = std::fs::read_to_string(report.join("stream-throughput.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("loopback"), "{svg}");
    std::fs::remove_dir_all(&report).unwrap();
}

/// One side's server refuses to start: the bench goes on, prints and
/// writes every other figure with the failure and its reason, and exits 1.
#[test]
fn a_failed_step_is_reported_and_every_other_figure_kept() {
    let (out, v) = bench(&["--workloads", "pingpong,stream"], Some("pingpong:tokio"));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let f = &v["failures"].as_array().unwrap()[0];
    assert_eq!(
        (
            f["workload"].as_str(),
            f["side"].as_str(),
            f["run"].as_u64()
        ),
        (Some("pingpong"), Some("tokio"), Some(1))
    );
    assert!(
        f["reason"]
            .as_str()
            .unwrap()
            .contains("exited before listening"),
        "{f}"
    );
    assert_eq!(v["failures"].as_array().unwrap().len(), 1, "{v:#}");
    let pingpong = &v["workloads"][0];
    assert!(pingpong["ours"]["ops"].as_u64().unwrap() > 0);
    assert_eq!(names(&pingpong["peers"]), ["tokio-uring", "floor"]);
    assert_eq!(
        names(&v["workloads"][1]["peers"]),
        ["tokio", "tokio-uring", "floor"]
    );
    assert!(
        stdout.contains("1 failed step:") && stdout.contains("pingpong · tokio"),
        "{stdout}"
    );
    assert!(stdout.contains("ours / tokio-uring"), "{stdout}");
    assert!(stderr.contains("1 step failed"), "{stderr}");
}

/// The push workload alone: both senders deliver every notification to
/// the local push service and the report has both sides and their ratio.
#[test]
fn the_push_workload_reports_ours_against_web_push() {
    let (out, v) = bench(&["--workloads", "push"], None);
    assert!(out.status.success(), "{v:#}");
    assert_eq!(names(&v["workloads"]), ["push"]);
    let push = &v["workloads"][0];
    // The peer is built with the `webpush-peer` feature only (OpenSSL).
    let peers: &[&str] = if cfg!(feature = "webpush-peer") {
        &["web-push"]
    } else {
        &[]
    };
    assert_eq!(names(&push["peers"]), peers);
    let sides = std::iter::once(&push["ours"]).chain(push["peers"].as_array().unwrap());
    for side in sides {
        for key in SIDE {
            assert!(side[key].is_number(), "{key} missing in {push}");
        }
        // 2,000 notifications per second of the 0.3 s window.
        assert_eq!(side["ops"].as_u64(), Some(600), "{push}");
        assert!(side["cpu_ns_per_op"].as_f64().unwrap() > 0.0, "{push}");
    }
    if cfg!(feature = "webpush-peer") {
        assert!(push["ratio"].is_object(), "{push}");
    } else {
        let notes = v["notes"].to_string();
        assert!(notes.contains("--features webpush-peer"), "{notes}");
    }
}

#[test]
fn bad_arguments_are_refused_before_any_work() {
    for args in [
        &["--backend", "foo"][..],
        &["--runs", "0"],
        &["--duration", "0"],
        &["--workloads", "pingpong,nope"],
        &["--quick", "--full"],
        &["--control-fays", "3"],
    ] {
        let out = dtp().arg("bench").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.trim().lines().count() <= 2 && err.starts_with("error"),
            "{args:?}: {err}"
        );
    }
}

/// `--control-etcd`: the control workload's decisions and handovers also
/// through a local etcd, beside the embedded rows; where etcd is not
/// installed, the rows are reported as not run and the bench goes on.
#[test]
fn the_control_workload_runs_through_etcd_beside_the_embedded_one() {
    let (out, v) = bench(
        &[
            "--workloads",
            "control",
            "--control-etcd",
            "--control-fays",
            "4",
        ],
        None,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let c = &v["control"];
    assert!(c["decisions"]["ops"].as_u64().unwrap() > 0, "{c:#}");
    match c["etcd_not_run"].as_str() {
        Some(why) => assert!(text.contains(&format!("+etcd not run: {why}")), "{text}"),
        None => {
            for row in ["decisions_etcd", "handovers_etcd"] {
                assert!(c[row]["fays"].as_u64() == Some(4), "{row}: {c:#}");
            }
            assert!(c["decisions_etcd"]["ops"].as_u64().unwrap() > 0, "{c:#}");
            assert!(text.contains("decisions+etcd"), "{text}");
        }
    }
}

/// `--fanout-nats`: the fan-out workload also with our ledgers in a local
/// nats-server, on one gateway and across two, beside the embedded row;
/// where nats-server is not installed, a note says the rows were not run
/// and the bench goes on.
#[test]
fn the_fanout_runs_through_nats_beside_the_embedded_one() {
    let (out, v) = bench(&["--workloads", "fanout-sse", "--fanout-nats"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{v:#}");
    let w = &v["workloads"][0];
    assert!(w["ours"]["ops"].as_u64().unwrap() > 0, "{w}");
    let notes = v["notes"].to_string();
    if notes.contains("+nats rows were not run") {
        assert_eq!(names(&w["peers"]), ["tokio"], "{w}");
        return;
    }
    assert_eq!(
        names(&w["peers"]),
        ["tokio", "ours+nats", "ours+nats-across"],
        "{w}"
    );
    for p in w["peers"].as_array().unwrap() {
        for key in SIDE {
            assert!(p[key].is_number(), "{key}: {p}");
        }
        assert!(p["ops"].as_u64().unwrap() > 0, "{p}");
    }
    assert!(stdout.contains("ours / ours+nats-across"), "{stdout}");
}
