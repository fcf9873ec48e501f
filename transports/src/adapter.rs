//! The Transport_Adapter layer (SPEC §1.9, TRN-1 … TRN-5): one interface
//! that every transport implements, so the DTP engine above it never knows
//! whether its bytes cross TCP, an in-memory pipe or a fault-injecting
//! wrapper (SPEC ARCH-1; by ARCH-2 only the engine calls it, never the
//! application).
//!
//! The spec's interface is callback-shaped (`onReceive(handler)`,
//! `onConnectionStateChange(handler)`). Here it is sans-callback, in the
//! manner of the [`Driver`](crate::Driver): the adapter is polled and appends
//! [`AdapterEvent`]s, which keeps it free of re-entrancy (a handler that
//! sends from inside a callback) and lets one thread drive many adapters.
//! [`Callbacks`] turns the polled events back into the spec's handler form
//! for users who want it.
//!
//! This module owns the trait and its vocabulary only; it never touches a
//! socket.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use crate::driver::{CloseReason, ConnId, ListenerId};
use crate::sendq::SendError;

/// Where a connection goes, or where a listener listens (SPEC TRN-1's
/// `endpoint`). Each adapter speaks some kinds and refuses the others with
/// [`TransportError::UnsupportedEndpoint`].
///
/// Written as a URL-like string (`tcp://127.0.0.1:7000`, `mem://gateway`)
/// by [`fmt::Display`] and read back by [`FromStr`]. More kinds (WebSocket,
/// QUIC, RTSP-interleaved, Unix sockets, BLE) join as their adapters do
/// (SPEC TRN-4), hence `non_exhaustive`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Endpoint {
    /// A TCP address; port 0 in [`TransportAdapter::listen`] picks a free port.
    Tcp(SocketAddr),
    /// A name on a [`MemoryHub`](crate::MemoryHub).
    Memory(String),
}

impl Endpoint {
    /// The URL scheme of this kind of endpoint (`tcp`, `mem`).
    pub fn scheme(&self) -> &'static str {
        match self {
            Self::Tcp(_) => "tcp",
            Self::Memory(_) => "mem",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "tcp://{addr}"),
            Self::Memory(name) => write!(f, "mem://{name}"),
        }
    }
}

/// An endpoint string that could not be read; [`fmt::Display`] says why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseEndpointError {
    input: String,
    why: &'static str,
}

impl fmt::Display for ParseEndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoint {:?}: {}", self.input, self.why)
    }
}

impl std::error::Error for ParseEndpointError {}

impl FromStr for Endpoint {
    type Err = ParseEndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let error = |why| ParseEndpointError {
            input: s.to_owned(),
            why,
        };
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| error("expected scheme://address, e.g. tcp://127.0.0.1:7000"))?;
        match scheme {
            "tcp" => rest
                .parse()
                .map(Self::Tcp)
                .map_err(|_| error("expected tcp://IP:PORT")),
            "mem" if rest.is_empty() => Err(error("a mem:// endpoint needs a name")),
            "mem" => Ok(Self::Memory(rest.to_owned())),
            _ => Err(error("unknown scheme: expected tcp:// or mem://")),
        }
    }
}

/// A connection's state as reported to the engine (SPEC TRN-1's `state` in
/// `onConnectionStateChange(handler(id, state))`, TRN-3).
///
/// Every connection goes `Connecting` (outgoing only) → `Up` → `Down`, or
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

/// What an adapter reports from [`TransportAdapter::poll`] (SPEC TRN-1's
/// `onReceive` and `onConnectionStateChange`, as polled events).
///
/// Order, per connection: `StateChanged(Connecting)` (outgoing only), or
/// `Accepted` (incoming only); then `StateChanged(Up)`; then `Received` and
/// `Writable` in any mix; then one `StateChanged(Down)`. Events of different
/// connections interleave freely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdapterEvent {
    /// A listener accepted a connection; `StateChanged(Up)` for it follows.
    Accepted {
        /// The listener, as returned by [`TransportAdapter::listen`].
        listener: ListenerId,
        /// The new connection.
        id: ConnId,
    },
    /// SPEC TRN-3: the connection's state changed.
    StateChanged {
        /// The connection.
        id: ConnId,
        /// Its new state.
        state: ConnectionState,
    },
    /// SPEC TRN-1/TRN-5: bytes arrived, exactly as the peer sent them and in
    /// order; how a stream is cut into events is the transport's business
    /// (and a fault injector's), never the bytes.
    Received {
        /// The connection.
        id: ConnId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// SPEC TRN-2: a producer refused with [`SendError::BufferFull`] (or that
    /// asked with [`TransportAdapter::want_writable`]) may send again.
    Writable {
        /// The connection.
        id: ConnId,
    },
}

/// Why an adapter could not listen or connect.
#[derive(Debug)]
#[non_exhaustive]
pub enum TransportError {
    /// This adapter does not speak the endpoint's transport (SPEC TRN-4: one
    /// adapter per transport).
    UnsupportedEndpoint {
        /// The adapter's kind, e.g. `tcp` or `memory`.
        adapter: &'static str,
        /// The endpoint it was given.
        endpoint: Endpoint,
    },
    /// Something already listens on this endpoint.
    AddressInUse(Endpoint),
    /// The adapter's connection table is full; close a connection first.
    TooManyConnections,
    /// The operating system refused.
    Io(io::Error),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedEndpoint { adapter, endpoint } => write!(
                f,
                "the {adapter} adapter cannot reach {endpoint}: use an adapter for `{}`",
                endpoint.scheme()
            ),
            Self::AddressInUse(endpoint) => write!(f, "{endpoint} is already in use"),
            Self::TooManyConnections => {
                f.write_str("connection table full: close a connection or raise the limit")
            }
            Self::Io(e) => write!(f, "transport IO error: {e}"),
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

/// SPEC TRN-1 … TRN-5: the Transport_Adapter, the one interface between the
/// DTP engine and any transport.
///
/// Connections are named by [`ConnId`]: generational, so an id that went
/// `Down` is refused ([`SendError::UnknownConnection`]) even after its slot
/// is reused. Ids are only meaningful to the adapter that issued them.
///
/// Nothing here blocks except [`TransportAdapter::poll`], and that only up to
/// its timeout. Every adapter is driven by one thread.
pub trait TransportAdapter {
    /// Listens on `endpoint`; connections to it arrive as
    /// [`AdapterEvent::Accepted`]. Returns the listener and the endpoint it
    /// is bound to (e.g. the port chosen for port 0).
    fn listen(&mut self, endpoint: &Endpoint) -> Result<(ListenerId, Endpoint), TransportError>;

    /// SPEC TRN-1: starts connecting to `endpoint` and returns the new
    /// connection's id at once; `StateChanged(Connecting)` then `Up`, or
    /// `Down(ConnectFailed)`, follow from [`TransportAdapter::poll`]
    /// (SPEC TRN-3). Bytes may be sent before it is up.
    fn connect(&mut self, endpoint: &Endpoint) -> Result<ConnId, TransportError>;

    /// SPEC TRN-1: closes `id` once the bytes already accepted by
    /// [`TransportAdapter::send`] are on their way; `StateChanged(Down(Local))`
    /// follows (SPEC TRN-3). Bytes that arrive after this are discarded. An
    /// unknown or dead id is ignored.
    fn disconnect(&mut self, id: ConnId);

    /// SPEC TRN-1/TRN-2/TRN-5: queues all of `bytes` on `id`, or none of
    /// them, without blocking and without altering them. A full queue is
    /// [`SendError::BufferFull`]: retry after [`AdapterEvent::Writable`].
    fn send(&mut self, id: ConnId, bytes: &[u8]) -> Result<(), SendError>;

    /// Bytes accepted by [`TransportAdapter::send`] on `id` and not yet
    /// handed to the peer (0 for an unknown id).
    fn queued(&self, id: ConnId) -> usize;

    /// Asks for an [`AdapterEvent::Writable`] once `id`'s queue is at most
    /// half full, for a producer that held back on its own (SPEC TRN-2).
    fn want_writable(&mut self, id: ConnId);

    /// Stops delivering bytes from `id` so that its peer is backpressured;
    /// nothing is lost and no memory grows (bytes already in flight may still
    /// arrive).
    fn pause_reading(&mut self, id: ConnId);

    /// Delivers bytes from `id` again after [`TransportAdapter::pause_reading`].
    fn resume_reading(&mut self, id: ConnId);

    /// Moves bytes, waits up to `timeout` (`None`: until something happens;
    /// adapters with nothing to wait for return at once) and appends what
    /// happened to `events` (SPEC TRN-1/TRN-3: the receive and state-change
    /// callbacks, polled). It may return with no events.
    fn poll(
        &mut self,
        events: &mut Vec<AdapterEvent>,
        timeout: Option<Duration>,
    ) -> Result<(), TransportError>;
}

/// A boxed adapter is an adapter, so tests and the engine can pick one at run time.
impl<A: TransportAdapter + ?Sized> TransportAdapter for Box<A> {
    fn listen(&mut self, endpoint: &Endpoint) -> Result<(ListenerId, Endpoint), TransportError> {
        (**self).listen(endpoint)
    }
    fn connect(&mut self, endpoint: &Endpoint) -> Result<ConnId, TransportError> {
        (**self).connect(endpoint)
    }
    fn disconnect(&mut self, id: ConnId) {
        (**self).disconnect(id);
    }
    fn send(&mut self, id: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        (**self).send(id, bytes)
    }
    fn queued(&self, id: ConnId) -> usize {
        (**self).queued(id)
    }
    fn want_writable(&mut self, id: ConnId) {
        (**self).want_writable(id);
    }
    fn pause_reading(&mut self, id: ConnId) {
        (**self).pause_reading(id);
    }
    fn resume_reading(&mut self, id: ConnId) {
        (**self).resume_reading(id);
    }
    fn poll(
        &mut self,
        events: &mut Vec<AdapterEvent>,
        timeout: Option<Duration>,
    ) -> Result<(), TransportError> {
        (**self).poll(events, timeout)
    }
}

type ReceiveHandler<'h> = Box<dyn FnMut(ConnId, &[u8]) + 'h>;
type StateHandler<'h> = Box<dyn FnMut(ConnId, ConnectionState) + 'h>;
type AcceptHandler<'h> = Box<dyn FnMut(ListenerId, ConnId) + 'h>;
type WritableHandler<'h> = Box<dyn FnMut(ConnId) + 'h>;

/// SPEC TRN-1/TRN-3 in the spec's own form: an adapter whose polled events
/// are handed to registered handlers, `on_receive(handler(id, bytes))` and
/// `on_connection_state_change(handler(id, state))`.
///
/// Handlers run inside [`Callbacks::poll`], after the adapter has returned,
/// so they cannot reach the adapter; one that wants to reply records what to
/// send and the caller sends it through [`Callbacks::adapter`] afterwards.
/// Events without a handler are dropped.
pub struct Callbacks<'h, A> {
    adapter: A,
    events: Vec<AdapterEvent>,
    on_receive: Option<ReceiveHandler<'h>>,
    on_state: Option<StateHandler<'h>>,
    on_accept: Option<AcceptHandler<'h>>,
    on_writable: Option<WritableHandler<'h>>,
}

impl<'h, A: TransportAdapter> Callbacks<'h, A> {
    /// Wraps `adapter`; no handler is registered yet.
    pub fn new(adapter: A) -> Self {
        Self {
            adapter,
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
    /// connections alike. Replaces an earlier handler.
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

    /// Polls the adapter (see [`TransportAdapter::poll`]) and runs the
    /// handlers on what happened, in order; returns how many events there were.
    pub fn poll(&mut self, timeout: Option<Duration>) -> Result<usize, TransportError> {
        self.adapter.poll(&mut self.events, timeout)?;
        let n = self.events.len();
        for event in self.events.drain(..) {
            match event {
                AdapterEvent::Accepted { listener, id } => {
                    if let Some(h) = &mut self.on_accept {
                        h(listener, id);
                    }
                }
                AdapterEvent::StateChanged { id, state } => {
                    if let Some(h) = &mut self.on_state {
                        h(id, state);
                    }
                }
                AdapterEvent::Received { id, bytes } => {
                    if let Some(h) = &mut self.on_receive {
                        h(id, &bytes);
                    }
                }
                AdapterEvent::Writable { id } => {
                    if let Some(h) = &mut self.on_writable {
                        h(id);
                    }
                }
            }
        }
        Ok(n)
    }

    /// The adapter, to connect, send and disconnect.
    pub fn adapter(&mut self) -> &mut A {
        &mut self.adapter
    }

    /// Unwraps the adapter (the handlers are dropped).
    pub fn into_inner(self) -> A {
        self.adapter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_read_back_what_they_print() {
        for text in ["tcp://127.0.0.1:7000", "tcp://[::1]:80", "mem://gateway"] {
            let e: Endpoint = text.parse().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(e.to_string(), text);
        }
        for bad in ["127.0.0.1:80", "tcp://nowhere", "mem://", "ble://x"] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
    }
}
