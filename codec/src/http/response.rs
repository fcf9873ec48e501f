//! Response heads and chunked bodies, written into a [`BytesMut`].

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};

use super::HttpError;

/// The reason phrase for every status code the engine sends (RFC 9110 §15,
/// RFC 6585 for 429 and 431); `""` for any other code (an empty reason
/// phrase is valid, RFC 9112 §4).
pub fn reason_phrase(code: u16) -> &'static str {
    match code {
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// How the body that follows the head is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    /// No framing header: the caller adds none (e.g. a 101, or a stream
    /// closed by the server).
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked` (SPEC RT-8: SSE streams).
    Chunked,
}

/// A response head under construction: `HTTP/1.1 <code> <reason>`, the
/// fields in the order added, then the framing header.
///
/// [`ResponseHead::header`] returns a `Result` rather than checking only in
/// debug builds: a value may carry data that came from elsewhere (an ETag,
/// a `Location`), and a CR or LF in it would split the response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    status: u16,
    fields: Vec<(String, String)>,
    framing: Framing,
}

impl ResponseHead {
    /// A head with status `status`. A code outside `100..=599` is replaced
    /// by 500: the status line must hold three digits a client understands.
    pub fn new(status: u16) -> Self {
        Self {
            status: if (100..=599).contains(&status) {
                status
            } else {
                500
            },
            fields: Vec::new(),
            framing: Framing::None,
        }
    }

    /// The status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Adds a field. Errs with [`HttpError::InvalidResponseHeader`] if the
    /// name is not a token (RFC 9110 §5.1), if the value holds a control
    /// character other than HTAB (CR, LF and NUL among them), or if the
    /// name is `Content-Length` or `Transfer-Encoding`: use
    /// [`ResponseHead::content_length`] or [`ResponseHead::chunked`], so a
    /// response never carries two framings.
    pub fn header(mut self, name: &str, value: &str) -> Result<Self, HttpError> {
        let framing = name.eq_ignore_ascii_case("content-length")
            || name.eq_ignore_ascii_case("transfer-encoding");
        if framing || !is_field_value(value) || !is_token(name) {
            return Err(HttpError::InvalidResponseHeader);
        }
        self.fields.push((name.to_owned(), value.to_owned()));
        Ok(self)
    }

    /// Frames the body with `Content-Length: n` (replacing [`ResponseHead::chunked`]).
    pub fn content_length(mut self, n: u64) -> Self {
        self.framing = Framing::Length(n);
        self
    }

    /// Frames the body with `Transfer-Encoding: chunked` (replacing
    /// [`ResponseHead::content_length`]); send it with [`write_chunk`] and
    /// end it with [`write_last_chunk`].
    pub fn chunked(mut self) -> Self {
        self.framing = Framing::Chunked;
        self
    }

    /// Appends the head, through its blank line, to `out`. A 1xx, 204 or
    /// 304 response has no body (RFC 9110 §6.4.1), so no framing header is
    /// written for it whatever was set.
    pub fn write(&self, out: &mut BytesMut) {
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\n",
            self.status,
            reason_phrase(self.status)
        );
        for (name, value) in &self.fields {
            put_field(out, name, value);
        }
        if has_body(self.status) {
            match self.framing {
                Framing::None => {}
                Framing::Length(n) => {
                    let _ = write!(out, "Content-Length: {n}\r\n");
                }
                Framing::Chunked => put_field(out, "Transfer-Encoding", "chunked"),
            }
        }
        out.put_slice(b"\r\n");
    }

    /// The head as bytes (see [`ResponseHead::write`]).
    pub fn to_bytes(&self) -> BytesMut {
        let mut out = BytesMut::new();
        self.write(&mut out);
        out
    }
}

/// Appends one chunk (RFC 9112 §7.1): `<hex size>\r\n<data>\r\n`. Empty
/// `data` writes nothing: a zero-size chunk would end the body (use
/// [`write_last_chunk`] for that).
pub fn write_chunk(out: &mut BytesMut, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let (head, from) = chunk_head(data.len());
    out.put_slice(&head[from..]);
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// The most bytes a chunk head (`<hex size>\r\n`) takes.
pub const CHUNK_HEAD_MAX: usize = 18;

/// The head of a chunk of `len` bytes, `<hex size>\r\n`, right-aligned:
/// it is `head[from..]`. Without the formatting machinery (once per event
/// per subscriber on an SSE stream).
pub fn chunk_head(len: usize) -> ([u8; CHUNK_HEAD_MAX], usize) {
    let mut head = [0u8; CHUNK_HEAD_MAX];
    head[CHUNK_HEAD_MAX - 2..].copy_from_slice(b"\r\n");
    let mut n = len;
    let mut i = CHUNK_HEAD_MAX - 2;
    loop {
        i -= 1;
        head[i] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    (head, i)
}

/// Appends the last chunk and the empty trailer section: `0\r\n\r\n`.
pub fn write_last_chunk(out: &mut BytesMut) {
    out.put_slice(b"0\r\n\r\n");
}

/// A small complete response (an error, a JSON document): the head with
/// `Content-Type` (omitted if empty; an invalid one is replaced by
/// `application/octet-stream`), `Content-Length`, `Connection: keep-alive`
/// or `Connection: close`, then `body`. For 1xx, 204 and 304 the body and
/// `Content-Length` are left out (RFC 9110 §6.4.1).
pub fn simple_response(status: u16, content_type: &str, body: &[u8], keep_alive: bool) -> BytesMut {
    let mut head = ResponseHead::new(status);
    if !content_type.is_empty() {
        let ct = if is_field_value(content_type) {
            content_type
        } else {
            "application/octet-stream"
        };
        head.fields.push(("Content-Type".to_owned(), ct.to_owned()));
    }
    let connection = if keep_alive { "keep-alive" } else { "close" };
    head.fields
        .push(("Connection".to_owned(), connection.to_owned()));
    let body = if has_body(head.status) { body } else { &[] };
    let mut out = BytesMut::with_capacity(128 + body.len());
    head.content_length(body.len() as u64).write(&mut out);
    out.put_slice(body);
    out
}

/// The refusal for `e` (see [`HttpError::to_response`]).
pub(crate) fn error_response(e: HttpError) -> BytesMut {
    let mut out = BytesMut::with_capacity(192);
    let body = e.reason().as_bytes();
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\n",
        e.status(),
        reason_phrase(e.status())
    );
    for (name, value) in e.extra_headers() {
        put_field(&mut out, name, value);
    }
    put_field(&mut out, "Content-Type", "text/plain; charset=utf-8");
    put_field(&mut out, "Connection", "close");
    let _ = write!(out, "Content-Length: {}\r\n\r\n", body.len());
    out.put_slice(body);
    out
}

/// RFC 9110 §5.6.2: `token = 1*tchar`.
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// No control character but HTAB (so no CR, LF or NUL).
fn is_field_value(value: &str) -> bool {
    !value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

fn has_body(status: u16) -> bool {
    !(status < 200 || status == 204 || status == 304)
}

fn put_field(out: &mut BytesMut, name: &str, value: &str) {
    out.put_slice(name.as_bytes());
    out.put_slice(b": ");
    out.put_slice(value.as_bytes());
    out.put_slice(b"\r\n");
}
