//! The clients of a realtime load run across their connections (SPEC
//! RT-7): each keeps its ordering state (`Subscription`) and its reconnect
//! policy (`Reconnect`) while connections come and go, and every failure
//! is classified into the policy's closed failure classes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use dtp_codec::realtime::{CloseCategory, FailureKind};
use dtp_realtime::Subscription;
use dtp_realtime::{DedupeConfig, FailureClass, Next, NoRetryReason, Reconnect, ReconnectConfig};

use super::tally::Tally;

/// Where a client is between connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Not connected yet (first connect pending in the ramp).
    Fresh,
    /// A connection is being made or is open.
    Connected,
    /// Waiting for its reconnect delay.
    Waiting,
    /// The budget ran out: DEGRADED, no more reconnects.
    Degraded,
    /// A failure that is never retried (FORBIDDEN, PROTOCOL_MISMATCH, …).
    Refused,
    /// The run ended.
    Done,
}

/// One client of the run.
pub(crate) struct Client {
    pub(crate) sub: Subscription,
    pub(crate) reconnect: Reconnect,
    pub(crate) stage: Stage,
    /// Subscribed at least once (its later subscriptions are resumes).
    pub(crate) ever_subscribed: bool,
    /// Window events applied, over all its connections.
    pub(crate) in_window: u64,
}

impl Client {
    /// A client that starts from `epoch`, `last`, `cursor`.
    pub(crate) fn new(
        stream: &str,
        policy: ReconnectConfig,
        (epoch, last, cursor): (&str, u64, Option<&str>),
    ) -> Result<Self, String> {
        let dedupe = DedupeConfig {
            max_ids: 256,
            ..DedupeConfig::default()
        };
        let mut sub = Subscription::new(stream, dedupe).map_err(|e| e.to_string())?;
        sub.reset(epoch, last, cursor);
        Ok(Self {
            sub,
            reconnect: Reconnect::new(policy).map_err(|e| e.to_string())?,
            stage: Stage::Fresh,
            ever_subscribed: false,
            in_window: 0,
        })
    }
}

/// How one connection ended, as the policy classifies it, with any server
/// not-before hint (SSE `retry`, `Retry-After`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ending {
    pub(crate) class: FailureClass,
    pub(crate) hint: Option<Duration>,
}

impl Ending {
    /// A dropped or refused connection with nothing more known.
    pub(crate) const NETWORK: Self = Self {
        class: FailureClass::Network,
        hint: None,
    };

    /// A CLOSE of `category` with the server's `retryAfterMs`, if any: an
    /// OVERLOADED close is retried no sooner than its hint, and without one
    /// the client degrades (SPEC RT-7, RT-10).
    pub(crate) fn close(category: CloseCategory, retry_after_ms: Option<u32>) -> Self {
        Self {
            class: close_class(category),
            hint: retry_after_ms.map(|ms| Duration::from_millis(u64::from(ms))),
        }
    }
}

/// The class of a CLOSE category (seed §7.4's reconnect column).
pub(crate) fn close_class(c: CloseCategory) -> FailureClass {
    match c {
        CloseCategory::Normal => FailureClass::Closed,
        CloseCategory::Restart | CloseCategory::NetworkLost | CloseCategory::CursorReset => {
            FailureClass::Network
        }
        CloseCategory::Overloaded => FailureClass::Throttled,
        CloseCategory::AuthRequired => FailureClass::AuthRequired,
        CloseCategory::Forbidden => FailureClass::Forbidden,
        CloseCategory::ProtocolMismatch => FailureClass::Protocol,
    }
}

/// The class of a RESET_REQUIRED reason that ends the client rather than
/// asking for a resync (`None`: resync and go on).
pub(crate) fn reset_class(reason: FailureKind) -> Option<FailureClass> {
    match reason {
        FailureKind::Forbidden => Some(FailureClass::Forbidden),
        FailureKind::ProtocolMismatch | FailureKind::ScopeProtocolViolation => {
            Some(FailureClass::Protocol)
        }
        FailureKind::AuthRequired => Some(FailureClass::AuthRequired),
        _ => None,
    }
}

/// The class of an HTTP answer other than the stream's (SPEC RT-8 status
/// mapping): 204 terminal, 401 auth, 403 forbidden, 429 and 503 with
/// Retry-After throttled, 502/503/504 backoff, any other a mismatch.
pub(crate) fn status_class(status: u16, retry_after: Option<&str>) -> Ending {
    let hint = retry_after
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let class = match status {
        204 => FailureClass::Closed,
        401 => FailureClass::AuthRequired,
        403 => FailureClass::Forbidden,
        409 | 410 => FailureClass::Network, // cursor reset: a new connection
        429 => FailureClass::Throttled,
        503 if hint.is_some() => FailureClass::Throttled,
        502..=504 => FailureClass::Network,
        _ => FailureClass::Protocol,
    };
    Ending { class, hint }
}

/// The reconnect timers of one shard's clients: at most one per client.
pub(crate) struct Timers {
    due: BinaryHeap<Reverse<(Instant, usize)>>,
    rng: u64,
}

impl Timers {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            due: BinaryHeap::new(),
            rng: seed,
        }
    }

    /// A uniform 64-bit draw (splitmix64: the jitter needs spread, not
    /// secrecy).
    fn draw(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The client whose reconnect is due at `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<usize> {
        match self.due.peek() {
            Some(Reverse((at, _))) if *at <= now => self.due.pop().map(|Reverse((_, i))| i),
            _ => None,
        }
    }

    /// The next reconnect deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((at, _))| *at)
    }

    /// Client `i`'s connection ended at `now` as `how`: asks its policy
    /// what next and schedules, gives up or stops it, counting in `t`.
    pub(crate) fn ended(
        &mut self,
        c: &mut Client,
        i: usize,
        how: Ending,
        now: Instant,
        t: &mut Tally,
    ) {
        let draw = self.draw();
        match c.reconnect.on_failure(how.class, now, how.hint, draw) {
            Next::RetryAfter(delay) => {
                t.reconnects += 1;
                let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                let _ = t.delays.record(ms);
                c.stage = Stage::Waiting;
                self.due.push(Reverse((now + delay, i)));
            }
            Next::Degraded(_) => {
                t.degraded += 1;
                c.stage = Stage::Degraded;
            }
            Next::NoRetry(why) => {
                match why {
                    NoRetryReason::Forbidden => t.forbidden += 1,
                    NoRetryReason::Protocol => t.protocol += 1,
                    _ => t.refused_other += 1,
                }
                c.stage = Stage::Refused;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(policy: ReconnectConfig) -> Client {
        Client::new("demo", policy, ("e1", 0, None)).unwrap()
    }

    #[test]
    fn forbidden_and_protocol_mismatch_are_never_retried_and_counted_apart() {
        let (mut timers, mut t, now) = (Timers::new(1), Tally::new(), Instant::now());
        let mut a = client(ReconnectConfig::default());
        timers.ended(&mut a, 0, status_class(403, None), now, &mut t);
        let mut b = client(ReconnectConfig::default());
        let mismatch = Ending {
            class: close_class(CloseCategory::ProtocolMismatch),
            hint: None,
        };
        timers.ended(&mut b, 1, mismatch, now, &mut t);
        assert_eq!((a.stage, b.stage), (Stage::Refused, Stage::Refused));
        assert_eq!((t.forbidden, t.protocol, t.reconnects), (1, 1, 0));
        assert_eq!(timers.next(), None);
    }

    #[test]
    fn a_client_degrades_when_its_attempts_run_out() {
        let policy = ReconnectConfig {
            max_attempts: 3,
            ..ReconnectConfig::default()
        };
        let (mut timers, mut t, now) = (Timers::new(7), Tally::new(), Instant::now());
        let mut c = client(policy);
        for _ in 0..4 {
            timers.ended(&mut c, 0, Ending::NETWORK, now, &mut t);
        }
        assert_eq!((t.reconnects, t.degraded), (3, 1));
        assert_eq!(c.stage, Stage::Degraded);
        // The three timers are due within the budget, soonest first.
        let mut popped = 0;
        while timers.pop_due(now + Duration::from_secs(60)).is_some() {
            popped += 1;
        }
        assert_eq!(popped, 3);
    }

    #[test]
    fn restart_closes_and_gateway_errors_are_retried_with_full_jitter() {
        let (mut timers, mut t, now) = (Timers::new(42), Tally::new(), Instant::now());
        for i in 0..200 {
            let mut c = client(ReconnectConfig::default());
            let how = Ending {
                class: close_class(CloseCategory::Restart),
                hint: None,
            };
            timers.ended(&mut c, i, how, now, &mut t);
            assert_eq!(c.stage, Stage::Waiting);
        }
        let s = t.spread();
        // Uniform in 0 ..= 500 ms (the default base, first attempt).
        assert_eq!(s.count, 200);
        assert!(s.max <= 500 && s.max - s.min > 250, "{s:?}");
        assert!(s.distinct > 100 && s.most_in_one_ms < 10, "{s:?}");
        assert_eq!(status_class(503, None).class, FailureClass::Network);
        assert_eq!(
            status_class(429, Some("3")),
            Ending {
                class: FailureClass::Throttled,
                hint: Some(Duration::from_secs(3))
            }
        );
    }

    #[test]
    fn an_overloaded_close_is_retried_no_sooner_than_its_hint_and_degrades_without_one() {
        let (mut timers, mut t, now) = (Timers::new(9), Tally::new(), Instant::now());
        for i in 0..50 {
            let mut c = client(ReconnectConfig::default());
            let how = Ending::close(CloseCategory::Overloaded, Some(1_500));
            timers.ended(&mut c, i, how, now, &mut t);
            assert_eq!(c.stage, Stage::Waiting);
        }
        assert!(timers.pop_due(now + Duration::from_millis(1_499)).is_none());
        assert_eq!(t.reconnects, 50);
        assert!(t.spread().min >= 1_500, "{:?}", t.spread());
        let mut c = client(ReconnectConfig::default());
        timers.ended(
            &mut c,
            50,
            Ending::close(CloseCategory::Overloaded, None),
            now,
            &mut t,
        );
        assert_eq!((c.stage, t.degraded), (Stage::Degraded, 1));
    }
}
