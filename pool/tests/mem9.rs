//! SPEC MEM-9: the eight acceptance checks of seed §6, one test each.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![cfg(not(loom))]

mod common;

use std::time::{Duration, Instant};

use common::{backend_read, backend_write};
use dtp_pool::{
    BufferHandle, BufferInfo, BufferSpec, BusyReason, CancelOutcome, Class, ClassBytes, Completion,
    Diagnostic, LeaseMode, MemoryReport, ModuleHandle, ModuleSpec, PoolError, Principal, Range,
    Region, RegionConfig, RequestSpec, RequestState, Resource, Status,
};

const APP: Principal = Principal::new(1);
const READER: Principal = Principal::new(2);
const CHUNK: u32 = 4096;

fn region(config: RegionConfig) -> (Region, ModuleHandle) {
    let mut r = Region::new(config).unwrap();
    let m = r.register_module(ModuleSpec::new(0)).unwrap();
    (r, m)
}

fn filled(r: &mut Region, data: &[u8]) -> BufferHandle {
    let h = r
        .acquire(APP, BufferSpec::new(Class::Scratch, CHUNK))
        .unwrap();
    r.write(APP, h, 0, data).unwrap();
    r.commit(APP, h, data.len() as u32).unwrap();
    h
}

fn empty(r: &mut Region) -> BufferHandle {
    r.acquire(APP, BufferSpec::new(Class::Scratch, CHUNK))
        .unwrap()
}

/// Everything an outside observer can see about a set of buffers.
type Snapshot = (MemoryReport, Vec<Result<BufferInfo, PoolError>>);

fn snapshot(r: &Region, buffers: &[BufferHandle]) -> Snapshot {
    let infos: Vec<_> = buffers.iter().map(|&h| r.buffer_info(h)).collect();
    (r.report(), infos)
}

#[test]
fn mem9_1_two_buffers_one_request_cycles_keep_counts() {
    let config = RegionConfig {
        request_slots: 1,
        completion_slots: 1,
        ..RegionConfig::new(CHUNK, 2)
    };
    let (mut r, m) = region(config);
    let baseline = r.report();
    let mut last_ticket_generation = 0;
    for cycle in 0..1000u32 {
        let msg = format!("cycle {cycle}");
        let input = filled(&mut r, msg.as_bytes());
        let output = empty(&mut r);
        let spec = RequestSpec::new(m)
            .input(Range::new(input, 0, msg.len() as u32))
            .output(Range::new(output, 0, CHUNK));
        let ticket = r.admit(APP, spec).unwrap();
        assert!(
            ticket.generation() > last_ticket_generation,
            "ticket generations only grow"
        );
        last_ticket_generation = ticket.generation();
        // The one request slot is taken: a second admission is backpressure.
        assert_eq!(
            r.admit(APP, RequestSpec::new(m)),
            Err(PoolError::WouldBlock {
                resource: Resource::RequestSlots
            })
        );
        let sub = r.submit(ticket).unwrap();
        let echoed = backend_read(&sub);
        backend_write(&sub, &echoed);
        r.poster()
            .post(Completion::success(ticket, echoed.len() as u32))
            .unwrap();
        let done = r.reclaim().unwrap();
        assert_eq!((done.ticket, done.published), (ticket, msg.len() as u32));
        assert_eq!(
            r.read(APP, Range::new(output, 0, done.published)).unwrap(),
            msg.as_bytes()
        );
        r.release(APP, input).unwrap();
        r.release(APP, output).unwrap();
        r.audit().unwrap();

        let now = r.report();
        assert_eq!(now.chunks_used, 0);
        assert_eq!(now.chunks_free, baseline.chunks_free);
        assert_eq!(now.class_bytes, ClassBytes::default());
        assert_eq!((now.live_data, now.held, now.pending_bytes), (0, 0, 0));
        assert_eq!(now.pending_requests, 0);
        assert_eq!(now.metadata, baseline.metadata);
    }
    // Both buffer slots were reused 500 times each: generations moved on.
    let h = empty(&mut r);
    assert!(h.generation() > 1);
    assert_eq!(r.diagnostics(), Default::default());
}

#[test]
fn mem9_2_saturated_submit_changes_no_state_valid_length_or_ownership() {
    // Request slots saturated.
    let config = RegionConfig {
        request_slots: 1,
        ..RegionConfig::new(CHUNK, 4)
    };
    let (mut r, m) = region(config);
    let input = filled(&mut r, b"payload");
    let busy_out = empty(&mut r);
    let out = empty(&mut r);
    let _t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(busy_out, 0, 16)))
        .unwrap();
    let before = snapshot(&r, &[input, out, busy_out]);
    let spec = RequestSpec::new(m)
        .input(Range::new(input, 0, 7))
        .output(Range::new(out, 0, 16));
    assert_eq!(
        r.admit(APP, spec),
        Err(PoolError::WouldBlock {
            resource: Resource::RequestSlots
        })
    );
    assert_eq!(snapshot(&r, &[input, out, busy_out]), before);
    // The refused request left its buffers fully usable by their owner.
    r.write(APP, out, 0, b"x").unwrap();
    r.release(APP, input).unwrap();

    // Completion slots saturated (fewer than request slots).
    let config = RegionConfig {
        completion_slots: 1,
        ..RegionConfig::new(CHUNK, 4)
    };
    let (mut r, m) = region(config);
    let a = empty(&mut r);
    let b = empty(&mut r);
    r.admit(APP, RequestSpec::new(m).output(Range::new(a, 0, 8)))
        .unwrap();
    let before = snapshot(&r, &[a, b]);
    assert_eq!(
        r.admit(APP, RequestSpec::new(m).output(Range::new(b, 0, 8))),
        Err(PoolError::WouldBlock {
            resource: Resource::CompletionSlots
        })
    );
    assert_eq!(snapshot(&r, &[a, b]), before);

    // Lease slots saturated by an application lease, and too few to ever fit.
    let config = RegionConfig {
        lease_slots: 2,
        ..RegionConfig::new(CHUNK, 4)
    };
    let (mut r, m) = region(config);
    let input = filled(&mut r, b"abc");
    let out = empty(&mut r);
    let lease = r.grant_lease(APP, input, READER, LeaseMode::Read).unwrap();
    let before = snapshot(&r, &[input, out]);
    let spec = RequestSpec::new(m)
        .input(Range::new(input, 0, 3))
        .output(Range::new(out, 0, 8));
    assert_eq!(
        r.admit(APP, spec),
        Err(PoolError::WouldBlock {
            resource: Resource::LeaseSlots
        })
    );
    assert_eq!(snapshot(&r, &[input, out]), before);
    r.end_lease(lease, READER).unwrap();
    let config = RegionConfig {
        lease_slots: 1,
        ..RegionConfig::new(CHUNK, 4)
    };
    let (mut r, m) = region(config);
    let input = filled(&mut r, b"abc");
    let out = empty(&mut r);
    let spec = RequestSpec::new(m)
        .input(Range::new(input, 0, 3))
        .output(Range::new(out, 0, 8));
    assert!(matches!(
        r.admit(APP, spec),
        Err(PoolError::Limit {
            resource: Resource::LeaseSlots,
            requested: 2,
            limit: 1
        })
    ));

    // A request refused at validation (output not empty) changes nothing
    // either, although its slots were available.
    let (mut r, m) = region(RegionConfig::new(CHUNK, 4));
    let full = filled(&mut r, b"old data");
    let before = snapshot(&r, &[full]);
    assert_eq!(
        r.admit(APP, RequestSpec::new(m).output(Range::new(full, 0, 8))),
        Err(PoolError::OutputNotEmpty {
            valid: 8,
            offset: 0
        })
    );
    assert_eq!(snapshot(&r, &[full]), before);
    assert_eq!(r.read(APP, Range::new(full, 0, 8)).unwrap(), b"old data");
}

#[test]
fn mem9_3_cancelled_output_refuses_access_and_nothing_is_freed_before_reclaim() {
    let mut r = Region::new(RegionConfig {
        module_internal_bytes: 1024,
        ..RegionConfig::new(CHUNK, 4)
    })
    .unwrap();
    let m = r.register_module(ModuleSpec::new(0)).unwrap();
    let ctx = r.open_context(APP, m).unwrap();
    let input = filled(&mut r, b"input bytes");
    let output = empty(&mut r);
    let spec = RequestSpec::new(m)
        .context(ctx)
        .input(Range::new(input, 0, 11))
        .output(Range::new(output, 0, 64));
    let ticket = r.admit(APP, spec).unwrap();
    let sub = r.submit(ticket).unwrap();
    assert_eq!(r.cancel(APP, ticket), Ok(CancelOutcome::Requested));
    assert_eq!(r.cancel(APP, ticket), Ok(CancelOutcome::AlreadyRequested));
    let used_before = r.report().chunks_used;

    // The output (only a cancel request on it) refuses every other access.
    let write_leased = PoolError::Busy {
        reason: BusyReason::WriteLeased,
    };
    assert_eq!(
        r.read(APP, Range::new(output, 0, 0)).map(|_| ()),
        Err(write_leased)
    );
    assert_eq!(r.write(APP, output, 0, b"x"), Err(write_leased));
    assert_eq!(r.release(APP, output), Err(write_leased));
    assert_eq!(r.transfer(APP, output, READER), Err(write_leased));
    assert_eq!(
        r.grant_lease(APP, output, READER, LeaseMode::Read)
            .map(|_| ()),
        Err(write_leased)
    );
    assert_eq!(r.truncate(APP, output, 0), Err(write_leased));

    // The input allows shared reads, but no write or release.
    assert_eq!(
        r.read(APP, Range::new(input, 0, 11)).unwrap(),
        b"input bytes"
    );
    let lease = r.grant_lease(APP, input, READER, LeaseMode::Read).unwrap();
    assert_eq!(r.read_leased(lease, READER, 0, 5).unwrap(), b"input");
    r.end_lease(lease, READER).unwrap();
    let read_leased = PoolError::Busy {
        reason: BusyReason::ReadLeased,
    };
    assert_eq!(r.write(APP, input, 0, b"x"), Err(read_leased));
    assert_eq!(r.release(APP, input), Err(read_leased));

    // Related context and module swap are refused.
    assert_eq!(
        r.close_context(APP, ctx),
        Err(PoolError::Busy {
            reason: BusyReason::ContextInFlight
        })
    );
    r.stage_swap(m, 512).unwrap();
    assert_eq!(
        r.commit_swap(m),
        Err(PoolError::Busy {
            reason: BusyReason::LiveWork
        })
    );
    assert_eq!(
        r.unregister_module(m),
        Err(PoolError::Busy {
            reason: BusyReason::LiveWork
        })
    );

    // Nothing was freed: no completion, no reclaim, same chunks held.
    assert!(r.reclaim().is_none());
    assert_eq!(r.report().chunks_used, used_before);
    assert_eq!(r.report().pending_requests, 1);
    assert_eq!(
        r.request_info(ticket).unwrap().state,
        RequestState::Submitted
    );

    // The backend loses the race to cancel: it had written 5 bytes.
    backend_write(&sub, b"parti");
    r.poster().post(Completion::cancelled(ticket, 5)).unwrap();
    let done = r.reclaim().unwrap();
    assert!(done.cancel_requested);
    assert_eq!((done.status, done.published), (Status::Cancelled, 5));
    assert_eq!(r.read(APP, Range::new(output, 0, 5)).unwrap(), b"parti");

    // After the final reclaim everything is allowed again.
    r.close_context(APP, ctx).unwrap();
    r.commit_swap(m).unwrap();
    r.release(APP, output).unwrap();
    r.release(APP, input).unwrap();

    // Cancel before submission also completes only through the queue.
    let (mut r, m) = region(RegionConfig::new(CHUNK, 2));
    let out = empty(&mut r);
    let t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 8)))
        .unwrap();
    assert_eq!(r.cancel(APP, t), Ok(CancelOutcome::CancelledBeforeSubmit));
    assert!(
        r.submit(t).is_err(),
        "a cancelled request is never submitted"
    );
    assert_eq!(
        r.release(APP, out),
        Err(write_leased),
        "still held until reclaim"
    );
    let done = r.reclaim().unwrap();
    assert_eq!((done.status, done.published), (Status::Cancelled, 0));
    r.release(APP, out).unwrap();
}

#[test]
fn mem9_4_late_duplicate_and_released_generation_completions_never_touch_a_new_buffer() {
    let config = RegionConfig {
        request_slots: 1,
        ..RegionConfig::new(CHUNK, 1)
    };
    let (mut r, m) = region(config);
    let poster = r.poster();
    let old = empty(&mut r);
    let t1 = r
        .admit(APP, RequestSpec::new(m).output(Range::new(old, 0, 8)))
        .unwrap();
    let sub = r.submit(t1).unwrap();
    backend_write(&sub, b"first");
    poster.post(Completion::success(t1, 5)).unwrap();
    assert_eq!(
        poster.post(Completion::success(t1, 8)),
        Err(Diagnostic::DuplicateCompletion { ticket: t1 })
    );
    let done = r.reclaim().unwrap();
    assert_eq!(done.published, 5);
    assert!(
        r.reclaim().is_none(),
        "the duplicate never entered the queue"
    );
    // Late duplicate after reclaim, before reuse.
    assert_eq!(
        poster.post(Completion::success(t1, 1)),
        Err(Diagnostic::DuplicateCompletion { ticket: t1 })
    );
    r.release(APP, old).unwrap();

    // Reuse: same chunk, same slots, next generations.
    let new = empty(&mut r);
    assert_eq!(
        (new.slot(), new.generation()),
        (old.slot(), old.generation() + 1)
    );
    let t2 = r
        .admit(APP, RequestSpec::new(m).output(Range::new(new, 0, 8)))
        .unwrap();
    assert_eq!(
        (t2.slot(), t2.generation()),
        (t1.slot(), t1.generation() + 1)
    );
    let _sub2 = r.submit(t2).unwrap();

    // A completion for the released generation must not reclaim the new request.
    assert_eq!(
        poster.post(Completion::success(t1, 8)),
        Err(Diagnostic::StaleCompletion { ticket: t1 })
    );
    assert!(r.reclaim().is_none());
    assert!(!r.request_info(t2).unwrap().completion_posted);
    let info = r.buffer_info(new).unwrap();
    assert_eq!((info.valid, info.write_leased), (0, true));
    // The old buffer handle is dead for good.
    assert!(matches!(
        r.read(APP, Range::new(old, 0, 0)),
        Err(PoolError::StaleHandle { .. })
    ));
    assert!(matches!(
        r.release(APP, old),
        Err(PoolError::StaleHandle { .. })
    ));
    // A ticket of another region is refused as well.
    let (other, om) = region(RegionConfig::new(CHUNK, 1));
    let mut other = other;
    let foreign_buf = empty(&mut other);
    let foreign = other
        .admit(
            APP,
            RequestSpec::new(om).output(Range::new(foreign_buf, 0, 8)),
        )
        .unwrap();
    assert!(matches!(
        poster.post(Completion::success(foreign, 8)),
        Err(Diagnostic::WrongRegion { .. })
    ));
    assert!(matches!(
        r.read(APP, Range::new(foreign_buf, 0, 0)),
        Err(PoolError::WrongRegion { .. })
    ));

    poster.post(Completion::success(t2, 3)).unwrap();
    let done = r.reclaim().unwrap();
    assert_eq!((done.ticket, done.published), (t2, 3));
    let d = r.diagnostics();
    assert_eq!((d.duplicate, d.stale, d.wrong_region), (2, 1, 1));
    r.audit().unwrap();
}

#[test]
fn mem9_5_failed_output_publishes_only_the_declared_valid_prefix() {
    let (mut r, m) = region(RegionConfig::new(CHUNK, 2));
    let out = empty(&mut r);
    let t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 100)))
        .unwrap();
    let sub = r.submit(t).unwrap();
    backend_write(&sub, &[7; 100]); // physically written, but only 40 verified
    r.poster().post(Completion::failed(t, 5, 40)).unwrap();
    let done = r.reclaim().unwrap();
    assert_eq!(
        (done.status, done.published),
        (Status::Failed { code: 5 }, 40)
    );
    assert_eq!(r.read(APP, Range::new(out, 0, 40)).unwrap(), &[7; 40]);
    assert_eq!(
        r.read(APP, Range::new(out, 0, 41)).map(|_| ()),
        Err(PoolError::OutOfRange {
            offset: 0,
            length: 41,
            bound: 40
        })
    );
    assert_eq!(
        r.commit(APP, out, 41),
        Err(PoolError::Unwritten {
            requested: 41,
            written: 40
        })
    );

    // An authentication failure publishes nothing, whatever it claims.
    r.truncate(APP, out, 0).unwrap();
    let t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 100)))
        .unwrap();
    let sub = r.submit(t).unwrap();
    backend_write(&sub, &[9; 100]);
    r.poster()
        .post(Completion {
            ticket: t,
            status: Status::AuthenticationFailed,
            produced: 100,
        })
        .unwrap();
    let done = r.reclaim().unwrap();
    assert_eq!(done.published, 0);
    assert_eq!(
        done.diagnostic,
        Some(Diagnostic::AuthenticationFailureOutput {
            ticket: t,
            produced: 100
        })
    );
    assert_eq!(r.buffer_info(out).unwrap().valid, 0);
    assert_eq!(
        r.commit(APP, out, 1),
        Err(PoolError::Unwritten {
            requested: 1,
            written: 0
        })
    );

    // A length beyond the output range is never published.
    let t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 10)))
        .unwrap();
    r.submit(t).unwrap();
    r.poster().post(Completion::success(t, 11)).unwrap();
    let done = r.reclaim().unwrap();
    assert_eq!(done.published, 0);
    assert!(matches!(
        done.diagnostic,
        Some(Diagnostic::LengthOutOfRange {
            produced: 11,
            limit: 10,
            ..
        })
    ));

    // A refused submission is a failed completion of the same ticket.
    let t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 10)))
        .unwrap();
    r.submit(t).unwrap();
    r.refuse_submit(t, 11).unwrap();
    let done = r.reclaim().unwrap();
    assert_eq!(
        (done.ticket, done.status, done.published),
        (t, Status::Failed { code: 11 }, 0)
    );
    assert_eq!(r.diagnostics().authentication_failure_output, 1);
    assert_eq!(r.diagnostics().length_out_of_range, 1);
}

#[test]
fn mem9_6_finish_after_input_consumed_runs_exactly_and_slow_consumer_stays_in_budget() {
    // A streaming module: one call consumes all input but can emit only 4
    // bytes per call; the rest comes out through finish calls on the context.
    let config = RegionConfig {
        module_internal_bytes: 64,
        ..RegionConfig::new(CHUNK, 4)
    };
    let mut r = Region::new(config).unwrap();
    let codec = r.register_module(ModuleSpec::new(64)).unwrap();
    let ctx = r.open_context(APP, codec).unwrap();
    let input = filled(&mut r, b"0123456789");
    let out = empty(&mut r);
    let mut pending: Vec<u8> = Vec::new(); // the module's internal state
    let mut collected = Vec::new();
    let mut first = true;
    loop {
        let mut spec = RequestSpec::new(codec)
            .context(ctx)
            .output(Range::new(out, 0, 4));
        if first {
            spec = spec.input(Range::new(input, 0, 10));
        }
        let t = r.admit(APP, spec).unwrap();
        // One call in flight per context.
        assert_eq!(
            r.admit(APP, RequestSpec::new(codec).context(ctx)),
            Err(PoolError::Busy {
                reason: BusyReason::ContextInFlight
            })
        );
        let sub = r.submit(t).unwrap();
        if first {
            pending.extend(backend_read(&sub));
            first = false;
        }
        let n = pending.len().min(4);
        backend_write(&sub, &pending[..n]);
        pending.drain(..n);
        r.set_module_internal(codec, pending.len() as u64).unwrap();
        r.poster().post(Completion::success(t, n as u32)).unwrap();
        let done = r.reclaim().unwrap();
        collected.extend_from_slice(r.read(APP, Range::new(out, 0, done.published)).unwrap());
        r.truncate(APP, out, 0).unwrap();
        if n == 0 {
            break;
        }
    }
    assert_eq!(
        collected, b"0123456789",
        "every byte exactly once, in order"
    );
    assert_eq!(r.module_report(codec).unwrap().internal_used, 0);
    r.close_context(APP, ctx).unwrap();

    // Slow consumer: it keeps read leases on what it has not consumed; the
    // producer hits the scratch budget (3 chunks) and gets backpressure.
    let budget = 3 * u64::from(CHUNK);
    let config = RegionConfig {
        class_bytes: ClassBytes {
            scratch: budget,
            ..ClassBytes::all(8 * u64::from(CHUNK))
        },
        ..RegionConfig::new(CHUNK, 8)
    };
    let mut r = Region::new(config).unwrap();
    let t0 = Instant::now();
    r.advance(t0);
    let mut leased = Vec::new();
    for i in 0..10u64 {
        r.advance(t0 + Duration::from_millis(i));
        match r.acquire(APP, BufferSpec::new(Class::Scratch, CHUNK)) {
            Ok(h) => {
                r.write(APP, h, 0, b"event").unwrap();
                r.commit(APP, h, 5).unwrap();
                let l = r.grant_lease(APP, h, READER, LeaseMode::Read).unwrap();
                leased.push((h, l));
            }
            Err(e) => assert_eq!(
                e,
                PoolError::WouldBlock {
                    resource: Resource::ClassBytes(Class::Scratch)
                }
            ),
        }
        let rep = r.report();
        assert!(rep.class_bytes.scratch <= budget, "never above budget");
        assert!(rep.high_water.held <= budget);
    }
    assert_eq!(leased.len(), 3);
    // Long-lived state is counted separately and still has room.
    let ll = r
        .acquire(APP, BufferSpec::new(Class::LongLived, 16))
        .unwrap();
    let rep = r.report();
    assert_eq!(rep.held, budget);
    // Bytes × time: 1 chunk for 1 ms, 2 chunks for 1 ms, then 3 chunks for 7 ms.
    assert_eq!(rep.held_byte_nanos, 24 * u128::from(CHUNK) * 1_000_000);
    // The consumer catches up; everything returns.
    for (h, l) in leased {
        r.end_lease(l, READER).unwrap();
        r.release(APP, h).unwrap();
    }
    r.release(APP, ll).unwrap();
    let rep = r.report();
    assert_eq!(
        (rep.held, rep.chunks_used, rep.class_bytes.total()),
        (0, 0, 0)
    );
    r.audit().unwrap();
}

#[test]
fn mem9_7_overflow_generation_exhaustion_and_allocation_failure_are_explicit_errors() {
    // Range and length overflow.
    let (mut r, m) = region(RegionConfig::new(CHUNK, 2));
    let h = filled(&mut r, b"abcd");
    assert!(matches!(
        r.read(APP, Range::new(h, u32::MAX, u32::MAX)),
        Err(PoolError::OutOfRange { .. })
    ));
    assert!(matches!(
        r.read(APP, Range::new(h, 2, u32::MAX)),
        Err(PoolError::OutOfRange { .. })
    ));
    assert!(matches!(
        r.write(APP, h, u32::MAX, b"x"),
        Err(PoolError::OutOfRange { .. })
    ));
    assert!(matches!(
        r.admit(APP, RequestSpec::new(m).input(Range::new(h, 1, u32::MAX))),
        Err(PoolError::OutOfRange { .. })
    ));
    assert_eq!(
        r.acquire(APP, BufferSpec::new(Class::Scratch, CHUNK + 1)),
        Err(PoolError::CapacityTooLarge {
            requested: u64::from(CHUNK) + 1,
            chunk_size: CHUNK
        })
    );

    // Size overflow of the backing.
    let huge = RegionConfig {
        request_slots: 1,
        completion_slots: 1,
        ..RegionConfig::new(u32::MAX, u32::MAX)
    };
    assert!(matches!(
        Region::new(huge),
        Err(PoolError::SizeOverflow { .. })
    ));
    // Allocation failure: 2 PiB cannot be mapped in any user address space.
    assert!(matches!(
        Region::new(RegionConfig::new(1 << 31, 1 << 20)),
        Err(PoolError::AllocationFailed { .. })
    ));

    // Generation exhaustion: one slot, maximum generation 3.
    let config = RegionConfig {
        max_generation: 3,
        buffer_slots: 1,
        request_slots: 1,
        ..RegionConfig::new(CHUNK, 2)
    };
    let (mut r, m) = region(config);
    let mut old = Vec::new();
    for generation in 1..=3 {
        let h = empty(&mut r);
        assert_eq!(h.generation(), generation);
        old.push(h);
        r.release(APP, h).unwrap();
    }
    assert_eq!(
        r.acquire(APP, BufferSpec::new(Class::Scratch, 8)),
        Err(PoolError::GenerationExhausted {
            kind: dtp_pool::HandleKind::Buffer
        })
    );
    for h in old {
        assert!(matches!(
            r.read(APP, Range::new(h, 0, 0)),
            Err(PoolError::StaleHandle { .. })
        ));
    }
    assert_eq!(
        r.report().chunks_free,
        2 * u64::from(CHUNK),
        "the chunks themselves are not lost"
    );
    for _ in 1..=3 {
        let t = r.admit(APP, RequestSpec::new(m)).unwrap();
        r.post(Completion::success(t, 0)).unwrap();
        r.reclaim().unwrap();
    }
    assert_eq!(
        r.admit(APP, RequestSpec::new(m)),
        Err(PoolError::GenerationExhausted {
            kind: dtp_pool::HandleKind::Ticket
        })
    );
    // Module-internal space beyond its reservation.
    assert!(matches!(
        r.set_module_internal(m, 1),
        Err(PoolError::Limit { .. })
    ));
}

#[test]
fn mem9_8_peak_includes_module_space_and_pending_work_with_external_and_rss_separate() {
    let config = RegionConfig {
        module_internal_bytes: 64 * 1024,
        ..RegionConfig::new(CHUNK, 4)
    };
    let mut r = Region::new(config).unwrap();
    let codec = r.register_module(ModuleSpec::new(32 * 1024)).unwrap();
    let start = r.report();
    let metadata = start.metadata.total();
    assert_eq!(
        start.ceiling,
        Some(start.backing_reserved + metadata + 64 * 1024)
    );
    assert_eq!(start.high_water.in_use, metadata);

    r.set_module_internal(codec, 10_000).unwrap();
    r.stage_swap(codec, 5_000).unwrap();
    let input = filled(&mut r, b"frame");
    let output = empty(&mut r);
    let spec = RequestSpec::new(codec)
        .input(Range::new(input, 0, 5))
        .output(Range::new(output, 0, 64));
    let t = r.admit(APP, spec).unwrap();
    let peak = 2 * u64::from(CHUNK) + metadata + 10_000 + 5_000;
    let rep = r.report();
    assert_eq!(rep.high_water.in_use, peak);
    assert_eq!(rep.high_water.pending_requests, 1);
    assert_eq!(rep.high_water.pending_bytes, 2 * u64::from(CHUNK));
    assert_eq!((rep.module_internal_used, rep.swap_in), (10_000, 5_000));

    // Done: current figures drop, the peak stays.
    r.post(Completion::success(t, 0)).unwrap();
    r.reclaim().unwrap();
    r.release(APP, input).unwrap();
    r.release(APP, output).unwrap();
    r.abort_swap(codec).unwrap();
    r.set_module_internal(codec, 0).unwrap();
    let rep = r.report();
    assert_eq!(
        (rep.chunks_used, rep.pending_requests, rep.swap_in),
        (0, 0, 0)
    );
    assert_eq!(rep.high_water.in_use, peak);

    // A buffer lent to several readers counts once.
    let shared = filled(&mut r, b"shared");
    let leases: Vec<_> = (10..13)
        .map(|p| {
            r.grant_lease(APP, shared, Principal::new(p), LeaseMode::Read)
                .unwrap()
        })
        .collect();
    let rep = r.report();
    assert_eq!(
        (rep.held, rep.live_data, rep.chunks_used),
        (u64::from(CHUNK), 6, u64::from(CHUNK))
    );
    for (l, p) in leases.into_iter().zip(10..13) {
        r.end_lease(l, Principal::new(p)).unwrap();
    }

    // External allocations and RSS are reported apart; external voids the ceiling.
    r.observe_rss(123 << 20);
    let rep = r.report();
    assert_eq!(rep.observed_rss, Some(123 << 20));
    assert_eq!(
        rep.ceiling, start.ceiling,
        "RSS is never added to the accounted figures"
    );
    r.set_module_external(codec, 4096).unwrap();
    r.set_external(100);
    let rep = r.report();
    assert_eq!(rep.external, 4196);
    assert_eq!(
        rep.ceiling, None,
        "untracked allocations void the ceiling claim"
    );
    assert_eq!(
        rep.high_water.in_use, peak,
        "external bytes are not folded into the peak"
    );
    r.set_module_external(codec, 0).unwrap();
    r.set_external(0);
    assert_eq!(r.report().ceiling, start.ceiling);
}
