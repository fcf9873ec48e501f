//! What a realtime connection has in flight (SPEC RT-10, RT-13): replay
//! paced from the ledger as the socket drains, the queued-message ceiling,
//! and the check that finds a subscriber that stopped reading.
//!
//! A resume's replay is never copied into the socket at once. The
//! subscription's answer says only whether a replay follows; each page is
//! asked for only when the connection's queue is down to half of its outbound ceiling
//! ([`RtLimits::max_outbound`], which is also the connection's send budget,
//! so the shard reports it writable right then). One page is asked for at a
//! time per connection, however many subscriptions replay on it. While a
//! subscription replays, its live events are skipped: the ledger keeps them
//! and a later page carries them in order. A subscriber that falls behind
//! the ledger's retention is told RESET_REQUIRED (QUEUE_OVERFLOW) and
//! recovers from a snapshot, as any slow consumer is.

use std::collections::VecDeque;
use std::sync::Arc;

use dtp_codec::realtime::ConnectionLimits;

use super::{Phase, RealtimeFront, RtConn};
use crate::app::GatewayUp;
use crate::realtime::config::RtLimits;
use crate::realtime::{PageSize, ReplayPage, RtRefusal, RtRequest, SubKey};
use dtp_engine::Outbox;

/// SPEC RT-13: the most event messages queued on one connection (the
/// WELCOME announces it as `maxQueuedMessages`).
pub(super) const MAX_QUEUED_MESSAGES: usize = ConnectionLimits::RT13.max_queued_messages as usize;

/// Events in one replay page: a quarter of the message ceiling, so that a
/// page asked for at half of it always fits.
const PAGE_EVENTS: u16 = (MAX_QUEUED_MESSAGES / 4) as u16;

/// A subscription's replay under way: it gets no live events until the
/// last page came.
#[derive(Debug)]
pub(super) struct Replaying {
    /// The epoch the replay is in.
    pub(super) epoch: Arc<str>,
    /// The last sequence sent.
    pub(super) after: u64,
}

/// A connection's outbound bookkeeping.
#[derive(Debug, Default)]
pub(super) struct Outflow {
    /// Where each queued event message ends ([`Outbox::position`]), oldest
    /// first; those at or before [`Outbox::sent`] have left.
    ends: VecDeque<u64>,
    /// A replay page was asked for and has not come yet.
    asked: bool,
    /// [`Outbox::sent`] at the last stall check, if bytes were queued then.
    stall_mark: Option<u64>,
}

impl Outflow {
    /// Event messages still queued.
    fn queued_messages(&mut self, out: &Outbox<'_, GatewayUp>) -> usize {
        let sent = out.sent();
        while self.ends.front().is_some_and(|&end| end <= sent) {
            self.ends.pop_front();
        }
        self.ends.len()
    }

    /// Whether `n` more event messages of `len` bytes in all stay within
    /// the ceilings (SPEC RT-10, RT-13); if not, the subscriber is too slow.
    pub(super) fn fits_all(
        &mut self,
        out: &Outbox<'_, GatewayUp>,
        len: usize,
        n: usize,
        max: usize,
    ) -> bool {
        out.queued() + len <= max && self.queued_messages(out) + n <= MAX_QUEUED_MESSAGES
    }

    /// Notes an event message just queued.
    pub(super) fn queued_one(&mut self, out: &Outbox<'_, GatewayUp>) {
        self.queued_to(out.position());
    }

    /// Notes an event message queued that ends at `end` ([`Outbox::position`]).
    pub(super) fn queued_to(&mut self, end: u64) {
        self.ends.push_back(end);
    }

    /// The periodic check (at each heartbeat): true when bytes have been
    /// queued since the last check and none of them left since — the peer
    /// stopped reading, and is a slow consumer however little it holds.
    pub(super) fn stalled(&mut self, out: &Outbox<'_, GatewayUp>) -> bool {
        let sent = out.sent();
        let stalled = out.queued() > 0 && self.stall_mark == Some(sent);
        self.stall_mark = (out.queued() > 0).then_some(sent);
        stalled
    }
}

impl RtLimits {
    /// What one replay page may hold: a quarter of the outbound ceiling.
    pub(super) fn page(&self) -> PageSize {
        PageSize {
            bytes: u32::try_from(self.max_outbound / 4).unwrap_or(u32::MAX),
            events: PAGE_EVENTS,
        }
    }
}

impl RealtimeFront {
    /// Asks for the next replay page of one of `c`'s replaying
    /// subscriptions if the connection has drained to half its ceilings;
    /// otherwise waits to be told it is writable.
    pub(super) fn pump(&mut self, c: &mut RtConn, out: &mut Outbox<'_, GatewayUp>) {
        self.metrics.queued(out.queued());
        if c.flow.asked {
            return;
        }
        let next = match &c.phase {
            Phase::Sse(s) => s.replay.as_ref().map(|r| (0, s.stream, r)),
            Phase::Ws(w) => w.replaying(),
            _ => None,
        };
        let Some((key, Some(stream), r)) = next else {
            return;
        };
        let limits = &self.config.limits;
        let drained = out.queued() <= limits.max_outbound / 2
            && c.flow.queued_messages(out) <= MAX_QUEUED_MESSAGES / 2;
        if !drained {
            return out.want_writable();
        }
        c.flow.asked = true;
        out.to_control(GatewayUp::Realtime(Box::new(RtRequest::Replay {
            conn: c.id,
            key,
            stream,
            epoch: r.epoch.clone(),
            after: r.after,
            page: limits.page(),
        })));
    }

    /// A replay page came for subscription `key` of `c`.
    pub(super) fn replayed(
        &mut self,
        c: &mut RtConn,
        key: SubKey,
        page: Result<ReplayPage, RtRefusal>,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        c.flow.asked = false;
        let kept = match &mut c.phase {
            Phase::Sse(s) => s.page(page, &mut c.flow, out),
            Phase::Ws(w) => w.page(key, page, &mut c.flow, &mut self.scratch, out),
            _ => true,
        };
        if !kept {
            // Fell behind the ledger's retention: a slow consumer.
            self.metrics.overflow();
            if matches!(c.phase, Phase::Sse(_)) {
                self.forget(c);
                c.phase = Phase::Done;
            } else {
                self.forget_sub(c, key);
            }
        }
        self.pump(c, out);
    }
}

/// Applies `page` to a replay: the events after `r.after` are handed to
/// `send`; returns whether the replay goes on (`Some(true)`), ended
/// (`Some(false)`: the subscription is live), or was refused (`None`).
pub(super) fn apply_page(
    r: &mut Replaying,
    page: Result<ReplayPage, RtRefusal>,
    mut send: impl FnMut(&crate::realtime::RtEvent),
) -> Option<bool> {
    let page = page.ok()?;
    for ev in &page.events {
        if ev.sequence > r.after {
            send(ev);
            r.after = ev.sequence;
        }
    }
    Some(page.more)
}
