//! Receive chunks lent to the application without a copy, as a [`RecvBuf`]
//! it may modify in place (decrypt) before freezing it into [`Bytes`].
//!
//! A chunk handed out this way is neither read nor written by the driver,
//! nor lent to the kernel, until every `Bytes` and `RecvBuf` that shares it
//! is dropped — on any thread. The last drop puts the chunk's id on a
//! return list that the driver drains at its next poll and gives back to
//! the kernel. The pool's mapping is kept alive by each chunk, so a `Bytes`
//! may even outlive the driver.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use dtp_codec::FrameBuf;
use dtp_pool::MappingGuard;

/// Chunk ids whose last `Bytes` was dropped, waiting for the driver, and
/// how many chunks are lent out.
#[derive(Default)]
pub(crate) struct Returns {
    ids: Mutex<Vec<u16>>,
    lent: AtomicUsize,
}

impl Returns {
    /// Chunks lent out and not yet dropped (read by the driver's thread to
    /// decide whether to lend more or copy).
    pub(crate) fn lent(&self) -> usize {
        self.lent.load(Ordering::Relaxed)
    }

    /// Takes every returned id (called by the driver's thread at each poll).
    pub(crate) fn drain(&self, out: &mut Vec<u16>) {
        // A poisoned lock only means a thread panicked while pushing an id;
        // the list itself is still a valid Vec.
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        out.append(&mut ids);
    }
}

/// The owner behind a lent chunk's `Bytes`.
struct LentChunk {
    ptr: *mut u8,
    bid: u16,
    returns: Arc<Returns>,
    _mapping: MappingGuard,
}

// SAFETY: the driver neither reads nor writes the bytes behind `ptr`, nor
// lends the chunk to the kernel, until `bid` is returned by `Drop`, and the
// mapping is held by `_mapping`. Reads and writes through a `RecvBuf`,
// which owns a range no other handle covers (see `RecvBuf`), and reads of
// a frozen range are therefore sound from any thread.
unsafe impl Send for LentChunk {}
// SAFETY: as above; `&LentChunk` itself hands out nothing: only the
// `RecvBuf` or frozen range holding it reaches the bytes.
unsafe impl Sync for LentChunk {}

impl Drop for LentChunk {
    fn drop(&mut self) {
        let mut ids = self.returns.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.push(self.bid);
        self.returns.lent.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Wraps `len` valid bytes at `ptr` of chunk `bid` as a [`RecvBuf`] the
/// receiver may modify. `ptr` must carry write permission for the chunk
/// (derived from the pool's raw region, not from a shared slice); the
/// bytes are initialised and stay untouched by the driver until `bid`
/// comes back through `returns` (what [`LentChunk`]'s impls rely on).
pub(crate) fn lend_mut(
    ptr: *mut u8,
    len: usize,
    bid: u16,
    returns: &Arc<Returns>,
    mapping: MappingGuard,
) -> RecvBuf {
    returns.lent.fetch_add(1, Ordering::Relaxed);
    RecvBuf(Repr::Lent {
        chunk: Arc::new(LentChunk {
            ptr,
            bid,
            returns: returns.clone(),
            _mapping: mapping,
        }),
        start: 0,
        end: len,
    })
}

/// Received bytes owned exclusively: a range of a lent receive chunk (no
/// copy), or bytes in ordinary memory. They can be modified in place — a
/// DTP frame is decrypted where the kernel wrote it (SPEC ENC-2) — split
/// into frames, and frozen into [`Bytes`] that keep the chunk lent.
///
/// Ranges of one chunk never overlap: a `RecvBuf` is not `Clone`,
/// [`RecvBuf::split_to`] divides its own range in two, and
/// [`FrameBuf::freeze`] consumes it. That is what makes the mutable access
/// sound while several of them share the chunk.
pub struct RecvBuf(Repr);

enum Repr {
    Heap(BytesMut),
    Lent {
        chunk: Arc<LentChunk>,
        start: usize,
        end: usize,
    },
}

impl RecvBuf {
    /// Bytes in this buffer.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Heap(b) => b.len(),
            Repr::Lent { start, end, .. } => end - start,
        }
    }

    /// Whether no bytes are left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the bytes are still in a lent receive chunk.
    pub fn is_lent(&self) -> bool {
        matches!(self.0, Repr::Lent { .. })
    }

    /// Splits off the first `at` bytes (all of them if `at` is larger).
    pub fn split_to(&mut self, at: usize) -> RecvBuf {
        match &mut self.0 {
            Repr::Heap(b) => {
                let at = at.min(b.len());
                RecvBuf(Repr::Heap(b.split_to(at)))
            }
            Repr::Lent { chunk, start, end } => {
                let mid = (*start + at).min(*end);
                let head = Repr::Lent {
                    chunk: chunk.clone(),
                    start: *start,
                    end: mid,
                };
                *start = mid;
                RecvBuf(head)
            }
        }
    }
}

impl Default for RecvBuf {
    /// An empty buffer (no allocation).
    fn default() -> Self {
        RecvBuf(Repr::Heap(BytesMut::new()))
    }
}

impl From<BytesMut> for RecvBuf {
    fn from(b: BytesMut) -> Self {
        RecvBuf(Repr::Heap(b))
    }
}

impl Deref for RecvBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Heap(b) => b,
            Repr::Lent { chunk, start, end } => {
                // SAFETY: `start <= end <= chunk.len` (only `split_to` moves
                // them, clamped to `end`), so the range lies in the lent
                // chunk, which stays mapped and untouched by the driver
                // while `chunk` lives (see the Send impl of `LentChunk`).
                unsafe { std::slice::from_raw_parts(chunk.ptr.wrapping_add(*start), end - start) }
            }
        }
    }
}

impl DerefMut for RecvBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Repr::Heap(b) => b,
            Repr::Lent { chunk, start, end } => {
                // SAFETY: in bounds as in `deref`; `ptr` carries write
                // permission (`lend_mut`); no other `RecvBuf` or frozen
                // `Bytes` covers `start..end` (the type's invariant), and
                // `&mut self` excludes every other use of this one.
                unsafe {
                    std::slice::from_raw_parts_mut(chunk.ptr.wrapping_add(*start), *end - *start)
                }
            }
        }
    }
}

impl FrameBuf for RecvBuf {
    fn freeze(self) -> Bytes {
        match self.0 {
            Repr::Heap(b) => b.freeze(),
            Repr::Lent { chunk, start, end } => Bytes::from_owner(Frozen { chunk, start, end }),
        }
    }
}

impl std::fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBuf")
            .field("len", &self.len())
            .field("lent", &self.is_lent())
            .finish()
    }
}

/// A frozen range of a lent chunk: the owner behind [`RecvBuf::freeze`]'s
/// `Bytes`. Its range is read-only from now on.
struct Frozen {
    chunk: Arc<LentChunk>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for Frozen {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the range came from a `RecvBuf` (in bounds, owned by no
        // other handle) and is never written again: the `RecvBuf` was
        // consumed to make this owner.
        unsafe {
            std::slice::from_raw_parts(
                self.chunk.ptr.wrapping_add(self.start),
                self.end - self.start,
            )
        }
    }
}
