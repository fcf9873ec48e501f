//! Standard base64 with padding (RFC 4648 §4), for `Sec-WebSocket-Key` and
//! `Sec-WebSocket-Accept`. Small enough to own rather than depend on.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `data` as padded standard base64 (RFC 4648 §4).
pub fn encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 0x3f) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes padded standard base64 (RFC 4648 §4), strictly: the length is a
/// multiple of 4, `=` appears only as the last one or two characters, no
/// whitespace, and the unused bits before the padding are zero (so every
/// byte string has exactly one accepted encoding). `None` otherwise.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let last = bytes.len() / 4;
    for (i, quad) in bytes.chunks_exact(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != last) {
            return None;
        }
        let mut n = 0u32;
        for &c in quad.get(..4 - pad)? {
            n = (n << 6) | u32::from(value(c)?);
        }
        n <<= 6 * pad as u32;
        let [_, b0, b1, b2] = n.to_be_bytes();
        match pad {
            0 => out.extend_from_slice(&[b0, b1, b2]),
            1 if b2 == 0 => out.extend_from_slice(&[b0, b1]),
            2 if b1 == 0 && b2 == 0 => out.push(b0),
            _ => return None, // non-zero unused bits
        }
    }
    Some(out)
}

fn value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}
