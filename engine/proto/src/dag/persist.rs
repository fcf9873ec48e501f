//! SPEC SES-2, SES-3, DAG-1 … DAG-3: a [`DagManager`] as bytes, with the
//! fragments waiting for a dependency (DAG-2), so that a restored session
//! still releases them when their dependency arrives (DAG-3).
//!
//! Layout, in order:
//!
//! | field | encoding |
//! |---|---|
//! | resolved count | u64 |
//! | watermark | flag, then u64 when 1 |
//! | remembered ids | count ≤ `resolved_window`; each u64, oldest first |
//! | released, not taken | count; each: id (u64), size (u64), item |
//! | waiting | count; each, in arrival order: id (u64), size (u64), relation count ≤ `max_relations`, each relation: target (u64) and a flag "still unresolved", then the item |
//!
//! Released plus waiting fragments are at most `max_pending`, their sizes
//! together at most `max_pending_bytes`. The graph's index (which waiting
//! fragments wait on which target) is rebuilt from the "still unresolved"
//! flags, in arrival order, as the manager built it. The arrival counter
//! and the per-fragment ranks are not written: the waiting fragments are
//! renumbered 0, 1, … in their order.
//!
//! Checked on restore (each a [`PersistError::Inconsistent`]): remembered
//! ids are distinct; a waiting fragment is not remembered, not waiting
//! twice and does not name itself; a released fragment is remembered or at
//! or below the watermark; an unresolved target is not remembered, a
//! resolved one is remembered or at or below the watermark, all of a
//! fragment's relations to one target agree, and a waiting fragment has at
//! least one unresolved relation; the waiting fragments form no cycle
//! (DAG-1).

use std::collections::{HashMap, HashSet, VecDeque};

use dtp_codec::FragmentId;

use super::{DagConfig, DagManager, Released, Waiting};
use crate::persist::{PersistError, Reader, Writer};

impl<T> DagManager<T> {
    /// SPEC SES-2, DAG-2: appends the DAG to `w`; `item` writes each held
    /// fragment (layout in the module docs).
    pub fn persist(&self, w: &mut Writer, mut item: impl FnMut(&T, &mut Writer)) {
        w.u64(self.resolved_count);
        w.flag(self.watermark.is_some());
        if let Some(mark) = self.watermark {
            w.u64(mark);
        }
        w.count(self.remembered_order.len());
        for id in &self.remembered_order {
            w.u64(*id);
        }
        w.count(self.released.len());
        for released in &self.released {
            w.u64(released.id);
            w.u64(u64::try_from(released.size).unwrap_or(u64::MAX));
            item(&released.item, w);
        }
        let mut waiting: Vec<(&FragmentId, &Waiting<T>)> = self.waiting.iter().collect();
        waiting.sort_unstable_by_key(|(_, waiting)| waiting.arrival);
        w.count(waiting.len());
        for (id, waiting) in waiting {
            w.u64(*id);
            w.u64(u64::try_from(waiting.size).unwrap_or(u64::MAX));
            w.count(waiting.targets.len());
            for target in waiting.targets.iter() {
                w.u64(*target);
                let unresolved = self
                    .dependents
                    .get(target)
                    .is_some_and(|dependents| dependents.contains(id));
                w.flag(unresolved);
            }
            item(&waiting.item, w);
        }
    }

    /// SPEC SES-3, DAG-1 … DAG-3: reads a DAG written by
    /// [`DagManager::persist`] under `config`, checking its ceilings and the
    /// invariants listed in the module docs. `item` reads one held fragment,
    /// given its id and size.
    pub fn restore_persisted(
        r: &mut Reader<'_>,
        config: DagConfig,
        mut item: impl FnMut(&mut Reader<'_>, FragmentId, usize) -> Result<T, PersistError>,
    ) -> Result<Self, PersistError> {
        let mut dag = Self::new(config);
        dag.resolved_count = r.u64("resolved count")?;
        if r.flag("watermark present")? {
            dag.watermark = Some(r.u64("watermark")?);
        }
        let n = r.count("remembered fragment ids", config.resolved_window, 8)?;
        dag.remembered_order.reserve(n);
        for _ in 0..n {
            let id = r.u64("remembered fragment id")?;
            if !dag.remembered.insert(id) {
                return Err(PersistError::Inconsistent("a remembered id appears twice"));
            }
            dag.remembered_order.push_back(id);
        }
        let mut held = Held::new(&config);
        let n = r.count("released fragments", config.max_pending, 16)?;
        held.add(n)?;
        for _ in 0..n {
            let id = r.u64("released fragment id")?;
            let size = held.size(r)?;
            if !dag.remembered.contains(&id) && dag.watermark.is_none_or(|w| id > w) {
                return Err(PersistError::Inconsistent(
                    "a released fragment is neither remembered nor below the watermark",
                ));
            }
            let item = item(r, id, size)?;
            dag.released_bytes += size;
            dag.released.push_back(Released { id, size, item });
        }
        let n = r.count("waiting fragments", config.max_pending, 20)?;
        held.add(n)?;
        let mut order = Vec::with_capacity(n);
        for arrival in 0..n {
            let id = r.u64("waiting fragment id")?;
            let size = held.size(r)?;
            if dag.remembered.contains(&id) || dag.waiting.contains_key(&id) {
                return Err(PersistError::Inconsistent(
                    "a waiting fragment is already resolved or waiting",
                ));
            }
            let (targets, missing) = dag.read_relations(r, id)?;
            let item = item(r, id, size)?;
            dag.waiting_bytes += size;
            let arrival = u64::try_from(arrival).unwrap_or(u64::MAX);
            let waiting = Waiting {
                item,
                size,
                targets,
                missing,
                arrival,
            };
            dag.waiting.insert(id, waiting);
            order.push(id);
        }
        dag.arrivals = u64::try_from(n).unwrap_or(u64::MAX);
        if has_cycle(&dag.dependents, &order) {
            return Err(PersistError::Inconsistent(
                "the waiting fragments form a dependency cycle",
            ));
        }
        Ok(dag)
    }

    /// Reads the relations of waiting fragment `id` and indexes its
    /// unresolved targets; returns the targets and the unresolved count.
    fn read_relations(
        &mut self,
        r: &mut Reader<'_>,
        id: FragmentId,
    ) -> Result<(Box<[FragmentId]>, usize), PersistError> {
        let n = r.count("relations", self.config.max_relations, 9)?;
        let mut targets = Vec::with_capacity(n);
        let mut flags: HashMap<FragmentId, bool> = HashMap::new();
        let mut missing = 0usize;
        for _ in 0..n {
            let target = r.u64("relation target")?;
            let unresolved = r.flag("relation unresolved")?;
            if target == id {
                return Err(PersistError::Inconsistent("a fragment names itself"));
            }
            if *flags.entry(target).or_insert(unresolved) != unresolved {
                return Err(PersistError::Inconsistent(
                    "relations to one target disagree on its resolution",
                ));
            }
            if unresolved {
                if self.remembered.contains(&target) {
                    return Err(PersistError::Inconsistent(
                        "a released target is marked unresolved",
                    ));
                }
                self.dependents.entry(target).or_default().push(id);
                missing += 1;
            } else if !self.remembered.contains(&target)
                && self.watermark.is_none_or(|w| target > w)
            {
                return Err(PersistError::Inconsistent(
                    "a target marked resolved was never released",
                ));
            }
            targets.push(target);
        }
        if missing == 0 {
            return Err(PersistError::Inconsistent(
                "a waiting fragment has no unresolved relation",
            ));
        }
        Ok((targets.into_boxed_slice(), missing))
    }
}

/// The held bound: count and bytes of released plus waiting fragments.
struct Held {
    count: usize,
    bytes: usize,
    max_count: usize,
    max_bytes: usize,
}

impl Held {
    fn new(config: &DagConfig) -> Self {
        Self {
            count: 0,
            bytes: 0,
            max_count: config.max_pending,
            max_bytes: config.max_pending_bytes,
        }
    }

    fn add(&mut self, n: usize) -> Result<(), PersistError> {
        self.count = self.count.saturating_add(n);
        if self.count > self.max_count {
            return Err(PersistError::OverCeiling {
                what: "fragments held by a DAG",
                found: u64::try_from(self.count).unwrap_or(u64::MAX),
                max: u64::try_from(self.max_count).unwrap_or(u64::MAX),
            });
        }
        Ok(())
    }

    fn size(&mut self, r: &mut Reader<'_>) -> Result<usize, PersistError> {
        let size = r.u64("held fragment size")?;
        let over = PersistError::OverCeiling {
            what: "bytes held by a DAG",
            found: size,
            max: u64::try_from(self.max_bytes).unwrap_or(u64::MAX),
        };
        let size = usize::try_from(size).map_err(|_| over.clone())?;
        self.bytes = self
            .bytes
            .checked_add(size)
            .filter(|total| *total <= self.max_bytes)
            .ok_or(over)?;
        Ok(size)
    }
}

/// SPEC DAG-1: whether the unresolved relations among `waiting` fragments
/// close a cycle (Kahn's algorithm over the waiting fragments: those whose
/// unresolved targets are all outside the waiting set go first).
fn has_cycle(dependents: &HashMap<FragmentId, Vec<FragmentId>>, waiting: &[FragmentId]) -> bool {
    let set: HashSet<FragmentId> = waiting.iter().copied().collect();
    let mut indegree: HashMap<FragmentId, usize> = waiting.iter().map(|id| (*id, 0)).collect();
    for (target, deps) in dependents {
        if set.contains(target) {
            for dep in deps {
                if let Some(d) = indegree.get_mut(dep) {
                    *d += 1;
                }
            }
        }
    }
    let mut ready: VecDeque<FragmentId> = waiting
        .iter()
        .copied()
        .filter(|id| indegree.get(id) == Some(&0))
        .collect();
    let mut seen = 0usize;
    while let Some(id) = ready.pop_front() {
        seen += 1;
        for dep in dependents.get(&id).into_iter().flatten() {
            if let Some(d) = indegree.get_mut(dep) {
                *d = d.saturating_sub(1);
                if *d == 0 {
                    ready.push_back(*dep);
                }
            }
        }
    }
    seen != waiting.len()
}
