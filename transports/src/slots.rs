//! A generational slab: ids that a peer or the engine may hold stay unique
//! across reuse of a slot (the plain `slab` crate reuses keys without a
//! generation).

/// An id issued by a generational slab: a slot index and the generation it was issued at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotId {
    index: u32,
    generation: u32,
}

impl SlotId {
    /// The slot index (stable while the id is live; reused afterwards).
    pub fn index(self) -> u32 {
        self.index
    }

    /// The generation the slot was issued at (never 0).
    pub fn generation(self) -> u32 {
        self.generation
    }

    /// An id from its parts (see [`crate::ConnId::from_u64`]).
    pub(crate) fn from_parts(index: u32, generation: u32) -> Self {
        Self { index, generation }
    }

    /// Packs the id into 56 bits for an io_uring `user_data` (the top byte
    /// is left for the operation kind). Generations are compared modulo 2^24
    /// there, which is enough to refuse completions of a recently freed slot.
    pub(crate) fn pack(self) -> u64 {
        (u64::from(self.generation & 0x00ff_ffff) << 32) | u64::from(self.index)
    }
}

enum Entry<T> {
    Occupied {
        generation: u32,
        value: T,
    },
    Vacant {
        generation: u32,
        next_free: u32,
    },
    /// The generation reached its maximum: never issued again.
    Retired,
}

const NONE: u32 = u32::MAX;

/// A bounded generational slab.
pub(crate) struct Slots<T> {
    entries: Vec<Entry<T>>,
    free: u32,
    len: usize,
    capacity: usize,
}

impl<T> Slots<T> {
    /// A slab that never holds more than `capacity` values.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            entries: Vec::new(),
            free: NONE,
            len: 0,
            capacity,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Inserts `value`, or gives it back when the slab is full.
    pub(crate) fn insert(&mut self, value: T) -> Result<SlotId, T> {
        if self.len >= self.capacity {
            return Err(value);
        }
        let index = if self.free != NONE {
            self.free
        } else if self.entries.len() < self.capacity && self.entries.len() < NONE as usize {
            self.entries.push(Entry::Vacant {
                generation: 0,
                next_free: NONE,
            });
            (self.entries.len() - 1) as u32
        } else {
            return Err(value);
        };
        let entry = &mut self.entries[index as usize];
        let (generation, next_free) = match entry {
            Entry::Vacant {
                generation,
                next_free,
            } => (*generation + 1, *next_free),
            _ => return Err(value),
        };
        if self.free == index {
            self.free = next_free;
        }
        *entry = Entry::Occupied { generation, value };
        self.len += 1;
        Ok(SlotId { index, generation })
    }

    pub(crate) fn get(&self, id: SlotId) -> Option<&T> {
        match self.entries.get(id.index as usize) {
            Some(Entry::Occupied { generation, value }) if *generation == id.generation => {
                Some(value)
            }
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, id: SlotId) -> Option<&mut T> {
        match self.entries.get_mut(id.index as usize) {
            Some(Entry::Occupied { generation, value }) if *generation == id.generation => {
                Some(value)
            }
            _ => None,
        }
    }

    /// The live id in slot `index` whose generation matches `packed_generation`
    /// modulo 2^24 (see [`SlotId::pack`]).
    pub(crate) fn find_packed(&self, packed: u64) -> Option<SlotId> {
        let index = packed as u32;
        let low = ((packed >> 32) & 0x00ff_ffff) as u32;
        match self.entries.get(index as usize) {
            Some(Entry::Occupied { generation, .. }) if generation & 0x00ff_ffff == low => {
                Some(SlotId {
                    index,
                    generation: *generation,
                })
            }
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, id: SlotId) -> Option<T> {
        let entry = self.entries.get_mut(id.index as usize)?;
        match entry {
            Entry::Occupied { generation, .. } if *generation == id.generation => {}
            _ => return None,
        }
        let next = if id.generation == u32::MAX {
            Entry::Retired
        } else {
            let e = Entry::Vacant {
                generation: id.generation,
                next_free: self.free,
            };
            self.free = id.index;
            e
        };
        self.len -= 1;
        match std::mem::replace(entry, next) {
            Entry::Occupied { value, .. } => Some(value),
            _ => None,
        }
    }

    pub(crate) fn ids(&self) -> impl Iterator<Item = SlotId> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Entry::Occupied { generation, .. } => Some(SlotId {
                    index: i as u32,
                    generation: *generation,
                }),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_bumps_the_generation_and_old_ids_die() {
        let mut s = Slots::with_capacity(2);
        let a = s.insert("a").unwrap();
        assert_eq!(a.generation(), 1);
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b").unwrap();
        assert_eq!(b.index(), a.index());
        assert_eq!(b.generation(), 2);
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.find_packed(b.pack()), Some(b));
        assert_eq!(s.find_packed(a.pack()), None);
    }

    #[test]
    fn capacity_is_a_hard_bound() {
        let mut s = Slots::with_capacity(2);
        s.insert(1).unwrap();
        s.insert(2).unwrap();
        assert_eq!(s.insert(3), Err(3));
        assert_eq!(s.len(), 2);
        assert_eq!(s.ids().count(), 2);
    }
}
