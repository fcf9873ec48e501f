//! SPEC HO-3b: a small blocking HTTP/1.1 client for the model call.
//!
//! One `POST` per connection (`Connection: close`), JSON in, JSON out,
//! with every step — connect, write, read — inside one hard deadline. The
//! response head is parsed by `dtp_codec::http`; only `Content-Length`
//! bodies are read (no chunked encoding), and a response larger than
//! [`MAX_RESPONSE_BYTES`] is refused.
//!
//! **`http://` only.** There is no TLS here: the model endpoint is expected
//! on the terminal itself or on a trusted local network segment (the request
//! carries no credential secrets, see [`super::ContextField`]). An `https://`
//! endpoint is a configuration error; put a TLS-terminating proxy on
//! localhost if the model is remote.
//!
//! This module is the sans-IO half: the endpoint, the request bytes
//! ([`request`]) and the response framing ([`ResponseReader`]). The blocking
//! half — resolve, connect, write and read inside the deadline — is
//! `dtp_gateway::plane::post_json`, which the control thread's edge runs on a
//! worker thread, never inside a state machine.

use std::io;

use dtp_codec::http::{ResponseError, ResponseLimits, parse_response_head};

/// The largest response (head and body) read from the model.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// The most response headers parsed.
const MAX_HEADERS: usize = 32;

/// A parsed `http://host[:port]/path` endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP literal (without IPv6 brackets).
    pub host: String,
    /// TCP port (80 when absent).
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

impl Endpoint {
    /// Parses an endpoint URL; only `http://` is accepted.
    pub fn parse(url: &str) -> Result<Self, HttpError> {
        let bad = |why: &str| HttpError::InvalidUrl(why.to_owned());
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => {
                return Err(bad(&format!(
                    "scheme {scheme:?} is not supported (http only)"
                )));
            }
            None => return Err(bad("missing http:// scheme")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if !path.bytes().all(|b| b.is_ascii_graphic()) || path.contains('#') {
            return Err(bad("path must be visible ASCII without a fragment"));
        }
        if authority.contains('@') {
            return Err(bad("user info is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            match after {
                "" => (host, None),
                p => (
                    host,
                    Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?),
                ),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("missing or invalid host"));
        }
        let port = match port {
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("invalid port"))?,
        };
        Ok(Self {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }

    fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// A model's HTTP response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The body (exactly Content-Length bytes).
    pub body: Vec<u8>,
}

/// Why a model call produced no response (see the failure rule in
/// [`super`] for which of these reject and which fall back).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The endpoint is not a usable `http://` URL.
    #[error("invalid model endpoint: {0}")]
    InvalidUrl(String),
    /// The host name did not resolve.
    #[error("model host did not resolve: {0}")]
    Resolve(String),
    /// No connection (refused, unreachable…).
    #[error("cannot connect to the model: {0:?}")]
    Connect(io::ErrorKind),
    /// The deadline passed before a complete response arrived.
    #[error("model did not answer in time")]
    Timeout,
    /// The connection failed after it was made (reset, closed early…).
    #[error("model connection failed: {0}")]
    Io(String),
    /// The response is not HTTP/1.x we accept.
    #[error("malformed model response: {0}")]
    Malformed(String),
    /// The response is larger than [`MAX_RESPONSE_BYTES`].
    #[error("model response larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
}

impl HttpError {
    /// Whether the hard timeout was hit (SPEC HO-3b: treat as reject).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout)
    }
}

/// SPEC HO-3b: the bytes of one `POST` of `body` (JSON) to `endpoint`,
/// head and body, on a connection the request closes.
pub fn request(endpoint: &Endpoint, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\
         User-Agent: dtp-policy\r\n\r\n",
        endpoint.path,
        endpoint.host_header(),
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    request
}

/// SPEC HO-3b: frames the model's response from the bytes read so far:
/// push what the connection gave ([`ResponseReader::push`]), then ask
/// whether the response is complete ([`ResponseReader::response`]). Holds
/// at most [`MAX_RESPONSE_BYTES`] + 1 bytes.
#[derive(Debug, Default)]
pub struct ResponseReader {
    buf: Vec<u8>,
    /// `(status, head length, head + body length)` once the head is parsed.
    head: Option<(u16, usize, usize)>,
}

impl ResponseReader {
    /// An empty reader.
    pub fn new() -> Self {
        Self {
            buf: Vec::with_capacity(4096),
            head: None,
        }
    }

    /// The whole response once it has arrived; `Ok(None)` while more bytes
    /// are needed.
    pub fn response(&mut self) -> Result<Option<HttpResponse>, HttpError> {
        if self.head.is_none() {
            match parse_head(&self.buf)? {
                Some(parsed) if parsed.2 > MAX_RESPONSE_BYTES => return Err(HttpError::TooLarge),
                Some(parsed) => self.head = Some(parsed),
                None if self.buf.len() >= MAX_RESPONSE_BYTES => return Err(HttpError::TooLarge),
                None => return Ok(None),
            }
        }
        Ok(match self.head {
            Some((status, head_len, total)) if self.buf.len() >= total => Some(HttpResponse {
                status,
                body: self.buf[head_len..total].to_vec(),
            }),
            _ => None,
        })
    }

    /// Takes bytes read from the connection (beyond the limit they are
    /// dropped: [`ResponseReader::response`] then refuses the response).
    pub fn push(&mut self, bytes: &[u8]) {
        let room = MAX_RESPONSE_BYTES + 1 - self.buf.len().min(MAX_RESPONSE_BYTES);
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// `(status, head length, head + body length)` once the head is complete
/// (the codec's response parser, then this client's own rule: a
/// `Content-Length` body only).
fn parse_head(buf: &[u8]) -> Result<Option<(u16, usize, usize)>, HttpError> {
    let limits = ResponseLimits {
        max_head_bytes: MAX_RESPONSE_BYTES,
        max_headers: MAX_HEADERS,
    };
    let (response, head_len) = match parse_response_head(buf, &limits) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => return Ok(None),
        Err(ResponseError::HeadTooLarge { .. }) => return Err(HttpError::TooLarge),
        Err(e) => return Err(HttpError::Malformed(e.to_string())),
    };
    if response.has_transfer_encoding() {
        return Err(HttpError::Malformed(
            "Transfer-Encoding is not supported".into(),
        ));
    }
    let length = response
        .content_length()
        .ok_or_else(|| HttpError::Malformed("no Content-Length".into()))?;
    let total = usize::try_from(length)
        .ok()
        .and_then(|l| head_len.checked_add(l))
        .ok_or(HttpError::TooLarge)?;
    Ok(Some((response.status(), head_len, total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("http://127.0.0.1:8080/v1/decide?x=1").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 8080, "/v1/decide?x=1")
        );
        assert_eq!(e.host_header(), "127.0.0.1:8080");
        let e = Endpoint::parse("HTTP://model.local").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("model.local", 80, "/")
        );
        assert_eq!(e.host_header(), "model.local");
        let e = Endpoint::parse("http://[::1]:9000/d").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 9000));
        assert_eq!(e.host_header(), "[::1]:9000");
    }

    #[test]
    fn bad_endpoints_are_refused() {
        for url in [
            "https://model/decide",
            "model:80/decide",
            "http://:80/",
            "http://host:0/",
            "http://host:99999/",
            "http://host:x/",
            "http://user@host/",
            "http://[::1/",
            "http://[::1]x/",
            "http://host/a b",
            "http://host/a#frag",
            "http://host/a\r\nX: y",
        ] {
            assert!(
                matches!(Endpoint::parse(url), Err(HttpError::InvalidUrl(_))),
                "{url:?} was accepted"
            );
        }
    }

    #[test]
    fn requests_are_one_post_that_closes() {
        let e = Endpoint::parse("http://[::1]:9000/v1/decide").unwrap();
        let r = String::from_utf8(request(&e, b"{}")).unwrap();
        assert_eq!(
            r,
            "POST /v1/decide HTTP/1.1\r\nHost: [::1]:9000\r\nContent-Type: application/json\r\n\
             Accept: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\
             User-Agent: dtp-policy\r\n\r\n{}"
        );
    }

    #[test]
    fn responses_are_framed_from_pieces() {
        let mut r = ResponseReader::new();
        assert_eq!(r.response(), Ok(None));
        r.push(b"HTTP/1.1 200 OK\r\nContent-");
        assert_eq!(r.response(), Ok(None));
        r.push(b"Length: 2\r\n\r\n{");
        assert_eq!(r.response(), Ok(None));
        r.push(b"}");
        let done = r.response().unwrap().unwrap();
        assert_eq!((done.status, done.body.as_slice()), (200, &b"{}"[..]));
        let mut big = ResponseReader::new();
        big.push(b"HTTP/1.1 200 OK\r\nX-Pad: ");
        big.push(&vec![b'x'; 2 * MAX_RESPONSE_BYTES]);
        assert_eq!(big.response(), Err(HttpError::TooLarge));
    }

    #[test]
    fn heads_parse_strictly() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_head(ok).unwrap(), Some((200, 38, 40)));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
        for bad in [
            &b"HTTP/1.1 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"NOT HTTP\r\n\r\n",
        ] {
            assert!(
                matches!(parse_head(bad), Err(HttpError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
