//! The peer over real sockets: publication, SSE delivery, resume, refusals
//! and the slow-consumer reset (SPEC RT-3, RT-6, RT-8, RT-10).

use dtp_codec::realtime::{
    Envelope, FailureKind, JsonLimits, RecoveryMode, SseControl, is_valid_rfc3339,
};

use super::tests_client::*;
use super::{BROADCAST_CAPACITY, PeerConfig};

/// More events than the channel, the peer's write buffers and the kernel's
/// socket buffers (up to 4 MiB on loopback) can hold together: 4096
/// events of [`PAD`] bytes, 16 MiB.
pub(super) const FLOOD: u64 = 4 * BROADCAST_CAPACITY as u64;
/// Padding in each flood event's payload.
pub(super) const PAD: usize = 4096;

fn control(e: &Sse) -> SseControl {
    assert_eq!(e.event, "control", "{e:?}");
    SseControl::decode(e.data.as_bytes(), &JsonLimits::default()).unwrap()
}

fn envelope(e: &Sse) -> Envelope {
    assert_eq!(e.event, "message", "{e:?}");
    Envelope::decode(e.data.as_bytes(), &JsonLimits::default()).unwrap()
}

/// A client socket with a tiny receive buffer, so the peer's writes block
/// soon when it does not read.
pub(super) fn small_window(addr: std::net::SocketAddr) -> std::net::TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let s: std::net::TcpStream = socket.into();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

#[test]
fn defaults_match_dtp_serve() {
    let d = PeerConfig::default();
    assert_eq!(d.listen, "127.0.0.1:7780".parse().unwrap());
    assert_eq!(d.token, "dtp-demo-token");
    assert_eq!(d.streams, [("demo".to_owned(), "demo-scope".to_owned())]);
    assert_eq!(d.event_types, ["demo.tick", "demo.note"]);
}

#[test]
fn invalid_configs_are_refused() {
    let run = |c: PeerConfig| super::run(c, |_| panic!("bound an invalid config")).unwrap_err();
    let base = PeerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        ..PeerConfig::default()
    };
    let bad = [
        PeerConfig {
            token: String::new(),
            ..base.clone()
        },
        PeerConfig {
            streams: vec![("bad id".into(), "s".into())],
            ..base.clone()
        },
        PeerConfig {
            streams: vec![("a".into(), "s".into()), ("a".into(), "t".into())],
            ..base.clone()
        },
        PeerConfig {
            event_types: vec![],
            ..base
        },
    ];
    for c in bad {
        assert_eq!(run(c).kind(), std::io::ErrorKind::InvalidInput);
    }
}

#[test]
fn health_answers_200() {
    let peer = Peer::start();
    let (h, body) = request(peer.addr, "GET /v1/health HTTP/1.1", "");
    assert_eq!(h.status, 200);
    assert_eq!(body, r#"{"status":"ok"}"#);
    assert_eq!(h.header("cache-control"), Some("no-store"));
}

#[test]
fn a_publication_reaches_an_sse_subscriber() {
    let peer = Peer::start();
    let mut sse = SseClient::open(peer.addr, "demo", None);
    assert_eq!(sse.head.header("content-type"), Some("text/event-stream"));
    assert_eq!(
        sse.head.header("cache-control"),
        Some("no-store, no-transform")
    );
    let mut publisher = connect(peer.addr);
    let body = r#"{"eventType":"demo.note","payload":{"text": "hi", "n": [1, 2]}}"#;
    let (h, answer) = exchange(&mut publisher, &publish_head("demo"), body);
    assert_eq!(h.status, 201, "{answer}");
    assert_eq!(h.header("content-type"), Some("application/json"));
    let parsed: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let epoch = parsed["streamEpoch"].as_str().unwrap();
    let cursor = parsed["resumeCursor"].as_str().unwrap();
    assert_eq!(
        answer,
        format!(
            r#"{{"streamId":"demo","streamEpoch":"{epoch}","sequence":"1","resumeCursor":"{cursor}"}}"#
        )
    );

    let e = sse.next().unwrap();
    assert_eq!(sse.parser.retry(), Some(2000));
    assert_eq!(e.id.as_deref(), Some(cursor));
    let env = envelope(&e);
    assert_eq!(env.stream_id, "demo");
    assert_eq!(env.stream_epoch, epoch);
    assert_eq!(env.event_type, "demo.note");
    assert_eq!(env.event_id, format!("{epoch}-1"));
    assert_eq!(env.sequence, 1);
    assert!(is_valid_rfc3339(&env.occurred_at), "{}", env.occurred_at);
    assert_eq!(env.occurred_at.len(), "2026-01-01T00:00:00.000Z".len());
    assert_eq!(env.scope_binding, "demo-scope");
    assert_eq!(env.recovery, RecoveryMode::Cursor);
    assert_eq!(env.resume_cursor.as_deref(), Some(cursor));
    assert_eq!(
        serde_json::Value::Object(env.payload.clone()),
        serde_json::json!({"text": "hi", "n": [1, 2]})
    );
    // Encoded once, compactly: the bytes are the codec's own encoding.
    assert_eq!(e.data.as_bytes(), &env.to_json_bytes().unwrap()[..]);

    // The next publication is the next sequence, on the same connection.
    assert_eq!(publish_on(&mut publisher, "demo", 2)["sequence"], "2");
    assert_eq!(envelope(&sse.next().unwrap()).sequence, 2);
}

#[test]
fn streams_are_separate() {
    let peer = Peer::start();
    let mut demo = SseClient::open(peer.addr, "demo", None);
    let mut publisher = connect(peer.addr);
    assert_eq!(publish_on(&mut publisher, "other", 1)["sequence"], "1");
    assert_eq!(publish_on(&mut publisher, "demo", 1)["sequence"], "1");
    let env = envelope(&demo.next().unwrap());
    assert_eq!((env.stream_id.as_str(), env.sequence), ("demo", 1));
}

#[test]
fn last_event_id_resumes_from_the_ledger() {
    let peer = Peer::start();
    let mut publisher = connect(peer.addr);
    let cursors: Vec<String> = (1..=3)
        .map(|n| {
            publish_on(&mut publisher, "demo", n)["resumeCursor"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut sse = SseClient::open(peer.addr, "demo", Some(&cursors[0]));
    publish_on(&mut publisher, "demo", 4);
    let got: Vec<(u64, Option<String>)> = (0..3)
        .map(|_| {
            let e = sse.next().unwrap();
            (envelope(&e).sequence, e.id)
        })
        .collect();
    assert_eq!(got[0], (2, Some(cursors[1].clone())));
    assert_eq!(got[1], (3, Some(cursors[2].clone())));
    assert_eq!(got[2].0, 4);

    // A cursor the ledger did not issue: a reset, then live from "now".
    let mut sse = SseClient::open(peer.addr, "demo", Some("not-a-cursor"));
    let reset = control(&sse.next().unwrap());
    assert_eq!(
        reset,
        SseControl::ResetRequired {
            reason: FailureKind::CursorExpired
        }
    );
    publish_on(&mut publisher, "demo", 5);
    assert_eq!(envelope(&sse.next().unwrap()).sequence, 5);
}

#[test]
fn refusals_are_exact() {
    let peer = Peer::start();
    let a = peer.addr;
    let body = r#"{"eventType":"demo.tick","payload":{}}"#;
    let no_token = "POST /v1/streams/demo/events HTTP/1.1\r\nContent-Type: application/json";
    let (h, b) = request(a, no_token, body);
    assert_eq!(
        (h.status, b.as_str()),
        (401, r#"{"error":"AUTH_REQUIRED"}"#)
    );
    assert_eq!(h.header("www-authenticate"), Some("Bearer"));
    let wrong = "POST /v1/streams/demo/events HTTP/1.1\r\nAuthorization: Bearer nope\r\nContent-Type: application/json";
    assert_eq!(request(a, wrong, body).0.status, 401);
    let (h, b) = request(a, &publish_head("nowhere"), body);
    assert_eq!((h.status, b.as_str()), (404, r#"{"error":"UNSUPPORTED"}"#));
    let text = format!(
        "POST /v1/streams/demo/events HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: text/plain"
    );
    assert_eq!(request(a, &text, body).0.status, 415);
    let (h, b) = request(
        a,
        &publish_head("demo"),
        r#"{"eventType":"demo.tick","payload":{},"x":1}"#,
    );
    assert_eq!(
        (h.status, b.as_str()),
        (400, r#"{"error":"MALFORMED_EVENT"}"#)
    );
    let (h, b) = request(
        a,
        &publish_head("demo"),
        r#"{"eventType":"demo.nope","payload":{}}"#,
    );
    assert_eq!(
        (h.status, b.as_str()),
        (400, r#"{"error":"MAPPING_CONTRACT_VIOLATION"}"#)
    );
    let (h, b) = request(a, "GET /v1/streams/demo/sse HTTP/1.1", "");
    assert_eq!(
        (h.status, b.as_str()),
        (401, r#"{"error":"AUTH_REQUIRED"}"#)
    );
    let sse = format!("GET /v1/streams/nowhere/sse HTTP/1.1\r\nAuthorization: Bearer {TOKEN}");
    assert_eq!(request(a, &sse, "").0.status, 404);
    // Nothing refused was published: the next event is sequence 1.
    assert_eq!(publish_on(&mut connect(a), "demo", 1)["sequence"], "1");
}

/// SPEC RT-10: a subscriber that falls more than the channel's capacity
/// behind gets every event up to where it fell behind, in order, then the
/// QUEUE_OVERFLOW reset, then the end of its stream — never a skip.
#[test]
fn a_lagging_sse_subscriber_is_reset_not_skipped() {
    let peer = Peer::start();
    let mut sse = SseClient::open_on(small_window(peer.addr), "demo", None);
    let mut publisher = connect(peer.addr);
    for n in 1..=FLOOD {
        publish_padded(&mut publisher, "demo", n, PAD);
    }
    let mut expected = 1;
    let last = loop {
        let e = sse.next().expect("the stream ended without a reset");
        if e.event != "message" {
            break e;
        }
        assert_eq!(envelope(&e).sequence, expected, "no event skipped");
        expected += 1;
        assert!(expected <= FLOOD, "the subscriber never lagged");
    };
    assert_eq!(
        control(&last),
        SseControl::ResetRequired {
            reason: FailureKind::QueueOverflow
        }
    );
    assert_eq!(
        last.data,
        r#"{"type":"RESET_REQUIRED","reason":"QUEUE_OVERFLOW"}"#
    );
    assert_eq!(sse.next(), None, "the stream ends after the reset");
    assert!(sse.ended);
}
