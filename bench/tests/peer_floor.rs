//! The floor (`dtp_transports::floor`) end to end over loopback, driven by
//! the same plain `std::net` client as the other peers, plus the facts its
//! hand-made framing rests on: the shared responder answers a well-formed
//! `pingpong` request with the request's own bytes, and the floor's ack is
//! the codec's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

mod peer_client;

use std::io::{Read, Write};

use bytes::{Bytes, BytesMut};
use dtp_bench::workload::{self, Responder};
use dtp_codec::{AckFrame, Body, DataFrame, Limits, LogicalFrame};
use dtp_transports::floor::{self, Floor, FloorConfig, frame};

fn start(workers: usize) -> Floor {
    Floor::start(FloorConfig::new("127.0.0.1:0".parse().unwrap(), workers)).unwrap()
}

/// The floor echoes a `pingpong` request instead of decoding and
/// re-encoding it. That is the same answer only because the shared
/// responder's answer to a well-formed request (no agreement id, no
/// relations: what the workload's clients send) is byte for byte the
/// request: same stream, fragment id, sequence and payload, encoded
/// canonically. This test is that proof, for the standard request and for
/// other sequences and payload sizes.
#[test]
fn the_responder_answers_a_pingpong_request_with_its_own_bytes() {
    let mut requests = BytesMut::new();
    for seq in [1, 2, 255, 1 << 40, u64::MAX - 1] {
        workload::encode_pingpong_request(seq, &mut requests).unwrap();
    }
    for len in [0usize, 1, 66, 1000, 65_536] {
        LogicalFrame::plain(
            workload::PINGPONG_STREAM_ID,
            Body::Data(DataFrame {
                agreement_id: None,
                fragment_id: 7,
                sequence: 9,
                relations: Vec::new(),
                payload: Bytes::from(vec![0xA5; len]),
            }),
        )
        .encode(&mut requests, &Limits::default())
        .unwrap();
    }
    let wire = requests.clone();
    let mut answers = BytesMut::new();
    Responder::new(Limits::default())
        .serve(&mut requests, &mut answers)
        .unwrap();
    assert!(requests.is_empty());
    assert_eq!(answers, wire, "the answers are the requests, byte for byte");
}

#[test]
fn the_floor_frames_are_the_codecs() {
    assert_eq!(frame::HEADER_LEN, dtp_codec::HEADER_LEN);
    assert_eq!(
        frame::HEADER_LEN + frame::DATA_FIELDS_LEN,
        workload::PINGPONG_FRAME_LEN - workload::PINGPONG_PAYLOAD_LEN
    );
    assert_eq!(frame::ACK_FRAME_LEN, workload::ACK_FRAME_LEN);
    assert_eq!(frame::MAX_BODY_LEN, Limits::default().max_frame_len);
    assert_eq!(frame::PINGPONG_STREAM_ID, workload::PINGPONG_STREAM_ID);
    assert_eq!(frame::STREAM_STREAM_ID, workload::STREAM_STREAM_ID);
    assert_eq!(frame::ACK_EVERY, workload::ACK_EVERY);
    assert_eq!(frame::FLUSH_FRAGMENT_ID, workload::FLUSH_FRAGMENT_ID);
    for cumulative in [0, 64, 1 << 33, u64::MAX] {
        let mut codec = BytesMut::new();
        LogicalFrame::plain(
            workload::STREAM_STREAM_ID,
            Body::Ack(AckFrame { cumulative }),
        )
        .encode(&mut codec, &Limits::default())
        .unwrap();
        assert_eq!(&codec[..], &frame::ack_frame(cumulative)[..]);
    }
    assert_eq!(floor::NAME, "floor");
}

#[test]
fn pingpong_gets_one_correct_answer_per_request() {
    let floor = start(2);
    let mut sock = peer_client::connect(floor.local_addr());
    peer_client::pingpong(&mut sock, 500);
    drop(sock);
    let stats = floor.stop().unwrap();
    assert_eq!(stats.accepted, 1);
}

#[test]
fn a_request_written_one_byte_at_a_time_is_answered() {
    let floor = start(1);
    let mut sock = peer_client::connect(floor.local_addr());
    let mut out = BytesMut::new();
    workload::encode_pingpong_request(42, &mut out).unwrap();
    workload::encode_pingpong_request(43, &mut out).unwrap();
    // TCP_NODELAY on: most bytes leave as a segment of their own.
    for b in out.iter() {
        sock.write_all(&[*b]).unwrap();
    }
    let mut inbuf = BytesMut::new();
    for seq in [42, 43] {
        let answer = peer_client::read_frame(&mut sock, &mut inbuf).unwrap();
        workload::check_pingpong_answer(seq, &answer).unwrap();
    }
}

#[test]
fn pingpong_over_concurrent_connections() {
    let floor = start(2);
    peer_client::concurrent_pingpong(floor.local_addr());
    let stats = floor.stop().unwrap();
    assert_eq!(stats.accepted, 8);
    assert_eq!(stats.malformed, 0);
}

#[test]
fn pipelined_pingpong_answers_in_order() {
    let floor = start(2);
    peer_client::pipelined_pingpong(floor.local_addr());
}

#[test]
fn a_pipelined_burst_larger_than_the_output_chunk_is_answered_in_order() {
    // Chunks of 256 bytes: two answers each, so the burst's answers go out
    // in many sends while its input waits in held buffers.
    let mut config = FloorConfig::new("127.0.0.1:0".parse().unwrap(), 1);
    config.out_chunk_len = 256;
    config.out_chunks = 2;
    config.recv_buffer_len = 512;
    config.recv_buffers = 64;
    config.max_held = 2;
    let floor = Floor::start(config).unwrap();
    let mut sock = peer_client::connect(floor.local_addr());
    let mut reader = sock.try_clone().unwrap();
    let answers = std::thread::spawn(move || {
        let mut inbuf = BytesMut::new();
        for seq in 1..=2000 {
            let answer = peer_client::read_frame(&mut reader, &mut inbuf).unwrap();
            workload::check_pingpong_answer(seq, &answer).unwrap();
        }
    });
    let mut out = BytesMut::new();
    for seq in 1..=2000 {
        workload::encode_pingpong_request(seq, &mut out).unwrap();
    }
    sock.write_all(&out).unwrap();
    answers.join().unwrap();
    drop(sock);
    let stats = floor.stop().unwrap();
    assert_eq!(stats.malformed, 0);
}

#[test]
fn a_stream_of_1000_frames_is_acked_every_64_and_at_the_end() {
    let floor = start(2);
    peer_client::stream_of_1000(floor.local_addr());
}

#[test]
fn a_flush_is_acked_at_once_and_restarts_the_count() {
    let floor = start(2);
    peer_client::stream_flush_restarts_the_count(floor.local_addr());
}

#[test]
fn a_stream_through_few_small_buffers_is_acked_correctly() {
    // 16 receive buffers of 4 KiB: receives run out of buffers and are
    // re-armed, frames straddle buffers everywhere.
    let mut config = FloorConfig::new("127.0.0.1:0".parse().unwrap(), 1);
    config.recv_buffer_len = 4096;
    config.recv_buffers = 16;
    let floor = Floor::start(config).unwrap();
    peer_client::stream_of_1000(floor.local_addr());
    let stats = floor.stop().unwrap();
    assert_eq!(stats.malformed, 0);
}

#[test]
fn garbage_closes_the_connection_and_the_floor_keeps_serving() {
    let floor = start(2);
    peer_client::garbage_is_closed(floor.local_addr());
    peer_client::foreign_frame_is_closed(floor.local_addr());
    let mut good = peer_client::connect(floor.local_addr());
    peer_client::pingpong(&mut good, 3);
    drop(good);
    let stats = floor.stop().unwrap();
    assert_eq!(stats.accepted, 3);
    assert_eq!(stats.malformed, 2);
}

#[test]
fn many_idle_connections_each_answer() {
    let floor = start(2);
    peer_client::many_idle_connections(floor.local_addr(), 300);
    let stats = floor.stop().unwrap();
    assert_eq!(stats.accepted, 300);
}

#[test]
fn connections_past_the_table_are_refused_and_the_floor_goes_on() {
    let mut config = FloorConfig::new("127.0.0.1:0".parse().unwrap(), 1);
    config.max_connections = 16;
    let floor = Floor::start(config).unwrap();
    let addr = floor.local_addr();
    let mut held: Vec<_> = (0..16).map(|_| peer_client::connect(addr)).collect();
    for s in &mut held {
        peer_client::pingpong(s, 1);
    }
    // The table is full: a 17th connection is accepted by the kernel's
    // TCP, then closed unanswered.
    let mut extra = peer_client::connect(addr);
    let mut out = BytesMut::new();
    workload::encode_pingpong_request(1, &mut out).unwrap();
    let _ = extra.write_all(&out);
    let mut buf = [0u8; 128];
    assert!(
        matches!(extra.read(&mut buf), Ok(0) | Err(_)),
        "no answer past the table"
    );
    // Once connections close, new ones are served again.
    held.clear();
    let mut served = false;
    for _ in 0..1000 {
        let mut s = peer_client::connect(addr);
        if s.write_all(&out).is_ok() && matches!(s.read(&mut buf), Ok(n) if n > 0) {
            served = true;
            break;
        }
    }
    assert!(served, "a connection after the others closed is served");
    let stats = floor.stop().unwrap();
    assert!(stats.refused >= 1);
}
