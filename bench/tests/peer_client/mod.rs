//! A plain `std::net` client of the workload protocol, shared by the peer
//! tests: each check drives a server at `addr` the way a user of the
//! protocol would and asserts the answers and acks it must see.
#![allow(dead_code, reason = "each test file uses the checks that fit its peer")]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use dtp_bench::workload::{self, ACK_EVERY, PINGPONG_FRAME_LEN, check_pingpong_answer, parse_ack};
use dtp_codec::{FrameDecoder, Limits, LogicalFrame};

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_nodelay(true).unwrap();
    // A hung peer fails the test instead of hanging it.
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock
}

/// Reads until one whole frame is decoded; `None` at end of stream.
pub(crate) fn read_frame(sock: &mut TcpStream, buf: &mut BytesMut) -> Option<LogicalFrame> {
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

/// `n` round trips, each answered correctly, starting at sequence `first`.
pub(crate) fn pingpong_from(sock: &mut TcpStream, first: u64, n: u64) {
    let mut out = BytesMut::new();
    let mut inbuf = BytesMut::new();
    for seq in first..first + n {
        out.clear();
        workload::encode_pingpong_request(seq, &mut out).unwrap();
        assert_eq!(out.len(), PINGPONG_FRAME_LEN);
        sock.write_all(&out).unwrap();
        let answer = read_frame(sock, &mut inbuf).expect("the peer closed early");
        check_pingpong_answer(seq, &answer).unwrap();
    }
    assert!(inbuf.is_empty(), "more bytes than answers");
}

pub(crate) fn pingpong(sock: &mut TcpStream, n: u64) {
    pingpong_from(sock, 1, n);
}

/// 8 clients at once, 200 round trips each.
pub(crate) fn concurrent_pingpong(addr: SocketAddr) {
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let mut sock = connect(addr);
            thread::spawn(move || pingpong(&mut sock, 200))
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

/// 100 requests in one write, answered in order.
pub(crate) fn pipelined_pingpong(addr: SocketAddr) {
    let mut sock = connect(addr);
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

/// Sends `frames` stream frames (those in `flush` marked as the end of a
/// burst) in writes of 64 frames, and returns the acks, read on their own
/// thread until the one for the last frame.
pub(crate) fn stream_acks(addr: SocketAddr, frames: u64, flush: &[u64]) -> Vec<u64> {
    let mut sock = connect(addr);
    let mut reader = sock.try_clone().unwrap();
    let acks = thread::spawn(move || {
        let mut inbuf = BytesMut::new();
        let mut acks = Vec::new();
        while let Some(f) = read_frame(&mut reader, &mut inbuf) {
            let cumulative = parse_ack(&f).unwrap();
            acks.push(cumulative);
            if cumulative == frames {
                break;
            }
        }
        acks
    });
    let payload = workload::stream_payload();
    let mut out = BytesMut::new();
    for seq in 1..=frames {
        workload::stream_frame(seq, &payload, flush.contains(&seq))
            .encode(&mut out, &Limits::default())
            .unwrap();
        if seq % 64 == 0 || seq == frames {
            sock.write_all(&out).unwrap();
            out.clear();
        }
    }
    let acks = acks.join().unwrap();
    sock.shutdown(Shutdown::Write).unwrap();
    acks
}

/// 1000 frames, the last one a flush: an ack every 64 and one at the end.
pub(crate) fn stream_of_1000(addr: SocketAddr) {
    const FRAMES: u64 = 1000;
    let acks = stream_acks(addr, FRAMES, &[FRAMES]);
    let mut expected: Vec<u64> = (1..=FRAMES / ACK_EVERY).map(|k| k * ACK_EVERY).collect();
    expected.push(FRAMES);
    assert_eq!(acks, expected, "every sequence is covered, in order");
}

/// A flush in the middle of a burst is acked at once, and the count of 64
/// restarts after it.
pub(crate) fn stream_flush_restarts_the_count(addr: SocketAddr) {
    let acks = stream_acks(addr, 150, &[10, 150]);
    assert_eq!(acks, vec![10, 74, 138, 150]);
}

/// A malformed frame: the peer closes without answering. Returns once the
/// client saw the end of the connection.
pub(crate) fn garbage_is_closed(addr: SocketAddr) {
    let mut bad = connect(addr);
    bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    match bad.read_to_end(&mut rest) {
        Ok(n) => assert_eq!(n, 0, "no answer to garbage"),
        // A reset is a close too.
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
    }
}

/// A well-formed frame the workload has no use for (an ack from the
/// client) closes the connection too.
pub(crate) fn foreign_frame_is_closed(addr: SocketAddr) {
    let mut sock = connect(addr);
    let mut out = BytesMut::new();
    LogicalFrame::plain(
        workload::STREAM_STREAM_ID,
        dtp_codec::Body::Ack(dtp_codec::AckFrame { cumulative: 1 }),
    )
    .encode(&mut out, &Limits::default())
    .unwrap();
    sock.write_all(&out).unwrap();
    let mut inbuf = BytesMut::new();
    assert!(read_frame(&mut sock, &mut inbuf).is_none());
}

/// The `connections` workload: `n` connections, each one round trip, all
/// kept open; then every one of them answers again.
pub(crate) fn many_idle_connections(addr: SocketAddr, n: usize) {
    let mut socks: Vec<TcpStream> = (0..n).map(|_| connect(addr)).collect();
    for s in &mut socks {
        pingpong(s, 1);
    }
    for s in &mut socks {
        pingpong_from(s, 2, 1);
    }
}

/// The end-to-end tests every tokio-style peer (with a [`PeerHandle`] and
/// its stats) must pass, for a `start()` in the calling test file.
///
/// [`PeerHandle`]: dtp_bench::peer_tokio::PeerHandle
#[allow(unused_macros, reason = "the floor's tests have no PeerHandle")]
macro_rules! peer_handle_tests {
    () => {
        #[test]
        fn pingpong_gets_one_correct_answer_per_request() {
            let peer = start();
            let mut sock = peer_client::connect(peer.local_addr());
            peer_client::pingpong(&mut sock, 500);
            drop(sock);
            peer.shutdown().unwrap();
        }

        #[test]
        fn pingpong_over_concurrent_connections() {
            let peer = start();
            peer_client::concurrent_pingpong(peer.local_addr());
            assert_eq!(
                peer.stats()
                    .accepted
                    .load(std::sync::atomic::Ordering::Relaxed),
                8
            );
            peer.shutdown().unwrap();
        }

        #[test]
        fn pipelined_pingpong_answers_in_order() {
            let peer = start();
            peer_client::pipelined_pingpong(peer.local_addr());
        }

        #[test]
        fn a_stream_of_1000_frames_is_acked_every_64_and_at_the_end() {
            let peer = start();
            peer_client::stream_of_1000(peer.local_addr());
        }

        #[test]
        fn a_flush_is_acked_at_once_and_restarts_the_count() {
            let peer = start();
            peer_client::stream_flush_restarts_the_count(peer.local_addr());
        }

        #[test]
        fn garbage_closes_the_connection_and_the_peer_keeps_serving() {
            use std::sync::atomic::Ordering;
            let peer = start();
            peer_client::garbage_is_closed(peer.local_addr());
            peer_client::foreign_frame_is_closed(peer.local_addr());
            let mut good = peer_client::connect(peer.local_addr());
            peer_client::pingpong(&mut good, 3);
            drop(good);
            // A closed connection's task ends before the client sees end of
            // stream; after shutdown its count is visible.
            let stats = peer.stats();
            peer.shutdown().unwrap();
            assert_eq!(stats.accepted.load(Ordering::Relaxed), 3);
            assert_eq!(stats.errors.load(Ordering::Relaxed), 2);
        }

        #[test]
        fn many_idle_connections_each_answer() {
            let peer = start();
            peer_client::many_idle_connections(peer.local_addr(), 300);
            assert_eq!(
                peer.stats()
                    .accepted
                    .load(std::sync::atomic::Ordering::Relaxed),
                300
            );
        }
    };
}
#[allow(unused_imports, reason = "the floor's tests have no PeerHandle")]
pub(crate) use peer_handle_tests;
