//! NATS message headers: the `NATS/1.0[ status[ description]]` block that
//! HPUB sends and HMSG delivers, sans-IO.

use crate::error::{Error, Result};

/// The most header fields kept from one message.
const MAX_FIELDS: usize = 64;

/// A message's header block, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    /// The status of a server-made message (503 no responders, 404 not
    /// found, 408 bad request, …), if any.
    pub status: Option<u16>,
    /// The status's description, if any.
    pub description: String,
    /// The fields, in order (names as sent).
    pub fields: Vec<(String, String)>,
}

impl Headers {
    /// The first field named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Decodes a header block; `None` if it is not one.
    pub(crate) fn parse(block: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(block).ok()?;
        let mut lines = text.split("\r\n");
        let first = lines.next()?.strip_prefix("NATS/1.0")?;
        let mut h = Self::default();
        let first = first.trim();
        if !first.is_empty() {
            let (code, desc) = first.split_once(' ').unwrap_or((first, ""));
            if code.len() != 3 {
                return None;
            }
            h.status = Some(code.parse().ok()?);
            h.description = desc.trim().to_owned();
        }
        for line in lines.filter(|l| !l.is_empty()) {
            let (name, value) = line.split_once(':')?;
            if name.is_empty() || name.contains(' ') {
                return None;
            }
            if h.fields.len() < MAX_FIELDS {
                h.fields.push((name.to_owned(), value.trim().to_owned()));
            }
        }
        Some(h)
    }
}

/// Encodes `fields` as a header block for HPUB; empty for no fields (the
/// message goes as a plain PUB). Names and values with line breaks or a
/// name with `:` or whitespace are refused.
pub(crate) fn encode(fields: &[(&str, &str)]) -> Result<Vec<u8>> {
    if fields.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = b"NATS/1.0\r\n".to_vec();
    for (name, value) in fields {
        let bad_name = name.is_empty() || name.bytes().any(|b| b <= b' ' || b == b':' || b == 0x7f);
        if bad_name || value.bytes().any(|b| b == b'\r' || b == b'\n') {
            return Err(Error::InvalidRequest(format!("header field {name:?}")));
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn direct_get_answer() {
        let block = b"NATS/1.0\r\nNats-Stream: S\r\nNats-Subject: s.a\r\nNats-Sequence: 5\r\nNats-Time-Stamp: 2026-12-04T21:00:00Z\r\n\r\n";
        let h = Headers::parse(block).unwrap();
        assert_eq!(h.status, None);
        assert_eq!(h.get("nats-sequence"), Some("5"));
        assert_eq!(h.get("Nats-Time-Stamp"), Some("2026-12-04T21:00:00Z"));
    }

    #[test]
    fn status_lines() {
        let h = Headers::parse(b"NATS/1.0 404 Message Not Found\r\n\r\n").unwrap();
        assert_eq!(
            (h.status, h.description.as_str()),
            (Some(404), "Message Not Found")
        );
        assert_eq!(
            Headers::parse(b"NATS/1.0 503\r\n\r\n").unwrap().status,
            Some(503)
        );
        assert_eq!(Headers::parse(b"NATS/1.0 5x3\r\n\r\n"), None);
        assert_eq!(Headers::parse(b"HTTP/1.1 200\r\n\r\n"), None);
        assert_eq!(Headers::parse(b"NATS/1.0\r\nno colon\r\n\r\n"), None);
    }

    #[test]
    fn encode_round_trips_and_refuses_injection() {
        let block =
            encode(&[("Nats-Msg-Id", "m-1"), ("Nats-Expected-Last-Sequence", "4")]).unwrap();
        let h = Headers::parse(&block).unwrap();
        assert_eq!(h.get("nats-msg-id"), Some("m-1"));
        assert_eq!(h.fields.len(), 2);
        assert!(encode(&[("X", "a\r\nY: b")]).is_err());
        assert!(encode(&[("X Y", "a")]).is_err());
        assert!(encode(&[]).unwrap().is_empty());
    }

    proptest! {
        #[test]
        fn arbitrary_blocks_never_panic(block in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = Headers::parse(&block);
        }
    }
}
