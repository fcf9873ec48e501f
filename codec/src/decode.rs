//! SPEC FRM-2: bytes to LogicalFrame.

use bytes::{Bytes, BytesMut};

use crate::control::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage,
    HandoverFailedNotification, HandoverFailedReason, Heartbeat, HeartbeatAck, SessionRelease,
    SessionState, SessionStateChanged, SessionTransferRequest,
};
use crate::error::{DecodeError, DecodeErrorKind, ErrorCode};
use crate::frame::{
    AckFrame, AeadAlgorithm, Body, CloseFrame, DataFrame, Decision, FrameKind, HANDSHAKE_MAX_LEN,
    HANDSHAKE_MAX_STAGE, HEADER_LEN, HandshakeFrame, LogicalFrame, MAGIC, Relation, RelationType,
    RequestFrame, RequestType, ResponseFrame, ResumeFrame, SEAL_COUNTER_LEN, Sealed, TAG_LEN,
    VERSION,
};
use crate::limits::Limits;
use crate::wire::{Reader, Result, malformed};

/// Flag bit 0 of a data frame's flags byte: the agreement id is present.
pub(crate) const DATA_HAS_AGREEMENT: u8 = 0x01;

/// The fixed header, validated.
struct Header {
    kind: FrameKind,
    aead: Option<AeadAlgorithm>,
    key_version: u16,
    stream_id: u32,
    len: usize,
}

/// Validates as much of a header as `buf` holds, so garbage is refused as
/// soon as its first bad byte arrives rather than after 16 bytes.
fn parse_header(buf: &[u8], limits: &Limits) -> Result<Header> {
    let need = |n: usize| -> Result<()> {
        if buf.len() < n {
            Err(DecodeError::Incomplete { needed: n })
        } else {
            Ok(())
        }
    };
    for (i, &m) in MAGIC.iter().enumerate() {
        need(i + 1)?;
        if buf[i] != m {
            return Err(malformed(DecodeErrorKind::BadMagic, "header.magic", i));
        }
    }
    need(3)?;
    if buf[2] != VERSION {
        return Err(malformed(
            DecodeErrorKind::UnsupportedVersion(buf[2]),
            "header.version",
            2,
        ));
    }
    need(4)?;
    let kind = FrameKind::from_u8(buf[3])
        .ok_or_else(|| malformed(DecodeErrorKind::UnknownKind(buf[3]), "header.kind", 3))?;
    need(5)?;
    if buf[4] != 0 {
        return Err(malformed(
            DecodeErrorKind::ReservedBits(buf[4]),
            "header.flags",
            4,
        ));
    }
    need(6)?;
    let aead = match buf[5] {
        0 => None,
        b => Some(
            AeadAlgorithm::from_u8(b)
                .ok_or_else(|| malformed(DecodeErrorKind::UnknownAlgorithm(b), "header.aead", 5))?,
        ),
    };
    need(8)?;
    let key_version = u16::from_be_bytes([buf[6], buf[7]]);
    if aead.is_none() && key_version != 0 {
        let kind = DecodeErrorKind::Inconsistent("a plaintext frame must have key version 0");
        return Err(malformed(kind, "header.key_version", 6));
    }
    need(HEADER_LEN)?;
    let stream_id = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]);
    let len = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
    if len > limits.max_frame_len {
        let kind = DecodeErrorKind::FrameTooLarge {
            len: len.into(),
            max: limits.max_frame_len.into(),
        };
        return Err(malformed(kind, "header.length", 12));
    }
    let min = if aead.is_some() {
        SEAL_COUNTER_LEN + TAG_LEN
    } else {
        0
    };
    if (len as usize) < min {
        let kind = DecodeErrorKind::LimitExceeded {
            found: len.into(),
            max: min as u64,
        };
        return Err(malformed(kind, "header.length", 12));
    }
    Ok(Header {
        kind,
        aead,
        key_version,
        stream_id,
        len: len as usize,
    })
}

/// A frame's header, checked ([`peek_frame_head`]): what a reader needs
/// before it has the body — how long the frame is, and for a sealed frame
/// the algorithm and key version it names in plaintext (SPEC ENC-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// The frame's kind (for a sealed frame, the kind of what it seals).
    pub kind: FrameKind,
    /// The AEAD algorithm of a sealed frame; `None` for plaintext.
    pub aead: Option<AeadAlgorithm>,
    /// The key version a sealed frame names (0 for plaintext).
    pub key_version: u16,
    /// The stream the frame belongs to.
    pub stream_id: u32,
    /// The frame's whole length, header included.
    pub total_len: usize,
}

/// SPEC FRM-2: the checked header of the frame at the start of `buf`, once
/// its 16 bytes are there ([`DecodeError::Incomplete`] before that); checked
/// as far as it goes, so garbage is refused at its first bad byte. The one
/// place a frame's header layout is read besides the decoder itself.
pub fn peek_frame_head(buf: &[u8], limits: &Limits) -> std::result::Result<FrameHead, DecodeError> {
    parse_header(buf, limits).map(|h| FrameHead {
        kind: h.kind,
        aead: h.aead,
        key_version: h.key_version,
        stream_id: h.stream_id,
        total_len: HEADER_LEN + h.len,
    })
}

/// The total length (header included) of the frame at the start of `buf`,
/// once its header is there; [`DecodeError::Incomplete`] before that.
///
/// Checks the header as far as it goes, so a stream reader can refuse a
/// malformed peer without buffering a whole frame.
pub fn peek_frame_len(buf: &[u8], limits: &Limits) -> std::result::Result<usize, DecodeError> {
    parse_header(buf, limits).map(|h| HEADER_LEN + h.len)
}

/// SPEC FRM-2: decodes the frame at the start of `buf`.
///
/// Returns the frame and the number of bytes it took. Payloads, credentials
/// and sealed bodies are slices of `buf` (no copy). Error offsets count from
/// the start of `buf`.
pub fn decode_frame(
    buf: &Bytes,
    limits: &Limits,
) -> std::result::Result<(LogicalFrame, usize), DecodeError> {
    let h = parse_header(buf, limits)?;
    decode_after_header(buf, h, limits)
}

/// SPEC FRM-2: decodes the frame at the start of `buf` whose header
/// [`peek_frame_head`] already checked (on these bytes, with these
/// limits), without reading the header again: a stream reader that cut the
/// frame by its head parses each frame's length once. Returns what
/// [`decode_frame`] returns for the same bytes.
pub fn decode_frame_at(
    buf: &Bytes,
    head: &FrameHead,
    limits: &Limits,
) -> std::result::Result<(LogicalFrame, usize), DecodeError> {
    let h = Header {
        kind: head.kind,
        aead: head.aead,
        key_version: head.key_version,
        stream_id: head.stream_id,
        len: head.total_len.saturating_sub(HEADER_LEN),
    };
    decode_after_header(buf, h, limits)
}

fn decode_after_header(
    buf: &Bytes,
    h: Header,
    limits: &Limits,
) -> std::result::Result<(LogicalFrame, usize), DecodeError> {
    let total = HEADER_LEN + h.len;
    if buf.len() < total {
        return Err(DecodeError::Incomplete { needed: total });
    }
    let mut r = Reader::new(buf, HEADER_LEN, total);
    let body = match h.aead {
        Some(aead) => {
            let seal_counter = r.u64("sealed.seal_counter")?;
            Body::Sealed(Sealed {
                kind: h.kind,
                aead,
                key_version: h.key_version,
                seal_counter,
                ciphertext: r.rest(),
            })
        }
        None => decode_body(h.kind, &mut r, limits)?,
    };
    Ok((
        LogicalFrame {
            stream_id: h.stream_id,
            body,
        },
        total,
    ))
}

/// Decodes a plaintext body of `kind` from the whole of `r` (also used after
/// a sealed body is opened).
pub(crate) fn decode_body(kind: FrameKind, r: &mut Reader<'_>, limits: &Limits) -> Result<Body> {
    let body = match kind {
        FrameKind::Request => Body::Request(request(r, limits)?),
        FrameKind::Response => Body::Response(response(r, limits)?),
        FrameKind::Data => return Ok(Body::Data(data(r, limits)?)),
        FrameKind::Ack => Body::Ack(AckFrame {
            cumulative: r.u64("ack.cumulative")?,
        }),
        FrameKind::Resume => Body::Resume(ResumeFrame {
            session_id: r.uuid("resume.session_id")?,
            highest_received: r.u64("resume.highest_received")?,
        }),
        FrameKind::Control => Body::Control(control(r, limits)?),
        FrameKind::Close => Body::Close(CloseFrame {
            code: ErrorCode(r.u16("close.code")?),
            reason: r.string("close.reason", limits)?,
        }),
        FrameKind::Handshake => return handshake(r),
    };
    r.finish("body")?;
    Ok(body)
}

fn handshake(r: &mut Reader<'_>) -> Result<Body> {
    let at = r.pos();
    let stage = r.u8("handshake.stage")?;
    if stage == 0 || stage > HANDSHAKE_MAX_STAGE {
        let kind = DecodeErrorKind::InvalidValue(stage.into());
        return Err(malformed(kind, "handshake.stage", at));
    }
    let at = r.pos();
    if r.remaining() > HANDSHAKE_MAX_LEN {
        let kind = DecodeErrorKind::LimitExceeded {
            found: r.remaining() as u64,
            max: HANDSHAKE_MAX_LEN as u64,
        };
        return Err(malformed(kind, "handshake.message", at));
    }
    Ok(Body::Handshake(HandshakeFrame {
        stage,
        message: r.rest(),
    }))
}

fn request(r: &mut Reader<'_>, limits: &Limits) -> Result<RequestFrame> {
    let request_id = r.u64("request.request_id")?;
    let request_type = r.enum_u8("request.request_type", RequestType::from_u8)?;
    let at = r.pos();
    let agreement_id = match r.presence("request.agreement_id")? {
        true => Some(r.uuid("request.agreement_id")?),
        false => None,
    };
    if agreement_id.is_some() != (request_type == RequestType::Adjustment) {
        let kind = DecodeErrorKind::Inconsistent(
            "an agreement id is required for, and only for, adjustment",
        );
        return Err(malformed(kind, "request.agreement_id", at));
    }
    let terms = r.map("request.terms", limits)?;
    Ok(RequestFrame {
        request_id,
        request_type,
        agreement_id,
        terms,
    })
}

fn response(r: &mut Reader<'_>, limits: &Limits) -> Result<ResponseFrame> {
    let request_id = r.u64("response.request_id")?;
    let at = r.pos();
    let decision = match r.u8("response.decision")? {
        1 => Decision::Accepted {
            agreement_id: r.uuid("response.agreement_id")?,
        },
        2 => Decision::Rejected {
            reason: r.string("response.reason", limits)?,
        },
        3 => Decision::CounterProposal {
            terms: r.map("response.terms", limits)?,
        },
        b => {
            return Err(malformed(
                DecodeErrorKind::InvalidValue(b.into()),
                "response.decision",
                at,
            ));
        }
    };
    Ok(ResponseFrame {
        request_id,
        decision,
    })
}

fn data(r: &mut Reader<'_>, limits: &Limits) -> Result<DataFrame> {
    let at = r.pos();
    let flags = r.u8("data.flags")?;
    if flags & !DATA_HAS_AGREEMENT != 0 {
        return Err(malformed(
            DecodeErrorKind::ReservedBits(flags),
            "data.flags",
            at,
        ));
    }
    let agreement_id = match flags & DATA_HAS_AGREEMENT != 0 {
        true => Some(r.uuid("data.agreement_id")?),
        false => None,
    };
    let fragment_id = r.u64("data.fragment_id")?;
    let sequence = r.u64("data.sequence")?;
    let at = r.pos();
    let n = r.u8("data.relation_count")?;
    if n > limits.max_relations {
        let kind = DecodeErrorKind::LimitExceeded {
            found: n.into(),
            max: limits.max_relations.into(),
        };
        return Err(malformed(kind, "data.relation_count", at));
    }
    let mut relations = Vec::with_capacity(n.into());
    for _ in 0..n {
        relations.push(Relation {
            kind: r.enum_u8("data.relations.type", RelationType::from_u8)?,
            target: r.u64("data.relations.target")?,
        });
    }
    Ok(DataFrame {
        agreement_id,
        fragment_id,
        sequence,
        relations,
        payload: r.rest(),
    })
}

fn beats(r: &mut Reader<'_>, field: &'static str, limits: &Limits) -> Result<Vec<Beat>> {
    let at = r.pos();
    let n = r.count_u16(field, limits.max_beats)?;
    if n == 0 {
        return Err(malformed(
            DecodeErrorKind::Inconsistent("a heartbeat needs at least one beat"),
            field,
            at,
        ));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(Beat {
            session_id: r.uuid(field)?,
            sequence_number: r.u64(field)?,
        });
    }
    Ok(out)
}

fn control(r: &mut Reader<'_>, limits: &Limits) -> Result<ControlMessage> {
    let at = r.pos();
    Ok(match r.u8("control.type")? {
        1 => ControlMessage::AuthRequest(AuthRequest {
            request_id: r.u64("auth_request.request_id")?,
            fay_id: r.string("auth_request.fay_id", limits)?,
            resource_id: r.string("auth_request.resource_id", limits)?,
            access_mode: r.enum_u8("auth_request.access_mode", AccessMode::from_u8)?,
            credential: r.blob("auth_request.credential", limits.max_credential_len)?,
        }),
        2 => {
            let request_id = r.u64("auth_result.request_id")?;
            let at = r.pos();
            let outcome = match r.u8("auth_result.outcome")? {
                1 => AuthOutcome::Granted {
                    session_id: r.uuid("auth_result.session_id")?,
                },
                2 => AuthOutcome::Refused {
                    code: ErrorCode(r.u16("auth_result.code")?),
                    message: r.string("auth_result.message", limits)?,
                },
                b => {
                    return Err(malformed(
                        DecodeErrorKind::InvalidValue(b.into()),
                        "auth_result.outcome",
                        at,
                    ));
                }
            };
            ControlMessage::AuthResult(AuthResult {
                request_id,
                outcome,
            })
        }
        3 => ControlMessage::Heartbeat(Heartbeat {
            beats: beats(r, "heartbeat.beats", limits)?,
        }),
        4 => ControlMessage::HeartbeatAck(HeartbeatAck {
            beats: beats(r, "heartbeat_ack.beats", limits)?,
        }),
        5 => ControlMessage::SessionRelease(SessionRelease {
            session_id: r.uuid("session_release.session_id")?,
        }),
        6 => ControlMessage::SessionStateChanged(SessionStateChanged {
            session_id: r.uuid("session_state_changed.session_id")?,
            new_state: r.enum_u8("session_state_changed.new_state", SessionState::from_u8)?,
            reason: r.opt_string("session_state_changed.reason", limits)?,
            details: r.map("session_state_changed.details", limits)?,
        }),
        7 => ControlMessage::SessionTransferRequest(SessionTransferRequest {
            source_session_id: r.uuid("session_transfer_request.source_session_id")?,
            target_fay_id: r.string("session_transfer_request.target_fay_id", limits)?,
            target_credential: r.blob(
                "session_transfer_request.target_credential",
                limits.max_credential_len,
            )?,
            handover_reason: r.string("session_transfer_request.handover_reason", limits)?,
            handover_metadata: r.map("session_transfer_request.handover_metadata", limits)?,
        }),
        8 => ControlMessage::HandoverFailedNotification(HandoverFailedNotification {
            handover_id: r.uuid("handover_failed.handover_id")?,
            source_session_id: r.uuid("handover_failed.source_session_id")?,
            target_fay_id: r.string("handover_failed.target_fay_id", limits)?,
            reason: r.enum_u8("handover_failed.reason", HandoverFailedReason::from_u8)?,
            details: r.map("handover_failed.details", limits)?,
        }),
        b => {
            return Err(malformed(
                DecodeErrorKind::UnknownKind(b),
                "control.type",
                at,
            ));
        }
    })
}

/// SPEC FRM-2: decodes the plaintext body of an opened sealed frame.
///
/// `plaintext` is the body as the AEAD returned it (tag removed); error
/// offsets count from its start.
pub fn decode_opened(
    kind: FrameKind,
    plaintext: &Bytes,
    limits: &Limits,
) -> std::result::Result<Body, DecodeError> {
    let mut r = Reader::new(plaintext, 0, plaintext.len());
    decode_body(kind, &mut r, limits)
}

/// A decoder for a byte stream: takes whole frames off the front of a buffer.
#[derive(Clone, Debug, Default)]
pub struct FrameDecoder {
    limits: Limits,
}

impl FrameDecoder {
    /// A decoder that enforces `limits`.
    pub fn new(limits: Limits) -> Self {
        Self { limits }
    }

    /// Takes the next whole frame off the front of `buf`: `Ok(None)` when
    /// more bytes are needed, an error as soon as the bytes cannot become a
    /// frame. The frame's payload shares `buf`'s memory.
    pub fn decode(
        &self,
        buf: &mut BytesMut,
    ) -> std::result::Result<Option<LogicalFrame>, DecodeError> {
        let total = match peek_frame_len(buf, &self.limits) {
            Ok(total) if buf.len() >= total => total,
            Ok(_) | Err(DecodeError::Incomplete { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let bytes = buf.split_to(total).freeze();
        decode_frame(&bytes, &self.limits).map(|(frame, _)| Some(frame))
    }
}
