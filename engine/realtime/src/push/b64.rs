//! base64url (RFC 4648 §5), the alphabet of every Web Push key and JWT
//! segment (RFC 8291 §3.2, RFC 8292 §2 and §3.2, RFC 7515 §2).
//!
//! Encoding never pads. Decoding accepts unpadded text and, because some
//! clients serialise `PushSubscription` keys with it, correctly padded text;
//! it refuses the standard alphabet's `+` and `/`, whitespace, misplaced or
//! excess `=`, and non-canonical trailing bits, so one byte string has one
//! accepted spelling (plus its padded twin).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url without padding (RFC 4648 §5, RFC 7515 §2).
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        // A chunk of k bytes yields k + 1 characters.
        for i in 0..=chunk.len() {
            let sextet = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[sextet as usize]));
        }
    }
    out
}

/// Decodes base64url (see the module doc for what is refused); `None` when
/// `text` is not canonical base64url.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let data = match bytes.iter().position(|&c| c == b'=') {
        None => bytes,
        Some(at) => {
            // Padding completes the last quantum to four characters, exactly.
            let (data, pad) = bytes.split_at(at);
            let needed = (4 - data.len() % 4) % 4;
            if needed == 0 || pad.len() != needed || pad.iter().any(|&c| c != b'=') {
                return None;
            }
            data
        }
    };
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for chunk in data.chunks(4) {
        let mut n: u32 = 0;
        for &c in chunk {
            n = (n << 6) | u32::from(sextet(c)?);
        }
        match chunk.len() {
            4 => out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]),
            3 => {
                // 18 bits carry 2 bytes; the low 2 bits must be zero.
                if n & 0x3 != 0 {
                    return None;
                }
                out.extend_from_slice(&[(n >> 10) as u8, (n >> 2) as u8]);
            }
            _ => {
                // 12 bits carry 1 byte; the low 4 bits must be zero.
                if n & 0xf != 0 {
                    return None;
                }
                out.push((n >> 4) as u8);
            }
        }
    }
    Some(out)
}

/// Decodes into exactly `N` bytes (test fixtures).
#[cfg(test)]
pub(crate) fn decode_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    decode(text)?.try_into().ok()
}

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn rfc4648_vectors_in_the_url_alphabet() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (raw, text) in cases {
            assert_eq!(encode(raw), text);
            assert_eq!(decode(text).as_deref(), Some(raw));
        }
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode("-_8"), Some(vec![0xfb, 0xff]));
    }

    #[test]
    fn padding_is_accepted_only_when_exact() {
        assert_eq!(decode("Zg=="), Some(b"f".to_vec()));
        assert_eq!(decode("Zm8="), Some(b"fo".to_vec()));
        for bad in ["Zg=", "Zg===", "Zm8==", "Zm9v=", "Z=g=", "=", "Zg=A"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn refuses_other_alphabets_and_non_canonical_bits() {
        for bad in ["+/8", "Zm 9v", "Z", "Zm9vY", "Zh", "Zm9", "Zm\n9v"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
        assert_eq!(decode_array::<2>("Zm8"), Some(*b"fo"));
        assert_eq!(decode_array::<3>("Zm8"), None);
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let text = encode(&bytes);
            prop_assert!(!text.contains('='));
            prop_assert_eq!(decode(&text), Some(bytes));
        }

        #[test]
        fn decode_never_panics_and_is_canonical(text in "[A-Za-z0-9_=+/ -]{0,64}") {
            if let Some(bytes) = decode(&text) {
                prop_assert_eq!(encode(&bytes), text.trim_end_matches('='));
            }
        }
    }
}
