//! One WebSocket frame header: parse, unmask, encode (RFC 6455 §5.2–5.3).
//!
//! ```text
//!  0                   1                   2                   3
//! +-+-+-+-+-------+-+-------------+-------------------------------+
//! |F|R|R|R| opcode|M| Payload len |    Extended payload length    |
//! |I|S|S|S|  (4)  |A|     (7)     |             (16/64)           |
//! |N|V|V|V|       |S|             |   (if payload len==126/127)   |
//! | |1|2|3|       |K|             |                               |
//! +-+-+-+-+-------+-+-------------+ - - - - - - - - - - - - - - - +
//! |     Extended payload length continued, if payload len == 127  |
//! + - - - - - - - - - - - - - - - +-------------------------------+
//! |                               |Masking-key, if MASK set to 1  |
//! +-------------------------------+-------------------------------+
//! ```

use std::fmt;

use super::error::{WsError, WsErrorKind};
use crate::EncodeError;

/// The longest header: 2 bytes, a 64-bit length and a masking key.
pub const MAX_HEADER_LEN: usize = 14;
/// RFC 6455 §5.5: the largest control frame payload.
pub const MAX_CONTROL_PAYLOAD: u64 = 125;

/// Which end of the connection this code is (RFC 6455 §5.1 masking rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Receives masked frames, sends unmasked ones.
    Server,
    /// Receives unmasked frames, sends masked ones.
    Client,
}

/// A frame's opcode (RFC 6455 §5.2, §11.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// 0x0: continues a fragmented message.
    Continuation,
    /// 0x1: the first frame of a text message.
    Text,
    /// 0x2: the first frame of a binary message.
    Binary,
    /// 0x8: close.
    Close,
    /// 0x9: ping.
    Ping,
    /// 0xA: pong.
    Pong,
}

impl Opcode {
    /// The opcode for a 4-bit value, if RFC 6455 defines it.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0x0 => Some(Self::Continuation),
            0x1 => Some(Self::Text),
            0x2 => Some(Self::Binary),
            0x8 => Some(Self::Close),
            0x9 => Some(Self::Ping),
            0xA => Some(Self::Pong),
            _ => None,
        }
    }

    /// The 4-bit wire value.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::Continuation => 0x0,
            Self::Text => 0x1,
            Self::Binary => 0x2,
            Self::Close => 0x8,
            Self::Ping => 0x9,
            Self::Pong => 0xA,
        }
    }

    /// RFC 6455 §5.5: close, ping and pong are control frames.
    pub fn is_control(self) -> bool {
        self.as_u8() & 0x8 != 0
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// What a receiver accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameConfig {
    /// The receiving end (decides which masking is required).
    pub role: Role,
    /// The largest message (and so frame payload) accepted, in bytes
    /// (SPEC RT-13: 64 KiB for `realtime.v1`; the echo endpoint may raise it to 16 MiB).
    pub max_message_size: u64,
    /// RSV bits a negotiated extension allows, as `0b0RRR` (RSV1 = 0b100).
    /// Zero unless an extension was negotiated (§5.2).
    pub allowed_rsv: u8,
}

impl FrameConfig {
    /// A server receiving client frames, no extensions.
    pub fn server(max_message_size: u64) -> Self {
        Self {
            role: Role::Server,
            max_message_size,
            allowed_rsv: 0,
        }
    }

    /// A client receiving server frames, no extensions.
    pub fn client(max_message_size: u64) -> Self {
        Self {
            role: Role::Client,
            max_message_size,
            allowed_rsv: 0,
        }
    }
}

/// A parsed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// FIN: the last frame of its message.
    pub fin: bool,
    /// RSV1–3 as `0b0RRR`.
    pub rsv: u8,
    /// The opcode.
    pub opcode: Opcode,
    /// The masking key, if MASK is set.
    pub mask: Option<[u8; 4]>,
    /// The payload length in bytes.
    pub payload_len: u64,
    /// The header's length on the wire (2–14 bytes); the payload follows it.
    pub header_len: usize,
}

impl FrameHeader {
    /// Header plus payload length, if it fits a `usize`.
    pub fn frame_len(&self) -> Option<usize> {
        usize::try_from(self.payload_len)
            .ok()
            .and_then(|p| p.checked_add(self.header_len))
    }
}

/// Why a header could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The input ends inside the header: at least `needed` bytes in all are
    /// required. Not an error on a stream: read more and try again.
    Incomplete {
        /// Total input length needed before parsing can go on.
        needed: usize,
    },
    /// The header breaks RFC 6455; close with [`WsError::close_code`].
    Protocol(WsError),
}

impl From<WsError> for FrameError {
    fn from(e: WsError) -> Self {
        Self::Protocol(e)
    }
}

fn err(kind: WsErrorKind, offset: u64) -> FrameError {
    FrameError::Protocol(WsError::at(kind, offset))
}

/// Parses one frame header from the start of `buf` (RFC 6455 §5.2).
///
/// Errors are reported as early as the bytes allow: a bad first byte is
/// refused with only one byte, an oversized control frame before its
/// extended length arrives. It never reads the payload.
pub fn parse_header(buf: &[u8], cfg: &FrameConfig) -> Result<FrameHeader, FrameError> {
    let &b0 = buf.first().ok_or(FrameError::Incomplete { needed: 2 })?;
    let fin = b0 & 0x80 != 0;
    let rsv = (b0 >> 4) & 0x7;
    if rsv & !cfg.allowed_rsv != 0 {
        return Err(err(WsErrorKind::ReservedBits(rsv), 0));
    }
    let opcode = Opcode::from_u8(b0 & 0x0F).ok_or(err(WsErrorKind::UnknownOpcode(b0 & 0x0F), 0))?;
    if opcode.is_control() && !fin {
        return Err(err(WsErrorKind::FragmentedControl, 0));
    }
    let &b1 = buf.get(1).ok_or(FrameError::Incomplete { needed: 2 })?;
    let masked = b1 & 0x80 != 0;
    match (cfg.role, masked) {
        (Role::Server, false) => return Err(err(WsErrorKind::UnmaskedFrame, 1)),
        (Role::Client, true) => return Err(err(WsErrorKind::MaskedFrame, 1)),
        _ => {}
    }
    let len7 = b1 & 0x7F;
    if opcode.is_control() && u64::from(len7) > MAX_CONTROL_PAYLOAD {
        return Err(err(WsErrorKind::ControlTooLong(u64::from(len7)), 1));
    }
    let (payload_len, mut pos) = match len7 {
        126 => {
            let b = take::<2>(buf, 2)?;
            let len = u64::from(u16::from_be_bytes(b));
            if len < 126 {
                return Err(err(WsErrorKind::NonMinimalLength(len), 2));
            }
            (len, 4)
        }
        127 => {
            let b = take::<8>(buf, 2)?;
            let len = u64::from_be_bytes(b);
            if len >> 63 != 0 {
                return Err(err(WsErrorKind::LengthTopBit, 2));
            }
            if len <= 0xFFFF {
                return Err(err(WsErrorKind::NonMinimalLength(len), 2));
            }
            (len, 10)
        }
        n => (u64::from(n), 2),
    };
    if payload_len > cfg.max_message_size {
        let at = if pos == 2 { 1 } else { 2 };
        let max = cfg.max_message_size;
        return Err(err(
            WsErrorKind::MessageTooBig {
                len: payload_len,
                max,
            },
            at,
        ));
    }
    let mask = if masked {
        let key = take::<4>(buf, pos)?;
        pos += 4;
        Some(key)
    } else {
        None
    };
    Ok(FrameHeader {
        fin,
        rsv,
        opcode,
        mask,
        payload_len,
        header_len: pos,
    })
}

/// `N` bytes at `at`, or how many bytes in all are needed.
fn take<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], FrameError> {
    let needed = at + N;
    buf.get(at..needed)
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(FrameError::Incomplete { needed })
}

/// XORs `data` with the masking key in place (RFC 6455 §5.3). `offset` is
/// the position of `data[0]` within the frame's payload, so a payload may
/// be unmasked in pieces of any size, in any buffer. Masking and unmasking
/// are the same operation.
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: u64) {
    // `offset % 4` is below 4, so the cast cannot truncate.
    let shift = (offset % 4) as usize;
    let mut rotated = key;
    rotated.rotate_left(shift);
    let word = u32::from_ne_bytes(rotated);
    let mut chunks = data.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let mut w = [0u8; 4];
        w.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u32::from_ne_bytes(w) ^ word).to_ne_bytes());
    }
    for (b, k) in chunks.into_remainder().iter_mut().zip(rotated) {
        *b ^= k;
    }
}

/// An encoded header: `len` bytes at the start of `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodedHeader {
    bytes: [u8; MAX_HEADER_LEN],
    len: usize,
}

impl EncodedHeader {
    /// The header's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Encodes a header (RFC 6455 §5.2), always with the minimal length form
/// and no RSV bits. A [`Role::Server`] sends unmasked frames and must pass
/// `mask: None`; a [`Role::Client`] must pass the key it will mask the
/// payload with (§5.3: fresh and unpredictable per frame — the caller's
/// randomness, this crate has none). A control frame must have `fin` and at
/// most 125 bytes of payload.
pub fn encode_header(
    role: Role,
    fin: bool,
    opcode: Opcode,
    payload_len: u64,
    mask: Option<[u8; 4]>,
) -> Result<EncodedHeader, EncodeError> {
    match (role, mask) {
        (Role::Server, Some(_)) => {
            return Err(EncodeError::Inconsistent("server frames are unmasked"));
        }
        (Role::Client, None) => return Err(EncodeError::Inconsistent("client frames are masked")),
        _ => {}
    }
    if opcode.is_control() {
        if !fin {
            return Err(EncodeError::Inconsistent(
                "control frames cannot be fragmented",
            ));
        }
        if payload_len > MAX_CONTROL_PAYLOAD {
            return Err(EncodeError::LimitExceeded {
                field: "ws.control.payload_len",
                found: payload_len,
                max: MAX_CONTROL_PAYLOAD,
            });
        }
    }
    if payload_len >> 63 != 0 {
        return Err(EncodeError::LimitExceeded {
            field: "ws.payload_len",
            found: payload_len,
            max: u64::MAX >> 1,
        });
    }
    let mut bytes = [0u8; MAX_HEADER_LEN];
    bytes[0] = (u8::from(fin) << 7) | opcode.as_u8();
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut len = 2;
    // Each arm's range check proves its cast lossless.
    if payload_len < 126 {
        bytes[1] = mask_bit | payload_len as u8;
    } else if payload_len <= 0xFFFF {
        bytes[1] = mask_bit | 126;
        bytes[2..4].copy_from_slice(&(payload_len as u16).to_be_bytes());
        len = 4;
    } else {
        bytes[1] = mask_bit | 127;
        bytes[2..10].copy_from_slice(&payload_len.to_be_bytes());
        len = 10;
    }
    if let Some(key) = mask {
        bytes[len..len + 4].copy_from_slice(&key);
        len += 4;
    }
    Ok(EncodedHeader { bytes, len })
}

/// Encodes a whole frame: the header, then the payload (masked with `mask`
/// for a client). See [`encode_header`] for the rules.
pub fn encode_frame(
    role: Role,
    fin: bool,
    opcode: Opcode,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) -> Result<Vec<u8>, EncodeError> {
    let header = encode_header(role, fin, opcode, payload.len() as u64, mask)?;
    let mut out = Vec::with_capacity(header.as_slice().len() + payload.len());
    out.extend_from_slice(header.as_slice());
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut out[start..], key, 0);
    }
    Ok(out)
}
