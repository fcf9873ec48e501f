//! SPEC TRN-1 … TRN-5 over RTSP: [`Rtsp`] carries a byte stream as RTSP
//! interleaved binary data (RFC 2326 §10.12: `$`, channel 0, a 16-bit
//! length, the bytes) on any transport that carries a byte stream, TCP in
//! practice.
//!
//! It wraps the core's transport and speaks `rtsp:HOST:PORT` endpoints
//! itself, passing every other endpoint through untouched (so
//! `Rtsp<WebSocket<Driver>>` speaks `rtsp:`, `ws:` and `tcp:`).
//!
//! - A listener's connection answers OPTIONS, DESCRIBE (a minimal SDP for
//!   one `application` stream), SETUP with
//!   `Transport: RTP/AVP/TCP;unicast;interleaved=0-1` (anything else is
//!   461 Unsupported Transport) and then RECORD or PLAY: only then is it
//!   reported [`Event::Accepted`]. After that, GET_PARAMETER and OPTIONS
//!   keep-alives are answered 200 and TEARDOWN closes it
//!   ([`CloseReason::PeerClosed`]). The server announces
//!   `Session: ID;timeout=N` ([`RtspConfig::session_timeout`]) and cuts a
//!   peer that sends neither data nor requests for that long
//!   ([`CloseReason::Error`] with `ETIMEDOUT`), unless the user paused
//!   reading from it.
//! - An outgoing connection sends OPTIONS, SETUP and RECORD to
//!   `rtsp://HOST:PORT/dtp` and is reported [`Event::Connected`] after
//!   RECORD's 200; it sends a GET_PARAMETER keep-alive whenever it has
//!   sent nothing for half the session timeout the server announced, and
//!   TEARDOWN when closed.
//! - Sends become packets on channel 0 — a send larger than 65,535 bytes
//!   several — and received packets are delivered as bytes, as they
//!   arrive (a packet need not be whole): the stream is the concatenation
//!   of the payloads, so TRN-5 holds whatever the peer's packet
//!   boundaries. Packets on other channels (RTCP) are dropped.
//!
//! The send budget counts the user's payload only: [`Transport::queued`]
//! and the per-connection limit are in payload bytes, exactly as on TCP;
//! the inner connection is given a limit a sixteenth larger plus room for
//! the control messages. A handshake that does not finish within
//! [`RtspConfig::handshake_timeout`] is cut. Malformed input closes the
//! connection (`EPROTO`).

mod client;
mod conn;
mod server;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use dtp_codec::rtsp::{
    HEADER_LEN, InterleaveError, Item, MAX_PAYLOAD, Message, Request, Response, RtspLimits,
    write_interleaved,
};

use crate::driver::{BackendChoice, CloseReason, ConnId, DriverStats, ListenerId, Waker};
use crate::endpoint::Endpoint;
use crate::framing::{Rng, closed_event, earlier, framing_forwards};
use crate::lent::RecvBuf;
use crate::sendq::SendError;
use crate::transport::{Event, Transport, TransportError};

use client::{Accepted, Step};
use conn::{Phase, RtspConn};
use server::{After, ServerSession};

/// The channel DTP's bytes travel on (RTCP's, channel 1, is unused).
const DATA_CHANNEL: u8 = 0;

/// How [`Rtsp`] bounds and times its connections (SPEC TRN-2: the send
/// budget; TRN-3: the timeouts that end a connection).
#[derive(Clone, Debug)]
pub struct RtspConfig {
    /// The most payload bytes a connection may have queued (default
    /// 3.75 MiB). The inner transport's own limit must be a sixteenth
    /// more, plus 4 KiB, for the packet headers and control messages.
    pub max_send_queue: usize,
    /// How long the control exchange may take, from the connection's
    /// start to RECORD's answer (default 10 s).
    pub handshake_timeout: Duration,
    /// The session timeout a server announces (in whole seconds, at least
    /// one) and enforces (default 60 s, RFC 2326 §12.37's default).
    pub session_timeout: Duration,
    /// Ceilings on the RTSP messages taken from a peer.
    pub limits: RtspLimits,
}

impl Default for RtspConfig {
    fn default() -> Self {
        Self {
            max_send_queue: 15 * (1 << 20) / 4,
            handshake_timeout: Duration::from_secs(10),
            session_timeout: Duration::from_secs(60),
            limits: RtspLimits::default(),
        }
    }
}

/// The inner connection's limit for a payload limit of `limit` bytes.
pub(crate) fn with_headers(limit: usize) -> usize {
    limit + limit / 16 + 4096
}

/// SPEC TRN-1 … TRN-5: DTP over RTSP-interleaved TCP, as a [`Transport`]
/// wrapping `T` (see the module docs for the exchange).
pub struct Rtsp<T: Transport> {
    inner: T,
    config: RtspConfig,
    listeners: HashSet<ListenerId>,
    conns: HashMap<ConnId, RtspConn>,
    /// When each connection's timer may be due (entries go stale; a popped
    /// one is checked against the connection's own [`RtspConn::due`]).
    timers: BinaryHeap<Reverse<(Instant, ConnId)>>,
    /// The time of the current poll.
    now: Instant,
    inner_events: Vec<Event>,
    scratch: Vec<u8>,
    /// xorshift64* state for session ids.
    rng: Rng,
}

impl<T: Transport> Rtsp<T> {
    /// `inner` with RTSP endpoints added.
    pub fn new(inner: T, config: RtspConfig) -> Self {
        Self {
            inner,
            config,
            listeners: HashSet::new(),
            conns: HashMap::new(),
            timers: BinaryHeap::new(),
            now: Instant::now(),
            inner_events: Vec::new(),
            scratch: Vec::new(),
            rng: Rng::new(),
        }
    }

    /// The wrapped transport.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn session_id(&mut self) -> String {
        format!("{:016X}", self.rng.next())
    }

    /// The timeout a server announces, in seconds.
    fn announced_secs(&self) -> u64 {
        self.config.session_timeout.as_secs().max(1)
    }

    /// Starts `conn`'s timer from its current state.
    fn arm(&mut self, conn: ConnId) {
        let due = self
            .conns
            .get(&conn)
            .and_then(|c| c.due(self.config.handshake_timeout));
        if let Some(at) = due {
            self.timers.push(Reverse((at, conn)));
        }
    }

    /// Queues an RTSP message on `conn`, outside the user's budget; a full
    /// queue drops it (the peer does not read).
    fn control(&mut self, conn: ConnId, message: &Message) -> bool {
        let mut wire = std::mem::take(&mut self.scratch);
        wire.clear();
        let ok = message.write(&mut wire).is_ok() && self.inner.send(conn, &wire).is_ok();
        if ok && let Some(c) = self.conns.get_mut(&conn) {
            c.send.record_other(wire.len());
            if c.client {
                c.last = self.now;
            }
        }
        self.scratch = wire;
        ok
    }

    /// Ends `conn`; `ending` is what the user hears when the inner
    /// connection is gone.
    fn fail(&mut self, conn: ConnId, ending: CloseReason) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.phase = Phase::Closing;
            c.ending.get_or_insert(ending);
            c.rx.clear();
        }
        self.inner.close(conn);
    }

    /// Handles one inner event, appending what the user sees.
    fn inner_event(&mut self, event: Event, events: &mut Vec<Event>) {
        match event {
            Event::Accepted { listener, conn } if self.listeners.contains(&listener) => {
                let limit = self.config.max_send_queue;
                let c = RtspConn::new(
                    Phase::Server { listener },
                    self.now,
                    self.config.limits,
                    limit,
                );
                self.conns.insert(conn, c);
                self.inner.limit_send_queue(conn, with_headers(limit));
                self.arm(conn);
            }
            Event::Connected { conn } if self.conns.contains_key(&conn) => {}
            Event::Received { conn, data } if self.conns.contains_key(&conn) => {
                let rest = self.packets_in_place(conn, data, events);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.rx.extend_from_slice(&rest);
                    if !c.client {
                        c.last = self.now;
                    }
                }
                drop(rest);
                self.advance(conn, events);
            }
            Event::Writable { conn } => match self.conns.get(&conn) {
                Some(c) if !(c.up && matches!(c.phase, Phase::Open)) => {}
                _ => events.push(Event::Writable { conn }),
            },
            Event::Closed { conn, reason } => {
                let wrapped = self.conns.remove(&conn);
                let wrapped = wrapped.map(|c| (c.up, c.client, c.ending));
                events.extend(closed_event(conn, reason, wrapped));
            }
            other => events.push(other),
        }
    }

    /// Delivers the data packets at the front of `data` as pieces of it,
    /// in the receive chunk the kernel wrote (no copy), while nothing is
    /// buffered before it and the connection is open; returns the rest —
    /// an RTSP message, or a packet header split across two receives —
    /// for [`Rtsp::advance`], which copies it into the connection's
    /// buffer. Copying every receive there cost a fifth of the server's
    /// time in the DTP stream benchmark.
    fn packets_in_place(
        &mut self,
        conn: ConnId,
        mut data: RecvBuf,
        events: &mut Vec<Event>,
    ) -> RecvBuf {
        let Some(c) = self.conns.get_mut(&conn) else {
            return data;
        };
        if !c.rx.is_empty() || !matches!(c.phase, Phase::Open) {
            return data;
        }
        while !data.is_empty() {
            // Only a data packet changes the decoder's state; anything else
            // is decoded again from the connection's buffer.
            let Ok((
                Item::Data {
                    channel, skip, len, ..
                },
                _,
            )) = c.decoder.decode(&data)
            else {
                break;
            };
            drop(data.split_to(skip));
            let piece = data.split_to(len);
            if channel == DATA_CHANNEL && len > 0 {
                events.push(Event::Received { conn, data: piece });
            }
        }
        data
    }

    /// Reads what `conn` has received: packets and messages.
    fn advance(&mut self, conn: ConnId, events: &mut Vec<Event>) {
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if matches!(c.phase, Phase::Closing) {
                c.rx.clear();
                return;
            }
            let (item, used) = match c.decoder.decode(&c.rx) {
                Ok(decoded) => decoded,
                Err(InterleaveError::Incomplete { .. }) => return,
                Err(InterleaveError::Malformed(e)) => {
                    tracing::debug!(?conn, %e, "RTSP input refused");
                    if !c.client && !c.up {
                        let _ =
                            self.control(conn, &Message::Response(Response::new(e.status(), None)));
                    }
                    self.protocol_error(conn);
                    return;
                }
            };
            match item {
                Item::Data {
                    channel,
                    skip,
                    len,
                    last: _,
                } => {
                    if !matches!(c.phase, Phase::Open) {
                        // Packets before RECORD or PLAY: not an RTSP peer
                        // that follows the exchange.
                        self.protocol_error(conn);
                        return;
                    }
                    c.rx.advance(skip);
                    let data = c.rx.split_to(len);
                    if channel == DATA_CHANNEL && len > 0 {
                        events.push(Event::Received {
                            conn,
                            data: RecvBuf::from(data),
                        });
                    }
                }
                Item::Message(message) => {
                    c.rx.advance(used);
                    match message {
                        Message::Request(req) => self.request(conn, &req, events),
                        Message::Response(resp) => self.response(conn, &resp, events),
                    }
                }
            }
        }
    }

    /// Closes `conn` for input that breaks the protocol.
    fn protocol_error(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let ending = if c.client && !c.up {
            CloseReason::ConnectFailed(libc::EPROTO)
        } else {
            CloseReason::Error(libc::EPROTO)
        };
        self.fail(conn, ending);
    }

    /// A request from the peer: answered, and acted on.
    fn request(&mut self, conn: ConnId, req: &Request, events: &mut Vec<Event>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.client {
            let answer = client::answer(req);
            self.control(conn, &Message::Response(answer));
            return;
        }
        if c.session.is_none() {
            let id = self.session_id();
            if let Some(c) = self.conns.get_mut(&conn) {
                c.session = Some(id);
            }
        }
        let timeout_secs = self.announced_secs();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let listener = match c.phase {
            Phase::Server { listener } => Some(listener),
            _ => None,
        };
        let s = ServerSession {
            id: c.session.as_deref().unwrap_or_default(),
            timeout_secs,
            set_up: c.set_up,
            open: matches!(c.phase, Phase::Open),
        };
        let (answer, after) = server::answer(req, &s);
        tracing::trace!(?conn, method = %req.method, status = answer.status, "RTSP request");
        let sent = self.control(conn, &Message::Response(answer));
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        match after {
            After::Stay => {}
            After::SetUp => c.set_up = true,
            After::Open => {
                let Some(listener) = listener.filter(|_| sent) else {
                    self.fail(conn, CloseReason::Local);
                    return;
                };
                c.phase = Phase::Open;
                c.up = true;
                c.timeout = Duration::from_secs(timeout_secs);
                c.last = self.now;
                events.push(Event::Accepted { listener, conn });
                self.arm(conn);
            }
            After::Close => self.fail(conn, CloseReason::PeerClosed),
        }
    }

    /// A response from the peer: a client's next step, or nothing.
    fn response(&mut self, conn: ConnId, resp: &Response, events: &mut Vec<Event>) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Phase::Client { step } = c.phase else {
            // Answers to keep-alives and TEARDOWN; a server ignores them.
            return;
        };
        match step.accept(resp) {
            Ok(Accepted::Next(next, session)) => {
                if let Some(s) = session {
                    c.timeout = Duration::from_secs(u64::from(s.timeout_or_default().max(1)));
                    c.session = Some(s.id);
                }
                c.phase = Phase::Client { step: next };
                let (uri, session) = self.names(conn);
                let req = next.request(&uri, session.as_deref());
                if !self.control(conn, &Message::Request(req)) {
                    self.fail(conn, CloseReason::ConnectFailed(libc::ENOBUFS));
                }
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.cseq = next.cseq() + 1;
                }
            }
            Ok(Accepted::Up) => {
                let held = std::mem::take(&mut c.send.held);
                if !held.is_empty() && self.inner.send(conn, &held).is_err() {
                    self.fail(conn, CloseReason::ConnectFailed(libc::ENOBUFS));
                    return;
                }
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                c.phase = Phase::Open;
                c.up = true;
                c.last = self.now;
                events.push(Event::Connected { conn });
                // A producer refused while the exchange ran hears of room
                // once the held packets drain.
                self.inner.want_writable(conn);
                self.arm(conn);
            }
            Err(why) => {
                tracing::debug!(?conn, why, status = resp.status, "RTSP setup refused");
                self.fail(conn, CloseReason::ConnectFailed(libc::ECONNREFUSED));
            }
        }
    }

    /// The URI `conn`'s requests name (a client's), and its session.
    fn names(&self, conn: ConnId) -> (String, Option<String>) {
        self.conns
            .get(&conn)
            .map(|c| (c.uri.clone(), c.session.clone()))
            .unwrap_or_default()
    }

    /// Fires the timers that are due; the time until the next one.
    fn expire(&mut self) -> Option<Duration> {
        let now = self.now;
        while let Some(&Reverse((at, conn))) = self.timers.peek() {
            if at > now {
                return Some(at - now);
            }
            self.timers.pop();
            let Some(c) = self.conns.get(&conn) else {
                continue;
            };
            let Some(due) = c.due(self.config.handshake_timeout) else {
                continue;
            };
            if due > now {
                self.timers.push(Reverse((due, conn)));
                continue;
            }
            if c.handshaking() {
                tracing::debug!(?conn, "RTSP handshake timed out");
                let ending = CloseReason::ConnectFailed(libc::ETIMEDOUT);
                self.fail(conn, ending);
            } else if c.client {
                let cseq = self.conns.get_mut(&conn).map_or(0, RtspConn::next_cseq);
                let (uri, session) = self.names(conn);
                let req = client::keep_alive(&uri, session.as_deref(), cseq);
                if !self.control(conn, &Message::Request(req))
                    && let Some(c) = self.conns.get_mut(&conn)
                {
                    // A full queue: the peer is not reading; try again later.
                    c.last = now;
                }
                self.arm(conn);
            } else {
                tracing::debug!(?conn, "RTSP session timed out");
                self.fail(conn, CloseReason::Error(libc::ETIMEDOUT));
            }
        }
        None
    }
}

impl<T: Transport> Transport for Rtsp<T> {
    framing_forwards!();

    fn listen(
        &mut self,
        at: &Endpoint,
        shared: bool,
    ) -> Result<(ListenerId, Endpoint), TransportError> {
        let Endpoint::Rtsp(addr) = at else {
            return self.inner.listen(at, shared);
        };
        let (id, bound) = self.inner.listen(&Endpoint::Tcp(*addr), shared)?;
        self.listeners.insert(id);
        Ok((id, Endpoint::Rtsp(bound.tcp().unwrap_or(*addr))))
    }

    fn connect(&mut self, to: &Endpoint) -> Result<ConnId, TransportError> {
        let Endpoint::Rtsp(addr) = to else {
            return self.inner.connect(to);
        };
        let conn = self.inner.connect(&Endpoint::Tcp(*addr))?;
        let limit = self.config.max_send_queue;
        self.inner.limit_send_queue(conn, with_headers(limit));
        self.now = Instant::now();
        let mut c = RtspConn::new(
            Phase::Client {
                step: Step::Options,
            },
            self.now,
            self.config.limits,
            limit,
        );
        c.uri = format!("rtsp://{addr}{}", client::PATH);
        let req = Step::Options.request(&c.uri, None);
        self.conns.insert(conn, c);
        if !self.control(conn, &Message::Request(req)) {
            self.conns.remove(&conn);
            self.inner.close(conn);
            return Err(TransportError::Io(io::Error::other(
                "the RTSP OPTIONS request could not be queued",
            )));
        }
        self.arm(conn);
        Ok(conn)
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), SendError> {
        let Some(c) = crate::framing::own_conn(&mut self.conns, conn) else {
            return self.inner.send(conn, bytes);
        };
        if matches!(c.phase, Phase::Closing | Phase::Server { .. }) {
            return Err(SendError::Closed);
        }
        c.send.admit(&mut self.inner, conn, bytes.len())?;
        // All or nothing: every packet of this send in one inner send.
        let mut wire = std::mem::take(&mut self.scratch);
        wire.clear();
        write_interleaved(DATA_CHANNEL, bytes, &mut wire);
        let packets = bytes.chunks(MAX_PAYLOAD).map(|p| (HEADER_LEN, p.len()));
        let hold = c.handshaking();
        let sent = c.send.commit(&mut self.inner, conn, &wire, hold, packets);
        self.scratch = wire;
        sent?;
        if c.client {
            c.last = self.now;
        }
        Ok(())
    }

    fn pause_reading(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.paused = true;
        }
        self.inner.pause_reading(conn);
    }

    fn resume_reading(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn)
            && c.paused
        {
            c.paused = false;
            if !c.client {
                c.last = self.now;
            }
            self.arm(conn);
        }
        self.inner.resume_reading(conn);
    }

    fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            self.inner.close(conn);
            return;
        };
        if c.client && c.up && matches!(c.phase, Phase::Open) {
            let cseq = c.next_cseq();
            let (uri, session) = self.names(conn);
            let req = client::teardown(&uri, session.as_deref(), cseq);
            self.control(conn, &Message::Request(req));
        }
        self.fail(conn, CloseReason::Local);
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        if self.listeners.is_empty() && self.conns.is_empty() {
            // Nothing of ours: every event is the inner transport's, as it
            // is (no lookup per event for the schemes below).
            return self.inner.poll(events, timeout);
        }
        self.now = Instant::now();
        let next = self.expire();
        let timeout = earlier(timeout, next);
        let mut inner_events = std::mem::take(&mut self.inner_events);
        let result = self.inner.poll(&mut inner_events, timeout);
        self.now = Instant::now();
        for event in inner_events.drain(..) {
            self.inner_event(event, events);
        }
        self.inner_events = inner_events;
        result
    }
}

crate::framing::datagrams_through!(Rtsp);
