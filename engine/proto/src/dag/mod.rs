//! The DAG Manager (SPEC DAG-1 … DAG-4): the per-agreement dependency graph of
//! fragments, which holds a fragment back until every fragment it relates to
//! has been delivered.
//!
//! # What it owns, what it never touches
//!
//! One [`DagManager`] per agreement owns: the fragments *waiting for
//! dependency resolution* (DAG-2), the queue of fragments *released* for
//! delivery but not yet taken by the caller, and a bounded memory of the ids
//! already released. It never touches the wire (the caller decodes the
//! [`DataFrame`](dtp_codec::DataFrame) and hands over its id, relations and
//! payload), never delivers to the application itself (the caller drains
//! [`DagManager::poll_released`]), and never looks inside the held fragment
//! `T` (a payload, a pool lease…): it only counts the byte size given with it.
//!
//! # Delivery order (DAG-3, DAG-4)
//!
//! All three relation types mean **target first**: a fragment is released
//! only after every fragment it names as a relation target has been
//! released.
//! - `derived_from`: the fragment was computed from the target; the
//!   application needs the target to interpret it.
//! - `annotates`: the fragment is metadata about the target; an annotation of
//!   something the application has not seen is meaningless.
//! - `supersedes`: the fragment replaces the target. It is still delivered
//!   after the target, so the application sees the replacement last and may
//!   then drop the target's state. The manager drops nothing itself: it
//!   cannot know whether the target was already consumed. If the application
//!   needs the relation kinds at delivery, it keeps them inside `T`.
//!
//! Release order is deterministic: a fragment whose targets are all resolved
//! when it arrives is released at once; a fragment whose last missing target
//! is released is released right after it, in a breadth-first cascade in
//! which the fragments unblocked by one release follow in their arrival
//! order. [`DagManager::poll_released`] returns them in that order.
//!
//! # Cost and memory
//!
//! - The common case, every target already resolved, costs one hash lookup
//!   per relation plus one insertion into the remembered-ids window: O(edges),
//!   no allocation beyond the window's own.
//! - The cycle search (DAG-1) runs only when some *waiting* fragment names the
//!   new fragment as a target (one lookup tells), and then only over waiting
//!   fragments, which are bounded by [`DagConfig::max_pending`].
//! - Held fragments (waiting + released-not-yet-taken) are bounded in count
//!   and bytes ([`DagConfig::max_pending`], [`DagConfig::max_pending_bytes`]);
//!   past the bound an insertion is refused with `DAG_PENDING_LIMIT` (4002)
//!   and the fragment handed back. A driver that drains the released queue
//!   after every insertion sees the bound apply to waiting fragments only.
//! - Relations per fragment are bounded by [`DagConfig::max_relations`]
//!   (the codec already bounds them at 255 on the wire).
//!
//! # Forgetting resolved ids: the window and the watermark
//!
//! The ids of released fragments are remembered in a window of the last
//! [`DagConfig::resolved_window`] releases. When an id leaves the window, the
//! **watermark** rises to the highest id that ever left it. The rule, which
//! assumes that a sender numbers fragments in increasing order (FORMAT.md
//! §5.3 only requires uniqueness; a sender that wants unbounded-lifetime
//! dependency checks must also number upwards):
//! - a relation whose target is neither waiting nor remembered but is at or
//!   below the watermark counts as **resolved** (released long ago and
//!   forgotten): the fragment is not held back for it;
//! - a new fragment whose id is at or below the watermark and not waiting is
//!   refused ([`DagError::BelowWatermark`]): it may be a duplicate the window
//!   can no longer detect, and accepting it would break the rule above.
//!
//! With increasing ids and a window wider than the largest reordering between
//! a fragment and its targets, neither case ever happens to a correct peer.
//! Outside that assumption the manager stays safe but not helpful: a fragment
//! already waiting on a target that later falls below the watermark keeps
//! waiting (the target would be refused on arrival) until
//! [`DagManager::abandon_waiting`] or the pending bound reports it.
//!
//! Hash maps use the standard library's keyed SipHash: fragment ids come from
//! the peer, so the tables must resist collision flooding. No output depends
//! on a hash map's iteration order.

use std::collections::{HashMap, HashSet, VecDeque};

use dtp_codec::{ErrorCode, FragmentId, Relation};

mod persist;
#[cfg(test)]
mod tests;

/// The DAG Manager's ceilings (SPEC DAG-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DagConfig {
    /// Most fragments held at once: waiting for a dependency plus released
    /// but not yet taken by [`DagManager::poll_released`] (default 1024).
    pub max_pending: usize,
    /// Most bytes (the sizes given on insert) held at once, counted like
    /// `max_pending` (default 16 MiB).
    pub max_pending_bytes: usize,
    /// Most relations on one fragment (default 255, the wire's hard ceiling).
    pub max_relations: usize,
    /// How many released fragment ids are remembered exactly for dependency
    /// and duplicate checks (default 4096); older ones fall below the
    /// watermark (see the module docs).
    pub resolved_window: usize,
}

impl Default for DagConfig {
    fn default() -> Self {
        Self {
            max_pending: 1024,
            max_pending_bytes: 16 * 1024 * 1024,
            max_relations: 255,
            resolved_window: 4096,
        }
    }
}

/// Why a fragment was refused. The DAG is unchanged by a refused insertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// SPEC DAG-1: the fragment would close a cycle (`target == fragment` is
    /// a self-reference).
    #[error(
        "{code} fragment {fragment}: its relation to fragment {target} would close a \
         dependency cycle; the sender must relate fragments only to earlier ones",
        code = ErrorCode::DAG_CYCLE_DETECTED
    )]
    CycleDetected {
        /// The refused fragment.
        fragment: FragmentId,
        /// The relation target from which the cycle leads back.
        target: FragmentId,
    },
    /// SPEC DAG-2: holding the fragment would pass the configured bound.
    #[error(
        "{code} fragment {fragment} ({size} bytes) refused: {pending} fragments \
         ({pending_bytes} bytes) already held, the ceiling is {max_pending} fragments \
         ({max_pending_bytes} bytes); deliver released fragments or send missing dependencies",
        code = ErrorCode::DAG_PENDING_LIMIT
    )]
    PendingLimit {
        /// The refused fragment.
        fragment: FragmentId,
        /// Its size in bytes.
        size: usize,
        /// Fragments held when it arrived.
        pending: usize,
        /// Bytes held when it arrived.
        pending_bytes: usize,
        /// The configured count ceiling.
        max_pending: usize,
        /// The configured byte ceiling.
        max_pending_bytes: usize,
    },
    /// The fragment id was already used in this agreement (it is waiting or
    /// was released).
    #[error(
        "{code} fragment id {fragment} was already used in this agreement; fragment ids \
         must be unique",
        code = ErrorCode::INVALID_VALUE
    )]
    Duplicate {
        /// The refused fragment.
        fragment: FragmentId,
    },
    /// The fragment id is at or below the watermark of forgotten ids: it may
    /// be a duplicate the manager can no longer detect.
    #[error(
        "{code} fragment id {fragment} is not above the watermark {watermark} of forgotten \
         ids; fragment ids must increase (or widen resolved_window)",
        code = ErrorCode::INVALID_VALUE
    )]
    BelowWatermark {
        /// The refused fragment.
        fragment: FragmentId,
        /// The watermark.
        watermark: FragmentId,
    },
    /// The fragment has more relations than configured.
    #[error(
        "{code} fragment {fragment} has {count} relations, the ceiling is {max}",
        code = ErrorCode::LIMIT_EXCEEDED
    )]
    TooManyRelations {
        /// The refused fragment.
        fragment: FragmentId,
        /// Its relation count.
        count: usize,
        /// The ceiling.
        max: usize,
    },
}

impl DagError {
    /// The wire code a receiver reports for this error (4001, 4002, or a
    /// codec code for malformed ids).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::CycleDetected { .. } => ErrorCode::DAG_CYCLE_DETECTED,
            Self::PendingLimit { .. } => ErrorCode::DAG_PENDING_LIMIT,
            Self::Duplicate { .. } | Self::BelowWatermark { .. } => ErrorCode::INVALID_VALUE,
            Self::TooManyRelations { .. } => ErrorCode::LIMIT_EXCEEDED,
        }
    }
}

/// A refused insertion: the error, and the fragment handed back to the
/// caller (a pool lease is not lost).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Refused<T> {
    /// Why it was refused.
    pub error: DagError,
    /// The fragment, untouched.
    pub item: T,
}

impl<T> Refused<T> {
    /// The wire code (see [`DagError::code`]).
    pub fn code(&self) -> ErrorCode {
        self.error.code()
    }
}

/// What an accepted insertion did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insertion {
    /// SPEC DAG-3: every target was resolved; the fragment and `count - 1`
    /// waiting dependents it unblocked were queued for
    /// [`DagManager::poll_released`].
    Released {
        /// Fragments released by this insertion (at least 1).
        count: usize,
    },
    /// SPEC DAG-2: some targets have not been released; the fragment waits.
    Waiting {
        /// Relations whose target is not resolved yet.
        missing: usize,
    },
}

/// SPEC DAG-3: a fragment whose dependencies are all resolved, ready to be
/// delivered to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Released<T> {
    /// The fragment's id.
    pub id: FragmentId,
    /// The byte size given on insert.
    pub size: usize,
    /// The fragment.
    pub item: T,
}

/// A fragment waiting for dependency resolution (DAG-2).
#[derive(Debug)]
struct Waiting<T> {
    item: T,
    size: usize,
    /// Every relation target, for the cycle search.
    targets: Box<[FragmentId]>,
    /// Relations (edges, not distinct targets) whose target is unresolved.
    missing: usize,
    /// Arrival rank, for [`DagManager::abandon_waiting`].
    arrival: u64,
}

/// SPEC DAG-1 … DAG-4: the dependency graph of one agreement's fragments.
///
/// Drive it with [`DagManager::insert`] for every arriving fragment, then
/// drain [`DagManager::poll_released`] and deliver what it returns, in that
/// order.
#[derive(Debug)]
pub struct DagManager<T> {
    config: DagConfig,
    waiting: HashMap<FragmentId, Waiting<T>>,
    /// Target → waiting fragments that name it, once per relation, in
    /// arrival order. Holds only unresolved targets.
    dependents: HashMap<FragmentId, Vec<FragmentId>>,
    waiting_bytes: usize,
    released: VecDeque<Released<T>>,
    released_bytes: usize,
    remembered: HashSet<FragmentId>,
    remembered_order: VecDeque<FragmentId>,
    watermark: Option<FragmentId>,
    resolved_count: u64,
    arrivals: u64,
}

impl<T> DagManager<T> {
    /// An empty DAG for a new agreement.
    pub fn new(config: DagConfig) -> Self {
        Self {
            config,
            waiting: HashMap::new(),
            dependents: HashMap::new(),
            waiting_bytes: 0,
            released: VecDeque::new(),
            released_bytes: 0,
            remembered: HashSet::new(),
            remembered_order: VecDeque::new(),
            watermark: None,
            resolved_count: 0,
            arrivals: 0,
        }
    }

    /// SPEC DAG-1, DAG-2, DAG-3: adds fragment `id` of `size` bytes, which
    /// depends on every target of `relations`.
    ///
    /// In order: a used id is refused ([`DagError::Duplicate`],
    /// [`DagError::BelowWatermark`]), then too many relations, then a cycle
    /// (`DAG_CYCLE_DETECTED`, also for a self-reference), then a fragment
    /// past the held bound (`DAG_PENDING_LIMIT`). A refusal leaves the DAG
    /// unchanged and hands `item` back. Otherwise the fragment is released
    /// (with every waiting dependent it unblocks, transitively) or waits.
    pub fn insert(
        &mut self,
        id: FragmentId,
        relations: &[Relation],
        size: usize,
        item: T,
    ) -> Result<Insertion, Refused<T>> {
        let missing = match self.check(id, relations, size) {
            Ok(missing) => missing,
            Err(error) => return Err(Refused { error, item }),
        };
        if missing == 0 {
            let count = self.release(Released { id, size, item });
            return Ok(Insertion::Released { count });
        }
        for relation in relations {
            if !self.is_resolved(relation.target) {
                self.dependents.entry(relation.target).or_default().push(id);
            }
        }
        let targets = relations.iter().map(|r| r.target).collect();
        self.waiting.insert(
            id,
            Waiting {
                item,
                size,
                targets,
                missing,
                arrival: self.arrivals,
            },
        );
        self.arrivals = self.arrivals.wrapping_add(1);
        self.waiting_bytes = self.waiting_bytes.saturating_add(size);
        Ok(Insertion::Waiting { missing })
    }

    /// SPEC DAG-3: the next released fragment, in release order (see the
    /// module docs), for the caller to deliver to the application.
    pub fn poll_released(&mut self) -> Option<Released<T>> {
        let released = self.released.pop_front()?;
        self.released_bytes = self.released_bytes.saturating_sub(released.size);
        Some(released)
    }

    /// Whether `id` counts as resolved: released and remembered, or at or
    /// below the watermark of forgotten ids and not waiting.
    pub fn is_resolved(&self, id: FragmentId) -> bool {
        if self.remembered.contains(&id) {
            return true;
        }
        if !self.waiting.is_empty() && self.waiting.contains_key(&id) {
            return false;
        }
        self.watermark.is_some_and(|w| id <= w)
    }

    /// Whether `id` is waiting for dependency resolution.
    pub fn is_waiting(&self, id: FragmentId) -> bool {
        self.waiting.contains_key(&id)
    }

    /// Fragments waiting for dependency resolution (DAG-2).
    pub fn waiting_count(&self) -> usize {
        self.waiting.len()
    }

    /// Bytes of the fragments waiting for dependency resolution.
    pub fn waiting_bytes(&self) -> usize {
        self.waiting_bytes
    }

    /// Fragments released but not yet taken by [`DagManager::poll_released`].
    pub fn released_count(&self) -> usize {
        self.released.len()
    }

    /// Bytes of the fragments released but not yet taken.
    pub fn released_bytes(&self) -> usize {
        self.released_bytes
    }

    /// Fragments held in all (waiting + released-not-taken): what
    /// [`DagConfig::max_pending`] bounds.
    pub fn pending_count(&self) -> usize {
        self.waiting.len().saturating_add(self.released.len())
    }

    /// Bytes held in all: what [`DagConfig::max_pending_bytes`] bounds.
    pub fn pending_bytes(&self) -> usize {
        self.waiting_bytes.saturating_add(self.released_bytes)
    }

    /// Fragments resolved (released) since the agreement began.
    pub fn resolved_count(&self) -> u64 {
        self.resolved_count
    }

    /// Released ids currently remembered exactly (at most
    /// [`DagConfig::resolved_window`]).
    pub fn remembered_count(&self) -> usize {
        self.remembered.len()
    }

    /// The highest id that left the remembered window, if any (see the
    /// module docs for what it means).
    pub fn watermark(&self) -> Option<FragmentId> {
        self.watermark
    }

    /// The configuration.
    pub fn config(&self) -> &DagConfig {
        &self.config
    }

    /// Removes every waiting fragment and returns them in arrival order, e.g.
    /// when the agreement ends with dependencies that never arrived (their
    /// leases go back to the caller). Released fragments stay queued.
    pub fn abandon_waiting(&mut self) -> Vec<(FragmentId, T)> {
        let mut all: Vec<(u64, FragmentId, T)> = self
            .waiting
            .drain()
            .map(|(id, w)| (w.arrival, id, w.item))
            .collect();
        all.sort_unstable_by_key(|(arrival, _, _)| *arrival);
        self.dependents.clear();
        self.waiting_bytes = 0;
        all.into_iter().map(|(_, id, item)| (id, item)).collect()
    }

    /// Validates an insertion without changing anything; returns the number
    /// of relations whose target is unresolved.
    fn check(
        &self,
        id: FragmentId,
        relations: &[Relation],
        size: usize,
    ) -> Result<usize, DagError> {
        if self.remembered.contains(&id) || self.waiting.contains_key(&id) {
            return Err(DagError::Duplicate { fragment: id });
        }
        if let Some(watermark) = self.watermark.filter(|&w| id <= w) {
            return Err(DagError::BelowWatermark {
                fragment: id,
                watermark,
            });
        }
        if relations.len() > self.config.max_relations {
            return Err(DagError::TooManyRelations {
                fragment: id,
                count: relations.len(),
                max: self.config.max_relations,
            });
        }
        let mut missing = 0usize;
        for relation in relations {
            if relation.target == id {
                return Err(DagError::CycleDetected {
                    fragment: id,
                    target: id,
                });
            }
            if !self.is_resolved(relation.target) {
                missing += 1;
            }
        }
        // A cycle through the new fragment must leave it by an unresolved
        // target and come back through a waiting fragment that names it: a
        // resolved fragment only reaches resolved ones.
        if missing > 0
            && self.dependents.contains_key(&id)
            && let Some(target) = self.find_cycle(id, relations)
        {
            return Err(DagError::CycleDetected {
                fragment: id,
                target,
            });
        }
        let pending = self.pending_count();
        let pending_bytes = self.pending_bytes();
        if pending >= self.config.max_pending
            || size > self.config.max_pending_bytes.saturating_sub(pending_bytes)
        {
            return Err(DagError::PendingLimit {
                fragment: id,
                size,
                pending,
                pending_bytes,
                max_pending: self.config.max_pending,
                max_pending_bytes: self.config.max_pending_bytes,
            });
        }
        Ok(missing)
    }

    /// SPEC DAG-1: a depth-first search from the new fragment's waiting
    /// targets through waiting fragments only (unarrived and resolved ones
    /// have no path back). Returns the relation target from which `id` is
    /// reachable again. Visits each waiting fragment at most once.
    fn find_cycle(&self, id: FragmentId, relations: &[Relation]) -> Option<FragmentId> {
        let mut visited: HashSet<FragmentId> = HashSet::new();
        let mut stack: Vec<(FragmentId, FragmentId)> = relations
            .iter()
            .filter(|r| self.waiting.contains_key(&r.target))
            .map(|r| (r.target, r.target))
            .collect();
        while let Some((root, node)) = stack.pop() {
            if !visited.insert(node) {
                continue;
            }
            let Some(waiting) = self.waiting.get(&node) else {
                continue;
            };
            for &target in waiting.targets.iter() {
                if target == id {
                    return Some(root);
                }
                if !visited.contains(&target) && self.waiting.contains_key(&target) {
                    stack.push((root, target));
                }
            }
        }
        None
    }

    /// SPEC DAG-3: queues `first` for delivery and, breadth-first, every
    /// waiting fragment whose last missing target it (or a fragment it
    /// unblocked) was. Returns how many fragments were released.
    fn release(&mut self, first: Released<T>) -> usize {
        let start = self.released.len();
        self.push_released(first);
        let mut next = start;
        while let Some(id) = self.released.get(next).map(|r| r.id) {
            next += 1;
            if self.dependents.is_empty() {
                // The common case: nobody waits, skip the hash.
                continue;
            }
            let Some(dependents) = self.dependents.remove(&id) else {
                continue;
            };
            for dependent in dependents {
                let unblocked = match self.waiting.get_mut(&dependent) {
                    Some(w) => {
                        w.missing = w.missing.saturating_sub(1);
                        w.missing == 0
                    }
                    None => false,
                };
                if !unblocked {
                    continue;
                }
                if let Some(w) = self.waiting.remove(&dependent) {
                    self.waiting_bytes = self.waiting_bytes.saturating_sub(w.size);
                    self.push_released(Released {
                        id: dependent,
                        size: w.size,
                        item: w.item,
                    });
                }
            }
        }
        self.released.len() - start
    }

    /// Marks `released` resolved (remembering its id) and queues it.
    fn push_released(&mut self, released: Released<T>) {
        self.remember(released.id);
        self.resolved_count = self.resolved_count.saturating_add(1);
        self.released_bytes = self.released_bytes.saturating_add(released.size);
        self.released.push_back(released);
    }

    /// Adds `id` to the window of remembered ids; an id leaving the window
    /// raises the watermark.
    fn remember(&mut self, id: FragmentId) {
        self.remembered.insert(id);
        self.remembered_order.push_back(id);
        while self.remembered_order.len() > self.config.resolved_window {
            let Some(old) = self.remembered_order.pop_front() else {
                break;
            };
            self.remembered.remove(&old);
            self.watermark = Some(self.watermark.map_or(old, |w| w.max(old)));
        }
    }
}
