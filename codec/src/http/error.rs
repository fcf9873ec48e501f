//! Why a request head (or a WebSocket handshake, or a response header) was
//! refused, and the status code to answer with.

use std::fmt;

use bytes::BytesMut;

/// A refusal: every variant maps to exactly one HTTP status code
/// ([`HttpError::status`]) and a short fixed reason ([`HttpError::reason`]).
///
/// No variant carries bytes from the peer, so neither the `Display` text nor
/// [`HttpError::to_response`] can echo untrusted input (SPEC RT-14: raw
/// native errors and payloads are never reflected or logged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpError {
    /// 400: the request line or the head's framing is malformed (bad method
    /// token, missing spaces, bad line ending, …).
    Syntax,
    /// 400: a header name or value holds a byte it may not (control
    /// characters, a space before the colon, obs-fold continuation lines).
    InvalidHeader,
    /// 400: the request target is not in origin form (`/path?query`),
    /// absolute form (`http://host/path`) or asterisk form (`OPTIONS *`), or
    /// holds non-ASCII bytes or a fragment (`#`).
    InvalidTarget,
    /// 431: more header fields than [`HttpLimits::max_headers`](super::HttpLimits).
    TooManyHeaders,
    /// 431: the head is longer than [`HttpLimits::max_head_bytes`](super::HttpLimits).
    HeadTooLarge,
    /// 414: the request target is longer than [`HttpLimits::max_uri_len`](super::HttpLimits).
    UriTooLong,
    /// 505: the request line names a version other than HTTP/1.0 and HTTP/1.1.
    VersionNotSupported,
    /// 400: a `Content-Length` that is not a plain decimal number (RFC 9112 §6.3).
    InvalidContentLength,
    /// 400: more than one `Content-Length` field, equal or not (a request
    /// smuggling vector; RFC 9112 §6.3 lets a server refuse them).
    DuplicateContentLength,
    /// 400: `Content-Length` and `Transfer-Encoding` together (RFC 9112 §6.1).
    ContentLengthWithTransferEncoding,
    /// 501: a `Transfer-Encoding` on a request: bodies are accepted with a
    /// `Content-Length` only.
    TransferEncodingNotImplemented,
    /// 413: a `Content-Length` above [`HttpLimits::max_body_bytes`](super::HttpLimits).
    BodyTooLarge,
    /// 400: more than one `Host` field (RFC 9112 §3.2).
    DuplicateHost,
    /// 405: a WebSocket upgrade with a method other than GET (RFC 6455 §4.2.1).
    WsMethodNotAllowed,
    /// 400: a WebSocket upgrade over HTTP/1.0 (RFC 6455 §4.2.1 needs 1.1).
    WsNotHttp11,
    /// 400: a WebSocket upgrade without a `Host` field.
    WsMissingHost,
    /// 400: WebSocket headers without `Upgrade: websocket`.
    WsMissingUpgrade,
    /// 400: a WebSocket upgrade without an `upgrade` token in `Connection`.
    WsMissingConnectionUpgrade,
    /// 400: `Sec-WebSocket-Key` missing, repeated, or not the base64 of
    /// exactly 16 bytes.
    WsInvalidKey,
    /// 426: `Sec-WebSocket-Version` missing or not `13`; the response must
    /// carry `Sec-WebSocket-Version: 13` (RFC 6455 §4.2.2), see
    /// [`HttpError::extra_headers`].
    WsUnsupportedVersion,
    /// 400: a `Sec-WebSocket-Protocol` entry that is not a token, or more
    /// than one `Origin` field.
    WsInvalidHandshakeField,
    /// 500: our own code tried to write a response header with a name that
    /// is not a token, a value with a control character (CR, LF, NUL, …), or
    /// a framing header (`Content-Length`, `Transfer-Encoding`) that only
    /// the dedicated builder methods may write.
    InvalidResponseHeader,
}

impl HttpError {
    /// The status code to answer with.
    pub fn status(self) -> u16 {
        match self {
            Self::TooManyHeaders | Self::HeadTooLarge => 431,
            Self::UriTooLong => 414,
            Self::VersionNotSupported => 505,
            Self::TransferEncodingNotImplemented => 501,
            Self::BodyTooLarge => 413,
            Self::WsMethodNotAllowed => 405,
            Self::WsUnsupportedVersion => 426,
            Self::InvalidResponseHeader => 500,
            Self::Syntax
            | Self::InvalidHeader
            | Self::InvalidTarget
            | Self::InvalidContentLength
            | Self::DuplicateContentLength
            | Self::ContentLengthWithTransferEncoding
            | Self::DuplicateHost
            | Self::WsNotHttp11
            | Self::WsMissingHost
            | Self::WsMissingUpgrade
            | Self::WsMissingConnectionUpgrade
            | Self::WsInvalidKey
            | Self::WsInvalidHandshakeField => 400,
        }
    }

    /// A short fixed description, safe to send as a response body or to log.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Syntax => "malformed request head",
            Self::InvalidHeader => "invalid header field",
            Self::InvalidTarget => "invalid request target",
            Self::TooManyHeaders => "too many header fields",
            Self::HeadTooLarge => "request head too large",
            Self::UriTooLong => "request target too long",
            Self::VersionNotSupported => "only HTTP/1.0 and HTTP/1.1 are supported",
            Self::InvalidContentLength => "invalid Content-Length",
            Self::DuplicateContentLength => "more than one Content-Length",
            Self::ContentLengthWithTransferEncoding => "Content-Length with Transfer-Encoding",
            Self::TransferEncodingNotImplemented => {
                "Transfer-Encoding is not supported on requests; send Content-Length"
            }
            Self::BodyTooLarge => "request body too large",
            Self::DuplicateHost => "more than one Host",
            Self::WsMethodNotAllowed => "WebSocket upgrade needs GET",
            Self::WsNotHttp11 => "WebSocket upgrade needs HTTP/1.1",
            Self::WsMissingHost => "WebSocket upgrade without Host",
            Self::WsMissingUpgrade => "WebSocket upgrade without Upgrade: websocket",
            Self::WsMissingConnectionUpgrade => "WebSocket upgrade without Connection: upgrade",
            Self::WsInvalidKey => "invalid Sec-WebSocket-Key",
            Self::WsUnsupportedVersion => {
                "unsupported WebSocket version; send Sec-WebSocket-Version: 13"
            }
            Self::WsInvalidHandshakeField => "invalid WebSocket handshake field",
            Self::InvalidResponseHeader => "invalid response header",
        }
    }

    /// Header fields the refusal must carry: `Sec-WebSocket-Version: 13` on
    /// a 426 (RFC 6455 §4.2.2) and `Allow: GET` on a 405 (RFC 9110 §15.5.6).
    pub fn extra_headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::WsUnsupportedVersion => &[("Sec-WebSocket-Version", "13")],
            Self::WsMethodNotAllowed => &[("Allow", "GET")],
            _ => &[],
        }
    }

    /// The whole refusal: status line, [`HttpError::extra_headers`],
    /// `Content-Type: text/plain; charset=utf-8`, `Connection: close`,
    /// `Content-Length` and [`HttpError::reason`] as the body. The connection
    /// must be closed after sending it: after a refused head the framing of
    /// what follows is unknown.
    pub fn to_response(self) -> BytesMut {
        super::response::error_response(self)
    }
}

/// Renders as `<status> <reason>`.
impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status(), self.reason())
    }
}

impl std::error::Error for HttpError {}
