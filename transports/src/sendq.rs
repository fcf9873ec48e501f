//! A connection's bounded send queue: pool chunks in order, the head one
//! possibly in flight (SPEC TRN-2: `send` never blocks; a full queue is
//! backpressure, never growth).

use std::collections::VecDeque;

use dtp_pool::{BufferHandle, Ticket};

use crate::buffers::Buffers;

/// Why bytes were not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// The connection's send queue (or the core's send budget) is full:
    /// retry after a [`crate::Event::Writable`] (SPEC RES-4's BUFFER_FULL).
    BufferFull,
    /// The connection is closed or closing.
    Closed,
    /// No such connection (closed earlier, or an id from elsewhere).
    UnknownConnection,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::BufferFull => {
                "send queue full (BUFFER_FULL): wait until the connection is writable"
            }
            Self::Closed => "connection closed",
            Self::UnknownConnection => "unknown connection",
        })
    }
}

impl std::error::Error for SendError {}

/// At most this many queued chunks go out in one gathered send (one
/// `sendmsg`): 512 KiB of the load generator's 16 KiB chunks, 2 MiB of the
/// gateway's 64 KiB ones. Measured on loopback, one `stream` connection:
/// 1 chunk per send 3.0 GB/s, 8 4.2, 16 4.4, 64 4.5 (perf/README.md).
pub(crate) const GATHER_MAX: usize = 32;

struct Chunk {
    handle: BufferHandle,
    len: u32,
}

/// The chunks queued on one connection.
#[derive(Default)]
pub(crate) struct SendQueue {
    chunks: VecDeque<Chunk>,
    /// Bytes of the head chunk already sent.
    head_offset: u32,
    /// The requests of the send in flight on the head chunks, one per chunk
    /// it reads (io_uring only); empty when none is.
    in_flight: Vec<Ticket>,
    queued: usize,
    /// A producer was refused and waits to hear that room came back.
    pub(crate) wants_writable: bool,
    /// The refusal was the core's send chunks running out (not this
    /// connection's limit): room comes back when any connection frees one.
    pub(crate) starved_for_chunks: bool,
}

impl SendQueue {
    /// A producer asks to hear when the queue is at most half of `max`:
    /// true if it already is (report Writable now), else remembered for the
    /// send completion that gets it there.
    pub(crate) fn want_writable(&mut self, max: usize) -> bool {
        if self.queued <= max / 2 {
            true
        } else {
            self.wants_writable = true;
            false
        }
    }

    /// Bytes queued and not yet sent.
    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    pub(crate) fn in_flight(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Queues all of `bytes` or nothing: at most `max_queued` bytes may wait.
    pub(crate) fn push(
        &mut self,
        bufs: &mut Buffers,
        bytes: &[u8],
        max_queued: usize,
    ) -> Result<(), SendError> {
        if self.queued + bytes.len() > max_queued {
            self.wants_writable = true;
            return Err(SendError::BufferFull);
        }
        // Chunks needed beyond the room left in a tail that is not in flight.
        let tail_room = match self.chunks.back() {
            // The tail may be read by a send in flight: never append to it.
            Some(t) if self.in_flight.len() < self.chunks.len() => {
                (bufs.chunk_size() - t.len) as usize
            }
            _ => 0,
        };
        let chunk = bufs.chunk_size() as usize;
        let new_chunks = bytes.len().saturating_sub(tail_room).div_ceil(chunk);
        let mut fresh = Vec::with_capacity(new_chunks);
        for _ in 0..new_chunks {
            match bufs.acquire_send() {
                Ok(h) => fresh.push(h),
                Err(_) => {
                    for h in fresh {
                        bufs.release_send(h);
                    }
                    self.wants_writable = true;
                    self.starved_for_chunks = true;
                    return Err(SendError::BufferFull);
                }
            }
        }
        let mut rest = bytes;
        if tail_room > 0
            && let Some(t) = self.chunks.back_mut()
        {
            let before = t.len;
            t.len = bufs
                .append(t.handle, t.len, rest)
                .map_err(|_| SendError::BufferFull)?;
            rest = &rest[(t.len - before) as usize..];
        }
        for handle in fresh {
            let len = bufs
                .append(handle, 0, rest)
                .map_err(|_| SendError::BufferFull)?;
            rest = &rest[len as usize..];
            self.chunks.push_back(Chunk { handle, len });
        }
        self.queued += bytes.len();
        Ok(())
    }

    /// The unsent bytes of the first `max` chunks, in order: (handle,
    /// offset, len), the offset non-zero only on the head chunk. A gathered
    /// send writes them with one system call (one `sendmsg`).
    pub(crate) fn heads(&self, max: usize) -> impl Iterator<Item = (BufferHandle, u32, u32)> {
        self.chunks.iter().take(max).enumerate().map(|(i, c)| {
            let offset = if i == 0 { self.head_offset } else { 0 };
            (c.handle, offset, c.len)
        })
    }

    /// Records the request of one chunk a send in flight reads.
    pub(crate) fn add_in_flight(&mut self, t: Ticket) {
        self.in_flight.push(t);
    }

    /// Ends the send in flight: its requests, in chunk order.
    pub(crate) fn take_in_flight(&mut self) -> std::vec::Drain<'_, Ticket> {
        self.in_flight.drain(..)
    }

    /// `n` bytes from the head went out; frees every chunk fully sent.
    /// Returns true when at least one was freed.
    pub(crate) fn advance(&mut self, bufs: &mut Buffers, n: usize) -> bool {
        self.queued = self.queued.saturating_sub(n);
        let mut n = n as u64 + u64::from(self.head_offset);
        let mut freed = false;
        while let Some(c) = self.chunks.front() {
            if n < u64::from(c.len) {
                break;
            }
            n -= u64::from(c.len);
            let h = c.handle;
            self.chunks.pop_front();
            bufs.release_send(h);
            freed = true;
        }
        // What is left is below the head chunk's length (a kernel never
        // reports more bytes sent than it was given).
        self.head_offset = if self.chunks.is_empty() { 0 } else { n as u32 };
        freed
    }

    /// Drops everything queued (the connection is gone). Must not be called
    /// with a send in flight: the chunk would still be leased.
    pub(crate) fn clear(&mut self, bufs: &mut Buffers) {
        debug_assert!(self.in_flight.is_empty());
        for c in self.chunks.drain(..) {
            bufs.release_send(c.handle);
        }
        self.queued = 0;
        self.head_offset = 0;
    }
}
