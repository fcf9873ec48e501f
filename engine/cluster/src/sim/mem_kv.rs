//! [`MemKv`], the simulation's model of etcd, and [`Reach`], the store as
//! one node reaches it.

use std::collections::{BTreeMap, HashMap};

use crate::etcd::{CompareOp, CompareTarget, KeyValue, OpResponse, Txn, TxnOp, TxnResponse};
use crate::occupancy::Kv;
use crate::{Error, Result};

/// A model of etcd: keys with create/mod revisions and versions, one
/// revision per write transaction, leases that delete their keys when they
/// expire (at [`MemKv::advance`]).
#[derive(Debug, Default)]
pub struct MemKv {
    keys: BTreeMap<Vec<u8>, KeyValue>,
    revision: i64,
    /// Lease id → its expiry, virtual ms.
    leases: HashMap<i64, u64>,
    next_lease: i64,
    now: u64,
}

impl MemKv {
    /// Moves the store's clock to `now` (never back) and expires leases.
    pub fn advance(&mut self, now: u64) {
        self.now = self.now.max(now);
        let expired: Vec<i64> = self
            .leases
            .iter()
            .filter(|(_, at)| **at <= self.now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.leases.remove(&id);
            let doomed: Vec<Vec<u8>> = self
                .keys
                .iter()
                .filter(|(_, kv)| kv.lease == Some(id))
                .map(|(k, _)| k.clone())
                .collect();
            if !doomed.is_empty() {
                self.revision += 1;
                for k in doomed {
                    self.keys.remove(&k);
                }
            }
        }
    }

    /// Grants a lease of `ttl_ms` from the store's clock.
    pub fn lease_grant(&mut self, ttl_ms: u64) -> i64 {
        self.next_lease += 1;
        self.leases.insert(self.next_lease, self.now + ttl_ms);
        self.next_lease
    }

    /// Refreshes lease `id` for `ttl_ms`; [`Error::LeaseNotFound`] once it
    /// expired.
    pub fn lease_keepalive(&mut self, id: i64, ttl_ms: u64) -> Result<()> {
        let now = self.now;
        let at = self.leases.get_mut(&id).ok_or(Error::LeaseNotFound(id))?;
        *at = now + ttl_ms;
        Ok(())
    }

    /// Every key from `from` (inclusive) to `to` (exclusive).
    fn range(&self, from: &[u8], to: &[u8]) -> Vec<KeyValue> {
        self.keys
            .range(from.to_vec()..to.to_vec())
            .map(|(_, kv)| kv.clone())
            .collect()
    }

    fn holds(&self, c: &crate::etcd::Compare) -> bool {
        let kv = self.keys.get(&c.key);
        let ord = |a: i64, b: i64| match c.op {
            CompareOp::Equal => a == b,
            CompareOp::Greater => a > b,
            CompareOp::Less => a < b,
            CompareOp::NotEqual => a != b,
        };
        match &c.target {
            CompareTarget::Version(v) => ord(kv.map_or(0, |k| k.version), *v),
            CompareTarget::CreateRevision(v) => ord(kv.map_or(0, |k| k.create_revision), *v),
            CompareTarget::ModRevision(v) => ord(kv.map_or(0, |k| k.mod_revision), *v),
            CompareTarget::Lease(v) => ord(kv.and_then(|k| k.lease).unwrap_or(0), *v),
            CompareTarget::Value(v) => kv.is_some_and(|k| match c.op {
                CompareOp::Equal => &k.value == v,
                CompareOp::NotEqual => &k.value != v,
                CompareOp::Greater => k.value > *v,
                CompareOp::Less => k.value < *v,
            }),
        }
    }
}

impl Kv for MemKv {
    fn txn(&mut self, txn: &Txn) -> Result<TxnResponse> {
        let succeeded = txn.compare.iter().all(|c| self.holds(c));
        let ops = if succeeded { &txn.then } else { &txn.otherwise };
        let writes = ops
            .iter()
            .any(|op| !matches!(op, TxnOp::Get { .. } | TxnOp::Range { .. }));
        if writes {
            self.revision += 1;
        }
        let revision = self.revision;
        let mut responses = Vec::with_capacity(ops.len());
        for op in ops {
            responses.push(match op {
                TxnOp::Put { key, value, lease } => {
                    if let Some(id) = lease
                        && !self.leases.contains_key(id)
                    {
                        return Err(Error::LeaseNotFound(*id));
                    }
                    let old = self.keys.get(key);
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: old.map_or(revision, |o| o.create_revision),
                        mod_revision: revision,
                        version: old.map_or(1, |o| o.version + 1),
                        lease: *lease,
                    };
                    self.keys.insert(key.clone(), kv);
                    OpResponse::Put { revision }
                }
                TxnOp::Delete { key } => OpResponse::Delete {
                    deleted: i64::from(self.keys.remove(key).is_some()),
                },
                TxnOp::Get { key } => OpResponse::Get {
                    kvs: self.keys.get(key).cloned().into_iter().collect(),
                },
                TxnOp::Range { key, range_end } => OpResponse::Get {
                    kvs: self.range(key, range_end),
                },
            });
        }
        Ok(TxnResponse {
            succeeded,
            revision,
            responses,
        })
    }

    fn delete(&mut self, key: &[u8]) -> Result<(i64, i64)> {
        if self.keys.remove(key).is_some() {
            self.revision += 1;
            return Ok((1, self.revision));
        }
        Ok((0, self.revision))
    }
}

/// The store as one node reaches it: not at all while cut off.
pub(super) struct Reach<'a> {
    pub(super) store: &'a mut MemKv,
    pub(super) cut: bool,
}

impl Kv for Reach<'_> {
    fn txn(&mut self, txn: &Txn) -> Result<TxnResponse> {
        if self.cut {
            return Err(unreachable());
        }
        self.store.txn(txn)
    }

    fn delete(&mut self, key: &[u8]) -> Result<(i64, i64)> {
        if self.cut {
            return Err(unreachable());
        }
        self.store.delete(key)
    }
}

fn unreachable() -> Error {
    Error::Unavailable {
        tried: 1,
        last: std::io::Error::other("cut off (simulated)"),
    }
}
