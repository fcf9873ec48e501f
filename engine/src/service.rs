//! What runs on a shard: the application (or protocol) logic, sans-IO.

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use dtp_codec::{ErrorCode, Limits, LogicalFrame};
use dtp_transports::{CloseReason, ConnId, Endpoint, RecvBuf};

use crate::Notifier;

/// How a connection came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Accepted by a listener of this shard: the index of its address in
    /// `EngineConfig::listen` (so one service can serve several protocols,
    /// one per listener).
    Accepted {
        /// Which listener.
        listener: usize,
    },
    /// Connected by this shard (a client, e.g. the load generator).
    Connected,
}

/// Frames a service answers with; encoded at once into the connection's
/// outgoing batch, sent when the callback returns. `U` is what the service
/// tells its control-plane half ([`Service::Up`]).
pub struct Outbox<'a, U = ()> {
    pub(crate) buf: &'a mut BytesMut,
    pub(crate) limits: &'a Limits,
    /// Bytes the connection may still queue before backpressure.
    pub(crate) room: usize,
    /// The connection's whole send budget (what may be queued at most).
    pub(crate) budget: usize,
    /// The service held back for lack of room and wants [`Service::writable`].
    pub(crate) wants_writable: bool,
    /// A new deadline for [`Service::timeout`] (`Some(None)`: cancel it).
    pub(crate) timer: Option<Option<Instant>>,
    /// Close the connection once what is queued has been sent.
    pub(crate) close: bool,
    /// What the service tells its control-plane half.
    pub(crate) to_control: Vec<U>,
    /// The shard's clock at this turn.
    pub(crate) now: Instant,
    /// Shared bytes queued by reference ([`Outbox::send_shared`]), each
    /// with the length of `buf` when it was queued: it goes out after
    /// that many bytes of the batch.
    pub(crate) shared: Vec<(usize, Bytes)>,
    /// Their total length.
    pub(crate) shared_len: usize,
    /// Frames the service's framing cut from the input ([`Outbox::count_frame`]).
    pub(crate) frames: u64,
    /// Input it found malformed ([`Outbox::count_decode_error`]).
    pub(crate) decode_errors: u64,
    /// Bytes handed to the connection before this batch, over its life.
    pub(crate) handed: u64,
    /// A lower send budget the service asked for ([`Outbox::limit_send_queue`]).
    pub(crate) send_limit: Option<usize>,
}

/// The requests of one [`Outbox`] besides its frames.
pub(crate) struct Finished<U> {
    pub(crate) wants_writable: bool,
    pub(crate) timer: Option<Option<Instant>>,
    pub(crate) close: bool,
    pub(crate) to_control: Vec<U>,
    pub(crate) shared: Vec<(usize, Bytes)>,
    pub(crate) frames: u64,
    pub(crate) decode_errors: u64,
    pub(crate) send_limit: Option<usize>,
}

impl<'a, U> Outbox<'a, U> {
    /// An outbox appending to `buf`, with `room` bytes that may still be
    /// queued, a send budget of `budget`, at the time `now`: what a shard
    /// makes for every callback, and what a test (or another driver) makes
    /// to call a service directly.
    pub fn new(
        buf: &'a mut BytesMut,
        limits: &'a Limits,
        room: usize,
        budget: usize,
        now: Instant,
    ) -> Self {
        Self {
            now,
            shared: Vec::new(),
            shared_len: 0,
            frames: 0,
            decode_errors: 0,
            handed: budget.saturating_sub(room) as u64,
            send_limit: None,
            buf,
            limits,
            room,
            budget,
            wants_writable: false,
            timer: None,
            close: false,
            to_control: Vec::new(),
        }
    }

    /// What the callback asked for besides frames, for the shard.
    pub(crate) fn finish(self) -> Finished<U> {
        Finished {
            wants_writable: self.wants_writable,
            timer: self.timer,
            close: self.close,
            to_control: self.to_control,
            shared: self.shared,
            frames: self.frames,
            decode_errors: self.decode_errors,
            send_limit: self.send_limit,
        }
    }

    /// Tells the service's control-plane half (as
    /// [`Request::Service`](crate::Request::Service), delivered in order with
    /// the connection's other requests; a full ring pauses reading this
    /// connection).
    pub fn to_control(&mut self, what: U) {
        self.to_control.push(what);
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

    /// Queues `bytes` after what the batch holds so far, by reference: the
    /// same [`Bytes`] queued on many connections (an event fanned out to
    /// every subscriber) is not copied per connection where the transport
    /// can send it as it is ([`Transport::send_shared`]). Bytes written to
    /// [`Outbox::wire`] afterwards go out after it. `BUFFER_FULL` when the
    /// connection's send budget has no room for it.
    ///
    /// [`Transport::send_shared`]: dtp_transports::Transport::send_shared
    pub fn send_shared(&mut self, bytes: &Bytes) -> Result<(), ErrorCode> {
        if bytes.len() > self.room() {
            return Err(ErrorCode::BUFFER_FULL);
        }
        if !bytes.is_empty() {
            self.shared.push((self.buf.len(), bytes.clone()));
            self.shared_len += bytes.len();
        }
        Ok(())
    }

    /// The connection's outgoing batch, for frames a protocol layer has
    /// already encoded (e.g. sealed, SPEC ENC-1). Append whole frames only,
    /// and no more than [`Outbox::room`] allows.
    pub fn wire(&mut self) -> &mut BytesMut {
        self.buf
    }

    /// The shared bytes queued so far ([`Outbox::send_shared`]), in order,
    /// each with the length the batch ([`Outbox::wire`]) had when it was
    /// queued: it goes out after that many of the batch's bytes. For a
    /// driver other than a shard (a test) to see what would be sent.
    pub fn shared(&self) -> &[(usize, Bytes)] {
        &self.shared
    }

    /// The encoding limits of this shard.
    pub fn limits(&self) -> &Limits {
        self.limits
    }

    /// Asks for [`Service::timeout`] on this connection at `at` (replacing
    /// any earlier request; `None` cancels it).
    pub fn set_timer(&mut self, at: Option<Instant>) {
        self.timer = Some(at);
    }

    /// Closes the connection once what is queued (this batch included) has
    /// been sent, without a close frame of the shard's: for a protocol layer
    /// that wrote its own.
    pub fn close(&mut self) {
        self.close = true;
    }

    /// The time now, by the shard's clock (read once per turn of its loop:
    /// a service reads it here instead of a clock of its own, so that it
    /// runs in a test's virtual time too).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Whether the service asked for the connection to be closed
    /// ([`Outbox::close`]).
    pub fn closing(&self) -> bool {
        self.close
    }

    /// Bytes that may still be queued on this connection now.
    pub fn room(&self) -> usize {
        self.room.saturating_sub(self.buf.len() + self.shared_len)
    }

    /// Bytes queued on the connection and not yet sent, this batch
    /// included: what a producer compares with its own per-connection
    /// ceiling (e.g. a slow subscriber, SPEC RT-10).
    pub fn queued(&self) -> usize {
        self.budget.saturating_sub(self.room())
    }

    /// The connection's whole send budget: what may be queued on it at
    /// most.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The connection's byte position after everything queued so far, this
    /// batch included: bytes handed to it over its whole life. A producer
    /// remembers where a message ends and compares it with
    /// [`Outbox::sent`] to know whether it has left (SPEC RT-13's
    /// message-count ceiling).
    pub fn position(&self) -> u64 {
        self.handed + (self.buf.len() + self.shared_len) as u64
    }

    /// Bytes of the connection that have been sent (left its queue), over
    /// its whole life.
    pub fn sent(&self) -> u64 {
        self.position().saturating_sub(self.queued() as u64)
    }

    /// Lowers this connection's send budget to `max` bytes (never above
    /// the shard's), from the next callback on: for a protocol with its own
    /// outbound ceiling (SPEC RT-13), so that [`Service::writable`] comes
    /// at half of it and one connection cannot hold more of the core's send
    /// memory than it may use (SPEC MEM-5).
    pub fn limit_send_queue(&mut self, max: usize) {
        self.send_limit = Some(max);
    }

    /// Starts the byte count of [`Outbox::position`] at `handed` (what a
    /// shard knows of the connection's past).
    pub(crate) fn handed(mut self, handed: u64) -> Self {
        self.handed = handed;
        self
    }

    /// Lists shared bytes in `spare` (emptied), a list the shard reuses
    /// from one callback to the next: a fan-out visits thousands of
    /// connections, each queueing one shared block, and would otherwise
    /// allocate a list for each.
    pub(crate) fn reusing(mut self, mut spare: Vec<(usize, Bytes)>) -> Self {
        spare.clear();
        self.shared = spare;
        self
    }

    /// Counts one frame cut from the input, in the shard's metrics
    /// ([`ShardMetrics::frames_in`](crate::ShardMetrics::frames_in)).
    pub fn count_frame(&mut self) {
        self.frames += 1;
    }

    /// Counts input that can never be a frame, in the shard's metrics
    /// ([`ShardMetrics::decode_errors`](crate::ShardMetrics::decode_errors)).
    pub fn count_decode_error(&mut self) {
        self.decode_errors += 1;
    }

    /// Asks for [`Service::writable`] once the connection's queue has
    /// drained to half: for a producer that stopped because [`Outbox::room`]
    /// ran out (it is not called otherwise).
    pub fn want_writable(&mut self) {
        self.wants_writable = true;
    }
}

/// A shard's connections, reachable from a shard-wide callback
/// ([`Service::decision`]).
pub trait Connections<C, U = ()> {
    /// Runs `f` on `conn`'s state with an outbox, then carries out what it
    /// queued or asked for, as after any callback. False (and `f` not run)
    /// if the connection is gone or closing.
    fn visit(&mut self, conn: ConnId, f: &mut dyn FnMut(&mut C, &mut Outbox<'_, U>)) -> bool;
}

/// What a service may do outside a connection's callbacks (from [`Service::tick`]).
pub trait Ctl {
    /// Opens an outgoing connection; [`Service::open`] runs once it is up.
    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, ErrorCode>;
    /// Queues a frame on `conn` (all-or-nothing; `BUFFER_FULL` under backpressure).
    fn send(&mut self, conn: ConnId, frame: &LogicalFrame) -> Result<(), ErrorCode>;
    /// Closes `conn` after its queued frames.
    fn close(&mut self, conn: ConnId);
    /// Whether the shard is stopping (no new work should start).
    fn stopping(&self) -> bool;
}

/// The logic a shard runs for each connection. Sans-IO: it is handed
/// bytes and time, and answers with bytes; the shard does all
/// IO. With a control thread, it talks to its own control-plane half
/// through the rings: `Up` messages from its connections
/// ([`Outbox::to_control`]), `Down` decisions back
/// ([`Service::decision`]); the runtime carries both without looking
/// inside.
pub trait Service {
    /// Per-connection state.
    type Conn;
    /// What the service tells its control-plane half (`()` for none).
    type Up: Send + 'static;
    /// What its control-plane half tells the service (`()` for none).
    type Down: Send + 'static;

    /// A connection is up; `out` may carry its first frames.
    fn open(&mut self, conn: ConnId, origin: Origin, out: &mut Outbox<'_, Self::Up>) -> Self::Conn;

    /// Bytes arrived: all of them, in order, as received (a lent receive
    /// buffer, to split or modify in place). The service keeps (copies)
    /// what it cannot use yet; a service with DTP frames runs as
    /// [`Framed`](crate::Framed), which does that. An error closes the
    /// connection at once, after what is queued (the service writes its
    /// protocol's own refusal first). Reading pauses while the connection's
    /// send queue is at half its budget or more, until it drains
    /// ([`Service::writable`]).
    fn bytes(
        &mut self,
        state: &mut Self::Conn,
        data: RecvBuf,
        out: &mut Outbox<'_, Self::Up>,
    ) -> Result<(), ErrorCode>;

    /// Every decision the shard took from the control ring in one turn
    /// has been handed to [`Service::decision`]: a service that held some
    /// back to carry them out together does so now — e.g. a burst of
    /// events fanned out with one send per subscriber instead of one per
    /// event. Called after every such batch, empty or not, and before a
    /// decision of the shard's own in the batch (a
    /// [`Decision::Close`](crate::Decision::Close)), so that nothing is
    /// carried out out of order; the default does nothing.
    fn decisions_done(&mut self, conns: &mut dyn Connections<Self::Conn, Self::Up>) {
        let _ = conns;
    }

    /// The control thread closes the connection with `code`
    /// ([`Decision::Close`](crate::Decision::Close)): the service says why
    /// in its protocol's words first, if it has any; the connection closes
    /// after what is queued. The default says nothing.
    fn close_with(
        &mut self,
        state: &mut Self::Conn,
        code: ErrorCode,
        reason: &str,
        out: &mut Outbox<'_, Self::Up>,
    ) {
        let _ = (state, code, reason, out);
    }

    /// A decision of the control-plane half for this shard; `conns`
    /// reaches any connection of the shard. Returns the decision when it
    /// is not this service's, so that a [`Routed`](crate::Routed) pair can
    /// offer it to the other service; the default hands every decision
    /// back (a service with no control-plane half).
    fn decision(
        &mut self,
        decision: Self::Down,
        conns: &mut dyn Connections<Self::Conn, Self::Up>,
    ) -> Option<Self::Down> {
        let _ = conns;
        Some(decision)
    }

    /// The deadline set with [`Outbox::set_timer`] has come.
    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, now, out);
    }

    /// The connection's send budget has room again, after `BUFFER_FULL` or
    /// [`Outbox::want_writable`].
    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, out);
    }

    /// An outgoing connection could not be made (OS error `errno`).
    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        let _ = (conn, errno);
    }

    /// The shard is stopping: called once for each of its connections,
    /// before every connection is closed (after what is queued is sent), so
    /// that a protocol can say goodbye in its own words — e.g. a realtime
    /// session's CLOSE RESTART (SPEC RT-8, RT-9) instead of a cut. The
    /// default says nothing.
    fn stopping(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, out);
    }

    /// The connection closed, at `now` by the shard's clock; its state is
    /// handed back for the last time.
    fn close(&mut self, state: Self::Conn, reason: CloseReason, now: Instant) {
        let _ = (state, reason, now);
    }

    /// Called after every poll; returns when it next wants to be called
    /// (`None`: only when something happens).
    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        let _ = (now, ctl);
        None
    }

    /// Called once, before the shard's first turn: the handle through
    /// which any thread has [`Service::notified`] called for a connection
    /// of this shard. The default ignores it.
    fn attach(&mut self, notifier: Notifier) {
        let _ = notifier;
    }

    /// Some thread named this connection to its shard's [`Notifier`]
    /// (e.g. what it waits for is ready on another core). The default does
    /// nothing.
    fn notified(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, Self::Up>) {
        let _ = (state, out);
    }
}
