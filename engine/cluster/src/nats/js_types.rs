//! JetStream's API types, as Rust sees them and as the JSON API spells them.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::headers::Headers;
use crate::error::{Error, server_text};

/// Where a stream keeps its messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Storage {
    /// On disk: survives a server restart.
    #[default]
    File,
    /// In memory: lost with the server.
    Memory,
}

/// A stream's configuration (a subset of JetStream's): limits retention,
/// discarding the oldest messages when a limit is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamConfig {
    /// The stream's name (no spaces, dots, `*` or `>`).
    pub name: String,
    /// The subjects it captures (wildcards allowed).
    pub subjects: Vec<String>,
    /// Keep at most this many messages (`None`: no limit).
    pub max_msgs: Option<u64>,
    /// Keep at most this many bytes (`None`: no limit).
    pub max_bytes: Option<u64>,
    /// Drop messages older than this (`None`: never).
    pub max_age: Option<Duration>,
    /// How long a `Nats-Msg-Id` is remembered for dedupe (`None`: the
    /// server's default, two minutes).
    pub duplicate_window: Option<Duration>,
    /// File or memory.
    pub storage: Storage,
    /// Whether reads by sequence may use `$JS.API.DIRECT.GET` (answered by
    /// any replica, no JSON wrapping).
    pub allow_direct: bool,
}

impl StreamConfig {
    /// A file-backed stream `name` over `subjects` with no limits and
    /// direct gets allowed.
    pub fn new(name: &str, subjects: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
            max_msgs: None,
            max_bytes: None,
            max_age: None,
            duplicate_window: None,
            storage: Storage::File,
            allow_direct: true,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        let limit = |l: Option<u64>| l.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let mut v = json!({
            "name": self.name,
            "subjects": self.subjects,
            "retention": "limits",
            "discard": "old",
            "max_msgs": limit(self.max_msgs),
            "max_bytes": limit(self.max_bytes),
            "max_age": self.max_age.map_or(0, nanos),
            "storage": match self.storage { Storage::File => "file", Storage::Memory => "memory" },
            "num_replicas": 1,
            "allow_direct": self.allow_direct,
        });
        if let Some(w) = self.duplicate_window {
            v["duplicate_window"] = nanos(w).into();
        }
        v
    }
}

/// A stream's state: what a reader compares its cursor with. A cursor below
/// `first_seq` means retention (or a purge) dropped messages it has not
/// read: the reader must resynchronise (SPEC RT-6's RESET_REQUIRED), never
/// treat the gap as "nothing happened".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StreamState {
    /// Messages stored now.
    pub messages: u64,
    /// Bytes stored now.
    pub bytes: u64,
    /// The oldest sequence still stored (last_seq + 1 when empty).
    pub first_seq: u64,
    /// The newest sequence ever assigned (kept when messages are dropped).
    pub last_seq: u64,
}

/// A stream's configuration name and its state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    /// The stream's name.
    pub name: String,
    /// Whether it answers direct gets.
    pub allow_direct: bool,
    /// When the server created it (RFC 3339, as the server wrote it; empty
    /// if the server did not say): a stream deleted and made again under
    /// the same name has another, so readers that derive an identity from
    /// it (a realtime stream's epoch, SPEC RT-6) see the loss of history.
    pub created: String,
    /// Its state.
    pub state: StreamState,
}

/// What to attach to a publish.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Publish<'a> {
    /// `Nats-Msg-Id`: a second publish with the same id within the
    /// stream's duplicate window is not stored again; its ack says
    /// `duplicate` and carries the first one's sequence.
    pub msg_id: Option<&'a str>,
    /// `Nats-Expected-Last-Sequence`: store only if the stream's last
    /// sequence is this (optimistic concurrency over the whole stream).
    pub expected_last_sequence: Option<u64>,
    /// `Nats-Expected-Last-Subject-Sequence`: store only if the last
    /// message on this subject has this sequence (0: none yet).
    pub expected_last_subject_sequence: Option<u64>,
    /// `Nats-Expected-Stream`: store only if the subject is this stream's.
    pub expected_stream: Option<&'a str>,
}

/// JetStream's acknowledgement of a stored publish.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct PubAck {
    /// The stream that stored it.
    pub stream: String,
    /// Its sequence in the stream.
    pub seq: u64,
    /// Whether it was a duplicate (by `Nats-Msg-Id`) of a stored message.
    #[serde(default)]
    pub duplicate: bool,
}

/// A message read back from a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    /// Its subject.
    pub subject: String,
    /// Its sequence in the stream.
    pub seq: u64,
    /// The headers it was published with, if any.
    pub headers: Option<Headers>,
    /// Its payload.
    pub payload: Vec<u8>,
    /// When the server stored it (RFC 3339, as the server wrote it).
    pub time: String,
}

/// JetStream's `{"error": {...}}` member.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ApiError {
    code: u16,
    err_code: u32,
    description: String,
}

impl From<ApiError> for Error {
    fn from(e: ApiError) -> Self {
        Error::JetStream {
            code: e.code,
            err_code: e.err_code,
            description: server_text(&e.description),
        }
    }
}

/// Any API answer: an error, or the fields of `T`.
#[derive(Debug, Deserialize)]
pub(crate) struct Answer<T> {
    #[serde(default)]
    pub(crate) error: Option<ApiError>,
    #[serde(flatten)]
    pub(crate) body: Option<T>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WStreamInfo {
    pub(crate) config: WName,
    #[serde(default)]
    pub(crate) created: String,
    #[serde(default)]
    pub(crate) state: StreamState,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WName {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) allow_direct: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WMsgGet {
    pub(crate) message: WStored,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WStored {
    pub(crate) subject: String,
    pub(crate) seq: u64,
    #[serde(default)]
    pub(crate) hdrs: Option<String>,
    #[serde(default)]
    pub(crate) data: Option<String>,
    #[serde(default)]
    pub(crate) time: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_with_and_without_errors() {
        let ok: Answer<PubAck> =
            serde_json::from_slice(br#"{"stream":"S","seq":3,"duplicate":true}"#).unwrap();
        assert!(ok.error.is_none());
        assert_eq!(
            ok.body.unwrap(),
            PubAck {
                stream: "S".into(),
                seq: 3,
                duplicate: true
            }
        );
        let err: Answer<PubAck> = serde_json::from_slice(
            br#"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"S","seq":0}"#,
        )
        .unwrap();
        let e = Error::from(err.error.unwrap());
        assert!(e.is_wrong_last_sequence());
        let info: Answer<WStreamInfo> = serde_json::from_slice(
            br#"{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"S","subjects":["s.>"]},"state":{"messages":2,"bytes":90,"first_seq":4,"first_ts":"x","last_seq":5,"consumer_count":0}}"#,
        )
        .unwrap();
        let info = info.body.unwrap();
        assert_eq!(
            (
                info.state.first_seq,
                info.state.last_seq,
                info.state.messages
            ),
            (4, 5, 2)
        );
    }

    #[test]
    fn config_json_uses_minus_one_for_no_limit() {
        let mut c = StreamConfig::new("S", &["s.>"]);
        c.max_msgs = Some(10);
        c.max_age = Some(Duration::from_secs(1));
        let v = c.to_json();
        assert_eq!(v["max_msgs"], 10);
        assert_eq!(v["max_bytes"], -1);
        assert_eq!(v["max_age"], 1_000_000_000);
        assert!(v.get("duplicate_window").is_none());
    }
}
