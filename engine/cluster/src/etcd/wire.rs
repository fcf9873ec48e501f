//! etcd's JSON gateway encoding, both ways: requests as `serde_json`
//! values, answers into `Deserialize` structs. The gateway writes protobuf
//! JSON: bytes as base64, 64-bit integers as decimal strings, fields at
//! their default value left out (so every field here defaults).

use dtp_codec::http::{base64_decode, base64_encode};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use super::types::{Compare, CompareOp, CompareTarget, KeyValue, TxnOp};
use crate::error::{Error, Result, server_text};

/// bytes → the gateway's base64 string.
pub(crate) fn b64(bytes: &[u8]) -> Value {
    Value::String(base64_encode(bytes))
}

/// An int64 as the gateway wants it: a decimal string.
pub(crate) fn int(n: i64) -> Value {
    Value::String(n.to_string())
}

pub(crate) fn compare(c: &Compare) -> Value {
    let result = match c.op {
        CompareOp::Equal => "EQUAL",
        CompareOp::Greater => "GREATER",
        CompareOp::Less => "LESS",
        CompareOp::NotEqual => "NOT_EQUAL",
    };
    let mut v = json!({ "key": b64(&c.key), "result": result });
    let (target, field, value) = match &c.target {
        CompareTarget::Version(n) => ("VERSION", "version", int(*n)),
        CompareTarget::CreateRevision(n) => ("CREATE", "create_revision", int(*n)),
        CompareTarget::ModRevision(n) => ("MOD", "mod_revision", int(*n)),
        CompareTarget::Value(b) => ("VALUE", "value", b64(b)),
        CompareTarget::Lease(n) => ("LEASE", "lease", int(*n)),
    };
    v["target"] = target.into();
    v[field] = value;
    v
}

pub(crate) fn put(key: &[u8], value: &[u8], lease: Option<i64>) -> Value {
    let mut v = json!({ "key": b64(key), "value": b64(value) });
    if let Some(lease) = lease {
        v["lease"] = int(lease);
    }
    v
}

pub(crate) fn range(key: &[u8], range_end: Option<&[u8]>) -> Value {
    let mut v = json!({ "key": b64(key) });
    if let Some(end) = range_end {
        v["range_end"] = b64(end);
    }
    v
}

pub(crate) fn txn_op(op: &TxnOp) -> Value {
    match op {
        TxnOp::Put { key, value, lease } => json!({ "request_put": put(key, value, *lease) }),
        TxnOp::Delete { key } => json!({ "request_delete_range": range(key, None) }),
        TxnOp::Get { key } => json!({ "request_range": range(key, None) }),
        TxnOp::Range { key, range_end } => {
            json!({ "request_range": range(key, Some(range_end)) })
        }
    }
}

/// An answer body as `T`, or a protocol error naming the endpoint.
pub(crate) fn parse<'a, T: Deserialize<'a>>(endpoint: &str, body: &'a [u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| Error::protocol(endpoint, format!("etcd answer not understood: {e}")))
}

/// A non-200 answer as [`Error::Etcd`] (the gateway's `{error, code}`).
pub(crate) fn error(endpoint: &str, status: u16, body: &[u8]) -> Error {
    match serde_json::from_slice::<WError>(body) {
        Ok(e) => Error::Etcd {
            code: e.code,
            message: server_text(if e.message.is_empty() {
                &e.error
            } else {
                &e.message
            }),
        },
        Err(_) => Error::protocol(
            endpoint,
            format!("HTTP {status} without an etcd error body"),
        ),
    }
}

/// A watch's `cancel_reason` (`rpc error: code = Unauthenticated desc =
/// etcdserver: invalid auth token`) as [`Error::Etcd`] with the code's
/// number (2, Unknown, for a name not listed).
pub(crate) fn cancel_error(reason: &str) -> Error {
    const CODES: [(&str, i64); 6] = [
        ("InvalidArgument", 3),
        ("NotFound", 5),
        ("PermissionDenied", 7),
        ("FailedPrecondition", 9),
        ("Unavailable", 14),
        ("Unauthenticated", 16),
    ];
    let rest = reason.strip_prefix("rpc error: code = ").unwrap_or(reason);
    let (name, desc) = rest.split_once(" desc = ").unwrap_or(("", rest));
    let code = CODES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(2, |(_, c)| *c);
    Error::Etcd {
        code,
        message: server_text(desc),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WError {
    pub(crate) error: String,
    pub(crate) message: String,
    #[serde(deserialize_with = "de_i64")]
    pub(crate) code: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WHeader {
    #[serde(deserialize_with = "de_i64")]
    pub(crate) revision: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WKv {
    #[serde(deserialize_with = "de_b64")]
    key: Vec<u8>,
    #[serde(deserialize_with = "de_b64")]
    value: Vec<u8>,
    #[serde(deserialize_with = "de_i64")]
    create_revision: i64,
    #[serde(deserialize_with = "de_i64")]
    mod_revision: i64,
    #[serde(deserialize_with = "de_i64")]
    version: i64,
    #[serde(deserialize_with = "de_i64")]
    lease: i64,
}

impl From<WKv> for KeyValue {
    fn from(w: WKv) -> Self {
        Self {
            key: w.key,
            value: w.value,
            create_revision: w.create_revision,
            mod_revision: w.mod_revision,
            version: w.version,
            lease: (w.lease != 0).then_some(w.lease),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WRange {
    pub(crate) header: WHeader,
    pub(crate) kvs: Vec<WKv>,
    pub(crate) more: bool,
    #[serde(deserialize_with = "de_i64")]
    pub(crate) count: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WPut {
    pub(crate) header: WHeader,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WDelete {
    pub(crate) header: WHeader,
    #[serde(deserialize_with = "de_i64")]
    pub(crate) deleted: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WTxn {
    pub(crate) header: WHeader,
    pub(crate) succeeded: bool,
    pub(crate) responses: Vec<WOpResponse>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WOpResponse {
    pub(crate) response_range: Option<WRange>,
    pub(crate) response_put: Option<WPut>,
    pub(crate) response_delete_range: Option<WDelete>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WLease {
    pub(crate) header: WHeader,
    #[serde(rename = "ID", deserialize_with = "de_i64")]
    pub(crate) id: i64,
    #[serde(rename = "TTL", deserialize_with = "de_i64")]
    pub(crate) ttl: i64,
    /// Set when the grant failed inside a 200 answer.
    pub(crate) error: String,
}

/// One message of a streamed answer (keepalive, watch).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WStreamed<T> {
    pub(crate) result: Option<T>,
    pub(crate) error: Option<WError>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WWatch {
    pub(crate) header: WHeader,
    pub(crate) created: bool,
    pub(crate) canceled: bool,
    #[serde(deserialize_with = "de_i64")]
    pub(crate) compact_revision: i64,
    /// Why etcd cancelled the watch: a gRPC status as text.
    pub(crate) cancel_reason: String,
    pub(crate) events: Vec<WEvent>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WEvent {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) kv: WKv,
    pub(crate) prev_kv: Option<WKv>,
}

/// An int64 written as a decimal string (protobuf JSON) or a number.
fn de_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Num(i64),
        Text(String),
    }
    match Int::deserialize(d)? {
        Int::Num(n) => Ok(n),
        // Member and cluster ids are uint64: keep their bits.
        Int::Text(s) => s
            .parse::<i64>()
            .or_else(|_| s.parse::<u64>().map(|u| u as i64))
            .map_err(|_| serde::de::Error::custom("not a 64-bit integer")),
    }
}

fn de_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    base64_decode(&s).ok_or_else(|| serde::de::Error::custom("invalid base64"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn range_answer_from_a_real_server() {
        let body = br#"{"header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709","revision":"2","raft_term":"2"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}"#;
        let r: WRange = parse("e", body).unwrap();
        assert_eq!(r.header.revision, 2);
        assert_eq!(r.count, 1);
        let kv = KeyValue::from(r.kvs.into_iter().next().unwrap());
        assert_eq!(
            (kv.key.as_slice(), kv.value.as_slice()),
            (&b"foo"[..], &b"bar"[..])
        );
        assert_eq!(
            (kv.create_revision, kv.mod_revision, kv.version, kv.lease),
            (2, 2, 1, None)
        );
    }

    #[test]
    fn txn_and_watch_answers() {
        let body = br#"{"header":{"revision":"3"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"}}},{"response_delete_range":{"header":{"revision":"3"},"deleted":"1"}}]}"#;
        let t: WTxn = parse("e", body).unwrap();
        assert!(t.succeeded);
        assert_eq!(
            t.responses[1]
                .response_delete_range
                .as_ref()
                .unwrap()
                .deleted,
            1
        );
        let line =
            br#"{"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"4"}}"#;
        let w: WStreamed<WWatch> = parse("e", line).unwrap();
        let w = w.result.unwrap();
        assert!(w.canceled);
        assert_eq!(w.compact_revision, 4);
    }

    #[test]
    fn error_bodies() {
        let body = br#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#;
        assert!(matches!(error("e", 404, body), Error::Etcd { code: 5, .. }));
        assert!(matches!(error("e", 502, b"<html>"), Error::Protocol { .. }));
    }

    #[test]
    fn cancel_reasons_keep_their_code() {
        let e =
            cancel_error("rpc error: code = Unauthenticated desc = etcdserver: invalid auth token");
        assert!(
            matches!(&e, Error::Etcd { code: 16, message } if message == "etcdserver: invalid auth token"),
            "{e}"
        );
        assert!(matches!(cancel_error("odd"), Error::Etcd { code: 2, .. }));
    }

    #[test]
    fn bad_fields_are_protocol_errors() {
        for bad in [
            &br#"{"kvs":[{"key":"!!"}]}"#[..],
            br#"{"count":"12x"}"#,
            br#"{"count":[1]}"#,
            br#"{"kvs":7}"#,
            b"",
            b"\xff\xfe",
        ] {
            assert!(matches!(
                parse::<WRange>("e", bad),
                Err(Error::Protocol { .. })
            ));
        }
    }

    #[test]
    fn compare_encodes_target_and_field() {
        let c = compare(&Compare::new(
            b"k".to_vec(),
            CompareOp::Equal,
            CompareTarget::CreateRevision(0),
        ));
        assert_eq!(c["target"], "CREATE");
        assert_eq!(c["create_revision"], "0");
        assert_eq!(c["key"], "aw==");
    }

    proptest! {
        #[test]
        fn arbitrary_json_never_panics(body in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse::<WTxn>("e", &body);
            let _ = parse::<WStreamed<WWatch>>("e", &body);
            let _ = error("e", 500, &body);
        }

        #[test]
        fn ints_as_strings_or_numbers(n in any::<i64>()) {
            let a: WDelete = parse("e", format!(r#"{{"deleted":"{n}"}}"#).as_bytes()).unwrap();
            let b: WDelete = parse("e", format!(r#"{{"deleted":{n}}}"#).as_bytes()).unwrap();
            prop_assert_eq!(a.deleted, n);
            prop_assert_eq!(b.deleted, n);
        }
    }
}
