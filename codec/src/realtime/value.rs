//! The exact-key schema step of SPEC RT-4: building a JSON object that passed
//! the guard (refusing duplicate keys), and reading its members with typed
//! refusals. Also the bounded string classes shared by every format here.

use std::cell::Cell;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::json_guard::{JsonLimits, check_json};
use super::{Refusal, parse_canonical_u64};

/// Identifier strings (`subscriptionId`, `streamId`, `connectionId`, `nonce`,
/// `streamEpoch`, `eventType`, `eventId`): 1 to 128 bytes of
/// `[A-Za-z0-9._:-]`.
pub const MAX_ID_LEN: usize = 128;

/// Opaque tokens (`cursor`, `acceptedCursor`, `resumeCursor`,
/// `scopeBinding`, `snapshotRevision`): 1 to 512 bytes of header-safe visible
/// ASCII (`!` to `~`), so a cursor can travel as an SSE `id` and in a
/// `Last-Event-ID` header unchanged.
pub const MAX_TOKEN_LEN: usize = 512;

/// Whether `s` is an identifier (see [`MAX_ID_LEN`]).
pub fn is_valid_id(s: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Whether `s` is an opaque token (see [`MAX_TOKEN_LEN`]).
pub fn is_valid_token(s: &str) -> bool {
    (1..=MAX_TOKEN_LEN).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic())
}

/// Guard, then build the top-level object (SPEC RT-4 up to the key check),
/// refusing an object anywhere in it that repeats a key: for any strict
/// JSON body (e.g. a publication's, whose schema the caller checks).
pub fn parse_object(bytes: &[u8], limits: &JsonLimits) -> Result<Map<String, Value>, Refusal> {
    check_json(bytes, limits)?;
    let duplicate = Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = match (Strict(&duplicate)).deserialize(&mut de) {
        Ok(v) => v,
        // The guard accepted the text, so the builder can only refuse what
        // the strict visitor refuses; anything else would be a guard bug,
        // reported as syntax rather than trusted.
        Err(_) if duplicate.get() => return Err(Refusal::DuplicateKey),
        Err(_) => return Err(Refusal::Syntax { offset: 0 }),
    };
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Refusal::NotAnObject),
    }
}

/// Builds a `Value` and refuses an object that repeats a key.
#[derive(Clone, Copy)]
struct Strict<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                self.0.set(true);
                return Err(de::Error::custom("duplicate key"));
            }
            let v = access.next_value_seed(self)?;
            map.insert(key, v);
        }
        Ok(Value::Object(map))
    }
}

/// Members of one object, read by name with typed refusals.
pub(crate) struct Fields<'a>(pub(crate) &'a Map<String, Value>);

impl<'a> Fields<'a> {
    /// The exact-key check: every key is in `allowed`, every `allowed` key is
    /// present. Unknown keys are reported before missing ones.
    pub(crate) fn exact(
        map: &'a Map<String, Value>,
        allowed: &[&'static str],
    ) -> Result<Self, Refusal> {
        if map.keys().any(|k| !allowed.contains(&k.as_str())) {
            return Err(Refusal::UnknownKey);
        }
        if let Some(missing) = allowed.iter().find(|k| !map.contains_key(**k)) {
            return Err(Refusal::MissingKey(missing));
        }
        Ok(Self(map))
    }

    pub(crate) fn get(&self, key: &'static str) -> Result<&'a Value, Refusal> {
        self.0.get(key).ok_or(Refusal::MissingKey(key))
    }

    pub(crate) fn str(&self, key: &'static str) -> Result<&'a str, Refusal> {
        self.get(key)?.as_str().ok_or(Refusal::WrongType(key))
    }

    /// A string or `null`.
    pub(crate) fn opt_str(&self, key: &'static str) -> Result<Option<&'a str>, Refusal> {
        match self.get(key)? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            _ => Err(Refusal::WrongType(key)),
        }
    }

    pub(crate) fn id(&self, key: &'static str) -> Result<String, Refusal> {
        let s = self.str(key)?;
        check_id(key, s)?;
        Ok(s.to_owned())
    }

    pub(crate) fn token(&self, key: &'static str) -> Result<String, Refusal> {
        let s = self.str(key)?;
        check_token(key, s)?;
        Ok(s.to_owned())
    }

    /// A token or `null`.
    pub(crate) fn opt_token(&self, key: &'static str) -> Result<Option<String>, Refusal> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(s) => {
                check_token(key, s)?;
                Ok(Some(s.to_owned()))
            }
        }
    }

    /// A canonical unsigned decimal string (SPEC RT-3 `sequence`).
    pub(crate) fn sequence(&self, key: &'static str) -> Result<u64, Refusal> {
        parse_canonical_u64(self.str(key)?).ok_or(Refusal::NonCanonicalSequence(key))
    }

    /// A JSON integer in `1..=max`.
    pub(crate) fn positive(&self, key: &'static str, max: u64) -> Result<u64, Refusal> {
        let n = self.get(key)?.as_u64().ok_or(Refusal::WrongType(key))?;
        if (1..=max).contains(&n) {
            Ok(n)
        } else {
            Err(Refusal::InvalidValue(key))
        }
    }

    pub(crate) fn object(&self, key: &'static str) -> Result<&'a Map<String, Value>, Refusal> {
        self.get(key)?.as_object().ok_or(Refusal::WrongType(key))
    }

    /// A string member parsed into a closed enum.
    pub(crate) fn closed<T: std::str::FromStr>(&self, key: &'static str) -> Result<T, Refusal> {
        self.str(key)?
            .parse()
            .map_err(|_| Refusal::UnknownEnumValue(key))
    }
}

pub(crate) fn check_id(key: &'static str, s: &str) -> Result<(), Refusal> {
    if is_valid_id(s) {
        Ok(())
    } else {
        Err(Refusal::InvalidValue(key))
    }
}

pub(crate) fn check_token(key: &'static str, s: &str) -> Result<(), Refusal> {
    if is_valid_token(s) {
        Ok(())
    } else {
        Err(Refusal::InvalidValue(key))
    }
}
