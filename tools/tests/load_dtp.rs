//! `dtp load --dtp` as a user runs it, against a DTP gateway started in
//! process (the engine's shards running `DtpGateway` with the bench's
//! `DtpResponder`): pingpong and stream, with and without forced
//! disconnects; every fragment sent is delivered once (SPEC RES-1 … RES-4,
//! SEQ-5), and the options are checked before anything runs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use dtp_bench::dtp_workload::{BenchKeys, DtpResponder};
use dtp_codec::Limits;
use dtp_engine::{Engine, EngineConfig, EngineHandle, Framed};
use dtp_gateway::dtp::{DtpGateway, SessionRegistry};
use dtp_transports::DriverConfig;

fn dtp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
}

/// A gateway in this process and the key files of a Fay it trusts.
struct Setup {
    engine: Option<EngineHandle>,
    addr: SocketAddr,
    dir: PathBuf,
    terminal_public: String,
}

impl Setup {
    fn new(name: &str) -> Self {
        let keys = BenchKeys::generate().unwrap();
        let terminal = Arc::new(keys.terminal_config().unwrap());
        let registry = Arc::new(SessionRegistry::new(1024));
        let engine = Engine::start(
            EngineConfig {
                shards: 1,
                pin: false,
                listen: vec!["127.0.0.1:0".parse().unwrap()],
                driver: DriverConfig::default(),
                limits: Limits::default(),
                drain: Duration::from_secs(1),
                control_ring: 64,
                quic: None,
            },
            move |_| {
                Framed::new(DtpGateway::new(
                    terminal.clone(),
                    registry.clone(),
                    DtpResponder::default(),
                ))
            },
        )
        .unwrap();
        let addr = engine.tcp_addr(0).unwrap();
        let dir = std::env::temp_dir().join(format!("dtp-load-dtp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("fay.key"), keys.fay_noise.to_text()).unwrap();
        std::fs::write(dir.join("fay.cred"), keys.credential.to_text()).unwrap();
        let terminal_public: String = keys
            .terminal_noise
            .public()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(
            dir.join("terminal.pub"),
            format!("# the terminal\n{terminal_public}\n"),
        )
        .unwrap();
        Self {
            engine: Some(engine),
            addr,
            dir,
            terminal_public,
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Runs `dtp load --dtp` with the key files and `extra`.
    fn load(&self, extra: &[&str]) -> Output {
        dtp()
            .args(["load", "--dtp", "--target", &self.addr.to_string()])
            .args(["--fay-key", &self.path("fay.key")])
            .args(["--credential", &self.path("fay.cred")])
            .args(["--connections", "4", "--shards", "1"])
            .args(["--duration", "1", "--warmup", "0"])
            .args(extra)
            .output()
            .unwrap()
    }

    /// Runs a workload and returns its JSON report.
    fn run(&self, workload: &str, extra: &[&str]) -> serde_json::Value {
        let json = self.dir.join(format!("{workload}-{}.json", extra.len()));
        let out = self.load(
            &[
                &[
                    "--workload",
                    workload,
                    "--json",
                    &json.display().to_string(),
                ][..],
                extra,
            ]
            .concat(),
        );
        assert!(
            out.status.success(),
            "{workload}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("fragments"), "{stdout}");
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(engine) = self.engine.take() {
            engine.stop();
            let _ = engine.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn counter(v: &serde_json::Value, key: &str) -> u64 {
    v["dtp"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no dtp.{key} in {v:#}"))
}

/// Nothing lost, nothing duplicated, and the plaintext load's keys kept.
fn assert_delivered(v: &serde_json::Value) {
    let sent = counter(v, "sent");
    assert!(sent > 0, "{v:#}");
    assert_eq!(counter(v, "delivered"), sent, "{v:#}");
    assert_eq!(counter(v, "lost"), 0, "{v:#}");
    assert_eq!(counter(v, "duplicated"), 0, "{v:#}");
    assert_eq!(counter(v, "failed_flows"), 0, "{v:#}");
    assert_eq!(v["errors"].as_u64(), Some(0), "{v:#}");
    assert_eq!(v["connections"].as_u64(), Some(4), "{v:#}");
    for key in ["ops", "ops_per_s", "bytes_per_s", "latency_us", "backend"] {
        assert!(v.get(key).is_some(), "no {key} in {v:#}");
    }
    assert!(v["ops"].as_u64().unwrap() > 0, "{v:#}");
}

#[test]
fn pingpong_over_dtp_delivers_every_answer() {
    let s = Setup::new("pp");
    let v = s.run("pingpong", &["--pin-terminal", &s.terminal_public]);
    assert_delivered(&v);
    assert_eq!(counter(&v, "resumes"), 0, "{v:#}");
}

#[test]
fn pingpong_over_dtp_resumes_after_every_cut() {
    let s = Setup::new("ppcut");
    let v = s.run(
        "pingpong",
        &[
            "--pin-terminal",
            &s.path("terminal.pub"),
            "--disconnect-every",
            "5",
        ],
    );
    assert_delivered(&v);
    assert!(counter(&v, "resumes") > 0, "{v:#}");
    assert_eq!(counter(&v, "resumes"), counter(&v, "cuts"), "{v:#}");
    assert!(v["dtp"]["resume_latency_us"]["p99"].as_u64().unwrap() > 0);
}

#[test]
fn stream_over_dtp_acknowledges_every_fragment() {
    let s = Setup::new("st");
    let v = s.run("stream", &["--pin-terminal", &s.terminal_public]);
    assert_delivered(&v);
}

#[test]
fn stream_over_dtp_resumes_after_every_cut() {
    let s = Setup::new("stcut");
    let v = s.run(
        "stream",
        &[
            "--pin-terminal",
            &s.terminal_public,
            "--disconnect-every",
            "200",
        ],
    );
    assert_delivered(&v);
    assert!(counter(&v, "resumes") > 0, "{v:#}");
    assert_eq!(counter(&v, "resumes"), counter(&v, "cuts"), "{v:#}");
}

fn assert_usage_error(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{err}");
}

#[test]
fn bad_dtp_options_are_refused_before_anything_runs() {
    let s = Setup::new("bad");
    assert_usage_error(&s.load(&["--rate", "100"]), "--rate");
    assert_usage_error(
        &s.load(&["--workload", "connections"]),
        "pingpong and stream",
    );
    assert_usage_error(&s.load(&["--disconnect-every", "0"]), "--disconnect-every");
    assert_usage_error(&s.load(&["--pin-terminal", "abcd"]), "--pin-terminal");
    // Without --dtp the DTP options are refused by the parser.
    let out = dtp()
        .args(["load", "--disconnect-every", "3"])
        .output()
        .unwrap();
    assert_usage_error(&out, "--dtp");
    // A key file that is not one, and missing files.
    let out = dtp()
        .args(["load", "--dtp", "--fay-key"])
        .arg(s.path("fay.cred"))
        .args(["--credential", &s.path("fay.cred")])
        .output()
        .unwrap();
    assert_usage_error(&out, "BAD_KEY");
    let out = dtp()
        .args(["load", "--dtp", "--fay-key", &s.path("fay.key")])
        .output()
        .unwrap();
    assert_usage_error(&out, "--credential");
    let missing = Path::new(&s.dir).join("missing");
    let out = dtp()
        .args(["load", "--dtp", "--fay-key"])
        .arg(&missing)
        .args(["--credential", &s.path("fay.cred")])
        .output()
        .unwrap();
    // A file named that does not exist is bad usage, as everywhere.
    assert_usage_error(&out, "NOT_FOUND");
}
