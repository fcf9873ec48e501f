//! `realtime.v1` sessions (SPEC RT-9, RT-6, RT-13): the upgrade's checks,
//! WELCOME, SUBSCRIBE and its answers, resume, resets, the subscription
//! ceiling, UNSUBSCRIBE, and protocol violations.

use serde_json::{Value, json};

use crate::client::{bearer, cut, login_cookie, publish, publish_ticks, request};
use crate::server::{ADMIN, BACKENDS, ORIGIN, READER, start_default};
use crate::wsc::{Ws, keys};

const PROTO: &str = "Sec-WebSocket-Protocol: realtime.v1\r\n";

#[test]
fn the_upgrade_checks_subprotocol_origin_and_credentials() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let cookie = login_cookie(srv.addr, READER);
        let refusals = [
            (bearer(READER), 400, "PROTOCOL_MISMATCH"),
            (
                format!("{PROTO}Origin: http://evil.example\r\n{cookie}"),
                403,
                "FORBIDDEN",
            ),
            (
                format!("{PROTO}Origin: {ORIGIN}:8080\r\n{cookie}"),
                403,
                "FORBIDDEN",
            ),
            // The origin of the Host the client named is not allowed by
            // that alone: a rebound DNS name would pass.
            (
                format!("{PROTO}Origin: http://test\r\n{cookie}"),
                403,
                "FORBIDDEN",
            ),
            (PROTO.to_owned(), 401, "AUTH_REQUIRED"),
            (format!("{PROTO}Origin: {ORIGIN}\r\n"), 401, "AUTH_REQUIRED"),
            (
                format!("Sec-WebSocket-Protocol: chat\r\n{}", bearer(READER)),
                400,
                "PROTOCOL_MISMATCH",
            ),
        ];
        for (extra, status, kind) in refusals {
            // Ws::connect reads a refusal to the end: the connection closes.
            let (r, ws) = Ws::connect(srv.addr, "/v1/ws", &extra);
            assert!(ws.is_none());
            assert_eq!(r.status, status, "{extra:?}");
            assert_eq!(r.refusal(), kind, "{extra:?}");
            if status == 401 {
                assert_eq!(r.header("www-authenticate"), Some("Bearer"));
            }
        }
        for extra in [
            format!("{PROTO}Origin: {ORIGIN}\r\n{cookie}"),
            format!(
                "Sec-WebSocket-Protocol: chat, realtime.v1\r\n{}",
                bearer(READER)
            ),
        ] {
            let (r, ws) = Ws::connect(srv.addr, "/v1/ws", &extra);
            assert_eq!(r.status, 101, "{extra:?}");
            assert_eq!(r.header("sec-websocket-protocol"), Some("realtime.v1"));
            assert_eq!(
                r.header("sec-websocket-accept"),
                Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            );
            assert_eq!(ws.unwrap().recv_json()["type"], "WELCOME");
        }
        // Not an upgrade at all.
        let r = request(
            srv.addr,
            format!("GET /v1/ws HTTP/1.1\r\n{}", bearer(READER)).trim_end(),
            b"",
        );
        assert_eq!(r.status, 426);
    }
}

#[test]
fn welcome_has_exactly_its_keys_and_the_rt13_limits() {
    // Pure protocol content: one backend suffices.
    let srv = start_default(BACKENDS[1]);
    let (_, w) = Ws::realtime(srv.addr, READER);
    assert_eq!(
        keys(&w),
        ["connectionId", "heartbeat", "limits", "protocol", "type"]
    );
    assert_eq!(w["protocol"], "realtime.v1");
    let id = w["connectionId"].as_str().unwrap();
    assert!(dtp_codec::realtime::is_valid_id(id), "{id}");
    assert_eq!(
        w["heartbeat"],
        json!({"minIntervalMs":10000,"maxIntervalMs":30000,"ackTimeoutMs":30000})
    );
    assert_eq!(
        w["limits"],
        json!({"maxMessageBytes":65536,"maxSubscriptions":32,"maxQueuedMessages":128,"maxQueuedBytes":262144})
    );
    // Two sessions never share a connection id.
    let (_, w2) = Ws::realtime(srv.addr, READER);
    assert_ne!(w2["connectionId"], w["connectionId"]);
}

#[test]
fn subscribe_and_same_epoch_cursor_resume() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let answers: Vec<Value> = (1..=5)
            .map(|n| publish(srv.addr, ADMIN, "ticks", "tick", &format!("{{\"n\":{n}}}")).json())
            .collect();
        let epoch = answers[0]["streamEpoch"].clone();
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        let fresh = ws.subscribe_ticks("fresh", 6);
        assert_eq!(
            keys(&fresh),
            [
                "acceptedCursor",
                "nextExpectedSequence",
                "streamEpoch",
                "subscriptionId",
                "type"
            ]
        );
        assert_eq!(fresh["streamEpoch"], epoch);
        // Resume after event 2: SUBSCRIBED echoes the cursor and names 3,
        // then 3..5 are replayed, then live events follow.
        let k2 = answers[1]["resumeCursor"].as_str().unwrap();
        ws.subscribe("resumed", "ticks", Some(k2), "scope-ticks");
        assert_eq!(
            ws.recv_json(),
            json!({"type":"SUBSCRIBED","subscriptionId":"resumed","streamEpoch":epoch,
                   "acceptedCursor":k2,"nextExpectedSequence":"3"})
        );
        for seq in 3..=5 {
            let env = ws.expect_event("resumed", seq);
            assert_eq!(
                env["resumeCursor"],
                answers[seq as usize - 1]["resumeCursor"]
            );
            assert_eq!(env["payload"], json!({"n": seq}));
        }
        publish_ticks(srv.addr, 6..=6);
        // Both subscriptions get 6, in subscription order.
        let mut got: Vec<String> = (0..2)
            .map(|_| {
                let v = ws.recv_json();
                assert_eq!(
                    (v["type"].as_str(), v["envelope"]["sequence"].as_str()),
                    (Some("EVENT"), Some("6")),
                    "{v}"
                );
                v["subscriptionId"].as_str().unwrap().to_owned()
            })
            .collect();
        got.sort();
        assert_eq!(got, ["fresh", "resumed"]);
        ws.heartbeat("n1");
    }
}

#[test]
fn refused_subscriptions_get_reset_required_with_their_reason() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let cursors = publish_ticks(srv.addr, 1..=3);
        assert_eq!(cut(srv.addr, ADMIN, "ticks").status, 200);
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        let mut tampered = cursors[2].clone();
        tampered.pop();
        tampered.push(if cursors[2].ends_with('0') { '1' } else { '0' });
        let cases = [
            (
                "expired",
                "ticks",
                Some(cursors[0].as_str()),
                "scope-ticks",
                "CURSOR_EXPIRED",
            ),
            (
                "tampered",
                "ticks",
                Some(tampered.as_str()),
                "scope-ticks",
                "CURSOR_EXPIRED",
            ),
            (
                "scope",
                "ticks",
                None,
                "scope-state",
                "SCOPE_PROTOCOL_VIOLATION",
            ),
            ("forbidden", "state", None, "scope-state", "FORBIDDEN"),
        ];
        for (id, stream, cursor, scope, reason) in cases {
            ws.subscribe(id, stream, cursor, scope);
            assert_eq!(
                ws.recv_json(),
                json!({"type":"RESET_REQUIRED","subscriptionId":id,"reason":reason}),
                "{id}"
            );
        }
        // The session goes on; the reset id may subscribe afresh.
        ws.heartbeat("still-here");
        ws.subscribe_ticks("expired", 4);
        publish_ticks(srv.addr, 4..=4);
        ws.expect_event("expired", 4);
    }
}

#[test]
fn a_duplicate_subscription_id_closes_with_protocol_mismatch() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.subscribe_ticks("s", 1);
        ws.subscribe("s", "ticks", None, "scope-ticks");
        ws.expect_closed_with("PROTOCOL_MISMATCH", 1002);
    }
}

#[test]
fn the_33rd_subscription_is_refused_and_the_32_stay() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        for i in 0..32 {
            ws.subscribe_ticks(&format!("s{i}"), 1);
        }
        ws.subscribe("s32", "ticks", None, "scope-ticks");
        let v = ws.recv_json();
        assert_eq!(
            (v["type"].as_str(), v["subscriptionId"].as_str()),
            (Some("RESET_REQUIRED"), Some("s32")),
            "{v}"
        );
        assert_eq!(v["reason"], "QUEUE_OVERFLOW");
        publish_ticks(srv.addr, 1..=1);
        let mut ids: Vec<String> = (0..32)
            .map(|_| {
                let v = ws.recv_json();
                assert_eq!(v["type"], "EVENT", "{v}");
                v["subscriptionId"].as_str().unwrap().to_owned()
            })
            .collect();
        ids.sort();
        let mut want: Vec<String> = (0..32).map(|i| format!("s{i}")).collect();
        want.sort();
        assert_eq!(ids, want);
        ws.heartbeat("h");
    }
}

#[test]
fn unsubscribe_ends_the_events_of_that_subscription() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.subscribe_ticks("gone", 1);
        ws.subscribe_ticks("kept", 1);
        ws.send_json(&json!({"type":"UNSUBSCRIBE","subscriptionId":"gone"}));
        assert_eq!(
            ws.recv_json(),
            json!({"type":"UNSUBSCRIBED","subscriptionId":"gone"})
        );
        publish_ticks(srv.addr, 1..=2);
        // "kept"'s events prove the fan-out reached this shard; nothing for
        // "gone" came before, between or (heartbeat) after them.
        ws.expect_event("kept", 1);
        ws.expect_event("kept", 2);
        ws.heartbeat("after");
        // Idempotent: an unknown id is answered too (its tombstone ends).
        ws.send_json(&json!({"type":"UNSUBSCRIBE","subscriptionId":"never"}));
        assert_eq!(
            ws.recv_json(),
            json!({"type":"UNSUBSCRIBED","subscriptionId":"never"})
        );
    }
}

#[test]
fn two_subscriptions_on_two_streams_get_their_own_events() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut ws, _) = Ws::realtime(srv.addr, ADMIN);
        ws.subscribe_ticks("t", 1);
        ws.subscribe("s", "state", None, "scope-state");
        let v = ws.recv_json();
        assert_eq!(
            (v["type"].as_str(), v["nextExpectedSequence"].as_str()),
            (Some("SUBSCRIBED"), Some("1")),
            "{v}"
        );
        publish_ticks(srv.addr, 1..=1);
        assert_eq!(ws.expect_event("t", 1)["streamId"], "ticks");
        assert_eq!(
            publish(srv.addr, ADMIN, "state", "changed", "{\"x\":1}").status,
            201
        );
        let env = ws.expect_event("s", 1);
        assert_eq!(
            (env["streamId"].as_str(), env["resumeCursor"].clone()),
            (Some("state"), Value::Null)
        );
        publish_ticks(srv.addr, 2..=2);
        ws.expect_event("t", 2);
        ws.heartbeat("h");
    }
}

#[test]
fn malformed_and_foreign_messages_close_with_protocol_mismatch() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        for bad in [
            "{not json",
            r#"{"type":"PING"}"#,
            r#"{"type":"HEARTBEAT","nonce":"n","extra":1}"#,
            r#"{"type":"HEARTBEAT"}"#,
            r#"{"type":"SUBSCRIBE","subscriptionId":"s","streamId":"ticks","scopeBinding":"scope-ticks"}"#,
            r#"{"type":"WELCOME","protocol":"realtime.v1","connectionId":"c","heartbeat":{"minIntervalMs":1,"maxIntervalMs":2,"ackTimeoutMs":2},"limits":{"maxMessageBytes":1,"maxSubscriptions":1,"maxQueuedMessages":1,"maxQueuedBytes":1}}"#,
            r#"{"type":"HEARTBEAT_ACK","nonce":"n"}"#,
            r#"{"type":"SUBSCRIBED","subscriptionId":"s","streamEpoch":"e","acceptedCursor":null,"nextExpectedSequence":"1"}"#,
            r#"[]"#,
        ] {
            let (mut ws, _) = Ws::realtime(srv.addr, READER);
            ws.send_text(bad);
            ws.expect_closed_with("PROTOCOL_MISMATCH", 1002);
        }
    }
}

/// A client may send its first messages in the same write as the upgrade
/// (they arrive with the request): they are served, not left unread.
#[test]
fn frames_right_behind_the_upgrade_are_served() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let sub = |id: &str| {
            Ws::text_frame(
                &json!({"type":"SUBSCRIBE","subscriptionId":id,"streamId":"ticks","cursor":null,"scopeBinding":"scope-ticks"})
                    .to_string(),
            )
        };
        let early = [sub("a"), sub("b")].concat();
        let extra = format!("{PROTO}{}", bearer(READER));
        let (resp, ws) = Ws::connect_with(srv.addr, "/v1/ws", &extra, &early);
        assert_eq!(resp.status, 101, "{}", resp.text());
        let mut ws = ws.unwrap();
        assert_eq!(ws.recv_json()["type"], "WELCOME");
        for id in ["a", "b"] {
            let v = ws.recv_json();
            assert_eq!(
                (v["type"].as_str(), v["subscriptionId"].as_str()),
                (Some("SUBSCRIBED"), Some(id)),
                "{backend:?}"
            );
        }
    }
}
