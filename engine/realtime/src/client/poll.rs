//! Bounded polling, the client's side (SPEC RT-11): a lease of conditional
//! snapshot requests at least 5 s apart, at most 120 of them or 30 minutes,
//! one in flight at a time, with the server's `Retry-After` respected and
//! a closed mapping of answers to what happens next.
//!
//! Sans-IO: the driver asks [`PollLease::next`] when the next request may
//! go, sends it (with `If-None-Match` = [`PollLease::etag`]) and reports
//! the answer with [`PollLease::answered`].

use std::time::{Duration, Instant};

/// A polling lease's bounds (SPEC RT-11, RT-13: may be lowered, never
/// raised — except the interval, which may only grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollConfig {
    /// Least time between two requests (5 s).
    pub min_interval: Duration,
    /// Most requests in one lease (120).
    pub max_attempts: u32,
    /// Longest lease (30 min).
    pub max_duration: Duration,
}

impl Default for PollConfig {
    fn default() -> Self {
        Self {
            min_interval: Duration::from_secs(5),
            max_attempts: 120,
            max_duration: Duration::from_secs(30 * 60),
        }
    }
}

/// A config beyond what SPEC RT-11 allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PollConfigError {
    /// The interval is below 5 s.
    #[error("the polling interval may not be below 5 s")]
    IntervalTooShort,
    /// More than 120 attempts, or none.
    #[error("a polling lease holds 1 to 120 attempts")]
    Attempts,
    /// Longer than 30 minutes, or zero.
    #[error("a polling lease lasts at most 30 minutes")]
    Duration,
}

impl PollConfig {
    /// Refuses what RT-11 does not allow.
    pub fn validate(&self) -> Result<(), PollConfigError> {
        let d = Self::default();
        if self.min_interval < d.min_interval {
            return Err(PollConfigError::IntervalTooShort);
        }
        if self.max_attempts == 0 || self.max_attempts > d.max_attempts {
            return Err(PollConfigError::Attempts);
        }
        if self.max_duration.is_zero() || self.max_duration > d.max_duration {
            return Err(PollConfigError::Duration);
        }
        Ok(())
    }
}

/// When the next request may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollNext {
    /// Now (`at` has come): send it and call [`PollLease::answered`].
    SendAt(Instant),
    /// A request is in flight (single-flight): wait for its answer.
    InFlight,
    /// The lease is over (POLL_BUDGET_EXHAUSTED, or a stop the answer
    /// mapping decided): no more requests.
    Stopped(PollStop),
}

/// Why a lease stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollStop {
    /// 120 attempts or 30 minutes (POLL_BUDGET_EXHAUSTED).
    BudgetExhausted,
    /// 401 (AUTH_REQUIRED): credentials first.
    AuthRequired,
    /// 403 (FORBIDDEN).
    Forbidden,
    /// 404: the stream is not there.
    NotFound,
    /// 409/410: the client must rebuild from scratch (CURSOR_EXPIRED).
    Reset,
    /// Another status: not in the closed mapping.
    Unexpected,
}

/// What an answer means to the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollOutcome {
    /// 200: a new snapshot (its ETag remembered): apply it.
    Changed,
    /// 304: nothing new.
    Unchanged,
    /// 429 / 5xx: try again later (no sooner than the hint).
    Retry,
    /// The lease stopped.
    Stopped(PollStop),
}

/// One polling lease.
#[derive(Debug)]
pub struct PollLease {
    config: PollConfig,
    started: Instant,
    attempts: u32,
    in_flight: bool,
    not_before: Instant,
    etag: Option<String>,
    stopped: Option<PollStop>,
}

impl PollLease {
    /// A lease starting at `now`, its first request allowed at once.
    pub fn new(config: PollConfig, now: Instant) -> Result<Self, PollConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            started: now,
            attempts: 0,
            in_flight: false,
            not_before: now,
            etag: None,
            stopped: None,
        })
    }

    /// The entity tag to send as `If-None-Match`.
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Requests sent so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When the next request may go; [`PollNext::SendAt`] with an instant
    /// at or before `now` means now, and counts the attempt (call
    /// [`PollLease::answered`] with its answer).
    pub fn next(&mut self, now: Instant) -> PollNext {
        if let Some(stop) = self.stopped {
            return PollNext::Stopped(stop);
        }
        if self.in_flight {
            return PollNext::InFlight;
        }
        let over = self.attempts >= self.config.max_attempts
            || now.saturating_duration_since(self.started) >= self.config.max_duration
            || self.not_before.saturating_duration_since(self.started) >= self.config.max_duration;
        if over {
            self.stopped = Some(PollStop::BudgetExhausted);
            return PollNext::Stopped(PollStop::BudgetExhausted);
        }
        if now < self.not_before {
            return PollNext::SendAt(self.not_before);
        }
        self.attempts += 1;
        self.in_flight = true;
        PollNext::SendAt(now)
    }

    /// The answer to the request in flight: its status, its ETag (200,
    /// 304) and its `Retry-After` in seconds (429, 503). The next request
    /// goes no sooner than the minimum interval, or the hint if later.
    pub fn answered(
        &mut self,
        now: Instant,
        status: u16,
        etag: Option<&str>,
        retry_after: Option<Duration>,
    ) -> PollOutcome {
        self.in_flight = false;
        let wait = retry_after.map_or(self.config.min_interval, |h| {
            h.max(self.config.min_interval)
        });
        self.not_before = now + wait;
        let outcome = match status {
            200 => {
                self.etag = etag.map(str::to_owned);
                PollOutcome::Changed
            }
            304 => PollOutcome::Unchanged,
            429 | 500..=599 => PollOutcome::Retry,
            401 => PollOutcome::Stopped(PollStop::AuthRequired),
            403 => PollOutcome::Stopped(PollStop::Forbidden),
            404 => PollOutcome::Stopped(PollStop::NotFound),
            409 | 410 => PollOutcome::Stopped(PollStop::Reset),
            _ => PollOutcome::Stopped(PollStop::Unexpected),
        };
        if let PollOutcome::Stopped(stop) = outcome {
            self.stopped = Some(stop);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::disallowed_methods,
        clippy::disallowed_types,
        reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
    )]

    use super::*;

    fn lease(now: Instant) -> PollLease {
        PollLease::new(PollConfig::default(), now).unwrap()
    }

    #[test]
    fn one_request_at_a_time_at_least_five_seconds_apart() {
        let t = Instant::now();
        let mut l = lease(t);
        assert_eq!(l.next(t), PollNext::SendAt(t));
        assert_eq!(l.next(t), PollNext::InFlight);
        assert_eq!(
            l.answered(t, 200, Some("\"e-1\""), None),
            PollOutcome::Changed
        );
        assert_eq!(l.etag(), Some("\"e-1\""));
        let later = t + Duration::from_secs(5);
        assert_eq!(l.next(t + Duration::from_secs(1)), PollNext::SendAt(later));
        assert_eq!(l.next(later), PollNext::SendAt(later));
        assert_eq!(l.answered(later, 304, None, None), PollOutcome::Unchanged);
        assert_eq!(l.etag(), Some("\"e-1\""), "a 304 keeps the tag");
        assert_eq!(l.attempts(), 2);
    }

    #[test]
    fn retry_after_is_respected_and_never_shortens_the_interval() {
        let t = Instant::now();
        let mut l = lease(t);
        l.next(t);
        assert_eq!(
            l.answered(t, 429, None, Some(Duration::from_secs(30))),
            PollOutcome::Retry
        );
        assert_eq!(l.next(t), PollNext::SendAt(t + Duration::from_secs(30)));
        let t2 = t + Duration::from_secs(30);
        l.next(t2);
        assert_eq!(
            l.answered(t2, 503, None, Some(Duration::from_secs(1))),
            PollOutcome::Retry
        );
        assert_eq!(l.next(t2), PollNext::SendAt(t2 + Duration::from_secs(5)));
    }

    #[test]
    fn the_closed_mapping_stops_for_good() {
        for (status, stop) in [
            (401, PollStop::AuthRequired),
            (403, PollStop::Forbidden),
            (404, PollStop::NotFound),
            (409, PollStop::Reset),
            (410, PollStop::Reset),
            (302, PollStop::Unexpected),
        ] {
            let t = Instant::now();
            let mut l = lease(t);
            l.next(t);
            assert_eq!(
                l.answered(t, status, None, None),
                PollOutcome::Stopped(stop)
            );
            assert_eq!(l.next(t + Duration::from_secs(60)), PollNext::Stopped(stop));
        }
    }

    #[test]
    fn the_budget_ends_at_120_attempts_or_30_minutes() {
        let t = Instant::now();
        let mut l = lease(t);
        let mut now = t;
        for _ in 0..120 {
            assert_eq!(l.next(now), PollNext::SendAt(now));
            l.answered(now, 304, None, None);
            now += Duration::from_secs(5);
        }
        assert_eq!(l.next(now), PollNext::Stopped(PollStop::BudgetExhausted));
        let mut l = lease(t);
        l.next(t);
        l.answered(t, 304, None, None);
        assert_eq!(
            l.next(t + Duration::from_secs(30 * 60)),
            PollNext::Stopped(PollStop::BudgetExhausted)
        );
        // A hint past the lease's end ends it too.
        let mut l = lease(t);
        l.next(t);
        l.answered(t, 429, None, Some(Duration::from_secs(31 * 60)));
        assert_eq!(l.next(t), PollNext::Stopped(PollStop::BudgetExhausted));
    }

    #[test]
    fn configs_beyond_rt_11_are_refused() {
        let d = PollConfig::default();
        let t = Instant::now();
        for (c, e) in [
            (
                PollConfig {
                    min_interval: Duration::from_secs(4),
                    ..d
                },
                PollConfigError::IntervalTooShort,
            ),
            (
                PollConfig {
                    max_attempts: 121,
                    ..d
                },
                PollConfigError::Attempts,
            ),
            (
                PollConfig {
                    max_attempts: 0,
                    ..d
                },
                PollConfigError::Attempts,
            ),
            (
                PollConfig {
                    max_duration: Duration::from_secs(31 * 60),
                    ..d
                },
                PollConfigError::Duration,
            ),
        ] {
            assert_eq!(PollLease::new(c, t).unwrap_err(), e);
        }
        let slower = PollConfig {
            min_interval: Duration::from_secs(60),
            max_attempts: 10,
            ..d
        };
        assert!(PollLease::new(slower, t).is_ok());
    }
}
