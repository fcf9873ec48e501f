//! Arbitrary bytes into the `realtime.v1` decoders (SPEC RT-9: no message
//! from a browser makes the server panic, none from a server makes a client
//! panic), and into the snapshot checkpoint and SSE control decoders, under
//! the default JSON ceilings and under tiny ones.
//!
//! The oracles: what decodes is valid, re-encodes, and decodes again to an
//! equal value (an EVENT's payload floats may move by a last bit: serde_json
//! parses them best-effort); an EVENT framed by `write_event_message` around
//! its envelope's own bytes equals `ServerMessage::encode`.

#![no_main]

use dtp_codec::realtime::{
    ClientMessage, JsonLimits, ServerMessage, SnapshotCheckpoint, SseControl, Value,
    write_event_message,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for limits in [JsonLimits::default(), JsonLimits::new(256, 3, 16)] {
        if let Ok(m) = ClientMessage::decode(data, &limits) {
            let wire = m.encode().expect("a decoded message encodes");
            assert_eq!(ClientMessage::decode(&wire, &JsonLimits::default()), Ok(m));
        }
        if let Ok(m) = ServerMessage::decode(data, &limits) {
            let wire = m.encode().expect("a decoded message encodes");
            let again = ServerMessage::decode(&wire, &JsonLimits::default()).expect("re-decodes");
            match (&m, &again) {
                (
                    ServerMessage::Event {
                        subscription_id: a,
                        envelope: ea,
                    },
                    ServerMessage::Event {
                        subscription_id: b,
                        envelope: eb,
                    },
                ) => {
                    assert_eq!(a, b);
                    assert_eq!(ea.head(), eb.head());
                    assert!(same(
                        &Value::Object(ea.payload.clone()),
                        &Value::Object(eb.payload.clone())
                    ));
                    let envelope = ea.to_json_bytes().expect("encodes");
                    let mut fast = Vec::new();
                    write_event_message(&mut fast, a, &envelope).expect("valid id");
                    assert_eq!(fast, wire);
                }
                _ => assert_eq!(again, m),
            }
        }
        if let Ok(c) = SnapshotCheckpoint::decode(data, &limits) {
            let wire = c.to_json_bytes().expect("a decoded checkpoint encodes");
            assert_eq!(
                SnapshotCheckpoint::decode(&wire, &JsonLimits::default()),
                Ok(c)
            );
        }
        if let Ok(c) = SseControl::decode(data, &limits) {
            let wire = c.encode().expect("a decoded control encodes");
            assert_eq!(SseControl::decode(&wire, &JsonLimits::default()), Ok(c));
        }
    }
});

/// Equal, except that two floats may differ in their last bits.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= x.abs().max(y.abs()) * 1e-15,
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
        }
        _ => a == b,
    }
}
