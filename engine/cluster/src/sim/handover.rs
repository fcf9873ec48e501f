//! Handovers in the simulation (SPEC HO-4 T1–T4 across gateways): the
//! source's node stops holding the resource and turns its entry into a
//! reservation for its target ([`Occupancy::reserve`]); later the target's
//! node — the same or another — enters the target's session, which takes
//! the reservation over. Between the two, every other admission must be
//! refused while the reservation is live by the admitting node's clock.

use super::{Occupant, Reach, Sim};
use crate::occupancy::Occupancy;

/// A handover between its reservation and its target's admission.
#[derive(Debug)]
pub(super) struct Pending {
    /// The resource handed over.
    pub(super) resource: usize,
    /// The source's node.
    pub(super) from: usize,
    /// The target's node.
    pub(super) to: usize,
    /// The target (a holder name no `ask` uses).
    pub(super) holder: String,
}

impl Sim {
    /// Node `i` hands one resource it holds to a new target on a random
    /// node: T1 stops its holding (the OS access revoked), then its entry
    /// becomes the reservation. A reservation that cannot be written (cut
    /// off) fails the handover and gives the source its resource back, as
    /// a failed revoke restores the source — unless the node fenced meanwhile.
    pub(super) fn handover(&mut self, i: usize) {
        let node = &self.nodes[i];
        let Some(lease) = node.lease.filter(|_| node.alive) else {
            return;
        };
        let Some((&r, _)) = node.held.iter().next() else {
            return;
        };
        let to = usize::try_from(self.draw(self.model.nodes as u64)).unwrap_or(0);
        self.next_session += 1;
        let holder = format!("t{}", self.next_session);
        let session = self.nodes[i].held.remove(&r).unwrap_or_default();
        let until = self.clock(i) + self.model.ttl_ms;
        let (up, down) = (self.delay(), self.delay());
        self.store.advance(self.now + up);
        let cut = self.nodes[i].cut;
        let mut reach = Reach {
            store: &mut self.store,
            cut,
        };
        let node_name = format!("n{i}");
        let reserved = Occupancy::new(&mut reach, "sim").reserve(
            &r.to_string(),
            &session,
            (&node_name, Some(&holder)),
            until,
            Some(lease),
        );
        self.now += up + down;
        self.store.advance(self.now);
        self.fence_if_stale(i);
        if reserved.is_ok() {
            self.outcome.handovers += 1;
            self.pending.push(Pending {
                resource: r,
                from: i,
                to,
                holder,
            });
        } else if self.nodes[i].lease == Some(lease) {
            self.nodes[i].held.insert(r, session);
        }
    }

    /// The target's node of the oldest pending handover admits the
    /// target (T4).
    pub(super) fn complete_handover(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let p = self.pending.remove(0);
        let node = &self.nodes[p.to];
        let Some(lease) = node.lease.filter(|_| node.alive) else {
            self.outcome.lapsed += 1;
            return;
        };
        if node.held.contains_key(&p.resource) {
            self.outcome.lapsed += 1;
            return;
        }
        self.next_session += 1;
        let session = format!("s{}", self.next_session);
        if self.admit(p.to, p.resource, &session, &p.holder, lease) {
            self.outcome.handed += 1;
        } else {
            self.outcome.lapsed += 1;
        }
    }

    /// Resource `r`'s reservations in the store, read past any cut.
    pub(super) fn reservations(&mut self, r: usize) -> Vec<Occupant> {
        let mut reach = Reach {
            store: &mut self.store,
            cut: false,
        };
        Occupancy::new(&mut reach, "sim")
            .occupants(&r.to_string())
            .map(|(_, all)| all.into_iter().map(|(_, o)| o))
            .into_iter()
            .flatten()
            .filter(|o| o.reserved_until.is_some())
            .collect()
    }

    /// `who` was admitted to `r` at the store's time `at`, its node's clock
    /// reading `clock`, over `reservations`: one it had no right to take
    /// is a violation if its own clock said it was live, and a reservation
    /// taken early (a lost handover) if only true time did — the reserving
    /// node's `until` less that node's skew.
    pub(super) fn taken(
        &mut self,
        who: &Occupant,
        r: usize,
        reservations: &[Occupant],
        clock: u64,
        at: u64,
    ) {
        for o in reservations {
            let until = o.reserved_until.unwrap_or(0);
            if o.node == who.node || o.reserved_for.as_deref() == Some(who.holder.as_str()) {
                continue;
            }
            let skew = o
                .node
                .strip_prefix('n')
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| self.nodes.get(n))
                .map_or(0, |n| n.skew);
            if clock < until {
                self.broken.get_or_insert(format!(
                    "t={at} ms: {} took resource {r}'s reservation for {:?} of {} (live until {until} ms by its clock, {clock} ms)",
                    who.node, o.reserved_for, o.node
                ));
            } else if at < until.saturating_add_signed(-skew) {
                self.outcome.taken_early += 1;
            }
        }
    }
}
