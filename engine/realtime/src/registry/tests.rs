//! Unit tests of the stream registry.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use std::time::Instant;

use super::*;

fn spec(id: &str) -> StreamSpec {
    StreamSpec {
        id: id.into(),
        recovery: RecoveryMode::Cursor,
        event_types: vec!["order.created".into(), "order.paid".into()],
        retention: Retention::default(),
        scope: "tenant-1".into(),
    }
}

#[test]
fn names_are_validated() {
    for ok in ["a", "A-z_0.9", &"x".repeat(64)] {
        assert!(is_valid_name(ok), "{ok}");
    }
    for bad in ["", " a", "a/b", "é", "a b", &"x".repeat(65)] {
        assert!(!is_valid_name(bad), "{bad}");
    }
}

#[test]
fn spec_validation_names_the_problem() {
    let ok = spec("orders");
    assert_eq!(ok.validate(), Ok(()));
    let cases = [
        (
            StreamSpec {
                id: "bad id".into(),
                ..ok.clone()
            },
            SpecError::InvalidStreamId,
        ),
        (
            StreamSpec {
                event_types: vec![],
                ..ok.clone()
            },
            SpecError::NoEventTypes,
        ),
        (
            StreamSpec {
                event_types: vec!["a".into(), "b c".into()],
                ..ok.clone()
            },
            SpecError::InvalidEventType { index: 1 },
        ),
        (
            StreamSpec {
                event_types: vec!["a".into(), "b".into(), "a".into()],
                ..ok.clone()
            },
            SpecError::DuplicateEventType { index: 2 },
        ),
        (
            StreamSpec {
                event_types: (0..257).map(|i| format!("t{i}")).collect(),
                ..ok.clone()
            },
            SpecError::TooManyEventTypes,
        ),
        (
            StreamSpec {
                scope: "s".repeat(257),
                ..ok.clone()
            },
            SpecError::ScopeTooLong,
        ),
        (
            StreamSpec {
                retention: Retention {
                    max_bytes: 0,
                    ..Retention::default()
                },
                ..ok
            },
            SpecError::Retention(RetentionError::Zero(crate::RetentionField::MaxBytes)),
        ),
    ];
    for (s, want) in cases {
        assert_eq!(s.validate(), Err(want));
    }
}

#[test]
fn register_refuses_duplicates_invalid_specs_and_overflow() {
    let mut r: StreamRegistry<Vec<u8>> = StreamRegistry::with_max_streams([1; 32], 2).unwrap();
    assert!(r.is_empty());
    r.register(spec("orders"), Epoch::from_random(1)).unwrap();
    assert_eq!(
        r.register(spec("orders"), Epoch::from_random(2)),
        Err(RegistryError::DuplicateStream("orders".into()))
    );
    assert_eq!(
        r.register(spec("no/slash"), Epoch::from_random(2)),
        Err(RegistryError::InvalidSpec(SpecError::InvalidStreamId))
    );
    r.register(spec("invoices"), Epoch::from_random(3)).unwrap();
    assert_eq!(
        r.register(spec("third"), Epoch::from_random(4)),
        Err(RegistryError::TooManyStreams { max: 2 })
    );
    assert_eq!(r.len(), 2);
    assert_eq!(r.ids().collect::<Vec<_>>(), vec!["invoices", "orders"]);
    assert_eq!(r.spec("orders"), Some(&spec("orders")));
    assert_eq!(
        r.ledger("invoices").unwrap().epoch(),
        &Epoch::from_random(3)
    );
    assert_eq!(r.ledger("orders").unwrap().scope(), "tenant-1");
    assert!(r.ledger("third").is_none());
}

#[test]
fn stream_ceiling_can_only_be_lowered() {
    let err = |m| StreamRegistry::<Vec<u8>>::with_max_streams([0; 32], m).err();
    assert_eq!(err(0), Some(RegistryError::InvalidCeiling));
    assert_eq!(err(MAX_STREAMS + 1), Some(RegistryError::InvalidCeiling));
    assert_eq!(err(MAX_STREAMS), None);
    let mut r: StreamRegistry<Vec<u8>> = StreamRegistry::new([0; 32]);
    for i in 0..MAX_STREAMS {
        r.register(spec(&format!("s{i}")), Epoch::from_random(1))
            .unwrap();
    }
    assert_eq!(
        r.register(spec("one-more"), Epoch::from_random(1)),
        Err(RegistryError::TooManyStreams { max: MAX_STREAMS })
    );
}

#[test]
fn publish_is_fail_closed_and_appends_in_order() {
    let t = Instant::now();
    let mut r: StreamRegistry<Vec<u8>> = StreamRegistry::new([1; 32]);
    r.register(spec("orders"), Epoch::from_random(1)).unwrap();
    assert_eq!(
        r.publish("nope", "order.paid", vec![1], t),
        Err(PublishError::UnknownStream)
    );
    assert_eq!(
        r.publish("orders", "order.shipped", vec![1], t),
        Err(PublishError::UnknownEventType)
    );
    let a = r.publish("orders", "order.created", vec![1], t).unwrap();
    let b = r.publish("orders", "order.paid", vec![2], t).unwrap();
    assert_eq!((a.sequence, b.sequence), (1, 2));
    assert_eq!(b.cursor, r.ledger("orders").unwrap().cursor_for(2));
    let c = b.cursor.unwrap();
    let ledger = r.ledger_mut("orders").unwrap();
    assert!(ledger.resume(&c, "tenant-1", t).unwrap().is_empty());
    assert_eq!(r.expire_all(t + std::time::Duration::from_secs(601)), 2);
}
