//! What the terminal asks its driver to do, polled with
//! [`crate::Terminal::poll_output`].

use std::sync::Arc;

use dtp_codec::{AccessMode, ControlMessage, ErrorCode, SessionId, SessionState};
use serde::Serialize;
use uuid::Uuid;

use crate::audit::AuditRecord;
use crate::os_access::{AccessGrant, OsOpId, OsOperation};
use crate::policy::{HandoverContext, PolicyRef};
use crate::session::TerminationReason;
use crate::time::UnixMs;

/// An opaque connection handle chosen by the driver (the engine's
/// connection id, for instance). The terminal only compares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ConnKey(pub u64);

/// One decision of the terminal.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// Send `msg` on `conn` (AuthResult, HeartbeatAck, SessionStateChanged,
    /// HandoverFailedNotification).
    Send {
        /// The connection.
        conn: ConnKey,
        /// The message.
        msg: ControlMessage,
    },
    /// A request was refused with a code that no codec message carries (the
    /// codec has no generic error reply; see the crate docs). The driver
    /// reports it as it can — log it, or close the connection for codes
    /// that mean misuse.
    Refused {
        /// The connection that sent the request.
        conn: ConnKey,
        /// What was refused and why.
        refusal: Refusal,
    },
    /// Close a connection: it sent a message only a terminal sends.
    Close {
        /// The connection.
        conn: ConnKey,
        /// Why, as a code.
        code: ErrorCode,
        /// Why, for people.
        reason: String,
    },
    /// SPEC HO-2 (3), HO-3: decide this handover; answer with
    /// [`crate::Terminal::policy_decided`] before `deadline`.
    EvaluatePolicy {
        /// The handover (UUID v4).
        handover_id: Uuid,
        /// The policy's configured name.
        policy_name: String,
        /// The policy.
        policy: PolicyRef,
        /// SPEC HO-7: the hard deadline (after it the handover fails with
        /// `timeout` and a late answer is refused).
        deadline: UnixMs,
        /// SPEC HO-3a: what to decide on.
        context: Box<HandoverContext>,
    },
    /// The handover no longer needs a decision (it timed out or its source
    /// ended): withdraw a question shown to a person.
    CancelPolicy {
        /// The handover.
        handover_id: Uuid,
    },
    /// SPEC TS-3, TS-14, HO-4: a session changed state — for observers
    /// (the local resource subsystem, an admin surface). Emitted for every
    /// transition, in order, each after its resource operation committed.
    StateChanged(StateChange),
    /// SPEC TS-12, HO-10: a record for the audit log.
    Audit(AuditRecord),
    /// SPEC TS-4 (a deferred [`crate::OsAccess`] only): run `operation` on
    /// `grant` off the control thread and answer with
    /// [`crate::Terminal::os_access_done`]`(op, …)`. Until then the
    /// resource stays held (see the crate docs); an answer that never
    /// comes leaves it held, so the driver must answer every request —
    /// with [`crate::OsError::Indeterminate`] when it gave up waiting.
    OsAccess {
        /// The operation's id.
        op: OsOpId,
        /// Grant or revoke.
        operation: OsOperation,
        /// What to grant or revoke.
        grant: AccessGrant,
        /// A release's handover target when its grant is another
        /// gateway's (SPEC HO-4 T1: the holder the resource is kept for;
        /// [`crate::OsAccess::release`]).
        to: Option<Arc<str>>,
    },
    /// SPEC HO-1 across gateways: ask the gateway that holds the resource
    /// to hand it over to a target connected here; its answer comes back
    /// through [`crate::Terminal::remote_answered`].
    AskRemote(crate::RemoteHandover),
    /// SPEC HO-1 across gateways: the answer to another gateway's
    /// [`crate::Terminal::remote_handover`], for the gateway that asked.
    AnswerRemote {
        /// The question's id.
        id: uuid::Uuid,
        /// The answer.
        answer: crate::RemoteAnswer,
    },
}

/// SPEC TS-3: one committed session transition, as observers see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateChange {
    /// The session.
    pub session_id: SessionId,
    /// Its holder (shared with the session's record: a transition copies
    /// no id).
    pub fay_id: Arc<str>,
    /// Its resource (shared likewise).
    pub resource_id: Arc<str>,
    /// Its mode.
    pub access_mode: AccessMode,
    /// The state before (`None`: the session was just created, in creating).
    pub from: Option<SessionState>,
    /// The state after.
    pub to: SessionState,
    /// The termination reason, on the way to terminated.
    pub reason: Option<TerminationReason>,
    /// When.
    pub at: UnixMs,
}

/// The requests a [`Refusal`] can answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// An AuthRequest (normally answered by an AuthResult instead).
    AuthRequest,
    /// One beat of a Heartbeat.
    Heartbeat,
    /// A SessionRelease.
    SessionRelease,
    /// A SessionTransferRequest.
    SessionTransferRequest,
    /// An administrator's call.
    Admin,
}

/// A refused request: its kind, the session it named, the E_* code and a
/// message a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Refusal {
    /// What was refused.
    pub request: RequestKind,
    /// The session the request named, if any.
    pub session_id: Option<SessionId>,
    /// The code.
    pub code: ErrorCode,
    /// Why.
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(
        request: RequestKind,
        session_id: Option<SessionId>,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Self {
        Refusal {
            request,
            session_id,
            code,
            message: message.into(),
        }
    }
}
