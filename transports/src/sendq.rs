//! A connection's bounded send queue: segments in order, the head ones
//! possibly in flight (SPEC TRN-2: `send` never blocks; a full queue is
//! backpressure, never growth).
//!
//! A segment is either a pool chunk the bytes of [`Transport::send`] were
//! copied into, or a shared [`Bytes`] queued by reference
//! ([`Transport::send_shared`]): a clone of the caller's, which keeps its
//! memory alive until the kernel is done with it (the send's completion;
//! for SEND_ZC its notification). Both count their length against the
//! connection's budget; only chunks draw on the core's send chunks.
//!
//! [`Transport::send`]: crate::Transport::send
//! [`Transport::send_shared`]: crate::Transport::send_shared

use std::collections::VecDeque;

use bytes::Bytes;
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

/// At most this many queued segments go out in one gathered send (one
/// `sendmsg`): 512 KiB of the load generator's 16 KiB chunks, 2 MiB of the
/// gateway's 64 KiB ones. Measured on loopback, one `stream` connection:
/// 1 chunk per send 3.0 GB/s, 8 4.2, 16 4.4, 64 4.5 (perf/README.md).
pub(crate) const GATHER_MAX: usize = 32;

/// Shared sends up to this many bytes that wait behind other queued bytes
/// are copied into the queue's chunks instead of queued by reference: each
/// segment takes one of a gathered send's [`GATHER_MAX`] iovecs, and a
/// slow subscriber's stream of small events would otherwise go out a few
/// KiB per `sendmsg`. Measured (`bench/benches/fanout.rs`: a burst of
/// events to each of 1000 loopback connections, CPU per event delivered,
/// io_uring / epoll): 64 × 256 B copied 214 / 230 ns, by reference 326 /
/// 333 ns; 64 × 512 B copied 287 / 312 ns, by reference 329 / 373 ns;
/// 48 × 1 KiB within noise of each other (−10 % … +7 % over runs). A
/// shared send to an empty queue is always queued by reference: queueing
/// one costs about 20 ns against 210–280 ns for a copy of 1 KiB and about
/// 800 ns for 16 KiB.
pub(crate) const SHARED_COPY_MAX: usize = 512;

/// What a producer queues: bytes to copy, or shared bytes to reference.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// [`crate::Transport::send`]: copied into pool chunks.
    Copied(&'a [u8]),
    /// [`crate::Transport::send_shared`]: queued by reference.
    Shared(&'a Bytes),
}

impl Payload<'_> {
    fn len(&self) -> usize {
        match self {
            Self::Copied(b) => b.len(),
            Self::Shared(b) => b.len(),
        }
    }
}

/// One queued piece. Boxed when shared, so that the queue every
/// connection keeps (an idle one too) stays at 16 bytes a slot.
enum Segment {
    Chunk { handle: BufferHandle, len: u32 },
    Shared(Box<Bytes>),
}

impl Segment {
    fn len(&self) -> usize {
        match self {
            Self::Chunk { len, .. } => *len as usize,
            Self::Shared(b) => b.len(),
        }
    }
}

/// The unsent bytes of one queued segment, as [`SendQueue::heads`] lists
/// them.
#[derive(Clone, Copy)]
pub(crate) enum Head<'a> {
    /// Bytes `[offset, len)` of a send chunk (read them through the pool).
    Chunk {
        handle: BufferHandle,
        offset: u32,
        len: u32,
    },
    /// The unsent rest of a shared segment. Its memory stays where it is
    /// until the segment is freed by [`SendQueue::advance`] or
    /// [`SendQueue::clear`]: the queue holds a clone of the `Bytes`.
    Shared(&'a [u8]),
}

/// The segments queued on one connection.
#[derive(Default)]
pub(crate) struct SendQueue {
    segments: VecDeque<Segment>,
    /// Bytes of the head segment already sent.
    head_offset: usize,
    /// Segments the send in flight reads (io_uring only); 0 when none is.
    in_flight_segments: usize,
    /// The requests of the send in flight, one per chunk it reads.
    in_flight: Vec<Ticket>,
    queued: usize,
    /// Chunk segments queued (the rest are shared).
    chunks: u32,
    /// A producer was refused and waits to hear that room came back.
    pub(crate) wants_writable: bool,
    /// The refusal was the core's send chunks running out (not this
    /// connection's limit): room comes back when any connection frees one.
    pub(crate) starved_for_chunks: bool,
}

/// Why bytes could not be copied in.
enum CopyFailed {
    /// The core's send chunks ran out.
    Starved,
    /// The pool refused a write into a chunk of this queue (a broken
    /// invariant: the room was checked).
    Pool,
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
        self.segments.is_empty()
    }

    pub(crate) fn in_flight(&self) -> bool {
        self.in_flight_segments > 0
    }

    /// Queues all of `payload` or nothing: at most `max_queued` bytes may
    /// wait. A shared payload is never refused for a lack of send chunks:
    /// where it would be copied and none is left, it is queued by
    /// reference instead.
    pub(crate) fn push(
        &mut self,
        bufs: &mut Buffers,
        payload: Payload<'_>,
        max_queued: usize,
    ) -> Result<(), SendError> {
        let len = payload.len();
        if self.queued + len > max_queued {
            self.wants_writable = true;
            return Err(SendError::BufferFull);
        }
        // Room for one segment at first, not the four a first push would
        // allocate: most connections never hold more (a request's answer),
        // and the memory stays with the connection for its life. A busy
        // one grows by doubling as usual.
        if self.segments.capacity() == 0 {
            self.segments.reserve_exact(1);
        }
        match payload {
            Payload::Copied(bytes) => match self.copy_in(bufs, bytes) {
                Ok(()) => {}
                Err(CopyFailed::Starved) => {
                    self.wants_writable = true;
                    self.starved_for_chunks = true;
                    return Err(SendError::BufferFull);
                }
                Err(CopyFailed::Pool) => return Err(SendError::BufferFull),
            },
            Payload::Shared(bytes) if bytes.is_empty() => {}
            Payload::Shared(bytes) => {
                let copied = if len <= SHARED_COPY_MAX && !self.segments.is_empty() {
                    match self.copy_in(bufs, bytes) {
                        Ok(()) => true,
                        Err(CopyFailed::Starved) => false,
                        Err(CopyFailed::Pool) => return Err(SendError::BufferFull),
                    }
                } else {
                    false
                };
                if !copied {
                    bufs.shared_queued(len);
                    self.segments
                        .push_back(Segment::Shared(Box::new(bytes.clone())));
                }
            }
        }
        self.queued += len;
        Ok(())
    }

    /// Copies `bytes` into the tail chunk's room and fresh chunks, all or
    /// nothing.
    fn copy_in(&mut self, bufs: &mut Buffers, bytes: &[u8]) -> Result<(), CopyFailed> {
        // Chunks needed beyond the room left in a tail chunk not in flight.
        let tail_room = match self.segments.back() {
            // The tail may be read by a send in flight: never append to it.
            Some(Segment::Chunk { len, .. }) if self.in_flight_segments < self.segments.len() => {
                (bufs.chunk_size() - len) as usize
            }
            _ => 0,
        };
        let chunk = bufs.chunk_size() as usize;
        let new_chunks = bytes.len().saturating_sub(tail_room).div_ceil(chunk);
        // The fresh chunks go straight onto the queue (no list of their
        // own to allocate per send), empty until every one is had.
        let tail = self.segments.len();
        for _ in 0..new_chunks {
            match bufs.acquire_send(self.chunks) {
                Some(handle) => {
                    self.segments.push_back(Segment::Chunk { handle, len: 0 });
                    self.chunks += 1;
                }
                None => {
                    while self.segments.len() > tail {
                        if let Some(Segment::Chunk { handle, .. }) = self.segments.pop_back() {
                            bufs.release_send(handle);
                            self.chunks -= 1;
                        }
                    }
                    return Err(CopyFailed::Starved);
                }
            }
        }
        let mut rest = bytes;
        let first = if tail_room > 0 { tail - 1 } else { tail };
        for segment in self.segments.range_mut(first..) {
            if let Segment::Chunk { handle, len } = segment {
                let before = *len;
                match bufs.append(*handle, *len, rest) {
                    Ok(valid) => *len = valid,
                    Err(_) => {
                        // An empty segment would stop the queue's sends:
                        // the fresh chunks nothing reached go back.
                        while let Some(Segment::Chunk { handle, len: 0 }) = self.segments.back() {
                            bufs.release_send(*handle);
                            self.segments.pop_back();
                            self.chunks -= 1;
                        }
                        return Err(CopyFailed::Pool);
                    }
                }
                rest = &rest[(*len - before) as usize..];
            }
        }
        Ok(())
    }

    /// The unsent bytes of the first `max` segments, in order (the offset
    /// non-zero only on the head), at most `bytes` of them: the last one
    /// listed may end early. A gathered send writes them with one system
    /// call (one `sendmsg`); on a message-preserving socket `bytes` is the
    /// MTU, and the send is one SDU.
    pub(crate) fn heads(&self, max: usize, bytes: usize) -> impl Iterator<Item = Head<'_>> {
        let mut left = bytes;
        self.segments
            .iter()
            .take(max)
            .enumerate()
            .map_while(move |(i, s)| {
                let offset = if i == 0 { self.head_offset } else { 0 };
                let take = s.len().saturating_sub(offset).min(left);
                if take == 0 {
                    return None;
                }
                left -= take;
                Some(match s {
                    Segment::Chunk { handle, .. } => Head::Chunk {
                        handle: *handle,
                        offset: offset as u32,
                        len: (offset + take) as u32,
                    },
                    Segment::Shared(b) => Head::Shared(b.get(offset..offset + take).unwrap_or(&[])),
                })
            })
    }

    /// A send that reads the first `segments` segments is in flight: none of
    /// them is appended to or freed until [`SendQueue::take_in_flight`].
    pub(crate) fn begin_flight(&mut self, segments: usize) {
        self.in_flight_segments = segments;
    }

    /// Records the request of one chunk a send in flight reads.
    pub(crate) fn add_in_flight(&mut self, t: Ticket) {
        // One at first, as for the segments.
        if self.in_flight.capacity() == 0 {
            self.in_flight.reserve_exact(1);
        }
        self.in_flight.push(t);
    }

    /// Ends the send in flight: its requests, in chunk order.
    pub(crate) fn take_in_flight(&mut self) -> std::vec::Drain<'_, Ticket> {
        self.in_flight_segments = 0;
        self.in_flight.drain(..)
    }

    /// `n` bytes from the head went out; frees every segment fully sent.
    /// Returns true when at least one chunk was freed.
    pub(crate) fn advance(&mut self, bufs: &mut Buffers, n: usize) -> bool {
        self.queued = self.queued.saturating_sub(n);
        let mut n = n.saturating_add(self.head_offset);
        let mut freed = false;
        while let Some(s) = self.segments.front() {
            let len = s.len();
            if n < len {
                break;
            }
            n -= len;
            if let Some(s) = self.segments.pop_front() {
                freed |= self.free(bufs, s);
            }
        }
        // What is left is below the head segment's length (a kernel never
        // reports more bytes sent than it was given).
        self.head_offset = if self.segments.is_empty() { 0 } else { n };
        freed
    }

    /// Gives a segment's memory back: a chunk to the pool (true), a shared
    /// segment's clone dropped.
    fn free(&mut self, bufs: &mut Buffers, s: Segment) -> bool {
        match s {
            Segment::Chunk { handle, .. } => {
                bufs.release_send(handle);
                debug_assert!(self.chunks > 0);
                self.chunks = self.chunks.saturating_sub(1);
                true
            }
            Segment::Shared(b) => {
                bufs.shared_released(b.len());
                false
            }
        }
    }

    /// Drops everything queued (the connection is gone). Must not be called
    /// with a send in flight: a chunk would still be leased, and shared
    /// memory still read by the kernel.
    pub(crate) fn clear(&mut self, bufs: &mut Buffers) {
        debug_assert!(self.in_flight_segments == 0);
        while let Some(s) = self.segments.pop_front() {
            self.free(bufs, s);
        }
        self.queued = 0;
        self.head_offset = 0;
    }

    /// The kernel may still read the queue's shared segments after this
    /// (a ring closed with sends in flight): they are never freed, as the
    /// pool keeps its chunks in that case rather than risk it.
    pub(crate) fn abandon_shared(&mut self) {
        self.chunks = 0;
        for s in self.segments.drain(..) {
            if let Segment::Shared(b) = s {
                std::mem::forget(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    fn unsent(q: &SendQueue, bufs: &Buffers) -> Vec<u8> {
        next_send(q, bufs, usize::MAX)
    }

    /// The bytes the next send of at most `max` bytes takes.
    fn next_send(q: &SendQueue, bufs: &Buffers, max: usize) -> Vec<u8> {
        q.heads(usize::MAX, max)
            .flat_map(|h| match h {
                Head::Chunk {
                    handle,
                    offset,
                    len,
                } => bufs.send_bytes(handle, offset, len).to_vec(),
                Head::Shared(b) => b.to_vec(),
            })
            .collect()
    }

    #[test]
    fn mixed_segments_advance_in_order_through_partial_sends() {
        let mut bufs = Buffers::new(4096, 1, 4).unwrap();
        let mut q = SendQueue::default();
        let shared = Bytes::from((0..5000u32).map(|i| i as u8).collect::<Vec<_>>());
        let small = Bytes::from_static(b"tiny");
        q.push(&mut bufs, Payload::Copied(b"0123456789"), 1 << 20)
            .unwrap();
        q.push(&mut bufs, Payload::Shared(&shared), 1 << 20)
            .unwrap();
        q.push(&mut bufs, Payload::Copied(b"abc"), 1 << 20).unwrap();
        // Small and behind queued bytes: copied into the tail chunk.
        q.push(&mut bufs, Payload::Shared(&small), 1 << 20).unwrap();
        assert_eq!(q.heads(usize::MAX, usize::MAX).count(), 3);
        assert_eq!(bufs.shared(), (5000, 1));
        let mut want = b"0123456789".to_vec();
        want.extend_from_slice(&shared);
        want.extend_from_slice(b"abctiny");
        assert_eq!(unsent(&q, &bufs), want);
        assert_eq!(q.queued(), want.len());
        // Into the shared segment, then into the last chunk.
        for n in [12, 4998, 1] {
            q.advance(&mut bufs, n);
            want.drain(..n);
            assert_eq!(unsent(&q, &bufs), want);
            assert_eq!(q.queued(), want.len());
        }
        assert_eq!(bufs.shared().0, 0, "the shared segment was freed");
        q.advance(&mut bufs, want.len());
        assert!(q.is_empty());
    }

    #[test]
    fn heads_within_a_message_size_cut_the_stream_into_sdus() {
        let mut bufs = Buffers::new(4096, 1, 4).unwrap();
        let mut q = SendQueue::default();
        let shared = Bytes::from((0..700u32).map(|i| i as u8).collect::<Vec<_>>());
        q.push(&mut bufs, Payload::Copied(&[9; 5000]), 1 << 20)
            .unwrap();
        q.push(&mut bufs, Payload::Shared(&shared), 1 << 20)
            .unwrap();
        let mut want = unsent(&q, &bufs);
        let mut sdus = Vec::new();
        while !q.is_empty() {
            let sdu = next_send(&q, &bufs, 247);
            assert!(!sdu.is_empty() && sdu.len() <= 247, "{}", sdu.len());
            q.advance(&mut bufs, sdu.len());
            sdus.push(sdu);
        }
        // Full SDUs across the chunk boundary and into the shared segment;
        // only the last is short.
        assert!(sdus[..sdus.len() - 1].iter().all(|s| s.len() == 247));
        assert_eq!(sdus.concat(), std::mem::take(&mut want));
    }

    #[test]
    fn a_shared_segment_counts_against_the_budget_all_or_nothing() {
        let mut bufs = Buffers::new(4096, 1, 1).unwrap();
        let mut q = SendQueue::default();
        let shared = Bytes::from(vec![7; 3000]);
        q.push(&mut bufs, Payload::Shared(&shared), 4000).unwrap();
        assert_eq!(
            q.push(&mut bufs, Payload::Shared(&shared), 4000),
            Err(SendError::BufferFull)
        );
        assert!(q.wants_writable && !q.starved_for_chunks);
        assert_eq!(q.queued(), 3000);
        q.clear(&mut bufs);
        assert_eq!(bufs.shared().0, 0);
    }
}
