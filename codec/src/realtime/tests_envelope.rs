//! REALTIME_EVENT_V1 envelopes (SPEC RT-3) and their decode order (RT-4),
//! and snapshot checkpoints (RT-6).

use serde_json::{Value, json};

use super::*;

pub(super) fn sample(recovery: RecoveryMode) -> Envelope {
    let payload = json!({"orderId": "o-1", "qty": 3, "tags": ["a", "b"], "n": null});
    Envelope {
        stream_id: "orders".into(),
        stream_epoch: "e7".into(),
        event_type: "order.updated".into(),
        event_id: "ev-42".into(),
        sequence: 42,
        occurred_at: "2026-01-02T03:04:05.678Z".into(),
        scope_binding: "sb:XyZ=".into(),
        payload: payload.as_object().cloned().unwrap_or_default(),
        recovery,
        resume_cursor: recovery.has_cursor().then(|| "c/42".to_owned()),
    }
}

const CURSOR_JSON: &str = concat!(
    r#"{"protocol":"REALTIME_EVENT_V1","streamId":"orders","streamEpoch":"e7","#,
    r#""eventType":"order.updated","eventId":"ev-42","sequence":"42","#,
    r#""occurredAt":"2026-01-02T03:04:05.678Z","scopeBinding":"sb:XyZ=","#,
    r#""payload":{"orderId":"o-1","qty":3,"tags":["a","b"],"n":null},"#,
    r#""recoveryMode":"CURSOR","resumeCursor":"c/42"}"#
);

fn decode(v: &Value) -> Result<Envelope, Refusal> {
    Envelope::decode(
        &serde_json::to_vec(v).unwrap_or_default(),
        &JsonLimits::default(),
    )
}

/// The sample's JSON with `edit` applied.
fn edited(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Result<Envelope, Refusal> {
    let mut v: Value = serde_json::from_str(CURSOR_JSON).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        edit(map);
    }
    decode(&v)
}

#[test]
fn encodes_the_fixed_key_order_compactly_and_decodes_back() {
    let e = sample(RecoveryMode::Cursor);
    let bytes = e.to_json_bytes().unwrap();
    assert_eq!(std::str::from_utf8(&bytes).unwrap(), CURSOR_JSON);
    assert_eq!(Envelope::decode(&bytes, &JsonLimits::default()), Ok(e));

    let s = sample(RecoveryMode::SnapshotOnly);
    let bytes = s.to_json_bytes().unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.ends_with(r#""recoveryMode":"SNAPSHOT_ONLY","resumeCursor":null}"#));
    assert_eq!(Envelope::decode(&bytes, &JsonLimits::default()), Ok(s));
}

#[test]
fn write_envelope_matches_to_json_bytes_and_compacts_the_payload() {
    let e = sample(RecoveryMode::Cursor);
    let payload = serde_json::to_vec(&e.payload).unwrap();
    let mut buf = bytes::BytesMut::new();
    write_envelope(&mut buf, &e.head(), &payload).unwrap();
    assert_eq!(&buf[..], CURSOR_JSON.as_bytes());

    // A pretty-printed body (as a POST may carry) becomes one line; spaces
    // and an escaped quote inside strings survive.
    let pretty = b"\n {\n  \"a\" : \"x y\\\" z\",\r\n\t\"b\": [ 1, 2 ]\n}\n";
    let mut out = Vec::new();
    write_envelope(&mut out, &e.head(), pretty).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.contains(r#""payload":{"a":"x y\" z","b":[1,2]},"#),
        "{text}"
    );
    assert!(!out.contains(&b'\n'));
    assert!(Envelope::decode(&out, &JsonLimits::default()).is_ok());

    let mut untouched = Vec::new();
    assert_eq!(
        write_envelope(&mut untouched, &e.head(), b"[1]"),
        Err(Refusal::WrongType("payload"))
    );
    let mut bad = e.head();
    bad.resume_cursor = None;
    assert_eq!(
        write_envelope(&mut untouched, &bad, b"{}"),
        Err(Refusal::RecoveryCursorMismatch)
    );
    assert!(untouched.is_empty());
}

#[test]
fn protocol_is_checked_before_the_key_set() {
    // A newer envelope with an extra key is a protocol mismatch, not malformed.
    let r = edited(|m| {
        m.insert("protocol".into(), json!("REALTIME_EVENT_V2"));
        m.insert("partitionId".into(), json!("p1"));
    });
    assert_eq!(r, Err(Refusal::UnknownProtocol));
    assert_eq!(
        Refusal::UnknownProtocol.failure_kind(),
        FailureKind::ProtocolMismatch
    );
    assert_eq!(
        edited(|m| {
            m.remove("protocol");
        }),
        Err(Refusal::MissingKey("protocol"))
    );
    assert_eq!(
        edited(|m| {
            m.insert("protocol".into(), json!(1));
        }),
        Err(Refusal::WrongType("protocol"))
    );
}

#[test]
fn exact_key_schema_refusals() {
    let unknown = edited(|m| {
        m.insert("accountId".into(), json!("a"));
    });
    assert_eq!(unknown, Err(Refusal::UnknownKey));
    assert_eq!(
        Refusal::UnknownKey.failure_kind(),
        FailureKind::MalformedEvent
    );
    for key in [
        "streamId",
        "streamEpoch",
        "eventType",
        "eventId",
        "sequence",
        "occurredAt",
        "scopeBinding",
        "payload",
        "recoveryMode",
        "resumeCursor",
    ] {
        assert_eq!(
            edited(|m| {
                m.remove(key);
            }),
            Err(Refusal::MissingKey(key)),
            "{key}"
        );
        assert_eq!(
            edited(|m| {
                m.insert(key.into(), json!(true));
            }),
            Err(Refusal::WrongType(key)),
            "{key}"
        );
    }
    // Unknown keys are reported before missing ones.
    let both = edited(|m| {
        m.remove("sequence");
        m.insert("x".into(), json!(1));
    });
    assert_eq!(both, Err(Refusal::UnknownKey));
    assert_eq!(
        Envelope::decode(b"[]", &JsonLimits::default()),
        Err(Refusal::NotAnObject)
    );
    assert_eq!(
        Envelope::decode(
            br#"{"protocol":"REALTIME_EVENT_V1","protocol":"x"}"#,
            &JsonLimits::default()
        ),
        Err(Refusal::DuplicateKey)
    );
}

#[test]
fn sequences_must_be_canonical() {
    for bad in [
        json!("01"),
        json!("+1"),
        json!("1.0"),
        json!("18446744073709551616"),
        json!(""),
    ] {
        assert_eq!(
            edited(|m| {
                m.insert("sequence".into(), bad.clone());
            }),
            Err(Refusal::NonCanonicalSequence("sequence")),
            "{bad}"
        );
    }
    assert_eq!(
        edited(|m| {
            m.insert("sequence".into(), json!(42));
        }),
        Err(Refusal::WrongType("sequence"))
    );
    let max = edited(|m| {
        m.insert("sequence".into(), json!("18446744073709551615"));
    });
    assert_eq!(max.map(|e| e.sequence), Ok(u64::MAX));
}

#[test]
fn occurred_at_must_be_strict_rfc_3339() {
    for bad in [
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-01-01 00:00:00",
    ] {
        assert_eq!(
            edited(|m| {
                m.insert("occurredAt".into(), json!(bad));
            }),
            Err(Refusal::InvalidTimestamp),
            "{bad}"
        );
    }
}

#[test]
fn recovery_mode_and_cursor_agree() {
    let set = |mode: &str, cursor: Value| {
        edited(|m| {
            m.insert("recoveryMode".into(), json!(mode));
            m.insert("resumeCursor".into(), cursor);
        })
    };
    let mismatch = Err(Refusal::RecoveryCursorMismatch);
    assert_eq!(set("CURSOR", Value::Null), mismatch);
    assert_eq!(set("CURSOR", json!("")), mismatch);
    assert_eq!(set("SNAPSHOT_ONLY", json!("c1")), mismatch);
    assert_eq!(set("SESSION_REBUILD", json!("c1")), mismatch);
    assert_eq!(set("SNAPSHOT_ONLY", json!("")), mismatch);
    assert_eq!(
        set("CURSOR", json!("a b")),
        Err(Refusal::InvalidValue("resumeCursor"))
    );
    assert_eq!(
        set("cursor", json!("c1")),
        Err(Refusal::UnknownEnumValue("recoveryMode"))
    );
    assert_eq!(
        set("SESSION_REBUILD", Value::Null).map(|e| e.recovery),
        Ok(RecoveryMode::SessionRebuild)
    );
    // SNAPSHOT_ONLY without the resumeCursor key at all.
    let missing = edited(|m| {
        m.insert("recoveryMode".into(), json!("SNAPSHOT_ONLY"));
        m.remove("resumeCursor");
    });
    assert_eq!(missing, Err(Refusal::MissingKey("resumeCursor")));
    // The encoder refuses the same states.
    let mut e = sample(RecoveryMode::SnapshotOnly);
    e.resume_cursor = Some("c".into());
    assert_eq!(e.to_json_bytes(), Err(Refusal::RecoveryCursorMismatch));
    let mut e = sample(RecoveryMode::Cursor);
    e.resume_cursor = Some(String::new());
    assert_eq!(e.to_json_bytes(), Err(Refusal::RecoveryCursorMismatch));
}

#[test]
fn bounded_strings_and_object_payload() {
    let long = "a".repeat(129);
    assert_eq!(
        edited(|m| {
            m.insert("streamId".into(), json!(long));
        }),
        Err(Refusal::InvalidValue("streamId"))
    );
    assert_eq!(
        edited(|m| {
            m.insert("eventId".into(), json!("has space"));
        }),
        Err(Refusal::InvalidValue("eventId"))
    );
    assert_eq!(
        edited(|m| {
            m.insert("scopeBinding".into(), json!(""));
        }),
        Err(Refusal::InvalidValue("scopeBinding"))
    );
    assert_eq!(
        edited(|m| {
            m.insert("payload".into(), json!([1]));
        }),
        Err(Refusal::WrongType("payload"))
    );
    let mut e = sample(RecoveryMode::Cursor);
    e.event_type = "bad type".into();
    assert_eq!(e.to_json_bytes(), Err(Refusal::InvalidValue("eventType")));
}

#[test]
fn snapshot_checkpoint_round_trip_and_refusals() {
    let c = SnapshotCheckpoint {
        stream_epoch: "e7".into(),
        last_applied_sequence: 41,
        snapshot_revision: "r-9".into(),
        recovery_mode: RecoveryMode::Cursor,
        resume_cursor: Some("c/41".into()),
    };
    let bytes = c.to_json_bytes().unwrap();
    assert_eq!(
        std::str::from_utf8(&bytes).unwrap(),
        r#"{"streamEpoch":"e7","lastAppliedSequence":"41","snapshotRevision":"r-9","recoveryMode":"CURSOR","resumeCursor":"c/41"}"#
    );
    let l = JsonLimits::default();
    assert_eq!(SnapshotCheckpoint::decode(&bytes, &l), Ok(c));
    let snap = br#"{"streamEpoch":"e7","lastAppliedSequence":"0","snapshotRevision":"1","recoveryMode":"SNAPSHOT_ONLY","resumeCursor":null}"#;
    assert!(SnapshotCheckpoint::decode(snap, &l).is_ok());
    let cases: [(&[u8], Refusal); 5] = [
        (
            br#"{"streamEpoch":"e7","lastAppliedSequence":"0","snapshotRevision":"1","recoveryMode":"SNAPSHOT_ONLY","resumeCursor":"c"}"#,
            Refusal::RecoveryCursorMismatch,
        ),
        (
            br#"{"streamEpoch":"e7","lastAppliedSequence":"0","snapshotRevision":"1","recoveryMode":"SESSION_REBUILD","resumeCursor":null}"#,
            Refusal::UnknownEnumValue("recoveryMode"),
        ),
        (
            br#"{"streamEpoch":"e7","lastAppliedSequence":"00","snapshotRevision":"1","recoveryMode":"SNAPSHOT_ONLY","resumeCursor":null}"#,
            Refusal::NonCanonicalSequence("lastAppliedSequence"),
        ),
        (
            br#"{"streamEpoch":"e7","lastAppliedSequence":"0","snapshotRevision":"1","recoveryMode":"SNAPSHOT_ONLY"}"#,
            Refusal::MissingKey("resumeCursor"),
        ),
        (
            br#"{"streamEpoch":"e7","lastAppliedSequence":"0","snapshotRevision":"1","recoveryMode":"SNAPSHOT_ONLY","resumeCursor":null,"x":1}"#,
            Refusal::UnknownKey,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(SnapshotCheckpoint::decode(input, &l), Err(want));
    }
}
