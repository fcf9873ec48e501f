//! Plain blocking HTTP clients for the tests: one request per connection, a
//! keep-alive connection, publication helpers. The SSE client is in
//! `ssec.rs`, the WebSocket client in `wsc.rs`.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use dtp_codec::http::{ResponseLimits, parse_response_head};

/// How long a test waits for anything before it fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Polls `cond` until it holds; panics with `what` after [`PATIENCE`].
/// Never a timing assertion: only an upper bound on a hang.
pub(crate) fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A whole response.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// The failure kind of a refusal (SPEC RT-14), checking its form: a
    /// JSON object of exactly `error` and a short non-empty `message`.
    pub(crate) fn refusal(&self) -> String {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{}",
            self.text()
        );
        let v = self.json();
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 2, "{v}");
        let message = o["message"].as_str().unwrap();
        assert!(!message.is_empty() && message.len() <= 200, "{v}");
        o["error"].as_str().unwrap().to_owned()
    }

    /// The message of a refusal.
    pub(crate) fn message(&self) -> String {
        self.json()["message"].as_str().unwrap().to_owned()
    }

    /// The body as text (for assertion messages and exact comparisons).
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A parsed response head: status, headers, its length in bytes.
pub(crate) type Head = (u16, Vec<(String, String)>, usize);

/// Parses a response head at the start of `buf`: (status, headers, head length).
pub(crate) fn parse_head(buf: &[u8]) -> Option<Head> {
    let limits = ResponseLimits {
        max_head_bytes: 64 * 1024,
        max_headers: 32,
    };
    let (head, n) = parse_response_head(buf, &limits).unwrap()?;
    let headers = head
        .fields()
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                String::from_utf8_lossy(&f.value).into_owned(),
            )
        })
        .collect();
    Some((head.status(), headers, n))
}

/// Takes the whole chunks at the start of `buf` (chunked transfer coding),
/// appending their data to `out`; returns true once the last chunk came.
pub(crate) fn dechunk(buf: &mut Vec<u8>, out: &mut Vec<u8>) -> bool {
    loop {
        let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let len =
            usize::from_str_radix(std::str::from_utf8(&buf[..eol]).unwrap().trim(), 16).unwrap();
        if buf.len() < eol + 2 + len + 2 {
            return false;
        }
        out.extend_from_slice(&buf[eol + 2..eol + 2 + len]);
        buf.drain(..eol + 2 + len + 2);
        if len == 0 {
            return true;
        }
    }
}

/// Connects with the read timeout set.
pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Reads until the peer closes (a reset or a timeout fails the test).
pub(crate) fn read_to_eof(s: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .unwrap_or_else(|e| panic!("expected an orderly close, got {e} after {buf:?}"));
    buf
}

/// Takes one whole response with a `Content-Length` body from the start of
/// `buf`, if it is all there.
pub(crate) fn take_response(buf: &mut Vec<u8>) -> Option<Response> {
    let (status, headers, n) = parse_head(buf)?;
    let len: usize = header(&headers, "content-length")
        .map_or(0, |v| v.parse().expect("a numeric Content-Length"));
    if buf.len() < n + len {
        return None;
    }
    let body = buf[n..n + len].to_vec();
    buf.drain(..n + len);
    Some(Response {
        status,
        headers,
        body,
    })
}

/// Sends raw bytes on a new connection and reads every response until the
/// server closes it; asserts nothing but whole responses came.
pub(crate) fn exchange(addr: SocketAddr, raw: &[u8]) -> Vec<Response> {
    let mut s = connect(addr);
    s.write_all(raw).unwrap();
    let mut buf = read_to_eof(&mut s);
    let mut out = Vec::new();
    while let Some(r) = take_response(&mut buf) {
        out.push(r);
    }
    assert!(
        buf.is_empty(),
        "trailing bytes: {:?}",
        String::from_utf8_lossy(&buf)
    );
    out
}

/// Sends `head` (request line and headers, without the blank line) and
/// `body`, and reads the whole response (the connection is closed after).
pub(crate) fn request(addr: SocketAddr, head: &str, body: &[u8]) -> Response {
    let mut req = format!("{head}\r\nHost: test\r\nConnection: close\r\n");
    if !body.is_empty() {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    let mut raw = req.into_bytes();
    raw.extend_from_slice(body);
    let mut all = exchange(addr, &raw);
    assert_eq!(all.len(), 1, "one response: {all:?}");
    all.remove(0)
}

/// `Authorization: Bearer <token>` as a header line.
pub(crate) fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// Logs in with `token` (`POST /v1/login`) and returns the session cookie
/// as a `Cookie:` header line, after checking the cookie's attributes and
/// that it does not carry the token.
pub(crate) fn login_cookie(addr: SocketAddr, token: &str) -> String {
    let r = request(
        addr,
        format!("POST /v1/login HTTP/1.1\r\n{}", bearer(token)).trim_end(),
        b"",
    );
    assert_eq!(r.status, 204, "{}", r.text());
    let set = r.header("set-cookie").expect("a Set-Cookie").to_owned();
    assert!(
        set.ends_with("; Path=/; Max-Age=28800; HttpOnly; SameSite=Strict"),
        "{set}"
    );
    let pair = set.split(';').next().unwrap();
    assert!(pair.starts_with("dtp_session=v1."), "{set}");
    assert!(!pair.contains(token), "the cookie carries the token: {set}");
    format!("Cookie: {pair}\r\n")
}

/// A publication request body.
pub(crate) fn publication(event_type: &str, payload: &str) -> String {
    format!("{{\"eventType\":\"{event_type}\",\"payload\":{payload}}}")
}

/// Publishes `payload` (a JSON object) as `event_type` on `stream`.
pub(crate) fn publish(
    addr: SocketAddr,
    token: &str,
    stream: &str,
    event_type: &str,
    payload: &str,
) -> Response {
    request(
        addr,
        &format!(
            "POST /v1/streams/{stream}/events HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json"
        ),
        publication(event_type, payload).as_bytes(),
    )
}

/// Publishes `{"n":n}` for each `n` of `ns` on `ticks`; returns each
/// answer's `resumeCursor`.
pub(crate) fn publish_ticks(addr: SocketAddr, ns: std::ops::RangeInclusive<u64>) -> Vec<String> {
    ns.map(|n| {
        let r = publish(
            addr,
            crate::server::ADMIN,
            "ticks",
            "tick",
            &format!("{{\"n\":{n}}}"),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        let v = r.json();
        assert_eq!(v["sequence"], n.to_string(), "{v}");
        v["resumeCursor"].as_str().unwrap().to_owned()
    })
    .collect()
}

/// A forced retention cut of `stream` by `token` (answered 200 `{}`).
pub(crate) fn cut(addr: SocketAddr, token: &str, stream: &str) -> Response {
    let head = format!(
        "POST /v1/streams/{stream}/cut HTTP/1.1\r\n{}",
        bearer(token)
    );
    request(addr, head.trim_end(), b"")
}

/// A keep-alive HTTP connection.
pub(crate) struct Http {
    pub(crate) stream: TcpStream,
    buf: Vec<u8>,
}

impl Http {
    pub(crate) fn open(addr: SocketAddr) -> Http {
        Http {
            stream: connect(addr),
            buf: Vec::new(),
        }
    }

    /// Sends one request (`head` without the blank line; Host is added).
    pub(crate) fn send(&mut self, head: &str, body: &[u8]) {
        let mut req = format!("{head}\r\nHost: test\r\n");
        if !body.is_empty() {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut raw = req.into_bytes();
        raw.extend_from_slice(body);
        self.stream.write_all(&raw).unwrap();
    }

    /// The next whole response.
    pub(crate) fn recv(&mut self) -> Response {
        let mut tmp = [0u8; 65536];
        loop {
            if let Some(r) = take_response(&mut self.buf) {
                return r;
            }
            let k = self.stream.read(&mut tmp).unwrap();
            assert!(k > 0, "closed before a whole response");
            self.buf.extend_from_slice(&tmp[..k]);
        }
    }

    /// One request, its response.
    pub(crate) fn call(&mut self, head: &str, body: &[u8]) -> Response {
        self.send(head, body);
        self.recv()
    }
}
