//! Codec micro-benchmarks: encode and decode of one data frame at three
//! payload sizes, and a `FrameDecoder` draining a buffer of many frames.
//!
//! Encoding writes into one reused `BytesMut` (cleared each iteration), so the
//! figures are the codec's, not the allocator's. Decoding reads from a
//! `Bytes`: the payload is sliced, not copied, so its cost should not grow
//! with the payload. Results and their reading are in perf/codec.md.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmarks: the fixed frames are valid, a panic is the failure report"
)]

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dtp_codec::{Body, DataFrame, FrameDecoder, Limits, LogicalFrame, decode_frame};

/// Payload sizes of the single-frame benchmarks.
const SIZES: [(usize, &str); 3] = [(64, "64B"), (1024, "1KiB"), (16 * 1024, "16KiB")];

/// Frames in the buffer the stream decoder drains.
const STREAM_FRAMES: usize = 1024;

/// A data frame as it flows mid-stream: agreement id inherited (SEQ-4), no
/// relations, a payload of `len` bytes.
fn data_frame(len: usize) -> LogicalFrame {
    let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
    LogicalFrame::plain(
        1,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: 42,
            sequence: 7,
            relations: vec![],
            payload: Bytes::from(payload),
        }),
    )
}

fn encode(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("encode_data");
    for (len, name) in SIZES {
        let frame = data_frame(len);
        let total = frame.encoded_len(&limits).unwrap();
        let mut buf = BytesMut::with_capacity(total);
        group.throughput(Throughput::Bytes(total as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                buf.clear();
                let n = black_box(&frame).encode(&mut buf, &limits).unwrap();
                black_box(&buf);
                n
            });
        });
        // The buffer never grew: the loop measured no allocation.
        assert_eq!(buf.capacity(), total);
    }
    group.finish();
}

fn decode(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("decode_data");
    for (len, name) in SIZES {
        let wire = data_frame(len).to_bytes(&limits).unwrap();
        group.throughput(Throughput::Bytes(wire.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| decode_frame(black_box(&wire), &limits).unwrap());
        });
    }
    group.finish();
}

fn stream_decode(c: &mut Criterion) {
    let limits = Limits::default();
    let one = data_frame(1024).to_bytes(&limits).unwrap();
    let mut wire = BytesMut::with_capacity(one.len() * STREAM_FRAMES);
    for _ in 0..STREAM_FRAMES {
        wire.extend_from_slice(&one);
    }
    let wire = wire.freeze();
    let decoder = FrameDecoder::new(limits);
    let mut group = c.benchmark_group("frame_decoder");
    group.throughput(Throughput::Elements(STREAM_FRAMES as u64));
    group.bench_function(BenchmarkId::new("1KiB", STREAM_FRAMES), |b| {
        b.iter_batched(
            // Copying the stream in is set-up, outside the timing.
            || BytesMut::from(&wire[..]),
            |mut buf| {
                let mut frames = 0;
                while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                    black_box(frame);
                    frames += 1;
                }
                assert_eq!(frames, STREAM_FRAMES);
                buf
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

criterion_group!(benches, encode, decode, stream_decode);
criterion_main!(benches);
