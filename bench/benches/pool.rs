//! SPEC MEM-2: the per-core chunk pool against the general allocator on the
//! same work — acquire a 16 KiB buffer, write 16 KiB into it, release it —
//! once with one buffer at a time and once with 64 buffers live at once.
//!
//! Run: `cargo bench -p dtp-bench --bench pool`. Figures are recorded in
//! `perf/pool.md`.
#![allow(
    missing_docs,
    reason = "criterion_group!/criterion_main! generate undocumented items"
)]
#![allow(
    clippy::unwrap_used,
    reason = "benchmark setup: a pool error is a broken benchmark and must abort it"
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dtp_pool::{BufferHandle, BufferSpec, Class, Principal, Range, Region, RegionConfig};

const SIZE: u32 = 16 * 1024;
const LIVE: usize = 64;
const APP: Principal = Principal::new(1);

fn region() -> Region {
    Region::new(RegionConfig::new(SIZE, LIVE as u32)).unwrap()
}

/// The pool's side of one unit of work: acquire, write, publish, release.
fn pool_cycle(region: &mut Region, payload: &[u8]) -> BufferHandle {
    let h = region
        .acquire(APP, BufferSpec::new(Class::Scratch, SIZE))
        .unwrap();
    region.write(APP, h, 0, payload).unwrap();
    region.commit(APP, h, SIZE).unwrap();
    h
}

/// One buffer at a time: the allocator's and the pool's best case (the same
/// chunk / the same heap block comes back every time).
fn one_at_a_time(c: &mut Criterion) {
    let payload = vec![0xA5u8; SIZE as usize];
    let mut group = c.benchmark_group("acquire_write_16k_release");
    group.throughput(Throughput::Bytes(u64::from(SIZE)));

    let mut r = region();
    group.bench_function("pool", |b| {
        b.iter(|| {
            let h = pool_cycle(&mut r, black_box(&payload));
            black_box(r.read(APP, Range::new(h, SIZE - 1, 1)).unwrap());
            r.release(APP, h).unwrap();
        });
    });
    group.bench_function("vec", |b| {
        b.iter(|| {
            let mut v: Vec<u8> = Vec::with_capacity(SIZE as usize);
            v.extend_from_slice(black_box(&payload));
            black_box(&v[SIZE as usize - 1..]);
            drop(v);
        });
    });
    group.finish();
}

/// 64 buffers live at once, then all released: the allocator has to find 64
/// blocks; the pool pops 64 chunks and 64 handle slots.
fn sixty_four_live(c: &mut Criterion) {
    let payload = vec![0x5Au8; SIZE as usize];
    let mut group = c.benchmark_group("acquire_write_16k_release_64_live");
    group.throughput(Throughput::Bytes(u64::from(SIZE) * LIVE as u64));

    let mut r = region();
    let mut handles = Vec::with_capacity(LIVE);
    group.bench_function("pool", |b| {
        b.iter(|| {
            for _ in 0..LIVE {
                handles.push(pool_cycle(&mut r, black_box(&payload)));
            }
            for h in handles.drain(..) {
                black_box(r.read(APP, Range::new(h, SIZE - 1, 1)).unwrap());
                r.release(APP, h).unwrap();
            }
        });
    });
    let mut vecs: Vec<Vec<u8>> = Vec::with_capacity(LIVE);
    group.bench_function("vec", |b| {
        b.iter(|| {
            for _ in 0..LIVE {
                let mut v: Vec<u8> = Vec::with_capacity(SIZE as usize);
                v.extend_from_slice(black_box(&payload));
                vecs.push(v);
            }
            for v in vecs.drain(..) {
                black_box(&v[SIZE as usize - 1..]);
                drop(v);
            }
        });
    });
    group.finish();
}

/// Bookkeeping alone, without the 16 KiB copy that dominates the workloads
/// above: acquire + release against `Vec::with_capacity` + drop.
fn bookkeeping_only(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire_release_16k_no_write");
    let mut r = region();
    group.bench_function("pool", |b| {
        b.iter(|| {
            let h = r
                .acquire(APP, BufferSpec::new(Class::Scratch, SIZE))
                .unwrap();
            r.release(APP, black_box(h)).unwrap();
        });
    });
    group.bench_function("vec", |b| {
        b.iter(|| {
            let v: Vec<u8> = Vec::with_capacity(SIZE as usize);
            drop(black_box(v));
        });
    });
    group.finish();
}

criterion_group!(benches, one_at_a_time, sixty_four_live, bookkeeping_only);
criterion_main!(benches);
