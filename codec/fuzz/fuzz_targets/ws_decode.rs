//! Arbitrary bytes into the WebSocket frame parser and message decoder
//! (RFC 6455; SPEC RT-9/RT-10: no input from a browser makes the server
//! panic), as a server and as a client, under a small and a large message
//! ceiling.
//!
//! The oracles: a header that parses re-encodes to exactly the bytes it was
//! parsed from (the parser accepts only minimal, well-formed headers); an
//! `Incomplete` asks for more bytes than there are; the decoder consumes
//! something on every success, never more than it was given, and every
//! text message it returns is the UTF-8 it validated.

#![no_main]

use dtp_codec::ws::{Decoder, FrameConfig, FrameError, Message, Role, encode_header, parse_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for cfg in [
        FrameConfig::server(125),
        FrameConfig::server(1 << 20),
        FrameConfig::client(125),
        FrameConfig::client(1 << 20),
    ] {
        match parse_header(data, &cfg) {
            Ok(h) => {
                // Re-encoded as the peer that sent it.
                let sender = match cfg.role {
                    Role::Server => Role::Client,
                    Role::Client => Role::Server,
                };
                let again = encode_header(sender, h.fin, h.opcode, h.payload_len, h.mask)
                    .expect("a parsed header re-encodes");
                assert_eq!(again.as_slice(), &data[..h.header_len]);
            }
            Err(FrameError::Incomplete { needed }) => assert!(needed > data.len()),
            Err(FrameError::Protocol(_)) => {}
        }
        let mut buf = data.to_vec();
        let mut at = 0;
        let mut decoder = Decoder::new(cfg);
        while at < buf.len() {
            match decoder.decode(&mut buf[at..]) {
                Ok((used, message)) => {
                    assert!(used > 0 && at + used <= data.len());
                    at += used;
                    if let Some(Message::Text(t)) = message {
                        assert!(std::str::from_utf8(t.as_bytes()).is_ok());
                    }
                }
                Err(_) => break,
            }
        }
    }
});
