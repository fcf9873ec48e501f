//! A reconnect herd against a real `dtp serve` (SPEC RT-7, RT-8, RT-9,
//! RT-16): `dtp load --realtime` connects a crowd of clients, publishes,
//! ends every subscription at once through the operator API (`--kick`),
//! publishes more; every client must come back through its full-jitter
//! reconnect, resume from its cursor and see every sequence exactly once,
//! and the delays the clients drew must be spread, not one instant.
//! Clients whose budget runs out are DEGRADED; clients refused with
//! FORBIDDEN never retry.
//!
//! Most crowds here are a few hundred clients so that the tests stay quick
//! in a debug build; one is the full 10,000 (each side needs that many
//! open files); perf/realtime-herd.md gives release-build figures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the shared helpers; this test needs no workspace path"
)]
mod external;

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use external::{Server, run, serve};

/// `dtp load --realtime MODE --kick` with `clients` against `server`; the
/// JSON result. `ok`: whether the run must succeed.
fn herd(
    server: &Server,
    mode: &str,
    clients: usize,
    extra: &[&str],
    ok: bool,
) -> serde_json::Value {
    let target = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    // One file per run: the tests run in parallel, several in one mode.
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let json = std::env::temp_dir().join(format!(
        "dtp-herd-{mode}-{}-{}.json",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let (passed, out) = run(
        Command::new(env!("CARGO_BIN_EXE_dtp"))
            .args(["load", "--realtime", mode, "--target", &target, "--kick"])
            .args(["--connections", &clients.to_string(), "--shards", "1"])
            .args(["--duration", "3", "--warmup", "0.5"])
            .args(if extra.contains(&"--publish-rate") {
                &[][..]
            } else {
                &["--publish-rate", "10"][..]
            })
            .args(["--json", &json.display().to_string()])
            .args(extra),
        Duration::from_secs(120),
    );
    println!("{out}");
    assert_eq!(
        passed,
        ok,
        "dtp load's exit status:\n{out}\ndtp serve stderr:\n{}",
        server.stderr.lock().unwrap()
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    v
}

/// A `dtp serve --config` file in the temporary directory.
fn config_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("dtp-herd-{name}-{}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

/// Every client resumed, and saw each window event exactly once.
fn assert_resumed_exactly_once(v: &serde_json::Value, clients: u64) {
    let n = |path: &str| {
        v.pointer(path)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("{path} in {v:#}"))
    };
    assert_eq!(n("/subscribed"), clients, "{v:#}");
    let r = "/reconnect";
    assert_eq!(
        n(&format!("{r}/attempts")),
        clients,
        "one reconnect each: {v:#}"
    );
    assert_eq!(
        n(&format!("{r}/resumed")),
        clients,
        "every client came back: {v:#}"
    );
    for what in [
        "unresumed",
        "degraded",
        "refused/forbidden",
        "refused/protocol_mismatch",
        "refused/other",
    ] {
        assert_eq!(n(&format!("{r}/{what}")), 0, "{what}: {v:#}");
    }
    for what in [
        "missing",
        "duplicates",
        "stale",
        "gaps",
        "resets",
        "conflicts",
    ] {
        assert_eq!(n(&format!("/{what}")), 0, "{what}: {v:#}");
    }
    let events = n("/window_events");
    // Events on both sides of the kick (the 10,000 herd publishes at 2/s).
    assert!(events >= 5, "{v:#}");
    assert_eq!(
        n("/delivered"),
        events * clients,
        "each window event once per client: {v:#}"
    );
    assert_eq!(n(&format!("{r}/delay_ms/count")), clients, "{v:#}");
}

#[test]
fn a_websocket_herd_comes_back_spread_out_and_loses_nothing() {
    const CLIENTS: u64 = 400;
    let server = serve(&[]);
    let v = herd(&server, "ws", CLIENTS as usize, &[], true);
    assert_resumed_exactly_once(&v, CLIENTS);
    // Full jitter (SPEC RT-7): after a stable connection the first delay is
    // uniform in 0 ..= base (500 ms); 400 draws fall on many milliseconds,
    // never all on one.
    let d = &v["reconnect"]["delay_ms"];
    let ms = |k: &str| d[k].as_u64().unwrap();
    assert!(ms("max") <= 500, "{d}");
    assert!(ms("max") - ms("min") >= 250, "{d}");
    assert!(ms("distinct") >= 150, "{d}");
    assert!(ms("most_in_one_ms") <= 20, "{d}");
    assert!((100..=400).contains(&ms("p50")), "{d}");
}

#[test]
fn an_sse_herd_resumes_with_last_event_id_and_honours_the_retry_hint() {
    const CLIENTS: u64 = 200;
    let server = serve(&[]);
    let v = herd(&server, "sse", CLIENTS as usize, &[], true);
    assert_resumed_exactly_once(&v, CLIENTS);
    // The stream's `retry:` (at least 2 s) is a not-before bound: no
    // client came back sooner, whatever its jitter drew (effective =
    // max(delay, hint)). The gateway spreads the hints over [2 s, 4 s), so
    // the herd does not come back in one millisecond either.
    let d = &v["reconnect"]["delay_ms"];
    let ms = |k: &str| d[k].as_u64().unwrap();
    assert!(ms("min") >= 2000 && ms("max") < 4000, "{d}");
    assert!(ms("distinct") >= 100 && ms("most_in_one_ms") <= 15, "{d}");
}

/// The full-size herd of the chaos campaign: 10,000 WebSocket clients
/// kicked at once come back, each from its own cursor, nothing lost or
/// duplicated (perf/realtime-herd.md has the release-build figures).
#[test]
fn a_herd_of_ten_thousand_websocket_clients_loses_nothing() {
    const CLIENTS: u64 = 10_000;
    let server = serve(&[]);
    let v = herd(
        &server,
        "ws",
        CLIENTS as usize,
        &["--publish-rate", "2"],
        true,
    );
    assert_resumed_exactly_once(&v, CLIENTS);
}

#[test]
fn an_sse_herd_spreads_out_when_the_server_hint_is_below_the_jitter() {
    const CLIENTS: u64 = 200;
    // A deployment lowers the `retry:` hint (`sse_retry_ms`) below the
    // clients' base delay: then the jitter alone spreads the herd.
    let config = config_file("retry", "[realtime.limits]\nsse_retry_ms = 1\n");
    let server = serve(&["--config", &config.display().to_string()]);
    let v = herd(&server, "sse", CLIENTS as usize, &[], true);
    let _ = std::fs::remove_file(&config);
    assert_resumed_exactly_once(&v, CLIENTS);
    let d = &v["reconnect"]["delay_ms"];
    let ms = |k: &str| d[k].as_u64().unwrap();
    assert!(ms("max") <= 500 && ms("max") - ms("min") >= 250, "{d}");
    assert!(ms("distinct") >= 80 && ms("most_in_one_ms") <= 15, "{d}");
}

#[test]
fn clients_whose_budget_runs_out_are_degraded_not_retried_for_ever() {
    const CLIENTS: u64 = 50;
    let server = serve(&[]);
    // A 1 ms elapsed budget and delays of up to 60 s: a delay that would
    // overrun the budget is not shortened, the client gives up (seed §5.3).
    let budget = [
        "--reconnect-budget",
        "0.001",
        "--reconnect-base-ms",
        "60000",
    ];
    let v = herd(&server, "ws", CLIENTS as usize, &budget, false);
    let r = &v["reconnect"];
    let n = |k: &str| r[k].as_u64().unwrap();
    assert!(n("degraded") > CLIENTS / 2, "{r:#}");
    assert_eq!(n("degraded") + n("resumed"), CLIENTS, "{r:#}");
    // A degraded client drew no reconnect.
    assert_eq!(n("attempts"), n("resumed"), "{r:#}");
    assert_eq!(n("unresumed"), 0, "{r:#}");
    // The clients that stayed lost nothing; the degraded ones are not
    // counted as missing, they are reported as degraded.
    assert_eq!(v["missing"], 0, "{v:#}");
}

#[test]
fn forbidden_subscribers_are_refused_for_good_and_never_retried() {
    const CLIENTS: u64 = 50;
    // A second client that may read another stream only.
    let config = config_file(
        "forbidden",
        "[[realtime.clients]]\ntoken = \"dtp-demo-token\"\nstreams = [\"*\"]\npublish = true\nadmin = true\n\n\
         [[realtime.clients]]\ntoken = \"reader-of-other\"\nstreams = [\"other\"]\npublish = false\nadmin = false\n",
    );
    let server = serve(&["--config", &config.display().to_string()]);
    // SSE is answered 403; a realtime.v1 SUBSCRIBE RESET_REQUIRED FORBIDDEN.
    for mode in ["sse", "ws"] {
        let token = ["--subscriber-token", "reader-of-other"];
        let v = herd(&server, mode, CLIENTS as usize, &token, false);
        let r = &v["reconnect"];
        assert_eq!(r["refused"]["forbidden"], CLIENTS, "{mode}: {v:#}");
        assert_eq!(r["attempts"], 0, "{mode}: never retried: {v:#}");
        assert_eq!(r["degraded"], 0, "{mode}: {v:#}");
        assert_eq!(v["subscribed"], 0, "{mode}: {v:#}");
    }
    let _ = std::fs::remove_file(&config);
}
