//! Frames over a faulty transport, end to end across crates: the codec's
//! stream decoder on top of the in-memory transport wrapped in the fault
//! injector. Whatever the re-chunking, every frame arrives once and intact;
//! a cut after byte N delivers exactly the frames wholly before N.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::num::NonZeroUsize;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use dtp_codec::{Body, DataFrame, FrameDecoder, Limits, LogicalFrame};
use dtp_transports::{Endpoint, Event, FaultInjector, FaultPlan, MemoryHub, Rechunk, Transport};

fn frame(seq: u64) -> LogicalFrame {
    // Sizes from 0 to ~3 KiB, so frames straddle every delivery boundary.
    let payload: Vec<u8> = (0..(seq * 131 % 3000)).map(|i| (i ^ seq) as u8).collect();
    LogicalFrame::plain(
        (seq % 3) as u32,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: seq,
            sequence: seq,
            relations: vec![],
            payload: Bytes::from(payload),
        }),
    )
}

/// Sends `n` frames from a client to a server through `plan` (applied to the
/// server's side) and returns the frames the server decoded, and whether its
/// connection went down.
fn run(n: u64, plan: FaultPlan, seed: u64) -> (Vec<LogicalFrame>, bool, Vec<usize>) {
    let hub = MemoryHub::new();
    let mut server = FaultInjector::with_plan(hub.transport(), seed, plan);
    let mut client = hub.transport();
    let ep: Endpoint = "mem://e2e".parse().unwrap();
    server.listen(&ep, false).unwrap();
    let conn = client.connect(&ep).unwrap();
    let mut wire = Vec::new();
    let mut ends = Vec::new(); // byte offset where each frame ends
    for seq in 0..n {
        let bytes = frame(seq).to_bytes(&Limits::default()).unwrap();
        wire.extend_from_slice(&bytes);
        ends.push(wire.len());
    }
    let decoder = FrameDecoder::default();
    let (mut buf, mut got, mut sent, mut down) = (BytesMut::new(), Vec::new(), 0usize, false);
    let mut events = Vec::new();
    for _ in 0..100_000 {
        if sent < wire.len() {
            let piece = (wire.len() - sent).min(7_000);
            if client.send(conn, &wire[sent..sent + piece]).is_ok() {
                sent += piece;
            }
        }
        client.poll(&mut events, Some(Duration::ZERO)).unwrap();
        events.clear();
        server.poll(&mut events, Some(Duration::ZERO)).unwrap();
        for e in events.drain(..) {
            match e {
                Event::Received { data, .. } => {
                    buf.extend_from_slice(&data);
                    while let Some(f) = decoder.decode(&mut buf).unwrap() {
                        got.push(f);
                    }
                }
                Event::Closed { .. } => down = true,
                _ => {}
            }
        }
        if down || got.len() as u64 == n {
            break;
        }
    }
    (got, down, ends)
}

#[test]
fn every_frame_arrives_once_and_intact_whatever_the_chunking() {
    for (seed, rechunk) in [
        (1, Some(Rechunk::Coalesce)),
        (
            2,
            Some(Rechunk::Random {
                max: NonZeroUsize::new(1).unwrap(),
            }),
        ),
        (
            3,
            Some(Rechunk::Random {
                max: NonZeroUsize::new(17).unwrap(),
            }),
        ),
        (
            4,
            Some(Rechunk::Random {
                max: NonZeroUsize::new(5000).unwrap(),
            }),
        ),
        (5, None),
    ] {
        let plan = FaultPlan {
            rechunk,
            delay_polls: (seed % 3) as u32,
            ..FaultPlan::NONE
        };
        let (got, down, _) = run(300, plan, seed);
        assert!(!down, "{rechunk:?}");
        assert_eq!(got.len(), 300, "{rechunk:?}");
        for (seq, f) in got.iter().enumerate() {
            assert_eq!(f, &frame(seq as u64), "{rechunk:?}");
        }
    }
}

#[test]
fn a_cut_after_byte_n_delivers_exactly_the_frames_before_it() {
    let (_, _, ends) = run(1, FaultPlan::NONE, 0);
    assert_eq!(ends.len(), 1);
    let (_, _, ends) = run(200, FaultPlan::NONE, 0);
    // Cuts at frame boundaries, inside headers and inside payloads.
    for cut in [
        0usize,
        1,
        15,
        16,
        17,
        ends[0],
        ends[0] + 3,
        ends[50] - 1,
        ends[50],
        ends[120] + 20,
    ] {
        let plan = FaultPlan {
            cut_after_received: Some(cut as u64),
            ..FaultPlan::NONE
        };
        let (got, down, _) = run(200, plan, 9);
        let whole = ends.iter().filter(|&&e| e <= cut).count();
        assert!(down, "cut at {cut}: the connection must go down");
        assert_eq!(got.len(), whole, "cut at {cut}");
        for (seq, f) in got.iter().enumerate() {
            assert_eq!(f, &frame(seq as u64));
        }
    }
}
