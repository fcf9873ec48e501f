//! The publication body and its receipt: exact keys, the guard, and the
//! writers inverting the decoders.

use proptest::prelude::*;

use super::*;

fn decode(body: &[u8]) -> Result<Publication, Refusal> {
    Publication::decode(body, &JsonLimits::default())
}

#[test]
fn publication_bodies_are_exact() {
    let p = decode(br#"{"eventType":"demo.tick","payload":{"n": 1, "s": "a\"b"}}"#).unwrap();
    assert_eq!(p.event_type, "demo.tick");
    assert_eq!(p.payload, br#"{"n":1,"s":"a\"b"}"#);
    for (bad, why) in [
        (
            &br#"{"eventType":"demo.tick"}"#[..],
            Refusal::MissingKey("payload"),
        ),
        (
            br#"{"eventType":"demo.tick","payload":{},"extra":1}"#,
            Refusal::UnknownKey,
        ),
        (
            br#"{"eventType":"demo.tick","payload":[1]}"#,
            Refusal::WrongType("payload"),
        ),
        (
            br#"{"eventType":"bad type","payload":{}}"#,
            Refusal::InvalidValue("eventType"),
        ),
        (
            br#"{"eventType":7,"payload":{}}"#,
            Refusal::WrongType("eventType"),
        ),
        (br#"[]"#, Refusal::NotAnObject),
        (
            br#"{"eventType":"tick","eventType":"big","payload":{}}"#,
            Refusal::DuplicateKey,
        ),
        (
            br#"{"eventType":"tick","payload":{"n":1,"n":2}}"#,
            Refusal::DuplicateKey,
        ),
    ] {
        assert_eq!(decode(bad), Err(why), "{:?}", String::from_utf8_lossy(bad));
    }
    for bad in [
        &b"{\"eventType\":\"a\",\"payload\":{\"x\":\"\xff\"}}"[..],
        b"not json",
    ] {
        assert_eq!(
            decode(bad).unwrap_err().failure_kind(),
            FailureKind::MalformedEvent
        );
    }
    let big = format!(
        r#"{{"eventType":"a","payload":{{"x":"{}"}}}}"#,
        "x".repeat(70_000)
    );
    assert_eq!(
        decode(big.as_bytes()).unwrap_err().failure_kind(),
        FailureKind::EventTooLarge
    );
}

#[test]
fn the_payload_is_what_serde_json_writes() {
    let body = br#"{ "payload" : { "b": [1, 2.5, null, true], "a": {"z": "\u00e9\n"} }, "eventType": "x" }"#;
    let p = decode(body).unwrap();
    let v: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(p.payload, serde_json::to_vec(&v["payload"]).unwrap());
}

#[test]
fn publications_are_written_and_refused() {
    let mut buf = Vec::new();
    write_publication(&mut buf, "demo.tick", b" {\"t\":1} ").unwrap();
    assert_eq!(buf, br#"{"eventType":"demo.tick","payload":{"t":1}}"#);
    assert_eq!(decode(&buf).unwrap().payload, br#"{"t":1}"#);
    let mut buf = Vec::new();
    assert_eq!(
        write_publication(&mut buf, "bad type", b"{}"),
        Err(Refusal::InvalidValue("eventType"))
    );
    assert_eq!(
        write_publication(&mut buf, "a", b"[1]"),
        Err(Refusal::WrongType("payload"))
    );
    assert!(buf.is_empty());
}

#[test]
fn receipts_round_trip_byte_for_byte() {
    let r = PublishReceipt {
        stream_id: "demo".into(),
        stream_epoch: "e1".into(),
        sequence: 7,
        resume_cursor: Some("c.7".into()),
    };
    let bytes = r.to_json_bytes().unwrap();
    assert_eq!(
        bytes,
        br#"{"streamId":"demo","streamEpoch":"e1","sequence":"7","resumeCursor":"c.7"}"#
    );
    assert_eq!(
        PublishReceipt::decode(&bytes, &JsonLimits::default()),
        Ok(r.clone())
    );
    let none = PublishReceipt {
        resume_cursor: None,
        ..r
    };
    let bytes = none.to_json_bytes().unwrap();
    assert!(bytes.ends_with(br#""resumeCursor":null}"#));
    assert_eq!(
        PublishReceipt::decode(&bytes, &JsonLimits::default()),
        Ok(none)
    );
    for (bad, why) in [
        (
            &br#"{"streamId":"d","streamEpoch":"e","sequence":"07","resumeCursor":null}"#[..],
            Refusal::NonCanonicalSequence("sequence"),
        ),
        (
            br#"{"streamId":"d","streamEpoch":"e","sequence":"7"}"#,
            Refusal::MissingKey("resumeCursor"),
        ),
        (
            br#"{"streamId":"d","streamEpoch":"e","sequence":7,"resumeCursor":null}"#,
            Refusal::WrongType("sequence"),
        ),
        (
            br#"{"streamId":"d","streamEpoch":"e","sequence":"7","resumeCursor":""}"#,
            Refusal::InvalidValue("resumeCursor"),
        ),
    ] {
        assert_eq!(
            PublishReceipt::decode(bad, &JsonLimits::default()),
            Err(why)
        );
    }
    let mut buf = Vec::new();
    assert_eq!(
        write_receipt(&mut buf, "d", "bad epoch", 1, None),
        Err(Refusal::InvalidValue("streamEpoch"))
    );
    assert!(buf.is_empty());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_publication_decoders(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&body);
        let _ = PublishReceipt::decode(&body, &JsonLimits::default());
    }

    #[test]
    fn written_publications_decode_back(
        event_type in "[A-Za-z0-9._:-]{1,20}",
        n in any::<u64>(),
        s in "\\PC{0,16}",
    ) {
        let payload = serde_json::to_vec(&serde_json::json!({"n": n, "s": s})).unwrap();
        let mut buf = Vec::new();
        write_publication(&mut buf, &event_type, &payload).unwrap();
        let p = decode(&buf).unwrap();
        prop_assert_eq!(p.event_type, event_type);
        prop_assert_eq!(p.payload, payload);
    }

    #[test]
    fn written_receipts_decode_back(
        stream in "[A-Za-z0-9._:-]{1,20}",
        epoch in "[0-9a-f]{16}",
        sequence in any::<u64>(),
        cursor in prop::option::of("[!-~]{1,40}"),
    ) {
        let mut buf = Vec::new();
        write_receipt(&mut buf, &stream, &epoch, sequence, cursor.as_deref()).unwrap();
        let r = PublishReceipt::decode(&buf, &JsonLimits::default()).unwrap();
        prop_assert_eq!(r, PublishReceipt { stream_id: stream, stream_epoch: epoch, sequence, resume_cursor: cursor });
    }
}
