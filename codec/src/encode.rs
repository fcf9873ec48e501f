//! SPEC FRM-1: LogicalFrame to bytes.
//!
//! Encoding is two passes over the frame's fields, none over the payload: the
//! first checks every ceiling and sums the length (so the header can be
//! written first and nothing is half-written on error), the second writes.

use bytes::{BufMut, Bytes, BytesMut};

use crate::control::{AuthOutcome, Beat, ControlMessage};
use crate::decode::DATA_HAS_AGREEMENT;
use crate::error::EncodeError;
use crate::frame::{
    Body, Decision, HANDSHAKE_MAX_LEN, HANDSHAKE_MAX_STAGE, HEADER_LEN, LogicalFrame, MAGIC,
    RequestType, SEAL_COUNTER_LEN, TAG_LEN, Terms, VERSION,
};
use crate::limits::Limits;

type Result<T> = std::result::Result<T, EncodeError>;

const UUID: usize = 16;

impl LogicalFrame {
    /// The number of bytes [`LogicalFrame::encode`] writes, after checking
    /// every field against `limits`.
    pub fn encoded_len(&self, limits: &Limits) -> Result<usize> {
        let len = body_len(&self.body, limits)?;
        if len > limits.max_frame_len as usize {
            return Err(EncodeError::LimitExceeded {
                field: "frame length",
                found: len as u64,
                max: limits.max_frame_len.into(),
            });
        }
        Ok(HEADER_LEN + len)
    }

    /// SPEC FRM-1: writes the frame to `dst` and returns the bytes written.
    /// Nothing is written when an error is returned.
    pub fn encode<B: BufMut>(&self, dst: &mut B, limits: &Limits) -> Result<usize> {
        let total = self.encoded_len(limits)?;
        if dst.remaining_mut() < total {
            return Err(EncodeError::BufferTooSmall {
                needed: total,
                available: dst.remaining_mut(),
            });
        }
        let (aead, key_version) = match &self.body {
            Body::Sealed(s) => (s.aead as u8, s.key_version),
            _ => (0, 0),
        };
        dst.put_slice(&MAGIC);
        dst.put_u8(VERSION);
        dst.put_u8(self.kind() as u8);
        dst.put_u8(0); // flags: reserved in version 1
        dst.put_u8(aead);
        dst.put_u16(key_version);
        dst.put_u32(self.stream_id);
        // encoded_len bounded this by max_frame_len, itself at most 16 MiB.
        dst.put_u32((total - HEADER_LEN) as u32);
        write_body(&self.body, dst);
        Ok(total)
    }

    /// The frame's bytes in a new buffer.
    pub fn to_bytes(&self, limits: &Limits) -> Result<Bytes> {
        let mut out = BytesMut::with_capacity(self.encoded_len(limits)?);
        self.encode(&mut out, limits)?;
        Ok(out.freeze())
    }
}

fn over(field: &'static str, found: usize, max: u64) -> EncodeError {
    EncodeError::LimitExceeded {
        field,
        found: found as u64,
        max,
    }
}

fn str_len(s: &str, field: &'static str, limits: &Limits) -> Result<usize> {
    blob_len(s.len(), field, limits.max_string_len)
}

fn blob_len(len: usize, field: &'static str, max: u16) -> Result<usize> {
    if len > max.into() {
        return Err(over(field, len, max.into()));
    }
    Ok(2 + len)
}

fn map_len(m: &Terms, field: &'static str, limits: &Limits) -> Result<usize> {
    if m.len() > limits.max_map_entries.into() {
        return Err(over(field, m.len(), limits.max_map_entries.into()));
    }
    m.iter().try_fold(2, |acc, (k, v)| {
        Ok(acc + str_len(k, field, limits)? + str_len(v, field, limits)?)
    })
}

fn beats_len(beats: &[Beat], field: &'static str, limits: &Limits) -> Result<usize> {
    if beats.is_empty() {
        return Err(EncodeError::Inconsistent(
            "a heartbeat needs at least one beat",
        ));
    }
    if beats.len() > limits.max_beats.into() {
        return Err(over(field, beats.len(), limits.max_beats.into()));
    }
    Ok(2 + beats.len() * (UUID + 8))
}

fn body_len(body: &Body, limits: &Limits) -> Result<usize> {
    Ok(match body {
        Body::Request(q) => {
            if q.agreement_id.is_some() != (q.request_type == RequestType::Adjustment) {
                return Err(EncodeError::Inconsistent(
                    "request.agreement_id is required for, and only for, adjustment",
                ));
            }
            8 + 1
                + 1
                + q.agreement_id.map_or(0, |_| UUID)
                + map_len(&q.terms, "request.terms", limits)?
        }
        Body::Response(p) => {
            8 + 1
                + match &p.decision {
                    Decision::Accepted { .. } => UUID,
                    Decision::Rejected { reason } => str_len(reason, "response.reason", limits)?,
                    Decision::CounterProposal { terms } => {
                        map_len(terms, "response.terms", limits)?
                    }
                }
        }
        Body::Data(d) => {
            if d.relations.len() > limits.max_relations.into() {
                return Err(over(
                    "data.relations",
                    d.relations.len(),
                    limits.max_relations.into(),
                ));
            }
            1 + d.agreement_id.map_or(0, |_| UUID)
                + 8
                + 8
                + 1
                + d.relations.len() * 9
                + d.payload.len()
        }
        Body::Ack(_) => 8,
        Body::Resume(_) => UUID + 8,
        Body::Control(c) => 1 + control_len(c, limits)?,
        Body::Close(c) => 2 + str_len(&c.reason, "close.reason", limits)?,
        Body::Handshake(h) => {
            if h.stage == 0 || h.stage > HANDSHAKE_MAX_STAGE {
                return Err(EncodeError::Inconsistent(
                    "a handshake stage is 1 … HANDSHAKE_MAX_STAGE",
                ));
            }
            if h.message.len() > HANDSHAKE_MAX_LEN {
                return Err(EncodeError::Inconsistent(
                    "a handshake message is at most HANDSHAKE_MAX_LEN bytes",
                ));
            }
            1 + h.message.len()
        }
        Body::Sealed(s) => {
            if s.ciphertext.len() < TAG_LEN {
                return Err(EncodeError::Inconsistent(
                    "a sealed body is at least its 16-byte tag",
                ));
            }
            SEAL_COUNTER_LEN + s.ciphertext.len()
        }
    })
}

fn control_len(c: &ControlMessage, limits: &Limits) -> Result<usize> {
    Ok(match c {
        ControlMessage::AuthRequest(a) => {
            8 + str_len(&a.fay_id, "auth_request.fay_id", limits)?
                + str_len(&a.resource_id, "auth_request.resource_id", limits)?
                + 1
                + blob_len(
                    a.credential.len(),
                    "auth_request.credential",
                    limits.max_credential_len,
                )?
        }
        ControlMessage::AuthResult(a) => {
            8 + 1
                + match &a.outcome {
                    AuthOutcome::Granted { .. } => UUID,
                    AuthOutcome::Refused { message, .. } => {
                        2 + str_len(message, "auth_result.message", limits)?
                    }
                }
        }
        ControlMessage::Heartbeat(h) => beats_len(&h.beats, "heartbeat.beats", limits)?,
        ControlMessage::HeartbeatAck(h) => beats_len(&h.beats, "heartbeat_ack.beats", limits)?,
        ControlMessage::SessionRelease(_) => UUID,
        ControlMessage::SessionStateChanged(s) => {
            UUID + 1
                + 1
                + match &s.reason {
                    Some(r) => str_len(r, "session_state_changed.reason", limits)?,
                    None => 0,
                }
                + map_len(&s.details, "session_state_changed.details", limits)?
        }
        ControlMessage::SessionTransferRequest(t) => {
            UUID + str_len(
                &t.target_fay_id,
                "session_transfer_request.target_fay_id",
                limits,
            )? + blob_len(
                t.target_credential.len(),
                "session_transfer_request.target_credential",
                limits.max_credential_len,
            )? + str_len(
                &t.handover_reason,
                "session_transfer_request.handover_reason",
                limits,
            )? + map_len(
                &t.handover_metadata,
                "session_transfer_request.handover_metadata",
                limits,
            )?
        }
        ControlMessage::HandoverFailedNotification(h) => {
            UUID + UUID
                + str_len(&h.target_fay_id, "handover_failed.target_fay_id", limits)?
                + 1
                + map_len(&h.details, "handover_failed.details", limits)?
        }
    })
}

// The writers below run only after `body_len` checked every length, so the
// `as u16` casts cannot truncate.

fn put_blob<B: BufMut>(dst: &mut B, b: &[u8]) {
    dst.put_u16(b.len() as u16);
    dst.put_slice(b);
}

fn put_map<B: BufMut>(dst: &mut B, m: &Terms) {
    dst.put_u16(m.len() as u16);
    for (k, v) in m {
        put_blob(dst, k.as_bytes());
        put_blob(dst, v.as_bytes());
    }
}

fn put_beats<B: BufMut>(dst: &mut B, beats: &[Beat]) {
    dst.put_u16(beats.len() as u16);
    for b in beats {
        dst.put_slice(b.session_id.as_bytes());
        dst.put_u64(b.sequence_number);
    }
}

fn write_body<B: BufMut>(body: &Body, dst: &mut B) {
    match body {
        Body::Request(q) => {
            dst.put_u64(q.request_id);
            dst.put_u8(q.request_type as u8);
            match q.agreement_id {
                Some(id) => {
                    dst.put_u8(1);
                    dst.put_slice(id.as_bytes());
                }
                None => dst.put_u8(0),
            }
            put_map(dst, &q.terms);
        }
        Body::Response(p) => {
            dst.put_u64(p.request_id);
            dst.put_u8(p.decision.tag());
            match &p.decision {
                Decision::Accepted { agreement_id } => dst.put_slice(agreement_id.as_bytes()),
                Decision::Rejected { reason } => put_blob(dst, reason.as_bytes()),
                Decision::CounterProposal { terms } => put_map(dst, terms),
            }
        }
        Body::Data(d) => {
            match d.agreement_id {
                Some(id) => {
                    dst.put_u8(DATA_HAS_AGREEMENT);
                    dst.put_slice(id.as_bytes());
                }
                None => dst.put_u8(0),
            }
            dst.put_u64(d.fragment_id);
            dst.put_u64(d.sequence);
            dst.put_u8(d.relations.len() as u8);
            for rel in &d.relations {
                dst.put_u8(rel.kind as u8);
                dst.put_u64(rel.target);
            }
            dst.put_slice(&d.payload);
        }
        Body::Ack(a) => dst.put_u64(a.cumulative),
        Body::Resume(r) => {
            dst.put_slice(r.session_id.as_bytes());
            dst.put_u64(r.highest_received);
        }
        Body::Control(c) => {
            dst.put_u8(c.tag());
            write_control(c, dst);
        }
        Body::Close(c) => {
            dst.put_u16(c.code.0);
            put_blob(dst, c.reason.as_bytes());
        }
        Body::Handshake(h) => {
            dst.put_u8(h.stage);
            dst.put_slice(&h.message);
        }
        Body::Sealed(s) => {
            dst.put_u64(s.seal_counter);
            dst.put_slice(&s.ciphertext);
        }
    }
}

fn write_control<B: BufMut>(c: &ControlMessage, dst: &mut B) {
    match c {
        ControlMessage::AuthRequest(a) => {
            dst.put_u64(a.request_id);
            put_blob(dst, a.fay_id.as_bytes());
            put_blob(dst, a.resource_id.as_bytes());
            dst.put_u8(a.access_mode as u8);
            put_blob(dst, &a.credential);
        }
        ControlMessage::AuthResult(a) => {
            dst.put_u64(a.request_id);
            match &a.outcome {
                AuthOutcome::Granted { session_id } => {
                    dst.put_u8(1);
                    dst.put_slice(session_id.as_bytes());
                }
                AuthOutcome::Refused { code, message } => {
                    dst.put_u8(2);
                    dst.put_u16(code.0);
                    put_blob(dst, message.as_bytes());
                }
            }
        }
        ControlMessage::Heartbeat(h) => put_beats(dst, &h.beats),
        ControlMessage::HeartbeatAck(h) => put_beats(dst, &h.beats),
        ControlMessage::SessionRelease(s) => dst.put_slice(s.session_id.as_bytes()),
        ControlMessage::SessionStateChanged(s) => {
            dst.put_slice(s.session_id.as_bytes());
            dst.put_u8(s.new_state as u8);
            match &s.reason {
                Some(r) => {
                    dst.put_u8(1);
                    put_blob(dst, r.as_bytes());
                }
                None => dst.put_u8(0),
            }
            put_map(dst, &s.details);
        }
        ControlMessage::SessionTransferRequest(t) => {
            dst.put_slice(t.source_session_id.as_bytes());
            put_blob(dst, t.target_fay_id.as_bytes());
            put_blob(dst, &t.target_credential);
            put_blob(dst, t.handover_reason.as_bytes());
            put_map(dst, &t.handover_metadata);
        }
        ControlMessage::HandoverFailedNotification(h) => {
            dst.put_slice(h.handover_id.as_bytes());
            dst.put_slice(h.source_session_id.as_bytes());
            put_blob(dst, h.target_fay_id.as_bytes());
            dst.put_u8(h.reason as u8);
            put_map(dst, &h.details);
        }
    }
}
