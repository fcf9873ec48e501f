//! SPEC MEM-7: the completion queue with real threads. Workers write into
//! submitted output spans and post completions (plus a duplicate each) while
//! the region's owner keeps admitting and reclaiming.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![cfg(not(loom))]

mod common;

use std::sync::mpsc;
use std::thread;

use common::backend_write;
use dtp_pool::{
    BufferSpec, Class, Completion, Diagnostic, ModuleSpec, PoolError, Principal, Range, Region,
    RegionConfig, RequestSpec, Submission,
};

const APP: Principal = Principal::new(1);
const WORKERS: usize = 4;
const REQUESTS: u32 = 20_000;
const SLOTS: u32 = 32;

fn pattern(ticket_bits: u64) -> [u8; 8] {
    ticket_bits.to_le_bytes()
}

#[test]
fn workers_post_from_threads_owner_reclaims_every_request_exactly_once() {
    let config = RegionConfig {
        request_slots: SLOTS,
        completion_slots: SLOTS,
        ..RegionConfig::new(64, SLOTS)
    };
    let mut region = Region::new(config).unwrap();
    let module = region.register_module(ModuleSpec::new(0)).unwrap();
    let poster = region.poster();

    let (work_tx, work_rx) = mpsc::channel::<Option<Submission>>();
    let work_rx = std::sync::Arc::new(std::sync::Mutex::new(work_rx));
    thread::scope(|s| {
        for _ in 0..WORKERS {
            let rx = std::sync::Arc::clone(&work_rx);
            let poster = poster.clone();
            s.spawn(move || {
                loop {
                    let job = rx.lock().unwrap().recv().unwrap();
                    let Some(sub) = job else { break };
                    backend_write(&sub, &pattern(sub.ticket.to_u64()));
                    poster.post(Completion::success(sub.ticket, 8)).unwrap();
                    // A buggy backend posting again is refused, whenever it lands.
                    let dup = poster.post(Completion::success(sub.ticket, 8));
                    assert!(matches!(
                        dup,
                        Err(Diagnostic::DuplicateCompletion { .. }
                            | Diagnostic::StaleCompletion { .. })
                    ));
                }
            });
        }

        let (mut admitted, mut reclaimed) = (0u32, 0u32);
        let mut seen = std::collections::HashSet::new();
        while reclaimed < REQUESTS {
            let mut progressed = false;
            while admitted < REQUESTS {
                let out = match region.acquire(APP, BufferSpec::new(Class::Scratch, 8)) {
                    Ok(h) => h,
                    Err(PoolError::WouldBlock { .. }) => break,
                    Err(e) => panic!("{e}"),
                };
                let spec = RequestSpec::new(module).output(Range::new(out, 0, 8));
                let ticket = match region.admit(APP, spec) {
                    Ok(t) => t,
                    Err(PoolError::WouldBlock { .. }) => {
                        region.release(APP, out).unwrap();
                        break;
                    }
                    Err(e) => panic!("{e}"),
                };
                work_tx.send(Some(region.submit(ticket).unwrap())).unwrap();
                admitted += 1;
                progressed = true;
            }
            while let Some(done) = region.reclaim() {
                assert!(
                    seen.insert(done.ticket),
                    "reclaimed twice: {:?}",
                    done.ticket
                );
                assert_eq!(done.published, 8);
                let out = done.output.unwrap();
                let bytes = region.read(APP, Range::new(out, 0, 8)).unwrap();
                assert_eq!(bytes, pattern(done.ticket.to_u64()));
                region.release(APP, out).unwrap();
                reclaimed += 1;
                progressed = true;
            }
            if !progressed {
                // Waiting for workers; the owner has nothing else to do.
                thread::yield_now();
            }
        }
        for _ in 0..WORKERS {
            work_tx.send(None).unwrap();
        }
    });

    let rep = region.report();
    assert_eq!((rep.chunks_used, rep.pending_requests, rep.held), (0, 0, 0));
    assert_eq!(rep.high_water.pending_requests, SLOTS);
    let d = region.diagnostics();
    assert_eq!(d.duplicate + d.stale, u64::from(REQUESTS));
    assert_eq!(d.queue_full, 0, "a post never finds the queue full");
    region.audit().unwrap();
}

#[test]
fn poster_is_send_and_sync_and_region_is_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<dtp_pool::CompletionPoster>();
    send::<Region>();
    send_sync::<Submission>();
}
