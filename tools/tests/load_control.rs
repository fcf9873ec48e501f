//! `dtp load --dtp --control` as a user runs it, against `dtp serve` with
//! the `[terminal]` section the bench generates: decisions (AuthRequest →
//! AuthResult → SessionRelease → SessionStateChanged, SPEC TS-5 … TS-15)
//! and handovers under a priority script where the requester wins (SPEC
//! HO-1, HO-3a), each Fay with its own credential minted from the issuer
//! key that `dtp cred` made; and the options checked before anything runs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the terminal tests; each uses part of it"
)]
mod support;

use std::process::Output;

use dtp_bench::control_workload::terminal_section;
use serde_json::Value;
use support::{Serve, Setup, dtp};

/// `dtp load --dtp --control …` against `serve` with this setup's issuer.
fn load(setup: &Setup, target: &str, extra: &[&str]) -> Output {
    let dir = |f: &str| setup.dir.join(f).display().to_string();
    dtp()
        .args(["load", "--dtp", "--target", target])
        .args(["--issuer-key", &dir("issuer.key")])
        .args(["--pin-terminal", &dir("terminal.key.pub")])
        .args(["--shards", "1"])
        .args(default_unless_given(extra, "--duration", "1"))
        .args(default_unless_given(extra, "--warmup", "0.2"))
        .args(extra)
        .output()
        .unwrap()
}

/// `[flag, value]` unless `extra` gives `flag` itself.
fn default_unless_given<'a>(extra: &[&str], flag: &'a str, value: &'a str) -> Vec<&'a str> {
    if extra.contains(&flag) {
        Vec::new()
    } else {
        vec![flag, value]
    }
}

/// Runs a control mode and returns its JSON report.
fn run(setup: &Setup, serve: &Serve, mode: &str, extra: &[&str]) -> Value {
    let json = setup.dir.join(format!("{mode}.json"));
    let json_arg = json.display().to_string();
    let args = [
        &["--control", mode, "--connections", "4", "--json", &json_arg][..],
        extra,
    ]
    .concat();
    let out = load(setup, &serve.addr.to_string(), &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{mode}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("control {mode} over DTP")),
        "{stdout}"
    );
    assert!(stdout.contains("refused     none"), "{stdout}");
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// The keys every load mode's JSON has, and the control object's.
fn check_shape(v: &Value) {
    for key in [
        "workload",
        "connections",
        "duration_s",
        "backend",
        "ops",
        "ops_per_s",
        "bytes_per_s",
        "latency_us",
        "errors",
        "failed_connections",
        "backlogged",
        "control",
    ] {
        assert!(!v[key].is_null(), "{key} missing in {v:#}");
    }
    for key in ["p50", "p90", "p99", "p999", "max"] {
        assert!(
            v["latency_us"][key].is_number(),
            "latency_us.{key} in {v:#}"
        );
    }
    let c = &v["control"];
    for key in [
        "mode",
        "fays",
        "resources",
        "access_mode",
        "decisions",
        "decisions_per_s",
        "handovers",
        "handovers_per_s",
        "decision_latency_us",
        "handover_latency_us",
        "release_latency_us",
        "refused",
        "refused_total",
        "timeouts",
        "handover_failures",
        "failed_flows",
        "unfinished",
    ] {
        assert!(!c[key].is_null(), "control.{key} missing in {v:#}");
    }
    assert_eq!(v["workload"], "control");
    assert_eq!(v["connections"], 4);
    // Nothing went wrong: no refusal, error, timeout or Fay given up.
    assert_eq!(c["refused"], serde_json::json!({}), "{v:#}");
    for key in [
        "refused_total",
        "timeouts",
        "handover_failures",
        "failed_flows",
        "unfinished",
    ] {
        assert_eq!(c[key], 0, "control.{key} in {v:#}");
    }
    assert_eq!(v["errors"], 0, "{v:#}");
    assert_eq!(v["failed_connections"], 0, "{v:#}");
}

#[test]
fn decisions_and_handovers_run_against_dtp_serve() {
    let setup = Setup::new("load-control");
    let plain: Vec<String> = (0..4).map(|i| format!("res-{i}")).collect();
    let shared: Vec<String> = (0..2).map(|i| format!("ho-{i}")).collect();
    let serve = Serve::start(&setup.config(&terminal_section(&plain, &shared, 64)));

    let v = run(&setup, &serve, "decisions", &[]);
    check_shape(&v);
    let c = &v["control"];
    assert_eq!(c["mode"], "decisions");
    assert_eq!(c["resources"], 4);
    assert!(c["decisions"].as_u64().unwrap() > 0, "{v:#}");
    assert_eq!(v["ops"], c["decisions"]);
    assert!(v["latency_us"]["p99"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(c["release_latency_us"]["p50"].as_f64().unwrap() > 0.0);

    let v = run(&setup, &serve, "handovers", &["--resource-prefix", "ho-"]);
    check_shape(&v);
    let c = &v["control"];
    assert_eq!(c["mode"], "handovers");
    assert_eq!(c["resources"], 2);
    assert!(c["handovers"].as_u64().unwrap() > 0, "{v:#}");
    assert_eq!(v["ops"], c["handovers"]);
    assert!(c["handover_latency_us"]["p50"].as_f64().unwrap() > 0.0);

    // Every Fay released what it held before it left.
    support::eventually("no sessions left", || {
        (serve.ctl_ok(&["sessions"]) == "no sessions\n").then_some(())
    });
}

/// `idle`: every Fay holds its session for the whole run with heartbeats
/// the terminal answers (SPEC LIV-2), opening one at a time
/// (`--max-opening 1`) from two loopback source addresses; none is lost.
#[test]
fn idle_fays_hold_their_sessions_with_heartbeats() {
    let setup = Setup::new("load-control-idle");
    let plain: Vec<String> = (0..4).map(|i| format!("idle-{i}")).collect();
    let serve = Serve::start(&setup.config(&terminal_section(&plain, &[], 64)));
    let extra = [
        "--resource-prefix",
        "idle-",
        "--heartbeat-ms",
        "1000",
        "--max-opening",
        "1",
        "--source",
        "127.0.0.2,127.0.0.3",
        "--duration",
        "2.5",
        "--warmup",
        "0",
    ];
    let v = run(&setup, &serve, "idle", &extra);
    check_shape(&v);
    let c = &v["control"];
    assert_eq!(c["mode"], "idle");
    assert_eq!(c["granted"], 4, "{v:#}");
    assert_eq!(c["held_at_end"], 4, "{v:#}");
    assert_eq!((&c["lost"], &c["ended"]), (&0.into(), &0.into()), "{v:#}");
    // Each Fay beats within a second of its grant, then every second.
    let sent = c["heartbeats_sent"].as_u64().unwrap();
    assert!(sent >= 8, "{v:#}");
    assert_eq!(c["heartbeats_answered"], sent, "{v:#}");
    assert!(c["heartbeat_latency_us"]["p50"].as_f64().unwrap() > 0.0);
    support::eventually("no sessions left", || {
        (serve.ctl_ok(&["sessions"]) == "no sessions\n").then_some(())
    });
}

#[test]
fn control_options_are_checked_before_anything_runs() {
    let setup = Setup::new("load-control-options");
    // Nothing listens there: every case must fail before connecting.
    let target = "127.0.0.1:9";
    let cases: [&[&str]; 8] = [
        &["--control", "sometimes"],
        &["--control", "idle", "--heartbeat-ms", "500"],
        &["--control", "idle", "--max-opening", "0"],
        &["--control", "idle", "--source", "127.0.0.9-127.0.0.2"],
        &["--control", "handovers", "--connections", "3"],
        &["--control", "decisions", "--access-mode", "fly"],
        &["--control", "decisions", "--resources", "0"],
        &["--control", "decisions", "--rate", "10"],
    ];
    for extra in cases {
        let out = load(&setup, target, extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {out:?}");
    }
    // Without --dtp, and without an issuer key.
    let out = dtp()
        .args(["load", "--control", "decisions", "--target", target])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = dtp()
        .args([
            "load",
            "--dtp",
            "--control",
            "decisions",
            "--target",
            target,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--issuer-key"), "{err}");
}
