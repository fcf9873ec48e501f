//! Cutting the byte stream of one connection into workload frames, by hand:
//! the 16-byte header and the 18 bytes of data fields are read, the payload
//! is echoed (`pingpong`) or skipped (`stream`) without being looked at.
//!
//! Sans-IO: `Cutter::feed` takes whatever bytes one receive delivered and
//! writes the answers into a `Sink`; it never needs the whole frame in one
//! buffer, so a frame split across any number of receives costs nothing but
//! the 34-byte carry of a prefix that straddles two buffers.

/// Bytes of the frame header (codec/FORMAT.md §2).
pub const HEADER_LEN: usize = 16;
/// Bytes of a data frame's fields before the payload when it carries no
/// agreement id and no relations: flags, fragment id, sequence, relation
/// count (FORMAT.md §5.3).
pub const DATA_FIELDS_LEN: usize = 18;
/// What is read of every frame before its payload.
pub const PREFIX_LEN: usize = HEADER_LEN + DATA_FIELDS_LEN;
/// Bytes on the wire of an ack frame: the header and the u64 cumulative.
pub const ACK_FRAME_LEN: usize = HEADER_LEN + 8;
/// The longest body accepted: the codec's default `max_frame_len` (1 MiB).
pub const MAX_BODY_LEN: u32 = 1 << 20;
/// The stream id of `pingpong` (and idle) frames.
pub const PINGPONG_STREAM_ID: u32 = 1;
/// The stream id of `stream` frames and their acks.
pub const STREAM_STREAM_ID: u32 = 2;
/// The server acks after this many `stream` frames since its last ack.
pub const ACK_EVERY: u64 = 64;
/// The `fragment_id` that asks for an ack at once.
pub const FLUSH_FRAGMENT_ID: u64 = u64::MAX;

/// The first 8 header bytes of a plaintext data frame: magic `D7 50`,
/// version 1, kind 3 (data), flags 0, aead 0, key version 0.
const DATA_HEADER_START: [u8; 8] = [0xD7, 0x50, 1, 3, 0, 0, 0, 0];
/// The same for an ack frame (kind 4).
const ACK_HEADER_START: [u8; 8] = [0xD7, 0x50, 1, 4, 0, 0, 0, 0];

/// Where the answers of a connection go: a fixed-size output buffer.
pub(crate) trait Sink {
    /// Bytes that [`Sink::put`] can take now; 0 means "stall until the
    /// output drains".
    fn room(&mut self) -> usize;
    /// Appends `bytes` (at most [`Sink::room`] of them).
    fn put(&mut self, bytes: &[u8]);
}

/// The frame broke the workload protocol: the connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Not a plaintext data frame of the format's version 1.
    Header,
    /// Not stream 1 or 2.
    Stream,
    /// A body shorter than the data fields or longer than [`MAX_BODY_LEN`].
    Length,
    /// An agreement id or relations: the workload's clients send neither.
    Fields,
    /// A `stream` sequence that is not the next one.
    Sequence,
}

/// What one [`Cutter::feed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    /// Every byte taken, nothing waiting to be written.
    Done,
    /// Output full after taking this many bytes: feed the rest (possibly
    /// none: an ack is due) once the output has room again.
    Stalled(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Reading the 34-byte prefix (into `carry` when it straddles reads).
    Prefix,
    /// `pingpong`: copy `carry[from_carry..carry_len]`, then `remaining`
    /// bytes of input, to the output.
    Echo { from_carry: u8, remaining: u32 },
    /// `stream`: drop `remaining` payload bytes, then ack if `ack`.
    Skip { remaining: u32, ack: bool },
}

/// One connection's framing state and `stream` counters.
#[derive(Clone, Debug)]
pub(crate) struct Cutter {
    carry: [u8; PREFIX_LEN],
    carry_len: u8,
    phase: Phase,
    /// Body length from the header being read (valid once 16 bytes are in).
    body_len: u32,
    /// Highest `stream` sequence received.
    cumulative: u64,
    /// `stream` frames since the last ack.
    unacked: u64,
    /// Frames started.
    frames: u64,
    /// Acks written.
    acks: u64,
}

impl Default for Cutter {
    fn default() -> Self {
        Self {
            carry: [0; PREFIX_LEN],
            carry_len: 0,
            phase: Phase::Prefix,
            body_len: 0,
            cumulative: 0,
            unacked: 0,
            frames: 0,
            acks: 0,
        }
    }
}

/// Checks a header and returns the frame's body length.
fn check_header(h: &[u8]) -> Result<u32, Malformed> {
    if h.len() < HEADER_LEN || h[..8] != DATA_HEADER_START {
        return Err(Malformed::Header);
    }
    let stream = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
    if stream != PINGPONG_STREAM_ID && stream != STREAM_STREAM_ID {
        return Err(Malformed::Stream);
    }
    let len = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    if (len as usize) < DATA_FIELDS_LEN || len > MAX_BODY_LEN {
        return Err(Malformed::Length);
    }
    Ok(len)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The 24 bytes of the ack frame for `cumulative` on the `stream` stream.
pub fn ack_frame(cumulative: u64) -> [u8; ACK_FRAME_LEN] {
    let mut f = [0u8; ACK_FRAME_LEN];
    f[..8].copy_from_slice(&ACK_HEADER_START);
    f[8..12].copy_from_slice(&STREAM_STREAM_ID.to_be_bytes());
    f[12..16].copy_from_slice(&8u32.to_be_bytes());
    f[16..].copy_from_slice(&cumulative.to_be_bytes());
    f
}

impl Cutter {
    /// Frames started so far.
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }

    /// Acks written so far.
    pub(crate) fn acks(&self) -> u64 {
        self.acks
    }

    /// Takes the bytes of one receive; writes every answer that fits into
    /// `out`.
    pub(crate) fn feed<S: Sink>(&mut self, input: &[u8], out: &mut S) -> Result<Fed, Malformed> {
        let mut pos = 0;
        loop {
            match self.phase {
                Phase::Prefix => {
                    let avail = &input[pos..];
                    if self.carry_len == 0 && avail.len() >= PREFIX_LEN {
                        // The common case: the whole prefix in this read.
                        let len = check_header(avail)?;
                        pos += self.start_frame(&avail[..PREFIX_LEN], len, false)?;
                        continue;
                    }
                    if avail.is_empty() {
                        return Ok(Fed::Done);
                    }
                    let had = usize::from(self.carry_len);
                    let take = (PREFIX_LEN - had).min(avail.len());
                    self.carry[had..had + take].copy_from_slice(&avail[..take]);
                    let now = had + take;
                    self.carry_len = now as u8;
                    pos += take;
                    // A bad header closes the connection as soon as its 16
                    // bytes are in, not after 34.
                    if had < HEADER_LEN && now >= HEADER_LEN {
                        self.body_len = check_header(&self.carry)?;
                    }
                    if now == PREFIX_LEN {
                        let prefix = self.carry;
                        self.start_frame(&prefix, self.body_len, true)?;
                    }
                }
                Phase::Echo {
                    from_carry,
                    remaining,
                } => {
                    if from_carry < self.carry_len {
                        let (start, end) = (usize::from(from_carry), usize::from(self.carry_len));
                        let n = (end - start).min(out.room());
                        if n == 0 {
                            return Ok(Fed::Stalled(pos));
                        }
                        out.put(&self.carry[start..start + n]);
                        let from_carry = if start + n == end {
                            self.carry_len = 0;
                            0
                        } else {
                            (start + n) as u8
                        };
                        self.phase = Phase::Echo {
                            from_carry,
                            remaining,
                        };
                        continue;
                    }
                    if remaining == 0 {
                        self.phase = Phase::Prefix;
                        continue;
                    }
                    let avail = input.len() - pos;
                    if avail == 0 {
                        return Ok(Fed::Done);
                    }
                    let n = (remaining as usize).min(avail).min(out.room());
                    if n == 0 {
                        return Ok(Fed::Stalled(pos));
                    }
                    out.put(&input[pos..pos + n]);
                    pos += n;
                    self.phase = Phase::Echo {
                        from_carry: 0,
                        remaining: remaining - n as u32,
                    };
                }
                Phase::Skip { remaining, ack } => {
                    let n = (remaining as usize).min(input.len() - pos);
                    pos += n;
                    let remaining = remaining - n as u32;
                    if remaining > 0 {
                        self.phase = Phase::Skip { remaining, ack };
                        return Ok(Fed::Done);
                    }
                    if ack {
                        if out.room() < ACK_FRAME_LEN {
                            self.phase = Phase::Skip { remaining, ack };
                            return Ok(Fed::Stalled(pos));
                        }
                        out.put(&ack_frame(self.cumulative));
                        self.acks += 1;
                    }
                    self.phase = Phase::Prefix;
                }
            }
        }
    }

    /// Starts the frame whose 34-byte `prefix` (header already checked,
    /// body `len`) was read; returns how many input bytes the prefix
    /// consumes (0 for an echo of bytes still in the input, which the echo
    /// copies itself).
    fn start_frame(&mut self, prefix: &[u8], len: u32, carried: bool) -> Result<usize, Malformed> {
        // Flags 0 (no agreement id) and no relations: then the codec's
        // re-encoding of the frame is these very bytes.
        if prefix[HEADER_LEN] != 0 || prefix[PREFIX_LEN - 1] != 0 {
            return Err(Malformed::Fields);
        }
        self.frames += 1;
        let payload = len - DATA_FIELDS_LEN as u32;
        if prefix[11] == PINGPONG_STREAM_ID as u8 {
            if carried {
                // The prefix is in the carry: echo it, then the payload.
                self.phase = Phase::Echo {
                    from_carry: 0,
                    remaining: payload,
                };
                return Ok(0);
            }
            self.phase = Phase::Echo {
                from_carry: 0,
                remaining: len + HEADER_LEN as u32,
            };
            return Ok(0);
        }
        let fragment_id = be64(&prefix[HEADER_LEN + 1..]);
        let sequence = be64(&prefix[HEADER_LEN + 9..]);
        if sequence != self.cumulative.wrapping_add(1) {
            return Err(Malformed::Sequence);
        }
        self.cumulative = sequence;
        self.unacked += 1;
        let ack = self.unacked >= ACK_EVERY || fragment_id == FLUSH_FRAGMENT_ID;
        if ack {
            self.unacked = 0;
        }
        self.carry_len = 0;
        self.phase = Phase::Skip {
            remaining: payload,
            ack,
        };
        Ok(if carried { 0 } else { PREFIX_LEN })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink of a fixed capacity, drained by the test.
    struct VecSink {
        buf: Vec<u8>,
        cap: usize,
    }

    impl Sink for VecSink {
        fn room(&mut self) -> usize {
            self.cap - self.buf.len()
        }
        fn put(&mut self, bytes: &[u8]) {
            assert!(bytes.len() <= self.cap - self.buf.len());
            self.buf.extend_from_slice(bytes);
        }
    }

    fn data_frame(stream: u32, fragment_id: u64, sequence: u64, payload: &[u8]) -> Vec<u8> {
        let mut f = DATA_HEADER_START.to_vec();
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(&((DATA_FIELDS_LEN + payload.len()) as u32).to_be_bytes());
        f.push(0);
        f.extend_from_slice(&fragment_id.to_be_bytes());
        f.extend_from_slice(&sequence.to_be_bytes());
        f.push(0);
        f.extend_from_slice(payload);
        f
    }

    /// Feeds `wire` in pieces of `piece` bytes through a sink of `cap`
    /// bytes that is emptied whenever the cutter stalls; returns the output.
    fn run(wire: &[u8], piece: usize, cap: usize) -> Result<Vec<u8>, Malformed> {
        let mut c = Cutter::default();
        let mut sink = VecSink {
            buf: Vec::new(),
            cap,
        };
        let mut all = Vec::new();
        for chunk in wire.chunks(piece) {
            let mut rest = chunk;
            loop {
                match c.feed(rest, &mut sink)? {
                    Fed::Done => break,
                    Fed::Stalled(n) => {
                        rest = &rest[n..];
                        all.append(&mut sink.buf);
                    }
                }
            }
        }
        all.append(&mut sink.buf);
        Ok(all)
    }

    #[test]
    fn pingpong_is_echoed_byte_for_byte_whatever_the_read_sizes() {
        let payload = [7u8; 66];
        let wire: Vec<u8> = (1..=20)
            .flat_map(|s| data_frame(PINGPONG_STREAM_ID, s, s, &payload))
            .collect();
        assert_eq!(wire.len(), 20 * 100);
        for piece in [1, 2, 15, 16, 17, 33, 34, 35, 99, 100, 101, 777, wire.len()] {
            for cap in [1, 24, 100, 4096] {
                assert_eq!(
                    run(&wire, piece, cap).unwrap(),
                    wire,
                    "reads of {piece}, room {cap}"
                );
            }
        }
    }

    #[test]
    fn stream_is_acked_every_64_and_on_flush_whatever_the_read_sizes() {
        let payload = vec![1u8; 1000];
        let wire: Vec<u8> = (1..=150)
            .flat_map(|s| {
                let fid = if s == 150 { FLUSH_FRAGMENT_ID } else { s };
                data_frame(STREAM_STREAM_ID, fid, s, &payload)
            })
            .collect();
        let expected: Vec<u8> = [64, 128, 150].iter().flat_map(|&c| ack_frame(c)).collect();
        for piece in [1, 16, 34, 35, 1033, 4096, wire.len()] {
            for cap in [24, 48, 4096] {
                assert_eq!(
                    run(&wire, piece, cap).unwrap(),
                    expected,
                    "reads of {piece}, room {cap}"
                );
            }
        }
    }

    #[test]
    fn an_ack_waits_for_room_and_for_its_whole_frame() {
        let mut c = Cutter::default();
        let frame = data_frame(STREAM_STREAM_ID, FLUSH_FRAGMENT_ID, 1, &[0; 10]);
        let mut sink = VecSink {
            buf: Vec::new(),
            cap: 10,
        };
        // The prefix alone: no ack before the payload arrived.
        assert_eq!(c.feed(&frame[..PREFIX_LEN], &mut sink), Ok(Fed::Done));
        assert!(sink.buf.is_empty());
        // The payload, but no room: stalled with everything taken.
        assert_eq!(
            c.feed(&frame[PREFIX_LEN..], &mut sink),
            Ok(Fed::Stalled(10))
        );
        sink.cap = 100;
        assert_eq!(c.feed(&[], &mut sink), Ok(Fed::Done));
        assert_eq!(sink.buf, ack_frame(1));
        assert_eq!((c.frames(), c.acks()), (1, 1));
    }

    #[test]
    fn malformed_input_is_refused_from_its_header() {
        let mut sink = VecSink {
            buf: Vec::new(),
            cap: 4096,
        };
        // 16 bytes of HTTP are enough to refuse.
        let mut c = Cutter::default();
        assert_eq!(
            c.feed(b"GET / HTTP/1.1\r\n", &mut sink),
            Err(Malformed::Header)
        );
        let ok = data_frame(PINGPONG_STREAM_ID, 1, 1, b"x");
        let mut other_stream = ok.clone();
        other_stream[11] = 9;
        let mut bad_len = ok.clone();
        bad_len[15] = 3;
        let mut with_agreement = ok.clone();
        with_agreement[16] = 1;
        let mut ack = ok.clone();
        ack[3] = 4;
        for (bytes, why) in [
            (other_stream, Malformed::Stream),
            (bad_len, Malformed::Length),
            (with_agreement, Malformed::Fields),
            (ack, Malformed::Header),
        ] {
            assert_eq!(Cutter::default().feed(&bytes, &mut sink), Err(why));
            // Split before the header ends: refused when it completes.
            let mut c = Cutter::default();
            assert_eq!(c.feed(&bytes[..10], &mut sink), Ok(Fed::Done));
            let at = if why == Malformed::Fields {
                PREFIX_LEN
            } else {
                HEADER_LEN
            };
            assert_eq!(c.feed(&bytes[10..at], &mut sink), Err(why));
        }
        // A gap in the stream sequence.
        let gap: Vec<u8> = [1, 3]
            .iter()
            .flat_map(|&s| data_frame(STREAM_STREAM_ID, s, s, b"y"))
            .collect();
        assert_eq!(run(&gap, gap.len(), 4096), Err(Malformed::Sequence));
        assert!(sink.buf.is_empty(), "nothing answered");
    }

    #[test]
    fn the_ack_frame_layout() {
        let f = ack_frame(0x0102_0304_0506_0708);
        assert_eq!(&f[..4], &[0xD7, 0x50, 1, 4]);
        assert_eq!(
            u32::from_be_bytes([f[8], f[9], f[10], f[11]]),
            STREAM_STREAM_ID
        );
        assert_eq!(u32::from_be_bytes([f[12], f[13], f[14], f[15]]), 8);
        assert_eq!(&f[16..], &[1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
