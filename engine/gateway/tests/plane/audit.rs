//! DESIGN §3, SPEC TS-12: the audit log is written by its own thread — a
//! disk that stops never stops the control thread — and a torn tail the
//! log repairs at start is counted.

use dtp_codec::{AuthOutcome, ControlMessage, SessionRelease};
use dtp_gateway::plane::FsyncPolicy;

use super::model::closed_port;
use super::rig::{Rig, audit_at, auth_result, config, scratch};

#[test]
fn a_torn_tail_repaired_at_start_is_counted() {
    let dir = scratch("audit-torn");
    let path = dir.join("audit.jsonl");
    let torn = br#"{"seq":1,"at_unix_ms":5,"rec"#;
    std::fs::write(&path, torn).unwrap();
    let mut cfg = config(closed_port());
    cfg.audit = Some(audit_at(path.clone()));
    let rig = Rig::new(cfg);
    let m = rig.plane.metrics();
    assert_eq!(
        (m.audit_torn_repairs, m.audit_torn_bytes),
        (1, torn.len() as u64)
    );
    assert!(
        std::fs::read(dir.join("audit.jsonl.torn"))
            .unwrap()
            .starts_with(torn)
    );
    drop(rig);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The log is a FIFO nobody reads: once its pipe buffer is full the audit
/// thread blocks in `write` for good. Sessions keep being granted and
/// ended (each one audited) long past that point.
#[test]
fn a_stuck_audit_disk_never_stops_decisions() {
    let dir = scratch("audit-stuck");
    let path = dir.join("audit.fifo");
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let mut cfg = config(closed_port());
    let mut audit = audit_at(path);
    audit.fsync = FsyncPolicy::Never;
    cfg.audit = Some(audit);
    let mut rig = Rig::new(cfg);
    rig.up(0, 1);
    // Each cycle writes one ~300-byte record: 600 of them are well past a
    // 64 KiB pipe buffer.
    for i in 0..600 {
        let (id, out) = rig.auth(0, 1, "fay-a", "lamp");
        let Some(AuthOutcome::Granted { session_id }) = auth_result(&out, 0, 1, id) else {
            panic!("cycle {i}: {out:?}");
        };
        let release = ControlMessage::SessionRelease(SessionRelease { session_id });
        rig.send(0, 1, release);
    }
    assert!(rig.plane.metrics().audit_records < 600);
    let _ = std::fs::remove_dir_all(&dir);
}
