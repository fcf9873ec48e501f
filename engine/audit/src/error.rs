//! The one error type of the crate.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong writing or reading the audit log
/// (SPEC TS-12, TS-14, HO-10).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file system refused an operation; `action` says which.
    #[error("audit log {}: {action} failed: {source}", path.display())]
    Io {
        /// What the writer or reader was doing (`"open"`, `"write"`, `"fdatasync"`, …).
        action: &'static str,
        /// The file it was doing it to.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Another writer holds the log's advisory lock: stop it first, one writer per log.
    #[error("audit log {} is locked by another writer; only one writer may append", path.display())]
    Locked {
        /// The log file.
        path: PathBuf,
    },
    /// A newline-terminated line is not a valid record envelope. Only the
    /// unterminated last line may be incomplete; this one is damage.
    #[error("audit log line {line} is not a valid record: {source}")]
    Corrupt {
        /// 1-based line number within the file.
        line: u64,
        /// What the JSON parser found.
        source: serde_json::Error,
    },
    /// Records of one file must carry consecutive `seq`s; a gap means lines
    /// were removed or the file was edited.
    #[error("audit log line {line}: expected seq {expected}, found {found}")]
    SeqGap {
        /// 1-based line number within the file.
        line: u64,
        /// The seq that should have followed the previous line.
        expected: u64,
        /// The seq the line carries.
        found: u64,
    },
    /// The record has no JSON form (e.g. a map with non-string keys). Nothing was written.
    #[error("the record cannot be written as JSON: {0}")]
    Serialize(serde_json::Error),
    /// The serialised record contained a raw newline (possible only through
    /// raw JSON values). Nothing was written.
    #[error("the serialised record contains a raw newline; records must be one line")]
    Newline,
    /// An earlier I/O error left the file in an unknown state; reopen the
    /// log, which repairs its tail.
    #[error("audit log writer is poisoned by an earlier I/O error; reopen it")]
    Poisoned,
}
