//! Per-core budgeted memory for the DTP data plane (SPEC §5, MEM-1 … MEM-9).
//!
//! A [`Region`] is one execution region — one core's pool. It owns:
//!
//! * **one page-aligned backing allocation** cut into fixed-size chunks
//!   (MEM-2), whose addresses never move, so an io_uring driver can register
//!   it whole ([`Region::raw_region`]) or pass single chunks to the kernel
//!   ([`Region::submit`] returns raw [`RawSpan`]s with chunk indices);
//! * **generational handles** for everything a peer or an application may
//!   hold — [`BufferHandle`], [`LeaseHandle`], [`Ticket`], [`ContextHandle`],
//!   [`ModuleHandle`] — tagged with the issuing [`RegionId`] (MEM-4);
//! * **range checks** without overflow (MEM-5, [`check_range`]);
//! * **ownership and leases** (MEM-6, [`Region::grant_lease`]);
//! * **asynchronous requests** from admission to reclaim, with a bounded
//!   completion queue that backends on other threads post into through a
//!   [`CompletionPoster`] (MEM-7); a backend that completes on the owner's
//!   thread is posted and reclaimed in one step ([`Region::complete`]), and
//!   a receive buffer read at once is lent again in place
//!   ([`Region::renew`]);
//! * **budgets** per lifetime class and per slot table, where exhaustion is
//!   backpressure ([`PoolError::WouldBlock`] / [`PoolError::Limit`]) and never
//!   growth (MEM-1, MEM-8);
//! * **an accounting report** that keeps reserved backing, metadata, live
//!   data, module-internal space, swap-in space and external bytes apart
//!   ([`Region::report`], MEM-3).
//!
//! The crate does no IO and reads no clock: time enters through
//! [`Region::advance`]. Everything is allocated when the region is created.
//!
//! Reserved capacity is what the region asked the allocator for; it is not the
//! process's resident set size (RSS). The report shows an RSS figure only if
//! the runtime measured and supplied one ([`Region::observe_rss`]).
//!
//! # Threads
//!
//! A region is driven by one thread (`Send`, not `Sync`); its control API is
//! serial and never re-entered. The only state shared across threads is the
//! completion queue with its per-ticket post states ([`CompletionPoster`] is
//! `Send + Sync`). Under `--cfg loom` those use loom's model-checked atomics.
//!
//! # Unsafe code
//!
//! Confined to `backing` (the mapping, slices into it, the volatile wipe),
//! `completion` (the queue cells) and `ring` (the SPSC control rings'
//! slots), each block with a `SAFETY` comment.
//!
//! # Example
//!
//! ```
//! use dtp_pool::{BufferSpec, Class, Completion, Principal, Range, Region, RegionConfig,
//!                RequestSpec, ModuleSpec};
//!
//! let mut region = Region::new(RegionConfig::new(16 * 1024, 8))?;
//! let app = Principal::new(1);
//! let io = region.register_module(ModuleSpec::new(0))?;
//! let out = region.acquire(app, BufferSpec::new(Class::Scratch, 16 * 1024))?;
//!
//! // Admit a receive into `out`, hand it to the backend, post its completion.
//! let ticket = region.admit(app, RequestSpec::new(io).output(Range::new(out, 0, 1024)))?;
//! let submission = region.submit(ticket)?;
//! assert!(submission.output.is_some()); // raw pointer + chunk index for the kernel
//! region.poster().post(Completion::success(ticket, 0))?;
//!
//! let done = region.reclaim().expect("posted above");
//! assert_eq!(done.published, 0);
//! region.release(app, out)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod accounting;
mod backing;
mod budget;
mod completion;
mod error;
mod handle;
mod heap;
mod lease;
mod module;
mod range;
mod region;
mod renew;
mod request;
mod ring;
mod sync;

pub use accounting::{HighWater, MemoryReport, MetadataBytes};
pub use backing::{BACKING_ALIGN, MappingGuard, RawRegion, RawSpan};
pub use budget::{Class, ClassBytes, RegionConfig};
pub use completion::{Completion, CompletionPoster, Diagnostic, DiagnosticCounts, Status};
pub use error::{BusyReason, HandleKind, PoolError, Resource};
pub use handle::{BufferHandle, ContextHandle, LeaseHandle, ModuleHandle, RegionId, Ticket};
pub use heap::{CountingAlloc, heap_bytes};
pub use lease::{LeaseInfo, LeaseMode};
pub use module::{ModuleReport, ModuleSpec};
pub use range::{Range, check_range};
pub use region::{BufferInfo, BufferSpec, Principal, Region};
pub use renew::Renewal;
pub use request::{CancelOutcome, Reclaimed, RequestInfo, RequestSpec, RequestState, Submission};
pub use ring::{Consumer, Drain, Full, Producer, RingError, spsc};
