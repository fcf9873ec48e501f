//! SPEC SES-1 … SES-4, SEQ-2, SEQ-5: the Session Manager of DTP sessions.
//!
//! **Not the gateway's session path.** `dtp serve` and every shipped
//! driver run the DTP endpoint (`dtp-endpoint`), which keeps its session
//! in the connection object and its suspended sessions behind its own
//! store trait; its SES tests are that crate's `tests/ses.rs`. This
//! manager — a revision-fenced store for several nodes — is used by its
//! own tests and `tests/seq_phases.rs` only; [`PeerIdentity`] is the part
//! the endpoint shares.
//!
//! This module owns the DTP sessions of one shard: their Session_IDs, the
//! peer identity CAP authenticated for each, each session's engine state
//! machine ([`crate::fsm::EngineFsm`], from SessionEstablished on), the idle
//! and suspend timers, and the persistence of suspended sessions through a
//! [`SessionStore`]. It never touches frames, keys or sockets, and never
//! decides agreements (it persists the [`AgreementSnapshot`] it is handed)
//! or resume positions (plain numbers from the Resume Manager).
//!
//! Sans-IO: inputs are [`SessionManager::establish`],
//! [`SessionManager::handle_event`], [`SessionManager::touch`],
//! [`SessionManager::suspend`], [`SessionManager::restore`],
//! [`SessionManager::resume_failed`], [`SessionManager::close`] and
//! [`SessionManager::handle_timeout`]; outputs are
//! [`SessionManager::poll_timeout`] and [`SessionManager::poll_event`].
//!
//! # Rules this module chooses
//!
//! - **Engine state per session.** The states before a session exists (Idle,
//!   WaitingForCAP, CAP failure) belong to the connection driver's own
//!   [`crate::fsm::EngineFsm`]; [`SessionManager::establish`] is called when
//!   CAP succeeded and starts the session's machine in SessionEstablished.
//!   Events with a dedicated entry point (connection lost → `suspend`,
//!   connection back → `restore`, resume failed → `resume_failed`, session
//!   timeout → `handle_timeout`) are refused by `handle_event`, so the
//!   action the table attaches to them is always carried out here.
//! - **Idle timeout (SES-4).** The table lets a session time out only from
//!   SessionEstablished (close) and Suspended (release). So the idle timer
//!   runs in SessionEstablished — a session with no agreement and no traffic
//!   for `idle_timeout` is closed with SESSION_TIMEOUT (3003). Negotiating is
//!   bounded by the Agreement Manager's request timeout; a silent
//!   Transmitting connection is the transport's to declare lost (→ suspend).
//!   The suspend timer runs in Suspended: not restored within
//!   `suspend_timeout`, the session is released and its record deleted.
//! - **Persist on suspend only (SES-2).** A session is written when its
//!   connection drops (Transmitting → Suspended), with a revision: the first
//!   write expects no record; later writes expect the revision this manager
//!   last saw, so a stale writer is refused ([`StoreError::Conflict`]). A
//!   connection lost outside Transmitting is not a suspend: there is no
//!   active agreement to resume. In SessionEstablished the table's loss row
//!   (SPEC.md's, for the seed's gap) closes the session, and the driver
//!   calls `close`; `suspend` refuses it.
//! - **Restore (SES-3).** Only after CAP re-verified the peer on the new
//!   connection, only for the same [`PeerIdentity`], and only while the
//!   record has not expired. Every refusal is [`SessionError::ResumeRefused`]
//!   with code RESUME_FAILED, whatever the cause, so a peer cannot probe
//!   which session ids exist; the legitimate session is left untouched. A
//!   restore bumps the key version (reconnect = new handshake = new key,
//!   DESIGN.md §3) and writes the record back under the expected revision,
//!   marked `live`, under the revision this manager last saw (its own, if
//!   it suspended the session; else the one it loaded): a concurrent or
//!   stale restore elsewhere is refused. Sequence numbers continue from the
//!   persisted positions.
//! - **Close (SES-1)** is the end of the session object (the table has no
//!   "close" row: a closed session's machine is simply dropped); its record
//!   is deleted. Deleting is best effort on timers: a record that survives a
//!   failed delete is refused at restore by its `expires_at_unix`.
//! - **Time.** Timers use `Instant`; persisted timestamps are Unix seconds
//!   passed in by the caller, so a record means the same on another node.

mod manager;
mod store;
#[cfg(test)]
mod tests;

use std::time::Duration;

use bytes::Bytes;
use dtp_codec::{ErrorCode, SessionId};

use crate::agreement::{AgreementSnapshot, Role};
use crate::fsm::{EngineEvent, IllegalTransition};

pub use manager::SessionManager;
pub use store::{MemorySessionStore, Revision, SessionStore, StoreError};

/// Longest peer identity accepted, in bytes.
pub const MAX_PEER_IDENTITY_LEN: usize = 1024;

/// The peer identity CAP authenticated (e.g. a Fay id), opaque to DTP.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PeerIdentity(Bytes);

impl PeerIdentity {
    /// Wraps the identity the CAP layer verified; refuses one longer than
    /// [`MAX_PEER_IDENTITY_LEN`].
    pub fn new(bytes: impl Into<Bytes>) -> Result<Self, SessionError> {
        let bytes = bytes.into();
        if bytes.len() > MAX_PEER_IDENTITY_LEN {
            return Err(SessionError::PeerIdentityTooLong {
                len: bytes.len(),
                max: MAX_PEER_IDENTITY_LEN,
            });
        }
        Ok(Self(bytes))
    }

    /// The identity's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// SPEC RES-1, RES-3: the resume positions persisted with a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ResumePositions {
    /// The sequence number the next sent fragment gets.
    pub next_send_sequence: u64,
    /// The highest sequence number received successfully (0: none).
    pub highest_received: u64,
}

/// SPEC SES-2: everything a suspended session needs to come back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSnapshot {
    /// SPEC SEQ-2: the Session_ID (UUID v4).
    pub session_id: SessionId,
    /// The peer CAP authenticated when the session was established.
    pub peer: PeerIdentity,
    /// This side's role.
    pub role: Role,
    /// The active agreements and the request-id counters.
    pub agreements: AgreementSnapshot,
    /// Where the fragment sequences stand.
    pub positions: ResumePositions,
    /// The key version in use when the connection dropped.
    pub key_version: u16,
    /// When the session was established (Unix seconds).
    pub established_at_unix: u64,
    /// When it was suspended (Unix seconds).
    pub suspended_at_unix: u64,
    /// After this (Unix seconds) the record may no longer be restored.
    pub expires_at_unix: u64,
    /// Set when a manager restored the session and now serves it: a live
    /// record is not restored again (one connection per session).
    pub live: bool,
}

/// What a successful restore hands back to the driver (SES-3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoredSession {
    /// The session.
    pub session_id: SessionId,
    /// This side's role.
    pub role: Role,
    /// The agreements to restore into the Agreement Manager.
    pub agreements: AgreementSnapshot,
    /// Where the sequences continue.
    pub positions: ResumePositions,
    /// The key version the new connection's keys must carry (one above the
    /// persisted one).
    pub key_version: u16,
    /// The record's revision after the restore (the fencing token).
    pub revision: Revision,
}

/// SPEC SES-1 … SES-4: the ceilings and timers of the Session Manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// Most sessions (live and suspended) held at once.
    pub max_sessions: usize,
    /// SPEC SES-4: a SessionEstablished session without traffic for this
    /// long is closed.
    pub idle_timeout: Duration,
    /// A suspended session not restored within this is released.
    pub suspend_timeout: Duration,
    /// Most events queued before timers wait for the queue to drain.
    pub max_queued_events: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(60),
            suspend_timeout: Duration::from_secs(300),
            max_queued_events: 1024,
        }
    }
}

/// News for the driver, drained by [`SessionManager::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// SPEC SES-4: closed after `idle_timeout` without traffic; report
    /// SESSION_TIMEOUT (3003) to the peer.
    IdleTimeout {
        /// The session.
        session_id: SessionId,
    },
    /// The suspended session was not restored in time and is released.
    SuspendExpired {
        /// The session.
        session_id: SessionId,
    },
}

impl SessionEvent {
    /// The wire code to report for it.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::SESSION_TIMEOUT
    }
}

/// Why a resume was refused. Reported to the peer as RESUME_FAILED whatever
/// the cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResumeRefusal {
    /// No such session here or in the store.
    UnknownSession,
    /// The session belongs to another peer.
    PeerMismatch,
    /// The suspended session expired.
    Expired,
    /// The session is live (not suspended): one connection at a time.
    NotSuspended,
    /// The key version cannot be bumped further: start a new session.
    KeyVersionsExhausted,
}

/// SPEC SES-1 … SES-4: why a session operation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// No live or suspended session with this id on this manager.
    #[error("no DTP session {session_id} here")]
    UnknownSession {
        /// The session.
        session_id: SessionId,
    },
    /// SPEC SES-3: the resume was refused.
    #[error("resume of session {session_id} refused: {reason:?}")]
    ResumeRefused {
        /// The session named.
        session_id: SessionId,
        /// Why (for logs; the peer only sees RESUME_FAILED).
        reason: ResumeRefusal,
    },
    /// SPEC FSM-2: the event is not allowed in the session's state.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// The event has its own entry point (suspend, restore, resume_failed,
    /// handle_timeout, establish).
    #[error(
        "engine event \"{event}\" is fed through its own SessionManager method, not handle_event"
    )]
    DedicatedEntryPoint {
        /// The event.
        event: EngineEvent,
    },
    /// The most sessions allowed are held.
    #[error("at most {max} DTP sessions may be held at once")]
    TooManySessions {
        /// The ceiling.
        max: usize,
    },
    /// The random bytes gave an id already in use: draw new ones.
    #[error("session id {session_id} is already in use; draw new random bytes")]
    DuplicateSessionId {
        /// The id.
        session_id: SessionId,
    },
    /// The peer identity is over its ceiling.
    #[error("peer identity of {len} bytes exceeds the ceiling {max}")]
    PeerIdentityTooLong {
        /// Its length.
        len: usize,
        /// The ceiling.
        max: usize,
    },
    /// SPEC SES-2: the store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SessionError {
    /// The wire code a driver reports.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::UnknownSession { .. } => ErrorCode::E_SESSION_NOT_FOUND,
            Self::ResumeRefused { .. } => ErrorCode::RESUME_FAILED,
            Self::Illegal(e) => e.code(),
            Self::DedicatedEntryPoint { .. } | Self::DuplicateSessionId { .. } => {
                ErrorCode::INTERNAL
            }
            Self::TooManySessions { .. } | Self::PeerIdentityTooLong { .. } => {
                ErrorCode::LIMIT_EXCEEDED
            }
            Self::Store(e) => e.code(),
        }
    }
}
