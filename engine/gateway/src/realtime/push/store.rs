//! SPEC RT-12: Web Push registrations outlive a restart. The push plane
//! writes what changed as lines of JSON ([`Line`]) to an append-only file
//! through a worker thread ([`PushStore`]): the control thread only hands
//! the bytes over (a bounded channel, never a wait), and the worker writes
//! each batch, `fdatasync`s it and reports how many lines are durable, then
//! wakes the control thread. An answer that changed a registration is
//! held until its lines are durable (seed §8.3: `associationEpoch` only
//! after the server commit).
//!
//! Nothing in the file is a capability in the clear: a registration's
//! endpoint and keys are its sealed record (AES-256-GCM under a key derived
//! from the store's secret and the writing run's salt), clients are named by
//! a keyed fingerprint of their token. A torn last line (a crash mid-write)
//! is dropped at load; any other bad line stops the start with a one-line
//! error. The file is rewritten from the plane's state at start and
//! whenever it has grown well past it (write aside, `fsync`, rename).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, mpsc};

use serde::{Deserialize, Serialize};

/// Batches the control thread may have handed over and the worker not yet
/// taken; beyond it, lines wait in the plane for the next tick.
const CHANNEL: usize = 256;

/// One line of the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum Line {
    /// A client's association state: epochs issued so far, the active one.
    Client {
        /// The client's keyed name.
        c: String,
        /// Association epochs issued to it.
        issued: u64,
        /// Its active epoch, if any.
        epoch: Option<String>,
    },
    /// A live registration (a later line for the same id replaces it).
    Reg {
        /// The registration number.
        id: u64,
        /// Its owner's keyed name.
        c: String,
        /// Its installation id.
        inst: String,
        /// The hinted streams it is bound to.
        streams: Vec<String>,
        /// The writing run's salt (base64url): with the store's secret, the
        /// key `sealed` opens under.
        salt: String,
        /// The sealed subscription (base64url).
        sealed: String,
    },
    /// Registration `id` ended.
    End {
        /// The registration number.
        id: u64,
        /// `GONE` or `REVOKED`.
        state: String,
    },
    /// Ids below `id` are never issued again.
    Next {
        /// The next registration number.
        id: u64,
    },
}

/// Reads the store at `path` (none yet: no lines). A torn last line is
/// dropped; another bad line is an error naming it.
pub fn load(path: &Path) -> Result<Vec<Line>, String> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut raw = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        raw.push(line.map_err(|e| format!("{}: {e}", path.display()))?);
    }
    let last = raw.len().saturating_sub(1);
    let mut lines = Vec::with_capacity(raw.len());
    for (n, bytes) in raw.iter().enumerate() {
        if bytes.is_empty() {
            continue;
        }
        match serde_json::from_slice(bytes) {
            Ok(line) => lines.push(line),
            Err(_) if n == last => {
                tracing::warn!(file = %path.display(), "a torn last line of the push store was dropped");
            }
            Err(e) => {
                return Err(format!("{} line {}: {e}", path.display(), n + 1));
            }
        }
    }
    Ok(lines)
}

enum Op {
    /// Append these bytes; lines up to `.0` are then durable.
    Append(u64, Vec<u8>),
    /// Replace the file by these bytes; lines up to `.0` are then durable.
    Rewrite(u64, Vec<u8>),
}

/// The store's writer (see the module doc). Dropping it lets the worker
/// finish what it was handed and stop.
pub struct PushStore {
    tx: Option<SyncSender<Op>>,
    durable: Arc<AtomicU64>,
    failed: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for PushStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushStore")
            .field("durable", &self.durable())
            .field("failed", &self.failed())
            .finish_non_exhaustive()
    }
}

impl PushStore {
    /// Opens (creating) the store at `path` for appending and starts its
    /// worker, which calls `wake` after each durable batch or failure.
    pub fn open(path: &Path, wake: Arc<dyn Fn() + Send + Sync>) -> Result<Self, String> {
        let file = append(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (tx, rx) = mpsc::sync_channel(CHANNEL);
        let durable = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            path: path.to_owned(),
            file,
            durable: durable.clone(),
            failed: failed.clone(),
            wake,
        };
        let thread = std::thread::Builder::new()
            .name("dtp-push-store".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| format!("push store worker: {e}"))?;
        Ok(Self {
            tx: Some(tx),
            durable,
            failed,
            thread: Some(thread),
        })
    }

    /// Hands `lines` to the worker to append; after them `upto` lines are
    /// durable. False (nothing handed over) when the worker is behind or
    /// has failed.
    pub fn append(&self, upto: u64, lines: &[Line]) -> bool {
        self.send(Op::Append(upto, encode(lines)))
    }

    /// Hands the worker a whole new content (the plane's state); after it
    /// `upto` lines are durable. False as [`PushStore::append`].
    pub fn rewrite(&self, upto: u64, lines: &[Line]) -> bool {
        self.send(Op::Rewrite(upto, encode(lines)))
    }

    fn send(&self, op: Op) -> bool {
        self.tx.as_ref().is_some_and(|tx| match tx.try_send(op) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        })
    }

    /// Lines durable so far.
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Whether a write failed: the store takes nothing more.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

impl Drop for PushStore {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn encode(lines: &[Line]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        // A `Line` is strings and numbers: serialising cannot fail.
        if serde_json::to_writer(&mut out, line).is_ok() {
            out.push(b'\n');
        }
    }
    out
}

fn append(path: &Path) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

struct Worker {
    path: PathBuf,
    file: File,
    durable: Arc<AtomicU64>,
    failed: Arc<AtomicBool>,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl Worker {
    fn run(mut self, rx: Receiver<Op>) {
        while let Ok(first) = rx.recv() {
            let mut upto = 0;
            let mut op = Some(first);
            // Every batch handed over by now goes into one fdatasync.
            while let Some(o) = op.take().or_else(|| rx.try_recv().ok()) {
                let done = match o {
                    Op::Append(n, bytes) => {
                        upto = n;
                        self.file.write_all(&bytes)
                    }
                    Op::Rewrite(n, bytes) => {
                        upto = n;
                        self.rewrite(&bytes)
                    }
                };
                if let Err(e) = done {
                    return self.fail(&e);
                }
            }
            if let Err(e) = self.file.sync_data() {
                return self.fail(&e);
            }
            self.durable.store(upto, Ordering::Release);
            (self.wake)();
        }
    }

    /// Writes `bytes` aside, makes them durable, and renames them over the
    /// store; appends then go to the new file.
    fn rewrite(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let aside = self.path.with_extension("rewrite");
        let mut options = OpenOptions::new();
        options.create(true).write(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut f = options.open(&aside)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&aside, &self.path)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        self.file = append(&self.path)?;
        Ok(())
    }

    fn fail(&self, e: &std::io::Error) {
        tracing::error!(file = %self.path.display(), error = %e, "the push store failed: registrations are refused until a restart");
        self.failed.store(true, Ordering::Release);
        (self.wake)();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("dtp-push-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("push.jsonl")
    }

    fn end(id: u64) -> Line {
        Line::End {
            id,
            state: "GONE".into(),
        }
    }

    fn wait_durable(store: &PushStore, n: u64) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while store.durable() < n {
            assert!(std::time::Instant::now() < deadline, "never durable");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Appends and a rewrite land in order, each reported durable and
    /// woken; a torn last line is dropped at load, a bad line elsewhere is
    /// an error naming it.
    #[test]
    fn lines_are_appended_rewritten_and_loaded_back() {
        let path = scratch("roundtrip");
        assert_eq!(load(&path).unwrap(), []);
        let woken = Arc::new(AtomicU64::new(0));
        let w = woken.clone();
        let store = PushStore::open(
            &path,
            Arc::new(move || {
                w.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .unwrap();
        assert!(store.append(2, &[end(1), end(2)]));
        wait_durable(&store, 2);
        assert!(woken.load(Ordering::Relaxed) >= 1);
        assert_eq!(load(&path).unwrap(), [end(1), end(2)]);
        assert!(store.rewrite(3, &[Line::Next { id: 9 }]));
        assert!(store.append(4, &[end(3)]));
        wait_durable(&store, 4);
        drop(store);
        assert_eq!(load(&path).unwrap(), [Line::Next { id: 9 }, end(3)]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }

        let mut torn = std::fs::read(&path).unwrap();
        torn.extend_from_slice(b"{\"t\":\"end\",\"id\":");
        std::fs::write(&path, &torn).unwrap();
        assert_eq!(load(&path).unwrap(), [Line::Next { id: 9 }, end(3)]);
        let mut bad = b"{\"t\":\"nope\"}\n".to_vec();
        bad.extend_from_slice(&torn);
        std::fs::write(&path, &bad).unwrap();
        let err = load(&path).unwrap_err();
        assert!(err.contains("line 1"), "{err}");
    }

    /// A store whose file cannot be written reports failure, and then
    /// takes nothing more.
    #[test]
    fn a_failed_write_is_reported_and_ends_the_store() {
        let path = scratch("fail");
        let store = PushStore::open(&path, Arc::new(|| {})).unwrap();
        // A rewrite into a directory that is gone cannot be made.
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        assert!(store.rewrite(1, &[end(1)]));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !store.failed() {
            assert!(std::time::Instant::now() < deadline, "never failed");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(store.durable(), 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while store.append(2, &[end(2)]) {
            assert!(std::time::Instant::now() < deadline, "still taking lines");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}
