//! What a stream's snapshot holds (SPEC RT-2, RT-6): the state a client
//! rebuilds from, taken at the same commit point as its checkpoint.
//!
//! Most streams keep the latest event's payload (last-value semantics). A
//! stream with a [`TableShape`] — the terminal's built-in `sessions` — keeps
//! a table instead: each event replaces the row its key names, or removes
//! it, so that the snapshot plus the events after its checkpoint is the
//! whole table, as a dashboard needs it. The table is folded in the same
//! step as the ledger append, so the two can never disagree.

use std::collections::BTreeMap;

use std::borrow::Cow;
use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserializer;
use serde::de::{self, Deserialize, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::msg::RtRefusal;

/// Most rows one table keeps (the terminal's own session ceiling is far
/// lower); an event that would add one more is refused before it takes a
/// sequence (never a silent eviction, SPEC RT-5).
pub const MAX_TABLE_ROWS: usize = 65_536;

/// Most bytes of rows one table keeps.
pub const MAX_TABLE_BYTES: usize = 16 << 20;

/// How a stream's events make a table: the snapshot's state is
/// `{"<member>":[row, …]}`, rows ordered by key, each row the latest
/// payload whose `key` member named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableShape {
    /// The member of the snapshot's state holding the rows.
    pub member: &'static str,
    /// The payload member (a string) that keys a row.
    pub key: &'static str,
    /// A payload whose member `.0` is the string `.1` removes its row.
    pub gone: (&'static str, &'static str),
}

/// A stream's state as its snapshot shows it.
#[derive(Debug)]
pub(super) enum StreamState {
    /// The latest event's payload, if any.
    Last(Option<Bytes>),
    /// A table of rows.
    Table(Table),
}

/// The rows of a [`TableShape`] stream.
#[derive(Debug)]
pub(super) struct Table {
    shape: TableShape,
    rows: BTreeMap<Box<str>, Bytes>,
    bytes: usize,
}

/// What an accepted event does to a table.
#[derive(Debug)]
pub(super) enum Change {
    /// Nothing to fold (last-value state).
    Last,
    /// Set the row of this key.
    Set(Key),
    /// Remove the row of this key.
    Remove(Key),
}

/// A row key: where it lies in the payload (a key without escapes, the
/// usual case, costs no allocation until it names a new row), or unescaped.
#[derive(Debug)]
pub(super) enum Key {
    /// These bytes of the payload.
    At(std::ops::Range<usize>),
    /// A key that had escapes in the payload, unescaped.
    Owned(Box<str>),
}

impl Key {
    fn new(key: Cow<'_, str>, payload: &[u8]) -> Self {
        match key {
            Cow::Borrowed(k) => {
                // A borrowed key lies inside the payload it was read from.
                let at = (k.as_ptr() as usize).wrapping_sub(payload.as_ptr() as usize);
                match payload.get(at..at + k.len()) {
                    Some(b) if b == k.as_bytes() => Self::At(at..at + k.len()),
                    _ => Self::Owned(k.into()),
                }
            }
            Cow::Owned(k) => Self::Owned(k.into()),
        }
    }

    /// The key's text (`payload`: the one it was read from).
    fn text<'a>(&'a self, payload: &'a [u8]) -> &'a str {
        match self {
            Self::At(at) => payload
                .get(at.clone())
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            Self::Owned(k) => k,
        }
    }
}

impl StreamState {
    /// The state of a new stream: a table if it has a shape.
    pub(super) fn new(shape: Option<TableShape>) -> Self {
        match shape {
            Some(shape) => Self::Table(Table {
                shape,
                rows: BTreeMap::new(),
                bytes: 0,
            }),
            None => Self::Last(None),
        }
    }

    /// What `payload` would change, or why it cannot be applied: asked
    /// before the event takes a sequence, so a refusal is never a gap.
    pub(super) fn check(&self, payload: &[u8]) -> Result<Change, RtRefusal> {
        let Self::Table(t) = self else {
            return Ok(Change::Last);
        };
        let mut de = serde_json::Deserializer::from_slice(payload);
        let probe = Probe { shape: &t.shape };
        let Ok((Some(key), gone)) = de.deserialize_map(probe) else {
            return Err(RtRefusal::NotARow);
        };
        if gone {
            return Ok(Change::Remove(Key::new(key, payload)));
        }
        let old = t.rows.get(&*key).map_or(0, |r| r.len() + key.len());
        let grows = old == 0;
        if (grows && t.rows.len() >= MAX_TABLE_ROWS)
            || t.bytes - old + payload.len() + key.len() > MAX_TABLE_BYTES
        {
            return Err(RtRefusal::TableFull);
        }
        Ok(Change::Set(Key::new(key, payload)))
    }

    /// Applies a committed event's payload, as [`StreamState::check`] said.
    pub(super) fn apply(&mut self, change: Change, payload: Bytes) {
        match (self, change) {
            (Self::Last(state), _) => *state = Some(payload),
            (Self::Table(t), Change::Set(key)) => {
                let key = key.text(&payload);
                t.bytes += payload.len() + key.len();
                // An existing row is replaced in place: no key allocated.
                if let Some(row) = t.rows.get_mut(key) {
                    t.bytes -= row.len() + key.len();
                    *row = payload;
                } else {
                    t.rows.insert(key.into(), payload);
                }
            }
            (Self::Table(t), Change::Remove(key)) => {
                if let Some(old) = t.rows.remove(key.text(&payload)) {
                    t.bytes -= old.len() + key.text(&payload).len();
                }
            }
            (Self::Table(_), Change::Last) => {}
        }
    }

    /// The state as JSON (`null` before a last-value stream's first event).
    pub(super) fn to_json(&self) -> Bytes {
        match self {
            Self::Last(state) => state.clone().unwrap_or(Bytes::from_static(b"null")),
            Self::Table(t) => {
                let rows: usize = t.rows.values().map(|r| r.len() + 1).sum();
                let mut b = BytesMut::with_capacity(t.shape.member.len() + rows + 8);
                b.put_slice(b"{\"");
                // A fixed name of ours: nothing to escape.
                b.put_slice(t.shape.member.as_bytes());
                b.put_slice(b"\":[");
                for (i, row) in t.rows.values().enumerate() {
                    if i > 0 {
                        b.put_u8(b',');
                    }
                    b.put_slice(row);
                }
                b.put_slice(b"]}");
                b.freeze()
            }
        }
    }
}

/// Reads the two members of a payload a table needs — its row key and
/// whether it removes the row — without building the whole object: the
/// built-in streams' events are on the control thread's hot path.
struct Probe<'s> {
    shape: &'s TableShape,
}

impl<'de> Visitor<'de> for Probe<'_> {
    /// The row key (if the key member is a string), and whether the
    /// payload removes the row.
    type Value = (Option<Cow<'de, str>>, bool);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut key, mut gone) = (None, false);
        let (member, value) = self.shape.gone;
        while let Some(name) = map.next_key::<Text<'de>>()? {
            if name.0.as_deref() == Some(self.shape.key) {
                key = map.next_value::<Text<'de>>()?.0;
            } else if name.0.as_deref() == Some(member) {
                gone = map.next_value::<Text<'de>>()?.0.as_deref() == Some(value);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok((key, gone))
    }
}

/// Any JSON value: its text if it is a string (borrowed when it has no
/// escapes), else nothing.
struct Text<'de>(Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Borrowed(v))))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Owned(v.to_owned()))))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Text(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Text(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Text(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Text(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Text(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Text(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: TableShape = TableShape {
        member: "rows",
        key: "id",
        gone: ("to", "terminated"),
    };

    fn fold(state: &mut StreamState, payload: &str) -> Result<(), RtRefusal> {
        let change = state.check(payload.as_bytes())?;
        state.apply(change, Bytes::copy_from_slice(payload.as_bytes()));
        Ok(())
    }

    #[test]
    fn a_table_keeps_the_latest_row_of_each_key_until_it_is_gone() {
        let mut s = StreamState::new(Some(SHAPE));
        assert_eq!(&s.to_json()[..], br#"{"rows":[]}"#);
        fold(&mut s, r#"{"id":"b","to":"creating"}"#).unwrap();
        fold(&mut s, r#"{"id":"a","to":"active"}"#).unwrap();
        fold(&mut s, r#"{"id":"b","to":"active"}"#).unwrap();
        assert_eq!(
            &s.to_json()[..],
            br#"{"rows":[{"id":"a","to":"active"},{"id":"b","to":"active"}]}"#
        );
        fold(&mut s, r#"{"id":"a","to":"terminated"}"#).unwrap();
        // Removing a row that is not there changes nothing.
        fold(&mut s, r#"{"id":"zz","to":"terminated"}"#).unwrap();
        assert_eq!(&s.to_json()[..], br#"{"rows":[{"id":"b","to":"active"}]}"#);
        let StreamState::Table(t) = &s else {
            panic!("not a table");
        };
        assert_eq!(t.bytes, 1 + r#"{"id":"b","to":"active"}"#.len());
        // Escaped strings and members of any type are read too.
        fold(
            &mut s,
            r#"{"n":[1,{"x":null}],"id":"\u0063","m":{"a":[true]}}"#,
        )
        .unwrap();
        fold(&mut s, r#"{"id":"c","to":"terminated","x":1.5}"#).unwrap();
        for bad in [
            r#"{"to":"active"}"#,
            r#"{"id":7}"#,
            r#"{"id":["a"]}"#,
            "[1]",
            "not json",
            r#"{"id":"a""#,
        ] {
            assert_eq!(
                s.check(bad.as_bytes()).err(),
                Some(RtRefusal::NotARow),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_full_table_refuses_new_rows_but_not_changes_to_its_rows() {
        let mut s = StreamState::new(Some(SHAPE));
        for i in 0..MAX_TABLE_ROWS {
            fold(&mut s, &format!(r#"{{"id":"{i}"}}"#)).unwrap();
        }
        assert_eq!(
            s.check(br#"{"id":"new"}"#).err(),
            Some(RtRefusal::TableFull)
        );
        fold(&mut s, r#"{"id":"7","n":1}"#).unwrap();
        fold(&mut s, r#"{"id":"7","to":"terminated"}"#).unwrap();
        fold(&mut s, r#"{"id":"new"}"#).unwrap();
    }

    #[test]
    fn a_last_value_stream_keeps_the_latest_payload() {
        let mut s = StreamState::new(None);
        assert_eq!(&s.to_json()[..], b"null");
        fold(&mut s, r#"{"n":1}"#).unwrap();
        fold(&mut s, r#"{"n":2}"#).unwrap();
        assert_eq!(&s.to_json()[..], br#"{"n":2}"#);
    }
}
