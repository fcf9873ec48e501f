//! The request head: [`parse_request_head`] over `httparse`, and the owned
//! [`RequestHead`] it returns; the header slots and field lookup that the
//! response parser shares.

use super::{HttpError, HttpLimits};

/// Header slots kept on the stack; a larger [`HttpLimits::max_headers`]
/// allocates them.
const INLINE_HEADERS: usize = 64;

/// Parses the request head at the front of `buf` (RFC 9112 §2–3, §6), the
/// entry point of the engine's HTTP/1.1 endpoints (SPEC RT-8, RT-9, RT-11).
///
/// - `Ok(None)`: no complete head yet and nothing wrong so far; read more and
///   call again with the longer buffer.
/// - `Ok(Some((head, n)))`: the head is exactly `buf[..n]`; what follows is
///   the body ([`RequestHead::content_length`] bytes) and then the next
///   pipelined request.
/// - `Err(e)`: refuse with `e.status()` and close the connection.
///
/// Only the first [`HttpLimits::max_head_bytes`] bytes are ever looked at,
/// so a buffer longer than that with no complete head in it is refused with
/// [`HttpError::HeadTooLarge`] at once, and the work per call is bounded.
/// Leading empty lines before the request line are skipped (RFC 9112 §2.2)
/// and count towards `n`; bare LF line endings are accepted.
pub fn parse_request_head(
    buf: &[u8],
    limits: &HttpLimits,
) -> Result<Option<(RequestHead, usize)>, HttpError> {
    let truncated = buf.len() > limits.max_head_bytes;
    let window = buf.get(..limits.max_head_bytes).unwrap_or(buf);
    let need_more = || {
        if let Some(len) = partial_target_len(window)
            && len > limits.max_uri_len
        {
            return Err(HttpError::UriTooLong);
        }
        if truncated {
            Err(HttpError::HeadTooLarge)
        } else {
            Ok(None)
        }
    };
    with_header_slots(limits.max_headers, |slots| {
        let mut req = httparse::Request::new(slots);
        match req.parse(window) {
            Ok(httparse::Status::Complete(n)) => {
                let head = RequestHead::from_parsed(&req, limits)?;
                Ok(Some((head, n)))
            }
            Ok(httparse::Status::Partial) => need_more(),
            Err(httparse::Error::TooManyHeaders) => Err(HttpError::TooManyHeaders),
            Err(httparse::Error::HeaderName | httparse::Error::HeaderValue) => {
                Err(HttpError::InvalidHeader)
            }
            Err(httparse::Error::Version) => match classify_version(window) {
                VersionClass::NeedMore => need_more(),
                VersionClass::Unsupported => Err(HttpError::VersionNotSupported),
                VersionClass::Malformed => Err(HttpError::Syntax),
            },
            Err(_) => Err(HttpError::Syntax),
        }
    })
}

/// Runs `f` over `n` empty header slots for httparse: on the stack up to
/// [`INLINE_HEADERS`], allocated past it.
pub(super) fn with_header_slots<'b, R>(
    n: usize,
    f: impl FnOnce(&mut [httparse::Header<'b>]) -> R,
) -> R {
    let mut inline: [httparse::Header<'b>; INLINE_HEADERS] =
        [httparse::EMPTY_HEADER; INLINE_HEADERS];
    match inline.get_mut(..n) {
        Some(slots) => f(slots),
        None => f(&mut vec![httparse::EMPTY_HEADER; n]),
    }
}

/// The fields named `name` (case-insensitive), in the order sent.
pub(super) fn fields_named<'a, 'n>(
    fields: &'a [HeaderField],
    name: &'n str,
) -> impl Iterator<Item = &'a HeaderField> + use<'a, 'n> {
    fields
        .iter()
        .filter(move |f| f.name.eq_ignore_ascii_case(name))
}

/// A request method (RFC 9110 §9). Methods are case-sensitive: `get` is
/// [`Method::Other`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`.
    Head,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
    /// `OPTIONS`.
    Options,
    /// `PATCH`.
    Patch,
    /// Any other token, as sent.
    Other(String),
}

impl Method {
    fn from_token(token: &str) -> Self {
        match token {
            "GET" => Self::Get,
            "HEAD" => Self::Head,
            "POST" => Self::Post,
            "PUT" => Self::Put,
            "DELETE" => Self::Delete,
            "OPTIONS" => Self::Options,
            "PATCH" => Self::Patch,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The method as it appears on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
            Self::Options => "OPTIONS",
            Self::Patch => "PATCH",
            Self::Other(s) => s,
        }
    }
}

/// The protocol version of a request or response; a request with any other
/// is refused with 505.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// `HTTP/1.0`.
    Http10,
    /// `HTTP/1.1`.
    Http11,
}

/// One header field as sent: the name keeps its case, the value is trimmed
/// of surrounding spaces and tabs and holds no control character but HTAB
/// (it may hold obs-text bytes `0x80..=0xFF`, hence bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeaderField {
    /// The field name, as sent.
    pub name: String,
    /// The field value, as sent.
    pub value: Vec<u8>,
}

/// An owned, validated request head. Built only by [`parse_request_head`],
/// so every invariant below holds: the target is ASCII, at most
/// [`HttpLimits::max_uri_len`] bytes, in origin, absolute or asterisk form;
/// at most one `Content-Length` (a decimal within the body limit), no
/// `Transfer-Encoding`, at most one `Host`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestHead {
    method: Method,
    target: String,
    path: String,
    query: Option<String>,
    version: Version,
    fields: Vec<HeaderField>,
    content_length: u64,
}

impl RequestHead {
    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The request target exactly as sent (`/a/b?c=d`, `http://h/a`, `*`).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The path, still percent-encoded and without the query: `/a/b` for
    /// `/a/b?c=d` and for `http://h/a/b?c=d`; `/` for `http://h`; `*` for
    /// the asterisk form. See [`RequestHead::path_segments`] for the decoded
    /// segments.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The query after the first `?`, still encoded; `None` without a `?`
    /// (and `Some("")` for a bare `?`).
    pub fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The protocol version.
    pub fn version(&self) -> Version {
        self.version
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

    /// The number of fields named `name`, whatever their values.
    pub fn count(&self, name: &str) -> usize {
        fields_named(&self.fields, name).count()
    }

    /// The body length from `Content-Length`; 0 without one (a request with
    /// neither `Content-Length` nor `Transfer-Encoding` has no body, RFC 9112
    /// §6.3). Never above [`HttpLimits::max_body_bytes`].
    pub fn content_length(&self) -> u64 {
        self.content_length
    }

    fn from_parsed(
        req: &httparse::Request<'_, '_>,
        limits: &HttpLimits,
    ) -> Result<Self, HttpError> {
        let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
            return Err(HttpError::Syntax);
        };
        let version = match minor {
            0 => Version::Http10,
            1 => Version::Http11,
            _ => return Err(HttpError::VersionNotSupported),
        };
        if target.len() > limits.max_uri_len {
            return Err(HttpError::UriTooLong);
        }
        let method = Method::from_token(method);
        let (path, query) = split_target(target, &method)?;
        let fields: Vec<HeaderField> = req
            .headers
            .iter()
            .map(|h| HeaderField {
                name: h.name.to_owned(),
                value: h.value.to_vec(),
            })
            .collect();
        let mut head = Self {
            method,
            target: target.to_owned(),
            path: path.to_owned(),
            query: query.map(str::to_owned),
            version,
            fields,
            content_length: 0,
        };
        head.content_length = head.check_framing(limits)?;
        Ok(head)
    }

    /// RFC 9112 §6.1, §6.3, §3.2: the body length, or why the framing is refused.
    fn check_framing(&self, limits: &HttpLimits) -> Result<u64, HttpError> {
        let mut lengths = fields_named(&self.fields, "content-length");
        let length = lengths.next();
        if lengths.next().is_some() {
            return Err(HttpError::DuplicateContentLength);
        }
        if self.count("transfer-encoding") > 0 {
            return Err(if length.is_some() {
                HttpError::ContentLengthWithTransferEncoding
            } else {
                HttpError::TransferEncodingNotImplemented
            });
        }
        if self.count("host") > 1 {
            return Err(HttpError::DuplicateHost);
        }
        let Some(field) = length else { return Ok(0) };
        let n = parse_decimal(&field.value)?;
        if n > limits.max_body_bytes {
            return Err(HttpError::BodyTooLarge);
        }
        Ok(n)
    }
}

/// `1*DIGIT`; a value too big for u64 is certainly too big a body.
pub(super) fn parse_decimal(value: &[u8]) -> Result<u64, HttpError> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::InvalidContentLength);
    }
    value.iter().try_fold(0u64, |acc, d| {
        acc.checked_mul(10)
            .and_then(|acc| acc.checked_add(u64::from(d - b'0')))
            .ok_or(HttpError::BodyTooLarge)
    })
}

/// RFC 9112 §3.2: splits a target into its (encoded) path and query.
fn split_target<'a>(
    target: &'a str,
    method: &Method,
) -> Result<(&'a str, Option<&'a str>), HttpError> {
    if !target.is_ascii() || target.contains('#') {
        return Err(HttpError::InvalidTarget);
    }
    if target == "*" {
        return match method {
            Method::Options => Ok(("*", None)),
            _ => Err(HttpError::InvalidTarget),
        };
    }
    let rest = if target.starts_with('/') {
        target
    } else {
        // absolute-form: http[s]://authority[path-abempty][?query]
        let (scheme, after) = target.split_once("://").ok_or(HttpError::InvalidTarget)?;
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(HttpError::InvalidTarget);
        }
        let end = after.find(['/', '?']).unwrap_or(after.len());
        if end == 0 {
            return Err(HttpError::InvalidTarget);
        }
        after.get(end..).ok_or(HttpError::InvalidTarget)?
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    Ok((if path.is_empty() { "/" } else { path }, query))
}

/// The request line's position after any leading empty lines, as httparse
/// skips them.
fn request_line(window: &[u8]) -> &[u8] {
    let mut rest = window;
    loop {
        rest = match rest {
            [b'\r', b'\n', tail @ ..] | [b'\n', tail @ ..] => tail,
            _ => return rest,
        }
    }
}

/// Bytes of the target seen so far, once the method and its space are.
fn partial_target_len(window: &[u8]) -> Option<usize> {
    let line = request_line(window);
    let sp = line.iter().position(|&b| b == b' ')?;
    let target = line.get(sp + 1..)?;
    Some(
        target
            .iter()
            .position(|&b| matches!(b, b' ' | b'\r' | b'\n'))
            .unwrap_or(target.len()),
    )
}

enum VersionClass {
    /// A prefix of `HTTP/d.d` at the end of the window.
    NeedMore,
    /// `HTTP/d.d`, but not 1.0 or 1.1: 505.
    Unsupported,
    /// Anything else: 400.
    Malformed,
}

/// httparse says `Version` for every version but 1.0 and 1.1, and early on a
/// prefix such as `HTTP/2`; RFC 9112 §2.3 syntax (`HTTP/` DIGIT `.` DIGIT)
/// tells 505 from 400.
fn classify_version(window: &[u8]) -> VersionClass {
    let line = request_line(window);
    let mut spaces = line.iter().enumerate().filter(|&(_, &b)| b == b' ');
    let Some((at, _)) = spaces.nth(1) else {
        return VersionClass::Malformed;
    };
    let version = line.get(at + 1..).unwrap_or_default();
    const PATTERN: &[u8; 8] = b"HTTP/0.0";
    let fits = |(i, &b): (usize, &u8)| match PATTERN.get(i) {
        Some(b'0') => b.is_ascii_digit(),
        Some(&p) => b == p,
        None => true,
    };
    let head = version.get(..PATTERN.len()).unwrap_or(version);
    if !head.iter().enumerate().all(fits) {
        VersionClass::Malformed
    } else if head.len() == PATTERN.len() {
        VersionClass::Unsupported
    } else {
        VersionClass::NeedMore
    }
}
