//! The application protocol every server in `dtp bench` speaks, ours and the
//! peer, over the DTP codec, unencrypted.
//!
//! This module owns the rules of the three workloads and nothing else: frame
//! builders for the client, the [`Responder`] that is *the* server logic of
//! every server in the benchmark (sans-IO: decoded frames in, frames to send
//! out), and [`StreamWindow`], the client's bookkeeping for `stream`. It never
//! touches a socket, a clock or a thread, so the engine and the tokio peer run
//! literally the same code per frame and a CPU-per-operation ratio compares
//! their IO paths, not two implementations of the protocol.
//!
//! # The protocol
//!
//! The frame's `stream_id` selects the behaviour, so one server serves every
//! workload at once and needs no configuration:
//!
//! - **`pingpong`** ([`PINGPONG_STREAM_ID`]): the client sends a data frame of
//!   exactly [`PINGPONG_FRAME_LEN`] = 100 bytes on the wire (16-byte header,
//!   18 bytes of data fields — flags, fragment id, sequence, relation count —
//!   and a [`PINGPONG_PAYLOAD_LEN`] = 66-byte payload; the agreement id is
//!   omitted, inherited per SEQ-4). The server decodes it and answers with a
//!   *new* data frame on the same stream carrying the same `fragment_id`,
//!   `sequence` and payload, encoded through the codec. Every round trip is
//!   therefore one real decode and one real encode on the server.
//! - **`stream`** ([`STREAM_STREAM_ID`]): the client sends data frames with
//!   [`STREAM_PAYLOAD_LEN`] = 16 KiB payloads and sequences 1, 2, 3, … with no
//!   gap (TCP is reliable, so a gap is a client bug and closes the
//!   connection). The server sends one `Ack { cumulative }` on the same stream
//!   **after the [`ACK_EVERY`]-th (64th) data frame since its last ack**, and
//!   **immediately after a frame whose `fragment_id` is
//!   [`FLUSH_FRAGMENT_ID`]** (the client marks the last frame of a burst so).
//!   Other frames carry `fragment_id == sequence`. The rule depends only on
//!   the frames, never on how the bytes were split into reads, so both
//!   servers send exactly the same acks for the same input: an "ack when the
//!   read buffer drains" rule would make the ack count (and the CPU it costs)
//!   depend on the engine's read sizes. A client whose window is a multiple of
//!   64 frames ([`StreamWindow`]) can therefore never stall.
//! - **`idle`** (the issue's `connections` workload): the client connects,
//!   does one `pingpong` round trip and stays idle.
//!
//! Any other frame (another kind, another stream) is a protocol error: the
//! server closes the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use dtp_codec::{
    AckFrame, Body, DecodeError, EncodeError, FrameDecoder, HEADER_LEN, Limits, LogicalFrame,
};

/// The stream id of `pingpong` (and `idle`) frames.
pub const PINGPONG_STREAM_ID: u32 = 1;
/// The stream id of `stream` frames and their acks.
pub const STREAM_STREAM_ID: u32 = 2;

/// The data fields of a data frame without agreement id or relations: flags
/// (1), fragment id (8), sequence (8), relation count (1).
pub const DATA_FIELDS_LEN: usize = 18;
/// Payload bytes of a `pingpong` request (and of its answer).
pub const PINGPONG_PAYLOAD_LEN: usize = 66;
/// Bytes on the wire of a `pingpong` request (and of its answer).
pub const PINGPONG_FRAME_LEN: usize = HEADER_LEN + DATA_FIELDS_LEN + PINGPONG_PAYLOAD_LEN;
/// Payload bytes of a `stream` frame.
pub const STREAM_PAYLOAD_LEN: usize = 16 * 1024;
/// Bytes on the wire of a `stream` frame.
pub const STREAM_FRAME_LEN: usize = HEADER_LEN + DATA_FIELDS_LEN + STREAM_PAYLOAD_LEN;
/// Bytes on the wire of an ack frame (header + the u64 cumulative).
pub const ACK_FRAME_LEN: usize = HEADER_LEN + 8;
/// The server acks after this many `stream` frames since its last ack.
pub const ACK_EVERY: u64 = 64;
/// The `fragment_id` that marks the last frame of a `stream` burst: the
/// server acks right after it, whatever its count.
pub const FLUSH_FRAGMENT_ID: u64 = u64::MAX;

/// The 66 payload bytes of every `pingpong` request: printable, so a capture
/// is easy to read.
const PINGPONG_PAYLOAD: &[u8; PINGPONG_PAYLOAD_LEN] =
    b"dtp-bench pingpong: 66 bytes of payload, echoed by the server ....";

/// The three workloads of `dtp bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Request/response of 100-byte frames over many connections.
    Pingpong,
    /// One-way streaming of 16 KiB frames, acked every 64.
    Stream,
    /// Many connections, each doing one round trip and then staying idle.
    Idle,
}

impl Workload {
    /// Every workload, in the order `dtp bench` runs them.
    pub const ALL: [Workload; 3] = [Workload::Pingpong, Workload::Stream, Workload::Idle];

    /// The workload's name in the report (issue 3 calls the idle workload
    /// `connections`).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Pingpong => "pingpong",
            Workload::Stream => "stream",
            Workload::Idle => "connections",
        }
    }

    /// The workload for a report name (`idle` is accepted for `connections`).
    pub fn from_name(name: &str) -> Option<Workload> {
        match name {
            "pingpong" => Some(Workload::Pingpong),
            "stream" => Some(Workload::Stream),
            "connections" | "idle" => Some(Workload::Idle),
            _ => None,
        }
    }

    /// Payload bytes one operation carries from the client (what the report's
    /// `bytes_per_s` counts): one request, one acked stream frame, or the one
    /// round trip of an idle connection.
    pub fn payload_per_op(self) -> usize {
        match self {
            Workload::Pingpong | Workload::Idle => PINGPONG_PAYLOAD_LEN,
            Workload::Stream => STREAM_PAYLOAD_LEN,
        }
    }
}

/// A frame or a sequence that breaks the workload protocol.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A frame this workload has no use for.
    #[error("unexpected {kind} frame on stream {stream_id}")]
    Unexpected {
        /// The frame kind's name.
        kind: &'static str,
        /// The stream it came on.
        stream_id: u32,
    },
    /// A `stream` frame out of order (TCP does not reorder: a client bug).
    #[error("stream frame with sequence {got} where {expected} was due")]
    OutOfOrder {
        /// The sequence due.
        expected: u64,
        /// The sequence received.
        got: u64,
    },
    /// A `pingpong` answer that does not match its request.
    #[error("pingpong answer does not match its request: {0}")]
    BadAnswer(&'static str),
    /// An ack below the last one or above what was sent.
    #[error("ack {cumulative} outside [{acked}, {sent}]")]
    BadAck {
        /// The ack's cumulative sequence.
        cumulative: u64,
        /// The highest ack before it.
        acked: u64,
        /// The highest sequence sent.
        sent: u64,
    },
    /// A `stream` window that could stall (not a positive multiple of 64).
    #[error("a stream window of {0} frames is not a positive multiple of {ACK_EVERY}")]
    BadWindow(u64),
    /// The bytes are not a frame.
    #[error("undecodable input: {0}")]
    Decode(#[from] DecodeError),
    /// A reply could not be encoded (the output buffer is too small).
    #[error("cannot encode a reply: {0}")]
    Encode(#[from] EncodeError),
}

// ---------------------------------------------------------------------------
// Server side.

/// The server logic of every server in the benchmark, for one connection.
///
/// Sans-IO: [`Responder::handle`] takes one decoded frame and returns the
/// frame to send, if any; [`Responder::serve`] does a whole read batch (decode
/// every complete frame of the read buffer, encode every reply into the write
/// buffer), which is what a server calls after each read.
#[derive(Debug, Default)]
pub struct Responder {
    decoder: FrameDecoder,
    limits: Limits,
    /// Highest `stream` sequence received (all below it arrived).
    cumulative: u64,
    /// `stream` frames received since the last ack.
    unacked: u64,
    /// Every frame handled.
    frames: u64,
    /// Acks sent.
    acks: u64,
}

impl Responder {
    /// A responder that decodes and encodes within `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            decoder: FrameDecoder::new(limits),
            limits,
            ..Self::default()
        }
    }

    /// Frames handled so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The highest `stream` sequence received so far (0: none).
    pub fn cumulative(&self) -> u64 {
        self.cumulative
    }

    /// Acks sent so far.
    pub fn acks(&self) -> u64 {
        self.acks
    }

    /// Handles one decoded frame; returns the frame to send back, if any.
    pub fn handle(&mut self, frame: LogicalFrame) -> Result<Option<LogicalFrame>, WorkloadError> {
        let LogicalFrame { stream_id, body } = frame;
        let data = match (stream_id, body) {
            (PINGPONG_STREAM_ID | STREAM_STREAM_ID, Body::Data(d)) => d,
            (stream_id, body) => {
                return Err(WorkloadError::Unexpected {
                    kind: body.kind().name(),
                    stream_id,
                });
            }
        };
        self.frames += 1;
        if stream_id == PINGPONG_STREAM_ID {
            // A fresh frame from the request's fields: what goes out is
            // encoded from a LogicalFrame, never the received bytes.
            return Ok(Some(LogicalFrame::plain(
                PINGPONG_STREAM_ID,
                Body::Data(dtp_codec::DataFrame {
                    agreement_id: None,
                    fragment_id: data.fragment_id,
                    sequence: data.sequence,
                    relations: Vec::new(),
                    payload: data.payload,
                }),
            )));
        }
        let expected = self.cumulative + 1;
        if data.sequence != expected {
            return Err(WorkloadError::OutOfOrder {
                expected,
                got: data.sequence,
            });
        }
        self.cumulative = expected;
        self.unacked += 1;
        if self.unacked < ACK_EVERY && data.fragment_id != FLUSH_FRAGMENT_ID {
            return Ok(None);
        }
        self.unacked = 0;
        self.acks += 1;
        Ok(Some(ack(self.cumulative)))
    }

    /// One read batch: takes every complete frame off the front of `input`
    /// (a partial frame stays for the next read), handles it and encodes its
    /// reply into `output`. Returns the number of frames handled.
    ///
    /// On error the connection is broken and should be closed; replies to the
    /// frames before the bad one are in `output`.
    pub fn serve<B: BufMut>(
        &mut self,
        input: &mut BytesMut,
        output: &mut B,
    ) -> Result<u64, WorkloadError> {
        let mut handled = 0;
        while let Some(frame) = self.decoder.decode(input)? {
            handled += 1;
            if let Some(reply) = self.handle(frame)? {
                reply.encode(output, &self.limits)?;
            }
        }
        Ok(handled)
    }
}

fn ack(cumulative: u64) -> LogicalFrame {
    LogicalFrame::plain(STREAM_STREAM_ID, Body::Ack(AckFrame { cumulative }))
}

// ---------------------------------------------------------------------------
// Client side.

/// The payload of every `pingpong` request (a static slice: no allocation).
pub fn pingpong_payload() -> Bytes {
    Bytes::from_static(PINGPONG_PAYLOAD)
}

/// The `pingpong` request with this sequence (`fragment_id == sequence`).
pub fn pingpong_request(sequence: u64) -> LogicalFrame {
    data_frame(PINGPONG_STREAM_ID, sequence, sequence, pingpong_payload())
}

/// Appends the encoded `pingpong` request with this sequence to `dst`
/// ([`PINGPONG_FRAME_LEN`] bytes).
pub fn encode_pingpong_request(sequence: u64, dst: &mut BytesMut) -> Result<(), WorkloadError> {
    pingpong_request(sequence).encode(dst, &Limits::default())?;
    Ok(())
}

/// Checks that `answer` is the server's answer to the `pingpong` request
/// with this sequence.
pub fn check_pingpong_answer(sequence: u64, answer: &LogicalFrame) -> Result<(), WorkloadError> {
    let Body::Data(d) = &answer.body else {
        return Err(WorkloadError::BadAnswer("not a data frame"));
    };
    if answer.stream_id != PINGPONG_STREAM_ID {
        return Err(WorkloadError::BadAnswer("wrong stream"));
    }
    if d.sequence != sequence || d.fragment_id != sequence {
        return Err(WorkloadError::BadAnswer("wrong sequence or fragment id"));
    }
    if d.payload.chunk() != PINGPONG_PAYLOAD {
        return Err(WorkloadError::BadAnswer("wrong payload"));
    }
    Ok(())
}

/// A `stream` payload: [`STREAM_PAYLOAD_LEN`] bytes of a fixed pattern.
/// Allocate it once and pass it to every [`stream_frame`] (cloning a `Bytes`
/// is a reference count).
pub fn stream_payload() -> Bytes {
    (0..STREAM_PAYLOAD_LEN).map(|i| (i % 251) as u8).collect()
}

/// The `stream` frame with this sequence; `flush` marks the last frame of a
/// burst, which the server acks at once.
pub fn stream_frame(sequence: u64, payload: &Bytes, flush: bool) -> LogicalFrame {
    let fragment_id = if flush { FLUSH_FRAGMENT_ID } else { sequence };
    data_frame(STREAM_STREAM_ID, fragment_id, sequence, payload.clone())
}

/// The cumulative sequence of a `stream` ack.
pub fn parse_ack(frame: &LogicalFrame) -> Result<u64, WorkloadError> {
    match (frame.stream_id, &frame.body) {
        (STREAM_STREAM_ID, Body::Ack(a)) => Ok(a.cumulative),
        (stream_id, body) => Err(WorkloadError::Unexpected {
            kind: body.kind().name(),
            stream_id,
        }),
    }
}

fn data_frame(stream_id: u32, fragment_id: u64, sequence: u64, payload: Bytes) -> LogicalFrame {
    LogicalFrame::plain(
        stream_id,
        Body::Data(dtp_codec::DataFrame {
            agreement_id: None,
            fragment_id,
            sequence,
            relations: Vec::new(),
            payload,
        }),
    )
}

/// The `stream` client's bookkeeping: which sequence to send next, how many
/// frames are in flight, what the server acked.
///
/// The window is a multiple of [`ACK_EVERY`] frames, so the frame that fills
/// it is always one the server acks: the client never waits for an ack that
/// will not come.
#[derive(Clone, Debug)]
pub struct StreamWindow {
    window: u64,
    sent: u64,
    acked: u64,
}

impl StreamWindow {
    /// A window of `frames` frames in flight (a positive multiple of 64).
    pub fn new(frames: u64) -> Result<Self, WorkloadError> {
        if frames == 0 || !frames.is_multiple_of(ACK_EVERY) {
            return Err(WorkloadError::BadWindow(frames));
        }
        Ok(Self {
            window: frames,
            sent: 0,
            acked: 0,
        })
    }

    /// The next sequence to send, if the window has room; counts it as sent.
    pub fn next_sequence(&mut self) -> Option<u64> {
        if self.in_flight() >= self.window {
            return None;
        }
        self.sent += 1;
        Some(self.sent)
    }

    /// Frames sent and not yet acked.
    pub fn in_flight(&self) -> u64 {
        self.sent - self.acked
    }

    /// The highest sequence sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The highest sequence acked.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// Takes an ack's cumulative sequence; returns how many frames it newly
    /// acks.
    pub fn on_ack(&mut self, cumulative: u64) -> Result<u64, WorkloadError> {
        if cumulative < self.acked || cumulative > self.sent {
            return Err(WorkloadError::BadAck {
                cumulative,
                acked: self.acked,
                sent: self.sent,
            });
        }
        let newly = cumulative - self.acked;
        self.acked = cumulative;
        Ok(newly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_all(frames: &[LogicalFrame]) -> BytesMut {
        let mut buf = BytesMut::new();
        for f in frames {
            f.encode(&mut buf, &Limits::default()).unwrap();
        }
        buf
    }

    fn decode_all(mut buf: BytesMut) -> Vec<LogicalFrame> {
        let d = FrameDecoder::default();
        let mut out = Vec::new();
        while let Some(f) = d.decode(&mut buf).unwrap() {
            out.push(f);
        }
        assert!(buf.is_empty(), "trailing bytes");
        out
    }

    #[test]
    fn pingpong_request_is_100_bytes_on_the_wire() {
        let mut buf = BytesMut::new();
        encode_pingpong_request(7, &mut buf).unwrap();
        assert_eq!(buf.len(), PINGPONG_FRAME_LEN);
        assert_eq!(PINGPONG_FRAME_LEN, 100);
        let stream = stream_frame(1, &stream_payload(), false);
        assert_eq!(
            stream.encoded_len(&Limits::default()).unwrap(),
            STREAM_FRAME_LEN
        );
        assert_eq!(
            ack(9).encoded_len(&Limits::default()).unwrap(),
            ACK_FRAME_LEN
        );
    }

    #[test]
    fn responder_answers_pingpong_with_same_fields() {
        let mut r = Responder::new(Limits::default());
        let mut input = encode_all(&[pingpong_request(1), pingpong_request(2)]);
        let mut output = BytesMut::new();
        assert_eq!(r.serve(&mut input, &mut output).unwrap(), 2);
        assert!(input.is_empty());
        assert_eq!(output.len(), 2 * PINGPONG_FRAME_LEN);
        let answers = decode_all(output);
        for (i, a) in answers.iter().enumerate() {
            check_pingpong_answer(i as u64 + 1, a).unwrap();
        }
        // The answer is the request's frame, field for field.
        assert_eq!(answers[0], pingpong_request(1));
        assert_eq!(r.frames(), 2);
        assert_eq!(r.acks(), 0);
    }

    #[test]
    fn responder_keeps_a_partial_frame_for_the_next_read() {
        let mut r = Responder::new(Limits::default());
        let whole = encode_all(&[pingpong_request(1), pingpong_request(2)]);
        let mut input = BytesMut::from(&whole[..150]);
        let mut output = BytesMut::new();
        assert_eq!(r.serve(&mut input, &mut output).unwrap(), 1);
        assert_eq!(input.len(), 50);
        input.extend_from_slice(&whole[150..]);
        assert_eq!(r.serve(&mut input, &mut output).unwrap(), 1);
        assert_eq!(decode_all(output).len(), 2);
    }

    #[test]
    fn responder_acks_every_64_stream_frames_and_on_flush() {
        let payload = stream_payload();
        let mut r = Responder::new(Limits::default());
        let mut acks = Vec::new();
        // 150 frames, the last marked flush: acks at 64, 128 and 150.
        for seq in 1..=150 {
            let reply = r.handle(stream_frame(seq, &payload, seq == 150)).unwrap();
            if let Some(f) = reply {
                acks.push(parse_ack(&f).unwrap());
            }
        }
        assert_eq!(acks, vec![64, 128, 150]);
        // The count restarts after a flush: the next ack is 64 frames later.
        for seq in 151..=214 {
            let reply = r.handle(stream_frame(seq, &payload, false)).unwrap();
            assert_eq!(reply.is_some(), seq == 214, "seq {seq}");
        }
        assert_eq!(r.cumulative(), 214);
        assert_eq!(r.acks(), 4);
    }

    #[test]
    fn responder_acks_do_not_depend_on_read_sizes() {
        let payload = stream_payload();
        let frames: Vec<_> = (1..=130)
            .map(|s| stream_frame(s, &payload, s == 130))
            .collect();
        let wire = encode_all(&frames);
        for chunk in [1000, STREAM_FRAME_LEN, 3 * STREAM_FRAME_LEN + 7, wire.len()] {
            let mut r = Responder::new(Limits::default());
            let mut input = BytesMut::new();
            let mut output = BytesMut::new();
            for piece in wire.chunks(chunk) {
                input.extend_from_slice(piece);
                r.serve(&mut input, &mut output).unwrap();
            }
            let acks: Vec<u64> = decode_all(output)
                .iter()
                .map(|f| parse_ack(f).unwrap())
                .collect();
            assert_eq!(acks, vec![64, 128, 130], "reads of {chunk} bytes");
        }
    }

    #[test]
    fn responder_refuses_gaps_and_foreign_frames() {
        let payload = stream_payload();
        let mut r = Responder::new(Limits::default());
        r.handle(stream_frame(1, &payload, false)).unwrap();
        let err = r.handle(stream_frame(3, &payload, false)).unwrap_err();
        assert!(matches!(
            err,
            WorkloadError::OutOfOrder {
                expected: 2,
                got: 3
            }
        ));
        let err = Responder::default().handle(ack(1)).unwrap_err();
        assert!(matches!(err, WorkloadError::Unexpected { kind: "ack", .. }));
        let mut other = pingpong_request(1);
        other.stream_id = 9;
        assert!(Responder::default().handle(other).is_err());
        let mut garbage = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        let err = Responder::default()
            .serve(&mut garbage, &mut BytesMut::new())
            .unwrap_err();
        assert!(matches!(err, WorkloadError::Decode(_)));
    }

    #[test]
    fn check_pingpong_answer_catches_mismatches() {
        assert!(check_pingpong_answer(2, &pingpong_request(1)).is_err());
        assert!(check_pingpong_answer(1, &ack(1)).is_err());
        let other = data_frame(PINGPONG_STREAM_ID, 1, 1, Bytes::from_static(b"x"));
        assert!(check_pingpong_answer(1, &other).is_err());
    }

    #[test]
    fn stream_window_never_waits_for_an_ack_that_will_not_come() {
        assert!(StreamWindow::new(0).is_err());
        assert!(StreamWindow::new(100).is_err());
        let payload = stream_payload();
        let mut w = StreamWindow::new(128).unwrap();
        let mut server = Responder::default();
        let mut acked = 0;
        // Fill the window, then deliver it: the server must free room.
        for round in 0..10 {
            let mut burst = Vec::new();
            while let Some(seq) = w.next_sequence() {
                burst.push(seq);
            }
            assert_eq!(w.in_flight(), 128, "round {round}: window full");
            for seq in burst {
                if let Some(a) = server.handle(stream_frame(seq, &payload, false)).unwrap() {
                    acked += w.on_ack(parse_ack(&a).unwrap()).unwrap();
                }
            }
            assert_eq!(w.in_flight(), 0, "round {round}: all acked");
        }
        assert_eq!(w.acked(), acked);
        assert!(w.on_ack(w.acked() - 1).is_err());
        assert!(w.on_ack(w.sent() + 1).is_err());
    }

    #[test]
    fn workload_names() {
        for w in Workload::ALL {
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
        assert_eq!(Workload::from_name("idle"), Some(Workload::Idle));
        assert_eq!(Workload::Stream.payload_per_op(), 16384);
    }
}
