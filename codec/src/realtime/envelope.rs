//! The REALTIME_EVENT_V1 envelope (SPEC RT-3) and its decode order up to the
//! exact-key schema (SPEC RT-4). Registry lookup, scope fences, epoch,
//! sequence and dedupe belong to the client runtime, not here.

use bytes::BufMut;
use serde_json::{Map, Value};

use super::json_guard::JsonLimits;
use super::value::{Fields, check_id, check_token, parse_object};
use super::{RecoveryMode, Refusal, is_valid_rfc3339, jsonw};

/// The literal of the envelope's `protocol` member.
pub const ENVELOPE_PROTOCOL: &str = "REALTIME_EVENT_V1";

/// The envelope's members in their fixed wire order.
const KEYS: [&str; 11] = [
    "protocol",
    "streamId",
    "streamEpoch",
    "eventType",
    "eventId",
    "sequence",
    "occurredAt",
    "scopeBinding",
    "payload",
    "recoveryMode",
    "resumeCursor",
];

/// One realtime event (SPEC RT-3, seed §4.2), owned.
///
/// String members are bounded: `streamId`, `streamEpoch`, `eventType` and
/// `eventId` are identifiers ([`super::MAX_ID_LEN`]), `scopeBinding` and
/// `resumeCursor` opaque tokens ([`super::MAX_TOKEN_LEN`]). Encoding and
/// decoding check the same rules, so a server never emits what its clients
/// refuse.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// The registered stream.
    pub stream_id: String,
    /// Opaque; changes on a stream reset, partition rebuild or incompatible
    /// replay change.
    pub stream_epoch: String,
    /// The registered event type.
    pub event_type: String,
    /// Opaque id for bounded dedupe.
    pub event_id: String,
    /// Position in stream + epoch; on the wire a canonical decimal string.
    pub sequence: u64,
    /// Strict RFC 3339 ([`is_valid_rfc3339`]); not an ordering authority.
    pub occurred_at: String,
    /// The opaque exact-match scope token of the session.
    pub scope_binding: String,
    /// The event type's payload: a JSON object (its own, smaller ceilings are
    /// the stream registration's business).
    pub payload: Map<String, Value>,
    /// The stream's recovery mode.
    pub recovery: RecoveryMode,
    /// SPEC RT-3: `Some` non-empty cursor exactly when `recovery` is
    /// `CURSOR`; `None` (wire: `null`) otherwise.
    pub resume_cursor: Option<String>,
}

impl Envelope {
    /// SPEC RT-4 up to the exact-key schema: JSON guard, then `protocol` (an
    /// unknown or newer one is [`Refusal::UnknownProtocol`], before any key
    /// check, so a newer envelope is a protocol mismatch and not a malformed
    /// event), then the exact key set, then each member in wire order.
    pub fn decode(bytes: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        Self::from_map(&parse_object(bytes, limits)?)
    }

    /// The schema step alone, over an object the guard already passed (the
    /// `envelope` member of a `realtime.v1` EVENT).
    pub(crate) fn from_map(map: &Map<String, Value>) -> Result<Self, Refusal> {
        match map.get("protocol") {
            None => return Err(Refusal::MissingKey("protocol")),
            Some(Value::String(p)) if p == ENVELOPE_PROTOCOL => {}
            Some(Value::String(_)) => return Err(Refusal::UnknownProtocol),
            Some(_) => return Err(Refusal::WrongType("protocol")),
        }
        let f = Fields::exact(map, &KEYS)?;
        let stream_id = f.id("streamId")?;
        let stream_epoch = f.id("streamEpoch")?;
        let event_type = f.id("eventType")?;
        let event_id = f.id("eventId")?;
        let sequence = f.sequence("sequence")?;
        let occurred_at = f.str("occurredAt")?;
        if !is_valid_rfc3339(occurred_at) {
            return Err(Refusal::InvalidTimestamp);
        }
        let scope_binding = f.token("scopeBinding")?;
        let payload = f.object("payload")?.clone();
        let recovery: RecoveryMode = f.closed("recoveryMode")?;
        let resume_cursor = match (recovery.has_cursor(), f.opt_str("resumeCursor")?) {
            (true, Some(c)) if !c.is_empty() => {
                check_token("resumeCursor", c)?;
                Some(c.to_owned())
            }
            (false, None) => None,
            _ => return Err(Refusal::RecoveryCursorMismatch),
        };
        Ok(Self {
            stream_id,
            stream_epoch,
            event_type,
            event_id,
            sequence,
            occurred_at: occurred_at.to_owned(),
            scope_binding,
            payload,
            recovery,
            resume_cursor,
        })
    }

    /// The head of this envelope (everything but the payload), borrowed.
    pub fn head(&self) -> EnvelopeHead<'_> {
        EnvelopeHead {
            stream_id: &self.stream_id,
            stream_epoch: &self.stream_epoch,
            event_type: &self.event_type,
            event_id: &self.event_id,
            sequence: self.sequence,
            occurred_at: &self.occurred_at,
            scope_binding: &self.scope_binding,
            recovery: self.recovery,
            resume_cursor: self.resume_cursor.as_deref(),
        }
    }

    /// Checks every member against the rules [`Envelope::decode`] applies.
    pub fn validate(&self) -> Result<(), Refusal> {
        self.head().validate()
    }

    /// Compact JSON in the fixed key order `protocol, streamId, streamEpoch,
    /// eventType, eventId, sequence, occurredAt, scopeBinding, payload,
    /// recoveryMode, resumeCursor` (SPEC RT-3), after [`Envelope::validate`].
    /// The result is one line (no raw CR or LF), ready for SSE `data:` and
    /// for [`super::write_event_message`]. It does not check the byte
    /// ceiling: a server that sends it checks the size of what it frames.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>, Refusal> {
        let mut buf = Vec::with_capacity(256);
        self.encode_into(&mut buf)?;
        Ok(buf)
    }

    /// [`Envelope::to_json_bytes`] appended to `buf` (nothing is written on
    /// a refusal).
    pub fn encode_into<B: BufMut>(&self, buf: &mut B) -> Result<(), Refusal> {
        let head = self.head();
        head.validate()?;
        head.write_before_payload(buf);
        jsonw::object(buf, &self.payload);
        head.write_after_payload(buf);
        Ok(())
    }
}

/// An envelope without its payload, borrowed: what a server that already
/// holds the payload as JSON bytes (a POST body it validated) needs to frame
/// an event without building a `Value` ([`write_envelope`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvelopeHead<'a> {
    /// See [`Envelope::stream_id`].
    pub stream_id: &'a str,
    /// See [`Envelope::stream_epoch`].
    pub stream_epoch: &'a str,
    /// See [`Envelope::event_type`].
    pub event_type: &'a str,
    /// See [`Envelope::event_id`].
    pub event_id: &'a str,
    /// See [`Envelope::sequence`].
    pub sequence: u64,
    /// See [`Envelope::occurred_at`].
    pub occurred_at: &'a str,
    /// See [`Envelope::scope_binding`].
    pub scope_binding: &'a str,
    /// See [`Envelope::recovery`].
    pub recovery: RecoveryMode,
    /// See [`Envelope::resume_cursor`].
    pub resume_cursor: Option<&'a str>,
}

impl EnvelopeHead<'_> {
    /// Checks every member against the rules [`Envelope::decode`] applies.
    pub fn validate(&self) -> Result<(), Refusal> {
        check_id("streamId", self.stream_id)?;
        check_id("streamEpoch", self.stream_epoch)?;
        check_id("eventType", self.event_type)?;
        check_id("eventId", self.event_id)?;
        if !is_valid_rfc3339(self.occurred_at) {
            return Err(Refusal::InvalidTimestamp);
        }
        check_token("scopeBinding", self.scope_binding)?;
        match (self.recovery.has_cursor(), self.resume_cursor) {
            (true, Some(c)) if !c.is_empty() => check_token("resumeCursor", c),
            (false, None) => Ok(()),
            _ => Err(Refusal::RecoveryCursorMismatch),
        }
    }

    fn write_before_payload<B: BufMut>(&self, buf: &mut B) {
        buf.put_u8(b'{');
        jsonw::key(buf, "protocol");
        jsonw::str(buf, ENVELOPE_PROTOCOL);
        jsonw::next_key(buf, "streamId");
        jsonw::str(buf, self.stream_id);
        jsonw::next_key(buf, "streamEpoch");
        jsonw::str(buf, self.stream_epoch);
        jsonw::next_key(buf, "eventType");
        jsonw::str(buf, self.event_type);
        jsonw::next_key(buf, "eventId");
        jsonw::str(buf, self.event_id);
        jsonw::next_key(buf, "sequence");
        jsonw::decimal_str(buf, self.sequence);
        jsonw::next_key(buf, "occurredAt");
        jsonw::str(buf, self.occurred_at);
        jsonw::next_key(buf, "scopeBinding");
        jsonw::str(buf, self.scope_binding);
        jsonw::next_key(buf, "payload");
    }

    fn write_after_payload<B: BufMut>(&self, buf: &mut B) {
        jsonw::next_key(buf, "recoveryMode");
        jsonw::str(buf, self.recovery.as_str());
        jsonw::next_key(buf, "resumeCursor");
        jsonw::opt_str(buf, self.resume_cursor);
        buf.put_u8(b'}');
    }
}

/// Appends the compact envelope of `head` around `payload_json`, which the
/// caller guarantees is ONE VALID JSON OBJECT (e.g. a POST body that passed
/// [`super::check_json`] and its schema): it is not parsed here, only
/// copied with the whitespace outside its strings dropped, so the result is
/// one line. When `payload_json` is itself compact `serde_json` output, the
/// bytes equal [`Envelope::to_json_bytes`] of the same event.
///
/// Refuses (writing nothing) a head that [`EnvelopeHead::validate`] refuses,
/// and a payload whose first and last non-whitespace bytes are not `{` and
/// `}` ([`Refusal::WrongType`]`("payload")`).
pub fn write_envelope<B: BufMut>(
    buf: &mut B,
    head: &EnvelopeHead<'_>,
    payload_json: &[u8],
) -> Result<(), Refusal> {
    head.validate()?;
    let trimmed = payload_object(payload_json)?;
    head.write_before_payload(buf);
    jsonw::compact(buf, trimmed);
    head.write_after_payload(buf);
    Ok(())
}

/// A payload the caller vouches is one JSON object, without the whitespace
/// around it; [`Refusal::WrongType`]`("payload")` if its first and last
/// bytes are not `{` and `}`.
pub(crate) fn payload_object(payload_json: &[u8]) -> Result<&[u8], Refusal> {
    let trimmed = payload_json.trim_ascii();
    if trimmed.first() != Some(&b'{') || trimmed.last() != Some(&b'}') {
        return Err(Refusal::WrongType("payload"));
    }
    Ok(trimmed)
}
