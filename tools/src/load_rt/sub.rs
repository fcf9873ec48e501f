//! The subscribers of a realtime load run: an engine [`Service`] whose
//! connections are SSE streams or `realtime.v1` sessions, each judged by
//! the Rust client runtime (`dtp_realtime::Subscription`: RT-4, RT-5).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use dtp_codec::ErrorCode;
use dtp_codec::http::{ResponseLimits, parse_response_head};
use dtp_codec::realtime::{ClientMessage, Envelope, JsonLimits, ServerMessage, SseParser};
use dtp_codec::ws::{Decoder, FrameConfig, FrameError, Message, Opcode, Role, encode_frame};
use dtp_engine::{Ctl, Origin, Outbox, Service};
use dtp_realtime::{DedupeConfig, Observed, Subscription, Verdict};
use dtp_transports::{CloseReason, ConnId, RecvBuf};
use hdrhistogram::Histogram;

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
}

impl Window {
    pub(crate) fn new() -> Self {
        Self {
            from: AtomicU64::new(0),
            to: AtomicU64::new(u64::MAX),
        }
    }

    fn contains(&self, seq: u64) -> bool {
        let from = self.from.load(Relaxed);
        from != 0 && seq >= from && seq <= self.to.load(Relaxed)
    }
}

/// What the subscribers saw (summed over connections and shards).
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) connected: u64,
    pub(crate) subscribed: u64,
    pub(crate) failed: u64,
    pub(crate) applied: u64,
    /// Events of the window applied, over all subscribers.
    pub(crate) in_window: u64,
    /// Events of the window a subscriber alive at the end never applied.
    pub(crate) missing: u64,
    pub(crate) duplicates: u64,
    pub(crate) stale: u64,
    pub(crate) gaps: u64,
    pub(crate) resets: u64,
    pub(crate) conflicts: u64,
    pub(crate) closed_early: u64,
    /// Publish → apply, µs, window events only.
    pub(crate) latency: Histogram<u64>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            connected: 0,
            subscribed: 0,
            failed: 0,
            applied: 0,
            in_window: 0,
            missing: 0,
            duplicates: 0,
            stale: 0,
            gaps: 0,
            resets: 0,
            conflicts: 0,
            closed_early: 0,
            // 1 µs .. 100 s at 3 significant digits; cannot fail.
            latency: Histogram::new_with_bounds(1, 100_000_000, 3)
                .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!())),
        }
    }

    pub(crate) fn merge(&mut self, o: &Tally) {
        self.connected += o.connected;
        self.subscribed += o.subscribed;
        self.failed += o.failed;
        self.applied += o.applied;
        self.in_window += o.in_window;
        self.missing += o.missing;
        self.duplicates += o.duplicates;
        self.stale += o.stale;
        self.gaps += o.gaps;
        self.resets += o.resets;
        self.conflicts += o.conflicts;
        self.closed_early += o.closed_early;
        let _ = self.latency.add(&o.latency);
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
enum Phase {
    Head,
    Sse(SseParser),
    Ws(Decoder),
}

/// One subscriber.
pub(crate) struct Sub {
    phase: Phase,
    input: BytesMut,
    /// SSE: bytes after dechunking not yet parsed.
    sub: Subscription,
    subscribed: bool,
    in_window: u64,
}

/// The subscribers of one load-generator shard.
pub(crate) struct Subs {
    pub(crate) target: SocketAddr,
    pub(crate) mode: Mode,
    pub(crate) stream: String,
    pub(crate) token: String,
    pub(crate) start: Start,
    /// Connections this shard opens in all.
    pub(crate) share: usize,
    pub(crate) opened: usize,
    pub(crate) pending: usize,
    pub(crate) clock: Instant,
    pub(crate) window: Arc<Window>,
    pub(crate) local: Tally,
    pub(crate) shared: Arc<Mutex<Tally>>,
    pub(crate) last_flush: Instant,
    pub(crate) masks: u32,
}

/// The largest chunk of an SSE stream a subscriber accepts (the server's
/// events are at most 64 KiB; a replay comes in one chunk, bounded by the
/// stream's retention).
const MAX_CHUNK: usize = 32 << 20;

/// The longest chunk-size line (hex digits and extensions) accepted.
const MAX_SIZE_LINE: usize = 256;

/// The longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// Outstanding connects per shard while ramping up.
const CONNECT_BATCH: usize = 256;

impl Subs {
    fn request(&self) -> String {
        let host = self.target;
        match self.mode {
            Mode::Sse => {
                let cursor = self
                    .start
                    .cursor
                    .as_deref()
                    .map(|c| format!("?cursor={c}"))
                    .unwrap_or_default();
                format!(
                    "GET /v1/streams/{}/sse{cursor} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n\r\n",
                    self.stream, self.token
                )
            }
            Mode::Ws => format!(
                "GET /v1/ws HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: realtime.v1\r\n\r\n",
                self.token
            ),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Judges one envelope (RT-4 after the schema: epoch, sequence, dedupe),
    /// applies it (the latency sample) and commits.
    fn envelope(&mut self, s: &mut Sub, env: &Envelope) {
        let now = Instant::now();
        let t = env
            .payload
            .get("t")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        let observed = || Observed {
            epoch: &env.stream_epoch,
            event_id: &env.event_id,
            sequence: env.sequence,
            digest: t,
            cursor: env.resume_cursor.as_deref(),
        };
        let verdict = s.sub.observe(observed(), now);
        let now_ns = self.now_ns();
        let l = &mut self.local;
        match verdict {
            Verdict::Apply => {
                l.applied += 1;
                if self.window.contains(env.sequence) {
                    s.in_window += 1;
                    l.in_window += 1;
                    let us = now_ns.saturating_sub(t) / 1000;
                    let _ = l.latency.record(us.max(1));
                }
                let _ = s.sub.commit(env.sequence, env.resume_cursor.as_deref());
            }
            Verdict::Duplicate => l.duplicates += 1,
            Verdict::Stale => l.stale += 1,
            Verdict::Conflict(_) => l.conflicts += 1,
            Verdict::Gap { .. } | Verdict::UnknownEpoch | Verdict::Resyncing => {
                // A load generator resyncs by taking the stream from here
                // (a real client takes a snapshot); counted, never hidden.
                l.gaps += u64::from(matches!(verdict, Verdict::Gap { .. }));
                l.resets += 1;
                s.sub
                    .reset(&env.stream_epoch, env.sequence.saturating_sub(1), None);
                if s.sub.observe(observed(), now) == Verdict::Apply {
                    let _ = s.sub.commit(env.sequence, env.resume_cursor.as_deref());
                }
            }
        }
    }

    fn sse_input(&mut self, s: &mut Sub) -> Result<(), ErrorCode> {
        // Whole chunks of the chunked body, into the SSE parser.
        let mut events = Vec::new();
        loop {
            let Some(eol) = s.input.windows(2).position(|w| w == b"\r\n") else {
                // A size line is a few hex digits: a server that sends more
                // without a line end is refused, not buffered.
                if s.input.len() > MAX_SIZE_LINE {
                    return Err(ErrorCode::INTERNAL);
                }
                break;
            };
            let size = std::str::from_utf8(&s.input[..eol])
                .ok()
                .and_then(|t| usize::from_str_radix(t.trim(), 16).ok())
                .filter(|&n| n <= MAX_CHUNK)
                .ok_or(ErrorCode::INTERNAL)?;
            if s.input.len() < eol + 2 + size + 2 {
                break;
            }
            if size == 0 {
                return Err(ErrorCode::INTERNAL); // the server ended the stream
            }
            let Phase::Sse(parser) = &mut s.phase else {
                return Ok(());
            };
            let data = &s.input[eol + 2..eol + 2 + size];
            parser
                .feed(data, |e| {
                    if e.event_type == "message" {
                        events.push(e.data.to_owned());
                    }
                })
                .map_err(|_| ErrorCode::INTERNAL)?;
            s.input.advance(eol + 2 + size + 2);
        }
        for data in events {
            match Envelope::decode(data.as_bytes(), &JsonLimits::default()) {
                Ok(env) => self.envelope(s, &env),
                Err(_) => self.local.conflicts += 1,
            }
        }
        Ok(())
    }

    fn ws_input(&mut self, s: &mut Sub) -> Result<(), ErrorCode> {
        loop {
            let Phase::Ws(d) = &mut s.phase else {
                return Ok(());
            };
            if s.input.is_empty() {
                return Ok(());
            }
            let (used, msg) = match d.decode(&mut s.input[..]) {
                Ok(x) => x,
                Err(FrameError::Incomplete { .. }) => return Ok(()),
                Err(FrameError::Protocol(_)) => return Err(ErrorCode::INTERNAL),
            };
            s.input.advance(used);
            let Some(Message::Text(t)) = msg else {
                if matches!(msg, Some(Message::Close(_))) {
                    return Err(ErrorCode::INTERNAL);
                }
                continue;
            };
            match ServerMessage::decode(t.as_bytes(), &JsonLimits::default()) {
                Ok(ServerMessage::Welcome { .. }) => {}
                Ok(ServerMessage::Subscribed {
                    stream_epoch,
                    accepted_cursor,
                    next_expected_sequence,
                    ..
                }) => {
                    if s.sub
                        .accept_subscribed(
                            &stream_epoch,
                            accepted_cursor.as_deref(),
                            next_expected_sequence,
                        )
                        .is_err()
                    {
                        self.local.resets += 1;
                        s.sub.reset(
                            &stream_epoch,
                            next_expected_sequence.saturating_sub(1),
                            None,
                        );
                    }
                    s.subscribed = true;
                    self.local.subscribed += 1;
                }
                Ok(ServerMessage::Event { envelope, .. }) => self.envelope(s, &envelope),
                Ok(ServerMessage::ResetRequired { .. }) => self.local.resets += 1,
                Ok(_) => {}
                Err(_) => self.local.conflicts += 1,
            }
        }
    }

    fn subscribe_message(&mut self, out: &mut Outbox<'_>) {
        let msg = ClientMessage::Subscribe {
            subscription_id: "s1".into(),
            stream_id: self.stream.clone(),
            cursor: self.start.cursor.clone(),
            scope_binding: self.start.scope.clone(),
        };
        let Ok(json) = msg.encode() else {
            return;
        };
        // Masks need not be secret for a load generator (they only defeat
        // cache poisoning through proxies, RFC 6455 §10.3); they vary.
        self.masks = self
            .masks
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        if let Ok(frame) = encode_frame(
            Role::Client,
            true,
            Opcode::Text,
            &json,
            Some(self.masks.to_be_bytes()),
        ) {
            out.wire().extend_from_slice(&frame);
        }
    }

    fn flush(&mut self) {
        if let Ok(mut s) = self.shared.lock() {
            s.merge(&self.local);
        }
        self.local = Tally::new();
    }
}

impl Service for Subs {
    type Conn = Sub;
    type Up = ();
    type Down = ();

    fn open(&mut self, _: ConnId, _: Origin, out: &mut Outbox<'_>) -> Sub {
        self.pending = self.pending.saturating_sub(1);
        self.local.connected += 1;
        out.wire().extend_from_slice(self.request().as_bytes());
        let dedupe = DedupeConfig {
            max_ids: 256,
            ..DedupeConfig::default()
        };
        let mut sub = match Subscription::new(&self.stream, dedupe) {
            Ok(s) => s,
            // 256 ids is below the ceiling: cannot fail.
            Err(_) => unreachable!("a dedupe window below the ceiling"),
        };
        sub.reset(
            &self.start.epoch,
            self.start.last,
            self.start.cursor.as_deref(),
        );
        Sub {
            phase: Phase::Head,
            input: BytesMut::new(),
            sub,
            subscribed: false,
            in_window: 0,
        }
    }

    fn bytes(&mut self, s: &mut Sub, data: RecvBuf, out: &mut Outbox<'_>) -> Result<(), ErrorCode> {
        s.input.extend_from_slice(&data);
        if let Phase::Head = s.phase {
            let limits = ResponseLimits {
                max_head_bytes: MAX_HEAD,
                max_headers: 24,
            };
            let (status, n) = match parse_response_head(&s.input, &limits) {
                Ok(Some((head, n))) => (head.status(), n),
                Ok(None) => return Ok(()),
                Err(_) => return Err(ErrorCode::INTERNAL),
            };
            s.input.advance(n);
            match (self.mode, status) {
                (Mode::Sse, 200) => {
                    s.phase = Phase::Sse(SseParser::new());
                    s.subscribed = true;
                    self.local.subscribed += 1;
                }
                (Mode::Ws, 101) => {
                    s.phase = Phase::Ws(Decoder::new(FrameConfig::client(1 << 20)));
                    self.subscribe_message(out);
                }
                _ => {
                    self.local.failed += 1;
                    return Err(ErrorCode::INTERNAL);
                }
            }
        }
        match s.phase {
            Phase::Head => Ok(()),
            Phase::Sse(_) => self.sse_input(s),
            Phase::Ws(_) => self.ws_input(s),
        }
    }

    fn connect_failed(&mut self, _: ConnId, _: i32) {
        self.pending = self.pending.saturating_sub(1);
        self.local.failed += 1;
    }

    fn close(&mut self, s: Sub, _: CloseReason, _: Instant) {
        let from = self.window.from.load(Relaxed);
        let to = self.window.to.load(Relaxed);
        if s.subscribed && from != 0 && to != u64::MAX && to >= from {
            self.local.missing += (to - from + 1).saturating_sub(s.in_window);
        }
        if to == u64::MAX {
            self.local.closed_early += 1;
        }
        self.flush();
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        while self.opened < self.share && self.pending < CONNECT_BATCH && !ctl.stopping() {
            match ctl.connect(&self.target.into()) {
                Ok(_) => {
                    self.opened += 1;
                    self.pending += 1;
                }
                Err(_) => {
                    self.local.failed += 1;
                    self.opened += 1;
                }
            }
        }
        if now.duration_since(self.last_flush) >= Duration::from_millis(100) {
            self.last_flush = now;
            self.flush();
        }
        Some(now + Duration::from_millis(50))
    }
}
