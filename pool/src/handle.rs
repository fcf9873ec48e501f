//! Generational handles and the slot tables behind them (SPEC MEM-4).
//!
//! Owns the rules every handle of the crate follows: a handle is
//! `(region, slot, generation)`; generation 0 is never valid; a slot's first
//! issue has generation 1 and every reuse adds 1; a slot whose generation
//! reached the table's maximum is retired when it is freed and never issued
//! again, so no wrap-around revives an old handle. Handles name the region
//! that issued them, and a region refuses handles of another region.
//!
//! This module never touches buffer memory; it only maps handles to entries.

use std::sync::atomic::{AtomicU32, Ordering as StdOrdering};

use crate::error::{HandleKind, PoolError, Resource};

/// SPEC MEM-4: the identity of one execution region (one core's pool).
///
/// Assigned from a process-wide counter when the region is created, so two
/// regions never share an id and a handle cannot be replayed into another
/// region of the same process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(u32);

impl RegionId {
    /// The raw id.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Takes the next unused id. The counter is a plain std atomic even under
    /// loom: it only hands out unique numbers and is not part of any protocol
    /// between threads that the model checker must explore.
    pub(crate) fn next() -> Result<Self, PoolError> {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        NEXT.fetch_update(StdOrdering::Relaxed, StdOrdering::Relaxed, |v| {
            v.checked_add(1)
        })
        .map(RegionId)
        .map_err(|_| PoolError::Limit {
            resource: Resource::RegionIds,
            requested: u64::from(u32::MAX) + 1,
            limit: u64::from(u32::MAX),
        })
    }
}

impl core::fmt::Display for RegionId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

macro_rules! define_handle {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name {
            region: RegionId,
            slot: u32,
            generation: u32,
        }

        impl $name {
            /// Rebuilds a handle from its parts (for example after carrying it
            /// through a 64-bit user-data field). The region validates it on use.
            pub const fn from_parts(region: RegionId, slot: u32, generation: u32) -> Self {
                Self { region, slot, generation }
            }

            /// The region that issued this handle.
            pub const fn region(self) -> RegionId {
                self.region
            }

            /// The slot in the issuing region's table.
            pub const fn slot(self) -> u32 {
                self.slot
            }

            /// The generation: 0 is never valid, the first issue is 1.
            pub const fn generation(self) -> u32 {
                self.generation
            }

            /// `slot` in the high and `generation` in the low 32 bits, for a
            /// 64-bit user-data field (io_uring's `user_data`). The region id
            /// is not included: the receiving region adds its own.
            pub const fn to_u64(self) -> u64 {
                ((self.slot as u64) << 32) | self.generation as u64
            }

            pub(crate) const KIND: HandleKind = $kind;

            pub(crate) const fn key(self) -> Key {
                Key { slot: self.slot, generation: self.generation }
            }
        }
    };
}

define_handle!(
    /// SPEC MEM-4: `BufferHandle = (slot: u32, generation: u32)`, tagged with the
    /// issuing region. Not a pointer and not an offset.
    BufferHandle,
    HandleKind::Buffer
);
define_handle!(
    /// SPEC MEM-6: a read or exclusive-write lease on a whole buffer.
    LeaseHandle,
    HandleKind::Lease
);
define_handle!(
    /// SPEC MEM-7: the generation-tagged ticket of one admitted request.
    Ticket,
    HandleKind::Ticket
);
define_handle!(
    /// SPEC MEM-7: a stream context (at most one call in flight).
    ContextHandle,
    HandleKind::Context
);
define_handle!(
    /// SPEC MEM-3/MEM-8: a registered module (a codec, a backend); the
    /// generation changes on every swap.
    ModuleHandle,
    HandleKind::Module
);

/// A handle without its region: the key of a slot table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
}

/// Why a slot table could not issue a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IssueError {
    /// Every usable slot is live now; one will come back.
    Full,
    /// Every slot is retired; none will ever come back.
    Exhausted,
    /// The table has no slots at all.
    NoCapacity,
}

impl IssueError {
    pub(crate) fn into_pool_error(
        self,
        kind: HandleKind,
        resource: Resource,
        requested: u64,
    ) -> PoolError {
        match self {
            Self::Full => PoolError::WouldBlock { resource },
            Self::Exhausted => PoolError::GenerationExhausted { kind },
            Self::NoCapacity => PoolError::Limit {
                resource,
                requested,
                limit: 0,
            },
        }
    }
}

#[derive(Debug)]
struct Entry<T> {
    /// Generation of the last issue; 0 = never issued.
    generation: u32,
    value: Option<T>,
}

/// SPEC MEM-4: a fixed-capacity generational table. All memory is reserved at
/// construction; no operation allocates afterwards.
#[derive(Debug)]
pub(crate) struct SlotTable<T> {
    entries: Vec<Entry<T>>,
    /// Free, non-retired slots; popped from the end so the most recently freed
    /// slot (and its hot cache lines) is reused first.
    free: Vec<u32>,
    live: u32,
    retired: u32,
    max_generation: u32,
}

impl<T> SlotTable<T> {
    /// A table of `capacity` slots whose generations stop at `max_generation`.
    pub(crate) fn new(capacity: u32, max_generation: u32) -> Result<Self, PoolError> {
        let cap = capacity as usize;
        let mut entries = Vec::new();
        try_reserve(&mut entries, cap)?;
        let mut free = Vec::new();
        try_reserve(&mut free, cap)?;
        entries.extend((0..cap).map(|_| Entry {
            generation: 0,
            value: None,
        }));
        free.extend((0..capacity).rev());
        Ok(Self {
            entries,
            free,
            live: 0,
            retired: 0,
            max_generation,
        })
    }

    /// Number of slots.
    pub(crate) fn capacity(&self) -> u32 {
        // The table was built from a `u32` capacity and never grows.
        u32::try_from(self.entries.len()).unwrap_or(u32::MAX)
    }

    /// Number of live entries.
    pub(crate) fn live(&self) -> u32 {
        self.live
    }

    /// Number of slots that can be issued right now.
    pub(crate) fn available(&self) -> u32 {
        // At most `capacity` entries, which is a `u32`.
        u32::try_from(self.free.len()).unwrap_or(u32::MAX)
    }

    /// Number of retired slots.
    pub(crate) fn retired(&self) -> u32 {
        self.retired
    }

    /// Whether `insert` would succeed now.
    pub(crate) fn check_issue(&self) -> Result<(), IssueError> {
        if !self.free.is_empty() {
            Ok(())
        } else if self.entries.is_empty() {
            Err(IssueError::NoCapacity)
        } else if self.retired == self.capacity() {
            Err(IssueError::Exhausted)
        } else {
            Err(IssueError::Full)
        }
    }

    /// Stores `value` in a free slot under the slot's next generation.
    pub(crate) fn insert(&mut self, value: T) -> Result<Key, IssueError> {
        let Some(slot) = self.free.pop() else {
            return Err(self.check_issue().err().unwrap_or(IssueError::Full));
        };
        let entry = self
            .entries
            .get_mut(slot as usize)
            .ok_or(IssueError::Full)?;
        // Free slots are never retired, so their generation is below the maximum.
        entry.generation = entry.generation.saturating_add(1);
        entry.value = Some(value);
        self.live += 1;
        Ok(Key {
            slot,
            generation: entry.generation,
        })
    }

    /// The live entry named by `key`, if its generation is current.
    pub(crate) fn get(&self, key: Key) -> Option<&T> {
        let entry = self.entries.get(key.slot as usize)?;
        if entry.generation == key.generation {
            entry.value.as_ref()
        } else {
            None
        }
    }

    /// Mutable access to the live entry named by `key`.
    pub(crate) fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let entry = self.entries.get_mut(key.slot as usize)?;
        if entry.generation == key.generation {
            entry.value.as_mut()
        } else {
            None
        }
    }

    /// Mutable access to the live entry in `slot`, whatever its generation
    /// (for attributions that survive a reissue).
    pub(crate) fn get_mut_by_slot(&mut self, slot: u32) -> Option<&mut T> {
        self.entries.get_mut(slot as usize)?.value.as_mut()
    }

    /// Frees the slot named by `key`; the slot is retired instead if it
    /// reached the maximum generation. Returns the stored value.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let max = self.max_generation;
        let entry = self.entries.get_mut(key.slot as usize)?;
        if entry.generation != key.generation {
            return None;
        }
        let value = entry.value.take()?;
        self.live -= 1;
        if entry.generation >= max {
            self.retired += 1;
        } else {
            // Capacity for every slot was reserved at construction.
            self.free.push(key.slot);
        }
        Some(value)
    }

    /// Gives the live entry `key` a new generation in place (a module swap):
    /// the old key stops working. Returns `None` if `key` is not live, and
    /// `Some(Err(()))` if the slot is at the maximum generation.
    pub(crate) fn reissue(&mut self, key: Key) -> Option<Result<Key, ()>> {
        let max = self.max_generation;
        let entry = self.entries.get_mut(key.slot as usize)?;
        if entry.generation != key.generation || entry.value.is_none() {
            return None;
        }
        if entry.generation >= max {
            return Some(Err(()));
        }
        entry.generation += 1;
        Some(Ok(Key {
            slot: key.slot,
            generation: entry.generation,
        }))
    }

    /// Whether [`SlotTable::reissue`] would give `key` a new generation.
    pub(crate) fn can_reissue(&self, key: Key) -> bool {
        self.entries.get(key.slot as usize).is_some_and(|e| {
            e.generation == key.generation
                && e.value.is_some()
                && e.generation < self.max_generation
        })
    }

    /// The live entries with their keys.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.entries.iter().enumerate().filter_map(|(slot, e)| {
            let value = e.value.as_ref()?;
            let slot = u32::try_from(slot).ok()?;
            Some((
                Key {
                    slot,
                    generation: e.generation,
                },
                value,
            ))
        })
    }

    /// Heap bytes this table reserved (MEM-3 metadata).
    pub(crate) fn metadata_bytes(&self) -> u64 {
        let entries = self.entries.capacity() * core::mem::size_of::<Entry<T>>();
        let free = self.free.capacity() * core::mem::size_of::<u32>();
        (entries + free) as u64
    }
}

/// `Vec::try_reserve_exact` with the crate's error (MEM-9(7): allocation
/// failure is an explicit error).
pub(crate) fn try_reserve<T>(v: &mut Vec<T>, additional: usize) -> Result<(), PoolError> {
    v.try_reserve_exact(additional)
        .map_err(|_| PoolError::AllocationFailed {
            bytes: (additional as u64).saturating_mul(core::mem::size_of::<T>() as u64),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_issue_is_generation_one_and_reuse_adds_one() {
        let mut t = SlotTable::new(1, u32::MAX).unwrap();
        let a = t.insert(()).unwrap();
        assert_eq!(a.generation, 1);
        t.remove(a).unwrap();
        let b = t.insert(()).unwrap();
        assert_eq!((b.slot, b.generation), (a.slot, 2));
        assert!(t.get(a).is_none(), "old generation must not resolve");
    }

    #[test]
    fn generation_zero_never_resolves() {
        let mut t = SlotTable::new(2, u32::MAX).unwrap();
        let a = t.insert(7).unwrap();
        assert!(
            t.get(Key {
                slot: a.slot,
                generation: 0
            })
            .is_none()
        );
    }

    #[test]
    fn slot_at_max_generation_retires_instead_of_wrapping() {
        let mut t = SlotTable::new(1, 3).unwrap();
        for expected in 1..=3 {
            let k = t.insert(()).unwrap();
            assert_eq!(k.generation, expected);
            t.remove(k).unwrap();
        }
        assert_eq!(t.retired(), 1);
        assert_eq!(t.insert(()), Err(IssueError::Exhausted));
    }

    #[test]
    fn full_table_reports_full_not_exhausted() {
        let mut t = SlotTable::new(1, 3).unwrap();
        let _k = t.insert(()).unwrap();
        assert_eq!(t.insert(()), Err(IssueError::Full));
        let mut empty: SlotTable<()> = SlotTable::new(0, 3).unwrap();
        assert_eq!(empty.insert(()), Err(IssueError::NoCapacity));
    }

    #[test]
    fn reissue_invalidates_the_old_key() {
        let mut t = SlotTable::new(1, 2).unwrap();
        let a = t.insert(()).unwrap();
        let b = t.reissue(a).unwrap().unwrap();
        assert!(t.get(a).is_none());
        assert!(t.get(b).is_some());
        assert_eq!(t.reissue(b), Some(Err(())));
    }

    #[test]
    fn handle_packs_into_u64() {
        let h = BufferHandle::from_parts(RegionId(9), 5, 7);
        assert_eq!(h.to_u64(), (5 << 32) | 7);
    }
}
