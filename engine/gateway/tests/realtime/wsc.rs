//! A blocking WebSocket client for the tests (`realtime.v1` and echo), on
//! the codec's RFC 6455 layer, with helpers for `realtime.v1` sessions.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use dtp_codec::ws::{
    CloseCode, CloseFrame, Decoder, FrameConfig, FrameError, Message, Opcode, Role, encode_frame,
    encode_header,
};
use serde_json::{Value, json};

use crate::client::{Response, bearer, connect, parse_head, read_to_eof};

/// A WebSocket client.
pub(crate) struct Ws {
    pub(crate) stream: TcpStream,
    decoder: Decoder,
    buf: Vec<u8>,
}

/// The mask every client frame of the tests uses.
const MASK: [u8; 4] = [1, 2, 3, 4];

impl Ws {
    /// Upgrades on `path`; returns the response head and, on 101, the client.
    pub(crate) fn connect(addr: SocketAddr, path: &str, extra: &str) -> (Response, Option<Ws>) {
        Self::connect_with(addr, path, extra, &[])
    }

    /// As [`Ws::connect`], with `early` (client frames) written in the same
    /// write as the upgrade request.
    pub(crate) fn connect_with(
        addr: SocketAddr,
        path: &str,
        extra: &str,
        early: &[u8],
    ) -> (Response, Option<Ws>) {
        let mut s = connect(addr);
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        );
        let mut wire = req.into_bytes();
        wire.extend_from_slice(early);
        s.write_all(&wire).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        let (status, headers, n) = loop {
            if let Some(h) = parse_head(&raw) {
                break h;
            }
            let k = s.read(&mut buf).unwrap();
            assert!(k > 0, "closed before the response head");
            raw.extend_from_slice(&buf[..k]);
        };
        let rest = raw.split_off(n);
        if status != 101 {
            // A refusal: its body, then the connection closes.
            let mut body = rest;
            body.extend_from_slice(&read_to_eof(&mut s));
            let resp = Response {
                status,
                headers,
                body,
            };
            return (resp, None);
        }
        let resp = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let ws = Ws {
            stream: s,
            decoder: Decoder::new(FrameConfig::client(16 << 20)),
            buf: rest,
        };
        (resp, Some(ws))
    }

    /// A `realtime.v1` session of `token`; returns it with its WELCOME.
    pub(crate) fn realtime(addr: SocketAddr, token: &str) -> (Ws, Value) {
        let extra = format!("Sec-WebSocket-Protocol: realtime.v1\r\n{}", bearer(token));
        let (resp, ws) = Ws::connect(addr, "/v1/ws", &extra);
        assert_eq!(resp.status, 101, "{}", resp.text());
        let mut ws = ws.unwrap();
        let welcome = ws.recv_json();
        assert_eq!(welcome["type"], "WELCOME", "{welcome}");
        (ws, welcome)
    }

    /// The echo endpoint.
    pub(crate) fn echo(addr: SocketAddr) -> Ws {
        let (resp, ws) = Ws::connect(addr, "/v1/echo", "");
        assert_eq!(resp.status, 101, "{}", resp.text());
        ws.unwrap()
    }

    /// Sends raw bytes.
    pub(crate) fn send_raw(&mut self, wire: &[u8]) {
        self.stream.write_all(wire).unwrap();
    }

    /// One masked text frame's bytes.
    pub(crate) fn text_frame(text: &str) -> Vec<u8> {
        encode_frame(
            Role::Client,
            true,
            Opcode::Text,
            text.as_bytes(),
            Some(MASK),
        )
        .unwrap()
    }

    /// Sends one masked frame.
    pub(crate) fn send_frame(&mut self, fin: bool, opcode: Opcode, payload: &[u8]) {
        let wire = encode_frame(Role::Client, fin, opcode, payload, Some(MASK)).unwrap();
        self.send_raw(&wire);
    }

    /// Sends only the header of a masked frame of `len` bytes.
    pub(crate) fn send_header(&mut self, opcode: Opcode, len: u64) {
        let h = encode_header(Role::Client, true, opcode, len, Some(MASK)).unwrap();
        self.send_raw(h.as_slice());
    }

    pub(crate) fn send_text(&mut self, text: &str) {
        self.send_frame(true, Opcode::Text, text.as_bytes());
    }

    pub(crate) fn send_json(&mut self, v: &Value) {
        self.send_text(&v.to_string());
    }

    /// The next message, or `None` once the server closed the TCP stream.
    pub(crate) fn recv(&mut self) -> Option<Message> {
        let mut tmp = [0u8; 65536];
        loop {
            if let Some((msg, used)) = raw_close(&self.buf) {
                self.buf.drain(..used);
                return Some(msg);
            }
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
                assert!(self.buf.is_empty(), "the server closed inside a frame");
                return None;
            }
            self.buf.extend_from_slice(&tmp[..k]);
        }
    }

    /// The next message as JSON (panics if it is not text).
    pub(crate) fn recv_json(&mut self) -> Value {
        match self.recv() {
            Some(Message::Text(t)) => serde_json::from_str(&t).unwrap(),
            other => panic!("expected a text message, got {other:?}"),
        }
    }

    /// The next message must be a close frame: its code (`None`: empty).
    pub(crate) fn recv_close(&mut self) -> Option<u16> {
        match self.recv() {
            Some(Message::Close(cf)) => cf.map(|c| c.code.0),
            other => panic!("expected a close frame, got {other:?}"),
        }
    }

    /// Nothing more comes: the server closes the TCP stream.
    pub(crate) fn expect_eof(&mut self) {
        match self.recv() {
            None => {}
            Some(m) => panic!("expected the end of the stream, got {m:?}"),
        }
    }

    /// The session is closed for a protocol violation: CLOSE{category},
    /// the close frame with `code`, then the end of the stream.
    pub(crate) fn expect_closed_with(&mut self, category: &str, code: u16) {
        assert_eq!(
            self.recv_json(),
            json!({"type":"CLOSE","category":category})
        );
        assert_eq!(self.recv_close(), Some(code));
        self.expect_eof();
    }

    /// A close frame with `code` and then the end of the stream, with no
    /// `realtime.v1` message before it.
    pub(crate) fn expect_close_frame(&mut self, code: u16) {
        assert_eq!(self.recv_close(), Some(code));
        self.expect_eof();
    }

    /// SUBSCRIBE; the answer is read by the caller.
    pub(crate) fn subscribe(&mut self, id: &str, stream: &str, cursor: Option<&str>, scope: &str) {
        self.send_json(&json!({
            "type": "SUBSCRIBE",
            "subscriptionId": id,
            "streamId": stream,
            "cursor": cursor,
            "scopeBinding": scope,
        }));
    }

    /// SUBSCRIBE to `ticks` without a cursor; asserts SUBSCRIBED with
    /// `next` as its next expected sequence.
    pub(crate) fn subscribe_ticks(&mut self, id: &str, next: u64) -> Value {
        self.subscribe(id, "ticks", None, "scope-ticks");
        let v = self.recv_json();
        assert_eq!(v["type"], "SUBSCRIBED", "{v}");
        assert_eq!(v["subscriptionId"], id);
        assert_eq!(v["acceptedCursor"], Value::Null);
        assert_eq!(v["nextExpectedSequence"], next.to_string());
        v
    }

    /// A HEARTBEAT round trip: the very next message is its ACK.
    pub(crate) fn heartbeat(&mut self, nonce: &str) {
        self.send_json(&json!({"type":"HEARTBEAT","nonce":nonce}));
        assert_eq!(
            self.recv_json(),
            json!({"type":"HEARTBEAT_ACK","nonce":nonce})
        );
    }

    /// The next message is an EVENT of `sub` for sequence `seq`; returns
    /// its envelope.
    pub(crate) fn expect_event(&mut self, sub: &str, seq: u64) -> Value {
        let v = self.recv_json();
        assert_eq!(v["type"], "EVENT", "{v}");
        assert_eq!(v["subscriptionId"], sub, "{v}");
        assert_eq!(v["envelope"]["sequence"], seq.to_string(), "{v}");
        v["envelope"].clone()
    }
}

/// A whole unmasked close frame at the start of `buf`, read here rather
/// than by the codec's decoder: `CloseCode::is_valid_on_wire` refuses
/// 1012–1014, which the server sends (CLOSE OVERLOADED is 1013, IANA
/// "Try Again Later") and browsers accept.
fn raw_close(buf: &[u8]) -> Option<(Message, usize)> {
    let (&b0, &b1) = (buf.first()?, buf.get(1)?);
    if b0 != 0x88 || b1 & 0x80 != 0 || b1 & 0x7f > 125 {
        return None;
    }
    let len = usize::from(b1 & 0x7f);
    let payload = buf.get(2..2 + len)?;
    let frame = match payload {
        [] => None,
        [hi, lo, reason @ ..] => Some(CloseFrame {
            code: CloseCode(u16::from_be_bytes([*hi, *lo])),
            reason: String::from_utf8(reason.to_vec()).unwrap(),
        }),
        [_] => panic!("a one-byte close payload"),
    };
    Some((Message::Close(frame), 2 + len))
}

/// The keys of a JSON object, sorted.
pub(crate) fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}
