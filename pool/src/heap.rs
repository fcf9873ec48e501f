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
//! The count costs a thread-local add per allocation and free: each thread
//! keeps what it allocated and freed since it last reported, and adds that
//! to the process's count once it reaches [`FLUSH_BYTES`] either way. A
//! shared atomic touched on every allocation was measured at about 6% of a
//! gateway's CPU under the control workload, its cache line bouncing
//! between the shards and the control thread. The figure is therefore
//! exact to within [`FLUSH_BYTES`] per thread (and a thread that exits
//! leaves at most that much unreported).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// How far a thread's own count may drift from the process's before it
/// reports (bytes, either way).
pub(crate) const FLUSH_BYTES: i64 = 64 * 1024;

/// Bytes live on the heap of this process, if [`CountingAlloc`] is its
/// global allocator (else 0), as the threads last reported them (signed:
/// one thread may free what another allocated before either reports).
static LIVE: AtomicI64 = AtomicI64::new(0);
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
    let live = u64::try_from(LIVE.load(Ordering::Relaxed)).unwrap_or(0);
    (peak > 0).then_some((live, peak))
}

thread_local! {
    /// What this thread allocated less what it freed since it last
    /// reported. A `const` cell without a destructor: usable from the
    /// allocator at any point of the thread's life, allocating nothing.
    static UNREPORTED: Cell<i64> = const { Cell::new(0) };
}

/// Counts `delta` bytes (positive: allocated, negative: freed) on this
/// thread, reporting to the process's count past [`FLUSH_BYTES`].
fn count(delta: i64) {
    let report = UNREPORTED
        .try_with(|u| {
            let d = u.get() + delta;
            if d.abs() < FLUSH_BYTES {
                u.set(d);
                0
            } else {
                u.set(0);
                d
            }
        })
        .unwrap_or(delta);
    if report != 0 {
        let now = LIVE.fetch_add(report, Ordering::Relaxed) + report;
        if let Ok(now) = u64::try_from(now) {
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
    }
}

fn grew(by: usize) {
    count(i64::try_from(by).unwrap_or(i64::MAX));
}

fn shrank(by: usize) {
    count(-i64::try_from(by).unwrap_or(i64::MAX));
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
    /// a test binary's global allocator is the system's), to within
    /// FLUSH_BYTES: large steps are reported at once, small ones stay with
    /// the thread until they add up.
    #[test]
    #[allow(
        clippy::disallowed_methods,
        reason = "a test's own thread, so that nothing else counts on it"
    )]
    fn allocations_through_it_are_counted_and_freed() {
        std::thread::spawn(|| {
            let a = CountingAlloc::new();
            let mb = 1 << 20;
            let layout = Layout::from_size_align(mb, 8).unwrap_or(Layout::new::<u8>());
            let seen = || LIVE.load(Ordering::Relaxed);
            let near = |got: i64, want: i64| (got - want).abs() < FLUSH_BYTES;
            let before = seen();
            // SAFETY: a non-zero layout; freed below with the grown layout.
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null());
            assert!(near(seen(), before + mb as i64), "{} {before}", seen());
            assert!(heap_bytes().is_some_and(|(_, peak)| peak >= mb as u64));
            // SAFETY: `p` came from `a.alloc(layout)`; grown to 2 MiB.
            let p = unsafe { a.realloc(p, layout, 2 * mb) };
            assert!(!p.is_null());
            assert!(near(seen(), before + 2 * mb as i64));
            let grown = Layout::from_size_align(2 * mb, 8).unwrap_or(layout);
            // SAFETY: `p` came from `realloc` with the grown layout.
            unsafe { a.dealloc(p, grown) };
            assert!(near(seen(), before));

            let small = Layout::new::<[u8; 64]>();
            let before = seen();
            // SAFETY: a non-zero layout; freed below with the same one.
            let p = unsafe { a.alloc(small) };
            assert_eq!(seen(), before, "64 bytes were reported at once");
            // SAFETY: `p` came from `a.alloc(small)`.
            unsafe { a.dealloc(p, small) };
        })
        .join()
        .unwrap_or_else(|_| panic!("the counting thread panicked"));
    }
}
