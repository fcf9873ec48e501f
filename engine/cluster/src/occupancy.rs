//! SPEC TS-8, TS-9, HO-4 across gateways: who occupies a resource, kept in
//! etcd so that every node decides against the same table.
//!
//! Layout under a deployment's prefix `P`:
//!
//! | key | value | lease |
//! |---|---|---|
//! | `P/occ/<resource>` | the node that admitted last | none: its mod revision serialises admissions |
//! | `P/occ/<resource>/s/<session>` | [`Occupant`] as JSON | the admitting node's |
//!
//! [`Occupancy::enter`] reads the resource's occupants and the guard key's
//! revision, applies the sharing rule (reads share; an exclusive session
//! shares with nobody), and writes its session key in a transaction that
//! holds only if the guard has not moved: two nodes admitting at once are
//! serialised by etcd, so a resource never has two exclusive occupants,
//! on any node, at any revision. The transaction's revision is the
//! session's **fencing token**: cluster-wide, strictly increasing, carried
//! by the grant it allowed. A session key lives on its node's lease: a
//! node that dies (or is cut off past the lease's TTL) loses its
//! occupants, and the resource becomes free for the others. A handover
//! across nodes is a [`Occupancy::leave`] by the source's node then an
//! [`Occupancy::enter`] by the target's: between them the table holds no
//! exclusive occupant, which every node sees (HO-4 T2–T3).
//!
//! A handover on one node ([`Occupancy::reserve`]) turns the source's entry
//! into a **reservation** instead: an exclusive occupant that, until its
//! `reserved_until` time, excludes every admission but its own node's
//! (that node's terminal serialises its handover and its target, T2–T4)
//! and the handover target's (`reserved_for`, whose session may be
//! admitted by another node: a handover across gateways). The first such
//! admission takes it over, in the same transaction; an expired one is
//! dropped by whoever admits next. So the target does not lose the
//! resource to another request that arrives between T2 and T4.

use serde::{Deserialize, Serialize};

use crate::etcd::{Compare, CompareOp, CompareTarget, Etcd, KeyValue, Txn, TxnOp, prefix_end};
use crate::{Error, Result};

/// Attempts of [`Occupancy::enter`] when another admission to the same
/// resource moved the guard between the read and the write.
pub const ENTER_ATTEMPTS: u32 = 8;

/// One session occupying a resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Occupant {
    /// The node that admitted it.
    pub node: String,
    /// Who holds the access (a Fay id or `human:…`).
    pub holder: String,
    /// Whether its mode excludes every other session (SPEC TS-9).
    pub exclusive: bool,
    /// Set on a reservation ([`Occupancy::reserve`]): the Unix ms time
    /// until which it keeps the resource for its node and its target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_until: Option<u64>,
    /// A reservation's handover target (a holder), admitted on any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_for: Option<String>,
}

impl Occupant {
    /// Whether it keeps `who`'s admission out at `now_ms`: a reservation
    /// excludes all but its node and its target, and only until its time.
    fn excludes(&self, who: &Occupant, now_ms: u64) -> bool {
        match self.reserved_until {
            Some(until) => {
                self.node != who.node
                    && self.reserved_for.as_deref() != Some(who.holder.as_str())
                    && now_ms < until
            }
            None => self.exclusive || who.exclusive,
        }
    }
}

/// Admitted: the session's key and its fencing token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entered {
    /// The revision of the admitting transaction: the fencing token.
    pub revision: i64,
}

/// Refused: the sharing rule does not let the session in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    /// The occupants that exclude it (session, occupant).
    pub occupants: Vec<(String, Occupant)>,
}

/// What the table needs of a store: etcd's transactions and deletes. An
/// [`Etcd`] client, or a model of one (the simulation's
/// [`crate::sim::MemKv`]).
pub trait Kv {
    /// As [`Etcd::txn`].
    fn txn(&mut self, txn: &Txn) -> Result<crate::etcd::TxnResponse>;
    /// As [`Etcd::delete`]: (keys deleted, the store's revision after).
    fn delete(&mut self, key: &[u8]) -> Result<(i64, i64)>;
}

impl Kv for Etcd {
    fn txn(&mut self, txn: &Txn) -> Result<crate::etcd::TxnResponse> {
        Etcd::txn(self, txn)
    }

    fn delete(&mut self, key: &[u8]) -> Result<(i64, i64)> {
        Etcd::delete(self, key)
    }
}

/// The cross-node occupancy table over an etcd client (see the module doc).
#[derive(Debug)]
pub struct Occupancy<'a, K: Kv + ?Sized = Etcd> {
    etcd: &'a mut K,
    prefix: &'a str,
}

impl<'a, K: Kv + ?Sized> Occupancy<'a, K> {
    /// The table under `prefix` (a deployment's namespace, e.g. `dtp/prod`).
    pub fn new(etcd: &'a mut K, prefix: &'a str) -> Self {
        Self { etcd, prefix }
    }

    fn guard(&self, resource: &str) -> Vec<u8> {
        format!("{}/occ/{}", self.prefix, escape(resource)).into_bytes()
    }

    fn sessions(&self, resource: &str) -> Vec<u8> {
        format!("{}/occ/{}/s/", self.prefix, escape(resource)).into_bytes()
    }

    /// The resource's occupants, and the guard's mod revision (0: never
    /// admitted), read at one revision.
    pub fn occupants(&mut self, resource: &str) -> Result<(i64, Vec<(String, Occupant)>)> {
        let guard = self.guard(resource);
        let sessions = self.sessions(resource);
        let t = self.etcd.txn(&Txn {
            compare: Vec::new(),
            then: vec![
                TxnOp::Get { key: guard.clone() },
                TxnOp::Range {
                    key: sessions.clone(),
                    range_end: prefix_end(&sessions),
                },
            ],
            otherwise: Vec::new(),
        })?;
        let mut guard_revision = 0;
        let mut occupants = Vec::new();
        for kv in t.responses.iter().flat_map(crate::etcd::OpResponse::kvs) {
            if kv.key == guard {
                guard_revision = kv.mod_revision;
            } else if let Some(session) = kv.key.strip_prefix(sessions.as_slice()) {
                occupants.push((unescape(session)?, occupant(kv)?));
            }
        }
        Ok((guard_revision, occupants))
    }

    /// Admits `session` to `resource` as `who`, its key on `lease` (SPEC
    /// TS-9 across nodes), at `now_ms` (Unix ms, for reservations): the
    /// fencing token, or the occupants that exclude it. The session's own
    /// earlier entry never excludes it (a grant again), nor does its node's
    /// reservation, which the admission takes over. [`Error::Contention`]
    /// when other admissions kept moving the guard for [`ENTER_ATTEMPTS`]
    /// tries.
    pub fn enter(
        &mut self,
        resource: &str,
        session: &str,
        who: &Occupant,
        lease: Option<i64>,
        now_ms: u64,
    ) -> Result<std::result::Result<Entered, Busy>> {
        let guard = self.guard(resource);
        let sessions = self.sessions(resource);
        let mut key = sessions.clone();
        key.extend_from_slice(escape(session).as_bytes());
        let value = serde_json::to_vec(who).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        for _ in 0..ENTER_ATTEMPTS {
            let (seen, occupants) = self.occupants(resource)?;
            let (excluding, others): (Vec<_>, Vec<_>) = occupants
                .into_iter()
                .filter(|(s, _)| s != session)
                .partition(|(_, o)| o.excludes(who, now_ms));
            if !excluding.is_empty() {
                return Ok(Err(Busy {
                    occupants: excluding,
                }));
            }
            let mut then = vec![
                TxnOp::Put {
                    key: guard.clone(),
                    value: who.node.as_bytes().to_vec(),
                    lease: None,
                },
                TxnOp::Put {
                    key: key.clone(),
                    value: value.clone(),
                    lease,
                },
            ];
            // Reservations taken over or expired go in the same write.
            for (s, _) in others.iter().filter(|(_, o)| o.reserved_until.is_some()) {
                let mut k = sessions.clone();
                k.extend_from_slice(escape(s).as_bytes());
                then.push(TxnOp::Delete { key: k });
            }
            let t = self.etcd.txn(&Txn {
                compare: vec![Compare::mod_revision_is(guard.clone(), seen)],
                then,
                otherwise: Vec::new(),
            })?;
            if t.succeeded {
                return Ok(Ok(Entered {
                    revision: t.revision,
                }));
            }
        }
        Err(Error::Contention {
            attempts: ENTER_ATTEMPTS,
        })
    }

    /// SPEC HO-4 T1 of a handover on `node`: turns `session`'s entry into
    /// a reservation for `node` and the target `to` until `until_ms` (Unix
    /// ms), on `lease`, in one write — the resource never looks free to
    /// anyone else in between. Nothing is written if the entry is gone
    /// (its lease ended). The store's revision after it.
    pub fn reserve(
        &mut self,
        resource: &str,
        session: &str,
        (node, to): (&str, Option<&str>),
        until_ms: u64,
        lease: Option<i64>,
    ) -> Result<i64> {
        let mut key = self.sessions(resource);
        key.extend_from_slice(escape(session).as_bytes());
        let reservation = Occupant {
            node: node.to_owned(),
            holder: String::new(),
            exclusive: true,
            reserved_until: Some(until_ms),
            reserved_for: to.map(str::to_owned),
        };
        let value =
            serde_json::to_vec(&reservation).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        let t = self.etcd.txn(&Txn {
            compare: vec![Compare::new(
                key.clone(),
                CompareOp::Greater,
                CompareTarget::CreateRevision(0),
            )],
            then: vec![TxnOp::Put { key, value, lease }],
            otherwise: Vec::new(),
        })?;
        Ok(t.revision)
    }

    /// Removes `session` from `resource` (idempotent): the store's
    /// revision after it.
    pub fn leave(&mut self, resource: &str, session: &str) -> Result<i64> {
        let mut key = self.sessions(resource);
        key.extend_from_slice(escape(session).as_bytes());
        Ok(self.etcd.delete(&key)?.1)
    }
}

/// A resource or session id as one key segment: `%`, `/` and bytes outside
/// printable ASCII percent-encoded.
fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_graphic() && b != b'%' && b != b'/' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn unescape(segment: &[u8]) -> Result<String> {
    let bad = || Error::protocol("etcd", "an occupancy key that is not an escaped id");
    let mut out = Vec::with_capacity(segment.len());
    let mut i = 0;
    while let Some(&b) = segment.get(i) {
        if b == b'%' {
            let hex = segment.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

fn occupant(kv: &KeyValue) -> Result<Occupant> {
    serde_json::from_slice(&kv.value)
        .map_err(|_| Error::protocol("etcd", "an occupancy value that is not an occupant"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_one_key_segment() {
        for id in ["term-1", "a/b", "50%", "ünï", "", "x y"] {
            let e = escape(id);
            assert!(!e.contains('/'), "{e}");
            assert_eq!(unescape(e.as_bytes()).unwrap(), id);
        }
        assert!(unescape(b"%4").is_err());
        assert!(unescape(b"%zz").is_err());
        assert!(unescape(b"%FF").is_err());
    }
}
