//! `realtime.v1` over real sockets (SPEC RT-9, RT-10).

use std::io::Write;

use dtp_codec::realtime::{
    ClientMessage, CloseCategory, ConnectionLimits, FailureKind, HeartbeatPolicy, ServerMessage,
};
use dtp_codec::ws::{CloseCode, Message, Opcode};

use super::tests::{FLOOD, PAD, small_window};
use super::tests_client::*;

fn subscribe(id: &str, stream: &str, cursor: Option<&str>, scope: &str) -> ClientMessage {
    ClientMessage::Subscribe {
        subscription_id: id.into(),
        stream_id: stream.into(),
        cursor: cursor.map(str::to_owned),
        scope_binding: scope.into(),
    }
}

fn close_code(m: Message) -> u16 {
    match m {
        Message::Close(Some(f)) => f.code.0,
        other => panic!("expected a close frame, got {other:?}"),
    }
}

/// The envelope inside an EVENT message for `sub`, as raw text.
fn event_envelope<'a>(text: &'a str, sub: &str) -> &'a str {
    let prefix = format!(r#"{{"type":"EVENT","subscriptionId":"{sub}","envelope":"#);
    text.strip_prefix(&prefix)
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or_else(|| panic!("not an EVENT for {sub}: {text}"))
}

#[test]
fn welcome_subscribe_event_heartbeat_unsubscribe() {
    let peer = Peer::start();
    let mut ws = WsClient::open(peer.addr);
    let ServerMessage::Welcome {
        connection_id,
        heartbeat,
        limits,
    } = ws.recv_msg()
    else {
        panic!("WELCOME first");
    };
    assert!(connection_id.starts_with('c'), "{connection_id}");
    let want = HeartbeatPolicy {
        min_interval_ms: 10_000,
        max_interval_ms: 30_000,
        ack_timeout_ms: 30_000,
    };
    assert_eq!((heartbeat, limits), (want, ConnectionLimits::RT13));

    let mut publisher = connect(peer.addr);
    let first = publish_on(&mut publisher, "demo", 1);
    let epoch = first["streamEpoch"].as_str().unwrap().to_owned();

    ws.send(&subscribe("s1", "demo", None, "demo-scope"));
    let subscribed = ServerMessage::Subscribed {
        subscription_id: "s1".into(),
        stream_epoch: epoch.clone(),
        accepted_cursor: None,
        next_expected_sequence: 2,
    };
    assert_eq!(ws.recv_msg(), subscribed);

    let mut sse = SseClient::open(peer.addr, "demo", None);
    publish_on(&mut publisher, "demo", 2);
    let text = ws.recv_text();
    let sse_event = sse.next().unwrap();
    // Encoded once: the WebSocket envelope is byte-identical to the SSE data.
    assert_eq!(event_envelope(&text, "s1"), sse_event.data);
    let ServerMessage::Event {
        subscription_id,
        envelope,
    } = ServerMessage::decode(text.as_bytes(), &Default::default()).unwrap()
    else {
        panic!("EVENT expected");
    };
    assert_eq!((subscription_id.as_str(), envelope.sequence), ("s1", 2));
    assert_eq!(envelope.resume_cursor, sse_event.id);

    ws.send(&ClientMessage::Heartbeat { nonce: "n1".into() });
    assert_eq!(
        ws.recv_msg(),
        ServerMessage::HeartbeatAck { nonce: "n1".into() }
    );
    ws.send(&ClientMessage::Unsubscribe {
        subscription_id: "s1".into(),
    });
    assert_eq!(
        ws.recv_msg(),
        ServerMessage::Unsubscribed {
            subscription_id: "s1".into()
        }
    );
    // Unsubscribed: the next publication is not delivered; the ack is next.
    publish_on(&mut publisher, "demo", 3);
    assert_eq!(envelope_seq(&sse.next().unwrap().data), 3);
    ws.send(&ClientMessage::Heartbeat { nonce: "n2".into() });
    assert_eq!(
        ws.recv_msg(),
        ServerMessage::HeartbeatAck { nonce: "n2".into() }
    );
    // An unknown id is answered too (idempotent).
    ws.send(&ClientMessage::Unsubscribe {
        subscription_id: "zz".into(),
    });
    assert_eq!(
        ws.recv_msg(),
        ServerMessage::Unsubscribed {
            subscription_id: "zz".into()
        }
    );
    ws.send(&ClientMessage::Close {
        category: CloseCategory::Normal,
    });
    assert_eq!(close_code(ws.recv()), 1000);
}

fn envelope_seq(data: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(data).unwrap();
    v["sequence"].as_str().unwrap().parse().unwrap()
}

#[test]
fn a_cursor_resumes_with_the_replay() {
    let peer = Peer::start();
    let mut publisher = connect(peer.addr);
    let c1 = publish_on(&mut publisher, "demo", 1)["resumeCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    publish_on(&mut publisher, "demo", 2);
    let mut ws = WsClient::open(peer.addr);
    ws.recv_msg();
    ws.send(&subscribe("r", "demo", Some(&c1), "demo-scope"));
    let ServerMessage::Subscribed {
        accepted_cursor,
        next_expected_sequence,
        ..
    } = ws.recv_msg()
    else {
        panic!("SUBSCRIBED expected");
    };
    assert_eq!(
        (accepted_cursor.as_deref(), next_expected_sequence),
        (Some(c1.as_str()), 2)
    );
    assert_eq!(envelope_seq(event_envelope(&ws.recv_text(), "r")), 2);
    publish_on(&mut publisher, "demo", 3);
    assert_eq!(envelope_seq(event_envelope(&ws.recv_text(), "r")), 3);
}

#[test]
fn subscriptions_are_refused_with_the_reasons_of_ours() {
    let peer = Peer::start();
    let mut ws = WsClient::open(peer.addr);
    ws.recv_msg();
    let reset = |id: &str, reason| ServerMessage::ResetRequired {
        subscription_id: id.into(),
        reason,
    };
    ws.send(&subscribe("a", "demo", None, "wrong-scope"));
    assert_eq!(
        ws.recv_msg(),
        reset("a", FailureKind::ScopeProtocolViolation)
    );
    ws.send(&subscribe("b", "nowhere", None, "demo-scope"));
    assert_eq!(ws.recv_msg(), reset("b", FailureKind::Unsupported));
    ws.send(&subscribe("c", "demo", Some("forged"), "demo-scope"));
    assert_eq!(ws.recv_msg(), reset("c", FailureKind::CursorExpired));
    for n in 0..32 {
        ws.send(&subscribe(&format!("m{n}"), "other", None, "other-scope"));
        assert!(matches!(ws.recv_msg(), ServerMessage::Subscribed { .. }));
    }
    ws.send(&subscribe("x", "other", None, "other-scope"));
    assert_eq!(ws.recv_msg(), reset("x", FailureKind::QueueOverflow));
    // The same id twice: the session ends with PROTOCOL_MISMATCH.
    ws.send(&subscribe("m0", "other", None, "other-scope"));
    assert_eq!(
        ws.recv_msg(),
        ServerMessage::Close {
            category: CloseCategory::ProtocolMismatch,
            retry_after_ms: None,
        }
    );
    assert_eq!(close_code(ws.recv()), 1002);
}

#[test]
fn malformed_and_binary_messages_close_the_session() {
    let peer = Peer::start();
    let mut ws = WsClient::open(peer.addr);
    ws.recv_msg();
    ws.send_frame(Opcode::Text, br#"{"type":"SUBSCRIBE"}"#);
    assert_eq!(
        ws.recv_msg(),
        ServerMessage::Close {
            category: CloseCategory::ProtocolMismatch,
            retry_after_ms: None,
        }
    );
    assert_eq!(close_code(ws.recv()), 1002);

    let mut ws = WsClient::open(peer.addr);
    ws.recv_msg();
    ws.send_frame(Opcode::Binary, b"\x01\x02");
    assert_eq!(close_code(ws.recv()), CloseCode::UNSUPPORTED_DATA.0);
}

#[test]
fn upgrades_are_refused_without_token_or_subprotocol() {
    let peer = Peer::start();
    let no_proto = upgrade_request(&format!("Authorization: Bearer {TOKEN}\r\n"));
    let mut s = connect(peer.addr);
    s.write_all(no_proto.as_bytes()).unwrap();
    let h = read_head(&mut s, &mut Vec::new());
    assert_eq!(h.status, 400);
    let no_token = upgrade_request("Sec-WebSocket-Protocol: realtime.v1\r\n");
    let mut s = connect(peer.addr);
    s.write_all(no_token.as_bytes()).unwrap();
    assert_eq!(read_head(&mut s, &mut Vec::new()).status, 401);
    let (h, _) = request(peer.addr, "GET /v1/ws HTTP/1.1", "");
    assert_eq!(h.status, 426);
}

/// SPEC RT-10: a WebSocket subscriber that falls behind gets its events in
/// order up to there, then CLOSE{OVERLOADED} and close code 1013.
#[test]
fn a_lagging_ws_subscriber_is_closed_overloaded() {
    let peer = Peer::start();
    let mut ws = WsClient::open_on(small_window(peer.addr));
    ws.recv_msg();
    ws.send(&subscribe("s", "demo", None, "demo-scope"));
    assert!(matches!(ws.recv_msg(), ServerMessage::Subscribed { .. }));
    let mut publisher = connect(peer.addr);
    for n in 1..=FLOOD {
        publish_padded(&mut publisher, "demo", n, PAD);
    }
    let mut expected = 1;
    loop {
        let text = ws.recv_text();
        if !text.starts_with(r#"{"type":"EVENT""#) {
            assert_eq!(text, r#"{"type":"CLOSE","category":"OVERLOADED"}"#);
            break;
        }
        assert_eq!(
            envelope_seq(event_envelope(&text, "s")),
            expected,
            "no event skipped"
        );
        expected += 1;
        assert!(expected <= FLOOD, "the subscriber never lagged");
    }
    assert_eq!(close_code(ws.recv()), 1013);
}
