//! The realtime front end end to end over real sockets (issue 6): SSE,
//! snapshots, publication and `realtime.v1` WebSockets against the engine
//! with the realtime plane on its control thread.
//!
//! Helpers: `server.rs` (the engine on loopback), `client.rs` (HTTP),
//! `ssec.rs` (SSE), `wsc.rs` (WebSocket). Tests, each on both IO backends
//! unless it says otherwise: `t_sse` (SPEC RT-8, RT-6), `t_status` (status
//! mapping, RT-14), `t_snapshot` (RT-6, RT-11), `t_ws` and `t_ws_frames`
//! (RT-9, RT-13), `t_echo` (RFC 6455 echo), `t_client` (the
//! browser client's files), `t_backpressure` (RT-10 and
//! fan-out over both shards), `t_restart` (CLOSE RESTART at shutdown).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[path = "realtime/client.rs"]
mod client;
#[path = "realtime/server.rs"]
mod server;
#[path = "realtime/ssec.rs"]
mod ssec;
#[path = "realtime/wsc.rs"]
mod wsc;

#[path = "realtime/t_backpressure.rs"]
mod t_backpressure;
#[path = "realtime/t_client.rs"]
mod t_client;
#[path = "realtime/t_echo.rs"]
mod t_echo;
#[path = "realtime/t_replay.rs"]
mod t_replay;
#[path = "realtime/t_restart.rs"]
mod t_restart;
#[path = "realtime/t_snapshot.rs"]
mod t_snapshot;
#[path = "realtime/t_sse.rs"]
mod t_sse;
#[path = "realtime/t_status.rs"]
mod t_status;
#[path = "realtime/t_ws.rs"]
mod t_ws;
#[path = "realtime/t_ws_frames.rs"]
mod t_ws_frames;

use dtp_codec::realtime::{Envelope, JsonLimits};
use dtp_gateway::realtime::RtLimits;
use dtp_transports::BackendPreference;

use client::publish;
use server::{ADMIN, READER, start};
use ssec::Sse;

#[test]
fn published_events_reach_an_sse_subscriber_in_order_with_their_cursors() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let srv = start(backend, RtLimits::default());
        let mut sse = Sse::open(
            srv.addr,
            "/v1/streams/ticks/sse",
            &format!("Authorization: Bearer {READER}\r\n"),
        );
        assert_eq!(sse.status, 200);
        assert_eq!(sse.header("content-type"), Some("text/event-stream"));
        assert_eq!(sse.header("cache-control"), Some("no-store, no-transform"));
        for n in 1..=3 {
            let r = publish(srv.addr, ADMIN, "ticks", "tick", &format!("{{\"n\":{n}}}"));
            assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.json()["sequence"], n.to_string());
        }
        let events = sse.wait_for(3).to_vec();
        assert_eq!(events.len(), 3);
        for (i, e) in events.iter().enumerate() {
            let env = Envelope::decode(e.data.as_bytes(), &JsonLimits::default()).unwrap();
            assert_eq!(env.sequence, i as u64 + 1);
            assert_eq!(env.payload["n"], i + 1);
            assert_eq!(env.resume_cursor, e.id);
            assert_eq!(env.scope_binding, "scope-ticks");
        }
    }
}

#[test]
fn a_realtime_v1_session_subscribes_and_receives_events() {
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let srv = start(backend, RtLimits::default());
        let extra =
            format!("Sec-WebSocket-Protocol: realtime.v1\r\nAuthorization: Bearer {READER}\r\n");
        let (resp, ws) = wsc::Ws::connect(srv.addr, "/v1/ws", &extra);
        assert_eq!(resp.status, 101);
        assert_eq!(resp.header("sec-websocket-protocol"), Some("realtime.v1"));
        let mut ws = ws.unwrap();
        let welcome = ws.recv_json();
        assert_eq!(welcome["type"], "WELCOME");
        assert_eq!(welcome["protocol"], "realtime.v1");
        ws.send_text(
            r#"{"type":"SUBSCRIBE","subscriptionId":"s1","streamId":"ticks","cursor":null,"scopeBinding":"scope-ticks"}"#,
        );
        let subscribed = ws.recv_json();
        assert_eq!(subscribed["type"], "SUBSCRIBED", "{subscribed}");
        assert_eq!(subscribed["nextExpectedSequence"], "1");
        assert_eq!(subscribed["acceptedCursor"], serde_json::Value::Null);
        assert_eq!(
            publish(srv.addr, ADMIN, "ticks", "tick", r#"{"n":1}"#).status,
            201
        );
        let event = ws.recv_json();
        assert_eq!(event["type"], "EVENT");
        assert_eq!(event["subscriptionId"], "s1");
        assert_eq!(event["envelope"]["sequence"], "1");
        ws.send_text(r#"{"type":"HEARTBEAT","nonce":"n1"}"#);
        assert_eq!(
            ws.recv_json(),
            serde_json::json!({"type":"HEARTBEAT_ACK","nonce":"n1"})
        );
        ws.send_text(r#"{"type":"UNSUBSCRIBE","subscriptionId":"s1"}"#);
        assert_eq!(
            ws.recv_json(),
            serde_json::json!({"type":"UNSUBSCRIBED","subscriptionId":"s1"})
        );
    }
}
