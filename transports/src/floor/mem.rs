//! The floor's memory, all of it mapped and faulted in before the first
//! connection: the receive buffers and the provided-buffer ring the kernel
//! picks them from, the output chunks, and the few words the kernel writes
//! outside them (the stop event's counter, the accept back-off timeout).

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::{BufRingEntry, Timespec};

/// Anonymous memory mapped with `MAP_POPULATE`: page-aligned, zeroed and
/// faulted in at once, so the hot path never takes a page fault on it.
struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

impl Region {
    fn new(len: usize) -> io::Result<Self> {
        let len = len.max(1);
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // named, and the result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(raw.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Self { ptr, len })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the mapping made in `new`; the
        // owner drops it only once the kernel can no longer touch it (see
        // `Memory`'s users in the worker).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The receive buffers and their provided-buffer ring.
pub(super) struct RecvBufs {
    bufs: Region,
    ring: Region,
    size: u32,
    count: u16,
    mask: u16,
    tail: u16,
}

impl RecvBufs {
    /// `count` (a power of two, at most 32768) buffers of `size` bytes.
    pub(super) fn new(size: u32, count: u16) -> io::Result<Self> {
        if !count.is_power_of_two() || count > 1 << 15 || size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "receive buffers: {count} of {size} bytes (the count must be a power of two up to 32768)"
                ),
            ));
        }
        let bufs = Region::new(size as usize * usize::from(count))?;
        let ring = Region::new(usize::from(count) * std::mem::size_of::<BufRingEntry>())?;
        let mut this = Self {
            bufs,
            ring,
            size,
            count,
            mask: count - 1,
            tail: 0,
        };
        for bid in 0..count {
            this.give_back(bid);
        }
        this.publish();
        Ok(this)
    }

    /// The ring's address, for `IORING_REGISTER_PBUF_RING`.
    pub(super) fn ring_addr(&self) -> u64 {
        self.ring.ptr.as_ptr() as u64
    }

    pub(super) fn count(&self) -> u16 {
        self.count
    }

    /// Puts buffer `bid` back in the ring (seen by the kernel after
    /// [`RecvBufs::publish`]).
    pub(super) fn give_back(&mut self, bid: u16) {
        let index = usize::from(self.tail & self.mask);
        let addr = self.bufs.ptr.as_ptr() as u64 + u64::from(bid) * u64::from(self.size);
        // SAFETY: `index` < count, so the entry lies inside the ring's
        // mapping; the kernel reads only entries before the published tail
        // and this one is at or after it.
        let entry = unsafe {
            &mut *self
                .ring
                .ptr
                .as_ptr()
                .cast::<BufRingEntry>()
                .wrapping_add(index)
        };
        entry.set_addr(addr);
        entry.set_len(self.size);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes every buffer given back visible to the kernel (release store).
    pub(super) fn publish(&self) {
        // SAFETY: the ring's first entry is live and page-aligned; its
        // reserved field is the ring's tail.
        let tail_ptr = unsafe { BufRingEntry::tail(self.ring.ptr.as_ptr().cast::<BufRingEntry>()) };
        // SAFETY: `tail_ptr` points at that live, aligned u16, which
        // AtomicU16 matches in size and alignment; the kernel reads it with
        // acquire semantics.
        let tail = unsafe { &*tail_ptr.cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The `len` bytes at `off` in buffer `bid`, which the kernel filled.
    ///
    /// Callers pass a `bid` and length from a receive completion, for a
    /// buffer not yet given back: the kernel no longer writes it.
    pub(super) fn data(&self, bid: u16, off: u32, len: u32) -> &[u8] {
        let bid = bid & self.mask;
        let off = off.min(self.size);
        let len = len.min(self.size - off);
        let start = bid as usize * self.size as usize + off as usize;
        // SAFETY: `start + len` lies inside the mapping (bid < count, off +
        // len <= size, clamped above); the buffer is out of the ring, so
        // nothing writes it while this shared borrow lives.
        unsafe {
            std::slice::from_raw_parts(self.bufs.ptr.as_ptr().wrapping_add(start), len as usize)
        }
    }
}

/// Output chunks: one per connection that has something to send, taken
/// and given back as its sends complete, so an idle connection holds none.
pub(super) struct OutPool {
    region: Region,
    chunk: u32,
    free: Vec<u16>,
}

impl OutPool {
    pub(super) fn new(chunk: u32, count: u16) -> io::Result<Self> {
        if chunk < 64 || count == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("output chunks: {count} of {chunk} bytes (at least one of 64 bytes)"),
            ));
        }
        let region = Region::new(chunk as usize * usize::from(count))?;
        // Given out from the end: the most recently used chunk first, warm
        // in the cache.
        let free = (0..count).rev().collect();
        Ok(Self {
            region,
            chunk,
            free,
        })
    }

    pub(super) fn chunk_len(&self) -> u32 {
        self.chunk
    }

    pub(super) fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    pub(super) fn take(&mut self) -> Option<u16> {
        self.free.pop()
    }

    /// Gives a chunk back. The free list has room for every chunk, so this
    /// never allocates.
    pub(super) fn give_back(&mut self, id: u16) {
        self.free.push(id);
    }

    fn offset(&self, id: u16, from: u32) -> usize {
        let id = usize::from(id).min(self.region.len / self.chunk as usize - 1);
        id * self.chunk as usize + from.min(self.chunk) as usize
    }

    /// The bytes of chunk `id` from `from` to its end: the part no send is
    /// reading (sends read only before the connection's output length).
    pub(super) fn tail_mut(&mut self, id: u16, from: u32) -> &mut [u8] {
        let start = self.offset(id, from);
        let len = self.chunk.saturating_sub(from) as usize;
        // SAFETY: `start + len` ends at the end of chunk `id`, inside the
        // mapping; the kernel reads only bytes before `from` (the
        // connection's output length) of this chunk, so this exclusive
        // borrow aliases nothing.
        unsafe { std::slice::from_raw_parts_mut(self.region.ptr.as_ptr().wrapping_add(start), len) }
    }

    /// The address of byte `from` of chunk `id`, for a send.
    pub(super) fn ptr(&self, id: u16, from: u32) -> *const u8 {
        self.region.ptr.as_ptr().wrapping_add(self.offset(id, from))
    }
}

/// Everything the kernel may read or write while an operation runs. It is
/// dropped only once no operation is pending (or leaked, see the worker).
pub(super) struct Memory {
    pub(super) recv: RecvBufs,
    pub(super) out: OutPool,
    /// Where the stop eventfd's read lands.
    pub(super) stop_word: Box<u64>,
    /// The accept back-off timeout.
    pub(super) backoff: Box<Timespec>,
}
