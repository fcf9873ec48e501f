//! The backing allocation: one page-aligned block cut into fixed-size chunks
//! (SPEC MEM-2), plus the free-chunk stack.
//!
//! Owns the only raw memory of the crate and every `unsafe` block that turns
//! it into slices. It never decides *whether* an access is allowed — the
//! region checks handles, ranges, owners and leases first — it only checks
//! that an access stays inside one chunk, so that each slice it creates is in
//! bounds. Addresses are stable for the region's life, which is what lets an
//! io_uring driver register the whole block ([`RawRegion`]) or hand single
//! chunks to the kernel ([`RawSpan`]).

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::error::PoolError;
use crate::handle::try_reserve;

/// Alignment of the backing allocation: one page, as io_uring buffer
/// registration and O_DIRECT want.
pub const BACKING_ALIGN: usize = 4096;

/// The raw view of a region's backing, for registering it with a kernel
/// (io_uring `IORING_REGISTER_BUFFERS` with one iovec, or one iovec per chunk).
///
/// Chunk `i` starts at `ptr + i * chunk_size`. The addresses stay valid and
/// stable until the region is dropped (and beyond, if it is dropped with
/// submitted work: see [`crate::Region`]'s drop note). Writing through them is
/// only sound within the rules of [`crate::Region::submit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRegion {
    ptr: NonNull<u8>,
    len: usize,
    chunk_size: u32,
    chunk_count: u32,
}

impl RawRegion {
    /// Start of the allocation (page-aligned).
    pub const fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the allocation in bytes, including the rounding up to a whole
    /// page at the end.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region has at least one chunk.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes per chunk.
    pub const fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// Number of chunks.
    pub const fn chunk_count(&self) -> u32 {
        self.chunk_count
    }

    /// Start of chunk `index`, or `None` if there is no such chunk.
    pub fn chunk_ptr(&self, index: u32) -> Option<NonNull<u8>> {
        if index >= self.chunk_count {
            return None;
        }
        let offset = index as usize * self.chunk_size as usize;
        // `offset < len` because index < chunk_count; `wrapping_add` keeps this
        // safe code and stays in the allocation.
        NonNull::new(self.ptr.as_ptr().wrapping_add(offset))
    }
}

// SAFETY: `RawRegion` is an address and sizes; it grants no access by itself
// (every dereference is the user's own `unsafe`), so moving or sharing it
// between threads cannot cause a data race.
unsafe impl Send for RawRegion {}
// SAFETY: as above; `&RawRegion` only exposes copies of the address.
unsafe impl Sync for RawRegion {}

/// A span inside one chunk handed to a backend for one request
/// ([`crate::Submission`]).
///
/// The backend may read an input span and write an output span through these
/// pointers from any thread until it posts the request's completion; after the
/// post it must not touch them again (SPEC MEM-6: "the asynchronous backend
/// ends its access before posting the final completion").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSpan {
    ptr: NonNull<u8>,
    len: u32,
    chunk: u32,
    offset: u32,
}

impl RawSpan {
    /// Start of the span, for reading.
    pub const fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Start of the span, for writing (output spans only).
    pub const fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the span in bytes.
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether the span is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the chunk holding the span (io_uring `buf_index` / `bid`).
    pub const fn chunk_index(&self) -> u32 {
        self.chunk
    }

    /// Offset of the span inside its chunk.
    pub const fn offset_in_chunk(&self) -> u32 {
        self.offset
    }
}

// SAFETY: a `RawSpan` is an address and sizes; using it requires the holder's
// own `unsafe` under the submission contract, so sending it is harmless.
unsafe impl Send for RawSpan {}
// SAFETY: as above.
unsafe impl Sync for RawSpan {}

/// The anonymous mapping behind a backing; unmapped when the last holder
/// (the backing, or a [`MappingGuard`]) lets go.
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `Mapping` is an address range and owns nothing but the right to
// unmap it once; it never reads or writes through the pointer.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared references only compare or drop it.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+len` is the mapping made in `Backing::new`; this
        // is the last holder, so it is unmapped exactly once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Keeps a region's backing mapped while it lives, even after the region
/// itself is dropped: for memory lent out beyond the region's lifetime (a
/// receive chunk handed to an application as a `bytes::Bytes`). It gives no
/// access to the memory; whoever lent the memory answers for that.
#[derive(Clone, Debug)]
pub struct MappingGuard {
    _mapping: std::sync::Arc<Mapping>,
}

/// One page-aligned allocation, zero-filled, cut into chunks, with a stack of
/// free chunk indices.
#[derive(Debug)]
pub(crate) struct Backing {
    ptr: NonNull<u8>,
    mapping: std::sync::Arc<Mapping>,
    layout: Layout,
    chunk_size: u32,
    chunk_count: u32,
    free: Vec<u32>,
    /// Set when a backend may still access the memory at drop time.
    leak: bool,
}

// SAFETY: `Backing` owns its allocation exclusively (like a `Box<[u8]>`); no
// other `Backing` aliases it, so moving it to another thread is sound. It is
// deliberately not `Sync`: the region that owns it is single-threaded.
unsafe impl Send for Backing {}

impl Backing {
    /// Allocates `chunk_count * chunk_size` bytes rounded up to a whole page,
    /// aligned to [`BACKING_ALIGN`], zero-filled so every byte is initialised.
    pub(crate) fn new(chunk_size: u32, chunk_count: u32) -> Result<Self, PoolError> {
        let raw = u64::from(chunk_size) * u64::from(chunk_count);
        let rounded =
            raw.checked_next_multiple_of(BACKING_ALIGN as u64)
                .ok_or(PoolError::SizeOverflow {
                    what: "backing size rounded to a page",
                })?;
        let size = usize::try_from(rounded).map_err(|_| PoolError::SizeOverflow {
            what: "backing size as usize",
        })?;
        let layout =
            Layout::from_size_align(size, BACKING_ALIGN).map_err(|_| PoolError::SizeOverflow {
                what: "backing layout (size exceeds isize::MAX)",
            })?;
        let mut free = Vec::new();
        try_reserve(&mut free, chunk_count as usize)?;
        free.extend((0..chunk_count).rev());
        if layout.size() == 0 {
            return Err(PoolError::InvalidConfig {
                reason: "backing would be empty",
            });
        }
        // An anonymous private mapping: page-aligned, zero-filled by the
        // kernel, and resident only where touched — reserved capacity is not
        // RSS (MEM-3). (The global allocator would memset an over-aligned
        // zeroed block, making all of it resident at once.)
        // SAFETY: no address hint, a non-zero length (checked above), no fd;
        // the kernel chooses an unused range and returns MAP_FAILED or it.
        let raw_ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw_ptr == libc::MAP_FAILED {
            return Err(PoolError::AllocationFailed { bytes: rounded });
        }
        let ptr = NonNull::new(raw_ptr.cast::<u8>())
            .ok_or(PoolError::AllocationFailed { bytes: rounded })?;
        Ok(Self {
            ptr,
            mapping: std::sync::Arc::new(Mapping {
                ptr,
                len: layout.size(),
            }),
            layout,
            chunk_size,
            chunk_count,
            free,
            leak: false,
        })
    }

    pub(crate) fn raw(&self) -> RawRegion {
        RawRegion {
            ptr: self.ptr,
            len: self.layout.size(),
            chunk_size: self.chunk_size,
            chunk_count: self.chunk_count,
        }
    }

    pub(crate) fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    pub(crate) fn chunk_count(&self) -> u32 {
        self.chunk_count
    }

    pub(crate) fn allocation_bytes(&self) -> u64 {
        self.layout.size() as u64
    }

    pub(crate) fn free_chunks(&self) -> u32 {
        // At most `chunk_count` entries, which is a `u32`.
        u32::try_from(self.free.len()).unwrap_or(u32::MAX)
    }

    /// Heap bytes of the free-chunk stack (MEM-3 metadata).
    pub(crate) fn metadata_bytes(&self) -> u64 {
        (self.free.capacity() * core::mem::size_of::<u32>()) as u64
    }

    /// Takes a free chunk.
    pub(crate) fn take_chunk(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a chunk taken with [`Self::take_chunk`].
    pub(crate) fn put_chunk(&mut self, chunk: u32) {
        // Capacity for every chunk was reserved at construction, so this never
        // reallocates.
        self.free.push(chunk);
    }

    /// Byte offset of `offset..offset+len` inside chunk `chunk` from the start
    /// of the allocation, if it stays inside that chunk.
    fn span_start(&self, chunk: u32, offset: u32, len: u32) -> Option<usize> {
        if chunk >= self.chunk_count {
            return None;
        }
        let end = u64::from(offset) + u64::from(len);
        if end > u64::from(self.chunk_size) {
            return None;
        }
        Some(chunk as usize * self.chunk_size as usize + offset as usize)
    }

    /// A raw span for a backend (no access is made here).
    pub(crate) fn span(&self, chunk: u32, offset: u32, len: u32) -> Option<RawSpan> {
        let start = self.span_start(chunk, offset, len)?;
        let ptr = NonNull::new(self.ptr.as_ptr().wrapping_add(start))?;
        Some(RawSpan {
            ptr,
            len,
            chunk,
            offset,
        })
    }

    /// The bytes `offset..offset+len` of chunk `chunk`.
    ///
    /// Callers (the region) guarantee that no backend writes this chunk while
    /// the slice lives: a chunk a backend may write is write-leased, and the
    /// region refuses every read of a write-leased buffer.
    pub(crate) fn slice(&self, chunk: u32, offset: u32, len: u32) -> Option<&[u8]> {
        let start = self.span_start(chunk, offset, len)?;
        let ptr = self.ptr.as_ptr().wrapping_add(start);
        // SAFETY: `span_start` proved `start + len <= chunk_count * chunk_size
        // <= layout.size()`, so `ptr..ptr+len` is inside the live,
        // zero-initialised allocation; no `&mut` to it exists while `&self` is
        // borrowed, and the region's lease rules keep backends from writing it
        // (see above).
        Some(unsafe { core::slice::from_raw_parts(ptr, len as usize) })
    }

    /// The bytes `offset..offset+len` of chunk `chunk`, writable.
    ///
    /// Callers guarantee no backend reads or writes this chunk while the slice
    /// lives: the region only writes buffers that carry no lease.
    pub(crate) fn slice_mut(&mut self, chunk: u32, offset: u32, len: u32) -> Option<&mut [u8]> {
        let start = self.span_start(chunk, offset, len)?;
        let ptr = self.ptr.as_ptr().wrapping_add(start);
        // SAFETY: in bounds as in `slice`; `&mut self` excludes every other
        // slice into the allocation, and the lease rules exclude backends.
        Some(unsafe { core::slice::from_raw_parts_mut(ptr, len as usize) })
    }

    /// SPEC MEM-6: overwrites a whole chunk with zeros using volatile stores,
    /// so the compiler cannot drop the wipe even right before deallocation.
    /// This wipes only this chunk; copies the caller made elsewhere are theirs.
    pub(crate) fn wipe(&mut self, chunk: u32) {
        let Some(bytes) = self.slice_mut(chunk, 0, self.chunk_size) else {
            return;
        };
        for b in bytes.iter_mut() {
            // SAFETY: `b` is a valid, aligned, exclusive `&mut u8`.
            unsafe { core::ptr::write_volatile(b, 0) };
        }
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    }

    /// Makes drop give up the allocation without freeing it: used when a region is
    /// dropped while a backend may still access its memory (SPEC MEM-7: a
    /// timeout or teardown never frees memory a backend may still touch).
    pub(crate) fn leak_on_drop(&mut self) {
        self.leak = true;
    }
}

impl Backing {
    pub(crate) fn mapping_guard(&self) -> MappingGuard {
        MappingGuard {
            _mapping: self.mapping.clone(),
        }
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        if self.leak {
            // A backend may still access the memory: never unmap it.
            std::mem::forget(self.mapping.clone());
        }
        // Otherwise dropping `mapping` unmaps, unless a guard still holds it.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_guard_outlives_the_backing() {
        let b = Backing::new(4096, 2).unwrap();
        let guard = b.mapping_guard();
        let ptr = b.raw().as_ptr();
        drop(b);
        // SAFETY: the guard keeps the mapping alive; the bytes were zeroed by
        // the kernel and nothing else writes them. Were it unmapped, this read
        // would fault and fail the test.
        let byte = unsafe { std::ptr::read_volatile(ptr) };
        assert_eq!(byte, 0);
        drop(guard);
    }

    #[test]
    fn backing_is_page_aligned_and_rounded() {
        let b = Backing::new(100, 3).unwrap();
        let raw = b.raw();
        assert_eq!(raw.as_ptr() as usize % BACKING_ALIGN, 0);
        assert_eq!(raw.len(), 4096);
        assert_eq!(
            raw.chunk_ptr(2).unwrap().as_ptr() as usize - raw.as_ptr() as usize,
            200
        );
        assert!(raw.chunk_ptr(3).is_none());
    }

    #[test]
    fn slices_stay_inside_one_chunk() {
        let mut b = Backing::new(16, 2).unwrap();
        assert!(b.slice(0, 8, 8).is_some());
        assert!(b.slice(0, 8, 9).is_none());
        assert!(b.slice(2, 0, 1).is_none());
        assert!(b.slice(0, u32::MAX, u32::MAX).is_none());
        b.slice_mut(1, 0, 4).unwrap().copy_from_slice(b"abcd");
        assert_eq!(b.slice(1, 0, 4).unwrap(), b"abcd");
        assert_eq!(b.slice(0, 0, 16).unwrap(), &[0; 16]);
    }

    #[test]
    fn wipe_zeroes_the_chunk() {
        let mut b = Backing::new(8, 1).unwrap();
        b.slice_mut(0, 0, 8).unwrap().fill(0xAA);
        b.wipe(0);
        assert_eq!(b.slice(0, 0, 8).unwrap(), &[0; 8]);
    }

    #[test]
    fn huge_backing_fails_explicitly() {
        // 2^51 bytes is beyond any user address space: the allocator refuses.
        let err = Backing::new(1 << 31, 1 << 20).unwrap_err();
        assert!(matches!(err, PoolError::AllocationFailed { .. }), "{err:?}");
    }
}
