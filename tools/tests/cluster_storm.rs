//! SPEC HO-4 across gateways under a storm: two `dtp serve` gateways with
//! `[cluster] etcd` on one real etcd serve one terminal's handover
//! resources, each loaded at once by `dtp load --dtp --control handovers`
//! (pairs of Fays on each gateway take a shared resource from each other;
//! the pairs of the two gateways contend for the same resources, which
//! across gateways shows as E_RESOURCE_BUSY). While the load runs, the
//! gateways are killed with SIGKILL and restarted on the same config and
//! audit log, alternately, [`GATEWAY_KILLS`] times, and etcd is killed
//! once: both gateways fence (every session ends), then serve again once
//! etcd is back. At the end `dtp audit check` over every gateway's audit
//! log finds no two controllers of one resource, and the number of
//! controlling spans and of handovers is printed.
//!
//! `DTP_STORM_HANDOVERS` (default [`DEFAULT_HANDOVERS`]) sets how many
//! handovers the storm goes on to after its kills: a longer run for a
//! person to start by hand. `DTP_STORM_KEEP=DIR` copies the audit logs
//! there before they are checked.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "../../engine/cluster/tests/servers/mod.rs"]
mod servers;
#[allow(
    dead_code,
    reason = "the support module is shared by the terminal tests; each uses part of it"
)]
mod support;

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use dtp_bench::control_workload::terminal_section;
use servers::EtcdServer;
use support::{Serve, Setup, dtp};

/// Gateways sharing the resources.
const NODES: [&str; 2] = ["node-a", "node-b"];
/// Handover resources, each contended by one pair of Fays per gateway.
const RESOURCES: usize = 3;
/// Gateway kills (SIGKILL, then a restart), alternating between them.
const GATEWAY_KILLS: usize = 6;
/// Between two kills: long enough for the load to reconnect and for a
/// dead gateway's lease (2 s) to run out.
const BETWEEN_KILLS: Duration = Duration::from_millis(2500);
/// Handovers the storm goes on to after its kills unless
/// `DTP_STORM_HANDOVERS` says otherwise: what two cores reach in about a
/// minute with the kills included.
const DEFAULT_HANDOVERS: u64 = 2_000;
/// The storm gives up after this long (a gateway that stopped serving).
const GIVE_UP: Duration = Duration::from_secs(600);

/// Gateway `node`'s configuration: the handover resources of the control
/// workload, its own audit log, the cluster's etcd.
fn config(setup: &Setup, etcd: &EtcdServer, node: &str) -> PathBuf {
    let resources: Vec<String> = (0..RESOURCES).map(|i| format!("ho-{i}")).collect();
    // The handovers' hard timeout (HO-7) at its floor, below a slow
    // revoke in etcd (three leaves of up to `timeout_ms` each): deadlines
    // pass in T1, and a source is restored only once its late revoke has
    // answered and, if the revoke went through, its grant is back — never
    // while another gateway may admit a second controller.
    let section = terminal_section(&[], &resources, 64).replace(
        "script_id = \"requester-wins\" }\n",
        "script_id = \"requester-wins\" }\nhard_timeout_ms = 500\n",
    );
    assert!(section.contains("hard_timeout_ms"), "{section}");
    setup.cluster_config((&etcd.addr, node), &section, 400)
}

/// Every file of `node`'s audit log: the current one and rotated ones.
fn audit_files(setup: &Setup, node: &str) -> Vec<PathBuf> {
    let name = format!("audit-{node}.jsonl");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&setup.dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let f = p.file_name().unwrap().to_string_lossy();
            f == name.as_str()
                || f.strip_prefix(&format!("{name}."))
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    files.sort();
    files
}

/// The records of `node`'s audit log (complete lines only: a gateway may
/// be writing the last one).
fn records(setup: &Setup, node: &str) -> Vec<serde_json::Value> {
    audit_files(setup, node)
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .map(|v| v["record"].clone())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What `node`'s audit log says so far: handovers that succeeded, and
/// sessions ended because the gateway lost its cluster membership.
fn tally(setup: &Setup, node: &str) -> (u64, u64) {
    let (mut handovers, mut fenced) = (0, 0);
    for r in records(setup, node) {
        if r["record"] == "handover" && r["outcome"]["result"] == "succeeded" {
            handovers += 1;
        }
        if r["record"] == "session_terminated" && r["reason"] == "resource_unavailable" {
            fenced += 1;
        }
    }
    (handovers, fenced)
}

/// How many sessions of `node` ended for each reason.
fn reasons(setup: &Setup, node: &str) -> std::collections::BTreeMap<String, u64> {
    let mut by = std::collections::BTreeMap::new();
    for r in records(setup, node) {
        if r["record"] == "session_terminated" {
            *by.entry(r["reason"].as_str().unwrap_or("?").to_owned())
                .or_default() += 1;
        }
    }
    by
}

/// One gateway and the load driven against it.
struct Node {
    name: &'static str,
    config: PathBuf,
    serve: Option<Serve>,
    load: Option<Child>,
}

impl Node {
    /// Starts (again) the gateway, then a handover load against it.
    fn start(&mut self, setup: &Setup) {
        let serve = Serve::start(&self.config);
        self.load = Some(load(setup, &serve.addr.to_string()));
        self.serve = Some(serve);
    }

    /// SIGKILL to the gateway; its load, whose Fays lost their
    /// connections, is stopped too.
    fn kill(&mut self) {
        drop(self.serve.take());
        self.stop_load();
    }

    fn stop_load(&mut self) {
        if let Some(mut load) = self.load.take() {
            let _ = load.kill();
            let _ = load.wait();
        }
    }

    fn serve(&self) -> &Serve {
        self.serve.as_ref().unwrap()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_load();
    }
}

/// `dtp load --dtp --control handovers` against `target`: a pair of Fays
/// per resource, for longer than the storm lasts (it is stopped).
fn load(setup: &Setup, target: &str) -> Child {
    let dir = |f: &str| setup.dir.join(f).display().to_string();
    let fays = (2 * RESOURCES).to_string();
    let resources = RESOURCES.to_string();
    dtp()
        .args([
            "load",
            "--dtp",
            "--control",
            "handovers",
            "--target",
            target,
        ])
        .args(["--issuer-key", &dir("issuer.key")])
        .args(["--pin-terminal", &dir("terminal.key.pub")])
        .args(["--connections", &fays, "--resources", &resources])
        .args(["--resource-prefix", "ho-", "--shards", "1"])
        .args([
            "--warmup",
            "0",
            "--duration",
            "3600",
            "--min-success",
            "0.01",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Handovers of every gateway so far.
fn handovers(setup: &Setup) -> u64 {
    NODES.iter().map(|n| tally(setup, n).0).sum()
}

/// Waits until the gateways completed `more` handovers beyond `from`.
fn wait_for_handovers(setup: &Setup, from: u64, more: u64, started: Instant) -> u64 {
    loop {
        let now = handovers(setup);
        if now >= from + more {
            return now;
        }
        assert!(
            started.elapsed() < GIVE_UP,
            "the storm stalled at {now} handovers"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn target_handovers() -> u64 {
    std::env::var("DTP_STORM_HANDOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_HANDOVERS)
}

/// `dtp audit check` over `files`: its exit status and stdout.
fn audit_check(files: &[PathBuf]) -> (Option<i32>, String) {
    let out = dtp().args(["audit", "check"]).args(files).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The number before `word` in `text` (`12 controlling spans`).
fn number_before(text: &str, word: &str) -> u64 {
    let at = text
        .find(word)
        .unwrap_or_else(|| panic!("no {word:?}: {text}"));
    let digits: String = text[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

#[test]
fn a_storm_of_kills_never_gives_one_resource_two_controllers() {
    let started = Instant::now();
    let mut etcd = EtcdServer::start();
    let setup = Setup::new("cluster-storm");
    let mut nodes: Vec<Node> = NODES
        .iter()
        .map(|&name| Node {
            name,
            config: config(&setup, &etcd, name),
            serve: None,
            load: None,
        })
        .collect();
    for n in &mut nodes {
        n.start(&setup);
    }
    wait_for_handovers(&setup, 0, 50, started);

    // Gateways killed and restarted, alternately; etcd killed once,
    // halfway.
    for kill in 0..GATEWAY_KILLS {
        if kill == GATEWAY_KILLS / 2 {
            etcd_outage(&setup, &mut etcd, &nodes, started);
        }
        let node = &mut nodes[kill % NODES.len()];
        node.kill();
        node.start(&setup);
        std::thread::sleep(BETWEEN_KILLS);
    }
    let after_kills = handovers(&setup);
    let total = wait_for_handovers(&setup, 0, target_handovers().max(after_kills), started);
    for n in &mut nodes {
        n.stop_load();
    }
    for n in &mut nodes {
        let status = n.serve.take().unwrap().stop();
        assert!(status.success(), "{} stopped with {status}", n.name);
    }

    let files: Vec<PathBuf> = NODES.iter().flat_map(|n| audit_files(&setup, n)).collect();
    if let Some(keep) = std::env::var_os("DTP_STORM_KEEP") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for f in &files {
            std::fs::copy(f, keep.join(f.file_name().unwrap())).unwrap();
        }
    }
    let (code, text) = audit_check(&files);
    println!("{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains(": 0 violations"), "{text}");
    let spans = number_before(&text, "controlling spans");
    let fenced = number_before(&text, "with fencing tokens)");
    let recorded = number_before(&text, "handovers succeeded");
    assert_eq!(fenced, spans, "every grant has its fencing token: {text}");
    assert_eq!(recorded, handovers(&setup), "{text}");
    assert!(spans > total, "{text}");
    println!(
        "storm: {} gateways, {GATEWAY_KILLS} gateway kills, 1 etcd kill, {total} handovers ({after_kills} during the kills), {spans} controlling spans, 0 violations, {:.1} s",
        NODES.len(),
        started.elapsed().as_secs_f64()
    );
}

/// etcd killed under load: both gateways fence (no session is left
/// active on either), and once etcd is back both complete handovers
/// again.
fn etcd_outage(setup: &Setup, etcd: &mut EtcdServer, nodes: &[Node], started: Instant) {
    let fenced_before: Vec<u64> = NODES.iter().map(|n| tally(setup, n).1).collect();
    etcd.kill();
    for n in nodes {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Sessions whose revoke waits for etcd stay terminating (their
            // OS access is withdrawn, their occupancy entry not yet, TS-4):
            // none is active.
            let sessions = n.serve().ctl_ok(&["sessions"]);
            let controlling = sessions
                .lines()
                .skip(1)
                .any(|l| l.split_whitespace().nth(4) != Some("terminating"));
            if sessions == "no sessions\n" || !controlling {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} still has active sessions 10 s after etcd went down:\n{sessions}",
                n.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    etcd.restart();
    // Both serve again.
    let before: Vec<u64> = NODES.iter().map(|n| tally(setup, n).0).collect();
    for (n, before) in nodes.iter().zip(before) {
        while tally(setup, n.name).0 < before + 10 {
            assert!(
                started.elapsed() < GIVE_UP,
                "{} did not serve again after etcd came back",
                n.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // Sessions active when etcd went down end `resource_unavailable`
    // (their record once their revoke reaches etcd again); the others
    // ended on their own before the fence.
    let fenced_after: Vec<u64> = NODES.iter().map(|n| tally(setup, n).1).collect();
    println!(
        "etcd outage: sessions ended by fencing so far {fenced_before:?} → {fenced_after:?}; reasons {:?}",
        NODES.map(|n| reasons(setup, n))
    );
}
