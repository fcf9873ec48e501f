//! Asynchronous requests: admission, submission, cancel and reclaim
//! (SPEC MEM-7, MEM-8).
//!
//! Owns the request table and the lifecycle
//!
//! ```text
//! prepare (RequestSpec) → admit ─┬─ refused: error, no ticket, no state change
//!                                └─ admitted: Ticket ─→ submit ─→ completion posted ─→ reclaim
//!                                        └─ cancel (a request; races completion) ─┘
//! ```
//!
//! Admission reserves, together, one request slot, one completion slot and one
//! lease per buffer (a read lease on the input, the exclusive write lease on
//! the output). They are all given back in exactly one place: [`Region::reclaim`]
//! of the request's one accepted completion. Nothing else frees them — not a
//! cancel, not a timeout — because a backend may still access the memory until
//! it posts.

use crate::backing::RawSpan;
use crate::completion::{Completion, Diagnostic, DiagnosticCounts, Status};
use crate::error::{BusyReason, HandleKind, PoolError, Resource};
use crate::handle::{BufferHandle, ContextHandle, Key, ModuleHandle, Ticket};
use crate::lease::{Holder, LeaseMode};
use crate::range::{Range, check_range};
use crate::region::{Principal, Region};

/// SPEC MEM-7: a prepared request, before admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// The module (backend) that will serve it.
    pub module: ModuleHandle,
    /// The stream context it belongs to, if any (one call in flight each).
    pub context: Option<ContextHandle>,
    /// Bytes the backend reads: within the input buffer's valid length.
    pub input: Option<Range>,
    /// Where the backend writes: offset 0 of an empty buffer, within capacity.
    pub output: Option<Range>,
}

impl RequestSpec {
    /// A request to `module` with no context, input or output yet.
    pub const fn new(module: ModuleHandle) -> Self {
        Self {
            module,
            context: None,
            input: None,
            output: None,
        }
    }

    /// Sets the stream context.
    pub const fn context(mut self, context: ContextHandle) -> Self {
        self.context = Some(context);
        self
    }

    /// Sets the input range.
    pub const fn input(mut self, input: Range) -> Self {
        self.input = Some(input);
        self
    }

    /// Sets the output range (offset must be 0).
    pub const fn output(mut self, output: Range) -> Self {
        self.output = Some(output);
        self
    }
}

/// SPEC MEM-7: where an admitted request is in its lifecycle, as the owner
/// sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestState {
    /// Admitted with a ticket, not yet handed to the backend.
    Admitted,
    /// Handed to the backend by [`Region::submit`].
    Submitted,
    /// The region itself posted the completion (cancel before submission, or
    /// a refused submission); it waits to be reclaimed.
    Completing,
}

/// A snapshot of one admitted request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// Lifecycle state.
    pub state: RequestState,
    /// Whether the owner asked to cancel it.
    pub cancel_requested: bool,
    /// Whether a completion was posted and waits in the queue.
    pub completion_posted: bool,
}

/// What [`Region::submit`] gives the backend: the raw spans it may access
/// until it posts the completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The request's ticket (put it in io_uring `user_data` via
    /// [`Ticket::to_u64`]).
    pub ticket: Ticket,
    /// The input span, read-only.
    pub input: Option<RawSpan>,
    /// The output span, write-only until the completion is posted.
    pub output: Option<RawSpan>,
}

/// SPEC MEM-7: the result of a cancel request. Cancel never frees anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Not submitted yet: a cancelled completion was posted through the queue;
    /// reclaim it as usual.
    CancelledBeforeSubmit,
    /// Submitted: the cancel is recorded; forward it to the backend (e.g.
    /// `IORING_OP_ASYNC_CANCEL`) and wait for whichever completion wins.
    Requested,
    /// A cancel was already requested.
    AlreadyRequested,
    /// The completion is already posted or being posted; nothing to cancel.
    AlreadyCompleted,
}

/// SPEC MEM-7: the outcome of reclaiming one completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reclaimed {
    /// The request's ticket (now stale).
    pub ticket: Ticket,
    /// How it ended.
    pub status: Status,
    /// The output's new valid length: the verified `produced` (0 after an
    /// authentication failure or an invalid length).
    pub published: u32,
    /// The input buffer, whose read lease ended.
    pub input: Option<BufferHandle>,
    /// The output buffer, whose write lease ended.
    pub output: Option<BufferHandle>,
    /// The stream context, free for its next call.
    pub context: Option<ContextHandle>,
    /// Whether the owner had asked to cancel.
    pub cancel_requested: bool,
    /// What was wrong with the completion, if anything.
    pub diagnostic: Option<Diagnostic>,
}

/// A buffer a request holds a lease on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub(crate) buffer: Key,
    pub(crate) offset: u32,
    pub(crate) length: u32,
    pub(crate) lease: Key,
}

/// One admitted request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    pub(crate) owner: Principal,
    pub(crate) module: ModuleHandle,
    pub(crate) context: Option<Key>,
    pub(crate) input: Option<Held>,
    pub(crate) output: Option<Held>,
    pub(crate) state: RequestState,
    pub(crate) cancel_requested: bool,
}

impl Region {
    /// SPEC MEM-7/MEM-8: admits a prepared request for `who`, which must own
    /// the input, the output and the context.
    ///
    /// Reserves a request slot, a completion slot and the leases first
    /// ([`PoolError::WouldBlock`] when one is exhausted now,
    /// [`PoolError::Limit`] when the budget can never hold it), then checks
    /// every handle, owner, lease state, range and alignment. Any failure
    /// leaves the region exactly as it was and issues no ticket. On success
    /// the input is read-leased, the output write-leased and the context busy
    /// until the completion is reclaimed.
    pub fn admit(&mut self, who: Principal, spec: RequestSpec) -> Result<Ticket, PoolError> {
        // 1. Reservations (checked, not yet taken).
        self.requests
            .check_issue()
            .map_err(|e| e.into_pool_error(HandleKind::Ticket, Resource::RequestSlots, 1))?;
        if self.config.completion_slots == 0 {
            return Err(PoolError::Limit {
                resource: Resource::CompletionSlots,
                requested: 1,
                limit: 0,
            });
        }
        if self.completions_in_use >= self.config.completion_slots {
            return Err(PoolError::WouldBlock {
                resource: Resource::CompletionSlots,
            });
        }
        let leases_needed = u32::from(spec.input.is_some()) + u32::from(spec.output.is_some());
        if self.leases.available() < leases_needed {
            let usable = self.leases.capacity() - self.leases.retired();
            return Err(if self.leases.capacity() < leases_needed {
                PoolError::Limit {
                    resource: Resource::LeaseSlots,
                    requested: u64::from(leases_needed),
                    limit: u64::from(self.leases.capacity()),
                }
            } else if usable < leases_needed {
                PoolError::GenerationExhausted {
                    kind: HandleKind::Lease,
                }
            } else {
                PoolError::WouldBlock {
                    resource: Resource::LeaseSlots,
                }
            });
        }

        // 2. Validation (read-only).
        let align = self.module(spec.module)?.alignment;
        if let Some(c) = spec.context {
            let ctx = self.context(c)?;
            if ctx.owner != who {
                return Err(PoolError::NotOwner {
                    kind: HandleKind::Context,
                });
            }
            if ctx.module != spec.module {
                return Err(PoolError::InvalidRequest {
                    reason: "the stream context belongs to another module",
                });
            }
            if ctx.in_flight.is_some() {
                return Err(PoolError::Busy {
                    reason: BusyReason::ContextInFlight,
                });
            }
        }
        if let Some(input) = spec.input {
            let b = self.owned(input.handle, who)?;
            if b.write_leased {
                return Err(PoolError::Busy {
                    reason: BusyReason::WriteLeased,
                });
            }
            check_range(input.offset, input.length, b.valid, align)?;
            self.check_address_alignment(b.chunk, input.offset, align)?;
        }
        if let Some(output) = spec.output {
            if spec.input.is_some_and(|i| i.handle == output.handle) {
                return Err(PoolError::InvalidRequest {
                    reason: "input and output are the same buffer",
                });
            }
            let b = self.owned(output.handle, who)?;
            b.require_unleased()?;
            if output.offset != 0 || b.valid != 0 {
                return Err(PoolError::OutputNotEmpty {
                    valid: b.valid,
                    offset: output.offset,
                });
            }
            check_range(0, output.length, b.capacity, align)?;
            self.check_address_alignment(b.chunk, 0, align)?;
        }

        // 3. Commit. Every step below was proven possible above.
        let input = match spec.input {
            Some(r) => Some(self.hold(r, LeaseMode::Read)?),
            None => None,
        };
        let output = match spec.output {
            Some(r) => match self.hold(r, LeaseMode::Write) {
                Ok(h) => Some(h),
                Err(e) => {
                    self.unhold(input);
                    return Err(e);
                }
            },
            None => None,
        };
        let request = Request {
            owner: who,
            module: spec.module,
            context: spec.context.map(ContextHandle::key),
            input,
            output,
            state: RequestState::Admitted,
            cancel_requested: false,
        };
        let key = match self.requests.insert(request) {
            Ok(key) => key,
            Err(e) => {
                self.unhold(input);
                self.unhold(output);
                return Err(e.into_pool_error(HandleKind::Ticket, Resource::RequestSlots, 1));
            }
        };
        if let Some(c) = spec.context
            && let Some(ctx) = self.contexts.get_mut(c.key())
        {
            ctx.in_flight = Some(key);
        }
        if let Some(m) = self.modules.get_mut_by_slot(spec.module.slot()) {
            m.in_flight += 1;
        }
        self.completions_in_use += 1;
        self.shared.arm(key.slot, key.generation);
        self.touch();
        Ok(Ticket::from_parts(self.id, key.slot, key.generation))
    }

    /// A snapshot of an admitted request.
    pub fn request_info(&self, ticket: Ticket) -> Result<RequestInfo, PoolError> {
        let r = self.request(ticket)?;
        Ok(RequestInfo {
            state: r.state,
            cancel_requested: r.cancel_requested,
            completion_posted: self.shared.is_posted(ticket.slot(), ticket.generation()),
        })
    }

    /// SPEC MEM-7: hands an admitted request to its backend and returns the
    /// raw spans the backend may access until it posts the completion
    /// (reading the input, writing the output from offset 0).
    pub fn submit(&mut self, ticket: Ticket) -> Result<Submission, PoolError> {
        let r = self.request(ticket)?;
        if r.state != RequestState::Admitted
            || self.shared.is_posted(ticket.slot(), ticket.generation())
        {
            // A posted completion may be reclaimed at any moment; a backend
            // must never get spans the region is about to give back.
            return Err(PoolError::InvalidRequest {
                reason: "the request is already submitted or completing",
            });
        }
        let (input, output) = (r.input, r.output);
        let input = match input {
            Some(h) => Some(self.span(h)?),
            None => None,
        };
        let output = match output {
            Some(h) => Some(self.span(h)?),
            None => None,
        };
        if let Some(r) = self.requests.get_mut(ticket.key()) {
            r.state = RequestState::Submitted;
        }
        Ok(Submission {
            ticket,
            input,
            output,
        })
    }

    /// SPEC MEM-7: the backend refused the submission (for example a full
    /// submission queue). This is a failed completion of the existing ticket,
    /// posted through the queue, not a ticketless rejection.
    pub fn refuse_submit(&mut self, ticket: Ticket, code: u32) -> Result<(), PoolError> {
        let r = self.request(ticket)?;
        if r.state == RequestState::Completing {
            return Err(PoolError::InvalidRequest {
                reason: "a completion was already posted",
            });
        }
        self.shared
            .post(Completion::failed(ticket, code, 0))
            .map_err(|_| PoolError::InvalidRequest {
                reason: "a completion was already posted",
            })?;
        if let Some(r) = self.requests.get_mut(ticket.key()) {
            r.state = RequestState::Completing;
        }
        Ok(())
    }

    /// SPEC MEM-7: asks to cancel. A cancel is a request that races normal
    /// completion; it never frees or releases anything, and the request keeps
    /// its leases and slots until its one completion is reclaimed.
    pub fn cancel(&mut self, who: Principal, ticket: Ticket) -> Result<CancelOutcome, PoolError> {
        let r = self.request(ticket)?;
        if r.owner != who {
            return Err(PoolError::NotOwner {
                kind: HandleKind::Ticket,
            });
        }
        if r.state == RequestState::Completing
            || self.shared.is_posted(ticket.slot(), ticket.generation())
        {
            return Ok(CancelOutcome::AlreadyCompleted);
        }
        let (state, already) = (r.state, r.cancel_requested);
        let outcome = match state {
            RequestState::Admitted => {
                // No backend has it: complete it as cancelled through the queue.
                if self.shared.post(Completion::cancelled(ticket, 0)).is_err() {
                    return Ok(CancelOutcome::AlreadyCompleted);
                }
                CancelOutcome::CancelledBeforeSubmit
            }
            _ if already => CancelOutcome::AlreadyRequested,
            _ => CancelOutcome::Requested,
        };
        if let Some(r) = self.requests.get_mut(ticket.key()) {
            r.cancel_requested = true;
            if outcome == CancelOutcome::CancelledBeforeSubmit {
                r.state = RequestState::Completing;
            }
        }
        Ok(outcome)
    }

    /// SPEC MEM-7: reclaims the next posted completion, if any.
    ///
    /// Validates the ticket and its generation, the module generation, the
    /// length and the status; publishes the verified `produced` as the
    /// output's valid length (also on failure and cancel; 0 after an
    /// authentication failure or an out-of-range length, so no unverified
    /// tail is ever published); then ends the request's leases and frees its
    /// request and completion slots and its context — exactly once.
    pub fn reclaim(&mut self) -> Option<Reclaimed> {
        loop {
            let c = self.shared.pop(&mut self.queue_head)?;
            if let Some(done) = self.apply(c) {
                return Some(done);
            }
        }
    }

    /// Diagnostic counters: post side (duplicates, stale, foreign, full) and
    /// reclaim side (lengths, statuses, module generations).
    pub fn diagnostics(&self) -> DiagnosticCounts {
        let mut counts = self.ledger.diagnostics;
        self.shared.counts(&mut counts);
        counts
    }

    fn apply(&mut self, c: Completion) -> Option<Reclaimed> {
        let ticket = c.ticket;
        let Some(r) = self.requests.remove(ticket.key()) else {
            // Unreachable: the post state admits one completion per armed
            // generation, and only a reclaim removes a request. Counted, not
            // applied.
            self.ledger
                .diagnostics
                .count(Diagnostic::StaleCompletion { ticket });
            return None;
        };
        self.shared.disarm(ticket.slot(), ticket.generation());
        Some(self.settle(c, r))
    }

    /// Applies the completion `c` of the request `r`, already taken out of
    /// the table, whose post state is no longer armed: publishes the
    /// output, ends the leases, frees the slots and the context.
    pub(crate) fn settle(&mut self, c: Completion, r: Request) -> Reclaimed {
        let ticket = c.ticket;
        let (published, diagnostic) = self.verify(&c, &r);
        if let Some(o) = r.output
            && let Some(b) = self.buffers.get_mut(o.buffer)
        {
            // Admission required valid == 0, and the write lease kept it so.
            b.valid = published;
            b.filled = published;
            self.ledger.live_data += u64::from(published);
        }
        self.unhold(r.input);
        self.unhold(r.output);
        if let Some(m) = self.modules.get_mut_by_slot(r.module.slot()) {
            m.in_flight = m.in_flight.saturating_sub(1);
        }
        let context = r.context.and_then(|k| {
            let ctx = self.contexts.get_mut(k)?;
            ctx.in_flight = None;
            Some(ContextHandle::from_parts(self.id, k.slot, k.generation))
        });
        self.completions_in_use -= 1;
        self.touch();
        Reclaimed {
            ticket,
            status: c.status,
            published,
            input: r.input.map(|h| self.buffer_handle(h.buffer)),
            output: r.output.map(|h| self.buffer_handle(h.buffer)),
            context,
            cancel_requested: r.cancel_requested,
            diagnostic,
        }
    }

    /// SPEC MEM-7: what of completion `c` of request `r` may be published
    /// as the output's valid length, and what was wrong with it (counted).
    pub(crate) fn verify(&mut self, c: &Completion, r: &Request) -> (u32, Option<Diagnostic>) {
        let ticket = c.ticket;
        let mut diagnostic = None;
        if self.modules.get(r.module.key()).is_none() {
            diagnostic = Some(Diagnostic::ModuleGenerationChanged { ticket });
        }
        let limit = r.output.map_or(0, |o| o.length);
        let published = match c.status {
            Status::AuthenticationFailed => {
                if c.produced != 0 {
                    diagnostic = Some(Diagnostic::AuthenticationFailureOutput {
                        ticket,
                        produced: c.produced,
                    });
                }
                0
            }
            _ if r.output.is_none() && c.produced != 0 => {
                diagnostic = Some(Diagnostic::ProducedWithoutOutput {
                    ticket,
                    produced: c.produced,
                });
                0
            }
            _ if c.produced > limit => {
                diagnostic = Some(Diagnostic::LengthOutOfRange {
                    ticket,
                    produced: c.produced,
                    limit,
                });
                0
            }
            _ => c.produced,
        };
        if let Some(d) = diagnostic {
            self.ledger.diagnostics.count(d);
        }
        (published, diagnostic)
    }

    /// Whether some backend may still access region memory (drop leaks then).
    pub(crate) fn backend_holds_memory(&self) -> bool {
        self.requests.iter().any(|(key, r)| {
            r.state == RequestState::Submitted && !self.shared.is_posted(key.slot, key.generation)
        })
    }

    /// SPEC MEM-5: a module's alignment applies to addresses, not only to
    /// offsets: the backing is page-aligned, so the offset from its start
    /// decides (a chunk size that is not a multiple of the alignment shifts
    /// chunk starts).
    fn check_address_alignment(
        &self,
        chunk: u32,
        offset: u32,
        align: u32,
    ) -> Result<(), PoolError> {
        let from_base = u64::from(chunk) * u64::from(self.backing.chunk_size()) + u64::from(offset);
        if from_base % u64::from(align) == 0 {
            Ok(())
        } else {
            Err(PoolError::Misaligned { offset, align })
        }
    }

    pub(crate) fn request(&self, ticket: Ticket) -> Result<&Request, PoolError> {
        self.check_region(ticket.region(), Ticket::KIND)?;
        self.requests
            .get(ticket.key())
            .ok_or(PoolError::StaleHandle { kind: Ticket::KIND })
    }

    pub(crate) fn span(&self, h: Held) -> Result<RawSpan, PoolError> {
        let b = self.buffers.get(h.buffer).ok_or(PoolError::StaleHandle {
            kind: HandleKind::Buffer,
        })?;
        self.backing
            .span(b.chunk, h.offset, h.length)
            .ok_or(PoolError::OutOfRange {
                offset: h.offset,
                length: h.length,
                bound: b.capacity,
            })
    }

    /// Takes a request lease on `range` and counts the buffer as pending work
    /// (once per buffer).
    fn hold(&mut self, range: Range, mode: LeaseMode) -> Result<Held, PoolError> {
        let buffer = range.handle.key();
        let lease = self.attach_lease(buffer, mode, Holder::Request)?;
        let chunk_size = u64::from(self.backing.chunk_size());
        if let Some(b) = self.buffers.get_mut(buffer) {
            if b.request_refs == 0 {
                self.ledger.pending_bytes += chunk_size;
            }
            b.request_refs += 1;
        }
        Ok(Held {
            buffer,
            offset: range.offset,
            length: range.length,
            lease,
        })
    }

    fn unhold(&mut self, held: Option<Held>) {
        let Some(h) = held else { return };
        self.detach_lease(h.lease);
        let chunk_size = u64::from(self.backing.chunk_size());
        if let Some(b) = self.buffers.get_mut(h.buffer) {
            b.request_refs = b.request_refs.saturating_sub(1);
            if b.request_refs == 0 {
                self.ledger.pending_bytes -= chunk_size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Class, RegionConfig};
    use crate::module::ModuleSpec;
    use crate::region::BufferSpec;

    const APP: Principal = Principal::new(1);

    fn setup(chunk: u32, align: u32) -> (Region, ModuleHandle) {
        let mut r = Region::new(RegionConfig::new(chunk, 4)).unwrap();
        let m = r
            .register_module(ModuleSpec::new(0).alignment(align))
            .unwrap();
        (r, m)
    }

    #[test]
    fn owner_posted_completion_blocks_submission() {
        let (mut r, m) = setup(64, 1);
        let out = r.acquire(APP, BufferSpec::new(Class::Scratch, 64)).unwrap();
        let t = r
            .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 8)))
            .unwrap();
        r.post(Completion::success(t, 0)).unwrap();
        assert!(r.request_info(t).unwrap().completion_posted);
        assert!(
            r.submit(t).is_err(),
            "no spans for a request about to be reclaimed"
        );
        assert_eq!(r.cancel(APP, t), Ok(CancelOutcome::AlreadyCompleted));
        assert!(r.reclaim().is_some());
        assert!(matches!(r.submit(t), Err(PoolError::StaleHandle { .. })));
    }

    #[test]
    fn module_alignment_applies_to_addresses() {
        // Chunks of 6 bytes: chunk 1 starts 6 bytes into the page.
        let (mut r, m) = setup(6, 4);
        let a = r.acquire(APP, BufferSpec::new(Class::Scratch, 6)).unwrap();
        let b = r.acquire(APP, BufferSpec::new(Class::Scratch, 6)).unwrap();
        assert_eq!(
            (r.chunk_index(a).unwrap(), r.chunk_index(b).unwrap()),
            (0, 1)
        );
        r.admit(APP, RequestSpec::new(m).output(Range::new(a, 0, 4)))
            .unwrap();
        assert_eq!(
            r.admit(APP, RequestSpec::new(m).output(Range::new(b, 0, 4))),
            Err(PoolError::Misaligned {
                offset: 0,
                align: 4
            })
        );
    }

    #[test]
    fn submission_spans_point_into_the_registered_region() {
        let (mut r, m) = setup(4096, 1);
        let inp = r
            .acquire(APP, BufferSpec::new(Class::Scratch, 4096))
            .unwrap();
        r.write(APP, inp, 0, b"0123456789").unwrap();
        r.commit(APP, inp, 10).unwrap();
        let out = r
            .acquire(APP, BufferSpec::new(Class::Scratch, 4096))
            .unwrap();
        let spec = RequestSpec::new(m)
            .input(Range::new(inp, 2, 5))
            .output(Range::new(out, 0, 100));
        let t = r.admit(APP, spec).unwrap();
        let sub = r.submit(t).unwrap();
        let raw = r.raw_region();
        let (i, o) = (sub.input.unwrap(), sub.output.unwrap());
        assert_eq!(
            (i.len(), i.offset_in_chunk(), i.chunk_index()),
            (5, 2, r.chunk_index(inp).unwrap())
        );
        assert_eq!(
            i.as_ptr() as usize,
            raw.chunk_ptr(i.chunk_index()).unwrap().as_ptr() as usize + 2
        );
        assert_eq!(
            (o.len(), o.chunk_index()),
            (100, r.chunk_index(out).unwrap())
        );
        assert!(r.submit(t).is_err(), "submitted once");
        assert_eq!(
            r.cancel(Principal::new(9), t),
            Err(PoolError::NotOwner {
                kind: HandleKind::Ticket
            })
        );
    }

    #[test]
    fn context_and_module_must_match_and_be_owned() {
        let (mut r, m) = setup(64, 1);
        let other = r.register_module(ModuleSpec::new(0)).unwrap();
        let ctx = r.open_context(APP, m).unwrap();
        assert_eq!(
            r.admit(Principal::new(2), RequestSpec::new(m).context(ctx)),
            Err(PoolError::NotOwner {
                kind: HandleKind::Context
            })
        );
        assert!(matches!(
            r.admit(APP, RequestSpec::new(other).context(ctx)),
            Err(PoolError::InvalidRequest { .. })
        ));
        let buf = r.acquire(APP, BufferSpec::new(Class::Scratch, 64)).unwrap();
        assert!(matches!(
            r.admit(
                APP,
                RequestSpec::new(m)
                    .input(Range::new(buf, 0, 0))
                    .output(Range::new(buf, 0, 1))
            ),
            Err(PoolError::InvalidRequest { .. })
        ));
        r.audit().unwrap();
    }
}
