//! The admin port's HTTP/1.1, server side: one bounded request per
//! connection (head at most [`MAX_HEAD`] bytes, body at most [`MAX_BODY`]
//! with a `content-length`), one response, then close.

use std::io::{self, Read, Write};
use std::net::TcpStream;

use dtp_codec::http::{HttpError, HttpLimits, parse_request_head, reason_phrase};
use serde::Serialize;

/// The largest request head accepted (request line and headers).
pub(super) const MAX_HEAD: usize = 8 * 1024;

/// The largest request body accepted: room for a credential in its text
/// form (at most 64 KiB) inside a JSON object.
pub(super) const MAX_BODY: usize = 96 * 1024;

/// One request, as much of it as the admin surface looks at.
pub(super) struct Request {
    pub method: String,
    /// The path without its query string, still percent-encoded.
    pub path: String,
    /// The `authorization` header, if any.
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

/// One response.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub extra_headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, value: &impl Serialize) -> Self {
        // A value of our own types that fails to serialise is a bug; say so
        // in a body that still parses rather than panicking the thread.
        let body = serde_json::to_vec(value).unwrap_or_else(|e| {
            format!("{{\"error\":\"INTERNAL\",\"message\":\"cannot encode the answer: {e}\"}}")
                .into_bytes()
        });
        Response {
            status,
            content_type: "application/json",
            extra_headers: Vec::new(),
            body,
        }
    }

    /// `{"error": code, "message": message}` with `status`.
    pub fn error(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self::json(
            status,
            &serde_json::json!({"error": code, "message": message.into()}),
        )
    }

    /// Plain text (the Prometheus exposition).
    pub fn text(status: u16, content_type: &'static str, body: String) -> Self {
        Response {
            status,
            content_type,
            extra_headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    /// The same response with one more header.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.extra_headers.push((name, value.into()));
        self
    }

    /// Writes the response; the connection closes after it.
    pub fn write_to(&self, stream: &mut impl Write) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: {}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.extra_headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(&self.body)?;
        stream.flush()
    }
}

/// The codec's reason phrase, `Unknown` for a code it has none for.
fn reason(status: u16) -> &'static str {
    match reason_phrase(status) {
        "" => "Unknown",
        phrase => phrase,
    }
}

/// Why no request came out of a connection.
pub(super) enum ReadError {
    /// The request is refused with this response.
    Refuse(Response),
    /// The socket failed.
    Io(io::Error),
}

impl From<Response> for ReadError {
    fn from(r: Response) -> Self {
        ReadError::Refuse(r)
    }
}

/// A parsed request head.
struct Head {
    /// Its length in bytes.
    len: usize,
    /// The request, body still empty.
    request: Request,
    /// The `content-length`.
    body_len: usize,
}

/// Reads one request. `Ok(None)`: the peer closed before sending one.
pub(super) fn read_request(stream: &mut TcpStream) -> Result<Option<Request>, ReadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut tmp = [0u8; 4096];
    let head = loop {
        let n = stream.read(&mut tmp).map_err(ReadError::Io)?;
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(Response::error(400, "BAD_REQUEST", "incomplete request").into());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(head) = parse_head(&buf)? {
            break head;
        }
    };
    let too_long = || {
        let m = "more bytes than content-length (one request per connection)";
        ReadError::Refuse(Response::error(400, "BAD_REQUEST", m))
    };
    let mut body = buf.split_off(head.len.min(buf.len()));
    while body.len() < head.body_len {
        let n = stream.read(&mut tmp).map_err(ReadError::Io)?;
        if n == 0 {
            let m = "the body is shorter than content-length";
            return Err(Response::error(400, "BAD_REQUEST", m).into());
        }
        body.extend_from_slice(&tmp[..n]);
    }
    if body.len() > head.body_len {
        return Err(too_long());
    }
    let mut request = head.request;
    request.body = body;
    Ok(Some(request))
}

/// Parses the head in `buf` with the codec's request parser; `Ok(None)`
/// when more bytes are needed.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, Response> {
    let limits = HttpLimits {
        max_head_bytes: MAX_HEAD,
        max_headers: 32,
        max_uri_len: MAX_HEAD,
        max_body_bytes: MAX_BODY as u64,
    };
    let (head, len) = match parse_request_head(buf, &limits) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Ok(None),
        Err(HttpError::HeadTooLarge | HttpError::TooManyHeaders | HttpError::UriTooLong) => {
            return Err(Response::error(
                431,
                "HEADERS_TOO_LARGE",
                format!("the request head may be at most {MAX_HEAD} bytes and 32 headers"),
            ));
        }
        Err(HttpError::BodyTooLarge) => {
            let m = format!("the body may be at most {MAX_BODY} bytes");
            return Err(Response::error(413, "PAYLOAD_TOO_LARGE", m));
        }
        Err(
            HttpError::TransferEncodingNotImplemented
            | HttpError::ContentLengthWithTransferEncoding,
        ) => {
            return Err(Response::error(
                411,
                "LENGTH_REQUIRED",
                "send the body with a content-length, not chunked",
            ));
        }
        Err(HttpError::InvalidContentLength | HttpError::DuplicateContentLength) => {
            return Err(Response::error(400, "BAD_REQUEST", "bad content-length"));
        }
        Err(e) => return Err(Response::error(400, "BAD_REQUEST", e.reason())),
    };
    let request = Request {
        method: head.method().as_str().to_owned(),
        path: head.path().to_owned(),
        authorization: head.header("authorization").map(str::to_owned),
        body: Vec::new(),
    };
    Ok(Some(Head {
        len,
        request,
        // At most MAX_BODY: the parser refused more.
        body_len: usize::try_from(head.content_length()).unwrap_or(usize::MAX),
    }))
}

/// Decodes `%XX` escapes in one path segment; `None` if malformed or not
/// UTF-8.
pub(super) fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn percent_decoding_round_trips_and_refuses_bad_escapes() {
        assert_eq!(percent_decode("cam%2F1").as_deref(), Some("cam/1"));
        assert_eq!(percent_decode("plain").as_deref(), Some("plain"));
        assert_eq!(percent_decode("bad%2"), None);
        assert_eq!(percent_decode("bad%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn heads_give_path_length_and_authorization() {
        let raw =
            b"POST /v1/x?y=1 HTTP/1.1\r\ncontent-length: 5\r\nAuthorization: Bearer t\r\n\r\nhello";
        let head = parse_head(raw).ok().unwrap().unwrap();
        assert_eq!((head.len, head.body_len), (raw.len() - 5, 5));
        let req = head.request;
        assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/v1/x"));
        assert_eq!(req.authorization.as_deref(), Some("Bearer t"));
        assert!(parse_head(b"GET / HTTP/1.1\r\n").ok().unwrap().is_none());
        let chunked = b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(parse_head(chunked).err().unwrap().status, 411);
    }
}
