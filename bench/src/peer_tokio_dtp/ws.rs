//! The tokio DTP peer over WebSocket: the `tokio-tungstenite` server a
//! careful tokio user would write to carry DTP the way our `ws:` transport
//! does (RFC 6455 binary messages, subprotocol `dtp.v1`).
//!
//! **Owns**: the opening handshake (the path and the subprotocol checked,
//! `dtp.v1` answered; our client refuses a 101 without it) and the
//! [`Wire`] that turns binary messages into the DTP byte stream and the
//! endpoint's transmits into binary messages. **Never touches** the rest
//! of the connection: the endpoint, the application, the timers and the
//! counters are [`drive_connection`]'s, the same as over TCP.
//!
//! # Choices
//!
//! - **A message is a piece of the stream.** DTP frames may straddle
//!   messages (our transport cuts nothing at frame boundaries, and a sender
//!   may batch several frames in one message or split one across several),
//!   so each binary message's payload is appended to the connection's read
//!   buffer and frames are split off it with `peek_frame_len`, exactly as
//!   over TCP.
//! - **One message per write batch.** What the endpoint produced after a
//!   read goes out as one binary message (`send`: framed into
//!   tungstenite's write buffer, then flushed), as the TCP peer writes it
//!   with one `write_all`.
//! - **tungstenite's defaults.** Read and write buffers, message and frame
//!   ceilings (64 MiB and 16 MiB: they bound a connection's memory) are
//!   the library's; pings are answered by tungstenite itself. A text
//!   message is a protocol error (DTP is binary) and ends the connection.
//! - **A handshake timeout** of [`HANDSHAKE_TIMEOUT`], as our transport's
//!   default, so a client that never finishes its upgrade does not hold a
//!   task forever.

use std::io;
use std::time::Duration;

use bytes::BytesMut;
use dtp_codec::Limits;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{
    Callback, ErrorResponse, Request, Response,
};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};

use super::{ConnError, Shared, Wire, drive_connection};

/// The subprotocol DTP is carried under (`Sec-WebSocket-Protocol`), as our
/// `ws:` transport names it.
pub const SUBPROTOCOL: &str = "dtp.v1";
/// How long a connection may take to finish its opening handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One TCP connection (`TCP_NODELAY` on) upgraded to WebSocket at `path`,
/// then carrying DTP.
pub(super) async fn connection(
    sock: TcpStream,
    path: &str,
    shared: &Shared,
) -> Result<(), ConnError> {
    sock.set_nodelay(true)?;
    let upgrade = tokio_tungstenite::accept_hdr_async(sock, Upgrade { path });
    let ws = tokio::time::timeout(HANDSHAKE_TIMEOUT, upgrade)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the WebSocket handshake"))?
        .map_err(io::Error::other)?;
    drive_connection(Ws(ws), shared).await
}

/// The checks of an upgrade request on the listener of `path`.
struct Upgrade<'a> {
    path: &'a str,
}

impl Callback for Upgrade<'_> {
    /// The 101 with `dtp.v1` chosen, or a refusal (404 for another path,
    /// 400 without `dtp.v1` offered).
    fn on_request(self, req: &Request, mut resp: Response) -> Result<Response, ErrorResponse> {
        let refuse = |status: StatusCode, why: &str| {
            let mut r = ErrorResponse::new(Some(why.to_owned()));
            *r.status_mut() = status;
            r
        };
        if req.uri().path() != self.path {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                "no DTP WebSocket endpoint here\n",
            ));
        }
        let offered = req
            .headers()
            .get_all(header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|p| p.trim() == SUBPROTOCOL);
        if !offered {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Sec-WebSocket-Protocol must offer dtp.v1\n",
            ));
        }
        resp.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(SUBPROTOCOL),
        );
        Ok(resp)
    }
}

/// DTP's byte stream as the payloads of binary messages.
pub(super) struct Ws(WebSocketStream<TcpStream>);

impl Wire for Ws {
    async fn read(&mut self, input: &mut BytesMut, _limits: &Limits) -> io::Result<bool> {
        loop {
            let message = match self.0.next().await {
                None => return Ok(false),
                Some(m) => m.map_err(io::Error::other)?,
            };
            match message {
                Message::Binary(payload) => {
                    input.extend_from_slice(&payload);
                    return Ok(true);
                }
                Message::Close(_) => return Ok(false),
                Message::Text(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a text message: DTP over WebSocket is binary",
                    ));
                }
                // Pings are answered by tungstenite; nothing else arrives.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }

    async fn write(&mut self, output: &mut BytesMut) -> io::Result<()> {
        let message = Message::Binary(output.split().freeze());
        self.0.send(message).await.map_err(io::Error::other)
    }

    async fn close(&mut self) {
        // A close frame (or the answer to the peer's), then the socket is
        // dropped; a connection that failed fails here too, harmlessly.
        let _ = self.0.close(None).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn request(path: &str, protocols: Option<&str>) -> Request {
        let mut b = Request::builder().uri(path);
        if let Some(p) = protocols {
            b = b.header(header::SEC_WEBSOCKET_PROTOCOL, p);
        }
        b.body(()).unwrap()
    }

    /// The answer to `path` with `protocols` offered: the chosen
    /// subprotocol, or the refusal's status.
    fn answer(path: &str, protocols: Option<&str>) -> Result<HeaderValue, StatusCode> {
        Upgrade { path: "/dtp" }
            .on_request(&request(path, protocols), Response::default())
            .map(|ok| ok.headers()[header::SEC_WEBSOCKET_PROTOCOL].clone())
            .map_err(|refused| refused.status())
    }

    #[test]
    fn the_upgrade_chooses_dtp_v1_on_the_path_only() {
        assert_eq!(answer("/dtp", Some("x.v2, dtp.v1")).unwrap(), SUBPROTOCOL);
        assert_eq!(answer("/x", Some("dtp.v1")), Err(StatusCode::NOT_FOUND));
        assert_eq!(answer("/dtp", None), Err(StatusCode::BAD_REQUEST));
        let other = answer("/dtp", Some("realtime.v1"));
        assert_eq!(other, Err(StatusCode::BAD_REQUEST));
    }
}
