//! SSE streams (SPEC RT-8): `200 text/event-stream`, chunked, a `retry:`
//! hint, the replay, then every event of the stream as it is published,
//! with comment heartbeats in between. A CURSOR stream's blocks carry
//! `id:` = the envelope's resumeCursor (encoded once, on the control
//! thread), so a reconnecting EventSource resumes from `Last-Event-ID`.
//! Resets and slow-consumer ends are `event: control` blocks the page
//! sees, never a silent gap. A resume's replay is paced (`replay.rs`).

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use dtp_codec::realtime::{
    CloseCategory, FailureKind, SseControl, write_sse_control, write_sse_retry,
};

use super::replay::{Outflow, Replaying, apply_page};
use super::reply::{chunk, end_stream, start_stream};
use super::{FrontMetrics, Phase, RealtimeFront, RtConn};
use crate::app::GatewayUp;
use crate::realtime::config::RtLimits;
use crate::realtime::{ReplayPage, RtEvent, RtRefusal};
use dtp_engine::Outbox;

/// A live SSE stream.
#[derive(Debug)]
pub(super) struct SseState {
    /// The stream (index) while subscribed.
    pub(super) stream: Option<u32>,
    /// The replay under way, if any: live events wait for it.
    pub(super) replay: Option<Replaying>,
}

impl SseState {
    /// Writes `ev`; a subscriber past the outbound ceilings is told
    /// QUEUE_OVERFLOW and its stream ended instead (SPEC RT-10, RT-13).
    /// Returns whether it stays subscribed. A replaying subscriber skips
    /// it: a later page brings it.
    pub(super) fn deliver(
        &mut self,
        ev: &RtEvent,
        max: usize,
        flow: &mut Outflow,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        if self.replay.is_some() {
            return true;
        }
        if !flow.fits(out, ev.sse.len(), max) {
            self.overflow(out);
            return false;
        }
        send_event(out, ev, flow);
        true
    }

    /// RESET_REQUIRED (QUEUE_OVERFLOW), and the stream ends.
    fn overflow(&mut self, out: &mut Outbox<'_, GatewayUp>) {
        let mut b = BytesMut::new();
        let reset = SseControl::ResetRequired {
            reason: FailureKind::QueueOverflow,
        };
        if write_sse_control(&mut b, &reset).is_ok() {
            chunk(out, &b);
        }
        end_stream(out);
        // The stream stays named: the caller takes it out of the index.
        self.replay = None;
    }

    /// A replay page; false if the subscriber fell behind and was ended.
    pub(super) fn page(
        &mut self,
        page: Result<ReplayPage, RtRefusal>,
        flow: &mut Outflow,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        let Some(r) = &mut self.replay else {
            return true;
        };
        match apply_page(r, page, |ev| send_event(out, ev, flow)) {
            Some(true) => true,
            Some(false) => {
                self.replay = None;
                true
            }
            None => {
                self.overflow(out);
                false
            }
        }
    }

    /// A comment heartbeat, and the next one scheduled; a subscriber that
    /// took none of its queued bytes since the last heartbeat is a slow
    /// consumer instead (QUEUE_OVERFLOW). Returns whether it stays.
    pub(super) fn heartbeat(
        &mut self,
        now: Instant,
        limits: &RtLimits,
        flow: &mut Outflow,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        if flow.stalled(out) {
            self.overflow(out);
            return false;
        }
        chunk(out, b": heartbeat\n\n");
        out.set_timer(Some(now + limits.sse_heartbeat));
        true
    }
}

/// Queues `ev`'s SSE block (already framed as a chunk) by reference: it is
/// the same for every subscriber. Past the connection's send budget it is
/// written into the batch instead, as every block was before blocks were
/// shared (the outbound ceiling is checked by the caller, for live events).
fn send_event(out: &mut Outbox<'_, GatewayUp>, ev: &RtEvent, flow: &mut Outflow) {
    if out.send_shared(&ev.sse).is_err() {
        out.wire().extend_from_slice(&ev.sse);
    }
    flow.queued_one(out);
}

/// Ends an SSE stream with a CLOSE control block of `category` (the
/// client's EventSource reconnects and resumes from `Last-Event-ID`).
pub(super) fn end(out: &mut Outbox<'_, GatewayUp>, category: CloseCategory) {
    let mut b = BytesMut::new();
    if write_sse_control(&mut b, &SseControl::Close { category }).is_ok() {
        chunk(out, &b);
    }
    end_stream(out);
}

impl RealtimeFront {
    /// Starts `c`'s SSE stream on `stream` once the plane accepted it:
    /// the head, `retry:`, a reset if the cursor could not be resumed; the
    /// replay follows, paced (SPEC RT-10).
    pub(super) fn sse_open(
        &mut self,
        c: &mut RtConn,
        (stream, epoch, next): (u32, Arc<str>, u64),
        replay: ReplayPage,
        reset: Option<RtRefusal>,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        let limits = &self.config.limits;
        start_stream(out, "text/event-stream");
        let mut first = BytesMut::new();
        let retry = u32::try_from(limits.sse_retry.as_millis()).unwrap_or(u32::MAX);
        write_sse_retry(&mut first, retry);
        if let Some(why) = reset {
            FrontMetrics::bump(&self.metrics.resets);
            let control = SseControl::ResetRequired {
                reason: why.failure_kind(),
            };
            if write_sse_control(&mut first, &control).is_err() {
                tracing::error!("an SSE control block could not be written");
            }
        }
        chunk(out, &first);
        let mut r = Replaying {
            epoch,
            after: next.saturating_sub(1),
        };
        let flow = &mut c.flow;
        let more = apply_page(&mut r, Ok(replay), |ev| send_event(out, ev, flow));
        out.set_timer(Some(out.now() + limits.sse_heartbeat));
        self.index.stream(stream).insert((c.id, 0));
        c.phase = Phase::Sse(SseState {
            stream: Some(stream),
            replay: (more == Some(true)).then_some(r),
        });
        self.publish_gauges();
        self.pump(c, out);
    }
}
