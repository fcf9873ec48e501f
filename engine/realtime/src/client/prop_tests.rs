//! Property tests of the client runtime: no double or out-of-order apply
//! under shuffles with duplicates; reconnect delays within bounds.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const E: &str = "0000000000000001";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// (c) A shuffle with duplicates of the server's events 1..=n: never
    /// applies twice, never out of order, Gap exactly when the next expected
    /// sequence is missing. On a Gap the driver resyncs as a snapshot at the
    /// gap's predecessor would.
    #[test]
    fn shuffled_duplicated_delivery_applies_each_event_once_in_order(
        n in 1u64..60,
        picks in proptest::collection::vec(any::<prop::sample::Index>(), 1..200),
        window in prop_oneof![Just(2048usize), 1usize..6],
    ) {
        let t = Instant::now();
        let cfg = DedupeConfig { max_ids: window, ..DedupeConfig::default() };
        let mut s = Subscription::new("s", cfg).unwrap();
        s.reset(E, 0, None);
        let mut model_last = 0u64;
        let mut applied: HashSet<u64> = HashSet::new();
        for pick in picks {
            let seq = pick.index(n as usize) as u64 + 1;
            let id = format!("e{seq}");
            let cursor = format!("c{seq}");
            let ev = Observed { epoch: E, event_id: &id, sequence: seq, digest: seq * 31, cursor: Some(&cursor) };
            let last_before = model_last;
            let v = s.observe(ev, t);
            prop_assert_eq!(matches!(v, Verdict::Gap { .. }), seq > last_before + 1);
            match v {
                Verdict::Apply => {
                    prop_assert_eq!(seq, model_last + 1);
                    prop_assert!(applied.insert(seq), "applied twice: {}", seq);
                    s.commit(seq, Some(&cursor)).unwrap();
                    model_last = seq;
                }
                Verdict::Gap { expected, got } => {
                    prop_assert_eq!((expected, got), (model_last + 1, seq));
                    prop_assert!(!applied.contains(&expected));
                    // Resync: a snapshot at got - 1 covers the missing events.
                    s.reset(E, got - 1, None);
                    model_last = got - 1;
                }
                Verdict::Duplicate => prop_assert!(applied.contains(&seq) && seq <= model_last),
                Verdict::Stale => prop_assert!(seq <= model_last),
                other => prop_assert!(false, "unexpected verdict {:?}", other),
            }
            prop_assert_eq!(s.last_applied(), model_last);
        }
    }

    /// Arbitrary observations never panic and never advance without commit.
    #[test]
    fn observe_never_panics(
        events in proptest::collection::vec((any::<u64>(), "[a-c]{0,2}", any::<u64>(), any::<bool>()), 0..64),
    ) {
        let t = Instant::now();
        let mut s = Subscription::new("s", DedupeConfig::default()).unwrap();
        s.reset(E, 0, None);
        for (seq, id, digest, commit) in events {
            let before = s.last_applied();
            let epoch = if seq % 7 == 0 { "other" } else { E };
            let v = s.observe(Observed { epoch, event_id: &id, sequence: seq, digest, cursor: None }, t);
            prop_assert_eq!(s.last_applied(), before);
            if commit {
                let r = s.commit(seq, None);
                prop_assert_eq!(r.is_ok(), v == Verdict::Apply);
            }
        }
    }

    /// (d) Delays stay in [0, max_delay], respect the hint, and the budget
    /// ends in Degraded after at most 10 retries.
    #[test]
    fn reconnect_delays_are_bounded_and_budget_is_finite(
        failures in proptest::collection::vec(
            (any::<u64>(), prop::option::of(0u64..70_000), 0u64..40_000, any::<bool>()),
            1..40,
        ),
    ) {
        let t = Instant::now();
        let cfg = ReconnectConfig::default();
        let mut r = Reconnect::new(cfg).unwrap();
        let mut now = t;
        let mut retries = 0u32;
        let mut degraded = false;
        let mut first_failure = None;
        for (random, hint_ms, gap_ms, throttled) in failures {
            now += Duration::from_millis(gap_ms);
            let start = *first_failure.get_or_insert(now);
            let hint = hint_ms.map(Duration::from_millis);
            let kind = if throttled { FailureClass::Throttled } else { FailureClass::Network };
            match r.on_failure(kind, now, hint, random) {
                Next::RetryAfter(d) => {
                    prop_assert!(!degraded, "retry after Degraded");
                    prop_assert!(d <= cfg.max_delay);
                    if let Some(h) = hint {
                        prop_assert!(d >= h);
                    }
                    retries += 1;
                    prop_assert!(retries <= 10);
                    now += d;
                    prop_assert!(now.saturating_duration_since(start) <= cfg.max_elapsed);
                }
                Next::Degraded(_) => degraded = true,
                Next::NoRetry(_) => prop_assert!(false, "network failures are retried"),
            }
        }
        // Keep failing: the budget must end in Degraded within 10 retries in total.
        let mut guard = 0;
        while !degraded {
            match r.on_failure(FailureClass::Network, now, None, u64::MAX) {
                Next::RetryAfter(d) => { retries += 1; now += d; }
                Next::Degraded(_) => degraded = true,
                Next::NoRetry(_) => prop_assert!(false),
            }
            guard += 1;
            prop_assert!(guard <= 11);
        }
        prop_assert!(retries <= 10);
    }
}
