//! SPEC HO-1, HO-4 across gateways through `dtp serve`: a Fay on gateway B
//! takes a resource whose session is on gateway A. B's grant finds it held
//! on A and asks A through etcd; A's policy allows, A ends its source
//! (`handed_over`) keeping the resource for the target, and B grants it —
//! then the same back the other way. `dtp audit check` over both
//! gateways' logs finds no two controllers.

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

use dtp_bench::control_workload::terminal_section;
use dtp_codec::{AccessMode, AuthOutcome};
use dtp_test_kit::Fay;
use servers::EtcdServer;
use support::{Serve, Setup, audit_records, dtp};

/// Gateway `node`'s configuration: `arm` under the always-allowing
/// priority script.
fn config(setup: &Setup, etcd: &EtcdServer, node: &str) -> PathBuf {
    let section = terminal_section(&[], &["arm".to_owned()], 16);
    setup.cluster_config((&etcd.addr, node), &section, 500)
}

fn granted(fay: &mut Fay, request: u64) -> dtp_codec::SessionId {
    fay.ask(request, "arm", AccessMode::Write);
    match fay.outcome(request) {
        AuthOutcome::Granted { session_id } => session_id,
        refused => panic!("not handed over across gateways: {refused:?}"),
    }
}

#[test]
fn a_fay_on_one_gateway_takes_over_a_session_on_another() {
    let etcd = EtcdServer::start();
    let setup = Setup::new("cluster-handover");
    let (a_files, b_files) = (
        setup.fay("fay-a", &["arm=write"]),
        setup.fay("fay-b", &["arm=write"]),
    );
    let gateway_a = Serve::start(&config(&setup, &etcd, "node-a"));
    let gateway_b = Serve::start(&config(&setup, &etcd, "node-b"));
    let mut fay_a = Fay::connect(gateway_a.addr, &setup.fay_config(&a_files));
    let mut fay_b = Fay::connect(gateway_b.addr, &setup.fay_config(&b_files));

    let on_a = fay_a.session(1, "arm", AccessMode::Write);
    // B's AuthRequest is a handover of A's session.
    let on_b = granted(&mut fay_b, 1);
    assert_eq!(fay_a.terminated(on_a).as_deref(), Some("handed_over"));
    // And back: the source now on B, the target on A.
    let again_on_a = granted(&mut fay_a, 2);
    assert_eq!(fay_b.terminated(on_b).as_deref(), Some("handed_over"));
    assert_ne!(again_on_a, on_a);
    drop((fay_a, fay_b));
    drop((gateway_a, gateway_b));

    // Each holder's gateway recorded its handover as done, its target's
    // session created on the other gateway.
    for (node, source) in [("node-a", on_a), ("node-b", on_b)] {
        let records = audit_records(&setup.audit(node));
        let handover = records
            .iter()
            .find(|r| r["record"] == "handover")
            .unwrap_or_else(|| panic!("no handover in {node}'s log: {records:?}"));
        assert_eq!(handover["outcome"]["result"], "succeeded", "{handover}");
        assert_eq!(handover["source_session_id"], source.to_string());
    }
    let out = dtp()
        .args(["audit", "check"])
        .arg(setup.audit("node-a"))
        .arg(setup.audit("node-b"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(": 0 violations"), "{text}");
}
