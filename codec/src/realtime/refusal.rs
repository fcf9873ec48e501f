//! Why a realtime JSON text was refused (SPEC RT-4), each reason mapped to
//! its failure kind (SPEC RT-14).
//!
//! A refusal never carries peer bytes (an unknown key is not echoed; seed
//! §12.3): only the name of the field this side expected, and for the JSON
//! guard the byte offset where the input went wrong.

use std::fmt;

use super::FailureKind;

/// A realtime text refused by the JSON guard or the exact-key schema
/// (SPEC RT-4), in the order RT-4 checks them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The text is longer than the byte ceiling (SPEC RT-13: 64 KiB).
    TooLarge {
        /// Bytes in the text.
        len: usize,
        /// The ceiling.
        max: usize,
    },
    /// The text is not UTF-8.
    InvalidUtf8 {
        /// Offset of the first byte that is not valid UTF-8.
        offset: usize,
    },
    /// The text is not one JSON value (RFC 8259), or has bytes after it.
    Syntax {
        /// Offset of the first byte that does not fit the grammar.
        offset: usize,
    },
    /// Objects and arrays nest deeper than the depth ceiling.
    TooDeep {
        /// Offset of the `{` or `[` that went one level too deep.
        offset: usize,
        /// The ceiling.
        max: usize,
    },
    /// The text holds more values than the element ceiling.
    TooManyElements {
        /// Offset of the first value over the ceiling.
        offset: usize,
        /// The ceiling.
        max: usize,
    },
    /// A number too large for an IEEE 754 double (e.g. `1e400`).
    NumberOutOfRange {
        /// Offset of the number.
        offset: usize,
    },
    /// An object names the same key twice (parsers disagree on which wins).
    DuplicateKey,
    /// The text, or a member that must be one, is not a JSON object.
    NotAnObject,
    /// `protocol` is not this version's literal (`REALTIME_EVENT_V1`, or
    /// `realtime.v1` in WELCOME): unknown or newer protocol, fail closed.
    UnknownProtocol,
    /// A message `type` this version does not know.
    UnknownType,
    /// A message type that only the other side may send (e.g. a client
    /// sending WELCOME, a server sending HEARTBEAT).
    WrongDirection,
    /// An object has a key its schema does not list.
    UnknownKey,
    /// An object lacks a key its schema requires.
    MissingKey(&'static str),
    /// A member has the wrong JSON type (e.g. a number where a string goes).
    WrongType(&'static str),
    /// A string member is empty, too long, or has characters outside its class;
    /// or a number member is out of its range.
    InvalidValue(&'static str),
    /// A sequence member is not a canonical unsigned decimal that fits u64
    /// (`"01"`, `"+1"`, `"1.0"`, `"18446744073709551616"`, …).
    NonCanonicalSequence(&'static str),
    /// `occurredAt` is not a strict RFC 3339 timestamp.
    InvalidTimestamp,
    /// A `recoveryMode` (or `category`, `reason`) outside its closed list.
    UnknownEnumValue(&'static str),
    /// `resumeCursor` does not match `recoveryMode` (SPEC RT-3): `CURSOR`
    /// needs a non-empty string, the others exactly `null`.
    RecoveryCursorMismatch,
}

impl Refusal {
    /// The failure kind to report (SPEC RT-14): the three ceilings are
    /// `EVENT_TOO_LARGE`; a wrong protocol version, an unknown message type
    /// and a message from the wrong side are `PROTOCOL_MISMATCH`; everything
    /// else is `MALFORMED_EVENT`.
    pub const fn failure_kind(&self) -> FailureKind {
        match self {
            Self::TooLarge { .. } | Self::TooDeep { .. } | Self::TooManyElements { .. } => {
                FailureKind::EventTooLarge
            }
            Self::UnknownProtocol | Self::UnknownType | Self::WrongDirection => {
                FailureKind::ProtocolMismatch
            }
            _ => FailureKind::MalformedEvent,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.failure_kind())?;
        match self {
            Self::TooLarge { len, max } => write!(f, "{len} bytes, over the {max}-byte ceiling"),
            Self::InvalidUtf8 { offset } => write!(f, "invalid UTF-8 at byte {offset}"),
            Self::Syntax { offset } => write!(f, "invalid JSON at byte {offset}"),
            Self::TooDeep { offset, max } => {
                write!(f, "nesting deeper than {max} at byte {offset}")
            }
            Self::TooManyElements { offset, max } => {
                write!(f, "more than {max} JSON values (at byte {offset})")
            }
            Self::NumberOutOfRange { offset } => write!(f, "number out of range at byte {offset}"),
            Self::DuplicateKey => f.write_str("an object repeats a key"),
            Self::NotAnObject => f.write_str("expected a JSON object"),
            Self::UnknownProtocol => f.write_str("unknown protocol version"),
            Self::UnknownType => f.write_str("unknown message type"),
            Self::WrongDirection => f.write_str("message type not allowed in this direction"),
            Self::UnknownKey => f.write_str("an object has a key its schema does not list"),
            Self::MissingKey(k) => write!(f, "missing key `{k}`"),
            Self::WrongType(k) => write!(f, "`{k}` has the wrong JSON type"),
            Self::InvalidValue(k) => write!(f, "`{k}` is empty, too long or out of range"),
            Self::NonCanonicalSequence(k) => {
                write!(f, "`{k}` is not a canonical unsigned decimal within u64")
            }
            Self::InvalidTimestamp => f.write_str("`occurredAt` is not strict RFC 3339"),
            Self::UnknownEnumValue(k) => write!(f, "`{k}` is not in its closed list"),
            Self::RecoveryCursorMismatch => {
                f.write_str("`resumeCursor` does not match `recoveryMode`")
            }
        }
    }
}

impl std::error::Error for Refusal {}
