//! Receive chunks lent to the application as [`Bytes`], without a copy.
//!
//! A chunk handed out this way is neither read nor written by the driver,
//! nor lent to the kernel, until every `Bytes` that shares it is dropped —
//! on any thread. The last drop puts the chunk's id on a return list that
//! the driver drains at its next poll and gives back to the kernel. The
//! pool's mapping is kept alive by each chunk, so a `Bytes` may even
//! outlive the driver.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use dtp_pool::MappingGuard;

/// Chunk ids whose last `Bytes` was dropped, waiting for the driver.
#[derive(Default)]
pub(crate) struct Returns {
    ids: Mutex<Vec<u16>>,
}

impl Returns {
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
    ptr: *const u8,
    len: usize,
    bid: u16,
    returns: Arc<Returns>,
    _mapping: MappingGuard,
}

// SAFETY: the bytes behind `ptr` are immutable while this owner lives (the
// driver neither writes them nor lends the chunk to the kernel until `bid`
// is returned by `Drop`), and the mapping is held by `_mapping`: reading
// them from any thread is sound.
unsafe impl Send for LentChunk {}
// SAFETY: as above; `&LentChunk` only hands out shared reads.
unsafe impl Sync for LentChunk {}

impl AsRef<[u8]> for LentChunk {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` lies in one chunk of the mapping kept alive
        // by `_mapping`, holds bytes the kernel wrote and the pool published as
        // valid before the chunk was lent, and nobody writes it while this
        // owner lives (see the Send impl).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for LentChunk {
    fn drop(&mut self) {
        let mut ids = self.returns.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.push(self.bid);
    }
}

/// Wraps `len` valid bytes at `ptr` of chunk `bid` as `Bytes`.
///
/// The caller (the driver) guarantees what [`LentChunk`]'s impls rely on:
/// the bytes are initialised and stay untouched until `bid` comes back
/// through `returns`.
pub(crate) fn lend(
    ptr: *const u8,
    len: usize,
    bid: u16,
    returns: &Arc<Returns>,
    mapping: MappingGuard,
) -> Bytes {
    Bytes::from_owner(LentChunk {
        ptr,
        len,
        bid,
        returns: returns.clone(),
        _mapping: mapping,
    })
}
