//! The terminal control plane's sans-IO state machines: terminal sessions
//! (SPEC §2, TS-1 … TS-17), liveness (LIV-1 … LIV-6) and control handover
//! (SPEC §3, HO-1 … HO-10).
//!
//! One [`Terminal`] owns every session, every resource's occupancy, every
//! handover and the credential verifier. The control thread drives it:
//! connection events and control-plane messages in ([`Terminal::handle`]),
//! policy answers, revocations, resource availability and admin requests
//! in, with `now` (Unix ms, [`UnixMs`]) on every call; decisions out
//! ([`Terminal::poll_output`]: messages to send, policy questions, observer
//! events, audit records) and the next deadline out
//! ([`Terminal::poll_timeout`]). It reads no clock, draws no global
//! randomness and does no IO of its own; its only effect on the world is
//! the [`OsAccess`] it is given (SPEC TS-4): called inline when it answers
//! at once, or — deferred — asked of the driver as [`Output::OsAccess`]
//! and continued when [`Terminal::os_access_done`] brings the answer, so
//! the control thread never waits for the OS.
//!
//! # Choices where the SPEC leaves room
//!
//! - **Handover order** (seed §6.3, §6.10): steps 1–3 (source, target,
//!   policy) run while the source stays `active`; pre-emption (T0) follows
//!   the policy's `allow`. T1's revoke and T4's grant may each wait for the
//!   OS; the handover stays in progress (HO-6) meanwhile, and the hard
//!   timeout (HO-7) covers T0 … T5: past it, an outstanding T1 restores the
//!   source, an outstanding T4 abandons the target (HO-5), and the failure
//!   is reported with E_HANDOVER_TIMEOUT at once. TS-1's `handover_pending
//!   → terminating` on timeout is in the transition table but never used
//!   (a timed-out source is restored, not ended).
//! - **Unknown OS outcomes** (TS-4): an operation answered
//!   [`OsError::Indeterminate`] (a command killed at its timeout) fails its
//!   step like any failure, and also marks the resource for
//!   reconciliation ([`Reconciliation`]): no new session is admitted on it
//!   (E_OS_INTEGRATION_FAILED) until a successful revoke of the same grant
//!   — the terminal retries it for a session that ended — or an operator
//!   ([`Terminal::clear_reconciliation`]) clears it. Marks are shown in
//!   [`ResourceInfo::reconciliation`] and audited.
//! - **Termination is never rolled back**: if the OS revoke fails, the
//!   session stays `terminating` (keeping its occupancy) and the revoke is
//!   retried; it reaches `terminated` only once its access is gone. A
//!   handover's revoke failure (T1) instead restores the source (HO-5).
//! - **Errors without a message**: the codec has no generic error reply, so
//!   refusals of heartbeats, releases and transfer requests come out as
//!   [`Output::Refused`] with their E_* code; AuthRequests get AuthResult,
//!   failed handovers HandoverFailedNotification (code in `details`).
//! - **Binding** (LIV-1): a session is bound to the connection that created
//!   it; a heartbeat, release or transfer request for it on another
//!   connection that speaks for the same Fay (learned from a verified
//!   AuthRequest, or told by [`Terminal::identify`] after CAP) rebinds it
//!   there. Other connections get E_UNAUTHORIZED.
//! - **Liveness** (LIV-4): the dual judgment is applied literally — dead
//!   only when the connection has been down longer than the threshold AND
//!   the last heartbeat is older than it; a connection that stays up keeps
//!   a silent session alive. LIV-6's aggregated heartbeat is supported
//!   (declared): one Heartbeat may carry many beats; the ack carries the
//!   accepted ones. An equal sequence number is a retransmit, not a replay.
//! - **Human user** (HO-9): its sessions (`human:<terminal_id>`) have no
//!   connection, no credential and no liveness; only an admin call can hand
//!   them on or end them.
//! - **Handover targets' connections**: an AuthRequest's target is its
//!   connection; a transfer's or admin's target Fay is reached on the latest
//!   connection known to speak for it (0 as AuthResult `request_id`), or its
//!   session starts detached and is subject to liveness.
#![forbid(unsafe_code)]

pub mod audit;
pub mod config;
pub mod occupancy;
pub mod os_access;
pub mod output;
pub mod policy;
pub mod session;
mod terminal;
pub mod time;

#[cfg(test)]
mod tests;

pub use audit::{
    AuditRecord, HandoverAudit, HandoverOutcome, PolicyDecision, ReconciliationAudit,
    ReconciliationEvent, SessionAudit,
};
pub use config::{
    ConcurrentHandovers, ConfigError, HandoverConfig, HandoverPolicyConfig, LivenessConfig,
    ResourceConfig, SessionLimits, TerminalConfig,
};
pub use occupancy::Reconciliation;
pub use os_access::{
    AccessCall, AccessGrant, CommandAccessConfig, CommandConfigError, CommandTemplates, NoopAccess,
    OsAccess, OsError, OsOpId, OsOperation, ScriptedAccess,
};
pub use output::{ConnKey, Output, Refusal, RequestKind, StateChange};
pub use policy::{
    DefaultAction, HandoverContext, HandoverKind, HandoverTrigger, PolicyKind, PolicyOutcome,
    PolicyRef, UiChannel,
};
pub use session::{SessionEvent, TerminationReason, transition};
pub use terminal::{
    AdminHandover, HandoverAdmission, HandoverInfo, HandoverPhase, Input, MAX_REMOTE_WAITS,
    MAX_TARGETS_PER_SOURCE, PolicyAnswerError, REMOTE_SLACK_MS, RemoteAnswer, RemoteHandover,
    ResourceInfo, SessionInfo, Terminal, UnknownOsOp, UnknownRemote,
};
pub use time::{RandomSource, SeededRandom, UnixMs};
