//! The server side of SSE (SPEC RT-8, and its "(ours)" paragraph): event
//! blocks, control events, comment heartbeats and `retry` lines, written
//! into any growable buffer (`BytesMut`, `Vec<u8>`).
//!
//! - application event: `id: <cursor>\ndata: <envelope json>\n\n`, with the
//!   `id` line only for CURSOR streams and no `event:` line, so a browser's
//!   `onmessage` sees it;
//! - control event: `event: control\ndata: <SseControl json>\n\n`;
//! - heartbeat: `: heartbeat\n\n` (a comment: no event, but bytes that keep
//!   proxies and the client's idle watchdog awake);
//! - `retry: <ms>\n\n`.

use std::fmt;
use std::ops::Range;

use bytes::{Buf, BufMut, Bytes};

use super::value::{Fields, check_id, is_valid_token, parse_object};
use super::{CloseCategory, Envelope, FailureKind, JsonLimits, Refusal, jsonw};

/// A control event on an SSE stream (SPEC RT-8 "(ours)"): the `data:` of an
/// `event: control` block, one JSON object whose `type` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseControl {
    /// `{"type":"RESET_REQUIRED","reason":"CURSOR_EXPIRED"}`: the feed cannot
    /// resume from the client's cursor (e.g. `CURSOR_EXPIRED`, `FORBIDDEN`);
    /// the client resyncs from a snapshot. `reason` is a failure kind.
    ResetRequired {
        /// Why.
        reason: FailureKind,
    },
    /// `{"type":"GAP","streamEpoch":"e7","afterSequence":"41"}`: the server
    /// did not deliver some events after `afterSequence` of `streamEpoch`
    /// (e.g. it shed them under backpressure); the client must not apply
    /// later events as if contiguous, and resyncs from a snapshot.
    /// `afterSequence` is a canonical decimal string.
    Gap {
        /// The epoch the gap is in.
        stream_epoch: String,
        /// The last sequence delivered before the gap.
        after_sequence: u64,
    },
    /// `{"type":"CLOSE","category":"RESTART"}`: the server is about to end
    /// the stream for this reason (SPEC RT-9 categories).
    Close {
        /// Why.
        category: CloseCategory,
    },
}

impl SseControl {
    /// Decodes the `data` of an `event: control` block: JSON guard, `type`,
    /// exact key set, members.
    pub fn decode(data: &[u8], limits: &JsonLimits) -> Result<Self, Refusal> {
        let map = parse_object(data, limits)?;
        let ty = match map.get("type") {
            None => return Err(Refusal::MissingKey("type")),
            Some(t) => t.as_str().ok_or(Refusal::WrongType("type"))?,
        };
        match ty {
            "RESET_REQUIRED" => {
                let f = Fields::exact(&map, &["type", "reason"])?;
                Ok(Self::ResetRequired {
                    reason: f.closed("reason")?,
                })
            }
            "GAP" => {
                let f = Fields::exact(&map, &["type", "streamEpoch", "afterSequence"])?;
                Ok(Self::Gap {
                    stream_epoch: f.id("streamEpoch")?,
                    after_sequence: f.sequence("afterSequence")?,
                })
            }
            "CLOSE" => {
                let f = Fields::exact(&map, &["type", "category"])?;
                Ok(Self::Close {
                    category: f.closed("category")?,
                })
            }
            _ => Err(Refusal::UnknownType),
        }
    }

    /// Compact JSON (members in the order shown on each variant).
    pub fn encode(&self) -> Result<Vec<u8>, Refusal> {
        let mut buf = Vec::with_capacity(64);
        self.encode_into(&mut buf)?;
        Ok(buf)
    }

    fn encode_into<B: BufMut>(&self, buf: &mut B) -> Result<(), Refusal> {
        if let Self::Gap { stream_epoch, .. } = self {
            check_id("streamEpoch", stream_epoch)?;
        }
        buf.put_u8(b'{');
        jsonw::key(buf, "type");
        match self {
            Self::ResetRequired { reason } => {
                jsonw::str(buf, "RESET_REQUIRED");
                jsonw::next_key(buf, "reason");
                jsonw::str(buf, reason.as_str());
            }
            Self::Gap {
                stream_epoch,
                after_sequence,
            } => {
                jsonw::str(buf, "GAP");
                jsonw::next_key(buf, "streamEpoch");
                jsonw::str(buf, stream_epoch);
                jsonw::next_key(buf, "afterSequence");
                jsonw::decimal_str(buf, *after_sequence);
            }
            Self::Close { category } => {
                jsonw::str(buf, "CLOSE");
                jsonw::next_key(buf, "category");
                jsonw::str(buf, category.as_str());
            }
        }
        buf.put_u8(b'}');
        Ok(())
    }
}

/// The `event` name of a control block.
pub const SSE_CONTROL_EVENT: &str = "control";

/// Why an SSE block was not written (nothing was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseEncodeError {
    /// The `id` is not a non-empty opaque token (header-safe visible ASCII,
    /// at most 512 bytes): in particular it has a CR, LF or NUL, which
    /// would end the line or be ignored by the client.
    InvalidId,
    /// `data` (or a comment) has a CR or LF: it must be one line.
    LineBreak,
    /// A control event whose members are invalid.
    Refused(Refusal),
}

impl fmt::Display for SseEncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidId => f.write_str("SSE id is not a non-empty header-safe token"),
            Self::LineBreak => f.write_str("SSE data or comment contains CR or LF"),
            Self::Refused(r) => write!(f, "SSE control refused: {r}"),
        }
    }
}

impl std::error::Error for SseEncodeError {}

fn has_line_break(bytes: &[u8]) -> bool {
    // Every published event's envelope passes here once: `memchr`'s SIMD
    // search (a fold over 64-byte blocks was 6 % of the control thread's
    // cost of publishing an event).
    memchr::memchr2(b'\r', b'\n', bytes).is_some()
}

/// An application event block (SPEC RT-8): `id: <id>\n` when `id` is `Some`
/// (CURSOR streams: the envelope's `resumeCursor`), then `data: <data>\n\n`.
/// `data` is one line of JSON, normally an envelope from
/// [`Envelope::to_json_bytes`] or [`super::write_envelope`].
///
/// A bad `id` or a line break in `data` is a bug on the server's side: it
/// trips a debug assertion, and in release builds is refused.
pub fn write_sse_event<B: BufMut>(
    buf: &mut B,
    id: Option<&str>,
    data: &[u8],
) -> Result<(), SseEncodeError> {
    valid_id(id)?;
    one_line(data)?;
    put_id_line(buf, id);
    buf.put_slice(b"data: ");
    buf.put_slice(data);
    buf.put_slice(b"\n\n");
    Ok(())
}

/// An application event block, as [`write_sse_event`] writes it, framed as
/// one HTTP/1.1 chunk (as [`crate::http::write_chunk`] frames it) and built
/// in one buffer, its data written in place by `data` (e.g.
/// [`super::write_envelope`]; `capacity`: the size it will likely take).
/// Gives the chunk and where the data lies in it, so that the data is read
/// in place (or shared as a slice of the chunk) instead of encoded into a
/// buffer of its own and copied twice (once into the block, once into the
/// chunk).
///
/// The chunk is built in a `Vec` and handed over as a `Bytes` that owns it
/// (its head dropped by moving the start, not by splitting a `BytesMut`).
pub fn sse_chunk_with(
    id: Option<&str>,
    capacity: usize,
    data: impl FnOnce(&mut Vec<u8>) -> Result<(), Refusal>,
) -> Result<(Bytes, Range<usize>), SseEncodeError> {
    use crate::http::{CHUNK_HEAD_MAX, chunk_head};
    valid_id(id)?;
    let id_line = id.map_or(0, |id| id.len() + 5);
    let mut buf = Vec::with_capacity(CHUNK_HEAD_MAX + id_line + 6 + capacity + 4);
    // Room for the chunk head, whose size is known only at the end.
    buf.put_bytes(0, CHUNK_HEAD_MAX);
    put_id_line(&mut buf, id);
    buf.put_slice(b"data: ");
    let start = buf.len();
    data(&mut buf).map_err(SseEncodeError::Refused)?;
    let end = buf.len();
    one_line(&buf[start..end])?;
    buf.put_slice(b"\n\n");
    let (head, from) = chunk_head(buf.len() - CHUNK_HEAD_MAX);
    buf[from..CHUNK_HEAD_MAX].copy_from_slice(&head[from..]);
    buf.put_slice(b"\r\n");
    let mut chunk = Bytes::from(buf);
    chunk.advance(from);
    Ok((chunk, start - from..end - from))
}

/// A bad `id` is a bug on the server's side: a debug assertion, and
/// refused in release builds.
fn valid_id(id: Option<&str>) -> Result<(), SseEncodeError> {
    if let Some(id) = id {
        let ok = is_valid_token(id);
        debug_assert!(ok, "SSE id must be a non-empty header-safe token");
        if !ok {
            return Err(SseEncodeError::InvalidId);
        }
    }
    Ok(())
}

/// A line break in the data is a bug on the server's side: a debug
/// assertion, and refused in release builds.
fn one_line(data: &[u8]) -> Result<(), SseEncodeError> {
    let broken = has_line_break(data);
    debug_assert!(!broken, "SSE data must be one line");
    if broken {
        return Err(SseEncodeError::LineBreak);
    }
    Ok(())
}

fn put_id_line<B: BufMut>(buf: &mut B, id: Option<&str>) {
    if let Some(id) = id {
        buf.put_slice(b"id: ");
        buf.put_slice(id.as_bytes());
        buf.put_u8(b'\n');
    }
}

/// The event block of `envelope` (SPEC RT-8): its `resumeCursor` as `id`
/// (CURSOR) or no `id` (the other modes), its compact JSON as `data`.
pub fn write_sse_envelope<B: BufMut>(
    buf: &mut B,
    envelope: &Envelope,
) -> Result<(), SseEncodeError> {
    let json = envelope.to_json_bytes().map_err(SseEncodeError::Refused)?;
    write_sse_event(buf, envelope.resume_cursor.as_deref(), &json)
}

/// A control block: `event: control\ndata: <json>\n\n` (SPEC RT-8 "(ours)").
pub fn write_sse_control<B: BufMut>(
    buf: &mut B,
    control: &SseControl,
) -> Result<(), SseEncodeError> {
    let json = control.encode().map_err(SseEncodeError::Refused)?;
    buf.put_slice(b"event: ");
    buf.put_slice(SSE_CONTROL_EVENT.as_bytes());
    buf.put_slice(b"\ndata: ");
    buf.put_slice(&json);
    buf.put_slice(b"\n\n");
    Ok(())
}

/// A comment block `: <text>\n\n` (`:\n\n` for empty text). It dispatches no
/// event: its use is to keep the connection and the client's idle watchdog
/// alive (SPEC RT-8).
pub fn write_sse_comment<B: BufMut>(buf: &mut B, text: &str) -> Result<(), SseEncodeError> {
    let broken = has_line_break(text.as_bytes());
    debug_assert!(!broken, "an SSE comment must be one line");
    if broken {
        return Err(SseEncodeError::LineBreak);
    }
    buf.put_u8(b':');
    if !text.is_empty() {
        buf.put_u8(b' ');
        buf.put_slice(text.as_bytes());
    }
    buf.put_slice(b"\n\n");
    Ok(())
}

/// The heartbeat comment, `: heartbeat\n\n` (SPEC RT-8).
pub fn write_sse_heartbeat<B: BufMut>(buf: &mut B) {
    buf.put_slice(b": heartbeat\n\n");
}

/// `retry: <ms>\n\n`: the client's next reconnection delay hint (SPEC RT-8).
pub fn write_sse_retry<B: BufMut>(buf: &mut B, ms: u32) {
    buf.put_slice(b"retry: ");
    jsonw::uint(buf, ms.into());
    buf.put_slice(b"\n\n");
}

#[cfg(test)]
mod line_break_tests {
    /// A CR or LF anywhere, including either side of a 64-byte block
    /// boundary and in a short tail, is found; none is not.
    #[test]
    fn found_at_every_position() {
        for len in [0, 1, 63, 64, 65, 200] {
            let clean = vec![b'x'; len];
            assert!(!super::has_line_break(&clean), "{len}");
            for at in 0..len {
                for brk in [b'\r', b'\n'] {
                    let mut d = clean.clone();
                    d[at] = brk;
                    assert!(super::has_line_break(&d), "{len} {at}");
                }
            }
        }
    }
}
