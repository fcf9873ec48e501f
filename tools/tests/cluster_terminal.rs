//! SPEC HO-4, TS-9 across gateways through `dtp serve`: three gateways with
//! `[cluster] etcd` on one real etcd share a terminal's resources. A Fay
//! holding `arm` on gateway A keeps Fays on gateways B and C out
//! (E_RESOURCE_BUSY) until it lets go; a gateway killed with SIGKILL while
//! holding `arm` frees it within its lease; and `dtp audit check` over
//! both gateways' audit logs finds no two controllers, every grant with
//! its fencing token.

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
use std::time::{Duration, Instant};

use dtp_codec::{AccessMode, AuthOutcome, ErrorCode};
use dtp_test_kit::Fay;
use servers::EtcdServer;
use support::{Serve, Setup, audit_records, dtp, eventually};

/// Gateway `node`'s configuration: the terminal with one resource.
fn config(setup: &Setup, etcd: &EtcdServer, node: &str) -> PathBuf {
    let section = "[terminal.control]\nterminal_id = \"t1\"\n\n[[terminal.control.resources]]\nresource_id = \"arm\"\n";
    setup.cluster_config((&etcd.addr, node), section, 500)
}

fn refused(fay: &mut Fay, request: u64) -> ErrorCode {
    fay.ask(request, "arm", AccessMode::Write);
    match fay.outcome(request) {
        AuthOutcome::Refused { code, .. } => code,
        granted => panic!("granted while another gateway holds arm: {granted:?}"),
    }
}

#[test]
fn two_gateways_never_give_one_resource_two_controllers() {
    let etcd = EtcdServer::start();
    let setup = Setup::new("cluster-terminal");
    let (a_files, b_files, c_files) = (
        setup.fay("fay-a", &["arm=write"]),
        setup.fay("fay-b", &["arm=write"]),
        setup.fay("fay-c", &["arm=write"]),
    );
    let gateway_a = Serve::start(&config(&setup, &etcd, "node-a"));
    let gateway_b = Serve::start(&config(&setup, &etcd, "node-b"));
    let gateway_c = Serve::start(&config(&setup, &etcd, "node-c"));
    let mut fay_a = Fay::connect(gateway_a.addr, &setup.fay_config(&a_files));
    let mut fay_b = Fay::connect(gateway_b.addr, &setup.fay_config(&b_files));
    let mut fay_c = Fay::connect(gateway_c.addr, &setup.fay_config(&c_files));

    // A holds arm; B and C, on the other gateways, are refused.
    let sid = fay_a.session(1, "arm", AccessMode::Write);
    assert_eq!(refused(&mut fay_b, 1), ErrorCode::E_RESOURCE_BUSY);
    assert_eq!(refused(&mut fay_c, 1), ErrorCode::E_RESOURCE_BUSY);
    // A lets go (an operator ends it); B gets it.
    gateway_a.ctl_ok(&["terminate", &sid.to_string()]);
    assert_eq!(fay_a.terminated(sid).as_deref(), Some("forced"));
    let held_by_b = fay_b.session(2, "arm", AccessMode::Write);
    assert_eq!(refused(&mut fay_a, 2), ErrorCode::E_RESOURCE_BUSY);
    assert_eq!(refused(&mut fay_c, 2), ErrorCode::E_RESOURCE_BUSY);
    drop(fay_c);
    drop(gateway_c);
    gateway_b.ctl_ok(&["terminate", &held_by_b.to_string()]);
    assert_eq!(fay_b.terminated(held_by_b).as_deref(), Some("forced"));

    // A takes it again, and its gateway is killed: B gets it once the dead
    // gateway's lease ran out, not before.
    fay_a.session(3, "arm", AccessMode::Write);
    drop(fay_a);
    let audit_a = setup.dir.join("audit-node-a.jsonl");
    eventually("the first session in A's audit log", || {
        let n = audit_records(&audit_a)
            .iter()
            .filter(|r| r["record"] == "session_terminated")
            .count();
        (n >= 1).then_some(())
    });
    drop(gateway_a); // SIGKILL
    let killed = Instant::now();
    let mut request = 3;
    loop {
        request += 1;
        fay_b.ask(request, "arm", AccessMode::Write);
        match fay_b.outcome(request) {
            AuthOutcome::Granted { .. } => break,
            AuthOutcome::Refused { code, .. } => assert_eq!(code, ErrorCode::E_RESOURCE_BUSY),
        }
        assert!(killed.elapsed() < Duration::from_secs(20), "never freed");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(fay_b);
    drop(gateway_b);

    // The history of both gateways: no overlap, every grant fenced.
    let audit_b = setup.dir.join("audit-node-b.jsonl");
    let out = dtp()
        .args(["audit", "check"])
        .arg(&audit_a)
        .arg(&audit_b)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let fenced = audit_records(&audit_a)
        .into_iter()
        .chain(audit_records(&audit_b))
        .filter(|r| r["record"] == "session_terminated" && !r["active_until"].is_null())
        .all(|r| r["fencing"].as_u64().is_some());
    assert!(fenced, "{text}");
    assert!(
        text.contains("2 controlling spans (2 with fencing tokens): 0 violations"),
        "{text}"
    );
}
