//! SPEC FRM-3: decode(encode(f)) == f for every valid frame, of every kind.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use bytes::{Bytes, BytesMut};
use dtp_codec::*;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use uuid::Uuid;

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn text() -> impl Strategy<Value = String> {
    // Multi-byte characters included, so byte lengths differ from char counts.
    "[a-zA-Z0-9 _:/é漢🚀-]{0,40}"
}

fn terms() -> impl Strategy<Value = Terms> {
    btree_map(text(), text(), 0..6)
}

fn blob() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..300).prop_map(Bytes::from)
}

fn request() -> impl Strategy<Value = RequestFrame> {
    (any::<u64>(), 1u8..=3, uuid(), terms()).prop_map(|(request_id, t, id, terms)| {
        let request_type = match t {
            1 => RequestType::Collection,
            2 => RequestType::Injection,
            _ => RequestType::Adjustment,
        };
        let agreement_id = (request_type == RequestType::Adjustment).then_some(id);
        RequestFrame {
            request_id,
            request_type,
            agreement_id,
            terms,
        }
    })
}

fn decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        uuid().prop_map(|agreement_id| Decision::Accepted { agreement_id }),
        text().prop_map(|reason| Decision::Rejected { reason }),
        terms().prop_map(|terms| Decision::CounterProposal { terms }),
    ]
}

fn relation() -> impl Strategy<Value = Relation> {
    (
        prop_oneof![
            Just(RelationType::DerivedFrom),
            Just(RelationType::Annotates),
            Just(RelationType::Supersedes)
        ],
        any::<u64>(),
    )
        .prop_map(|(kind, target)| Relation { kind, target })
}

fn data() -> impl Strategy<Value = DataFrame> {
    (
        proptest::option::of(uuid()),
        any::<u64>(),
        any::<u64>(),
        vec(relation(), 0..8),
        blob(),
    )
        .prop_map(
            |(agreement_id, fragment_id, sequence, relations, payload)| DataFrame {
                agreement_id,
                fragment_id,
                sequence,
                relations,
                payload,
            },
        )
}

fn beats() -> impl Strategy<Value = Vec<Beat>> {
    vec(
        (uuid(), any::<u64>()).prop_map(|(session_id, sequence_number)| Beat {
            session_id,
            sequence_number,
        }),
        1..5,
    )
}

fn access_mode() -> impl Strategy<Value = AccessMode> {
    prop_oneof![
        Just(AccessMode::Read),
        Just(AccessMode::Write),
        Just(AccessMode::Execute),
        Just(AccessMode::Configure)
    ]
}

fn session_state() -> impl Strategy<Value = SessionState> {
    prop_oneof![
        Just(SessionState::Creating),
        Just(SessionState::Active),
        Just(SessionState::HandoverPending),
        Just(SessionState::Terminating),
        Just(SessionState::Terminated),
    ]
}

fn handover_reason() -> impl Strategy<Value = HandoverFailedReason> {
    prop_oneof![
        Just(HandoverFailedReason::Timeout),
        Just(HandoverFailedReason::PolicyRejected),
        Just(HandoverFailedReason::ReleaseFailed),
        Just(HandoverFailedReason::AcquireFailed),
    ]
}

fn control() -> impl Strategy<Value = ControlMessage> {
    prop_oneof![
        (any::<u64>(), text(), text(), access_mode(), blob()).prop_map(
            |(request_id, fay_id, resource_id, access_mode, credential)| {
                ControlMessage::AuthRequest(AuthRequest {
                    request_id,
                    fay_id,
                    resource_id,
                    access_mode,
                    credential,
                })
            }
        ),
        (any::<u64>(), uuid()).prop_map(|(request_id, session_id)| ControlMessage::AuthResult(
            AuthResult {
                request_id,
                outcome: AuthOutcome::Granted { session_id },
            }
        )),
        (any::<u64>(), any::<u16>(), text()).prop_map(|(request_id, code, message)| {
            ControlMessage::AuthResult(AuthResult {
                request_id,
                outcome: AuthOutcome::Refused {
                    code: ErrorCode(code),
                    message,
                },
            })
        }),
        beats().prop_map(|beats| ControlMessage::Heartbeat(Heartbeat { beats })),
        beats().prop_map(|beats| ControlMessage::HeartbeatAck(HeartbeatAck { beats })),
        uuid().prop_map(|session_id| ControlMessage::SessionRelease(SessionRelease { session_id })),
        (
            uuid(),
            session_state(),
            proptest::option::of(text()),
            terms()
        )
            .prop_map(|(session_id, new_state, reason, details)| {
                ControlMessage::SessionStateChanged(SessionStateChanged {
                    session_id,
                    new_state,
                    reason,
                    details,
                })
            }),
        (uuid(), text(), blob(), text(), terms()).prop_map(
            |(
                source_session_id,
                target_fay_id,
                target_credential,
                handover_reason,
                handover_metadata,
            )| {
                ControlMessage::SessionTransferRequest(SessionTransferRequest {
                    source_session_id,
                    target_fay_id,
                    target_credential,
                    handover_reason,
                    handover_metadata,
                })
            }
        ),
        (uuid(), uuid(), text(), handover_reason(), terms()).prop_map(
            |(handover_id, source_session_id, target_fay_id, reason, details)| {
                ControlMessage::HandoverFailedNotification(HandoverFailedNotification {
                    handover_id,
                    source_session_id,
                    target_fay_id,
                    reason,
                    details,
                })
            }
        ),
    ]
}

fn kind() -> impl Strategy<Value = FrameKind> {
    (1u8..=7).prop_map(|b| FrameKind::from_u8(b).unwrap())
}

fn sealed() -> impl Strategy<Value = Sealed> {
    (
        kind(),
        prop_oneof![
            Just(AeadAlgorithm::Aes256Gcm),
            Just(AeadAlgorithm::ChaCha20Poly1305)
        ],
        any::<u16>(),
        any::<u64>(),
        vec(any::<u8>(), TAG_LEN..200),
    )
        .prop_map(|(kind, aead, key_version, seal_counter, c)| Sealed {
            kind,
            aead,
            key_version,
            seal_counter,
            ciphertext: Bytes::from(c),
        })
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        request().prop_map(Body::Request),
        (any::<u64>(), decision()).prop_map(|(request_id, decision)| Body::Response(
            ResponseFrame {
                request_id,
                decision
            }
        )),
        data().prop_map(Body::Data),
        any::<u64>().prop_map(|cumulative| Body::Ack(AckFrame { cumulative })),
        (uuid(), any::<u64>()).prop_map(|(session_id, highest_received)| Body::Resume(
            ResumeFrame {
                session_id,
                highest_received
            }
        )),
        control().prop_map(Body::Control),
        (any::<u16>(), text()).prop_map(|(code, reason)| Body::Close(CloseFrame {
            code: ErrorCode(code),
            reason
        })),
        sealed().prop_map(Body::Sealed),
        (
            1u8..=HANDSHAKE_MAX_STAGE,
            prop::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(stage, message)| Body::Handshake(HandshakeFrame {
                stage,
                message: message.into()
            })),
    ]
}

fn frame() -> impl Strategy<Value = LogicalFrame> {
    (any::<u32>(), body()).prop_map(|(stream_id, body)| LogicalFrame { stream_id, body })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// FRM-3 over every kind: the bytes decode to the same frame and are
    /// consumed exactly.
    #[test]
    fn frm3_round_trip(f in frame()) {
        let limits = Limits::default();
        let wire = f.to_bytes(&limits).unwrap();
        prop_assert_eq!(wire.len(), f.encoded_len(&limits).unwrap());
        let (back, used) = decode_frame(&wire, &limits).unwrap();
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(&back, &f);
        // Re-encoding is byte-identical: the encoding is canonical.
        prop_assert_eq!(&back.to_bytes(&limits).unwrap(), &wire);
        // Decoding after the head was peeked gives the same frame.
        let head = peek_frame_head(&wire, &limits).unwrap();
        prop_assert_eq!(decode_frame_at(&wire, &head, &limits).unwrap(), (back, used));
    }

    /// The JSON form round-trips too (what `dtp frame encode` relies on).
    #[test]
    fn json_round_trip(f in frame()) {
        let v = dtp_codec::json::to_json(&f);
        let back = dtp_codec::json::from_json(v).unwrap();
        prop_assert_eq!(back, f);
    }

    /// A stream of frames cut at arbitrary points decodes to the same frames,
    /// and a prefix is always "incomplete", never "malformed".
    #[test]
    fn stream_split_anywhere(frames in vec(frame(), 1..6), cuts in vec(any::<prop::sample::Index>(), 0..8)) {
        let limits = Limits::default();
        let mut wire = BytesMut::new();
        for f in &frames {
            f.encode(&mut wire, &limits).unwrap();
        }
        let wire = wire.freeze();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        points.push(wire.len());
        points.sort_unstable();
        let dec = FrameDecoder::new(limits);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        let mut fed = 0;
        for p in points {
            buf.extend_from_slice(&wire[fed..p]);
            fed = p;
            while let Some(f) = dec.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, frames);
    }

    /// Every strict prefix of a frame is `Incomplete` with a `needed` beyond it.
    #[test]
    fn prefixes_are_incomplete(f in frame(), cut in any::<prop::sample::Index>()) {
        let limits = Limits::default();
        let wire = f.to_bytes(&limits).unwrap();
        let n = cut.index(wire.len());
        match decode_frame(&wire.slice(..n), &limits) {
            Err(DecodeError::Incomplete { needed }) => prop_assert!(needed > n && needed <= wire.len()),
            other => prop_assert!(false, "prefix of {} bytes gave {:?}", n, other),
        }
    }

    /// No byte string panics the decoder; whatever decodes re-encodes to the
    /// same bytes.
    #[test]
    fn arbitrary_bytes_never_panic(raw in vec(any::<u8>(), 0..256)) {
        let limits = Limits::default();
        let buf = Bytes::from(raw);
        if let Ok((f, used)) = decode_frame(&buf, &limits) {
            prop_assert_eq!(f.to_bytes(&limits).unwrap(), buf.slice(..used));
        }
    }

    /// Mutating one byte of a valid frame never panics, and a mutant that
    /// still decodes re-encodes to its own bytes (no two encodings of one frame).
    #[test]
    fn single_byte_mutations(f in frame(), at in any::<prop::sample::Index>(), x in 1u8..=255) {
        let limits = Limits::default();
        let mut wire = f.to_bytes(&limits).unwrap().to_vec();
        let i = at.index(wire.len());
        wire[i] ^= x;
        let buf = Bytes::from(wire);
        if let Ok((g, used)) = decode_frame(&buf, &limits) {
            prop_assert_eq!(g.to_bytes(&limits).unwrap(), buf.slice(..used));
        }
    }
}

#[test]
fn every_sample_round_trips_and_covers_every_kind() {
    let limits = Limits::default();
    let samples = samples();
    for k in 1..=7 {
        let kind = FrameKind::from_u8(k).unwrap();
        assert!(
            samples
                .iter()
                .any(|f| f.kind() == kind && !matches!(f.body, Body::Sealed(_))),
            "no sample of {kind:?}"
        );
    }
    for f in samples {
        let wire = f.to_bytes(&limits).unwrap();
        assert_eq!(decode_frame(&wire, &limits).unwrap().0, f);
    }
}
