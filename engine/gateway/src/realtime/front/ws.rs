//! WebSocket sessions (SPEC RT-9, RT-10): `realtime.v1` and the plain echo
//! endpoint, on the RFC 6455 layer of `dtp_codec::ws`.
//!
//! `realtime.v1`: the upgrade must offer the subprotocol and, if it comes
//! from a browser (an `Origin`), from an allowed origin exactly; the client
//! is authenticated at the upgrade and authorised again at every SUBSCRIBE.
//! A subscription is pending until the realtime plane answers: SUBSCRIBED
//! (then the replay, then live events) or RESET_REQUIRED (the client takes
//! a snapshot and subscribes again with its checkpoint's cursor). Any
//! malformed, unknown, binary or out-of-order message closes the session
//! with CLOSE PROTOCOL_MISMATCH; a slow consumer with CLOSE OVERLOADED and
//! a `retryAfterMs` hint (SPEC RT-7: the client may retry, no sooner; it
//! resumes from its last committed cursor, or takes a snapshot).

use std::time::Instant;

use bytes::{Buf, BytesMut};
use dtp_codec::ErrorCode;
use dtp_codec::http::{RequestHead, websocket_upgrade};
use dtp_codec::realtime::{
    ClientMessage, CloseCategory, ConnectionLimits, FailureKind, HeartbeatPolicy, JsonLimits,
    MAX_RETRY_AFTER_MS, SUBPROTOCOL, ServerMessage, write_event_message_head,
};
use dtp_codec::ws::{
    CloseCode, Decoder, FrameConfig, FrameError, Message, Opcode, Role, encode_header,
};

use super::burst::{Run, event_frame};
use super::http::NEED_CREDENTIALS;
use super::replay::{Outflow, Replaying, apply_page};
use super::reply::refuse_head;
use super::{FrontMetrics, Phase, RealtimeFront, RtConn};
use crate::app::GatewayUp;
use crate::realtime::config::RtLimits;
use crate::realtime::{ReplayPage, RtDecision, RtRefusal, RtRequest, SubKey};
use dtp_engine::Outbox;

/// One logical subscription of a session.
#[derive(Debug)]
struct Sub {
    id: String,
    key: SubKey,
    /// The stream (index) once SUBSCRIBED; `None` while pending.
    stream: Option<u32>,
    /// The replay under way, if any: live events wait for it.
    replay: Option<Replaying>,
}

/// A WebSocket session.
pub(super) struct WsState {
    decoder: Decoder,
    /// The echo endpoint rather than `realtime.v1`.
    echo: bool,
    subs: Vec<Sub>,
    next_key: SubKey,
    last_input: Instant,
}

impl WsState {
    /// The live subscriptions: (key, stream).
    pub(super) fn live_streams(&self) -> impl Iterator<Item = (SubKey, u32)> + '_ {
        self.subs
            .iter()
            .filter_map(|s| s.stream.map(|st| (s.key, st)))
    }

    /// The first subscription still replaying: (key, stream, replay).
    pub(super) fn replaying(&self) -> Option<(SubKey, Option<u32>, &Replaying)> {
        self.subs
            .iter()
            .find_map(|s| s.replay.as_ref().map(|r| (s.key, s.stream, r)))
    }

    /// Sends the run's events to subscription `key`, in one shared block;
    /// a session past the outbound ceilings is a slow consumer: CLOSE
    /// OVERLOADED (QUEUE_OVERFLOW) with `retry_ms` as its `retryAfterMs`
    /// after those that fit, and closed (SPEC RT-7, RT-10, RT-13). Returns
    /// whether the subscription stays. A replaying subscription skips
    /// them: a later page brings them.
    pub(super) fn deliver(
        &mut self,
        key: SubKey,
        run: &mut Run<'_>,
        (max, retry_ms, flow): (usize, u32, &mut Outflow),
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        let Some(sub) = self
            .subs
            .iter()
            .find(|s| s.key == key && s.stream.is_some())
        else {
            return false;
        };
        if sub.replay.is_some() {
            return true;
        }
        let mut all = 0;
        let queued = run.ws(&sub.id, |events| {
            all = events.ends.len();
            events.queue(flow, max, out)
        });
        if queued < all {
            close_session(out, CloseCategory::Overloaded, Some(retry_ms));
            self.subs.clear();
            return false;
        }
        true
    }

    /// A replay page for subscription `key`; false if it fell behind the
    /// ledger's retention: it is told RESET_REQUIRED (QUEUE_OVERFLOW) and
    /// the caller forgets it (the session stays).
    pub(super) fn page(
        &mut self,
        key: SubKey,
        page: Result<ReplayPage, RtRefusal>,
        flow: &mut Outflow,
        scratch: &mut BytesMut,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        let Some(sub) = self.subs.iter_mut().find(|s| s.key == key) else {
            return true;
        };
        let Some(r) = &mut sub.replay else {
            return true;
        };
        let id = &sub.id;
        let sent = apply_page(r, page, |ev| {
            event_head(id, scratch);
            event_frame(out.wire(), scratch, ev.envelope());
            flow.queued_one(out);
        });
        match sent {
            Some(more) => {
                if !more {
                    sub.replay = None;
                }
                true
            }
            None => {
                let reason = FailureKind::QueueOverflow;
                let subscription_id = sub.id.clone();
                send(
                    out,
                    &ServerMessage::ResetRequired {
                        subscription_id,
                        reason,
                    },
                );
                false
            }
        }
    }

    /// Takes subscription `key` out; its stream if it was subscribed.
    pub(super) fn remove(&mut self, key: SubKey) -> Option<u32> {
        let i = self.subs.iter().position(|s| s.key == key)?;
        self.subs.swap_remove(i).stream
    }

    /// Ends the session for a restart of the server: CLOSE RESTART and
    /// close code 1012 (`realtime.v1`), or the close frame alone (echo).
    pub(super) fn restart(&self, out: &mut Outbox<'_, GatewayUp>) {
        let category = CloseCategory::Restart;
        if self.echo {
            close_frame(out, category.close_code().unwrap_or(CloseCode::GOING_AWAY));
            out.close();
        } else {
            close_session(out, category, None);
        }
    }

    /// The idle check: a session silent for twice the heartbeat's maximum
    /// interval is closed (going away). Returns whether it stays.
    /// A session that took none of its queued bytes since the last check
    /// (every heartbeat maximum) is a slow consumer: CLOSE OVERLOADED with
    /// `retry_ms` as its `retryAfterMs`.
    pub(super) fn timeout(
        &mut self,
        now: Instant,
        (limits, retry_ms, metrics): (&RtLimits, u32, &FrontMetrics),
        flow: &mut Outflow,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        // A slow consumer first: one that also stopped sending is told
        // why it is closed.
        if !self.echo && flow.stalled(out) {
            metrics.overflow();
            FrontMetrics::bump(&metrics.overload_hints);
            close_session(out, CloseCategory::Overloaded, Some(retry_ms));
            return false;
        }
        let silent_for = now.saturating_duration_since(self.last_input);
        let allowed = limits.ws_heartbeat_max * 2;
        if silent_for >= allowed {
            close_frame(out, CloseCode::GOING_AWAY);
            out.close();
            return false;
        }
        let check = now + limits.ws_heartbeat_max;
        out.set_timer(Some(check.min(self.last_input + allowed)));
        true
    }
}

/// Appends one unmasked server frame.
fn frame(out: &mut Outbox<'_, GatewayUp>, opcode: Opcode, payload: &[u8]) {
    match encode_header(Role::Server, true, opcode, payload.len() as u64, None) {
        Ok(h) => {
            out.wire().extend_from_slice(h.as_slice());
            out.wire().extend_from_slice(payload);
        }
        Err(_) => tracing::error!("a WebSocket frame header could not be encoded"),
    }
}

/// Writes the head of an EVENT message for `subscription_id` into
/// `scratch`.
fn event_head(subscription_id: &str, scratch: &mut BytesMut) {
    scratch.clear();
    if write_event_message_head(scratch, subscription_id).is_err() {
        // Ids are checked by the SUBSCRIBE decoder: unreachable in practice.
        scratch.clear();
    }
}

fn send(out: &mut Outbox<'_, GatewayUp>, msg: &ServerMessage) {
    match msg.encode() {
        Ok(bytes) => frame(out, Opcode::Text, &bytes),
        Err(_) => tracing::error!(
            kind = msg.type_name(),
            "a realtime.v1 message could not be encoded"
        ),
    }
}

fn close_frame(out: &mut Outbox<'_, GatewayUp>, code: CloseCode) {
    frame(out, Opcode::Close, &code.0.to_be_bytes());
}

/// Ends a session: CLOSE{category}, its close frame, then the connection.
pub(super) fn end(out: &mut Outbox<'_, GatewayUp>, category: CloseCategory) {
    close_session(out, category, None);
}

/// CLOSE{category} (with `retryAfterMs` if `retry_ms` is given), then the
/// close frame with the category's code, then the connection is closed
/// once both are sent.
fn close_session(out: &mut Outbox<'_, GatewayUp>, category: CloseCategory, retry_ms: Option<u32>) {
    let retry_after_ms = retry_ms.map(|ms| ms.clamp(1, MAX_RETRY_AFTER_MS));
    send(
        out,
        &ServerMessage::Close {
            category,
            retry_after_ms,
        },
    );
    close_frame(out, category.close_code().unwrap_or(CloseCode::NORMAL));
    out.close();
}

impl RealtimeFront {
    /// A WebSocket upgrade request: `/v1/ws` (`realtime.v1`) or, when
    /// switched on, `/v1/echo`.
    pub(super) fn ws_request(
        &mut self,
        c: &mut RtConn,
        head: &RequestHead,
        echo: bool,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let keep = head.keep_alive();
        let up = match websocket_upgrade(head) {
            Ok(Some(up)) => up,
            Ok(None) => {
                let extra = [("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13")];
                let why = (
                    426,
                    FailureKind::Unsupported,
                    "this endpoint takes a WebSocket upgrade",
                );
                return self.refuse(c, out, why, keep, &extra);
            }
            Err(e) => {
                FrontMetrics::bump(&self.metrics.refused);
                refuse_head(out, e);
                c.phase = Phase::Done;
                return;
            }
        };
        // An allowed origin exactly (the page's own among them, once the
        // listener is bound); never one derived from the Host asked for.
        if let Some(origin) = &up.origin
            && !self.config.origin_allowed(origin)
        {
            let why = (
                403,
                FailureKind::Forbidden,
                "this Origin may not open a WebSocket here",
            );
            return self.refuse(c, out, why, false, &[]);
        }
        let protocol = if echo {
            None
        } else {
            let Some(client) = self.authenticate(head, out.now()) else {
                let extra = [("WWW-Authenticate", "Bearer")];
                let why = (401, FailureKind::AuthRequired, NEED_CREDENTIALS);
                return self.refuse(c, out, why, false, &extra);
            };
            if !up.offers(SUBPROTOCOL) {
                let why = (
                    400,
                    FailureKind::ProtocolMismatch,
                    "the upgrade must offer the subprotocol realtime.v1",
                );
                return self.refuse(c, out, why, false, &[]);
            }
            c.client = Some(client);
            Some(SUBPROTOCOL)
        };
        match up.response(protocol) {
            Ok(head) => head.write(out.wire()),
            Err(_) => {
                let why = (
                    400,
                    FailureKind::ProtocolMismatch,
                    "the WebSocket handshake could not be answered",
                );
                return self.refuse(c, out, why, false, &[]);
            }
        }
        let limits = &self.config.limits;
        let max = match self.config.echo_max_message {
            Some(n) if echo => n,
            _ => limits.max_message,
        };
        let now = out.now();
        if !echo {
            self.serial += 1;
            let ms = |d: std::time::Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
            let welcome = ServerMessage::Welcome {
                connection_id: format!("c{}-{}", self.shard, self.serial),
                heartbeat: HeartbeatPolicy {
                    min_interval_ms: ms(limits.ws_heartbeat_min),
                    max_interval_ms: ms(limits.ws_heartbeat_max),
                    ack_timeout_ms: ms(limits.ws_heartbeat_max),
                },
                limits: ConnectionLimits {
                    max_message_bytes: u32::try_from(limits.max_message).unwrap_or(u32::MAX),
                    max_subscriptions: u32::try_from(limits.max_subscriptions).unwrap_or(u32::MAX),
                    max_queued_messages: ConnectionLimits::RT13.max_queued_messages,
                    max_queued_bytes: u32::try_from(limits.max_outbound).unwrap_or(u32::MAX),
                },
            };
            send(out, &welcome);
        }
        // The first check at one heartbeat maximum: the stall check
        // (`timeout`) needs two looks before the idle limit of two.
        out.set_timer(Some(now + limits.ws_heartbeat_max));
        c.phase = Phase::Ws(Box::new(WsState {
            decoder: Decoder::new(FrameConfig::server(max as u64)),
            echo,
            subs: Vec::new(),
            next_key: 1,
            last_input: now,
        }));
    }

    /// Decodes and serves every whole message of `c`'s input.
    pub(super) fn ws_input(
        &mut self,
        c: &mut RtConn,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> Result<(), ErrorCode> {
        loop {
            let Phase::Ws(w) = &mut c.phase else {
                c.input.clear();
                return Ok(());
            };
            if c.input.is_empty() {
                return Ok(());
            }
            match w.decoder.decode(&mut c.input[..]) {
                Err(FrameError::Incomplete { .. }) => return Ok(()),
                Err(FrameError::Protocol(e)) => {
                    FrontMetrics::bump(&self.metrics.ws_protocol_errors);
                    close_frame(out, e.close_code());
                    out.close();
                    self.end_ws(c);
                    return Ok(());
                }
                Ok((used, msg)) => {
                    c.input.advance(used);
                    w.last_input = out.now();
                    if let Some(msg) = msg {
                        self.ws_message(c, msg, out);
                    }
                }
            }
        }
    }

    fn end_ws(&mut self, c: &mut RtConn) {
        self.forget(c);
        c.phase = Phase::Done;
        c.input.clear();
    }

    fn ws_message(&mut self, c: &mut RtConn, msg: Message, out: &mut Outbox<'_, GatewayUp>) {
        let Phase::Ws(w) = &mut c.phase else {
            return;
        };
        match msg {
            Message::Ping(p) => frame(out, Opcode::Pong, &p),
            Message::Pong(_) => {}
            Message::Close(cf) => {
                // RFC 6455 §5.5.1: echo the code, then close.
                match cf {
                    Some(cf) => close_frame(out, cf.code),
                    None => frame(out, Opcode::Close, &[]),
                }
                out.close();
                self.end_ws(c);
            }
            Message::Text(t) if w.echo => frame(out, Opcode::Text, t.as_bytes()),
            Message::Binary(b) if w.echo => frame(out, Opcode::Binary, &b),
            // realtime.v1 is text only (RT-9 baseline).
            Message::Binary(_) => {
                FrontMetrics::bump(&self.metrics.ws_protocol_errors);
                close_frame(out, CloseCode::UNSUPPORTED_DATA);
                out.close();
                self.end_ws(c);
            }
            Message::Text(t) => match ClientMessage::decode(t.as_bytes(), &JsonLimits::default()) {
                Ok(m) => self.rt_message(c, m, out),
                Err(_) => {
                    FrontMetrics::bump(&self.metrics.ws_protocol_errors);
                    close_session(out, CloseCategory::ProtocolMismatch, None);
                    self.end_ws(c);
                }
            },
        }
    }

    fn rt_message(&mut self, c: &mut RtConn, msg: ClientMessage, out: &mut Outbox<'_, GatewayUp>) {
        let client = c.client.and_then(|i| self.config.clients.get(i));
        let Phase::Ws(w) = &mut c.phase else {
            return;
        };
        match msg {
            ClientMessage::Subscribe {
                subscription_id,
                stream_id,
                cursor,
                scope_binding,
            } => {
                if w.subs.iter().any(|s| s.id == subscription_id) {
                    // The same id twice: the client lost track (RT-9).
                    close_session(out, CloseCategory::ProtocolMismatch, None);
                    return self.end_ws(c);
                }
                let refuse = |reason| ServerMessage::ResetRequired {
                    subscription_id: subscription_id.clone(),
                    reason,
                };
                if w.subs.len() >= self.config.limits.max_subscriptions {
                    return send(out, &refuse(FailureKind::QueueOverflow));
                }
                if !client.is_some_and(|cl| cl.may_read(&stream_id)) {
                    return send(out, &refuse(FailureKind::Forbidden));
                }
                if self
                    .config
                    .scopes
                    .get(&stream_id)
                    .is_some_and(|s| *s != scope_binding)
                {
                    return send(out, &refuse(FailureKind::ScopeProtocolViolation));
                }
                let key = w.next_key;
                w.next_key = w.next_key.wrapping_add(1).max(1);
                w.subs.push(Sub {
                    id: subscription_id,
                    key,
                    stream: None,
                    replay: None,
                });
                out.to_control(GatewayUp::Realtime(Box::new(RtRequest::Subscribe {
                    conn: c.id,
                    key,
                    stream: stream_id.into(),
                    cursor: cursor.map(String::into_boxed_str),
                    page: crate::realtime::PageSize::NONE,
                })));
            }
            ClientMessage::Unsubscribe { subscription_id } => {
                if let Some(i) = w.subs.iter().position(|s| s.id == subscription_id) {
                    let sub = w.subs.swap_remove(i);
                    if let Some(stream) = sub.stream {
                        self.index.remove(stream, (c.id, sub.key));
                        self.publish_gauges();
                    }
                }
                // Idempotent: an id not (or no longer) subscribed is
                // answered too, so the client's tombstone ends.
                send(out, &ServerMessage::Unsubscribed { subscription_id });
            }
            ClientMessage::Heartbeat { nonce } => {
                FrontMetrics::bump(&self.metrics.heartbeats);
                send(out, &ServerMessage::HeartbeatAck { nonce });
            }
            ClientMessage::Close { .. } => {
                close_frame(out, CloseCode::NORMAL);
                out.close();
                self.end_ws(c);
            }
        }
    }

    /// The realtime plane answered a SUBSCRIBE of this session.
    pub(super) fn ws_answer(
        &mut self,
        c: &mut RtConn,
        d: RtDecision,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let Phase::Ws(w) = &mut c.phase else {
            return;
        };
        let (key, reset) = match &d {
            RtDecision::Subscribed { key, reset, .. } => (*key, *reset),
            RtDecision::Refused { key, why, .. } => (*key, Some(*why)),
            _ => return,
        };
        // Unsubscribed meanwhile: nothing to say.
        let Some(i) = w
            .subs
            .iter()
            .position(|s| s.key == key && s.stream.is_none())
        else {
            return;
        };
        if let Some(why) = reset {
            FrontMetrics::bump(&self.metrics.resets);
            let sub = w.subs.swap_remove(i);
            return send(
                out,
                &ServerMessage::ResetRequired {
                    subscription_id: sub.id,
                    reason: why.failure_kind(),
                },
            );
        }
        let RtDecision::Subscribed {
            stream,
            epoch,
            next,
            accepted,
            replay,
            ..
        } = d
        else {
            return;
        };
        let sub = &mut w.subs[i];
        sub.stream = Some(stream);
        send(
            out,
            &ServerMessage::Subscribed {
                subscription_id: sub.id.clone(),
                stream_epoch: epoch.to_string(),
                accepted_cursor: accepted.map(|a| a.to_string()),
                next_expected_sequence: next,
            },
        );
        // Whatever page came now (none, from this front end); the rest
        // paced (SPEC RT-10).
        let mut r = Replaying {
            epoch,
            after: next.saturating_sub(1),
        };
        let (id, scratch, flow) = (&sub.id, &mut self.scratch, &mut c.flow);
        let more = apply_page(&mut r, Ok(replay), |ev| {
            event_head(id, scratch);
            event_frame(out.wire(), scratch, ev.envelope());
            flow.queued_one(out);
        });
        sub.replay = (more == Some(true)).then_some(r);
        self.index.stream(stream).insert((c.id, key));
        self.publish_gauges();
        self.pump(c, out);
    }
}
