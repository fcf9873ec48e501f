//! The driver's use of its core's memory pool (SPEC MEM-6, MEM-7).
//!
//! Receive buffers are pool chunks lent to the kernel (io_uring's provided
//! buffer ring) or to `read(2)` (epoll): each is an admitted, submitted pool
//! request with the chunk as its output, so the pool refuses to release or
//! reuse it while the kernel may write it. Its completion is applied
//! (`Region::complete`, the owner's post and reclaim in one step) before
//! anyone reads the bytes, and the valid length is the verified byte count
//! (MEM-5, MEM-7). A small receive is copied out and its buffer lent again
//! in the same step of the pool (`Region::renew`).
//!
//! Send buffers are chunks owned by the driver and queued per connection; a
//! send in flight holds a pool request with the chunk as its input (a read
//! lease), so the chunk cannot be released until the completion is
//! reclaimed, even if the connection is closed meanwhile.
//!
//! Shared sends ([`crate::Transport::send_shared`]) queue the caller's
//! `Bytes` by reference: memory outside the pool, which the queues keep
//! alive. Its total is counted here and reported in
//! [`crate::DriverStats::shared_bytes_queued`] (SPEC MEM-3: external
//! memory is reported, never hidden).

use dtp_pool::{
    BufferHandle, BufferSpec, Class, Completion, ModuleHandle, ModuleSpec, PoolError, Principal,
    Range, RawSpan, Region, RegionConfig, RequestSpec, Ticket,
};

fn invalid(reason: &'static str) -> PoolError {
    PoolError::InvalidRequest { reason }
}

/// Receives up to this many bytes are copied out of their chunk rather
/// than lent ([`Buffers::copy_out`]).
pub(crate) const SMALL_RECEIVE: usize = 4096;

/// SPEC TRN-2, MEM-4: one part in this many of the core's send chunks is
/// kept back for connections that hold few of them: a connection that
/// already holds [`SEND_SHARE_FREE`] chunks gets no more once only the
/// reserve is left. Clients that never read can then fill at most seven
/// eighths of the pool, and every other connection can still queue its
/// replies (a health check, a decision, a heartbeat) — one core's slow
/// readers cannot starve its other connections.
pub(crate) const SEND_RESERVE_SHARE: u32 = 8;

/// Chunks a connection may hold and still draw on the reserve.
pub(crate) const SEND_SHARE_FREE: u32 = 2;

/// Small receives are copied into blocks of this many bytes, one after
/// another ([`Copies`]).
pub(crate) const COPY_BLOCK: usize = 8 * 1024;

/// Where small receives are copied out: the unused rest of a heap block
/// that the copies of a poll or two share. A copy is split off the block
/// (no allocation of its own, and no later promotion of its buffer to a
/// shared one when the receiver splits it into frames and payloads); once
/// every piece of the block was dropped — the receivers consumed what they
/// got, as they do within their turn — the block is used again from its
/// start. A block that is used up while a piece of it is still held is
/// left to that piece, which frees it when dropped: a piece kept for long
/// keeps at most [`COPY_BLOCK`] bytes alive.
#[derive(Default)]
pub(crate) struct Copies {
    block: bytes::BytesMut,
}

impl Copies {
    /// `bytes`, copied into the block.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> bytes::BytesMut {
        if !self.block.try_reclaim(bytes.len()) {
            self.block = bytes::BytesMut::with_capacity(COPY_BLOCK.max(bytes.len()));
        }
        self.block.extend_from_slice(bytes);
        self.block.split()
    }
}

/// The principal the driver acts as in its region.
pub(crate) const DRIVER: Principal = Principal::new(0x4452_4956); // "DRIV"

/// A received chunk: valid until handed back with [`crate::Driver::recycle`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RecvChunk {
    pub(crate) bid: u16,
    pub(crate) len: u32,
}

impl RecvChunk {
    /// Bytes received.
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }
}

/// A receive buffer as lent out: its handle, its open request and where the
/// backend may write.
struct Lent {
    handle: BufferHandle,
    ticket: Option<Ticket>,
    span: Option<RawSpan>,
}

/// The driver's region, its receive buffers and its send chunks.
pub(crate) struct Buffers {
    region: Region,
    module: ModuleHandle,
    recv: Vec<Lent>,
    chunk_size: u32,
    /// Bytes of the shared segments queued on every connection.
    shared_bytes: usize,
    /// Shared sends queued by reference so far.
    shared_sends: u64,
    /// Send chunks in the pool.
    send_count: u32,
    /// Send chunks held by the connections' queues now.
    send_held: u32,
    /// Chunks refused to connections over their share while only the
    /// reserve was left ([`SEND_RESERVE_SHARE`]).
    reserve_refusals: u64,
    /// Where small receives are copied out.
    copies: Copies,
}

impl Buffers {
    /// A region of `recv_count + send_count` chunks of `chunk_size` bytes, with
    /// the first `recv_count` acquired as receive buffers.
    pub(crate) fn new(
        chunk_size: u32,
        recv_count: u16,
        send_count: u32,
    ) -> Result<Self, PoolError> {
        let chunks = u32::from(recv_count) + send_count;
        let config = RegionConfig {
            request_slots: chunks,
            completion_slots: chunks,
            lease_slots: chunks.saturating_mul(3),
            ..RegionConfig::new(chunk_size, chunks)
        };
        let mut region = Region::new(config)?;
        let module = region.register_module(ModuleSpec::new(0))?;
        let mut recv = Vec::with_capacity(recv_count.into());
        for _ in 0..recv_count {
            let handle = region.acquire(DRIVER, BufferSpec::new(Class::Scratch, chunk_size))?;
            recv.push(Lent {
                handle,
                ticket: None,
                span: None,
            });
        }
        Ok(Self {
            region,
            module,
            recv,
            chunk_size,
            shared_bytes: 0,
            shared_sends: 0,
            send_count,
            send_held: 0,
            reserve_refusals: 0,
            copies: Copies::default(),
        })
    }

    /// Whether a received chunk is better copied out than lent: small
    /// reads (requests, acks) are cheaper copied, and the chunk goes
    /// straight back to the kernel. Whether the receive memory is short is
    /// the receiver's question ([`Buffers::under_pressure`]), asked as it
    /// takes each delivery: decided here, for a whole batch of completions
    /// before any is consumed, it would copy chunks that are given back in
    /// time.
    pub(crate) fn copy_out(&self, chunk: &RecvChunk) -> bool {
        chunk.len() <= SMALL_RECEIVE
    }

    /// Whether half the receive chunks are lent out now (`lent` of them):
    /// a receiver that keeps payloads (slices of them) must then copy, so
    /// as not to starve the connections of receive memory.
    pub(crate) fn under_pressure(&self, lent: usize) -> bool {
        lent.saturating_mul(2) >= self.recv.len()
    }

    pub(crate) fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    pub(crate) fn recv_count(&self) -> u16 {
        self.recv.len() as u16
    }

    /// Lends receive buffer `bid` out: admits and submits a request with the
    /// whole chunk as output and returns where the backend may write.
    pub(crate) fn lend(&mut self, bid: u16) -> Result<RawSpan, PoolError> {
        let lent = self
            .recv
            .get_mut(usize::from(bid))
            .ok_or(invalid("no such receive buffer"))?;
        let spec =
            RequestSpec::new(self.module).output(Range::new(lent.handle, 0, self.chunk_size));
        let sub = self.region.start(DRIVER, spec)?;
        let span = sub
            .output
            .ok_or(invalid("submission without output span"))?;
        lent.ticket = Some(sub.ticket);
        lent.span = Some(span);
        Ok(span)
    }

    /// Where receive buffer `bid` may be written while lent.
    pub(crate) fn lent_span(&self, bid: u16) -> Option<RawSpan> {
        self.recv.get(usize::from(bid)).and_then(|l| l.span)
    }

    /// The backend finished writing `len` bytes into buffer `bid`: posts and
    /// reclaims the completion, publishing `len` as the valid length.
    pub(crate) fn filled(&mut self, bid: u16, len: u32) -> Result<RecvChunk, PoolError> {
        let lent = self
            .recv
            .get_mut(usize::from(bid))
            .ok_or(invalid("no such receive buffer"))?;
        let ticket = lent
            .ticket
            .take()
            .ok_or(invalid("receive buffer was not lent"))?;
        lent.span = None;
        let done = self
            .region
            .complete(Completion::success(ticket, len))
            .map_err(|_| invalid("receive completion refused"))?;
        Ok(RecvChunk {
            bid,
            len: done.published,
        })
    }

    /// The backend finished writing `len` bytes into buffer `bid`, which
    /// goes straight back to it: completes the request, gives `read` the
    /// bytes (verified as in [`Buffers::filled`]) and lends the buffer
    /// again under a new ticket, in one step of the pool
    /// ([`Region::renew`]). Returns what `read` returned and where the
    /// backend may write now.
    pub(crate) fn refill<R>(
        &mut self,
        bid: u16,
        len: u32,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<(R, RawSpan), PoolError> {
        let lent = self
            .recv
            .get_mut(usize::from(bid))
            .ok_or(invalid("no such receive buffer"))?;
        let ticket = lent.ticket.ok_or(invalid("receive buffer was not lent"))?;
        let (result, renewal) =
            self.region
                .renew(DRIVER, Completion::success(ticket, len), read)?;
        lent.ticket = Some(renewal.ticket);
        lent.span = Some(renewal.output);
        Ok((result, renewal.output))
    }

    /// [`Buffers::refill`] that copies the bytes out ([`Copies`]).
    pub(crate) fn refill_copied(
        &mut self,
        bid: u16,
        len: u32,
    ) -> Result<(bytes::BytesMut, RawSpan), PoolError> {
        let mut copies = std::mem::take(&mut self.copies);
        let done = self.refill(bid, len, |b| copies.copy(b));
        self.copies = copies;
        done
    }

    /// The bytes of a received chunk.
    pub(crate) fn data(&self, chunk: &RecvChunk) -> &[u8] {
        self.recv
            .get(usize::from(chunk.bid))
            .and_then(|l| {
                self.region
                    .read(DRIVER, Range::new(l.handle, 0, chunk.len))
                    .ok()
            })
            .unwrap_or(&[])
    }

    /// The bytes of a received chunk as a [`RecvBuf`](crate::RecvBuf) the
    /// receiver may modify in place: the chunk comes back through `returns`
    /// when the last piece of it is dropped.
    pub(crate) fn lend_mut_to_app(
        &self,
        chunk: &RecvChunk,
        returns: &std::sync::Arc<crate::lent::Returns>,
    ) -> crate::RecvBuf {
        let (ptr, len) = self.received(chunk);
        crate::lent::lend_mut(ptr, len, chunk.bid, returns, self.region.mapping_guard())
    }

    /// Where a received chunk's bytes start, with write permission (derived
    /// from the region's raw allocation, not from a shared slice), and how
    /// many the kernel wrote.
    fn received(&self, chunk: &RecvChunk) -> (*mut u8, usize) {
        let data = self.data(chunk);
        let raw = self.region.raw_region();
        let start = self
            .recv
            .get(usize::from(chunk.bid))
            .and_then(|l| self.region.chunk_index(l.handle).ok())
            .map(|index| index as usize * raw.chunk_size() as usize);
        match start {
            Some(start) => {
                let ptr = raw.as_ptr().wrapping_add(start);
                debug_assert_eq!(ptr.cast_const(), data.as_ptr(), "chunk start");
                (ptr, data.len())
            }
            // No such chunk: `data` is empty, and so is the lent range.
            None => (raw.as_ptr(), 0),
        }
    }

    /// Empties a received chunk so it can be lent again.
    pub(crate) fn reset(&mut self, chunk: RecvChunk) -> Result<u16, PoolError> {
        let lent = self
            .recv
            .get(usize::from(chunk.bid))
            .ok_or(invalid("no such receive buffer"))?;
        self.region.truncate(DRIVER, lent.handle, 0)?;
        Ok(chunk.bid)
    }

    /// A fresh send chunk for a connection that holds `held` of them
    /// already; `None` when the pool's send chunks are used up, or when
    /// only the reserve is left and `held` is at least [`SEND_SHARE_FREE`].
    pub(crate) fn acquire_send(&mut self, held: u32) -> Option<BufferHandle> {
        let reserve = self.send_count / SEND_RESERVE_SHARE;
        if held >= SEND_SHARE_FREE && self.send_held >= self.send_count - reserve {
            self.reserve_refusals += 1;
            return None;
        }
        let h = self
            .region
            .acquire(
                DRIVER,
                BufferSpec::new(Class::StreamContext, self.chunk_size),
            )
            .ok()?;
        self.send_held += 1;
        Some(h)
    }

    /// Chunks refused to connections over their share while only the
    /// reserve was left, so far.
    pub(crate) fn reserve_refusals(&self) -> u64 {
        self.reserve_refusals
    }

    /// Appends as much of `bytes` as fits into send chunk `h` (whose valid
    /// length is `len`); returns the new valid length.
    pub(crate) fn append(
        &mut self,
        h: BufferHandle,
        len: u32,
        bytes: &[u8],
    ) -> Result<u32, PoolError> {
        let room = (self.chunk_size - len) as usize;
        let n = bytes.len().min(room);
        self.region.write(DRIVER, h, len, &bytes[..n])?;
        let valid = len + n as u32;
        self.region.commit(DRIVER, h, valid)?;
        Ok(valid)
    }

    /// The queued bytes `[offset, len)` of send chunk `h`.
    pub(crate) fn send_bytes(&self, h: BufferHandle, offset: u32, len: u32) -> &[u8] {
        self.region
            .read(DRIVER, Range::new(h, offset, len - offset))
            .unwrap_or(&[])
    }

    /// Starts an asynchronous send of `[offset, len)` of chunk `h`: the chunk
    /// is read-leased until [`Buffers::send_done`].
    pub(crate) fn start_send(
        &mut self,
        h: BufferHandle,
        offset: u32,
        len: u32,
    ) -> Result<(Ticket, RawSpan), PoolError> {
        let spec = RequestSpec::new(self.module).input(Range::new(h, offset, len - offset));
        let sub = self.region.start(DRIVER, spec)?;
        Ok((
            sub.ticket,
            sub.input.ok_or(invalid("submission without input span"))?,
        ))
    }

    /// The kernel finished a send: ends the request (the lease on the chunk).
    pub(crate) fn send_done(&mut self, ticket: Ticket, failed: bool) {
        let c = if failed {
            Completion::failed(ticket, 1, 0)
        } else {
            Completion::success(ticket, 0)
        };
        // A refused completion is a stale or duplicate one: the pool has
        // diagnosed and counted it, and nothing is released twice.
        let _ = self.region.complete(c);
    }

    /// A shared segment of `len` bytes was queued by reference.
    pub(crate) fn shared_queued(&mut self, len: usize) {
        self.shared_bytes += len;
        self.shared_sends += 1;
    }

    /// A shared segment of `len` bytes was sent or dropped.
    pub(crate) fn shared_released(&mut self, len: usize) {
        self.shared_bytes = self.shared_bytes.saturating_sub(len);
    }

    /// Bytes of the shared segments queued now, and how many shared sends
    /// were queued by reference so far.
    pub(crate) fn shared(&self) -> (usize, u64) {
        (self.shared_bytes, self.shared_sends)
    }

    pub(crate) fn release_send(&mut self, h: BufferHandle) {
        // Only fails for a chunk still leased to a send in flight, which the
        // callers never release; the pool keeps ownership in that case.
        if self.region.release(DRIVER, h).is_ok() {
            self.send_held = self.send_held.saturating_sub(1);
        }
    }

    /// Ends the requests of every lent receive buffer: only once no backend
    /// can write into them any more (the ring is closed and drained).
    pub(crate) fn retire_lent(&mut self) {
        for lent in &mut self.recv {
            if let Some(ticket) = lent.ticket.take() {
                lent.span = None;
                let _ = self.region.complete(Completion::cancelled(ticket, 0));
            }
        }
    }

    pub(crate) fn region(&self) -> &Region {
        &self.region
    }
}

/// What a backend does with its received chunks, the same on io_uring and
/// epoll: hand them to the receiver copied out (and given back at once) or
/// lent ([`Buffers::copy_out`]).
pub(crate) trait RecvPool {
    /// The backend's buffers and the return list of its lent chunks.
    fn pool(&self) -> (&Buffers, &std::sync::Arc<crate::lent::Returns>);

    /// The backend's buffers, to change.
    fn pool_mut(&mut self) -> &mut Buffers;

    /// Gives receive buffer `bid`, lent again with `span` as where the
    /// backend may write, back to the backend.
    fn relend(&mut self, bid: u16, span: RawSpan);

    /// Gives a received chunk back for the next receive.
    fn recycle(&mut self, chunk: RecvChunk) {
        let bufs = self.pool_mut();
        match bufs
            .reset(chunk)
            .and_then(|bid| bufs.lend(bid).map(|span| (bid, span)))
        {
            Ok((bid, span)) => self.relend(bid, span),
            Err(e) => {
                tracing::error!(error = %e, "receive buffer could not be lent again; the core has one fewer")
            }
        }
    }

    /// SPEC MEM-7: the backend wrote `len` bytes into receive buffer `bid`
    /// for the receiver. A small receive is copied out and the buffer lent
    /// again in one step of the pool ([`Buffers::refill`]); a larger one
    /// is lent to the receiver as it is ([`RecvPool::deliver`]).
    fn receive(&mut self, bid: u16, len: u32) -> Result<crate::RecvBuf, PoolError> {
        if len as usize <= SMALL_RECEIVE {
            let (copy, span) = self.pool_mut().refill_copied(bid, len)?;
            self.relend(bid, span);
            Ok(crate::RecvBuf::from(copy))
        } else {
            let chunk = self.pool_mut().filled(bid, len)?;
            Ok(self.deliver(chunk))
        }
    }

    /// The backend wrote `len` bytes into receive buffer `bid` that nobody
    /// reads (a closing connection, an oversized message): the buffer is
    /// lent again at once.
    fn discard(&mut self, bid: u16, len: u32) {
        match self.pool_mut().refill(bid, len, |_| ()) {
            Ok(((), span)) => self.relend(bid, span),
            Err(e) => {
                tracing::error!(error = %e, "receive buffer could not be lent again; the core has one fewer")
            }
        }
    }

    /// A received chunk as the receiver gets it.
    fn deliver(&mut self, chunk: RecvChunk) -> crate::RecvBuf {
        let (bufs, returns) = self.pool();
        if bufs.copy_out(&chunk) {
            let copy = bytes::BytesMut::from(bufs.data(&chunk));
            self.recycle(chunk);
            crate::RecvBuf::from(copy)
        } else {
            // The chunk is out: it is recycled when its id comes back.
            bufs.lend_mut_to_app(&chunk, returns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_use_their_block_again_once_every_piece_is_dropped() {
        let mut copies = Copies::default();
        let first = copies.copy(b"request");
        let start = first.as_ptr();
        let second = copies.copy(&[7; 100]);
        assert_eq!(second.as_ptr(), start.wrapping_add(7), "the same block");
        assert_eq!(&first[..], b"request");
        drop((first, second));
        // The rest of the block is used up first, then the block again
        // from its start.
        let rest = copies.copy(&vec![1; COPY_BLOCK - 107]);
        drop(rest);
        let again = copies.copy(b"next");
        assert_eq!(again.as_ptr(), start);
        assert_eq!(&again[..], b"next");
    }

    #[test]
    fn a_piece_held_keeps_its_block_and_the_copies_move_on() {
        let mut copies = Copies::default();
        let held = copies.copy(b"kept");
        let rest = copies.copy(&vec![2; COPY_BLOCK - 4]);
        drop(rest);
        let next = copies.copy(b"next");
        let (old, new) = (held.as_ptr() as usize, next.as_ptr() as usize);
        assert!(new < old || new >= old + COPY_BLOCK, "a new block");
        assert_eq!((&held[..], &next[..]), (&b"kept"[..], &b"next"[..]));
    }
}
