//! Snapshots and bounded polling (SPEC RT-6, RT-11): the body and its
//! checkpoint, ETag / If-None-Match → 304, a new tag after a publication,
//! the checkpoint's cursor resuming at the snapshot's commit point, 429.

use std::sync::atomic::Ordering::Relaxed;

use dtp_codec::realtime::{JsonLimits, RecoveryMode, SnapshotCheckpoint};
use serde_json::{Value, json};

use crate::client::{Http, Response, bearer, publish, publish_ticks};
use crate::server::{ADMIN, BACKENDS, READER, start_default};
use crate::ssec::{Sse, sequences};
use crate::wsc::{Ws, keys};

/// GET the snapshot of `stream` on `c`, with `If-None-Match` if given.
fn poll(c: &mut Http, token: &str, stream: &str, inm: Option<&str>) -> Response {
    let mut head = format!(
        "GET /v1/streams/{stream}/snapshot HTTP/1.1\r\n{}",
        bearer(token)
    );
    if let Some(tag) = inm {
        head.push_str(&format!("If-None-Match: {tag}\r\n"));
    }
    c.call(head.trim_end(), b"")
}

/// The snapshot body's checkpoint, decoded exactly, and its state.
fn parse(r: &Response, stream: &str) -> (SnapshotCheckpoint, Value) {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(
        keys(&v),
        ["checkpoint", "scopeBinding", "state", "streamId"],
        "{v}"
    );
    assert_eq!(v["streamId"], stream);
    assert_eq!(v["scopeBinding"], format!("scope-{stream}"));
    let raw = serde_json::to_vec(&v["checkpoint"]).unwrap();
    let cp = SnapshotCheckpoint::decode(&raw, &JsonLimits::default())
        .unwrap_or_else(|e| panic!("{e:?}: {v}"));
    (cp, v["state"].clone())
}

#[test]
fn a_snapshot_carries_its_checkpoint_and_answers_304_to_its_etag() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let published: Vec<Value> = (1..=2)
            .map(|n| publish(srv.addr, ADMIN, "ticks", "tick", &format!("{{\"n\":{n}}}")).json())
            .collect();
        let mut c = Http::open(srv.addr);
        let r = poll(&mut c, READER, "ticks", None);
        let (cp, state) = parse(&r, "ticks");
        assert_eq!(state, json!({"n":2}));
        assert_eq!(cp.stream_epoch, published[1]["streamEpoch"]);
        assert_eq!(cp.last_applied_sequence, 2);
        assert_eq!(cp.recovery_mode, RecoveryMode::Cursor);
        assert_eq!(
            cp.resume_cursor.as_deref(),
            published[1]["resumeCursor"].as_str()
        );
        let tag = r.header("etag").unwrap().to_owned();
        assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
        let r = poll(&mut c, READER, "ticks", Some(&tag));
        assert_eq!(r.status, 304);
        assert!(r.body.is_empty());
        assert_eq!(r.header("etag"), Some(tag.as_str()));
        assert_eq!(srv.metrics.poll_not_modified.load(Relaxed), 1);
        // A publication is a new revision: a new tag and the new state.
        publish_ticks(srv.addr, 3..=3);
        let r = poll(&mut c, READER, "ticks", Some(&tag));
        let (cp, state) = parse(&r, "ticks");
        assert_eq!((cp.last_applied_sequence, state), (3, json!({"n":3})));
        let new_tag = r.header("etag").unwrap();
        assert_ne!(new_tag, tag);
        let r = poll(&mut c, READER, "ticks", Some(&format!("\"x\", {new_tag}")));
        assert_eq!(r.status, 304);
        // A SNAPSHOT_ONLY stream: no cursor in its checkpoint.
        publish(srv.addr, ADMIN, "state", "changed", "{\"on\":true}");
        let (cp, state) = parse(&poll(&mut c, ADMIN, "state", None), "state");
        assert_eq!(
            (cp.recovery_mode, cp.resume_cursor),
            (RecoveryMode::SnapshotOnly, None)
        );
        assert_eq!((cp.last_applied_sequence, state), (1, json!({"on":true})));
    }
}

#[test]
fn a_snapshot_of_a_stream_with_no_events_yet_has_a_checkpoint() {
    // SPEC RT-6: every snapshot response carries its checkpoint — also the
    // first one, before anything was published (state null, sequence 0).
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut c = Http::open(srv.addr);
        let r = poll(&mut c, ADMIN, "state", None);
        let (cp, state) = parse(&r, "state");
        assert_eq!((cp.last_applied_sequence, state), (0, Value::Null));
        let r = poll(&mut c, READER, "ticks", None);
        let v = r.json();
        assert!(v["checkpoint"].is_object(), "RT-6: no checkpoint in {v}");
        let (cp, _) = parse(&r, "ticks");
        assert_eq!(cp.last_applied_sequence, 0);
    }
}

#[test]
fn the_checkpoint_cursor_resumes_at_the_snapshot_commit_point() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        publish_ticks(srv.addr, 1..=3);
        let mut c = Http::open(srv.addr);
        let (cp, state) = parse(&poll(&mut c, READER, "ticks", None), "ticks");
        assert_eq!(state, json!({"n":3}));
        let cursor = cp.resume_cursor.unwrap();
        // SSE: nothing replayed, the next publication is the first event.
        let mut sse = Sse::ticks(srv.addr, &format!("Last-Event-ID: {cursor}\r\n"));
        // WebSocket: SUBSCRIBED at lastApplied + 1, nothing replayed.
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.subscribe("s", "ticks", Some(&cursor), "scope-ticks");
        let v = ws.recv_json();
        assert_eq!(v["type"], "SUBSCRIBED", "{v}");
        assert_eq!(v["acceptedCursor"], cursor.as_str());
        assert_eq!(v["nextExpectedSequence"], "4");
        assert_eq!(v["streamEpoch"], cp.stream_epoch.as_str());
        publish_ticks(srv.addr, 4..=4);
        assert_eq!(sequences(sse.wait_for(1)), [4]);
        ws.expect_event("s", 4);
    }
}

#[test]
fn the_sixth_poll_within_the_interval_is_429_with_retry_after() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        // One connection: one shard, whose budget is per client (RT-11).
        let mut c = Http::open(srv.addr);
        for i in 0..5 {
            assert_eq!(poll(&mut c, READER, "ticks", None).status, 200, "poll {i}");
        }
        let r = poll(&mut c, READER, "ticks", None);
        assert_eq!(r.status, 429);
        assert_eq!(r.refusal(), "RATE_LIMITED");
        let after: u64 = r.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=5).contains(&after), "{after}");
        assert_eq!(srv.metrics.rate_limited.load(Relaxed), 1);
        // Another client is not limited by READER's polls; the connection
        // stays usable.
        assert_eq!(poll(&mut c, ADMIN, "ticks", None).status, 200);
        assert_eq!(c.call("GET /v1/health HTTP/1.1", b"").status, 200);
    }
}
