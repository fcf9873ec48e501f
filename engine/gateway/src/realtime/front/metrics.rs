//! Counters of the realtime front ends of all shards (SPEC RT-15), for
//! `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The realtime front ends' counters, shared by every shard.
#[derive(Debug, Default)]
pub struct FrontMetrics {
    /// Connections opened on the realtime listener.
    pub connections_opened: AtomicU64,
    /// Connections closed.
    pub connections_closed: AtomicU64,
    /// Live subscriptions (SSE streams and WebSocket subscriptions).
    pub subscriptions: AtomicU64,
    /// Events written to subscribers.
    pub delivered: AtomicU64,
    /// Subscribers ended as slow consumers (QUEUE_OVERFLOW, SPEC RT-10).
    pub queue_overflows: AtomicU64,
    /// WebSocket sessions of those closed with CLOSE OVERLOADED and a
    /// `retryAfterMs` hint (SPEC RT-7, RT-10).
    pub overload_hints: AtomicU64,
    /// Snapshot polls answered 304 Not Modified (SPEC RT-11).
    pub poll_not_modified: AtomicU64,
    /// Requests answered 429 (rate limited).
    pub rate_limited: AtomicU64,
    /// Requests refused with another 4xx.
    pub refused: AtomicU64,
    /// Resumes answered RESET_REQUIRED.
    pub resets: AtomicU64,
    /// WebSocket sessions closed for a protocol violation.
    pub ws_protocol_errors: AtomicU64,
    /// Snapshot polls answered (200 or 304; RT-11).
    pub polls: AtomicU64,
    /// WebSocket HEARTBEATs answered.
    pub heartbeats: AtomicU64,
    /// Most bytes found queued on one subscriber's connection when an
    /// event was delivered (the outbound queue's high water, RT-10).
    pub queue_high_water_bytes: AtomicU64,
}

impl FrontMetrics {
    pub(super) fn opened(&self) {
        self.connections_opened.fetch_add(1, Relaxed);
    }

    pub(super) fn closed(&self) {
        self.connections_closed.fetch_add(1, Relaxed);
    }

    pub(super) fn delivered(&self, n: usize) {
        self.delivered.fetch_add(n as u64, Relaxed);
    }

    pub(super) fn queued(&self, bytes: usize) {
        self.queue_high_water_bytes.fetch_max(bytes as u64, Relaxed);
    }

    pub(super) fn overflow(&self) {
        self.queue_overflows.fetch_add(1, Relaxed);
    }

    pub(super) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    /// A shard's subscription count went from `before` to `now`.
    pub(super) fn subscriptions_changed(&self, before: usize, now: usize) {
        if now >= before {
            self.subscriptions.fetch_add((now - before) as u64, Relaxed);
        } else {
            self.subscriptions.fetch_sub((before - now) as u64, Relaxed);
        }
    }
}
