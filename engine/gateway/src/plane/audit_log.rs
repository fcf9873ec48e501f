//! SPEC TS-12, TS-14, HO-10: the file half of the audit log — the single
//! writer ([`AuditLog`]: one line per record, appended with one `write_all`
//! to an `O_APPEND` file; checks the current file's whole chain of records
//! and repairs a torn tail, loudly, when it opens) and
//! [`open_audit_file`] for the reader. The format, the configuration, the
//! tail scan and the reader are sans-IO in `dtp_audit`, whose docs give the
//! durability, torn-record and rotation rules this file keeps.
//!
//! This is IO (files, `fdatasync`, renames, an advisory lock) on the thread
//! that owns the writer — the plane's audit thread (module `audit`), never
//! the control thread. It never reads a clock: time comes in with every
//! call.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use dtp_audit::{
    AuditConfig, AuditError, AuditReader, Envelope, Fsync, Tail, encode_line, line_number_at,
    rotated_path, scan_tail, torn_path,
};
use serde::Serialize;
use serde::de::{DeserializeOwned, IgnoredAny};

/// SPEC HO-10, TS-12: opens one file of the log (the current one or a
/// rotated `<name>.<n>`) for reading.
pub fn open_audit_file<T: DeserializeOwned>(
    path: impl AsRef<Path>,
) -> Result<AuditReader<BufReader<File>, T>, AuditError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|source| AuditError::Io {
        action: "open for reading",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(AuditReader::with_path(
        BufReader::new(file),
        path.to_path_buf(),
    ))
}

/// SPEC TS-12, TS-14, HO-10: the append-only audit log writer. It takes
/// `&mut self` everywhere: one writer, the control thread; an advisory file
/// lock keeps a second process from opening the same log.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: File,
    config: AuditConfig,
    /// Bytes in the current file; all of them complete lines.
    len: u64,
    next_seq: u64,
    /// The caller's time of the oldest record not yet synced.
    dirty_since: Option<u64>,
    durable_seq: Option<u64>,
    repaired_tail_bytes: u64,
    /// Set by any I/O error: the file's state is then unknown until reopened.
    poisoned: bool,
}

impl AuditLog {
    /// Opens (or creates) the log at `path`, takes its lock, moves a torn
    /// last line aside to `<name>.torn` (logged as a warning naming the
    /// bytes dropped, and reported by [`Self::repaired_tail_bytes`]), checks
    /// the chain, and finds the next `seq` from the last complete record
    /// (of `<name>.1` if the current file has none).
    ///
    /// **The chain check** reads the whole current file: every complete
    /// line must parse ([`AuditError::Corrupt`]) and carry the `seq` after
    /// its predecessor's ([`AuditError::SeqGap`]), and its first record must
    /// follow the last one of `<name>.1`. A damaged log is refused rather
    /// than appended to. The current file is the only one this writer ever
    /// appends to, and its size is bounded by rotation's `max_bytes`;
    /// rotated files are never written again, so they were checked while
    /// they were current (only `<name>.1`'s last record is read, for the
    /// link). An operator checks an old file with `open_audit_file`.
    pub fn open(path: impl Into<PathBuf>, config: AuditConfig) -> Result<Self, AuditError> {
        let path = path.into();
        let created = !path.try_exists().map_err(io_error("stat", &path))?;
        let file = open_append(&path).map_err(io_error("open", &path))?;
        lock(&file, &path)?;
        let len = file.metadata().map_err(io_error("stat", &path))?.len();
        let tail = scan_tail(&file, len).map_err(io_error("read", &path))?;
        if !tail.torn.is_empty() {
            move_torn_aside(&path, &file, &tail)?;
            tracing::warn!(
                path = %path.display(),
                bytes = tail.torn.len(),
                "audit log: dropped {} bytes of a torn last record (a crash mid-append); saved to {}",
                tail.torn.len(),
                torn_path(&path).display()
            );
        }
        let chain = check_chain(&file, tail.complete_len, &path)?;
        let rotated = last_seq_of_rotated(&rotated_path(&path, 1))?;
        if let (Some((first, _)), Some(before)) = (chain, rotated)
            && first != before.saturating_add(1)
        {
            return Err(AuditError::SeqGap {
                line: 1,
                expected: before.saturating_add(1),
                found: first,
            });
        }
        let last_seq = chain.map(|(_, last)| last).or(rotated);
        let syncs = config.fsync != Fsync::Never;
        if syncs {
            // Records a crashed predecessor wrote but never synced become durable now.
            file.sync_data().map_err(io_error("fdatasync", &path))?;
            if created {
                sync_dir(&path).map_err(io_error("fsync directory of", &path))?;
            }
        }
        Ok(Self {
            len: tail.complete_len,
            next_seq: last_seq.map_or(1, |seq| seq.saturating_add(1)),
            durable_seq: last_seq.filter(|_| syncs),
            dirty_since: None,
            repaired_tail_bytes: tail.torn.len() as u64,
            poisoned: false,
            path,
            file,
            config,
        })
    }

    /// Appends one record at the caller's time `at_unix_ms` and returns its
    /// `seq`. `Ok` means the whole line reached the OS (and the disk, under
    /// [`Fsync::EveryRecord`]). After an I/O error the record may or may not
    /// be in the log and the writer is poisoned; a serialisation error writes
    /// nothing and changes nothing.
    pub fn append<T: Serialize>(&mut self, at_unix_ms: u64, record: &T) -> Result<u64, AuditError> {
        self.ensure_healthy()?;
        let seq = self.next_seq;
        let line = encode_line(seq, at_unix_ms, record)?;
        if let Some(rotation) = self.config.rotation
            && self.len > 0
            && self.len.saturating_add(line.len() as u64) > rotation.max_bytes.get()
        {
            self.rotate(rotation.keep)?;
        }
        // One buffer, one write_all, O_APPEND: the line lands whole at the end
        // or, if the process dies inside the call, as a torn tail.
        let written = self.file.write_all(&line);
        self.check("write", written)?;
        self.len += line.len() as u64;
        self.next_seq = seq.saturating_add(1);
        // `min` re-bases the interval if the caller's clock stepped back.
        self.dirty_since = Some(self.dirty_since.map_or(at_unix_ms, |d| d.min(at_unix_ms)));
        match self.config.fsync {
            Fsync::EveryRecord => self.sync()?,
            Fsync::Interval(_) => self.handle_timeout(at_unix_ms)?,
            Fsync::Never => {}
        }
        Ok(seq)
    }

    /// Under [`Fsync::Interval`], when the driver should call
    /// [`Self::handle_timeout`]: unsynced records never wait longer than that.
    pub fn sync_deadline(&self) -> Option<u64> {
        match self.config.fsync {
            Fsync::Interval(ms) => self.dirty_since.map(|d| d.saturating_add(ms)),
            Fsync::EveryRecord | Fsync::Never => None,
        }
    }

    /// Syncs if the [`Self::sync_deadline`] has passed at `now_unix_ms`.
    pub fn handle_timeout(&mut self, now_unix_ms: u64) -> Result<(), AuditError> {
        self.ensure_healthy()?;
        match self.sync_deadline() {
            Some(deadline) if now_unix_ms >= deadline => self.sync(),
            _ => Ok(()),
        }
    }

    /// Makes every record appended so far durable, whatever the policy
    /// (under [`Fsync::Never`], only the current file's).
    pub fn flush(&mut self) -> Result<(), AuditError> {
        self.ensure_healthy()?;
        if self.dirty_since.is_some() {
            self.sync()
        } else {
            Ok(())
        }
    }

    /// The `seq` the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The highest `seq` this writer has seen reach the disk (`None` before
    /// its first sync under [`Fsync::Never`]).
    pub fn durable_seq(&self) -> Option<u64> {
        self.durable_seq
    }

    /// How many bytes of a torn last line `open` moved to `<name>.torn`.
    pub fn repaired_tail_bytes(&self) -> u64 {
        self.repaired_tail_bytes
    }

    /// The current log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn ensure_healthy(&self) -> Result<(), AuditError> {
        if self.poisoned {
            Err(AuditError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn sync(&mut self) -> Result<(), AuditError> {
        let synced = self.file.sync_data();
        self.check("fdatasync", synced)?;
        self.dirty_since = None;
        self.durable_seq = Some(self.next_seq.saturating_sub(1)).filter(|&seq| seq > 0);
        Ok(())
    }

    /// Shifts `<name>.<n>` to `<name>.<n+1>` (the rename replacing the oldest
    /// kept file), renames the current file to `<name>.1` and starts a new one.
    fn rotate(&mut self, keep: NonZeroUsize) -> Result<(), AuditError> {
        if self.config.fsync != Fsync::Never && self.dirty_since.is_some() {
            self.sync()?;
        }
        for n in (1..keep.get()).rev() {
            let shifted = rename_if_exists(
                &rotated_path(&self.path, n),
                &rotated_path(&self.path, n + 1),
            );
            self.check("rotate", shifted)?;
        }
        let renamed = fs::rename(&self.path, rotated_path(&self.path, 1));
        self.check("rotate", renamed)?;
        let opened = open_append(&self.path);
        let file = self.check("open", opened)?;
        lock(&file, &self.path).inspect_err(|_| self.poisoned = true)?;
        self.file = file;
        self.len = 0;
        if self.config.fsync != Fsync::Never {
            let synced = sync_dir(&self.path);
            self.check("fsync directory of", synced)?;
        }
        Ok(())
    }

    fn check<T>(&mut self, action: &'static str, result: io::Result<T>) -> Result<T, AuditError> {
        result.map_err(|source| {
            self.poisoned = true;
            AuditError::Io {
                action,
                path: self.path.clone(),
                source,
            }
        })
    }
}

impl Drop for AuditLog {
    /// Under [`Fsync::Interval`], syncs what is pending; errors cannot be
    /// reported from here, so a caller that cares calls `flush` first.
    fn drop(&mut self) {
        if matches!(self.config.fsync, Fsync::Interval(_))
            && self.dirty_since.is_some()
            && !self.poisoned
        {
            let _ = self.file.sync_data();
        }
    }
}

/// SPEC TS-14: reads the first `len` bytes of `file` (its complete lines)
/// as records: every line parses and each `seq` follows the one before.
/// The first and last `seq`, if there is a record.
fn check_chain(file: &File, len: u64, path: &Path) -> Result<Option<(u64, u64)>, AuditError> {
    if len == 0 {
        return Ok(None);
    }
    let mut f = file;
    f.seek(SeekFrom::Start(0)).map_err(io_error("read", path))?;
    let reader =
        AuditReader::<_, IgnoredAny>::with_path(BufReader::new(f.take(len)), path.to_path_buf());
    let mut ends = None;
    for envelope in reader {
        let seq = envelope?.seq;
        ends = Some(ends.map_or((seq, seq), |(first, _)| (first, seq)));
    }
    Ok(ends)
}

/// The `seq` of the last complete record of `file`, if it has one.
fn last_seq(file: &File, tail: &Tail, path: &Path) -> Result<Option<u64>, AuditError> {
    let Some(line) = &tail.last_line else {
        return Ok(None);
    };
    match serde_json::from_slice::<Envelope<IgnoredAny>>(line) {
        Ok(envelope) => Ok(Some(envelope.seq)),
        Err(source) => {
            let line =
                line_number_at(file, tail.last_line_start).map_err(io_error("read", path))?;
            Err(AuditError::Corrupt { line, source })
        }
    }
}

/// Where `seq` continues from when the current file is new or empty after a
/// rotation. A rotated file is only read, never repaired.
fn last_seq_of_rotated(path: &Path) -> Result<Option<u64>, AuditError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("open", path)(e)),
    };
    let len = file.metadata().map_err(io_error("stat", path))?.len();
    let tail = scan_tail(&file, len).map_err(io_error("read", path))?;
    last_seq(&file, &tail, path)
}

/// Saves the torn bytes to `<name>.torn` (raw, each piece followed by a
/// newline; evidence, not records) before truncating them away, so a crash
/// in between can duplicate the evidence but never lose it.
fn move_torn_aside(path: &Path, file: &File, tail: &Tail) -> Result<(), AuditError> {
    let torn_path = torn_path(path);
    let mut piece = tail.torn.clone();
    piece.push(b'\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&torn_path)
        .and_then(|mut torn| {
            torn.write_all(&piece)?;
            torn.sync_data()
        })
        .and_then(|()| sync_dir(&torn_path))
        .map_err(io_error("save torn tail to", &torn_path))?;
    file.set_len(tail.complete_len)
        .and_then(|()| file.sync_data())
        .map_err(io_error("truncate torn tail of", path))
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
}

fn lock(file: &File, path: &Path) -> Result<(), AuditError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(AuditError::Locked {
            path: path.to_path_buf(),
        }),
        Err(TryLockError::Error(source)) => Err(io_error("lock", path)(source)),
    }
}

/// A new or renamed file survives power loss only once its directory is synced.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

fn rename_if_exists(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> AuditError {
    let path = path.to_path_buf();
    move |source| AuditError::Io {
        action,
        path,
        source,
    }
}
