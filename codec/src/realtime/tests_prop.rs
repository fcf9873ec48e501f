//! Property tests: round trips of every format, no panic on arbitrary bytes,
//! the guard agreeing with serde_json, and SSE independent of chunking.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::*;

fn id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._:-]{1,128}"
}

fn token() -> impl Strategy<Value = String> {
    "[!-~]{1,512}"
}

fn timestamp() -> impl Strategy<Value = String> {
    (
        0u32..10000,
        1u32..13,
        1u32..29,
        0u32..24,
        0u32..60,
        0u32..60,
    )
        .prop_flat_map(|(y, mo, d, h, mi, s)| {
            let base = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
            prop_oneof![
                Just(format!("{base}Z")),
                "[0-9]{1,9}".prop_map({
                    let base = base.clone();
                    move |f| format!("{base}.{f}Z")
                }),
                (0u32..24, 0u32..60, prop::bool::ANY).prop_map(move |(oh, om, neg)| {
                    format!("{base}{}{oh:02}:{om:02}", if neg { '-' } else { '+' })
                }),
            ]
        })
}

/// JSON values whose text form round-trips exactly (no arbitrary floats:
/// serde_json's default float parsing is best-effort).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        Just(Value::from(0.5)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((".{0,8}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn payload() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((".{0,8}", json_value()), 0..6).prop_map(|kv| kv.into_iter().collect())
}

fn recovery() -> impl Strategy<Value = (RecoveryMode, Option<String>)> {
    prop_oneof![
        token().prop_map(|c| (RecoveryMode::Cursor, Some(c))),
        Just((RecoveryMode::SnapshotOnly, None)),
        Just((RecoveryMode::SessionRebuild, None)),
    ]
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        (id(), id(), id(), id()),
        any::<u64>(),
        timestamp(),
        token(),
        payload(),
        recovery(),
    )
        .prop_map(
            |(
                (stream_id, stream_epoch, event_type, event_id),
                sequence,
                occurred_at,
                scope_binding,
                payload,
                (recovery, resume_cursor),
            )| Envelope {
                stream_id,
                stream_epoch,
                event_type,
                event_id,
                sequence,
                occurred_at,
                scope_binding,
                payload,
                recovery,
                resume_cursor,
            },
        )
}

fn client_message() -> impl Strategy<Value = ClientMessage> {
    let category = prop::sample::select(CloseCategory::ALL);
    prop_oneof![
        (id(), id(), prop::option::of(token()), token()).prop_map(|(s, st, c, b)| {
            ClientMessage::Subscribe {
                subscription_id: s,
                stream_id: st,
                cursor: c,
                scope_binding: b,
            }
        }),
        id().prop_map(|s| ClientMessage::Unsubscribe { subscription_id: s }),
        id().prop_map(|nonce| ClientMessage::Heartbeat { nonce }),
        category.prop_map(|category| ClientMessage::Close { category }),
    ]
}

fn server_message() -> impl Strategy<Value = ServerMessage> {
    let heartbeat = (
        1..=MAX_HEARTBEAT_MS,
        1..=MAX_HEARTBEAT_MS,
        1..=MAX_HEARTBEAT_MS,
    )
        .prop_map(|(a, b, ack)| HeartbeatPolicy {
            min_interval_ms: a.min(b),
            max_interval_ms: a.max(b),
            ack_timeout_ms: ack,
        });
    let limits =
        (1..=u32::MAX, 1..=u32::MAX, 1..=u32::MAX, 1..=u32::MAX).prop_map(|(a, b, c, d)| {
            ConnectionLimits {
                max_message_bytes: a,
                max_subscriptions: b,
                max_queued_messages: c,
                max_queued_bytes: d,
            }
        });
    prop_oneof![
        (id(), heartbeat, limits).prop_map(|(connection_id, heartbeat, limits)| {
            ServerMessage::Welcome {
                connection_id,
                heartbeat,
                limits,
            }
        }),
        (id(), id(), prop::option::of(token()), any::<u64>()).prop_map(|(s, e, c, n)| {
            ServerMessage::Subscribed {
                subscription_id: s,
                stream_epoch: e,
                accepted_cursor: c,
                next_expected_sequence: n,
            }
        }),
        (id(), envelope()).prop_map(|(s, envelope)| ServerMessage::Event {
            subscription_id: s,
            envelope,
        }),
        (id(), prop::sample::select(FailureKind::ALL)).prop_map(|(s, reason)| {
            ServerMessage::ResetRequired {
                subscription_id: s,
                reason,
            }
        }),
        id().prop_map(|s| ServerMessage::Unsubscribed { subscription_id: s }),
        id().prop_map(|nonce| ServerMessage::HeartbeatAck { nonce }),
        (
            prop::sample::select(CloseCategory::ALL),
            prop::option::of(1..=MAX_RETRY_AFTER_MS)
        )
            .prop_map(|(category, retry_after_ms)| ServerMessage::Close {
                category,
                retry_after_ms
            }),
    ]
}

/// Text made mostly of JSON's own characters, to reach deep into the guard.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(&b"{}[],:\" \\/-+.0123456789eEtrufalsn\tu\nD8dc"[..]),
            any::<u8>(),
        ],
        0..200,
    )
}

/// Splits `bytes` at the given cut points.
fn chunked<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts {
        out.push(&bytes[at..c]);
        at = c;
    }
    out.push(&bytes[at..]);
    out
}

type Seen = (
    Vec<(String, String, Option<String>, String)>,
    Option<std::mem::Discriminant<SseError>>,
);

fn run_sse(max: usize, chunks: &[&[u8]]) -> Seen {
    let mut p = SseParser::with_max_buffer(max);
    let mut events = Vec::new();
    for c in chunks {
        let r = p.feed(c, |e| {
            events.push((
                e.event_type.to_owned(),
                e.data.to_owned(),
                e.id.map(str::to_owned),
                e.last_event_id.to_owned(),
            ))
        });
        assert!(p.buffered_len() <= max);
        if let Err(e) = r {
            return (events, Some(std::mem::discriminant(&e)));
        }
    }
    (events, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn envelope_round_trips(e in envelope()) {
        let bytes = e.to_json_bytes().unwrap();
        prop_assert_eq!(Envelope::decode(&bytes, &JsonLimits::default()), Ok(e.clone()));
        // The pre-serialized-payload path writes the same bytes.
        let payload = serde_json::to_vec(&e.payload).unwrap();
        let mut fast = Vec::new();
        write_envelope(&mut fast, &e.head(), &payload).unwrap();
        prop_assert_eq!(&fast, &bytes);
        prop_assert!(!bytes.contains(&b'\n') && !bytes.contains(&b'\r'));
    }

    #[test]
    fn client_messages_round_trip(m in client_message()) {
        let bytes = m.encode().unwrap();
        prop_assert_eq!(ClientMessage::decode(&bytes, &JsonLimits::default()), Ok(m));
    }

    #[test]
    fn server_messages_round_trip(m in server_message()) {
        let bytes = m.encode().unwrap();
        prop_assert_eq!(ServerMessage::decode(&bytes, &JsonLimits::default()), Ok(m.clone()));
        if let ServerMessage::Event { subscription_id, envelope } = &m {
            let mut fast = Vec::new();
            write_event_message(&mut fast, subscription_id, &envelope.to_json_bytes().unwrap()).unwrap();
            prop_assert_eq!(fast, bytes);
        }
    }

    #[test]
    fn checkpoint_round_trips(
        epoch in id(), seq in any::<u64>(), rev in token(), cursor in prop::option::of(token()),
    ) {
        let c = SnapshotCheckpoint {
            stream_epoch: epoch,
            last_applied_sequence: seq,
            snapshot_revision: rev,
            recovery_mode: if cursor.is_some() { RecoveryMode::Cursor } else { RecoveryMode::SnapshotOnly },
            resume_cursor: cursor,
        };
        let bytes = c.to_json_bytes().unwrap();
        prop_assert_eq!(SnapshotCheckpoint::decode(&bytes, &JsonLimits::default()), Ok(c));
    }

    #[test]
    fn decoders_never_panic(bytes in prop_oneof![jsonish(), prop::collection::vec(any::<u8>(), 0..300)]) {
        let l = JsonLimits::default();
        let _ = check_json(&bytes, &l);
        let _ = Envelope::decode(&bytes, &l);
        let _ = ClientMessage::decode(&bytes, &l);
        let _ = ServerMessage::decode(&bytes, &l);
        let _ = SnapshotCheckpoint::decode(&bytes, &l);
        let _ = SseControl::decode(&bytes, &l);
    }

    #[test]
    fn mutated_messages_never_panic_and_decode_only_to_valid_values(
        m in server_message(), at in any::<usize>(), byte in any::<u8>(),
    ) {
        let mut bytes = m.encode().unwrap();
        let i = at % bytes.len();
        bytes[i] = byte;
        if let Ok(again) = ServerMessage::decode(&bytes, &JsonLimits::default()) {
            prop_assert_eq!(again.validate(), Ok(()));
            let re = again.encode().unwrap();
            prop_assert_eq!(ServerMessage::decode(&re, &JsonLimits::default()), Ok(again));
        }
    }

    #[test]
    fn guard_agrees_with_serde_json(bytes in jsonish()) {
        let guard = check_json(&bytes, &JsonLimits::default());
        let serde = serde_json::from_slice::<Value>(&bytes);
        match guard {
            Ok(()) => prop_assert!(serde.is_ok()),
            Err(Refusal::TooDeep { .. } | Refusal::TooManyElements { .. } | Refusal::TooLarge { .. }) => {}
            Err(e) => prop_assert!(serde.is_err(), "guard refused {:?}, serde accepted", e),
        }
    }

    #[test]
    fn sse_encoder_output_parses_back_under_any_chunking(
        blocks in prop::collection::vec((prop::option::of(token()), ".{0,40}", 0u8..4), 1..8),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut wire = bytes::BytesMut::new();
        let mut want = Vec::new();
        for (id, text, extra) in &blocks {
            match extra {
                1 => write_sse_heartbeat(&mut wire),
                2 => write_sse_retry(&mut wire, 1000),
                _ => {}
            }
            let data = serde_json::to_string(&Value::String(text.clone())).unwrap();
            write_sse_event(&mut wire, id.as_deref(), data.as_bytes()).unwrap();
            want.push((id.clone(), data));
        }
        let (events, err) = run_sse(SSE_MAX_BUFFER, &chunked(&wire, &cuts));
        prop_assert_eq!(err, None);
        let got: Vec<_> = events.into_iter().map(|(ty, data, id, _)| {
            assert_eq!(ty, "message");
            (id, data)
        }).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn sse_parser_is_independent_of_chunking(
        bytes in prop::collection::vec(
            prop_oneof![
                prop::sample::select(&b"data:id:event:retry: 12\r\n\n\r\x00\xEF\xBB\xBF\xC3"[..]),
                any::<u8>(),
            ],
            0..400,
        ),
        cuts in prop::collection::vec(any::<usize>(), 0..16),
        max in prop_oneof![Just(SSE_MAX_BUFFER), 8usize..64],
    ) {
        let whole = run_sse(max, &[&bytes]);
        let pieces = run_sse(max, &chunked(&bytes, &cuts));
        prop_assert_eq!(whole, pieces);
    }
}
