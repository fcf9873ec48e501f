//! `dtp serve` with `[terminal]` against Fays over real TCP, administered
//! with `dtp ctl`: sessions granted by OS commands (TS-4), listed and
//! force-terminated (TS-11), a
//! resource lost (TS-10), a credential revoked (TS-16), a handover a
//! person decides on the external panel (HO-3c) and an admin handover to
//! the human user (HO-1, HO-9) — each checked where the Fay sees it, in
//! `dtp ctl`'s output and in the audit log.

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

use dtp_codec::{AccessMode, AuthOutcome, ErrorCode};
use dtp_test_kit::Fay;
use serde_json::Value;
use support::{Serve, Setup, audit_records, eventually};

/// `arm`: a person decides handovers (external panel, 30 s, default
/// reject); `lamp`: a priority script where the target always wins.
fn terminal_section(setup: &Setup) -> String {
    format!(
        r##"[terminal.control]
terminal_id = "t1"

[[terminal.control.resources]]
resource_id = "arm"
handover_policy = "ask"
metadata = {{ kind = "robot arm" }}

[[terminal.control.resources]]
resource_id = "lamp"
handover_policy = "newest"

[terminal.control.policies.ask]
policy = {{ policy_type = "human_decision", ui_channel = "external_panel" }}

[terminal.control.policies.newest]
policy = {{ policy_type = "priority_script", script_id = "newest" }}

[terminal.policy.scripts]
newest = "#{{ source: 1, target: 2 }}"

[terminal.audit]
path = "{}"
"##,
        setup.dir.join("audit.jsonl").display()
    )
}

/// The audit records of `kind` (`session_terminated`, `handover`).
fn audited(setup: &Setup, kind: &str) -> Vec<Value> {
    audit_records(&setup.dir.join("audit.jsonl"))
        .into_iter()
        .filter(|r| r["record"] == kind)
        .collect()
}

#[test]
fn ctl_lists_terminates_and_ends_sessions_by_resource_and_revocation() {
    let setup = Setup::new("admin");
    let a = setup.fay("fay-a", &["arm=write", "lamp=read"]);
    // SPEC TS-4: OS access by configured commands (no shell).
    let granted = setup.dir.join("granted-arm-fay-a-write");
    let os_access = format!(
        "[terminal.os_access]\nkind = \"command\"\ngrant = [\"touch\", \"{0}/granted-{{resource_id}}-{{fay_id}}-{{access_mode}}\"]\nrevoke = [\"rm\", \"{0}/granted-{{resource_id}}-{{fay_id}}-{{access_mode}}\"]\n",
        setup.dir.display()
    );
    let config = format!("{}{os_access}", terminal_section(&setup));
    let serve = Serve::start(&setup.config(&config));
    let mut fay = Fay::connect(serve.addr, &setup.fay_config(&a));

    // SPEC TS-6: a session, granted by the OS command, listed by `dtp ctl
    // sessions`.
    let sid = fay.session(1, "arm", AccessMode::Write);
    assert!(granted.exists(), "the grant command did not run");
    let table = serve.ctl_ok(&["sessions"]);
    let row = table
        .lines()
        .find(|l| l.contains(&sid.to_string()))
        .expect(&table);
    for cell in ["fay-a", "arm", "write", "active", "up"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    let listed = serve.ctl_json(&["sessions"]);
    assert_eq!(listed["sessions"][0]["session_id"], sid.to_string());
    let resources = serve.ctl_json(&["resources"]);
    assert_eq!(resources["resources"][0]["controllers"][0], sid.to_string());

    // SPEC TS-11: forced; the runtime hears it; a second try is refused.
    let out = serve.ctl_ok(&["terminate", &sid.to_string()]);
    assert_eq!(out, format!("terminated {sid} (forced)\n"));
    assert_eq!(fay.terminated(sid).as_deref(), Some("forced"));
    assert!(!granted.exists(), "the revoke command did not run");
    assert_eq!(serve.ctl_ok(&["sessions"]), "no sessions\n");
    let again = serve.ctl(&["terminate", &sid.to_string()]);
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8(again.stderr).unwrap();
    assert!(err.starts_with("error: E_SESSION_TERMINATED"), "{err}");

    // SPEC TS-10: the lamp goes away, its session with it; back, nothing
    // is restored.
    let lamp = fay.session(2, "lamp", AccessMode::Read);
    let out = serve.ctl_ok(&["resource", "lamp", "--unavailable"]);
    assert_eq!(out, "lamp is unavailable; sessions ended: 1\n");
    assert_eq!(
        fay.terminated(lamp).as_deref(),
        Some("resource_unavailable")
    );
    serve.ctl_ok(&["resource", "lamp", "--available"]);
    assert_eq!(serve.ctl_ok(&["sessions"]), "no sessions\n");

    // SPEC TS-16: a revocation ends the Fay's sessions and refuses it after.
    let lamp = fay.session(3, "lamp", AccessMode::Read);
    let out = serve.ctl_ok(&["revoke", &a.descriptor_id]);
    assert_eq!(
        out,
        format!("revoked {}; sessions ended: 1\n", a.descriptor_id)
    );
    assert_eq!(fay.terminated(lamp).as_deref(), Some("credential_revoked"));
    // The gateway's CAP honours the revocation at once, on every core.
    assert_eq!(
        Fay::refused(serve.addr, &setup.fay_config(&a)),
        ErrorCode::CREDENTIAL_REVOKED
    );
    fay.ask(4, "lamp", AccessMode::Read);
    let AuthOutcome::Refused { code, .. } = fay.outcome(4) else {
        panic!("a revoked credential got a session");
    };
    assert_eq!(code, ErrorCode::CREDENTIAL_REVOKED);

    // SPEC TS-12: every termination is in the audit log, with its reason.
    let reasons: Vec<Value> = eventually("three audit records", || {
        let r = audited(&setup, "session_terminated");
        (r.len() >= 3).then_some(r)
    })
    .iter()
    .map(|r| r["reason"].clone())
    .collect();
    assert_eq!(
        reasons,
        ["forced", "resource_unavailable", "credential_revoked"]
    );
}

#[test]
fn a_person_decides_a_handover_with_ctl_and_hands_control_to_the_human() {
    let setup = Setup::new("handover");
    let a = setup.fay("fay-a", &["arm=write"]);
    let b = setup.fay("fay-b", &["arm=write"]);
    let serve = Serve::start(&setup.config(&terminal_section(&setup)));
    let mut fay_a = Fay::connect(serve.addr, &setup.fay_config(&a));
    let mut fay_b = Fay::connect(serve.addr, &setup.fay_config(&b));
    let sa = fay_a.session(1, "arm", AccessMode::Write);

    // SPEC HO-1: fay-b asks for the held arm; the policy asks a person.
    fay_b.ask(7, "arm", AccessMode::Write);
    let pending = eventually("a pending decision", || {
        let d = serve.ctl_json(&["decisions"]);
        (d["decisions"].as_array().unwrap().len() == 1).then_some(d)
    });
    let entry = &pending["decisions"][0];
    let handover_id = entry["handover_id"].as_str().unwrap().to_owned();
    assert_eq!(entry["source_fay_id"], "fay-a");
    assert_eq!(entry["target_fay_id"], "fay-b");
    assert_eq!(entry["resource_id"], "arm");
    assert_eq!(entry["access_mode"], "write");
    // SPEC HO-3c: what a person sees, and never a signature or key id.
    let mut keys: Vec<&str> = entry
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "access_mode",
            "deadline_ms",
            "default_action",
            "handover_id",
            "reason",
            "resource_id",
            "source_fay_id",
            "target_fay_id"
        ]
    );
    let table = serve.ctl_ok(&["decisions"]);
    assert!(
        table.contains(&handover_id) && table.contains("fay-b"),
        "{table}"
    );
    let credential_text = std::fs::read_to_string(&b.credential).unwrap();
    let armour_body = credential_text
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 20)
        .collect::<Vec<_>>();
    for shown in [table.clone(), pending.to_string()] {
        assert!(
            !shown.contains(&setup.issuer_key_id),
            "key id shown: {shown}"
        );
        assert!(
            armour_body.iter().all(|l| !shown.contains(*l)),
            "credential shown"
        );
    }
    let handovers = serve.ctl_json(&["handovers"]);
    assert_eq!(
        handovers["handovers"][0]["handover_id"],
        handover_id.as_str()
    );
    assert_eq!(handovers["handovers"][0]["policy"], "ask");

    // The person allows: fay-b holds the arm, fay-a's session ended.
    let out = serve.ctl_ok(&["decide", &handover_id, "allow"]);
    assert_eq!(out, format!("handover {handover_id}: allowed\n"));
    let AuthOutcome::Granted { session_id: sb } = fay_b.outcome(7) else {
        panic!("fay-b was refused");
    };
    assert_eq!(fay_a.terminated(sa).as_deref(), Some("handed_over"));
    let sessions = serve.ctl_json(&["sessions"]);
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(sessions["sessions"][0]["session_id"], sb.to_string());
    let late = serve.ctl(&["decide", &handover_id, "reject"]);
    assert_eq!(late.status.code(), Some(2), "{late:?}");

    // SPEC HO-1, HO-9: an administrator hands the arm to the human user;
    // the person allows it on the same panel.
    let out = serve.ctl_ok(&[
        "--json",
        "handover",
        "--resource",
        "arm",
        "--credential",
        "human",
        "--reason",
        "operator takes over",
    ]);
    let started: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(started["status"], "evaluating");
    assert_eq!(started["target_fay_id"], "human:t1");
    let second = started["handover_id"].as_str().unwrap().to_owned();
    let listed = serve.ctl_json(&["decisions"]);
    assert_eq!(listed["decisions"][0]["reason"], "operator takes over");
    serve.ctl_ok(&["decide", &second, "allow"]);
    assert_eq!(fay_b.terminated(sb).as_deref(), Some("handed_over"));
    let sessions = serve.ctl_json(&["sessions"]);
    assert_eq!(sessions["sessions"][0]["fay_id"], "human:t1");
    assert_eq!(sessions["sessions"][0]["human"], true);

    // SPEC HO-10: both handovers fully recorded, then the source sessions.
    let records = eventually("two handover records", || {
        let r = audited(&setup, "handover");
        (r.len() >= 2).then_some(r)
    });
    assert_eq!(records[0]["handover_id"], handover_id.as_str());
    assert_eq!(records[0]["source_fay_id"], "fay-a");
    assert_eq!(records[0]["target_fay_id"], "fay-b");
    assert_eq!(records[0]["target_session_id"], sb.to_string());
    assert_eq!(records[0]["outcome"]["result"], "succeeded");
    assert_eq!(records[0]["decisions"][0]["decision"], "allow");
    assert_eq!(records[1]["handover_id"], second.as_str());
    assert_eq!(records[1]["target_fay_id"], "human:t1");
    let ended: Vec<Value> = audited(&setup, "session_terminated")
        .iter()
        .map(|r| r["session_id"].clone())
        .collect();
    assert_eq!(ended, [sa.to_string(), sb.to_string()]);
}

/// Opens an SSE stream of a built-in stream with the demo token and reads
/// until its `retry:` field (the stream is live).
fn built_in_sse(rt: std::net::SocketAddr, stream: &str) -> (std::net::TcpStream, String) {
    use std::io::Write;
    let mut sse = std::net::TcpStream::connect(rt).unwrap();
    sse.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let req = format!(
        "GET /v1/streams/{stream}/sse HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer dtp-demo-token\r\n\r\n"
    );
    sse.write_all(req.as_bytes()).unwrap();
    let mut seen = String::new();
    read_until(&mut sse, &mut seen, |s| s.contains("retry:"));
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    (sse, seen)
}

/// Reads `sse` into `seen` until `done(seen)`.
fn read_until(sse: &mut std::net::TcpStream, seen: &mut String, done: impl Fn(&str) -> bool) {
    use std::io::Read;
    let mut buf = [0u8; 4096];
    while !done(seen) {
        let n = sse.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// Issue 6 item 2: the terminal plane's session changes and resource
/// availability are published on the built-in `sessions` and `resources`
/// streams, and a browser's SSE stream sees them (with no Fay id in them:
/// SPEC RT-3).
#[test]
fn session_changes_reach_the_built_in_streams() {
    let setup = Setup::new("streams");
    let a = setup.fay("fay-a", &["arm=write"]);
    let serve = Serve::start(&setup.config(&terminal_section(&setup)));
    let rt = serve
        .realtime
        .expect("the realtime front end runs by default");
    let (mut sessions, mut seen) = built_in_sse(rt, "sessions");
    let (mut resources, mut seen_r) = built_in_sse(rt, "resources");

    let mut fay = Fay::connect(serve.addr, &setup.fay_config(&a));
    let sid = fay.session(1, "arm", AccessMode::Write);
    let active = format!("\"sessionId\":\"{sid}\"");
    read_until(&mut sessions, &mut seen, |s| {
        s.contains(&active) && s.contains("\"to\":\"active\"")
    });
    assert!(seen.contains("\"eventType\":\"session.state\""), "{seen}");
    assert!(seen.contains("\"resourceId\":\"arm\""), "{seen}");
    assert!(!seen.contains("fay-a"), "a Fay id in an envelope: {seen}");

    serve.ctl_ok(&["resource", "arm", "--unavailable"]);
    read_until(&mut resources, &mut seen_r, |s| {
        s.contains("resource.availability")
    });
    assert!(
        seen_r.contains("\"payload\":{\"resourceId\":\"arm\",\"available\":false}"),
        "{seen_r}"
    );
    // The session it ended shows on `sessions`.
    read_until(&mut sessions, &mut seen, |s| {
        s.contains("\"to\":\"terminated\"")
    });
}
