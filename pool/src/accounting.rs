//! The memory report (SPEC MEM-3, MEM-8, MEM-9(8)).
//!
//! Owns the region's running figures (live data, held and pending bytes,
//! module-internal and swap-in space, external bytes, bytes × time, high-water
//! marks) and the [`MemoryReport`] built from them. It reads the other tables
//! but changes none of them.
//!
//! The categories are kept apart, as the spec asks, and are **not** summed
//! where they nest: live data and held bytes live *inside* the reserved
//! backing; pool-backed module space is an attribution *inside* the backing.
//! A buffer lent to several readers counts once. Reserved capacity is what
//! the region allocated — it is not the process's resident memory (RSS), which
//! the runtime may observe and report beside it, never added to it.

use std::time::Instant;

use crate::budget::ClassBytes;
use crate::completion::DiagnosticCounts;
use crate::region::Region;

/// SPEC MEM-3: metadata bytes, per table. All are allocated when the region is
/// created and never grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetadataBytes {
    /// Buffer handle table and the free-chunk stack.
    pub handles: u64,
    /// Lease table.
    pub leases: u64,
    /// Request (ticket) table and per-ticket post states.
    pub tickets: u64,
    /// Completion-queue ring cells (completion and queue slots).
    pub completion_queue: u64,
    /// Stream-context table.
    pub contexts: u64,
    /// Module table.
    pub modules: u64,
}

impl MetadataBytes {
    /// Sum of all metadata.
    pub const fn total(&self) -> u64 {
        self.handles
            + self.leases
            + self.tickets
            + self.completion_queue
            + self.contexts
            + self.modules
    }
}

/// SPEC MEM-3/MEM-9(8): peaks since the region was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HighWater {
    /// Peak of accounted bytes in use: used chunks (including those held by
    /// pending work) + metadata + module-internal bytes in use + swap-in space.
    pub in_use: u64,
    /// Peak of live (valid) data bytes.
    pub live_data: u64,
    /// Peak of chunk bytes held by leases.
    pub held: u64,
    /// Peak of chunk bytes held by admitted, unreclaimed requests.
    pub pending_bytes: u64,
    /// Peak number of admitted, unreclaimed requests.
    pub pending_requests: u32,
}

/// SPEC MEM-3: a region's memory, category by category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// Size of the backing allocation (page-rounded). Reserved capacity, not RSS.
    pub backing_reserved: u64,
    /// Bytes of chunks that hold a buffer.
    pub chunks_used: u64,
    /// Bytes of chunks held free by the pool.
    pub chunks_free: u64,
    /// Page-rounding at the end of the backing.
    pub alignment_waste: u64,
    /// Chunk bytes beyond the capacity of the buffers in them.
    pub fragmentation_waste: u64,
    /// SPEC MEM-1: used chunk bytes per lifetime class.
    pub class_bytes: ClassBytes,
    /// Chunk bytes attributed to modules (inside `chunks_used`, not added).
    pub module_pool_bytes: u64,
    /// Metadata, per table.
    pub metadata: MetadataBytes,
    /// Sum of valid lengths (each buffer once, however many readers).
    pub live_data: u64,
    /// Chunk bytes of leased buffers (each buffer once).
    pub held: u64,
    /// SPEC MEM-8: integral of `held` over the region's clock, in byte-nanoseconds.
    pub held_byte_nanos: u128,
    /// Admitted, unreclaimed requests.
    pub pending_requests: u32,
    /// Chunk bytes those requests hold (each buffer once).
    pub pending_bytes: u64,
    /// Module-internal bytes reserved by registered modules.
    pub module_internal_reserved: u64,
    /// Module-internal bytes the modules report in use.
    pub module_internal_used: u64,
    /// Space staged for pending module swaps.
    pub swap_in: u64,
    /// External/unmeasured bytes (module and runtime reports).
    pub external: u64,
    /// Process RSS the runtime observed, if it reported one. Shown separately;
    /// never added to anything here.
    pub observed_rss: Option<u64>,
    /// The region's ceiling: backing + metadata + module-internal budget.
    /// `None` when external bytes exist — the ceiling claim is then void.
    pub ceiling: Option<u64>,
    /// Peaks.
    pub high_water: HighWater,
    /// Completion diagnostics so far.
    pub diagnostics: DiagnosticCounts,
}

/// Running figures of a region.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) metadata_total: u64,
    pub(crate) live_data: u64,
    pub(crate) fragmentation: u64,
    pub(crate) held_bytes: u64,
    pub(crate) pending_bytes: u64,
    pub(crate) module_used: u64,
    pub(crate) swap_in: u64,
    pub(crate) external_modules: u64,
    pub(crate) external_region: u64,
    pub(crate) observed_rss: Option<u64>,
    pub(crate) clock: Option<Instant>,
    pub(crate) held_byte_nanos: u128,
    pub(crate) high_water: HighWater,
    pub(crate) diagnostics: DiagnosticCounts,
}

impl Ledger {
    /// Accrues held bytes × elapsed time. Between two calls the region's time
    /// stands still, so the held figure now is the one for the whole interval.
    pub(crate) fn advance(&mut self, now: Instant) {
        if let Some(last) = self.clock
            && now > last
        {
            let nanos = now.duration_since(last).as_nanos();
            self.held_byte_nanos = self
                .held_byte_nanos
                .saturating_add(u128::from(self.held_bytes).saturating_mul(nanos));
        }
        if self.clock.is_none_or(|last| now > last) {
            self.clock = Some(now);
        }
    }

    /// Raises the peaks to the current figures.
    pub(crate) fn touch(&mut self, chunk_bytes: u64, pending_requests: u32) {
        let in_use = chunk_bytes + self.metadata_total + self.module_used + self.swap_in;
        let hw = &mut self.high_water;
        hw.in_use = hw.in_use.max(in_use);
        hw.live_data = hw.live_data.max(self.live_data);
        hw.held = hw.held.max(self.held_bytes);
        hw.pending_bytes = hw.pending_bytes.max(self.pending_bytes);
        hw.pending_requests = hw.pending_requests.max(pending_requests);
    }
}

impl Region {
    /// SPEC MEM-3: the memory report.
    pub fn report(&self) -> MemoryReport {
        let chunk_size = u64::from(self.backing.chunk_size());
        let chunk_count = u64::from(self.backing.chunk_count());
        let free = u64::from(self.backing.free_chunks());
        let backing_reserved = self.backing.allocation_bytes();
        let metadata = self.metadata();
        let module_internal_reserved = self.modules.iter().map(|(_, m)| m.internal_reserved).sum();
        let module_pool_bytes = self.modules.iter().map(|(_, m)| m.pool_bytes).sum();
        let external = self.ledger.external_modules + self.ledger.external_region;
        let ceiling = (external == 0)
            .then(|| backing_reserved + metadata.total() + self.config.module_internal_bytes);
        MemoryReport {
            backing_reserved,
            chunks_used: (chunk_count - free) * chunk_size,
            chunks_free: free * chunk_size,
            alignment_waste: backing_reserved - chunk_count * chunk_size,
            fragmentation_waste: self.ledger.fragmentation,
            class_bytes: self.classes.used(),
            module_pool_bytes,
            metadata,
            live_data: self.ledger.live_data,
            held: self.ledger.held_bytes,
            held_byte_nanos: self.ledger.held_byte_nanos,
            pending_requests: self.requests.live(),
            pending_bytes: self.ledger.pending_bytes,
            module_internal_reserved,
            module_internal_used: self.ledger.module_used,
            swap_in: self.ledger.swap_in,
            external,
            observed_rss: self.ledger.observed_rss,
            ceiling,
            high_water: self.ledger.high_water,
            diagnostics: self.diagnostics(),
        }
    }

    /// SPEC MEM-3: metadata bytes, per table.
    pub fn metadata(&self) -> MetadataBytes {
        let (states, cells) = self.shared.metadata_bytes();
        MetadataBytes {
            handles: self.buffers.metadata_bytes() + self.backing.metadata_bytes(),
            leases: self.leases.metadata_bytes(),
            tickets: self.requests.metadata_bytes() + states,
            completion_queue: cells,
            contexts: self.contexts.metadata_bytes(),
            modules: self.modules.metadata_bytes(),
        }
    }

    /// Recomputes every running figure and cross-reference from the tables and
    /// checks it against the incremental bookkeeping. For tests and debugging;
    /// O(size of the tables). Returns the first inconsistency found.
    pub fn audit(&self) -> Result<(), &'static str> {
        let chunk = u64::from(self.backing.chunk_size());
        let (mut live, mut frag, mut held, mut pending) = (0u64, 0u64, 0u64, 0u64);
        let mut class = ClassBytes::default();
        for (key, b) in self.buffers.iter() {
            if !(b.valid <= b.filled
                && b.filled <= b.capacity
                && b.capacity <= self.backing.chunk_size())
            {
                return Err("valid <= written <= capacity <= chunk size violated");
            }
            let reads = self
                .leases
                .iter()
                .filter(|(_, l)| l.buffer == key && l.mode == crate::LeaseMode::Read)
                .count();
            let writes = self
                .leases
                .iter()
                .filter(|(_, l)| l.buffer == key && l.mode == crate::LeaseMode::Write)
                .count();
            if reads != b.read_leases as usize || writes != usize::from(b.write_leased) {
                return Err("buffer lease counters disagree with the lease table");
            }
            if writes > 1 || (writes == 1 && reads > 0) {
                return Err("a write lease coexists with another lease");
            }
            let refs = self
                .requests
                .iter()
                .filter(|(_, r)| {
                    r.input.is_some_and(|h| h.buffer == key)
                        || r.output.is_some_and(|h| h.buffer == key)
                })
                .count();
            if refs != b.request_refs as usize {
                return Err("buffer request counter disagrees with the request table");
            }
            live += u64::from(b.valid);
            frag += chunk - u64::from(b.capacity);
            if b.leased() {
                held += chunk;
            }
            if b.request_refs > 0 {
                pending += chunk;
            }
            *class.get_mut(b.class) += chunk;
        }
        if (live, frag, held, pending)
            != (
                self.ledger.live_data,
                self.ledger.fragmentation,
                self.ledger.held_bytes,
                self.ledger.pending_bytes,
            )
        {
            return Err("live/fragmentation/held/pending figures drifted");
        }
        if class != self.classes.used() {
            return Err("class byte counters drifted");
        }
        if self.buffers.live() + self.backing.free_chunks() != self.backing.chunk_count() {
            return Err("chunks leaked or double-freed");
        }
        if self.requests.live() != self.completions_in_use {
            return Err("completion slots disagree with live requests");
        }
        for (key, c) in self.contexts.iter() {
            if let Some(t) = c.in_flight
                && self.requests.get(t).is_none_or(|r| r.context != Some(key))
            {
                return Err("context in flight names no request of it");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{BufferSpec, Class, Principal, Region, RegionConfig};

    #[test]
    fn backing_report_separates_waste_and_free_chunks() {
        // 3 chunks of 1000 bytes: 3000 bytes rounded up to one 4096-byte page.
        let mut r = Region::new(RegionConfig::new(1000, 3)).unwrap();
        let h = r
            .acquire(Principal::new(1), BufferSpec::new(Class::LongLived, 600))
            .unwrap();
        let rep = r.report();
        assert_eq!(rep.backing_reserved, 4096);
        assert_eq!(rep.alignment_waste, 1096);
        assert_eq!((rep.chunks_used, rep.chunks_free), (1000, 2000));
        assert_eq!(rep.fragmentation_waste, 400);
        assert_eq!(rep.class_bytes.long_lived, 1000);
        assert!(rep.metadata.total() > 0);
        assert_eq!(rep.high_water.in_use, 1000 + rep.metadata.total());
        r.release(Principal::new(1), h).unwrap();
        assert_eq!(r.report().fragmentation_waste, 0);
        r.audit().unwrap();
    }
}
