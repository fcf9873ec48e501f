//! What runs on a shard: the application (or protocol) logic, sans-IO.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::BytesMut;
use dtp_codec::{ErrorCode, Limits, LogicalFrame};
use dtp_transports::{CloseReason, ConnId};

/// How a connection came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Accepted by a listener of this shard.
    Accepted,
    /// Connected by this shard (a client, e.g. the load generator).
    Connected,
}

/// Frames a service answers with; encoded at once into the connection's
/// outgoing batch, sent when the callback returns.
pub struct Outbox<'a> {
    pub(crate) buf: &'a mut BytesMut,
    pub(crate) limits: &'a Limits,
    /// Bytes the connection may still queue before backpressure.
    pub(crate) room: usize,
    /// The service held back for lack of room and wants [`Service::writable`].
    pub(crate) wants_writable: bool,
}

impl<'a> Outbox<'a> {
    pub(crate) fn new(buf: &'a mut BytesMut, limits: &'a Limits, room: usize) -> Self {
        Self {
            buf,
            limits,
            room,
            wants_writable: false,
        }
    }

    /// Queues `frame` for sending. Fails with `BUFFER_FULL` when the
    /// connection's send budget is used up (try again from
    /// [`Service::writable`]), or with the codec's code when the frame
    /// cannot be encoded.
    pub fn send(&mut self, frame: &LogicalFrame) -> Result<(), ErrorCode> {
        let len = frame
            .encoded_len(self.limits)
            .map_err(|_| ErrorCode::LIMIT_EXCEEDED)?;
        if len > self.room() {
            return Err(ErrorCode::BUFFER_FULL);
        }
        frame
            .encode(self.buf, self.limits)
            .map_err(|_| ErrorCode::LIMIT_EXCEEDED)?;
        Ok(())
    }

    /// Bytes that may still be queued on this connection now.
    pub fn room(&self) -> usize {
        self.room.saturating_sub(self.buf.len())
    }

    /// Asks for [`Service::writable`] once the connection's queue has
    /// drained to half: for a producer that stopped because [`Outbox::room`]
    /// ran out (it is not called otherwise).
    pub fn want_writable(&mut self) {
        self.wants_writable = true;
    }
}

/// What a service may do outside a connection's callbacks (from [`Service::tick`]).
pub trait Ctl {
    /// Opens an outgoing connection; [`Service::open`] runs once it is up.
    fn connect(&mut self, addr: SocketAddr) -> Result<ConnId, ErrorCode>;
    /// Queues a frame on `conn` (all-or-nothing; `BUFFER_FULL` under backpressure).
    fn send(&mut self, conn: ConnId, frame: &LogicalFrame) -> Result<(), ErrorCode>;
    /// Closes `conn` after its queued frames.
    fn close(&mut self, conn: ConnId);
    /// Whether the shard is stopping (no new work should start).
    fn stopping(&self) -> bool;
}

/// The logic a shard runs for each connection. Sans-IO: it is handed
/// frames and time, and answers with frames; the shard does all IO.
pub trait Service {
    /// Per-connection state.
    type Conn;

    /// A connection is up; `out` may carry its first frames.
    fn open(&mut self, conn: ConnId, origin: Origin, out: &mut Outbox<'_>) -> Self::Conn;

    /// A frame arrived. An error closes the connection with a close frame
    /// carrying the code.
    fn frame(
        &mut self,
        state: &mut Self::Conn,
        frame: LogicalFrame,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode>;

    /// The connection's send budget has room again, after `BUFFER_FULL` or
    /// [`Outbox::want_writable`].
    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_>) {
        let _ = (state, out);
    }

    /// An outgoing connection could not be made (OS error `errno`).
    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        let _ = (conn, errno);
    }

    /// The connection closed; its state is handed back for the last time.
    fn close(&mut self, state: Self::Conn, reason: CloseReason) {
        let _ = (state, reason);
    }

    /// Called after every poll; returns when it next wants to be called
    /// (`None`: only when something happens).
    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        let _ = (now, ctl);
        None
    }
}
