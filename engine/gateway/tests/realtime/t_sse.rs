//! SSE streams (SPEC RT-8, RT-6): the head, `retry:`, cursor ids, the
//! SNAPSHOT_ONLY profile, resume from `Last-Event-ID` and `?cursor=`,
//! resets of expired and tampered cursors, cleanup on disconnect.

use std::sync::atomic::Ordering::Relaxed;

use dtp_codec::realtime::RecoveryMode;

use crate::client::{bearer, cut, eventually, publish, publish_ticks};
use crate::server::{ADMIN, BACKENDS, start_default};
use crate::ssec::{Event, Sse, envelope, reset_event, sequences};

#[test]
fn an_sse_stream_has_its_head_a_retry_hint_and_cursor_ids() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut sse = Sse::ticks(srv.addr, "");
        assert_eq!(sse.header("content-type"), Some("text/event-stream"));
        let cache = sse.header("cache-control").unwrap();
        assert!(cache.contains("no-store"), "{cache}");
        assert_eq!(sse.header("transfer-encoding"), Some("chunked"));
        let cursors = publish_ticks(srv.addr, 1..=3);
        let events = sse.wait_for(3).to_vec();
        // RtLimits::default().sse_retry is 2 s; each stream's hint is
        // spread over [2 s, 4 s) (RT-7).
        let retry = sse.retry().unwrap();
        assert!((2000..4000).contains(&retry), "{retry}");
        assert_eq!(events.len(), 3);
        for (i, e) in events.iter().enumerate() {
            let env = envelope(e);
            assert_eq!(env.sequence, i as u64 + 1);
            assert_eq!(env.stream_id, "ticks");
            assert_eq!(env.event_type, "tick");
            assert_eq!(env.recovery, RecoveryMode::Cursor);
            // RT-8: the block's own id is the envelope's resumeCursor, and
            // the one the publication answered with.
            assert_eq!(e.id.as_deref(), Some(cursors[i].as_str()));
            assert_eq!(env.resume_cursor.as_deref(), Some(cursors[i].as_str()));
            assert_eq!(env.payload["n"], i + 1);
        }
    }
}

/// SPEC RT-7: browsers' EventSource waits exactly the `retry:` hint, so
/// each stream gets its own within [2 s, 4 s): a herd does not come back
/// in one instant.
#[test]
fn sse_retry_hints_are_spread_over_connections() {
    let srv = start_default(BACKENDS[0]);
    let mut hints = std::collections::BTreeSet::new();
    for n in 1..=20 {
        let mut sse = Sse::ticks(srv.addr, "");
        publish_ticks(srv.addr, n..=n);
        sse.wait_for(1);
        let retry = sse.retry().unwrap();
        assert!((2000..4000).contains(&retry), "{retry}");
        hints.insert(retry);
    }
    assert!(hints.len() >= 15, "{hints:?}");
}

#[test]
fn a_snapshot_only_stream_sends_events_without_ids() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut sse = Sse::open(srv.addr, "/v1/streams/state/sse", &bearer(ADMIN));
        assert_eq!(sse.status, 200);
        for n in 1..=2 {
            let r = publish(
                srv.addr,
                ADMIN,
                "state",
                "changed",
                &format!("{{\"v\":{n}}}"),
            );
            assert_eq!(r.status, 201, "{}", r.text());
            let v = r.json();
            assert_eq!(v["sequence"], n.to_string());
            assert!(v["resumeCursor"].is_null(), "{v}");
        }
        let events = sse.wait_for(2).to_vec();
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e.id, None, "{e:?}");
            let env = envelope(e);
            assert_eq!(env.sequence, i as u64 + 1);
            assert_eq!(env.recovery, RecoveryMode::SnapshotOnly);
            assert_eq!(env.resume_cursor, None);
            let raw: serde_json::Value = serde_json::from_str(&e.data).unwrap();
            assert!(raw["resumeCursor"].is_null(), "{raw}");
            assert!(raw.as_object().unwrap().contains_key("resumeCursor"));
        }
    }
}

/// How a reconnecting client names its cursor.
#[derive(Clone, Copy, Debug)]
enum Resume {
    LastEventId,
    Query,
}

/// Opens `ticks` as READER resuming after `cursor`.
fn resume(srv: &crate::server::Server, how: Resume, cursor: &str) -> Sse {
    match how {
        Resume::LastEventId => Sse::ticks(srv.addr, &format!("Last-Event-ID: {cursor}\r\n")),
        Resume::Query => {
            let extra = bearer(crate::server::READER);
            let sse = Sse::open(
                srv.addr,
                &format!("/v1/streams/ticks/sse?cursor={cursor}"),
                &extra,
            );
            assert_eq!(sse.status, 200);
            sse
        }
    }
}

#[test]
fn a_reconnect_gets_exactly_the_missed_events_then_live_ones() {
    for backend in BACKENDS {
        for how in [Resume::LastEventId, Resume::Query] {
            let srv = start_default(backend);
            let mut first = Sse::ticks(srv.addr, "");
            publish_ticks(srv.addr, 1..=3);
            let seen = first.wait_for(3).to_vec();
            assert_eq!(sequences(&seen), [1, 2, 3], "{how:?}");
            let last = seen[2].id.clone().unwrap();
            drop(first);
            publish_ticks(srv.addr, 4..=6);
            let mut again = resume(&srv, how, &last);
            assert_eq!(sequences(again.wait_for(3)), [4, 5, 6], "{how:?}");
            publish_ticks(srv.addr, 7..=7);
            // Nothing duplicated or skipped: the live event follows at once.
            assert_eq!(sequences(again.wait_for(4)), [4, 5, 6, 7], "{how:?}");
            // The replayed blocks carry their own cursor ids too.
            for e in &again.events {
                assert_eq!(e.id, envelope(e).resume_cursor);
            }
        }
    }
}

/// Asserts `sse` starts with the reset of `reason` and then carries the
/// live events published after it (sequence `next` on).
fn reset_then_live(srv: &crate::server::Server, sse: &mut Sse, reason: &str, next: u64) {
    let first: Vec<Event> = sse.wait_for(1).to_vec();
    assert_eq!(first, [reset_event(reason)]);
    publish_ticks(srv.addr, next..=next + 1);
    let events = sse.wait_for(3).to_vec();
    assert_eq!(events[0], reset_event(reason));
    assert_eq!(sequences(&events[1..]), [next, next + 1]);
}

#[test]
fn a_cursor_older_than_a_cut_gets_reset_required_then_live_events() {
    for backend in BACKENDS {
        for how in [Resume::LastEventId, Resume::Query] {
            let srv = start_default(backend);
            let cursors = publish_ticks(srv.addr, 1..=4);
            let r = cut(srv.addr, ADMIN, "ticks");
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(r.text(), "{}");
            // RT-6: never an empty success — an explicit reset.
            let mut sse = resume(&srv, how, &cursors[1]);
            reset_then_live(&srv, &mut sse, "CURSOR_EXPIRED", 5);
            assert!(srv.metrics.resets.load(Relaxed) >= 1);
        }
    }
}

#[test]
fn a_tampered_cursor_gets_reset_required() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let cursors = publish_ticks(srv.addr, 1..=2);
        // One character of the tag changed (a hex digit for another).
        let mut bad = cursors[0].clone().into_bytes();
        let last = bad.len() - 3;
        bad[last] = if bad[last] == b'0' { b'1' } else { b'0' };
        let bad = String::from_utf8(bad).unwrap();
        assert_ne!(bad, cursors[0]);
        for how in [Resume::LastEventId, Resume::Query] {
            let mut sse = resume(&srv, how, &bad);
            let first = sse.wait_for(1).to_vec();
            assert_eq!(first, [reset_event("CURSOR_EXPIRED")], "{how:?}");
        }
        // And live events follow the reset.
        let mut sse = resume(&srv, Resume::LastEventId, &bad);
        reset_then_live(&srv, &mut sse, "CURSOR_EXPIRED", 3);
    }
}

#[test]
fn the_latest_cursor_still_resumes_after_a_cut() {
    // A cut drops the retained events; a cursor at the very last event
    // still proves continuity (nothing to replay), so it is no reset.
    for backend in BACKENDS {
        let srv = start_default(backend);
        let cursors = publish_ticks(srv.addr, 1..=3);
        assert_eq!(cut(srv.addr, ADMIN, "ticks").status, 200);
        let mut sse = resume(&srv, Resume::LastEventId, &cursors[2]);
        publish_ticks(srv.addr, 4..=4);
        assert_eq!(sequences(sse.wait_for(1)), [4]);
    }
}

#[test]
fn subscriptions_of_closed_connections_are_cleaned_up() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let subs = |srv: &crate::server::Server| srv.metrics.subscriptions.load(Relaxed);
        let streams: Vec<Sse> = (0..6).map(|_| Sse::ticks(srv.addr, "")).collect();
        // Each subscription is live before its response head is sent.
        assert_eq!(subs(&srv), 6);
        publish_ticks(srv.addr, 1..=1);
        drop(streams);
        eventually("every SSE subscription forgotten", || subs(&srv) == 0);
        // The same for WebSocket subscriptions of a dropped connection.
        let (mut ws, _) = crate::wsc::Ws::realtime(srv.addr, crate::server::READER);
        ws.subscribe_ticks("a", 2);
        ws.subscribe_ticks("b", 2);
        assert_eq!(subs(&srv), 2);
        drop(ws);
        eventually("every WebSocket subscription forgotten", || subs(&srv) == 0);
        let closed = srv.metrics.connections_closed.load(Relaxed);
        assert!(closed >= 7, "{closed}");
    }
}
