//! Reading one RTSP message (RFC 2326 §4, §6, §7; RFC 7826 §8) from the
//! front of a buffer: the start line, the header fields, the body.
//!
//! The head is validated left to right as far as bytes have come, so
//! garbage is refused as soon as it is seen, and a prefix of an input is
//! refused with exactly the error the whole input gets (or needs more):
//! the answer never depends on how the bytes were cut.

use super::headers::decimal_u32;
use super::message::{
    Header, Headers, Message, Method, Request, Response, Version, is_ctl, is_tchar, is_uri_byte,
};
use super::{RtspError, RtspErrorKind as K, RtspLimits};

/// What a parser made of the bytes so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// A whole item, and how many bytes it took from the front.
    Done(T, usize),
    /// Nothing wrong so far, but at least this many more bytes are needed
    /// (exact for a body; 1 while the head is still coming).
    NeedMore(usize),
}

/// SPEC TRN-4 (the RTSP transport's control exchange): reads the RTSP
/// message (request or response) at the front of `buf`.
///
/// Only the first [`RtspLimits::max_head_bytes`] bytes are looked at for
/// the head, so the work per call is bounded, and no input panics. Empty
/// lines before the start line are skipped (and counted in the length).
/// Lines may end in CRLF or LF; header lines beginning with a space or tab
/// continue the previous value (RFC 2326 §4 allows that folding).
pub fn parse_message(buf: &[u8], limits: &RtspLimits) -> Result<Parse<Message>, RtspError> {
    let window = buf.get(..limits.max_head_bytes).unwrap_or(buf);
    let need_more = || {
        if buf.len() > limits.max_head_bytes {
            Err(RtspError::at(K::HeadTooLarge, limits.max_head_bytes))
        } else {
            Ok(Parse::NeedMore(1))
        }
    };
    let mut pos = skip_empty_lines(window);
    let (line, complete, next) = line_at(window, pos);
    let Some(start) = start_line(line, pos, complete, limits)? else {
        return need_more();
    };
    pos = next;
    let mut fields: Vec<Header> = Vec::new();
    loop {
        let (line, complete, next) = line_at(window, pos);
        let Some(&first) = line.first() else {
            if complete {
                pos = next;
                break;
            }
            return need_more();
        };
        if first == b' ' || first == b'\t' {
            let Some(last) = fields.last_mut() else {
                return Err(RtspError::at(K::Folding, pos));
            };
            let Some((_, value)) = field_value(line, pos, complete)? else {
                return need_more();
            };
            if !value.is_empty() {
                if !last.value.is_empty() {
                    last.value.push(' ');
                }
                last.value.push_str(value);
            }
        } else {
            if fields.len() >= limits.max_headers {
                return Err(RtspError::at(K::TooManyHeaders, pos));
            }
            let Some(field) = header_line(line, pos, complete)? else {
                return need_more();
            };
            fields.push(field);
        }
        pos = next;
    }
    let (cseq, body_len, headers) = framing(fields, limits)?;
    let end = pos.saturating_add(body_len);
    let Some(body) = buf.get(pos..end) else {
        return Ok(Parse::NeedMore(end - buf.len()));
    };
    let body = body.to_vec();
    let message = match start {
        Start::Request {
            method,
            uri,
            version,
        } => Message::Request(Request {
            method,
            uri,
            version,
            cseq,
            headers,
            body,
        }),
        Start::Response {
            version,
            status,
            reason,
        } => Message::Response(Response {
            version,
            status,
            reason,
            cseq,
            headers,
            body,
        }),
    };
    Ok(Parse::Done(message, end))
}

/// As [`parse_message`], for a server: a response is refused with
/// [`RtspErrorKind::UnexpectedKind`](super::RtspErrorKind) at its start.
pub fn parse_request(buf: &[u8], limits: &RtspLimits) -> Result<Parse<Request>, RtspError> {
    match parse_message(buf, limits)? {
        Parse::Done(Message::Request(r), n) => Ok(Parse::Done(r, n)),
        Parse::Done(Message::Response(_), _) => Err(unexpected(buf)),
        Parse::NeedMore(n) => Ok(Parse::NeedMore(n)),
    }
}

/// As [`parse_message`], for a client that expects a response.
pub fn parse_response(buf: &[u8], limits: &RtspLimits) -> Result<Parse<Response>, RtspError> {
    match parse_message(buf, limits)? {
        Parse::Done(Message::Response(r), n) => Ok(Parse::Done(r, n)),
        Parse::Done(Message::Request(_), _) => Err(unexpected(buf)),
        Parse::NeedMore(n) => Ok(Parse::NeedMore(n)),
    }
}

fn unexpected(buf: &[u8]) -> RtspError {
    RtspError::at(K::UnexpectedKind, skip_empty_lines(buf))
}

enum Start {
    Request {
        method: Method,
        uri: String,
        version: Version,
    },
    Response {
        version: Version,
        status: u16,
        reason: String,
    },
}

/// Past any empty lines at the front.
pub(crate) fn skip_empty_lines(window: &[u8]) -> usize {
    let mut pos = 0;
    loop {
        match window.get(pos..) {
            Some([b'\r', b'\n', ..]) => pos += 2,
            Some([b'\n', ..]) => pos += 1,
            _ => return pos,
        }
    }
}

/// The line starting at `pos`: its content (without CRLF or LF; without a
/// CR that ends the window, which may be the start of a CRLF), whether its
/// end has come, and where the next line starts.
fn line_at(window: &[u8], pos: usize) -> (&[u8], bool, usize) {
    let rest = window.get(pos..).unwrap_or_default();
    let (content, complete, next) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], true, pos + i + 1),
        None => (rest, false, window.len()),
    };
    let content = content.strip_suffix(b"\r").unwrap_or(content);
    (content, complete, next)
}

/// The error for a control byte in a head, if `b` is one.
fn control(b: u8, at: usize) -> Result<(), RtspError> {
    match b {
        b'\r' => Err(RtspError::at(K::LoneCr, at)),
        b'\t' => Ok(()),
        _ if is_ctl(b) => Err(RtspError::at(K::InvalidByte, at)),
        _ => Ok(()),
    }
}

/// `RTSP/d.d` at the front of `s` (partially, unless `complete`).
fn version(s: &[u8], at: usize, complete: bool) -> Result<Option<Version>, RtspError> {
    const PATTERN: &[u8; 8] = b"RTSP/0.0";
    for (i, &b) in s.iter().take(PATTERN.len()).enumerate() {
        control(b, at + i)?;
        let fits = match PATTERN[i] {
            b'0' => b.is_ascii_digit(),
            p => b == p,
        };
        if !fits {
            return Err(RtspError::at(K::Version, at + i));
        }
    }
    match s {
        [_, _, _, _, _, major, _, minor, ..] => Ok(Some(Version {
            major: major - b'0',
            minor: minor - b'0',
        })),
        _ if complete => Err(RtspError::at(K::Version, at + s.len())),
        _ => Ok(None),
    }
}

/// The request or status line (possibly partial: `Ok(None)` means nothing
/// is wrong in it so far).
fn start_line(
    line: &[u8],
    at: usize,
    complete: bool,
    limits: &RtspLimits,
) -> Result<Option<Start>, RtspError> {
    if line.starts_with(b"RTSP/") {
        return status_line(line, at, complete);
    }
    if !complete && b"RTSP/".starts_with(line) {
        return Ok(None);
    }
    // METHOD SP URI SP VERSION
    let mut i = 0;
    while let Some(&b) = line.get(i) {
        if b == b' ' {
            break;
        }
        control(b, at + i)?;
        if !is_tchar(b) {
            return Err(RtspError::at(K::Method, at + i));
        }
        i += 1;
    }
    if i == 0 && !line.is_empty() {
        return Err(RtspError::at(K::Method, at));
    }
    if i == line.len() {
        return end_or_more(complete, at + i);
    }
    let method_end = i;
    let uri_start = i + 1;
    i = uri_start;
    while let Some(&b) = line.get(i) {
        if b == b' ' {
            break;
        }
        control(b, at + i)?;
        if !is_uri_byte(b) {
            return Err(RtspError::at(K::Uri, at + i));
        }
        if i - uri_start >= limits.max_uri_len {
            return Err(RtspError::at(K::UriTooLong, at + i));
        }
        i += 1;
    }
    if i == uri_start && i < line.len() {
        return Err(RtspError::at(K::Uri, at + i));
    }
    if i == line.len() {
        return end_or_more(complete, at + i);
    }
    let rest = &line[i + 1..];
    let Some(v) = version(rest, at + i + 1, complete)? else {
        return Ok(None);
    };
    if let Some(&b) = rest.get(8) {
        control(b, at + i + 9)?;
        return Err(RtspError::at(K::StartLine, at + i + 9));
    }
    if !complete {
        return Ok(None);
    }
    // Both are ASCII: checked above byte by byte.
    let text = |s: &[u8]| s.iter().map(|&b| char::from(b)).collect::<String>();
    Ok(Some(Start::Request {
        method: Method::from_token(&text(&line[..method_end])),
        uri: text(&line[uri_start..i]),
        version: v,
    }))
}

/// A line that ended (or may still grow) where a part is missing.
fn end_or_more<T>(complete: bool, at: usize) -> Result<Option<T>, RtspError> {
    if complete {
        Err(RtspError::at(K::StartLine, at))
    } else {
        Ok(None)
    }
}

/// `RTSP/d.d SP 3DIGIT [SP reason]`.
fn status_line(line: &[u8], at: usize, complete: bool) -> Result<Option<Start>, RtspError> {
    let Some(version) = version(line, at, complete)? else {
        return Ok(None);
    };
    match line.get(8) {
        Some(b' ') => {}
        Some(&b) => {
            control(b, at + 8)?;
            return Err(RtspError::at(K::StartLine, at + 8));
        }
        None => return end_or_more(complete, at + 8),
    }
    let digits = line
        .get(9..12)
        .unwrap_or_else(|| line.get(9..).unwrap_or_default());
    for (i, &b) in digits.iter().enumerate() {
        control(b, at + 9 + i)?;
        if !b.is_ascii_digit() || (i == 0 && !(b'1'..=b'5').contains(&b)) {
            return Err(RtspError::at(K::Status, at + 9 + i));
        }
    }
    if digits.len() < 3 {
        return end_or_more(complete, at + 9 + digits.len()).map(|_: Option<()>| None);
    }
    let status = digits
        .iter()
        .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let reason = match line.get(12) {
        None => &[][..],
        Some(b' ') => &line[13..],
        Some(&b) => {
            control(b, at + 12)?;
            return Err(RtspError::at(K::StartLine, at + 12));
        }
    };
    for (i, &b) in reason.iter().enumerate() {
        control(b, at + 13 + i)?;
    }
    if !complete {
        return Ok(None);
    }
    let reason = std::str::from_utf8(reason)
        .map_err(|e| RtspError::at(K::StartLine, at + 13 + e.valid_up_to()))?;
    Ok(Some(Start::Response {
        version,
        status,
        reason: reason.trim_matches([' ', '\t']).to_owned(),
    }))
}

/// `name ":" OWS value OWS` (possibly partial).
fn header_line(line: &[u8], at: usize, complete: bool) -> Result<Option<Header>, RtspError> {
    let mut colon = None;
    for (i, &b) in line.iter().enumerate() {
        if b == b':' {
            colon = Some(i);
            break;
        }
        control(b, at + i)?;
        if !is_tchar(b) {
            return Err(RtspError::at(K::HeaderName, at + i));
        }
    }
    let Some(colon) = colon else {
        return end_or_more(complete, at + line.len()).map(|_: Option<()>| None);
    };
    if colon == 0 {
        return Err(RtspError::at(K::HeaderName, at));
    }
    let value_at = at + colon + 1;
    let Some((vat, value)) = field_value(&line[colon + 1..], value_at, complete)? else {
        return Ok(None);
    };
    // The name is tchars only: ASCII.
    let name = line[..colon].iter().map(|&b| char::from(b)).collect();
    Ok(Some(Header {
        name,
        value: value.to_owned(),
        at: vat,
    }))
}

/// A field value (or a continuation line), trimmed: its offset and text.
fn field_value(v: &[u8], at: usize, complete: bool) -> Result<Option<(usize, &str)>, RtspError> {
    for (i, &b) in v.iter().enumerate() {
        control(b, at + i)?;
    }
    if !complete {
        return Ok(None);
    }
    let start = v.iter().position(|&b| b != b' ' && b != b'\t');
    let end = v.iter().rposition(|&b| b != b' ' && b != b'\t');
    let trimmed = match (start, end) {
        (Some(s), Some(e)) => &v[s..=e],
        _ => &[],
    };
    let vat = at + start.unwrap_or(v.len());
    let text = std::str::from_utf8(trimmed)
        .map_err(|e| RtspError::at(K::HeaderValue, vat + e.valid_up_to()))?;
    Ok(Some((vat, text)))
}

/// Takes `CSeq` and `Content-Length` out of the fields, checked.
fn framing(
    fields: Vec<Header>,
    limits: &RtspLimits,
) -> Result<(Option<u32>, usize, Headers), RtspError> {
    let mut cseq = None;
    let mut length = None;
    let mut rest = Vec::with_capacity(fields.len());
    for h in fields {
        if h.name.eq_ignore_ascii_case("cseq") {
            let n = decimal_u32(&h.value).filter(|_| cseq.is_none());
            cseq = Some(n.ok_or(RtspError::at(K::CSeq, h.at))?);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let v = &h.value;
            if length.is_some() || v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(RtspError::at(K::ContentLength, h.at));
            }
            let n = v
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= limits.max_body_bytes)
                .ok_or(RtspError::at(K::BodyTooLarge, h.at))?;
            length = Some(n);
        } else {
            rest.push(h);
        }
    }
    Ok((cseq, length.unwrap_or(0), Headers(rest)))
}
