//! Error codes on the wire, and the codec's own errors.

use std::fmt;

#[cfg(feature = "json")]
use serde::{Deserialize, Serialize};

/// A numeric error code as carried by close frames and refusals.
///
/// Codes this version does not know are kept as they are (a newer peer may
/// send them); [`ErrorCode::name`] then returns `None`. The table is in
/// FORMAT.md §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "json", derive(Serialize, Deserialize), serde(transparent))]
pub struct ErrorCode(pub u16);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal,)*) => {
        impl ErrorCode {
            $($(#[$doc])* pub const $name: ErrorCode = ErrorCode($value);)*

            /// The code's name, if this version knows it.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }

            /// The code for a name (as [`ErrorCode::name`] spells it).
            pub fn from_name(name: &str) -> Option<ErrorCode> {
                match name {
                    $(stringify!($name) => Some(ErrorCode::$name),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    /// A normal close, no error.
    NORMAL = 0,
    /// The frame does not start with the DTP magic.
    BAD_MAGIC = 1001,
    /// The frame's version is not one this peer speaks.
    UNSUPPORTED_VERSION = 1002,
    /// The frame's kind (or a message type) is unknown.
    UNKNOWN_KIND = 1003,
    /// A reserved bit or byte is not zero.
    RESERVED_BITS = 1004,
    /// The AEAD algorithm identifier is unknown.
    UNKNOWN_ALGORITHM = 1005,
    /// The frame is longer than the receiver's maximum.
    FRAME_TOO_LARGE = 1006,
    /// A field runs past the end of the frame.
    TRUNCATED = 1007,
    /// Bytes are left after the last field of a fixed-layout body.
    TRAILING_BYTES = 1008,
    /// A field holds a value outside its domain.
    INVALID_VALUE = 1009,
    /// A string is not UTF-8.
    INVALID_UTF8 = 1010,
    /// A count or length exceeds its ceiling.
    LIMIT_EXCEEDED = 1011,
    /// A map's keys are not strictly ascending.
    NOT_CANONICAL = 1012,
    /// Two fields contradict each other.
    INCONSISTENT = 1013,
    /// CAP identity verification failed.
    CAP_FAILED = 2001,
    /// CAP did not finish in time.
    CAP_TIMEOUT = 2002,
    /// A credential's signature or content is invalid.
    CREDENTIAL_INVALID = 2003,
    /// A credential is past its not_after.
    CREDENTIAL_EXPIRED = 2004,
    /// A credential was revoked.
    CREDENTIAL_REVOKED = 2005,
    /// A credential names an issuer this terminal does not trust.
    UNKNOWN_ISSUER = 2006,
    /// The peer rejected the agreement.
    AGREEMENT_REJECTED = 3001,
    /// A frame names an agreement that is not active.
    UNKNOWN_AGREEMENT = 3002,
    /// The DTP session timed out (SES-4).
    SESSION_TIMEOUT = 3003,
    /// SPEC DAG-1: the fragment would form a cycle.
    DAG_CYCLE_DETECTED = 4001,
    /// Too many fragments wait on missing dependencies.
    DAG_PENDING_LIMIT = 4002,
    /// SPEC ENC-3: encryption asked for before CAP finished key exchange.
    KEY_NOT_READY = 5001,
    /// A sealed frame failed authentication.
    DECRYPT_FAILED = 5002,
    /// A sealed frame names a key version not in use.
    KEY_VERSION_MISMATCH = 5003,
    /// SPEC RES-4: the resume cache is full; sending pauses.
    BUFFER_FULL = 6001,
    /// SPEC SEQ-5: the resume handshake failed.
    RESUME_FAILED = 6002,
    /// SPEC TS-9: the resource is held in a conflicting mode.
    E_RESOURCE_BUSY = 7001,
    /// SPEC TS-7: the OS access-control grant failed.
    E_OS_INTEGRATION_FAILED = 7002,
    /// SPEC TS-13: no such session.
    E_SESSION_NOT_FOUND = 7003,
    /// SPEC LIV-5: the session has ended.
    E_SESSION_TERMINATED = 7004,
    /// SPEC TS-17: a session limit was reached.
    E_SESSION_LIMIT_EXCEEDED = 7005,
    /// The credential does not grant the resource in that mode.
    E_UNAUTHORIZED = 7006,
    /// SPEC LIV-3: a heartbeat's sequence number went backwards.
    E_HEARTBEAT_REPLAY = 7007,
    /// SPEC TS-1: the terminal has no resource of that id.
    E_RESOURCE_UNKNOWN = 7008,
    /// SPEC TS-10: the resource is marked unavailable (not held by anyone).
    E_RESOURCE_UNAVAILABLE = 7009,
    /// SPEC HO-2 (1): the source session is not active or the initiator may not ask.
    E_HANDOVER_INVALID_SOURCE = 8001,
    /// SPEC HO-2 (2): the target's credential or authorisation is invalid.
    E_HANDOVER_INVALID_TARGET = 8002,
    /// SPEC HO-2 (3): the handover policy refused.
    E_HANDOVER_REJECTED_BY_POLICY = 8003,
    /// SPEC HO-5: the handover failed while releasing the source.
    E_HANDOVER_FAILED_AT_RELEASE = 8004,
    /// SPEC HO-5: the handover failed while acquiring for the target.
    E_HANDOVER_FAILED_AT_ACQUIRE = 8005,
    /// SPEC HO-6: another handover of the resource is in progress.
    E_HANDOVER_IN_PROGRESS = 8006,
    /// SPEC HO-8: too many retries for this (source, target) pair.
    E_HANDOVER_RETRY_LIMIT = 8007,
    /// SPEC HO-7: the handover's deadline passed before it was decided.
    E_HANDOVER_TIMEOUT = 8008,
    /// The peer failed in a way it does not explain further.
    INTERNAL = 9001,
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{} {}", self.0, name),
            None => write!(f, "{} UNKNOWN", self.0),
        }
    }
}

/// SPEC FRM-5: why bytes are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ends before the frame does: at least `needed` bytes in all
    /// are required. Not an error on a stream: read more and try again.
    Incomplete {
        /// Total input length needed before decoding can go on.
        needed: usize,
    },
    /// The bytes can never become a valid frame.
    Malformed {
        /// What is wrong.
        kind: DecodeErrorKind,
        /// The field where it was found (`header.kind`, `data.relations[2].type`, …).
        field: &'static str,
        /// The byte offset of that field, from the start of the input.
        offset: usize,
    },
}

/// What is wrong with a malformed frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The magic bytes are not `D7 50`.
    BadMagic,
    /// The version byte is not one this crate speaks.
    UnsupportedVersion(u8),
    /// The kind byte (or a control message tag) is unknown.
    UnknownKind(u8),
    /// Reserved bits are set.
    ReservedBits(u8),
    /// The algorithm byte is unknown.
    UnknownAlgorithm(u8),
    /// The frame's declared length exceeds the receiver's maximum.
    FrameTooLarge {
        /// Declared length after the header.
        len: u64,
        /// The receiver's maximum.
        max: u64,
    },
    /// A field runs past the end of the frame's declared length.
    Truncated,
    /// Bytes are left after the body's last field.
    TrailingBytes(usize),
    /// A value outside the field's domain.
    InvalidValue(u64),
    /// A string is not UTF-8.
    InvalidUtf8,
    /// A count or length is over its ceiling.
    LimitExceeded {
        /// What was found.
        found: u64,
        /// The ceiling.
        max: u64,
    },
    /// Map keys are not strictly ascending (duplicates or unsorted).
    NotCanonical,
    /// Fields contradict each other.
    Inconsistent(&'static str),
}

impl DecodeErrorKind {
    /// The wire error code a receiver reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadMagic => ErrorCode::BAD_MAGIC,
            Self::UnsupportedVersion(_) => ErrorCode::UNSUPPORTED_VERSION,
            Self::UnknownKind(_) => ErrorCode::UNKNOWN_KIND,
            Self::ReservedBits(_) => ErrorCode::RESERVED_BITS,
            Self::UnknownAlgorithm(_) => ErrorCode::UNKNOWN_ALGORITHM,
            Self::FrameTooLarge { .. } => ErrorCode::FRAME_TOO_LARGE,
            Self::Truncated => ErrorCode::TRUNCATED,
            Self::TrailingBytes(_) => ErrorCode::TRAILING_BYTES,
            Self::InvalidValue(_) => ErrorCode::INVALID_VALUE,
            Self::InvalidUtf8 => ErrorCode::INVALID_UTF8,
            Self::LimitExceeded { .. } => ErrorCode::LIMIT_EXCEEDED,
            Self::NotCanonical => ErrorCode::NOT_CANONICAL,
            Self::Inconsistent(_) => ErrorCode::INCONSISTENT,
        }
    }
}

impl DecodeError {
    /// The same error with its offset moved by `by` bytes (for an input that
    /// was a slice of a larger one).
    pub fn shifted(self, by: usize) -> Self {
        match self {
            Self::Incomplete { needed } => Self::Incomplete {
                needed: needed.saturating_add(by),
            },
            Self::Malformed {
                kind,
                field,
                offset,
            } => Self::Malformed {
                kind,
                field,
                offset: offset.saturating_add(by),
            },
        }
    }

    /// The wire error code a receiver reports ([`ErrorCode::TRUNCATED`] for
    /// an input that ended early).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Incomplete { .. } => ErrorCode::TRUNCATED,
            Self::Malformed { kind, .. } => kind.code(),
        }
    }
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic => write!(f, "not a DTP frame (magic is not D7 50)"),
            Self::UnsupportedVersion(v) => {
                write!(f, "version {v} is not supported (this peer speaks 1)")
            }
            Self::UnknownKind(k) => write!(f, "unknown kind or type {k}"),
            Self::ReservedBits(b) => write!(f, "reserved bits set ({b:#04x})"),
            Self::UnknownAlgorithm(a) => write!(f, "unknown AEAD algorithm {a}"),
            Self::FrameTooLarge { len, max } => {
                write!(f, "frame length {len} exceeds the maximum {max}")
            }
            Self::Truncated => write!(f, "runs past the end of the frame"),
            Self::TrailingBytes(n) => write!(f, "{n} unexpected bytes after the last field"),
            Self::InvalidValue(v) => write!(f, "invalid value {v}"),
            Self::InvalidUtf8 => write!(f, "not valid UTF-8"),
            Self::LimitExceeded { found, max } => write!(f, "{found} exceeds the ceiling {max}"),
            Self::NotCanonical => write!(f, "keys not strictly ascending (duplicate or unsorted)"),
            Self::Inconsistent(what) => write!(f, "{what}"),
        }
    }
}

/// Renders as `<code> <NAME> <field>: <what> at byte <offset>`.
impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Incomplete { needed } => write!(
                f,
                "{} input ends early: {needed} bytes needed at byte {needed}",
                ErrorCode::TRUNCATED
            ),
            Self::Malformed {
                kind,
                field,
                offset,
            } => {
                write!(f, "{} {field}: {kind} at byte {offset}", kind.code())
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a frame cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// A field is over the ceiling the limits (or the format) allow.
    LimitExceeded {
        /// The field.
        field: &'static str,
        /// Its size or count.
        found: u64,
        /// The ceiling.
        max: u64,
    },
    /// Fields contradict each other (e.g. an adjustment without agreement id).
    Inconsistent(&'static str),
    /// The destination buffer has room for fewer bytes than the frame needs.
    BufferTooSmall {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes the buffer has.
        available: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LimitExceeded { field, found, max } => {
                write!(f, "{field}: {found} exceeds the ceiling {max}")
            }
            Self::Inconsistent(what) => write!(f, "{what}"),
            Self::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "buffer too small: {needed} bytes needed, {available} available"
                )
            }
        }
    }
}

impl std::error::Error for EncodeError {}
