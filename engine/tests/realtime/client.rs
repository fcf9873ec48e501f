//! Plain blocking clients for the tests: one HTTP request, an SSE stream
//! (chunked, parsed with the codec's SseParser), a WebSocket.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use dtp_codec::realtime::SseParser;
use dtp_codec::ws::{Decoder, FrameConfig, FrameError, Message, Opcode, Role, encode_frame};

/// A whole response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// Parses a response head at the start of `buf`: (status, headers, head length).
pub fn parse_head(buf: &[u8]) -> Option<(u16, Vec<(String, String)>, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    match r.parse(buf).unwrap() {
        httparse::Status::Partial => None,
        httparse::Status::Complete(n) => Some((
            r.code.unwrap(),
            r.headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
            n,
        )),
    }
}

/// Takes the whole chunks at the start of `buf` (chunked transfer coding),
/// appending their data to `out`; returns true once the last chunk came.
pub fn dechunk(buf: &mut Vec<u8>, out: &mut Vec<u8>) -> bool {
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

/// Sends `head` (request line and headers, without the blank line) and
/// `body`, and reads the whole response (the connection is closed after).
pub fn request(addr: SocketAddr, head: &str, body: &[u8]) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{head}\r\nHost: test\r\nConnection: close\r\n");
    if !body.is_empty() {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let (status, headers, n) = parse_head(&buf).expect("a whole response head");
    let mut rest = buf[n..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        let mut out = Vec::new();
        dechunk(&mut rest, &mut out);
        out
    } else {
        rest
    };
    Response {
        status,
        headers,
        body,
    }
}

/// Publishes `payload` (a JSON object) as `event_type` on `stream`.
pub fn publish(
    addr: SocketAddr,
    token: &str,
    stream: &str,
    event_type: &str,
    payload: &str,
) -> Response {
    let body = format!("{{\"eventType\":\"{event_type}\",\"payload\":{payload}}}");
    request(
        addr,
        &format!(
            "POST /v1/streams/{stream}/events HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json"
        ),
        body.as_bytes(),
    )
}

/// One received SSE event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: String,
    pub id: String,
    pub data: String,
}

/// An SSE stream being read.
pub struct Sse {
    pub stream: TcpStream,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    raw: Vec<u8>,
    parser: SseParser,
    pub events: Vec<Event>,
    pub ended: bool,
}

impl Sse {
    /// Opens `path` with `extra` header lines (each ending in `\r\n`).
    pub fn open(addr: SocketAddr, path: &str, extra: &str) -> Sse {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n{extra}\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 16384];
        let (status, headers, n) = loop {
            if let Some(h) = parse_head(&raw) {
                break h;
            }
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0, "closed before the response head");
            raw.extend_from_slice(&buf[..k]);
        };
        raw.drain(..n);
        let mut sse = Sse {
            stream: s,
            status,
            headers,
            raw,
            parser: SseParser::new(),
            events: Vec::new(),
            ended: false,
        };
        sse.take_buffered();
        sse
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn take_buffered(&mut self) {
        let mut data = Vec::new();
        if dechunk(&mut self.raw, &mut data) {
            self.ended = true;
        }
        let events = &mut self.events;
        self.parser
            .feed(&data, |e| {
                events.push(Event {
                    kind: e.event_type.to_owned(),
                    id: e.id.unwrap_or_default().to_owned(),
                    data: e.data.to_owned(),
                })
            })
            .unwrap();
    }

    /// Reads until `n` events (comments and `retry:` are not events) have
    /// come in all, or the stream ends; panics after the read timeout.
    pub fn wait_for(&mut self, n: usize) -> &[Event] {
        let mut buf = [0u8; 65536];
        while self.events.len() < n && !self.ended {
            let k = self.stream.read(&mut buf).unwrap();
            if k == 0 {
                self.ended = true;
                break;
            }
            self.raw.extend_from_slice(&buf[..k]);
            self.take_buffered();
        }
        &self.events
    }
}

/// A `realtime.v1` (or echo) WebSocket client.
pub struct Ws {
    pub stream: TcpStream,
    decoder: Decoder,
    buf: Vec<u8>,
}

impl Ws {
    /// Upgrades on `path`; returns the response head and, on 101, the client.
    pub fn connect(addr: SocketAddr, path: &str, extra: &str) -> (Response, Option<Ws>) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        let (status, headers, n) = loop {
            if let Some(h) = parse_head(&raw) {
                break h;
            }
            let k = s.read(&mut buf).unwrap();
            if k == 0 {
                panic!("closed before the response head");
            }
            raw.extend_from_slice(&buf[..k]);
        };
        let rest = raw.split_off(n);
        let resp = Response {
            status,
            headers,
            body: rest.clone(),
        };
        if status != 101 {
            return (resp, None);
        }
        let ws = Ws {
            stream: s,
            decoder: Decoder::new(FrameConfig::client(16 << 20)),
            buf: rest,
        };
        (resp, Some(ws))
    }

    pub fn send_frame(&mut self, fin: bool, opcode: Opcode, payload: &[u8]) {
        let wire = encode_frame(Role::Client, fin, opcode, payload, Some([1, 2, 3, 4])).unwrap();
        self.stream.write_all(&wire).unwrap();
    }

    pub fn send_text(&mut self, text: &str) {
        self.send_frame(true, Opcode::Text, text.as_bytes());
    }

    /// The next message, or `None` once the server closed the TCP stream.
    pub fn recv(&mut self) -> Option<Message> {
        let mut tmp = [0u8; 65536];
        loop {
            if !self.buf.is_empty() {
                match self.decoder.decode(&mut self.buf) {
                    Ok((used, msg)) => {
                        self.buf.drain(..used);
                        if let Some(m) = msg {
                            return Some(m);
                        }
                        continue;
                    }
                    Err(FrameError::Incomplete { .. }) => {}
                    Err(e) => panic!("bad frame from the server: {e:?}"),
                }
            }
            let k = self.stream.read(&mut tmp).unwrap();
            if k == 0 {
                return None;
            }
            self.buf.extend_from_slice(&tmp[..k]);
        }
    }

    /// The next message as JSON (panics if it is not text).
    pub fn recv_json(&mut self) -> serde_json::Value {
        match self.recv() {
            Some(Message::Text(t)) => serde_json::from_str(&t).unwrap(),
            other => panic!("expected a text message, got {other:?}"),
        }
    }
}
