//! Encryption Module benchmarks (SPEC ENC-1, ENC-2): the single-core AEAD
//! limit and our per-frame cost against it.
//!
//! - `aead_limit_seal` / `aead_limit_open`: ring sealing (opening) the same
//!   number of bytes in place in a loop, with the 24-byte associated data of
//!   a sealed frame — the "single-core AEAD limit" of DESIGN.md §4.
//! - `aead_seal_frame`: `Sealer::seal_frame` of a data frame whose payload
//!   has that many bytes: encode into a reused buffer, encrypt in place,
//!   append the tag.
//! - `aead_open_frame`: `Opener::open_frame` of such a frame: checks,
//!   decrypt in place, decode (zero-copy payload).
//!
//! Throughput is payload bytes per second in every group, so
//! `aead_seal_frame / aead_limit_seal` at the same size and algorithm is our
//! overhead over the raw cipher: near 1 at 16 KiB (the cipher dominates),
//! lower at 100 B (per-frame work: encoding, header, counter, key checks).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmarks: the fixed frames and keys are valid, a panic is the failure report"
)]

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dtp_codec::{AeadAlgorithm, Body, DataFrame, Limits, LogicalFrame};
use dtp_crypto::aead::{KeyMaterial, Opener, Sealer, Secret, session_keys};
use ring::aead::{AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};

/// Payload sizes: a small message and a large fragment.
const SIZES: [(usize, &str); 2] = [(100, "100B"), (16 * 1024, "16KiB")];

const ALGS: [(AeadAlgorithm, &str); 2] = [
    (AeadAlgorithm::Aes256Gcm, "aes-256-gcm"),
    (AeadAlgorithm::ChaCha20Poly1305, "chacha20-poly1305"),
];

/// Both ends of one direction, with fixed (benchmark-only) secrets.
fn link(alg: AeadAlgorithm) -> (Sealer, Opener) {
    let material = |send: u8, recv: u8| KeyMaterial {
        algorithm: alg,
        initial_version: 1,
        send: Secret::from_bytes([send; 32]),
        recv: Secret::from_bytes([recv; 32]),
    };
    let (sealer, _) = session_keys(material(1, 2), None).unwrap();
    let (_, opener) = session_keys(material(2, 1), None).unwrap();
    (sealer, opener)
}

fn raw_key(alg: AeadAlgorithm) -> LessSafeKey {
    let alg = match alg {
        AeadAlgorithm::Aes256Gcm => &AES_256_GCM,
        AeadAlgorithm::ChaCha20Poly1305 => &CHACHA20_POLY1305,
    };
    LessSafeKey::new(UnboundKey::new(alg, &[7; 32]).unwrap())
}

fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&counter.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// A mid-stream data frame with a `len`-byte payload.
fn data_frame(len: usize) -> LogicalFrame {
    LogicalFrame::plain(
        1,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: 42,
            sequence: 7,
            relations: vec![],
            payload: Bytes::from(vec![0x5a; len]),
        }),
    )
}

fn limit_seal(c: &mut Criterion) {
    let mut group = c.benchmark_group("aead_limit_seal");
    for (alg, alg_name) in ALGS {
        let key = raw_key(alg);
        for (len, size) in SIZES {
            let aad = [0u8; 24];
            let mut buf = vec![0x5a; len];
            let mut counter = 0u64;
            group.throughput(Throughput::Bytes(len as u64));
            group.bench_function(BenchmarkId::new(alg_name, size), |b| {
                b.iter(|| {
                    counter += 1;
                    key.seal_in_place_separate_tag(nonce(counter), Aad::from(&aad), &mut buf)
                        .unwrap()
                });
            });
        }
    }
    group.finish();
}

fn limit_open(c: &mut Criterion) {
    let mut group = c.benchmark_group("aead_limit_open");
    for (alg, alg_name) in ALGS {
        let key = raw_key(alg);
        for (len, size) in SIZES {
            let aad = [0u8; 24];
            let mut sealed = vec![0x5a; len];
            let tag = key
                .seal_in_place_separate_tag(nonce(1), Aad::from(&aad), &mut sealed)
                .unwrap();
            sealed.extend_from_slice(tag.as_ref());
            group.throughput(Throughput::Bytes(len as u64));
            group.bench_function(BenchmarkId::new(alg_name, size), |b| {
                b.iter_batched_ref(
                    || sealed.clone(),
                    |buf| {
                        key.open_in_place(nonce(1), Aad::from(&aad), buf)
                            .unwrap()
                            .len()
                    },
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

fn seal_frame(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("aead_seal_frame");
    for (alg, alg_name) in ALGS {
        for (len, size) in SIZES {
            let (mut sealer, _) = link(alg);
            let frame = data_frame(len);
            let mut buf = BytesMut::with_capacity(len + 128);
            let capacity = buf.capacity();
            group.throughput(Throughput::Bytes(len as u64));
            group.bench_function(BenchmarkId::new(alg_name, size), |b| {
                b.iter(|| {
                    if sealer.needs_rekey() {
                        sealer.rekey().unwrap();
                    }
                    buf.clear();
                    sealer
                        .seal_frame(black_box(&frame), &limits, &mut buf)
                        .unwrap()
                });
            });
            // The buffer never grew: no allocation was measured.
            assert_eq!(buf.capacity(), capacity);
        }
    }
    group.finish();
}

fn open_frame(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("aead_open_frame");
    for (alg, alg_name) in ALGS {
        for (len, size) in SIZES {
            let (mut sealer, mut opener) = link(alg);
            let frame = data_frame(len);
            group.throughput(Throughput::Bytes(len as u64));
            group.bench_function(BenchmarkId::new(alg_name, size), |b| {
                // Counters must increase, so every iteration opens a frame
                // sealed (untimed, in order) just for it.
                b.iter_batched(
                    || {
                        if sealer.needs_rekey() {
                            sealer.rekey().unwrap();
                        }
                        let mut wire = BytesMut::with_capacity(len + 128);
                        sealer.seal_frame(&frame, &limits, &mut wire).unwrap();
                        wire
                    },
                    |wire| opener.open_frame(wire, &limits).unwrap(),
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, limit_seal, limit_open, seal_frame, open_frame);
criterion_main!(benches);
