//! SPEC TS-12, TS-14, HO-10: the terminal's audit records into the
//! append-only log ([`AuditLog`], over `dtp_audit`'s format), written by
//! the plane's own audit thread.
//!
//! **The control thread never waits for the disk** (DESIGN §3): it hands
//! each record to the audit thread over a bounded queue
//! ([`AUDIT_QUEUE`] records) and goes on; the thread appends, fsyncs (per
//! the configured policy), rotates and reopens. Under the interval policy
//! the thread publishes its sync deadline and the control thread's tick
//! passes the time on when it is due (the writer reads no clock).
//!
//! **A failing log never stops the plane.** The SPEC's audit log is a MAY
//! and availability matters more: a record that cannot be written is logged
//! loudly (`error!`) and counted (`audit_failures`), and the plane goes on
//! deciding. A write error poisons the writer (its file's state is unknown);
//! the thread then drops it and reopens the log — which checks it and
//! repairs a torn tail — at the next record, at most once per
//! [`REOPEN_AFTER_MS`]. Records that arrive while it cannot reopen, or when
//! the queue is full, are lost and counted. A torn tail repaired at any
//! open is logged (`warn!`, with the bytes dropped) and counted
//! (`audit_torn_repairs`, `audit_torn_bytes`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;

use dtp_audit::{AuditConfig, AuditError};
use dtp_terminal::{AuditRecord, UnixMs};

use super::audit_log::AuditLog;
use super::observe::PlaneMetrics;

/// The least time between two attempts to reopen a failed log.
pub const REOPEN_AFTER_MS: u64 = 1_000;

/// Records waiting for the audit thread at most; more are lost and
/// counted (`audit_failures`).
pub const AUDIT_QUEUE: usize = 4_096;

/// The longest [`AuditSink::flush`] waits for the audit thread.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// "No sync due" in the published deadline.
const NO_DEADLINE: u64 = u64::MAX;

/// What the control thread tells the audit thread.
enum Msg {
    /// Append this record, stamped with the control thread's time.
    Record(UnixMs, Box<AuditRecord>),
    /// The published sync deadline has passed: it is now this.
    Tick(UnixMs),
    /// Make everything so far durable, then answer.
    Flush(SyncSender<()>),
}

/// The control thread's end of the audit log.
#[derive(Debug)]
pub(crate) struct AuditSink {
    queue: SyncSender<Msg>,
    /// The writer's next sync deadline (Unix ms; [`NO_DEADLINE`]: none).
    deadline: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Record(..) => "Record",
            Msg::Tick(_) => "Tick",
            Msg::Flush(_) => "Flush",
        })
    }
}

impl AuditSink {
    /// Opens the log on the calling thread (a failure here is a start-up
    /// error: the operator asked for a log that cannot be written), then
    /// hands it to the audit thread.
    pub(crate) fn open(
        path: PathBuf,
        config: AuditConfig,
        metrics: Arc<PlaneMetrics>,
    ) -> Result<Self, AuditError> {
        let log = AuditLog::open(path.clone(), config)?;
        torn_repaired(&log, &metrics);
        let deadline = Arc::new(AtomicU64::new(NO_DEADLINE));
        let (queue, inbox) = mpsc::sync_channel(AUDIT_QUEUE);
        let mut writer = Writer {
            path,
            config,
            log: Some(log),
            reopen_at: UnixMs(0),
            metrics,
            deadline: deadline.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("dtp-audit".into())
            .spawn(move || writer.run(&inbox))
            .map_err(|source| AuditError::Io {
                action: "start the writer thread of",
                path: PathBuf::new(),
                source,
            })?;
        Ok(AuditSink {
            queue,
            deadline,
            thread: Some(thread),
        })
    }

    /// Queues one record at `now`; never waits.
    pub(crate) fn append(&mut self, now: UnixMs, record: &AuditRecord, metrics: &PlaneMetrics) {
        let msg = Msg::Record(now, Box::new(record.clone()));
        match self.queue.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                PlaneMetrics::bump(&metrics.audit_failures);
                tracing::error!(?record, "audit queue full or writer gone: record lost");
            }
        }
    }

    /// Passes the time on once the writer's sync deadline is due.
    pub(crate) fn handle_timeout(&mut self, now: UnixMs) {
        if self.deadline().is_some_and(|d| d <= now) {
            // Full: the writer is busy and syncs after its next record.
            let _ = self.queue.try_send(Msg::Tick(now));
        }
    }

    /// When [`AuditSink::handle_timeout`] has work.
    pub(crate) fn deadline(&self) -> Option<UnixMs> {
        let d = self.deadline.load(Ordering::Relaxed);
        (d != NO_DEADLINE).then_some(UnixMs(d))
    }

    /// Waits (at most [`FLUSH_WAIT`]) until every record queued so far is
    /// written and durable. Only for stopping and for tests.
    pub(crate) fn flush(&mut self) {
        let (ack, done) = mpsc::sync_channel(1);
        if self.queue.send(Msg::Flush(ack)).is_err() || done.recv_timeout(FLUSH_WAIT).is_err() {
            tracing::error!("audit log flush did not complete");
        }
    }
}

impl Drop for AuditSink {
    /// Flushes and lets the thread end (it does once the queue is gone).
    fn drop(&mut self) {
        self.flush();
        if let Some(thread) = self.thread.take() {
            // The flush was answered (or timed out): the thread has nothing
            // left but to notice the closed queue; never wait for a stuck
            // disk.
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// The audit thread's side: the log, or what is needed to reopen it.
struct Writer {
    path: PathBuf,
    config: AuditConfig,
    log: Option<AuditLog>,
    /// When a failed log may be reopened.
    reopen_at: UnixMs,
    metrics: Arc<PlaneMetrics>,
    deadline: Arc<AtomicU64>,
}

impl Writer {
    fn run(&mut self, inbox: &Receiver<Msg>) {
        while let Ok(msg) = inbox.recv() {
            match msg {
                Msg::Record(now, record) => self.append(now, &record),
                Msg::Tick(now) => self.handle_timeout(now),
                Msg::Flush(ack) => {
                    self.flush();
                    let _ = ack.send(());
                }
            }
            let deadline = self.log.as_ref().and_then(AuditLog::sync_deadline);
            self.deadline
                .store(deadline.unwrap_or(NO_DEADLINE), Ordering::Relaxed);
        }
        self.flush();
    }

    fn append(&mut self, now: UnixMs, record: &AuditRecord) {
        if self.log.is_none() && now >= self.reopen_at {
            match AuditLog::open(self.path.clone(), self.config) {
                Ok(log) => {
                    tracing::warn!(path = %self.path.display(), "audit log reopened");
                    torn_repaired(&log, &self.metrics);
                    self.log = Some(log);
                }
                Err(e) => self.failed(now, &e),
            }
        }
        let Some(log) = &mut self.log else {
            PlaneMetrics::bump(&self.metrics.audit_failures);
            tracing::error!(?record, "audit log unavailable: record lost");
            return;
        };
        match log.append(now.0, record) {
            Ok(_) => PlaneMetrics::bump(&self.metrics.audit_records),
            Err(e) => {
                PlaneMetrics::bump(&self.metrics.audit_failures);
                tracing::error!(?record, "audit record not written");
                self.failed(now, &e);
            }
        }
    }

    fn handle_timeout(&mut self, now: UnixMs) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.handle_timeout(now.0)
        {
            PlaneMetrics::bump(&self.metrics.audit_failures);
            self.failed(now, &e);
        }
    }

    fn flush(&mut self) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.flush()
        {
            tracing::error!(path = %self.path.display(), error = %e, "audit log flush failed");
        }
    }

    fn failed(&mut self, now: UnixMs, e: &AuditError) {
        tracing::error!(path = %self.path.display(), error = %e, "audit log failed");
        // Serialisation errors change nothing on disk; anything else leaves
        // the writer poisoned until reopened.
        if !matches!(e, AuditError::Serialize(_) | AuditError::Newline) {
            self.log = None;
            self.reopen_at = now.plus(REOPEN_AFTER_MS);
        }
    }
}

/// Counts a torn tail the open repaired (`AuditLog::open` logged it).
fn torn_repaired(log: &AuditLog, metrics: &PlaneMetrics) {
    let bytes = log.repaired_tail_bytes();
    if bytes > 0 {
        PlaneMetrics::bump(&metrics.audit_torn_repairs);
        metrics.audit_torn_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}
