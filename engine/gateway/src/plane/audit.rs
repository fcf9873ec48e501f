//! SPEC TS-12, TS-14, HO-10: the terminal's audit records into the
//! append-only log ([`AuditLog`], over `dtp_audit`'s format), on the
//! control thread.
//!
//! **A failing log never stops the plane.** The SPEC's audit log is a MAY
//! and availability matters more: a record that cannot be written is logged
//! loudly (`error!`) and counted (`audit_failures`), and the plane goes on
//! deciding. A write error poisons the writer (its file's state is unknown);
//! the sink then drops it and reopens the log — which repairs a torn tail —
//! at the next record, at most once per [`REOPEN_AFTER_MS`]. Records that
//! arrive while it cannot reopen are lost and counted.

use std::path::PathBuf;

use dtp_audit::{AuditConfig, AuditError};
use dtp_terminal::{AuditRecord, UnixMs};

use super::audit_log::AuditLog;
use super::observe::PlaneMetrics;

/// The least time between two attempts to reopen a failed log.
pub const REOPEN_AFTER_MS: u64 = 1_000;

/// The log, or what is needed to reopen it.
#[derive(Debug)]
pub(crate) struct AuditSink {
    path: PathBuf,
    config: AuditConfig,
    log: Option<AuditLog>,
    /// When a failed log may be reopened.
    reopen_at: UnixMs,
}

impl AuditSink {
    /// Opens the log (a failure here is a start-up error: the operator
    /// asked for a log that cannot be written).
    pub(crate) fn open(path: PathBuf, config: AuditConfig) -> Result<Self, AuditError> {
        let log = AuditLog::open(path.clone(), config)?;
        Ok(AuditSink {
            path,
            config,
            log: Some(log),
            reopen_at: UnixMs(0),
        })
    }

    /// Appends one record at `now`.
    pub(crate) fn append(&mut self, now: UnixMs, record: &AuditRecord, metrics: &PlaneMetrics) {
        if self.log.is_none() && now >= self.reopen_at {
            match AuditLog::open(self.path.clone(), self.config) {
                Ok(log) => {
                    tracing::warn!(path = %self.path.display(), "audit log reopened");
                    self.log = Some(log);
                }
                Err(e) => self.failed(now, &e),
            }
        }
        let Some(log) = &mut self.log else {
            PlaneMetrics::bump(&metrics.audit_failures);
            tracing::error!(?record, "audit log unavailable: record lost");
            return;
        };
        match log.append(now.0, record) {
            Ok(_) => PlaneMetrics::bump(&metrics.audit_records),
            Err(e) => {
                PlaneMetrics::bump(&metrics.audit_failures);
                tracing::error!(?record, "audit record not written");
                self.failed(now, &e);
            }
        }
    }

    /// Syncs when the interval policy says so.
    pub(crate) fn handle_timeout(&mut self, now: UnixMs, metrics: &PlaneMetrics) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.handle_timeout(now.0)
        {
            PlaneMetrics::bump(&metrics.audit_failures);
            self.failed(now, &e);
        }
    }

    /// When [`AuditSink::handle_timeout`] has work.
    pub(crate) fn deadline(&self) -> Option<UnixMs> {
        self.log
            .as_ref()
            .and_then(|l| l.sync_deadline())
            .map(UnixMs)
    }

    /// Makes what was written durable (the plane is stopping).
    pub(crate) fn flush(&mut self) {
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
