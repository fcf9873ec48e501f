//! Web Push counters, gauges and the send latency histogram (SPEC RT-12),
//! written by the control thread and read by `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Send latency buckets of [`PushMetrics::latency_buckets`], milliseconds
/// (upper bounds; the last bucket is everything above).
pub const LATENCY_BUCKETS_MS: [u64; 10] = [10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000];

/// Web Push counters (for `/metrics`, SPEC RT-12).
#[derive(Debug, Default)]
pub struct PushMetrics {
    /// Registrations created.
    pub registered: AtomicU64,
    /// Registrations revoked by their owner.
    pub revoked: AtomicU64,
    /// Requests refused (4xx) by the plane.
    pub refused: AtomicU64,
    /// Notifications accepted (202) and handed to the sender.
    pub accepted: AtomicU64,
    /// Delivered (201/202 from the push service).
    pub delivered: AtomicU64,
    /// Ended GONE (404/410): the registration was marked GONE.
    pub gone: AtomicU64,
    /// Requests sent again (429, 5xx, connection failures).
    pub retried: AtomicU64,
    /// Ended failed: refused by the push service, retries used up, or
    /// refused before sending (SSRF guard, bad topic).
    pub failed: AtomicU64,
    /// Ended expired: the hint's lifetime passed before delivery.
    pub expired: AtomicU64,
    /// Notifications handed to the sender and not finished.
    pub in_flight: AtomicU64,
    /// Live registrations.
    pub registrations: AtomicU64,
    /// Finished notifications by send latency ([`LATENCY_BUCKETS_MS`],
    /// plus one for everything above), not cumulative.
    pub latency_buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
    /// Sum of the finished notifications' latency, microseconds.
    pub latency_us_sum: AtomicU64,
}

impl PushMetrics {
    pub(super) fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn observe(&self, latency: std::time::Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        let i = LATENCY_BUCKETS_MS
            .iter()
            .position(|&b| ms <= b)
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        if let Some(b) = self.latency_buckets.get(i) {
            Self::bump(b);
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_us_sum.fetch_add(us, Ordering::Relaxed);
    }
}
