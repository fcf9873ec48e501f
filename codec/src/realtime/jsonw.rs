//! A compact JSON writer into any growable buffer, infallible, with the
//! same escaping and number forms as `serde_json` (so an encoder here and
//! `serde_json::to_vec` agree byte for byte on a `Value`).

use bytes::BufMut;
use serde_json::{Map, Value};

/// A JSON string literal of `s`: `"` and `\` escaped, `\b \f \n \r \t` in
/// their short forms, other controls as `\u00XX`; everything else raw.
pub(crate) fn str<B: BufMut>(buf: &mut B, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.put_u8(b'"');
    let bytes = s.as_bytes();
    // Ids, types and times never need escaping: one branch-free scan (the
    // compiler vectorises it) and one copy, instead of a match per byte (a
    // tenth of publishing an event on the control thread).
    if !bytes.iter().fold(false, |seen, &b| seen | needs_escape(b)) {
        buf.put_slice(bytes);
        buf.put_u8(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x0C => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x00..=0x1F => b'u',
            _ => continue,
        };
        buf.put_slice(&bytes[start..i]);
        buf.put_u8(b'\\');
        buf.put_u8(short);
        if short == b'u' {
            buf.put_slice(b"00");
            buf.put_u8(HEX[usize::from(b >> 4)]);
            buf.put_u8(HEX[usize::from(b & 0xF)]);
        }
        start = i + 1;
    }
    buf.put_slice(&bytes[start..]);
    buf.put_u8(b'"');
}

/// Whether `b` is written escaped inside a JSON string.
#[inline]
fn needs_escape(b: u8) -> bool {
    (b < 0x20) | (b == b'"') | (b == b'\\')
}

/// `"key":` (the key is one of ours, but escaped all the same).
pub(crate) fn key<B: BufMut>(buf: &mut B, k: &str) {
    str(buf, k);
    buf.put_u8(b':');
}

/// `,"key":`.
pub(crate) fn next_key<B: BufMut>(buf: &mut B, k: &str) {
    buf.put_u8(b',');
    key(buf, k);
}

/// A string, or `null`.
pub(crate) fn opt_str<B: BufMut>(buf: &mut B, s: Option<&str>) {
    match s {
        Some(s) => str(buf, s),
        None => buf.put_slice(b"null"),
    }
}

/// An unsigned integer as a canonical decimal string (SPEC RT-3).
pub(crate) fn decimal_str<B: BufMut>(buf: &mut B, n: u64) {
    buf.put_u8(b'"');
    uint(buf, n);
    buf.put_u8(b'"');
}

/// An unsigned integer as a JSON number.
pub(crate) fn uint<B: BufMut>(buf: &mut B, n: u64) {
    // Written from a stack buffer: `to_string` allocated a `String` for
    // every event's sequence.
    buf.put_slice(decimal(n, &mut [0; 20]).as_bytes());
}

/// `n` in decimal, written at the end of `buf` (no allocation: cursors and
/// envelopes write one for every event published).
pub fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).unwrap_or("0")
}

/// A whole value, compact.
pub(crate) fn value<B: BufMut>(buf: &mut B, v: &Value) {
    match v {
        Value::Null => buf.put_slice(b"null"),
        Value::Bool(true) => buf.put_slice(b"true"),
        Value::Bool(false) => buf.put_slice(b"false"),
        // serde_json's Display of a Number is its serialized form.
        Value::Number(n) => buf.put_slice(n.to_string().as_bytes()),
        Value::String(s) => str(buf, s),
        Value::Array(items) => {
            buf.put_u8(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    buf.put_u8(b',');
                }
                value(buf, item);
            }
            buf.put_u8(b']');
        }
        Value::Object(map) => object(buf, map),
    }
}

/// An object, compact, in the map's order.
pub(crate) fn object<B: BufMut>(buf: &mut B, map: &Map<String, Value>) {
    buf.put_u8(b'{');
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        key(buf, k);
        value(buf, v);
    }
    buf.put_u8(b'}');
}

/// Copies one JSON text, dropping the whitespace outside its strings. The
/// input must be valid JSON: then the output is the same value on one line
/// (raw CR and LF cannot occur inside JSON strings).
pub(crate) fn compact<B: BufMut>(buf: &mut B, json: &[u8]) {
    // Already compact (`serde_json` output): one scan, one copy.
    let spaced = json.iter().fold(false, |seen, &b| {
        seen | matches!(b, b' ' | b'\t' | b'\n' | b'\r')
    });
    if !spaced {
        buf.put_slice(json);
        return;
    }
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, &b) in json.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            buf.put_slice(&json[start..i]);
            start = i + 1;
        }
    }
    buf.put_slice(&json[start..]);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn written(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut buf = Vec::new();
        f(&mut buf);
        buf
    }

    proptest! {
        /// `uint` writes what `to_string` writes, for any number (the
        /// edges too: 0, powers of ten, `u64::MAX`).
        #[test]
        fn uint_agrees_with_to_string(n in any::<u64>(), p in 0u32..20) {
            for n in [n, 0, 10u64.pow(p), 10u64.pow(p) - 1, u64::MAX] {
                prop_assert_eq!(written(|b| uint(b, n)), n.to_string().into_bytes());
            }
        }

        /// Both paths of `str` (plain and escaped) write what `serde_json`
        /// writes, for any string.
        #[test]
        fn str_agrees_with_serde_json(s in any::<String>(), plain in "[a-zA-Z0-9._:-]{0,40}") {
            for s in [s, plain] {
                let want = serde_json::to_vec(&s).unwrap();
                prop_assert_eq!(written(|b| str(b, &s)), want);
            }
        }

        /// `compact` of pretty-printed JSON is `serde_json`'s compact form,
        /// spaces inside strings kept; compact input is copied as it is.
        #[test]
        fn compact_removes_only_whitespace_outside_strings(
            key in "[a-z ]{1,8}",
            text in any::<String>(),
            n in any::<i64>(),
        ) {
            let v = json!({ key: [text, n, { "inner key": " a b " }], "x": null });
            let want = serde_json::to_vec(&v).unwrap();
            let pretty = serde_json::to_vec_pretty(&v).unwrap();
            prop_assert_eq!(written(|b| compact(b, &pretty)), want.clone());
            prop_assert_eq!(written(|b| compact(b, &want)), want);
        }
    }
}
