//! SPEC TRN-1 … TRN-5 over QUIC: [`Quic`] carries a connection's byte
//! stream on one bidirectional QUIC stream (RFC 9000, TLS 1.3 through
//! rustls, ALPN `dtp/1`), with quinn-proto — the sans-IO QUIC machine —
//! driven on the core's own UDP sockets ([`Datagrams`]) by the core's own
//! thread: no second runtime, no thread of its own.
//!
//! It wraps the core's transport and speaks `quic:HOST:PORT` endpoints
//! itself, passing every other endpoint through to the inner transport
//! (so `Quic<WebSocket<Driver>>` speaks QUIC, WebSocket, TCP and Unix).
//! A listener is a UDP socket with its quinn-proto endpoint; an outgoing
//! connection gets a UDP socket and endpoint of its own, connected to the
//! server, so that an ICMP refusal reaches it (a connect to a port nobody
//! listens on fails at once, as on TCP, instead of after the idle timeout).
//!
//! The driver's calls, in order, each poll (quinn-proto's documented
//! order per connection: transmit, timeout, endpoint events, app events):
//!
//! | step | what |
//! |---|---|
//! | 1 | timers that fell due: `handle_timeout` |
//! | 2 | every connection touched: endpoint events, app events (mapped to [`Event`]s), the user's queued bytes into the stream, `poll_transmit` → [`Datagrams::send_to`] (GSO batches), `poll_timeout` filed |
//! | 3 | the inner transport's poll, for at most the time to the next timer |
//! | 4 | each datagram received → `Endpoint::handle`: a new connection accepted (or refused past [`QuicConfig::max_connections`]), an event for a connection, or a stateless answer sent |
//! | 5 | steps 1 and 2 again for what the datagrams touched |
//!
//! **One stream per connection.** DTP's own frames carry their agreement
//! (SPEC SEQ-4) and are ordered by the resume manager's sequence numbers,
//! so the connection's one byte stream is all DTP needs: the client's
//! first bidirectional stream carries it both ways, exactly as TCP would
//! (SPEC TRN-5), and a peer may open no other. A stream per agreement was
//! considered — it would spare one agreement's loss recovery from
//! blocking another's (QUIC's answer to head-of-line blocking) — but it
//! would move ordering and framing that DTP already does into the
//! transport, make the stream count a peer-controlled resource to bound,
//! and leave TCP, WebSocket and QUIC with different semantics under one
//! `Transport` trait. A QUIC stream is announced to the peer only with a
//! STREAM frame, so our client sends an empty one as soon as the
//! handshake is done: a server may then speak first. A client of another
//! QUIC stack (quinn's `open_bi`) announces the stream with its first
//! bytes; until then the server's bytes wait in its queue.
//!
//! **Backpressure** is the TCP transport's (SPEC TRN-2): `send` takes all
//! of its bytes or none into a bounded per-connection queue
//! ([`QuicConfig::max_send_queue`], lowered per connection by
//! `limit_send_queue`), which each poll moves into the stream as QUIC's
//! flow control and send window allow; a full queue is
//! [`SendError::BufferFull`] and [`Event::Writable`] follows at half of
//! it. Shared sends are queued by reference and handed to quinn-proto as
//! the same `Bytes`. A paused connection is not read: the stream's
//! flow-control window ([`QuicConfig::receive_window`]) then stops the
//! peer. Memory per connection is bounded by these two windows.
//!
//! **Closing.** `close` sends the queued bytes and a FIN, and closes the
//! connection once the peer has acknowledged them (no byte is cut by the
//! CONNECTION_CLOSE); the peer reads them, then the FIN, and reports
//! [`CloseReason::PeerClosed`]. Timers (idle timeout, keep-alive, loss
//! recovery, the closing period) are quinn-proto's, folded into `poll`'s
//! timeout.
//!
//! **Ids.** A connection id of this transport names either a QUIC
//! connection (even slot indices) or one of the inner transport's (odd:
//! twice the inner index plus one), so that the two never collide and
//! stay dense for a table indexed by slot.

mod config;
mod conn;

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::{ConnectionHandle, DatagramEvent, EndpointConfig};

pub use config::{
    ALPN, CertPin, QuicConfig, QuicConfigError, QuicIdentity, SecretDer, cert_sha256,
};
use conn::QConn;

use crate::driver::{BackendChoice, CloseReason, ConnId, DriverStats, ListenerId, Waker};
use crate::endpoint::Endpoint;
use crate::sendq::SendError;
use crate::slots::{SlotId, Slots};
use crate::transport::{Event, Transport, TransportError};
use crate::udp::{Datagrams, UdpEvent, UdpId};

/// Marks the generation of a [`ListenerId`] that is a QUIC listener (the
/// inner transport's are passed through unchanged).
const LISTENER_TAG: u32 = 1 << 31;

/// Most UDP payload one transmit carries: a GSO batch stays within one
/// IP datagram's 64 KiB.
const BATCH_BYTES: usize = 65_000;

/// A UDP socket and its quinn-proto endpoint.
struct Ep {
    udp: UdpId,
    endpoint: quinn_proto::Endpoint,
    /// The listener, for a server socket.
    listener: Option<ListenerId>,
    /// Its connections, by quinn-proto's handle.
    conns: HashMap<ConnectionHandle, SlotId>,
}

/// SPEC TRN-1 … TRN-5: DTP over QUIC, as a [`Transport`] wrapping `T`
/// (see the module docs).
pub struct Quic<T> {
    inner: T,
    config: QuicConfig,
    endpoint_config: Arc<EndpointConfig>,
    /// `None` for a client only ([`QuicIdentity::ClientOnly`]).
    server_config: Option<Arc<quinn_proto::ServerConfig>>,
    client_config: quinn_proto::ClientConfig,
    certificate: Option<rustls::pki_types::CertificateDer<'static>>,
    endpoints: Slots<Ep>,
    by_socket: HashMap<UdpId, SlotId>,
    conns: Slots<QConn>,
    /// Each connection's next timer, ordered.
    timers: BTreeSet<(Instant, SlotId)>,
    /// Connections to drive this round (listed more than once at worst).
    touched: Vec<SlotId>,
    /// Connections with transmits left when their socket's queue filled:
    /// driven again after the next inner poll.
    blocked: Vec<SlotId>,
    /// Events produced outside `poll` (a close reported at once).
    pending: Vec<Event>,
    inner_events: Vec<Event>,
    udp_events: Vec<UdpEvent>,
    /// Transmit scratch.
    buf: Vec<u8>,
}

impl<T: Transport + Datagrams> Quic<T> {
    /// `inner` with QUIC endpoints added: builds the TLS configurations
    /// (making or loading the certificate) once for every listener and
    /// connection.
    pub fn new(inner: T, config: QuicConfig) -> Result<Self, QuicConfigError> {
        let built = config.build()?;
        let endpoints = Slots::with_capacity(config.max_connections.saturating_add(64));
        Ok(Self {
            inner,
            endpoint_config: Arc::new(EndpointConfig::default()),
            server_config: built.server,
            client_config: built.client,
            certificate: built.certificate,
            endpoints,
            by_socket: HashMap::new(),
            conns: Slots::with_capacity(config.max_connections),
            timers: BTreeSet::new(),
            touched: Vec::new(),
            blocked: Vec::new(),
            pending: Vec::new(),
            inner_events: Vec::new(),
            udp_events: Vec::new(),
            buf: Vec::new(),
            config,
        })
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The DER bytes of the certificate this transport's listeners
    /// present; `None` for a client only.
    pub fn certificate(&self) -> Option<&[u8]> {
        self.certificate.as_deref()
    }

    /// The SHA-256 of [`Quic::certificate`], what a client pins
    /// ([`CertPin::Sha256`]).
    pub fn fingerprint(&self) -> Option<[u8; 32]> {
        self.certificate().map(cert_sha256)
    }

    /// A QUIC endpoint on a new UDP socket.
    fn new_endpoint(
        &mut self,
        at: SocketAddr,
        peer: Option<SocketAddr>,
        shared: bool,
        server: bool,
    ) -> Result<(SlotId, SocketAddr), TransportError> {
        let server_config = match (server, &self.server_config) {
            (false, _) => None,
            (true, Some(c)) => Some(c.clone()),
            (true, None) => {
                return Err(TransportError::Io(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "this QUIC transport only connects: it has no certificate to listen with",
                )));
            }
        };
        let (udp, local) = self.inner.bind_udp(at, peer, shared)?;
        let endpoint =
            quinn_proto::Endpoint::new(self.endpoint_config.clone(), server_config, true, None);
        let ep = Ep {
            udp,
            endpoint,
            listener: None,
            conns: HashMap::new(),
        };
        match self.endpoints.insert(ep) {
            Ok(id) => {
                self.by_socket.insert(udp, id);
                Ok((id, local))
            }
            Err(_) => {
                self.inner.close_udp(udp);
                Err(TransportError::TooManyConnections)
            }
        }
    }

    /// Drops an endpoint with no connection left (a client's).
    fn drop_endpoint(&mut self, ep: SlotId) {
        if let Some(e) = self.endpoints.remove(ep) {
            self.by_socket.remove(&e.udp);
            self.inner.close_udp(e.udp);
        }
    }

    /// Drives `id`: endpoint events, app events, the user's bytes into the
    /// stream, transmits, and its timer filed. A connection that drained
    /// is freed.
    fn drive(&mut self, id: SlotId, now: Instant, events: &mut Vec<Event>) {
        let user = quic_id(id);
        let Self {
            inner,
            endpoints,
            conns,
            timers,
            buf,
            blocked,
            ..
        } = self;
        let Some(c) = conns.get_mut(id) else {
            return;
        };
        let Some(ep) = endpoints.get_mut(c.ep) else {
            return;
        };
        let mut drained = false;
        for _ in 0..8 {
            let mut progressed = false;
            while let Some(event) = c.conn.poll_endpoint_events() {
                progressed = true;
                drained |= event.is_drained();
                if let Some(back) = ep.endpoint.handle_event(c.handle, event) {
                    c.conn.handle_event(back);
                }
            }
            progressed |= c.app_events(user, now, events);
            progressed |= c.flush(user, now, events);
            // Transmit while the socket's queue has room; the rest goes
            // when it drains (the inner poll returns on that).
            let segments = inner.max_segments(ep.udp).max(1);
            loop {
                if !inner.udp_room(ep.udp) {
                    blocked.push(id);
                    break;
                }
                let mtu = usize::from(c.conn.current_mtu()).max(1);
                let most = segments.min(BATCH_BYTES / mtu).max(1);
                buf.clear();
                let Some(t) = c.conn.poll_transmit(now, most, buf) else {
                    break;
                };
                progressed = true;
                let segment = t.segment_size.unwrap_or(t.size);
                // A full queue loses the batch, as UDP may: QUIC resends.
                let _ = inner.send_to(ep.udp, t.destination, &buf[..t.size], segment);
            }
            if !progressed {
                break;
            }
        }
        let next = c.conn.poll_timeout();
        if next != c.timer {
            if let Some(old) = c.timer.take() {
                timers.remove(&(old, id));
            }
            if let Some(t) = next {
                timers.insert((t, id));
            }
            c.timer = next;
        }
        if drained || (c.gone && c.conn.is_drained()) {
            if let Some(old) = c.timer.take() {
                timers.remove(&(old, id));
            }
            let (ep_id, handle, outgoing) = (c.ep, c.handle, c.listener.is_none());
            ep.conns.remove(&handle);
            conns.remove(id);
            if outgoing {
                self.drop_endpoint(ep_id);
            }
        }
    }

    /// Runs the timers due by `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(&(t, id)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            if let Some(c) = self.conns.get_mut(id) {
                c.timer = None;
                c.conn.handle_timeout(now);
                self.touched.push(id);
            }
        }
    }

    /// Drives every connection touched since the last round.
    fn drive_touched(&mut self, now: Instant, events: &mut Vec<Event>) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for id in touched.drain(..) {
            self.drive(id, now, events);
        }
        // Drive again what driving touched (a close reported at once).
        if self.touched.is_empty() {
            self.touched = touched;
        }
    }

    /// Feeds what the UDP sockets received to the endpoints.
    fn receive(&mut self, now: Instant, events: &mut Vec<Event>) {
        let mut udp = std::mem::take(&mut self.udp_events);
        self.inner.take_udp_events(&mut udp);
        for event in udp.drain(..) {
            match event {
                UdpEvent::Datagram(d) => {
                    let Some(&ep) = self.by_socket.get(&d.socket) else {
                        continue;
                    };
                    for datagram in d.segments() {
                        self.datagram(ep, now, d.from, datagram);
                    }
                }
                UdpEvent::Error { socket, errno } => self.socket_error(socket, errno, now, events),
            }
        }
        self.udp_events = udp;
    }

    /// One datagram for endpoint `ep`.
    fn datagram(&mut self, ep_id: SlotId, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let Some(ep) = self.endpoints.get_mut(ep_id) else {
            return;
        };
        self.buf.clear();
        let data = BytesMut::from(datagram);
        let Some(event) = ep
            .endpoint
            .handle(now, from, None, None, data, &mut self.buf)
        else {
            return;
        };
        match event {
            DatagramEvent::ConnectionEvent(handle, event) => {
                if let Some(&id) = ep.conns.get(&handle)
                    && let Some(c) = self.conns.get_mut(id)
                {
                    c.conn.handle_event(event);
                    self.touched.push(id);
                }
            }
            DatagramEvent::Response(t) => {
                let _ = self
                    .inner
                    .send_to(ep.udp, t.destination, &self.buf[..t.size], t.size);
            }
            DatagramEvent::NewConnection(incoming) => {
                let full = self.conns.len() >= self.config.max_connections;
                let Some(listener) = ep.listener.filter(|_| !full) else {
                    // Not a server socket, or the table is full: refused
                    // statelessly (the client hears CONNECTION_REFUSED).
                    let t = ep.endpoint.refuse(incoming, &mut self.buf);
                    let _ = self
                        .inner
                        .send_to(ep.udp, t.destination, &self.buf[..t.size], t.size);
                    return;
                };
                match ep.endpoint.accept(incoming, now, &mut self.buf, None) {
                    Ok((handle, conn)) => {
                        let limit = self.config.max_send_queue;
                        let c = QConn::new(conn, handle, ep_id, Some(listener), limit);
                        if let Ok(id) = self.conns.insert(c) {
                            ep.conns.insert(handle, id);
                            self.touched.push(id);
                        }
                    }
                    Err(e) => {
                        tracing::debug!(cause = %e.cause, "QUIC connection not accepted");
                        if let Some(t) = e.response {
                            let _ = self.inner.send_to(
                                ep.udp,
                                t.destination,
                                &self.buf[..t.size],
                                t.size,
                            );
                        }
                    }
                }
            }
        }
    }

    /// An error on a UDP socket: an outgoing connection's refusal ends its
    /// connect at once (SPEC TRN-3: `Closed` with `ConnectFailed`).
    fn socket_error(&mut self, socket: UdpId, errno: i32, now: Instant, events: &mut Vec<Event>) {
        let Some(&ep_id) = self.by_socket.get(&socket) else {
            return;
        };
        let Some(ep) = self.endpoints.get(ep_id) else {
            return;
        };
        if ep.listener.is_some() {
            return;
        }
        let ids: Vec<SlotId> = ep.conns.values().copied().collect();
        for id in ids {
            if let Some(c) = self.conns.get_mut(id)
                && !c.up
                && !c.gone
            {
                c.end(quic_id(id), CloseReason::ConnectFailed(errno), now, events);
                self.touched.push(id);
            }
        }
    }

    /// The QUIC connection a user's id names (live for the user), if it is one.
    fn quic_conn(&mut self, conn: ConnId) -> Option<&mut QConn> {
        self.conns.get_mut(quic_slot(conn)?).filter(|c| !c.gone)
    }

    /// Marks the QUIC connection `conn` names for driving this round.
    fn touch(&mut self, conn: ConnId) {
        if let Some(id) = quic_slot(conn) {
            self.touched.push(id);
        }
    }
}

/// The user's id of QUIC connection `id` (even indices).
fn quic_id(id: SlotId) -> ConnId {
    ConnId(SlotId::from_parts(id.index() * 2, id.generation()))
}

/// The QUIC connection's slot behind a user's even id.
fn quic_slot(id: ConnId) -> Option<SlotId> {
    let slot = id.0;
    slot.index()
        .is_multiple_of(2)
        .then(|| SlotId::from_parts(slot.index() / 2, slot.generation()))
}

/// The user's id of the inner transport's connection `id` (odd indices).
fn outer_id(id: ConnId) -> ConnId {
    ConnId(SlotId::from_parts(id.0.index() * 2 + 1, id.0.generation()))
}

/// The inner transport's id behind a user's odd id.
fn inner_id(id: ConnId) -> Option<ConnId> {
    let slot = id.0;
    (!slot.index().is_multiple_of(2))
        .then(|| ConnId(SlotId::from_parts(slot.index() / 2, slot.generation())))
}

/// Translates an inner event's connection id into the user's.
fn outer_event(event: Event) -> Event {
    match event {
        Event::Accepted { listener, conn } => Event::Accepted {
            listener,
            conn: outer_id(conn),
        },
        Event::Connected { conn } => Event::Connected {
            conn: outer_id(conn),
        },
        Event::Received { conn, data } => Event::Received {
            conn: outer_id(conn),
            data,
        },
        Event::Writable { conn } => Event::Writable {
            conn: outer_id(conn),
        },
        Event::Closed { conn, reason } => Event::Closed {
            conn: outer_id(conn),
            reason,
        },
        Event::Woken => Event::Woken,
    }
}

/// SPEC TRN-1 … TRN-5 over QUIC, every other endpoint through `T`.
impl<T: Transport + Datagrams> Transport for Quic<T> {
    fn backend(&self) -> &BackendChoice {
        self.inner.backend()
    }

    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        let Endpoint::Quic(addr) = at else {
            return self.inner.listen(at, shared);
        };
        let (ep, local) = self.new_endpoint(*addr, None, shared, true)?;
        let listener = ListenerId(SlotId::from_parts(
            ep.index(),
            ep.generation() | LISTENER_TAG,
        ));
        if let Some(e) = self.endpoints.get_mut(ep) {
            e.listener = Some(listener);
        }
        Ok((listener, Endpoint::Quic(local)))
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let Endpoint::Quic(addr) = to else {
            return self.inner.connect(to).map(outer_id);
        };
        if self.conns.len() >= self.config.max_connections {
            return Err(TransportError::TooManyConnections);
        }
        let at = match addr {
            SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        };
        let (ep_id, _) = self.new_endpoint(at, Some(*addr), false, false)?;
        let now = Instant::now();
        let made = match self.endpoints.get_mut(ep_id) {
            Some(ep) => ep
                .endpoint
                .connect(
                    now,
                    self.client_config.clone(),
                    *addr,
                    &self.config.server_name,
                )
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string())),
            None => Err(io::Error::other("endpoint vanished")),
        };
        let (handle, conn) = match made {
            Ok(m) => m,
            Err(e) => {
                self.drop_endpoint(ep_id);
                return Err(e.into());
            }
        };
        let c = QConn::new(conn, handle, ep_id, None, self.config.max_send_queue);
        let Ok(id) = self.conns.insert(c) else {
            self.drop_endpoint(ep_id);
            return Err(TransportError::TooManyConnections);
        };
        if let Some(ep) = self.endpoints.get_mut(ep_id) {
            ep.conns.insert(handle, id);
        }
        // The handshake's first flight goes with the next poll.
        self.touched.push(id);
        Ok(quic_id(id))
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        if let Some(inner) = inner_id(conn) {
            return self.inner.send(inner, bytes);
        }
        let c = self.quic_conn(conn).ok_or(SendError::UnknownConnection)?;
        c.queue(Bytes::copy_from_slice(bytes))?;
        self.touch(conn);
        Ok(())
    }

    fn send_shared(&mut self, conn: ConnId, bytes: &Bytes) -> Result<(), SendError> {
        if let Some(inner) = inner_id(conn) {
            return self.inner.send_shared(inner, bytes);
        }
        let c = self.quic_conn(conn).ok_or(SendError::UnknownConnection)?;
        c.queue(bytes.clone())?;
        self.touch(conn);
        Ok(())
    }

    fn queued(&self, conn: ConnId) -> usize {
        if let Some(inner) = inner_id(conn) {
            return self.inner.queued(inner);
        }
        quic_slot(conn)
            .and_then(|id| self.conns.get(id))
            .filter(|c| !c.gone)
            .map_or(0, QConn::queued)
    }

    fn want_writable(&mut self, conn: ConnId) {
        if let Some(inner) = inner_id(conn) {
            return self.inner.want_writable(inner);
        }
        let mut events = std::mem::take(&mut self.pending);
        if let Some(c) = self.quic_conn(conn) {
            c.want_writable(conn, &mut events);
        }
        self.pending = events;
    }

    fn limit_send_queue(&mut self, conn: ConnId, max: usize) {
        if let Some(inner) = inner_id(conn) {
            return self.inner.limit_send_queue(inner, max);
        }
        let most = self.config.max_send_queue;
        if let Some(c) = self.quic_conn(conn) {
            c.limit = max.min(most);
        }
    }

    fn pause_reading(&mut self, conn: ConnId) {
        if let Some(inner) = inner_id(conn) {
            return self.inner.pause_reading(inner);
        }
        if let Some(c) = self.quic_conn(conn) {
            c.paused = true;
        }
    }

    fn resume_reading(&mut self, conn: ConnId) {
        if let Some(inner) = inner_id(conn) {
            return self.inner.resume_reading(inner);
        }
        let mut events = std::mem::take(&mut self.pending);
        if let Some(c) = self.quic_conn(conn)
            && c.paused
        {
            c.resume(conn, Instant::now(), &mut events);
            self.touch(conn);
        }
        self.pending = events;
    }

    fn close(&mut self, conn: ConnId) {
        if let Some(inner) = inner_id(conn) {
            return self.inner.close(inner);
        }
        let mut events = std::mem::take(&mut self.pending);
        if let Some(c) = self.quic_conn(conn) {
            c.close(conn, Instant::now(), &mut events);
            self.touch(conn);
        }
        self.pending = events;
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        crate::transport::hand_over(&mut self.pending, events);
        // Timers fire only after what has arrived is taken in (below): a
        // thread that was descheduled past an idle timeout must not close
        // a connection whose keep-alives wait in the socket.
        let now = Instant::now();
        self.drive_touched(now, events);
        let wait = if !events.is_empty() || !self.touched.is_empty() {
            Some(Duration::ZERO)
        } else {
            let next = self
                .timers
                .first()
                .map(|(t, _)| t.saturating_duration_since(now));
            match (timeout, next) {
                (Some(t), Some(n)) => Some(t.min(n)),
                (t, n) => t.or(n),
            }
        };
        let mut inner_events = std::mem::take(&mut self.inner_events);
        let result = self.inner.poll(&mut inner_events, wait);
        events.extend(inner_events.drain(..).map(outer_event));
        self.inner_events = inner_events;
        let now = Instant::now();
        self.receive(now, events);
        self.expire(now);
        // Connections blocked on a full UDP queue get another go too.
        self.touched.append(&mut self.blocked);
        self.drive_touched(now, events);
        crate::transport::hand_over(&mut self.pending, events);
        result
    }

    fn waker(&self) -> Waker {
        self.inner.waker()
    }

    fn receive_pressure(&self, untaken: usize) -> bool {
        self.inner.receive_pressure(untaken)
    }

    fn stats(&self) -> DriverStats {
        let inner = self.inner.stats();
        let quic = self
            .conns
            .ids()
            .filter_map(|id| self.conns.get(id))
            .filter(|c| !c.gone)
            .count();
        DriverStats {
            connections: inner.connections + quic,
            ..inner
        }
    }

    fn region(&self) -> Option<&dtp_pool::Region> {
        self.inner.region()
    }
}
