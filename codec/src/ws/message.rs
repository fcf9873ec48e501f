//! Message reassembly for one direction (RFC 6455 §5.4–5.6, §7.4).

use super::error::{CloseCode, WsError, WsErrorKind};
use super::frame::{FrameConfig, FrameError, FrameHeader, Opcode, apply_mask, parse_header};
use super::utf8::Utf8Validator;

/// A complete message or control frame, as delivered to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A text message, valid UTF-8.
    Text(String),
    /// A binary message (SPEC RT-9: `realtime.v1` refuses these with 1003).
    Binary(Vec<u8>),
    /// A ping; §5.5.2: answer with a pong carrying the same payload.
    Ping(Vec<u8>),
    /// A pong (solicited or not, §5.5.3).
    Pong(Vec<u8>),
    /// The peer's close frame; §5.5.1: echo a close and stop sending.
    Close(Option<CloseFrame>),
}

/// The body of a close frame (RFC 6455 §5.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseFrame {
    /// The status code (valid on the wire, §7.4).
    pub code: CloseCode,
    /// The reason, UTF-8.
    pub reason: String,
}

/// Parses a close frame's payload (RFC 6455 §5.5.1, §7.4): empty, or a
/// 2-byte code valid on the wire followed by a UTF-8 reason.
pub fn parse_close_payload(payload: &[u8]) -> Result<Option<CloseFrame>, WsError> {
    match payload {
        [] => Ok(None),
        [_] => Err(WsError::at(WsErrorKind::CloseTooShort, 0)),
        [hi, lo, reason @ ..] => {
            let code = CloseCode(u16::from_be_bytes([*hi, *lo]));
            if !code.is_valid_on_wire() {
                return Err(WsError::at(WsErrorKind::InvalidCloseCode(code.0), 0));
            }
            let reason = std::str::from_utf8(reason)
                .map_err(|e| WsError::at(WsErrorKind::InvalidUtf8, 2 + e.valid_up_to() as u64))?;
            Ok(Some(CloseFrame {
                code,
                reason: reason.to_owned(),
            }))
        }
    }
}

/// A fragmented message in progress.
#[derive(Debug)]
struct Partial {
    text: Option<Utf8Validator>,
    data: Vec<u8>,
}

/// The frame whose payload is being received.
#[derive(Debug)]
struct Current {
    opcode: Opcode,
    fin: bool,
    remaining: u64,
    /// A control frame's payload (at most 125 bytes, §5.5).
    control: Vec<u8>,
}

/// Reassembles the frames of one direction into messages (sans-IO).
///
/// Feed it each frame's header and unmasked payload, in order — whole
/// ([`Reassembler::on_frame`]) or in pieces ([`Reassembler::begin_frame`],
/// [`Reassembler::payload`], [`Reassembler::end_frame`]). It enforces
/// §5.4 fragmentation (continuations only inside a message, no interleaved
/// data messages, control frames allowed in between), the message size
/// ceiling across fragments (SPEC RT-10, RT-13), UTF-8 of text as each
/// fragment arrives (§8.1), close payloads (§5.5.1) and silence after close.
/// After an error the connection must be closed with the error's code.
#[derive(Debug)]
pub struct Reassembler {
    max_message_size: u64,
    partial: Option<Partial>,
    current: Option<Current>,
    closed: bool,
}

impl Reassembler {
    /// A reassembler with a message size ceiling in bytes.
    pub fn new(max_message_size: u64) -> Self {
        Self {
            max_message_size,
            partial: None,
            current: None,
            closed: false,
        }
    }

    /// True once a close frame was received.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Checks a frame's header against the message state, before its payload
    /// is read: continuation rules, the message ceiling, silence after close.
    pub fn check_header(&self, h: &FrameHeader) -> Result<(), WsError> {
        if self.closed {
            return Err(WsError::at(WsErrorKind::FrameAfterClose, 0));
        }
        match (h.opcode, &self.partial) {
            (Opcode::Continuation, None) => {
                Err(WsError::at(WsErrorKind::UnexpectedContinuation, 0))
            }
            (Opcode::Text | Opcode::Binary, Some(_)) => {
                Err(WsError::at(WsErrorKind::ExpectedContinuation, 0))
            }
            _ => {
                let so_far = match (&self.partial, h.opcode.is_control()) {
                    (Some(p), false) => p.data.len() as u64,
                    _ => 0,
                };
                let len = so_far.saturating_add(h.payload_len);
                if !h.opcode.is_control() && len > self.max_message_size {
                    let max = self.max_message_size;
                    return Err(WsError::at(WsErrorKind::MessageTooBig { len, max }, 1));
                }
                Ok(())
            }
        }
    }

    /// Takes one whole frame (header and its unmasked payload): the same as
    /// [`Reassembler::begin_frame`], [`Reassembler::payload`] and
    /// [`Reassembler::end_frame`]. Returns a message when one is complete: a
    /// control frame, or the last fragment of a data message.
    pub fn on_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
    ) -> Result<Option<Message>, WsError> {
        self.begin_frame(h)?;
        self.payload(payload)?;
        self.end_frame()
    }

    /// Starts a frame whose payload will follow in pieces (so that invalid
    /// UTF-8 fails as soon as its piece arrives, §8.1 "fail fast", without
    /// waiting for the end of a large frame).
    pub fn begin_frame(&mut self, h: &FrameHeader) -> Result<(), WsError> {
        if self.current.is_some() {
            return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
        }
        self.check_header(h)?;
        if !h.opcode.is_control() && self.partial.is_none() {
            self.partial = Some(Partial {
                text: (h.opcode == Opcode::Text).then(Utf8Validator::new),
                data: Vec::new(),
            });
        }
        self.current = Some(Current {
            opcode: h.opcode,
            fin: h.fin,
            remaining: h.payload_len,
            control: Vec::new(),
        });
        Ok(())
    }

    /// The next piece of the current frame's unmasked payload.
    pub fn payload(&mut self, chunk: &[u8]) -> Result<(), WsError> {
        let Some(cur) = self.current.as_mut() else {
            return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
        };
        let n = chunk.len() as u64;
        if n > cur.remaining {
            return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
        }
        cur.remaining -= n;
        if cur.opcode.is_control() {
            cur.control.extend_from_slice(chunk);
            return Ok(());
        }
        let Some(partial) = self.partial.as_mut() else {
            return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
        };
        let len = (partial.data.len() as u64).saturating_add(n);
        if len > self.max_message_size {
            let max = self.max_message_size;
            return Err(WsError::at(WsErrorKind::MessageTooBig { len, max }, 1));
        }
        if let Some(v) = partial.text.as_mut() {
            v.feed(chunk)
                .map_err(|at| WsError::at(WsErrorKind::InvalidUtf8, at))?;
        }
        partial.data.extend_from_slice(chunk);
        Ok(())
    }

    /// Ends the current frame, whose payload must be complete.
    pub fn end_frame(&mut self) -> Result<Option<Message>, WsError> {
        let Some(cur) = self.current.take() else {
            return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
        };
        if cur.remaining != 0 {
            return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
        }
        match cur.opcode {
            Opcode::Ping => Ok(Some(Message::Ping(cur.control))),
            Opcode::Pong => Ok(Some(Message::Pong(cur.control))),
            Opcode::Close => {
                let close = parse_close_payload(&cur.control)?;
                self.closed = true;
                self.partial = None;
                Ok(Some(Message::Close(close)))
            }
            Opcode::Text | Opcode::Binary | Opcode::Continuation => {
                if !cur.fin {
                    return Ok(None);
                }
                let Some(partial) = self.partial.take() else {
                    return Err(WsError::at(WsErrorKind::PayloadMismatch, 0));
                };
                match partial.text {
                    None => Ok(Some(Message::Binary(partial.data))),
                    Some(v) => {
                        v.finish()
                            .map_err(|at| WsError::at(WsErrorKind::InvalidUtf8, at))?;
                        String::from_utf8(partial.data)
                            .map(|s| Some(Message::Text(s)))
                            .map_err(|e| {
                                let at = e.utf8_error().valid_up_to() as u64;
                                WsError::at(WsErrorKind::InvalidUtf8, at)
                            })
                    }
                }
            }
        }
    }
}

/// Frames from a byte buffer to messages: [`parse_header`] + [`apply_mask`]
/// + [`Reassembler`], for one direction of one connection.
#[derive(Debug)]
pub struct Decoder {
    cfg: FrameConfig,
    reassembler: Reassembler,
}

impl Decoder {
    /// A decoder; `cfg.max_message_size` bounds frames and messages alike.
    pub fn new(cfg: FrameConfig) -> Self {
        Self {
            cfg,
            reassembler: Reassembler::new(cfg.max_message_size),
        }
    }

    /// True once a close frame was received.
    pub fn is_closed(&self) -> bool {
        self.reassembler.is_closed()
    }

    /// Decodes the first frame of `buf`, unmasking its payload in place.
    /// Returns the bytes used and a message if one completed. A frame not yet
    /// whole is [`FrameError::Incomplete`] (header and message rules are
    /// still checked first, so a violation is reported without waiting for
    /// the payload).
    pub fn decode(&mut self, buf: &mut [u8]) -> Result<(usize, Option<Message>), FrameError> {
        let h = parse_header(buf, &self.cfg)?;
        self.reassembler.check_header(&h)?;
        let end = h
            .frame_len()
            .ok_or(FrameError::Incomplete { needed: usize::MAX })?;
        let Some(payload) = buf.get_mut(h.header_len..end) else {
            return Err(FrameError::Incomplete { needed: end });
        };
        if let Some(key) = h.mask {
            apply_mask(payload, key, 0);
        }
        let msg = self.reassembler.on_frame(&h, payload)?;
        Ok((end, msg))
    }
}
