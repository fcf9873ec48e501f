//! The BLE transport's own promises (SPEC TRN-2, TRN-4, TRN-5), on both
//! backends, over the simulated link (`ble-sim:PATH?mtu=N`, a Unix
//! `SOCK_SEQPACKET` socket): a raw seqpacket peer sees every SDU the
//! transport sends and sends SDUs of its own, so each message on the wire
//! is checked against the MTU and the byte stream against what was sent.
//! The real L2CAP path cannot run on these machines: on a host without
//! Bluetooth it must fail with one clear error.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use dtp_transports::{
    BackendPreference, CloseReason, ConnId, Driver, DriverConfig, Endpoint, Event, SendError,
    Transport,
};
use socket2::{Domain, SockAddr, Socket, Type};

mod backends;
#[allow(
    dead_code,
    reason = "the support module is shared by the transport tests; each uses part of it"
)]
mod support;

use backends::{closed, on_both_backends, received};
use support::{Rng, unix_path};

/// Receive buffers of this size: an MTU must stay below it.
const CHUNK: u32 = 16 * 1024;
/// The send queue of each connection.
const QUEUE: usize = 64 * 1024;

fn driver(backend: BackendPreference) -> Driver {
    Driver::new(DriverConfig {
        backend,
        chunk_size: CHUNK,
        recv_buffers: 16,
        send_chunks: 64,
        max_send_queue: QUEUE,
        ..DriverConfig::default()
    })
    .unwrap()
}

fn sim(mtu: u16) -> Endpoint {
    Endpoint::BleSim {
        path: unix_path(&format!("ble-{mtu}")),
        mtu,
    }
}

/// A transport listening on the simulated link with `mtu`, a raw
/// seqpacket peer connected to it (non-blocking), and the accepted id.
fn pair(backend: BackendPreference, mtu: u16) -> (Driver, Socket, ConnId, Vec<Event>) {
    let mut t = driver(backend);
    let (_, at) = t.listen(&sim(mtu), false).unwrap();
    let Endpoint::BleSim { path, .. } = &at else {
        panic!("{at}")
    };
    let peer = Socket::new(Domain::UNIX, Type::SEQPACKET, None).unwrap();
    peer.connect(&SockAddr::unix(path).unwrap()).unwrap();
    peer.set_nonblocking(true).unwrap();
    let mut events = Vec::new();
    let conn = until("the accept", || {
        t.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
        events.iter().find_map(|e| match e {
            Event::Accepted { conn, .. } => Some(*conn),
            _ => None,
        })
    });
    (t, peer, conn, events)
}

/// Calls `f` until it gives a value, failing loudly after 20 s.
fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "no progress within 20 s: {what}");
    }
}

/// The SDUs waiting at the raw peer, each as one message (the buffer is
/// larger than any MTU, so none is cut short).
fn read_sdus(peer: &Socket, into: &mut Vec<Vec<u8>>) {
    let mut buf = vec![0; 64 * 1024];
    loop {
        match (&*peer).read(&mut buf) {
            Ok(0) => return,
            Ok(n) => into.push(buf[..n].to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) => panic!("{e}"),
        }
    }
}

on_both_backends!(
    sdus_on_the_wire_never_exceed_the_mtu_and_reassemble_unchanged,
    a_message_longer_than_the_mtu_closes_the_connection_with_nothing_of_it_passed_on,
    a_peer_that_stops_reading_backpressures_the_sender_and_loses_nothing,
    an_mtu_the_receive_buffers_cannot_check_is_refused,
    ble_endpoints_fail_cleanly_without_bluetooth,
    two_transports_carry_a_stream_over_tiny_and_large_mtus,
    a_paused_reader_stops_a_peer_with_a_small_buffer_within_a_few_sdus,
);

/// SPEC TRN-5 with BLE's fragmentation: sends of any size go out as SDUs
/// of at most the MTU (full ones while bytes wait), and the peer's SDUs
/// of any size up to the MTU arrive as one unaltered stream.
fn sdus_on_the_wire_never_exceed_the_mtu_and_reassemble_unchanged(backend: BackendPreference) {
    for mtu in [23, 247, 4000, (CHUNK - 1) as u16] {
        let (mut t, peer, conn, mut events) = pair(backend, mtu);
        let mut rng = Rng(u64::from(mtu));
        let payload = rng.bytes(150_000);
        let mut sent = 0;
        let mut sdus = Vec::new();
        until("every byte out as SDUs", || {
            while sent < payload.len() {
                let n = (1 + rng.below(9_000)).min(payload.len() - sent);
                match t.send(conn, &payload[sent..sent + n]) {
                    Ok(()) => sent += n,
                    Err(SendError::BufferFull) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            t.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
            read_sdus(&peer, &mut sdus);
            (sdus.iter().map(Vec::len).sum::<usize>() >= payload.len()).then_some(())
        });
        let longest = sdus.iter().map(Vec::len).max().unwrap();
        assert_eq!(
            longest,
            usize::from(mtu),
            "{backend:?}: SDUs are cut at the MTU"
        );
        assert!(
            sdus.iter().all(|s| !s.is_empty()),
            "{backend:?}: an empty SDU"
        );
        assert!(
            sdus.concat() == payload,
            "{backend:?} mtu {mtu}: the stream changed"
        );
        // The other way: SDUs of random sizes up to the MTU.
        let inbound = rng.bytes(60_000);
        let mut at = 0;
        events.clear();
        let mut got = Vec::new();
        until("every SDU of the peer", || {
            while at < inbound.len() {
                let n = (1 + rng.below(mtu.into())).min(inbound.len() - at);
                match (&peer).write(&inbound[at..at + n]) {
                    Ok(w) => {
                        assert_eq!(w, n, "a seqpacket write is all or nothing");
                        at += n;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            t.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
            got.extend(received(&events, conn));
            events.clear();
            (got.len() >= inbound.len()).then_some(())
        });
        assert!(
            got == inbound,
            "{backend:?} mtu {mtu}: the peer's stream changed"
        );
    }
}

/// A peer that breaks the MTU ends the connection (EMSGSIZE): the SDUs
/// before it are delivered, nothing of the long one is.
fn a_message_longer_than_the_mtu_closes_the_connection_with_nothing_of_it_passed_on(
    backend: BackendPreference,
) {
    for (mtu, long) in [(23u16, 24usize), (247, 1000), (247, (CHUNK + 100) as usize)] {
        let (mut t, peer, conn, mut events) = pair(backend, mtu);
        (&peer).write_all(b"fits").unwrap();
        (&peer).write_all(&vec![7; long]).unwrap();
        let reason = until("the close", || {
            t.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
            closed(&events, conn)
        });
        assert_eq!(reason, CloseReason::Error(libc::EMSGSIZE), "{backend:?}");
        assert_eq!(received(&events, conn), b"fits", "{backend:?} {long}");
    }
}

/// SPEC TRN-2 with BLE's flow control: while the peer grants no room
/// (it does not read, so the link's credits — the simulated socket's send
/// buffer — run out), the kernel takes no more SDUs, the connection's
/// queue fills and the producer is refused; once the peer reads, room is
/// reported and every byte arrives in order.
fn a_peer_that_stops_reading_backpressures_the_sender_and_loses_nothing(
    backend: BackendPreference,
) {
    let (mut t, peer, conn, mut events) = pair(backend, 247);
    let mut rng = Rng(11);
    let block = rng.bytes(1000);
    let mut sent = 0usize;
    until("the producer refused", || {
        match t.send(conn, &block) {
            Ok(()) => sent += block.len(),
            Err(SendError::BufferFull) => return Some(()),
            Err(e) => panic!("{e}"),
        }
        t.poll(&mut events, Some(Duration::ZERO)).unwrap();
        None
    });
    // The kernel holds what the credits allowed, the queue the rest.
    assert!(sent >= QUEUE, "{backend:?}: refused after {sent} bytes");
    assert!(t.queued(conn) > QUEUE - block.len(), "{backend:?}");
    let in_flight = sent - t.queued(conn);
    assert!(
        in_flight > 0 && in_flight < 4 << 20,
        "{backend:?}: {in_flight}"
    );
    t.want_writable(conn);
    let mut sdus = Vec::new();
    let mut writable = false;
    until("the peer read everything", || {
        t.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
        writable |= events
            .iter()
            .any(|e| matches!(e, Event::Writable { conn: c } if *c == conn));
        events.clear();
        read_sdus(&peer, &mut sdus);
        (sdus.iter().map(Vec::len).sum::<usize>() == sent).then_some(())
    });
    assert!(writable, "{backend:?}: room was never reported");
    assert!(sdus.iter().all(|s| s.len() <= 247));
    let stream = sdus.concat();
    assert!(stream.chunks(block.len()).all(|c| c == block.as_slice()));
}

/// An MTU that the receive buffers could not tell from a truncated
/// message is refused when listening and when connecting, naming the
/// setting to change.
fn an_mtu_the_receive_buffers_cannot_check_is_refused(backend: BackendPreference) {
    let mut t = driver(backend);
    let too_big = sim(CHUNK as u16);
    let e = t.listen(&too_big, false).unwrap_err().to_string();
    assert!(e.contains("io.chunk_size"), "{e}");
    let e = t.connect(&too_big).unwrap_err().to_string();
    assert!(e.contains("io.chunk_size"), "{e}");
}

/// On a host without Bluetooth (these machines), a `ble:` listen or
/// connect fails at once with one line saying so.
fn ble_endpoints_fail_cleanly_without_bluetooth(backend: BackendPreference) {
    if dtp_transports::probe_ble().is_ok() {
        return; // a host with Bluetooth: nothing to check here
    }
    let mut t = driver(backend);
    let at: Endpoint = "ble:00:00:00:00:00:00/psm/0x80".parse().unwrap();
    let to: Endpoint = "ble:00:11:22:33:44:55/psm/0x80?type=random"
        .parse()
        .unwrap();
    for e in [
        t.listen(&at, true).unwrap_err(),
        t.connect(&to).unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("Bluetooth is not available on this host ("),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}

/// Two transports, both ends of the simulated link, echo a stream at the
/// smallest MTU BLE allows and at a large one.
fn two_transports_carry_a_stream_over_tiny_and_large_mtus(backend: BackendPreference) {
    for mtu in [23, 8000] {
        let (mut server, mut client) = (driver(backend), driver(backend));
        let (_, at) = server.listen(&sim(mtu), false).unwrap();
        let id = client.connect(&at).unwrap();
        let payload = Rng(u64::from(mtu)).bytes(100_000);
        let (mut sent, mut echoed) = (0, 0);
        let (mut at_server, mut back) = (Vec::new(), Vec::new());
        let mut server_id = None;
        let mut events = Vec::new();
        until("the echo", || {
            sent += support::send_some(&mut client, id, &payload[sent..], 5000);
            server
                .poll(&mut events, Some(Duration::from_millis(1)))
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Accepted { conn, .. } => server_id = Some(conn),
                    Event::Received { data, .. } => at_server.extend_from_slice(&data),
                    _ => {}
                }
            }
            if let Some(s) = server_id {
                echoed += support::send_some(&mut server, s, &at_server[echoed..], 5000);
            }
            client
                .poll(&mut events, Some(Duration::from_millis(1)))
                .unwrap();
            back.extend(received(&events, id));
            events.clear();
            (back.len() >= payload.len()).then_some(())
        });
        assert!(back == payload, "{backend:?} mtu {mtu}: the echo changed");
    }
}

/// SPEC TRN-2 the other way, with a small send buffer at the peer (few
/// credits): while the transport does not read, the peer's writes stop
/// within a few SDUs; once it reads again, everything arrives in order.
fn a_paused_reader_stops_a_peer_with_a_small_buffer_within_a_few_sdus(backend: BackendPreference) {
    let (mut t, peer, conn, mut events) = pair(backend, 247);
    peer.set_send_buffer_size(4096).unwrap();
    t.pause_reading(conn);
    t.poll(&mut events, Some(Duration::ZERO)).unwrap();
    let stream = Rng(12).bytes(247 * 400);
    let mut at = 0;
    let mut got = received(&events, conn);
    events.clear();
    // Polls go on while the peer writes: a paused reader takes nothing new.
    let stalled = until("the peer's writes stopped", || {
        t.poll(&mut events, Some(Duration::ZERO)).unwrap();
        got.extend(received(&events, conn));
        events.clear();
        match (&peer).write(&stream[at..at + 247]) {
            Ok(_) => {
                at += 247;
                None
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Some(at),
            Err(e) => panic!("{e}"),
        }
    });
    assert!(
        stalled <= 247 * 32,
        "{backend:?}: {} SDUs taken while paused",
        stalled / 247
    );
    t.resume_reading(conn);
    until("the whole stream", || {
        if at < stream.len() {
            match (&peer).write(&stream[at..at + 247]) {
                Ok(_) => at += 247,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        t.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
        got.extend(received(&events, conn));
        events.clear();
        (got.len() >= stream.len()).then_some(())
    });
    assert!(got == stream, "{backend:?}: the stream changed");
}
