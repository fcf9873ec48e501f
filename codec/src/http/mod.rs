//! HTTP/1.1 request heads, response heads and the WebSocket opening
//! handshake, sans-IO (SPEC RT-8, RT-9, RT-11; issue 6 item 1).
//!
//! The engine receives bytes into its own buffers and asks this module three
//! questions, none of which touches IO, time or randomness:
//!
//! - [`parse_request_head`]: is there a complete head at the front of the
//!   buffer? `Ok(None)` (incomplete, read more), `Ok(Some((head, n)))` (the
//!   head is the first `n` bytes; a body of [`RequestHead::content_length`]
//!   bytes or the next pipelined request follows) or `Err(e)` (refuse with
//!   [`HttpError::status`], then close). Limits come from [`HttpLimits`].
//! - [`websocket_upgrade`]: is this head a valid RFC 6455 opening handshake?
//!   [`accept_key`] computes `Sec-WebSocket-Accept`.
//! - [`ResponseHead`], [`simple_response`], [`write_chunk`] and
//!   [`write_last_chunk`] write responses into a [`bytes::BytesMut`].
//! - [`parse_response_head`]: the client side, for every HTTP/1.1 client in
//!   the workspace: is there a complete response head at the front of the
//!   buffer, and how is its body framed ([`ParsedResponse::framing`])?
//!   Limits come from [`ResponseLimits`]. [`parse_closed_response`] splits
//!   a response read until the server closed into head and body.
//!
//! Bodies are framed by `Content-Length` only: a request with any
//! `Transfer-Encoding` is refused with 501, so chunked request bodies and the
//! smuggling ambiguities of RFC 9112 §6.1 never arise.
//!
//! ```
//! use dtp_codec::http::{HttpLimits, Method, parse_request_head, simple_response};
//!
//! let wire = b"GET /v1/snapshot?stream=a%20b HTTP/1.1\r\nHost: x\r\n\r\n";
//! let limits = HttpLimits::default();
//! assert_eq!(parse_request_head(&wire[..10], &limits), Ok(None));
//! let (head, n) = parse_request_head(wire, &limits).unwrap().unwrap();
//! assert_eq!(n, wire.len());
//! assert_eq!(head.method(), &Method::Get);
//! assert_eq!(head.path(), "/v1/snapshot");
//! assert_eq!(head.query_param("stream").as_deref(), Some("a b"));
//! assert!(head.keep_alive());
//! let resp = simple_response(404, "text/plain", b"no", true);
//! assert!(resp.starts_with(b"HTTP/1.1 404 Not Found\r\n"));
//! ```

mod base64;
mod error;
mod etag;
mod fields;
mod request;
mod response;
mod response_parse;
mod websocket;

#[cfg(test)]
mod tests_fields;
#[cfg(test)]
mod tests_prop;
#[cfg(test)]
mod tests_request;
#[cfg(test)]
mod tests_response;
#[cfg(test)]
mod tests_response_parse;
#[cfg(test)]
mod tests_ws;

pub use base64::{decode as base64_decode, encode as base64_encode};
pub use error::HttpError;
pub use etag::{EntityTag, IfNoneMatch};
pub use request::{HeaderField, Method, RequestHead, Version, parse_request_head};
pub use response::{
    CHUNK_HEAD_MAX, ResponseHead, chunk_head, reason_phrase, simple_response, write_chunk,
    write_last_chunk,
};
pub use response_parse::{
    BodyFraming, ParsedResponse, ResponseError, ResponseLimits, parse_closed_response,
    parse_response_head,
};
pub use websocket::{WS_GUID, WsUpgrade, accept_key, websocket_upgrade};

/// Ceilings on what one request may make the server hold (SPEC RT-13: a
/// deployment may lower them, never raise them past what it can afford).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Bytes from the request line to the blank line, both included
    /// (default 16 KiB). Past it: 431.
    pub max_head_bytes: usize,
    /// Header fields (default 64). Past it: 431.
    pub max_headers: usize,
    /// Bytes of the request target (default 4 KiB). Past it: 414.
    pub max_uri_len: usize,
    /// The largest `Content-Length` accepted (default 64 KiB, the RT-13
    /// event ceiling). Past it: 413.
    pub max_body_bytes: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_head_bytes: 16 * 1024,
            max_headers: 64,
            max_uri_len: 4 * 1024,
            max_body_bytes: 64 * 1024,
        }
    }
}
