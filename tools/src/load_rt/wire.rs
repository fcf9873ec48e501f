//! What a subscriber connection reads and writes once its stream began:
//! the SSE chunked body or the `realtime.v1` messages, each envelope
//! judged by the client's `Subscription` (RT-4, RT-5), and the server's
//! closes and refusals turned into the reconnect policy's failure classes
//! (RT-7).

use std::time::{Duration, Instant};

use bytes::Buf;
use dtp_codec::ErrorCode;
use dtp_codec::realtime::{ClientMessage, Envelope, JsonLimits, ServerMessage, SseControl};
use dtp_codec::ws::{FrameError, Message, Opcode, Role, encode_frame};
use dtp_engine::Outbox;
use dtp_realtime::{Observed, Verdict};

use super::herd::{Ending, close_class, reset_class};
use super::sub::{Phase, Sub, Subs};

/// The largest chunk of an SSE stream a subscriber accepts (the server's
/// events are at most 64 KiB; a replay comes in one chunk, bounded by the
/// stream's retention).
const MAX_CHUNK: usize = 32 << 20;

/// The longest chunk-size line (hex digits and extensions) accepted.
const MAX_SIZE_LINE: usize = 256;

/// What an SSE block was.
enum Block {
    Event(String),
    Control(String),
}

impl Subs {
    /// Judges one envelope (RT-4 after the schema: epoch, sequence, dedupe),
    /// applies it (the latency sample) and commits.
    fn envelope(&mut self, s: &mut Sub, env: &Envelope) {
        let now = Instant::now();
        let now_ns = self.now_ns();
        let window = self.spec.window.clone();
        let Some(c) = self.clients.get_mut(s.client) else {
            return;
        };
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
        let l = &mut self.local;
        l.received += 1;
        let verdict = c.sub.observe(observed(), now);
        match verdict {
            Verdict::Apply => {
                l.applied += 1;
                if window.contains(env.sequence) {
                    c.in_window += 1;
                    l.in_window += 1;
                    let us = now_ns.saturating_sub(t) / 1000;
                    let _ = l.latency.record(us.max(1));
                }
                let _ = c.sub.commit(env.sequence, env.resume_cursor.as_deref());
                // A valid event proves the connection (seed §5.3): the
                // attempt counter starts again.
                c.reconnect.mark_stable();
            }
            Verdict::Duplicate => l.duplicates += 1,
            Verdict::Stale => l.stale += 1,
            Verdict::Conflict(_) => l.conflicts += 1,
            Verdict::Gap { .. } | Verdict::UnknownEpoch | Verdict::Resyncing => {
                // A load generator resyncs by taking the stream from here
                // (a real client takes a snapshot); counted, never hidden.
                l.gaps += u64::from(matches!(verdict, Verdict::Gap { .. }));
                l.resets += 1;
                c.sub
                    .reset(&env.stream_epoch, env.sequence.saturating_sub(1), None);
                if c.sub.observe(observed(), now) == Verdict::Apply {
                    let _ = c.sub.commit(env.sequence, env.resume_cursor.as_deref());
                }
            }
        }
    }

    pub(super) fn sse_input(&mut self, s: &mut Sub) -> Result<(), ErrorCode> {
        // Whole chunks of the chunked body, into the SSE parser.
        let mut blocks = Vec::new();
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
                break; // the server ended the stream: handled below
            }
            let Phase::Sse(parser) = &mut s.phase else {
                return Ok(());
            };
            let data = &s.input[eol + 2..eol + 2 + size];
            parser
                .feed(data, |e| match e.event_type {
                    "message" => blocks.push(Block::Event(e.data.to_owned())),
                    "control" => blocks.push(Block::Control(e.data.to_owned())),
                    _ => {}
                })
                .map_err(|_| ErrorCode::INTERNAL)?;
            // The stream's `retry` is the server's not-before hint for the
            // next reconnect (seed §5.3).
            s.ending.hint = parser.retry().map(Duration::from_millis);
            s.input.advance(eol + 2 + size + 2);
        }
        let ended = s.input.starts_with(b"0\r\n");
        for block in blocks {
            match block {
                Block::Event(data) => {
                    match Envelope::decode(data.as_bytes(), &JsonLimits::default()) {
                        Ok(env) => self.envelope(s, &env),
                        Err(_) => self.local.conflicts += 1,
                    }
                }
                Block::Control(data) => self.sse_control(s, &data)?,
            }
        }
        if ended {
            return Err(ErrorCode::INTERNAL);
        }
        Ok(())
    }

    /// An `event: control` block: a CLOSE says how the stream ends; a
    /// RESET_REQUIRED for FORBIDDEN or a protocol failure ends the client.
    fn sse_control(&mut self, s: &mut Sub, data: &str) -> Result<(), ErrorCode> {
        match SseControl::decode(data.as_bytes(), &JsonLimits::default()) {
            Ok(SseControl::Close { category }) => s.ending.class = close_class(category),
            Ok(SseControl::ResetRequired { reason }) => {
                if let Some(class) = reset_class(reason) {
                    s.ending.class = class;
                    return Err(ErrorCode::INTERNAL);
                }
                self.local.resets += 1;
            }
            Ok(SseControl::Gap { .. }) => {}
            Err(_) => self.local.conflicts += 1,
        }
        Ok(())
    }

    pub(super) fn ws_input(&mut self, s: &mut Sub) -> Result<(), ErrorCode> {
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
                Err(FrameError::Protocol(_)) => {
                    s.ending.class = dtp_realtime::FailureClass::Protocol;
                    return Err(ErrorCode::INTERNAL);
                }
            };
            s.input.advance(used);
            let Some(Message::Text(t)) = msg else {
                if matches!(msg, Some(Message::Close(_))) {
                    return Err(ErrorCode::INTERNAL);
                }
                continue;
            };
            match ServerMessage::decode(t.as_bytes(), &JsonLimits::default()) {
                Ok(ServerMessage::Subscribed {
                    stream_epoch,
                    accepted_cursor,
                    next_expected_sequence,
                    ..
                }) => {
                    let Some(c) = self.clients.get_mut(s.client) else {
                        return Err(ErrorCode::INTERNAL);
                    };
                    if c.sub
                        .accept_subscribed(
                            &stream_epoch,
                            accepted_cursor.as_deref(),
                            next_expected_sequence,
                        )
                        .is_err()
                    {
                        self.local.resets += 1;
                        c.sub.reset(
                            &stream_epoch,
                            next_expected_sequence.saturating_sub(1),
                            None,
                        );
                    }
                    self.began(s);
                }
                Ok(ServerMessage::Event { envelope, .. }) => self.envelope(s, &envelope),
                Ok(ServerMessage::ResetRequired { reason, .. }) => {
                    if let Some(class) = reset_class(reason) {
                        s.ending.class = class;
                        return Err(ErrorCode::INTERNAL);
                    }
                    self.local.resets += 1;
                }
                Ok(ServerMessage::Close {
                    category,
                    retry_after_ms,
                }) => s.ending = Ending::close(category, retry_after_ms),
                Ok(_) => {}
                Err(_) => self.local.conflicts += 1,
            }
        }
    }

    /// SUBSCRIBE from client `i`'s last committed cursor.
    pub(super) fn subscribe_message(&mut self, i: usize, out: &mut Outbox<'_>) {
        let Some(c) = self.clients.get(i) else {
            return;
        };
        let msg = ClientMessage::Subscribe {
            subscription_id: "s1".into(),
            stream_id: self.spec.stream.clone(),
            cursor: c.sub.cursor().map(str::to_owned),
            scope_binding: self.spec.start.scope.clone(),
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
}
