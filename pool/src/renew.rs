//! The owner's own completions, applied in one step, and an output lent
//! again in place (SPEC MEM-7).
//!
//! A backend that completes on the owner's thread — an io_uring completion
//! read by the core that submitted it, a `read(2)` that returned — would
//! post its completion into the queue and reclaim it at once.
//! [`Region::complete`] does both in one step: it takes the ticket's post
//! state from armed to idle itself (a worker's post of the same ticket
//! loses to it as to any other post, and one that came first makes this
//! one the duplicate) and applies the completion exactly as
//! [`Region::reclaim`] would. Nothing is called back: the owner calls it,
//! serially, like every other control operation.
//!
//! [`Region::renew`] goes one step further for a request that only writes
//! an output whose bytes the owner reads at once and then lends to the
//! same backend again (a receive buffer whose bytes are copied out): it
//! applies the completion, lets the owner read what it published,
//! discards it and hands the same request back to its backend under the
//! slot's next generation. That is what `complete`, `read`, `truncate` to
//! 0, `admit` of the same spec and `submit` do, without giving back and
//! taking again the request, completion and lease slots in between —
//! those could not have failed, as nothing else ran in between. The old
//! ticket is stale from then on (a late completion for it is diagnosed,
//! never applied), and the buffer stays write-leased except while the
//! owner reads it.
//!
//! This module owns no state of its own; it never touches another
//! request's slots.

use crate::backing::RawSpan;
use crate::completion::{Claim, Completion, Diagnostic, Status};
use crate::error::{HandleKind, PoolError};
use crate::handle::Ticket;
use crate::range::Range;
use crate::region::{Principal, Region};
use crate::request::{Reclaimed, RequestSpec, RequestState, Submission};

/// SPEC MEM-7: what [`Region::renew`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    /// The completed ticket (stale from now on).
    pub completed: Ticket,
    /// How it ended.
    pub status: Status,
    /// Bytes the completion published (the verified `produced`, as
    /// [`Reclaimed::published`]): what the owner read.
    pub published: u32,
    /// What was wrong with the completion, if anything (counted).
    pub diagnostic: Option<Diagnostic>,
    /// The request's new ticket, submitted.
    pub ticket: Ticket,
    /// Where the backend may write until it posts the new ticket's
    /// completion (the output span [`Region::submit`] would return).
    pub output: RawSpan,
}

impl Region {
    /// SPEC MEM-7: the owner posts and reclaims the completion `c` of one of
    /// its requests in one step. The completion is checked, published and
    /// applied exactly as [`Region::post`] followed by [`Region::reclaim`]
    /// would (the same diagnostics); completions that workers posted stay
    /// in the queue for `reclaim`.
    ///
    /// A refused completion (duplicate, stale, another region's) is
    /// counted and returned, and changes nothing.
    pub fn complete(&mut self, c: Completion) -> Result<Reclaimed, Diagnostic> {
        let alone = self.alone();
        self.shared.claim(c.ticket, Claim::Done, alone)?;
        match self.requests.remove(c.ticket.key()) {
            Some(r) => Ok(self.settle(c, r)),
            None => {
                // Unreachable: a post state is armed only while its request
                // is in the table. Counted, not applied.
                let d = Diagnostic::StaleCompletion { ticket: c.ticket };
                self.ledger.diagnostics.count(d);
                Err(d)
            }
        }
    }

    /// SPEC MEM-7: admits `spec` for `who` and submits it at once: what
    /// [`Region::admit`] followed by [`Region::submit`] do (the same checks,
    /// the same refusals with no state change), without looking the fresh
    /// request up again.
    pub fn start(&mut self, who: Principal, spec: RequestSpec) -> Result<Submission, PoolError> {
        let ticket = self.admit(who, spec)?;
        let Some(r) = self.requests.get_mut(ticket.key()) else {
            return Err(PoolError::StaleHandle {
                kind: HandleKind::Ticket,
            });
        };
        // Admitted a moment ago: no completion can be posted for it yet,
        // as nobody but the owner holds its ticket.
        r.state = RequestState::Submitted;
        let (input, output) = (r.input, r.output);
        let input = input.map(|h| self.span(h)).transpose()?;
        let output = output.map(|h| self.span(h)).transpose()?;
        Ok(Submission {
            ticket,
            input,
            output,
        })
    }

    /// SPEC MEM-7: completes `c` of `who`'s submitted request that only
    /// writes an output, calls `read` with the bytes it published, discards
    /// them and submits the same request again under a new ticket — what
    /// [`Region::complete`], [`Region::read`] of the published bytes,
    /// [`Region::truncate`] to 0, [`Region::admit`] of the same spec and
    /// [`Region::submit`] do, in one step (module docs).
    ///
    /// Refused with no state change — use those steps instead — for a
    /// ticket that is stale or another's ([`PoolError::StaleHandle`],
    /// [`PoolError::WrongRegion`], [`PoolError::NotOwner`]), a request that
    /// is not submitted, has a cancel requested, an input or a stream
    /// context, and a completion that was already posted
    /// ([`PoolError::InvalidRequest`]; the post-side diagnostic is counted).
    pub fn renew<R>(
        &mut self,
        who: Principal,
        c: Completion,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<(R, Renewal), PoolError> {
        let ticket = c.ticket;
        let r = *self.request(ticket)?;
        if r.owner != who {
            return Err(PoolError::NotOwner {
                kind: HandleKind::Ticket,
            });
        }
        let output = match r.output {
            Some(o)
                if r.state == RequestState::Submitted
                    && !r.cancel_requested
                    && r.input.is_none()
                    && r.context.is_none() =>
            {
                o
            }
            _ => {
                return Err(PoolError::InvalidRequest {
                    reason: "only a submitted request with an output alone and no cancel can be renewed",
                });
            }
        };
        let span = self.span(output)?;
        let chunk = self.buffer_mut(output.buffer)?.chunk;
        if !self.requests.can_reissue(ticket.key()) {
            // The slot is at its last generation: the long way, which
            // retires it and takes another.
            return self.renew_by_steps(who, c, read);
        }
        let alone = self.alone();
        self.shared
            .claim(ticket, Claim::Renewed, alone)
            .map_err(|_| PoolError::InvalidRequest {
                reason: "a completion was already posted",
            })?;
        // Checked above; the claim armed exactly this next generation.
        let key = match self.requests.reissue(ticket.key()) {
            Some(Ok(key)) => key,
            _ => {
                return Err(PoolError::StaleHandle {
                    kind: HandleKind::Ticket,
                });
            }
        };
        let (published, diagnostic) = self.verify(&c, &r);
        // Published for the read, as a reclaim would, then discarded as a
        // truncate would: valid and written are 0 again when the backend
        // gets the buffer back.
        self.ledger.live_data += u64::from(published);
        self.touch();
        let result = read(self.bytes(chunk, 0, published).unwrap_or(&[]));
        self.ledger.live_data -= u64::from(published);
        if let Some(b) = self.buffers.get_mut(output.buffer) {
            b.valid = 0;
            b.filled = 0;
        }
        Ok((
            result,
            Renewal {
                completed: ticket,
                status: c.status,
                published,
                diagnostic,
                ticket: Ticket::from_parts(self.id, key.slot, key.generation),
                output: span,
            },
        ))
    }

    /// What [`Region::renew`] stands for, step by step.
    fn renew_by_steps<R>(
        &mut self,
        who: Principal,
        c: Completion,
        read: impl FnOnce(&[u8]) -> R,
    ) -> Result<(R, Renewal), PoolError> {
        let r = *self.request(c.ticket)?;
        let output = r.output.ok_or(PoolError::InvalidRequest {
            reason: "the request has no output",
        })?;
        let done = self.complete(c).map_err(|_| PoolError::InvalidRequest {
            reason: "a completion was already posted",
        })?;
        let handle = self.buffer_handle(output.buffer);
        let result = read(self.read(who, Range::new(handle, 0, done.published))?);
        self.truncate(who, handle, 0)?;
        let spec = RequestSpec::new(r.module).output(Range::new(handle, 0, output.length));
        let ticket = self.admit(who, spec)?;
        let sub = self.submit(ticket)?;
        Ok((
            result,
            Renewal {
                completed: c.ticket,
                status: done.status,
                published: done.published,
                diagnostic: done.diagnostic,
                ticket,
                output: sub.output.ok_or(PoolError::InvalidRequest {
                    reason: "submission without output span",
                })?,
            },
        ))
    }

    /// Whether no [`crate::CompletionPoster`] was ever handed out: then
    /// only this thread touches the post states.
    fn alone(&self) -> bool {
        !self.posters_out.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Class, RegionConfig};
    use crate::module::ModuleSpec;
    use crate::region::BufferSpec;

    const APP: Principal = Principal::new(1);

    fn lent(r: &mut Region) -> (crate::BufferHandle, RequestSpec, Ticket) {
        let m = r.register_module(ModuleSpec::new(0)).unwrap();
        let b = r.acquire(APP, BufferSpec::new(Class::Scratch, 64)).unwrap();
        // Bytes in the chunk, not published: what a backend's write leaves.
        r.write(APP, b, 0, b"hello").unwrap();
        r.truncate(APP, b, 0).unwrap();
        let spec = RequestSpec::new(m).output(Range::new(b, 0, 64));
        let t = r.admit(APP, spec).unwrap();
        r.submit(t).unwrap();
        (b, spec, t)
    }

    #[test]
    fn start_is_admit_then_submit() {
        let mut r = Region::new(RegionConfig::new(64, 2)).unwrap();
        let m = r.register_module(ModuleSpec::new(0)).unwrap();
        let b = r.acquire(APP, BufferSpec::new(Class::Scratch, 64)).unwrap();
        r.write(APP, b, 0, b"abc").unwrap();
        r.commit(APP, b, 3).unwrap();
        let spec = RequestSpec::new(m).input(Range::new(b, 1, 2));
        assert_eq!(
            r.start(Principal::new(2), spec),
            Err(PoolError::NotOwner {
                kind: HandleKind::Buffer
            })
        );
        let sub = r.start(APP, spec).unwrap();
        let input = sub.input.unwrap();
        assert_eq!((input.len(), input.offset_in_chunk()), (2, 1));
        assert_eq!(
            r.request_info(sub.ticket).unwrap().state,
            RequestState::Submitted
        );
        assert!(r.submit(sub.ticket).is_err(), "submitted once");
        assert_eq!(r.buffer_info(b).unwrap().read_leases, 1);
        r.complete(Completion::success(sub.ticket, 0)).unwrap();
        assert_eq!(r.buffer_info(b).unwrap().read_leases, 0);
        r.audit().unwrap();
    }

    #[test]
    fn complete_is_post_then_reclaim() {
        let mut r = Region::new(RegionConfig::new(64, 2)).unwrap();
        let (b, _, t) = lent(&mut r);
        let done = r.complete(Completion::success(t, 5)).unwrap();
        assert_eq!((done.ticket, done.published), (t, 5));
        assert_eq!(done.output, Some(b));
        let info = r.buffer_info(b).unwrap();
        assert_eq!(
            (info.valid, info.write_leased, info.in_flight),
            (5, false, 0)
        );
        assert_eq!(
            r.complete(Completion::success(t, 5)),
            Err(Diagnostic::DuplicateCompletion { ticket: t })
        );
        assert_eq!(r.diagnostics().duplicate, 1);
        assert!(r.reclaim().is_none(), "nothing went through the queue");
        r.audit().unwrap();
    }

    #[test]
    fn a_posted_completion_wins_over_the_owners() {
        let mut r = Region::new(RegionConfig::new(64, 2)).unwrap();
        let (_, _, t) = lent(&mut r);
        r.poster().post(Completion::success(t, 3)).unwrap();
        assert_eq!(
            r.complete(Completion::success(t, 9)),
            Err(Diagnostic::DuplicateCompletion { ticket: t })
        );
        assert!(matches!(
            r.renew(APP, Completion::success(t, 9), |_| ()),
            Err(PoolError::InvalidRequest { .. })
        ));
        assert_eq!(r.reclaim().map(|d| d.published), Some(3));
        r.audit().unwrap();
    }

    #[test]
    fn renew_reads_the_published_bytes_and_lends_again() {
        let mut r = Region::new(RegionConfig::new(64, 2)).unwrap();
        let (b, _, t) = lent(&mut r);
        let before = r.buffer_info(b).unwrap();
        let span = r.request(t).ok().and_then(|q| q.output).unwrap();
        let span = r.span(span).unwrap();
        let (got, renewal) = r
            .renew(APP, Completion::success(t, 5), <[u8]>::to_vec)
            .unwrap();
        assert_eq!(got, b"hello");
        assert_eq!((renewal.completed, renewal.published), (t, 5));
        assert_ne!(renewal.ticket, t);
        assert_eq!(renewal.ticket.slot(), t.slot());
        assert_eq!(renewal.output, span);
        assert_eq!(r.buffer_info(b).unwrap(), before, "lent as before");
        assert!(matches!(r.submit(t), Err(PoolError::StaleHandle { .. })));
        assert_eq!(
            r.complete(Completion::success(t, 1)),
            Err(Diagnostic::StaleCompletion { ticket: t }),
            "a late completion of the old ticket is never applied"
        );
        assert_eq!(
            r.request_info(renewal.ticket).unwrap().state,
            RequestState::Submitted
        );
        r.audit().unwrap();
    }

    #[test]
    fn renew_leaves_the_region_as_the_steps_it_stands_for() {
        let (mut fast, mut slow) = (
            Region::new(RegionConfig::new(64, 2)).unwrap(),
            Region::new(RegionConfig::new(64, 2)).unwrap(),
        );
        let (b, _, mut tf) = lent(&mut fast);
        let (bs, _, mut ts) = lent(&mut slow);
        // Lengths within the output, past it, and an authentication
        // failure (published 0 whatever it claims).
        for (i, produced) in [5u32, 0, 64, 65, 7, 3].into_iter().enumerate() {
            let c = |t| {
                if i == 4 {
                    Completion::authentication_failed(t)
                } else {
                    Completion::success(t, produced)
                }
            };
            let (got_fast, renewal) = fast.renew(APP, c(tf), <[u8]>::to_vec).unwrap();
            let (got_slow, steps) = slow.renew_by_steps(APP, c(ts), <[u8]>::to_vec).unwrap();
            assert_eq!(got_fast, got_slow);
            assert_eq!(
                (
                    renewal.published,
                    renewal.status,
                    renewal.diagnostic.is_some()
                ),
                (steps.published, steps.status, steps.diagnostic.is_some())
            );
            assert_eq!(fast.report(), slow.report(), "after {produced}");
            assert_eq!(fast.diagnostics(), slow.diagnostics());
            assert_eq!(fast.buffer_info(b), slow.buffer_info(bs));
            (tf, ts) = (renewal.ticket, steps.ticket);
        }
    }

    #[test]
    fn renew_publishes_no_unverified_bytes() {
        let mut r = Region::new(RegionConfig::new(64, 2)).unwrap();
        let (_, _, t) = lent(&mut r);
        let (len, renewal) = r
            .renew(APP, Completion::success(t, 65), <[u8]>::len)
            .unwrap();
        assert_eq!(len, 0);
        assert!(matches!(
            renewal.diagnostic,
            Some(Diagnostic::LengthOutOfRange { produced: 65, .. })
        ));
        let (len, _) = r
            .renew(
                APP,
                Completion::authentication_failed(renewal.ticket),
                <[u8]>::len,
            )
            .unwrap();
        assert_eq!(len, 0);
    }

    #[test]
    fn renew_refuses_what_it_cannot_stand_for() {
        let mut r = Region::new(RegionConfig::new(64, 4)).unwrap();
        let (b, spec, t) = lent(&mut r);
        assert_eq!(
            r.renew(Principal::new(2), Completion::success(t, 0), |_| ())
                .map(|_| ()),
            Err(PoolError::NotOwner {
                kind: HandleKind::Ticket
            })
        );
        r.cancel(APP, t).unwrap();
        assert!(matches!(
            r.renew(APP, Completion::success(t, 0), |_| ()),
            Err(PoolError::InvalidRequest { .. })
        ));
        r.complete(Completion::cancelled(t, 0)).unwrap();
        // Admitted, not submitted.
        let t = r.admit(APP, spec).unwrap();
        assert!(matches!(
            r.renew(APP, Completion::success(t, 0), |_| ()),
            Err(PoolError::InvalidRequest { .. })
        ));
        assert!(r.request_info(t).is_ok(), "unchanged");
        r.submit(t).unwrap();
        // With an input.
        let inp = r.acquire(APP, BufferSpec::new(Class::Scratch, 64)).unwrap();
        let out = r.acquire(APP, BufferSpec::new(Class::Scratch, 64)).unwrap();
        let both = r
            .admit(
                APP,
                RequestSpec::new(spec.module)
                    .input(Range::new(inp, 0, 0))
                    .output(Range::new(out, 0, 8)),
            )
            .unwrap();
        r.submit(both).unwrap();
        assert!(matches!(
            r.renew(APP, Completion::success(both, 0), |_| ()),
            Err(PoolError::InvalidRequest { .. })
        ));
        assert!(r.buffer_info(b).unwrap().write_leased);
        r.audit().unwrap();
    }

    #[test]
    fn renew_at_the_last_generation_takes_another_slot() {
        let config = RegionConfig {
            max_generation: 3,
            ..RegionConfig::new(64, 2)
        };
        let mut r = Region::new(config).unwrap();
        let (b, _, t0) = lent(&mut r);
        let mut t = t0;
        let mut slots = Vec::new();
        // Generations 1 → 2 → 3 in place, then the slot retires.
        for n in 0..3u32 {
            let (len, renewal) = r
                .renew(APP, Completion::success(t, n), <[u8]>::len)
                .unwrap();
            assert_eq!(len as u32, n);
            assert!(renewal.ticket.generation() <= 3);
            slots.push(renewal.ticket.slot());
            t = renewal.ticket;
            r.audit().unwrap();
        }
        assert_eq!(slots[..2], [t0.slot(), t0.slot()]);
        assert_ne!(slots[2], t0.slot(), "{slots:?}");
        assert!(r.buffer_info(b).unwrap().write_leased);
    }
}
