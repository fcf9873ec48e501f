//! The endpoint's errors, each mapped to its SPEC code.

use std::fmt;

use dtp_codec::{AgreementId, DecodeError, EncodeError, ErrorCode, FragmentId, FrameKind};
use dtp_crypto::aead::AeadError;
use dtp_crypto::cap::CapError;
use dtp_proto::agreement::AgreementError;
use dtp_proto::dag::DagError;
use dtp_proto::fsm::{EngineState, IllegalTransition};
use dtp_proto::resume::ResumeError;

/// Everything that can go wrong on a DTP connection, from the peer's bytes
/// or from an application call. [`DtpError::code`] is the number a close
/// frame carries (FORMAT.md §7).
///
/// An error from an application call changes nothing. An error from the
/// peer is reported as [`DtpEvent::Error`](super::DtpEvent::Error); when it
/// is fatal the endpoint also sends a close frame with the code and reports
/// [`DtpEvent::Closed`](super::DtpEvent::Closed).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DtpError {
    /// SPEC SEQ-1, FSM: CAP failed or timed out (2001–2006).
    Cap(CapError),
    /// SPEC SEQ-1: a frame other than handshake or close arrived before CAP
    /// finished (CAP_FAILED: it aborts the handshake).
    FrameBeforeCap {
        /// The frame's kind.
        kind: FrameKind,
    },
    /// SPEC SEQ-1, ENC-2: a plaintext frame other than close arrived after
    /// CAP: every frame after CAP must be sealed (DECRYPT_FAILED).
    PlaintextAfterCap {
        /// The frame's kind.
        kind: FrameKind,
    },
    /// A handshake message arrived out of order or after CAP ended
    /// (CAP_FAILED).
    UnexpectedHandshake {
        /// The stage expected (0: none).
        expected: u8,
        /// The stage received.
        found: u8,
    },
    /// SPEC ENC-1 … ENC-4: sealing or opening failed (5001–5003, or a
    /// codec code for a body that authenticated but does not decode).
    Aead(AeadError),
    /// SPEC FRM-5: the bytes are not exactly one valid frame.
    Decode(DecodeError),
    /// A frame could not be encoded (over a ceiling).
    Encode(EncodeError),
    /// SPEC AGR-1 … AGR-4: an agreement operation was refused.
    Agreement(AgreementError),
    /// SPEC SEQ-4: a data frame names (or inherits) no active agreement
    /// (UNKNOWN_AGREEMENT 3002).
    UnknownAgreement {
        /// The agreement, if the frame named one.
        agreement_id: Option<AgreementId>,
    },
    /// SPEC SEQ-4: naming an agreement on one more stream passes the bound.
    TooManyStreams {
        /// The bound.
        max: usize,
    },
    /// SPEC DAG-1, DAG-2: the DAG Manager refused a fragment (4001, 4002,
    /// or a codec code for a reused fragment id).
    Dag {
        /// The agreement.
        agreement_id: AgreementId,
        /// The fragment.
        fragment_id: FragmentId,
        /// Why.
        error: DagError,
    },
    /// SPEC RES-1 … RES-4: the Resume Manager refused (BUFFER_FULL 6001 for
    /// a send into a full cache: wait for `DtpEvent::Writable`).
    Resume(ResumeError),
    /// SPEC SEQ-5: the resume handshake failed (RESUME_FAILED 6002).
    ResumeFailed {
        /// What went wrong (the peer only sees the code).
        reason: &'static str,
    },
    /// SPEC SES-4: the session was idle for longer than its timeout
    /// (SESSION_TIMEOUT 3003).
    SessionTimeout,
    /// The call needs an established session (CAP finished and, on the
    /// terminal, the Fay's first frame seen; not while resuming).
    NotEstablished {
        /// The engine state when the call was made.
        state: EngineState,
    },
    /// The connection is closed (with this code); nothing more can be sent.
    Closed {
        /// The code the connection closed with.
        code: ErrorCode,
    },
    /// The peer closed the connection with this code and reason.
    PeerClosed {
        /// The peer's code.
        code: ErrorCode,
        /// The peer's reason.
        reason: String,
    },
    /// A bounded queue of the endpoint is full (LIMIT_EXCEEDED): drain
    /// `poll_transmit` / `poll_event` after every input.
    QueueFull {
        /// Which queue.
        what: &'static str,
        /// Its ceiling.
        max: usize,
    },
    /// SPEC FSM-2: the event is not allowed in the current state.
    Illegal(IllegalTransition),
    /// A message of a kind this endpoint does not accept here (INCONSISTENT).
    Unexpected {
        /// The kind.
        kind: FrameKind,
        /// Why it is not accepted.
        why: &'static str,
    },
    /// A configuration the endpoint cannot run with (INTERNAL).
    Config(&'static str),
}

impl DtpError {
    /// The wire code of the error (a close frame's code).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Cap(e) => e.code(),
            Self::FrameBeforeCap { .. } | Self::UnexpectedHandshake { .. } => ErrorCode::CAP_FAILED,
            Self::PlaintextAfterCap { .. } => ErrorCode::DECRYPT_FAILED,
            Self::Aead(e) => e.code(),
            Self::Decode(e) => e.code(),
            Self::Encode(EncodeError::Inconsistent(_)) => ErrorCode::INCONSISTENT,
            Self::Encode(EncodeError::BufferTooSmall { .. }) => ErrorCode::INTERNAL,
            Self::Encode(EncodeError::LimitExceeded { .. }) => ErrorCode::LIMIT_EXCEEDED,
            Self::Agreement(e) => e.code(),
            Self::UnknownAgreement { .. } => ErrorCode::UNKNOWN_AGREEMENT,
            Self::TooManyStreams { .. } | Self::QueueFull { .. } => ErrorCode::LIMIT_EXCEEDED,
            Self::Dag { error, .. } => error.code(),
            Self::Resume(e) => e.code(),
            Self::ResumeFailed { .. } => ErrorCode::RESUME_FAILED,
            Self::SessionTimeout => ErrorCode::SESSION_TIMEOUT,
            Self::NotEstablished { .. } => ErrorCode::KEY_NOT_READY,
            Self::Closed { code } | Self::PeerClosed { code, .. } => *code,
            Self::Illegal(e) => e.code(),
            Self::Unexpected { .. } => ErrorCode::INCONSISTENT,
            Self::Config(_) => ErrorCode::INTERNAL,
        }
    }
}

impl fmt::Display for DtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = self.code();
        match self {
            Self::Cap(e) => write!(f, "{code} CAP failed: {e}"),
            Self::FrameBeforeCap { kind } => write!(
                f,
                "{code} a {} frame arrived before CAP finished; only handshake and close frames may precede it (SEQ-1)",
                kind.name()
            ),
            Self::PlaintextAfterCap { kind } => write!(
                f,
                "{code} a plaintext {} frame arrived after CAP; every frame after CAP must be sealed",
                kind.name()
            ),
            Self::UnexpectedHandshake { expected, found } => write!(
                f,
                "{code} handshake message {found} arrived where {expected} was expected (0: none)"
            ),
            Self::Aead(e) => write!(f, "{e}"),
            Self::Decode(e) => write!(f, "{e}"),
            Self::Encode(e) => write!(f, "{code} cannot encode the frame: {e}"),
            Self::Agreement(e) => write!(f, "{code} {e}"),
            Self::UnknownAgreement {
                agreement_id: Some(id),
            } => write!(
                f,
                "{code} data frame names agreement {id}, which is not active"
            ),
            Self::UnknownAgreement { agreement_id: None } => write!(
                f,
                "{code} data frame omits its agreement id and nothing on its stream names one"
            ),
            Self::TooManyStreams { max } => {
                write!(f, "{code} more than {max} streams carry agreements")
            }
            Self::Dag {
                agreement_id,
                fragment_id,
                error,
            } => write!(
                f,
                "agreement {agreement_id} fragment {fragment_id}: {error}"
            ),
            Self::Resume(e) => write!(f, "{e}"),
            Self::ResumeFailed { reason } => write!(f, "{code} resume failed: {reason}"),
            Self::SessionTimeout => write!(
                f,
                "{code} the session had no agreement and no traffic for its idle timeout"
            ),
            Self::NotEstablished { state } => write!(
                f,
                "{code} no established session (state {state}): wait for DtpEvent::Established"
            ),
            Self::Closed { code } => write!(f, "the connection is closed ({code})"),
            Self::PeerClosed { code, reason } => {
                write!(f, "the peer closed the connection: {code}: {reason}")
            }
            Self::QueueFull { what, max } => write!(
                f,
                "{code} the {what} queue holds its ceiling of {max}; drain poll_transmit and poll_event after every input"
            ),
            Self::Illegal(e) => write!(f, "{code} {e}"),
            Self::Unexpected { kind, why } => {
                write!(f, "{code} unexpected {} frame: {why}", kind.name())
            }
            Self::Config(what) => write!(f, "{code} endpoint configuration: {what}"),
        }
    }
}

impl std::error::Error for DtpError {}

impl From<CapError> for DtpError {
    fn from(e: CapError) -> Self {
        Self::Cap(e)
    }
}

impl From<AeadError> for DtpError {
    fn from(e: AeadError) -> Self {
        Self::Aead(e)
    }
}

impl From<DecodeError> for DtpError {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

impl From<AgreementError> for DtpError {
    fn from(e: AgreementError) -> Self {
        Self::Agreement(e)
    }
}

impl From<ResumeError> for DtpError {
    fn from(e: ResumeError) -> Self {
        Self::Resume(e)
    }
}

impl From<IllegalTransition> for DtpError {
    fn from(e: IllegalTransition) -> Self {
        Self::Illegal(e)
    }
}
