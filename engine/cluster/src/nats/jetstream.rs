//! JetStream over a [`Nats`] connection: streams, acknowledged publishes,
//! reads by sequence and replay (SPEC RT-6: per-stream contiguous
//! sequences, documented retention, explicit gaps).
//!
//! # Replay: repeated direct gets, not an ordered consumer
//!
//! [`JetStream::replay`] reads one message per request with
//! `$JS.API.DIRECT.GET.<stream>` (`{"seq": n, "next_by_subj": ">"}`: the
//! first message at or after `n`), or `STREAM.MSG.GET` for a stream
//! without `allow_direct` (learnt from its info once, then remembered). An ordered push consumer would save the
//! round trip per message, but it keeps state on the server (to create,
//! watch for heartbeats, recreate on a gap, and leak when a worker dies)
//! and pushes at the server's pace. Gets leave no state behind, survive a
//! server restart between two calls, and go exactly as fast as the reader
//! pulls — which is what a replay sent under the live outbound ceiling
//! (SPEC RT-10/13) wants. A gap (a sequence retention or a delete removed)
//! shows as the next message's sequence being higher than asked, and is
//! reported as [`Replayed::Gap`] before it.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::json;

use super::client::{Message, Nats};
use super::headers::Headers;
use super::js_types::{
    Answer, PubAck, Publish, StoredMessage, StreamConfig, StreamInfo, WMsgGet, WStreamInfo,
};
use crate::error::{Error, JS_NO_MESSAGE_FOUND, JS_STREAM_NAME_IN_USE, Result};

/// Headers a direct get adds to the stored message's own.
const DIRECT_GET_HEADERS: [&str; 4] = [
    "Nats-Stream",
    "Nats-Sequence",
    "Nats-Subject",
    "Nats-Time-Stamp",
];

/// JetStream's API over one NATS connection.
#[derive(Debug)]
pub struct JetStream {
    nats: Nats,
    /// Per stream: whether it answers direct gets (bounded, see [`MAX_KNOWN`]).
    direct: HashMap<String, bool>,
}

/// Streams whose read path is remembered; past it the memory starts over.
const MAX_KNOWN: usize = 1024;

/// One step of a [`Replay`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replayed {
    /// Sequences `from..=to` are not in the stream any more (retention
    /// limits, a purge or deletes): the reader missed them.
    Gap {
        /// The first missing sequence.
        from: u64,
        /// The last missing sequence.
        to: u64,
    },
    /// The next message.
    Message(StoredMessage),
}

impl JetStream {
    /// JetStream over `nats`.
    pub fn new(nats: Nats) -> Self {
        Self {
            nats,
            direct: HashMap::new(),
        }
    }

    /// The underlying connection.
    pub fn nats(&mut self) -> &mut Nats {
        &mut self.nats
    }

    /// The underlying connection, given back (to [`Nats::close`] it).
    pub fn into_nats(self) -> Nats {
        self.nats
    }

    /// Creates the stream, or updates it to `config` if one of that name
    /// exists with another configuration; returns its info.
    pub fn ensure_stream(&mut self, config: &StreamConfig) -> Result<StreamInfo> {
        let body = serde_json::to_vec(&config.to_json())
            .map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let name = &config.name;
        let w = match self.api::<WStreamInfo>(&format!("$JS.API.STREAM.CREATE.{name}"), &body) {
            Err(Error::JetStream { err_code, .. }) if err_code == JS_STREAM_NAME_IN_USE => {
                self.api::<WStreamInfo>(&format!("$JS.API.STREAM.UPDATE.{name}"), &body)?
            }
            other => other?,
        };
        Ok(self.learn(info(w)))
    }

    /// The stream's state now (first and last sequence, counts).
    pub fn stream_info(&mut self, stream: &str) -> Result<StreamInfo> {
        let w = self.api::<WStreamInfo>(&format!("$JS.API.STREAM.INFO.{stream}"), b"")?;
        Ok(self.learn(info(w)))
    }

    /// Deletes the stream and its messages.
    pub fn delete_stream(&mut self, stream: &str) -> Result<()> {
        #[derive(Deserialize)]
        struct Deleted {}
        self.direct.remove(stream);
        self.api::<Deleted>(&format!("$JS.API.STREAM.DELETE.{stream}"), b"")
            .map(|_| ())
    }

    /// Publishes `payload` to `subject` and waits for JetStream's
    /// acknowledgement: once it returns, the message is stored. After an
    /// error other than a JetStream refusal the message may or may not be
    /// stored: publish again with the same `msg_id` and the duplicate
    /// window dedupes it.
    pub fn publish(&mut self, subject: &str, payload: &[u8], opts: &Publish<'_>) -> Result<PubAck> {
        let (last, last_subject) = (
            opts.expected_last_sequence.map(|n| n.to_string()),
            opts.expected_last_subject_sequence.map(|n| n.to_string()),
        );
        let mut headers = Vec::new();
        let fields = [
            ("Nats-Msg-Id", opts.msg_id),
            ("Nats-Expected-Last-Sequence", last.as_deref()),
            (
                "Nats-Expected-Last-Subject-Sequence",
                last_subject.as_deref(),
            ),
            ("Nats-Expected-Stream", opts.expected_stream),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                headers.push((name, v));
            }
        }
        let msg = self.nats.request(subject, &headers, payload)?;
        parse_answer::<PubAck>(&msg)
    }

    /// The message at `seq`, or `None` if the stream does not hold it.
    pub fn get(&mut self, stream: &str, seq: u64) -> Result<Option<StoredMessage>> {
        self.read(stream, &json!({ "seq": seq }))
    }

    /// The first message at or after `seq`, or `None` if there is none.
    pub fn get_next(&mut self, stream: &str, seq: u64) -> Result<Option<StoredMessage>> {
        self.read(stream, &json!({ "seq": seq, "next_by_subj": ">" }))
    }

    /// Replays the stream from `from_seq` (see the module doc); the
    /// iterator ends when no message at or after the cursor exists.
    pub fn replay<'a>(&'a mut self, stream: &'a str, from_seq: u64) -> Replay<'a> {
        Replay {
            js: self,
            stream,
            next: from_seq.max(1),
            held: None,
            done: false,
        }
    }

    fn read(&mut self, stream: &str, req: &serde_json::Value) -> Result<Option<StoredMessage>> {
        let direct = match self.direct.get(stream) {
            Some(&d) => d,
            None => self.stream_info(stream)?.allow_direct,
        };
        let body = req.to_string();
        if direct {
            let msg = self.nats.request(
                &format!("$JS.API.DIRECT.GET.{stream}"),
                &[],
                body.as_bytes(),
            )?;
            return direct_answer(msg);
        }
        match self.api::<WMsgGet>(&format!("$JS.API.STREAM.MSG.GET.{stream}"), body.as_bytes()) {
            Ok(m) => stored(m).map(Some),
            Err(Error::JetStream { err_code, .. }) if err_code == JS_NO_MESSAGE_FOUND => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Remembers the read path of the stream `info` describes.
    fn learn(&mut self, info: StreamInfo) -> StreamInfo {
        if self.direct.len() >= MAX_KNOWN {
            self.direct.clear();
        }
        self.direct.insert(info.name.clone(), info.allow_direct);
        info
    }

    fn api<T: for<'de> Deserialize<'de>>(&mut self, subject: &str, body: &[u8]) -> Result<T> {
        let msg = self.nats.request(subject, &[], body)?;
        parse_answer(&msg)
    }
}

/// An iterator over a stream's messages from a sequence (see
/// [`JetStream::replay`]). One request per message; nothing buffered but
/// the message after a gap.
#[derive(Debug)]
pub struct Replay<'a> {
    js: &'a mut JetStream,
    stream: &'a str,
    next: u64,
    held: Option<StoredMessage>,
    done: bool,
}

impl Replay<'_> {
    /// The sequence the replay reads next.
    pub fn cursor(&self) -> u64 {
        self.next
    }
}

impl Iterator for Replay<'_> {
    type Item = Result<Replayed>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(m) = self.held.take() {
            self.next = m.seq + 1;
            return Some(Ok(Replayed::Message(m)));
        }
        if self.done {
            return None;
        }
        match self.js.get_next(self.stream, self.next) {
            Ok(Some(m)) if m.seq > self.next => {
                let gap = Replayed::Gap {
                    from: self.next,
                    to: m.seq - 1,
                };
                self.held = Some(m);
                Some(Ok(gap))
            }
            Ok(Some(m)) => {
                self.next = m.seq + 1;
                Some(Ok(Replayed::Message(m)))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

fn info(w: WStreamInfo) -> StreamInfo {
    StreamInfo {
        name: w.config.name,
        allow_direct: w.config.allow_direct,
        created: w.created,
        state: w.state,
    }
}

/// A JSON API answer as `T`, or its error.
fn parse_answer<T: for<'de> Deserialize<'de>>(msg: &Message) -> Result<T> {
    let bad = || Error::protocol(&msg.subject, "JetStream answer not understood");
    let answer: Answer<T> = serde_json::from_slice(&msg.payload).map_err(|_| bad())?;
    match (answer.error, answer.body) {
        (Some(e), _) => Err(e.into()),
        (None, Some(body)) => Ok(body),
        (None, None) => Err(bad()),
    }
}

/// A direct get's answer: the message with its stream headers, or a
/// status (404: no such message).
fn direct_answer(msg: Message) -> Result<Option<StoredMessage>> {
    let bad = |what: &str| Error::protocol(&msg.subject, format!("direct get answer: {what}"));
    let headers = msg.headers.clone().ok_or_else(|| bad("no headers"))?;
    match headers.status {
        Some(404) => return Ok(None),
        Some(code) => {
            return Err(Error::JetStream {
                code,
                err_code: 0,
                description: crate::error::server_text(&headers.description),
            });
        }
        None => {}
    }
    let seq = headers
        .get("Nats-Sequence")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no Nats-Sequence"))?;
    let subject = headers
        .get("Nats-Subject")
        .ok_or_else(|| bad("no Nats-Subject"))?
        .to_owned();
    let time = headers
        .get("Nats-Time-Stamp")
        .unwrap_or_default()
        .to_owned();
    let own: Vec<(String, String)> = headers
        .fields
        .into_iter()
        .filter(|(n, _)| !DIRECT_GET_HEADERS.iter().any(|d| d.eq_ignore_ascii_case(n)))
        .collect();
    Ok(Some(StoredMessage {
        subject,
        seq,
        headers: (!own.is_empty()).then(|| Headers {
            fields: own,
            ..Headers::default()
        }),
        payload: msg.payload,
        time,
    }))
}

/// `STREAM.MSG.GET`'s message: base64 headers and data.
fn stored(m: WMsgGet) -> Result<StoredMessage> {
    use dtp_codec::http::base64_decode;
    let bad = || Error::protocol("jetstream", "stored message not understood");
    let m = m.message;
    let payload = match m.data.as_deref() {
        Some(d) => base64_decode(d).ok_or_else(bad)?,
        None => Vec::new(),
    };
    let headers = match m.hdrs.as_deref() {
        Some(h) => Some(Headers::parse(&base64_decode(h).ok_or_else(bad)?).ok_or_else(bad)?),
        None => None,
    };
    Ok(StoredMessage {
        subject: m.subject,
        seq: m.seq,
        headers,
        payload,
        time: m.time,
    })
}
