//! Unit tests of the reconnect policy.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use std::time::{Duration, Instant};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy() -> Reconnect {
    Reconnect::new(ReconnectConfig::default()).unwrap()
}

#[test]
fn config_ceilings_only_go_down() {
    let d = ReconnectConfig::default();
    assert_eq!(
        (d.base, d.max_delay, d.max_attempts),
        (ms(500), ms(60_000), 10)
    );
    assert_eq!((d.max_elapsed, d.stable_after), (ms(300_000), ms(10_000)));
    let bad = [
        (
            ReconnectConfig {
                max_attempts: 11,
                ..d
            },
            ReconnectConfigError::AboveCeiling,
        ),
        (
            ReconnectConfig {
                max_delay: ms(60_001),
                ..d
            },
            ReconnectConfigError::AboveCeiling,
        ),
        (
            ReconnectConfig {
                max_elapsed: ms(300_001),
                ..d
            },
            ReconnectConfigError::AboveCeiling,
        ),
        (
            ReconnectConfig {
                max_attempts: 0,
                ..d
            },
            ReconnectConfigError::Zero,
        ),
        (
            ReconnectConfig {
                stable_after: ms(0),
                ..d
            },
            ReconnectConfigError::Zero,
        ),
        (
            ReconnectConfig { base: ms(0), ..d },
            ReconnectConfigError::BaseOutOfRange,
        ),
        (
            ReconnectConfig {
                base: ms(2_000),
                max_delay: ms(1_000),
                ..d
            },
            ReconnectConfigError::BaseOutOfRange,
        ),
    ];
    for (c, want) in bad {
        assert_eq!(Reconnect::new(c).err(), Some(want), "{c:?}");
    }
    let lower = ReconnectConfig {
        max_attempts: 3,
        max_delay: ms(5_000),
        ..d
    };
    assert!(Reconnect::new(lower).is_ok());
}

#[test]
fn full_jitter_doubles_the_ceiling_and_caps_at_max() {
    let t = Instant::now();
    let mut r = policy();
    // random = u64::MAX draws the top of the range, 0 the bottom.
    let want = [
        500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000,
    ];
    for (i, w) in want.into_iter().enumerate() {
        let got = r.on_failure(FailureClass::Network, t, None, u64::MAX);
        assert_eq!(got, Next::RetryAfter(ms(w)), "attempt {i}");
    }
    assert_eq!(
        r.on_failure(FailureClass::Network, t, None, 0),
        Next::RetryAfter(ms(0))
    );
    assert_eq!(r.attempt(), 10);
    assert_eq!(
        r.on_failure(FailureClass::Network, t, None, 0),
        Next::Degraded(DegradedReason::AttemptsExhausted)
    );
    assert!(r.is_degraded());
    // Half of the range for a mid draw.
    let mut r = policy();
    assert_eq!(
        r.on_failure(FailureClass::Network, t, None, 1 << 63),
        Next::RetryAfter(ms(250))
    );
}

#[test]
fn server_hints_bound_the_delay_and_are_never_clamped() {
    let t = Instant::now();
    let mut r = policy();
    assert_eq!(
        r.on_failure(FailureClass::Network, t, Some(ms(3_000)), 0),
        Next::RetryAfter(ms(3_000))
    );
    assert_eq!(
        r.on_failure(FailureClass::Throttled, t, Some(ms(10)), u64::MAX),
        Next::RetryAfter(ms(1_000))
    );
    let mut r = policy();
    assert_eq!(
        r.on_failure(FailureClass::Throttled, t, None, 0),
        Next::Degraded(DegradedReason::HintMissing)
    );
    let mut r = policy();
    assert_eq!(
        r.on_failure(FailureClass::Network, t, Some(ms(60_001)), 0),
        Next::Degraded(DegradedReason::HintAboveMaxDelay)
    );
    // The delay must fit the remaining elapsed budget.
    let mut r = policy();
    assert!(matches!(
        r.on_failure(FailureClass::Network, t, None, 0),
        Next::RetryAfter(_)
    ));
    let late = t + ms(299_000);
    assert_eq!(
        r.on_failure(FailureClass::Network, late, Some(ms(2_000)), 0),
        Next::Degraded(DegradedReason::ElapsedExhausted)
    );
    let mut r = policy();
    r.on_failure(FailureClass::Network, t, None, 0);
    assert_eq!(
        r.on_failure(FailureClass::Network, t + ms(300_000), None, 0),
        Next::Degraded(DegradedReason::ElapsedExhausted)
    );
}

#[test]
fn protocol_schema_forbidden_auth_and_close_never_retry() {
    let t = Instant::now();
    let mut r = policy();
    let cases = [
        (FailureClass::Forbidden, NoRetryReason::Forbidden),
        (FailureClass::Protocol, NoRetryReason::Protocol),
        (FailureClass::Schema, NoRetryReason::Schema),
        (FailureClass::AuthRequired, NoRetryReason::AuthRequired),
        (FailureClass::Closed, NoRetryReason::Closed),
    ];
    for (kind, reason) in cases {
        assert_eq!(r.on_failure(kind, t, Some(ms(1)), 0), Next::NoRetry(reason));
    }
    assert_eq!(r.attempt(), 0);
}

#[test]
fn only_a_stable_open_resets_the_budget() {
    let t = Instant::now();
    let mut r = policy();
    for _ in 0..3 {
        r.on_failure(FailureClass::Network, t, None, 0);
    }
    // A brief open does not reset.
    r.on_open(t + ms(1_000));
    assert!(!r.on_stable(t + ms(10_999)));
    r.on_failure(FailureClass::Network, t + ms(10_999), None, 0);
    assert_eq!(r.attempt(), 4);
    // Stable after 10 s open.
    r.on_open(t + ms(20_000));
    assert!(r.on_stable(t + ms(30_000)));
    assert_eq!(r.attempt(), 0);
    // A failure long after an unreported open counts as after a stable one.
    r.on_failure(FailureClass::Network, t + ms(31_000), None, 0);
    r.on_open(t + ms(32_000));
    r.on_failure(FailureClass::Network, t + ms(50_000), None, u64::MAX);
    assert_eq!(r.attempt(), 1);
    // An explicit proof (heartbeat/event) resets at once, and clears Degraded.
    let mut r = policy();
    r.on_failure(FailureClass::Throttled, t, None, 0);
    assert!(r.is_degraded());
    r.mark_stable();
    assert!(r.is_degraded(), "no open connection: nothing proven");
    r.on_open(t);
    r.mark_stable();
    assert!(!r.is_degraded());
    r.reset();
    assert_eq!(r.attempt(), 0);
}
