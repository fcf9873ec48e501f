//! The subscribers of a realtime load run: an engine [`Service`] whose
//! connections are SSE streams or `realtime.v1` sessions, each judged by
//! the Rust client runtime (`dtp_realtime::Subscription`: RT-4, RT-5).
//!
//! A client outlives its connections (SPEC RT-7): when one drops or is
//! refused, the client's `Reconnect` policy draws a full-jitter delay, and
//! the client connects again after it, resuming from its last committed
//! cursor (`Last-Event-ID` for SSE, the SUBSCRIBE cursor for
//! `realtime.v1`), so it sees every sequence once. When the attempt or
//! elapsed budget runs out it is DEGRADED; after FORBIDDEN or
//! PROTOCOL_MISMATCH it never retries.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use dtp_codec::ErrorCode;
use dtp_codec::http::{ResponseLimits, parse_response_head};
use dtp_codec::realtime::SseParser;
use dtp_codec::ws::{Decoder, FrameConfig};
use dtp_engine::{Ctl, Origin, Outbox, Service};
use dtp_realtime::{FailureClass, ReconnectConfig};
use dtp_transports::{CloseReason, ConnId, RecvBuf};

use super::herd::{Client, Ending, Stage, Timers, status_class};
use super::tally::Tally;

/// SSE or WebSocket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Sse,
    Ws,
}

/// The measured window, in stream sequences (set by the publisher).
#[derive(Debug)]
pub(crate) struct Window {
    /// First sequence of the window (0: not begun).
    pub(crate) from: AtomicU64,
    /// Last sequence of the window (`u64::MAX`: still open).
    pub(crate) to: AtomicU64,
    /// The run is over: connections that end now are not reconnected.
    pub(crate) finished: AtomicBool,
}

impl Window {
    pub(crate) fn new() -> Self {
        Self {
            from: AtomicU64::new(0),
            to: AtomicU64::new(u64::MAX),
            finished: AtomicBool::new(false),
        }
    }

    pub(super) fn contains(&self, seq: u64) -> bool {
        let from = self.from.load(Relaxed);
        from != 0 && seq >= from && seq <= self.to.load(Relaxed)
    }

    /// Events in the window, once it is closed.
    fn len(&self) -> Option<u64> {
        let (from, to) = (self.from.load(Relaxed), self.to.load(Relaxed));
        (from != 0 && to != u64::MAX && to >= from).then(|| to - from + 1)
    }
}

/// Where every subscriber starts (from one publication before the run).
#[derive(Clone, Debug)]
pub(crate) struct Start {
    pub(crate) epoch: String,
    pub(crate) last: u64,
    pub(crate) cursor: Option<String>,
    pub(crate) scope: String,
}

/// Where a subscriber connection is.
pub(super) enum Phase {
    Head,
    Sse(SseParser),
    Ws(Decoder),
}

/// One connection of a client.
pub(crate) struct Sub {
    pub(super) phase: Phase,
    /// Bytes not yet used (SSE: of the chunked body).
    pub(super) input: BytesMut,
    /// The client (index into the shard's clients).
    pub(super) client: usize,
    pub(super) conn: ConnId,
    /// The stream began (SSE 200, `realtime.v1` SUBSCRIBED).
    pub(super) subscribed: bool,
    /// How the connection ends, as far as known so far.
    pub(super) ending: Ending,
}

/// What a shard's subscribers need to know of the run.
pub(crate) struct SubsSpec {
    pub(crate) target: SocketAddr,
    pub(crate) mode: Mode,
    pub(crate) stream: String,
    pub(crate) token: String,
    pub(crate) start: Start,
    /// Clients this shard runs.
    pub(crate) share: usize,
    pub(crate) policy: ReconnectConfig,
    pub(crate) clock: Instant,
    pub(crate) window: Arc<Window>,
    pub(crate) shared: Arc<Mutex<Tally>>,
    /// The shard's index (varies masks and jitter draws).
    pub(crate) shard: usize,
}

/// The subscribers of one load-generator shard.
pub(crate) struct Subs {
    pub(super) spec: SubsSpec,
    pub(super) clients: Vec<Client>,
    /// The next client that has not connected yet.
    fresh: usize,
    pending: usize,
    by_conn: HashMap<ConnId, usize>,
    timers: Timers,
    pub(super) local: Tally,
    last_flush: Instant,
    pub(super) masks: u32,
}

/// The longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// Outstanding connects per shard (the ramp, and a herd coming back).
const CONNECT_BATCH: usize = 256;

/// A client index that names no client (a connection nobody asked for).
const NOBODY: usize = usize::MAX;

impl Subs {
    /// The shard's clients, none connected yet. The caller checked the
    /// policy; a client it still refused is counted as refused for good.
    pub(crate) fn new(spec: SubsSpec) -> Self {
        let s = &spec.start;
        let from = (s.epoch.as_str(), s.last, s.cursor.as_deref());
        let clients: Vec<Client> = (0..spec.share)
            .filter_map(|_| Client::new(&spec.stream, spec.policy, from).ok())
            .collect();
        let mut local = Tally::new();
        local.refused_other = (spec.share - clients.len()) as u64;
        let seed = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            spec.shard,
        );
        Self {
            masks: spec.shard as u32,
            clients,
            fresh: 0,
            pending: 0,
            by_conn: HashMap::new(),
            timers: Timers::new(seed),
            local,
            last_flush: Instant::now(),
            spec,
        }
    }

    /// The request that opens client `c`'s stream: its first connect names
    /// the start cursor in the query; a reconnect resumes from its last
    /// committed cursor with `Last-Event-ID`, as a browser's EventSource
    /// does (`realtime.v1` sends the cursor in SUBSCRIBE instead).
    fn request(&self, c: &Client) -> String {
        let (host, token) = (self.spec.target, &self.spec.token);
        match self.spec.mode {
            Mode::Sse => {
                let (query, resume) = match (c.ever_subscribed, c.sub.cursor()) {
                    (false, Some(cur)) => (format!("?cursor={cur}"), String::new()),
                    (true, Some(cur)) => (String::new(), format!("Last-Event-ID: {cur}\r\n")),
                    (_, None) => (String::new(), String::new()),
                };
                format!(
                    "GET /v1/streams/{}/sse{query} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n{resume}\r\n",
                    self.spec.stream
                )
            }
            Mode::Ws => format!(
                "GET /v1/ws HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: realtime.v1\r\n\r\n"
            ),
        }
    }

    pub(super) fn now_ns(&self) -> u64 {
        u64::try_from(self.spec.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The stream of `s` began: counted once per client, later ones are
    /// resumes.
    pub(super) fn began(&mut self, s: &mut Sub) {
        s.subscribed = true;
        let Some(c) = self.clients.get_mut(s.client) else {
            return;
        };
        if c.ever_subscribed {
            self.local.resumed += 1;
        } else {
            c.ever_subscribed = true;
            self.local.subscribed += 1;
        }
    }

    /// Client `i`'s connection ended at `now` as `how`.
    fn ended(&mut self, i: usize, subscribed: bool, how: Ending, now: Instant) {
        if !subscribed {
            self.local.failed += 1;
        }
        let Some(c) = self.clients.get_mut(i) else {
            return;
        };
        if self.spec.window.finished.load(Relaxed) {
            c.stage = Stage::Done;
            return;
        }
        self.timers.ended(c, i, how, now, &mut self.local);
    }

    /// Opens a connection for client `i`.
    fn connect(&mut self, i: usize, now: Instant, ctl: &mut dyn Ctl) {
        match ctl.connect(&self.spec.target.into()) {
            Ok(id) => {
                self.by_conn.insert(id, i);
                self.pending += 1;
                if let Some(c) = self.clients.get_mut(i) {
                    c.stage = Stage::Connected;
                }
            }
            Err(_) => self.ended(i, false, Ending::NETWORK, now),
        }
    }

    fn flush(&mut self) {
        if let Ok(mut s) = self.spec.shared.lock() {
            s.merge(&self.local);
        }
        self.local = Tally::new();
    }

    /// The end of the run: events of the window a client not given up on
    /// never applied are missing; clients still waiting are unresumed.
    fn finish(&mut self) {
        let window = self.spec.window.len();
        for c in &self.clients {
            if c.stage == Stage::Waiting {
                self.local.unresumed += 1;
            }
            let given_up = matches!(c.stage, Stage::Degraded | Stage::Refused);
            if let Some(n) = window
                && c.ever_subscribed
                && !given_up
            {
                self.local.missing += n.saturating_sub(c.in_window);
            }
        }
    }
}

impl Drop for Subs {
    fn drop(&mut self) {
        self.finish();
        self.flush();
    }
}

impl Service for Subs {
    type Conn = Sub;
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, out: &mut Outbox<'_>) -> Sub {
        self.pending = self.pending.saturating_sub(1);
        self.local.connected += 1;
        let client = self.by_conn.get(&conn).copied().unwrap_or(NOBODY);
        if client < self.clients.len() {
            self.clients[client].reconnect.on_open(out.now());
            let req = self.request(&self.clients[client]);
            out.wire().extend_from_slice(req.as_bytes());
        }
        Sub {
            phase: Phase::Head,
            input: BytesMut::new(),
            client,
            conn,
            subscribed: false,
            ending: Ending::NETWORK,
        }
    }

    fn bytes(&mut self, s: &mut Sub, data: RecvBuf, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        if s.client == NOBODY {
            return Err(ErrorCode::INTERNAL);
        }
        s.input.extend_from_slice(&data);
        if let Phase::Head = s.phase {
            let limits = ResponseLimits {
                max_head_bytes: MAX_HEAD,
                max_headers: 24,
            };
            let (status, n, ending) = match parse_response_head(&s.input, &limits) {
                Ok(Some((head, n))) => {
                    let sse = head
                        .header("content-type")
                        .is_some_and(|t| t.starts_with("text/event-stream"));
                    let ending = match (self.spec.mode, head.status()) {
                        (Mode::Sse, 200) if !sse => Some(Ending {
                            class: FailureClass::Protocol,
                            hint: None,
                        }),
                        (Mode::Sse, 200) | (Mode::Ws, 101) => None,
                        (_, st) => Some(status_class(st, head.header("retry-after"))),
                    };
                    (head.status(), n, ending)
                }
                Ok(None) => return Ok(()),
                Err(_) => {
                    s.ending.class = FailureClass::Protocol;
                    return Err(ErrorCode::INTERNAL);
                }
            };
            s.input.advance(n);
            if let Some(ending) = ending {
                s.ending = ending;
                return Err(ErrorCode::INTERNAL);
            }
            if status == 200 {
                s.phase = Phase::Sse(SseParser::new());
                self.began(s);
            } else {
                s.phase = Phase::Ws(Decoder::new(FrameConfig::client(1 << 20)));
                self.subscribe_message(s.client, out);
            }
        }
        match s.phase {
            Phase::Head => Ok(()),
            Phase::Sse(_) => self.sse_input(s),
            Phase::Ws(_) => self.ws_input(s),
        }
    }

    fn connect_failed(&mut self, conn: ConnId, _: i32) {
        self.pending = self.pending.saturating_sub(1);
        if let Some(i) = self.by_conn.remove(&conn) {
            self.ended(i, false, Ending::NETWORK, Instant::now());
        }
    }

    fn close(&mut self, s: Sub, _: CloseReason, now: Instant) {
        if self.by_conn.remove(&s.conn).is_some() {
            self.ended(s.client, s.subscribed, s.ending, now);
        }
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        let finished = self.spec.window.finished.load(Relaxed);
        while self.pending < CONNECT_BATCH && !ctl.stopping() && !finished {
            let i = if self.fresh < self.clients.len() {
                self.fresh += 1;
                self.fresh - 1
            } else if let Some(i) = self.timers.pop_due(now) {
                i
            } else {
                break;
            };
            self.connect(i, now, ctl);
        }
        if now.duration_since(self.last_flush) >= Duration::from_millis(100) {
            self.last_flush = now;
            self.flush();
        }
        let soon = now + Duration::from_millis(50);
        Some(self.timers.next().map_or(soon, |t| t.min(soon)))
    }
}
