//! The response head as a client reads it: [`parse_response_head`] over
//! `httparse`, and the owned [`ParsedResponse`] it returns. Every HTTP/1.1
//! client of the workspace (the AI-model call, `dtp ctl`, the load
//! generators, the test clients) reads its answers through this one parser.

use std::fmt;

use super::request::{HeaderField, Version, fields_named, parse_decimal, with_header_slots};

/// Ceilings on a response head a client accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Bytes from the status line to the blank line, both included
    /// (default 16 KiB). Past it: [`ResponseError::HeadTooLarge`].
    pub max_head_bytes: usize,
    /// Header fields (default 64). Past it: [`ResponseError::TooManyHeaders`].
    pub max_headers: usize,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        Self {
            max_head_bytes: 16 * 1024,
            max_headers: 64,
        }
    }
}

/// Why a response head was refused. No variant carries bytes from the
/// peer, so the `Display` text never echoes what a server sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResponseError {
    /// The status line or the head's framing is malformed (no status code,
    /// missing spaces, a bad line ending, …).
    Syntax,
    /// A header name or value holds a byte it may not.
    InvalidHeader,
    /// More header fields than [`ResponseLimits::max_headers`].
    TooManyHeaders {
        /// The ceiling.
        max: usize,
    },
    /// No complete head within [`ResponseLimits::max_head_bytes`].
    HeadTooLarge {
        /// The ceiling.
        max: usize,
    },
    /// The status line names a version other than HTTP/1.0 and HTTP/1.1.
    UnsupportedVersion,
    /// A `Content-Length` that is not a plain decimal number (RFC 9112 §6.3).
    InvalidContentLength,
    /// Two `Content-Length` fields with different values (RFC 9112 §6.3).
    ConflictingContentLength,
    /// `Content-Length` and `Transfer-Encoding` together: RFC 9112 §6.3
    /// says this "ought to be handled as an error" (response splitting).
    ContentLengthWithTransferEncoding,
    /// [`parse_closed_response`]: the connection closed inside the head or
    /// before `Content-Length` bytes of body came.
    EndedEarly,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax => f.write_str("malformed response head"),
            Self::InvalidHeader => f.write_str("invalid header field in the response"),
            Self::TooManyHeaders { max } => {
                write!(f, "more than {max} header fields in the response")
            }
            Self::HeadTooLarge { max } => write!(f, "response head longer than {max} bytes"),
            Self::UnsupportedVersion => f.write_str("the response is not HTTP/1.0 or HTTP/1.1"),
            Self::InvalidContentLength => f.write_str("invalid Content-Length in the response"),
            Self::ConflictingContentLength => {
                f.write_str("conflicting Content-Length fields in the response")
            }
            Self::ContentLengthWithTransferEncoding => {
                f.write_str("Content-Length with Transfer-Encoding in the response")
            }
            Self::EndedEarly => f.write_str("the response ended early"),
        }
    }
}

impl std::error::Error for ResponseError {}

/// How the body after a response head is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyFraming {
    /// Exactly this many bytes (`Content-Length`; 0 for 1xx, 204 and 304).
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`.
    Chunked,
    /// Neither: the body runs until the server closes the connection.
    UntilClose,
}

/// Parses the response head at the front of `buf` (RFC 9112 §4).
///
/// - `Ok(None)`: no complete head yet and nothing wrong so far; read more
///   and call again with the longer buffer.
/// - `Ok(Some((head, n)))`: the head is exactly `buf[..n]`; the body
///   ([`ParsedResponse::framing`]) follows.
/// - `Err(e)`: the bytes are not a response head this client accepts.
///
/// Only the first [`ResponseLimits::max_head_bytes`] bytes are ever looked
/// at, so the work per call is bounded, and no input makes it panic.
pub fn parse_response_head(
    buf: &[u8],
    limits: &ResponseLimits,
) -> Result<Option<(ParsedResponse, usize)>, ResponseError> {
    let truncated = buf.len() > limits.max_head_bytes;
    let window = buf.get(..limits.max_head_bytes).unwrap_or(buf);
    with_header_slots(limits.max_headers, |slots| {
        let mut resp = httparse::Response::new(slots);
        match resp.parse(window) {
            Ok(httparse::Status::Complete(n)) => Ok(Some((ParsedResponse::from_parsed(&resp)?, n))),
            Ok(httparse::Status::Partial) if truncated => Err(ResponseError::HeadTooLarge {
                max: limits.max_head_bytes,
            }),
            Ok(httparse::Status::Partial) => Ok(None),
            Err(httparse::Error::TooManyHeaders) => Err(ResponseError::TooManyHeaders {
                max: limits.max_headers,
            }),
            Err(httparse::Error::HeaderName | httparse::Error::HeaderValue) => {
                Err(ResponseError::InvalidHeader)
            }
            Err(httparse::Error::Version) => Err(version_error(window)),
            Err(_) => Err(ResponseError::Syntax),
        }
    })
}

/// A whole response read until the server closed the connection (one
/// request per connection): its head, and its body — `Content-Length`
/// bytes (anything after them is ignored), or everything after the head
/// for a body that runs until close. A chunked body is returned as sent.
pub fn parse_closed_response<'a>(
    raw: &'a [u8],
    limits: &ResponseLimits,
) -> Result<(ParsedResponse, &'a [u8]), ResponseError> {
    let (head, n) = parse_response_head(raw, limits)?.ok_or(ResponseError::EndedEarly)?;
    let rest = raw.get(n..).unwrap_or_default();
    let body = match head.framing() {
        BodyFraming::Length(len) => usize::try_from(len)
            .ok()
            .and_then(|len| rest.get(..len))
            .ok_or(ResponseError::EndedEarly)?,
        BodyFraming::Chunked | BodyFraming::UntilClose => rest,
    };
    Ok((head, body))
}

/// An owned, checked response head. Built only by [`parse_response_head`],
/// so its framing is unambiguous: the `Content-Length` fields agree and are
/// plain decimals, and none comes with a `Transfer-Encoding`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParsedResponse {
    version: Version,
    status: u16,
    reason: String,
    fields: Vec<HeaderField>,
    content_length: Option<u64>,
    chunked: bool,
}

impl ParsedResponse {
    /// The protocol version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The status code (three digits).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reason phrase as sent (`""` if empty, or if it held bytes
    /// outside visible ASCII).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Every header field, in the order sent.
    pub fn fields(&self) -> &[HeaderField] {
        &self.fields
    }

    /// The first field named `name` (case-insensitive), if its value is
    /// UTF-8; a field whose value is not is treated as absent here.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers(name).next()
    }

    /// Every field named `name` (case-insensitive) whose value is UTF-8, in
    /// the order sent.
    pub fn headers<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        fields_named(&self.fields, name).filter_map(|f| std::str::from_utf8(&f.value).ok())
    }

    /// The `Content-Length`, if the response carries one.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// Whether `Transfer-Encoding` ends in `chunked`.
    pub fn is_chunked(&self) -> bool {
        self.chunked
    }

    /// Whether the response carries a `Transfer-Encoding` at all.
    pub fn has_transfer_encoding(&self) -> bool {
        fields_named(&self.fields, "transfer-encoding")
            .next()
            .is_some()
    }

    /// RFC 9112 §6.3: how the body is delimited. 1xx, 204 and 304 have
    /// none (`Length(0)`); a response to `HEAD` has none either, which only
    /// the caller knows.
    pub fn framing(&self) -> BodyFraming {
        if self.status < 200 || self.status == 204 || self.status == 304 {
            BodyFraming::Length(0)
        } else if self.chunked {
            BodyFraming::Chunked
        } else if let Some(n) = self.content_length {
            BodyFraming::Length(n)
        } else {
            BodyFraming::UntilClose
        }
    }

    fn from_parsed(resp: &httparse::Response<'_, '_>) -> Result<Self, ResponseError> {
        let (Some(minor), Some(status)) = (resp.version, resp.code) else {
            return Err(ResponseError::Syntax);
        };
        let version = match minor {
            0 => Version::Http10,
            1 => Version::Http11,
            _ => return Err(ResponseError::UnsupportedVersion),
        };
        let fields: Vec<HeaderField> = resp
            .headers
            .iter()
            .map(|h| HeaderField {
                name: h.name.to_owned(),
                value: h.value.to_vec(),
            })
            .collect();
        let mut content_length = None;
        for f in fields_named(&fields, "content-length") {
            let n = parse_decimal(&f.value).map_err(|_| ResponseError::InvalidContentLength)?;
            if content_length.is_some_and(|m| m != n) {
                return Err(ResponseError::ConflictingContentLength);
            }
            content_length = Some(n);
        }
        let has_te = fields_named(&fields, "transfer-encoding").next().is_some();
        if has_te && content_length.is_some() {
            return Err(ResponseError::ContentLengthWithTransferEncoding);
        }
        // RFC 9112 §6.3: chunked only if it is the final coding.
        let last = fields_named(&fields, "transfer-encoding")
            .filter_map(|f| std::str::from_utf8(&f.value).ok())
            .flat_map(|v| v.split(','))
            .map(|c| c.trim_matches([' ', '\t']))
            .filter(|c| !c.is_empty())
            .last();
        Ok(Self {
            version,
            status,
            reason: resp.reason.unwrap_or_default().to_owned(),
            chunked: last.is_some_and(|c| c.eq_ignore_ascii_case("chunked")),
            fields,
            content_length,
        })
    }
}

/// httparse says `Version` for anything but `HTTP/1.0` and `HTTP/1.1` at
/// the start; RFC 9112 §2.3 syntax (`HTTP/` DIGIT `.` DIGIT) tells a
/// version this client does not speak from bytes that are not HTTP.
fn version_error(window: &[u8]) -> ResponseError {
    let start = window
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(window.len());
    match window.get(start..start + 8) {
        Some([b'H', b'T', b'T', b'P', b'/', major, b'.', minor])
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            ResponseError::UnsupportedVersion
        }
        _ => ResponseError::Syntax,
    }
}
