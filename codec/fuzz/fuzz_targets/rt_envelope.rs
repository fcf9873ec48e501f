//! Arbitrary bytes into `Envelope::decode` (SPEC RT-3/RT-4: an event from the
//! network never makes a client panic), under the default JSON ceilings and
//! under tiny ones.
//!
//! The oracles: an envelope that decodes is valid, re-encodes to one line of
//! JSON that decodes to the same envelope (floats in the payload may move by
//! a last bit: serde_json parses them best-effort), and framing it with
//! `write_envelope` around its payload's own JSON gives the same bytes.

#![no_main]

use dtp_codec::realtime::{Envelope, JsonLimits, Map, Value, write_envelope};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for limits in [JsonLimits::default(), JsonLimits::new(256, 3, 16)] {
        let Ok(e) = Envelope::decode(data, &limits) else {
            continue;
        };
        assert_eq!(e.validate(), Ok(()));
        let wire = e.to_json_bytes().expect("a decoded envelope encodes");
        assert!(!wire.iter().any(|b| matches!(b, b'\r' | b'\n')));
        let again = Envelope::decode(&wire, &JsonLimits::default()).expect("re-decodes");
        assert_eq!(again.head(), e.head());
        assert!(same_object(&again.payload, &e.payload));
        let payload = Value::Object(e.payload.clone()).to_string();
        let mut fast = Vec::new();
        write_envelope(&mut fast, &e.head(), payload.as_bytes()).expect("the head is valid");
        assert_eq!(fast, wire);
    }
});

fn same_object(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && same(va, vb))
}

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
        (Value::Object(x), Value::Object(y)) => same_object(x, y),
        _ => a == b,
    }
}
