//! What the subscribers of a realtime load run counted, per shard and in
//! all, and the spread of the reconnect delays they drew (SPEC RT-7).

use hdrhistogram::Histogram;

/// What the subscribers saw (summed over connections and shards).
#[derive(Debug)]
pub(crate) struct Tally {
    pub(crate) connected: u64,
    /// Clients subscribed for the first time.
    pub(crate) subscribed: u64,
    /// Connection attempts that failed (refused, bad answer, cut before
    /// the stream began).
    pub(crate) failed: u64,
    pub(crate) applied: u64,
    /// Envelopes received (applied or not).
    pub(crate) received: u64,
    /// Events of the window applied, over all subscribers.
    pub(crate) in_window: u64,
    /// Events of the window a client not given up on never applied.
    pub(crate) missing: u64,
    pub(crate) duplicates: u64,
    pub(crate) stale: u64,
    pub(crate) gaps: u64,
    pub(crate) resets: u64,
    pub(crate) conflicts: u64,
    /// Reconnects scheduled (one per full-jitter delay drawn).
    pub(crate) reconnects: u64,
    /// Clients subscribed again after a reconnect.
    pub(crate) resumed: u64,
    /// Clients whose attempt or elapsed budget ran out (DEGRADED).
    pub(crate) degraded: u64,
    /// Clients refused for good: FORBIDDEN, never retried.
    pub(crate) forbidden: u64,
    /// Clients refused for good: PROTOCOL_MISMATCH, never retried.
    pub(crate) protocol: u64,
    /// Clients stopped by another failure that is never retried (401,
    /// a terminal close, a schema failure).
    pub(crate) refused_other: u64,
    /// Clients still waiting to reconnect when the run ended.
    pub(crate) unresumed: u64,
    /// Publish → apply, µs, window events only.
    pub(crate) latency: Histogram<u64>,
    /// The reconnect delays drawn (after any server hint), ms.
    pub(crate) delays: Histogram<u64>,
}

/// A histogram from 1 to `high` at 3 significant digits (0 is recorded
/// too); the bounds are valid, so it cannot fail.
fn histogram(high: u64) -> Histogram<u64> {
    Histogram::new_with_bounds(1, high, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            connected: 0,
            subscribed: 0,
            failed: 0,
            applied: 0,
            received: 0,
            in_window: 0,
            missing: 0,
            duplicates: 0,
            stale: 0,
            gaps: 0,
            resets: 0,
            conflicts: 0,
            reconnects: 0,
            resumed: 0,
            degraded: 0,
            forbidden: 0,
            protocol: 0,
            refused_other: 0,
            unresumed: 0,
            // 1 µs .. 100 s.
            latency: histogram(100_000_000),
            // 1 ms .. 10 min (delays are at most 60 s).
            delays: histogram(600_000),
        }
    }

    pub(crate) fn merge(&mut self, o: &Tally) {
        self.connected += o.connected;
        self.subscribed += o.subscribed;
        self.failed += o.failed;
        self.applied += o.applied;
        self.received += o.received;
        self.in_window += o.in_window;
        self.missing += o.missing;
        self.duplicates += o.duplicates;
        self.stale += o.stale;
        self.gaps += o.gaps;
        self.resets += o.resets;
        self.conflicts += o.conflicts;
        self.reconnects += o.reconnects;
        self.resumed += o.resumed;
        self.degraded += o.degraded;
        self.forbidden += o.forbidden;
        self.protocol += o.protocol;
        self.refused_other += o.refused_other;
        self.unresumed += o.unresumed;
        let _ = self.latency.add(&o.latency);
        let _ = self.delays.add(&o.delays);
    }

    /// Clients given up on: degraded or refused for good.
    pub(crate) fn given_up(&self) -> u64 {
        self.degraded + self.forbidden + self.protocol + self.refused_other
    }

    /// The spread of the reconnect delays drawn.
    pub(crate) fn spread(&self) -> Spread {
        let d = &self.delays;
        let mut distinct = 0;
        let mut most = 0;
        for v in d.iter_recorded() {
            distinct += 1;
            most = most.max(v.count_at_value());
        }
        Spread {
            count: d.len(),
            min: if d.is_empty() { 0 } else { d.min() },
            p50: d.value_at_quantile(0.5),
            p99: d.value_at_quantile(0.99),
            max: d.max(),
            distinct,
            most_in_one_ms: most,
        }
    }
}

/// How the reconnect delays drawn are spread (SPEC RT-7: full jitter
/// spreads a herd instead of sending it back at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spread {
    /// Delays drawn.
    pub(crate) count: u64,
    /// Shortest, median, 99th percentile and longest, ms.
    pub(crate) min: u64,
    pub(crate) p50: u64,
    pub(crate) p99: u64,
    pub(crate) max: u64,
    /// Distinct millisecond values among them (exact below 2 s).
    pub(crate) distinct: u64,
    /// The most delays that fell on one millisecond value.
    pub(crate) most_in_one_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::Tally;

    #[test]
    fn the_spread_counts_distinct_milliseconds_and_the_largest_pile() {
        let mut t = Tally::new();
        for ms in [0, 3, 3, 3, 250, 499] {
            t.delays.record(ms).unwrap();
        }
        let s = t.spread();
        assert_eq!((s.count, s.min, s.max), (6, 0, 499));
        assert_eq!((s.distinct, s.most_in_one_ms), (4, 3));
    }
}
