//! The etcd client's requests and answers as Rust types.

/// A key and its value as etcd stores it. Every revision is a cluster-wide
/// revision number: etcd's revision grows by one with every change to any
/// key and is never reused, so a key's `mod_revision` strictly increases
/// across its puts, deletes and re-creations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The revision of the put that created the key (since it last did not
    /// exist).
    pub create_revision: i64,
    /// The revision of the key's last change.
    pub mod_revision: i64,
    /// Puts since creation (1 for a new key).
    pub version: i64,
    /// The lease the key is attached to, if any.
    pub lease: Option<i64>,
}

/// The answer to [`super::Etcd::get`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Get {
    /// The store's revision when the read was served.
    pub revision: i64,
    /// The key, if it exists.
    pub kv: Option<KeyValue>,
}

/// The answer to [`super::Etcd::range`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    /// The store's revision when the read was served.
    pub revision: i64,
    /// The keys found, in key order.
    pub kvs: Vec<KeyValue>,
    /// How many keys are in the range (even past a limit).
    pub count: i64,
}

/// What a [`Compare`] compares a key's attribute with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`.
    Equal,
    /// `>`.
    Greater,
    /// `<`.
    Less,
    /// `!=`.
    NotEqual,
}

/// The attribute of a key a [`Compare`] reads, with the value to compare
/// it with. A key that does not exist has version, create and mod revision
/// 0 and no lease; a `Value` compare on it fails whatever the op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's version (puts since creation).
    Version(i64),
    /// The revision that created the key (0: the key does not exist).
    CreateRevision(i64),
    /// The revision of the key's last change.
    ModRevision(i64),
    /// The key's value.
    Value(Vec<u8>),
    /// The key's lease id (0: none).
    Lease(i64),
}

/// One condition of a [`Txn`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    /// The key compared.
    pub key: Vec<u8>,
    /// The comparison.
    pub op: CompareOp,
    /// The attribute and the value.
    pub target: CompareTarget,
}

impl Compare {
    /// `key`'s attribute `target` compared by `op`.
    pub fn new(key: impl Into<Vec<u8>>, op: CompareOp, target: CompareTarget) -> Self {
        Self {
            key: key.into(),
            op,
            target,
        }
    }

    /// True when `key` does not exist (its create revision is 0).
    pub fn absent(key: impl Into<Vec<u8>>) -> Self {
        Self::new(key, CompareOp::Equal, CompareTarget::CreateRevision(0))
    }

    /// True when `key`'s last change was at `revision`.
    pub fn mod_revision_is(key: impl Into<Vec<u8>>, revision: i64) -> Self {
        Self::new(key, CompareOp::Equal, CompareTarget::ModRevision(revision))
    }
}

/// One operation of a [`Txn`] branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    /// Write `value` at `key`, attached to `lease` if given.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease to attach the key to.
        lease: Option<i64>,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Read `key`.
    Get {
        /// The key.
        key: Vec<u8>,
    },
    /// Read every key from `key` up to `range_end` (exclusive; see
    /// [`prefix_end`]).
    Range {
        /// The first key.
        key: Vec<u8>,
        /// The end of the range, exclusive.
        range_end: Vec<u8>,
    },
}

/// A transaction: if every compare holds, the `then` branch runs, else
/// the `otherwise` branch; atomically, at one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    /// The conditions, all of which must hold.
    pub compare: Vec<Compare>,
    /// Run when every compare holds.
    pub then: Vec<TxnOp>,
    /// Run otherwise.
    pub otherwise: Vec<TxnOp>,
}

/// What one operation of the branch that ran answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResponse {
    /// A put's revision.
    Put {
        /// The revision the put created.
        revision: i64,
    },
    /// A delete's count.
    Delete {
        /// How many keys were deleted.
        deleted: i64,
    },
    /// A read's keys.
    Get {
        /// The keys found.
        kvs: Vec<KeyValue>,
    },
}

impl OpResponse {
    /// The keys a read found (none for a put or a delete).
    pub fn kvs(&self) -> &[KeyValue] {
        match self {
            Self::Get { kvs } => kvs,
            Self::Put { .. } | Self::Delete { .. } => &[],
        }
    }
}

/// The answer to [`super::Etcd::txn`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResponse {
    /// Whether the compares held (the `then` branch ran).
    pub succeeded: bool,
    /// The store's revision after the transaction (the revision its writes
    /// created, if it wrote).
    pub revision: i64,
    /// One answer per operation of the branch that ran, in order.
    pub responses: Vec<OpResponse>,
}

/// A granted lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease id.
    pub id: i64,
    /// Its time to live in seconds, as granted.
    pub ttl: i64,
}

/// What happened to a key, as a watch reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A put (creation or update).
    Put,
    /// A deletion (explicit, or the key's lease expired).
    Delete,
}

/// One change a watch saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change (for a delete: the key, with `mod_revision`
    /// the deletion's revision and an empty value).
    pub kv: KeyValue,
}

/// Smallest key greater than every key starting with `prefix` (the
/// `range_end` of a prefix read or watch).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff (or empty): to the end of the key space.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }
}
