//! Arbitrary bytes through the Encryption Module's opener with fixed keys
//! (SPEC ENC-2, FRM-5: no input from a peer makes it panic).
//!
//! The input is read as a stream of frames (`FrameDecoder`, default limits).
//! For each algorithm, one opener with fixed keys meets every frame three
//! ways — `open_frame` on the frame's bytes, `open_in_place` on a copy, and
//! `open_sealed` on the codec's decoding of it — and the whole input once
//! more as a single `open_frame`. The oracles:
//! - nothing panics;
//! - the three paths agree on accepting or refusing, and on the frame;
//! - the opener's counters add up: opened + rejected = frames tried;
//! - every plaintext frame in the input, sealed with the matching fixed
//!   sealer, opens to itself (the round trip, for the bodies the fuzzer
//!   invents).
//!
//! Keys: secret `[1; 32]` seals, `[2; 32]` is the other direction, key
//! version 1. Seeds sealed under these keys reach past authentication.

#![no_main]

use bytes::BytesMut;
use dtp_codec::{AeadAlgorithm, Body, FrameDecoder, Limits};
use dtp_crypto::aead::{KeyMaterial, Opener, Sealer, Secret, session_keys};
use libfuzzer_sys::fuzz_target;

fn keys(alg: AeadAlgorithm, send: u8, recv: u8) -> (Sealer, Opener) {
    let material = KeyMaterial {
        algorithm: alg,
        initial_version: 1,
        send: Secret::from_bytes([send; 32]),
        recv: Secret::from_bytes([recv; 32]),
    };
    session_keys(material, None).expect("fixed keys are valid")
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    for alg in [AeadAlgorithm::Aes256Gcm, AeadAlgorithm::ChaCha20Poly1305] {
        // The peer's direction: its sealer is [1; 32], our opener [1; 32].
        let (mut sealer, _) = keys(alg, 1, 2);
        let (_, mut by_frame) = keys(alg, 2, 1);
        let (_, mut by_slice) = keys(alg, 2, 1);
        let (_, mut by_sealed) = keys(alg, 2, 1);
        let (_, mut round_trip) = keys(alg, 2, 1);

        // The whole input as one frame.
        let (_, mut whole) = keys(alg, 2, 1);
        let r = whole.open_frame(BytesMut::from(data), &limits);
        std::hint::black_box(r.map_err(|e| (e.code(), e.to_string())).ok());

        let decoder = FrameDecoder::new(limits);
        let mut stream = BytesMut::from(data);
        let mut tried = 0u64;
        loop {
            let before = stream.clone();
            let frame = match decoder.decode(&mut stream) {
                Ok(Some(frame)) => frame,
                Ok(None) | Err(_) => break,
            };
            let used = before.len() - stream.len();
            let raw = &before[..used];
            tried += 1;

            let a = by_frame.open_frame(BytesMut::from(raw), &limits);
            let mut copy = raw.to_vec();
            let b = by_slice.open_in_place(&mut copy, &limits).map(|o| o.kind);
            let c = match frame.body.clone() {
                Body::Sealed(s) => by_sealed.open_sealed(frame.stream_id, s, &limits),
                _ => by_sealed.open_frame(BytesMut::from(raw), &limits),
            };
            // open_in_place does not decode, so it may accept a body the
            // others then refuse as malformed; never the other way round.
            assert!(
                a.is_ok() <= b.is_ok(),
                "open_frame {a:?} vs open_in_place {b:?}"
            );
            assert_eq!(a, c, "open_frame and open_sealed disagree");
            if let Err(e) = &a {
                std::hint::black_box(e.to_string());
            }

            // Round trip: a plaintext frame sealed under the fixed keys.
            if !matches!(frame.body, Body::Sealed(_)) {
                let mut wire = BytesMut::new();
                if sealer.seal_frame(&frame, &limits, &mut wire).is_ok() {
                    let opened = round_trip
                        .open_frame(wire, &limits)
                        .expect("a frame we sealed opens");
                    assert_eq!(opened, frame);
                }
            }
        }
        for o in [&by_frame, &by_sealed] {
            let s = o.stats();
            assert_eq!(s.opened_frames + s.rejected.total(), tried);
        }
    }
});
