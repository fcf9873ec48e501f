//! The framing adapter ([`Framed`]) called directly, as a shard would call
//! it: whatever the reads' boundaries, every frame arrives whole, once, in
//! order, with its checked head; a frame inside one read is lent in place;
//! a full send queue holds the input back until the queue drains; garbage
//! is answered with a close frame carrying the codec's code.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use dtp_codec::{Body, DataFrame, ErrorCode, FrameDecoder, Limits, LogicalFrame};
use dtp_engine::{Frame, FrameService, Framed, FramedConn, Origin, Outbox, Service};
use dtp_transports::{ConnId, RecvBuf};

/// Records every frame's sequence and whether its head matched its bytes.
#[derive(Default)]
struct Recorder {
    seen: Vec<u64>,
    writable: usize,
}

impl FrameService for Recorder {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) {}

    fn frame(&mut self, _: &mut (), f: Frame, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        assert_eq!(f.head.total_len, f.wire.len(), "one whole frame");
        let frame = f.decode(out.limits()).map_err(|e| e.code())?;
        match frame.body {
            Body::Data(d) if d.sequence == 13 => Err(ErrorCode::INVALID_VALUE),
            Body::Data(d) => {
                self.seen.push(d.sequence);
                Ok(())
            }
            _ => Err(ErrorCode::UNKNOWN_KIND),
        }
    }

    fn writable(&mut self, _: &mut (), _: &mut Outbox<'_>) {
        self.writable += 1;
    }
}

fn data(seq: u64, len: usize) -> LogicalFrame {
    LogicalFrame::plain(
        1,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: seq,
            sequence: seq,
            relations: vec![],
            payload: Bytes::from(vec![seq as u8; len]),
        }),
    )
}

fn wire(frames: impl IntoIterator<Item = LogicalFrame>) -> Vec<u8> {
    let mut w = BytesMut::new();
    for f in frames {
        f.encode(&mut w, &Limits::default()).unwrap();
    }
    w.to_vec()
}

/// What one call to the adapter queued and asked for.
struct Answer {
    sent: BytesMut,
    closing: bool,
}

const BUDGET: usize = 1 << 20;

/// Feeds `bytes` to the adapter with `room` bytes of send budget left.
fn feed(
    framed: &mut Framed<Recorder>,
    conn: &mut FramedConn<()>,
    bytes: &[u8],
    room: usize,
) -> Answer {
    let limits = Limits::default();
    let mut sent = BytesMut::new();
    let mut out = Outbox::new(&mut sent, &limits, room, BUDGET, Instant::now());
    framed
        .bytes(conn, RecvBuf::from(BytesMut::from(bytes)), &mut out)
        .unwrap();
    let closing = out.closing();
    Answer { sent, closing }
}

fn open(framed: &mut Framed<Recorder>) -> FramedConn<()> {
    let limits = Limits::default();
    let mut sent = BytesMut::new();
    let mut out = Outbox::new(&mut sent, &limits, BUDGET, BUDGET, Instant::now());
    framed.open(ConnId::from_u64(1), Origin::Connected, &mut out)
}

#[test]
fn every_frame_arrives_whole_and_once_whatever_the_read_boundaries() {
    let frames: Vec<_> = (1..=12)
        .map(|s| data(s, (s as usize * 733) % 3000))
        .collect();
    let all = wire(frames);
    // Every split point of the input into two reads, and reads of 1, 7
    // and 1000 bytes.
    let mut cuts: Vec<Vec<usize>> = (0..=all.len()).map(|at| vec![at]).collect();
    for step in [1, 7, 1000] {
        cuts.push((step..all.len()).step_by(step).collect());
    }
    for cut in cuts {
        let mut framed = Framed::new(Recorder::default());
        let mut conn = open(&mut framed);
        let mut from = 0;
        for at in cut.into_iter().chain([all.len()]) {
            let a = feed(&mut framed, &mut conn, &all[from..at], BUDGET);
            assert!(!a.closing);
            from = at;
        }
        assert_eq!(framed.inner.seen, (1..=12).collect::<Vec<_>>());
    }
}

#[test]
fn a_full_send_queue_holds_the_input_back_until_it_drains() {
    let mut framed = Framed::new(Recorder::default());
    let mut conn = open(&mut framed);
    let all = wire((1..=5).map(|s| data(s, 100)));
    // Half the budget is queued already: nothing is served, nothing lost.
    feed(&mut framed, &mut conn, &all, BUDGET / 2);
    assert!(framed.inner.seen.is_empty());
    // Room again: the held frames are served, then the service hears of it.
    let limits = Limits::default();
    let mut sent = BytesMut::new();
    let mut out = Outbox::new(&mut sent, &limits, BUDGET, BUDGET, Instant::now());
    framed.writable(&mut conn, &mut out);
    assert_eq!(framed.inner.seen, vec![1, 2, 3, 4, 5]);
    assert_eq!(framed.inner.writable, 1);
    // New input goes on behind them.
    feed(&mut framed, &mut conn, &wire([data(6, 10)]), BUDGET);
    assert_eq!(framed.inner.seen, vec![1, 2, 3, 4, 5, 6]);
}

fn close_code(sent: &BytesMut) -> ErrorCode {
    let mut rx = sent.clone();
    match FrameDecoder::new(Limits::default())
        .decode(&mut rx)
        .unwrap()
    {
        Some(LogicalFrame {
            body: Body::Close(c),
            ..
        }) => c.code,
        other => panic!("no close frame: {other:?}"),
    }
}

#[test]
fn garbage_and_refused_frames_are_answered_with_a_close_frame() {
    let mut framed = Framed::new(Recorder::default());
    let mut conn = open(&mut framed);
    let a = feed(&mut framed, &mut conn, b"GET / HTTP/1.1\r\n\r\n", BUDGET);
    assert!(a.closing);
    assert_eq!(close_code(&a.sent), ErrorCode::BAD_MAGIC);

    // A frame the service refuses ends the connection: later frames of the
    // same read are not served.
    let mut framed = Framed::new(Recorder::default());
    let mut conn = open(&mut framed);
    let a = feed(
        &mut framed,
        &mut conn,
        &wire([12, 13, 14].map(|s| data(s, 5))),
        BUDGET,
    );
    assert!(a.closing);
    assert_eq!(close_code(&a.sent), ErrorCode::INVALID_VALUE);
    assert_eq!(framed.inner.seen, vec![12]);
}
