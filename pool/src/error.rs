//! The pool's one error type and the small enums its variants carry.
//!
//! Owns the wording a user sees. Every fallible operation of a [`Region`]
//! returns [`PoolError`]; a refused operation never changes region state
//! (MEM-7/MEM-8: "no state change"), so the variant alone tells the caller
//! what to do next: retry later ([`PoolError::WouldBlock`]), give up or raise
//! a budget ([`PoolError::Limit`]), finish the outstanding work first
//! ([`PoolError::Busy`]), or fix a caller bug (the rest).
//!
//! [`Region`]: crate::Region

use crate::budget::Class;
use crate::handle::RegionId;

/// What kind of generational handle an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HandleKind {
    /// A [`crate::BufferHandle`].
    Buffer,
    /// A [`crate::LeaseHandle`].
    Lease,
    /// A [`crate::Ticket`].
    Ticket,
    /// A [`crate::ContextHandle`].
    Context,
    /// A [`crate::ModuleHandle`].
    Module,
}

impl core::fmt::Display for HandleKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::Buffer => "buffer handle",
            Self::Lease => "lease handle",
            Self::Ticket => "ticket",
            Self::Context => "stream-context handle",
            Self::Module => "module handle",
        })
    }
}

/// A budgeted resource of a region (SPEC MEM-1, MEM-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// Chunks of the backing allocation.
    Chunks,
    /// Bytes of one lifetime class (MEM-1 counts the classes separately).
    ClassBytes(Class),
    /// Slots of the buffer handle table.
    BufferSlots,
    /// Slots of the request (ticket) table.
    RequestSlots,
    /// Lease slots.
    LeaseSlots,
    /// Completion slots (= completion-queue capacity).
    CompletionSlots,
    /// Stream-context slots.
    ContextSlots,
    /// Module slots.
    ModuleSlots,
    /// Bytes of module-internal space (codec windows, parser state, …).
    ModuleInternalBytes,
    /// Region identifiers of this process.
    RegionIds,
}

impl core::fmt::Display for Resource {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Chunks => f.write_str("pool chunks"),
            Self::ClassBytes(class) => write!(f, "{class} bytes"),
            Self::BufferSlots => f.write_str("buffer slots"),
            Self::RequestSlots => f.write_str("request slots"),
            Self::LeaseSlots => f.write_str("lease slots"),
            Self::CompletionSlots => f.write_str("completion slots"),
            Self::ContextSlots => f.write_str("stream-context slots"),
            Self::ModuleSlots => f.write_str("module slots"),
            Self::ModuleInternalBytes => f.write_str("module-internal bytes"),
            Self::RegionIds => f.write_str("region identifiers"),
        }
    }
}

/// Why an operation was refused with [`PoolError::Busy`] (SPEC MEM-6, MEM-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BusyReason {
    /// The buffer has at least one read lease.
    ReadLeased,
    /// The buffer has an exclusive write lease.
    WriteLeased,
    /// The stream context already has its one in-flight call (MEM-7).
    ContextInFlight,
    /// The module still has admitted, unreclaimed requests.
    LiveWork,
    /// The module still has open stream contexts.
    OpenContexts,
    /// Buffers attributed to the module are still leased or allocated.
    ModuleBuffers,
    /// A module swap is already staged.
    SwapStaged,
}

impl core::fmt::Display for BusyReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::ReadLeased => "the buffer is read-leased; end the leases first",
            Self::WriteLeased => "the buffer is write-leased; wait for the writer to end its lease",
            Self::ContextInFlight => {
                "the stream context already has a call in flight; reclaim its completion first"
            }
            Self::LiveWork => "the module has requests in flight; reclaim their completions first",
            Self::OpenContexts => "the module has open stream contexts; close them first",
            Self::ModuleBuffers => "buffers attributed to the module are still held",
            Self::SwapStaged => "a swap is already staged for this module",
        })
    }
}

/// Every way a region operation can fail. A returned error means the region's
/// state is exactly as before the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// SPEC MEM-8: the resource is exhausted right now; retry after some work
    /// has been reclaimed or released.
    #[error("{resource} exhausted right now; retry after reclaiming or releasing")]
    WouldBlock {
        /// The exhausted resource.
        resource: Resource,
    },
    /// SPEC MEM-8: the request can never fit the configured budget.
    #[error("{resource}: {requested} requested but the budget is {limit}")]
    Limit {
        /// The budgeted resource.
        resource: Resource,
        /// What the operation needed.
        requested: u64,
        /// The configured ceiling.
        limit: u64,
    },
    /// SPEC MEM-6/MEM-8: refused because of leases, live work or open contexts;
    /// ownership and state are kept.
    #[error("busy: {reason}")]
    Busy {
        /// What keeps the object busy.
        reason: BusyReason,
    },
    /// SPEC MEM-4: the handle's generation is not current (released, reissued,
    /// never issued, or generation 0).
    #[error("stale {kind}: it was released or never issued by this region")]
    StaleHandle {
        /// The kind of handle.
        kind: HandleKind,
    },
    /// SPEC MEM-4: the handle was issued by another region.
    #[error("{kind} belongs to region {found}, not to region {expected}")]
    WrongRegion {
        /// The kind of handle.
        kind: HandleKind,
        /// This region.
        expected: RegionId,
        /// The region named by the handle.
        found: RegionId,
    },
    /// SPEC MEM-5: `offset`/`length` fall outside `bound` (the valid length
    /// for reads, the reserved capacity for writes).
    #[error("range offset {offset} length {length} exceeds bound {bound}")]
    OutOfRange {
        /// Requested offset.
        offset: u32,
        /// Requested length.
        length: u32,
        /// The bound the range was checked against.
        bound: u32,
    },
    /// SPEC MEM-5: the range does not meet the required alignment.
    #[error("range offset {offset} is not aligned to {align} bytes")]
    Misaligned {
        /// Requested offset.
        offset: u32,
        /// Required alignment.
        align: u32,
    },
    /// SPEC MEM-4: every slot of the table reached the maximum generation and
    /// was retired; no handle can be issued any more.
    #[error("every {kind} slot reached its maximum generation and is retired")]
    GenerationExhausted {
        /// The kind of handle.
        kind: HandleKind,
    },
    /// SPEC MEM-9(7): the allocator refused the backing or metadata allocation.
    #[error("allocation of {bytes} bytes failed")]
    AllocationFailed {
        /// Bytes requested from the allocator.
        bytes: u64,
    },
    /// SPEC MEM-9(7): a length or size computation overflowed.
    #[error("size overflow computing {what}")]
    SizeOverflow {
        /// What was being computed.
        what: &'static str,
    },
    /// SPEC MEM-5/MEM-6: the requester is not the owner or lease holder.
    #[error("the requester holds no right to this {kind}")]
    NotOwner {
        /// The kind of handle.
        kind: HandleKind,
    },
    /// SPEC MEM-5: the lease's access mode does not allow the operation.
    #[error("a {held:?} lease does not allow this access")]
    WrongMode {
        /// The mode the lease carries.
        held: crate::lease::LeaseMode,
    },
    /// SPEC MEM-5: a v0 output buffer must start with valid length 0 and the
    /// output range at offset 0; earlier data is never discarded implicitly.
    #[error("output buffer must be empty at offset 0 (valid length {valid}, offset {offset})")]
    OutputNotEmpty {
        /// The output buffer's current valid length.
        valid: u32,
        /// The output range's offset.
        offset: u32,
    },
    /// SPEC MEM-5: valid length may only grow over bytes verified as written.
    #[error("cannot publish {requested} valid bytes: only {written} are written")]
    Unwritten {
        /// Requested valid length.
        requested: u32,
        /// Contiguous written prefix.
        written: u32,
    },
    /// A buffer of this capacity does not fit in one chunk.
    #[error("capacity {requested} exceeds the chunk size {chunk_size}")]
    CapacityTooLarge {
        /// Requested capacity.
        requested: u64,
        /// The region's chunk size.
        chunk_size: u32,
    },
    /// The request or lifecycle step is not valid in the object's state.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The region configuration is inconsistent.
    #[error("invalid region configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with it.
        reason: &'static str,
    },
}
