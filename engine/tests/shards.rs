//! The engine end to end over real sockets, on both IO backends, with
//! framed services ([`Framed`]): frames in, frames out, malformed input
//! answered with a close frame, backpressure, a graceful stop.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use dtp_codec::{AckFrame, Body, DataFrame, ErrorCode, Limits, LogicalFrame};
use dtp_engine::{Engine, EngineConfig, Frame, FrameService, Framed, Origin, Outbox};
use dtp_test_kit::read_frames;
use dtp_transports::{BackendPreference, ConnId, DriverConfig};

/// Echoes data frames; counts frames per connection.
struct Echo;

impl FrameService for Echo {
    type Conn = u64;
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) -> u64 {
        0
    }

    fn frame(&mut self, n: &mut u64, frame: Frame, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        let frame = frame.decode(out.limits()).map_err(|e| e.code())?;
        *n += 1;
        match frame.body {
            Body::Data(_) => out.send(&frame),
            Body::Ack(_) => out.send(&LogicalFrame::plain(
                0,
                Body::Ack(AckFrame { cumulative: *n }),
            )),
            _ => Err(ErrorCode::UNKNOWN_KIND),
        }
    }
}

fn config(backend: BackendPreference, shards: usize) -> EngineConfig {
    EngineConfig {
        shards,
        pin: false,
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        driver: DriverConfig {
            backend,
            chunk_size: 16 * 1024,
            recv_buffers: 32,
            send_chunks: 128,
            ..DriverConfig::default()
        },
        limits: Limits {
            max_frame_len: 64 * 1024,
            ..Limits::default()
        },
        drain: Duration::from_secs(2),
        control_ring: 64,
        quic: None,
    }
}

fn data(seq: u64, payload: &[u8]) -> LogicalFrame {
    LogicalFrame::plain(
        1,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: seq,
            sequence: seq,
            relations: vec![],
            payload: Bytes::copy_from_slice(payload),
        }),
    )
}

#[test]
fn frames_round_trip_through_every_shard_on_both_backends() {
    for backend in [BackendPreference::Epoll, BackendPreference::Uring] {
        let engine = Engine::start(config(backend, 2), |_| Framed::new(Echo)).unwrap();
        let addr = engine.tcp_addr(0).unwrap();
        // Several connections, so SO_REUSEPORT spreads them over both shards.
        let mut clients: Vec<TcpStream> =
            (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for (i, c) in clients.iter_mut().enumerate() {
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut wire = BytesMut::new();
            for seq in 0..200u64 {
                // Sizes from tiny to larger than a pool chunk.
                let payload = vec![(i as u8) ^ (seq as u8); (seq as usize * 97) % 40_000];
                data(seq, &payload)
                    .encode(&mut wire, &Limits::default())
                    .unwrap();
            }
            c.write_all(&wire).unwrap();
        }
        for (i, c) in clients.iter_mut().enumerate() {
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_frames(c, 200)));
            let Ok(frames) = r else {
                panic!("client {i}: {:#?}", engine.metrics())
            };
            for (seq, f) in frames.iter().enumerate() {
                let payload = vec![(i as u8) ^ (seq as u8); (seq * 97) % 40_000];
                assert_eq!(f, &data(seq as u64, &payload), "{backend:?}");
            }
        }
        let frames: u64 = engine.metrics().iter().map(|m| m.frames_in).sum();
        assert_eq!(frames, 8 * 200);
        engine.stop();
        engine.join().unwrap();
    }
}

#[test]
fn malformed_input_gets_a_close_frame_with_its_code() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let engine = Engine::start(config(backend, 1), |_| Framed::new(Echo)).unwrap();
        let mut c = TcpStream::connect(engine.tcp_addr(0).unwrap()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let frames = read_frames(&mut c, 1);
        match &frames[0].body {
            Body::Close(close) => assert_eq!(close.code, ErrorCode::BAD_MAGIC),
            other => panic!("{other:?}"),
        }
        // Then the connection ends.
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap_or(0), 0);
        assert_eq!(engine.metrics()[0].decode_errors, 1);
        engine.stop();
        engine.join().unwrap();
    }
}

#[test]
fn a_reader_that_stops_reading_pauses_the_connection_not_the_memory() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let cfg = config(backend, 1);
        let engine = Engine::start(cfg, |_| Framed::new(Echo)).unwrap();
        let mut c = TcpStream::connect(engine.tcp_addr(0).unwrap()).unwrap();
        c.set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        // Write echo requests without reading any answer: the server's send
        // queue fills, it pauses reading, and our writes eventually block.
        let mut wire = BytesMut::new();
        data(1, &[5u8; 60_000])
            .encode(&mut wire, &Limits::default())
            .unwrap();
        let mut written = 0usize;
        while written < 200 * 1024 * 1024 {
            match c.write_all(&wire) {
                Ok(()) => written += wire.len(),
                Err(_) => break, // the timeout: backpressure reached us
            }
        }
        assert!(
            written < 200 * 1024 * 1024,
            "{backend:?}: the server never pushed back"
        );
        let m = engine.metrics()[0];
        assert!(m.paused >= 1, "{backend:?}: {m:?}");
        // Bounded: the pool never held more than its send chunks and receive buffers.
        assert!(m.pool_bytes_high_water <= (32 + 256) * 16 * 1024, "{m:?}");
        engine.stop();
        engine.join().unwrap();
    }
}

#[test]
fn stop_closes_connections_and_returns() {
    let engine = Engine::start(config(BackendPreference::Uring, 2), |_| Framed::new(Echo)).unwrap();
    let mut c = TcpStream::connect(engine.tcp_addr(0).unwrap()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let wire = data(1, b"x").to_bytes(&Limits::default()).unwrap();
    c.write_all(&wire).unwrap();
    read_frames(&mut c, 1);
    engine.stop();
    engine.join().unwrap();
    let mut rest = Vec::new();
    assert_eq!(
        c.read_to_end(&mut rest).unwrap_or(0),
        0,
        "the connection was closed by the stop"
    );
}

/// Takes frames as wire bytes, flips every payload byte in place, and sends
/// the bytes back as they are; answers after a per-connection timer.
struct WireFlipper;

impl FrameService for WireFlipper {
    type Conn = Vec<u64>;
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) -> Vec<u64> {
        Vec::new()
    }

    fn frame(
        &mut self,
        seen: &mut Vec<u64>,
        frame: Frame,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        let Frame { head, mut wire } = frame;
        assert_eq!(
            head.total_len,
            wire.len(),
            "the head read once, of this frame"
        );
        if wire.is_lent() {
            LENT_FRAMES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let copy = Bytes::copy_from_slice(&wire);
        let (frame, used) = dtp_codec::decode_frame(&copy, out.limits()).unwrap();
        assert_eq!(used, wire.len(), "exactly one frame's bytes");
        let Body::Data(d) = frame.body else {
            return Err(ErrorCode::UNKNOWN_KIND);
        };
        seen.push(d.sequence);
        // The payload is the frame's tail: flip it where it lies.
        let n = wire.len();
        for b in &mut wire[n - d.payload.len()..] {
            *b = !*b;
        }
        out.wire().extend_from_slice(&wire);
        out.set_timer(Some(std::time::Instant::now() + Duration::from_millis(20)));
        Ok(())
    }

    fn timeout(&mut self, seen: &mut Vec<u64>, _: std::time::Instant, out: &mut Outbox<'_>) {
        // One ack with the count of frames seen, when the timer fires.
        out.send(&LogicalFrame::plain(
            0,
            Body::Ack(AckFrame {
                cumulative: seen.len() as u64,
            }),
        ))
        .unwrap();
    }
}

/// Frames [`WireFlipper`] got still in their receive chunk (SPEC ENC-2's
/// in-place path) rather than in an assembly buffer.
static LENT_FRAMES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A framed service takes frames as mutable wire bytes (to decrypt in place) and
/// queue already-encoded bytes, and gets per-connection timers — on both
/// backends, with frames split across reads, and with frames lying whole in
/// large reads modified where the kernel received them.
#[test]
fn wire_frames_and_per_connection_timers() {
    for (backend, piece) in [
        (BackendPreference::Uring, 777),
        (BackendPreference::Epoll, 777),
        (BackendPreference::Uring, usize::MAX),
        (BackendPreference::Epoll, usize::MAX),
    ] {
        let lent_before = LENT_FRAMES.load(std::sync::atomic::Ordering::Relaxed);
        let engine = Engine::start(config(backend, 1), |_| Framed::new(WireFlipper)).unwrap();
        let mut c = TcpStream::connect(engine.tcp_addr(0).unwrap()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut wire = BytesMut::new();
        for seq in 1..=50u64 {
            data(seq, &vec![seq as u8; (seq as usize * 331) % 5000])
                .encode(&mut wire, &Limits::default())
                .unwrap();
        }
        // In uneven pieces, so frames straddle reads; or all at once, so
        // most frames lie whole inside large reads.
        for piece in wire.chunks(piece) {
            c.write_all(piece).unwrap();
        }
        let got = read_frames(&mut c, 51);
        for (i, f) in got[..50].iter().enumerate() {
            let seq = i as u64 + 1;
            let flipped: Vec<u8> = vec![!(seq as u8); (seq as usize * 331) % 5000];
            assert_eq!(*f, data(seq, &flipped), "{backend:?}");
        }
        // The timer, re-armed by every frame, fired once after the last.
        assert_eq!(
            got[50].body,
            Body::Ack(AckFrame { cumulative: 50 }),
            "{backend:?}"
        );
        if piece == usize::MAX {
            let lent = LENT_FRAMES.load(std::sync::atomic::Ordering::Relaxed) - lent_before;
            assert!(lent > 0, "{backend:?}: no frame was served in place");
        }
        drop(c);
        engine.stop();
        engine.join().unwrap();
    }
}

/// Queues, on its first frame, one batch four times the connection's whole
/// send budget (as a protocol layer resending after a resume may).
struct Burst;

impl FrameService for Burst {
    type Conn = ();
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_>) {}

    fn frame(&mut self, _: &mut (), _: Frame, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        for seq in 1..=64u64 {
            data(seq, &vec![seq as u8; 16 * 1024])
                .encode(out.wire(), &Limits::default())
                .unwrap();
        }
        Ok(())
    }
}

/// A batch larger than the whole send budget goes out in pieces, never
/// stuck waiting for room it can never have.
#[test]
fn a_batch_larger_than_the_send_budget_still_goes_out() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let mut cfg = config(backend, 1);
        cfg.driver.max_send_queue = 256 * 1024;
        cfg.limits.max_frame_len = 64 * 1024;
        let engine = Engine::start(cfg, |_| Framed::new(Burst)).unwrap();
        let mut c = TcpStream::connect(engine.tcp_addr(0).unwrap()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(&data(0, b"go").to_bytes(&Limits::default()).unwrap())
            .unwrap();
        let got = read_frames(&mut c, 64);
        for (i, f) in got.iter().enumerate() {
            let seq = i as u64 + 1;
            assert_eq!(*f, data(seq, &vec![seq as u8; 16 * 1024]), "{backend:?}");
        }
        drop(c);
        engine.stop();
        engine.join().unwrap();
    }
}
