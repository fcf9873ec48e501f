//! Latency recording: an `hdrhistogram` at microsecond resolution, with
//! coordinated-omission correction for open-loop load.
//!
//! Owns the histogram and its summary; never reads a clock itself (callers
//! pass the instants), so it runs the same under a real and a simulated load
//! generator.
//!
//! # Coordinated omission
//!
//! A closed-loop client sends the next request when the previous answer
//! arrives, so a server stall delays the requests that would have seen it and
//! they are never measured: the stall is *omitted*. An open-loop client sends
//! at a fixed rate, and the latency that matters is measured from when a
//! request was **due** (its intended send time, from the schedule), not from
//! when the client got round to sending it. [`LatencyRecorder::record_open_loop`]
//! does exactly that, and [`Schedule`] gives the intended times. For
//! closed-loop runs that want the same correction, hdrhistogram's own
//! back-filling is available as [`LatencyRecorder::record_corrected`].

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Latencies above this are recorded as this (one minute).
pub const MAX_TRACKED: Duration = Duration::from_secs(60);
/// Significant decimal digits the histogram keeps (0.1 % value error).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A latency histogram in microseconds.
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
}

/// The figures of a [`LatencyRecorder`], in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest value recorded.
    pub max_us: f64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyRecorder {
    /// An empty recorder tracking 0 µs … [`MAX_TRACKED`] at 3 significant
    /// digits.
    pub fn new() -> Self {
        let high = MAX_TRACKED.as_micros() as u64;
        let hist = match Histogram::new_with_bounds(1, high, SIGNIFICANT_DIGITS) {
            Ok(h) => h,
            // hdrhistogram refuses only low < 1, high < 2 × low or more than
            // 5 digits; these constants are none of them, and the
            // `new_tracks_up_to_a_minute` test builds one.
            Err(e) => unreachable!("hdrhistogram refused constant bounds: {e}"),
        };
        Self { hist }
    }

    /// Records one latency (closed loop, or any measured interval).
    pub fn record(&mut self, latency: Duration) {
        self.hist.saturating_record(micros(latency));
    }

    /// Records an open-loop latency against the request's
    /// *intended* send time, so a stall that delayed sending is counted in
    /// full (coordinated-omission correction). An answer "before" its
    /// intended time (a clock quirk) counts as 0.
    pub fn record_open_loop(&mut self, intended: Instant, received: Instant) {
        self.record(received.saturating_duration_since(intended));
    }

    /// Records `latency` and, when it exceeds `expected_interval` (the
    /// client's normal spacing between requests), the requests a closed-loop
    /// client would have sent meanwhile: hdrhistogram's `record_correct`.
    pub fn record_corrected(&mut self, latency: Duration, expected_interval: Duration) {
        let value = micros(latency).min(self.hist.high());
        let interval = micros(expected_interval);
        // Fails only for a value above the histogram's range, clamped above.
        let _ = self.hist.record_correct(value, interval);
    }

    /// Adds every value of `other` (one recorder per connection or thread,
    /// merged at the end).
    pub fn merge(&mut self, other: &LatencyRecorder) {
        // Both histograms have the same bounds, so `add` cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Forgets every value.
    pub fn reset(&mut self) {
        self.hist.reset();
    }

    /// The value at `quantile` (0.0 … 1.0) in microseconds; 0 when empty.
    pub fn quantile_us(&self, quantile: f64) -> u64 {
        self.hist.value_at_quantile(quantile)
    }

    /// p50 / p90 / p99 / p99.9 / max and the mean.
    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        let q = |x: f64| self.hist.value_at_quantile(x) as f64;
        LatencySummary {
            count: self.hist.len(),
            mean_us: self.hist.mean(),
            p50_us: q(0.50),
            p90_us: q(0.90),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: self.hist.max() as f64,
        }
    }
}

/// The intended send times of an open-loop client: request `n` (from 0) is
/// due at `start + n × interval`.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    start: Instant,
    interval: Duration,
}

impl Schedule {
    /// A schedule of `rate` requests per second from `start` (a rate of 0 is
    /// taken as 1 per second).
    pub fn per_second(start: Instant, rate: u64) -> Self {
        let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
        Self { start, interval }
    }

    /// The spacing between two requests.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// When request `n` is due.
    pub fn intended(&self, n: u64) -> Instant {
        let nanos = u128::from(n) * self.interval.as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.start + Duration::from_nanos(nanos)
    }

    /// How many requests are due by `now` (the index of the next one not yet
    /// due).
    pub fn due_by(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.start).as_nanos();
        let per = self.interval.as_nanos().max(1);
        u64::try_from(elapsed / per + 1).unwrap_or(u64::MAX)
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_tracks_up_to_a_minute() {
        let mut r = LatencyRecorder::new();
        r.record(Duration::ZERO);
        r.record(MAX_TRACKED);
        r.record(Duration::from_secs(3600)); // clamped
        assert_eq!(r.count(), 3);
        let max = r.summary().max_us;
        assert!((max - 60e6).abs() / 60e6 < 0.001, "{max}");
    }

    #[test]
    fn percentiles_at_microsecond_resolution() {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record(Duration::from_micros(us));
        }
        let s = r.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.p50_us, 500.0);
        assert_eq!(s.p90_us, 900.0);
        assert_eq!(s.p99_us, 990.0);
        assert_eq!(s.p999_us, 999.0);
        assert_eq!(s.max_us, 1000.0);
        assert!((s.mean_us - 500.5).abs() < 1.0);
        assert_eq!(LatencyRecorder::new().summary(), LatencySummary::default());
    }

    #[test]
    fn open_loop_counts_from_the_intended_send_time() {
        let start = Instant::now();
        let sched = Schedule::per_second(start, 1000); // one per ms
        let mut r = LatencyRecorder::new();
        // The server stalls for 100 ms: request 0 is answered at 100 ms and
        // the client, blocked meanwhile, sends requests 1..=99 late; each is
        // answered 10 µs after it was actually sent (at 100 ms).
        r.record_open_loop(sched.intended(0), start + Duration::from_millis(100));
        for n in 1..100 {
            let answered = start + Duration::from_millis(100) + Duration::from_micros(10);
            r.record_open_loop(sched.intended(n), answered);
        }
        let s = r.summary();
        // Measured from the actual send, p50 would be 10 µs; against the
        // schedule it is about 50 ms.
        assert!(s.p50_us > 45_000.0 && s.p50_us < 55_000.0, "{s:?}");
        assert!(s.max_us >= 99_900.0);
        // Before its intended time counts as 0, not a panic.
        r.record_open_loop(start + Duration::from_secs(1), start);
    }

    #[test]
    fn closed_loop_correction_backfills() {
        let mut r = LatencyRecorder::new();
        r.record_corrected(Duration::from_millis(10), Duration::from_millis(1));
        // 10 ms, 9 ms, …, 1 ms: ten values.
        assert_eq!(r.count(), 10);
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        a.record(Duration::from_micros(10));
        b.record(Duration::from_micros(30));
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.summary().max_us, 30.0);
        a.reset();
        assert_eq!(a.count(), 0);
    }

    #[test]
    fn schedule_intended_and_due() {
        let start = Instant::now();
        let s = Schedule::per_second(start, 4);
        assert_eq!(s.interval(), Duration::from_millis(250));
        assert_eq!(s.intended(2), start + Duration::from_millis(500));
        assert_eq!(s.due_by(start), 1);
        assert_eq!(s.due_by(start + Duration::from_millis(600)), 3);
        assert_eq!(
            Schedule::per_second(start, 0).interval(),
            Duration::from_secs(1)
        );
    }
}
