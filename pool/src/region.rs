//! The region: one core's pool, and the buffer operations on it (SPEC MEM-1,
//! MEM-4, MEM-5, MEM-6).
//!
//! Owns the [`Region`] type, its buffer table and the owner-side buffer API:
//! acquire, read, write, commit, truncate, transfer, release. Leases, requests,
//! modules and accounting add further `impl Region` blocks in their own
//! modules. A region is used by one thread (it is `Send`, not `Sync`); only
//! [`crate::CompletionPoster`] crosses threads.

use std::cell::Cell;
use std::time::Instant;

use crate::accounting::Ledger;
use crate::backing::{Backing, RawRegion};
use crate::budget::{Class, ClassLedger, RegionConfig};
use crate::completion::{Completion, CompletionPoster, Diagnostic, Shared};
use crate::error::{BusyReason, HandleKind, PoolError, Resource};
use crate::handle::{BufferHandle, Key, ModuleHandle, RegionId, SlotTable, Ticket};
use crate::lease::Lease;
use crate::module::{Context, Module};
use crate::range::{Range, check_range};
use crate::request::Request;
use crate::sync::Arc;

/// SPEC MEM-5/MEM-6: the identity on whose behalf an operation runs (a
/// connection, a stream, an application, a module). The region checks it
/// against a buffer's owner or a lease's holder; it is not a secret, since
/// the contract binds cooperating in-process modules (seed §2), not
/// adversarial native code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(u64);

impl Principal {
    /// A principal with the caller-chosen id `id`.
    pub const fn new(id: u64) -> Self {
        Self(id)
    }

    /// The id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// What [`Region::acquire`] should hand out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    /// SPEC MEM-1: the lifetime class charged for the buffer's chunk.
    pub class: Class,
    /// Reserved capacity in bytes (at most the chunk size); writes stay inside it.
    pub capacity: u32,
    /// SPEC MEM-6: wipe the chunk when the buffer is released.
    pub secret: bool,
    /// SPEC MEM-3: attribute the chunk to this module's pool-backed space.
    pub module: Option<ModuleHandle>,
}

impl BufferSpec {
    /// A non-secret, unattributed buffer.
    pub const fn new(class: Class, capacity: u32) -> Self {
        Self {
            class,
            capacity,
            secret: false,
            module: None,
        }
    }

    /// Marks the buffer secret: its chunk is zeroed on release.
    pub const fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    /// Attributes the buffer to `module` in the accounting report.
    pub const fn for_module(mut self, module: ModuleHandle) -> Self {
        self.module = Some(module);
        self
    }
}

/// A snapshot of one buffer's state, for callers and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// Current owner.
    pub owner: Principal,
    /// Lifetime class.
    pub class: Class,
    /// Reserved capacity.
    pub capacity: u32,
    /// Valid length: the readable prefix.
    pub valid: u32,
    /// Contiguous prefix verified as written (never below `valid`).
    pub written: u32,
    /// Number of read leases (including those held by requests).
    pub read_leases: u32,
    /// Whether an exclusive write lease exists (including a request's).
    pub write_leased: bool,
    /// Number of admitted, unreclaimed requests using the buffer.
    pub in_flight: u32,
    /// Whether the chunk is wiped on release.
    pub secret: bool,
    /// Index of the chunk holding the buffer.
    pub chunk: u32,
}

/// One buffer's bookkeeping.
#[derive(Debug)]
pub(crate) struct Buffer {
    pub(crate) chunk: u32,
    pub(crate) class: Class,
    pub(crate) capacity: u32,
    pub(crate) valid: u32,
    /// Contiguous prefix written by the owner or a write lessee, or published
    /// by a reclaimed completion. `valid <= filled <= capacity`.
    pub(crate) filled: u32,
    pub(crate) owner: Principal,
    pub(crate) secret: bool,
    pub(crate) module_slot: Option<u32>,
    pub(crate) read_leases: u32,
    pub(crate) write_leased: bool,
    pub(crate) request_refs: u32,
}

impl Buffer {
    pub(crate) fn leased(&self) -> bool {
        self.read_leases > 0 || self.write_leased
    }

    /// SPEC MEM-6: the owner may write, transfer or release only when no
    /// lease of any kind exists.
    pub(crate) fn require_unleased(&self) -> Result<(), PoolError> {
        if self.write_leased {
            Err(PoolError::Busy {
                reason: BusyReason::WriteLeased,
            })
        } else if self.read_leases > 0 {
            Err(PoolError::Busy {
                reason: BusyReason::ReadLeased,
            })
        } else {
            Ok(())
        }
    }
}

/// SPEC MEM-1/MEM-2: one execution region's pool — a page-aligned backing of
/// fixed-size chunks, a generational handle table, leases, tickets, stream
/// contexts, modules, a completion queue and the byte/count budgets over all
/// of them.
///
/// The region is driven serially by its owner thread (MEM-7: one serial
/// control flow, no re-entrant control API); backends post completions from
/// any thread through a [`CompletionPoster`], and the owner reclaims them with
/// [`Region::reclaim`].
///
/// Dropping a region while a submitted request is unreclaimed leaks the
/// backing instead of freeing it, because a backend (a kernel, a worker) may
/// still write into it (MEM-7). Secret buffers that no backend holds are
/// wiped on drop.
///
/// The region is `Send` but not `Sync`:
///
/// ```compile_fail
/// fn needs_sync<T: Sync>() {}
/// needs_sync::<dtp_pool::Region>();
/// ```
#[derive(Debug)]
pub struct Region {
    pub(crate) id: RegionId,
    pub(crate) config: RegionConfig,
    pub(crate) backing: Backing,
    pub(crate) buffers: SlotTable<Buffer>,
    pub(crate) classes: ClassLedger,
    pub(crate) leases: SlotTable<Lease>,
    pub(crate) requests: SlotTable<Request>,
    pub(crate) completions_in_use: u32,
    pub(crate) contexts: SlotTable<Context>,
    pub(crate) modules: SlotTable<Module>,
    pub(crate) module_internal_charged: u64,
    pub(crate) shared: Arc<Shared>,
    /// Consumer position of the completion queue; only the owner pops.
    pub(crate) queue_head: usize,
    /// Whether a [`CompletionPoster`] was ever handed out (then other
    /// threads may post, and the owner's own completions must race them).
    pub(crate) posters_out: Cell<bool>,
    pub(crate) ledger: Ledger,
}

impl Region {
    /// SPEC MEM-1: creates a region with the budgets of `config`, allocating
    /// the backing and every table up front; nothing allocates afterwards.
    ///
    /// Fails with [`PoolError::InvalidConfig`], [`PoolError::SizeOverflow`] or
    /// [`PoolError::AllocationFailed`] (MEM-9(7)).
    pub fn new(config: RegionConfig) -> Result<Self, PoolError> {
        config.validate()?;
        let id = RegionId::next()?;
        let backing = Backing::new(config.chunk_size, config.chunk_count)?;
        let max = config.max_generation;
        let buffers = SlotTable::new(config.buffer_slots, max)?;
        let leases = SlotTable::new(config.lease_slots, max)?;
        let requests = SlotTable::new(config.request_slots, max)?;
        let contexts = SlotTable::new(config.context_slots, max)?;
        let modules = SlotTable::new(config.module_slots, max)?;
        let shared = Arc::new(Shared::new(
            id,
            config.request_slots,
            config.completion_slots,
        )?);
        let mut region = Self {
            id,
            config,
            backing,
            buffers,
            classes: ClassLedger::new(config.class_bytes),
            leases,
            requests,
            completions_in_use: 0,
            contexts,
            modules,
            module_internal_charged: 0,
            shared,
            queue_head: 0,
            posters_out: Cell::new(false),
            ledger: Ledger::default(),
        };
        region.ledger.metadata_total = region.metadata().total();
        region.touch();
        Ok(region)
    }

    /// This region's id; every handle it issues carries it.
    pub fn id(&self) -> RegionId {
        self.id
    }

    /// The configuration the region was created with.
    pub fn config(&self) -> &RegionConfig {
        &self.config
    }

    /// The raw backing, for registering it with io_uring (one iovec covering
    /// every chunk) — see [`RawRegion`]. The crate itself does no IO.
    pub fn raw_region(&self) -> RawRegion {
        self.backing.raw()
    }

    /// A guard that keeps the backing mapped while it lives, even after the
    /// region is dropped (see `MappingGuard`).
    pub fn mapping_guard(&self) -> crate::MappingGuard {
        self.backing.mapping_guard()
    }

    /// The index of the chunk behind `handle` (io_uring `buf_index` when chunks
    /// are registered one iovec each, or a provided-buffer `bid`).
    pub fn chunk_index(&self, handle: BufferHandle) -> Result<u32, PoolError> {
        Ok(self.buffer(handle)?.chunk)
    }

    /// A poster for backends on other threads (SPEC MEM-7).
    pub fn poster(&self) -> CompletionPoster {
        self.posters_out.set(true);
        CompletionPoster::new(Arc::clone(&self.shared))
    }

    /// SPEC MEM-7: posts a completion from the owner thread. Immediate
    /// completions go through the queue like every other one; nothing is
    /// applied until [`Region::reclaim`].
    pub fn post(&self, completion: Completion) -> Result<(), Diagnostic> {
        self.shared.post(completion)
    }

    /// Rebuilds a ticket of this region from [`Ticket::to_u64`].
    pub fn ticket_from_u64(&self, raw: u64) -> Ticket {
        Ticket::from_parts(self.id, (raw >> 32) as u32, raw as u32)
    }

    /// SPEC MEM-8: advances the region's clock (time is an input, never read
    /// here), accruing held-bytes × time for the interval since the last call.
    pub fn advance(&mut self, now: Instant) {
        self.ledger.advance(now);
    }

    /// SPEC MEM-2/MEM-6: hands out a buffer of `spec.capacity` bytes in one
    /// chunk, owned by `owner`, with valid length 0 and a fresh generation.
    ///
    /// Errors: [`PoolError::CapacityTooLarge`]; [`PoolError::WouldBlock`] when
    /// buffer slots, chunks or the class budget are exhausted now;
    /// [`PoolError::Limit`] when the class can never hold a chunk;
    /// [`PoolError::GenerationExhausted`] when every buffer slot is retired.
    pub fn acquire(
        &mut self,
        owner: Principal,
        spec: BufferSpec,
    ) -> Result<BufferHandle, PoolError> {
        let chunk_size = self.backing.chunk_size();
        if spec.capacity > chunk_size {
            return Err(PoolError::CapacityTooLarge {
                requested: u64::from(spec.capacity),
                chunk_size,
            });
        }
        let module_slot = match spec.module {
            Some(m) => {
                self.module(m)?;
                Some(m.slot())
            }
            None => None,
        };
        self.buffers
            .check_issue()
            .map_err(|e| e.into_pool_error(HandleKind::Buffer, Resource::BufferSlots, 1))?;
        if self.backing.free_chunks() == 0 {
            return Err(PoolError::WouldBlock {
                resource: Resource::Chunks,
            });
        }
        self.classes.check(spec.class, u64::from(chunk_size))?;

        // Everything is checked; from here on nothing can fail.
        let chunk = self.backing.take_chunk().ok_or(PoolError::WouldBlock {
            resource: Resource::Chunks,
        })?;
        let buffer = Buffer {
            chunk,
            class: spec.class,
            capacity: spec.capacity,
            valid: 0,
            filled: 0,
            owner,
            secret: spec.secret,
            module_slot,
            read_leases: 0,
            write_leased: false,
            request_refs: 0,
        };
        let key = match self.buffers.insert(buffer) {
            Ok(key) => key,
            Err(e) => {
                self.backing.put_chunk(chunk);
                return Err(e.into_pool_error(HandleKind::Buffer, Resource::BufferSlots, 1));
            }
        };
        self.classes.charge(spec.class, u64::from(chunk_size));
        self.ledger.fragmentation += u64::from(chunk_size - spec.capacity);
        if let Some(slot) = module_slot
            && let Some(m) = self.modules.get_mut_by_slot(slot)
        {
            m.buffers += 1;
            m.pool_bytes += u64::from(chunk_size);
        }
        self.touch();
        Ok(self.buffer_handle(key))
    }

    /// A snapshot of the buffer's state.
    pub fn buffer_info(&self, handle: BufferHandle) -> Result<BufferInfo, PoolError> {
        let b = self.buffer(handle)?;
        Ok(BufferInfo {
            owner: b.owner,
            class: b.class,
            capacity: b.capacity,
            valid: b.valid,
            written: b.filled,
            read_leases: b.read_leases,
            write_leased: b.write_leased,
            in_flight: b.request_refs,
            secret: b.secret,
            chunk: b.chunk,
        })
    }

    /// SPEC MEM-5/MEM-6: the owner reads `range`, which must lie within the
    /// valid length. Allowed while read leases exist, refused while a write
    /// lease (including a request's output lease) exists.
    pub fn read(&self, who: Principal, range: Range) -> Result<&[u8], PoolError> {
        let b = self.owned(range.handle, who)?;
        if b.write_leased {
            return Err(PoolError::Busy {
                reason: BusyReason::WriteLeased,
            });
        }
        check_range(range.offset, range.length, b.valid, 1)?;
        self.bytes(b.chunk, range.offset, range.length)
    }

    /// SPEC MEM-5/MEM-6: the owner writes `data` at `offset`, within the
    /// reserved capacity, while no lease exists. The valid length does not
    /// change; publish the bytes with [`Region::commit`].
    pub fn write(
        &mut self,
        who: Principal,
        handle: BufferHandle,
        offset: u32,
        data: &[u8],
    ) -> Result<(), PoolError> {
        let b = self.owned(handle, who)?;
        b.require_unleased()?;
        let key = handle.key();
        self.write_bytes(key, offset, data)
    }

    /// SPEC MEM-5: the owner publishes `valid` bytes as the new valid length.
    /// It may only grow (no implicit discard; use [`Region::truncate`]) and
    /// only over bytes verified as written (no unverified tail).
    pub fn commit(
        &mut self,
        who: Principal,
        handle: BufferHandle,
        valid: u32,
    ) -> Result<(), PoolError> {
        let b = self.owned(handle, who)?;
        b.require_unleased()?;
        self.publish(handle.key(), valid)
    }

    /// SPEC MEM-5: the owner explicitly discards data beyond `valid` (for
    /// example 0, to reuse a consumed buffer as a v0 output buffer). Only
    /// without leases; written bytes beyond `valid` are forgotten too.
    pub fn truncate(
        &mut self,
        who: Principal,
        handle: BufferHandle,
        valid: u32,
    ) -> Result<(), PoolError> {
        let b = self.owned(handle, who)?;
        b.require_unleased()?;
        if valid > b.valid {
            return Err(PoolError::OutOfRange {
                offset: valid,
                length: 0,
                bound: b.valid,
            });
        }
        let b = self.buffer_mut(handle.key())?;
        let old = b.valid;
        b.valid = valid;
        b.filled = valid;
        self.ledger.live_data -= u64::from(old - valid);
        Ok(())
    }

    /// SPEC MEM-6: the owner hands the buffer to `to` without copying. Only
    /// without leases.
    pub fn transfer(
        &mut self,
        who: Principal,
        handle: BufferHandle,
        to: Principal,
    ) -> Result<(), PoolError> {
        let b = self.owned(handle, who)?;
        b.require_unleased()?;
        self.buffer_mut(handle.key())?.owner = to;
        Ok(())
    }

    /// SPEC MEM-6: the owner releases the buffer. While any lease exists this
    /// fails with [`PoolError::Busy`] and ownership is kept (no deferred
    /// release). A secret buffer's chunk is wiped now, after its last access.
    /// The slot is reissued later with the next generation, or retired at the
    /// maximum generation (MEM-4); old handles fail from now on.
    pub fn release(&mut self, who: Principal, handle: BufferHandle) -> Result<(), PoolError> {
        let b = self.owned(handle, who)?;
        b.require_unleased()?;
        let b = self
            .buffers
            .remove(handle.key())
            .ok_or(PoolError::StaleHandle {
                kind: HandleKind::Buffer,
            })?;
        if b.secret {
            self.backing.wipe(b.chunk);
        }
        self.backing.put_chunk(b.chunk);
        let chunk_size = self.backing.chunk_size();
        self.classes.refund(b.class, u64::from(chunk_size));
        self.ledger.fragmentation -= u64::from(chunk_size - b.capacity);
        self.ledger.live_data -= u64::from(b.valid);
        if let Some(slot) = b.module_slot
            && let Some(m) = self.modules.get_mut_by_slot(slot)
        {
            m.buffers -= 1;
            m.pool_bytes -= u64::from(chunk_size);
        }
        Ok(())
    }

    // ---- helpers shared with the other `impl Region` blocks ----

    pub(crate) fn check_region(&self, region: RegionId, kind: HandleKind) -> Result<(), PoolError> {
        if region == self.id {
            Ok(())
        } else {
            Err(PoolError::WrongRegion {
                kind,
                expected: self.id,
                found: region,
            })
        }
    }

    pub(crate) fn buffer_handle(&self, key: Key) -> BufferHandle {
        BufferHandle::from_parts(self.id, key.slot, key.generation)
    }

    /// SPEC MEM-4/MEM-5: region, then generation.
    pub(crate) fn buffer(&self, handle: BufferHandle) -> Result<&Buffer, PoolError> {
        self.check_region(handle.region(), BufferHandle::KIND)?;
        self.buffers
            .get(handle.key())
            .ok_or(PoolError::StaleHandle {
                kind: BufferHandle::KIND,
            })
    }

    pub(crate) fn buffer_mut(&mut self, key: Key) -> Result<&mut Buffer, PoolError> {
        self.buffers.get_mut(key).ok_or(PoolError::StaleHandle {
            kind: BufferHandle::KIND,
        })
    }

    /// SPEC MEM-5: region, generation, then owner.
    pub(crate) fn owned(&self, handle: BufferHandle, who: Principal) -> Result<&Buffer, PoolError> {
        let b = self.buffer(handle)?;
        if b.owner != who {
            return Err(PoolError::NotOwner {
                kind: HandleKind::Buffer,
            });
        }
        Ok(b)
    }

    pub(crate) fn bytes(&self, chunk: u32, offset: u32, len: u32) -> Result<&[u8], PoolError> {
        self.backing
            .slice(chunk, offset, len)
            .ok_or(PoolError::OutOfRange {
                offset,
                length: len,
                bound: self.backing.chunk_size(),
            })
    }

    /// Copies `data` into the buffer at `offset` (within capacity) and extends
    /// the written prefix if the write touches it. Access rights are the
    /// caller's business.
    pub(crate) fn write_bytes(
        &mut self,
        key: Key,
        offset: u32,
        data: &[u8],
    ) -> Result<(), PoolError> {
        let b = self.buffers.get(key).ok_or(PoolError::StaleHandle {
            kind: BufferHandle::KIND,
        })?;
        let (chunk, capacity, filled) = (b.chunk, b.capacity, b.filled);
        let len = u32::try_from(data.len()).map_err(|_| PoolError::SizeOverflow {
            what: "write length as u32",
        })?;
        check_range(offset, len, capacity, 1)?;
        let dst = self
            .backing
            .slice_mut(chunk, offset, len)
            .ok_or(PoolError::OutOfRange {
                offset,
                length: len,
                bound: capacity,
            })?;
        dst.copy_from_slice(data);
        if offset <= filled {
            // offset + len <= capacity was checked above.
            let b = self.buffer_mut(key)?;
            b.filled = b.filled.max(offset + len);
        }
        Ok(())
    }

    /// Sets the valid length to `valid` if it grows and stays within the
    /// written prefix.
    pub(crate) fn publish(&mut self, key: Key, valid: u32) -> Result<(), PoolError> {
        let b = self.buffer_mut(key)?;
        if valid < b.valid {
            return Err(PoolError::InvalidRequest {
                reason: "commit cannot shrink the valid length; truncate explicitly",
            });
        }
        if valid > b.filled {
            return Err(PoolError::Unwritten {
                requested: valid,
                written: b.filled,
            });
        }
        let grown = valid - b.valid;
        b.valid = valid;
        self.ledger.live_data += u64::from(grown);
        self.touch();
        Ok(())
    }

    /// Updates the high-water marks after a change (MEM-3, MEM-9(8)).
    pub(crate) fn touch(&mut self) {
        let used_chunks = self.backing.chunk_count() - self.backing.free_chunks();
        let chunk_bytes = u64::from(used_chunks) * u64::from(self.backing.chunk_size());
        let pending = self.requests.live();
        self.ledger.touch(chunk_bytes, pending);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        let backend_holds_memory = self.backend_holds_memory();
        for (_, b) in self.buffers.iter() {
            // A buffer in a request may still be accessed by its backend.
            if b.secret && b.request_refs == 0 {
                self.backing.wipe(b.chunk);
            }
        }
        if backend_holds_memory {
            self.backing.leak_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: Principal = Principal::new(1);

    fn region() -> Region {
        Region::new(RegionConfig::new(64, 2)).unwrap()
    }

    #[test]
    fn fresh_buffer_is_empty_and_write_does_not_publish() {
        let mut r = region();
        let h = r.acquire(APP, BufferSpec::new(Class::Scratch, 32)).unwrap();
        assert_eq!(r.buffer_info(h).unwrap().valid, 0);
        r.write(APP, h, 0, b"hello").unwrap();
        assert!(r.read(APP, Range::new(h, 0, 1)).is_err());
        r.commit(APP, h, 5).unwrap();
        assert_eq!(r.read(APP, Range::new(h, 0, 5)).unwrap(), b"hello");
    }

    #[test]
    fn commit_never_publishes_unwritten_bytes() {
        let mut r = region();
        let h = r.acquire(APP, BufferSpec::new(Class::Scratch, 32)).unwrap();
        r.write(APP, h, 8, b"gap").unwrap();
        assert_eq!(
            r.commit(APP, h, 11),
            Err(PoolError::Unwritten {
                requested: 11,
                written: 0
            })
        );
        r.write(APP, h, 0, &[1; 8]).unwrap();
        r.commit(APP, h, 8).unwrap();
    }

    #[test]
    fn writes_stay_within_capacity() {
        let mut r = region();
        let h = r.acquire(APP, BufferSpec::new(Class::Scratch, 16)).unwrap();
        assert!(matches!(
            r.write(APP, h, 10, &[0; 7]),
            Err(PoolError::OutOfRange { bound: 16, .. })
        ));
        r.write(APP, h, 10, &[0; 6]).unwrap();
    }

    #[test]
    fn non_owner_is_refused() {
        let mut r = region();
        let h = r.acquire(APP, BufferSpec::new(Class::Scratch, 16)).unwrap();
        let other = Principal::new(2);
        assert!(matches!(
            r.read(other, Range::new(h, 0, 0)),
            Err(PoolError::NotOwner { .. })
        ));
        assert!(matches!(
            r.release(other, h),
            Err(PoolError::NotOwner { .. })
        ));
        r.transfer(APP, h, other).unwrap();
        r.release(other, h).unwrap();
    }

    #[test]
    fn secret_buffer_is_wiped_on_release() {
        let mut r = Region::new(RegionConfig::new(16, 1)).unwrap();
        let h = r
            .acquire(APP, BufferSpec::new(Class::Scratch, 16).secret())
            .unwrap();
        r.write(APP, h, 0, &[0xAB; 16]).unwrap();
        let chunk = r.chunk_index(h).unwrap();
        r.release(APP, h).unwrap();
        assert_eq!(r.backing.slice(chunk, 0, 16).unwrap(), &[0; 16]);
    }

    #[test]
    fn capacity_larger_than_chunk_is_explicit() {
        let mut r = region();
        assert_eq!(
            r.acquire(APP, BufferSpec::new(Class::Scratch, 65)),
            Err(PoolError::CapacityTooLarge {
                requested: 65,
                chunk_size: 64
            })
        );
    }
}
