//! WebSocket protocol errors and close codes (RFC 6455 §7.4).

use std::fmt;

/// A close status code (RFC 6455 §7.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// 1000: normal closure.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001: the endpoint is going away.
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1002: protocol error.
    pub const PROTOCOL_ERROR: CloseCode = CloseCode(1002);
    /// 1003: a data type the endpoint cannot accept (e.g. binary on `realtime.v1`, SPEC RT-9).
    pub const UNSUPPORTED_DATA: CloseCode = CloseCode(1003);
    /// 1007: payload data inconsistent with the message type (invalid UTF-8).
    pub const INVALID_PAYLOAD: CloseCode = CloseCode(1007);
    /// 1008: policy violation.
    pub const POLICY_VIOLATION: CloseCode = CloseCode(1008);
    /// 1009: message too big.
    pub const MESSAGE_TOO_BIG: CloseCode = CloseCode(1009);
    /// 1010: the client expected an extension the server did not negotiate.
    pub const MANDATORY_EXTENSION: CloseCode = CloseCode(1010);
    /// 1011: the server met an unexpected condition.
    pub const INTERNAL_ERROR: CloseCode = CloseCode(1011);

    /// RFC 6455 §7.4.1–7.4.2: may this code appear in a close frame on the
    /// wire? 1000–1003, 1007–1011, 1012–1014 (service restart, try again
    /// later, bad gateway: registered with IANA after RFC 6455, sent by
    /// browsers' peers and accepted by Autobahn|Testsuite) and 3000–4999
    /// may; 1004, 1005, 1006, 1015 (reserved / never sent) and everything
    /// below 1000 or from 5000 may not.
    pub fn is_valid_on_wire(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A WebSocket protocol violation, where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsError {
    /// What is wrong.
    pub kind: WsErrorKind,
    /// For header errors, the byte offset within the frame header; for
    /// payload errors (UTF-8, close payload), the byte offset within the
    /// message (or the close frame's payload).
    pub offset: u64,
}

/// What is wrong with a frame or a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsErrorKind {
    /// §5.2: RSV1–3 set (the bits, shifted to 0b0xxx) without a negotiated extension.
    ReservedBits(u8),
    /// §5.2: opcode 3–7 or 0xB–0xF.
    UnknownOpcode(u8),
    /// §5.5: a control frame with FIN = 0.
    FragmentedControl,
    /// §5.5: a control frame with a payload over 125 bytes.
    ControlTooLong(u64),
    /// §5.2: a payload length not in its minimal encoding.
    NonMinimalLength(u64),
    /// §5.2: a 64-bit payload length with the most significant bit set.
    LengthTopBit,
    /// §10.4, SPEC RT-10/RT-13: the message would exceed the ceiling.
    MessageTooBig {
        /// Bytes the message would have.
        len: u64,
        /// The ceiling.
        max: u64,
    },
    /// §5.1: a server received an unmasked frame.
    UnmaskedFrame,
    /// §5.1: a client received a masked frame.
    MaskedFrame,
    /// §5.4: a continuation frame with no message in progress.
    UnexpectedContinuation,
    /// §5.4: a new text/binary frame while a fragmented message is in progress.
    ExpectedContinuation,
    /// §5.6, §8.1: text (or a close reason) is not UTF-8.
    InvalidUtf8,
    /// §5.5.1: a close payload of exactly one byte.
    CloseTooShort,
    /// §7.4: a close code that may not appear on the wire.
    InvalidCloseCode(u16),
    /// §5.5.1: a frame after the peer's close frame.
    FrameAfterClose,
    /// The caller fed payload bytes that do not match the frame header (more
    /// than its length, fewer at its end, or out of order): a bug on this
    /// side, not the peer's, so it maps to 1011.
    PayloadMismatch,
}

impl WsErrorKind {
    /// RFC 6455 §7.4.1: the close code to send for this error.
    pub fn close_code(&self) -> CloseCode {
        match self {
            Self::InvalidUtf8 => CloseCode::INVALID_PAYLOAD,
            Self::MessageTooBig { .. } => CloseCode::MESSAGE_TOO_BIG,
            Self::PayloadMismatch => CloseCode::INTERNAL_ERROR,
            _ => CloseCode::PROTOCOL_ERROR,
        }
    }
}

impl WsError {
    pub(crate) fn at(kind: WsErrorKind, offset: u64) -> Self {
        Self { kind, offset }
    }

    /// RFC 6455 §7.4.1: the close code to send for this error.
    pub fn close_code(&self) -> CloseCode {
        self.kind.close_code()
    }
}

impl fmt::Display for WsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ReservedBits(b) => write!(f, "reserved bits set ({b:#05b}) without an extension"),
            Self::UnknownOpcode(op) => write!(f, "unknown opcode {op:#x}"),
            Self::FragmentedControl => write!(f, "control frame with FIN = 0"),
            Self::ControlTooLong(n) => write!(f, "control frame payload {n} exceeds 125"),
            Self::NonMinimalLength(n) => write!(f, "payload length {n} not minimally encoded"),
            Self::LengthTopBit => write!(f, "64-bit payload length has its top bit set"),
            Self::MessageTooBig { len, max } => {
                write!(f, "message of {len} bytes exceeds the maximum {max}")
            }
            Self::UnmaskedFrame => write!(f, "unmasked frame from a client"),
            Self::MaskedFrame => write!(f, "masked frame from a server"),
            Self::UnexpectedContinuation => write!(f, "continuation frame outside a message"),
            Self::ExpectedContinuation => write!(f, "new data frame inside a fragmented message"),
            Self::InvalidUtf8 => write!(f, "not valid UTF-8"),
            Self::CloseTooShort => write!(f, "close payload of one byte"),
            Self::InvalidCloseCode(c) => write!(f, "close code {c} is not valid on the wire"),
            Self::FrameAfterClose => write!(f, "frame after the close frame"),
            Self::PayloadMismatch => write!(f, "payload does not match its frame header"),
        }
    }
}

/// Renders as `<close code> <what> at byte <offset>`.
impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} at byte {}",
            self.close_code(),
            self.kind,
            self.offset
        )
    }
}

impl std::error::Error for WsError {}
