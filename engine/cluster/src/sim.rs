//! A deterministic simulation of several gateways sharing resources
//! through a linearizable store with leases (SPEC HO-4 across gateways;
//! DESIGN §3): the real [`Occupancy`] code over [`MemKv`], a model of etcd's
//! keys, revisions, transactions and leases, with seeded randomness and
//! virtual time — no threads, no sockets, no clock.
//!
//! Each step moves the clock and applies one random input: a node asks for
//! a resource (enter the table, then hold it), lets one go (leave, then
//! stop holding), refreshes its lease, is cut off from the store or joined
//! again, crashes (its memory gone, its lease left to expire) or restarts.
//! A node follows the rule its lease keeper follows in the gateway: with
//! no successful refresh for two thirds of the TTL it gives up everything
//! it holds (self-fencing). Messages to and from the store take up to
//! [`Model::max_delay_ms`] each way, so a node learns of a refresh some
//! time after the store counted it.
//!
//! After every step, [`Sim::check`] asserts the invariants: no resource is
//! held by two live nodes at once (what a node believes it controls), and
//! the store never lists two exclusive occupants of one resource.

use std::collections::{BTreeMap, HashMap};

use crate::etcd::{CompareOp, CompareTarget, KeyValue, OpResponse, Txn, TxnOp, TxnResponse};
use crate::occupancy::{Kv, Occupancy, Occupant};
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
struct Reach<'a> {
    store: &'a mut MemKv,
    cut: bool,
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

/// The model's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// Gateways.
    pub nodes: usize,
    /// Resources they share.
    pub resources: usize,
    /// Each node's lease TTL, ms.
    pub ttl_ms: u64,
    /// The longest one-way delay between a node and the store, ms (below a
    /// third of the TTL, as the gateway's timeouts are).
    pub max_delay_ms: u64,
    /// A node gives everything up after this long without learning of a
    /// refresh, ms: two thirds of the TTL, as the gateway's keeper.
    pub fence_after_ms: u64,
}

impl Default for Model {
    fn default() -> Self {
        Self {
            nodes: 3,
            resources: 3,
            ttl_ms: 3_000,
            max_delay_ms: 300,
            fence_after_ms: 2_000,
        }
    }
}

#[derive(Debug, Default)]
struct Node {
    alive: bool,
    cut: bool,
    lease: Option<i64>,
    /// When it last learned of a successful refresh (or grant).
    last_ok: u64,
    /// When its keeper last tried to refresh.
    last_try: u64,
    /// Resource → the session it holds there.
    held: BTreeMap<usize, String>,
}

/// What a run found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Steps run.
    pub steps: u64,
    /// Grants made (entered and held).
    pub grants: u64,
    /// Grants refused because another node held the resource.
    pub busy: u64,
    /// Times a node fenced itself.
    pub fences: u64,
    /// Crashes.
    pub crashes: u64,
    /// The first invariant broken, if any.
    pub violation: Option<String>,
}

/// One seeded run (see the module doc).
#[derive(Debug)]
pub struct Sim {
    model: Model,
    store: MemKv,
    nodes: Vec<Node>,
    now: u64,
    rng: u64,
    next_session: u64,
    outcome: Outcome,
}

impl Sim {
    /// A run of `model` from `seed`.
    pub fn new(model: Model, seed: u64) -> Self {
        let mut sim = Self {
            model,
            store: MemKv::default(),
            nodes: (0..model.nodes).map(|_| Node::default()).collect(),
            now: 0,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            next_session: 0,
            outcome: Outcome::default(),
        };
        for i in 0..model.nodes {
            sim.start(i);
        }
        sim
    }

    fn draw(&mut self, below: u64) -> u64 {
        // xorshift64*: deterministic, good enough for picking inputs.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % below.max(1)
    }

    fn start(&mut self, i: usize) {
        let lease = self.store.lease_grant(self.model.ttl_ms);
        self.nodes[i] = Node {
            alive: true,
            cut: false,
            lease: Some(lease),
            last_ok: self.now,
            last_try: self.now,
            held: BTreeMap::new(),
        };
    }

    /// Runs `steps` steps, checking after each; stops at the first
    /// violation.
    pub fn run(mut self, steps: u64) -> Outcome {
        for _ in 0..steps {
            self.step();
            self.outcome.steps += 1;
            if let Err(v) = self.check() {
                self.outcome.violation = Some(v);
                break;
            }
        }
        self.outcome
    }

    fn step(&mut self) {
        self.now += self.draw(self.model.ttl_ms / 6) + 1;
        self.store.advance(self.now);
        let i = usize::try_from(self.draw(self.model.nodes as u64)).unwrap_or(0);
        self.fence_if_stale(i);
        match self.draw(100) {
            0..=49 => self.ask(i),
            50..=79 => self.release(i),
            80..=91 => {
                if self.nodes[i].alive {
                    self.nodes[i].cut = !self.nodes[i].cut;
                }
            }
            92..=95 => {
                if self.nodes[i].alive {
                    self.nodes[i].alive = false;
                    self.nodes[i].held.clear();
                    self.outcome.crashes += 1;
                }
            }
            _ => {
                if !self.nodes[i].alive {
                    self.start(i);
                }
            }
        }
        // Every node's keeper refreshes every third of the TTL and applies
        // its rule, on its own clock.
        for n in 0..self.nodes.len() {
            if self.now >= self.nodes[n].last_try + self.model.ttl_ms / 3 {
                self.nodes[n].last_try = self.now;
                self.refresh(n);
            }
            self.fence_if_stale(n);
        }
    }

    /// The keeper's rule: no refresh learned of for 2/3 of the TTL → give
    /// everything up.
    fn fence_if_stale(&mut self, i: usize) {
        let after = self.model.fence_after_ms;
        let node = &mut self.nodes[i];
        if node.alive && node.lease.is_some() && self.now >= node.last_ok + after {
            node.lease = None;
            node.held.clear();
            self.outcome.fences += 1;
        }
    }

    fn refresh(&mut self, i: usize) {
        if !self.nodes[i].alive || self.nodes[i].cut {
            return;
        }
        // The request reaches the store after a delay (the store counts from
        // then), the answer reaches the node after another.
        let (up, down) = (
            self.draw(self.model.max_delay_ms + 1),
            self.draw(self.model.max_delay_ms + 1),
        );
        self.store.advance(self.now + up);
        let ttl = self.model.ttl_ms;
        let ok = match self.nodes[i].lease {
            Some(id) => self.store.lease_keepalive(id, ttl).is_ok(),
            None => {
                let id = self.store.lease_grant(ttl);
                self.nodes[i].lease = Some(id);
                true
            }
        };
        self.now += up + down;
        self.store.advance(self.now);
        if ok {
            // Learned only now; a refresh whose answer comes after the node
            // fenced starts it afresh.
            self.nodes[i].last_ok = self.now.saturating_sub(down).max(self.nodes[i].last_ok);
            self.fence_if_stale(i);
        } else {
            let node = &mut self.nodes[i];
            node.lease = None;
            node.held.clear();
            self.outcome.fences += 1;
        }
    }

    fn ask(&mut self, i: usize) {
        let node = &self.nodes[i];
        let Some(lease) = node.lease.filter(|_| node.alive) else {
            return;
        };
        let r = usize::try_from(self.draw(self.model.resources as u64)).unwrap_or(0);
        if self.nodes[i].held.contains_key(&r) {
            return;
        }
        self.next_session += 1;
        let session = format!("s{}", self.next_session);
        let who = Occupant {
            node: format!("n{i}"),
            holder: "fay".into(),
            exclusive: true,
            reserved_until: None,
            reserved_for: None,
        };
        let (up, down) = (
            self.draw(self.model.max_delay_ms + 1),
            self.draw(self.model.max_delay_ms + 1),
        );
        self.store.advance(self.now + up);
        let cut = self.nodes[i].cut;
        let mut reach = Reach {
            store: &mut self.store,
            cut,
        };
        let entered = Occupancy::new(&mut reach, "sim").enter(
            &r.to_string(),
            &session,
            &who,
            Some(lease),
            self.now,
        );
        self.now += up + down;
        self.store.advance(self.now);
        // The answer arrives now: a node that fenced meanwhile does not take
        // it up (its keeper gave the lease up; the entry dies with it).
        self.fence_if_stale(i);
        match entered {
            Ok(Ok(_)) if self.nodes[i].lease == Some(lease) => {
                self.nodes[i].held.insert(r, session);
                self.outcome.grants += 1;
            }
            Ok(Err(_)) => self.outcome.busy += 1,
            _ => {}
        }
    }

    fn release(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if !node.alive {
            return;
        }
        let Some((&r, _)) = node.held.iter().next() else {
            return;
        };
        // It stops holding first (the OS revoke), then leaves the table.
        let session = node.held.remove(&r).unwrap_or_default();
        let cut = node.cut;
        let mut reach = Reach {
            store: &mut self.store,
            cut,
        };
        let _ = Occupancy::new(&mut reach, "sim").leave(&r.to_string(), &session);
    }

    /// The invariants (see the module doc).
    pub fn check(&mut self) -> std::result::Result<(), String> {
        for r in 0..self.model.resources {
            let holders: Vec<usize> = (0..self.nodes.len())
                .filter(|&n| self.nodes[n].alive && self.nodes[n].held.contains_key(&r))
                .collect();
            if holders.len() > 1 {
                return Err(format!(
                    "t={} ms: resource {r} held by nodes {holders:?} at once",
                    self.now
                ));
            }
            let mut store = Reach {
                store: &mut self.store,
                cut: false,
            };
            let (_, occupants) = Occupancy::new(&mut store, "sim")
                .occupants(&r.to_string())
                .map_err(|e| e.to_string())?;
            if occupants.iter().filter(|(_, o)| o.exclusive).count() > 1 {
                return Err(format!(
                    "t={} ms: the store lists {} exclusive occupants of resource {r}",
                    self.now,
                    occupants.len()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_runs_the_same_way() {
        let a = Sim::new(Model::default(), 7).run(500);
        let b = Sim::new(Model::default(), 7).run(500);
        assert_eq!(a, b);
        assert!(a.grants > 0 && a.busy > 0, "{a:?}");
    }

    /// The rule matters, and the check can fail: a keeper that waits
    /// longer than the lease before giving up lets a cut-off node hold a
    /// resource the store already gave another.
    #[test]
    fn a_keeper_that_waits_past_its_lease_is_caught() {
        let late = Model {
            fence_after_ms: 4_000,
            ..Model::default()
        };
        let broken = (0..300).find_map(|seed| Sim::new(late, seed).run(3_000).violation);
        let why = broken.expect("no seed broke the invariant with a late keeper");
        assert!(why.contains("held by nodes"), "{why}");
    }
}
