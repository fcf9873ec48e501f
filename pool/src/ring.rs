//! Bounded lock-free single-producer / single-consumer rings: the control
//! rings between each core shard and the control thread (DESIGN.md §1
//! control rings — one ring per direction per core, requests core → control,
//! decisions control → core).
//!
//! Owns: a fixed array of slots allocated once by [`spsc`], the two positions
//! (`head`, written only by the [`Consumer`]; `tail`, written only by the
//! [`Producer`]) on separate 128-byte cache lines, and one state word with the
//! consumer's park flag and each end's "gone" bit. It never grows: a full
//! ring is backpressure, and [`Producer::push`] hands the value back in
//! [`Full`]. It never does IO, blocks, spins or reads a clock; waking a parked
//! consumer is the driver's job (see *Wake-ups* below).
//!
//! # Costs
//!
//! Each end keeps its own position in a plain field and a cached copy of the
//! other end's position, and reads the other end's cache line only when the
//! cache says the ring is full (producer) or empty (consumer). A single
//! [`Producer::push`] / [`Consumer::pop`] is one release store of its own
//! position; [`Producer::push_batch`] and [`Consumer::drain`] /
//! [`Consumer::pop_batch`] publish their position once per batch.
//!
//! # Wake-ups
//!
//! The ring only keeps a flag; the eventfd (or futex, or condition variable)
//! belongs to the driver. The protocol, with its model check in
//! `pool/tests/ring_loom.rs`:
//!
//! * **Consumer**, when [`Consumer::pop`] returns `None` and it wants to
//!   sleep: call [`Consumer::prepare_park`]. It sets the park flag and then
//!   re-checks the ring. `false` means an item (or the producer's departure)
//!   arrived meanwhile — do not sleep, pop again. `true` means the producer is
//!   now bound to report [`Producer::needs_wake`] after its next push, so the
//!   consumer may block on its eventfd. After waking for any reason, call
//!   [`Consumer::cancel_park`] (harmless if the producer already cleared the
//!   flag) and pop.
//! * **Producer**, after a push or a batch of pushes (at the latest before it
//!   goes idle itself, e.g. once per event-loop turn): call
//!   [`Producer::needs_wake`]. `true` means the consumer is (or is about to
//!   be) asleep and the producer must write its eventfd; the flag is cleared,
//!   so one park costs at most one wake. When the producer goes away, use
//!   [`Producer::close`], which answers the same question.
//!
//! Both the flag set and the flag check are read-modify-writes of the same
//! atomic word, so they are totally ordered: either the producer's check comes
//! later and sees the flag, or the consumer's set comes later, synchronises
//! with the producer's check (acquire/release) and its re-check sees the pushed
//! item. No wake-up is lost. Spurious ones are possible (the consumer may find
//! the item itself after the producer already decided to wake it), so a
//! driver treats a wake-up as a hint and pops until empty.
//!
//! # Abandonment
//!
//! Dropping an end marks it gone ([`Producer::is_abandoned`],
//! [`Consumer::is_abandoned`]). Pushes into a ring whose consumer is gone still
//! succeed until it is full; a producer that sees [`Full`] should check
//! `is_abandoned`. Items left in the ring are dropped exactly once, by
//! whichever end is dropped last.
//!
//! # Threads
//!
//! [`Producer`] and [`Consumer`] are `Send` (for `T: Send`) but neither `Sync`
//! nor `Clone`: each end belongs to one thread at a time.
//!
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<dtp_pool::Producer<u32>>();
//! ```
//! ```compile_fail,E0277
//! fn sync<T: Sync>() {}
//! sync::<dtp_pool::Consumer<u32>>();
//! ```
//! ```compile_fail,E0599
//! let (p, _c) = dtp_pool::spsc::<u32>(2).unwrap();
//! let _q = p.clone();
//! ```
//!
//! # Unsafe code
//!
//! The slots are `UnsafeCell<MaybeUninit<T>>`. Slot `i` (mod capacity) is
//! initialised exactly when `head <= i < tail` in the published positions
//! (plus, transiently, the positions an end has advanced locally but not yet
//! published). Every block states which end owns the slot it touches.
//!
//! # Example
//!
//! ```
//! use dtp_pool::spsc;
//!
//! let (mut tx, mut rx) = spsc::<u32>(3)?;
//! assert_eq!(tx.capacity(), 4); // rounded up to a power of two
//! for i in 0..4 {
//!     tx.push(i)?;
//! }
//! assert_eq!(tx.push(9).unwrap_err().into_inner(), 9); // full: backpressure
//! assert_eq!(rx.pop(), Some(0));
//! let mut out = Vec::new();
//! assert_eq!(rx.pop_batch(&mut out, 8), 3); // one head publication
//! assert_eq!(out, [1, 2, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ops::Deref;

use crate::sync::{Arc, AtomicUsize, Ordering, UnsafeCell};

/// Creates a ring with room for `capacity` items, rounded up to a power of
/// two, and returns its two ends. All memory is allocated here, once.
///
/// # Errors
///
/// [`RingError::ZeroCapacity`] for `capacity == 0` (a ring that can hold
/// nothing would be permanently full); [`RingError::CapacityOverflow`] when
/// the rounded capacity does not fit a `usize` or the address space;
/// [`RingError::AllocationFailed`] when the allocator refuses the slots.
pub fn spsc<T: Send>(capacity: usize) -> Result<(Producer<T>, Consumer<T>), RingError> {
    if capacity == 0 {
        return Err(RingError::ZeroCapacity);
    }
    let overflow = RingError::CapacityOverflow {
        requested: capacity,
    };
    // At most 2^(usize::BITS - 1), so `tail - head` (wrapping) never
    // confuses a full ring with an empty one.
    let slots = capacity.checked_next_power_of_two().ok_or(overflow)?;
    let bytes = slots
        .checked_mul(core::mem::size_of::<Slot<T>>())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(overflow)?;
    let mut cells = Vec::new();
    cells
        .try_reserve_exact(slots)
        .map_err(|_| RingError::AllocationFailed { bytes })?;
    cells.extend((0..slots).map(|_| UnsafeCell::new(MaybeUninit::uninit())));
    let shared = Arc::new(Shared {
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
        state: CachePadded(AtomicUsize::new(0)),
        slots: cells.into_boxed_slice(),
    });
    let mask = slots - 1;
    let producer = Producer {
        shared: Arc::clone(&shared),
        mask,
        tail: 0,
        cached_head: 0,
        closed: false,
        _not_sync: PhantomData,
    };
    let consumer = Consumer {
        shared,
        mask,
        head: 0,
        cached_tail: 0,
        _not_sync: PhantomData,
    };
    Ok((producer, consumer))
}

/// Why [`spsc`] could not create a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// A capacity of 0 was asked for.
    #[error("a ring needs a capacity of at least 1")]
    ZeroCapacity,
    /// The capacity rounded up to a power of two does not fit.
    #[error("ring capacity {requested} cannot be rounded up to an allocatable power of two")]
    CapacityOverflow {
        /// The capacity that was asked for.
        requested: usize,
    },
    /// The allocator refused the slot array.
    #[error("could not allocate {bytes} bytes of ring slots")]
    AllocationFailed {
        /// Size of the refused allocation.
        bytes: usize,
    },
}

/// The ring was full: the value is handed back, nothing was dropped
/// (backpressure, DESIGN.md §1).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Full<T>(pub T);

impl<T> Full<T> {
    /// The value that did not fit.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for Full<T> {
    // Like std's `TrySendError`: no `T: Debug` bound, the value is not shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Full(..)")
    }
}

impl<T> fmt::Display for Full<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ring full")
    }
}

impl<T> std::error::Error for Full<T> {}

/// The writing end of a ring. `Send`, not `Sync`, not `Clone`.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    mask: usize,
    /// Next position to write; published to `shared.tail`.
    tail: usize,
    /// Last `shared.head` seen; the consumer is at or beyond it.
    cached_head: usize,
    /// `close` already ran the drop-time bookkeeping.
    closed: bool,
    _not_sync: PhantomData<Cell<()>>,
}

/// The reading end of a ring. `Send`, not `Sync`, not `Clone`.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    mask: usize,
    /// Next position to read; published to `shared.head`.
    head: usize,
    /// Last `shared.tail` seen; the producer is at or beyond it.
    cached_tail: usize,
    _not_sync: PhantomData<Cell<()>>,
}

/// A batch of items taken from a [`Consumer`] by [`Consumer::drain`]. Frees
/// their slots to the producer once, when dropped.
#[must_use = "a Drain takes items only as it is iterated"]
pub struct Drain<'a, T> {
    consumer: &'a mut Consumer<T>,
    remaining: usize,
    start: usize,
}

type Slot<T> = UnsafeCell<MaybeUninit<T>>;

/// State bit: the consumer announced it may sleep ([`Consumer::prepare_park`]).
const PARKED: usize = 1;
/// State bit: the producer was dropped or closed.
const PRODUCER_GONE: usize = 2;
/// State bit: the consumer was dropped.
const CONSUMER_GONE: usize = 4;

/// Keeps a value on its own pair of cache lines: 128 bytes, because x86's
/// adjacent-line prefetcher pulls lines in pairs (and some ARM cores have
/// 128-byte lines).
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct Shared<T> {
    /// Next position the consumer reads. Written only by the consumer.
    head: CachePadded<AtomicUsize>,
    /// Next position the producer writes. Written only by the producer.
    tail: CachePadded<AtomicUsize>,
    /// `PARKED | PRODUCER_GONE | CONSUMER_GONE`.
    state: CachePadded<AtomicUsize>,
    /// Read-only after creation; a power of two long.
    slots: Box<[Slot<T>]>,
}

// SAFETY: the only non-`Sync` part is the slots' `UnsafeCell`s. A slot is
// written only by the producer while it is outside `[head, tail)` — the
// producer saw (acquire) the consumer's release of it through `head` — and
// read only by the consumer while it is inside `[head, tail)` — the consumer
// saw (acquire) the producer's release store of `tail`. The two ends are not
// `Sync` or `Clone`, so there is one thread per role. Accesses to a slot are
// therefore never concurrent, and values of `T` only move between threads,
// which `T: Send` allows.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // The last `Arc` is going: both ends published their positions before
        // releasing theirs, and `Arc`'s drop orders those stores before this.
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        let mask = self.slots.len() - 1;
        let mut pos = head;
        while pos != tail {
            self.slots[pos & mask].with_mut(|p| {
                // SAFETY: `head <= pos < tail`, so the slot holds a value the
                // consumer never took; `&mut self` means no end is left, so
                // it is dropped here, once.
                unsafe { core::ptr::drop_in_place(p.cast::<T>()) }
            });
            pos = pos.wrapping_add(1);
        }
    }
}

impl<T> Producer<T> {
    /// Appends `value`, or hands it back in [`Full`] when the ring has no free
    /// slot. Publishes the new tail immediately (one release store); reads the
    /// consumer's position only when the cached one says the ring is full.
    pub fn push(&mut self, value: T) -> Result<(), Full<T>> {
        if self.tail.wrapping_sub(self.cached_head) > self.mask {
            self.cached_head = self.shared.head.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.cached_head) > self.mask {
                return Err(Full(value));
            }
        }
        self.write(value);
        self.shared.tail.store(self.tail, Ordering::Release);
        Ok(())
    }

    /// Moves items from `items` into the ring until it is full or `items` is
    /// exhausted, and publishes the tail once. Returns how many were pushed.
    /// An item is taken from the iterator only when there is a slot for it,
    /// so what does not fit stays in `items` (pass `&mut vec.drain(..)` only
    /// if dropping the rest is what you want; prefer a `VecDeque` or an
    /// iterator you keep).
    pub fn push_batch<I: Iterator<Item = T>>(&mut self, items: &mut I) -> usize {
        let capacity = self.mask + 1;
        let want = items.size_hint().0.clamp(1, capacity);
        let mut free = capacity - self.tail.wrapping_sub(self.cached_head);
        if free < want {
            self.cached_head = self.shared.head.load(Ordering::Acquire);
            free = capacity - self.tail.wrapping_sub(self.cached_head);
        }
        let start = self.tail;
        while free > 0 {
            let Some(value) = items.next() else { break };
            self.write(value);
            free -= 1;
        }
        // If `items.next()` panicked, the items written so far are published
        // by the next push or by `Drop`.
        if self.tail != start {
            self.shared.tail.store(self.tail, Ordering::Release);
        }
        self.tail.wrapping_sub(start)
    }

    /// Free slots right now (reads the consumer's position). The consumer may
    /// free more at any moment; never fewer.
    pub fn free_slots(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Items in the ring right now, as the producer sees them (the consumer
    /// may take some at any moment).
    pub fn len(&self) -> usize {
        self.tail
            .wrapping_sub(self.shared.head.load(Ordering::Acquire))
    }

    /// Whether the ring is empty right now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of slots: the requested capacity rounded up to a power of
    /// two.
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Whether the consumer was dropped: nothing pushed from now on will be
    /// taken out (it is dropped with the ring).
    pub fn is_abandoned(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) & CONSUMER_GONE != 0
    }

    /// The wake-up check (see the module docs): call after pushing. Returns
    /// `true` when the consumer announced it may sleep since the last check
    /// that returned `true`; the driver must then wake it (write its eventfd).
    /// Clears the announcement, so one park costs at most one wake-up.
    #[must_use = "a parked consumer sleeps on unless the driver wakes it when this is true"]
    pub fn needs_wake(&mut self) -> bool {
        // Read-modify-write, acquire + release: ordered against the
        // consumer's `prepare_park` on the same word (see the module docs).
        self.shared.state.fetch_and(!PARKED, Ordering::AcqRel) & PARKED != 0
    }

    /// Drops the producer and tells whether the consumer must be woken to
    /// notice (same meaning as [`Producer::needs_wake`]). Dropping without
    /// `close` does the same minus the answer.
    #[must_use = "a parked consumer sleeps on unless the driver wakes it when this is true"]
    pub fn close(mut self) -> bool {
        self.closed = true;
        self.leave() & PARKED != 0
    }

    /// Publishes every written item and marks the producer gone. Returns the
    /// state before.
    fn leave(&mut self) -> usize {
        self.shared.tail.store(self.tail, Ordering::Release);
        self.shared.state.fetch_or(PRODUCER_GONE, Ordering::AcqRel)
    }

    /// Writes `value` at the local tail and advances it (not published).
    /// The caller checked that the slot is free.
    fn write(&mut self, value: T) {
        let pos = self.tail;
        self.shared.slots[pos & self.mask].with_mut(|p| {
            // SAFETY: `pos - head < capacity` for the acquired `head`, so the
            // consumer released this slot (or never had it) and will not
            // touch it until it sees a tail beyond `pos`; only this producer
            // writes slots. The slot is uninitialised (its last value was
            // moved out by the consumer), so nothing is overwritten.
            unsafe { p.cast::<T>().write(value) }
        });
        self.tail = pos.wrapping_add(1);
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        if !self.closed {
            self.leave();
        }
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl<T> Consumer<T> {
    /// Takes the oldest item, or `None` when the ring is empty. Publishes the
    /// new head immediately (one release store); reads the producer's
    /// position only when the cached one says the ring is empty.
    pub fn pop(&mut self) -> Option<T> {
        if self.head == self.cached_tail {
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
            if self.head == self.cached_tail {
                return None;
            }
        }
        let value = self.read();
        self.shared.head.store(self.head, Ordering::Release);
        Some(value)
    }

    /// Takes up to `max` items, oldest first. The returned iterator frees
    /// their slots to the producer once, when it is dropped: take a batch,
    /// then drop the iterator. Items it did not yield stay in the ring.
    pub fn drain(&mut self, max: usize) -> Drain<'_, T> {
        let mut available = self.cached_tail.wrapping_sub(self.head);
        if available < max {
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
            available = self.cached_tail.wrapping_sub(self.head);
        }
        let start = self.head;
        Drain {
            consumer: self,
            remaining: available.min(max),
            start,
        }
    }

    /// Moves up to `max` items into `out` with one head publication (see
    /// [`Consumer::drain`]). Returns how many were moved.
    pub fn pop_batch(&mut self, out: &mut impl Extend<T>, max: usize) -> usize {
        let start = self.head;
        out.extend(self.drain(max));
        self.head.wrapping_sub(start)
    }

    /// Items in the ring right now, as the consumer sees them (the producer
    /// may add some at any moment).
    pub fn len(&self) -> usize {
        self.shared
            .tail
            .load(Ordering::Acquire)
            .wrapping_sub(self.head)
    }

    /// Whether the ring is empty right now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of slots: the requested capacity rounded up to a power of
    /// two.
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Whether the producer was dropped or closed. Everything it pushed is
    /// then visible: once this is `true`, a `pop` returning `None` means no
    /// item will ever come.
    pub fn is_abandoned(&self) -> bool {
        self.shared.state.load(Ordering::Acquire) & PRODUCER_GONE != 0
    }

    /// The consumer's half of the wake-up protocol (see the module docs):
    /// announces that it is about to sleep, then re-checks the ring. Returns
    /// `true` if it may sleep — the ring is empty and the producer will see
    /// the announcement in its next [`Producer::needs_wake`] / close — and
    /// `false` (announcement withdrawn) if an item arrived or the producer is
    /// gone, in which case it must not sleep.
    #[must_use = "sleeping when this is false can miss an item"]
    pub fn prepare_park(&mut self) -> bool {
        // Read-modify-write, acquire + release: ordered against the
        // producer's `needs_wake` / `close` on the same word.
        let state = self.shared.state.fetch_or(PARKED, Ordering::AcqRel);
        if state & PRODUCER_GONE == 0 {
            self.cached_tail = self.shared.tail.load(Ordering::Acquire);
            if self.cached_tail == self.head {
                return true;
            }
        }
        self.cancel_park();
        false
    }

    /// Withdraws a [`Consumer::prepare_park`] announcement: call after waking
    /// up (for whatever reason) or when deciding not to sleep after all.
    /// Harmless if the producer already took it.
    pub fn cancel_park(&mut self) {
        self.shared.state.fetch_and(!PARKED, Ordering::AcqRel);
    }

    /// Moves the item at the local head out and advances it (not published).
    /// The caller checked that the ring holds it.
    fn read(&mut self) -> T {
        let pos = self.head;
        let value = self.shared.slots[pos & self.mask].with_mut(|p| {
            // SAFETY: `pos < tail` for the acquired `tail`, so the producer
            // finished writing this slot and will not touch it again until it
            // sees a head beyond `pos`; only this consumer reads slots, and it
            // advances `head` past `pos` right after, so the value is moved
            // out once and the slot is from then on treated as uninitialised.
            unsafe { p.cast::<T>().read() }
        });
        self.head = pos.wrapping_add(1);
        value
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        // A forgotten `Drain` may have left its items unpublished; publish
        // them so the last end does not drop moved-out values.
        self.shared.head.store(self.head, Ordering::Release);
        self.shared.state.fetch_or(CONSUMER_GONE, Ordering::AcqRel);
    }
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl<T> Iterator for Drain<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        Some(self.consumer.read())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for Drain<'_, T> {}

impl<T> Drop for Drain<'_, T> {
    fn drop(&mut self) {
        if self.consumer.head != self.start {
            self.consumer
                .shared
                .head
                .store(self.consumer.head, Ordering::Release);
        }
    }
}

impl<T> fmt::Debug for Drain<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn capacity_rounds_up_and_zero_is_refused() {
        assert_eq!(spsc::<u8>(0).unwrap_err(), RingError::ZeroCapacity);
        for (asked, got) in [(1, 1), (2, 2), (3, 4), (5, 8), (64, 64), (65, 128)] {
            let (p, c) = spsc::<u8>(asked).unwrap();
            assert_eq!((p.capacity(), c.capacity()), (got, got));
        }
        assert!(matches!(
            spsc::<u8>(usize::MAX),
            Err(RingError::CapacityOverflow { .. })
        ));
        assert!(matches!(
            spsc::<u64>(usize::MAX / 2 + 1),
            Err(RingError::CapacityOverflow { .. } | RingError::AllocationFailed { .. })
        ));
    }

    #[test]
    fn head_tail_and_state_sit_on_separate_cache_lines() {
        let (p, _c) = spsc::<u8>(1).unwrap();
        let s = &*p.shared;
        let addr = |a: &AtomicUsize| a as *const AtomicUsize as usize;
        let (h, t, st) = (addr(&s.head), addr(&s.tail), addr(&s.state));
        assert_eq!(h % 128, 0);
        assert!(h.abs_diff(t) >= 128 && t.abs_diff(st) >= 128 && h.abs_diff(st) >= 128);
    }

    #[test]
    fn fifo_across_many_wraps_with_capacity_one() {
        let (mut p, mut c) = spsc(1).unwrap();
        for i in 0..1000u32 {
            p.push(i).unwrap();
            assert_eq!(p.push(u32::MAX).unwrap_err().into_inner(), u32::MAX);
            assert_eq!((p.len(), c.len(), p.free_slots()), (1, 1, 0));
            assert_eq!(c.pop(), Some(i));
            assert_eq!(c.pop(), None);
            assert!(p.is_empty() && c.is_empty());
        }
    }

    #[test]
    fn positions_wrap_around_usize() {
        let (mut p, mut c) = spsc(4).unwrap();
        // Start just before the position counters overflow.
        let start = usize::MAX - 5;
        p.tail = start;
        p.cached_head = start;
        p.shared.head.store(start, Ordering::Relaxed);
        p.shared.tail.store(start, Ordering::Relaxed);
        c.head = start;
        c.cached_tail = start;
        let mut next = 0u32;
        let mut want = 0u32;
        for _ in 0..10 {
            while p.push(next).is_ok() {
                next += 1;
            }
            assert_eq!(c.len(), 4);
            let mut out = Vec::new();
            assert_eq!(c.pop_batch(&mut out, 3), 3);
            assert_eq!(c.pop(), Some(want + 3));
            assert_eq!(out, [want, want + 1, want + 2]);
            want += 4;
        }
    }

    #[test]
    fn push_batch_takes_only_what_fits() {
        let (mut p, mut c) = spsc(4).unwrap();
        let mut items = 0..10u32;
        assert_eq!(p.push_batch(&mut items), 4);
        assert_eq!(
            items.next(),
            Some(4),
            "the fifth item stayed in the iterator"
        );
        assert_eq!(p.push_batch(&mut items), 0);
        assert_eq!(c.pop(), Some(0));
        assert_eq!(p.push_batch(&mut items), 1);
        let got: Vec<_> = c.drain(usize::MAX).collect();
        assert_eq!(got, [1, 2, 3, 5]);
        assert_eq!(p.push_batch(&mut core::iter::empty()), 0);
    }

    #[test]
    fn push_batch_with_a_panicking_iterator_loses_nothing() {
        let counter = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = spsc(4).unwrap();
        let mut items = (0..3).map(|i| {
            assert!(i < 2, "iterator fails on its third item");
            Counted::new(i, &counter)
        });
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            p.push_batch(&mut items);
        }));
        assert!(unwound.is_err());
        assert_eq!(c.len(), 0, "the interrupted batch was not published");
        drop(p);
        assert_eq!(c.len(), 2, "dropping the producer publishes it");
        assert_eq!(c.pop().unwrap().0, 0);
        drop(c);
        assert_eq!(counter.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn drain_publishes_once_when_dropped() {
        let (mut p, mut c) = spsc(4).unwrap();
        p.push_batch(&mut (0..4u32));
        {
            let mut d = c.drain(3);
            assert_eq!(d.len(), 3);
            assert_eq!(d.next(), Some(0));
            assert_eq!(d.next(), Some(1));
            assert_eq!(p.free_slots(), 0, "nothing published mid-batch");
        }
        assert_eq!(p.free_slots(), 2);
        assert_eq!(c.pop(), Some(2), "the unyielded item stayed");
        assert_eq!(c.drain(0).count(), 0);
    }

    #[test]
    fn forgotten_drain_neither_duplicates_nor_double_drops() {
        let counter = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = spsc(4).unwrap();
        for i in 0..4 {
            p.push(Counted::new(i, &counter)).unwrap();
        }
        let mut d = c.drain(2);
        let a = d.next().unwrap();
        core::mem::forget(d);
        assert_eq!(a.0, 0);
        assert_eq!(c.pop().unwrap().0, 1);
        drop(a);
        drop(c);
        assert_eq!(counter.load(Ordering::Relaxed), 2);
        drop(p);
        assert_eq!(counter.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn park_protocol_single_threaded() {
        let (mut p, mut c) = spsc(2).unwrap();
        assert!(!p.needs_wake(), "nobody parked");
        assert!(c.prepare_park());
        p.push(1u8).unwrap();
        assert!(p.needs_wake());
        assert!(!p.needs_wake(), "one park, one wake-up");
        assert!(!c.prepare_park(), "an item is waiting");
        assert!(!p.needs_wake(), "a refused park leaves no flag behind");
        assert_eq!(c.pop(), Some(1));
        assert!(c.prepare_park());
        c.cancel_park();
        p.push(2).unwrap();
        assert!(!p.needs_wake(), "cancelled");
        assert_eq!(c.pop(), Some(2));
        assert!(c.prepare_park());
        assert!(
            p.close(),
            "a parked consumer must be woken to see the close"
        );
        assert!(c.is_abandoned());
        assert!(!c.prepare_park(), "nothing will ever come");
    }

    #[test]
    fn abandonment_is_seen_from_both_sides() {
        let (p, c) = spsc::<u8>(2).unwrap();
        assert!(!p.is_abandoned() && !c.is_abandoned());
        drop(c);
        assert!(p.is_abandoned());
        let (p, c) = spsc::<u8>(2).unwrap();
        drop(p);
        assert!(c.is_abandoned());
    }

    #[test]
    fn zero_sized_items() {
        let (mut p, mut c) = spsc(2).unwrap();
        p.push(()).unwrap();
        p.push(()).unwrap();
        assert!(p.push(()).is_err());
        assert_eq!(c.pop(), Some(()));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn ends_are_send() {
        fn send<T: Send>() {}
        send::<Producer<String>>();
        send::<Consumer<String>>();
        let e: &dyn std::error::Error = &Full(3u8);
        assert_eq!(e.to_string(), "ring full");
        assert_eq!(format!("{:?}", Full(3u8)), "Full(..)");
    }

    /// Counts its drops.
    struct Counted(u32, Arc<AtomicUsize>);

    impl Counted {
        fn new(i: u32, counter: &Arc<AtomicUsize>) -> Self {
            Self(i, Arc::clone(counter))
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
}
