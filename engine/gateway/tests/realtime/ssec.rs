//! An SSE client for the tests: a chunked `text/event-stream` response
//! parsed with the codec's SseParser, and helpers on its events.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use dtp_codec::realtime::SseParser;

use crate::client::{bearer, connect, dechunk, parse_head, read_to_eof};

/// One received SSE event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// The `event` field, `message` when none.
    pub(crate) kind: String,
    /// The block's own `id`, if it had one.
    pub(crate) id: Option<String>,
    pub(crate) data: String,
}

/// An SSE stream being read.
pub(crate) struct Sse {
    pub(crate) stream: TcpStream,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    raw: Vec<u8>,
    parser: SseParser,
    pub(crate) events: Vec<Event>,
    /// The last chunk came.
    pub(crate) ended: bool,
}

impl Sse {
    /// Opens `path` with `extra` header lines (each ending in `\r\n`).
    pub(crate) fn open(addr: SocketAddr, path: &str, extra: &str) -> Sse {
        let mut s = connect(addr);
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

    /// Opens `ticks` as READER, asserting the 200.
    pub(crate) fn ticks(addr: SocketAddr, extra: &str) -> Sse {
        let extra = format!("{}{extra}", bearer(crate::server::READER));
        let sse = Sse::open(addr, "/v1/streams/ticks/sse", &extra);
        assert_eq!(sse.status, 200);
        sse
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The latest `retry:` value seen, ms.
    pub(crate) fn retry(&self) -> Option<u64> {
        self.parser.retry()
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
                    id: e.id.map(str::to_owned),
                    data: e.data.to_owned(),
                })
            })
            .unwrap();
    }

    /// Reads until `n` events (comments and `retry:` are not events) have
    /// come in all, or the stream ends; panics after the read timeout.
    pub(crate) fn wait_for(&mut self, n: usize) -> &[Event] {
        let mut buf = [0u8; 65536];
        while self.events.len() < n && !self.ended {
            let k = self.stream.read(&mut buf).unwrap();
            if k == 0 {
                panic!("the SSE stream closed without its last chunk");
            }
            self.raw.extend_from_slice(&buf[..k]);
            self.take_buffered();
        }
        &self.events
    }

    /// Reads the whole stream: it must end with its last chunk and then the
    /// connection must close with nothing after it.
    pub(crate) fn read_to_end(&mut self) -> &[Event] {
        self.wait_for(usize::MAX);
        assert!(self.ended);
        let rest = read_to_eof(&mut self.stream);
        assert!(
            self.raw.is_empty() && rest.is_empty(),
            "bytes after the last chunk"
        );
        &self.events
    }
}

/// The envelope an SSE event block carries (decoded with the codec's exact
/// REALTIME_EVENT_V1 decoder: unknown keys and bad values fail the test).
pub(crate) fn envelope(e: &Event) -> dtp_codec::realtime::Envelope {
    assert_eq!(e.kind, "message", "{e:?}");
    dtp_codec::realtime::Envelope::decode(
        e.data.as_bytes(),
        &dtp_codec::realtime::JsonLimits::default(),
    )
    .unwrap_or_else(|r| panic!("{r:?}: {}", e.data))
}

/// The sequences of envelope events.
pub(crate) fn sequences(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| envelope(e).sequence).collect()
}

/// The SSE control block of a reset with `reason`, exactly.
pub(crate) fn reset_event(reason: &str) -> Event {
    Event {
        kind: "control".into(),
        id: None,
        data: format!("{{\"type\":\"RESET_REQUIRED\",\"reason\":\"{reason}\"}}"),
    }
}
