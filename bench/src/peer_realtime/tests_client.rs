//! Plain blocking clients for the peer's tests: a peer on a free port, HTTP
//! requests, an SSE reader (chunked, [`SseParser`]) and a `realtime.v1`
//! client framed with `dtp_codec::ws`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use dtp_codec::http::{ResponseLimits, parse_response_head};
use dtp_codec::realtime::{ClientMessage, JsonLimits, ServerMessage, SseParser};
use dtp_codec::ws::{Decoder, FrameConfig, FrameError, Message, Opcode, Role, encode_frame};
use tokio::sync::oneshot;

use super::{PeerConfig, run_until};

/// How long a read waits before the test fails (a bound on a hang only).
pub(super) const PATIENCE: Duration = Duration::from_secs(20);
pub(super) const TOKEN: &str = "test-token-123";

/// A peer on a free port, stopped when dropped.
pub(super) struct Peer {
    pub(super) addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<std::io::Result<()>>>,
}

impl Peer {
    /// Streams `demo` (scope `demo-scope`) and `other` (`other-scope`).
    pub(super) fn start() -> Self {
        let config = PeerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            workers: 2,
            token: TOKEN.into(),
            streams: vec![
                ("demo".into(), "demo-scope".into()),
                ("other".into(), "other-scope".into()),
            ],
            ..PeerConfig::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = thread::spawn(move || {
            run_until(config, move |a| tx.send(a).unwrap(), async move {
                let _ = stopped.await;
            })
        });
        let addr = rx.recv().unwrap();
        Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        if let Some(t) = self.thread.take() {
            t.join().unwrap().unwrap();
        }
    }
}

pub(super) fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// A response head: status and headers (names lowercase).
#[derive(Debug)]
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
}

impl Head {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads from `s` until `buf` holds a whole head; returns it and drops its
/// bytes from `buf`.
pub(super) fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> Head {
    loop {
        if let Some((head, n)) = parse_response_head(buf, &ResponseLimits::default()).unwrap() {
            buf.drain(..n);
            let headers = head
                .fields()
                .iter()
                .map(|f| {
                    let value = String::from_utf8(f.value.clone()).unwrap();
                    (f.name.to_ascii_lowercase(), value)
                })
                .collect();
            return Head {
                status: head.status(),
                headers,
            };
        }
        read_more(s, buf);
    }
}

fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> usize {
    let mut chunk = [0u8; 16 * 1024];
    let n = s.read(&mut chunk).unwrap();
    buf.extend_from_slice(&chunk[..n]);
    n
}

/// Sends one request (with a body when given) on a keep-alive connection
/// and reads its `Content-Length` response.
pub(super) fn exchange(s: &mut TcpStream, head: &str, body: &str) -> (Head, String) {
    let req = format!(
        "{head}\r\nHost: test\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let h = read_head(s, &mut buf);
    let len: usize = h.header("content-length").unwrap().parse().unwrap();
    while buf.len() < len {
        assert_ne!(read_more(s, &mut buf), 0, "closed inside a body");
    }
    assert_eq!(buf.len(), len, "nothing after the response");
    (h, String::from_utf8(buf).unwrap())
}

/// One request on a new connection.
pub(super) fn request(addr: SocketAddr, head: &str, body: &str) -> (Head, String) {
    exchange(&mut connect(addr), head, body)
}

/// The request head of a publication on `stream` with the test token.
pub(super) fn publish_head(stream: &str) -> String {
    format!(
        "POST /v1/streams/{stream}/events HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json"
    )
}

/// Publishes `demo.tick` `{"n":n}` on `stream` over `s`; returns the answer.
pub(super) fn publish_on(s: &mut TcpStream, stream: &str, n: u64) -> serde_json::Value {
    publish_padded(s, stream, n, 0)
}

/// [`publish_on`] with a `pad` string of `pad` bytes in the payload.
pub(super) fn publish_padded(
    s: &mut TcpStream,
    stream: &str,
    n: u64,
    pad: usize,
) -> serde_json::Value {
    let pad = if pad == 0 {
        String::new()
    } else {
        format!(",\"pad\":\"{}\"", "x".repeat(pad))
    };
    let body = format!("{{\"eventType\":\"demo.tick\",\"payload\":{{\"n\": {n}{pad}}}}}");
    let (h, body) = exchange(s, &publish_head(stream), &body);
    assert_eq!(h.status, 201, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// One dispatched SSE event, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Sse {
    pub(super) event: String,
    pub(super) data: String,
    pub(super) id: Option<String>,
}

/// An SSE subscriber reading a chunked `text/event-stream` body.
pub(super) struct SseClient {
    pub(super) s: TcpStream,
    pub(super) head: Head,
    raw: Vec<u8>,
    pub(super) parser: SseParser,
    events: std::collections::VecDeque<Sse>,
    /// The last chunk came: the stream ended.
    pub(super) ended: bool,
}

impl SseClient {
    pub(super) fn open(addr: SocketAddr, stream: &str, last_event_id: Option<&str>) -> Self {
        Self::open_on(connect(addr), stream, last_event_id)
    }

    pub(super) fn open_on(mut s: TcpStream, stream: &str, last_event_id: Option<&str>) -> Self {
        let resume = last_event_id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
        let req = format!(
            "GET /v1/streams/{stream}/sse HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {TOKEN}\r\n{resume}Accept: text/event-stream\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let head = read_head(&mut s, &mut raw);
        assert_eq!(head.status, 200);
        assert_eq!(head.header("transfer-encoding"), Some("chunked"));
        Self {
            s,
            head,
            raw,
            parser: SseParser::new(),
            events: Default::default(),
            ended: false,
        }
    }

    /// The next event; `None` once the stream ended without more.
    pub(super) fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(e) = self.events.pop_front() {
                return Some(e);
            }
            if self.ended {
                return None;
            }
            self.dechunk();
            if self.events.is_empty() && !self.ended {
                assert_ne!(
                    read_more(&mut self.s, &mut self.raw),
                    0,
                    "closed mid-stream"
                );
            }
        }
    }

    /// Feeds every whole chunk of `raw` to the parser.
    fn dechunk(&mut self) {
        while let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") {
            let size = std::str::from_utf8(&self.raw[..eol]).unwrap();
            let len = usize::from_str_radix(size.trim(), 16).unwrap();
            if self.raw.len() < eol + 2 + len + 2 {
                return;
            }
            let data = self.raw[eol + 2..eol + 2 + len].to_vec();
            self.raw.drain(..eol + 2 + len + 2);
            if len == 0 {
                self.ended = true;
                return;
            }
            let events = &mut self.events;
            self.parser
                .feed(&data, |e| {
                    events.push_back(Sse {
                        event: e.event_type.to_owned(),
                        data: e.data.to_owned(),
                        id: e.id.map(str::to_owned),
                    });
                })
                .unwrap();
        }
    }
}

/// A `realtime.v1` client.
pub(super) struct WsClient {
    pub(super) s: TcpStream,
    buf: Vec<u8>,
    decoder: Decoder,
}

/// The upgrade request for `/v1/ws` with `extra` header lines.
pub(super) fn upgrade_request(extra: &str) -> String {
    format!(
        "GET /v1/ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{extra}\r\n"
    )
}

impl WsClient {
    /// Upgrades with the token and the subprotocol; asserts the 101.
    pub(super) fn open(addr: SocketAddr) -> Self {
        Self::open_on(connect(addr))
    }

    pub(super) fn open_on(mut s: TcpStream) -> Self {
        let extra =
            format!("Authorization: Bearer {TOKEN}\r\nSec-WebSocket-Protocol: realtime.v1\r\n");
        s.write_all(upgrade_request(&extra).as_bytes()).unwrap();
        let mut buf = Vec::new();
        let head = read_head(&mut s, &mut buf);
        assert_eq!(head.status, 101);
        assert_eq!(head.header("sec-websocket-protocol"), Some("realtime.v1"));
        Self {
            s,
            buf,
            decoder: Decoder::new(FrameConfig::client(1 << 20)),
        }
    }

    pub(super) fn send_frame(&mut self, opcode: Opcode, payload: &[u8]) {
        let frame = encode_frame(Role::Client, true, opcode, payload, Some([7, 1, 9, 3])).unwrap();
        self.s.write_all(&frame).unwrap();
    }

    pub(super) fn send(&mut self, msg: &ClientMessage) {
        self.send_frame(Opcode::Text, &msg.encode().unwrap());
    }

    /// The next message (control frames included).
    pub(super) fn recv(&mut self) -> Message {
        loop {
            if !self.buf.is_empty() {
                match self.decoder.decode(&mut self.buf[..]) {
                    Ok((used, msg)) => {
                        self.buf.drain(..used);
                        if let Some(m) = msg {
                            return m;
                        }
                        continue;
                    }
                    Err(FrameError::Incomplete { .. }) => {}
                    Err(FrameError::Protocol(e)) => panic!("bad frame from the peer: {e:?}"),
                }
            }
            assert_ne!(
                read_more(&mut self.s, &mut self.buf),
                0,
                "closed, no close frame"
            );
        }
    }

    /// The next text message, raw.
    pub(super) fn recv_text(&mut self) -> String {
        match self.recv() {
            Message::Text(t) => t,
            other => panic!("expected a text message, got {other:?}"),
        }
    }

    /// The next text message, decoded as the client library would.
    pub(super) fn recv_msg(&mut self) -> ServerMessage {
        ServerMessage::decode(self.recv_text().as_bytes(), &JsonLimits::default()).unwrap()
    }
}
