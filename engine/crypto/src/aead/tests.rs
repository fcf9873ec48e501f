//! Unit tests of the Encryption Module: round trips, the wire layout, every
//! refusal (tamper, key version, replay, other connection, ENC-3, limits).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use bytes::{Bytes, BytesMut};
use dtp_codec::{
    AckFrame, AeadAlgorithm, Body, DataFrame, ErrorCode, FrameDecoder, FrameKind, HEADER_LEN,
    Limits, LogicalFrame, TAG_LEN, decode_frame, samples,
};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hmac;

use super::*;

pub(super) const ALGS: [AeadAlgorithm; 2] =
    [AeadAlgorithm::Aes256Gcm, AeadAlgorithm::ChaCha20Poly1305];

pub(super) fn material(alg: AeadAlgorithm, version: u16, send: u8, recv: u8) -> KeyMaterial {
    KeyMaterial {
        algorithm: alg,
        initial_version: version,
        send: Secret::from_bytes([send; 32]),
        recv: Secret::from_bytes([recv; 32]),
    }
}

/// Our sealer (secret 1) and the peer's opener of that direction.
pub(super) fn link(alg: AeadAlgorithm) -> (Sealer, Opener) {
    let (sealer, _) = session_keys(material(alg, 1, 1, 2), None).unwrap();
    let (_, opener) = session_keys(material(alg, 1, 2, 1), None).unwrap();
    (sealer, opener)
}

fn link_with(alg: AeadAlgorithm, limits: KeyLimits) -> (Sealer, Opener) {
    let (sealer, _) = session_keys(material(alg, 1, 1, 2), Some(limits)).unwrap();
    let (_, opener) = session_keys(material(alg, 1, 2, 1), None).unwrap();
    (sealer, opener)
}

pub(super) fn plain_samples() -> Vec<LogicalFrame> {
    samples()
        .into_iter()
        .filter(|f| !matches!(f.body, Body::Sealed(_)))
        .collect()
}

fn data(payload: &'static [u8]) -> LogicalFrame {
    LogicalFrame::plain(
        3,
        Body::Data(DataFrame {
            agreement_id: None,
            fragment_id: 9,
            sequence: 4,
            relations: vec![],
            payload: Bytes::from_static(payload),
        }),
    )
}

pub(super) fn seal(sealer: &mut Sealer, frame: &LogicalFrame) -> BytesMut {
    let mut dst = BytesMut::new();
    let n = sealer
        .seal_frame(frame, &Limits::default(), &mut dst)
        .unwrap();
    assert_eq!(n, dst.len());
    dst
}

/// SPEC ENC-1, ENC-2: every kind seals and opens, under both algorithms.
#[test]
fn round_trip_every_kind_both_algorithms() {
    let limits = Limits::default();
    for alg in ALGS {
        let (mut sealer, mut opener) = link(alg);
        let (_, mut opener2) = link(alg);
        let frames = plain_samples();
        let kinds: std::collections::HashSet<_> = frames.iter().map(|f| f.kind()).collect();
        assert_eq!(kinds.len(), 8, "every frame kind is covered");
        for (i, frame) in frames.iter().enumerate() {
            let wire = seal(&mut sealer, frame);
            // The codec sees a sealed frame with the plaintext metadata (ENC-4).
            let (decoded, used) = decode_frame(&wire.clone().freeze(), &limits).unwrap();
            assert_eq!(used, wire.len());
            let Body::Sealed(sealed) = decoded.body else {
                panic!("not sealed")
            };
            assert_eq!(sealed.kind, frame.kind());
            assert_eq!(sealed.aead, alg);
            assert_eq!(sealed.key_version, 1);
            assert_eq!(sealed.seal_counter, i as u64);
            // Both opening paths give the frame back.
            assert_eq!(opener.open_frame(wire, &limits).unwrap(), *frame);
            assert_eq!(
                opener2
                    .open_sealed(decoded.stream_id, sealed, &limits)
                    .unwrap(),
                *frame
            );
        }
        assert_eq!(opener.stats().opened_frames, frames.len() as u64);
        assert_eq!(sealer.stats().sealed_frames, frames.len() as u64);
    }
}

/// SPEC ENC-4: algorithm id and key version in the plaintext header.
#[test]
fn wire_layout_is_format_section_2_1() {
    let limits = Limits::default();
    let frame = data(b"hello, sealed world");
    let plain = frame.to_bytes(&limits).unwrap();
    for alg in ALGS {
        let (mut sealer, _) = link(alg);
        let wire = seal(&mut sealer, &frame);
        let body_len = plain.len() - HEADER_LEN;
        assert_eq!(wire.len(), HEADER_LEN + 8 + body_len + TAG_LEN);
        // Same header as the plaintext frame except algorithm, key version, length.
        assert_eq!(wire[..5], plain[..5]);
        assert_eq!(wire[5], alg as u8);
        assert_eq!(wire[6..8], [0, 1]);
        assert_eq!(wire[8..12], plain[8..12]);
        assert_eq!(wire[12..16], ((body_len + 24) as u32).to_be_bytes());
        assert_eq!(wire[16..24], 0u64.to_be_bytes());
        // The body is encrypted.
        assert_ne!(wire[24..24 + body_len], plain[16..]);
    }
}

/// Recomputes a sealed frame from the documented key schedule and nonce
/// layout with ring's primitives directly, so the docs stay true.
#[test]
fn key_schedule_and_nonce_layout_are_as_documented() {
    fn expand(secret: &[u8], info: &[u8], len: usize) -> Vec<u8> {
        // HKDF-Expand for one block: T(1) = HMAC(PRK, info ‖ 0x01).
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let mut msg = info.to_vec();
        msg.push(1);
        hmac::sign(&key, &msg).as_ref()[..len].to_vec()
    }
    let limits = Limits::default();
    let frame = data(b"known answer");
    let plain = frame.to_bytes(&limits).unwrap();
    for alg in ALGS {
        let (mut sealer, _) = link(alg);
        let ring_alg = match alg {
            AeadAlgorithm::Aes256Gcm => &ring::aead::AES_256_GCM,
            AeadAlgorithm::ChaCha20Poly1305 => &ring::aead::CHACHA20_POLY1305,
        };
        let mut secret = vec![1u8; 32];
        for version in 1..=3u16 {
            let mut info = b"dtp1 aead key".to_vec();
            info.push(alg as u8);
            let key = expand(&secret, &info, 32);
            let mut info = b"dtp1 aead iv".to_vec();
            info.push(alg as u8);
            let iv = expand(&secret, &info, 12);
            let key = LessSafeKey::new(UnboundKey::new(ring_alg, &key).unwrap());
            for counter in 0..3u64 {
                let wire = seal(&mut sealer, &frame);
                let mut nonce: [u8; 12] = iv.clone().try_into().unwrap();
                for (n, c) in nonce[4..].iter_mut().zip(counter.to_be_bytes()) {
                    *n ^= c;
                }
                let mut expect = wire[..24].to_vec();
                assert_eq!(expect[6..8], version.to_be_bytes());
                assert_eq!(expect[16..24], counter.to_be_bytes());
                let mut body = plain[16..].to_vec();
                let tag = key
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(&expect[..]),
                        &mut body,
                    )
                    .unwrap();
                expect.extend_from_slice(&body);
                expect.extend_from_slice(tag.as_ref());
                assert_eq!(wire[..], expect[..], "{alg:?} v{version} #{counter}");
            }
            sealer.rekey().unwrap();
            secret = expand(&secret, b"dtp1 aead next secret", 32);
        }
    }
}

#[test]
fn seal_appends_and_streams_through_the_decoder() {
    let limits = Limits::default();
    let (mut sealer, mut opener) = link(AeadAlgorithm::ChaCha20Poly1305);
    let mut buf = BytesMut::new();
    let frames = plain_samples();
    for f in &frames {
        sealer.seal_frame(f, &limits, &mut buf).unwrap();
    }
    let decoder = FrameDecoder::new(limits);
    let mut got = Vec::new();
    while let Some(frame) = decoder.decode(&mut buf).unwrap() {
        let Body::Sealed(s) = frame.body else {
            panic!("not sealed")
        };
        got.push(opener.open_sealed(frame.stream_id, s, &limits).unwrap());
    }
    assert_eq!(got, frames);
}

#[test]
fn seal_encoded_matches_seal_frame() {
    let limits = Limits::default();
    for alg in ALGS {
        let (mut a, _) = link(alg);
        let (mut b, mut opener) = link(alg);
        for f in plain_samples() {
            let plain = f.to_bytes(&limits).unwrap();
            let mut via_encoded = BytesMut::from(&b"prefix"[..]);
            b.seal_encoded(&plain, &limits, &mut via_encoded).unwrap();
            assert_eq!(via_encoded[6..], seal(&mut a, &f)[..]);
            let wire = via_encoded.split_off(6);
            assert_eq!(opener.open_frame(wire, &limits).unwrap(), f);
        }
    }
}

#[test]
fn seal_encoded_refuses_bad_input() {
    let limits = Limits::default();
    let (mut sealer, mut opener) = link(AeadAlgorithm::Aes256Gcm);
    let plain = data(b"x").to_bytes(&limits).unwrap();
    let mut dst = BytesMut::new();
    let short = &plain[..plain.len() - 1];
    assert!(matches!(
        sealer.seal_encoded(short, &limits, &mut dst),
        Err(AeadError::Malformed(_))
    ));
    let sealed = seal(&mut sealer, &data(b"x"));
    assert_eq!(
        sealer.seal_encoded(&sealed, &limits, &mut dst),
        Err(AeadError::AlreadySealed)
    );
    assert!(dst.is_empty());
    // An authenticated but invalid body: sealed, opened, refused by the codec.
    let mut bad = plain.to_vec();
    bad[3] = FrameKind::Ack as u8; // a data body under the ack kind
    sealer.seal_encoded(&bad, &limits, &mut dst).unwrap();
    let e = opener.open_frame(dst, &limits).unwrap_err();
    assert!(matches!(e, AeadError::Malformed(_)), "{e}");
    assert_eq!(e.code(), ErrorCode::TRAILING_BYTES);
    assert_eq!(opener.stats().rejected.malformed, 1);
}

/// SPEC ENC-2: a change to any byte is refused.
#[test]
fn every_tamper_position_is_rejected() {
    let limits = Limits::default();
    for alg in ALGS {
        let (mut sealer, mut opener) = link(alg);
        for frame in [data(b"tamper with me"), plain_samples()[0].clone()] {
            let wire = seal(&mut sealer, &frame);
            for pos in 0..wire.len() {
                for mask in [0x01u8, 0x80, 0xff] {
                    let mut bad = wire.clone();
                    bad[pos] ^= mask;
                    let e = opener.open_frame(bad, &limits).unwrap_err();
                    if pos >= 16 {
                        // Counter, ciphertext and tag: authentication fails
                        // (or, for a counter made smaller, the replay check).
                        assert!(
                            matches!(e, AeadError::DecryptFailed { .. })
                                || (pos < 24 && matches!(e, AeadError::Replay { .. })),
                            "{alg:?} byte {pos} ^ {mask:#x}: {e}"
                        );
                        assert_eq!(e.code(), ErrorCode::DECRYPT_FAILED);
                    }
                }
            }
            // Nothing above changed the opener's state.
            assert_eq!(opener.open_frame(wire, &limits).unwrap(), frame);
        }
        let stats = opener.stats();
        assert_eq!(stats.opened_frames, 2);
        assert!(stats.rejected.decrypt_failed > 0);
        assert!(stats.rejected.malformed > 0);
        assert!(stats.rejected.key_version > 0);
    }
}

#[test]
fn header_tampering_is_rejected_with_a_reason() {
    let limits = Limits::default();
    let (mut sealer, mut opener) = link(AeadAlgorithm::Aes256Gcm);
    let wire = seal(&mut sealer, &data(b"abc"));
    let with = |pos: usize, v: u8| {
        let mut b = wire.clone();
        b[pos] = v;
        b
    };
    let mut check = |bad: BytesMut, code: ErrorCode| {
        let e = opener.open_frame(bad, &limits).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
    };
    check(with(0, 0), ErrorCode::BAD_MAGIC);
    check(with(3, FrameKind::Ack as u8), ErrorCode::DECRYPT_FAILED); // kind is authenticated
    check(with(5, 0), ErrorCode::INCONSISTENT); // plaintext with a key version
    check(with(5, 2), ErrorCode::DECRYPT_FAILED); // other algorithm
    check(with(7, 2), ErrorCode::DECRYPT_FAILED); // next version: tried, fails
    check(with(7, 3), ErrorCode::KEY_VERSION_MISMATCH);
    check(with(11, 4), ErrorCode::DECRYPT_FAILED); // stream id is authenticated
    check(with(15, wire[15] + 1), ErrorCode::TRUNCATED); // length
    let s = opener.stats().rejected;
    assert_eq!((s.algorithm, s.key_version, s.malformed), (1, 1, 3));
    assert_eq!(
        opener.key_version(),
        1,
        "a forged next-version frame switches nothing"
    );
    assert!(opener.open_frame(wire, &limits).is_ok());
}

/// SPEC ENC-4: a key version not in use is KEY_VERSION_MISMATCH (5003).
#[test]
fn wrong_key_version_is_refused() {
    let limits = Limits::default();
    for alg in ALGS {
        // The peer seals under version 5 (its own secrets); we are at 1.
        let (mut sealer, _) = session_keys(material(alg, 5, 1, 2), None).unwrap();
        let (_, mut opener) = link(alg);
        let e = opener
            .open_frame(seal(&mut sealer, &data(b"v5")), &limits)
            .unwrap_err();
        assert_eq!(
            e,
            AeadError::KeyVersionMismatch {
                found: 5,
                current: 1
            }
        );
        assert_eq!(e.code(), ErrorCode::KEY_VERSION_MISMATCH);
        assert!(
            e.to_string().starts_with("5003 KEY_VERSION_MISMATCH"),
            "{e}"
        );
    }
}

#[test]
fn replayed_and_reordered_counters_are_refused() {
    let limits = Limits::default();
    for alg in ALGS {
        let (mut sealer, mut opener) = link(alg);
        let w: Vec<BytesMut> = (0..4).map(|_| seal(&mut sealer, &data(b"r"))).collect();
        opener.open_frame(w[0].clone(), &limits).unwrap();
        opener.open_frame(w[1].clone(), &limits).unwrap();
        let e = opener.open_frame(w[1].clone(), &limits).unwrap_err();
        assert_eq!(
            e,
            AeadError::Replay {
                key_version: 1,
                counter: 1,
                last: 1
            }
        );
        assert!(matches!(
            opener.open_frame(w[0].clone(), &limits),
            Err(AeadError::Replay { .. })
        ));
        // A gap is accepted (counters only have to increase) …
        opener.open_frame(w[3].clone(), &limits).unwrap();
        // … but what was skipped cannot come later.
        assert!(matches!(
            opener.open_frame(w[2].clone(), &limits),
            Err(AeadError::Replay { .. })
        ));
        assert_eq!(opener.stats().rejected.replay, 3);
    }
}

/// SPEC ENC-2: frames sealed under connection 1's keys do not open on
/// connection 2.
#[test]
fn frames_of_an_earlier_connection_are_refused() {
    let limits = Limits::default();
    for alg in ALGS {
        // Connection 1: peer seals under its keys; we open on our module.
        let (mut peer1, _) = session_keys(material(alg, 1, 1, 2), None).unwrap();
        let mut ours = EncryptionModule::new();
        ours.install(material(alg, 1, 2, 1), None).unwrap();
        let old = seal(&mut peer1, &data(b"connection 1"));
        assert!(ours.open_frame(old.clone(), &limits).is_ok());
        let unseen = seal(&mut peer1, &data(b"never delivered on 1"));
        // Reconnect: a new handshake gives new secrets, same starting version.
        ours.reset();
        ours.install(material(alg, 1, 4, 3), None).unwrap();
        for replay in [old.clone(), unseen.clone()] {
            let e = ours.open_frame(replay, &limits).unwrap_err();
            assert!(matches!(e, AeadError::DecryptFailed { .. }), "{e}");
        }
        // A new connection that starts at another version refuses by version.
        ours.install(material(alg, 7, 4, 3), None).unwrap();
        let e = ours.open_frame(old, &limits).unwrap_err();
        assert_eq!(e.code(), ErrorCode::KEY_VERSION_MISMATCH);
        // Connection 2's own frames open.
        let (mut peer2, _) = session_keys(material(alg, 7, 3, 4), None).unwrap();
        let f = data(b"connection 2");
        assert_eq!(ours.open_frame(seal(&mut peer2, &f), &limits).unwrap(), f);
        let s = ours.stats();
        assert_eq!(s.opened_frames, 2, "counters survive reconnects");
        assert_eq!(s.rejected.decrypt_failed, 2);
        assert_eq!(s.rejected.key_version, 1);
    }
}

/// SPEC ENC-3: before CAP's keys, KEY_NOT_READY (5001) and no plaintext.
#[test]
fn enc3_nothing_is_sealed_or_opened_before_keys() {
    let limits = Limits::default();
    let mut m = EncryptionModule::new();
    assert!(!m.is_ready());
    let mut dst = BytesMut::from(&b"untouched"[..]);
    let e = m
        .seal_frame(&data(b"secret"), &limits, &mut dst)
        .unwrap_err();
    assert_eq!(e, AeadError::KeyNotReady);
    assert_eq!(e.code(), ErrorCode::KEY_NOT_READY);
    assert!(e.to_string().starts_with("5001 KEY_NOT_READY"));
    assert_eq!(&dst[..], b"untouched", "no plaintext written");
    let (mut peer, _) = link(AeadAlgorithm::Aes256Gcm);
    let wire = seal(&mut peer, &data(b"early"));
    assert_eq!(
        m.open_frame(wire.clone(), &limits),
        Err(AeadError::KeyNotReady)
    );
    assert!(m.sealer().is_err() && m.opener().is_err());
    let s = m.stats();
    assert_eq!((s.seal_refused, s.rejected.key_not_ready), (2, 2));
    // Keys arrive: both work.
    m.install(material(AeadAlgorithm::Aes256Gcm, 1, 2, 1), None)
        .unwrap();
    assert!(m.is_ready());
    assert!(m.open_frame(wire, &limits).is_ok());
    assert!(m.seal_frame(&data(b"now"), &limits, &mut dst).is_ok());
    // Connection lost: back to no keys.
    m.reset();
    assert_eq!(
        m.seal_frame(&data(b"x"), &limits, &mut BytesMut::new()),
        Err(AeadError::KeyNotReady)
    );
}

#[test]
fn seal_limit_forces_a_rekey_that_the_opener_follows() {
    let limits = Limits::default();
    let tiny = KeyLimits {
        soft_seals: 2,
        hard_seals: 3,
        soft_blocks: u64::MAX >> 40,
        hard_blocks: u64::MAX >> 40,
    };
    for alg in ALGS {
        let (mut sealer, mut opener) = link_with(alg, tiny);
        let mut v1 = Vec::new();
        for i in 0..3 {
            assert_eq!(sealer.needs_rekey(), i >= 2);
            v1.push(seal(&mut sealer, &data(b"v1")));
        }
        let mut dst = BytesMut::new();
        let e = sealer
            .seal_frame(&data(b"one too many"), &limits, &mut dst)
            .unwrap_err();
        assert_eq!(
            e,
            AeadError::KeyExhausted {
                key_version: 1,
                seals: 3
            }
        );
        assert_eq!(e.code(), ErrorCode::KEY_NOT_READY);
        assert!(dst.is_empty());
        sealer.rekey().unwrap();
        assert_eq!((sealer.key_version(), sealer.seal_counter()), (2, 0));
        assert!(!sealer.needs_rekey());
        let v2 = seal(&mut sealer, &data(b"v2"));
        assert_eq!(v2[16..24], 0u64.to_be_bytes(), "the counter restarts");
        for w in &v1[..2] {
            opener.open_frame(w.clone(), &limits).unwrap();
        }
        opener.open_frame(v2, &limits).unwrap();
        assert_eq!(opener.key_version(), 2);
        // The old key is gone once the peer switched.
        let e = opener.open_frame(v1[2].clone(), &limits).unwrap_err();
        assert_eq!(
            e,
            AeadError::KeyVersionMismatch {
                found: 1,
                current: 2
            }
        );
        assert_eq!(sealer.stats().rekeys_sent, 1);
        assert_eq!(sealer.stats().seal_refused, 1);
        assert_eq!(opener.stats().rekeys_received, 1);
    }
}

#[test]
fn block_limit_counts_bytes() {
    let limits = Limits::default();
    let tiny = KeyLimits {
        soft_seals: 100,
        hard_seals: 100,
        soft_blocks: 4,
        hard_blocks: 6,
    };
    let (mut sealer, _) = link_with(AeadAlgorithm::Aes256Gcm, tiny);
    let big = data(&[7u8; 64]); // 64 + 27 body bytes = 6 blocks + 1
    assert!(matches!(
        sealer.seal_frame(&big, &limits, &mut BytesMut::new()),
        Err(AeadError::KeyExhausted { .. })
    ));
    let small = LogicalFrame::plain(0, Body::Ack(AckFrame { cumulative: 1 })); // 8 bytes: 2 blocks
    for _ in 0..3 {
        seal(&mut sealer, &small);
    }
    assert!(sealer.needs_rekey());
    assert!(
        sealer
            .seal_frame(&small, &limits, &mut BytesMut::new())
            .is_err()
    );
}

#[test]
fn directions_rekey_independently() {
    let limits = Limits::default();
    let (mut a_seal, mut a_open) =
        session_keys(material(AeadAlgorithm::Aes256Gcm, 1, 1, 2), None).unwrap();
    let (mut b_seal, mut b_open) =
        session_keys(material(AeadAlgorithm::Aes256Gcm, 1, 2, 1), None).unwrap();
    for _ in 0..3 {
        a_seal.rekey().unwrap();
    }
    let f = data(b"both ways");
    assert_eq!(
        b_open.open_frame(seal(&mut a_seal, &f), &limits),
        Err(AeadError::KeyVersionMismatch {
            found: 4,
            current: 1
        })
    );
    assert_eq!(
        a_open.open_frame(seal(&mut b_seal, &f), &limits).unwrap(),
        f
    );
    assert_eq!((a_seal.key_version(), a_open.key_version()), (4, 1));
    assert_eq!(b_seal.key_version(), 1);
}

#[test]
fn last_key_version_cannot_rekey() {
    let (mut sealer, _) = session_keys(
        material(AeadAlgorithm::ChaCha20Poly1305, u16::MAX, 1, 2),
        None,
    )
    .unwrap();
    assert_eq!(sealer.rekey(), Err(AeadError::KeyVersionsExhausted));
    assert_eq!(sealer.key_version(), u16::MAX);
    assert!(seal(&mut sealer, &data(b"still usable")).len() > 24);
}

#[test]
fn algorithm_mismatch_is_refused() {
    let limits = Limits::default();
    let (mut aes, _) = link(AeadAlgorithm::Aes256Gcm);
    let (_, mut chacha) = link(AeadAlgorithm::ChaCha20Poly1305);
    let e = chacha
        .open_frame(seal(&mut aes, &data(b"a")), &limits)
        .unwrap_err();
    assert_eq!(
        e,
        AeadError::AlgorithmMismatch {
            expected: AeadAlgorithm::ChaCha20Poly1305,
            found: AeadAlgorithm::Aes256Gcm
        }
    );
}

#[test]
fn malformed_input_is_refused_not_panicked_on() {
    let limits = Limits::default();
    let (mut sealer, mut opener) = link(AeadAlgorithm::Aes256Gcm);
    let wire = seal(&mut sealer, &data(b"abcdef"));
    let plain = BytesMut::from(&data(b"p").to_bytes(&limits).unwrap()[..]);
    assert_eq!(opener.open_frame(plain, &limits), Err(AeadError::NotSealed));
    for cut in [0, 1, 15, 16, 23, 24, wire.len() - 1] {
        let e = opener
            .open_frame(BytesMut::from(&wire[..cut]), &limits)
            .unwrap_err();
        assert!(matches!(e, AeadError::Malformed(_)), "cut {cut}: {e}");
    }
    let mut long = wire.clone();
    long.extend_from_slice(b"x");
    assert_eq!(
        opener.open_frame(long, &limits).unwrap_err().code(),
        ErrorCode::TRAILING_BYTES
    );
    // open_sealed with a body shorter than a tag.
    let short = dtp_codec::Sealed {
        kind: FrameKind::Ack,
        aead: AeadAlgorithm::Aes256Gcm,
        key_version: 1,
        seal_counter: 9,
        ciphertext: Bytes::from_static(&[0; 15]),
    };
    assert!(matches!(
        opener.open_sealed(0, short, &limits),
        Err(AeadError::Malformed(_))
    ));
    assert!(opener.open_frame(wire, &limits).is_ok());
}

#[test]
fn sealing_refuses_what_cannot_be_sent() {
    let limits = Limits {
        max_frame_len: 64,
        ..Limits::default()
    };
    let (mut sealer, _) = link(AeadAlgorithm::Aes256Gcm);
    let mut dst = BytesMut::new();
    // An 18-byte data body + 30 payload = 48 ≤ 64 in plaintext, 72 sealed.
    let e = sealer
        .seal_frame(&data(&[0; 30]), &limits, &mut dst)
        .unwrap_err();
    assert_eq!(e, AeadError::FrameTooLarge { len: 72, max: 64 });
    assert_eq!(e.code(), ErrorCode::FRAME_TOO_LARGE);
    let e = sealer
        .seal_frame(&data(&[0; 60]), &limits, &mut dst)
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::LIMIT_EXCEEDED);
    let sealed = samples().pop().unwrap();
    assert_eq!(
        sealer.seal_frame(&sealed, &limits, &mut dst),
        Err(AeadError::AlreadySealed)
    );
    assert!(dst.is_empty());
    assert_eq!(sealer.seal_counter(), 0, "refusals use no counter");
}

#[test]
fn key_material_and_limits_are_checked() {
    let e = session_keys(material(AeadAlgorithm::Aes256Gcm, 0, 1, 2), None).unwrap_err();
    assert!(matches!(e, AeadError::InvalidKeyMaterial(_)));
    let e = session_keys(material(AeadAlgorithm::Aes256Gcm, 1, 5, 5), None).unwrap_err();
    assert!(matches!(e, AeadError::InvalidKeyMaterial(_)));
    for alg in ALGS {
        let max = KeyLimits::for_algorithm(alg);
        assert_eq!(max.validate(alg), Ok(()));
        assert!(max.hard_seals < u64::MAX, "the counter never wraps");
        let bad = [
            KeyLimits {
                hard_seals: 0,
                ..max
            },
            KeyLimits {
                soft_seals: max.hard_seals + 1,
                ..max
            },
            KeyLimits {
                hard_seals: max.hard_seals + 1,
                soft_seals: 1,
                ..max
            },
        ];
        for l in bad {
            assert!(
                session_keys(material(alg, 1, 1, 2), Some(l)).is_err(),
                "{l:?}"
            );
        }
    }
    let aes = KeyLimits::for_algorithm(AeadAlgorithm::Aes256Gcm);
    assert_eq!(aes.hard_blocks, 1 << 36);
    assert!(
        KeyLimits {
            hard_blocks: 1 << 37,
            soft_blocks: 1,
            ..aes
        }
        .validate(AeadAlgorithm::Aes256Gcm)
        .is_err()
    );
}

#[test]
fn secrets_are_never_printed() {
    let m = material(AeadAlgorithm::Aes256Gcm, 1, 0xab, 0xcd);
    let text = format!("{m:?}");
    assert!(text.contains("<redacted>"));
    assert!(
        !text.contains("171") && !text.to_lowercase().contains("ab, "),
        "{text}"
    );
}

#[test]
fn open_sealed_decrypts_in_place_when_unshared() {
    let limits = Limits::default();
    let (mut sealer, mut opener) = link(AeadAlgorithm::ChaCha20Poly1305);
    let f = data(b"zero copy please");
    let mut buf = seal(&mut sealer, &f);
    let frame = FrameDecoder::new(limits).decode(&mut buf).unwrap().unwrap();
    // The receive buffer's remainder shares the memory until it is dropped;
    // while shared, open_sealed copies (see the next test).
    drop(buf);
    let Body::Sealed(s) = frame.body else {
        panic!("not sealed")
    };
    let ptr = s.ciphertext.as_ptr();
    let opened = opener.open_sealed(frame.stream_id, s, &limits).unwrap();
    let Body::Data(d) = &opened.body else {
        panic!("not data")
    };
    // The payload lies inside the memory the ciphertext arrived in.
    let start = ptr as usize;
    let p = d.payload.as_ptr() as usize;
    assert!(p >= start && p < start + 64, "payload was copied");
    assert_eq!(opened, f);
}

#[test]
fn open_sealed_copies_when_the_buffer_is_shared() {
    let limits = Limits::default();
    let (mut sealer, mut opener) = link(AeadAlgorithm::Aes256Gcm);
    let f = data(b"shared");
    let wire = seal(&mut sealer, &f).freeze();
    let (frame, _) = decode_frame(&wire, &limits).unwrap();
    let Body::Sealed(s) = frame.body else {
        panic!("not sealed")
    };
    assert_eq!(opener.open_sealed(frame.stream_id, s, &limits).unwrap(), f);
    // The shared bytes were not decrypted under the other handle's feet.
    let (again, _) = decode_frame(&wire, &limits).unwrap();
    assert!(matches!(again.body, Body::Sealed(_)));
    let (_, mut fresh) = link(AeadAlgorithm::Aes256Gcm);
    assert_eq!(
        fresh
            .open_frame(BytesMut::from(&wire[..]), &limits)
            .unwrap(),
        f
    );
}
