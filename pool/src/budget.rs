//! Region configuration and byte budgets (SPEC MEM-1, MEM-8).
//!
//! Owns the numbers a runtime gives a region when it creates it: chunk size
//! and count (the backing), the byte ceiling of each lifetime class, the
//! object/request-count ceilings of every slot table, the module-internal byte
//! ceiling, and the maximum handle generation. It also keeps the per-class
//! byte counters that [`crate::Region::acquire`] charges. All ceilings are fixed
//! for the region's life; exhaustion is backpressure, never growth.

use crate::error::{PoolError, Resource};

/// SPEC MEM-1: lifetime classes, counted separately because their lifetimes
/// differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// State that lives as long as a session or the process (resume caches,
    /// agreements).
    LongLived,
    /// Per-stream context state (codec windows, parser state of a stream).
    StreamContext,
    /// Scratch space of one operation (receive buffers, encode output).
    Scratch,
}

impl Class {
    /// All classes, in report order.
    pub const ALL: [Class; 3] = [Class::LongLived, Class::StreamContext, Class::Scratch];
}

impl core::fmt::Display for Class {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Class::LongLived => "long-lived",
            Class::StreamContext => "stream-context",
            Class::Scratch => "scratch",
        })
    }
}

/// A byte figure per lifetime class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassBytes {
    /// [`Class::LongLived`].
    pub long_lived: u64,
    /// [`Class::StreamContext`].
    pub stream_context: u64,
    /// [`Class::Scratch`].
    pub scratch: u64,
}

impl ClassBytes {
    /// The same figure for every class.
    pub const fn all(bytes: u64) -> Self {
        Self {
            long_lived: bytes,
            stream_context: bytes,
            scratch: bytes,
        }
    }

    /// The figure of one class.
    pub const fn get(&self, class: Class) -> u64 {
        match class {
            Class::LongLived => self.long_lived,
            Class::StreamContext => self.stream_context,
            Class::Scratch => self.scratch,
        }
    }

    pub(crate) fn get_mut(&mut self, class: Class) -> &mut u64 {
        match class {
            Class::LongLived => &mut self.long_lived,
            Class::StreamContext => &mut self.stream_context,
            Class::Scratch => &mut self.scratch,
        }
    }

    /// Sum over the classes (saturating).
    pub const fn total(&self) -> u64 {
        self.long_lived
            .saturating_add(self.stream_context)
            .saturating_add(self.scratch)
    }
}

/// SPEC MEM-1: everything a runtime fixes when it creates a region.
///
/// Build it with [`RegionConfig::new`] and adjust fields with struct-update
/// syntax. Every count is a hard ceiling; nothing grows later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionConfig {
    /// Bytes per chunk; one buffer occupies one chunk.
    pub chunk_size: u32,
    /// Number of chunks in the backing allocation.
    pub chunk_count: u32,
    /// SPEC MEM-1: byte ceiling of each lifetime class, charged in whole
    /// chunks. Defaults to the whole backing for each class.
    pub class_bytes: ClassBytes,
    /// Buffer handle slots (object budget). Defaults to `chunk_count`.
    pub buffer_slots: u32,
    /// Request slots, i.e. requests admitted and not yet reclaimed.
    pub request_slots: u32,
    /// Lease slots, shared by application leases and the leases requests hold
    /// on their input and output.
    pub lease_slots: u32,
    /// Completion slots; also the completion queue's capacity, so a post for
    /// an admitted request never finds the queue full.
    pub completion_slots: u32,
    /// Stream-context slots.
    pub context_slots: u32,
    /// Module slots.
    pub module_slots: u32,
    /// SPEC MEM-3: ceiling on module-internal bytes (reservations plus staged
    /// swap-in space) that modules account in this region.
    pub module_internal_bytes: u64,
    /// SPEC MEM-4: the largest generation a slot is issued with before it is
    /// retired. `u32::MAX` in production; tests lower it to reach exhaustion.
    pub max_generation: u32,
}

impl RegionConfig {
    /// A region of `chunk_count` chunks of `chunk_size` bytes with default
    /// ceilings: one buffer slot per chunk, one request per chunk, leases for
    /// two per request plus one per buffer, completion slots equal to request
    /// slots, 64 stream contexts, 8 modules, no module-internal bytes.
    pub const fn new(chunk_size: u32, chunk_count: u32) -> Self {
        let backing = chunk_size as u64 * chunk_count as u64;
        Self {
            chunk_size,
            chunk_count,
            class_bytes: ClassBytes::all(backing),
            buffer_slots: chunk_count,
            request_slots: chunk_count,
            lease_slots: chunk_count.saturating_mul(3),
            completion_slots: chunk_count,
            context_slots: 64,
            module_slots: 8,
            module_internal_bytes: 0,
            max_generation: u32::MAX,
        }
    }

    /// Checks the configuration's internal consistency and returns the raw
    /// backing size in bytes.
    pub(crate) fn validate(&self) -> Result<u64, PoolError> {
        if self.chunk_size == 0 {
            return Err(PoolError::InvalidConfig {
                reason: "chunk_size must be at least 1",
            });
        }
        if self.chunk_count == 0 {
            return Err(PoolError::InvalidConfig {
                reason: "chunk_count must be at least 1",
            });
        }
        if self.max_generation == 0 {
            return Err(PoolError::InvalidConfig {
                reason: "max_generation must be at least 1 (generation 0 is invalid)",
            });
        }
        // Queue positions are usize and the ring is rounded up to a power of two.
        if self.completion_slots > 1 << 30 {
            return Err(PoolError::InvalidConfig {
                reason: "completion_slots must be at most 2^30",
            });
        }
        u64::from(self.chunk_size)
            .checked_mul(u64::from(self.chunk_count))
            .ok_or(PoolError::SizeOverflow {
                what: "chunk_size * chunk_count",
            })
    }
}

/// The per-class byte counters of a region (SPEC MEM-1).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClassLedger {
    limits: ClassBytes,
    used: ClassBytes,
}

impl ClassLedger {
    pub(crate) fn new(limits: ClassBytes) -> Self {
        Self {
            limits,
            used: ClassBytes::default(),
        }
    }

    /// Whether `bytes` more of `class` fit: `Limit` if they never can,
    /// `WouldBlock` if they cannot now.
    pub(crate) fn check(&self, class: Class, bytes: u64) -> Result<(), PoolError> {
        let limit = self.limits.get(class);
        let resource = Resource::ClassBytes(class);
        if bytes > limit {
            return Err(PoolError::Limit {
                resource,
                requested: bytes,
                limit,
            });
        }
        if self.used.get(class) > limit - bytes {
            return Err(PoolError::WouldBlock { resource });
        }
        Ok(())
    }

    /// Charges bytes already checked with [`Self::check`].
    pub(crate) fn charge(&mut self, class: Class, bytes: u64) {
        let used = self.used.get_mut(class);
        *used = used.saturating_add(bytes);
    }

    /// Returns bytes charged earlier.
    pub(crate) fn refund(&mut self, class: Class, bytes: u64) {
        let used = self.used.get_mut(class);
        *used = used.saturating_sub(bytes);
    }

    pub(crate) fn used(&self) -> ClassBytes {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_ledger_distinguishes_limit_from_would_block() {
        let mut l = ClassLedger::new(ClassBytes {
            long_lived: 10,
            stream_context: 0,
            scratch: 100,
        });
        assert!(matches!(
            l.check(Class::LongLived, 11),
            Err(PoolError::Limit { .. })
        ));
        l.check(Class::LongLived, 10).unwrap();
        l.charge(Class::LongLived, 10);
        assert_eq!(
            l.check(Class::LongLived, 1),
            Err(PoolError::WouldBlock {
                resource: Resource::ClassBytes(Class::LongLived)
            })
        );
        // Classes are counted separately.
        l.check(Class::Scratch, 100).unwrap();
        l.refund(Class::LongLived, 10);
        l.check(Class::LongLived, 10).unwrap();
    }

    #[test]
    fn config_rejects_zero_and_overflow() {
        assert!(RegionConfig::new(0, 1).validate().is_err());
        assert!(RegionConfig::new(1, 0).validate().is_err());
        let cfg = RegionConfig {
            max_generation: 0,
            ..RegionConfig::new(1, 1)
        };
        assert!(cfg.validate().is_err());
        assert_eq!(RegionConfig::new(4096, 4).validate(), Ok(16384));
    }
}
