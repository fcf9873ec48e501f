//! Chaos over real sockets against the real `dtp serve` process, with
//! sealed (encrypted) DTP pingpong streams (SPEC RES-1 … RES-3, SES-2,
//! SES-3, SEQ-5):
//!
//! - an RST proxy between the Fay (the test kit's, a `DtpEndpoint` over a
//!   blocking socket) and the gateway forwards bytes and resets both
//!   sides (SO_LINGER 0) at a random byte of several connections in a
//!   row — during CAP, mid-frame, during the resume handshake; the Fay
//!   resumes each time;
//! - the same proxy between the real load generator (`dtp load --dtp`,
//!   pingpong and stream) and the gateway: its report must show nothing
//!   lost or duplicated;
//! - the gateway is stopped (SIGTERM, a live connection mid-stream) or
//!   killed (SIGKILL, after the session was parked) and started again on
//!   the same `[dtp] session_store`; the Fay resumes on the new process.
//!
//! Every fragment must come back exactly once, in order, intact. Only
//! loopback; every wait has a deadline; the proxy stops with the test.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the serve tests; each uses part of it"
)]
mod support;

#[path = "chaos_dtp/proxy.rs"]
mod proxy;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_bench::dtp_workload::DtpWorkload;
use dtp_codec::{AccessMode, AgreementId, ErrorCode};
use dtp_gateway::dtp::{DtpEvent, FayConfig, SuspendedSession};
use dtp_test_kit::{Fay, Keys};
use proxy::RstProxy;
use support::{Scratch, Serve, session_files, write_dtp_config};

/// Longest a whole test may run (it takes a few seconds in debug).
const DEADLINE: Duration = Duration::from_secs(45);

fn keys() -> Keys {
    Keys::new(53, "chaos-fay", &[("bench", &[AccessMode::Read])])
}

/// Fragment `id`'s payload: its id, so an answer that is not its own
/// fragment's is seen.
fn payload(id: u64) -> Bytes {
    let mut p = id.to_le_bytes().repeat(12);
    p.push(id as u8);
    Bytes::from(p)
}

/// A Fay's pingpong stream across as many connections as it takes: one
/// fragment in flight, each answered before the next is sent; a lost
/// connection is resumed (or, before an agreement existed, a new session
/// is started).
struct Stream {
    config: FayConfig,
    fay: Option<Fay>,
    suspended: Option<SuspendedSession>,
    agreement: Option<AgreementId>,
    /// The next fragment id to send.
    next: u64,
    /// Answers, in the order they came.
    answered: Vec<u64>,
    connections: usize,
    resumes: usize,
    started: Instant,
}

impl Stream {
    fn new(config: FayConfig) -> Self {
        Stream {
            config,
            fay: None,
            suspended: None,
            agreement: None,
            next: 1,
            answered: Vec::new(),
            connections: 0,
            resumes: 0,
            started: Instant::now(),
        }
    }

    /// Runs against `addr` until `until` fragments are answered.
    fn run_until(&mut self, addr: SocketAddr, until: u64) {
        while (self.answered.len() as u64) < until {
            assert!(
                self.started.elapsed() < DEADLINE,
                "only {} of {until} answered after {} connections ({} resumes)",
                self.answered.len(),
                self.connections,
                self.resumes
            );
            let fay = self.fay.get_or_insert_with(|| {
                self.connections += 1;
                match self.suspended.take() {
                    Some(s) => Fay::start_resume(addr, &self.config, s),
                    None => Fay::start(addr, &self.config),
                }
            });
            fay.turn();
            let events = fay.take_events();
            for event in events {
                self.event(event);
            }
            self.send(until);
            if self.fay.as_ref().is_some_and(Fay::is_eof) {
                self.lost();
            }
        }
    }

    /// Sends the next fragment once the last one is answered.
    fn send(&mut self, until: u64) {
        let (Some(fay), Some(agreement)) = (self.fay.as_mut(), self.agreement) else {
            return;
        };
        let last_answered = self.next == self.answered.len() as u64 + 1;
        if !fay.ep.is_established() || !last_answered || self.next > until {
            return;
        }
        fay.ep
            .send_fragment(agreement, self.next, vec![], payload(self.next))
            .unwrap();
        self.next += 1;
        fay.flush();
    }

    fn event(&mut self, event: DtpEvent) {
        match event {
            DtpEvent::Established { resumed, .. } => {
                if resumed {
                    self.resumes += 1;
                    assert!(self.agreement.is_some(), "resumed a session never agreed");
                } else {
                    assert!(
                        self.agreement.is_none(),
                        "a session with an agreement was not resumed but started anew"
                    );
                    let fay = self.fay.as_mut().unwrap();
                    let terms = DtpWorkload::Pingpong.terms();
                    fay.ep.request_collection(terms, Instant::now()).unwrap();
                }
            }
            DtpEvent::AgreementActive { agreement_id, .. } => {
                assert!(self.agreement.is_none_or(|a| a == agreement_id));
                self.agreement = Some(agreement_id);
            }
            DtpEvent::Fragment {
                fragment_id,
                payload: got,
                ..
            } => {
                let expected = self.answered.len() as u64 + 1;
                assert_eq!(fragment_id, expected, "answers so far {:?}", self.answered);
                assert_eq!(got, payload(fragment_id), "fragment {fragment_id} altered");
                self.answered.push(fragment_id);
            }
            DtpEvent::Error(e) => panic!("the Fay's endpoint reports {e}"),
            DtpEvent::Closed { code } => panic!("the connection closed with {code}"),
            _ => {}
        }
    }

    /// The connection is gone: keep what can be resumed.
    fn lost(&mut self) {
        let fay = self.fay.take().unwrap();
        self.suspended = fay.cut();
        if self.agreement.is_some() {
            assert!(
                self.suspended.is_some(),
                "a session with an agreement was not suspended"
            );
        }
    }

    /// Cuts the connection from the Fay's side (no close frame).
    fn cut(&mut self) {
        if self.fay.is_some() {
            self.lost();
        }
    }

    /// Turns until the gateway ends the connection (its process stops).
    fn until_gateway_hangs_up(&mut self) {
        while let Some(fay) = self.fay.as_mut() {
            assert!(
                self.started.elapsed() < DEADLINE,
                "the gateway never hung up"
            );
            fay.turn();
            let events = fay.take_events();
            for event in events {
                self.event(event);
            }
            if self.fay.as_ref().is_some_and(Fay::is_eof) {
                self.lost();
            }
        }
    }

    fn assert_all_once_in_order(&self, last: u64) {
        assert_eq!(self.answered, (1..=last).collect::<Vec<u64>>());
    }
}

/// SPEC RES-1 … RES-3, SEQ-5 through real TCP and a real gateway: an RST
/// proxy resets eight connections in a row at random bytes (seeded; the
/// seed is printed); the Fay resumes each time, and all 150 sealed
/// pingpong fragments are answered exactly once, in order, intact.
#[test]
fn rst_cuts_at_random_bytes_lose_nothing() {
    let seed = std::env::var("DTP_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0001_u64);
    println!("chaos seed {seed} (DTP_CHAOS_SEED to repeat)");
    let dir = Scratch::new("chaos-rst");
    let keys = keys();
    let serve = Serve::start_dtp(&write_dtp_config(&dir.0, &keys, ""));
    let cuts = 8;
    let proxy = RstProxy::start(serve.addr, seed, cuts, 64..5000);
    let mut stream = Stream::new(keys.fay_config());
    stream.run_until(proxy.addr(), 150);
    println!(
        "{} connections, {} resets, {} resumes",
        stream.connections,
        proxy.resets(),
        stream.resumes
    );
    stream.assert_all_once_in_order(150);
    assert_eq!(proxy.resets(), cuts, "every planned reset happened");
    assert!(
        stream.resumes >= 2,
        "resumed {} times over {} connections",
        stream.resumes,
        stream.connections
    );
    drop(proxy);
    assert!(serve.stop().success());
}

/// A scratch directory with the test's keys and a configuration keeping
/// suspended sessions in its `sessions` store; the gateway started on it.
struct OnStore {
    _dir: Scratch,
    keys: Keys,
    config: PathBuf,
    store: PathBuf,
}

impl OnStore {
    fn new(name: &str) -> (Self, Serve) {
        let dir = Scratch::new(name);
        let keys = keys();
        let config = write_dtp_config(&dir.0, &keys, "session_store = \"sessions\"\n");
        let store = dir.0.join("sessions");
        let on = OnStore {
            _dir: dir,
            keys,
            config,
            store,
        };
        let serve = Serve::start_dtp(&on.config);
        (on, serve)
    }

    fn parked(&self) -> usize {
        session_files(&self.store).len()
    }
}

/// SPEC SES-2, SES-3: a gateway stopped with SIGTERM while a Fay is
/// mid-stream (a fragment in flight) parks the live session in its
/// `session_store` as it closes the connection; started again on the
/// same store, it resumes the session and the stream goes on with
/// nothing lost or answered twice.
#[test]
fn sigterm_mid_stream_then_restart_on_the_store_loses_nothing() {
    let (on, serve) = OnStore::new("chaos-term");
    let mut stream = Stream::new(on.keys.fay_config());
    stream.run_until(serve.addr, 20);
    stream.send(21); // in flight when the gateway stops
    assert!(serve.stop().success());
    stream.until_gateway_hangs_up();
    assert_eq!(on.parked(), 1, "the live session was parked");

    let serve = Serve::start_dtp(&on.config);
    stream.run_until(serve.addr, 40);
    stream.assert_all_once_in_order(40);
    assert_eq!(stream.resumes, 1);
    assert_eq!(on.parked(), 0, "a resumed session is taken");
    assert!(serve.stop().success());
}

/// SPEC SES-2, SES-3: the store's write is durable — a session parked
/// (its connection cut) survives the gateway being killed with SIGKILL,
/// and the restarted gateway resumes it: nothing lost or answered twice.
#[test]
fn sigkill_after_the_park_then_restart_on_the_store_loses_nothing() {
    let (on, serve) = OnStore::new("chaos-kill");
    let mut stream = Stream::new(on.keys.fay_config());
    stream.run_until(serve.addr, 20);
    stream.send(21);
    stream.cut();
    support::eventually("the session parked", || (on.parked() == 1).then_some(()));
    drop(serve); // SIGKILL: no drain, no chance to write anything more

    let serve = Serve::start_dtp(&on.config);
    stream.run_until(serve.addr, 40);
    stream.assert_all_once_in_order(40);
    assert_eq!(stream.resumes, 1);
    assert!(serve.stop().success());
}

/// SPEC SES-2, what the store does not promise: a session whose
/// connection was still live when the gateway was killed (SIGKILL) was
/// never parked, so the restarted gateway refuses its resume — cleanly,
/// with RESUME_FAILED.
#[test]
fn sigkill_with_a_live_connection_refuses_the_resume() {
    let (on, serve) = OnStore::new("chaos-kill-live");
    let mut stream = Stream::new(on.keys.fay_config());
    stream.run_until(serve.addr, 5);
    drop(serve);
    stream.until_gateway_hangs_up();
    let session = stream.suspended.take().unwrap();

    let serve = Serve::start_dtp(&on.config);
    let mut fay = Fay::start_resume(serve.addr, &on.keys.fay_config(), session);
    assert_eq!(fay.closed(), ErrorCode::RESUME_FAILED);
    assert!(serve.stop().success());
}

/// SPEC RES-1 … RES-4, SEQ-5 with the real load generator: `dtp load
/// --dtp` (two flows, `workload`) through the RST proxy to `dtp serve`,
/// eight connections reset at random bytes; its report must show every
/// fragment sent delivered, none lost or duplicated, every flow alive,
/// and the resets seen as resumes.
fn load_through_resets(workload: &str, budget: std::ops::Range<usize>) {
    let dir = Scratch::new(&format!("chaos-load-{workload}"));
    let keys = keys();
    let serve = Serve::start_dtp(&write_dtp_config(&dir.0, &keys, ""));
    let cuts = 8;
    let proxy = RstProxy::start(serve.addr, 0x5EED_0002, cuts, budget);
    std::fs::write(dir.0.join("fay.key"), keys.fay.to_text()).unwrap();
    std::fs::write(dir.0.join("fay.cred"), keys.credential.to_text()).unwrap();
    let pin: String = keys
        .terminal
        .public()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let json = dir.0.join("report.json");
    let path = |name: &str| dir.0.join(name).display().to_string();
    let out = support::dtp()
        .args(["load", "--dtp", "--target", &proxy.addr().to_string()])
        .args([
            "--fay-key",
            &path("fay.key"),
            "--credential",
            &path("fay.cred"),
        ])
        .args(["--pin-terminal", &pin, "--workload", workload])
        .args(["--connections", "2", "--shards", "1"])
        .args(["--duration", "2", "--warmup", "0"])
        .args(["--json", &json.display().to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let n = |key: &str| {
        v["dtp"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {v:#}"))
    };
    assert!(n("sent") > 0, "{v:#}");
    assert_eq!(n("delivered"), n("sent"), "{v:#}");
    assert_eq!(n("lost"), 0, "{v:#}");
    assert_eq!(n("duplicated"), 0, "{v:#}");
    assert_eq!(n("failed_flows"), 0, "{v:#}");
    assert_eq!(proxy.resets(), cuts, "{v:#}");
    // Every loss the load generator saw was one of the proxy's resets.
    assert_eq!(v["errors"].as_u64(), Some(cuts as u64), "{v:#}");
    assert!(n("resumes") >= 1, "{v:#}");
    drop(proxy);
    assert!(serve.stop().success());
}

/// [`load_through_resets`]: pingpong, resets within the first few KB.
#[test]
fn load_pingpong_through_rst_cuts_loses_nothing() {
    load_through_resets("pingpong", 64..5000);
}

/// [`load_through_resets`]: stream, resets within the first 200 KB.
#[test]
fn load_stream_through_rst_cuts_loses_nothing() {
    load_through_resets("stream", 64..200_000);
}
