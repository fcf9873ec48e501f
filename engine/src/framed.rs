//! Cutting a byte stream into DTP frames, once, for every framed service.
//!
//! A shard hands a [`Service`] the bytes of a connection as they arrive.
//! [`Framed`] turns that into one call per whole frame for a
//! [`FrameService`]: it reads each frame's header once
//! ([`peek_frame_head`], SPEC FRM-2), lends a frame that lies inside the
//! received buffer as a piece of it — in the receive chunk itself, so a
//! sealed frame is opened where the kernel wrote it (SPEC ENC-2) — and
//! assembles a frame that straddles two reads by copying only the bytes it
//! lacks. It stops serving frames while the connection's send queue is at
//! half its budget, keeps the rest of the input and goes on once the queue
//! has drained ([`Service::writable`]): a peer that sends faster than it
//! reads is paused, not buffered without bound.
//!
//! The same adapter frames DTP over any transport that carries a byte
//! stream (TCP, Unix sockets, an in-memory pipe); a transport with its own
//! message boundaries hands each message in one piece, which is one frame.

use std::time::Instant;

use bytes::BytesMut;
use dtp_codec::{
    Body, CloseFrame, DecodeError, ErrorCode, FrameBuf, FrameHead, Limits, LogicalFrame,
    decode_frame_at, peek_frame_head,
};
use dtp_transports::{CloseReason, ConnId, RecvBuf};

use crate::Notifier;
use crate::service::{Connections, Ctl, Origin, Outbox, Service};

/// One whole frame cut from a connection's input: its header, checked, and
/// exactly its wire bytes (header included), which the service may modify
/// (decrypt in place).
#[derive(Debug)]
pub struct Frame {
    /// The checked header ([`peek_frame_head`]): `head.total_len` is
    /// `wire.len()`.
    pub head: FrameHead,
    /// The frame's bytes: a piece of the receive chunk when the frame lay
    /// wholly inside one read, else the assembly buffer.
    pub wire: RecvBuf,
}

impl Frame {
    /// Decodes the frame (payloads are slices of its bytes, no copy): for a
    /// service that has no use for the wire bytes themselves.
    /// The header is not read again: [`Framed`] checked it with these
    /// limits when it cut the frame (one length parse per frame).
    pub fn decode(self, limits: &Limits) -> Result<LogicalFrame, DecodeError> {
        decode_frame_at(&self.wire.freeze(), &self.head, limits).map(|(frame, _)| frame)
    }
}

/// A service that takes its input frame by frame: run it on a shard as
/// [`Framed`]. The callbacks besides [`FrameService::frame`] are those of
/// [`Service`], with the same meaning.
pub trait FrameService {
    /// Per-connection state.
    type Conn;
    /// What the service tells its control-plane half (`()` for none).
    type Up: Send + 'static;
    /// What its control-plane half tells the service (`()` for none).
    type Down: Send + 'static;

    /// A connection is up ([`Service::open`]).
    fn open(&mut self, conn: ConnId, origin: Origin, out: &mut Outbox<'_, Self::Up>) -> Self::Conn;

    /// A whole frame arrived. An error closes the connection, after a
    /// close frame carrying the code ([`FrameService::close_with`]).
    fn frame(
        &mut self,
        state: &mut Self::Conn,
        frame: Frame,
        out: &mut Outbox<'_, Self::Up>,
    ) -> Result<(), ErrorCode>;

    /// The connection is closed with `code` — the input was malformed, the
    /// service refused a frame, or the control thread decided so
    /// ([`Decision::Close`](crate::Decision::Close)) — and the service says
    /// why first. The default queues a plaintext close frame; a protocol
    /// with a session of its own (sealed frames) overrides it.
    fn close_with(
        &mut self,
        state: &mut Self::Conn,
        code: ErrorCode,
        reason: &str,
        out: &mut Outbox<'_, Self::Up>,
    ) {
        let _ = state;
        let mut reason = reason.to_owned();
        let max = usize::from(out.limits().max_string_len);
        while reason.len() > max {
            reason.pop();
        }
        let frame = LogicalFrame::plain(0, Body::Close(CloseFrame { code, reason }));
        // Best effort: a connection too backed up to take its close frame
        // is closed without it.
        let _ = out.send(&frame);
    }

    /// A decision of the control-plane half ([`Service::decision`]).
    fn decision(
        &mut self,
        decision: Self::Down,
        conns: &mut dyn Connections<Self::Conn, Self::Up>,
    ) -> Option<Self::Down> {
        let _ = conns;
        Some(decision)
    }

    /// The connection's timer is due ([`Service::timeout`]).
    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, now, out);
    }

    /// The connection's send queue has room again, and every frame held
    /// back for lack of it has been served ([`Service::writable`]).
    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, out);
    }

    /// An outgoing connection could not be made ([`Service::connect_failed`]).
    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        let _ = (conn, errno);
    }

    /// The shard is stopping ([`Service::stopping`]).
    fn stopping(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, out);
    }

    /// The connection closed ([`Service::close`]).
    fn close(&mut self, state: Self::Conn, reason: CloseReason, now: Instant) {
        let _ = (state, reason, now);
    }

    /// After every poll ([`Service::tick`]).
    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        let _ = (now, ctl);
        None
    }

    /// The shard's notifier, once ([`Service::attach`]).
    fn attach(&mut self, notifier: Notifier) {
        let _ = notifier;
    }

    /// The connection was named to the shard's notifier
    /// ([`Service::notified`]).
    fn notified(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, out);
    }
}

/// A [`FrameService`] run as a byte-stream [`Service`]: the framing
/// adapter (module docs).
pub struct Framed<F> {
    /// The framed service.
    pub inner: F,
}

impl<F> Framed<F> {
    /// `inner`, fed frame by frame.
    pub fn new(inner: F) -> Self {
        Self { inner }
    }
}

/// A connection of a [`Framed`] service.
pub struct FramedConn<C> {
    /// The framed service's state for it.
    pub inner: C,
    /// A frame begun and not yet whole, or input held back while the send
    /// queue is full: empty (and unallocated) between frames, so an idle
    /// connection holds nothing here.
    rx: BytesMut,
}

/// What the next step of cutting a connection's input is.
enum Next {
    /// A whole frame to serve.
    Frame(Frame),
    /// Nothing whole yet: wait for more input. The frame begun is this
    /// long in all, if its header is there.
    Wait(Option<usize>),
    /// The input can never become a frame.
    Malformed(DecodeError),
}

impl<F: FrameService> Framed<F> {
    /// Serves every whole frame of `held` and then `data`, until both run
    /// out, the connection is closing, or its send queue reaches half its
    /// budget (then the rest is kept and the service asks to be told when
    /// the queue has drained).
    fn serve(
        &mut self,
        state: &mut FramedConn<F::Conn>,
        mut data: RecvBuf,
        out: &mut Outbox<'_, F::Up>,
    ) {
        let soft_limit = out.budget() / 2;
        loop {
            if out.closing() {
                state.rx = BytesMut::new();
                return;
            }
            if out.queued() >= soft_limit {
                state.rx.extend_from_slice(&data);
                out.want_writable();
                return;
            }
            let next = if state.rx.is_empty() {
                cut(&mut data, out.limits())
            } else {
                assemble(&mut state.rx, &mut data, out.limits())
            };
            let frame = match next {
                Next::Frame(frame) => frame,
                Next::Wait(total) => {
                    // A partial frame waits here, copied into a buffer of
                    // its whole size at once; the chunk it came in goes
                    // back to the transport.
                    if let Some(total) = total {
                        state.rx.reserve(total.saturating_sub(state.rx.len()));
                    }
                    state.rx.extend_from_slice(&data);
                    if state.rx.is_empty() {
                        state.rx = BytesMut::new();
                    }
                    return;
                }
                Next::Malformed(e) => {
                    out.count_decode_error();
                    return self.refuse(state, e.code(), "malformed frame", out);
                }
            };
            out.count_frame();
            if let Err(code) = self.inner.frame(&mut state.inner, frame, out) {
                return self.refuse(state, code, "the service refused a frame", out);
            }
        }
    }

    /// Closes the connection with a close frame of the service's.
    fn refuse(
        &mut self,
        state: &mut FramedConn<F::Conn>,
        code: ErrorCode,
        why: &str,
        out: &mut Outbox<'_, F::Up>,
    ) {
        tracing::debug!(%code, why, "closing a framed connection");
        state.rx = BytesMut::new();
        if !out.closing() {
            self.inner.close_with(&mut state.inner, code, why, out);
            out.close();
        }
    }
}

/// The next whole frame at the start of `data`, split off it in place.
fn cut(data: &mut RecvBuf, limits: &Limits) -> Next {
    if data.is_empty() {
        return Next::Wait(None);
    }
    match peek_frame_head(data, limits) {
        Ok(head) if head.total_len <= data.len() => Next::Frame(Frame {
            wire: data.split_to(head.total_len),
            head,
        }),
        Ok(head) => Next::Wait(Some(head.total_len)),
        Err(DecodeError::Incomplete { .. }) => Next::Wait(None),
        Err(e) => Next::Malformed(e),
    }
}

/// The next whole frame of `rx` (a frame begun earlier, or input held
/// back), completed from `data` by copying only the bytes it lacks.
fn assemble(rx: &mut BytesMut, data: &mut RecvBuf, limits: &Limits) -> Next {
    loop {
        let want = match peek_frame_head(rx, limits) {
            Ok(head) if head.total_len <= rx.len() => {
                return Next::Frame(Frame {
                    wire: RecvBuf::from(rx.split_to(head.total_len)),
                    head,
                });
            }
            Ok(head) => {
                // Room for the whole frame at once, not grown read by read.
                rx.reserve(head.total_len - rx.len());
                head.total_len
            }
            Err(DecodeError::Incomplete { needed }) => needed,
            Err(e) => return Next::Malformed(e),
        };
        if data.is_empty() {
            return Next::Wait(None);
        }
        let take = want.saturating_sub(rx.len()).min(data.len());
        rx.extend_from_slice(&data.split_to(take));
    }
}

/// A [`Framed`] service's connections as its framed service sees them.
struct Inner<'a, C, U> {
    conns: &'a mut dyn Connections<FramedConn<C>, U>,
}

impl<C, U> Connections<C, U> for Inner<'_, C, U> {
    fn visit(&mut self, conn: ConnId, f: &mut dyn FnMut(&mut C, &mut Outbox<'_, U>)) -> bool {
        self.conns.visit(conn, &mut |c, out| f(&mut c.inner, out))
    }
}

impl<F: FrameService> Service for Framed<F> {
    type Conn = FramedConn<F::Conn>;
    type Up = F::Up;
    type Down = F::Down;

    fn open(&mut self, conn: ConnId, origin: Origin, out: &mut Outbox<'_, Self::Up>) -> Self::Conn {
        FramedConn {
            inner: self.inner.open(conn, origin, out),
            rx: BytesMut::new(),
        }
    }

    fn bytes(
        &mut self,
        state: &mut Self::Conn,
        data: RecvBuf,
        out: &mut Outbox<'_, Self::Up>,
    ) -> Result<(), ErrorCode> {
        self.serve(state, data, out);
        Ok(())
    }

    fn close_with(
        &mut self,
        state: &mut Self::Conn,
        code: ErrorCode,
        reason: &str,
        out: &mut Outbox<'_, Self::Up>,
    ) {
        state.rx = BytesMut::new();
        self.inner.close_with(&mut state.inner, code, reason, out);
    }

    fn decision(
        &mut self,
        decision: Self::Down,
        conns: &mut dyn Connections<Self::Conn, Self::Up>,
    ) -> Option<Self::Down> {
        self.inner.decision(decision, &mut Inner { conns })
    }

    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_, Self::Up>) {
        self.inner.timeout(&mut state.inner, now, out);
    }

    /// Serves the frames held back first; the framed service hears of the
    /// room only once they are all served.
    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        if !state.rx.is_empty() {
            self.serve(state, RecvBuf::default(), out);
            if out.closing() || out.queued() >= out.budget() / 2 {
                return;
            }
        }
        self.inner.writable(&mut state.inner, out);
    }

    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        self.inner.connect_failed(conn, errno);
    }

    fn stopping(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        self.inner.stopping(&mut state.inner, out);
    }

    fn close(&mut self, state: Self::Conn, reason: CloseReason, now: Instant) {
        self.inner.close(state.inner, reason, now);
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        self.inner.tick(now, ctl)
    }

    fn attach(&mut self, notifier: Notifier) {
        self.inner.attach(notifier);
    }

    fn notified(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        self.inner.notified(&mut state.inner, out);
    }
}
