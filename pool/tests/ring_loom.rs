//! Model-checked tests of the control rings (DESIGN.md §1): every
//! interleaving of one producer and one consumer, under loom's C11 memory
//! model, for ordering, wrap-around, batch publication, drop of a non-empty
//! ring and the park / wake-up protocol.
//!
//! Run with
//! `CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" cargo test -p dtp-pool --release --test ring_loom`
//! (add `-- --nocapture` to see each model's number of interleavings).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]
#![cfg(loom)]

use dtp_pool::{Consumer, Producer, spsc};
use loom::sync::Notify;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// Runs `f` under loom — exhaustively, or with at most `preemptions`
/// preemptions per execution — and reports how many interleavings it
/// explored.
fn model(name: &str, preemptions: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&runs);
    let mut builder = loom::model::Builder::new();
    if preemptions.is_some() {
        builder.preemption_bound = preemptions;
    }
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    eprintln!(
        "{name}: {} interleavings",
        runs.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// Pushes `items` one by one, yielding to the consumer while the ring is full.
fn push_all(p: &mut Producer<u32>, items: impl IntoIterator<Item = u32>) {
    for mut v in items {
        while let Err(full) = p.push(v) {
            v = full.into_inner();
            thread::yield_now();
        }
    }
}

/// Pops until `n` items arrived, yielding to the producer while it is empty.
fn pop_n(c: &mut Consumer<u32>, n: usize) -> Vec<u32> {
    let mut got = Vec::new();
    while got.len() < n {
        match c.pop() {
            Some(v) => got.push(v),
            None => thread::yield_now(),
        }
    }
    got
}

/// Three items through two slots: the third reuses the first slot, so both
/// positions wrap. The consumer sees every item once, in order, and loom's
/// cell tracking proves the producer never writes a slot the consumer is
/// reading (and vice versa).
#[test]
fn loom_ring_capacity_2_wraps_in_order_without_loss_or_duplication() {
    model("wrap", None, || {
        let (mut p, mut c) = spsc::<u32>(2).unwrap();
        let producer = thread::spawn(move || push_all(&mut p, 0..3));
        assert_eq!(pop_n(&mut c, 3), [0, 1, 2]);
        producer.join().unwrap();
        assert!(c.pop().is_none());
    });
}

/// Five items through two slots, so every slot is reused at least twice.
/// Exhaustive exploration takes minutes (8.5 million interleavings for four
/// items); this one bounds preemptions to three, which loom's authors report
/// finds most bugs.
#[test]
fn loom_ring_capacity_2_wraps_twice_bounded() {
    model("wrap twice, preemption bound 3", Some(3), || {
        let (mut p, mut c) = spsc::<u32>(2).unwrap();
        let producer = thread::spawn(move || push_all(&mut p, 0..5));
        assert_eq!(pop_n(&mut c, 5), [0, 1, 2, 3, 4]);
        producer.join().unwrap();
    });
}

/// Batches on both ends over two slots: the producer publishes once per
/// `push_batch`, the consumer once per `pop_batch`, and the producer can only
/// reuse slots after the consumer's batch publication.
#[test]
fn loom_ring_batches_publish_once_and_keep_order() {
    model("batch", None, || {
        let (mut p, mut c) = spsc::<u32>(2).unwrap();
        let producer = thread::spawn(move || {
            let mut items = 0..4;
            while !items.is_empty() {
                if p.push_batch(&mut items) == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            if c.pop_batch(&mut got, 2) == 0 {
                thread::yield_now();
            }
        }
        producer.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3]);
    });
}

/// A batch the consumer takes part of: the rest stays, and the slots of the
/// yielded items are freed only when the batch ends.
#[test]
fn loom_ring_partial_drain_frees_only_what_it_took() {
    model("partial drain", None, || {
        let (mut p, mut c) = spsc::<u32>(2).unwrap();
        p.push(0).unwrap();
        p.push(1).unwrap();
        let producer = thread::spawn(move || push_all(&mut p, [2]));
        {
            let mut batch = c.drain(2);
            assert_eq!(batch.next(), Some(0));
        }
        let got = pop_n(&mut c, 2);
        producer.join().unwrap();
        assert_eq!(got, [1, 2]);
    });
}

/// Counts how many times items were dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The producer fills a two-slot ring and drops its end while the consumer
/// takes at most one item and drops its end: whichever end goes last drops
/// what is left, and every item is dropped exactly once.
#[test]
fn loom_ring_drop_of_non_empty_ring_from_either_side_drops_each_item_once() {
    model("drop", None, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = spsc::<Counted>(2).unwrap();
        let d = Arc::clone(&drops);
        let producer = thread::spawn(move || {
            for _ in 0..2 {
                assert!(p.push(Counted(Arc::clone(&d))).is_ok());
            }
            drop(p);
        });
        let taken = c.pop();
        let took = usize::from(taken.is_some());
        drop(taken);
        drop(c);
        producer.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2, "took {took}");
    });
}

/// The same with a batch: the consumer takes items through a `Drain` it
/// forgets, so only `Consumer::drop` publishes them. The ring must not drop
/// the moved-out item a second time.
#[test]
fn loom_ring_drop_after_forgotten_drain_drops_each_item_once() {
    model("drop forgotten drain", None, || {
        let drops = Arc::new(AtomicUsize::new(0));
        let (mut p, mut c) = spsc::<Counted>(2).unwrap();
        let d = Arc::clone(&drops);
        let producer = thread::spawn(move || {
            for _ in 0..2 {
                assert!(p.push(Counted(Arc::clone(&d))).is_ok());
            }
        });
        let mut batch = c.drain(1);
        let taken = batch.next();
        std::mem::forget(batch);
        drop(c);
        drop(taken);
        producer.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 2);
    });
}

/// The consumer's driver loop: pop; when empty, announce the park and sleep
/// on the "eventfd" (a loom `Notify`, which may also wake spuriously) only if
/// `prepare_park` allows it. Returns the items seen until `n` arrived or the
/// producer left.
fn consume_parking(c: &mut Consumer<u32>, eventfd: &Notify, n: usize) -> Vec<u32> {
    let mut got = Vec::new();
    while got.len() < n {
        if let Some(v) = c.pop() {
            got.push(v);
            continue;
        }
        if c.is_abandoned() {
            // Everything pushed before the close is visible now.
            got.extend(c.drain(usize::MAX));
            break;
        }
        if c.prepare_park() {
            eventfd.wait();
            c.cancel_park();
        }
    }
    got
}

/// No lost wake-up: the producer pushes twice, checking `needs_wake` after
/// each push and writing the eventfd when told to. If any interleaving lets
/// the consumer sleep on an item it was not told about, loom reports a
/// deadlock (the consumer blocked forever, the producer finished).
#[test]
fn loom_ring_park_protocol_never_loses_a_wake_up() {
    model("park", None, || {
        let (mut p, mut c) = spsc::<u32>(2).unwrap();
        let eventfd = Arc::new(Notify::new());
        let wakes = Arc::new(Mutex::new(0u32));
        let (e, w) = (Arc::clone(&eventfd), Arc::clone(&wakes));
        let producer = thread::spawn(move || {
            for i in 0..2 {
                p.push(i).unwrap();
                if p.needs_wake() {
                    *w.lock().unwrap() += 1;
                    e.notify();
                }
            }
            p
        });
        assert_eq!(consume_parking(&mut c, &eventfd, 2), [0, 1]);
        let _p = producer.join().unwrap();
        // One park costs at most one wake-up: at most one per item here.
        assert!(*wakes.lock().unwrap() <= 2);
    });
}

/// No lost wake-up on close: a consumer parked on an empty ring is told to
/// wake when the producer closes, and then sees everything pushed before.
#[test]
fn loom_ring_close_wakes_a_parked_consumer() {
    model("close", None, || {
        let (mut p, mut c) = spsc::<u32>(2).unwrap();
        let eventfd = Arc::new(Notify::new());
        let e = Arc::clone(&eventfd);
        let producer = thread::spawn(move || {
            p.push(7).unwrap();
            // Deliberately no `needs_wake` after the push: `close` alone
            // must cover both the item and the departure.
            if p.close() {
                e.notify();
            }
        });
        assert_eq!(consume_parking(&mut c, &eventfd, usize::MAX), [7]);
        producer.join().unwrap();
        assert!(c.is_abandoned());
    });
}
