//! The receive side of an open WebSocket connection: frames cut out of the
//! received bytes as they arrive, binary payloads unmasked where the kernel
//! wrote them and handed on as pieces of the receive buffer — no copy, and
//! no waiting for the end of a frame or a message, since the user's stream
//! is just the concatenation of the payloads (SPEC TRN-5).
//!
//! Only what straddles two receives and must be whole to be read — a frame
//! header (at most 14 bytes) or a control frame (at most 139) — is copied
//! aside. Control frames are decoded whole by the codec's
//! [`Decoder`]; the data frames' rules that the codec's reassembler would
//! check (continuations only inside a message, no new message inside one,
//! the message ceiling across fragments) are checked here from the headers,
//! since their payloads never reach a reassembler. A text message is
//! refused: DTP is binary.

use bytes::BytesMut;
use dtp_codec::ws::{
    CloseCode, Decoder, FrameConfig, FrameError, FrameHeader, Message, Opcode, apply_mask,
    parse_header,
};

use crate::lent::RecvBuf;

/// What the next bytes received were.
#[derive(Debug)]
pub(crate) enum Piece {
    /// Payload bytes of a binary message, unmasked: the user's.
    Data(RecvBuf),
    /// A ping, pong or close.
    Control(Message),
    /// A violation of RFC 6455 (or a text message): close with this code.
    /// Nothing more may be read.
    Refused(CloseCode),
}

/// The data frame whose payload is arriving.
#[derive(Clone, Copy, Debug)]
struct DataFrame {
    mask: Option<[u8; 4]>,
    /// Payload bytes of this frame already delivered (the mask's offset).
    offset: u64,
    remaining: u64,
    fin: bool,
}

/// One connection's receive state.
#[derive(Debug)]
pub(crate) struct Inbound {
    cfg: FrameConfig,
    /// A header or control frame begun in an earlier receive.
    pending: BytesMut,
    frame: Option<DataFrame>,
    /// Payload bytes of the data message in progress, if one is.
    message: Option<u64>,
    /// Control frames, decoded whole.
    control: Decoder,
}

impl Inbound {
    pub(crate) fn new(cfg: FrameConfig) -> Self {
        Self {
            cfg,
            pending: BytesMut::new(),
            frame: None,
            message: None,
            control: Decoder::new(cfg),
        }
    }

    /// The next piece of `data`, taken off its front; `None` once `data`
    /// is used up (a header or control frame begun at its end is kept for
    /// the next receive).
    pub(crate) fn next(&mut self, data: &mut RecvBuf) -> Option<Piece> {
        loop {
            if let Some(f) = self.frame.as_mut() {
                if f.remaining == 0 {
                    self.end_frame();
                    continue;
                }
                if data.is_empty() {
                    return None;
                }
                let n = usize::try_from(f.remaining).map_or(data.len(), |r| r.min(data.len()));
                let mut piece = data.split_to(n);
                if let Some(key) = f.mask {
                    apply_mask(&mut piece, key, f.offset);
                }
                f.offset += n as u64;
                f.remaining -= n as u64;
                return Some(Piece::Data(piece));
            }
            match self.header(data) {
                Step::Wait => return None,
                Step::Next => {}
                Step::Piece(p) => return Some(p),
            }
        }
    }

    /// A data frame's payload has all arrived.
    fn end_frame(&mut self) {
        if self.frame.take().is_some_and(|f| f.fin) {
            self.message = None;
        }
    }

    /// Reads the next frame's header off `data` (or off what was kept of
    /// it): a data frame starts, a control frame is decoded, or more bytes
    /// are needed.
    fn header(&mut self, data: &mut RecvBuf) -> Step {
        let parsed = if self.pending.is_empty() {
            parse_header(data, &self.cfg)
        } else {
            loop {
                match parse_header(&self.pending, &self.cfg) {
                    Err(FrameError::Incomplete { needed }) => {
                        if !self.top_up(data, needed) {
                            return Step::Wait;
                        }
                    }
                    parsed => break parsed,
                }
            }
        };
        let h = match parsed {
            Ok(h) => h,
            Err(FrameError::Incomplete { .. }) => {
                // A header cut by the end of this receive: under 14 bytes.
                self.keep(data);
                return Step::Wait;
            }
            Err(FrameError::Protocol(e)) => return Step::Piece(Piece::Refused(e.close_code())),
        };
        if h.opcode.is_control() {
            return self.control_frame(&h, data);
        }
        if let Err(code) = self.start(&h) {
            return Step::Piece(Piece::Refused(code));
        }
        if self.pending.is_empty() {
            drop(data.split_to(h.header_len));
        } else {
            // `pending` was topped up to exactly the header.
            self.pending.clear();
        }
        Step::Next
    }

    /// A control frame (at most 139 bytes), decoded once it is whole.
    fn control_frame(&mut self, h: &FrameHeader, data: &mut RecvBuf) -> Step {
        // The header limits the payload to 125 bytes, so this fits.
        let len = h.header_len + h.payload_len as usize;
        let decoded = if self.pending.is_empty() {
            if data.len() < len {
                self.keep(data);
                return Step::Wait;
            }
            let mut frame = data.split_to(len);
            self.control.decode(&mut frame)
        } else {
            if !self.top_up(data, len) {
                return Step::Wait;
            }
            let decoded = self.control.decode(&mut self.pending);
            self.pending.clear();
            decoded
        };
        match decoded {
            Ok((_, Some(m))) => Step::Piece(Piece::Control(m)),
            Ok((_, None)) => Step::Next,
            Err(FrameError::Protocol(e)) => Step::Piece(Piece::Refused(e.close_code())),
            // The frame is whole: not reached.
            Err(FrameError::Incomplete { .. }) => {
                Step::Piece(Piece::Refused(CloseCode::PROTOCOL_ERROR))
            }
        }
    }

    /// RFC 6455 §5.4 and the message ceiling, for a data frame's header.
    fn start(&mut self, h: &FrameHeader) -> Result<(), CloseCode> {
        let so_far = match (h.opcode, self.message) {
            (Opcode::Binary, None) => 0,
            (Opcode::Continuation, Some(n)) => n,
            // RFC 6455 §7.4.1's 1003: DTP is binary.
            (Opcode::Text, None) => return Err(CloseCode::UNSUPPORTED_DATA),
            _ => return Err(CloseCode::PROTOCOL_ERROR),
        };
        let len = so_far.saturating_add(h.payload_len);
        if len > self.cfg.max_message_size {
            return Err(CloseCode::MESSAGE_TOO_BIG);
        }
        self.message = Some(len);
        self.frame = Some(DataFrame {
            mask: h.mask,
            offset: 0,
            remaining: h.payload_len,
            fin: h.fin,
        });
        Ok(())
    }

    /// Moves bytes from `data` to `pending` until it holds `needed`;
    /// whether it does.
    fn top_up(&mut self, data: &mut RecvBuf, needed: usize) -> bool {
        let take = needed.saturating_sub(self.pending.len()).min(data.len());
        self.pending.extend_from_slice(&data.split_to(take));
        self.pending.len() >= needed
    }

    /// Keeps all of `data` (the start of a header or control frame).
    fn keep(&mut self, data: &mut RecvBuf) {
        let all = data.len();
        self.pending.extend_from_slice(&data.split_to(all));
    }
}

/// What reading a header gave.
enum Step {
    /// More bytes are needed.
    Wait,
    /// A data frame started, or a frame that delivers nothing ended: go on.
    Next,
    Piece(Piece),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;
    use dtp_codec::ws::{Role, encode_frame};
    use proptest::prelude::*;

    /// A client frame (masked with `key`).
    fn frame(fin: bool, opcode: Opcode, payload: &[u8], key: [u8; 4]) -> Vec<u8> {
        encode_frame(Role::Client, fin, opcode, payload, Some(key)).unwrap()
    }

    /// Feeds `wire` to a server's inbound in pieces of the given sizes
    /// (cycled); the payload bytes and the other pieces, in order.
    fn feed(wire: &[u8], cuts: &[usize]) -> (Vec<u8>, Vec<String>) {
        let mut inbound = Inbound::new(FrameConfig::server(1 << 20));
        let (mut bytes, mut other) = (Vec::new(), Vec::new());
        let mut at = 0;
        for &cut in cuts.iter().cycle() {
            if at >= wire.len() {
                break;
            }
            let end = (at + cut.max(1)).min(wire.len());
            let mut data = RecvBuf::from(BytesMut::from(&wire[at..end]));
            at = end;
            while let Some(piece) = inbound.next(&mut data) {
                match piece {
                    Piece::Data(d) => bytes.extend_from_slice(&d),
                    Piece::Control(m) => other.push(format!("{m:?}")),
                    Piece::Refused(code) => {
                        other.push(format!("refused {}", code.0));
                        return (bytes, other);
                    }
                }
            }
            assert!(data.is_empty(), "a receive is always used up");
        }
        (bytes, other)
    }

    #[test]
    fn payloads_arrive_unmasked_whatever_the_cuts() {
        let mut wire = frame(true, Opcode::Binary, b"hello, ", [1, 2, 3, 4]);
        wire.extend(frame(false, Opcode::Binary, b"frag", [9, 8, 7, 6]));
        wire.extend(frame(true, Opcode::Ping, b"p", [5, 5, 5, 5]));
        wire.extend(frame(false, Opcode::Continuation, b"ment", [0xFF; 4]));
        wire.extend(frame(true, Opcode::Continuation, b"ed", [3, 1, 4, 1]));
        wire.extend(frame(true, Opcode::Binary, b"", [7; 4]));
        for cut in 1..=wire.len() {
            let (bytes, other) = feed(&wire, &[cut]);
            assert_eq!(bytes, b"hello, fragmented", "cut {cut}");
            assert_eq!(other, ["Ping([112])"], "cut {cut}");
        }
    }

    #[test]
    fn text_continuations_and_oversized_messages_are_refused() {
        let k = [1, 2, 3, 4];
        let refused = |wire: Vec<u8>| feed(&wire, &[3]).1;
        assert_eq!(
            refused(frame(true, Opcode::Text, b"hi", k)),
            ["refused 1003"]
        );
        assert_eq!(
            refused(frame(true, Opcode::Continuation, b"x", k)),
            ["refused 1002"]
        );
        let mut two_starts = frame(false, Opcode::Binary, b"a", k);
        two_starts.extend(frame(true, Opcode::Binary, b"b", k));
        assert_eq!(refused(two_starts), ["refused 1002"]);
        // 600 KiB + 600 KiB: each frame fits the 1 MiB ceiling, the message
        // does not; refused at the second header, before its payload.
        let mut big = frame(false, Opcode::Binary, &vec![0; 600 << 10], k);
        big.extend(frame(true, Opcode::Continuation, &vec![0; 600 << 10], k));
        assert_eq!(feed(&big, &[64 << 10]).1, ["refused 1009"]);
        let unmasked = encode_frame(Role::Server, true, Opcode::Binary, b"x", None).unwrap();
        assert_eq!(refused(unmasked), ["refused 1002"]);
    }

    #[test]
    fn a_close_frame_is_decoded() {
        let mut payload = 1000u16.to_be_bytes().to_vec();
        payload.extend(b"bye");
        let (_, other) = feed(&frame(true, Opcode::Close, &payload, [4; 4]), &[1]);
        assert_eq!(other.len(), 1);
        assert!(other[0].starts_with("Close(Some"), "{other:?}");
    }

    proptest! {
        /// Any binary messages, fragmented any way and cut into receives
        /// any way, give the concatenation of their payloads.
        #[test]
        fn the_stream_is_the_payloads_in_order(
            messages in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..4),
                1..6,
            ),
            cuts in proptest::collection::vec(1usize..400, 1..8),
            key in any::<[u8; 4]>(),
        ) {
            let mut wire = Vec::new();
            let mut want = Vec::new();
            for fragments in &messages {
                for (i, f) in fragments.iter().enumerate() {
                    let op = if i == 0 { Opcode::Binary } else { Opcode::Continuation };
                    wire.extend(frame(i + 1 == fragments.len(), op, f, key));
                    want.extend_from_slice(f);
                }
            }
            let (bytes, other) = feed(&wire, &cuts);
            prop_assert!(other.is_empty(), "{:?}", other);
            prop_assert_eq!(bytes, want);
        }
    }
}
