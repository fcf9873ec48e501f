//! [`PlaneHandle`]: the admin's way into the plane, from any thread (the
//! admin HTTP thread). Each call sends one command over a bounded channel,
//! wakes the control thread, and waits for the answer — at most the
//! handle's timeout (2 s by default), then [`PlaneError::Timeout`]. A call
//! that timed out may still be carried out later: the command is in the
//! queue. Answers serialise to JSON.

use std::io;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

use dtp_audit::AuditError;
use dtp_codec::SessionId;
use dtp_policy::{HumanError, HumanOutcome, PendingEntry};
use dtp_terminal::{
    AdminHandover, HandoverAdmission, HandoverInfo, PolicyAnswerError, Refusal, ResourceInfo,
    SessionInfo, StateChange,
};
use serde::Serialize;
use uuid::Uuid;

use super::WakerSlot;
use super::observe::{PlaneMetrics, PlaneSnapshot, StateRing};

/// How long a [`PlaneHandle`] call waits for its answer by default.
pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a plane call failed.
#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    /// No answer within the handle's timeout (the command may still run).
    #[error("the terminal plane did not answer within {0:?}")]
    Timeout(Duration),
    /// The command queue is full.
    #[error("the terminal plane is busy: too many admin commands queued")]
    Busy,
    /// The plane is gone (the engine stopped).
    #[error("the terminal plane is not running")]
    Stopped,
    /// The terminal refused (unknown session, unknown resource, …).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The human decision was refused (unknown, decided, expired).
    #[error(transparent)]
    Human(#[from] HumanError),
    /// The terminal refused a policy answer (SPEC HO-7: too late).
    #[error(transparent)]
    Answer(#[from] PolicyAnswerError),
    /// The configuration is unusable; the message names the key.
    #[error("terminal configuration: {0}")]
    Config(String),
    /// The audit log cannot be opened.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// A model worker thread could not be started.
    #[error("cannot start the model workers: {0}")]
    Spawn(#[from] io::Error),
}

/// How many sessions an admin action ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Ended {
    /// Sessions that ended because of it.
    pub sessions_ended: usize,
}

/// SPEC HO-6: what happened to an admin handover request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Admission {
    /// Its policy is deciding.
    Evaluating {
        /// The handover.
        handover_id: Uuid,
    },
    /// Waiting behind another handover of the resource.
    Queued {
        /// Its place (1 = next).
        position: usize,
    },
}

impl From<HandoverAdmission> for Admission {
    fn from(a: HandoverAdmission) -> Self {
        match a {
            HandoverAdmission::Evaluating(handover_id) => Admission::Evaluating { handover_id },
            HandoverAdmission::Queued { position } => Admission::Queued { position },
        }
    }
}

/// Where a command's answer goes.
pub(crate) type Reply<T> = SyncSender<Result<T, PlaneError>>;

/// One admin command, run on the control thread.
pub(crate) enum Command {
    Sessions(Reply<Vec<SessionInfo>>),
    Resources(Reply<Vec<ResourceInfo>>),
    PendingHandovers(Reply<Vec<HandoverInfo>>),
    PendingDecisions(Reply<Vec<PendingEntry>>),
    Decide(Uuid, bool, Reply<HumanOutcome>),
    ForceTerminate(SessionId, Reply<()>),
    SetResourceAvailable(String, bool, Reply<Ended>),
    AdminHandover(Box<AdminHandover>, Reply<Admission>),
    Revoke(Uuid, Reply<Ended>),
    ClearReconciliation(String, Reply<usize>),
}

/// Answers a command (the caller may have stopped waiting: then nobody
/// hears it, which is fine).
pub(crate) fn answer<T>(reply: Reply<T>, result: Result<T, PlaneError>) {
    let _ = reply.try_send(result);
}

/// The admin's handle on a running [`super::TerminalPlane`]: cheap to clone,
/// usable from any thread.
#[derive(Clone, Debug)]
pub struct PlaneHandle {
    pub(crate) commands: SyncSender<Command>,
    pub(crate) waker: Arc<WakerSlot>,
    pub(crate) state_changes: Arc<StateRing>,
    pub(crate) metrics: Arc<PlaneMetrics>,
    pub(crate) timeout: Duration,
}

impl PlaneHandle {
    /// This handle, waiting at most `timeout` for each answer.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn call<T>(&self, command: impl FnOnce(Reply<T>) -> Command) -> Result<T, PlaneError> {
        let (tx, rx) = mpsc::sync_channel(1);
        match self.commands.try_send(command(tx)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(PlaneError::Busy),
            Err(TrySendError::Disconnected(_)) => return Err(PlaneError::Stopped),
        }
        self.waker.wake();
        match rx.recv_timeout(self.timeout) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => Err(PlaneError::Timeout(self.timeout)),
            Err(RecvTimeoutError::Disconnected) => Err(PlaneError::Stopped),
        }
    }

    /// SPEC TS-14: every live session.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>, PlaneError> {
        self.call(Command::Sessions)
    }

    /// SPEC TS-8, HO-4: every resource, its occupancy and handovers.
    pub fn resources(&self) -> Result<Vec<ResourceInfo>, PlaneError> {
        self.call(Command::Resources)
    }

    /// SPEC HO-2: every handover whose policy is deciding.
    pub fn pending_handovers(&self) -> Result<Vec<HandoverInfo>, PlaneError> {
        self.call(Command::PendingHandovers)
    }

    /// SPEC HO-3c: the human panel's list (source and target Fay, resource,
    /// mode, reason, deadline; never signatures or key ids).
    pub fn pending_decisions(&self) -> Result<Vec<PendingEntry>, PlaneError> {
        self.call(Command::PendingDecisions)
    }

    /// SPEC HO-3c: a person allows or rejects a pending handover.
    pub fn decide(&self, handover_id: Uuid, allow: bool) -> Result<HumanOutcome, PlaneError> {
        self.call(|r| Command::Decide(handover_id, allow, r))
    }

    /// SPEC TS-11 `forced`: ends a session.
    pub fn force_terminate(&self, session_id: SessionId) -> Result<(), PlaneError> {
        self.call(|r| Command::ForceTerminate(session_id, r))
    }

    /// SPEC TS-10: marks a resource (un)available; unavailable ends its
    /// sessions.
    pub fn set_resource_available(
        &self,
        resource_id: &str,
        available: bool,
    ) -> Result<Ended, PlaneError> {
        let id = resource_id.to_owned();
        self.call(|r| Command::SetResourceAvailable(id, available, r))
    }

    /// SPEC TS-4: an operator checked the OS state of `resource_id` by hand
    /// after an operation with an unknown outcome (a command killed at its
    /// timeout) and clears its reconciliation marks, so the resource
    /// admits sessions again; each clear is audited. Returns how many
    /// marks there were.
    pub fn clear_reconciliation(&self, resource_id: &str) -> Result<usize, PlaneError> {
        let id = resource_id.to_owned();
        self.call(|r| Command::ClearReconciliation(id, r))
    }

    /// SPEC HO-1: an administrator's handover (target `human:<terminal_id>`
    /// with an empty credential hands control to the human user, HO-9).
    pub fn admin_handover(&self, request: AdminHandover) -> Result<Admission, PlaneError> {
        self.call(|r| Command::AdminHandover(Box::new(request), r))
    }

    /// SPEC TS-16: revokes a credential (by descriptor id); its sessions end.
    pub fn revoke(&self, descriptor_id: Uuid) -> Result<Ended, PlaneError> {
        self.call(|r| Command::Revoke(descriptor_id, r))
    }

    /// SPEC TS-3, TS-14: the session state changes published since the last
    /// drain, oldest first (no control-thread round trip; the ring is
    /// bounded, see `state_changes_dropped`).
    pub fn drain_state_changes(&self) -> Vec<StateChange> {
        self.state_changes.drain()
    }

    /// The plane's counters.
    pub fn metrics(&self) -> PlaneSnapshot {
        self.metrics.snapshot()
    }
}
