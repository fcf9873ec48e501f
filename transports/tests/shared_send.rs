//! `send_shared` on both socket backends: a `Bytes` sent to many
//! connections is queued by reference (no copy in user space), arrives
//! unaltered and in order among owned sends, counts against each
//! connection's budget like `send` (TRN-2), is reported while queued
//! (MEM-3), and is released once sent, or when its connection closes or is
//! reset.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_transports::{
    BackendPreference, CloseReason, ConnId, Driver, DriverConfig, Endpoint, Event, SendError,
    Transport,
};

const CHUNK: u32 = 16 * 1024;

fn config(backend: BackendPreference) -> DriverConfig {
    DriverConfig {
        backend,
        chunk_size: CHUNK,
        recv_buffers: 16,
        send_chunks: 256,
        max_send_queue: 256 * 1024,
        ..DriverConfig::default()
    }
}

/// Both backends, and io_uring with every send zero-copy (a shared segment
/// must then live until the kernel's notification).
fn configs() -> [DriverConfig; 3] {
    [
        config(BackendPreference::Uring),
        config(BackendPreference::Epoll),
        DriverConfig {
            send_zc_threshold: 1,
            ..config(BackendPreference::Uring)
        },
    ]
}

/// The memory of a shared `Bytes`, which counts its drops: it is dropped
/// once, when the caller's handle and every queued clone are gone.
struct Counted {
    data: Vec<u8>,
    drops: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(len: usize, seed: u32) -> (Bytes, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    let data = (0..len as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let bytes = Bytes::from_owner(Counted {
        data,
        drops: drops.clone(),
    });
    (bytes, drops)
}

/// Polls both drivers until `on` says so (or a generous deadline passes:
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

/// `n` client connections to a server, all accepted and connected; the
/// server's ids in the client's order is not known, so the server side is
/// returned as a set.
fn connected(server: &mut Driver, client: &mut Driver, n: usize) -> Vec<ConnId> {
    let any = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
    let addr = server.listen(&any, false).unwrap().1;
    let conns: Vec<ConnId> = (0..n).map(|_| client.connect(&addr).unwrap()).collect();
    let (mut accepted, mut up) = (0, 0);
    pump(server, client, |side, _, e| {
        match (side, e) {
            (0, Event::Accepted { .. }) => accepted += 1,
            (1, Event::Connected { .. }) => up += 1,
            _ => {}
        }
        accepted == n && up == n
    });
    conns
}

/// Polls `d` until every shared segment it queued was sent (the bytes may
/// have arrived before the sends' completions are taken).
fn drain_shared(d: &mut Driver) {
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.stats().shared_bytes_queued > 0 {
        assert!(Instant::now() < deadline, "sends never completed");
        d.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
    }
}

fn chunks_used(d: &Driver) -> u64 {
    d.region().unwrap().report().chunks_used
}

#[test]
fn one_bytes_fanned_out_arrives_everywhere_in_order_and_is_not_copied() {
    const N: usize = 20;
    for cfg in configs() {
        let what = format!("{:?} zc {}", cfg.backend, cfg.send_zc_threshold);
        let mut server = Driver::new(cfg.clone()).unwrap();
        let mut client = Driver::new(cfg).unwrap();
        let conns = connected(&mut server, &mut client, N);
        let (small, small_drops) = counted(100, 1);
        let (big, big_drops) = counted(CHUNK as usize + 3, 2);
        let chunks_before = chunks_used(&client);
        let mut expected = HashMap::new();
        for (i, &conn) in conns.iter().enumerate() {
            let head = format!("head {i}:");
            let tail = format!(":tail {i}");
            // To an empty queue: by reference.
            client.send_shared(conn, &small).unwrap();
            // Owned: copied into a fresh chunk (the tail is shared).
            client.send(conn, head.as_bytes()).unwrap();
            // Small, behind queued bytes: copied into that chunk's room.
            client.send_shared(conn, &small).unwrap();
            // Large: by reference, twice, around an owned send.
            client.send_shared(conn, &big).unwrap();
            client.send(conn, tail.as_bytes()).unwrap();
            client.send_shared(conn, &big).unwrap();
            let mut want = small.to_vec();
            want.extend_from_slice(head.as_bytes());
            want.extend_from_slice(&small);
            want.extend_from_slice(&big);
            want.extend_from_slice(tail.as_bytes());
            want.extend_from_slice(&big);
            assert_eq!(
                client.queued(conn),
                want.len(),
                "{what}: the budget counts it"
            );
            // The server tells the streams apart by their head line.
            expected.insert(i, want);
        }
        let stats = client.stats();
        assert_eq!(stats.shared_sends, 3 * N as u64, "{what}");
        assert_eq!(
            stats.shared_bytes_queued,
            (N * (small.len() + 2 * big.len())) as u64,
            "{what}: the queued shared memory is reported"
        );
        // Only the owned sends took pool chunks: one each; a copy of the
        // large Bytes would have taken two more per send.
        assert_eq!(
            chunks_used(&client) - chunks_before,
            2 * N as u64 * u64::from(CHUNK),
            "{what}"
        );
        // The queues hold the memory: dropping the caller's handles frees
        // nothing yet.
        drop((small, big));
        assert_eq!(small_drops.load(Ordering::SeqCst), 0, "{what}");
        assert_eq!(big_drops.load(Ordering::SeqCst), 0, "{what}");
        let total: usize = expected.values().map(Vec::len).sum();
        let mut got: HashMap<ConnId, Vec<u8>> = HashMap::new();
        let mut received = 0;
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Received { conn, data }) = (side, e) {
                received += data.len();
                got.entry(conn).or_default().extend_from_slice(&data);
            }
            received == total
        });
        assert_eq!(got.len(), N, "{what}");
        for stream in got.values() {
            let head = &stream[100 + "head ".len()..];
            let end = head.iter().position(|&b| b == b':').unwrap();
            let i: usize = std::str::from_utf8(&head[..end]).unwrap().parse().unwrap();
            assert!(stream == &expected[&i], "{what}: stream {i} differs");
        }
        // Once every send completed, the clones are gone and the memory
        // is released, once.
        drain_shared(&mut client);
        assert_eq!(small_drops.load(Ordering::SeqCst), 1, "{what}");
        assert_eq!(big_drops.load(Ordering::SeqCst), 1, "{what}");
        assert_eq!(chunks_used(&client), chunks_before, "{what}");
    }
}

#[test]
fn trn2_shared_sends_keep_the_budget_and_are_never_refused_for_chunks() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let mut server = Driver::new(config(backend)).unwrap();
        let mut client = Driver::new(DriverConfig {
            max_send_queue: 64 * 1024,
            // One send chunk for the whole core.
            send_chunks: 1,
            ..config(backend)
        })
        .unwrap();
        let conns = connected(&mut server, &mut client, 2);
        let (a, b) = (conns[0], conns[1]);
        let (block, drops) = counted(16 * 1024, 3);
        // `a` takes the core's only chunk; `b` cannot copy any more bytes.
        client.send(a, b"x").unwrap();
        assert_eq!(client.send(b, b"y"), Err(SendError::BufferFull));
        // Shared bytes need no chunk: queued, small ones too.
        client.send_shared(b, &block.slice(..10)).unwrap();
        client.send_shared(b, &block.slice(..10)).unwrap();
        for _ in 0..3 {
            client.send_shared(b, &block).unwrap();
        }
        // The budget is all or nothing, as for `send`.
        let room = 64 * 1024 - client.queued(b);
        assert_eq!(room, 16 * 1024 - 20);
        assert_eq!(client.send_shared(b, &block), Err(SendError::BufferFull));
        assert_eq!(client.queued(b), 64 * 1024 - room);
        client.send_shared(b, &block.slice(..room)).unwrap();
        assert_eq!(client.queued(b), 64 * 1024);
        assert_eq!(
            client.send_shared(b, &block.slice(..1)),
            Err(SendError::BufferFull)
        );
        // Writable at half, after the refusal, as for `send`.
        let (mut received, mut writable) = (0, false);
        pump(&mut server, &mut client, |side, _, e| {
            match (side, e) {
                (0, Event::Received { data, .. }) => received += data.len(),
                (1, Event::Writable { conn }) if conn == b => writable = true,
                _ => {}
            }
            writable && received == 64 * 1024 + 1
        });
        client.send_shared(b, &block).unwrap();
        drop(block);
        client.close(b);
        pump(
            &mut server,
            &mut client,
            |side, _, e| matches!((side, e), (1, Event::Closed { conn, reason: CloseReason::Local }) if conn == b),
        );
        assert_eq!(drops.load(Ordering::SeqCst), 1, "{backend:?}");
        assert_eq!(client.stats().shared_bytes_queued, 0, "{backend:?}");
    }
}

#[test]
fn a_reset_connection_releases_its_queued_shared_bytes() {
    for cfg in configs() {
        let what = format!("{:?} zc {}", cfg.backend, cfg.send_zc_threshold);
        let mut server = Driver::new(cfg.clone()).unwrap();
        let mut client = Driver::new(cfg).unwrap();
        let any = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let addr = server.listen(&any, false).unwrap().1;
        let conn = client.connect(&addr).unwrap();
        pump(&mut server, &mut client, |side, d, e| match (side, e) {
            (0, Event::Accepted { conn, .. }) => {
                d.pause_reading(conn);
                true
            }
            _ => false,
        });
        // Send until the queue refuses: the paused server reads nothing,
        // the kernel buffers fill, and shared segments stay queued.
        let (block, drops) = counted(16 * 1024, 4);
        let mut events = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "{what}: never refused");
            match client.send_shared(conn, &block) {
                Ok(()) => {}
                Err(SendError::BufferFull) => break,
                Err(e) => panic!("{what}: {e}"),
            }
            for d in [&mut client, &mut server] {
                d.poll(&mut events, Some(Duration::from_millis(1))).unwrap();
                events.clear();
            }
        }
        drop(block);
        assert!(client.stats().shared_bytes_queued > 0, "{what}");
        // Closing with unread bytes resets the connection.
        drop(server);
        let deadline = Instant::now() + Duration::from_secs(30);
        let reason = 'closed: loop {
            assert!(Instant::now() < deadline, "{what}: the reset was not seen");
            client
                .poll(&mut events, Some(Duration::from_millis(1)))
                .unwrap();
            for e in events.drain(..) {
                if let Event::Closed { conn: c, reason } = e {
                    assert_eq!(c, conn);
                    break 'closed reason;
                }
            }
        };
        assert!(
            matches!(reason, CloseReason::Error(_)),
            "{what}: {reason:?}"
        );
        assert_eq!(client.stats().shared_bytes_queued, 0, "{what}");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "{what}: released once");
    }
}

#[test]
fn large_shared_bytes_go_out_over_partial_sends_unaltered() {
    for cfg in configs() {
        let what = format!("{:?} zc {}", cfg.backend, cfg.send_zc_threshold);
        let cfg = DriverConfig {
            max_send_queue: 4 * 1024 * 1024,
            ..cfg
        };
        let mut server = Driver::new(cfg.clone()).unwrap();
        let mut client = Driver::new(cfg).unwrap();
        let conns = connected(&mut server, &mut client, 3);
        // Larger than a socket buffer takes at once: the kernel takes each
        // in pieces, the rest stays queued at an offset.
        let (big, drops) = counted(1024 * 1024 + 7, 5);
        let mut want = Vec::new();
        for (i, &conn) in conns.iter().enumerate() {
            client.send(conn, &[i as u8; 3]).unwrap();
            client.send_shared(conn, &big).unwrap();
            client.send(conn, &[i as u8; 5]).unwrap();
            client.send_shared(conn, &big).unwrap();
        }
        want.extend_from_slice(&[0; 3]);
        want.extend_from_slice(&big);
        want.extend_from_slice(&[0; 5]);
        want.extend_from_slice(&big);
        drop(big);
        let mut got: HashMap<ConnId, Vec<u8>> = HashMap::new();
        let mut received = 0;
        pump(&mut server, &mut client, |side, _, e| {
            if let (0, Event::Received { conn, data }) = (side, e) {
                received += data.len();
                got.entry(conn).or_default().extend_from_slice(&data);
            }
            received == 3 * want.len()
        });
        for stream in got.values() {
            let i = stream[0];
            assert_eq!(stream.len(), want.len(), "{what}");
            assert!(stream[..3] == [i; 3], "{what}");
            assert!(
                stream[3..3 + (1 << 20) + 7] == want[3..3 + (1 << 20) + 7],
                "{what}"
            );
            let mid = 3 + (1 << 20) + 7;
            assert!(stream[mid..mid + 5] == [i; 5], "{what}");
            assert!(stream[mid + 5..] == want[mid + 5..], "{what}");
        }
        drain_shared(&mut client);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "{what}");
    }
}
