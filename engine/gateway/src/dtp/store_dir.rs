//! SPEC SES-2, SES-3: [`DirSessionStore`], suspended sessions kept in a
//! directory, one file each, so that they outlive the process: a gateway
//! restarted within a session's suspend timeout still resumes it.
//!
//! **Owns**: the files of its directory named `<session id>.dtps`, and an
//! in-memory index of them (id → deadline) built when the store is opened.
//! **Never touches**: what a session means ([`SuspendedSession::to_bytes`]
//! and [`SuspendedSession::from_bytes`] do), other files of the directory
//! (only its own leftover temporary files are removed). One process per
//! directory: two stores open on one directory do not see each other's
//! parks.
//!
//! # Plugging it in
//!
//! A gateway takes any [`SuspendedSessions`]; this one in place of the
//! in-memory [`SessionRegistry`](super::SessionRegistry):
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use dtp_gateway::dtp::{DirSessionStore, DtpApp, DtpGateway, StoreLimits, TerminalConfig};
//!
//! fn gateway<A: DtpApp>(
//!     config: Arc<TerminalConfig>,
//!     app: A,
//! ) -> Result<DtpGateway<A>, Box<dyn std::error::Error>> {
//!     let limits = StoreLimits::for_endpoint(config.endpoint);
//!     let store = Arc::new(DirSessionStore::open("/var/lib/dtp/sessions", limits)?);
//!     Ok(DtpGateway::new(config, store, app))
//! }
//! ```
//!
//! Sessions parked before a restart are found by the next
//! [`DirSessionStore::open`] on the same directory.
//!
//! # A file
//!
//! | field | encoding |
//! |---|---|
//! | magic | `DTPD` (4 bytes) |
//! | version | u16 = 1 |
//! | written at | u64, wall clock, ms since the Unix epoch |
//! | deadline | u64, wall clock, ms since the Unix epoch (`u64::MAX`: none) |
//! | session | [`SuspendedSession::to_bytes`] (its own magic, version, checksum) |
//!
//! **Writes are atomic**: the bytes go to a temporary file in the same
//! directory, which is fsynced, renamed over `<id>.dtps`, and the directory
//! fsynced; a crash leaves the old file or the new one, never a mix (a
//! leftover temporary file is removed at the next open). A take or an
//! expiry removes the file and fsyncs the directory, so a taken session
//! does not come back after a crash.
//!
//! **Bounded**: at most [`StoreLimits::max_sessions`] files (past it,
//! expired ones go first, then [`ParkError::Full`]) of at most
//! [`StoreLimits::max_session_bytes`] each ([`ParkError::TooLarge`]); a
//! larger file is never read. **Untrusted on read**: a file that does not
//! decode under the endpoint's ceilings is a [`DirStoreError::Corrupt`]
//! from [`DirSessionStore::try_take`] (and a logged `None` from
//! [`SuspendedSessions::take`]), and is removed — never a panic.
//!
//! # Clocks
//!
//! An [`Instant`] does not survive a restart, so the stored deadline is
//! **wall-clock** ([`SystemTime`], through a [`WallClock`]): at park, the
//! session's time left at the caller's `now` is added to the wall-clock
//! write time. At take, the wall-clock time since the write is subtracted
//! from the time left, and the session gets an `Instant` expiry on the
//! caller's clock again; [`DirSessionStore::expire`] compares deadlines
//! with the wall clock (its `now` is not used). A wall clock that steps
//! backwards counts as no time passed; one that steps forwards may expire
//! sessions early — both fail safe (a session lives at most its
//! `suspend_timeout` after the take).
//!
//! The files hold the plaintext of unacknowledged and waiting fragments
//! (see `persist`), never key material: keep the directory private (files
//! are created with mode 0600).

pub(crate) mod file;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use dtp_codec::SessionId;
use dtp_proto::persist::PersistError;

use self::file::{HEADER_LEN, NO_DEADLINE, ReadFailure, io_err, unix_ms};
use super::{EndpointConfig, SuspendedSession, SuspendedSessions};
use super::{ParkError, ParkRefused};

const SUFFIX: &str = ".dtps";
const TMP_SUFFIX: &str = ".tmp";

/// The wall clock a [`DirSessionStore`] reads (see the module docs,
/// "Clocks"); tests pass their own.
pub type WallClock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// SPEC SES-2: the bounds of a [`DirSessionStore`], and the endpoint
/// configuration whose ceilings bound what it reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Most sessions kept at once.
    pub max_sessions: usize,
    /// Most bytes of one session's file.
    pub max_session_bytes: usize,
    /// The configuration of the endpoints that resume the sessions.
    pub endpoint: EndpointConfig,
}

impl StoreLimits {
    /// 1024 sessions, each as large as `endpoint`'s ceilings allow: a full
    /// resume cache, and every agreement's DAG full, plus 1 MiB for the
    /// rest (framing, agreements, relations).
    pub fn for_endpoint(endpoint: EndpointConfig) -> Self {
        let dags = endpoint
            .dag
            .max_pending_bytes
            .saturating_mul(endpoint.agreements.max_active_agreements);
        Self {
            max_sessions: 1024,
            max_session_bytes: endpoint
                .resume_cache
                .max_bytes
                .saturating_add(dags)
                .saturating_add(1 << 20),
            endpoint,
        }
    }
}

/// SPEC SES-2, SES-3: why the directory store failed.
#[derive(Debug, thiserror::Error)]
pub enum DirStoreError {
    /// A file operation failed.
    #[error("session store: {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A session file does not decode (it was removed).
    #[error("session store: {path} is corrupt and was removed: {error}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        error: PersistError,
    },
}

/// SPEC SES-2, SES-3: suspended sessions in a directory, one file each
/// (see the module docs).
pub struct DirSessionStore {
    dir: PathBuf,
    limits: StoreLimits,
    clock: WallClock,
    /// Session → wall-clock deadline (ms since the epoch).
    index: Mutex<HashMap<SessionId, u64>>,
    tmp_serial: AtomicU64,
}

impl fmt::Debug for DirSessionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirSessionStore")
            .field("dir", &self.dir)
            .field("limits", &self.limits)
            .field("sessions", &self.len())
            .finish_non_exhaustive()
    }
}

impl DirSessionStore {
    /// SPEC SES-3: opens (creating it if needed) the store in `dir` with the
    /// system wall clock, and indexes the sessions a previous process left
    /// there.
    pub fn open(dir: impl Into<PathBuf>, limits: StoreLimits) -> Result<Self, DirStoreError> {
        Self::open_with_clock(dir, limits, Arc::new(SystemTime::now))
    }

    /// SPEC SES-3: [`DirSessionStore::open`] with another wall clock.
    /// Fails when the directory cannot be created or written in. Session files whose header does not read are logged and removed,
    /// leftover temporary files removed, other files left alone. Every
    /// session found is kept, even past `max_sessions` (parks are refused
    /// until enough expire).
    pub fn open_with_clock(
        dir: impl Into<PathBuf>,
        limits: StoreLimits,
        clock: WallClock,
    ) -> Result<Self, DirStoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;
        // A directory this process cannot write in fails here, at start-up,
        // rather than at the first park.
        let probe = dir.join(format!(".probe.{}{TMP_SUFFIX}", std::process::id()));
        file::probe_writable(&dir, &probe)?;
        let mut index = HashMap::new();
        for entry in std::fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let path = entry.map_err(io_err("list", &dir))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name.starts_with('.') && name.ends_with(TMP_SUFFIX) {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let Some(id) = name
                .strip_suffix(SUFFIX)
                .and_then(|s| SessionId::parse_str(s).ok())
            else {
                continue;
            };
            match file::read_header(&path) {
                Ok((_, deadline)) => {
                    index.insert(id, deadline);
                }
                Err(e) => {
                    tracing::warn!("{e}; removing it");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        Ok(Self {
            dir,
            limits,
            clock,
            index: Mutex::new(index),
            tmp_serial: AtomicU64::new(0),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// SPEC SES-2: sessions kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The file of a session.
    pub fn path_of(&self, session_id: SessionId) -> PathBuf {
        self.dir.join(format!("{session_id}{SUFFIX}"))
    }

    /// SPEC SES-2: writes `session` atomically (see the module docs); a
    /// session with the same id is replaced. Hands it back when it is too
    /// large, the store is full, or the write fails.
    pub fn try_park(&self, session: SuspendedSession, now: Instant) -> Result<(), ParkRefused> {
        let refuse = |error, session| ParkRefused {
            error,
            session: Box::new(session),
        };
        let bytes = session.to_bytes(now);
        let len = HEADER_LEN + bytes.len();
        let max = self.limits.max_session_bytes;
        if len > max {
            return Err(refuse(ParkError::TooLarge { len, max }, session));
        }
        let written = unix_ms((self.clock)());
        let deadline = wall_deadline(&session, now, written);
        let id = session.session_id();
        // Room is reserved in the index first; the file IO runs unlocked.
        let mut index = self.lock();
        let mut expired = Vec::new();
        if !index.contains_key(&id) && index.len() >= self.limits.max_sessions {
            expired = take_due(&mut index, written);
        }
        let full = !index.contains_key(&id) && index.len() >= self.limits.max_sessions;
        if !full {
            index.insert(id, deadline);
        }
        drop(index);
        self.remove_logged(&expired);
        if full {
            let max = self.limits.max_sessions;
            return Err(refuse(ParkError::Full { max }, session));
        }
        let serial = self.tmp_serial.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tmp = self.dir.join(format!(".{id}.{pid}.{serial}{TMP_SUFFIX}"));
        let contents = file::encode(written, deadline, &bytes);
        if let Err(e) = file::write_atomic(&self.dir, &tmp, &self.path_of(id), &contents) {
            self.lock().remove(&id);
            return Err(refuse(ParkError::Store(e.to_string()), session));
        }
        Ok(())
    }

    /// SPEC SES-3: takes the session with this id: reads and removes its
    /// file. `Ok(None)` when unknown or expired; a file that does not decode
    /// under the endpoint's ceilings is removed and reported as
    /// [`DirStoreError::Corrupt`]; a file that cannot be read stays.
    pub fn try_take(
        &self,
        session_id: SessionId,
        now: Instant,
    ) -> Result<Option<SuspendedSession>, DirStoreError> {
        let Some(deadline) = self.lock().remove(&session_id) else {
            return Ok(None);
        };
        let path = self.path_of(session_id);
        let read = file::read_bounded(&path, self.limits.max_session_bytes);
        if let Err(ReadFailure::Io(source)) = read {
            if source.kind() == io::ErrorKind::NotFound {
                return Ok(None);
            }
            // Kept for a later attempt (or the next open).
            self.lock().insert(session_id, deadline);
            return Err(io_err("read", &path)(source));
        }
        if let Err(e) = file::remove_all(&self.dir, std::slice::from_ref(&path)) {
            tracing::error!("{e}: a taken session may come back after a restart");
        }
        let corrupt = |error| DirStoreError::Corrupt {
            path: path.clone(),
            error,
        };
        let data = match read {
            Ok(data) => data,
            Err(ReadFailure::TooLarge(error)) => return Err(corrupt(error)),
            Err(ReadFailure::Io(source)) => return Err(io_err("read", &path)(source)),
        };
        let wall = unix_ms((self.clock)());
        decode_record(&data, (session_id, &self.limits), now, wall).map_err(corrupt)
    }

    /// SPEC SES-2: removes every session whose wall-clock deadline passed;
    /// returns how many.
    pub fn expire_due(&self) -> usize {
        let wall = unix_ms((self.clock)());
        let due = take_due(&mut self.lock(), wall);
        self.remove_logged(&due);
        due.len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, u64>> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remove_logged(&self, ids: &[SessionId]) {
        let paths: Vec<PathBuf> = ids.iter().map(|id| self.path_of(*id)).collect();
        if let Err(e) = file::remove_all(&self.dir, &paths) {
            tracing::warn!("{e}: an expired session file stays until the next open");
        }
    }
}

impl SuspendedSessions for DirSessionStore {
    fn park(&self, session: SuspendedSession, now: Instant) -> Result<(), ParkRefused> {
        self.try_park(session, now)
    }

    fn take(&self, session_id: SessionId, now: Instant) -> Option<SuspendedSession> {
        self.try_take(session_id, now).unwrap_or_else(|e| {
            tracing::warn!("resume of session {session_id}: {e}");
            None
        })
    }

    fn expire(&self, _now: Instant) -> usize {
        self.expire_due()
    }
}

/// The wall-clock deadline (ms since the Unix epoch) of `session`, stored
/// at wall time `written` while the caller's clock reads `now`
/// ([`NO_DEADLINE`] when it has none).
pub(super) fn wall_deadline(session: &SuspendedSession, now: Instant, written: u64) -> u64 {
    session.expires_at().map_or(NO_DEADLINE, |at| {
        let left = at.saturating_duration_since(now).as_millis();
        written.saturating_add(u64::try_from(left).unwrap_or(u64::MAX))
    })
}

/// A stored record (the header of [`file::encode`], then the session) as
/// the session `session_id` again, on the caller's clock `now` at wall time
/// `wall`: `None` when its deadline passed; an error when it does not
/// decode under `limits` or holds another session.
pub(super) fn decode_record(
    data: &[u8],
    (session_id, limits): (SessionId, &StoreLimits),
    now: Instant,
    wall: u64,
) -> Result<Option<SuspendedSession>, PersistError> {
    let (written, deadline) = file::parse_header(data)?;
    if deadline != NO_DEADLINE && deadline <= wall {
        return Ok(None);
    }
    let elapsed = Duration::from_millis(wall.saturating_sub(written));
    let body = data.get(HEADER_LEN..).unwrap_or_default();
    let session = SuspendedSession::decode(body, &limits.endpoint, now, elapsed)?;
    if session.session_id() != session_id {
        return Err(PersistError::Inconsistent(
            "the record holds another session",
        ));
    }
    if session.is_expired(now) {
        session.expire();
        return Ok(None);
    }
    Ok(Some(session))
}

/// Removes from the index and returns every id whose deadline is at or
/// before `wall`.
fn take_due(index: &mut HashMap<SessionId, u64>, wall: u64) -> Vec<SessionId> {
    let due: Vec<SessionId> = index
        .iter()
        .filter(|(_, deadline)| **deadline != NO_DEADLINE && **deadline <= wall)
        .map(|(id, _)| *id)
        .collect();
    for id in &due {
        index.remove(id);
    }
    due
}
