//! Paced replay (SPEC RT-10, RT-13): a resume from the oldest retained
//! event is sent from the ledger as the socket drains, never more than the
//! connection's outbound ceiling at once. A resumer that reads gets every
//! event once and in order, live events after them; one that never reads
//! holds no more than the ceiling and is ended as a slow consumer.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde_json::json;

use crate::client::{Http, bearer, eventually, publication, publish};
use crate::server::{ADMIN, BACKENDS, READER, Server, start};
use crate::ssec::{Sse, reset_event, sequences};
use crate::wsc::Ws;
use dtp_gateway::realtime::RtLimits;

/// Events published before the resumers come: ~6 MiB in all, more than
/// a loopback socket's buffers take from a reader that does not read, and
/// 24 times the 256 KiB outbound ceiling (the test ledger keeps 100).
const EVENTS: u64 = 100;

/// Publishes `ns` as ~60 KiB `tick`s on one kept connection; returns each
/// answer's resume cursor.
fn publish_big(srv: &Server, ns: std::ops::RangeInclusive<u64>) -> Vec<String> {
    let mut c = Http::open(srv.addr);
    let head = format!(
        "POST /v1/streams/ticks/events HTTP/1.1\r\n{}Content-Type: application/json",
        bearer(ADMIN)
    );
    let pad = "r".repeat(60 * 1024);
    ns.map(|n| {
        let payload = json!({"n": n, "pad": pad}).to_string();
        let r = c.call(&head, publication("tick", &payload).as_bytes());
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["resumeCursor"].as_str().unwrap().to_owned()
    })
    .collect()
}

/// Short heartbeats, so that the stall checks come soon: SSE every
/// 300 ms; WebSocket every 2 s, before its idle limit of 4 s for a client
/// that sends nothing.
fn limits() -> RtLimits {
    RtLimits {
        sse_heartbeat: Duration::from_millis(300),
        ws_heartbeat_min: Duration::from_millis(300),
        ws_heartbeat_max: Duration::from_secs(2),
        ..RtLimits::default()
    }
}

#[test]
fn a_resume_from_the_oldest_event_is_paced_and_complete() {
    for backend in BACKENDS {
        let srv = start(backend, RtLimits::default());
        let cursors = publish_big(&srv, 1..=EVENTS);
        // SSE, resuming after the first event.
        let mut sse = Sse::ticks(srv.addr, &format!("Last-Event-ID: {}\r\n", cursors[0]));
        // WebSocket: eight subscriptions of one session, each resuming
        // after the first event too.
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        for i in 0..8 {
            ws.subscribe(&format!("s{i}"), "ticks", Some(&cursors[0]), "scope-ticks");
        }
        let events = sse.wait_for(EVENTS as usize - 1).to_vec();
        assert_eq!(
            sequences(&events),
            (2..=EVENTS).collect::<Vec<_>>(),
            "{backend:?}"
        );
        let mut next = [2u64; 8];
        let mut subscribed = 0;
        while subscribed < 8 || next.iter().any(|&n| n <= EVENTS) {
            let v = ws.recv_json();
            let id = v["subscriptionId"].as_str().unwrap().to_owned();
            let i: usize = id[1..].parse().unwrap();
            match v["type"].as_str() {
                Some("SUBSCRIBED") => subscribed += 1,
                Some("EVENT") => {
                    assert_eq!(v["envelope"]["sequence"], next[i].to_string(), "{id}");
                    next[i] += 1;
                }
                other => panic!("{other:?}: {v}"),
            }
        }
        // Live events follow the replay, on both.
        for n in EVENTS + 1..=EVENTS + 2 {
            let r = publish(srv.addr, ADMIN, "ticks", "tick", &format!("{{\"n\":{n}}}"));
            assert_eq!(r.status, 201);
        }
        let events = sse.wait_for(EVENTS as usize + 1).to_vec();
        assert_eq!(
            sequences(&events[events.len() - 2..]),
            vec![EVENTS + 1, EVENTS + 2]
        );
        for _ in 0..16 {
            let v = ws.recv_json();
            let id = v["subscriptionId"].as_str().unwrap_or_default();
            let i: usize = id[1..].parse().unwrap_or_else(|_| panic!("{v}"));
            assert_eq!(v["envelope"]["sequence"], next[i].to_string());
            next[i] += 1;
        }
        // Never more than the ceiling queued on a connection, though each
        // asked for 24 times as much.
        let high = srv.metrics.queue_high_water_bytes.load(Relaxed);
        assert!(high <= 256 * 1024, "{high} bytes queued at once");
        assert_eq!(srv.metrics.queue_overflows.load(Relaxed), 0);
    }
}

#[test]
fn a_resumer_that_never_reads_holds_one_ceiling_and_is_ended() {
    for backend in BACKENDS {
        let srv = start(backend, limits());
        let cursors = publish_big(&srv, 1..=EVENTS);
        let mut sse = Sse::ticks(srv.addr, &format!("Last-Event-ID: {}\r\n", cursors[0]));
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.subscribe("slow", "ticks", Some(&cursors[0]), "scope-ticks");
        // Neither reads: both are found stalled at a heartbeat and ended.
        eventually("both slow resumers ended", || {
            srv.metrics.queue_overflows.load(Relaxed) == 2
        });
        let high = srv.metrics.queue_high_water_bytes.load(Relaxed);
        assert!(high <= 256 * 1024, "{high} bytes queued at once");
        // What each got is a contiguous run from 2, then the end.
        let events = sse.read_to_end().to_vec();
        let (last, before) = events.split_last().unwrap();
        assert_eq!(*last, reset_event("QUEUE_OVERFLOW"));
        let seqs = sequences(before);
        assert_eq!(
            seqs,
            (2..2 + seqs.len() as u64).collect::<Vec<_>>(),
            "{backend:?}"
        );
        assert_eq!(ws.recv_json()["type"], "SUBSCRIBED");
        let mut next = 2;
        let close = loop {
            let v = ws.recv_json();
            if v["type"] != "EVENT" {
                break v;
            }
            assert_eq!(v["envelope"]["sequence"], next.to_string());
            next += 1;
        };
        let hint = close["retryAfterMs"].as_u64().unwrap_or(0);
        assert!((1000..2000).contains(&hint), "{close}");
        assert_eq!(
            close,
            json!({"type":"CLOSE","category":"OVERLOADED","retryAfterMs":hint})
        );
        eventually("the slow subscriptions forgotten", || {
            srv.metrics.subscriptions.load(Relaxed) == 0
        });
    }
}
