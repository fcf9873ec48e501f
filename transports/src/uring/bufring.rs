//! The provided buffer ring the io_uring backend shares with the kernel:
//! the core's receive chunks, handed to the kernel for multishot receives
//! and given back after each is read.

use std::alloc::{self, Layout};
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;

/// The provided buffer ring shared with the kernel: `entries` slots of 16
/// bytes in one page-aligned allocation; the kernel reads the tail from the
/// first entry's reserved field.
pub(super) struct BufRing {
    base: NonNull<BufRingEntry>,
    layout: Layout,
    mask: u16,
    tail: u16,
    /// Buffers pushed and not yet taken by a completion: what the kernel
    /// has (or will have, once published) to receive into.
    given: usize,
}

impl BufRing {
    pub(super) fn new(entries: u16) -> io::Result<Self> {
        let size = usize::from(entries) * std::mem::size_of::<BufRingEntry>();
        let layout = Layout::from_size_align(size.max(4096), 4096)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let base = NonNull::new(raw.cast::<BufRingEntry>()).ok_or_else(|| {
            io::Error::new(io::ErrorKind::OutOfMemory, "buffer ring allocation failed")
        })?;
        Ok(Self {
            base,
            layout,
            mask: entries - 1,
            tail: 0,
            given: 0,
        })
    }

    /// Writes an entry at the local tail; the kernel sees it after `publish`.
    /// The ring's address, for registering it with the kernel.
    pub(super) fn address(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    pub(super) fn push(&mut self, addr: u64, len: u32, bid: u16) {
        let index = usize::from(self.tail & self.mask);
        // SAFETY: `index` < entries, so the entry lies inside the allocation;
        // the kernel reads only entries before the published tail, and this
        // one is at or after it, so nothing else accesses it now.
        let entry = unsafe { &mut *self.base.as_ptr().wrapping_add(index) };
        entry.set_addr(addr);
        entry.set_len(len);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        self.given += 1;
    }

    /// A completion took one buffer.
    pub(super) fn taken(&mut self) {
        self.given = self.given.saturating_sub(1);
    }

    /// Buffers the kernel has to receive into, published or about to be.
    pub(super) fn available(&self) -> usize {
        self.given
    }

    /// Makes every pushed entry visible to the kernel (release store).
    pub(super) fn publish(&self) {
        // SAFETY: `base` is the first entry of the ring (page-aligned,
        // initialised by alloc_zeroed); the tail field is a u16 the kernel
        // reads with acquire semantics, and AtomicU16 has u16's layout.
        let tail_ptr = unsafe { BufRingEntry::tail(self.base.as_ptr()) }.cast::<AtomicU16>();
        // SAFETY: `tail_ptr` points at the ring's live, aligned u16 tail
        // field (see above); AtomicU16 has u16's size and alignment.
        let tail = unsafe { &*tail_ptr };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the ring that used it
        // is closed before (see `Uring`'s Drop).
        unsafe { alloc::dealloc(self.base.as_ptr().cast(), self.layout) };
    }
}
