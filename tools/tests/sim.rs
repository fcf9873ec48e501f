//! `dtp sim` as a user (and CI) runs it: a clean, deterministic run that
//! exercised every kind of event, different runs for different seeds, and
//! exit status 2 for bad usage.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::collections::BTreeMap;
use std::process::{Command, Output};

/// Every kind of event the simulation promises to exercise (a subset of
/// `sim::report::REQUIRED_KINDS`, named here so that a rename is noticed).
const MUST_SEE: &[&str] = &[
    "auth.valid",
    "auth.expired",
    "auth.revoked",
    "auth.unknown_issuer",
    "auth.wrong_grants",
    "auth.garbage",
    "auth.granted",
    "heartbeat.acked",
    "heartbeat.replay_refused",
    "heartbeat.after_death",
    "conn.drop",
    "conn.return",
    "release.active",
    "release.repeated",
    "revocation",
    "resource.loss",
    "resource.return",
    "clock.jump_past_expiry",
    "handover.trigger.auth_request",
    "handover.trigger.transfer_request",
    "handover.trigger.admin",
    "handover.started.priority_script",
    "handover.started.ai_model",
    "handover.started.human_decision",
    "handover.succeeded.fay_to_fay",
    "handover.succeeded.fay_to_human",
    "handover.succeeded.human_to_fay",
    "handover.failed.policy_rejected",
    "handover.failed.timeout",
    "handover.failed.release_failed",
    "handover.failed.acquire_failed",
    "policy.script.allow",
    "policy.script.reject",
    "policy.model.allow",
    "policy.model.reject",
    "policy.model.require_human",
    "policy.model.unavailable",
    "policy.model.timeout",
    "policy.model.late",
    "policy.human.allow",
    "policy.human.reject",
    "policy.human.default",
    "inject.t0",
    "inject.t1",
    "inject.t3",
    "inject.t4",
    "os.grant_failed",
    "os.revoke_failed",
    "session.ended.liveness_timeout",
    "session.ended.credential_revoked",
    "session.ended.credential_expired",
    "session.ended.resource_unavailable",
    "session.ended.handed_over",
    "session.ended.forced",
    "session.ended.client_release",
];

fn dtp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The `events:` section: kind → count.
fn counts(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .skip_while(|l| *l != "events:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let mut parts = l.split_whitespace();
            let kind = parts.next().unwrap().to_owned();
            let n = parts.last().unwrap().parse().unwrap();
            (kind, n)
        })
        .collect()
}

#[test]
fn a_long_seeded_run_is_clean_exercises_everything_and_replays_byte_for_byte() {
    let args = ["sim", "--seed", "1", "--steps", "20000"];
    let first = dtp(&args);
    let text = stdout(&first);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        text.starts_with("dtp sim: seed 1, 20000 steps each, 20000 steps run"),
        "{text}"
    );
    assert!(text.ends_with("violations: 0\n"), "{text}");
    assert!(!text.contains("\nviolation:"), "{text}");
    assert!(!text.contains("not exercised"), "{text}");
    let c = counts(&text);
    for kind in MUST_SEE {
        assert!(
            c.get(*kind).copied().unwrap_or(0) > 0,
            "{kind} never happened:\n{text}"
        );
    }
    // Checked after every input the terminal got (a step whose chosen
    // input had nothing to act on sends none).
    assert!(c["check.inputs"] >= 15_000, "{text}");

    let again = dtp(&args);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(first.stdout, again.stdout, "same seed, different output");

    let other = dtp(&["sim", "--seed", "2", "--steps", "20000"]);
    assert_eq!(other.status.code(), Some(0), "{}", stdout(&other));
    assert_ne!(
        counts(&stdout(&other)),
        c,
        "seeds 1 and 2 gave the same counts"
    );
}

#[test]
fn several_seeds_and_json() {
    let dir = std::env::temp_dir().join(format!("dtp-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sim.json");
    let o = dtp(&[
        "sim",
        "--seed",
        "7",
        "--steps",
        "1500",
        "--seeds",
        "3",
        "--json",
        path.to_str().unwrap(),
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with("dtp sim: seeds 7..=9 (3 seeds), 1500 steps each, 4500 steps run"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(v["steps"], 4500);
    assert_eq!(v["seeds"], 3);
    assert_eq!(v["violations"], serde_json::json!([]));
    assert!(v["counts"]["auth.granted"].as_u64().unwrap() > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_short_run_replays_the_start_of_a_long_one() {
    // Step n depends only on the seed and the steps before it, which is
    // what makes `--steps <the violation's step>` a reproduction.
    let short = dtp(&["sim", "--seed", "5", "--steps", "300"]);
    assert_eq!(short.status.code(), Some(0));
    let long = dtp(&["sim", "--seed", "5", "--steps", "600"]);
    assert_eq!(long.status.code(), Some(0));
    let (a, b) = (counts(&stdout(&short)), counts(&stdout(&long)));
    for (kind, n) in &a {
        assert!(
            b.get(kind).copied().unwrap_or(0) >= *n,
            "{kind}: {n} then fewer"
        );
    }
}

#[test]
fn bad_usage_exits_2() {
    for args in [
        &["sim", "--steps", "0"][..],
        &["sim", "--seeds", "0"],
        &["sim", "--steps", "many"],
        &["sim", "--seed", "-1"],
        &["sim", "--frobnicate"],
    ] {
        let o = dtp(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(!o.stderr.is_empty(), "{args:?}");
    }
    let help = dtp(&["sim", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = stdout(&help);
    for word in [
        "--seed",
        "--steps",
        "--seeds",
        "--json",
        "virtual time",
        "Exit status",
    ] {
        assert!(text.contains(word), "--help lacks {word}:\n{text}");
    }
}

/// `dtp sim --cluster`: several gateways over a model of etcd, seeded, no
/// violation, the same output for the same seeds.
#[test]
fn the_cluster_simulation_is_clean_and_replays() {
    let args = [
        "sim",
        "--cluster",
        "--seed",
        "3",
        "--seeds",
        "4",
        "--steps",
        "1000",
    ];
    let first = dtp(&args);
    assert!(first.status.success(), "{}", stdout(&first));
    let text = stdout(&first);
    assert!(
        text.starts_with("cluster: 4 seeds × 1000 steps: ")
            && text.contains(" handovers (")
            && text.trim_end().ends_with("; 0 seeds with a violation"),
        "{text}"
    );
    assert_eq!(stdout(&dtp(&args)), text, "the same seeds, the same run");
}
