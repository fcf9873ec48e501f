//! A publication (`POST /v1/streams/{id}/events`, SPEC RT-3): the request
//! body `{"eventType","payload"}` and the `201` answer
//! `{"streamId","streamEpoch","sequence","resumeCursor"}`. The server, the
//! load generator and the side-by-side peer all read and write them here.

use bytes::BufMut;

use super::envelope::payload_object;
use super::value::{Fields, check_id, check_token, parse_object};
use super::{JsonLimits, Refusal, jsonw};

const PUBLICATION_KEYS: [&str; 2] = ["eventType", "payload"];
const RECEIPT_KEYS: [&str; 4] = ["streamId", "streamEpoch", "sequence", "resumeCursor"];

/// SPEC RT-3: a publication body, exactly `{"eventType": <id>, "payload":
/// {…}}` (fail closed on unknown keys), under the JSON guard of SPEC RT-4
/// (no object anywhere may repeat a key).
///
/// `eventType` is an identifier ([`super::is_valid_id`]); a server whose
/// registry names are narrower checks them on top.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    /// The event type.
    pub event_type: String,
    /// The payload, one JSON object, compact (the same bytes
    /// `serde_json::to_vec` writes for it).
    pub payload: Vec<u8>,
}

impl Publication {
    /// The JSON guard (SPEC RT-4), then the exact key set and each member.
    pub fn decode(body: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        let map = parse_object(body, limits)?;
        let f = Fields::exact(&map, &PUBLICATION_KEYS)?;
        let event_type = f.id("eventType")?;
        let mut payload = Vec::with_capacity(body.len());
        jsonw::object(&mut payload, f.object("payload")?);
        Ok(Self {
            event_type,
            payload,
        })
    }
}

/// Appends the publication body of `event_type` around `payload_json`,
/// which the caller guarantees is one JSON object (it is copied as is):
/// `{"eventType":<event_type>,"payload":<payload_json>}`. Refuses (writing
/// nothing) an event type that is not an identifier, and a payload whose
/// first and last non-whitespace bytes are not `{` and `}`.
pub fn write_publication<B: BufMut>(
    buf: &mut B,
    event_type: &str,
    payload_json: &[u8],
) -> Result<(), Refusal> {
    check_id("eventType", event_type)?;
    let trimmed = payload_object(payload_json)?;
    buf.put_u8(b'{');
    jsonw::key(buf, "eventType");
    jsonw::str(buf, event_type);
    jsonw::next_key(buf, "payload");
    buf.put_slice(trimmed);
    buf.put_u8(b'}');
    Ok(())
}

/// SPEC RT-6: the answer to an accepted publication,
/// `{"streamId","streamEpoch","sequence","resumeCursor"}` in that order;
/// the sequence is a canonical decimal string as in envelopes, and
/// `resumeCursor` is `null` on a stream that keeps no cursors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishReceipt {
    /// The stream published to.
    pub stream_id: String,
    /// Its epoch.
    pub stream_epoch: String,
    /// The sequence the event was given.
    pub sequence: u64,
    /// The cursor that resumes right after the event, if the stream keeps
    /// cursors.
    pub resume_cursor: Option<String>,
}

impl PublishReceipt {
    /// The JSON guard (SPEC RT-4), then the exact key set and each member.
    pub fn decode(body: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        let map = parse_object(body, limits)?;
        let f = Fields::exact(&map, &RECEIPT_KEYS)?;
        Ok(Self {
            stream_id: f.id("streamId")?,
            stream_epoch: f.id("streamEpoch")?,
            sequence: f.sequence("sequence")?,
            resume_cursor: f.opt_token("resumeCursor")?,
        })
    }

    /// Compact JSON in the fixed key order (see [`write_receipt`]).
    pub fn to_json_bytes(&self) -> Result<Vec<u8>, Refusal> {
        let mut buf = Vec::with_capacity(160);
        write_receipt(
            &mut buf,
            &self.stream_id,
            &self.stream_epoch,
            self.sequence,
            self.resume_cursor.as_deref(),
        )?;
        Ok(buf)
    }
}

/// Appends the receipt of a publication, borrowed (what a server holding
/// the ledger's answer writes without building a [`PublishReceipt`]).
/// Refuses (writing nothing) what [`PublishReceipt::decode`] would refuse:
/// a stream id or epoch that is not an identifier, a cursor that is not a
/// token.
pub fn write_receipt<B: BufMut>(
    buf: &mut B,
    stream_id: &str,
    stream_epoch: &str,
    sequence: u64,
    resume_cursor: Option<&str>,
) -> Result<(), Refusal> {
    check_id("streamId", stream_id)?;
    check_id("streamEpoch", stream_epoch)?;
    if let Some(c) = resume_cursor {
        check_token("resumeCursor", c)?;
    }
    buf.put_u8(b'{');
    jsonw::key(buf, "streamId");
    jsonw::str(buf, stream_id);
    jsonw::next_key(buf, "streamEpoch");
    jsonw::str(buf, stream_epoch);
    jsonw::next_key(buf, "sequence");
    jsonw::decimal_str(buf, sequence);
    jsonw::next_key(buf, "resumeCursor");
    jsonw::opt_str(buf, resume_cursor);
    buf.put_u8(b'}');
    Ok(())
}
