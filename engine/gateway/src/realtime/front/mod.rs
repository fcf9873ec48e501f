//! The realtime front end on every shard: HTTP/1.1 (SSE, snapshots,
//! publication) and WebSocket (`realtime.v1`, and the echo endpoint for
//! RFC 6455 conformance suites) on the engine's own connections (issue 6).
//!
//! A connection starts as HTTP/1.1 with keep-alive. A request that needs
//! the stream ledgers (subscribe, snapshot, publish, cut) is forwarded to
//! the realtime plane on the control thread, and the connection reads no
//! further request until the answer comes back. An SSE request turns the
//! connection into a stream of events; a WebSocket upgrade into a
//! `realtime.v1` session. Events come from the control thread once per
//! shard ([`RtDecision::Event`]) and are fanned out here to every
//! subscriber of the stream: the SSE block and the envelope were encoded
//! once, on the control thread, for all of them, and the events of one
//! turn go to each subscriber as one block shared by all (`burst.rs`).
//!
//! Slow consumers (SPEC RT-10): a subscriber whose connection has more than
//! [`RtLimits::max_outbound`](super::RtLimits) queued when an event comes
//! is told (RESET_REQUIRED / CLOSE OVERLOADED with `QUEUE_OVERFLOW`) and
//! closed — never sent a later event with an earlier one skipped. The
//! same holds for a connection with [`MAX_QUEUED_MESSAGES`](replay) event
//! messages queued, and for one that took none of its queued bytes for a
//! whole heartbeat period. A resume's replay is paced from the ledger as
//! the socket drains (`replay.rs`), and each connection's send budget is its
//! outbound ceiling, so no realtime connection holds more of its core's
//! send memory than that (SPEC MEM-5).

mod burst;
mod http;
mod index;
mod metrics;
mod page;
mod push;
mod replay;
mod reply;
mod sse;
mod web;
mod ws;

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use dtp_codec::ErrorCode;
use dtp_codec::realtime::CloseCategory;
use dtp_transports::{CloseReason, ConnId, RecvBuf};

pub use metrics::FrontMetrics;

use self::index::Index;
use self::replay::Outflow;
use self::sse::SseState;
use self::ws::WsState;
use super::config::RtConfig;
use super::msg::{RtDecision, SubKey};
use crate::app::{GatewayDown, GatewayUp};
use dtp_engine::Connections;
use dtp_engine::{Origin, Outbox, Service};

/// A request waiting for the realtime plane's answer.
#[derive(Debug)]
enum Waiting {
    /// An SSE subscription (answered with Subscribed or Refused).
    Sse { keep_alive: bool, stream: Box<str> },
    /// A snapshot, with the client's If-None-Match.
    Snapshot {
        if_none_match: Option<dtp_codec::http::IfNoneMatch>,
        keep_alive: bool,
        stream: Box<str>,
    },
    /// A publication (201, `event_type` given) or an operator action (200).
    Write {
        keep_alive: bool,
        stream: Box<str>,
        event_type: Option<Box<str>>,
    },
    /// A Web Push request (SPEC RT-12), answered with a status and a body.
    Push { keep_alive: bool },
}

impl Waiting {
    fn keep_alive(&self) -> bool {
        match self {
            Self::Sse { keep_alive, .. }
            | Self::Snapshot { keep_alive, .. }
            | Self::Write { keep_alive, .. }
            | Self::Push { keep_alive } => *keep_alive,
        }
    }

    /// The stream the request named (a valid name: checked before asking).
    fn stream(&self) -> &str {
        match self {
            Self::Sse { stream, .. }
            | Self::Snapshot { stream, .. }
            | Self::Write { stream, .. } => stream,
            Self::Push { .. } => "",
        }
    }
}

/// Where a connection is in its life.
enum Phase {
    /// Reading HTTP requests.
    Http,
    /// A request waits for the control thread.
    Waiting(Waiting),
    /// Streaming SSE.
    Sse(SseState),
    /// A WebSocket session (`realtime.v1` or echo).
    Ws(Box<WsState>),
    /// Closing: input is dropped.
    Done,
}

/// One connection of the realtime front end.
pub struct RtConn {
    id: ConnId,
    /// Bytes received and not yet used.
    input: BytesMut,
    phase: Phase,
    /// The authenticated client (index into the configuration's clients).
    client: Option<usize>,
    /// What it has in flight (SPEC RT-10, RT-13).
    flow: Outflow,
}

/// The realtime front end of one shard (a [`Service`]).
pub struct RealtimeFront {
    config: Arc<RtConfig>,
    index: Index,
    /// Gives WebSocket connections their `connectionId`.
    shard: usize,
    serial: u64,
    /// SSE streams opened: spreads their `retry:` hints ([`sse::spread_retry`]).
    sse_opened: u64,
    /// WebSocket sessions closed OVERLOADED: spreads their `retryAfterMs`
    /// hints the same way.
    overloads: u64,
    /// Snapshot polls per client: (window start, polls in it).
    polls: std::collections::HashMap<usize, (Instant, u32)>,
    metrics: Arc<FrontMetrics>,
    /// This shard's subscriptions as last added to the metrics.
    subscriptions: usize,
    /// Reused for framing messages.
    scratch: BytesMut,
    /// Events taken this turn, fanned out at its end ([`burst`]).
    burst: Vec<Arc<super::RtEvent>>,
    /// The shard is stopping: new streams, sessions and requests are
    /// answered 503 with Retry-After (SPEC RT-8, RT-11).
    stopping: bool,
}

impl RealtimeFront {
    /// The front end of shard `shard`.
    pub fn new(config: Arc<RtConfig>, shard: usize, metrics: Arc<FrontMetrics>) -> Self {
        Self {
            config,
            index: Index::default(),
            shard,
            serial: 0,
            sse_opened: 0,
            overloads: 0,
            polls: std::collections::HashMap::new(),
            metrics,
            subscriptions: 0,
            scratch: BytesMut::new(),
            burst: Vec::new(),
            stopping: false,
        }
    }

    /// Uses what `c` has received, as far as its phase allows.
    fn drive(&mut self, c: &mut RtConn, out: &mut Outbox<'_, GatewayUp>) -> Result<(), ErrorCode> {
        loop {
            match &c.phase {
                Phase::Http => {
                    if !self.next_request(c, out)? {
                        return Ok(());
                    }
                }
                Phase::Ws(_) => return self.ws_input(c, out),
                Phase::Waiting(_) => {
                    // Pipelined requests wait, within one request's bounds.
                    let l = &self.config.limits.http;
                    let bound = l.max_head_bytes.saturating_add(l.max_body_bytes as usize);
                    return if c.input.len() > bound {
                        Err(ErrorCode::LIMIT_EXCEEDED)
                    } else {
                        Ok(())
                    };
                }
                Phase::Sse(_) | Phase::Done => {
                    // An SSE client sends nothing more; whatever it sends is
                    // dropped (bounded: nothing is kept).
                    c.input.clear();
                    return Ok(());
                }
            }
        }
    }

    /// Forgets `c`'s subscriptions on this shard.
    fn forget(&mut self, c: &mut RtConn) {
        match &mut c.phase {
            Phase::Sse(s) => {
                if let Some(stream) = s.stream.take() {
                    self.index.remove(stream, (c.id, 0));
                }
            }
            Phase::Ws(w) => {
                for (key, stream) in w.live_streams() {
                    self.index.remove(stream, (c.id, key));
                }
            }
            _ => {}
        }
        self.publish_gauges();
    }

    /// Forgets subscription `key` of `c`'s WebSocket session.
    fn forget_sub(&mut self, c: &mut RtConn, key: SubKey) {
        if let Phase::Ws(w) = &mut c.phase
            && let Some(stream) = w.remove(key)
        {
            self.index.remove(stream, (c.id, key));
            self.publish_gauges();
        }
    }

    fn publish_gauges(&mut self) {
        let now = self.index.total();
        self.metrics.subscriptions_changed(self.subscriptions, now);
        self.subscriptions = now;
    }

    /// Carries out one of the realtime plane's decisions.
    ///
    /// Events wait for the end of the turn; anything else first sends
    /// the events before it, so that every connection sees them in order.
    fn decide(&mut self, d: RtDecision, conns: &mut dyn Connections<RtConn, GatewayUp>) {
        if !matches!(d, RtDecision::Event(_)) {
            self.fan_out(conns);
        }
        match d {
            RtDecision::Event(ev) => self.burst.push(ev),
            RtDecision::Kick(stream) => {
                let who: Vec<_> = self.index.stream(stream).list().to_vec();
                for (conn, _) in who {
                    conns.visit(conn, &mut |c, out| {
                        match &c.phase {
                            Phase::Sse(_) => sse::end(out, CloseCategory::Restart),
                            Phase::Ws(_) => ws::end(out, CloseCategory::Restart),
                            _ => {}
                        }
                        self.forget(c);
                        c.phase = Phase::Done;
                    });
                }
                self.publish_gauges();
            }
            RtDecision::Replay { conn, key, page } => {
                let mut page = Some(page);
                conns.visit(conn, &mut |c, out| {
                    if let Some(page) = page.take() {
                        self.replayed(c, key, page, out);
                    }
                });
            }
            RtDecision::Subscribed { conn, .. }
            | RtDecision::Refused { conn, .. }
            | RtDecision::Published { conn, .. }
            | RtDecision::Snapshot { conn, .. }
            | RtDecision::PushAnswer { conn, .. } => {
                let mut d = Some(d);
                conns.visit(conn, &mut |c, out| {
                    let Some(d) = d.take() else {
                        return;
                    };
                    self.answer(c, d, out);
                    if let Err(code) = self.drive(c, out) {
                        tracing::debug!(%code, "closing a realtime connection");
                        self.forget(c);
                        c.phase = Phase::Done;
                        out.close();
                    }
                });
                self.publish_gauges();
            }
        }
    }

    /// Sends a run of events to subscription `key` of `c`; false if the
    /// subscription is gone (or was just ended as a slow consumer).
    fn deliver(
        &mut self,
        c: &mut RtConn,
        key: SubKey,
        run: &mut burst::Run<'_>,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        let max = self.config.limits.max_outbound;
        self.metrics.queued(out.queued());
        let flow = &mut c.flow;
        let kept = match &mut c.phase {
            Phase::Sse(s) => s.deliver(run, max, flow, out),
            Phase::Ws(w) => {
                let retry_ms = self.overload_retry_ms();
                let kept = w.deliver(key, run, (max, retry_ms, flow), out);
                if !kept && out.closing() {
                    self.overloads += 1;
                    FrontMetrics::bump(&self.metrics.overload_hints);
                }
                kept
            }
            _ => false,
        };
        if !kept {
            self.metrics.overflow();
        }
        kept
    }

    /// The `retryAfterMs` of the next CLOSE OVERLOADED: spread over
    /// `[overload_retry, 2 × overload_retry)` like the SSE `retry:` hints
    /// (SPEC RT-7), so the sessions of one burst do not all return at once.
    fn overload_retry_ms(&self) -> u32 {
        sse::spread_retry(
            self.config.limits.overload_retry,
            self.shard,
            self.overloads,
        )
    }
}

impl Service for RealtimeFront {
    type Conn = RtConn;
    type Up = GatewayUp;
    type Down = GatewayDown;

    fn open(&mut self, conn: ConnId, _: Origin, out: &mut Outbox<'_, GatewayUp>) -> RtConn {
        let limits = &self.config.limits;
        out.set_timer(Some(out.now() + limits.idle_timeout));
        // SPEC MEM-5, RT-10: the outbound ceiling is the send budget, so
        // the connection is writable again at half of it (when a paced
        // replay asks for its next page) and holds no more than that of
        // the core's send memory.
        out.limit_send_queue(limits.max_outbound);
        self.metrics.opened();
        RtConn {
            id: conn,
            input: BytesMut::new(),
            phase: Phase::Http,
            client: None,
            flow: Outflow::default(),
        }
    }

    fn bytes(
        &mut self,
        c: &mut RtConn,
        data: RecvBuf,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> Result<(), ErrorCode> {
        // A request head's clock starts at its first byte and is not moved
        // by later ones (a slowloris trickle); a whole request resets it
        // to the keep-alive timeout.
        if c.input.is_empty() && matches!(c.phase, Phase::Http) && !data.is_empty() {
            out.set_timer(Some(out.now() + self.config.limits.head_timeout));
        }
        c.input.extend_from_slice(&data);
        let r = self.drive(c, out);
        if r.is_err() {
            self.forget(c);
            c.phase = Phase::Done;
        }
        r
    }

    fn decision(
        &mut self,
        decision: GatewayDown,
        conns: &mut dyn Connections<RtConn, GatewayUp>,
    ) -> Option<GatewayDown> {
        match decision {
            GatewayDown::Realtime(d) => {
                self.decide(*d, conns);
                None
            }
            GatewayDown::RtEvent(ev) => {
                self.burst.push(ev);
                None
            }
            other => Some(other),
        }
    }

    /// The turn's events go out, a burst in one send per subscriber.
    fn decisions_done(&mut self, conns: &mut dyn Connections<RtConn, GatewayUp>) {
        self.fan_out(conns);
    }

    fn timeout(&mut self, c: &mut RtConn, now: Instant, out: &mut Outbox<'_, GatewayUp>) {
        let retry_ms = self.overload_retry_ms();
        let limits = &self.config.limits;
        let flow = &mut c.flow;
        match &mut c.phase {
            Phase::Sse(s) => {
                if !s.heartbeat(now, limits, flow, out) {
                    self.metrics.overflow();
                    self.forget(c);
                    c.phase = Phase::Done;
                }
            }
            Phase::Ws(w) => {
                if !w.timeout(now, (limits, retry_ms, &self.metrics), flow, out) {
                    self.overloads += 1;
                    self.forget(c);
                    c.phase = Phase::Done;
                }
            }
            // An idle keep-alive connection (or one whose request never
            // completed) is closed.
            Phase::Http | Phase::Done => out.close(),
            Phase::Waiting(_) => out.set_timer(Some(now + limits.idle_timeout)),
        }
    }

    /// The connection drained to half its ceiling: a paced replay asks
    /// for its next page.
    fn writable(&mut self, c: &mut RtConn, out: &mut Outbox<'_, GatewayUp>) {
        self.pump(c, out);
    }

    fn tick(&mut self, _: Instant, ctl: &mut dyn dtp_engine::Ctl) -> Option<Instant> {
        self.stopping = ctl.stopping();
        None
    }

    /// The gateway is stopping: every SSE stream ends with a CLOSE RESTART
    /// control block and every WebSocket session with CLOSE RESTART and
    /// close code 1012 (Service Restart), so clients reconnect and resume
    /// from their cursors instead of seeing a cut (SPEC RT-8, RT-9).
    fn stopping(&mut self, c: &mut RtConn, out: &mut Outbox<'_, GatewayUp>) {
        self.stopping = true;
        match &c.phase {
            Phase::Sse(_) => sse::end(out, CloseCategory::Restart),
            Phase::Ws(w) => w.restart(out),
            Phase::Http | Phase::Waiting(_) | Phase::Done => return,
        }
        self.forget(c);
        c.phase = Phase::Done;
    }

    fn close(&mut self, mut c: RtConn, _: CloseReason, _: Instant) {
        self.forget(&mut c);
        self.metrics.closed();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use dtp_codec::Limits;

    use super::*;
    use crate::realtime::config::RtLimits;
    use dtp_engine::Ctl;

    struct Stopping;

    impl Ctl for Stopping {
        fn connect(&mut self, _: &dtp_transports::Endpoint) -> Result<ConnId, ErrorCode> {
            Err(ErrorCode::INTERNAL)
        }
        fn send(&mut self, _: ConnId, _: &dtp_codec::LogicalFrame) -> Result<(), ErrorCode> {
            Err(ErrorCode::INTERNAL)
        }
        fn close(&mut self, _: ConnId) {}
        fn stopping(&self) -> bool {
            true
        }
    }

    /// Feeds `request` to a fresh connection of `front`; what it answered.
    fn serve(front: &mut RealtimeFront, request: &[u8]) -> (String, bool) {
        let (mut buf, limits) = (BytesMut::new(), Limits::default());
        let mut out = Outbox::new(&mut buf, &limits, 1 << 20, 1 << 20, Instant::now());
        let mut c = front.open(
            ConnId::from_u64(1),
            Origin::Accepted { listener: 0 },
            &mut out,
        );
        let r = front.bytes(&mut c, RecvBuf::from(BytesMut::from(request)), &mut out);
        assert!(r.is_ok());
        let closing = out.closing();
        drop(out);
        (String::from_utf8_lossy(&buf).into_owned(), closing)
    }

    #[test]
    fn a_stopping_shard_answers_503_with_retry_after() {
        let config = Arc::new(RtConfig {
            clients: Vec::new(),
            cookie: "s".into(),
            login: crate::realtime::LoginKey::new([5; 32], Instant::now()),
            origins: Vec::new(),
            own_origins: Default::default(),
            echo_max_message: None,
            scopes: HashMap::new(),
            limits: RtLimits::default(),
        });
        let mut front = RealtimeFront::new(config, 0, Arc::default());
        let req = b"GET /v1/health HTTP/1.1\r\nHost: t\r\n\r\n";
        let (answer, _) = serve(&mut front, req);
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        front.tick(Instant::now(), &mut Stopping);
        let (answer, closing) = serve(&mut front, req);
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        assert!(answer.contains("Retry-After: 1\r\n"), "{answer}");
        assert!(
            answer.ends_with(
                r#"{"error":"PROVIDER_UNAVAILABLE","message":"the server is stopping; retry in a second"}"#
            ),
            "{answer}"
        );
        assert!(closing, "the connection is not kept");
    }
}
