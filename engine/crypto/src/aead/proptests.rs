//! Property tests: every frame sealed then opened is itself again, and no
//! single-byte change to a sealed frame is accepted.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use bytes::{Bytes, BytesMut};
use dtp_codec::{
    AckFrame, Body, CloseFrame, DataFrame, ErrorCode, Limits, LogicalFrame, Relation, RelationType,
    ResumeFrame,
};
use proptest::prelude::*;
use uuid::Uuid;

use super::tests::{ALGS, link, plain_samples, seal};

fn relation() -> impl Strategy<Value = Relation> {
    (1u8..=3, any::<u64>()).prop_map(|(k, target)| Relation {
        kind: RelationType::from_u8(k).unwrap(),
        target,
    })
}

/// Random plaintext frames of every shape the sealer may see.
fn frame() -> impl Strategy<Value = LogicalFrame> {
    let samples = plain_samples();
    let n = samples.len();
    prop_oneof![
        (0..n).prop_map(move |i| samples[i].clone()),
        (
            any::<u32>(),
            proptest::option::of(any::<u128>()),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(relation(), 0..4),
            proptest::collection::vec(any::<u8>(), 0..600),
        )
            .prop_map(
                |(stream, agreement, fragment_id, sequence, relations, payload)| {
                    LogicalFrame::plain(
                        stream,
                        Body::Data(DataFrame {
                            agreement_id: agreement.map(Uuid::from_u128),
                            fragment_id,
                            sequence,
                            relations,
                            payload: Bytes::from(payload),
                        }),
                    )
                }
            ),
        (any::<u32>(), any::<u64>())
            .prop_map(|(s, cumulative)| LogicalFrame::plain(s, Body::Ack(AckFrame { cumulative }))),
        (any::<u32>(), any::<u128>(), any::<u64>()).prop_map(|(s, id, highest_received)| {
            LogicalFrame::plain(
                s,
                Body::Resume(ResumeFrame {
                    session_id: Uuid::from_u128(id),
                    highest_received,
                }),
            )
        }),
        (any::<u32>(), any::<u16>(), ".{0,40}").prop_map(|(s, code, reason)| {
            LogicalFrame::plain(
                s,
                Body::Close(CloseFrame {
                    code: ErrorCode(code),
                    reason,
                }),
            )
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// SPEC ENC-1, ENC-2: seal then open gives every frame back, in order,
    /// through both opening paths, under both algorithms.
    #[test]
    fn sealed_frames_open_to_the_originals(frames in proptest::collection::vec(frame(), 1..8)) {
        let limits = Limits::default();
        for alg in ALGS {
            let (mut sealer, mut opener) = link(alg);
            let (_, mut opener2) = link(alg);
            let mut stream = BytesMut::new();
            for f in &frames {
                let wire = seal(&mut sealer, f);
                stream.extend_from_slice(&wire);
                prop_assert_eq!(&opener.open_frame(wire, &limits).unwrap(), f);
            }
            let decoder = dtp_codec::FrameDecoder::new(limits);
            for f in &frames {
                let got = decoder.decode(&mut stream).unwrap().unwrap();
                let Body::Sealed(s) = got.body else { panic!("not sealed") };
                prop_assert_eq!(&opener2.open_sealed(got.stream_id, s, &limits).unwrap(), f);
            }
        }
    }

    /// SPEC ENC-2: any single-byte change anywhere in a sealed frame is
    /// refused, and the refusal leaves the opener able to open the original.
    #[test]
    fn any_single_byte_mutation_is_rejected(
        f in frame(),
        pos in any::<prop::sample::Index>(),
        mask in 1u8..=255,
        chacha in any::<bool>(),
    ) {
        let limits = Limits::default();
        let (mut sealer, mut opener) = link(ALGS[usize::from(chacha)]);
        let wire = seal(&mut sealer, &f);
        let mut bad = wire.clone();
        let i = pos.index(bad.len());
        bad[i] ^= mask;
        prop_assert!(opener.open_frame(bad.clone(), &limits).is_err(), "byte {} ^ {:#x} accepted", i, mask);
        let mut in_place = bad.to_vec();
        prop_assert!(opener.open_in_place(&mut in_place, &limits).is_err());
        prop_assert_eq!(opener.stats().opened_frames, 0);
        prop_assert_eq!(&opener.open_frame(wire, &limits).unwrap(), &f);
    }

    /// Rekeys at random points: the opener follows every one.
    #[test]
    fn opener_follows_any_rekey_schedule(rekey_after in proptest::collection::vec(any::<bool>(), 1..24)) {
        let limits = Limits::default();
        let (mut sealer, mut opener) = link(ALGS[0]);
        let f = plain_samples()[5].clone();
        for (i, rekey) in rekey_after.iter().enumerate() {
            let wire = seal(&mut sealer, &f);
            prop_assert_eq!(&opener.open_frame(wire, &limits).unwrap(), &f, "frame {}", i);
            if *rekey {
                sealer.rekey().unwrap();
            }
        }
        prop_assert_eq!(opener.stats().rekeys_received + u64::from(*rekey_after.last().unwrap()), sealer.stats().rekeys_sent);
    }
}
