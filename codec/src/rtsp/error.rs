//! Why RTSP bytes were refused, where in them, and the status code a
//! server answers with.

use std::fmt;

/// A refusal of RTSP input (or of a message our own code tried to write):
/// what is wrong and the byte offset where it was found.
///
/// For a parsed message the offset counts from the first byte given to the
/// parser; for a header value read afterwards (`Session`, `Transport`) from
/// the same first byte, through the value's recorded position. No variant
/// carries the peer's bytes, so the `Display` text never echoes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RtspError {
    /// What is wrong.
    pub kind: RtspErrorKind,
    /// Where: a byte offset in the input.
    pub offset: usize,
}

/// What is wrong with an RTSP message or header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RtspErrorKind {
    /// A byte that may not appear in a message head (a control character
    /// other than HTAB, or DEL).
    InvalidByte,
    /// A CR not followed by LF.
    LoneCr,
    /// The request line is not `METHOD SP URI SP RTSP/d.d`, or the status
    /// line not `RTSP/d.d SP 3DIGIT SP reason`.
    StartLine,
    /// The method is not a token.
    Method,
    /// The request URI is empty or holds a byte it may not.
    Uri,
    /// The request URI is longer than [`RtspLimits::max_uri_len`](super::RtspLimits).
    UriTooLong,
    /// The version is not `RTSP/` DIGIT `.` DIGIT.
    Version,
    /// The status code is not three digits from 100 to 599.
    Status,
    /// A header line without a colon, or whose name is not a token.
    HeaderName,
    /// A header value that is not UTF-8.
    HeaderValue,
    /// A continuation line (leading space) with no header before it.
    Folding,
    /// More header fields than [`RtspLimits::max_headers`](super::RtspLimits).
    TooManyHeaders,
    /// No end of head within [`RtspLimits::max_head_bytes`](super::RtspLimits).
    HeadTooLarge,
    /// A `Content-Length` that is not a plain decimal number, or two of them.
    ContentLength,
    /// A body longer than [`RtspLimits::max_body_bytes`](super::RtspLimits).
    BodyTooLarge,
    /// A `CSeq` that is not a decimal below 2^32, or two of them.
    CSeq,
    /// A `Session` value that is not `session-id [;timeout=delta-seconds]`.
    Session,
    /// A `Transport` value that is not a list of transport specs
    /// (RFC 2326 §12.39), or whose `interleaved` is not `channel[-channel]`.
    Transport,
    /// A request where a response was expected, or the other way round.
    UnexpectedKind,
    /// Our own code tried to write a field it may not (a name that is not a
    /// token, a value with a control character, a `CSeq` or
    /// `Content-Length` outside their own fields, a URI with a space).
    Outgoing,
}

impl RtspErrorKind {
    /// A short fixed description, safe to send or to log.
    pub fn reason(self) -> &'static str {
        match self {
            Self::InvalidByte => "a control character in the message head",
            Self::LoneCr => "a CR not followed by LF",
            Self::StartLine => "malformed request or status line",
            Self::Method => "the method is not a token",
            Self::Uri => "invalid request URI",
            Self::UriTooLong => "request URI too long",
            Self::Version => "the version is not RTSP/d.d",
            Self::Status => "the status code is not 100 to 599",
            Self::HeaderName => "malformed header line",
            Self::HeaderValue => "a header value that is not UTF-8",
            Self::Folding => "a continuation line with no header before it",
            Self::TooManyHeaders => "too many header fields",
            Self::HeadTooLarge => "message head too large",
            Self::ContentLength => "invalid or repeated Content-Length",
            Self::BodyTooLarge => "message body too large",
            Self::CSeq => "invalid or repeated CSeq",
            Self::Session => "invalid Session header",
            Self::Transport => "invalid Transport header",
            Self::UnexpectedKind => "a request where a response was expected, or the reverse",
            Self::Outgoing => "a field that may not be written",
        }
    }
}

impl RtspError {
    pub(crate) fn at(kind: RtspErrorKind, offset: usize) -> Self {
        Self { kind, offset }
    }

    /// The status code a server answers a request refused for this reason
    /// with (RFC 2326 §7.1.1): 414 for a long URI, 413 for a long body,
    /// 505 for a version it cannot read, 500 for our own writing errors,
    /// 400 for the rest.
    pub fn status(self) -> u16 {
        match self.kind {
            RtspErrorKind::UriTooLong => 414,
            RtspErrorKind::BodyTooLarge => 413,
            RtspErrorKind::Version => 505,
            RtspErrorKind::Outgoing => 500,
            _ => 400,
        }
    }
}

/// Renders as `RTSP: <reason> at byte <offset>`.
impl fmt::Display for RtspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RTSP: {} at byte {}", self.kind.reason(), self.offset)
    }
}

impl std::error::Error for RtspError {}
