//! Reading one log file back: every complete record in order, the torn tail
//! reported rather than failed on (SPEC TS-12, HO-10).

use std::io::BufRead;
use std::marker::PhantomData;
use std::path::PathBuf;

use serde::de::DeserializeOwned;

use crate::{AuditError, Envelope};

/// SPEC HO-10, TS-12: everything one file of the log holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadOutcome<T> {
    /// The complete records, in file order.
    pub records: Vec<Envelope<T>>,
    /// The bytes after the last newline, if any: a record whose write never
    /// finished (a crash mid-append), which no caller was told was logged.
    pub torn_tail: Option<Vec<u8>>,
}

/// SPEC HO-10, TS-12: an iterator over the records of one log file (any
/// `BufRead`: the runtime's `dtp_gateway::plane::open_audit_file` opens a
/// file), `T` being the record type (`serde_json::Value` by default).
///
/// A newline-terminated line that does not parse is [`AuditError::Corrupt`]
/// with its line number, and a `seq` that does not follow its predecessor is
/// [`AuditError::SeqGap`]; the iterator ends after either. An unterminated
/// last line ends the iteration quietly and is kept in [`Self::torn_tail`].
#[derive(Debug)]
pub struct AuditReader<R, T = serde_json::Value> {
    reader: R,
    /// Named in I/O errors.
    path: PathBuf,
    line: u64,
    next_seq: Option<u64>,
    torn_tail: Option<Vec<u8>>,
    done: bool,
    record: PhantomData<fn() -> T>,
}

impl<R: BufRead, T: DeserializeOwned> AuditReader<R, T> {
    /// Reads records from `reader`, which must start at the start of a line.
    pub fn new(reader: R) -> Self {
        Self::with_path(reader, PathBuf::from("<reader>"))
    }

    /// Reads records from `reader`, the file at `path` (named in I/O errors).
    pub fn with_path(reader: R, path: PathBuf) -> Self {
        Self {
            reader,
            path,
            line: 0,
            next_seq: None,
            torn_tail: None,
            done: false,
            record: PhantomData,
        }
    }

    /// The incomplete last line, once the iterator has reached it.
    pub fn torn_tail(&self) -> Option<&[u8]> {
        self.torn_tail.as_deref()
    }

    /// Reads every remaining record; fails only on a corrupt or out-of-order
    /// complete line or an I/O error.
    pub fn read_to_end(mut self) -> Result<ReadOutcome<T>, AuditError> {
        let records = self.by_ref().collect::<Result<Vec<_>, _>>()?;
        Ok(ReadOutcome {
            records,
            torn_tail: self.torn_tail,
        })
    }

    fn read_record(&mut self) -> Result<Option<Envelope<T>>, AuditError> {
        let mut buf = Vec::new();
        self.reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| AuditError::Io {
                action: "read",
                path: self.path.clone(),
                source,
            })?;
        if buf.is_empty() {
            return Ok(None);
        }
        if buf.last() != Some(&b'\n') {
            self.torn_tail = Some(buf);
            return Ok(None);
        }
        buf.pop();
        self.line += 1;
        let line = self.line;
        let envelope: Envelope<T> =
            serde_json::from_slice(&buf).map_err(|source| AuditError::Corrupt { line, source })?;
        if let Some(expected) = self.next_seq.filter(|&e| e != envelope.seq) {
            return Err(AuditError::SeqGap {
                line,
                expected,
                found: envelope.seq,
            });
        }
        self.next_seq = envelope.seq.checked_add(1);
        Ok(Some(envelope))
    }
}

impl<R: BufRead, T: DeserializeOwned> Iterator for AuditReader<R, T> {
    type Item = Result<Envelope<T>, AuditError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.read_record().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}
