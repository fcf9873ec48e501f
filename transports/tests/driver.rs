//! The IO driver's contract, run against both backends: bytes arrive
//! unaltered and in order (TRN-5), sends never block and a full queue is
//! backpressure (TRN-2), connection state changes are reported (TRN-3), and
//! receive memory is shared by the core, not held by idle connections.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dtp_transports::{
    BackendKind, BackendPreference, CloseReason, ConnId, Driver, DriverConfig, Endpoint, Event,
    SendError, Transport,
};

fn config(backend: BackendPreference) -> DriverConfig {
    DriverConfig {
        backend,
        chunk_size: 16 * 1024,
        recv_buffers: 16,
        send_chunks: 64,
        max_send_queue: 256 * 1024,
        ..DriverConfig::default()
    }
}

fn backends() -> [BackendPreference; 2] {
    [BackendPreference::Uring, BackendPreference::Epoll]
}

fn driver(cfg: DriverConfig) -> Driver {
    let want = cfg.backend;
    let d = Driver::new(cfg).unwrap();
    let kind = if want == BackendPreference::Epoll {
        BackendKind::Epoll
    } else {
        BackendKind::Uring
    };
    assert_eq!(d.backend().kind, kind);
    d
}

/// Polls both drivers until `done` says so (or a generous deadline passes:
/// a hang is a failure, not a timing assertion).
fn pump(a: &mut Driver, b: &mut Driver, mut on: impl FnMut(u8, &mut Driver, Event) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "no progress within 30 s");
        for (side, d) in [(0u8, &mut *a), (1u8, &mut *b)] {
            d.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
            for e in events.drain(..) {
                if on(side, d, e) {
                    return;
                }
            }
        }
    }
}

fn listen(d: &mut Driver) -> Endpoint {
    let any = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
    d.listen(&any, false).unwrap().1
}

#[test]
fn trn5_echo_delivers_every_byte_unaltered_in_order() {
    for backend in backends() {
        let mut server = driver(config(backend));
        let mut client = driver(config(backend));
        let addr = listen(&mut server);
        let conn = client.connect(&addr).unwrap();
        // 2 MiB of a pattern that shows reordering or corruption, sent in
        // pieces of varied sizes, some larger than a chunk.
        let payload: Vec<u8> = (0..2 * 1024 * 1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let mut sent = 0;
        let mut got = Vec::with_capacity(payload.len());
        let mut sizes = [1usize, 7, 100, 4096, 16 * 1024 + 3, 50_000]
            .into_iter()
            .cycle();
        pump(&mut server, &mut client, |side, d, e| {
            match (side, e) {
                (0, Event::Received { conn, data }) => {
                    d.send(conn, &data).unwrap();
                }
                (1, Event::Received { data, .. }) => {
                    got.extend_from_slice(&data[..]);
                }
                _ => {}
            }
            if side == 1 {
                while sent < payload.len() {
                    let n = sizes.next().unwrap().min(payload.len() - sent);
                    match d.send(conn, &payload[sent..sent + n]) {
                        Ok(()) => sent += n,
                        Err(SendError::BufferFull) => break,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            got.len() == payload.len()
        });
        assert!(got == payload, "{backend:?}: echoed bytes differ");
        // The queue held several chunks at times: they went out gathered
        // (one sendmsg over several chunks), partial sends included.
        assert!(client.stats().gathered_sends > 0, "{backend:?}");
    }
}

#[test]
fn trn2_a_full_send_queue_is_backpressure_then_writable() {
    for backend in backends() {
        let mut server = driver(config(backend));
        let mut client = driver(DriverConfig {
            max_send_queue: 64 * 1024,
            ..config(backend)
        });
        let addr = listen(&mut server);
        let conn = client.connect(&addr).unwrap();
        let block = vec![0xab; 16 * 1024];
        // Without polling nothing leaves: the fifth block does not fit.
        for _ in 0..4 {
            client.send(conn, &block).unwrap();
        }
        assert_eq!(client.send(conn, &block), Err(SendError::BufferFull));
        assert_eq!(client.queued(conn), 64 * 1024);
        let mut received = 0;
        let mut writable = false;
        pump(&mut server, &mut client, |side, _, e| {
            match (side, e) {
                (0, Event::Received { data, .. }) => {
                    received += data.len();
                }
                (1, Event::Writable { conn: c }) => {
                    assert_eq!(c, conn);
                    writable = true;
                }
                _ => {}
            }
            writable && received == 64 * 1024
        });
        client.send(conn, &block).unwrap();
    }
}

#[test]
fn trn3_close_is_reported_to_both_sides_and_ids_die() {
    for backend in backends() {
        let mut server = driver(config(backend));
        let mut client = driver(config(backend));
        let addr = listen(&mut server);
        let conn = client.connect(&addr).unwrap();
        let mut server_conn = None;
        let mut connected = false;
        pump(&mut server, &mut client, |side, _, e| {
            match (side, e) {
                (0, Event::Accepted { conn, .. }) => server_conn = Some(conn),
                (1, Event::Connected { conn: c }) => connected = c == conn,
                _ => {}
            }
            connected && server_conn.is_some()
        });
        client.send(conn, b"last words").unwrap();
        client.close(conn);
        assert!(matches!(
            client.send(conn, b"more"),
            Err(SendError::Closed | SendError::UnknownConnection)
        ));
        let (mut client_closed, mut server_closed, mut got) = (false, false, Vec::new());
        pump(&mut server, &mut client, |side, _, e| {
            match (side, e) {
                (0, Event::Received { data, .. }) => {
                    got.extend_from_slice(&data[..]);
                }
                (0, Event::Closed { conn: c, reason }) => {
                    assert_eq!(Some(c), server_conn);
                    assert_eq!(reason, CloseReason::PeerClosed);
                    server_closed = true;
                }
                (1, Event::Closed { conn: c, reason }) => {
                    assert_eq!((c, reason), (conn, CloseReason::Local));
                    client_closed = true;
                }
                _ => {}
            }
            client_closed && server_closed
        });
        assert_eq!(
            got, b"last words",
            "{backend:?}: queued bytes are sent before the close"
        );
        assert_eq!(client.send(conn, b"x"), Err(SendError::UnknownConnection));
        assert_eq!(
            server.send(server_conn.unwrap(), b"x"),
            Err(SendError::UnknownConnection)
        );
        assert_eq!(server.stats().connections, 0);
    }
}

#[test]
fn trn3_refused_connect_is_reported() {
    for backend in backends() {
        let mut probe = driver(config(backend));
        let addr = listen(&mut probe);
        drop(probe); // nothing listens there any more
        let mut client = driver(config(backend));
        let mut other = driver(config(backend));
        let conn = client.connect(&addr).unwrap();
        pump(&mut other, &mut client, |side, _, e| match (side, e) {
            (
                1,
                Event::Closed {
                    conn: c,
                    reason: CloseReason::ConnectFailed(errno),
                },
            ) => {
                assert_eq!(c, conn);
                assert_eq!(errno, libc_econnrefused());
                true
            }
            (1, Event::Connected { .. }) => panic!("{backend:?}: connected to a closed port"),
            _ => false,
        });
    }
}

fn libc_econnrefused() -> i32 {
    std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
        .raw_os_error()
        .unwrap_or(111)
}

#[test]
fn a_waker_wakes_a_blocked_poll_from_another_thread() {
    for backend in backends() {
        let mut d = driver(config(backend));
        let waker = d.waker();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            waker.wake().unwrap();
        });
        let mut events = Vec::new();
        let start = Instant::now();
        while !events.iter().any(|e| matches!(e, Event::Woken)) {
            assert!(start.elapsed() < Duration::from_secs(30));
            d.poll(&mut events, None).unwrap();
        }
        t.join().unwrap();
    }
}

#[test]
fn many_senders_share_few_receive_buffers_without_loss() {
    // 2 receive buffers for 32 connections that all send at once: receives
    // starve (ENOBUFS on io_uring) and resume as buffers come back.
    for backend in backends() {
        let mut server = driver(DriverConfig {
            recv_buffers: 2,
            ..config(backend)
        });
        let mut client = driver(DriverConfig {
            send_chunks: 256,
            ..config(backend)
        });
        let addr = listen(&mut server);
        let conns: Vec<ConnId> = (0..32).map(|_| client.connect(&addr).unwrap()).collect();
        let per_conn = 100_000usize;
        for (i, c) in conns.iter().enumerate() {
            let data: Vec<u8> = (0..per_conn).map(|j| (i + j) as u8).collect();
            client.send(*c, &data).unwrap();
        }
        let mut got: HashMap<ConnId, Vec<u8>> = HashMap::new();
        let mut total = 0;
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Received { conn, data }) = (side, e) {
                total += data.len();
                got.entry(conn).or_default().extend_from_slice(&data[..]);
            }
            total == 32 * per_conn
        });
        assert_eq!(got.len(), 32);
        // Starved receives are re-armed only as buffers come back (at most
        // two a poll here), not all of them at every poll: each starved
        // connection's first ENOBUFS, then at most one per buffer a poll.
        let s = server.stats();
        if backend == BackendPreference::Uring {
            assert!(s.recv_starved > 0, "no receive starved: {s:?}");
            assert!(s.recv_starved <= 32 + 2 * s.enters, "{s:?}");
        }
        for data in got.values() {
            let first = data[0] as usize;
            assert!(
                data.iter()
                    .enumerate()
                    .all(|(j, b)| *b == (first + j) as u8),
                "{backend:?}: bytes reordered"
            );
        }
    }
}

/// Closing many connections at once cancels each one's pending receive
/// by its own user data: no close walks every pending operation of the
/// ring (which made a wave of n closes cost n², seconds at 10,000).
#[test]
fn a_wave_of_closes_cancels_without_walking_the_ring() {
    let mut server = driver(config(BackendPreference::Uring));
    let mut client = driver(config(BackendPreference::Uring));
    let addr = listen(&mut server);
    for _ in 0..300 {
        client.connect(&addr).unwrap();
    }
    let mut accepted = Vec::new();
    pump(&mut server, &mut client, |side, _, e| {
        if let (0, Event::Accepted { conn, .. }) = (side, e) {
            accepted.push(conn);
        }
        accepted.len() == 300
    });
    // Every accepted connection has its multishot receive armed.
    for conn in &accepted {
        server.close(*conn);
    }
    let mut closed = 0;
    pump(&mut server, &mut client, |side, _, e| {
        if let (0, Event::Closed { .. }) = (side, e) {
            closed += 1;
        }
        closed == 300
    });
    assert_eq!(server.stats().connections, 0);
    assert_eq!(server.stats().cancel_walks, 0, "{:?}", server.stats());
}

#[test]
fn idle_connections_hold_no_buffers() {
    for backend in backends() {
        let mut server = driver(config(backend));
        let mut client = driver(config(backend));
        let addr = listen(&mut server);
        let before = server.region().unwrap().report();
        for _ in 0..200 {
            client.connect(&addr).unwrap();
        }
        let mut accepted = 0;
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Accepted { .. }) = (side, e) {
                accepted += 1;
            }
            accepted == 200
        });
        let after = server.region().unwrap().report();
        assert_eq!(server.stats().connections, 200);
        assert_eq!(after.live_data, before.live_data, "{backend:?}");
        assert_eq!(after.chunks_used, before.chunks_used, "{backend:?}");
    }
}

#[test]
fn dtp_io_backend_selects_epoll_and_auto_prefers_io_uring() {
    let d = Driver::new(DriverConfig {
        backend: BackendPreference::Auto,
        ..config(BackendPreference::Auto)
    })
    .unwrap();
    // This machine has io_uring; the reason says why either way.
    assert!(!d.backend().reason.is_empty());
    assert!(matches!(
        d.backend().kind,
        BackendKind::Uring | BackendKind::Epoll
    ));
}

#[test]
fn paused_reading_backpressures_the_sender_and_loses_nothing() {
    for backend in backends() {
        let mut server = driver(config(backend));
        let mut client = driver(config(backend));
        let addr = listen(&mut server);
        let conn = client.connect(&addr).unwrap();
        let mut server_conn = None;
        pump(&mut server, &mut client, |side, d, e| {
            if let (0, Event::Accepted { conn, .. }) = (side, e) {
                d.pause_reading(conn);
                server_conn = Some(conn);
            }
            server_conn.is_some()
        });
        // Send until the client's queue refuses: the paused server reads
        // nothing, the kernel buffers fill, and backpressure reaches the producer.
        let block = vec![7u8; 16 * 1024];
        let (mut sent, mut received) = (0usize, 0usize);
        let mut events = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: the sender was never refused"
            );
            match client.send(conn, &block) {
                Ok(()) => sent += block.len(),
                Err(SendError::BufferFull) => break,
                Err(e) => panic!("{e}"),
            }
            for d in [&mut client, &mut server] {
                d.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
                for e in events.drain(..) {
                    if let Event::Received { data, .. } = e {
                        received += data.len(); // taken before the pause landed
                    }
                }
            }
        }
        assert!(
            sent >= 256 * 1024,
            "{backend:?}: refused after only {sent} bytes"
        );
        server.resume_reading(server_conn.unwrap());
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Received { data, .. }) = (side, e) {
                assert!(&data[..].iter().all(|b| *b == 7));
                received += data.len();
            }
            received == sent
        });
    }
}

#[test]
fn send_zc_delivers_every_byte_unaltered_and_frees_chunks_after_the_notification() {
    // Every send zero-copy (threshold 1): the chunk must stay leased until the
    // kernel's notification, and the bytes must arrive as sent.
    let mut server = driver(config(BackendPreference::Uring));
    let mut client = driver(DriverConfig {
        send_zc_threshold: 1,
        ..config(BackendPreference::Uring)
    });
    let addr = listen(&mut server);
    let conn = client.connect(&addr).unwrap();
    let payload: Vec<u8> = (0..1024 * 1024u32).map(|i| (i * 31 % 251) as u8).collect();
    let (mut sent, mut got) = (0usize, Vec::new());
    pump(&mut server, &mut client, |side, d, e| {
        if let (0, Event::Received { data, .. }) = (side, e) {
            got.extend_from_slice(&data[..]);
        }
        if side == 1 {
            while sent < payload.len() {
                let n = 20_000.min(payload.len() - sent);
                match d.send(conn, &payload[sent..sent + n]) {
                    Ok(()) => sent += n,
                    Err(SendError::BufferFull) => break,
                    Err(e) => panic!("{e}"),
                }
            }
        }
        got.len() == payload.len()
    });
    assert!(got == payload);
    assert!(client.stats().zc_sends > 0);
    // Everything was sent and notified: no send chunk is still held.
    let before = client.region().unwrap().report().chunks_used;
    let mut events = Vec::new();
    for _ in 0..10 {
        client
            .poll(&mut events, Some(Duration::from_millis(1)))
            .unwrap();
    }
    assert_eq!(client.queued(conn), 0);
    assert!(client.region().unwrap().report().chunks_used <= before);
}

/// A server with only four receive buffers and a client that has sent it
/// `payload`: if lent chunks never came back, the transfer would stall for
/// want of buffers.
fn four_buffer_transfer(backend: BackendPreference) -> (Driver, Driver, Vec<u8>) {
    let mut server = driver(DriverConfig {
        recv_buffers: 4,
        ..config(backend)
    });
    let mut client = driver(DriverConfig {
        max_send_queue: 1 << 20,
        send_chunks: 128,
        ..config(backend)
    });
    let addr = listen(&mut server);
    let conn = client.connect(&addr).unwrap();
    let payload: Vec<u8> = (0..600_000u32).map(|i| (i % 241) as u8).collect();
    client.send(conn, &payload).unwrap();
    (server, client, payload)
}

/// A thread that keeps the last `n` pieces it is sent a while, then drops
/// them: chunks come back from another thread.
fn keeper(
    n: usize,
) -> (
    std::sync::mpsc::Sender<bytes::Bytes>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<bytes::Bytes>();
    let handle = std::thread::spawn(move || {
        let mut held = Vec::new();
        for b in rx {
            held.push(b);
            if held.len() > n {
                held.remove(0);
            }
        }
    });
    (tx, handle)
}

#[test]
fn received_chunks_lent_as_bytes_come_back_when_dropped_on_any_thread() {
    for backend in backends() {
        let (mut server, mut client, payload) = four_buffer_transfer(backend);
        let mut got = Vec::new();
        let (tx, keeper) = keeper(1);
        let mut last = None;
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Received { data, .. }) = (side, e) {
                let b = dtp_codec::FrameBuf::freeze(data);
                got.extend_from_slice(&b);
                tx.send(b.clone()).unwrap();
                last = Some(b);
            }
            got.len() == payload.len()
        });
        drop(tx);
        keeper.join().unwrap();
        assert!(got == payload, "{backend:?}");
        // A Bytes may outlive its driver: the memory stays mapped and intact.
        drop(server);
        let last = last.unwrap();
        let tail = &payload[payload.len() - last.len()..];
        assert_eq!(&last[..], tail);
    }
}

/// SPEC ENC-2's decryption in place, at the transport: a received chunk
/// lent as a `RecvBuf` is modified where the kernel wrote it, split into
/// pieces, frozen, and the chunk still comes back once every piece is
/// dropped (here on another thread), so a small receive pool never stalls.
#[test]
fn received_chunks_lent_mutably_are_modified_in_place_and_come_back() {
    use dtp_codec::FrameBuf;
    for backend in backends() {
        let (mut server, mut client, payload) = four_buffer_transfer(backend);
        let mut got = Vec::new();
        let mut lent = 0usize;
        let (tx, keeper) = keeper(2);
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Received { data, .. }) = (side, e) {
                let mut buf = data;
                lent += usize::from(buf.is_lent());
                let before = buf.as_ptr();
                // "Decrypt": flip every byte in place, then split in two.
                for b in buf.iter_mut() {
                    *b ^= 0xff;
                }
                let head = buf.split_to(buf.len() / 2);
                assert_eq!(head.as_ptr(), before, "in place, no copy");
                for piece in [head, buf] {
                    let frozen = piece.freeze();
                    got.extend(frozen.iter().map(|b| b ^ 0xff));
                    tx.send(frozen).unwrap();
                }
            }
            got.len() == payload.len()
        });
        drop(tx);
        keeper.join().unwrap();
        assert!(got == payload, "{backend:?}");
        assert!(lent > 0, "{backend:?}: no chunk was lent");
    }
}

#[test]
fn a_connect_that_hangs_fails_with_etimedout_after_the_timeout() {
    // A listener that never accepts, with its backlog filled: the kernel
    // drops further SYNs, so a new connect hangs until our timeout.
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_nonblocking(true).unwrap();
        let _ = s.connect(&addr.into());
        fillers.push(s);
    }
    for backend in backends() {
        let cfg = DriverConfig {
            connect_timeout: Duration::from_millis(300),
            ..config(backend)
        };
        let mut client = driver(cfg);
        let mut other = driver(config(backend));
        let conn = client.connect(&Endpoint::Tcp(addr)).unwrap();
        pump(&mut other, &mut client, |side, _, e| match (side, e) {
            (1, Event::Closed { conn: c, reason }) => {
                assert_eq!(c, conn);
                assert_eq!(
                    reason,
                    CloseReason::ConnectFailed(libc_etimedout()),
                    "{backend:?}"
                );
                true
            }
            (1, Event::Connected { .. }) => panic!("{backend:?}: connected to a full backlog"),
            _ => false,
        });
        assert_eq!(client.stats().connections, 0);
    }
}

fn libc_etimedout() -> i32 {
    std::io::Error::from(std::io::ErrorKind::TimedOut)
        .raw_os_error()
        .unwrap_or(110)
}

/// SPEC TRN-2, MEM-4: a connection that queues without end (its peer never
/// reads) takes at most seven eighths of the core's send chunks; the
/// reserve left stays for connections that hold few, so another
/// connection can still queue its reply. Once bytes drain, the refused
/// connection hears it may send again.
#[test]
fn trn2_one_hog_cannot_take_the_send_chunks_every_connection_needs() {
    const CHUNK: usize = 16 * 1024;
    for backend in backends() {
        let mut server = driver(config(backend));
        let mut client = driver(DriverConfig {
            send_chunks: 16,
            max_send_queue: 1 << 20,
            ..config(backend)
        });
        let addr = listen(&mut server);
        let (hog, other) = (
            client.connect(&addr).unwrap(),
            client.connect(&addr).unwrap(),
        );
        let mut connected = 0;
        pump(&mut server, &mut client, |side, _, e| {
            if let (1, Event::Connected { .. }) = (side, e) {
                connected += 1;
            }
            connected == 2
        });
        let piece = vec![0xA5u8; CHUNK];
        let mut hog_chunks = 0;
        while client.send(hog, &piece).is_ok() {
            hog_chunks += 1;
            assert!(
                hog_chunks <= 16,
                "{backend:?}: more chunks than the pool has"
            );
        }
        assert_eq!(
            hog_chunks, 14,
            "{backend:?}: the reserve (2 of 16) is kept back"
        );
        assert!(client.stats().send_reserve_refusals >= 1, "{backend:?}");
        // The other connection takes its share from the reserve, then the
        // pool is empty.
        client.send(other, &piece).unwrap();
        client.send(other, &piece).unwrap();
        assert_eq!(client.send(other, &piece), Err(SendError::BufferFull));
        // Draining gives the hog its room back.
        let mut received = 0;
        let mut writable = false;
        pump(&mut server, &mut client, |side, _, e| {
            match (side, e) {
                (0, Event::Received { data, .. }) => received += data.len(),
                (1, Event::Writable { conn }) if conn == hog => writable = true,
                _ => {}
            }
            writable && received == 16 * CHUNK
        });
        client.send(hog, &piece).unwrap();
    }
}

/// SPEC TRN-1: with `bind_sources`, outgoing TCP connections come from
/// those addresses in turn (a load generator's way past one address's
/// ephemeral ports); a destination of another family gets the kernel's
/// choice.
#[test]
fn trn1_connections_come_from_the_bind_sources_in_turn() {
    for backend in backends() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to = Endpoint::Tcp(listener.local_addr().unwrap());
        let sources: Vec<std::net::IpAddr> = ["127.0.0.2", "127.0.0.3", "::1"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let mut client = driver(DriverConfig {
            bind_sources: sources,
            ..config(backend)
        });
        for _ in 0..4 {
            client.connect(&to).unwrap();
        }
        let mut up = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut events = Vec::new();
        while up < 4 {
            assert!(Instant::now() < deadline, "{backend:?}: not connected");
            client
                .poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Connected { .. } => up += 1,
                    Event::Closed { reason, .. } => panic!("{backend:?}: {reason:?}"),
                    _ => {}
                }
            }
        }
        let mut from: Vec<String> = (0..4)
            .map(|_| listener.accept().unwrap().1.ip().to_string())
            .collect();
        from.sort();
        assert_eq!(
            from,
            ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"],
            "{backend:?}"
        );
    }
}
