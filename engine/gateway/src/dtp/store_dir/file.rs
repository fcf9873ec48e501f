//! SPEC SES-2: the files of a [`DirSessionStore`](super::DirSessionStore):
//! their header, bounded reads, atomic writes and durable removals.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use dtp_proto::persist::{PersistError, Reader};

use super::DirStoreError;

const MAGIC: [u8; 4] = *b"DTPD";
const VERSION: u16 = 1;
/// Magic, version, written at, deadline.
pub(crate) const HEADER_LEN: usize = 4 + 2 + 8 + 8;
/// The deadline of a session that never expires.
pub(super) const NO_DEADLINE: u64 = u64::MAX;

/// A file operation's error, with what was done on which path.
pub(super) fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> DirStoreError {
    let path = path.to_owned();
    move |source| DirStoreError::Io { op, path, source }
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A file's bytes: the header, then `session`.
pub(crate) fn encode(written: u64, deadline: u64, session: &[u8]) -> Vec<u8> {
    let mut file = Vec::with_capacity(HEADER_LEN + session.len());
    file.extend_from_slice(&MAGIC);
    file.extend_from_slice(&VERSION.to_be_bytes());
    file.extend_from_slice(&written.to_be_bytes());
    file.extend_from_slice(&deadline.to_be_bytes());
    file.extend_from_slice(session);
    file
}

/// The header of a file's bytes: (written at, deadline).
pub(super) fn parse_header(data: &[u8]) -> Result<(u64, u64), PersistError> {
    let mut r = Reader::new(data);
    let magic = r.array::<4>("store magic")?;
    if magic != MAGIC {
        return Err(PersistError::BadMagic { found: magic });
    }
    let version = r.u16("store version")?;
    if version != VERSION {
        return Err(PersistError::UnsupportedVersion {
            found: version,
            supported: VERSION,
        });
    }
    Ok((r.u64("written at")?, r.u64("deadline")?))
}

/// Reads only the header of the file at `path`.
pub(super) fn read_header(path: &Path) -> Result<(u64, u64), DirStoreError> {
    let mut head = Vec::with_capacity(HEADER_LEN);
    File::open(path)
        .and_then(|f| f.take(HEADER_LEN as u64).read_to_end(&mut head))
        .map_err(io_err("read", path))?;
    parse_header(&head).map_err(|error| DirStoreError::Corrupt {
        path: path.to_owned(),
        error,
    })
}

/// Why a bounded read failed.
pub(super) enum ReadFailure {
    Io(io::Error),
    TooLarge(PersistError),
}

/// Reads a whole file of at most `max` bytes (a larger one is not read).
pub(super) fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, ReadFailure> {
    let file = File::open(path).map_err(ReadFailure::Io)?;
    let len = file.metadata().map_err(ReadFailure::Io)?.len();
    let max64 = u64::try_from(max).unwrap_or(u64::MAX);
    if len > max64 {
        return Err(ReadFailure::TooLarge(PersistError::OverCeiling {
            what: "session file bytes",
            found: len,
            max: max64,
        }));
    }
    // At most `max` bytes (checked above); a file that grew meanwhile is
    // cut at `max + 1` and refused by the decoder.
    let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(max));
    file.take(max64.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(ReadFailure::Io)?;
    Ok(data)
}

/// Writes `bytes` to `path` atomically: to `tmp` (created, 0600), fsync,
/// rename over `path`, fsync of `dir`. On failure `tmp` is removed.
pub(super) fn write_atomic(
    dir: &Path,
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), DirStoreError> {
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(tmp)
            .map_err(io_err("create", tmp))?;
        file.write_all(bytes).map_err(io_err("write", tmp))?;
        file.sync_all().map_err(io_err("fsync", tmp))?;
        fs::rename(tmp, path).map_err(io_err("rename", path))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

/// Checks that files can be created in `dir`: a probe file named like a
/// leftover temporary file (so that a crash here is cleaned up by the next
/// open) is created and removed.
pub(super) fn probe_writable(dir: &Path, probe: &Path) -> Result<(), DirStoreError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(probe)
        .map_err(io_err("write in", dir))?;
    fs::remove_file(probe).map_err(io_err("remove", probe))
}

/// Removes `paths` (a missing one is fine), then fsyncs `dir` once.
pub(super) fn remove_all(dir: &Path, paths: &[PathBuf]) -> Result<(), DirStoreError> {
    if paths.is_empty() {
        return Ok(());
    }
    for path in paths {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("remove", path)(e)),
        }
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), DirStoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync", dir))
}
