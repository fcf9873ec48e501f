//! Slow consumers (SPEC RT-10) and fan-out across both shards: a
//! subscriber that never reads is told QUEUE_OVERFLOW / CLOSE OVERLOADED and
//! ended, never sent a later event with an earlier one skipped, while a
//! well-behaved subscriber of the same stream gets every event.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Http, PATIENCE, bearer, eventually, publication, publish_ticks};
use crate::server::{ADMIN, BACKENDS, Server, start_default};
use crate::ssec::{Sse, envelope, reset_event, sequences};
use crate::wsc::Ws;

/// Publications before the test gives up on seeing an overflow: the
/// kernel's socket buffers absorb several MB of ~32 KiB events first.
const CAP: u64 = 4000;

/// How many events the well-behaved subscriber may lag behind the
/// publisher: 4 × 32 KiB stays under the 256 KiB outbound ceiling even with
/// no socket buffer at all, so a starved reader thread on a loaded machine
/// is never taken for a slow consumer.
const LAG: u64 = 4;

/// Waits until the well-behaved subscriber has `n` events.
fn wait_for_reader(progress: &AtomicU64, n: u64) {
    let deadline = Instant::now() + PATIENCE;
    while progress.load(Relaxed) < n {
        assert!(
            Instant::now() < deadline,
            "the well-behaved subscriber stopped at {} of {n}",
            progress.load(Relaxed)
        );
        thread::sleep(Duration::from_micros(200));
    }
}

/// Publishes ~32 KiB events on `ticks` over one kept connection until a
/// subscriber was ended as a slow consumer, then one last event marked
/// `"last":true`; returns how many were published. It keeps at most
/// [`LAG`] events ahead of the well-behaved subscriber's `progress`.
fn publish_until_overflow(srv: &Server, progress: &AtomicU64) -> u64 {
    let mut c = Http::open(srv.addr);
    let head = format!(
        "POST /v1/streams/ticks/events HTTP/1.1\r\n{}Content-Type: application/json",
        bearer(ADMIN)
    );
    let pad = "x".repeat(32 * 1024);
    let mut n = 0;
    loop {
        let done = srv.metrics.queue_overflows.load(Relaxed) > 0;
        n += 1;
        assert!(n <= CAP, "no slow consumer was ended after {CAP} events");
        wait_for_reader(progress, n.saturating_sub(LAG + 1));
        let payload = if done {
            json!({"n": n, "last": true})
        } else {
            json!({"n": n, "pad": pad})
        };
        let r = c.call(&head, publication("tick", &payload.to_string()).as_bytes());
        assert_eq!(r.status, 201, "{}", r.text());
        if done {
            return n;
        }
    }
}

fn is_last(env: &Value) -> bool {
    env["payload"]["last"] == true
}

/// Reads a well-behaved SSE subscriber on a thread until the last event,
/// counting what it has in `progress`.
fn read_sse_until_last(mut sse: Sse, progress: Arc<AtomicU64>) -> thread::JoinHandle<Sse> {
    thread::spawn(move || {
        loop {
            let n = sse.events.len();
            sse.wait_for(n + 1);
            assert!(!sse.ended, "the well-behaved subscriber was ended");
            let events = &sse.events;
            let last = &events[events.len() - 1];
            let env: Value = serde_json::from_str(&last.data).unwrap();
            progress.store(events.len() as u64, Relaxed);
            if is_last(&env) {
                return sse;
            }
        }
    })
}

#[test]
fn a_slow_sse_subscriber_gets_queue_overflow_and_nothing_skipped() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut slow = Sse::ticks(srv.addr, "");
        let progress = Arc::new(AtomicU64::new(0));
        let good = read_sse_until_last(Sse::ticks(srv.addr, ""), progress.clone());
        let n = publish_until_overflow(&srv, &progress);
        let good = good.join().unwrap();
        assert_eq!(
            sequences(&good.events),
            (1..=n).collect::<Vec<_>>(),
            "{backend:?}"
        );
        assert_eq!(srv.metrics.queue_overflows.load(Relaxed), 1);
        // The slow one: a contiguous run from 1, the reset, the end.
        let events = slow.read_to_end().to_vec();
        let (last, before) = events.split_last().unwrap();
        assert_eq!(*last, reset_event("QUEUE_OVERFLOW"));
        let seqs = sequences(before);
        assert!(
            !seqs.is_empty() && (seqs.len() as u64) < n,
            "{} of {n}",
            seqs.len()
        );
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
        for e in before {
            assert_eq!(e.id, envelope(e).resume_cursor);
        }
        // The slow one is forgotten, the good one stays.
        eventually("the slow subscription forgotten", || {
            srv.metrics.subscriptions.load(Relaxed) == 1
        });
        drop(good);
    }
}

#[test]
fn a_slow_websocket_subscriber_gets_close_overloaded_and_nothing_skipped() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut slow, _) = Ws::realtime(srv.addr, crate::server::READER);
        slow.subscribe_ticks("slow", 1);
        let (mut good, _) = Ws::realtime(srv.addr, crate::server::READER);
        good.subscribe_ticks("good", 1);
        let progress = Arc::new(AtomicU64::new(0));
        let seen = progress.clone();
        let good = thread::spawn(move || {
            let mut seqs = Vec::new();
            loop {
                let v = good.recv_json();
                assert_eq!(
                    (v["type"].as_str(), v["subscriptionId"].as_str()),
                    (Some("EVENT"), Some("good"))
                );
                seqs.push(
                    v["envelope"]["sequence"]
                        .as_str()
                        .unwrap()
                        .parse::<u64>()
                        .unwrap(),
                );
                seen.store(seqs.len() as u64, Relaxed);
                if is_last(&v["envelope"]) {
                    return seqs;
                }
            }
        });
        let n = publish_until_overflow(&srv, &progress);
        assert_eq!(
            good.join().unwrap(),
            (1..=n).collect::<Vec<_>>(),
            "{backend:?}"
        );
        assert_eq!(srv.metrics.queue_overflows.load(Relaxed), 1);
        let mut next = 1;
        let close = loop {
            let v = slow.recv_json();
            if v["type"] != "EVENT" {
                break v;
            }
            assert_eq!(v["subscriptionId"], "slow");
            assert_eq!(
                v["envelope"]["sequence"],
                next.to_string(),
                "a skipped event"
            );
            next += 1;
        };
        assert!(next > 1 && next <= n, "{next} of {n}");
        // SPEC RT-7: the exact retry hint, spread over [1 s, 2 s) by default.
        let hint = close["retryAfterMs"].as_u64().unwrap_or(0);
        assert!((1000..2000).contains(&hint), "{close}");
        assert_eq!(
            close,
            json!({"type":"CLOSE","category":"OVERLOADED","retryAfterMs":hint})
        );
        assert_eq!(srv.metrics.overload_hints.load(Relaxed), 1);
        slow.expect_close_frame(1013);
    }
}

#[test]
fn fifty_sse_subscribers_on_both_shards_get_the_same_twenty_events() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut subs: Vec<Sse> = (0..50).map(|_| Sse::ticks(srv.addr, "")).collect();
        assert_eq!(srv.metrics.subscriptions.load(Relaxed), 50);
        // SO_REUSEPORT spreads 50 connections over both shards (all on
        // one has probability 2^-49).
        let per_shard: Vec<u64> = srv.engine.metrics().iter().map(|m| m.connections).collect();
        assert!(
            per_shard.len() == 2 && per_shard.iter().all(|&c| c > 0),
            "{per_shard:?}"
        );
        let cursors = publish_ticks(srv.addr, 1..=20);
        for (i, sse) in subs.iter_mut().enumerate() {
            let events = sse.wait_for(20);
            assert_eq!(events.len(), 20, "subscriber {i}");
            assert_eq!(
                sequences(events),
                (1..=20).collect::<Vec<_>>(),
                "subscriber {i}"
            );
            let ids: Vec<&str> = events.iter().map(|e| e.id.as_deref().unwrap()).collect();
            assert_eq!(ids, cursors, "subscriber {i}");
        }
        eventually("1000 deliveries counted", || {
            srv.metrics.delivered.load(Relaxed) == 1000
        });
    }
}
