//! WEB_PUSH_HINT_V1: exact encoding, every decode refusal in order, the
//! receiver checks, and "never panics".

use dtp_codec::realtime::Refusal;
use proptest::prelude::*;

use super::*;

const ISSUED: u64 = 1_709_210_096_789; // 2024-02-29T12:34:56.789Z
const WIRE: &str = concat!(
    r#"{"protocol":"WEB_PUSH_HINT_V1","notificationType":"order.shipped","#,
    r#""notificationId":"n-01HV","associationEpoch":"ae:7","releaseEpoch":"r-2024.02","#,
    r#""issuedAt":"2024-02-29T12:34:56.789Z","expiresAt":"2024-03-01T12:34:56.789Z","#,
    r#""routeIntent":"orders.detail"}"#
);

fn hint() -> WebPushHint {
    WebPushHint {
        notification_type: "order.shipped".into(),
        notification_id: "n-01HV".into(),
        association_epoch: "ae:7".into(),
        release_epoch: "r-2024.02".into(),
        issued_at_ms: ISSUED,
        expires_at_ms: ISSUED + MAX_HINT_LIFETIME_MS,
        route_intent: "orders.detail".into(),
    }
}

/// `WIRE` with `member` (a `"key":value` pair) replaced by `with`.
fn edit(member: &str, with: &str) -> Vec<u8> {
    assert!(WIRE.contains(member), "{member}");
    WIRE.replacen(member, with, 1).into_bytes()
}

#[test]
fn encodes_exactly_and_decodes_back() {
    assert_eq!(hint().encode().unwrap(), WIRE.as_bytes());
    assert_eq!(WebPushHint::decode(WIRE.as_bytes()).unwrap(), hint());
    let spaced = format!(" {} ", WIRE.replace(',', " ,\n"));
    assert_eq!(WebPushHint::decode(spaced.as_bytes()).unwrap(), hint());
}

#[test]
fn declarative_web_push_shape_is_refused_by_the_key_set() {
    let declarative =
        br#"{"web_push":8030,"notification":{"title":"Hi","navigate":"https://example.com/"}}"#;
    assert_eq!(WebPushHint::decode(declarative), Err(HintError::UnknownKey));
    let mixed = edit(
        r#""routeIntent":"orders.detail"}"#,
        r#""routeIntent":"orders.detail","web_push":8030}"#,
    );
    assert_eq!(WebPushHint::decode(&mixed), Err(HintError::UnknownKey));
}

#[test]
fn guard_refusals() {
    let big = format!("{WIRE}{}", " ".repeat(MAX_HINT_BYTES - WIRE.len() + 1));
    assert_eq!(
        WebPushHint::decode(big.as_bytes()),
        Err(HintError::Json(Refusal::TooLarge {
            len: MAX_HINT_BYTES + 1,
            max: MAX_HINT_BYTES
        }))
    );
    let at_limit = format!("{WIRE}{}", " ".repeat(MAX_HINT_BYTES - WIRE.len()));
    assert_eq!(WebPushHint::decode(at_limit.as_bytes()), Ok(hint()));
    let dup = edit(
        r#""routeIntent":"orders.detail"}"#,
        r#""routeIntent":"orders.detail","routeIntent":"x"}"#,
    );
    assert_eq!(
        WebPushHint::decode(&dup),
        Err(HintError::Json(Refusal::DuplicateKey))
    );
    assert_eq!(
        WebPushHint::decode(b"[]"),
        Err(HintError::Json(Refusal::NotAnObject))
    );
    assert_eq!(
        WebPushHint::decode(b"{"),
        Err(HintError::Json(Refusal::Syntax { offset: 1 }))
    );
    assert_eq!(
        WebPushHint::decode(b"\xff"),
        Err(HintError::Json(Refusal::InvalidUtf8 { offset: 0 }))
    );
}

#[test]
fn key_set_then_protocol_then_members() {
    let missing = edit(r#","routeIntent":"orders.detail""#, "");
    assert_eq!(
        WebPushHint::decode(&missing),
        Err(HintError::MissingKey("routeIntent"))
    );
    let v2 = edit(r#""WEB_PUSH_HINT_V1""#, r#""WEB_PUSH_HINT_V2""#);
    assert_eq!(WebPushHint::decode(&v2), Err(HintError::UnknownProtocol));
    let num = edit(r#""WEB_PUSH_HINT_V1""#, "1");
    assert_eq!(
        WebPushHint::decode(&num),
        Err(HintError::WrongType("protocol"))
    );
    let wrong = edit(r#""n-01HV""#, "7");
    assert_eq!(
        WebPushHint::decode(&wrong),
        Err(HintError::WrongType("notificationId"))
    );
    let null = edit(r#""ae:7""#, "null");
    assert_eq!(
        WebPushHint::decode(&null),
        Err(HintError::WrongType("associationEpoch"))
    );
}

#[test]
fn identifiers_admit_no_free_text() {
    let members = [
        ("notificationType", r#""order.shipped""#),
        ("notificationId", r#""n-01HV""#),
        ("associationEpoch", r#""ae:7""#),
        ("releaseEpoch", r#""r-2024.02""#),
        ("routeIntent", r#""orders.detail""#),
    ];
    let too_long = format!("\"{}\"", "a".repeat(129));
    for (key, value) in members {
        for bad in [
            r#""""#,
            r#""Your order shipped""#,
            r#""https://x/y""#,
            r#""caf\u00e9""#,
            too_long.as_str(),
        ] {
            let text = edit(&format!("\"{key}\":{value}"), &format!("\"{key}\":{bad}"));
            assert_eq!(
                WebPushHint::decode(&text),
                Err(HintError::InvalidId(key)),
                "{key} {bad}"
            );
        }
    }
    let longest = format!("\"{}\"", "a".repeat(128));
    assert!(WebPushHint::decode(&edit(r#""n-01HV""#, &longest)).is_ok());
}

#[test]
fn timestamps_and_lifetime() {
    for bad in [
        "\"2024-02-29T12:34:56Z\"",
        "\"2024-02-29T12:34:56.789+00:00\"",
        "\"1709210096789\"",
    ] {
        let text = edit(r#""2024-02-29T12:34:56.789Z""#, bad);
        assert_eq!(
            WebPushHint::decode(&text),
            Err(HintError::InvalidTimestamp("issuedAt")),
            "{bad}"
        );
    }
    let text = edit(
        r#""2024-03-01T12:34:56.789Z""#,
        "\"2024-03-01T12:34:56.790Z\"",
    );
    assert_eq!(WebPushHint::decode(&text), Err(HintError::InvalidLifetime));
    let same = edit(
        r#""2024-03-01T12:34:56.789Z""#,
        "\"2024-02-29T12:34:56.789Z\"",
    );
    assert_eq!(WebPushHint::decode(&same), Err(HintError::InvalidLifetime));
    let before = edit(
        r#""2024-03-01T12:34:56.789Z""#,
        "\"2024-02-29T12:34:56.788Z\"",
    );
    assert_eq!(
        WebPushHint::decode(&before),
        Err(HintError::InvalidLifetime)
    );
    let shortest = edit(
        r#""2024-03-01T12:34:56.789Z""#,
        "\"2024-02-29T12:34:56.790Z\"",
    );
    assert_eq!(
        WebPushHint::decode(&shortest).map(|h| h.expires_at_ms),
        Ok(ISSUED + 1)
    );
}

#[test]
fn encode_validates_first() {
    let mut h = hint();
    h.route_intent = "open https://evil".into();
    assert_eq!(h.encode(), Err(HintError::InvalidId("routeIntent")));
    let mut h = hint();
    h.expires_at_ms = h.issued_at_ms + MAX_HINT_LIFETIME_MS + 1;
    assert_eq!(h.encode(), Err(HintError::InvalidLifetime));
    let mut h = hint();
    h.issued_at_ms = MAX_TIMESTAMP_MS + 1;
    h.expires_at_ms = MAX_TIMESTAMP_MS + 2;
    assert_eq!(h.encode(), Err(HintError::InvalidTimestamp("issuedAt")));
    h.issued_at_ms = MAX_TIMESTAMP_MS - 1;
    h.expires_at_ms = MAX_TIMESTAMP_MS + 1;
    assert_eq!(h.encode(), Err(HintError::InvalidTimestamp("expiresAt")));
}

#[test]
fn receiver_checks() {
    let h = hint();
    let exp = h.expires_at_ms;
    assert_eq!(h.check_at(ISSUED, "ae:7", "r-2024.02"), Ok(()));
    assert_eq!(
        h.check_at(ISSUED - MAX_CLOCK_SKEW_MS, "ae:7", "r-2024.02"),
        Ok(())
    );
    assert_eq!(
        h.check_at(ISSUED - MAX_CLOCK_SKEW_MS - 1, "ae:7", "r-2024.02"),
        Err(HintError::IssuedInFuture)
    );
    assert_eq!(h.check_at(exp - 1, "ae:7", "r-2024.02"), Ok(()));
    assert_eq!(
        h.check_at(exp, "ae:7", "r-2024.02"),
        Err(HintError::Expired)
    );
    assert_eq!(
        h.check_at(ISSUED, "ae:8", "r-2024.02"),
        Err(HintError::AssociationMismatch)
    );
    assert_eq!(
        h.check_at(ISSUED, "ae:7", "r-2024.03"),
        Err(HintError::ReleaseMismatch)
    );
}

#[test]
fn debug_shows_registry_ids_and_times_only() {
    assert_eq!(
        format!("{:?}", hint()),
        format!(
            "WebPushHint {{ notification_type: \"order.shipped\", route_intent: \"orders.detail\", \
             issued_at_ms: {ISSUED}, expires_at_ms: {}, .. }}",
            ISSUED + MAX_HINT_LIFETIME_MS
        )
    );
}

fn id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._:-]{1,128}"
}

proptest! {
    #[test]
    fn round_trip(
        ty in id(), nid in id(), ae in id(), re in id(), ri in id(),
        issued in 0..MAX_TIMESTAMP_MS - MAX_HINT_LIFETIME_MS,
        life in 1..=MAX_HINT_LIFETIME_MS,
    ) {
        let h = WebPushHint {
            notification_type: ty, notification_id: nid, association_epoch: ae,
            release_epoch: re, issued_at_ms: issued, expires_at_ms: issued + life,
            route_intent: ri,
        };
        let bytes = h.encode().unwrap();
        prop_assert!(bytes.len() <= MAX_HINT_BYTES);
        prop_assert_eq!(WebPushHint::decode(&bytes).unwrap(), h);
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = WebPushHint::decode(&bytes);
    }

    #[test]
    fn decode_never_panics_on_mutated_hints(at in 0usize..400, byte in any::<u8>()) {
        let mut bytes = WIRE.as_bytes().to_vec();
        if let Some(b) = bytes.get_mut(at) {
            *b = byte;
        }
        let _ = WebPushHint::decode(&bytes);
    }
}
