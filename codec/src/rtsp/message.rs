//! RTSP messages as values: [`Request`], [`Response`], their header
//! fields, and how each is written back to bytes.
//!
//! `CSeq` and `Content-Length` are not kept among the header fields: the
//! first is [`Request::cseq`] / [`Response::cseq`], the second is the
//! body's length. So a parsed message writes back to bytes that parse to
//! an equal message, and the writer never sends a length that lies.

use std::fmt;

use super::headers::{Session, TransportSpec, parse_transport};
use super::{RtspError, RtspErrorKind};

/// An RTSP method (RFC 2326 §10, RFC 7826 §13). Methods are
/// case-sensitive: `options` is [`Method::Other`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `OPTIONS` (§10.1).
    Options,
    /// `DESCRIBE` (§10.2).
    Describe,
    /// `ANNOUNCE` (§10.3).
    Announce,
    /// `SETUP` (§10.4).
    Setup,
    /// `PLAY` (§10.5).
    Play,
    /// `PAUSE` (§10.6).
    Pause,
    /// `TEARDOWN` (§10.7).
    Teardown,
    /// `GET_PARAMETER` (§10.8).
    GetParameter,
    /// `SET_PARAMETER` (§10.9).
    SetParameter,
    /// `REDIRECT` (§10.10).
    Redirect,
    /// `RECORD` (§10.11).
    Record,
    /// Any other token, as sent.
    Other(String),
}

impl Method {
    /// The method a token names.
    pub fn from_token(token: &str) -> Self {
        match token {
            "OPTIONS" => Self::Options,
            "DESCRIBE" => Self::Describe,
            "ANNOUNCE" => Self::Announce,
            "SETUP" => Self::Setup,
            "PLAY" => Self::Play,
            "PAUSE" => Self::Pause,
            "TEARDOWN" => Self::Teardown,
            "GET_PARAMETER" => Self::GetParameter,
            "SET_PARAMETER" => Self::SetParameter,
            "REDIRECT" => Self::Redirect,
            "RECORD" => Self::Record,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The method as it appears on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Options => "OPTIONS",
            Self::Describe => "DESCRIBE",
            Self::Announce => "ANNOUNCE",
            Self::Setup => "SETUP",
            Self::Play => "PLAY",
            Self::Pause => "PAUSE",
            Self::Teardown => "TEARDOWN",
            Self::GetParameter => "GET_PARAMETER",
            Self::SetParameter => "SET_PARAMETER",
            Self::Redirect => "REDIRECT",
            Self::Record => "RECORD",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `RTSP/major.minor`. The parser reads any single-digit pair; a server
/// answers anything but [`Version::RTSP_1_0`] with 505.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    /// The major digit.
    pub major: u8,
    /// The minor digit.
    pub minor: u8,
}

impl Version {
    /// RTSP/1.0 (RFC 2326), the version DTP speaks.
    pub const RTSP_1_0: Version = Version { major: 1, minor: 0 };
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RTSP/{}.{}", self.major, self.minor)
    }
}

/// One header field: the name as sent, the value trimmed of surrounding
/// whitespace (continuation lines joined by one space).
///
/// Equality compares name and value only, not where the value was found.
#[derive(Clone, Debug, Eq)]
pub struct Header {
    /// The field name, as sent.
    pub name: String,
    /// The field value.
    pub value: String,
    /// Byte offset of the value in the parsed input (0 for a header made
    /// by code): where typed readers' errors point.
    pub(crate) at: usize,
}

impl PartialEq for Header {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.value == other.value
    }
}

impl std::hash::Hash for Header {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.name, &self.value).hash(state);
    }
}

impl Header {
    /// A header made by code.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            at: 0,
        }
    }
}

/// The header fields of a message, in the order sent, with typed readers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Headers(pub Vec<Header>);

impl Headers {
    /// The first field named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).next()
    }

    /// Every field named `name` (case-insensitive), in the order sent.
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.0
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }

    fn first(&self, name: &str) -> Option<&Header> {
        self.0.iter().find(|h| h.name.eq_ignore_ascii_case(name))
    }

    /// Appends a field.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.push(Header::new(name, value));
    }

    /// The `Session` field (RFC 2326 §12.37), read; `Ok(None)` without one.
    pub fn session(&self) -> Result<Option<Session>, RtspError> {
        let Some(h) = self.first("session") else {
            return Ok(None);
        };
        Session::parse(&h.value)
            .map(Some)
            .map_err(|i| RtspError::at(RtspErrorKind::Session, h.at + i))
    }

    /// The `Transport` field (RFC 2326 §12.39), read: the specs offered, in
    /// order of preference; `Ok(None)` without one.
    pub fn transport(&self) -> Result<Option<Vec<TransportSpec>>, RtspError> {
        let Some(h) = self.first("transport") else {
            return Ok(None);
        };
        parse_transport(&h.value)
            .map(Some)
            .map_err(|i| RtspError::at(RtspErrorKind::Transport, h.at + i))
    }
}

/// An RTSP request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The request URI as sent (`*` or an absolute `rtsp://` URI).
    pub uri: String,
    /// The version.
    pub version: Version,
    /// `CSeq` (RFC 2326 §12.17): every request carries one; the parser
    /// leaves it to the server to refuse one without.
    pub cseq: Option<u32>,
    /// The other header fields.
    pub headers: Headers,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

/// An RTSP response.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Response {
    /// The version.
    pub version: Version,
    /// The status code, 100 to 599.
    pub status: u16,
    /// The reason phrase as sent.
    pub reason: String,
    /// `CSeq`, copied from the request answered.
    pub cseq: Option<u32>,
    /// The other header fields.
    pub headers: Headers,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

/// A request or a response: what may arrive on an RTSP connection
/// between interleaved packets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A response.
    Response(Response),
}

impl Request {
    /// An RTSP/1.0 request with no other field and no body.
    pub fn new(method: Method, uri: impl Into<String>, cseq: u32) -> Self {
        Self {
            method,
            uri: uri.into(),
            version: Version::RTSP_1_0,
            cseq: Some(cseq),
            headers: Headers::default(),
            body: Vec::new(),
        }
    }

    /// Adds a header field.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push(name, value);
        self
    }

    /// Appends the request to `out`, or refuses a field that would not
    /// read back as written (the error's offset is in `out`, which is left
    /// as it was).
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), RtspError> {
        let start = out.len();
        let result = (|| {
            let m = self.method.as_str();
            check(out, m.is_empty() || !m.bytes().all(is_tchar))?;
            out.extend_from_slice(m.as_bytes());
            out.push(b' ');
            let uri_bad = self.uri.is_empty() || !self.uri.bytes().all(is_uri_byte);
            check(out, uri_bad)?;
            out.extend_from_slice(self.uri.as_bytes());
            out.push(b' ');
            write_version(out, self.version)?;
            out.extend_from_slice(b"\r\n");
            write_fields(out, self.cseq, &self.headers, &self.body)
        })();
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// The request's bytes (see [`Request::write`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>, RtspError> {
        let mut out = Vec::new();
        self.write(&mut out)?;
        Ok(out)
    }
}

impl Response {
    /// An RTSP/1.0 response with the status's usual reason phrase, the
    /// request's `CSeq`, no other field and no body.
    pub fn new(status: u16, cseq: Option<u32>) -> Self {
        Self {
            version: Version::RTSP_1_0,
            status,
            reason: reason_phrase(status).to_owned(),
            cseq,
            headers: Headers::default(),
            body: Vec::new(),
        }
    }

    /// Adds a header field.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push(name, value);
        self
    }

    /// Appends the response to `out`, or refuses a field that would not
    /// read back as written (`out` is then left as it was).
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), RtspError> {
        let start = out.len();
        let result = (|| {
            write_version(out, self.version)?;
            check(out, !(100..=599).contains(&self.status))?;
            out.extend_from_slice(format!(" {} ", self.status).as_bytes());
            let reason_bad = self.reason.bytes().any(|b| is_ctl(b) && b != b'\t')
                || self.reason.trim_matches([' ', '\t']).len() != self.reason.len();
            check(out, reason_bad)?;
            out.extend_from_slice(self.reason.as_bytes());
            out.extend_from_slice(b"\r\n");
            write_fields(out, self.cseq, &self.headers, &self.body)
        })();
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// The response's bytes (see [`Response::write`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>, RtspError> {
        let mut out = Vec::new();
        self.write(&mut out)?;
        Ok(out)
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

impl Message {
    /// Appends the message to `out` (see [`Request::write`]).
    pub fn write(&self, out: &mut Vec<u8>) -> Result<(), RtspError> {
        match self {
            Self::Request(r) => r.write(out),
            Self::Response(r) => r.write(out),
        }
    }

    /// The header fields.
    pub fn headers(&self) -> &Headers {
        match self {
            Self::Request(r) => &r.headers,
            Self::Response(r) => &r.headers,
        }
    }
}

/// The usual reason phrase of an RTSP status code (RFC 2326 §7.1.1), or
/// `"Unknown"`.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        250 => "Low on Storage Space",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Moved Temporarily",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Time-out",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        415 => "Unsupported Media Type",
        451 => "Parameter Not Understood",
        454 => "Session Not Found",
        455 => "Method Not Valid in This State",
        459 => "Aggregate operation not allowed",
        460 => "Only aggregate operation allowed",
        461 => "Unsupported transport",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "RTSP Version not supported",
        _ => "Unknown",
    }
}

/// RFC 2616 §2.2 `token` characters (RFC 2326 §15 uses them).
pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Control characters (and DEL).
pub(crate) fn is_ctl(b: u8) -> bool {
    b < 0x20 || b == 0x7f
}

/// Bytes a request URI may hold here: visible ASCII (RFC 3986 has no
/// space, control or non-ASCII byte in a URI).
pub(crate) fn is_uri_byte(b: u8) -> bool {
    b.is_ascii_graphic()
}

/// An `Outgoing` error at the end of `out` if `bad`.
fn check(out: &[u8], bad: bool) -> Result<(), RtspError> {
    if bad {
        Err(RtspError::at(RtspErrorKind::Outgoing, out.len()))
    } else {
        Ok(())
    }
}

fn write_version(out: &mut Vec<u8>, v: Version) -> Result<(), RtspError> {
    check(out, v.major > 9 || v.minor > 9)?;
    out.extend_from_slice(format!("{v}").as_bytes());
    Ok(())
}

/// `CSeq`, the fields, `Content-Length` (for a body) and the blank line,
/// then the body.
fn write_fields(
    out: &mut Vec<u8>,
    cseq: Option<u32>,
    headers: &Headers,
    body: &[u8],
) -> Result<(), RtspError> {
    if let Some(n) = cseq {
        out.extend_from_slice(format!("CSeq: {n}\r\n").as_bytes());
    }
    for h in &headers.0 {
        let reserved =
            h.name.eq_ignore_ascii_case("cseq") || h.name.eq_ignore_ascii_case("content-length");
        let name_bad = h.name.is_empty() || !h.name.bytes().all(is_tchar) || reserved;
        check(out, name_bad)?;
        let value_bad = h.value.bytes().any(|b| is_ctl(b) && b != b'\t')
            || h.value.trim_matches([' ', '\t']).len() != h.value.len();
        check(out, value_bad)?;
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Ok(())
}
