//! The terminal's append-only audit log (SPEC TS-12, TS-14, HO-10): a full
//! record of every handover and every session termination, one JSON object
//! per line, so that `jq`, `grep` and `tail -f` work on it as they are.
//!
//! This crate is the sans-IO half: the format ([`Envelope`],
//! [`encode_line`]), the configuration ([`AuditConfig`]), the errors, the
//! file names ([`rotated_path`], [`torn_path`]), the tail scan that finds the
//! last complete record ([`scan_tail`]) and the reader ([`AuditReader`]),
//! the last two over any reader they are given. It opens no file (its
//! `clippy.toml` enforces it). The writer that owns the files — appends,
//! fsyncs, rotates, locks, repairs — is `dtp_gateway::plane::AuditLog`, and
//! `dtp_gateway::plane::open_audit_file` opens a file for [`AuditReader`];
//! "the writer" below is that one.
//!
//! The crate is generic over the record: the terminal and handover machines
//! define what they log (HO-10 asks for handover_id, source, target, policy
//! decision and outcome; TS-12 for the session, its reason and state) and
//! the writer's `append` takes it with the time of the event. The writer
//! reads no clock.
//!
//! # Record envelope
//!
//! Every line is exactly one envelope, compact JSON, terminated by `\n`:
//!
//! ```text
//! {"seq":42,"at_unix_ms":1767225600000,"record":{"kind":"handover","handover_id":"…"}}
//! ```
//!
//! - `seq` (u64): 1 for the first record ever, +1 per record. It continues
//!   after a reopen and across rotation; within one file it has no gaps (the
//!   reader checks). A seq can be reused only by a record replacing a torn one
//!   that no caller was told was logged.
//! - `at_unix_ms` (u64): the caller's time of the event, milliseconds since
//!   the Unix epoch; not an ordering authority (`seq` is).
//! - `record`: the caller's record as serde writes it. Newlines inside strings
//!   are escaped by JSON, so a record never spans lines.
//!
//! For operators: `jq -c 'select(.record.kind == "handover")' audit.jsonl`;
//! the rotated files in order are `audit.jsonl.<keep>` … `audit.jsonl.1`,
//! then `audit.jsonl`. A line without its final newline is a torn record
//! (see below); `jq -R 'fromjson? // empty'` reads past one.
//!
//! # Durability
//!
//! Every record is written with one `write_all` of one buffer to a file
//! opened `O_APPEND`, so once `append` returns `Ok` the whole line is in the
//! OS. What survives a crash:
//!
//! | policy | process crash | power loss / kernel crash |
//! |---|---|---|
//! | [`Fsync::EveryRecord`] (default) | every record whose `append` returned `Ok` | the same: `fdatasync` ran before `append` returned |
//! | [`Fsync::Interval`]`(ms)` | every record whose `append` returned `Ok` | every record up to the writer's `durable_seq()`; later ones (at most `ms` of the caller's time, if the driver honours its `sync_deadline()`) may be lost |
//! | [`Fsync::Never`] | every record whose `append` returned `Ok` | whatever the OS had written back (Linux: typically up to 30 s of records may be lost), plus up to the writer's `durable_seq()` after a `flush()` |
//!
//! In every case a crash inside `append` can leave a torn last line; a
//! record is either whole on its line or not logged at all. New files and
//! renames are made durable by syncing the directory (except under `Never`).
//! Any I/O error poisons the writer ([`AuditError::Poisoned`]): after a
//! failed `fdatasync` the page cache can no longer be trusted, so the log
//! must be reopened, which re-reads and repairs it.
//!
//! # Torn records
//!
//! A line without its trailing newline was never completely written. The
//! reader ([`AuditReader`]) skips it and reports its bytes
//! ([`ReadOutcome::torn_tail`]). The writer's `open` moves it aside: the
//! bytes are appended to `<name>.torn` (and synced) and only then truncated
//! from the log, so the next record starts on its own line and no evidence is
//! destroyed. A complete line that does not parse, anywhere in the file, is
//! damage and an error with its line number ([`AuditError::Corrupt`]).
//!
//! # Rotation
//!
//! With [`Rotation`], the file is renamed `<name>.1` before a record would
//! take it past `max_bytes`; `<name>.<n>` shifts to `<name>.<n+1>` and at
//! most `keep` rotated files remain. `seq` continues across rotation.
//!
//! # One writer
//!
//! The writer takes `&mut self` and is meant to live on the control thread,
//! which serialises every decision that is logged (DESIGN.md §1). Concurrent
//! appends are not supported; an advisory lock on the file refuses a second
//! writer ([`AuditError::Locked`]). Readers may read while it writes: they
//! see a partly written last line as a torn tail.
#![forbid(unsafe_code)]

mod config;
mod envelope;
mod error;
pub mod history;
mod reader;
mod tail;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use config::{AuditConfig, Fsync, Rotation};
pub use envelope::{Envelope, encode_line};
pub use error::AuditError;
pub use reader::{AuditReader, ReadOutcome};
pub use tail::{Tail, line_number_at, scan_tail};

/// SPEC TS-12, HO-10: the path of the `n`-th most recent rotated file of the
/// log at `path` (`<name>.<n>`, n ≥ 1), for tools that read the whole history.
pub fn rotated_path(path: &Path, n: usize) -> PathBuf {
    suffixed(path, &n.to_string())
}

/// SPEC TS-14: where the writer saves a torn last line of the log at `path`
/// before it truncates it (`<name>.torn`).
pub fn torn_path(path: &Path) -> PathBuf {
    suffixed(path, "torn")
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}
