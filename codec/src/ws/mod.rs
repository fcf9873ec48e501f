//! RFC 6455 WebSocket framing, sans-IO (SPEC RT-9, RT-10; issue 6 item 4).
//!
//! Two layers, neither of which touches IO, time or randomness:
//!
//! - [`frame`]: one frame header at a time — parse ([`parse_header`]),
//!   unmask in place ([`apply_mask`]) and encode ([`encode_header`]). Every
//!   rule of RFC 6455 §5.2 that can be checked from the header alone is
//!   checked there, before any payload byte is read.
//! - [`message`]: the per-direction [`Reassembler`] — fragmentation (§5.4),
//!   control frames between fragments (§5.5), incremental UTF-8 validation of
//!   text (§5.6, §8.1), close payloads and codes (§5.5.1, §7.4), ping/pong
//!   (§5.5.2–3) and the message size ceiling (RT-10, RT-13).
//!
//! Every refusal is a [`WsError`] whose [`WsError::close_code`] is the close
//! code to send back (1002, 1007 or 1009, RFC 6455 §7.4.1). The same code is
//! shared by the `realtime.v1` endpoint and the plain echo endpoint used for
//! the Autobahn|Testsuite cases.
//!
//! ```
//! use dtp_codec::ws::{Decoder, FrameConfig, Message, Opcode, Role, encode_frame};
//!
//! // A client sends a masked text frame; the server decodes it.
//! let wire = encode_frame(Role::Client, true, Opcode::Text, b"hi", Some([1, 2, 3, 4])).unwrap();
//! let mut server = Decoder::new(FrameConfig::server(1 << 20));
//! let mut buf = wire.clone();
//! let (used, msg) = server.decode(&mut buf).unwrap();
//! assert_eq!(used, wire.len());
//! assert_eq!(msg, Some(Message::Text("hi".into())));
//! ```

mod error;
pub mod frame;
pub mod message;
mod utf8;

#[cfg(test)]
mod tests_frame;
#[cfg(test)]
mod tests_message;

pub use error::{CloseCode, WsError, WsErrorKind};
pub use frame::{
    EncodedHeader, FrameConfig, FrameError, FrameHeader, MAX_CONTROL_PAYLOAD, MAX_HEADER_LEN,
    Opcode, Role, apply_mask, encode_frame, encode_header, parse_header,
};
pub use message::{CloseFrame, Decoder, Message, Reassembler, parse_close_payload};
pub use utf8::Utf8Validator;
