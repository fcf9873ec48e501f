//! SPEC MEM-3: the process's heap, counted — the "external" category.
//!
//! The regions budget the IO buffers. Everything else a process holds on the
//! general heap (connection state, resume caches, DAG holds, agreements,
//! stream ledgers, terminal state, HTTP and WebSocket assembly, library
//! allocations) is outside every region's ceiling. [`CountingAlloc`] wraps
//! the system allocator and counts those bytes, so that a report can give
//! them as external with a real figure instead of leaving them unmeasured
//! (and so that the ceiling claim is visibly void while they exist).
//!
//! A binary opts in:
//!
//! ```ignore
//! #[global_allocator]
//! static HEAP: dtp_pool::CountingAlloc = dtp_pool::CountingAlloc::new();
//! ```
//!
//! The count is one relaxed atomic add per allocation and free; the data
//! plane's hot paths allocate from the regions, not from here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes live on the heap of this process, if [`CountingAlloc`] is its
/// global allocator (else 0).
static LIVE: AtomicU64 = AtomicU64::new(0);
/// The most bytes live at once.
static PEAK: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting live bytes ([`heap_bytes`]).
#[derive(Debug, Default)]
pub struct CountingAlloc;

impl CountingAlloc {
    /// The allocator (for a `#[global_allocator]` static).
    pub const fn new() -> Self {
        CountingAlloc
    }
}

/// Bytes live on the process's heap and their peak, when [`CountingAlloc`]
/// is the global allocator; `None` otherwise (nothing was ever counted).
pub fn heap_bytes() -> Option<(u64, u64)> {
    let peak = PEAK.load(Ordering::Relaxed);
    (peak > 0).then(|| (LIVE.load(Ordering::Relaxed), peak))
}

fn grew(by: usize) {
    let now = LIVE.fetch_add(by as u64, Ordering::Relaxed) + by as u64;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(by as u64, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counting touches only two
// atomics and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as the caller gave it (non-zero size: the
        // caller's contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (that is, from `System`)
        // with `layout`: the caller's contract.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`, and `new_size` is the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrank(layout.size());
            grew(new_size);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counter follows allocations made through it (called directly:
    /// a test binary's global allocator is the system's).
    #[test]
    fn allocations_through_it_are_counted_and_freed() {
        let a = CountingAlloc::new();
        let layout = Layout::from_size_align(4096, 8).unwrap_or(Layout::new::<u8>());
        let before = LIVE.load(Ordering::Relaxed);
        // SAFETY: a non-zero layout; freed below with the same layout.
        let p = unsafe { a.alloc(layout) };
        assert!(!p.is_null());
        assert_eq!(LIVE.load(Ordering::Relaxed), before + 4096);
        assert!(heap_bytes().is_some_and(|(_, peak)| peak >= 4096));
        // SAFETY: `p` came from `a.alloc(layout)`; grown to 8 KiB.
        let p = unsafe { a.realloc(p, layout, 8192) };
        assert!(!p.is_null());
        assert_eq!(LIVE.load(Ordering::Relaxed), before + 8192);
        let grown = Layout::from_size_align(8192, 8).unwrap_or(layout);
        // SAFETY: `p` came from `realloc` with the grown layout.
        unsafe { a.dealloc(p, grown) };
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
    }
}
