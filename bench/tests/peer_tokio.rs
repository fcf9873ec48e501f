//! The tokio peer end to end over loopback, driven by a plain `std::net`
//! client: the answers and acks a user of the workload protocol would see.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use dtp_bench::peer_tokio::{self, PeerConfig, PeerHandle};
use dtp_bench::workload::{self, ACK_EVERY, PINGPONG_FRAME_LEN, check_pingpong_answer, parse_ack};
use dtp_codec::{FrameDecoder, Limits, LogicalFrame};

fn start() -> PeerHandle {
    peer_tokio::serve(PeerConfig::new("127.0.0.1:0".parse().unwrap(), 2)).unwrap()
}

fn connect(peer: &PeerHandle) -> TcpStream {
    let sock = TcpStream::connect(peer.local_addr()).unwrap();
    sock.set_nodelay(true).unwrap();
    // A hung peer fails the test instead of hanging it.
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock
}

/// Reads until one whole frame is decoded.
fn read_frame(sock: &mut TcpStream, buf: &mut BytesMut) -> Option<LogicalFrame> {
    let decoder = FrameDecoder::default();
    loop {
        if let Some(f) = decoder.decode(buf).unwrap() {
            return Some(f);
        }
        let mut chunk = [0u8; 4096];
        let n = sock.read(&mut chunk).unwrap();
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn pingpong(sock: &mut TcpStream, n: u64) {
    let mut out = BytesMut::new();
    let mut inbuf = BytesMut::new();
    for seq in 1..=n {
        out.clear();
        workload::encode_pingpong_request(seq, &mut out).unwrap();
        assert_eq!(out.len(), PINGPONG_FRAME_LEN);
        sock.write_all(&out).unwrap();
        let answer = read_frame(sock, &mut inbuf).expect("the peer closed early");
        check_pingpong_answer(seq, &answer).unwrap();
    }
    assert!(inbuf.is_empty(), "more bytes than answers");
}

#[test]
fn pingpong_gets_one_correct_answer_per_request() {
    let peer = start();
    let mut sock = connect(&peer);
    pingpong(&mut sock, 500);
    drop(sock);
    peer.shutdown().unwrap();
}

#[test]
fn pingpong_over_concurrent_connections() {
    let peer = start();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let mut sock = connect(&peer);
            thread::spawn(move || pingpong(&mut sock, 200))
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(peer.stats().accepted.load(Ordering::Relaxed), 8);
    peer.shutdown().unwrap();
}

#[test]
fn pipelined_pingpong_answers_in_order() {
    // 100 requests in one write: the peer answers the whole read batch with
    // one write, in order.
    let peer = start();
    let mut sock = connect(&peer);
    let mut out = BytesMut::new();
    for seq in 1..=100 {
        workload::encode_pingpong_request(seq, &mut out).unwrap();
    }
    sock.write_all(&out).unwrap();
    let mut inbuf = BytesMut::new();
    for seq in 1..=100 {
        check_pingpong_answer(seq, &read_frame(&mut sock, &mut inbuf).unwrap()).unwrap();
    }
}

#[test]
fn a_stream_of_1000_frames_is_acked_every_64_and_at_the_end() {
    const FRAMES: u64 = 1000;
    let peer = start();
    let mut sock = connect(&peer);
    let mut reader = sock.try_clone().unwrap();
    // Acks are read on their own thread while the client writes 16 MB.
    let acks = thread::spawn(move || {
        let mut inbuf = BytesMut::new();
        let mut acks = Vec::new();
        while let Some(f) = read_frame(&mut reader, &mut inbuf) {
            let cumulative = parse_ack(&f).unwrap();
            acks.push(cumulative);
            if cumulative == FRAMES {
                break;
            }
        }
        acks
    });
    let payload = workload::stream_payload();
    let mut out = BytesMut::new();
    for seq in 1..=FRAMES {
        workload::stream_frame(seq, &payload, seq == FRAMES)
            .encode(&mut out, &Limits::default())
            .unwrap();
        // Write 64 frames (about 1 MiB) at a time.
        if seq % 64 == 0 || seq == FRAMES {
            sock.write_all(&out).unwrap();
            out.clear();
        }
    }
    let acks = acks.join().unwrap();
    let mut expected: Vec<u64> = (1..=FRAMES / ACK_EVERY).map(|k| k * ACK_EVERY).collect();
    expected.push(FRAMES);
    assert_eq!(acks, expected, "every sequence is covered, in order");
    sock.shutdown(Shutdown::Write).unwrap();
}

#[test]
fn garbage_closes_the_connection_and_the_peer_keeps_serving() {
    let peer = start();
    let mut bad = connect(&peer);
    bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    // The peer closes without answering.
    assert_eq!(bad.read_to_end(&mut rest).unwrap(), 0);
    let mut good = connect(&peer);
    pingpong(&mut good, 3);
    drop(good);
    // The bad connection's task ended before the client saw end of stream;
    // after shutdown its count is visible.
    let stats = peer.stats();
    peer.shutdown().unwrap();
    assert_eq!(stats.accepted.load(Ordering::Relaxed), 2);
    assert_eq!(stats.errors.load(Ordering::Relaxed), 1);
}
