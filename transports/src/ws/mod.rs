//! SPEC TRN-1 … TRN-5 over WebSocket: [`WebSocket`] carries a byte stream
//! as RFC 6455 binary messages (subprotocol `dtp.v1`) on any transport that
//! carries a byte stream, TCP in practice.
//!
//! It wraps the core's transport and speaks `ws:HOST:PORT/PATH` endpoints
//! itself, passing every other endpoint through untouched (a `tcp:`
//! connection costs one failed table lookup per event). A listener's
//! connection is reported [`Event::Accepted`] only once its opening
//! handshake is done (the request head read by `dtp_codec::http`, the 101
//! sent); an outgoing one [`Event::Connected`] once the server's 101 is
//! checked. Sends become binary messages — a send larger than
//! [`WsConfig::max_message`] several — and received binary messages are
//! delivered as bytes: the stream is the concatenation of the payloads, so
//! TRN-5 holds whatever the peer's message boundaries. Pings are answered
//! with pongs; a close frame is echoed and reported as
//! [`CloseReason::PeerClosed`]; a protocol violation (a text message, a bad
//! frame) closes with the RFC's code and is reported as
//! [`CloseReason::Error`] (`EPROTO`).
//!
//! The send budget counts the user's payload only: [`Transport::queued`]
//! and the per-connection limit are in payload bytes, exactly as on TCP;
//! the inner connection is given a limit one sixteenth larger, for the
//! frame headers. A handshake that does not finish within
//! [`WsConfig::handshake_timeout`] is cut.

mod conn;
mod handshake;
mod inbound;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use dtp_codec::http::{HttpLimits, ResponseLimits, parse_request_head, parse_response_head};
use dtp_codec::ws::{CloseCode, Message, Opcode, Role, apply_mask, encode_header};

use crate::driver::{BackendChoice, CloseReason, ConnId, DriverStats, ListenerId, Waker};
use crate::endpoint::Endpoint;
use crate::framing::{Rng, closed_event, earlier, framing_forwards};
use crate::lent::RecvBuf;
use crate::sendq::SendError;
use crate::transport::{Event, Transport, TransportError};

use conn::{Phase, WsConn};
pub use handshake::SUBPROTOCOL;
use inbound::Piece;

/// How [`WebSocket`] frames and bounds its connections.
#[derive(Clone, Debug)]
pub struct WsConfig {
    /// The largest message taken from a peer, and the most payload one
    /// message carries when sending (default 1 MiB).
    pub max_message: usize,
    /// The most payload bytes a connection may have queued (default
    /// 3.75 MiB). The inner transport's own limit must be at least a
    /// sixteenth more, for the frame headers.
    pub max_send_queue: usize,
    /// How long an opening handshake may take, from the connection's
    /// start (default 10 s).
    pub handshake_timeout: Duration,
    /// Ceilings on a request head (server side).
    pub http: HttpLimits,
}

impl Default for WsConfig {
    fn default() -> Self {
        Self {
            max_message: 1 << 20,
            max_send_queue: 15 * (1 << 20) / 4,
            handshake_timeout: Duration::from_secs(10),
            http: HttpLimits::default(),
        }
    }
}

/// The inner connection's limit for a payload limit of `limit` bytes.
pub(crate) fn with_headers(limit: usize) -> usize {
    limit + limit / 16 + 64
}

/// The length of a frame header (RFC 6455 §5.2) for `len` payload bytes,
/// as [`encode_header`] writes it.
fn header_len(role: Role, len: usize) -> usize {
    let base = match len {
        0..=125 => 2,
        126..=0xFFFF => 4,
        _ => 10,
    };
    base + if role == Role::Client { 4 } else { 0 }
}

/// SPEC TRN-1: DTP over WebSocket, as a [`Transport`] wrapping `T`.
pub struct WebSocket<T: Transport> {
    inner: T,
    config: WsConfig,
    /// WebSocket listeners and their paths.
    listeners: HashMap<ListenerId, String>,
    conns: HashMap<ConnId, WsConn>,
    /// Handshakes in the order they began, for the timeout (stale entries
    /// are skipped).
    handshakes: VecDeque<(Instant, ConnId)>,
    inner_events: Vec<Event>,
    scratch: Vec<u8>,
    /// xorshift64* state for masking keys and handshake nonces.
    rng: Rng,
}

impl<T: Transport> WebSocket<T> {
    /// `inner` with WebSocket endpoints added.
    pub fn new(inner: T, config: WsConfig) -> Self {
        Self {
            inner,
            config,
            listeners: HashMap::new(),
            conns: HashMap::new(),
            handshakes: VecDeque::new(),
            inner_events: Vec::new(),
            scratch: Vec::new(),
            rng: Rng::new(),
        }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn random(&mut self) -> u64 {
        self.rng.next()
    }

    /// Queues a control frame (`Close`, `Pong`) on `conn`, outside the
    /// user's budget; a full queue drops it (the connection is then being
    /// torn down or the peer does not read).
    fn control(&mut self, conn: ConnId, opcode: Opcode, payload: &[u8]) {
        let Some(role) = self.conns.get(&conn).map(|c| c.role) else {
            return;
        };
        let mut frame = std::mem::take(&mut self.scratch);
        frame.clear();
        self.write_frame(role, opcode, payload, &mut frame);
        if self.inner.send(conn, &frame).is_ok()
            && let Some(c) = self.conns.get_mut(&conn)
        {
            c.send.record_other(frame.len());
        }
        self.scratch = frame;
    }

    /// Appends one whole frame of `payload` to `out`, masked for a client.
    fn write_frame(&mut self, role: Role, opcode: Opcode, payload: &[u8], out: &mut Vec<u8>) {
        let mask = (role == Role::Client).then(|| (self.random() as u32).to_be_bytes());
        let before = out.len();
        // The lengths are bounded by max_message and the control limit.
        if let Ok(h) = encode_header(role, true, opcode, payload.len() as u64, mask) {
            out.extend_from_slice(h.as_slice());
        }
        let start = out.len();
        out.extend_from_slice(payload);
        if let Some(key) = mask {
            apply_mask(&mut out[start..], key, 0);
        }
        debug_assert_eq!(start - before, header_len(role, payload.len()));
    }

    /// Ends `conn` with a close frame of `code`; `ending` is what the user
    /// hears when the inner connection is gone.
    fn fail(&mut self, conn: ConnId, code: CloseCode, ending: CloseReason) {
        let open = self
            .conns
            .get(&conn)
            .is_some_and(|c| matches!(c.phase, Phase::Open));
        if open {
            self.control(conn, Opcode::Close, &code.0.to_be_bytes());
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.phase = Phase::Closing;
            c.ending.get_or_insert(ending);
        }
        self.inner.close(conn);
    }

    /// Handles one inner event, appending what the user sees.
    fn inner_event(&mut self, event: Event, events: &mut Vec<Event>) {
        match event {
            Event::Accepted { listener, conn } => match self.listeners.get(&listener) {
                Some(_) => {
                    let c = WsConn::new(
                        Role::Server,
                        Phase::ServerHandshake { listener },
                        self.config.max_message,
                        self.config.max_send_queue,
                    );
                    self.handshakes.push_back((c.since, conn));
                    self.conns.insert(conn, c);
                    self.inner
                        .limit_send_queue(conn, with_headers(self.config.max_send_queue));
                }
                None => events.push(Event::Accepted { listener, conn }),
            },
            Event::Connected { conn } if self.conns.contains_key(&conn) => {}
            Event::Received { conn, data } if self.conns.contains_key(&conn) => {
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                match c.phase {
                    Phase::Open => self.frames(conn, data, events),
                    // Nothing more is delivered.
                    Phase::Closing => {}
                    Phase::ServerHandshake { .. } | Phase::ClientHandshake { .. } => {
                        c.rx.extend_from_slice(&data);
                        drop(data);
                        self.advance(conn, events);
                    }
                }
            }
            Event::Writable { conn } => match self.conns.get(&conn) {
                Some(c) if !(c.up && matches!(c.phase, Phase::Open)) => {}
                _ => events.push(Event::Writable { conn }),
            },
            Event::Closed { conn, reason } => {
                let wrapped = self.conns.remove(&conn);
                let wrapped = wrapped.map(|c| (c.up, c.role == Role::Client, c.ending));
                events.extend(closed_event(conn, reason, wrapped));
            }
            other => events.push(other),
        }
    }

    /// Reads what `conn` has received during its handshake: the head, then
    /// any frames that came with it.
    fn advance(&mut self, conn: ConnId, events: &mut Vec<Event>) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            match &c.phase {
                Phase::ServerHandshake { listener } => {
                    let listener = *listener;
                    if !self.server_head(conn, listener, events) {
                        return;
                    }
                }
                Phase::ClientHandshake { .. } => {
                    if !self.client_head(conn, events) {
                        return;
                    }
                }
                Phase::Open => {
                    let rest = std::mem::take(&mut c.rx);
                    if !rest.is_empty() {
                        self.frames(conn, RecvBuf::from(rest), events);
                    }
                    return;
                }
                Phase::Closing => {
                    c.rx.clear();
                    return;
                }
            }
        }
    }

    /// A server connection's request head, if whole: answered, and the
    /// connection reported. Returns whether to go on reading.
    fn server_head(&mut self, conn: ConnId, listener: ListenerId, events: &mut Vec<Event>) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        let (answer, used) = match parse_request_head(&c.rx, &self.config.http) {
            Ok(None) => return false,
            Ok(Some((head, n))) => {
                let path = self.listeners.get(&listener).map_or("/", String::as_str);
                (handshake::answer(&head, path), n)
            }
            Err(e) => (Err(handshake::refusal(e)), 0),
        };
        match answer {
            Ok(response) => {
                c.rx.advance(used);
                if self.inner.send(conn, &response).is_err() {
                    self.inner.close(conn);
                    return false;
                }
                c.send.record_other(response.len());
                c.phase = Phase::Open;
                c.up = true;
                events.push(Event::Accepted { listener, conn });
                true
            }
            Err(refusal) => {
                let _ = self.inner.send(conn, &refusal);
                c.phase = Phase::Closing;
                self.inner.close(conn);
                false
            }
        }
    }

    /// A client connection's response head, if whole: checked, the held
    /// frames sent, and the connection reported.
    fn client_head(&mut self, conn: ConnId, events: &mut Vec<Event>) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return false;
        };
        let Phase::ClientHandshake { key } = &c.phase else {
            return false;
        };
        let verdict = match parse_response_head(&c.rx, &ResponseLimits::default()) {
            Ok(None) => return false,
            Ok(Some((resp, n))) => handshake::accepted(&resp, key).map(|()| n),
            Err(_) => Err("the response head is malformed"),
        };
        match verdict {
            Ok(n) => {
                c.rx.advance(n);
                let held = std::mem::take(&mut c.send.held);
                if !held.is_empty() && self.inner.send(conn, &held).is_err() {
                    c.ending = Some(CloseReason::ConnectFailed(libc::ENOBUFS));
                    c.phase = Phase::Closing;
                    self.inner.close(conn);
                    return false;
                }
                c.phase = Phase::Open;
                c.up = true;
                events.push(Event::Connected { conn });
                // A producer refused while the handshake ran hears of room
                // once the held frames drain.
                self.inner.want_writable(conn);
                true
            }
            Err(why) => {
                tracing::debug!(?conn, why, "WebSocket handshake refused");
                c.ending = Some(CloseReason::ConnectFailed(libc::ECONNREFUSED));
                c.phase = Phase::Closing;
                self.inner.close(conn);
                false
            }
        }
    }

    /// The frames in `data`, received on an open connection: payload
    /// pieces delivered as they are (lent, unmasked in place), pings
    /// answered, a close echoed, a violation closed with its code.
    fn frames(&mut self, conn: ConnId, mut data: RecvBuf, events: &mut Vec<Event>) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if !matches!(c.phase, Phase::Open) {
                return;
            }
            let Some(piece) = c.inbound.next(&mut data) else {
                return;
            };
            match piece {
                Piece::Data(data) => {
                    if !data.is_empty() {
                        events.push(Event::Received { conn, data });
                    }
                }
                Piece::Control(Message::Ping(payload)) => {
                    self.control(conn, Opcode::Pong, &payload);
                }
                Piece::Control(Message::Close(frame)) => {
                    let code = frame.map_or(1000, |f| f.code.0);
                    self.fail(conn, CloseCode(code), CloseReason::PeerClosed);
                }
                Piece::Control(_) => {}
                Piece::Refused(code) => {
                    tracing::debug!(?conn, code = code.0, "WebSocket protocol error");
                    self.fail(conn, code, CloseReason::Error(libc::EPROTO));
                }
            }
        }
    }

    /// Cuts handshakes older than the timeout; the time until the next one
    /// is due.
    fn expire_handshakes(&mut self, now: Instant) -> Option<Duration> {
        let timeout = self.config.handshake_timeout;
        while let Some(&(since, conn)) = self.handshakes.front() {
            let pending = self.conns.get(&conn).is_some_and(|c| {
                c.since == since
                    && matches!(
                        c.phase,
                        Phase::ServerHandshake { .. } | Phase::ClientHandshake { .. }
                    )
            });
            if !pending {
                self.handshakes.pop_front();
                continue;
            }
            let due = since + timeout;
            if due > now {
                return Some(due - now);
            }
            self.handshakes.pop_front();
            if let Some(c) = self.conns.get_mut(&conn) {
                c.ending = Some(CloseReason::ConnectFailed(libc::ETIMEDOUT));
                c.phase = Phase::Closing;
            }
            self.inner.close(conn);
        }
        None
    }
}

impl<T: Transport> Transport for WebSocket<T> {
    framing_forwards!();

    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        let Endpoint::Ws { addr, path } = at else {
            return self.inner.listen(at, shared);
        };
        let (id, bound) = self.inner.listen(&Endpoint::Tcp(*addr), shared)?;
        let addr = bound.tcp().unwrap_or(*addr);
        self.listeners.insert(id, path.clone());
        Ok((
            id,
            Endpoint::Ws {
                addr,
                path: path.clone(),
            },
        ))
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let Endpoint::Ws { addr, path } = to else {
            return self.inner.connect(to);
        };
        let conn = self.inner.connect(&Endpoint::Tcp(*addr))?;
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&self.random().to_le_bytes());
        nonce[8..].copy_from_slice(&self.random().to_le_bytes());
        let (request, key) = handshake::request(&addr.to_string(), path, nonce);
        let limit = self.config.max_send_queue;
        self.inner.limit_send_queue(conn, with_headers(limit));
        if let Err(e) = self.inner.send(conn, &request) {
            self.inner.close(conn);
            return Err(TransportError::Io(io::Error::other(e.to_string())));
        }
        let mut c = WsConn::new(
            Role::Client,
            Phase::ClientHandshake { key },
            self.config.max_message,
            limit,
        );
        c.send.record_other(request.len());
        self.handshakes.push_back((c.since, conn));
        self.conns.insert(conn, c);
        Ok(conn)
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        let Some(c) = crate::framing::own_conn(&mut self.conns, conn) else {
            return self.inner.send(conn, bytes);
        };
        if matches!(c.phase, Phase::Closing | Phase::ServerHandshake { .. }) {
            return Err(SendError::Closed);
        }
        c.send.admit(&mut self.inner, conn, bytes.len())?;
        let (role, hold) = (c.role, matches!(c.phase, Phase::ClientHandshake { .. }));
        // All or nothing: every message of this send in one inner send.
        let max = self.config.max_message.max(1);
        let mut wire = std::mem::take(&mut self.scratch);
        wire.clear();
        for piece in bytes.chunks(max) {
            self.write_frame(role, Opcode::Binary, piece, &mut wire);
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return Err(SendError::UnknownConnection);
        };
        let frames = bytes
            .chunks(max)
            .map(|p| (header_len(role, p.len()), p.len()));
        let sent = c.send.commit(&mut self.inner, conn, &wire, hold, frames);
        self.scratch = wire;
        sent
    }

    fn pause_reading(&mut self, conn: ConnId) {
        self.inner.pause_reading(conn);
    }

    fn resume_reading(&mut self, conn: ConnId) {
        self.inner.resume_reading(conn);
    }

    fn close(&mut self, conn: ConnId) {
        match self.conns.get(&conn).map(|c| c.up) {
            Some(true) => self.fail(conn, CloseCode(1000), CloseReason::Local),
            Some(false) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.ending = Some(CloseReason::Local);
                    c.phase = Phase::Closing;
                }
                self.inner.close(conn);
            }
            None => self.inner.close(conn),
        }
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        if self.listeners.is_empty() && self.conns.is_empty() {
            // Nothing of ours: every event is the inner transport's, as it
            // is (a TCP-only engine pays no lookup per event).
            return self.inner.poll(events, timeout);
        }
        let next = self.expire_handshakes(Instant::now());
        let timeout = earlier(timeout, next);
        let mut inner_events = std::mem::take(&mut self.inner_events);
        let result = self.inner.poll(&mut inner_events, timeout);
        for event in inner_events.drain(..) {
            self.inner_event(event, events);
        }
        self.inner_events = inner_events;
        result
    }
}

crate::framing::datagrams_through!(WebSocket);
