//! Model check of the control thread's wake-up protocol over several rings
//! (DESIGN.md §1; engine `control` module): the control thread consumes one
//! request ring per shard and sleeps with `thread::park` only after
//! announcing sleep on every ring; a shard pushes, then asks `needs_wake`
//! once per loop turn and unparks the control thread when told to. No
//! interleaving may leave the control thread asleep with a request waiting.
//!
//! Run with
//! `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test -p dtp-pool --release --test control_loom`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![cfg(loom)]

use dtp_pool::{Consumer, spsc};
use loom::thread;

/// The control thread's loop, reduced to its wake-up logic: take from every
/// ring; when all are empty, announce sleep on all of them and park unless
/// one announcement found an item; withdraw the announcements on waking.
fn control_loop(rings: &mut [Consumer<u32>], want: usize) -> Vec<u32> {
    let mut got = Vec::new();
    while got.len() < want {
        let mut worked = false;
        for r in rings.iter_mut() {
            while let Some(v) = r.pop() {
                got.push(v);
                worked = true;
            }
        }
        if worked {
            continue;
        }
        let mut may_sleep = true;
        for r in rings.iter_mut() {
            if !r.prepare_park() {
                may_sleep = false;
            }
        }
        if may_sleep {
            thread::park();
        }
        for r in rings.iter_mut() {
            r.cancel_park();
        }
    }
    got.sort_unstable();
    got
}

#[test]
fn loom_control_thread_over_two_shard_rings_never_sleeps_through_a_request() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let control = thread::current();
        let mut consumers = Vec::new();
        let mut shards = Vec::new();
        for shard in 0..2u32 {
            let (mut p, c) = spsc::<u32>(2).unwrap();
            consumers.push(c);
            let control = control.clone();
            shards.push(thread::spawn(move || {
                // One loop turn: push, then the once-per-turn wake check.
                p.push(shard).unwrap();
                if p.needs_wake() {
                    control.unpark();
                }
                p
            }));
        }
        assert_eq!(control_loop(&mut consumers, 2), [0, 1]);
        for s in shards {
            let _ = s.join().unwrap();
        }
    });
}
