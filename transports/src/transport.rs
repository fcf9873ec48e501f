//! The one interface between the runtime and any transport (SPEC §1.9,
//! TRN-1 … TRN-5: the seed's Transport_Adapter), and its vocabulary.
//!
//! The seed's interface is callback-shaped (`onReceive(handler)`,
//! `onConnectionStateChange(handler)`). Here it is polled, in the manner of
//! smoltcp's `Device` and quinn-proto: a transport appends [`Event`]s,
//! which keeps it free of re-entrancy (a handler that sends from inside a
//! callback) and lets one thread drive it with everything else on its
//! core. [`Callbacks`] turns the polled events back into the seed's
//! handler form for users who want it.
//!
//! Buffers are the transport's: it receives into its own memory (a core's
//! pool chunks for the socket transports) and lends them as [`RecvBuf`]s;
//! sends are copied into its bounded queue, or for [`Bytes`] shared between
//! many connections, queued by reference ([`Transport::send_shared`]).

use std::fmt;
use std::io;
use std::time::Duration;

use bytes::Bytes;

use crate::driver::{BackendChoice, CloseReason, ConnId, DriverStats, ListenerId, Waker};
use crate::endpoint::Endpoint;
use crate::lent::RecvBuf;
use crate::sendq::SendError;

/// Events a batch buffer keeps room for after a burst (a wave of accepts
/// on thousands of connections): beyond this its memory is given back, so
/// a burst does not stay in every idle shard's footprint.
pub const EVENTS_KEPT: usize = 1024;

/// Moves `pending` to the end of `events`, giving back what a burst made
/// `pending` grow beyond [`EVENTS_KEPT`].
pub(crate) fn hand_over(pending: &mut Vec<Event>, events: &mut Vec<Event>) {
    events.append(pending);
    if pending.capacity() > EVENTS_KEPT {
        pending.shrink_to(EVENTS_KEPT);
    }
}

/// What happened, as reported by [`Transport::poll`] (SPEC TRN-1/TRN-3: the
/// receive and connection-state "callbacks" as polled events).
///
/// Order, per connection: `Accepted` (incoming) or `Connected` (outgoing) —
/// the connection is up — then `Received` and `Writable` in any mix, then
/// one `Closed`; an outgoing connection that could not be made reports
/// only `Closed` with [`CloseReason::ConnectFailed`]. Events of different
/// connections interleave freely. [`Event::state`] gives the seed's
/// connection-state view of them.
#[derive(Debug)]
pub enum Event {
    /// A listener accepted a connection; it is up.
    Accepted {
        /// The listener.
        listener: ListenerId,
        /// The new connection.
        conn: ConnId,
    },
    /// An outgoing connection is established.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// SPEC TRN-1/TRN-5: bytes arrived, exactly as the peer sent them and
    /// in order. How a stream is cut into events is the transport's
    /// business (and a fault injector's), never the bytes. The buffer may
    /// be the transport's receive memory, lent: drop it (or the [`Bytes`]
    /// frozen from it) promptly.
    Received {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        data: RecvBuf,
    },
    /// SPEC TRN-2: a producer refused with [`SendError::BufferFull`] (or that
    /// asked with [`Transport::want_writable`]) may send again.
    Writable {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is closed and its id dead; nothing more will arrive.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// Another thread called [`Waker::wake`].
    Woken,
}

impl Event {
    /// SPEC TRN-3: the connection-state change this event is, if any.
    pub fn state(&self) -> Option<(ConnId, ConnectionState)> {
        match *self {
            Self::Accepted { conn, .. } | Self::Connected { conn } => {
                Some((conn, ConnectionState::Up))
            }
            Self::Closed { conn, reason } => Some((conn, ConnectionState::Down(reason))),
            _ => None,
        }
    }
}

/// A connection's state as reported to the runtime (SPEC TRN-1's `state`
/// in `onConnectionStateChange(handler(id, state))`, TRN-3).
///
/// Every connection goes `Connecting` (outgoing only: from
/// [`Transport::connect`] until it reports) → `Up` → `Down`, or
/// `Connecting` → `Down` when it could not be made. `Down` is final: the id
/// is dead afterwards and nothing more is reported for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionState {
    /// An outgoing connection is being made.
    Connecting,
    /// The connection carries bytes both ways.
    Up,
    /// The connection is closed, and why.
    Down(CloseReason),
}

/// Why a transport could not listen or connect.
#[derive(Debug)]
#[non_exhaustive]
pub enum TransportError {
    /// This transport does not speak the endpoint's kind (SPEC TRN-4: one
    /// transport per kind).
    UnsupportedEndpoint {
        /// The transport's kind, e.g. `io_uring` or `memory`.
        transport: &'static str,
        /// The endpoint it was given.
        endpoint: Endpoint,
    },
    /// Something already listens on this endpoint.
    AddressInUse(Endpoint),
    /// The connection table is full; close a connection first.
    TooManyConnections,
    /// The operating system refused.
    Io(io::Error),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedEndpoint {
                transport,
                endpoint,
            } => write!(
                f,
                "the {transport} transport cannot reach {endpoint}: `{}` needs another transport",
                endpoint.scheme()
            ),
            Self::AddressInUse(endpoint) => write!(f, "{endpoint}: address already in use"),
            Self::TooManyConnections => {
                f.write_str("connection table full: close a connection or raise the limit")
            }
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for TransportError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<TransportError> for io::Error {
    fn from(e: TransportError) -> Self {
        match e {
            TransportError::Io(e) => e,
            TransportError::AddressInUse(_) => {
                io::Error::new(io::ErrorKind::AddrInUse, e.to_string())
            }
            other => io::Error::other(other.to_string()),
        }
    }
}

/// SPEC TRN-1 … TRN-5: a transport, the one interface between the runtime
/// (or a client, or a test) and any way of moving bytes.
///
/// Connections are named by [`ConnId`]: generational, so an id that went
/// down is refused ([`SendError::UnknownConnection`]) even after its slot
/// is reused. Ids mean something only to the transport that issued them.
///
/// Nothing here blocks except [`Transport::poll`], and that only up to its
/// timeout. Each transport is driven by one thread.
pub trait Transport {
    /// Which implementation this is and why it was chosen (logged at
    /// start-up, shown in metrics and bench output).
    fn backend(&self) -> &BackendChoice;

    /// Listens on `at`; connections to it arrive as [`Event::Accepted`].
    /// With `shared`, every transport of this process that listens on the
    /// same endpoint with `shared` takes a share of its connections (TCP:
    /// SO_REUSEPORT; Unix: one socket, accepted from by each). Returns the
    /// listener and the endpoint it is bound to (e.g. the port chosen for
    /// port 0).
    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError>;

    /// SPEC TRN-1: starts connecting to `to` and returns the new
    /// connection's id at once (its state is `Connecting`); `Connected`, or
    /// `Closed` with [`CloseReason::ConnectFailed`], follows from
    /// [`Transport::poll`] (SPEC TRN-3). Bytes may be sent before it is up.
    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError>;

    /// SPEC TRN-1/TRN-2/TRN-5: queues all of `bytes` on `conn`, or none of
    /// them, without blocking and without altering them; they go out with
    /// the next poll. A full queue is [`SendError::BufferFull`]: retry after
    /// [`Event::Writable`].
    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError>;

    /// As [`Transport::send`], for bytes shared by many connections (one
    /// event fanned out to every subscriber): a transport that can queue
    /// them by reference does, with no copy in user space. By default they
    /// are copied as by `send`.
    fn send_shared(&mut self, conn: ConnId, bytes: &Bytes) -> Result<(), SendError> {
        self.send(conn, bytes)
    }

    /// Bytes accepted on `conn` and not yet handed to the peer (0 for an
    /// unknown id).
    fn queued(&self, conn: ConnId) -> usize;

    /// Asks for an [`Event::Writable`] once `conn`'s queue is at most half
    /// full (as after a refused send), for a producer that held back on its
    /// own (SPEC TRN-2).
    fn want_writable(&mut self, conn: ConnId);

    /// Lowers the most bytes `conn` may have queued (SPEC MEM-5: a
    /// per-connection cap well below the core's send memory) to `max`,
    /// never above the transport's own limit; [`Event::Writable`] then
    /// comes at half of it. A transport with no per-connection limit
    /// ignores it.
    fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
        let _ = (conn, max);
    }

    /// Stops reading from `conn` so that its peer is backpressured; nothing
    /// is lost and no memory grows (bytes already in flight may still
    /// arrive).
    fn pause_reading(&mut self, conn: ConnId);

    /// Reads from `conn` again after [`Transport::pause_reading`].
    fn resume_reading(&mut self, conn: ConnId);

    /// SPEC TRN-1: closes `conn` once the bytes already accepted are on
    /// their way; [`Event::Closed`] with [`CloseReason::Local`] follows
    /// (SPEC TRN-3). Bytes that arrive after this are discarded. An unknown
    /// or dead id is ignored.
    fn close(&mut self, conn: ConnId);

    /// Moves bytes, waits up to `timeout` (`None`: until something happens;
    /// a transport with nothing to wait for returns at once) and appends
    /// what happened to `events`. It may return with no events.
    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()>;

    /// A handle other threads use to make the current or next poll return
    /// with [`Event::Woken`].
    fn waker(&self) -> Waker;

    /// Whether half the transport's receive memory is lent out in
    /// [`RecvBuf`]s now, not counting `untaken` lent buffers of deliveries
    /// the receiver has not looked at yet (the rest of the batch it is
    /// working through): a receiver that would keep a lent buffer (or
    /// slices of it) should then copy it and drop the loan, so that the
    /// connections are not starved of receive memory. Asked as each
    /// delivery is taken; false for a transport on ordinary memory.
    fn receive_pressure(&self, untaken: usize) -> bool {
        let _ = untaken;
        false
    }

    /// Counters.
    fn stats(&self) -> DriverStats;

    /// The pool the transport receives into and sends from, for its
    /// accounting report (SPEC MEM-3); `None` for a transport on ordinary
    /// memory.
    fn region(&self) -> Option<&dtp_pool::Region> {
        None
    }
}

/// A boxed transport is a transport, so tests and the runtime can pick one
/// at run time.
impl<T: Transport + ?Sized> Transport for Box<T> {
    fn backend(&self) -> &BackendChoice {
        (**self).backend()
    }
    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        (**self).listen(at, shared)
    }
    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        (**self).connect(to)
    }
    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        (**self).send(conn, bytes)
    }
    fn send_shared(&mut self, conn: ConnId, bytes: &Bytes) -> Result<(), SendError> {
        (**self).send_shared(conn, bytes)
    }
    fn queued(&self, conn: ConnId) -> usize {
        (**self).queued(conn)
    }
    fn want_writable(&mut self, conn: ConnId) {
        (**self).want_writable(conn);
    }
    fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
        (**self).limit_send_queue(conn, max);
    }
    fn pause_reading(&mut self, conn: ConnId) {
        (**self).pause_reading(conn);
    }
    fn resume_reading(&mut self, conn: ConnId) {
        (**self).resume_reading(conn);
    }
    fn close(&mut self, conn: ConnId) {
        (**self).close(conn);
    }
    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        (**self).poll(events, timeout)
    }
    fn waker(&self) -> Waker {
        (**self).waker()
    }
    fn stats(&self) -> DriverStats {
        (**self).stats()
    }
    fn receive_pressure(&self, untaken: usize) -> bool {
        (**self).receive_pressure(untaken)
    }
    fn region(&self) -> Option<&dtp_pool::Region> {
        (**self).region()
    }
}

type ReceiveHandler<'h> = Box<dyn FnMut(ConnId, &[u8]) + 'h>;
type StateHandler<'h> = Box<dyn FnMut(ConnId, ConnectionState) + 'h>;
type AcceptHandler<'h> = Box<dyn FnMut(ListenerId, ConnId) + 'h>;
type WritableHandler<'h> = Box<dyn FnMut(ConnId) + 'h>;

/// SPEC TRN-1/TRN-3 in the seed's own form: a transport whose polled events
/// are handed to registered handlers, `on_receive(handler(id, bytes))` and
/// `on_connection_state_change(handler(id, state))`.
///
/// Handlers run inside [`Callbacks::poll`], after the transport has
/// returned, so they cannot reach it; one that wants to reply records what
/// to send and the caller sends it through [`Callbacks::transport`]
/// afterwards. Events without a handler are dropped.
pub struct Callbacks<'h, T> {
    transport: T,
    events: Vec<Event>,
    on_receive: Option<ReceiveHandler<'h>>,
    on_state: Option<StateHandler<'h>>,
    on_accept: Option<AcceptHandler<'h>>,
    on_writable: Option<WritableHandler<'h>>,
}

impl<'h, T: Transport> Callbacks<'h, T> {
    /// Wraps `transport`; no handler is registered yet.
    pub fn new(transport: T) -> Self {
        Self {
            transport,
            events: Vec::new(),
            on_receive: None,
            on_state: None,
            on_accept: None,
            on_writable: None,
        }
    }

    /// SPEC TRN-1 `onReceive(handler(id, bytes))`: `handler` gets every
    /// received byte, unaltered and in order (SPEC TRN-5). Replaces an
    /// earlier handler.
    pub fn on_receive(&mut self, handler: impl FnMut(ConnId, &[u8]) + 'h) -> &mut Self {
        self.on_receive = Some(Box::new(handler));
        self
    }

    /// SPEC TRN-1/TRN-3 `onConnectionStateChange(handler(id, state))`:
    /// `handler` gets every state change, of outgoing and accepted
    /// connections alike (`Connecting` from [`Callbacks::connect`]).
    /// Replaces an earlier handler.
    pub fn on_connection_state_change(
        &mut self,
        handler: impl FnMut(ConnId, ConnectionState) + 'h,
    ) -> &mut Self {
        self.on_state = Some(Box::new(handler));
        self
    }

    /// `handler(listener, id)` hears of each accepted connection (its `Up`
    /// also reaches the state handler).
    pub fn on_accept(&mut self, handler: impl FnMut(ListenerId, ConnId) + 'h) -> &mut Self {
        self.on_accept = Some(Box::new(handler));
        self
    }

    /// `handler(id)` hears that a refused producer may send again (SPEC TRN-2).
    pub fn on_writable(&mut self, handler: impl FnMut(ConnId) + 'h) -> &mut Self {
        self.on_writable = Some(Box::new(handler));
        self
    }

    /// SPEC TRN-1 `connect(endpoint)`: as [`Transport::connect`], telling
    /// the state handler that the connection is `Connecting`.
    pub fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let conn = self.transport.connect(to)?;
        if let Some(h) = &mut self.on_state {
            h(conn, ConnectionState::Connecting);
        }
        Ok(conn)
    }

    /// Polls the transport (see [`Transport::poll`]) and runs the handlers
    /// on what happened, in order; returns how many events there were.
    pub fn poll(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        self.transport.poll(&mut self.events, timeout)?;
        let n = self.events.len();
        for event in self.events.drain(..) {
            if let Event::Accepted { listener, conn } = event
                && let Some(h) = &mut self.on_accept
            {
                h(listener, conn);
            }
            if let Some((conn, state)) = event.state()
                && let Some(h) = &mut self.on_state
            {
                h(conn, state);
            }
            match event {
                Event::Received { conn, data } => {
                    if let Some(h) = &mut self.on_receive {
                        h(conn, &data);
                    }
                }
                Event::Writable { conn } => {
                    if let Some(h) = &mut self.on_writable {
                        h(conn);
                    }
                }
                _ => {}
            }
        }
        Ok(n)
    }

    /// The transport, to send and close.
    pub fn transport(&mut self) -> &mut T {
        &mut self.transport
    }

    /// Unwraps the transport (the handlers are dropped).
    pub fn into_inner(self) -> T {
        self.transport
    }
}
