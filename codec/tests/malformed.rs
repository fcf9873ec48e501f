//! SPEC FRM-5: malformed input yields a typed error naming the field and the
//! byte offset; every length is bounded.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use bytes::{Bytes, BytesMut};
use dtp_codec::*;

fn sample(kind: FrameKind) -> LogicalFrame {
    samples()
        .into_iter()
        .find(|f| f.kind() == kind && !matches!(f.body, Body::Sealed(_)))
        .unwrap()
}

fn wire(f: &LogicalFrame) -> Vec<u8> {
    f.to_bytes(&Limits::default()).unwrap().to_vec()
}

fn decode(raw: Vec<u8>) -> Result<(LogicalFrame, usize), DecodeError> {
    decode_frame(&Bytes::from(raw), &Limits::default())
}

fn malformed(raw: Vec<u8>) -> (DecodeErrorKind, &'static str, usize) {
    match decode(raw) {
        Err(DecodeError::Malformed {
            kind,
            field,
            offset,
        }) => (kind, field, offset),
        other => panic!("expected a malformed-frame error, got {other:?}"),
    }
}

#[test]
fn bad_magic_is_refused_at_the_first_byte() {
    assert_eq!(
        malformed(vec![0x47]),
        (DecodeErrorKind::BadMagic, "header.magic", 0)
    );
    let mut w = wire(&sample(FrameKind::Ack));
    w[1] = 0;
    assert_eq!(malformed(w), (DecodeErrorKind::BadMagic, "header.magic", 1));
}

#[test]
fn unknown_version_is_refused() {
    let mut w = wire(&sample(FrameKind::Ack));
    w[2] = 2;
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::UnsupportedVersion(2), "header.version", 2)
    );
}

#[test]
fn unknown_kind_is_refused() {
    for k in [0u8, 9, 0xff] {
        let mut w = wire(&sample(FrameKind::Ack));
        w[3] = k;
        assert_eq!(
            malformed(w),
            (DecodeErrorKind::UnknownKind(k), "header.kind", 3)
        );
    }
}

#[test]
fn reserved_flags_are_refused() {
    let mut w = wire(&sample(FrameKind::Ack));
    w[4] = 0x80;
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::ReservedBits(0x80), "header.flags", 4)
    );
}

#[test]
fn unknown_algorithm_and_plaintext_key_version_are_refused() {
    let mut w = wire(&sample(FrameKind::Ack));
    w[5] = 9;
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::UnknownAlgorithm(9), "header.aead", 5)
    );
    let mut w = wire(&sample(FrameKind::Ack));
    w[7] = 1;
    let (kind, field, at) = malformed(w);
    assert!(matches!(kind, DecodeErrorKind::Inconsistent(_)));
    assert_eq!((field, at), ("header.key_version", 6));
}

#[test]
fn oversized_length_is_refused_from_the_header_alone() {
    let limits = Limits {
        max_frame_len: 1000,
        ..Limits::default()
    };
    let mut w = wire(&sample(FrameKind::Ack));
    w[12..16].copy_from_slice(&1001u32.to_be_bytes());
    // Only the header is present: the length is refused without waiting for the body.
    let err = peek_frame_len(&w[..16], &limits).unwrap_err();
    assert_eq!(
        err,
        DecodeError::Malformed {
            kind: DecodeErrorKind::FrameTooLarge {
                len: 1001,
                max: 1000
            },
            field: "header.length",
            offset: 12
        }
    );
    assert_eq!(err.code(), ErrorCode::FRAME_TOO_LARGE);
}

#[test]
fn encoder_refuses_what_the_decoder_would() {
    let limits = Limits {
        max_frame_len: 100,
        ..Limits::default()
    };
    let mut f = sample(FrameKind::Data);
    if let Body::Data(d) = &mut f.body {
        d.payload = Bytes::from(vec![0; 200]);
    }
    assert!(matches!(
        f.encoded_len(&limits),
        Err(EncodeError::LimitExceeded {
            field: "frame length",
            ..
        })
    ));

    let mut f = sample(FrameKind::Request);
    if let Body::Request(q) = &mut f.body {
        q.request_type = RequestType::Adjustment; // without an agreement id
    }
    assert!(matches!(
        f.to_bytes(&Limits::default()),
        Err(EncodeError::Inconsistent(_))
    ));

    let empty = LogicalFrame::plain(
        0,
        Body::Control(ControlMessage::Heartbeat(Heartbeat { beats: vec![] })),
    );
    assert!(matches!(
        empty.to_bytes(&Limits::default()),
        Err(EncodeError::Inconsistent(_))
    ));

    let mut small = [0u8; 8];
    let err = sample(FrameKind::Ack)
        .encode(&mut &mut small[..], &Limits::default())
        .unwrap_err();
    assert_eq!(
        err,
        EncodeError::BufferTooSmall {
            needed: 24,
            available: 8
        }
    );
}

#[test]
fn a_field_past_the_declared_length_is_truncated_not_incomplete() {
    // An ack whose declared length is 4 but whose body needs 8.
    let mut w = wire(&sample(FrameKind::Ack));
    w[12..16].copy_from_slice(&4u32.to_be_bytes());
    w.truncate(20);
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::Truncated, "ack.cumulative", 16)
    );
}

#[test]
fn trailing_bytes_after_a_fixed_body_are_refused() {
    let mut w = wire(&sample(FrameKind::Ack));
    w.push(0);
    w[12..16].copy_from_slice(&9u32.to_be_bytes());
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::TrailingBytes(1), "body", 24)
    );
}

#[test]
fn invalid_enum_values_name_their_field() {
    // Relation type 9 in the second data sample (first relation at byte 16+1+8+8+1).
    let f = samples()
        .into_iter()
        .find(|f| matches!(&f.body, Body::Data(d) if !d.relations.is_empty()))
        .unwrap();
    let mut w = wire(&f);
    let at = 16 + 1 + 8 + 8 + 1;
    w[at] = 9;
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::InvalidValue(9), "data.relations.type", at)
    );
}

#[test]
fn invalid_utf8_points_at_the_bad_byte() {
    let f = LogicalFrame::plain(
        0,
        Body::Close(CloseFrame {
            code: ErrorCode::NORMAL,
            reason: "abcd".into(),
        }),
    );
    let mut w = wire(&f);
    // header 16, code 2, length 2, then "abcd": break the third character.
    w[16 + 2 + 2 + 2] = 0xff;
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::InvalidUtf8, "close.reason", 22)
    );
}

#[test]
fn map_keys_must_be_strictly_ascending() {
    let mut f = sample(FrameKind::Request);
    if let Body::Request(q) = &mut f.body {
        q.terms = [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]
        .into();
    }
    let mut w = wire(&f);
    // Rename key "b" to "a": a duplicate.
    let pos = w.iter().rposition(|&b| b == b'b').unwrap();
    w[pos] = b'a';
    let (kind, field, _) = malformed(w);
    assert_eq!(
        (kind, field),
        (DecodeErrorKind::NotCanonical, "request.terms")
    );
}

#[test]
fn counts_over_their_ceiling_are_refused() {
    let limits = Limits {
        max_relations: 1,
        ..Limits::default()
    };
    let f = samples()
        .into_iter()
        .find(|f| matches!(&f.body, Body::Data(d) if d.relations.len() == 2))
        .unwrap();
    let w = f.to_bytes(&Limits::default()).unwrap();
    match decode_frame(&w, &limits) {
        Err(DecodeError::Malformed {
            kind: DecodeErrorKind::LimitExceeded { found: 2, max: 1 },
            field,
            ..
        }) => {
            assert_eq!(field, "data.relation_count")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_control_type_is_refused() {
    let mut w = wire(&sample(FrameKind::Control));
    w[16] = 0x42;
    assert_eq!(
        malformed(w),
        (DecodeErrorKind::UnknownKind(0x42), "control.type", 16)
    );
}

#[test]
fn sealed_frames_need_room_for_counter_and_tag() {
    let f = samples()
        .into_iter()
        .find(|f| matches!(f.body, Body::Sealed(_)))
        .unwrap();
    let mut w = wire(&f);
    w[12..16].copy_from_slice(&23u32.to_be_bytes());
    w.truncate(16 + 23);
    let (kind, field, at) = malformed(w);
    assert_eq!(kind, DecodeErrorKind::LimitExceeded { found: 23, max: 24 });
    assert_eq!((field, at), ("header.length", 12));
}

#[test]
fn stream_decoder_refuses_garbage_without_buffering_it() {
    let dec = FrameDecoder::default();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
    let err = dec.decode(&mut buf).unwrap_err();
    assert_eq!(err.code(), ErrorCode::BAD_MAGIC);
}

#[test]
fn errors_render_code_field_and_offset() {
    let mut w = wire(&sample(FrameKind::Ack));
    w[3] = 0x2a;
    let e = decode(w).unwrap_err();
    assert_eq!(
        e.to_string(),
        "1003 UNKNOWN_KIND header.kind: unknown kind or type 42 at byte 3"
    );
    assert_eq!(
        e.shifted(100).to_string(),
        "1003 UNKNOWN_KIND header.kind: unknown kind or type 42 at byte 103"
    );
}

#[test]
fn error_codes_have_names_both_ways() {
    for code in [
        ErrorCode::DAG_CYCLE_DETECTED,
        ErrorCode::BUFFER_FULL,
        ErrorCode::E_HANDOVER_RETRY_LIMIT,
        ErrorCode::E_RESOURCE_UNKNOWN,
        ErrorCode::E_RESOURCE_UNAVAILABLE,
        ErrorCode::E_HANDOVER_TIMEOUT,
    ] {
        assert_eq!(ErrorCode::from_name(code.name().unwrap()), Some(code));
    }
    assert_eq!(ErrorCode::E_RESOURCE_UNKNOWN.0, 7008);
    assert_eq!(ErrorCode::E_RESOURCE_UNAVAILABLE.0, 7009);
    assert_eq!(ErrorCode::E_HANDOVER_TIMEOUT.0, 8008);
    assert_eq!(ErrorCode::DAG_CYCLE_DETECTED.0, 4001);
    assert_eq!(ErrorCode::BUFFER_FULL.0, 6001);
    assert_eq!(ErrorCode(4242).to_string(), "4242 UNKNOWN");
}

#[test]
fn json_algorithm_names_are_the_documented_ones() {
    use dtp_codec::json::{from_json_str, to_json};
    // The sealed line of FORMAT.md §9, as documented.
    let line = r#"{"version":1,"stream_id":1,"kind":"data","sealed":{"aead":"aes-256-gcm","key_version":1,"seal_counter":0,"ciphertext_hex":"a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5"}}"#;
    let f = from_json_str(line).unwrap();
    assert!(matches!(&f.body, Body::Sealed(s) if s.aead == AeadAlgorithm::Aes256Gcm));
    assert_eq!(to_json(&f).to_string(), line);
    for aead in [AeadAlgorithm::Aes256Gcm, AeadAlgorithm::ChaCha20Poly1305] {
        let v = serde_json::to_value(aead).unwrap();
        assert_eq!(v, aead.name(), "the JSON name is the pretty printer's name");
    }
}

#[test]
fn json_is_strict() {
    use dtp_codec::json::from_json_str;
    let ok = r#"{"stream_id":1,"kind":"ack","body":{"cumulative":5}}"#;
    assert_eq!(
        from_json_str(ok).unwrap().body,
        Body::Ack(AckFrame { cumulative: 5 })
    );
    for bad in [
        r#"{"stream_id":1,"kind":"ack","body":{"cumulative":5,"extra":1}}"#,
        r#"{"stream_id":1,"kind":"ack","body":{"cumulative":5},"x":0}"#,
        r#"{"stream_id":1,"kind":"ack"}"#,
        r#"{"stream_id":1,"kind":"nope","body":{}}"#,
        r#"{"version":2,"stream_id":1,"kind":"ack","body":{"cumulative":5}}"#,
        r#"{"stream_id":1,"kind":"control","body":{"type":"session_release","session_id":"00000000-0000-0000-0000-000000000000","x":1}}"#,
        r#"{"stream_id":1,"kind":"data","body":{"fragment_id":1,"sequence":1,"payload_hex":"abc"}}"#,
    ] {
        assert!(from_json_str(bad).is_err(), "accepted: {bad}");
    }
}

#[test]
fn pretty_printer_shows_every_header_field() {
    for f in samples() {
        let text = f.to_string();
        let first = text.lines().next().unwrap();
        for key in [
            "DTP v1",
            "stream=",
            "flags=",
            "aead=",
            "key_version=",
            "length=",
        ] {
            assert!(first.contains(key), "{key} missing from {first:?}");
        }
        assert!(first.contains(f.kind().name()));
    }
    let sealed = samples()
        .into_iter()
        .find(|f| matches!(f.body, Body::Sealed(_)))
        .unwrap();
    assert!(
        sealed
            .to_string()
            .contains("aead=aes-256-gcm key_version=1")
    );
}

#[test]
fn pretty_printer_never_shows_credentials() {
    let f = samples()
        .into_iter()
        .find(|f| matches!(&f.body, Body::Control(ControlMessage::AuthRequest(_))))
        .unwrap();
    let text = f.to_string();
    assert!(!text.contains("signed-credential-bytes"));
    assert!(text.contains("bytes (not shown)"));
}

/// FORMAT.md §5.8: a handshake stage outside 1 … 8 is refused with its
/// field and offset, and the encoder refuses to write one.
#[test]
fn bad_handshake_bodies_are_refused() {
    for stage in [0u8, HANDSHAKE_MAX_STAGE + 1, 0xff] {
        let mut w = wire(&sample(FrameKind::Handshake));
        w[HEADER_LEN] = stage;
        assert_eq!(
            malformed(w),
            (
                DecodeErrorKind::InvalidValue(stage.into()),
                "handshake.stage",
                HEADER_LEN
            )
        );
    }
    let empty = LogicalFrame::plain(
        0,
        Body::Handshake(HandshakeFrame {
            stage: 0,
            message: Bytes::new(),
        }),
    );
    assert!(empty.to_bytes(&Limits::default()).is_err());
}
