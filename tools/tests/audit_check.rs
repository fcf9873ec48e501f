//! `dtp audit check` on audit logs written as the gateways write them
//! (SPEC HO-4 across gateways): two nodes' logs with back-to-back
//! controllers pass; an overlap or a stale fencing token is found, named,
//! and exits 1; a file that is not an audit log exits 2.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use dtp_codec::{AccessMode, SessionId};
use dtp_terminal::{AuditRecord, SessionAudit, TerminationReason, UnixMs};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dtp-audit-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One node's log: a session_terminated record per (id, mode, from, until,
/// token), as the plane's audit writer encodes them.
fn log(path: &Path, sessions: &[(u128, AccessMode, u64, u64, u64)]) {
    let mut bytes = Vec::new();
    for (i, &(id, mode, from, until, token)) in sessions.iter().enumerate() {
        let record = AuditRecord::SessionTerminated(SessionAudit {
            session_id: SessionId::from_u128(id),
            fay_id: "fay".into(),
            resource_id: "term".into(),
            access_mode: mode,
            reason: TerminationReason::HandedOver,
            created_at: UnixMs(from),
            terminated_at: UnixMs(until + 1),
            fencing: Some(token),
            active_until: Some(UnixMs(until)),
        });
        let seq = u64::try_from(i).unwrap() + 1;
        bytes.extend(dtp_audit::encode_line(seq, until, &record).unwrap());
    }
    std::fs::write(path, bytes).unwrap();
}

fn check(files: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dtp"))
        .arg("audit")
        .arg("check")
        .args(files)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn back_to_back_controllers_on_two_nodes_pass() {
    let dir = scratch("pass");
    let (a, b) = (dir.join("a.log"), dir.join("b.log"));
    log(
        &a,
        &[
            (1, AccessMode::Write, 0, 10, 5),
            (3, AccessMode::Write, 20, 30, 9),
        ],
    );
    log(
        &b,
        &[
            (2, AccessMode::Write, 10, 20, 7),
            (4, AccessMode::Read, 30, 40, 11),
        ],
    );
    let (code, text) = check(&[&a, &b]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(
            "2 logs, 4 sessions, 4 controlling spans (4 with fencing tokens): 0 violations"
        ),
        "{text}"
    );
}

#[test]
fn an_overlap_across_nodes_and_a_stale_token_are_found() {
    let dir = scratch("fail");
    let (a, b) = (dir.join("a.log"), dir.join("b.log"));
    log(&a, &[(1, AccessMode::Write, 0, 10, 5)]);
    log(
        &b,
        &[
            (2, AccessMode::Execute, 9, 20, 6),
            (3, AccessMode::Write, 20, 30, 4),
        ],
    );
    let (code, text) = check(&[&a, &b]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("were active at once"), "{text}");
    assert!(text.contains("fencing token 4 ≤ 6"), "{text}");
    assert!(text.contains(": 2 violations"), "{text}");
}

#[test]
fn a_file_that_is_not_an_audit_log_is_a_one_line_error() {
    let dir = scratch("bad");
    let bad = dir.join("bad.log");
    std::fs::write(&bad, "not json\n").unwrap();
    let (code, text) = check(&[&bad]);
    assert_eq!(code, 2, "{text}");
    assert!(text.starts_with("error: BAD_AUDIT_LOG "), "{text}");
    assert_eq!(text.trim_end().lines().count(), 1, "{text}");
}
