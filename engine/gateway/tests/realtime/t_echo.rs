//! The plain echo WebSocket endpoint (RFC 6455 conformance; on in the test
//! server with a 1 MiB message ceiling).

use dtp_codec::ws::{Message, Opcode};

use crate::server::{BACKENDS, start_default};
use crate::wsc::Ws;

#[test]
fn echo_returns_text_binary_fragmented_and_large_messages() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut ws = Ws::echo(srv.addr);
        ws.send_text("héllo");
        assert_eq!(ws.recv(), Some(Message::Text("héllo".into())));
        ws.send_frame(true, Opcode::Binary, &[0, 255, 1, 254]);
        assert_eq!(ws.recv(), Some(Message::Binary(vec![0, 255, 1, 254])));
        // Three fragments (a UTF-8 character split between two) with a
        // ping in between: the pong first, then one reassembled message.
        let text = "fragmenté message";
        let bytes = text.as_bytes();
        let cut = text.find('é').unwrap() + 1;
        ws.send_frame(false, Opcode::Text, &bytes[..4]);
        ws.send_frame(false, Opcode::Continuation, &bytes[4..cut]);
        ws.send_frame(true, Opcode::Ping, b"p");
        ws.send_frame(true, Opcode::Continuation, &bytes[cut..]);
        assert_eq!(ws.recv(), Some(Message::Pong(b"p".to_vec())));
        assert_eq!(ws.recv(), Some(Message::Text(text.into())));
        ws.send_frame(true, Opcode::Ping, b"");
        assert_eq!(ws.recv(), Some(Message::Pong(Vec::new())));
        // 1 MiB, the endpoint's ceiling, whole.
        let big: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        ws.send_frame(true, Opcode::Binary, &big);
        assert_eq!(ws.recv(), Some(Message::Binary(big)));
        ws.send_frame(true, Opcode::Close, &[0x03, 0xe8]);
        ws.expect_close_frame(1000);
    }
}

#[test]
fn echo_refuses_a_message_above_its_ceiling() {
    for backend in BACKENDS {
        let srv = start_default(backend);
        let mut ws = Ws::echo(srv.addr);
        ws.send_header(Opcode::Binary, (1 << 20) + 1);
        ws.expect_close_frame(1009);
    }
}
