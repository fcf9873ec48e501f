//! The documented JSON form of a LogicalFrame (FORMAT.md §8), used by
//! `dtp inspect --json` and `dtp frame encode`.
//!
//! One frame is one JSON object. Parsing is strict: unknown keys, a missing
//! key, a wrong type, or a `kind` that disagrees with the body are refused.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::frame::{AeadAlgorithm, Body, FrameKind, LogicalFrame, Sealed, VERSION};

/// The top-level JSON object of one frame.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameJson {
    #[serde(default = "version")]
    version: u8,
    stream_id: u32,
    kind: FrameKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sealed: Option<SealedJson>,
}

fn version() -> u8 {
    VERSION
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SealedJson {
    aead: AeadAlgorithm,
    key_version: u16,
    seal_counter: u64,
    #[serde(with = "hex_bytes")]
    ciphertext_hex: Bytes,
}

/// Why a JSON value is not a frame.
#[derive(Debug)]
pub struct JsonError(String);

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JsonError {}

fn err(e: impl std::fmt::Display) -> JsonError {
    JsonError(e.to_string())
}

/// The frame as a JSON value.
pub fn to_json(frame: &LogicalFrame) -> Value {
    let body = |v: Result<Value, serde_json::Error>| v.ok();
    let (body, sealed) = match &frame.body {
        Body::Request(b) => (body(serde_json::to_value(b)), None),
        Body::Response(b) => (body(serde_json::to_value(b)), None),
        Body::Data(b) => (body(serde_json::to_value(b)), None),
        Body::Ack(b) => (body(serde_json::to_value(b)), None),
        Body::Resume(b) => (body(serde_json::to_value(b)), None),
        Body::Control(b) => (body(serde_json::to_value(b)), None),
        Body::Close(b) => (body(serde_json::to_value(b)), None),
        Body::Handshake(b) => (body(serde_json::to_value(b)), None),
        Body::Sealed(s) => (
            None,
            Some(SealedJson {
                aead: s.aead,
                key_version: s.key_version,
                seal_counter: s.seal_counter,
                ciphertext_hex: s.ciphertext.clone(),
            }),
        ),
    };
    let out = FrameJson {
        version: VERSION,
        stream_id: frame.stream_id,
        kind: frame.kind(),
        body,
        sealed,
    };
    // Every field is a plain struct, string or number: serialising cannot fail.
    serde_json::to_value(out).unwrap_or(Value::Null)
}

/// Parses one frame from its JSON form.
pub fn from_json(value: Value) -> Result<LogicalFrame, JsonError> {
    let f: FrameJson = serde_json::from_value(value).map_err(err)?;
    if f.version != VERSION {
        return Err(JsonError(format!(
            "version {} is not supported (this tool speaks {VERSION})",
            f.version
        )));
    }
    let body = match (f.body, f.sealed) {
        (Some(_), Some(_)) => return Err(err("a frame has either `body` or `sealed`, not both")),
        (None, None) => return Err(err("missing `body` (or `sealed` for an encrypted frame)")),
        (None, Some(s)) => Body::Sealed(Sealed {
            kind: f.kind,
            aead: s.aead,
            key_version: s.key_version,
            seal_counter: s.seal_counter,
            ciphertext: s.ciphertext_hex,
        }),
        (Some(v), None) => {
            let b = |e: serde_json::Error| JsonError(format!("{} frame body: {e}", f.kind.name()));
            match f.kind {
                FrameKind::Request => Body::Request(serde_json::from_value(v).map_err(b)?),
                FrameKind::Response => Body::Response(serde_json::from_value(v).map_err(b)?),
                FrameKind::Data => Body::Data(serde_json::from_value(v).map_err(b)?),
                FrameKind::Ack => Body::Ack(serde_json::from_value(v).map_err(b)?),
                FrameKind::Resume => Body::Resume(serde_json::from_value(v).map_err(b)?),
                FrameKind::Control => Body::Control(serde_json::from_value(v).map_err(b)?),
                FrameKind::Close => Body::Close(serde_json::from_value(v).map_err(b)?),
                FrameKind::Handshake => Body::Handshake(serde_json::from_value(v).map_err(b)?),
            }
        }
    };
    Ok(LogicalFrame {
        stream_id: f.stream_id,
        body,
    })
}

/// Parses one frame from a line of JSON.
pub fn from_json_str(line: &str) -> Result<LogicalFrame, JsonError> {
    from_json(serde_json::from_str(line).map_err(err)?)
}

/// Serde helpers: bytes as a lower-case hex string.
pub mod hex_bytes {
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    /// Writes the bytes as lower-case hex.
    pub fn serialize<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(b))
    }

    /// Reads hex (either case) into bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        decode(&s).map(Bytes::from).map_err(D::Error::custom)
    }

    /// Lower-case hex of `b`.
    pub fn encode(b: &[u8]) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(b.len() * 2);
        for &x in b {
            out.push(DIGITS[usize::from(x >> 4)] as char);
            out.push(DIGITS[usize::from(x & 15)] as char);
        }
        out
    }

    /// Bytes of a hex string (either case; no separators).
    pub fn decode(s: &str) -> Result<Vec<u8>, String> {
        if !s.len().is_multiple_of(2) {
            return Err(format!("hex string has odd length {}", s.len()));
        }
        let nibble = |i: usize, c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!("not a hex digit at character {i}")),
        };
        s.as_bytes()
            .chunks_exact(2)
            .enumerate()
            .map(|(i, p)| Ok(nibble(2 * i, p[0])? << 4 | nibble(2 * i + 1, p[1])?))
            .collect()
    }
}
