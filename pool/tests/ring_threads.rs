//! The control rings (DESIGN.md §1) with real threads: millions of sequence
//! numbers through tiny rings, single and batched, with the park / wake-up
//! protocol driven by a real blocking primitive; `Full` handing values back;
//! items left in a dropped ring dropped exactly once.
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

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread;

use dtp_pool::{Consumer, Full, Producer, spsc};

const ITEMS: u64 = 2_000_000;

/// Pushes `0..n` one by one, spinning (with a yield) while the ring is full.
fn push_seq(p: &mut Producer<u64>, n: u64) {
    for i in 0..n {
        let mut v = i;
        while let Err(Full(back)) = p.push(v) {
            v = back;
            thread::yield_now();
        }
    }
}

/// Pops until the producer is gone and the ring is empty; checks that the
/// sequence is `0, 1, 2, …` with no gap or repeat. Returns its length.
fn check_seq_single(c: &mut Consumer<u64>) -> u64 {
    let mut next = 0;
    loop {
        match c.pop() {
            Some(v) => {
                assert_eq!(v, next, "out of order or lost");
                next += 1;
            }
            None if c.is_abandoned() => {
                // Everything pushed before the producer left is visible now.
                if c.is_empty() {
                    return next;
                }
            }
            None => thread::yield_now(),
        }
    }
}

#[test]
fn two_million_in_order_through_two_slots() {
    let (mut p, mut c) = spsc::<u64>(2).unwrap();
    let producer = thread::spawn(move || push_seq(&mut p, ITEMS));
    assert_eq!(check_seq_single(&mut c), ITEMS);
    producer.join().unwrap();
}

#[test]
fn two_million_in_order_with_batches_on_both_ends() {
    let (mut p, mut c) = spsc::<u64>(8).unwrap();
    let producer = thread::spawn(move || {
        let mut items = 0..ITEMS;
        while items.start < ITEMS {
            // Uneven batches, so batch borders fall everywhere in the ring.
            let chunk = 1 + items.start % 13;
            let mut batch = items.start..(items.start + chunk).min(ITEMS);
            if p.push_batch(&mut batch) == 0 {
                thread::yield_now();
            }
            items.start = batch.start;
        }
    });
    let mut next = 0u64;
    let mut out = Vec::with_capacity(5);
    loop {
        out.clear();
        if c.pop_batch(&mut out, 5) == 0 {
            if c.is_abandoned() && c.is_empty() {
                break;
            }
            thread::yield_now();
        }
        for &v in &out {
            assert_eq!(v, next, "out of order or lost");
            next += 1;
        }
    }
    producer.join().unwrap();
    assert_eq!(next, ITEMS);
}

/// A stand-in for the driver's eventfd: a counter the consumer blocks on.
#[derive(Default)]
struct EventFd {
    count: Mutex<u64>,
    ready: Condvar,
}

impl EventFd {
    fn write(&self) {
        *self.count.lock().unwrap() += 1;
        self.ready.notify_one();
    }

    fn read(&self) {
        let mut n = self.count.lock().unwrap();
        while *n == 0 {
            n = self.ready.wait(n).unwrap();
        }
        *n = 0;
    }
}

/// The wake-up protocol with a real blocking wait: the consumer sleeps
/// whenever `prepare_park` allows; the producer pushes in bursts and writes
/// the "eventfd" only when `needs_wake` says so. A lost wake-up hangs this
/// test. Never more wake-ups than park announcements (an announcement that
/// `prepare_park` withdrew may still have been seen: a spurious wake-up).
#[test]
fn consumer_sleeps_and_is_always_woken() {
    const N: u64 = 200_000;
    let (mut p, mut c) = spsc::<u64>(4).unwrap();
    let eventfd = Arc::new(EventFd::default());
    let wakes = Arc::new(AtomicUsize::new(0));
    let (e, w) = (Arc::clone(&eventfd), Arc::clone(&wakes));
    let producer = thread::spawn(move || {
        let mut i = 0;
        while i < N {
            // A burst of up to 3 items, then the once-per-turn check.
            for _ in 0..3 {
                if i < N && p.push(i).is_ok() {
                    i += 1;
                }
            }
            if p.needs_wake() {
                w.fetch_add(1, Ordering::Relaxed);
                e.write();
            }
            if i % 64 == 0 {
                thread::yield_now(); // give the consumer reasons to park
            }
        }
        if p.close() {
            w.fetch_add(1, Ordering::Relaxed);
            e.write();
        }
    });
    let mut next = 0;
    let (mut announced, mut slept) = (0usize, 0usize);
    loop {
        while let Some(v) = c.pop() {
            assert_eq!(v, next);
            next += 1;
        }
        if c.is_abandoned() && c.is_empty() {
            break;
        }
        announced += 1;
        if c.prepare_park() {
            slept += 1;
            eventfd.read();
            c.cancel_park();
        }
    }
    producer.join().unwrap();
    assert_eq!(next, N);
    assert!(wakes.load(Ordering::Relaxed) <= announced);
    eprintln!(
        "consumer slept {slept} times, woken {} times",
        wakes.load(Ordering::Relaxed)
    );
}

#[test]
fn full_hands_the_value_back_untouched() {
    let (mut p, mut c) = spsc::<String>(2).unwrap();
    p.push("a".into()).unwrap();
    p.push("b".into()).unwrap();
    let Full(back) = p.push("c".into()).unwrap_err();
    assert_eq!(back, "c");
    assert_eq!(p.free_slots(), 0);
    assert_eq!(c.pop().as_deref(), Some("a"));
    p.push(back).unwrap();
    assert_eq!(c.drain(usize::MAX).collect::<Vec<_>>(), ["b", "c"]);
}

/// Counts its drops in a shared counter.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn remaining_items_are_dropped_exactly_once_whichever_end_goes_last() {
    for consumer_last in [false, true] {
        for popped in 0..=4 {
            let drops = Arc::new(AtomicUsize::new(0));
            let (mut p, mut c) = spsc::<Counted>(4).unwrap();
            for _ in 0..4 {
                assert!(p.push(Counted(Arc::clone(&drops))).is_ok());
            }
            for _ in 0..popped {
                drop(c.pop().unwrap());
            }
            assert_eq!(drops.load(Ordering::Relaxed), popped);
            let (first, last): (Box<dyn Send>, Box<dyn Send>) = if consumer_last {
                (Box::new(p), Box::new(c))
            } else {
                (Box::new(c), Box::new(p))
            };
            // The first end goes on another thread; the ring lives on.
            thread::spawn(move || drop(first)).join().unwrap();
            assert_eq!(drops.load(Ordering::Relaxed), popped, "nothing freed early");
            drop(last);
            assert_eq!(drops.load(Ordering::Relaxed), 4, "each item dropped once");
        }
    }
}

#[test]
fn drops_race_on_two_threads() {
    for _ in 0..1_000 {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = spsc::<Counted>(2).unwrap();
        let d = Arc::clone(&drops);
        let producer = thread::spawn(move || {
            let mut made = 1;
            while p.push(Counted(Arc::clone(&d))).is_ok() {
                made += 1;
            }
            // The value refused as `Full` was dropped by the failed push's
            // caller; the ones inside go with the ring.
            made
        });
        let consumer = thread::spawn(move || drop(c.pop()));
        let made = producer.join().unwrap();
        consumer.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), made);
    }
}
