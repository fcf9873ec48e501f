//! RTSP/1.0 (RFC 2326, with RFC 7826 where it is stricter) as DTP carries
//! itself over it, sans-IO (SPEC ARCH-1's RTSP transport, TRN-4): message
//! heads, the typed headers the interleaved TCP transport needs, and the
//! `$` packets that carry the bytes.
//!
//! - [`parse_message`] (and [`parse_request`], [`parse_response`]): is
//!   there a whole request or response at the front of the buffer?
//!   [`Parse::NeedMore`], [`Parse::Done`] with its length, or an
//!   [`RtspError`] naming what is wrong and at which byte. Ceilings on the
//!   head, the header count, the URI and the body come from
//!   [`RtspLimits`]; no input panics.
//! - [`Request`] / [`Response`] write themselves back
//!   ([`Request::write`]); `CSeq` and `Content-Length` are fields of the
//!   value, not headers, so the writer cannot send a length that lies.
//! - [`Headers::session`] and [`Headers::transport`] read `Session`
//!   (`ID;timeout=60`) and `Transport`
//!   (`RTP/AVP/TCP;unicast;interleaved=0-1`) into [`Session`] and
//!   [`TransportSpec`], which write themselves back with `Display`.
//! - [`write_interleaved`] and [`InterleavedDecoder`]: the binary packets
//!   (`$`, channel, 16-bit length, payload) and the messages between them.
//!
//! This module never touches IO, time or randomness: the transport that
//! speaks it (`dtp_transports::Rtsp`) owns the connection, the timers and
//! the session ids.
//!
//! ```
//! use dtp_codec::rtsp::{Method, Parse, Request, RtspLimits, parse_request};
//!
//! let wire = Request::new(Method::Options, "*", 1).to_bytes().unwrap();
//! let limits = RtspLimits::default();
//! assert_eq!(parse_request(&wire[..5], &limits), Ok(Parse::NeedMore(1)));
//! let Ok(Parse::Done(req, n)) = parse_request(&wire, &limits) else { panic!() };
//! assert_eq!((req.method, req.cseq, n), (Method::Options, Some(1), wire.len()));
//! ```

mod error;
mod headers;
mod interleave;
mod message;
mod parse;

#[cfg(test)]
mod tests_prop;
#[cfg(test)]
mod tests_rfc;

pub use error::{RtspError, RtspErrorKind};
pub use headers::{
    Channels, Delivery, MAX_SESSION_ID, Session, TransportSpec, format_transport, parse_transport,
};
pub use interleave::{
    HEADER_LEN, InterleaveError, InterleavedDecoder, Item, MAGIC, MAX_PAYLOAD, interleaved_len,
    packet_header, write_interleaved,
};
pub use message::{Header, Headers, Message, Method, Request, Response, Version, reason_phrase};
pub use parse::{Parse, parse_message, parse_request, parse_response};

/// Ceilings on what one RTSP message may make its reader hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtspLimits {
    /// Bytes from the first byte to the blank line after the header
    /// fields, both included (default 8 KiB).
    pub max_head_bytes: usize,
    /// Header fields, `CSeq` and `Content-Length` included (default 32).
    pub max_headers: usize,
    /// Bytes of the request URI (default 1 KiB).
    pub max_uri_len: usize,
    /// The largest `Content-Length` taken (default 16 KiB: an SDP, a
    /// parameter list).
    pub max_body_bytes: usize,
}

impl Default for RtspLimits {
    fn default() -> Self {
        Self {
            max_head_bytes: 8 * 1024,
            max_headers: 32,
            max_uri_len: 1024,
            max_body_bytes: 16 * 1024,
        }
    }
}
