//! The audit log end to end on real files (SPEC TS-12, TS-14, HO-10): the
//! plane's writer and file reader (`dtp_gateway::plane`) over `dtp_audit`'s
//! format.
#![allow(clippy::unwrap_used, reason = "tests")]

use std::fs;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use dtp_codec::{
    ControlMessage, HandoverFailedNotification, HandoverFailedReason, SessionState,
    SessionStateChanged,
};
use serde_json::{Value, json};
use uuid::Uuid;

use dtp_audit::{AuditConfig, AuditError, Envelope, Fsync, ReadOutcome, Rotation, rotated_path};
use dtp_gateway::plane::{AuditLog, open_audit_file};

/// A scratch directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dtp-audit-{name}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn log(&self) -> PathBuf {
        self.0.join("audit.jsonl")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn read(path: &Path) -> Result<ReadOutcome<Value>, AuditError> {
    open_audit_file(path)?.read_to_end()
}

fn seqs(path: &Path) -> Vec<u64> {
    read(path).unwrap().records.iter().map(|r| r.seq).collect()
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut content = fs::read(path).unwrap();
    content.extend_from_slice(bytes);
    fs::write(path, content).unwrap();
}

fn terminated(session_id: Uuid) -> ControlMessage {
    ControlMessage::SessionStateChanged(SessionStateChanged {
        session_id,
        new_state: SessionState::Terminated,
        reason: Some("liveness_timeout".into()),
        details: Default::default(),
    })
}

#[test]
fn control_messages_round_trip_with_seq_and_time() {
    let dir = Scratch::new("round-trip");
    let failed = ControlMessage::HandoverFailedNotification(HandoverFailedNotification {
        handover_id: Uuid::new_v4(),
        source_session_id: Uuid::new_v4(),
        target_fay_id: "human:terminal-7".into(),
        reason: HandoverFailedReason::PolicyRejected,
        details: [("policy".to_string(), "priority_script".to_string())].into(),
    });
    let records = vec![terminated(Uuid::new_v4()), failed];
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    assert_eq!(log.append(1_000, &records[0]).unwrap(), 1);
    assert_eq!(log.append(1_005, &records[1]).unwrap(), 2);
    drop(log);

    let typed = open_audit_file::<ControlMessage>(dir.log())
        .unwrap()
        .read_to_end()
        .unwrap();
    let expected: Vec<_> = records
        .into_iter()
        .zip([(1, 1_000), (2, 1_005)])
        .map(|(record, (seq, at_unix_ms))| Envelope {
            seq,
            at_unix_ms,
            record,
        })
        .collect();
    assert_eq!(
        typed,
        ReadOutcome {
            records: expected,
            torn_tail: None
        }
    );
    // The documented envelope, as an operator's jq sees it.
    let first: Value = serde_json::from_str(
        fs::read_to_string(dir.log())
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["at_unix_ms"], 1_000);
    assert_eq!(first["record"]["type"], "session_state_changed");
}

#[test]
fn seq_continues_after_reopen() {
    let dir = Scratch::new("reopen");
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    log.append(1, &"a").unwrap();
    log.append(2, &"b").unwrap();
    drop(log);
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    assert_eq!((log.next_seq(), log.durable_seq()), (3, Some(2)));
    assert_eq!(log.append(3, &"c").unwrap(), 3);
    assert_eq!(seqs(&dir.log()), [1, 2, 3]);
}

/// Writes two records, then `torn` by hand, and checks reader and writer.
fn torn_tail_is_skipped_then_moved_aside(name: &str, torn: &[u8]) {
    let dir = Scratch::new(name);
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    log.append(1, &json!({"kind": "termination"})).unwrap();
    log.append(2, &json!({"kind": "handover"})).unwrap();
    drop(log);
    append_bytes(&dir.log(), torn);

    let outcome = read(&dir.log()).unwrap();
    assert_eq!(outcome.records.len(), 2);
    assert_eq!(outcome.torn_tail.as_deref(), Some(torn));

    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    assert_eq!(log.repaired_tail_bytes(), torn.len() as u64);
    assert_eq!(log.append(3, &json!({"kind": "after"})).unwrap(), 3);
    let outcome = read(&dir.log()).unwrap();
    assert_eq!(outcome.torn_tail, None);
    assert_eq!(
        outcome.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(outcome.records[2].record, json!({"kind": "after"}));
    let mut saved = torn.to_vec();
    saved.push(b'\n');
    assert_eq!(fs::read(dir.0.join("audit.jsonl.torn")).unwrap(), saved);
}

#[test]
fn half_written_line_is_torn() {
    torn_tail_is_skipped_then_moved_aside("half", br#"{"seq":3,"at_unix_ms":3,"rec"#);
}

#[test]
fn line_missing_only_its_newline_is_torn() {
    torn_tail_is_skipped_then_moved_aside("no-newline", br#"{"seq":3,"at_unix_ms":3,"record":1}"#);
}

#[test]
fn corrupt_complete_line_is_an_error_with_its_line_number() {
    let dir = Scratch::new("corrupt");
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    log.append(1, &1).unwrap();
    drop(log);
    append_bytes(&dir.log(), b"{\"seq\":2,garbage}\n");
    // The writer refuses to guess the next seq past a damaged last record.
    let err = AuditLog::open(dir.log(), AuditConfig::default()).unwrap_err();
    assert!(
        matches!(err, AuditError::Corrupt { line: 2, .. }),
        "{err:?}"
    );

    append_bytes(&dir.log(), b"{\"seq\":3,\"at_unix_ms\":3,\"record\":3}\n");
    let mut reader = open_audit_file::<Value>(dir.log()).unwrap();
    assert_eq!(reader.next().unwrap().unwrap().seq, 1);
    assert!(matches!(
        reader.next(),
        Some(Err(AuditError::Corrupt { line: 2, .. }))
    ));
    assert!(reader.next().is_none(), "the reader stops after damage");
    assert!(err.to_string().contains("line 2"));
}

#[test]
fn seq_gap_is_an_error() {
    let dir = Scratch::new("gap");
    fs::write(
        dir.log(),
        "{\"seq\":5,\"at_unix_ms\":0,\"record\":null}\n{\"seq\":7,\"at_unix_ms\":0,\"record\":null}\n",
    )
    .unwrap();
    let err = read(&dir.log()).unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::SeqGap {
                line: 2,
                expected: 6,
                found: 7
            }
        ),
        "{err:?}"
    );
}

#[test]
fn newlines_and_unicode_stay_on_one_line() {
    let dir = Scratch::new("unicode");
    let texts = [
        "line one\nline two",
        "crlf\r\n",
        "\u{2028}\u{2029}",
        "Übergabe 控制 🚀",
        "\"quoted\"\\",
    ];
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    for (i, text) in texts.iter().enumerate() {
        log.append(i as u64, &json!({ "reason": text })).unwrap();
    }
    drop(log);
    assert_eq!(
        fs::read_to_string(dir.log()).unwrap().matches('\n').count(),
        texts.len()
    );
    let back: Vec<_> = read(&dir.log())
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.record["reason"].clone())
        .collect();
    assert_eq!(back, texts.map(|t| json!(t)));
}

#[test]
fn rotation_keeps_k_files_and_seq_continues() {
    let dir = Scratch::new("rotation");
    let record = "x".repeat(10);
    let envelope = Envelope {
        seq: 1,
        at_unix_ms: 0,
        record: record.clone(),
    };
    let line_len = serde_json::to_vec(&envelope).unwrap().len() as u64 + 1;
    let config = AuditConfig {
        fsync: Fsync::EveryRecord,
        rotation: Some(Rotation {
            max_bytes: NonZeroU64::new(2 * line_len).unwrap(),
            keep: NonZeroUsize::new(2).unwrap(),
        }),
    };
    let mut log = AuditLog::open(dir.log(), config).unwrap();
    for _ in 0..7 {
        log.append(0, &record).unwrap();
    }
    drop(log);
    // Seven records, two per file: 1–2 dropped, 3–4 in .2, 5–6 in .1, 7 current.
    assert_eq!(seqs(&rotated_path(&dir.log(), 2)), [3, 4]);
    assert_eq!(seqs(&rotated_path(&dir.log(), 1)), [5, 6]);
    assert_eq!(seqs(&dir.log()), [7]);
    assert!(!rotated_path(&dir.log(), 3).exists());

    // A crash right after a rotation leaves no current file: seq comes from .1.
    fs::remove_file(dir.log()).unwrap();
    let mut log = AuditLog::open(dir.log(), config).unwrap();
    assert_eq!(log.append(0, &"y").unwrap(), 7);
}

#[test]
fn interval_syncs_at_most_every_n_ms_of_the_callers_clock() {
    let dir = Scratch::new("interval");
    let config = AuditConfig {
        fsync: Fsync::Interval(100),
        rotation: None,
    };
    let mut log = AuditLog::open(dir.log(), config).unwrap();
    assert_eq!(log.sync_deadline(), None);
    log.append(1_000, &1).unwrap();
    assert_eq!(
        (log.durable_seq(), log.sync_deadline()),
        (None, Some(1_100))
    );
    log.append(1_099, &2).unwrap();
    assert_eq!(log.durable_seq(), None, "not yet due");
    log.append(1_100, &3).unwrap();
    assert_eq!((log.durable_seq(), log.sync_deadline()), (Some(3), None));

    log.append(1_150, &4).unwrap();
    log.handle_timeout(1_249).unwrap();
    assert_eq!(log.durable_seq(), Some(3));
    log.handle_timeout(1_250).unwrap();
    assert_eq!((log.durable_seq(), log.sync_deadline()), (Some(4), None));

    // The clock steps back: the deadline is re-based, not lost.
    log.append(2_000, &5).unwrap();
    log.append(1_500, &6).unwrap();
    assert_eq!(log.sync_deadline(), Some(1_600));
    log.flush().unwrap();
    assert_eq!((log.durable_seq(), log.sync_deadline()), (Some(6), None));
}

#[test]
fn every_record_and_never_policies() {
    let dir = Scratch::new("policies");
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    log.append(0, &1).unwrap();
    assert_eq!(log.durable_seq(), Some(1));
    drop(log);
    let never = AuditConfig {
        fsync: Fsync::Never,
        rotation: None,
    };
    let mut log = AuditLog::open(dir.log(), never).unwrap();
    log.append(0, &2).unwrap();
    log.handle_timeout(u64::MAX).unwrap();
    assert_eq!((log.durable_seq(), log.sync_deadline()), (None, None));
    log.flush().unwrap();
    assert_eq!(log.durable_seq(), Some(2));
}

#[test]
fn unserialisable_record_writes_nothing_and_uses_no_seq() {
    let dir = Scratch::new("unserialisable");
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    let bad = std::collections::BTreeMap::from([((1, 2), 3)]);
    assert!(matches!(log.append(0, &bad), Err(AuditError::Serialize(_))));
    assert_eq!(log.append(0, &"good").unwrap(), 1);
    assert_eq!(seqs(&dir.log()), [1]);
}

#[test]
fn second_writer_is_refused() {
    let dir = Scratch::new("lock");
    let _first = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    let err = AuditLog::open(dir.log(), AuditConfig::default()).unwrap_err();
    assert!(matches!(err, AuditError::Locked { .. }), "{err:?}");
}

#[test]
fn missing_directory_and_file_are_io_errors() {
    let dir = Scratch::new("missing");
    let err = AuditLog::open(
        dir.0.join("no/such/dir/audit.jsonl"),
        AuditConfig::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, AuditError::Io { action: "open", .. }),
        "{err:?}"
    );
    assert!(matches!(
        read(&dir.log()),
        Err(AuditError::Io {
            action: "open for reading",
            ..
        })
    ));
}

#[test]
fn empty_file_reads_as_no_records() {
    let dir = Scratch::new("empty");
    fs::write(dir.log(), b"").unwrap();
    assert_eq!(
        read(&dir.log()).unwrap(),
        ReadOutcome {
            records: vec![],
            torn_tail: None
        }
    );
}

/// A full disk: the failed write poisons the writer until it is reopened.
#[cfg(target_os = "linux")]
#[test]
fn write_error_poisons_the_writer() {
    let mut log = AuditLog::open(
        "/dev/full",
        AuditConfig {
            fsync: Fsync::Never,
            rotation: None,
        },
    )
    .unwrap();
    let err = log.append(0, &"lost").unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::Io {
                action: "write",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(log.append(0, &"next"), Err(AuditError::Poisoned)));
    assert!(matches!(log.flush(), Err(AuditError::Poisoned)));
    assert!(matches!(log.handle_timeout(0), Err(AuditError::Poisoned)));
}

#[test]
fn failed_rotation_poisons_the_writer() {
    let dir = Scratch::new("rotation-fails");
    let config = AuditConfig {
        fsync: Fsync::EveryRecord,
        rotation: Some(Rotation {
            max_bytes: NonZeroU64::new(1).unwrap(),
            keep: NonZeroUsize::new(2).unwrap(),
        }),
    };
    let mut log = AuditLog::open(dir.log(), config).unwrap();
    log.append(0, &1).unwrap();
    log.append(0, &2).unwrap();
    // `.1` cannot be shifted onto a non-empty directory named `.2`.
    fs::create_dir_all(rotated_path(&dir.log(), 2).join("blocker")).unwrap();
    let err = log.append(0, &3).unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::Io {
                action: "rotate",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(matches!(log.append(0, &4), Err(AuditError::Poisoned)));
}

#[test]
fn torn_tail_that_cannot_be_saved_is_left_in_place() {
    let dir = Scratch::new("torn-unsaved");
    fs::write(
        dir.log(),
        b"{\"seq\":1,\"at_unix_ms\":0,\"record\":1}\n{\"seq\":2,",
    )
    .unwrap();
    fs::create_dir(dir.0.join("audit.jsonl.torn")).unwrap();
    let err = AuditLog::open(dir.log(), AuditConfig::default()).unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::Io {
                action: "save torn tail to",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        read(&dir.log()).unwrap().torn_tail.as_deref(),
        Some(&b"{\"seq\":2,"[..])
    );
}

#[test]
fn unreadable_input_is_an_io_error() {
    let dir = Scratch::new("unreadable");
    // Opening a directory succeeds on Unix; reading it does not.
    let mut reader = open_audit_file::<Value>(&dir.0).unwrap();
    assert!(matches!(
        reader.next(),
        Some(Err(AuditError::Io { action: "read", .. }))
    ));
    assert!(reader.next().is_none());
}

/// Everything logged (at any level) while `f` runs on this thread.
fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    use std::sync::{Arc, Mutex};
    let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || Capture(sink.clone()))
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    (out, text)
}

struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A torn-tail repair is never silent: a warning names the bytes dropped.
#[test]
fn a_torn_tail_repair_is_logged_with_the_bytes_dropped() {
    let dir = Scratch::new("torn-logged");
    let mut log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    log.append(1, &1).unwrap();
    drop(log);
    let torn = br#"{"seq":2,"at_un"#;
    append_bytes(&dir.log(), torn);
    let (log, text) = logged(|| AuditLog::open(dir.log(), AuditConfig::default()).unwrap());
    assert_eq!(log.repaired_tail_bytes(), torn.len() as u64);
    assert!(text.contains("WARN"), "{text}");
    assert!(
        text.contains(&format!("dropped {} bytes", torn.len())),
        "{text}"
    );
    // A clean open says nothing.
    drop(log);
    let (_, text) = logged(|| AuditLog::open(dir.log(), AuditConfig::default()).unwrap());
    assert!(!text.contains("dropped"), "{text}");
}

/// SPEC TS-14: open checks the whole current file, not only its end: a
/// damaged or missing record in the middle refuses the log.
#[test]
fn open_checks_the_whole_chain() {
    let line = |seq: u64| format!("{{\"seq\":{seq},\"at_unix_ms\":0,\"record\":null}}\n");
    let dir = Scratch::new("chain-gap");
    fs::write(dir.log(), [line(1), line(2), line(4), line(5)].concat()).unwrap();
    let err = AuditLog::open(dir.log(), AuditConfig::default()).unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::SeqGap {
                line: 3,
                expected: 3,
                found: 4
            }
        ),
        "{err:?}"
    );
    let dir = Scratch::new("chain-corrupt");
    let body = [line(1), "{\"seq\":2,oops}\n".to_owned(), line(3)].concat();
    fs::write(dir.log(), body).unwrap();
    let err = AuditLog::open(dir.log(), AuditConfig::default()).unwrap_err();
    assert!(
        matches!(err, AuditError::Corrupt { line: 2, .. }),
        "{err:?}"
    );
    // Whole and consecutive: opens and continues.
    let dir = Scratch::new("chain-ok");
    fs::write(dir.log(), [line(7), line(8)].concat()).unwrap();
    let log = AuditLog::open(dir.log(), AuditConfig::default()).unwrap();
    assert_eq!(log.next_seq(), 9);
}

/// The current file's first record follows the last one of `<name>.1`.
#[test]
fn open_checks_the_link_to_the_rotated_file() {
    let line = |seq: u64| format!("{{\"seq\":{seq},\"at_unix_ms\":0,\"record\":null}}\n");
    let dir = Scratch::new("chain-link");
    fs::write(rotated_path(&dir.log(), 1), [line(1), line(2)].concat()).unwrap();
    fs::write(dir.log(), line(5)).unwrap();
    let err = AuditLog::open(dir.log(), AuditConfig::default()).unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::SeqGap {
                expected: 3,
                found: 5,
                ..
            }
        ),
        "{err:?}"
    );
    fs::write(dir.log(), line(3)).unwrap();
    assert_eq!(
        AuditLog::open(dir.log(), AuditConfig::default())
            .unwrap()
            .next_seq(),
        4
    );
}
