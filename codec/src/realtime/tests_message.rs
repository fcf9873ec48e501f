//! `realtime.v1` messages (SPEC RT-9): every type encodes to its exact JSON
//! and decodes back; every refusal is typed.

use super::tests_envelope::sample;
use super::*;

fn l() -> JsonLimits {
    JsonLimits::default()
}

fn welcome() -> ServerMessage {
    ServerMessage::Welcome {
        connection_id: "conn-1".into(),
        heartbeat: HeartbeatPolicy {
            min_interval_ms: 5000,
            max_interval_ms: 30000,
            ack_timeout_ms: 10000,
        },
        limits: ConnectionLimits::RT13,
    }
}

fn client_cases() -> Vec<(ClientMessage, &'static str)> {
    vec![
        (
            ClientMessage::Subscribe {
                subscription_id: "s1".into(),
                stream_id: "orders".into(),
                cursor: Some("c/42".into()),
                scope_binding: "sb1".into(),
            },
            r#"{"type":"SUBSCRIBE","subscriptionId":"s1","streamId":"orders","cursor":"c/42","scopeBinding":"sb1"}"#,
        ),
        (
            ClientMessage::Subscribe {
                subscription_id: "s2".into(),
                stream_id: "orders".into(),
                cursor: None,
                scope_binding: "sb1".into(),
            },
            r#"{"type":"SUBSCRIBE","subscriptionId":"s2","streamId":"orders","cursor":null,"scopeBinding":"sb1"}"#,
        ),
        (
            ClientMessage::Unsubscribe {
                subscription_id: "s1".into(),
            },
            r#"{"type":"UNSUBSCRIBE","subscriptionId":"s1"}"#,
        ),
        (
            ClientMessage::Heartbeat {
                nonce: "n-7".into(),
            },
            r#"{"type":"HEARTBEAT","nonce":"n-7"}"#,
        ),
        (
            ClientMessage::Close {
                category: CloseCategory::Normal,
            },
            r#"{"type":"CLOSE","category":"NORMAL"}"#,
        ),
    ]
}

fn server_cases() -> Vec<(ServerMessage, String)> {
    let envelope = sample(RecoveryMode::Cursor);
    let envelope_json = String::from_utf8(envelope.to_json_bytes().unwrap()).unwrap();
    vec![
        (
            welcome(),
            concat!(
                r#"{"type":"WELCOME","protocol":"realtime.v1","connectionId":"conn-1","#,
                r#""heartbeat":{"minIntervalMs":5000,"maxIntervalMs":30000,"ackTimeoutMs":10000},"#,
                r#""limits":{"maxMessageBytes":65536,"maxSubscriptions":32,"maxQueuedMessages":128,"maxQueuedBytes":262144}}"#
            )
            .into(),
        ),
        (
            ServerMessage::Subscribed {
                subscription_id: "s1".into(),
                stream_epoch: "e7".into(),
                accepted_cursor: Some("c/42".into()),
                next_expected_sequence: 43,
            },
            r#"{"type":"SUBSCRIBED","subscriptionId":"s1","streamEpoch":"e7","acceptedCursor":"c/42","nextExpectedSequence":"43"}"#.into(),
        ),
        (
            ServerMessage::Subscribed {
                subscription_id: "s1".into(),
                stream_epoch: "e7".into(),
                accepted_cursor: None,
                next_expected_sequence: 0,
            },
            r#"{"type":"SUBSCRIBED","subscriptionId":"s1","streamEpoch":"e7","acceptedCursor":null,"nextExpectedSequence":"0"}"#.into(),
        ),
        (
            ServerMessage::Event {
                subscription_id: "s1".into(),
                envelope,
            },
            format!(r#"{{"type":"EVENT","subscriptionId":"s1","envelope":{envelope_json}}}"#),
        ),
        (
            ServerMessage::ResetRequired {
                subscription_id: "s1".into(),
                reason: FailureKind::CursorExpired,
            },
            r#"{"type":"RESET_REQUIRED","subscriptionId":"s1","reason":"CURSOR_EXPIRED"}"#.into(),
        ),
        (
            ServerMessage::Unsubscribed {
                subscription_id: "s1".into(),
            },
            r#"{"type":"UNSUBSCRIBED","subscriptionId":"s1"}"#.into(),
        ),
        (
            ServerMessage::HeartbeatAck { nonce: "n-7".into() },
            r#"{"type":"HEARTBEAT_ACK","nonce":"n-7"}"#.into(),
        ),
        (
            ServerMessage::Close {
                category: CloseCategory::Restart,
                retry_after_ms: None,
            },
            r#"{"type":"CLOSE","category":"RESTART"}"#.into(),
        ),
        (
            ServerMessage::Close {
                category: CloseCategory::Overloaded,
                retry_after_ms: Some(750),
            },
            r#"{"type":"CLOSE","category":"OVERLOADED","retryAfterMs":750}"#.into(),
        ),
    ]
}

#[test]
fn every_client_message_encodes_exactly_and_decodes_back() {
    for (msg, json) in client_cases() {
        let bytes = msg.encode().unwrap();
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), json);
        assert_eq!(ClientMessage::decode(json.as_bytes(), &l()), Ok(msg));
    }
}

#[test]
fn every_server_message_encodes_exactly_and_decodes_back() {
    for (msg, json) in server_cases() {
        let bytes = msg.encode().unwrap();
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), json);
        assert_eq!(ServerMessage::decode(json.as_bytes(), &l()), Ok(msg));
    }
}

#[test]
fn fan_out_event_is_byte_identical_to_encode() {
    for mode in [RecoveryMode::Cursor, RecoveryMode::SessionRebuild] {
        let envelope = sample(mode);
        let once = envelope.to_json_bytes().unwrap();
        let mut fast = bytes::BytesMut::new();
        write_event_message(&mut fast, "sub:9", &once).unwrap();
        let slow = ServerMessage::Event {
            subscription_id: "sub:9".into(),
            envelope,
        }
        .encode()
        .unwrap();
        assert_eq!(&fast[..], &slow[..]);
        // The same in parts: head, the shared envelope, the end.
        let mut parts = Vec::new();
        write_event_message_head(&mut parts, "sub:9").unwrap();
        parts.extend_from_slice(&once);
        parts.push(EVENT_MESSAGE_END);
        assert_eq!(&parts[..], &slow[..]);
    }
    let mut buf = Vec::new();
    assert_eq!(
        write_event_message(&mut buf, "bad id", b"{}"),
        Err(Refusal::InvalidValue("subscriptionId"))
    );
    assert_eq!(
        write_event_message_head(&mut buf, "bad id"),
        Err(Refusal::InvalidValue("subscriptionId"))
    );
    assert!(buf.is_empty());
}

#[test]
fn type_and_direction_refusals() {
    let cases: [(&[u8], Refusal); 6] = [
        (br#"{"subscriptionId":"s1"}"#, Refusal::MissingKey("type")),
        (br#"{"type":1}"#, Refusal::WrongType("type")),
        (br#"{"type":"PAUSE"}"#, Refusal::UnknownType),
        (br#"{"type":"subscribe"}"#, Refusal::UnknownType),
        (
            br#"{"type":"WELCOME","protocol":"realtime.v1"}"#,
            Refusal::WrongDirection,
        ),
        (
            br#"{"type":"HEARTBEAT_ACK","nonce":"n"}"#,
            Refusal::WrongDirection,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(ClientMessage::decode(input, &l()), Err(want));
    }
    // The server never sends HEARTBEAT, the client never SUBSCRIBED-style types.
    assert_eq!(
        ServerMessage::decode(br#"{"type":"HEARTBEAT","nonce":"n"}"#, &l()),
        Err(Refusal::WrongDirection)
    );
    assert_eq!(
        ServerMessage::decode(br#"{"type":"SUBSCRIBE"}"#, &l()),
        Err(Refusal::WrongDirection)
    );
    assert_eq!(
        Refusal::WrongDirection.failure_kind(),
        FailureKind::ProtocolMismatch
    );
    assert_eq!(
        Refusal::UnknownType.failure_kind(),
        FailureKind::ProtocolMismatch
    );
}

#[test]
fn key_set_and_member_refusals() {
    let c = |s: &str| ClientMessage::decode(s.as_bytes(), &l());
    assert_eq!(
        c(r#"{"type":"UNSUBSCRIBE","subscriptionId":"s1","extra":1}"#),
        Err(Refusal::UnknownKey)
    );
    assert_eq!(
        c(r#"{"type":"SUBSCRIBE","subscriptionId":"s1","streamId":"o","scopeBinding":"b"}"#),
        Err(Refusal::MissingKey("cursor"))
    );
    assert_eq!(
        c(
            r#"{"type":"SUBSCRIBE","subscriptionId":"s1","streamId":"o","cursor":5,"scopeBinding":"b"}"#
        ),
        Err(Refusal::WrongType("cursor"))
    );
    assert_eq!(
        c(
            r#"{"type":"SUBSCRIBE","subscriptionId":"s1","streamId":"o","cursor":"","scopeBinding":"b"}"#
        ),
        Err(Refusal::InvalidValue("cursor"))
    );
    let long = "x".repeat(513);
    assert_eq!(
        c(&format!(
            r#"{{"type":"SUBSCRIBE","subscriptionId":"s1","streamId":"o","cursor":"{long}","scopeBinding":"b"}}"#
        )),
        Err(Refusal::InvalidValue("cursor"))
    );
    assert_eq!(
        c(&format!(
            r#"{{"type":"HEARTBEAT","nonce":"{}"}}"#,
            "n".repeat(129)
        )),
        Err(Refusal::InvalidValue("nonce"))
    );
    assert_eq!(
        c(r#"{"type":"UNSUBSCRIBE","subscriptionId":"a b"}"#),
        Err(Refusal::InvalidValue("subscriptionId"))
    );
    assert_eq!(
        c(r#"{"type":"CLOSE","category":"BYE"}"#),
        Err(Refusal::UnknownEnumValue("category"))
    );

    let s = |s: &str| ServerMessage::decode(s.as_bytes(), &l());
    assert_eq!(
        s(
            r#"{"type":"SUBSCRIBED","subscriptionId":"s1","streamEpoch":"e","acceptedCursor":null,"nextExpectedSequence":"01"}"#
        ),
        Err(Refusal::NonCanonicalSequence("nextExpectedSequence"))
    );
    assert_eq!(
        s(
            r#"{"type":"SUBSCRIBED","subscriptionId":"s1","streamEpoch":"e","acceptedCursor":null,"nextExpectedSequence":1}"#
        ),
        Err(Refusal::WrongType("nextExpectedSequence"))
    );
    assert_eq!(
        s(r#"{"type":"RESET_REQUIRED","subscriptionId":"s1","reason":"because"}"#),
        Err(Refusal::UnknownEnumValue("reason"))
    );
    assert_eq!(
        s(r#"{"type":"EVENT","subscriptionId":"s1","envelope":{"protocol":"REALTIME_EVENT_V1"}}"#),
        Err(Refusal::MissingKey("streamId"))
    );
    assert_eq!(
        s(r#"{"type":"EVENT","subscriptionId":"s1","envelope":"{}"}"#),
        Err(Refusal::WrongType("envelope"))
    );
}

#[test]
fn welcome_refusals() {
    let w = |protocol: &str, hb: &str, limits: &str| {
        let text = format!(
            r#"{{"type":"WELCOME","protocol":{protocol},"connectionId":"c","heartbeat":{hb},"limits":{limits}}}"#
        );
        ServerMessage::decode(text.as_bytes(), &l())
    };
    let hb = r#"{"minIntervalMs":1000,"maxIntervalMs":2000,"ackTimeoutMs":500}"#;
    let lim =
        r#"{"maxMessageBytes":1,"maxSubscriptions":2,"maxQueuedMessages":3,"maxQueuedBytes":4}"#;
    assert!(w(r#""realtime.v1""#, hb, lim).is_ok());
    assert_eq!(
        w(r#""realtime.v2""#, hb, lim),
        Err(Refusal::UnknownProtocol)
    );
    assert_eq!(w("null", hb, lim), Err(Refusal::WrongType("protocol")));
    assert_eq!(
        w(
            r#""realtime.v1""#,
            r#"{"minIntervalMs":3000,"maxIntervalMs":2000,"ackTimeoutMs":500}"#,
            lim
        ),
        Err(Refusal::InvalidValue("minIntervalMs"))
    );
    assert_eq!(
        w(
            r#""realtime.v1""#,
            r#"{"minIntervalMs":1000,"maxIntervalMs":2000,"ackTimeoutMs":0}"#,
            lim
        ),
        Err(Refusal::InvalidValue("ackTimeoutMs"))
    );
    assert_eq!(
        w(
            r#""realtime.v1""#,
            r#"{"minIntervalMs":1000.0,"maxIntervalMs":2000,"ackTimeoutMs":5}"#,
            lim
        ),
        Err(Refusal::WrongType("minIntervalMs"))
    );
    assert_eq!(
        w(
            r#""realtime.v1""#,
            r#"{"minIntervalMs":1000,"maxIntervalMs":2000}"#,
            lim
        ),
        Err(Refusal::MissingKey("ackTimeoutMs"))
    );
    assert_eq!(
        w(
            r#""realtime.v1""#,
            hb,
            r#"{"maxMessageBytes":-1,"maxSubscriptions":2,"maxQueuedMessages":3,"maxQueuedBytes":4}"#
        ),
        Err(Refusal::WrongType("maxMessageBytes"))
    );
    assert_eq!(
        w(
            r#""realtime.v1""#,
            hb,
            r#"{"maxMessageBytes":4294967296,"maxSubscriptions":2,"maxQueuedMessages":3,"maxQueuedBytes":4}"#
        ),
        Err(Refusal::InvalidValue("maxMessageBytes"))
    );
    assert_eq!(
        w(r#""realtime.v1""#, "[]", lim),
        Err(Refusal::WrongType("heartbeat"))
    );
    let raised = ConnectionLimits {
        max_message_bytes: 1 << 20,
        max_subscriptions: 1000,
        max_queued_messages: 5,
        max_queued_bytes: 1 << 30,
    };
    assert_eq!(
        raised.capped(),
        ConnectionLimits {
            max_message_bytes: 65536,
            max_subscriptions: 32,
            max_queued_messages: 5,
            max_queued_bytes: 262144,
        }
    );
}

#[test]
fn guard_runs_before_the_schema() {
    let big = format!(r#"{{"type":"HEARTBEAT","nonce":"{}"}}"#, "n".repeat(70_000));
    assert_eq!(
        ClientMessage::decode(big.as_bytes(), &l()),
        Err(Refusal::TooLarge {
            len: big.len(),
            max: 65536
        })
    );
    assert_eq!(
        ClientMessage::decode(b"{\"type\":\"HEARTBEAT\",\"nonce\":\"\xFF\"}", &l()),
        Err(Refusal::InvalidUtf8 { offset: 29 })
    );
    assert_eq!(
        ClientMessage::decode(br#"{"type":"HEARTBEAT","nonce":"n","nonce":"m"}"#, &l()),
        Err(Refusal::DuplicateKey)
    );
}

#[test]
fn encoders_refuse_what_decoders_refuse() {
    let bad = ClientMessage::Subscribe {
        subscription_id: "s1".into(),
        stream_id: "o".into(),
        cursor: Some(String::new()),
        scope_binding: "b".into(),
    };
    let mut buf = Vec::new();
    assert_eq!(
        bad.encode_into(&mut buf),
        Err(Refusal::InvalidValue("cursor"))
    );
    assert!(buf.is_empty());
    let bad = ServerMessage::Welcome {
        connection_id: "c".into(),
        heartbeat: HeartbeatPolicy {
            min_interval_ms: 0,
            max_interval_ms: 1,
            ack_timeout_ms: 1,
        },
        limits: ConnectionLimits::RT13,
    };
    assert_eq!(bad.encode(), Err(Refusal::InvalidValue("minIntervalMs")));
}

#[test]
fn a_close_hint_is_a_bounded_integer_or_absent() {
    for (input, want) in [
        (
            r#"{"type":"CLOSE","category":"OVERLOADED","retryAfterMs":0}"#,
            Refusal::InvalidValue("retryAfterMs"),
        ),
        (
            r#"{"type":"CLOSE","category":"OVERLOADED","retryAfterMs":60001}"#,
            Refusal::InvalidValue("retryAfterMs"),
        ),
        (
            r#"{"type":"CLOSE","category":"OVERLOADED","retryAfterMs":"750"}"#,
            Refusal::WrongType("retryAfterMs"),
        ),
        (
            r#"{"type":"CLOSE","category":"OVERLOADED","retryAfterMs":1.5}"#,
            Refusal::WrongType("retryAfterMs"),
        ),
        (
            r#"{"type":"CLOSE","category":"OVERLOADED","retryAfter":750}"#,
            Refusal::UnknownKey,
        ),
    ] {
        assert_eq!(
            ServerMessage::decode(input.as_bytes(), &l()),
            Err(want),
            "{input}"
        );
    }
    let top = ServerMessage::Close {
        category: CloseCategory::Overloaded,
        retry_after_ms: Some(MAX_RETRY_AFTER_MS),
    };
    assert_eq!(ServerMessage::decode(&top.encode().unwrap(), &l()), Ok(top));
    for ms in [0, MAX_RETRY_AFTER_MS + 1] {
        let bad = ServerMessage::Close {
            category: CloseCategory::Overloaded,
            retry_after_ms: Some(ms),
        };
        assert_eq!(bad.encode(), Err(Refusal::InvalidValue("retryAfterMs")));
    }
}
