//! DESIGN.md §1 control rings: throughput of one producer thread to one
//! consumer thread through `dtp_pool::spsc`, one item at a time and in
//! batches of 32, against `std::sync::mpsc::sync_channel` and
//! `crossbeam_channel::bounded` of the same capacity, in the same run.
//!
//! The item is a 32-byte message (the size of a small control request). Each
//! sample moves `iters` items; the time runs from a barrier both threads pass
//! to the consumer's last item, so thread start-up is not measured.
//!
//! Run: `cargo bench -p dtp-bench --bench ring`. Figures are recorded in
//! `perf/ring.md`.
#![allow(
    missing_docs,
    reason = "criterion_group!/criterion_main! generate undocumented items"
)]
#![allow(
    clippy::unwrap_used,
    reason = "benchmark setup: a failed ring creation or a dead peer thread must abort it"
)]

use std::hint::{black_box, spin_loop};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dtp_pool::{Full, spsc};

/// Slots in every queue under test.
const CAPACITY: usize = 1024;
/// Items per batch in the batched variants.
const BATCH: usize = 32;

/// A 32-byte message.
#[derive(Clone, Copy, Debug)]
struct Msg {
    seq: u64,
    a: u64,
    b: u64,
    c: u64,
}

impl Msg {
    fn new(seq: u64) -> Self {
        Self {
            seq,
            a: seq ^ 0x5A5A,
            b: !seq,
            c: seq.rotate_left(7),
        }
    }

    /// Reads every field, so the consumer touches the whole message.
    fn digest(&self) -> u64 {
        self.seq ^ self.a ^ self.b ^ self.c
    }
}

const _: () = assert!(size_of::<Msg>() == 32);

/// What a side does when the queue is full or empty: spin briefly, then
/// yield (the benchmark machine has two cores shared with other work, so a
/// side that only spins can starve its peer).
struct Backoff(u32);

impl Backoff {
    fn new() -> Self {
        Self(0)
    }

    fn wait(&mut self) {
        self.0 += 1;
        if self.0.is_multiple_of(64) {
            thread::yield_now();
        } else {
            spin_loop();
        }
    }
}

/// Runs `produce(n)` on a second thread and `consume(n)` on this one after
/// both pass a barrier; returns the time until the consumer finished.
fn transfer<P, C>(n: u64, produce: P, consume: C) -> Duration
where
    P: FnOnce(u64) + Send,
    C: FnOnce(u64) -> u64,
{
    let start = Barrier::new(2);
    thread::scope(|s| {
        let start = &start;
        s.spawn(move || {
            start.wait();
            produce(n);
        });
        start.wait();
        let t = Instant::now();
        black_box(consume(n));
        t.elapsed()
    })
}

fn ring_single(n: u64) -> Duration {
    let (mut tx, mut rx) = spsc::<Msg>(CAPACITY).unwrap();
    transfer(
        n,
        move |n| {
            let mut backoff = Backoff::new();
            for i in 0..n {
                let mut m = Msg::new(i);
                while let Err(Full(back)) = tx.push(m) {
                    m = back;
                    backoff.wait();
                }
            }
        },
        move |n| {
            let mut backoff = Backoff::new();
            let mut sum = 0u64;
            let mut got = 0;
            while got < n {
                match rx.pop() {
                    Some(m) => {
                        sum = sum.wrapping_add(m.digest());
                        got += 1;
                    }
                    None => backoff.wait(),
                }
            }
            sum
        },
    )
}

/// Like `ring_single`, plus the producer's wake-up check after every push
/// (its worst case: one atomic read-modify-write per item).
fn ring_single_wake_check(n: u64) -> Duration {
    let (mut tx, mut rx) = spsc::<Msg>(CAPACITY).unwrap();
    transfer(
        n,
        move |n| {
            let mut backoff = Backoff::new();
            for i in 0..n {
                let mut m = Msg::new(i);
                while let Err(Full(back)) = tx.push(m) {
                    m = back;
                    backoff.wait();
                }
                black_box(tx.needs_wake());
            }
        },
        move |n| {
            let mut backoff = Backoff::new();
            let mut sum = 0u64;
            let mut got = 0;
            while got < n {
                match rx.pop() {
                    Some(m) => {
                        sum = sum.wrapping_add(m.digest());
                        got += 1;
                    }
                    None => backoff.wait(),
                }
            }
            sum
        },
    )
}

/// Batches of up to 32 on both ends: one tail publication per `push_batch`
/// and one head publication per `drain`. With `wake_check`, the producer
/// also runs the wake-up check once per batch.
fn ring_batch(n: u64, wake_check: bool) -> Duration {
    let (mut tx, mut rx) = spsc::<Msg>(CAPACITY).unwrap();
    transfer(
        n,
        move |n| {
            let mut backoff = Backoff::new();
            let mut sent = 0;
            while sent < n {
                let end = (sent + BATCH as u64).min(n);
                let pushed = tx.push_batch(&mut (sent..end).map(Msg::new));
                if pushed == 0 {
                    backoff.wait();
                } else {
                    sent += pushed as u64;
                    if wake_check {
                        black_box(tx.needs_wake());
                    }
                }
            }
        },
        move |n| {
            let mut backoff = Backoff::new();
            let mut sum = 0u64;
            let mut got = 0;
            while got < n {
                let before = got;
                for m in rx.drain(BATCH) {
                    sum = sum.wrapping_add(m.digest());
                    got += 1;
                }
                if got == before {
                    backoff.wait();
                }
            }
            sum
        },
    )
}

/// std's bounded channel, used the way it is meant to be: blocking `send`
/// and `recv`.
fn std_sync_channel(n: u64) -> Duration {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(CAPACITY);
    transfer(
        n,
        move |n| {
            for i in 0..n {
                tx.send(Msg::new(i)).unwrap();
            }
        },
        move |n| {
            let mut sum = 0u64;
            for _ in 0..n {
                let m = rx.recv().unwrap();
                sum = sum.wrapping_add(m.digest());
            }
            sum
        },
    )
}

/// crossbeam's bounded channel with blocking `send` and `recv`.
fn crossbeam_bounded(n: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<Msg>(CAPACITY);
    transfer(
        n,
        move |n| {
            for i in 0..n {
                tx.send(Msg::new(i)).unwrap();
            }
        },
        move |n| {
            let mut sum = 0u64;
            for _ in 0..n {
                let m = rx.recv().unwrap();
                sum = sum.wrapping_add(m.digest());
            }
            sum
        },
    )
}

/// crossbeam's bounded channel with `try_send` / `try_recv` and the same
/// spin-then-yield back-off as the ring: the like-for-like comparison.
fn crossbeam_bounded_try(n: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<Msg>(CAPACITY);
    transfer(
        n,
        move |n| {
            let mut backoff = Backoff::new();
            for i in 0..n {
                let mut m = Msg::new(i);
                while let Err(e) = tx.try_send(m) {
                    m = e.into_inner();
                    backoff.wait();
                }
            }
        },
        move |n| {
            let mut backoff = Backoff::new();
            let mut sum = 0u64;
            let mut got = 0;
            while got < n {
                match rx.try_recv() {
                    Ok(m) => {
                        sum = sum.wrapping_add(m.digest());
                        got += 1;
                    }
                    Err(_) => backoff.wait(),
                }
            }
            sum
        },
    )
}

fn throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("spsc_32B_cap1024");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("ring_single", |b| b.iter_custom(ring_single));
    group.bench_function("ring_single_wake_check", |b| {
        b.iter_custom(ring_single_wake_check);
    });
    group.bench_function("ring_batch32", |b| b.iter_custom(|n| ring_batch(n, false)));
    group.bench_function("ring_batch32_wake_check", |b| {
        b.iter_custom(|n| ring_batch(n, true));
    });
    group.bench_function("std_sync_channel", |b| b.iter_custom(std_sync_channel));
    group.bench_function("crossbeam_bounded", |b| b.iter_custom(crossbeam_bounded));
    group.bench_function("crossbeam_bounded_try", |b| {
        b.iter_custom(crossbeam_bounded_try);
    });
    group.finish();
}

/// The floor: the same ring on one thread (push then pop, no cache line
/// crosses cores), i.e. the ring's own instruction cost per item.
fn one_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("spsc_32B_cap1024_one_thread");
    group.throughput(Throughput::Elements(BATCH as u64));
    let (mut tx, mut rx) = spsc::<Msg>(CAPACITY).unwrap();
    let mut seq = 0u64;
    group.bench_function("ring_single_x32", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for _ in 0..BATCH {
                tx.push(Msg::new(seq)).unwrap();
                seq += 1;
                sum = sum.wrapping_add(rx.pop().unwrap().digest());
            }
            black_box(sum)
        });
    });
    group.bench_function("ring_batch32", |b| {
        b.iter(|| {
            let pushed = tx.push_batch(&mut (seq..seq + BATCH as u64).map(Msg::new));
            seq += pushed as u64;
            let mut sum = 0u64;
            for m in rx.drain(BATCH) {
                sum = sum.wrapping_add(m.digest());
            }
            black_box(sum)
        });
    });
    group.finish();
}

criterion_group!(benches, throughput, one_thread);
criterion_main!(benches);
