//! The terminal control-plane messages carried in control frames (SPEC §2–3):
//! the bodies of the seeds' `ProtocolMessage`.

use bytes::Bytes;
use uuid::Uuid;

#[cfg(feature = "json")]
use serde::{Deserialize, Serialize};

use crate::error::ErrorCode;
use crate::frame::{SessionId, Terms};

/// One control-plane message. The wire tag of each variant is in FORMAT.md §6.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum ControlMessage {
    /// SPEC TS-5: a runtime asks for a session on a resource.
    AuthRequest(AuthRequest),
    /// SPEC TS-6: the answer to an AuthRequest.
    AuthResult(AuthResult),
    /// SPEC LIV-2, LIV-6: one or more heartbeats (more than one = aggregated).
    Heartbeat(Heartbeat),
    /// SPEC LIV-2: the acknowledgement, same sequence numbers.
    HeartbeatAck(HeartbeatAck),
    /// SPEC TS-13: the runtime releases a session.
    SessionRelease(SessionRelease),
    /// SPEC TS-15: a session changed state.
    SessionStateChanged(SessionStateChanged),
    /// SPEC HO-1: the holder asks to hand control to another Fay.
    SessionTransferRequest(SessionTransferRequest),
    /// SPEC HO-7: a handover failed.
    HandoverFailedNotification(HandoverFailedNotification),
}

impl ControlMessage {
    /// The wire tag of the message type.
    pub(crate) fn tag(&self) -> u8 {
        match self {
            Self::AuthRequest(_) => 1,
            Self::AuthResult(_) => 2,
            Self::Heartbeat(_) => 3,
            Self::HeartbeatAck(_) => 4,
            Self::SessionRelease(_) => 5,
            Self::SessionStateChanged(_) => 6,
            Self::SessionTransferRequest(_) => 7,
            Self::HandoverFailedNotification(_) => 8,
        }
    }

    /// The message's name as the seeds spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::AuthRequest(_) => "AuthRequest",
            Self::AuthResult(_) => "AuthResult",
            Self::Heartbeat(_) => "Heartbeat",
            Self::HeartbeatAck(_) => "HeartbeatAck",
            Self::SessionRelease(_) => "SessionRelease",
            Self::SessionStateChanged(_) => "SessionStateChanged",
            Self::SessionTransferRequest(_) => "SessionTransferRequest",
            Self::HandoverFailedNotification(_) => "HandoverFailedNotification",
        }
    }
}

/// SPEC TS-8, TS-9: how a session uses its resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "snake_case")
)]
#[repr(u8)]
pub enum AccessMode {
    /// Shared reading.
    Read = 1,
    /// Exclusive writing.
    Write = 2,
    /// Exclusive execution.
    Execute = 3,
    /// Exclusive configuration.
    Configure = 4,
}

wire_enum_impl!(AccessMode {
    Read = 1 => "read",
    Write = 2 => "write",
    Execute = 3 => "execute",
    Configure = 4 => "configure",
});

/// SPEC TS-5: AuthRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct AuthRequest {
    /// Chosen by the runtime; the AuthResult echoes it.
    pub request_id: u64,
    /// The Fay asking.
    pub fay_id: String,
    /// The resource asked for.
    pub resource_id: String,
    /// How it will be used.
    pub access_mode: AccessMode,
    /// The signed credential, opaque to the codec.
    #[cfg_attr(
        feature = "json",
        serde(with = "crate::json::hex_bytes", rename = "credential_hex")
    )]
    pub credential: Bytes,
}

/// SPEC TS-6, TS-7: AuthResult.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct AuthResult {
    /// The request answered.
    pub request_id: u64,
    /// A session, or why not.
    pub outcome: AuthOutcome,
}

/// The outcome of an AuthRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)
)]
pub enum AuthOutcome {
    /// A session was created (its id is a UUID v7).
    Granted {
        /// The new session.
        session_id: SessionId,
    },
    /// Refused with an E_* code (E_RESOURCE_BUSY, E_OS_INTEGRATION_FAILED, …).
    Refused {
        /// The code.
        code: ErrorCode,
        /// Text a person can act on.
        message: String,
    },
}

/// SPEC LIV-2: one session's heartbeat (or its acknowledgement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct Beat {
    /// The session kept alive.
    pub session_id: SessionId,
    /// Starts at 0, increases per session.
    pub sequence_number: u64,
}

/// SPEC LIV-2, LIV-6: Heartbeat. One beat is the plain heartbeat; more than
/// one is the aggregated heartbeat option. Never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct Heartbeat {
    /// The beats, one per session.
    pub beats: Vec<Beat>,
}

/// SPEC LIV-2: HeartbeatAck, with the same session ids and sequence numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct HeartbeatAck {
    /// The acknowledged beats.
    pub beats: Vec<Beat>,
}

/// SPEC TS-13: SessionRelease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct SessionRelease {
    /// The session released.
    pub session_id: SessionId,
}

/// SPEC TS-1: the terminal session states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "snake_case")
)]
#[repr(u8)]
pub enum SessionState {
    /// Being set up.
    Creating = 1,
    /// Holding its resource.
    Active = 2,
    /// Being handed over.
    HandoverPending = 3,
    /// Being torn down.
    Terminating = 4,
    /// Gone.
    Terminated = 5,
}

wire_enum_impl!(SessionState {
    Creating = 1 => "creating",
    Active = 2 => "active",
    HandoverPending = 3 => "handover_pending",
    Terminating = 4 => "terminating",
    Terminated = 5 => "terminated",
});

/// SPEC TS-15: SessionStateChanged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct SessionStateChanged {
    /// The session.
    pub session_id: SessionId,
    /// Its new state.
    pub new_state: SessionState,
    /// Why (TS-11's reasons: `client_release`, `liveness_timeout`, …).
    #[cfg_attr(
        feature = "json",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub reason: Option<String>,
    /// Further details.
    #[cfg_attr(feature = "json", serde(default))]
    pub details: Terms,
}

/// SPEC HO-1: SessionTransferRequest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct SessionTransferRequest {
    /// The session holding control now.
    pub source_session_id: SessionId,
    /// Who should take over (`human:<terminal_id>` for a person, HO-9).
    pub target_fay_id: String,
    /// The target's credential, opaque to the codec.
    #[cfg_attr(
        feature = "json",
        serde(with = "crate::json::hex_bytes", rename = "target_credential_hex")
    )]
    pub target_credential: Bytes,
    /// Why.
    pub handover_reason: String,
    /// Optional metadata (empty when absent).
    #[cfg_attr(feature = "json", serde(default))]
    pub handover_metadata: Terms,
}

/// SPEC HO-7: why a handover failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(rename_all = "snake_case")
)]
#[repr(u8)]
pub enum HandoverFailedReason {
    /// Not done within the policy's hard timeout.
    Timeout = 1,
    /// The handover policy said no.
    PolicyRejected = 2,
    /// Releasing the source failed (T0–T2).
    ReleaseFailed = 3,
    /// Acquiring for the target failed (T3–T4).
    AcquireFailed = 4,
}

wire_enum_impl!(HandoverFailedReason {
    Timeout = 1 => "timeout",
    PolicyRejected = 2 => "policy_rejected",
    ReleaseFailed = 3 => "release_failed",
    AcquireFailed = 4 => "acquire_failed",
});

/// SPEC HO-7: HandoverFailedNotification.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "json",
    derive(Serialize, Deserialize),
    serde(deny_unknown_fields)
)]
pub struct HandoverFailedNotification {
    /// The handover (UUID v4).
    pub handover_id: Uuid,
    /// The session that held control.
    pub source_session_id: SessionId,
    /// The Fay that was to take over.
    pub target_fay_id: String,
    /// Why it failed.
    pub reason: HandoverFailedReason,
    /// Further details (empty when absent).
    #[cfg_attr(feature = "json", serde(default))]
    pub details: Terms,
}
