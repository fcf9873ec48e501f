//! DESIGN.md §2 (a `Bytes` sent to many subscribers is not copied once per
//! subscriber): one event of 1 KiB and one of 16 KiB fanned out to 1000
//! loopback TCP connections of one driver, with `send` (copied into each
//! connection's pool chunks) against `send_shared` (queued by reference),
//! on io_uring and on epoll, in the same run; and bursts of 64 × 256 B,
//! 64 × 512 B and 48 × 1 KiB events to each connection, the case in which
//! small shared sends behind queued bytes are copied (`SHARED_COPY_MAX`
//! in the transports' send queue) rather than take an iovec each.
//!
//! Two figures per case:
//! - `queue`: the 1000 send calls alone (the fan-out loop's own cost in
//!   user space). They make no system call and never wait, so their wall
//!   time is their CPU time (short enough that preemption is rare; the
//!   scheduler's per-thread figure is only updated at ticks);
//! - `deliver`: the 1000 send calls, then polling until the receiver has
//!   every byte: CPU time of the one thread that drives both drivers, the
//!   kernel's loopback work included (it runs in the sender's system
//!   calls), summed over the whole sample (many ticks). Wall time on a
//!   shared machine would measure the neighbours.
//!
//! Run: `cargo bench -p dtp-bench --bench fanout` (about 50 s; 2000 file
//! descriptors). One run on a 2-core VM, CPU per delivery, `send` →
//! `send_shared`: 1 KiB io_uring 10.4 → 9.2 µs, epoll 9.8 → 9.0 µs;
//! 16 KiB io_uring 12.7 → 10.9 µs, epoll 21.3 → 20.0 µs; the send calls
//! alone 212 → 21 ns (1 KiB) and 818 → 25 ns (16 KiB) on io_uring.
#![allow(
    missing_docs,
    reason = "criterion_group!/criterion_main! generate undocumented items"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmark setup: a failed driver or connection must abort it"
)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dtp_transports::{BackendPreference, ConnId, Driver, DriverConfig, Endpoint, Event, Transport};

/// Subscribers of the event.
const N: usize = 1000;
/// (name, event size, events in a row to each subscriber): one event of
/// each size, and a burst of small events, which a subscriber's queue holds
/// many of at once (as a slow subscriber's does).
const CASES: [(&str, usize, usize); 5] = [
    ("1k", 1024, 1),
    ("16k", 16 * 1024, 1),
    ("burst_64x256", 256, 64),
    ("burst_64x512", 512, 64),
    ("burst_48x1k", 1024, 48),
];

fn config(backend: BackendPreference) -> DriverConfig {
    DriverConfig {
        backend,
        chunk_size: 16 * 1024,
        recv_buffers: 64,
        // Chunks for the copying `send` of every case (48 KiB a connection).
        send_chunks: 4 * N as u32,
        max_connections: 2 * N,
        ..DriverConfig::default()
    }
}

/// A sending driver with `N` connections to a receiving one.
struct Pair {
    sender: Driver,
    receiver: Driver,
    conns: Vec<ConnId>,
    events: Vec<Event>,
}

impl Pair {
    fn new(backend: BackendPreference) -> Self {
        let mut receiver = Driver::new(config(backend)).unwrap();
        let sender = Driver::new(config(backend)).unwrap();
        let any = Endpoint::Tcp("127.0.0.1:0".parse().unwrap());
        let addr = receiver.listen(&any, false).unwrap().1;
        let mut pair = Self {
            conns: Vec::with_capacity(N),
            events: Vec::new(),
            sender,
            receiver,
        };
        let (mut accepted, mut connected) = (0, 0);
        // Connect in batches the listen backlog takes.
        while pair.conns.len() < N {
            for _ in 0..100.min(N - pair.conns.len()) {
                pair.conns.push(pair.sender.connect(&addr).unwrap());
            }
            let want = pair.conns.len();
            pair.pump(|side, e| {
                match (side, e) {
                    (0, Event::Accepted { .. }) => accepted += 1,
                    (1, Event::Connected { .. }) => connected += 1,
                    _ => {}
                }
                accepted == want && connected == want
            });
        }
        pair
    }

    /// Polls both drivers, feeding `on` every event, until it says done.
    fn pump(&mut self, mut on: impl FnMut(u8, &Event) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "no progress within 60 s");
            for (side, d) in [(0u8, &mut self.receiver), (1u8, &mut self.sender)] {
                d.poll(&mut self.events, Some(Duration::ZERO)).unwrap();
                let mut done = false;
                for e in self.events.drain(..) {
                    done |= on(side, &e);
                }
                if done {
                    return;
                }
            }
        }
    }

    /// Sends `event` `burst` times to every connection, copied or shared.
    fn queue(&mut self, event: &Bytes, burst: usize, shared: bool) {
        for &conn in &self.conns {
            for _ in 0..burst {
                if shared {
                    self.sender.send_shared(conn, event).unwrap();
                } else {
                    self.sender.send(conn, event).unwrap();
                }
            }
        }
    }

    /// Polls until the receiver has `bytes` bytes and every send completed
    /// (the next round starts on empty queues).
    fn deliver(&mut self, bytes: usize) {
        let mut received = 0usize;
        self.pump(|side, e| {
            if let (0, Event::Received { data, .. }) = (side, e) {
                received += data.len();
            }
            received >= bytes
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.conns.iter().any(|&c| self.sender.queued(c) > 0) {
            assert!(Instant::now() < deadline, "sends never completed");
            self.sender
                .poll(&mut self.events, Some(Duration::ZERO))
                .unwrap();
            self.events.clear();
        }
    }
}

/// CPU time this thread has used (the scheduler's figure, in ns, as of
/// its last tick or switch; read from procfs so the benchmark needs no
/// unsafe code).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat (Linux)");
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat starts with the time on CPU in ns");
    Duration::from_nanos(ns)
}

fn fanout(c: &mut Criterion) {
    for (backend, name) in [
        (BackendPreference::Uring, "io_uring"),
        (BackendPreference::Epoll, "epoll"),
    ] {
        let mut pair = Pair::new(backend);
        for (case, size, burst) in CASES {
            let event = Bytes::from((0..size).map(|i| i as u8).collect::<Vec<u8>>());
            let bytes = N * size * burst;
            let mut group = c.benchmark_group(format!("fanout_{case}_x{N}/{name}"));
            group.throughput(Throughput::Elements((N * burst) as u64));
            group.sample_size(10);
            group.warm_up_time(Duration::from_millis(200));
            group.measurement_time(Duration::from_secs(1));
            for (mode, shared) in [("send", false), ("send_shared", true)] {
                // The queueing cost of a burst is that of its events (see
                // the single-event cases); what a burst shows is delivery.
                if burst == 1 {
                    group.bench_function(BenchmarkId::new("queue", mode), |b| {
                        b.iter_custom(|iters| {
                            let mut spent = Duration::ZERO;
                            for _ in 0..iters {
                                let start = Instant::now();
                                pair.queue(&event, burst, shared);
                                spent += start.elapsed();
                                pair.deliver(bytes);
                            }
                            spent
                        });
                    });
                }
                group.bench_function(BenchmarkId::new("deliver", mode), |b| {
                    b.iter_custom(|iters| {
                        let start = thread_cpu();
                        for _ in 0..iters {
                            pair.queue(&event, burst, shared);
                            pair.deliver(bytes);
                        }
                        thread_cpu() - start
                    });
                });
            }
            group.finish();
        }
    }
}

criterion_group!(benches, fanout);
criterion_main!(benches);
