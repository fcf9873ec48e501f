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
//! **Name resolution** uses the system resolver (`ToSocketAddrs`), which
//! std cannot bound in time: the deadline is checked after it, so a slow
//! resolver turns into [`HttpError::Timeout`] but may overrun the deadline.
//! Use an IP literal as the endpoint host where that matters.
//!
//! This is IO: it blocks and reads the clock. The control thread's edge
//! runs it on a worker thread, never inside a state machine.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

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

/// SPEC HO-3b: POSTs `body` (JSON) to `endpoint_url` and returns the
/// response, all within `timeout`.
pub fn post_json(
    endpoint_url: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<HttpResponse, HttpError> {
    let deadline = Instant::now() + timeout;
    let endpoint = Endpoint::parse(endpoint_url)?;
    let addrs: Vec<SocketAddr> = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .map_err(|e| HttpError::Resolve(e.to_string()))?
        .collect();
    let mut stream = connect(&addrs, deadline)?;
    let _ = stream.set_nodelay(true);

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
    stream
        .set_write_timeout(Some(remaining(deadline)?))
        .map_err(io_err)?;
    stream.write_all(&request).map_err(io_err)?;
    read_response(&mut stream, deadline)
}

fn remaining(deadline: Instant) -> Result<Duration, HttpError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(HttpError::Timeout)
    } else {
        Ok(left)
    }
}

fn io_err(e: io::Error) -> HttpError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HttpError::Timeout,
        _ => HttpError::Io(e.to_string()),
    }
}

fn connect(addrs: &[SocketAddr], deadline: Instant) -> Result<TcpStream, HttpError> {
    let mut last = HttpError::Resolve("no address".into());
    for addr in addrs {
        match TcpStream::connect_timeout(addr, remaining(deadline)?) {
            Ok(stream) => return Ok(stream),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                last = HttpError::Timeout;
            }
            Err(e) => last = HttpError::Connect(e.kind()),
        }
    }
    Err(last)
}

fn read_response(stream: &mut TcpStream, deadline: Instant) -> Result<HttpResponse, HttpError> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let mut head: Option<(u16, usize, usize)> = None; // (status, head_len, total)
    loop {
        if let Some((status, head_len, total)) = head {
            if buf.len() >= total {
                return Ok(HttpResponse {
                    status,
                    body: buf[head_len..total].to_vec(),
                });
            }
        } else if let Some(parsed) = parse_head(&buf)? {
            if parsed.2 > MAX_RESPONSE_BYTES {
                return Err(HttpError::TooLarge);
            }
            head = Some(parsed);
            continue;
        } else if buf.len() >= MAX_RESPONSE_BYTES {
            return Err(HttpError::TooLarge);
        }
        stream
            .set_read_timeout(Some(remaining(deadline)?))
            .map_err(io_err)?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        };
        if n == 0 {
            return Err(HttpError::Io(
                "connection closed before the response was complete".into(),
            ));
        }
        let room = MAX_RESPONSE_BYTES + 1 - buf.len().min(MAX_RESPONSE_BYTES);
        buf.extend_from_slice(&chunk[..n.min(room)]);
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
