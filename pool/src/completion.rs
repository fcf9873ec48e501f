//! The completion queue: the one part of a region that crosses threads
//! (SPEC MEM-7, MEM-8).
//!
//! Owns, shared between the region and its [`CompletionPoster`]s:
//!
//! * one post state per request slot — `generation << 32 | phase` with phase
//!   idle, armed (admitted, no completion yet) or posted. A post must win the
//!   compare-exchange `armed(g) → posted(g)`, so at most one completion per
//!   ticket generation ever enters the queue; a duplicate or a late
//!   completion for a released generation loses it and is diagnosed, counted
//!   and returned to the poster. It never reaches the region's tables.
//! * a bounded multi-producer, single-consumer ring (Dmitry Vyukov's bounded
//!   queue) whose capacity is at least the region's completion slots. Every
//!   admitted request holds one completion slot until its completion is
//!   reclaimed, and only one post per admitted request gets in, so a post never
//!   finds the ring full: completions are never dropped and the ring never
//!   grows (MEM-8).
//!
//! Only the region's owner pops, and it alone applies completions; workers
//! never touch buffers' bookkeeping. This module never reads buffer memory.

use crate::error::PoolError;
use crate::handle::{RegionId, Ticket, try_reserve};
use crate::sync::{Arc, AtomicU64, AtomicUsize, Ordering, UnsafeCell};

/// SPEC MEM-7: how a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The backend finished normally.
    Success,
    /// The backend failed (including a refused submission, MEM-7); `produced`
    /// is the declared valid prefix of the output.
    Failed {
        /// Backend-specific error code (an errno, a codec error number).
        code: u32,
    },
    /// The backend honoured a cancel request; `produced` is the valid prefix.
    Cancelled,
    /// SPEC MEM-9(5): an authenticated unit failed verification; nothing of
    /// the output is published, whatever `produced` says.
    AuthenticationFailed,
}

/// SPEC MEM-7: the final completion of one admitted request, as a backend
/// posts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The request's ticket.
    pub ticket: Ticket,
    /// How it ended.
    pub status: Status,
    /// Bytes of the output the backend verified as written, from offset 0.
    pub produced: u32,
}

impl Completion {
    /// A successful completion that produced `produced` output bytes.
    pub const fn success(ticket: Ticket, produced: u32) -> Self {
        Self {
            ticket,
            status: Status::Success,
            produced,
        }
    }

    /// A failed completion with a declared valid prefix of `produced` bytes.
    pub const fn failed(ticket: Ticket, code: u32, produced: u32) -> Self {
        Self {
            ticket,
            status: Status::Failed { code },
            produced,
        }
    }

    /// A cancelled completion with a valid prefix of `produced` bytes.
    pub const fn cancelled(ticket: Ticket, produced: u32) -> Self {
        Self {
            ticket,
            status: Status::Cancelled,
            produced,
        }
    }

    /// An authentication failure: publishes nothing.
    pub const fn authentication_failed(ticket: Ticket) -> Self {
        Self {
            ticket,
            status: Status::AuthenticationFailed,
            produced: 0,
        }
    }
}

/// SPEC MEM-7: what was wrong with a completion. Returned to the poster (post
/// side) or attached to [`crate::Reclaimed`] (reclaim side), and counted in
/// [`DiagnosticCounts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Diagnostic {
    /// A completion for this ticket generation was already posted (and may
    /// have been reclaimed). Nothing is released twice.
    #[error("duplicate completion for ticket {ticket:?}")]
    DuplicateCompletion {
        /// The ticket named by the completion.
        ticket: Ticket,
    },
    /// The ticket's generation is not the slot's current one: a late
    /// completion for a released request, or a ticket never issued. It never
    /// touches the slot's new request or its buffers.
    #[error("stale completion for ticket {ticket:?}")]
    StaleCompletion {
        /// The ticket named by the completion.
        ticket: Ticket,
    },
    /// The ticket was issued by another region.
    #[error("completion for ticket {ticket:?} posted to region {region}")]
    WrongRegion {
        /// The ticket named by the completion.
        ticket: Ticket,
        /// The region it was posted to.
        region: RegionId,
    },
    /// `produced` exceeded the output range; nothing was published.
    #[error("ticket {ticket:?} produced {produced} bytes into an output of {limit}; published 0")]
    LengthOutOfRange {
        /// The request's ticket.
        ticket: Ticket,
        /// What the backend claimed.
        produced: u32,
        /// The output range's length.
        limit: u32,
    },
    /// An authentication failure claimed output bytes; none were published.
    #[error("ticket {ticket:?} failed authentication but claimed {produced} bytes; published 0")]
    AuthenticationFailureOutput {
        /// The request's ticket.
        ticket: Ticket,
        /// What the backend claimed.
        produced: u32,
    },
    /// `produced` was non-zero for a request without output.
    #[error("ticket {ticket:?} has no output but claimed {produced} bytes")]
    ProducedWithoutOutput {
        /// The request's ticket.
        ticket: Ticket,
        /// What the backend claimed.
        produced: u32,
    },
    /// The request's module was unregistered or swapped while it was in
    /// flight (should be impossible: both are refused as busy).
    #[error("ticket {ticket:?}: the module generation changed while in flight")]
    ModuleGenerationChanged {
        /// The request's ticket.
        ticket: Ticket,
    },
    /// The ring was full. Impossible while every post holds a completion slot;
    /// reported instead of dropping anything. The ticket stays armed.
    #[error("completion queue full for ticket {ticket:?}")]
    QueueFull {
        /// The ticket named by the completion.
        ticket: Ticket,
    },
}

/// Counters of every [`Diagnostic`] seen by a region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiagnosticCounts {
    /// [`Diagnostic::DuplicateCompletion`].
    pub duplicate: u64,
    /// [`Diagnostic::StaleCompletion`].
    pub stale: u64,
    /// [`Diagnostic::WrongRegion`].
    pub wrong_region: u64,
    /// [`Diagnostic::QueueFull`].
    pub queue_full: u64,
    /// [`Diagnostic::LengthOutOfRange`].
    pub length_out_of_range: u64,
    /// [`Diagnostic::AuthenticationFailureOutput`].
    pub authentication_failure_output: u64,
    /// [`Diagnostic::ProducedWithoutOutput`].
    pub produced_without_output: u64,
    /// [`Diagnostic::ModuleGenerationChanged`].
    pub module_generation_changed: u64,
}

impl DiagnosticCounts {
    pub(crate) fn count(&mut self, d: Diagnostic) {
        let c = match d {
            Diagnostic::DuplicateCompletion { .. } => &mut self.duplicate,
            Diagnostic::StaleCompletion { .. } => &mut self.stale,
            Diagnostic::WrongRegion { .. } => &mut self.wrong_region,
            Diagnostic::QueueFull { .. } => &mut self.queue_full,
            Diagnostic::LengthOutOfRange { .. } => &mut self.length_out_of_range,
            Diagnostic::AuthenticationFailureOutput { .. } => {
                &mut self.authentication_failure_output
            }
            Diagnostic::ProducedWithoutOutput { .. } => &mut self.produced_without_output,
            Diagnostic::ModuleGenerationChanged { .. } => &mut self.module_generation_changed,
        };
        *c += 1;
    }
}

const PHASE_MASK: u64 = 0b11;
const IDLE: u64 = 0;
const ARMED: u64 = 1;
const POSTED: u64 = 2;

/// Where [`Shared::claim`] leaves a ticket's post state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Idle: the request is reclaimed.
    Done,
    /// Armed under the next generation of the same slot: the request is
    /// handed to its backend again under a new ticket.
    Renewed,
}

const fn state(generation: u32, phase: u64) -> u64 {
    ((generation as u64) << 32) | phase
}

/// One ring cell: Vyukov's sequence number plus the payload.
#[derive(Debug)]
struct Cell {
    seq: AtomicUsize,
    value: UnsafeCell<Option<Completion>>,
}

/// The state shared by a region and its posters.
#[derive(Debug)]
pub(crate) struct Shared {
    region: RegionId,
    states: Box<[AtomicU64]>,
    cells: Box<[Cell]>,
    mask: usize,
    tail: AtomicUsize,
    duplicate: AtomicU64,
    stale: AtomicU64,
    wrong_region: AtomicU64,
    queue_full: AtomicU64,
}

// SAFETY: the only non-`Sync` field is each cell's `UnsafeCell`. A producer
// writes a cell only after winning the `tail` compare-exchange for that
// position while the cell's `seq` equals the position (so no other producer
// and not the consumer can be in it), and publishes with a release store of
// `seq`; the single consumer reads it only after an acquire load sees that
// store, and hands the cell back with its own release store. Accesses to one
// cell are therefore never concurrent.
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn new(
        region: RegionId,
        request_slots: u32,
        completion_slots: u32,
    ) -> Result<Self, PoolError> {
        let mut states = Vec::new();
        try_reserve(&mut states, request_slots as usize)?;
        states.extend((0..request_slots).map(|_| AtomicU64::new(state(0, IDLE))));
        // `completion_slots <= 2^30` is checked by the config.
        let ring = (completion_slots.max(1) as usize).next_power_of_two();
        let mut cells = Vec::new();
        try_reserve(&mut cells, ring)?;
        cells.extend((0..ring).map(|i| Cell {
            seq: AtomicUsize::new(i),
            value: UnsafeCell::new(None),
        }));
        Ok(Self {
            region,
            states: states.into_boxed_slice(),
            cells: cells.into_boxed_slice(),
            mask: ring - 1,
            tail: AtomicUsize::new(0),
            duplicate: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            wrong_region: AtomicU64::new(0),
            queue_full: AtomicU64::new(0),
        })
    }

    /// Heap bytes of post states and ring cells (MEM-3 metadata).
    pub(crate) fn metadata_bytes(&self) -> (u64, u64) {
        let states = self.states.len() * core::mem::size_of::<AtomicU64>();
        let cells = self.cells.len() * core::mem::size_of::<Cell>();
        (states as u64, cells as u64)
    }

    /// Admission: the ticket `(slot, generation)` may now be posted once.
    pub(crate) fn arm(&self, slot: u32, generation: u32) {
        if let Some(s) = self.states.get(slot as usize) {
            s.store(state(generation, ARMED), Ordering::Release);
        }
    }

    /// Reclaim: the ticket's completion was applied; later posts are
    /// duplicates.
    pub(crate) fn disarm(&self, slot: u32, generation: u32) {
        if let Some(s) = self.states.get(slot as usize) {
            s.store(state(generation, IDLE), Ordering::Release);
        }
    }

    /// Whether a completion for the ticket has been posted and not yet
    /// reclaimed.
    pub(crate) fn is_posted(&self, slot: u32, generation: u32) -> bool {
        self.states
            .get(slot as usize)
            .is_some_and(|s| s.load(Ordering::Acquire) == state(generation, POSTED))
    }

    /// SPEC MEM-7: a backend posts the final completion of a ticket.
    pub(crate) fn post(&self, c: Completion) -> Result<(), Diagnostic> {
        let ticket = c.ticket;
        let slot = self.post_state(ticket)?;
        let generation = ticket.generation();
        let armed = state(generation, ARMED);
        if let Err(current) = slot.compare_exchange(
            armed,
            state(generation, POSTED),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            return Err(self.refused(ticket, current));
        }
        if self.push(c).is_err() {
            // Give the ticket back so the post can be retried; nothing dropped.
            slot.store(armed, Ordering::Release);
            self.queue_full.fetch_add(1, Ordering::Relaxed);
            return Err(Diagnostic::QueueFull { ticket });
        }
        Ok(())
    }

    /// SPEC MEM-7: the region's owner takes the completion of `ticket`
    /// itself, without the queue: the ticket's post state goes from armed
    /// straight to `next` — idle ([`Claim::Done`]), or armed again under
    /// the slot's next generation ([`Claim::Renewed`]). A worker's post of
    /// the same ticket loses to it exactly as to another post (a
    /// duplicate); one that won first makes this claim a duplicate, and its
    /// completion waits in the queue. `alone` says that no
    /// [`CompletionPoster`] was ever handed out, so no other thread can
    /// touch the post states: a plain load and store then do what the
    /// compare-exchange does.
    pub(crate) fn claim(&self, ticket: Ticket, next: Claim, alone: bool) -> Result<(), Diagnostic> {
        let slot = self.post_state(ticket)?;
        let generation = ticket.generation();
        let armed = state(generation, ARMED);
        let next = match next {
            Claim::Done => state(generation, IDLE),
            Claim::Renewed => state(generation.wrapping_add(1), ARMED),
        };
        let won = if alone {
            let current = slot.load(Ordering::Relaxed);
            if current == armed {
                slot.store(next, Ordering::Relaxed);
                Ok(())
            } else {
                Err(current)
            }
        } else {
            slot.compare_exchange(armed, next, Ordering::AcqRel, Ordering::Acquire)
                .map(drop)
        };
        won.map_err(|current| self.refused(ticket, current))
    }

    /// The post state of `ticket`'s slot, if the ticket can name one (this
    /// region's, generation not 0); counts the refusal otherwise.
    fn post_state(&self, ticket: Ticket) -> Result<&AtomicU64, Diagnostic> {
        if ticket.region() != self.region {
            self.wrong_region.fetch_add(1, Ordering::Relaxed);
            return Err(Diagnostic::WrongRegion {
                ticket,
                region: self.region,
            });
        }
        let slot = self.states.get(ticket.slot() as usize);
        match (slot, ticket.generation() != 0) {
            (Some(slot), true) => Ok(slot),
            _ => {
                self.stale.fetch_add(1, Ordering::Relaxed);
                Err(Diagnostic::StaleCompletion { ticket })
            }
        }
    }

    /// Why a completion for `ticket` found the post state `current` instead
    /// of armed, counted.
    fn refused(&self, ticket: Ticket, current: u64) -> Diagnostic {
        if current >> 32 == u64::from(ticket.generation()) && current & PHASE_MASK != ARMED {
            self.duplicate.fetch_add(1, Ordering::Relaxed);
            Diagnostic::DuplicateCompletion { ticket }
        } else {
            self.stale.fetch_add(1, Ordering::Relaxed);
            Diagnostic::StaleCompletion { ticket }
        }
    }

    /// Vyukov's bounded enqueue.
    fn push(&self, c: Completion) -> Result<(), ()> {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos & self.mask];
            let seq = cell.seq.load(Ordering::Acquire);
            // Sequence numbers wrap; their signed distance tells the cell's phase.
            let dif = seq.wrapping_sub(pos) as isize;
            if dif == 0 {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        cell.value.with_mut(|p| {
                            // SAFETY: winning the CAS for `pos` while
                            // `seq == pos` gives this producer exclusive access
                            // to the cell until it stores `seq = pos + 1`
                            // (see `unsafe impl Sync for Shared`).
                            unsafe { *p = Some(c) }
                        });
                        cell.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return Ok(());
                    }
                    Err(actual) => pos = actual,
                }
            } else if dif < 0 {
                return Err(());
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Vyukov's dequeue for the single consumer, whose position is `head`.
    pub(crate) fn pop(&self, head: &mut usize) -> Option<Completion> {
        let pos = *head;
        let cell = &self.cells[pos & self.mask];
        let seq = cell.seq.load(Ordering::Acquire);
        if seq != pos.wrapping_add(1) {
            return None;
        }
        let value = cell.value.with(|p| {
            // SAFETY: `seq == pos + 1` (acquire) means the producer finished
            // writing and released the cell to the consumer; producers skip it
            // until the consumer's release store below.
            unsafe { *p }
        });
        cell.seq.store(
            pos.wrapping_add(self.mask).wrapping_add(1),
            Ordering::Release,
        );
        *head = pos.wrapping_add(1);
        value
    }

    /// The post-side diagnostic counters.
    pub(crate) fn counts(&self, into: &mut DiagnosticCounts) {
        into.duplicate += self.duplicate.load(Ordering::Relaxed);
        into.stale += self.stale.load(Ordering::Relaxed);
        into.wrong_region += self.wrong_region.load(Ordering::Relaxed);
        into.queue_full += self.queue_full.load(Ordering::Relaxed);
    }
}

/// SPEC MEM-7: the handle through which workers (on any thread) post
/// completions into a region's bounded completion queue. Cheap to clone;
/// `Send + Sync`. Posting never applies anything: the region's owner does that
/// serially in [`crate::Region::reclaim`].
#[derive(Clone, Debug)]
pub struct CompletionPoster {
    shared: Arc<Shared>,
}

impl CompletionPoster {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// The region this poster feeds.
    pub fn region(&self) -> RegionId {
        self.shared.region
    }

    /// SPEC MEM-7/MEM-8: posts the final completion of an admitted request.
    /// Never blocks and never fails for lack of room. A second completion for
    /// the same ticket ([`Diagnostic::DuplicateCompletion`]), one for a
    /// released generation ([`Diagnostic::StaleCompletion`]) or for another
    /// region ([`Diagnostic::WrongRegion`]) is refused, counted, and has no
    /// effect on the region.
    ///
    /// The backend must have finished every access to the request's memory
    /// before it posts.
    pub fn post(&self, completion: Completion) -> Result<(), Diagnostic> {
        self.shared.post(completion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(slots: u32) -> (Shared, RegionId) {
        let id = RegionId::next().unwrap();
        (Shared::new(id, slots, slots).unwrap(), id)
    }

    #[test]
    fn one_post_per_armed_generation() {
        let (s, id) = shared(2);
        let t = Ticket::from_parts(id, 1, 1);
        assert_eq!(
            s.post(Completion::success(t, 0)),
            Err(Diagnostic::StaleCompletion { ticket: t })
        );
        s.arm(1, 1);
        s.post(Completion::success(t, 3)).unwrap();
        assert!(s.is_posted(1, 1));
        assert_eq!(
            s.post(Completion::success(t, 3)),
            Err(Diagnostic::DuplicateCompletion { ticket: t })
        );
        let mut head = 0;
        assert_eq!(s.pop(&mut head), Some(Completion::success(t, 3)));
        assert_eq!(s.pop(&mut head), None);
        s.disarm(1, 1);
        s.arm(1, 2);
        assert_eq!(
            s.post(Completion::success(t, 3)),
            Err(Diagnostic::StaleCompletion { ticket: t }),
            "a late completion for generation 1 must not hit generation 2"
        );
        let mut counts = DiagnosticCounts::default();
        s.counts(&mut counts);
        assert_eq!((counts.duplicate, counts.stale), (1, 2));
    }

    #[test]
    fn ring_wraps_many_times() {
        let (s, id) = shared(3);
        let mut head = 0;
        for round in 1..=100u32 {
            for slot in 0..3 {
                s.arm(slot, round);
                s.post(Completion::success(
                    Ticket::from_parts(id, slot, round),
                    slot,
                ))
                .unwrap();
            }
            for slot in 0..3 {
                let c = s.pop(&mut head).unwrap();
                assert_eq!((c.ticket.slot(), c.produced), (slot, slot));
                s.disarm(slot, round);
            }
        }
    }

    #[test]
    fn generation_zero_and_foreign_tickets_are_refused() {
        let (s, id) = shared(1);
        s.arm(0, 1);
        let zero = Ticket::from_parts(id, 0, 0);
        assert!(matches!(
            s.post(Completion::success(zero, 0)),
            Err(Diagnostic::StaleCompletion { .. })
        ));
        let other = RegionId::next().unwrap();
        let foreign = Ticket::from_parts(other, 0, 1);
        assert!(matches!(
            s.post(Completion::success(foreign, 0)),
            Err(Diagnostic::WrongRegion { .. })
        ));
        assert!(matches!(
            s.post(Completion::success(Ticket::from_parts(id, 9, 1), 0)),
            Err(Diagnostic::StaleCompletion { .. })
        ));
    }
}
