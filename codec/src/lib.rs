//! The DTP LogicalFrame wire format (SPEC FRM-1 … FRM-5).
//!
//! This crate owns the bytes-on-the-wire of DTP: the 16-byte frame header,
//! the body of every frame kind, the control messages of the terminal control
//! plane (SPEC §2–3) and the human-readable and JSON forms of a frame. The
//! layout is specified in `codec/FORMAT.md`; this crate is its reference
//! implementation.
//!
//! It never touches IO, time or randomness. Decoding is zero-copy over
//! [`bytes::Bytes`] (payloads and sealed bodies are slices of the input), tells
//! "need more bytes" ([`DecodeError::Incomplete`]) apart from malformed input,
//! and never panics: every malformed input yields a [`DecodeError`] naming the
//! field and the byte offset where it was found.
//!
//! ```
//! use bytes::Bytes;
//! use dtp_codec::{Body, DataFrame, Limits, LogicalFrame};
//!
//! let frame = LogicalFrame::plain(
//!     1,
//!     Body::Data(DataFrame {
//!         agreement_id: None, // inherited from the previous data frame on stream 1
//!         fragment_id: 7,
//!         sequence: 1,
//!         relations: vec![],
//!         payload: Bytes::from_static(b"hello"),
//!     }),
//! );
//! let wire = frame.to_bytes(&Limits::default()).unwrap();
//! let (decoded, used) = dtp_codec::decode_frame(&wire, &Limits::default()).unwrap();
//! assert_eq!(used, wire.len());
//! assert_eq!(decoded, frame);
//! ```
#![forbid(unsafe_code)]

/// `from_u8` and `name` for an enum whose variants are wire bytes with the
/// spec's names.
macro_rules! wire_enum_impl {
    ($ty:ident { $($variant:ident = $value:literal => $name:literal),* $(,)? }) => {
        impl $ty {
            /// The value a wire byte stands for, if this version knows it.
            pub fn from_u8(b: u8) -> Option<Self> {
                match b {
                    $($value => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// The spec's name of the value.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

mod buf;
mod control;
mod decode;
mod encode;
mod error;
mod frame;
pub mod http;
mod inherit;
#[cfg(feature = "json")]
pub mod json;
mod limits;
mod pretty;
#[cfg(feature = "json")]
pub mod realtime;
pub mod rtsp;
mod sample;
mod wire;
pub mod ws;

pub use buf::FrameBuf;
pub use control::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage,
    HandoverFailedNotification, HandoverFailedReason, Heartbeat, HeartbeatAck, SessionRelease,
    SessionState, SessionStateChanged, SessionTransferRequest,
};
pub use decode::{
    FrameDecoder, FrameHead, decode_frame, decode_frame_at, decode_opened, peek_frame_head,
    peek_frame_len,
};
pub use error::{DecodeError, DecodeErrorKind, EncodeError, ErrorCode};
pub use frame::{
    AckFrame, AeadAlgorithm, AgreementId, Body, CloseFrame, DataFrame, Decision, FragmentId,
    FrameKind, HANDSHAKE_MAX_LEN, HANDSHAKE_MAX_STAGE, HEADER_LEN, HandshakeFrame, LogicalFrame,
    MAGIC, Relation, RelationType, RequestFrame, RequestType, ResponseFrame, ResumeFrame,
    SEAL_COUNTER_LEN, Sealed, SessionId, TAG_LEN, Terms, VERSION,
};
pub use inherit::{AgreementContext, InheritError};
pub use limits::Limits;
pub use sample::samples;
