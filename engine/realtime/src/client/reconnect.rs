//! Full-jitter reconnect with finite budgets (SPEC RT-7, RT-13).

use std::time::{Duration, Instant};

/// Reconnect policy (SPEC RT-7). Defaults are the RT-13 ceilings plus a
/// 500 ms base delay and a 10 s stable-open window; ceilings may be lowered,
/// never raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconnectConfig {
    /// First delay ceiling, doubled per attempt (default 500 ms; 1 ms ..= `max_delay`).
    pub base: Duration,
    /// Largest delay (default and ceiling 60 s).
    pub max_delay: Duration,
    /// Retries per outage (default and ceiling 10).
    pub max_attempts: u32,
    /// Time budget from the first failure of an outage (default and ceiling 5 min).
    pub max_elapsed: Duration,
    /// How long a connection must stay open to count as stable and reset
    /// the budget (default 10 s; 1 ms ..= 5 min).
    pub stable_after: Duration,
}

impl ReconnectConfig {
    /// RT-13 ceiling of `max_delay`.
    pub const MAX_DELAY_CEILING: Duration = Duration::from_secs(60);
    /// RT-13 ceiling of `max_attempts`.
    pub const MAX_ATTEMPTS_CEILING: u32 = 10;
    /// RT-13 ceiling of `max_elapsed`.
    pub const MAX_ELAPSED_CEILING: Duration = Duration::from_secs(300);

    /// Refuses values above the RT-13 ceilings, zero budgets and a base
    /// outside 1 ms ..= `max_delay`.
    pub fn validate(&self) -> Result<(), ReconnectConfigError> {
        let ms = Duration::from_millis(1);
        if self.max_delay > Self::MAX_DELAY_CEILING
            || self.max_attempts > Self::MAX_ATTEMPTS_CEILING
            || self.max_elapsed > Self::MAX_ELAPSED_CEILING
            || self.stable_after > Self::MAX_ELAPSED_CEILING
        {
            return Err(ReconnectConfigError::AboveCeiling);
        }
        if self.max_attempts == 0 || self.max_elapsed < ms || self.stable_after < ms {
            return Err(ReconnectConfigError::Zero);
        }
        if self.base < ms || self.base > self.max_delay {
            return Err(ReconnectConfigError::BaseOutOfRange);
        }
        Ok(())
    }
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(500),
            max_delay: Self::MAX_DELAY_CEILING,
            max_attempts: Self::MAX_ATTEMPTS_CEILING,
            max_elapsed: Self::MAX_ELAPSED_CEILING,
            stable_after: Duration::from_secs(10),
        }
    }
}

/// A refused [`ReconnectConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReconnectConfigError {
    /// Above an RT-13 ceiling (10 attempts, 5 min, 60 s).
    #[error("reconnect policy above the RT-13 ceiling (10 attempts, 5 min, max delay 60 s)")]
    AboveCeiling,
    /// A zero attempt, elapsed or stable budget.
    #[error("reconnect budgets must be positive")]
    Zero,
    /// The base delay is under 1 ms or above `max_delay`.
    #[error("base delay must be 1 ms ..= max_delay")]
    BaseOutOfRange,
}

/// How a connection or attempt failed (SPEC RT-7, RT-14), as the driver
/// classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureClass {
    /// Network loss, connect or idle timeout, 502/503/504 or a local
    /// transport error: local full jitter, plus any server hint.
    Network,
    /// RATE_LIMITED / PROVIDER_UNAVAILABLE answered by the server (429, a
    /// 503 with Retry-After, close OVERLOADED): retried only with a valid
    /// not-before hint (seed §5.3); without one the budget ends Degraded.
    Throttled,
    /// AUTH_REQUIRED (401): the session owner recovers credentials once;
    /// the reconnect policy does not retry.
    AuthRequired,
    /// FORBIDDEN (403): never retried.
    Forbidden,
    /// PROTOCOL_MISMATCH (version, subprotocol, content type): never retried.
    Protocol,
    /// MALFORMED_EVENT / schema or mapping violation: never retried by
    /// reconnecting (registered recovery instead).
    Schema,
    /// A terminal close (SSE 204, ABORTED, CLOSED): never retried.
    Closed,
}

/// Why the policy stopped retrying (the caller shows DEGRADED / stale UI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DegradedReason {
    /// `max_attempts` retries made in this outage.
    AttemptsExhausted,
    /// The elapsed budget is spent, or the next delay would overrun it
    /// (delays are never clamped to fit, seed §5.3).
    ElapsedExhausted,
    /// A [`FailureClass::Throttled`] failure came without a not-before hint.
    HintMissing,
    /// The server's not-before hint exceeds `max_delay` (not clamped).
    HintAboveMaxDelay,
}

/// Why a failure is not retried at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRetryReason {
    /// [`FailureClass::AuthRequired`].
    AuthRequired,
    /// [`FailureClass::Forbidden`].
    Forbidden,
    /// [`FailureClass::Protocol`].
    Protocol,
    /// [`FailureClass::Schema`].
    Schema,
    /// [`FailureClass::Closed`].
    Closed,
}

/// What to do after a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Reconnect after this delay (from the failure's `now`).
    RetryAfter(Duration),
    /// Stop reconnecting: budget spent or hint unusable (SPEC RT-7 DEGRADED).
    Degraded(DegradedReason),
    /// Stop: this failure is never retried.
    NoRetry(NoRetryReason),
}

/// One physical connection's reconnect state (SPEC RT-7): full jitter
/// `delay = random(0, min(max_delay, base·2^attempt))`, `effective =
/// max(delay, hint)`, at most `max_attempts` retries and `max_elapsed` from
/// the first failure of an outage, then [`Next::Degraded`].
///
/// The attempt counter resets only after a stable open: [`on_open`](Self::on_open)
/// then either [`on_stable`](Self::on_stable) once `stable_after` has passed,
/// [`mark_stable`](Self::mark_stable) when a valid heartbeat or event proves
/// the connection, or a later failure whose `now` is at least `stable_after`
/// past the open. A connection that opens and drops quickly keeps counting.
/// Degraded is sticky until a stable open or [`reset`](Self::reset) (the
/// user's manual retry, an online hint).
pub struct Reconnect {
    config: ReconnectConfig,
    attempt: u32,
    outage_start: Option<Instant>,
    open_since: Option<Instant>,
    degraded: Option<DegradedReason>,
}

impl Reconnect {
    /// A policy with no outage in progress.
    pub fn new(config: ReconnectConfig) -> Result<Self, ReconnectConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            attempt: 0,
            outage_start: None,
            open_since: None,
            degraded: None,
        })
    }

    /// Retries made in the current outage.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Whether the policy has given up ([`Next::Degraded`]).
    pub fn is_degraded(&self) -> bool {
        self.degraded.is_some()
    }

    /// A connection opened at `now` (not yet stable).
    pub fn on_open(&mut self, now: Instant) {
        self.open_since = Some(now);
    }

    /// Resets the budget if the connection has been open `stable_after`
    /// at `now`; returns whether it did.
    pub fn on_stable(&mut self, now: Instant) -> bool {
        let stable = self
            .open_since
            .is_some_and(|t| now.saturating_duration_since(t) >= self.config.stable_after);
        if stable {
            self.reset();
        }
        stable
    }

    /// Resets the budget now because the open connection proved itself
    /// (a valid heartbeat or event); ignored when no connection is open.
    pub fn mark_stable(&mut self) {
        if self.open_since.is_some() {
            self.reset();
        }
    }

    /// Forgets the outage and any Degraded state (manual retry).
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.outage_start = None;
        self.degraded = None;
    }

    /// Decides what follows a failure at `now`. `hint` is the server's
    /// not-before bound relative to `now` (Retry-After, SSE `retry`, a close
    /// hint); `random` is a uniform 64-bit draw for the jitter.
    pub fn on_failure(
        &mut self,
        kind: FailureClass,
        now: Instant,
        hint: Option<Duration>,
        random: u64,
    ) -> Next {
        if let Some(opened) = self.open_since.take()
            && now.saturating_duration_since(opened) >= self.config.stable_after
        {
            self.reset();
        }
        let no_retry = match kind {
            FailureClass::Network | FailureClass::Throttled => None,
            FailureClass::AuthRequired => Some(NoRetryReason::AuthRequired),
            FailureClass::Forbidden => Some(NoRetryReason::Forbidden),
            FailureClass::Protocol => Some(NoRetryReason::Protocol),
            FailureClass::Schema => Some(NoRetryReason::Schema),
            FailureClass::Closed => Some(NoRetryReason::Closed),
        };
        if let Some(reason) = no_retry {
            return Next::NoRetry(reason);
        }
        match self.next_delay(kind, now, hint, random) {
            Ok(delay) => {
                self.attempt += 1;
                Next::RetryAfter(delay)
            }
            Err(reason) => {
                let reason = *self.degraded.get_or_insert(reason);
                Next::Degraded(reason)
            }
        }
    }

    fn next_delay(
        &mut self,
        kind: FailureClass,
        now: Instant,
        hint: Option<Duration>,
        random: u64,
    ) -> Result<Duration, DegradedReason> {
        if let Some(reason) = self.degraded {
            return Err(reason);
        }
        let c = self.config;
        let start = *self.outage_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if self.attempt >= c.max_attempts {
            return Err(DegradedReason::AttemptsExhausted);
        }
        if elapsed >= c.max_elapsed {
            return Err(DegradedReason::ElapsedExhausted);
        }
        if kind == FailureClass::Throttled && hint.is_none() {
            return Err(DegradedReason::HintMissing);
        }
        let hint = hint.unwrap_or(Duration::ZERO);
        if hint > c.max_delay {
            return Err(DegradedReason::HintAboveMaxDelay);
        }
        let exp = c.base.saturating_mul(2u32.saturating_pow(self.attempt));
        let cap_ms = u64::try_from(exp.min(c.max_delay).as_millis()).unwrap_or(u64::MAX);
        // Uniform in 0 ..= cap_ms by multiply-shift (no modulo bias to speak of).
        let jitter = (u128::from(random) * (u128::from(cap_ms) + 1)) >> 64;
        let jitter = Duration::from_millis(u64::try_from(jitter).unwrap_or(cap_ms));
        let delay = jitter.max(hint);
        if elapsed.saturating_add(delay) > c.max_elapsed {
            return Err(DegradedReason::ElapsedExhausted);
        }
        Ok(delay)
    }
}
