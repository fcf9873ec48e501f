//! `realtime.v1` at the frame level (SPEC RT-9, RT-13; RFC 6455): binary,
//! unmasked, invalid UTF-8 and oversize frames close with their codes;
//! fragmentation with a ping in between; the close handshake.

use dtp_codec::ws::{Message, Opcode, Role, encode_frame};
use serde_json::json;

use crate::server::{BACKENDS, READER, start_default};
use crate::wsc::Ws;

const SUBSCRIBE: &str = r#"{"type":"SUBSCRIBE","subscriptionId":"f","streamId":"ticks","cursor":null,"scopeBinding":"scope-ticks"}"#;

#[test]
fn frames_realtime_v1_refuses_close_the_session_with_their_codes() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let session = || Ws::realtime(srv.addr, READER).0;

        // Binary frames are not part of the baseline: 1003.
        let mut ws = session();
        ws.send_frame(true, Opcode::Binary, b"{}");
        ws.expect_close_frame(1003);

        // A client frame must be masked: 1002.
        let mut ws = session();
        let unmasked =
            encode_frame(Role::Server, true, Opcode::Text, SUBSCRIBE.as_bytes(), None).unwrap();
        ws.send_raw(&unmasked);
        ws.expect_close_frame(1002);

        // Text must be UTF-8: 1007.
        let mut ws = session();
        ws.send_frame(true, Opcode::Text, b"{\"type\":\"\xc3\x28\"}");
        ws.expect_close_frame(1007);

        // Above 64 KiB: 1009, from the frame's header alone.
        let mut ws = session();
        ws.send_header(Opcode::Text, 64 * 1024 + 1);
        ws.expect_close_frame(1009);

        // The same ceiling across fragments.
        let mut ws = session();
        ws.send_frame(false, Opcode::Text, &[b' '; 40 * 1024]);
        ws.send_frame(true, Opcode::Continuation, &[b' '; 30 * 1024]);
        ws.expect_close_frame(1009);

        // A continuation without a message in progress: 1002.
        let mut ws = session();
        ws.send_frame(true, Opcode::Continuation, b"x");
        ws.expect_close_frame(1002);
    }
}

#[test]
fn frames_a_fragmented_subscribe_works_and_a_ping_between_is_answered() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        let (a, rest) = SUBSCRIBE.as_bytes().split_at(20);
        let (b, c) = rest.split_at(40);
        ws.send_frame(false, Opcode::Text, a);
        ws.send_frame(false, Opcode::Continuation, b);
        ws.send_frame(true, Opcode::Ping, b"ping-42");
        ws.send_frame(true, Opcode::Continuation, c);
        assert_eq!(ws.recv(), Some(Message::Pong(b"ping-42".to_vec())));
        let v = ws.recv_json();
        assert_eq!(
            (
                v["type"].as_str(),
                v["subscriptionId"].as_str(),
                v["nextExpectedSequence"].as_str()
            ),
            (Some("SUBSCRIBED"), Some("f"), Some("1")),
            "{v}"
        );
        // An unsolicited pong is ignored.
        ws.send_frame(true, Opcode::Pong, b"x");
        ws.heartbeat("after-pong");
    }
}

#[test]
fn frames_the_close_handshake_echoes_the_code_and_closes_tcp() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.subscribe_ticks("s", 1);
        ws.send_frame(true, Opcode::Close, &[0x03, 0xe8, b'b', b'y', b'e']);
        ws.expect_close_frame(1000);
        // The realtime.v1 CLOSE message: a normal close too.
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.send_json(&json!({"type":"CLOSE","category":"NORMAL"}));
        ws.expect_close_frame(1000);
        // An empty close frame is answered with an empty one.
        let (mut ws, _) = Ws::realtime(srv.addr, READER);
        ws.send_frame(true, Opcode::Close, b"");
        assert_eq!(ws.recv_close(), None);
        ws.expect_eof();
        crate::client::eventually("the sessions' subscriptions forgotten", || {
            srv.metrics
                .subscriptions
                .load(std::sync::atomic::Ordering::Relaxed)
                == 0
        });
    }
}

#[test]
fn frames_every_close_code_the_server_sends_is_one_the_codec_client_accepts() {
    // Pure codec logic, no IO. The server closes slow consumers with
    // CLOSE OVERLOADED and close code 1013 (IANA "Try Again Later"), and
    // RESTART with 1012; a Rust client on dtp_codec::ws::Decoder must be
    // able to read those close frames (browsers do).
    use dtp_codec::realtime::CloseCategory;
    use dtp_codec::ws::{Decoder, FrameConfig};
    for category in CloseCategory::ALL {
        let Some(code) = category.close_code() else {
            continue;
        };
        let wire = encode_frame(
            Role::Server,
            true,
            Opcode::Close,
            &code.0.to_be_bytes(),
            None,
        )
        .unwrap();
        let mut buf = wire.clone();
        let got = Decoder::new(FrameConfig::client(1 << 20)).decode(&mut buf);
        assert!(
            matches!(&got, Ok((n, Some(Message::Close(Some(cf))))) if *n == wire.len() && cf.code == code),
            "{category}: close code {} refused by the codec's client decoder: {got:?}",
            code.0
        );
    }
}
