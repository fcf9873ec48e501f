//! RTSP interleaved binary data (RFC 2326 §10.12, RFC 7826 §14): on the
//! RTSP connection itself, each packet is `$`, a channel byte, a 16-bit
//! big-endian length and that many payload bytes; RTSP requests and
//! responses (a keep-alive, a TEARDOWN) may come between packets.
//!
//! [`write_interleaved`] cuts any payload into packets of at most
//! [`MAX_PAYLOAD`] bytes. [`InterleavedDecoder`] reads a stream of packets
//! and messages as it arrives, handing out payload bytes as soon as they
//! are there (a packet need not be whole), and tells "need N more bytes"
//! from malformed input.

use super::parse::{Parse, parse_message, skip_empty_lines};
use super::{Message, RtspError, RtspLimits};

/// The byte that starts an interleaved packet.
pub const MAGIC: u8 = b'$';

/// The most payload one packet carries.
pub const MAX_PAYLOAD: usize = u16::MAX as usize;

/// Bytes of a packet's header: `$`, channel, length.
pub const HEADER_LEN: usize = 4;

/// The header of a packet of `len` payload bytes on `channel`; `None` if
/// `len` is above [`MAX_PAYLOAD`].
pub fn packet_header(channel: u8, len: usize) -> Option<[u8; HEADER_LEN]> {
    let len = u16::try_from(len).ok()?.to_be_bytes();
    Some([MAGIC, channel, len[0], len[1]])
}

/// SPEC TRN-5: appends `payload` to `out` as packets on `channel`, each
/// of at most [`MAX_PAYLOAD`] bytes (none for an empty payload), unaltered;
/// returns how many.
pub fn write_interleaved(channel: u8, payload: &[u8], out: &mut Vec<u8>) -> usize {
    let mut n = 0;
    for piece in payload.chunks(MAX_PAYLOAD) {
        let len = (piece.len() as u16).to_be_bytes();
        out.extend_from_slice(&[MAGIC, channel, len[0], len[1]]);
        out.extend_from_slice(piece);
        n += 1;
    }
    n
}

/// The bytes [`write_interleaved`] writes for `len` payload bytes.
pub fn interleaved_len(len: usize) -> usize {
    len + len.div_ceil(MAX_PAYLOAD) * HEADER_LEN
}

/// One thing read from an interleaved stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// Payload bytes of a packet on `channel`: the `len` bytes after the
    /// first `skip` of the buffer (`skip` covers the packet's header, and
    /// any empty lines before it, when it starts here). `last` says the
    /// packet ends with them. A packet of length 0 is one `Data` with
    /// `len` 0.
    Data {
        /// The packet's channel.
        channel: u8,
        /// Bytes before the payload (0, or [`HEADER_LEN`] and any empty
        /// lines before the header).
        skip: usize,
        /// Payload bytes here.
        len: usize,
        /// Whether the packet ends here.
        last: bool,
    },
    /// A whole RTSP request or response between packets.
    Message(Message),
}

/// Why nothing more could be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterleaveError {
    /// Nothing wrong so far; at least `more` bytes more are needed.
    Incomplete {
        /// Bytes to wait for (at least 1).
        more: usize,
    },
    /// The bytes are neither a packet nor an RTSP message: close.
    Malformed(RtspError),
}

/// SPEC TRN-5: reads packets and messages as they come (see the module's
/// docs); the payloads it hands out, joined, are the bytes the peer sent.
#[derive(Clone, Debug)]
pub struct InterleavedDecoder {
    limits: RtspLimits,
    /// The packet being read: its channel and the payload still to come.
    packet: Option<(u8, usize)>,
}

impl InterleavedDecoder {
    /// A decoder between packets, reading messages under `limits`.
    pub fn new(limits: RtspLimits) -> Self {
        Self {
            limits,
            packet: None,
        }
    }

    /// Whether the decoder is inside a packet (its payload not all read).
    pub fn in_packet(&self) -> bool {
        self.packet.is_some()
    }

    /// Reads the next item at the front of `buf`; returns it and how many
    /// bytes it took (drop them before the next call). A `Data` item may
    /// take part of a packet; the rest comes with later calls.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(Item, usize), InterleaveError> {
        if let Some((channel, left)) = self.packet {
            if buf.is_empty() {
                return Err(InterleaveError::Incomplete { more: 1 });
            }
            let len = left.min(buf.len());
            let last = len == left;
            self.packet = (!last).then_some((channel, left - len));
            let item = Item::Data {
                channel,
                skip: 0,
                len,
                last,
            };
            return Ok((item, len));
        }
        // Empty lines between packets are skipped, as before a message:
        // so a `$` after them is a packet, never the start of a method.
        let lead = skip_empty_lines(buf);
        match buf.get(lead..).unwrap_or_default() {
            [MAGIC, channel, hi, lo, rest @ ..] => {
                let left = usize::from(u16::from_be_bytes([*hi, *lo]));
                let len = left.min(rest.len());
                let last = len == left;
                let channel = *channel;
                self.packet = (!last).then_some((channel, left - len));
                let skip = lead + HEADER_LEN;
                let item = Item::Data {
                    channel,
                    skip,
                    len,
                    last,
                };
                Ok((item, skip + len))
            }
            [MAGIC, rest @ ..] => Err(InterleaveError::Incomplete {
                more: HEADER_LEN - 1 - rest.len(),
            }),
            _ => match parse_message(buf, &self.limits) {
                Ok(Parse::Done(m, n)) => Ok((Item::Message(m), n)),
                Ok(Parse::NeedMore(more)) => Err(InterleaveError::Incomplete { more }),
                Err(e) => Err(InterleaveError::Malformed(e)),
            },
        }
    }
}
