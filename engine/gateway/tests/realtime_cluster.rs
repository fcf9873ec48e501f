//! Realtime ledgers shared by two gateways through a real nats-server
//! (SPEC RT-6: "the ordering meaning survives server scale-out"). Two
//! realtime planes, each as its own control thread would run it (the test
//! drives them through `handle_request` and `tick`), on one JetStream:
//! what one publishes the other delivers, in order, once; a cursor issued
//! by one resumes exactly on the other; a snapshot on either carries the
//! same checkpoint; nothing acknowledged is lost across a server restart;
//! a publication while the server is down is refused, never accepted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "../../cluster/tests/servers/mod.rs"]
mod servers;

use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_codec::realtime::{Envelope, JsonLimits, RecoveryMode};
use dtp_engine::{ControlPlane, Decision};
use dtp_gateway::app::GatewayDown;
use dtp_gateway::plane::SystemClock;
use dtp_gateway::realtime::{
    ClusterSettings, PageSize, RealtimePlane, RtDecision, RtRefusal, RtRequest,
};
use dtp_realtime::{Retention, StreamSpec};
use dtp_transports::ConnId;
use serde_json::Value;
use servers::NatsServer;

/// How long a plane may take to see what the test waits for.
const WITHIN: Duration = Duration::from_secs(20);

fn specs() -> Vec<StreamSpec> {
    let stream = |id: &str, max_bytes| StreamSpec {
        id: id.into(),
        recovery: RecoveryMode::Cursor,
        event_types: vec!["order.created".into()],
        retention: Retention {
            max_bytes,
            ..Retention::default()
        },
        scope: "tenant-1".into(),
    };
    // `small`: the window (encoded events, some 400 bytes each) keeps far
    // fewer events than the log (stored ones, some 150 bytes) under the
    // same byte bound.
    vec![
        stream("orders", Retention::default().max_bytes),
        stream("small", 4096),
    ]
}

fn settings(nats: &NatsServer, node: &str) -> ClusterSettings {
    ClusterSettings {
        servers: vec![format!("nats://{}", nats.addr)],
        node_id: node.into(),
        timeout: Duration::from_secs(2),
        cursor_key: [0x5a; 32],
        auth: nats.auth.clone(),
        tls: nats.tls.as_ref().map(servers::Tls::client),
    }
}

/// A plane of the cluster, and every event it broadcast so far.
struct Node {
    plane: RealtimePlane,
    /// The stream published to, subscribed to and snapshot.
    stream: &'static str,
    /// (sequence, payload, cursor, envelope bytes) of each event.
    events: Vec<(u64, Value, String, Vec<u8>)>,
    answers: Vec<RtDecision>,
}

impl Node {
    fn start(nats: &NatsServer, node: &str) -> Self {
        let plane =
            RealtimePlane::clustered(specs(), 1, &settings(nats, node), SystemClock::default())
                .unwrap();
        Self {
            plane,
            stream: "orders",
            events: Vec::new(),
            answers: Vec::new(),
        }
    }

    fn keep(&mut self, out: Vec<(usize, Decision<GatewayDown>)>) {
        for (_, d) in out {
            match d {
                Decision::Service(GatewayDown::RtEvent(ev)) => {
                    let env = Envelope::decode(ev.envelope(), &JsonLimits::default()).unwrap();
                    let cursor = env.resume_cursor.clone().unwrap_or_default();
                    let raw = ev.envelope().to_vec();
                    self.events
                        .push((env.sequence, Value::Object(env.payload), cursor, raw));
                }
                Decision::Service(GatewayDown::Realtime(d)) => self.answers.push(*d),
                _ => {}
            }
        }
    }

    fn request(&mut self, r: RtRequest) {
        let mut out = Vec::new();
        self.plane.handle_request(0, r, Instant::now(), &mut out);
        self.keep(out);
    }

    fn tick(&mut self) {
        let mut out = Vec::new();
        self.plane.tick(Instant::now(), &mut out);
        self.keep(out);
    }

    /// Ticks until `done` holds of the node.
    fn until(&mut self, what: &str, done: impl Fn(&Node) -> bool) {
        let deadline = Instant::now() + WITHIN;
        loop {
            self.tick();
            if done(self) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: not within {WITHIN:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn publish(&mut self, conn: u64, n: u64) {
        self.request(RtRequest::Publish {
            conn: ConnId::from_u64(conn),
            stream: self.stream.into(),
            event_type: "order.created".into(),
            payload: Bytes::from(format!("{{\"n\":{n}}}")),
        });
    }

    /// Publishes `{"n": n}` and waits for its answer: the receipt.
    fn publish_acked(&mut self, conn: u64, n: u64) -> Value {
        self.publish(conn, n);
        let c = ConnId::from_u64(conn);
        self.until("the publication's answer", |s| {
            s.answers.iter().any(|a| answer_of(a, c))
        });
        let i = self.answers.iter().position(|a| answer_of(a, c)).unwrap();
        match self.answers.remove(i) {
            RtDecision::Published { body, .. } => serde_json::from_slice(&body).unwrap(),
            other => panic!("publication refused: {other:?}"),
        }
    }

    fn snapshot(&mut self, conn: u64) -> Value {
        let c = ConnId::from_u64(conn);
        self.request(RtRequest::Snapshot {
            conn: c,
            stream: self.stream.into(),
        });
        self.until("the snapshot", |s| {
            s.answers.iter().any(|a| answer_of(a, c))
        });
        let i = self.answers.iter().position(|a| answer_of(a, c)).unwrap();
        match self.answers.remove(i) {
            RtDecision::Snapshot { body, .. } => serde_json::from_slice(&body).unwrap(),
            other => panic!("snapshot refused: {other:?}"),
        }
    }

    /// Subscribes with `cursor`, answered at once (the replay from memory).
    fn resume(&mut self, cursor: &str) -> RtDecision {
        self.request(RtRequest::Subscribe {
            conn: ConnId::from_u64(9),
            key: 0,
            stream: self.stream.into(),
            cursor: Some(cursor.into()),
            page: PageSize {
                bytes: 1 << 20,
                events: 100,
            },
        });
        self.answers
            .pop()
            .expect("the subscription is answered at once")
    }

    fn has_seq(&self, seq: u64) -> bool {
        self.events.iter().any(|e| e.0 == seq)
    }
}

#[test]
fn a_cursor_the_window_no_longer_covers_is_replayed_from_the_log_in_pages() {
    let nats = NatsServer::start();
    let mut a = Node::start(&nats, "a");
    let mut b = Node::start(&nats, "b");
    a.stream = "small";
    b.stream = "small";
    let first = a.publish_acked(1, 1);
    for i in 2..=20 {
        a.publish_acked(1, i);
    }
    b.until("every event on B", |b| b.has_seq(20));
    let cursor = first["resumeCursor"].as_str().unwrap().to_owned();
    let RtDecision::Subscribed {
        next,
        replay,
        reset,
        epoch,
        stream,
        ..
    } = b.resume(&cursor)
    else {
        panic!("not subscribed");
    };
    assert_eq!((next, reset), (2, None));
    assert!(replay.more, "the replay follows in pages");
    let mut got: Vec<u64> = replay.events.iter().map(|e| e.sequence).collect();
    let mut from_log = 0;
    // Pages of at most 4 events, asked for one after the other as a
    // shard does: the first from the log, the last from the window.
    loop {
        let after = got.last().copied().unwrap_or(1);
        b.request(RtRequest::Replay {
            conn: ConnId::from_u64(9),
            key: 0,
            stream,
            epoch: epoch.clone(),
            after,
            page: PageSize {
                bytes: 1 << 20,
                events: 4,
            },
        });
        if b.answers.is_empty() {
            from_log += 1;
            b.until("a page read from the log", |b| !b.answers.is_empty());
        }
        let Some(RtDecision::Replay { page, .. }) = b.answers.pop() else {
            panic!("not a replay page");
        };
        let page = page.expect("the log holds every event after the cursor");
        assert!(page.events.len() <= 4);
        for e in &page.events {
            got.push(e.sequence);
            // Byte for byte the envelope the live path made.
            let live = b.events.iter().find(|l| l.0 == e.sequence).unwrap();
            assert_eq!(e.envelope(), &live.3[..], "event {}", e.sequence);
        }
        if !page.more {
            break;
        }
    }
    assert_eq!(got, (2..=20).collect::<Vec<_>>(), "no gap, no duplicate");
    assert!(from_log >= 1, "some pages came from the log");
    // The cursors of the pages are the ones A issued.
    let resumed_cursor = a.events[9].2.clone();
    assert!(matches!(
        b.resume(&resumed_cursor),
        RtDecision::Subscribed {
            next: 11,
            reset: None,
            ..
        }
    ));
}

#[test]
fn a_stream_made_again_is_a_new_epoch_on_every_gateway() {
    let nats = NatsServer::start();
    let mut a = Node::start(&nats, "a");
    let mut b = Node::start(&nats, "b");
    let first = a.publish_acked(1, 1);
    a.publish_acked(1, 2);
    b.until("A's events on B", |b| b.has_seq(2));
    let old = a.snapshot(3)["checkpoint"]["streamEpoch"].clone();

    // Its history lost: every gateway sees a new epoch (and ends the
    // stream's subscriptions), the same one.
    let name = dtp_gateway::realtime::jetstream_name("orders");
    nats.jetstream().delete_stream(&name).unwrap();
    let epoch_of = |n: &mut Node| n.snapshot(4)["checkpoint"].clone();
    let deadline = Instant::now() + WITHIN;
    let (ca, cb) = loop {
        let (ca, cb) = (epoch_of(&mut a), epoch_of(&mut b));
        if ca["streamEpoch"] != old && cb["streamEpoch"] != old {
            break (ca, cb);
        }
        assert!(Instant::now() < deadline, "no new epoch");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(ca["streamEpoch"], cb["streamEpoch"]);
    assert_eq!(ca["lastAppliedSequence"], "0");
    for n in [&mut a, &mut b] {
        assert_eq!(
            n.answers.drain(..).collect::<Vec<_>>(),
            [RtDecision::Kick(0)],
            "the stream's subscriptions are ended, once"
        );
    }

    // A cursor of the old epoch is reset; the new epoch counts from 1.
    let cursor = first["resumeCursor"].as_str().unwrap().to_owned();
    match b.resume(&cursor) {
        RtDecision::Subscribed { reset, .. } => {
            assert_eq!(reset, Some(RtRefusal::CursorExpired));
        }
        other => panic!("{other:?}"),
    }
    let r = b.publish_acked(2, 3);
    assert_eq!(seq_of(&r), 1);
    assert_eq!(r["streamEpoch"], ca["streamEpoch"]);
    a.until("the new epoch's first event on A", |a| {
        a.events
            .last()
            .is_some_and(|e| e.1 == serde_json::json!({"n": 3}))
    });
}

/// A gateway that does not keep up: its follower waits for room (the
/// queue to the control thread is bounded) and nothing is lost or
/// reordered.
#[test]
fn a_gateway_that_falls_behind_is_held_back_not_flooded() {
    const N: u64 = 5_000;
    let nats = NatsServer::start();
    let mut a = Node::start(&nats, "a");
    let mut b = Node::start(&nats, "b");
    // In batches the publisher's queue (1,024) takes.
    for batch in 0..N / 1_000 {
        for i in 1..=1_000 {
            a.publish(1, batch * 1_000 + i);
        }
        let done = (batch + 1) * 1_000;
        a.until("the batch answered", |a| a.answers.len() as u64 == done);
    }
    assert!(
        a.answers
            .iter()
            .all(|d| matches!(d, RtDecision::Published { .. }))
    );
    // B has not ticked all along: its follower filled the queue and waits.
    b.until("every event on B", |b| b.has_seq(N));
    assert_eq!(delivered(&b), (1..=N).collect::<Vec<_>>());
    assert_eq!(delivered(&a), (1..=N).collect::<Vec<_>>());
}

fn answer_of(a: &RtDecision, c: ConnId) -> bool {
    matches!(a,
        RtDecision::Published { conn, .. }
        | RtDecision::Refused { conn, .. }
        | RtDecision::Snapshot { conn, .. } if *conn == c)
}

fn seq_of(receipt: &Value) -> u64 {
    receipt["sequence"].as_str().unwrap().parse().unwrap()
}

/// Sequences a node delivered, in order: contiguous, none twice.
fn delivered(n: &Node) -> Vec<u64> {
    n.events.iter().map(|e| e.0).collect()
}

#[test]
fn a_publication_on_one_gateway_is_delivered_on_the_other_and_its_cursor_resumes_there() {
    let nats = NatsServer::start();
    let mut a = Node::start(&nats, "a");
    let mut b = Node::start(&nats, "b");

    let first = a.publish_acked(1, 1);
    assert_eq!(seq_of(&first), 1);
    assert!(a.has_seq(1), "fanned out on A after the acknowledgement");
    b.until("A's event on B", |b| b.has_seq(1));
    assert_eq!(b.events[0].1, serde_json::json!({"n": 1}));
    // The same envelope on both: the same cursor, epoch and sequence.
    assert_eq!(a.events[0].2, b.events[0].2);
    assert_eq!(
        first["resumeCursor"].as_str().unwrap(),
        b.events[0].2,
        "A's receipt cursor is B's envelope cursor"
    );

    // Both publish, interleaved: each delivers every event once, in order.
    for i in 2..=6 {
        if i % 2 == 0 {
            b.publish_acked(2, i);
        } else {
            a.publish_acked(1, i);
        }
    }
    a.until("every event on A", |a| a.has_seq(6));
    b.until("every event on B", |b| b.has_seq(6));
    assert_eq!(delivered(&a), (1..=6).collect::<Vec<_>>());
    assert_eq!(delivered(&b), (1..=6).collect::<Vec<_>>());
    assert_eq!(
        a.events.iter().map(|e| &e.2).collect::<Vec<_>>(),
        b.events.iter().map(|e| &e.2).collect::<Vec<_>>(),
        "every cursor the same on both gateways"
    );

    // A cursor A issued (after event 1) resumes on B: exactly 2..=6.
    let cursor = first["resumeCursor"].as_str().unwrap();
    let sub = b.resume(cursor);
    let RtDecision::Subscribed {
        next,
        replay,
        reset,
        ..
    } = sub
    else {
        panic!("not subscribed: {sub:?}");
    };
    assert_eq!((next, reset), (2, None));
    let replayed: Vec<u64> = replay.events.iter().map(|e| e.sequence).collect();
    assert_eq!(replayed, vec![2, 3, 4, 5, 6]);
    assert!(!replay.more);

    // A snapshot on B carries A's checkpoint.
    let (sa, sb) = (a.snapshot(3), b.snapshot(4));
    for key in ["streamEpoch", "lastAppliedSequence", "resumeCursor"] {
        assert_eq!(sa["checkpoint"][key], sb["checkpoint"][key], "{key}");
    }
    assert_eq!(sb["state"], serde_json::json!({"n": 6}));

    // A gateway started now finds the retained window: the same cursor
    // resumes there too.
    let mut c = Node::start(&nats, "c");
    match c.resume(cursor) {
        RtDecision::Subscribed { next, replay, .. } => {
            assert_eq!(next, 2);
            assert_eq!(replay.events.len(), 5);
        }
        other => panic!("not subscribed on a new gateway: {other:?}"),
    }
}

#[test]
fn nothing_acknowledged_is_lost_across_a_server_restart_and_a_publication_while_down_is_refused() {
    let mut nats = NatsServer::start();
    let mut a = Node::start(&nats, "a");
    let mut b = Node::start(&nats, "b");
    for i in 1..=3 {
        a.publish_acked(1, i);
    }
    b.until("A's events on B", |b| b.has_seq(3));

    nats.kill();
    a.publish(1, 4);
    a.until("the refusal", |a| {
        a.answers.iter().any(|x| answer_of(x, ConnId::from_u64(1)))
    });
    match a.answers.pop() {
        Some(RtDecision::Refused { why, .. }) => assert_eq!(why, RtRefusal::Unavailable),
        other => panic!("published while the log is down: {other:?}"),
    }
    assert!(!a.has_seq(4), "a refused publication is not fanned out");
    let m = a.plane.metrics();
    assert!(
        m.cluster_unavailable
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );

    nats.restart();
    // The same stream (same epoch): the next publication is 4, on both.
    let r = a.publish_acked(1, 5);
    assert_eq!(seq_of(&r), 4);
    b.until("the event after the restart on B", |b| b.has_seq(4));
    assert_eq!(delivered(&b), vec![1, 2, 3, 4]);
    assert_eq!(b.events[3].1, serde_json::json!({"n": 5}));
    // A new gateway reads all four back.
    let mut c = Node::start(&nats, "c");
    let s = c.snapshot(7);
    assert_eq!(s["checkpoint"]["lastAppliedSequence"], "4");
    assert_eq!(
        s["checkpoint"]["streamEpoch"],
        a.snapshot(8)["checkpoint"]["streamEpoch"]
    );
}
