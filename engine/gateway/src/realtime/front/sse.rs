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

use super::burst::{Run, share};
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
    /// Writes the run's events in one shared block; a subscriber past the
    /// outbound ceilings is told QUEUE_OVERFLOW and its stream ended
    /// after those that fit (SPEC RT-10, RT-13). Returns whether it stays
    /// subscribed. A replaying subscriber skips them: a later page brings
    /// them.
    pub(super) fn deliver(
        &mut self,
        run: &mut Run<'_>,
        max: usize,
        flow: &mut Outflow,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> bool {
        if self.replay.is_some() {
            return true;
        }
        let events = run.sse();
        if events.queue(flow, max, out) < events.ends.len() {
            self.overflow(out);
            return false;
        }
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
    share(out, &ev.sse);
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

/// SPEC RT-7: the `retry:` hint of the `n`th stream a shard opens, spread
/// over `[base, 2 × base)` milliseconds. A browser's `EventSource` waits
/// exactly the hint before it reconnects, with no jitter of its own: one
/// hint for every stream would bring a whole herd back in the same
/// millisecond after a restart or a kick. The spread is a hash of the
/// shard and the count (splitmix64), not a secret: it only has to differ
/// from one connection to the next.
pub(super) fn spread_retry(base: std::time::Duration, shard: usize, n: u64) -> u32 {
    let base = u64::try_from(base.as_millis())
        .unwrap_or(u64::MAX)
        .min(u64::from(u32::MAX / 2));
    if base == 0 {
        return 0;
    }
    let mut z = n
        .wrapping_add((shard as u64) << 48)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (base + z % base) as u32
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
        self.sse_opened += 1;
        let retry = spread_retry(limits.sse_retry, self.shard, self.sse_opened);
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
