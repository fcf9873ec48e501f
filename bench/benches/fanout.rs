//! DESIGN.md §2 (a `Bytes` sent to many subscribers is not copied once per
//! subscriber): one event of 1 KiB and one of 16 KiB fanned out to 1000
//! loopback TCP connections of one driver, with `send` (copied into each
//! connection's pool chunks) against `send_shared` (queued by reference),
//! on io_uring and on epoll, in the same run.
//!
//! Two figures per case, both CPU time of the one thread that drives the
//! sending and the receiving driver (the kernel's loopback work, which
//! runs in the sender's system calls, included; wall time on a shared
//! machine would measure the neighbours):
//! - `queue`: the 1000 send calls alone (the fan-out loop's own cost);
//! - `deliver`: the 1000 send calls, then polling until the receiver has
//!   every byte (the whole cost of a delivery).
//!
//! Run: `cargo bench -p dtp-bench --bench fanout`.
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
const SIZES: [usize; 2] = [1024, 16 * 1024];

fn config(backend: BackendPreference) -> DriverConfig {
    DriverConfig {
        backend,
        chunk_size: 16 * 1024,
        recv_buffers: 64,
        // One chunk per connection for the copying `send` of either size.
        send_chunks: 2 * N as u32,
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

    /// Sends `event` to every connection, copied or shared.
    fn queue(&mut self, event: &Bytes, shared: bool) {
        for &conn in &self.conns {
            if shared {
                self.sender.send_shared(conn, event).unwrap();
            } else {
                self.sender.send(conn, event).unwrap();
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

/// CPU time this thread has used (the scheduler's figure, in ns; read
/// from procfs so the benchmark needs no unsafe code).
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
        for size in SIZES {
            let event = Bytes::from((0..size).map(|i| i as u8).collect::<Vec<u8>>());
            let mut group = c.benchmark_group(format!("fanout_{}k_x{N}/{name}", size / 1024));
            group.throughput(Throughput::Elements(N as u64));
            group.sample_size(10);
            group.warm_up_time(Duration::from_millis(300));
            group.measurement_time(Duration::from_secs(2));
            for (mode, shared) in [("send", false), ("send_shared", true)] {
                group.bench_function(BenchmarkId::new("queue", mode), |b| {
                    b.iter_custom(|iters| {
                        let mut cpu = Duration::ZERO;
                        for _ in 0..iters {
                            let start = thread_cpu();
                            pair.queue(&event, shared);
                            cpu += thread_cpu() - start;
                            pair.deliver(N * size);
                        }
                        cpu
                    });
                });
                group.bench_function(BenchmarkId::new("deliver", mode), |b| {
                    b.iter_custom(|iters| {
                        let start = thread_cpu();
                        for _ in 0..iters {
                            pair.queue(&event, shared);
                            pair.deliver(N * size);
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
