//! The JSON guard (SPEC RT-4 first steps, RT-13 ceilings) and the scalar
//! formats of SPEC RT-3.

use super::value::parse_object;
use super::*;

fn check(s: &[u8]) -> Result<(), Refusal> {
    check_json(s, &JsonLimits::default())
}

#[test]
fn accepts_rfc_8259_values() {
    for ok in [
        &b"{}"[..],
        b"[]",
        b" \t\r\n{ \"a\" : [1, -0, 0.5, 1e3, -1.25E-2, true, false, null, \"x\"] } \n",
        b"\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\ud83d\\ude00\"",
        b"0",
        "{\"\u{e9}\":\"\u{1F600}\"}".as_bytes(),
        b"123456789012345678901234567890",
    ] {
        assert_eq!(check(ok), Ok(()), "{}", String::from_utf8_lossy(ok));
        // …and whatever passes the guard builds.
        let v: Result<serde_json::Value, _> = serde_json::from_slice(ok);
        assert!(v.is_ok());
    }
}

#[test]
fn refuses_bad_syntax_at_the_offending_byte() {
    let cases: &[(&[u8], usize)] = &[
        (b"", 0),
        (b"   ", 3),
        (b"{", 1),
        (b"{\"a\"}", 4),
        (b"{\"a\":1,}", 7),
        (b"[1,]", 3),
        (b"[1 2]", 3),
        (b"{} {}", 3),
        (b"01", 1),
        (b"-", 1),
        (b"1.", 2),
        (b"1e", 2),
        (b"+1", 0),
        (b".5", 0),
        (b"tru", 3),
        (b"nul", 3),
        (b"\"abc", 4),
        (b"\"a\tb\"", 2),
        (b"\"\\x\"", 2),
        (b"\"\\u12G4\"", 5),
        (b"\"\\ud800\"", 1),
        (b"\"\\ud800\\u0041\"", 1),
        (b"\"\\udc00\"", 1),
        (b"{1:2}", 1),
        (b"[}", 1),
        (b"{]", 1),
        (b"NaN", 0),
    ];
    for (input, offset) in cases {
        assert_eq!(
            check(input),
            Err(Refusal::Syntax { offset: *offset }),
            "{}",
            String::from_utf8_lossy(input)
        );
        // serde_json agrees that none of these is JSON.
        assert!(serde_json::from_slice::<serde_json::Value>(input).is_err());
    }
}

#[test]
fn byte_ceiling_comes_first_then_utf8() {
    let big = vec![b'['; JsonLimits::MAX_BYTES + 1];
    assert_eq!(
        check(&big),
        Err(Refusal::TooLarge {
            len: 65537,
            max: 65536
        })
    );
    assert_eq!(
        check(b"\"a\xFFb\""),
        Err(Refusal::InvalidUtf8 { offset: 2 })
    );
    // Invalid UTF-8 is reported even when the JSON is broken earlier.
    assert_eq!(check(b"}\xC3"), Err(Refusal::InvalidUtf8 { offset: 1 }));
    assert_eq!(
        Refusal::TooLarge { len: 1, max: 0 }.failure_kind(),
        FailureKind::EventTooLarge
    );
    assert_eq!(
        Refusal::InvalidUtf8 { offset: 0 }.failure_kind(),
        FailureKind::MalformedEvent
    );
}

#[test]
fn depth_ceiling_is_sixteen() {
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(check(nest(16).as_bytes()), Ok(()));
    assert_eq!(
        check(nest(17).as_bytes()),
        Err(Refusal::TooDeep {
            offset: 16,
            max: 16
        })
    );
    // A 64 KiB `[[[[…` is refused at the 17th byte, cheaply.
    let bomb = vec![b'['; JsonLimits::MAX_BYTES];
    assert_eq!(
        check(&bomb),
        Err(Refusal::TooDeep {
            offset: 16,
            max: 16
        })
    );
    let objects = format!("{}1{}", "{\"a\":".repeat(17), "}".repeat(17));
    assert_eq!(
        check(objects.as_bytes()),
        Err(Refusal::TooDeep {
            offset: 80,
            max: 16
        })
    );
    assert_eq!(
        Refusal::TooDeep { offset: 0, max: 0 }.failure_kind(),
        FailureKind::EventTooLarge
    );
}

#[test]
fn element_ceiling_counts_every_value() {
    // The root array plus 4,095 items: 4,096 values.
    let ok = format!("[{}]", vec!["0"; 4095].join(","));
    assert_eq!(check(ok.as_bytes()), Ok(()));
    let over = format!("[{}]", vec!["0"; 4096].join(","));
    assert_eq!(
        check(over.as_bytes()),
        Err(Refusal::TooManyElements {
            offset: 8191,
            max: 4096
        })
    );
    // Keys do not count, member values do: root + 2 values.
    let limits = JsonLimits::new(1024, 16, 3);
    assert_eq!(check_json(b"{\"a\":1,\"b\":2}", &limits), Ok(()));
    assert_eq!(
        check_json(b"{\"a\":1,\"b\":2,\"c\":3}", &limits),
        Err(Refusal::TooManyElements { offset: 17, max: 3 })
    );
}

#[test]
fn limits_can_be_lowered_never_raised() {
    let raised = JsonLimits::new(1 << 30, 1000, 1 << 20);
    assert_eq!(raised, JsonLimits::default());
    assert_eq!(raised.max_bytes(), 65536);
    assert_eq!(raised.max_depth(), 16);
    assert_eq!(raised.max_elements(), 4096);
    let low = JsonLimits::new(4, 1, 2);
    assert_eq!(
        check_json(b"[1,2]", &low),
        Err(Refusal::TooLarge { len: 5, max: 4 })
    );
    assert_eq!(
        check_json(b"[[]]", &low),
        Err(Refusal::TooDeep { offset: 1, max: 1 })
    );
}

#[test]
fn numbers_beyond_a_double_are_refused() {
    assert_eq!(
        check(b"[1e400]"),
        Err(Refusal::NumberOutOfRange { offset: 1 })
    );
    let huge = "9".repeat(400);
    assert_eq!(
        check(huge.as_bytes()),
        Err(Refusal::NumberOutOfRange { offset: 0 })
    );
    assert_eq!(check(b"1e-400"), Ok(()));
}

#[test]
fn duplicate_keys_are_refused_at_any_depth() {
    let l = JsonLimits::default();
    assert_eq!(
        parse_object(b"{\"a\":1,\"a\":1}", &l),
        Err(Refusal::DuplicateKey)
    );
    assert_eq!(
        parse_object(b"{\"p\":[{\"x\":1,\"x\":2}]}", &l),
        Err(Refusal::DuplicateKey)
    );
    // An escaped spelling of the same key is the same key.
    assert_eq!(
        parse_object(b"{\"a\":1,\"\\u0061\":1}", &l),
        Err(Refusal::DuplicateKey)
    );
    assert_eq!(parse_object(b"[1]", &l), Err(Refusal::NotAnObject));
    assert!(parse_object(b"{\"a\":{\"a\":1}}", &l).is_ok());
}

#[test]
fn canonical_sequences() {
    assert_eq!(parse_canonical_u64("0"), Some(0));
    assert_eq!(parse_canonical_u64("42"), Some(42));
    assert_eq!(parse_canonical_u64("18446744073709551615"), Some(u64::MAX));
    for bad in [
        "",
        "01",
        "00",
        "+1",
        "-1",
        "1.0",
        "1e3",
        " 1",
        "1 ",
        "18446744073709551616",
        "99999999999999999999",
        "000000000000000000001",
        "١",
    ] {
        assert_eq!(parse_canonical_u64(bad), None, "{bad:?}");
    }
}

#[test]
fn strict_rfc_3339() {
    for ok in [
        "2026-01-01T00:00:00Z",
        "2024-02-29T23:59:59.123456789Z",
        "2026-12-31T12:30:00+09:00",
        "2026-06-30T00:00:00.5-00:00",
        "0000-01-01T00:00:00-23:59",
        "2000-02-29T00:00:00Z",
    ] {
        assert!(is_valid_rfc3339(ok), "{ok}");
    }
    for bad in [
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2025-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-01 00:00:00",
        "2026-01-01 00:00:00Z",
        "2026-01-01t00:00:00z",
        "2026-01-01T00:00:00",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-12-31T23:59:60Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00.1234567890Z",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+09:60",
        "2026-01-01T00:00:00+0900",
        "2026-01-01T00:00:00ZZ",
        "26-01-01T00:00:00Z",
        "2026-1-01T00:00:00Z",
        "+026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z ",
        "",
    ] {
        assert!(!is_valid_rfc3339(bad), "{bad}");
    }
}

#[test]
fn string_classes() {
    assert!(is_valid_id("sub-1.a_b:c"));
    assert!(is_valid_id(&"a".repeat(128)));
    assert!(!is_valid_id(&"a".repeat(129)));
    assert!(!is_valid_id(""));
    assert!(!is_valid_id("a b"));
    assert!(!is_valid_id("a/b"));
    assert!(!is_valid_id("é"));
    assert!(is_valid_token("c:1/2+3=~!"));
    assert!(is_valid_token(&"x".repeat(512)));
    assert!(!is_valid_token(&"x".repeat(513)));
    assert!(!is_valid_token(""));
    assert!(!is_valid_token("a b"));
    assert!(!is_valid_token("a\nb"));
    assert!(!is_valid_token("a\0b"));
    assert!(!is_valid_token("é"));
}
