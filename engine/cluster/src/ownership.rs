//! Ownership of a resource across gateways, on etcd (SPEC HO-4, TS-8): at
//! most one node holds a key at a time, and every decision carries a
//! fencing token.
//!
//! # Semantics
//!
//! - A claim is a key whose value is the holder's node id, written by a
//!   transaction that succeeds only if the key does not exist
//!   ([`Ownership::claim`]) or was last changed at the revision the caller
//!   saw ([`Ownership::transfer`], [`Ownership::release`]). Two nodes racing
//!   for one key: exactly one transaction succeeds; the other learns the
//!   holder and its revision ([`Taken`]).
//! - The **fencing token** is the etcd revision of the write that made the
//!   claim (the key's `mod_revision`). etcd's revision is cluster-wide,
//!   grows with every write and is never reused, so a key's tokens strictly
//!   increase across claims, transfers, releases and re-claims. Whoever acts
//!   on the resource on a holder's behalf keeps the highest token seen and
//!   refuses older ones: a node that lost its claim without knowing it (a
//!   pause longer than its lease) is refused by token, not by luck.
//! - A claim attached to a lease lives only as long as the lease: when the
//!   holder stops refreshing it (crash, partition), etcd deletes the key
//!   once the TTL runs out and the resource is free for the next claim
//!   (with a higher token). A holder that sees [`crate::Error::LeaseNotFound`]
//!   from a keepalive has lost every claim on that lease.
//! - A write whose outcome is unknown ([`crate::Error::OutcomeUnknown`]) is
//!   settled by [`Ownership::holder`]: if the key names this node with the
//!   lease it used, the claim went through.

use crate::error::Result;
use crate::etcd::{Compare, Etcd, KeyValue, OpResponse, Txn, TxnOp};

/// A claim held: the fencing token to carry with every act on the resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The revision of the write that made the claim: the fencing token,
    /// and the `expected_revision` of a later transfer or release.
    pub revision: i64,
}

/// The key is held by someone (possibly the caller, under another claim).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The holder's node id, as written.
    pub holder: String,
    /// The holder's fencing token (the key's `mod_revision`).
    pub revision: i64,
    /// The lease the claim lives on, if any.
    pub lease: Option<i64>,
}

/// A transfer or release refused: the key changed since `expected_revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    /// Who holds it now; `None` if nobody does (released, or the lease ran
    /// out).
    pub current: Option<Taken>,
}

/// A release done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The revision of the deletion.
    pub revision: i64,
}

/// Claims over an [`Etcd`] client; every call is one etcd round trip.
#[derive(Debug)]
pub struct Ownership<'a> {
    etcd: &'a mut Etcd,
}

impl<'a> Ownership<'a> {
    /// Ownership decisions through `etcd`.
    pub fn new(etcd: &'a mut Etcd) -> Self {
        Self { etcd }
    }

    /// Claims `key` for `node_id` if nobody holds it, attached to `lease`
    /// (a claim without a lease lives until released). SPEC HO-4: at most
    /// one active controller per resource, across nodes.
    pub fn claim(
        &mut self,
        key: &[u8],
        node_id: &str,
        lease: Option<i64>,
    ) -> Result<Result<Claim, Taken>> {
        let put = holder_put(key, node_id, lease);
        Ok(match self.write_if(Compare::absent(key), put, key)? {
            Ok(revision) => Ok(Claim { revision }),
            Err(stale) => Err(stale.current.unwrap_or_else(vanished)),
        })
    }

    /// Hands `key` to `new_holder` (on `lease`) if it is still at
    /// `expected_revision`; the new claim has a higher token.
    pub fn transfer(
        &mut self,
        key: &[u8],
        expected_revision: i64,
        new_holder: &str,
        lease: Option<i64>,
    ) -> Result<Result<Claim, Stale>> {
        let compare = Compare::mod_revision_is(key, expected_revision);
        let put = holder_put(key, new_holder, lease);
        Ok(self
            .write_if(compare, put, key)?
            .map(|revision| Claim { revision }))
    }

    /// Deletes `key` if it is still at `expected_revision` (a holder giving
    /// up its own claim, never someone else's).
    pub fn release(
        &mut self,
        key: &[u8],
        expected_revision: i64,
    ) -> Result<Result<Released, Stale>> {
        let compare = Compare::mod_revision_is(key, expected_revision);
        let delete = TxnOp::Delete { key: key.to_vec() };
        Ok(self
            .write_if(compare, delete, key)?
            .map(|revision| Released { revision }))
    }

    /// Who holds `key` now, if anyone.
    pub fn holder(&mut self, key: &[u8]) -> Result<Option<Taken>> {
        Ok(self.etcd.get(key)?.kv.map(taken))
    }

    /// Runs `write` if `compare` holds: the write's revision, or who holds
    /// `key` instead (read in the same transaction).
    fn write_if(
        &mut self,
        compare: Compare,
        write: TxnOp,
        key: &[u8],
    ) -> Result<Result<i64, Stale>> {
        let t = self.etcd.txn(&Txn {
            compare: vec![compare],
            then: vec![write],
            otherwise: vec![TxnOp::Get { key: key.to_vec() }],
        })?;
        if t.succeeded {
            return Ok(Ok(t.revision));
        }
        Ok(Err(Stale {
            current: current_of(&t.responses, key),
        }))
    }
}

fn holder_put(key: &[u8], holder: &str, lease: Option<i64>) -> TxnOp {
    TxnOp::Put {
        key: key.to_vec(),
        value: holder.as_bytes().to_vec(),
        lease,
    }
}

fn current_of(responses: &[OpResponse], key: &[u8]) -> Option<Taken> {
    responses.iter().find_map(|r| match r {
        OpResponse::Get { kvs } => kvs.iter().find(|kv| kv.key == key).cloned().map(taken),
        _ => None,
    })
}

fn taken(kv: KeyValue) -> Taken {
    Taken {
        holder: String::from_utf8_lossy(&kv.value).into_owned(),
        revision: kv.mod_revision,
        lease: kv.lease,
    }
}

/// A claim refused though the read in the same transaction found no key:
/// cannot happen (both ran at one revision); reported as held by nobody at
/// revision 0 rather than panicking on a server's word.
fn vanished() -> Taken {
    Taken {
        holder: String::new(),
        revision: 0,
        lease: None,
    }
}
