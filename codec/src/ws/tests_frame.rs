//! Frame layer tests: every header rule of RFC 6455 §5.2, masking, encoding.

use proptest::prelude::*;

use super::*;

const MAX: u64 = 1 << 20;

fn server() -> FrameConfig {
    FrameConfig::server(MAX)
}

fn client() -> FrameConfig {
    FrameConfig::client(MAX)
}

fn proto(buf: &[u8], cfg: &FrameConfig) -> (WsErrorKind, u64) {
    match parse_header(buf, cfg) {
        Err(FrameError::Protocol(e)) => (e.kind, e.offset),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn parses_a_masked_client_text_frame() {
    let wire = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let h = parse_header(&wire, &server()).unwrap();
    assert_eq!(
        h,
        FrameHeader {
            fin: true,
            rsv: 0,
            opcode: Opcode::Text,
            mask: Some([0x37, 0xfa, 0x21, 0x3d]),
            payload_len: 5,
            header_len: 6,
        }
    );
    // RFC 6455 §5.7: the masked "Hello".
    let mut payload = wire[6..].to_vec();
    apply_mask(&mut payload, h.mask.unwrap(), 0);
    assert_eq!(payload, b"Hello");
}

#[test]
fn incomplete_headers_say_how_many_bytes_are_needed() {
    let wire = encode_frame(
        Role::Client,
        true,
        Opcode::Binary,
        &[0; 70_000],
        Some([9; 4]),
    )
    .unwrap();
    assert_eq!(&wire[..2], &[0x82, 0xFF]);
    for cut in 0..14 {
        let needed = match cut {
            0 | 1 => 2,
            2..=9 => 10,
            _ => 14,
        };
        assert_eq!(
            parse_header(&wire[..cut], &server()),
            Err(FrameError::Incomplete { needed }),
            "cut at {cut}"
        );
    }
    assert_eq!(parse_header(&wire, &server()).unwrap().header_len, 14);
}

#[test]
fn reserved_bits_need_an_extension() {
    for rsv in 1..8u8 {
        let b0 = 0x80 | (rsv << 4) | 0x1;
        assert_eq!(
            proto(&[b0, 0x80], &server()),
            (WsErrorKind::ReservedBits(rsv), 0)
        );
    }
    let cfg = FrameConfig {
        allowed_rsv: 0b100,
        ..server()
    };
    let h = parse_header(&[0xC1, 0x80, 0, 0, 0, 0], &cfg).unwrap();
    assert_eq!(h.rsv, 0b100);
    assert_eq!(
        proto(&[0xA1, 0x80], &cfg).0,
        WsErrorKind::ReservedBits(0b010)
    );
}

#[test]
fn unknown_opcodes_are_refused_from_the_first_byte() {
    for op in [3u8, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
        assert_eq!(
            proto(&[0x80 | op], &server()),
            (WsErrorKind::UnknownOpcode(op), 0)
        );
        assert_eq!(Opcode::from_u8(op), None);
    }
}

#[test]
fn control_frames_are_never_fragmented_and_at_most_125_bytes() {
    for op in [0x8u8, 0x9, 0xA] {
        assert_eq!(proto(&[op], &server()), (WsErrorKind::FragmentedControl, 0));
        let h = parse_header(&[0x80 | op, 0x80 | 125, 1, 2, 3, 4], &server()).unwrap();
        assert_eq!(h.payload_len, 125);
        // 126 (the 16-bit form) is refused before the extended length arrives.
        assert_eq!(
            proto(&[0x80 | op, 0x80 | 126], &server()),
            (WsErrorKind::ControlTooLong(126), 1)
        );
        assert_eq!(
            proto(&[0x80 | op, 0x80 | 127], &server()).0,
            WsErrorKind::ControlTooLong(127)
        );
    }
    assert!(encode_header(Role::Server, true, Opcode::Ping, 126, None).is_err());
    assert!(encode_header(Role::Server, false, Opcode::Close, 0, None).is_err());
    assert!(encode_header(Role::Server, true, Opcode::Pong, 125, None).is_ok());
}

#[test]
fn lengths_must_be_minimally_encoded() {
    assert_eq!(
        proto(&[0x82, 0xFE, 0x00, 0x7D], &server()),
        (WsErrorKind::NonMinimalLength(125), 2)
    );
    let h = parse_header(&[0x82, 0xFE, 0x00, 0x7E, 0, 0, 0, 0], &server()).unwrap();
    assert_eq!((h.payload_len, h.header_len), (126, 8));
    let mut b = vec![0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF];
    assert_eq!(
        proto(&b, &server()),
        (WsErrorKind::NonMinimalLength(0xFFFF), 2)
    );
    b[7] = 1;
    b[8] = 0;
    b[9] = 0;
    b.extend_from_slice(&[0; 4]);
    assert_eq!(parse_header(&b, &server()).unwrap().payload_len, 0x1_0000);
}

#[test]
fn a_64_bit_length_with_its_top_bit_set_is_refused() {
    let b = [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(proto(&b, &server()), (WsErrorKind::LengthTopBit, 2));
    assert!(encode_header(Role::Server, true, Opcode::Binary, 1 << 63, None).is_err());
}

#[test]
fn frames_over_the_ceiling_are_1009() {
    let cfg = FrameConfig::server(1000);
    let e = match parse_header(&[0x82, 0xFE, 0x03, 0xE9], &cfg) {
        Err(FrameError::Protocol(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        e.kind,
        WsErrorKind::MessageTooBig {
            len: 1001,
            max: 1000
        }
    );
    assert_eq!(e.close_code(), CloseCode::MESSAGE_TOO_BIG);
    assert!(parse_header(&[0x82, 0xFE, 0x03, 0xE8, 0, 0, 0, 0], &cfg).is_ok());
    let huge = [0x82, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
    assert!(matches!(
        proto(&huge, &cfg).0,
        WsErrorKind::MessageTooBig { .. }
    ));
}

#[test]
fn masking_follows_the_role() {
    assert_eq!(
        proto(&[0x81, 0x00], &server()),
        (WsErrorKind::UnmaskedFrame, 1)
    );
    assert_eq!(
        proto(&[0x81, 0x80], &client()),
        (WsErrorKind::MaskedFrame, 1)
    );
    let h = parse_header(&[0x81, 0x00], &client()).unwrap();
    assert_eq!((h.mask, h.header_len), (None, 2));
    assert!(encode_header(Role::Server, true, Opcode::Text, 1, Some([0; 4])).is_err());
    assert!(encode_header(Role::Client, true, Opcode::Text, 1, None).is_err());
    assert_eq!(
        WsError::at(WsErrorKind::UnmaskedFrame, 1).close_code(),
        CloseCode::PROTOCOL_ERROR
    );
}

#[test]
fn zero_length_frames_and_the_three_length_forms() {
    for (len, header_len) in [
        (0u64, 2usize),
        (125, 2),
        (126, 4),
        (65_535, 4),
        (65_536, 10),
    ] {
        let h = encode_header(Role::Server, true, Opcode::Binary, len, None).unwrap();
        assert_eq!(h.as_slice().len(), header_len);
        let p = parse_header(h.as_slice(), &client()).unwrap();
        assert_eq!((p.payload_len, p.header_len), (len, header_len));
        let h = encode_header(Role::Client, true, Opcode::Binary, len, Some([1; 4])).unwrap();
        assert_eq!(
            parse_header(h.as_slice(), &server()).unwrap().header_len,
            header_len + 4
        );
    }
}

#[test]
fn unmasking_in_pieces_matches_unmasking_at_once() {
    let key = [0xA1, 0xB2, 0xC3, 0xD4];
    let data: Vec<u8> = (0..=255u8).cycle().take(1031).collect();
    let mut whole = data.clone();
    apply_mask(&mut whole, key, 0);
    for (i, b) in whole.iter().enumerate() {
        assert_eq!(*b, data[i] ^ key[i % 4]);
    }
    let mut pieces = data.clone();
    let mut at = 0usize;
    for size in [1usize, 3, 7, 2, 64, 5, 1000].iter().cycle() {
        if at >= pieces.len() {
            break;
        }
        let end = (at + size).min(pieces.len());
        apply_mask(&mut pieces[at..end], key, at as u64);
        at = end;
    }
    assert_eq!(pieces, whole);
    apply_mask(&mut pieces, key, 0);
    assert_eq!(pieces, data);
}

fn opcode() -> impl Strategy<Value = Opcode> {
    prop::sample::select(vec![
        Opcode::Continuation,
        Opcode::Text,
        Opcode::Binary,
        Opcode::Close,
        Opcode::Ping,
        Opcode::Pong,
    ])
}

proptest! {
    #[test]
    fn encode_then_parse_round_trips(
        fin in any::<bool>(),
        op in opcode(),
        len in prop_oneof![0u64..=125, 126u64..=70_000, (1u64 << 16)..(1u64 << 63)],
        key in any::<Option<[u8; 4]>>(),
    ) {
        let (fin, len) = if op.is_control() { (true, len % 126) } else { (fin, len) };
        let role = if key.is_some() { Role::Client } else { Role::Server };
        let h = encode_header(role, fin, op, len, key).unwrap();
        let cfg = FrameConfig {
            role: if key.is_some() { Role::Server } else { Role::Client },
            max_message_size: u64::MAX,
            allowed_rsv: 0,
        };
        let p = parse_header(h.as_slice(), &cfg).unwrap();
        prop_assert_eq!(p, FrameHeader {
            fin, rsv: 0, opcode: op, mask: key, payload_len: len, header_len: h.as_slice().len(),
        });
    }

    #[test]
    fn random_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        max in any::<u64>(),
        rsv in 0u8..8,
        server_role in any::<bool>(),
    ) {
        let role = if server_role { Role::Server } else { Role::Client };
        let cfg = FrameConfig { role, max_message_size: max, allowed_rsv: rsv };
        if let Ok(h) = parse_header(&bytes, &cfg) {
            prop_assert!(h.header_len <= bytes.len());
            prop_assert!(h.payload_len <= max);
        }
        let mut buf = bytes.clone();
        let _ = Decoder::new(cfg).decode(&mut buf);
        apply_mask(&mut buf, [1, 2, 3, 4], max);
    }
}

#[test]
fn errors_render_close_code_what_and_offset() {
    let e = WsError::at(WsErrorKind::ControlTooLong(126), 1);
    assert_eq!(
        e.to_string(),
        "1002 control frame payload 126 exceeds 125 at byte 1"
    );
    let e = WsError::at(WsErrorKind::InvalidUtf8, 7);
    assert_eq!(e.to_string(), "1007 not valid UTF-8 at byte 7");
    assert!(CloseCode::NORMAL.is_valid_on_wire());
    assert!(!CloseCode(1005).is_valid_on_wire());
}
