//! UDP datagrams on both backends ([`Datagrams`]): bytes and source
//! addresses as sent, GSO batches arriving as their datagrams, an ICMP
//! refusal on a connected socket reported, and closed sockets refused.
//!
//! Nothing sleeps: each test polls until what it waits for, with a
//! deadline that fails loudly.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod backends;

use backends::{driver, on_both_backends};

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use dtp_transports::{BackendPreference, Datagrams, Driver, SendError, Transport, UdpEvent, UdpId};

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Polls `d` until `done` holds for what its sockets reported, which it
/// returns (every datagram copied out: `(socket, from, bytes)`; errors as
/// `(socket, errno)`).
#[derive(Default)]
struct Got {
    datagrams: Vec<(UdpId, SocketAddr, Vec<u8>)>,
    errors: Vec<(UdpId, i32)>,
}

fn poll_until(d: &mut Driver, got: &mut Got, what: &str, done: impl Fn(&Got) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(got) {
        assert!(Instant::now() < deadline, "no progress within 20 s: {what}");
        poll_once(d, got);
    }
}

fn poll_once(d: &mut Driver, got: &mut Got) {
    let (mut events, mut udp) = (Vec::new(), Vec::new());
    d.poll(&mut events, Some(Duration::from_millis(5))).unwrap();
    d.take_udp_events(&mut udp);
    for e in udp {
        match e {
            UdpEvent::Datagram(dg) => {
                for seg in dg.segments() {
                    got.datagrams.push((dg.socket, dg.from, seg.to_vec()));
                }
            }
            UdpEvent::Error { socket, errno } => got.errors.push((socket, errno)),
        }
    }
}

on_both_backends!(
    datagrams_arrive_unaltered_with_their_source_and_replies_go_back,
    a_gso_batch_arrives_as_its_datagrams_in_order,
    a_refusal_on_a_connected_socket_is_reported,
    a_closed_socket_is_refused,
);

fn datagrams_arrive_unaltered_with_their_source_and_replies_go_back(backend: BackendPreference) {
    let mut d = driver(backend, 16 * 1024);
    let (a, a_addr) = d.bind_udp(loopback(), None, false).unwrap();
    let (b, b_addr) = d.bind_udp(loopback(), None, false).unwrap();
    // Sizes across the copy-out threshold (4 KiB) and up to a chunk.
    let sizes = [1usize, 1200, 4097, 9000, 16_000];
    let payloads: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
        .collect();
    for p in &payloads {
        d.send_to(a, b_addr, p, p.len()).unwrap();
    }
    let mut got = Got::default();
    poll_until(&mut d, &mut got, "every datagram at b", |g| {
        g.datagrams.len() == sizes.len()
    });
    for ((socket, from, bytes), want) in got.datagrams.iter().zip(&payloads) {
        assert_eq!((*socket, *from), (b, a_addr));
        assert!(
            bytes == want,
            "{backend:?}: a datagram of {} bytes altered",
            want.len()
        );
    }
    d.send_to(b, a_addr, b"pong", 4).unwrap();
    let mut back = Got::default();
    poll_until(&mut d, &mut back, "the reply at a", |g| {
        !g.datagrams.is_empty()
    });
    assert_eq!(back.datagrams, [(a, b_addr, b"pong".to_vec())]);
    assert_eq!(d.lent_chunks(), 0, "every lent receive chunk came back");
}

fn a_gso_batch_arrives_as_its_datagrams_in_order(backend: BackendPreference) {
    // 64 KiB chunks: the receiver may have GRO coalesce them again, which
    // `segments` undoes.
    for chunk in [16 * 1024, 64 * 1024] {
        let mut d = driver(backend, chunk);
        let (a, _) = d.bind_udp(loopback(), None, false).unwrap();
        let (b, b_addr) = d.bind_udp(loopback(), None, false).unwrap();
        let segments = d.max_segments(a).min(20);
        assert!(segments >= 1);
        let mut batch = Vec::new();
        for i in 0..segments {
            batch.extend(std::iter::repeat_n(i as u8, 1200));
        }
        batch.extend_from_slice(&[0xee; 500]); // a shorter last one
        let count = segments + 1;
        // Without GSO the batch is queued as separate messages.
        d.send_to(a, b_addr, &batch, 1200).unwrap();
        let mut got = Got::default();
        poll_until(&mut d, &mut got, "every datagram of the batch", |g| {
            g.datagrams.len() == count
        });
        let lens: Vec<usize> = got.datagrams.iter().map(|(_, _, b)| b.len()).collect();
        assert_eq!(lens[..count - 1], vec![1200; count - 1][..]);
        assert_eq!(lens[count - 1], 500);
        let joined: Vec<u8> = got
            .datagrams
            .iter()
            .flat_map(|(_, _, b)| b.clone())
            .collect();
        assert!(joined == batch, "{backend:?}: the batch changed");
        assert!(got.datagrams.iter().all(|(s, _, _)| *s == b));
    }
}

fn a_refusal_on_a_connected_socket_is_reported(backend: BackendPreference) {
    let mut d = driver(backend, 16 * 1024);
    // A port nobody listens on (a socket bound a moment ago and gone).
    let nowhere = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (s, _) = d.bind_udp(loopback(), Some(nowhere), false).unwrap();
    let mut got = Got::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.errors.is_empty() {
        assert!(Instant::now() < deadline, "no refusal within 20 s");
        d.send_to(s, nowhere, b"anyone?", 7).unwrap();
        poll_once(&mut d, &mut got);
    }
    assert_eq!(got.errors[0], (s, libc::ECONNREFUSED));
    // The socket stays usable.
    d.send_to(s, nowhere, b"still", 5).unwrap();
}

fn a_closed_socket_is_refused(backend: BackendPreference) {
    let mut d = driver(backend, 16 * 1024);
    let (a, _) = d.bind_udp(loopback(), None, false).unwrap();
    let (b, b_addr) = d.bind_udp(loopback(), None, false).unwrap();
    d.close_udp(b);
    d.close_udp(b); // twice is harmless
    assert_eq!(
        d.send_to(b, b_addr, b"x", 1),
        Err(SendError::UnknownConnection)
    );
    assert_eq!(d.max_segments(b), 0);
    // Another socket reuses the slot; the old id stays dead.
    let (c, c_addr) = d.bind_udp(loopback(), None, false).unwrap();
    assert_ne!(b, c);
    d.send_to(a, c_addr, b"to c", 4).unwrap();
    let mut got = Got::default();
    poll_until(&mut d, &mut got, "c's datagram", |g| {
        !g.datagrams.is_empty()
    });
    assert_eq!(got.datagrams[0].0, c);
}

/// io_uring sends from the socket's queue with the next poll: without one
/// the queue fills and refuses, all or nothing, instead of growing.
#[test]
fn the_send_queue_is_bounded_until_a_poll_drains_it() {
    let mut d = driver(BackendPreference::Uring, 16 * 1024);
    let (a, _) = d.bind_udp(loopback(), None, false).unwrap();
    let (_b, b_addr) = d.bind_udp(loopback(), None, false).unwrap();
    let mut queued = 0;
    while d.udp_room(a) {
        d.send_to(a, b_addr, &[7; 1000], 1000).unwrap();
        queued += 1;
        assert!(queued < 10_000, "the queue never filled");
    }
    assert_eq!(
        d.send_to(a, b_addr, &[7; 1000], 1000),
        Err(SendError::BufferFull)
    );
    let mut got = Got::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !d.udp_room(a) {
        assert!(Instant::now() < deadline, "the queue never drained");
        poll_once(&mut d, &mut got);
    }
    d.send_to(a, b_addr, &[7; 1000], 1000).unwrap();
}
