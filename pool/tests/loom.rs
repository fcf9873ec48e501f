//! Model-checked tests of the cross-thread part of a region: completion posts
//! racing each other, the owner's reclaim and the reissue of a ticket slot.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p dtp-pool --release loom`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![cfg(loom)]

use dtp_pool::{
    BufferHandle, BufferSpec, Class, Completion, Diagnostic, ModuleHandle, ModuleSpec, Principal,
    Range, Region, RegionConfig, RequestSpec, Ticket,
};
use loom::thread;

const APP: Principal = Principal::new(1);

fn region(slots: u32) -> Region {
    Region::new(RegionConfig {
        request_slots: slots,
        completion_slots: slots,
        context_slots: 0,
        module_slots: 1,
        ..RegionConfig::new(8, slots)
    })
    .unwrap()
}

/// A one-request region with one request submitted: its module, its
/// output buffer and its ticket.
fn one_submitted_output() -> (Region, ModuleHandle, BufferHandle, Ticket) {
    let mut r = region(1);
    let m = r.register_module(ModuleSpec::new(0)).unwrap();
    let out = r.acquire(APP, BufferSpec::new(Class::Scratch, 8)).unwrap();
    let t = r
        .admit(APP, RequestSpec::new(m).output(Range::new(out, 0, 8)))
        .unwrap();
    r.submit(t).unwrap();
    (r, m, out, t)
}

/// Two workers post two tickets while the owner reclaims: both completions
/// arrive, each exactly once, with their own payload.
#[test]
fn loom_two_workers_post_while_owner_reclaims() {
    loom::model(|| {
        let mut r = region(2);
        let m = r.register_module(ModuleSpec::new(0)).unwrap();
        let a = r.admit(APP, RequestSpec::new(m)).unwrap();
        let b = r.admit(APP, RequestSpec::new(m)).unwrap();
        r.submit(a).unwrap();
        r.submit(b).unwrap();
        let handles: Vec<_> = [a, b]
            .into_iter()
            .map(|t| {
                let p = r.poster();
                thread::spawn(move || p.post(Completion::failed(t, t.slot(), 0)).unwrap())
            })
            .collect();
        let mut got = Vec::new();
        if let Some(done) = r.reclaim() {
            got.push(done);
        }
        for h in handles {
            h.join().unwrap();
        }
        while let Some(done) = r.reclaim() {
            got.push(done);
        }
        assert_eq!(got.len(), 2);
        for done in &got {
            assert_eq!(
                done.status,
                dtp_pool::Status::Failed {
                    code: done.ticket.slot()
                }
            );
        }
        assert_ne!(got[0].ticket, got[1].ticket);
        assert_eq!(r.report().pending_requests, 0);
    });
}

/// A duplicate post races the first post, the owner's reclaim and the
/// reissue of the same ticket slot: exactly one completion is applied, and
/// the loser never reaches the reissued request.
#[test]
fn loom_duplicate_post_never_reaches_the_reissued_ticket() {
    loom::model(|| {
        let (mut r, m, out, t1) = one_submitted_output();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let p = r.poster();
                thread::spawn(move || p.post(Completion::success(t1, 0)))
            })
            .collect();
        let first = loop {
            if let Some(done) = r.reclaim() {
                break done;
            }
            thread::yield_now();
        };
        assert_eq!(first.ticket, t1);
        // Reissue the slot while the loser may still be posting.
        let t2 = r.admit(APP, RequestSpec::new(m)).unwrap();
        assert_eq!(t2.slot(), t1.slot());
        let results: Vec<_> = workers.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
        assert!(results.iter().any(|r| matches!(
            r,
            Err(Diagnostic::DuplicateCompletion { .. } | Diagnostic::StaleCompletion { .. })
        )));
        assert!(
            r.reclaim().is_none(),
            "the loser must not complete the new ticket"
        );
        assert!(!r.request_info(t2).unwrap().completion_posted);
        assert_eq!(r.buffer_info(out).unwrap().valid, 0);
        r.post(Completion::success(t2, 0)).unwrap();
        assert_eq!(r.reclaim().unwrap().ticket, t2);
    });
}

/// Two workers post into a ring whose positions have already wrapped (the
/// owner ran a cycle first), while the owner reclaims concurrently.
#[test]
fn loom_concurrent_posts_into_a_wrapped_ring() {
    loom::model(|| {
        let mut r = region(2);
        let m = r.register_module(ModuleSpec::new(0)).unwrap();
        // One sequential cycle: queue positions now start at cell 1 of 2.
        let t0 = r.admit(APP, RequestSpec::new(m)).unwrap();
        r.post(Completion::success(t0, 0)).unwrap();
        assert_eq!(r.reclaim().unwrap().ticket, t0);

        let a = r.admit(APP, RequestSpec::new(m)).unwrap();
        let b = r.admit(APP, RequestSpec::new(m)).unwrap();
        let workers: Vec<_> = [a, b]
            .into_iter()
            .map(|t| {
                let p = r.poster();
                thread::spawn(move || p.post(Completion::success(t, 0)).unwrap())
            })
            .collect();
        let mut got = Vec::new();
        if let Some(done) = r.reclaim() {
            got.push(done.ticket);
        }
        for w in workers {
            w.join().unwrap();
        }
        while let Some(done) = r.reclaim() {
            got.push(done.ticket);
        }
        got.sort_by_key(|t| t.slot());
        let mut want = vec![a, b];
        want.sort_by_key(|t| t.slot());
        assert_eq!(got, want);
        assert_eq!(r.diagnostics().queue_full, 0);
        assert_eq!(r.report().pending_requests, 0);
    });
}

/// The owner completes its request itself (`complete`) while a worker
/// posts the same ticket: exactly one of the two is applied, once, with
/// its own length, and the other is refused as a duplicate.
#[test]
fn loom_owner_completion_races_a_worker_post() {
    loom::model(|| {
        let (mut r, _, out, t) = one_submitted_output();
        let p = r.poster();
        let worker = thread::spawn(move || p.post(Completion::success(t, 3)));
        let owner = r.complete(Completion::success(t, 5));
        let posted = worker.join().unwrap();
        match (owner, posted) {
            (Ok(done), Err(Diagnostic::DuplicateCompletion { .. })) => {
                assert_eq!(done.published, 5);
                assert!(r.reclaim().is_none());
            }
            (Err(Diagnostic::DuplicateCompletion { .. }), Ok(())) => {
                assert_eq!(r.reclaim().unwrap().published, 3);
            }
            other => panic!("exactly one completion must win: {other:?}"),
        }
        assert_eq!(r.buffer_info(out).unwrap().in_flight, 0);
        assert!(r.reclaim().is_none());
        assert_eq!(r.diagnostics().duplicate, 1);
    });
}

/// The owner renews its request (`renew`: complete, read, lend again
/// under the slot's next generation) while a worker posts a late
/// completion of the old ticket: the late one never reaches the renewed
/// request, whichever comes first.
#[test]
fn loom_late_post_never_reaches_a_renewed_request() {
    loom::model(|| {
        let (mut r, _, out, t1) = one_submitted_output();
        let p = r.poster();
        let worker = thread::spawn(move || p.post(Completion::success(t1, 3)));
        let renewed = r.renew(APP, Completion::success(t1, 5), <[u8]>::len);
        let posted = worker.join().unwrap();
        match (renewed, posted) {
            (Ok((len, renewal)), Err(Diagnostic::StaleCompletion { .. })) => {
                assert_eq!(len, 5);
                assert_eq!(renewal.ticket.slot(), t1.slot());
                assert!(r.reclaim().is_none(), "the late post must not complete it");
                let info = r.request_info(renewal.ticket).unwrap();
                assert!(!info.completion_posted);
                assert!(r.buffer_info(out).unwrap().write_leased);
            }
            (Err(_), Ok(())) => {
                // The worker's came first: it is the completion, reclaimed
                // as usual.
                assert_eq!(r.reclaim().unwrap().published, 3);
                assert!(!r.buffer_info(out).unwrap().write_leased);
            }
            other => panic!("exactly one completion must win: {other:?}"),
        }
    });
}
