//! Message layer tests: fragmentation, UTF-8, close payloads, ping/pong
//! (RFC 6455 §5.4–5.6, §7.4), with the Autobahn|Testsuite cases they mirror.

use proptest::prelude::*;

use super::*;

const KEY: [u8; 4] = [0x12, 0x34, 0x56, 0x78];

/// A masked client frame.
fn cf(fin: bool, op: Opcode, payload: &[u8]) -> Vec<u8> {
    encode_frame(Role::Client, fin, op, payload, Some(KEY)).unwrap()
}

/// Decodes every frame of `wire` on the server side; stops at the first error.
fn run(max: u64, frames: &[Vec<u8>]) -> (Vec<Message>, Option<WsError>) {
    let mut d = Decoder::new(FrameConfig::server(max));
    let mut out = Vec::new();
    for f in frames {
        let mut buf = f.clone();
        match d.decode(&mut buf) {
            Ok((used, msg)) => {
                assert_eq!(used, f.len());
                out.extend(msg);
            }
            Err(FrameError::Protocol(e)) => return (out, Some(e)),
            Err(e) => panic!("{e:?}"),
        }
    }
    (out, None)
}

fn text(s: &str) -> Message {
    Message::Text(s.to_owned())
}

#[test]
fn autobahn_5_x_fragmented_text_with_a_ping_in_the_middle() {
    let frames = [
        cf(false, Opcode::Text, b"frag"),
        cf(true, Opcode::Ping, b"ping payload"),
        cf(false, Opcode::Continuation, b"ment"),
        cf(true, Opcode::Pong, b""),
        cf(true, Opcode::Continuation, b"ed"),
    ];
    let (msgs, err) = run(1 << 16, &frames);
    assert_eq!(err, None);
    assert_eq!(
        msgs,
        [
            Message::Ping(b"ping payload".to_vec()),
            Message::Pong(vec![]),
            text("fragmented"),
        ]
    );
}

#[test]
fn fragmented_binary_and_zero_length_fragments() {
    let frames = [
        cf(false, Opcode::Binary, b""),
        cf(false, Opcode::Continuation, &[1, 2]),
        cf(false, Opcode::Continuation, b""),
        cf(true, Opcode::Continuation, b""),
        cf(true, Opcode::Text, b""),
        cf(true, Opcode::Binary, b""),
    ];
    let (msgs, err) = run(1 << 16, &frames);
    assert_eq!(err, None);
    assert_eq!(
        msgs,
        [
            Message::Binary(vec![1, 2]),
            text(""),
            Message::Binary(vec![])
        ]
    );
}

#[test]
fn continuation_rules() {
    // Autobahn 5.9ff: a continuation with nothing to continue.
    let (_, err) = run(1024, &[cf(true, Opcode::Continuation, b"x")]);
    assert_eq!(err.unwrap().kind, WsErrorKind::UnexpectedContinuation);
    // Autobahn 5.18: a new text frame inside a fragmented message.
    let (_, err) = run(
        1024,
        &[cf(false, Opcode::Text, b"a"), cf(true, Opcode::Text, b"b")],
    );
    let err = err.unwrap();
    assert_eq!(
        (err.kind.clone(), err.close_code()),
        (WsErrorKind::ExpectedContinuation, CloseCode::PROTOCOL_ERROR)
    );
    let (_, err) = run(
        1024,
        &[
            cf(false, Opcode::Binary, b"a"),
            cf(true, Opcode::Text, b"b"),
        ],
    );
    assert_eq!(err.unwrap().kind, WsErrorKind::ExpectedContinuation);
}

#[test]
fn the_message_ceiling_spans_fragments_and_is_1009() {
    let (msgs, err) = run(
        8,
        &[
            cf(false, Opcode::Text, b"1234"),
            cf(true, Opcode::Continuation, b"5678"),
        ],
    );
    assert_eq!((msgs, err), (vec![text("12345678")], None));
    let (_, err) = run(
        8,
        &[
            cf(false, Opcode::Text, b"1234"),
            cf(true, Opcode::Continuation, b"56789"),
        ],
    );
    let err = err.unwrap();
    assert_eq!(err.kind, WsErrorKind::MessageTooBig { len: 9, max: 8 });
    assert_eq!(err.close_code(), CloseCode::MESSAGE_TOO_BIG);
    // Control frames between fragments do not count towards the message.
    let frames = [
        cf(false, Opcode::Binary, b"1234"),
        cf(true, Opcode::Ping, b"123456"),
        cf(true, Opcode::Continuation, b"5678"),
    ];
    assert_eq!(run(8, &frames).1, None);
}

#[test]
fn a_violation_is_reported_before_the_payload_arrives() {
    let mut d = Decoder::new(FrameConfig::server(1024));
    let mut first = cf(false, Opcode::Text, b"a");
    d.decode(&mut first).unwrap();
    let mut head = cf(true, Opcode::Binary, &[0; 500]);
    head.truncate(8);
    match d.decode(&mut head) {
        Err(FrameError::Protocol(e)) => assert_eq!(e.kind, WsErrorKind::ExpectedContinuation),
        other => panic!("{other:?}"),
    }
    let mut d = Decoder::new(FrameConfig::server(1024));
    let mut partial = cf(true, Opcode::Text, b"hello");
    assert_eq!(
        d.decode(&mut partial[..7]),
        Err(FrameError::Incomplete { needed: 11 })
    );
}

#[test]
fn autobahn_6_x_invalid_utf8_fails_fast_even_split_across_fragments() {
    // 6.4.1-style: valid prefix, then the invalid byte arrives in its own fragment.
    let frames = [
        cf(false, Opcode::Text, "κόσμε".as_bytes()),
        cf(false, Opcode::Continuation, &[0xF4, 0x90]),
        cf(true, Opcode::Continuation, b"edited"),
    ];
    let (msgs, err) = run(1024, &frames);
    assert!(msgs.is_empty());
    let err = err.unwrap();
    assert_eq!(err.kind, WsErrorKind::InvalidUtf8);
    assert_eq!(err.offset, "κόσμε".len() as u64);
    assert_eq!(err.close_code(), CloseCode::INVALID_PAYLOAD);
    // A valid code point split across fragments is fine.
    let euro = "€".as_bytes();
    let frames = [
        cf(false, Opcode::Text, &euro[..1]),
        cf(false, Opcode::Continuation, &euro[1..2]),
        cf(true, Opcode::Continuation, &euro[2..]),
    ];
    assert_eq!(run(1024, &frames), (vec![text("€")], None));
}

#[test]
fn a_truncated_sequence_fails_at_the_end_of_the_message() {
    let euro = "€".as_bytes();
    let frames = [
        cf(false, Opcode::Text, b"ok"),
        cf(true, Opcode::Continuation, &euro[..2]),
    ];
    let (_, err) = run(1024, &frames);
    assert_eq!(
        err.unwrap(),
        WsError {
            kind: WsErrorKind::InvalidUtf8,
            offset: 2
        }
    );
    // Single frame: surrogates, overlongs, > U+10FFFF.
    for bad in [
        &[0xED, 0xA0, 0x80][..],
        &[0xC0, 0xAF],
        &[0xF4, 0x90, 0x80, 0x80],
        &[0xFF],
    ] {
        let (_, err) = run(1024, &[cf(true, Opcode::Text, bad)]);
        assert_eq!(
            err.unwrap().close_code(),
            CloseCode::INVALID_PAYLOAD,
            "{bad:?}"
        );
    }
    // Binary is never checked.
    assert_eq!(run(1024, &[cf(true, Opcode::Binary, &[0xFF])]).1, None);
}

#[test]
fn close_payloads() {
    assert_eq!(parse_close_payload(&[]), Ok(None));
    assert_eq!(
        parse_close_payload(&[0x03]).unwrap_err().kind,
        WsErrorKind::CloseTooShort
    );
    let ok = parse_close_payload(&[0x03, 0xE8, b'b', b'y', b'e'])
        .unwrap()
        .unwrap();
    assert_eq!(
        ok,
        CloseFrame {
            code: CloseCode::NORMAL,
            reason: "bye".into()
        }
    );
    let bad_reason = parse_close_payload(&[0x03, 0xE8, b'a', 0xFF]).unwrap_err();
    assert_eq!(
        (bad_reason.kind.clone(), bad_reason.offset),
        (WsErrorKind::InvalidUtf8, 3)
    );
    assert_eq!(bad_reason.close_code(), CloseCode::INVALID_PAYLOAD);
}

#[test]
fn close_codes_valid_on_the_wire_autobahn_7_7_and_7_9() {
    for code in [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999,
        4000, 4999,
    ] {
        assert!(parse_close_payload(&code.to_be_bytes()).is_ok(), "{code}");
    }
    for code in [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ] {
        let e = parse_close_payload(&code.to_be_bytes()).unwrap_err();
        assert_eq!(e.kind, WsErrorKind::InvalidCloseCode(code));
        assert_eq!(e.close_code(), CloseCode::PROTOCOL_ERROR);
    }
}

#[test]
fn close_ends_the_direction() {
    let frames = [
        cf(false, Opcode::Text, b"abandoned"),
        cf(true, Opcode::Close, &[0x03, 0xE8]),
        cf(true, Opcode::Ping, b""),
    ];
    let (msgs, err) = run(1024, &frames);
    let close = Message::Close(Some(CloseFrame {
        code: CloseCode::NORMAL,
        reason: String::new(),
    }));
    assert_eq!(msgs, [close]);
    assert_eq!(err.unwrap().kind, WsErrorKind::FrameAfterClose);
    assert_eq!(
        run(1024, &[cf(true, Opcode::Close, b"")]).0,
        [Message::Close(None)]
    );
}

#[test]
fn ping_with_125_bytes_is_echoed_and_pong_encodes_for_the_server() {
    let payload = [0xFE; 125];
    let (msgs, _) = run(1024, &[cf(true, Opcode::Ping, &payload)]);
    let Message::Ping(p) = &msgs[0] else {
        panic!("{msgs:?}")
    };
    let pong = encode_frame(Role::Server, true, Opcode::Pong, p, None).unwrap();
    let mut c = Decoder::new(FrameConfig::client(1024));
    let mut buf = pong.clone();
    assert_eq!(
        c.decode(&mut buf).unwrap(),
        (pong.len(), Some(Message::Pong(payload.to_vec())))
    );
}

#[test]
fn several_frames_in_one_buffer_decode_one_at_a_time() {
    let mut wire = cf(false, Opcode::Text, b"he");
    wire.extend(cf(true, Opcode::Continuation, b"llo"));
    wire.extend(cf(true, Opcode::Binary, &[7; 300]));
    let mut d = Decoder::new(FrameConfig::server(1024));
    let mut at = 0;
    let mut got = Vec::new();
    while at < wire.len() {
        let (used, msg) = d.decode(&mut wire[at..]).unwrap();
        at += used;
        got.extend(msg);
    }
    assert_eq!(got, [text("hello"), Message::Binary(vec![7; 300])]);
}

proptest! {
    #[test]
    fn utf8_in_any_split_matches_std(bytes in prop::collection::vec(any::<u8>(), 0..40), cuts in prop::collection::vec(0usize..40, 0..6)) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
        cuts.sort_unstable();
        let mut v = Utf8Validator::new();
        let mut prev = 0;
        let mut result = Ok(());
        for c in cuts.into_iter().chain([bytes.len()]) {
            result = result.and_then(|()| v.feed(&bytes[prev..c]));
            prev = c;
        }
        let result = result.and_then(|()| v.finish());
        match std::str::from_utf8(&bytes) {
            Ok(_) => prop_assert_eq!(result, Ok(())),
            Err(e) => prop_assert_eq!(result, Err(e.valid_up_to() as u64)),
        }
    }

    #[test]
    fn random_frame_sequences_never_panic(
        frames in prop::collection::vec((any::<bool>(), 0u8..16, prop::collection::vec(any::<u8>(), 0..20)), 0..8),
        max in 0u64..64,
    ) {
        let mut d = Decoder::new(FrameConfig::server(max));
        for (fin, op, payload) in frames {
            let mut f = vec![(u8::from(fin) << 7) | op, 0x80 | payload.len() as u8, 1, 2, 3, 4];
            f.extend(payload);
            if d.decode(&mut f).is_err() {
                break;
            }
        }
    }
}

#[test]
fn streamed_payload_fails_fast_inside_one_frame() {
    let mut r = Reassembler::new(1 << 20);
    let bad = [b'a', b'b', 0xC0, 0xAF, b'z', b'z'];
    let h = parse_header(&cf(true, Opcode::Text, &bad), &FrameConfig::server(1 << 20)).unwrap();
    r.begin_frame(&h).unwrap();
    r.payload(&bad[..2]).unwrap();
    let e = r.payload(&bad[2..4]).unwrap_err();
    assert_eq!((e.kind, e.offset), (WsErrorKind::InvalidUtf8, 2));

    // Pieces of a good frame, including a control frame between fragments.
    let mut r = Reassembler::new(1 << 20);
    let cfg = FrameConfig::server(1 << 20);
    let h1 = parse_header(&cf(false, Opcode::Text, "día".as_bytes()), &cfg).unwrap();
    r.begin_frame(&h1).unwrap();
    for b in "día".as_bytes() {
        r.payload(&[*b]).unwrap();
    }
    assert_eq!(r.end_frame(), Ok(None));
    let ping = parse_header(&cf(true, Opcode::Ping, b"p"), &cfg).unwrap();
    assert_eq!(
        r.on_frame(&ping, b"p"),
        Ok(Some(Message::Ping(b"p".to_vec())))
    );
    let h2 = parse_header(&cf(true, Opcode::Continuation, b"!"), &cfg).unwrap();
    assert_eq!(r.on_frame(&h2, b"!"), Ok(Some(text("día!"))));
}

#[test]
fn payload_that_does_not_match_its_header_is_a_local_bug_1011() {
    let cfg = FrameConfig::server(1024);
    let h = parse_header(&cf(true, Opcode::Binary, b"abc"), &cfg).unwrap();
    let mut r = Reassembler::new(1024);
    assert_eq!(
        r.payload(b"x").unwrap_err().kind,
        WsErrorKind::PayloadMismatch
    );
    assert_eq!(
        r.end_frame().unwrap_err().kind,
        WsErrorKind::PayloadMismatch
    );
    r.begin_frame(&h).unwrap();
    assert_eq!(
        r.begin_frame(&h).unwrap_err().kind,
        WsErrorKind::PayloadMismatch
    );
    assert_eq!(
        r.payload(b"abcd").unwrap_err().close_code(),
        CloseCode::INTERNAL_ERROR
    );
    r.payload(b"ab").unwrap();
    assert_eq!(
        r.end_frame().unwrap_err().kind,
        WsErrorKind::PayloadMismatch
    );
}
