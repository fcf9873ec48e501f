//! Unit tests of the subscription: the RT-5 table, commit, reset, SUBSCRIBED.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use std::time::{Duration, Instant};

use super::*;

const E: &str = "epoch-a";

fn ev(id: &str, sequence: u64, digest: u64) -> Observed<'_> {
    Observed {
        epoch: E,
        event_id: id,
        sequence,
        digest,
        cursor: None,
    }
}

/// A subscription in epoch `E` that committed e1..=e3 (digest = sequence).
fn sub_at_3() -> Subscription {
    let t = Instant::now();
    let mut s = Subscription::new("orders", DedupeConfig::default()).unwrap();
    s.reset(E, 0, None);
    for (i, id) in ["e1", "e2", "e3"].into_iter().enumerate() {
        let seq = i as u64 + 1;
        assert_eq!(s.observe(ev(id, seq, seq), t), Verdict::Apply);
        s.commit(seq, None).unwrap();
    }
    s
}

#[test]
fn rt5_table() {
    let t = Instant::now();
    let other_epoch = Observed {
        epoch: "epoch-b",
        ..ev("e9", 4, 4)
    };
    // (input, verdict): lastApplied = 3, window = {e1:1, e2:2, e3:3}.
    let table: &[(Observed<'_>, Verdict)] = &[
        (ev("e2", 2, 2), Verdict::Duplicate),
        (
            ev("e2", 5, 2),
            Verdict::Conflict(ConflictKind::SameIdOtherEvent),
        ),
        (
            ev("e2", 2, 99),
            Verdict::Conflict(ConflictKind::SameIdOtherEvent),
        ),
        (
            ev("x2", 2, 2),
            Verdict::Conflict(ConflictKind::SameSequenceOtherId),
        ),
        (ev("x0", 0, 0), Verdict::Stale),
        (ev("e4", 4, 4), Verdict::Apply),
        (
            ev("e5", 5, 5),
            Verdict::Gap {
                expected: 4,
                got: 5,
            },
        ),
        (
            ev("e9", u64::MAX, 1),
            Verdict::Gap {
                expected: 4,
                got: u64::MAX,
            },
        ),
        (other_epoch, Verdict::UnknownEpoch),
    ];
    for (input, want) in table {
        let mut s = sub_at_3();
        assert_eq!(s.observe(*input, t), *want, "{input:?}");
        assert_eq!(s.last_applied(), 3, "observe advances nothing");
        assert_eq!(s.is_resyncing(), want.requires_resync(), "{input:?}");
        if want.requires_resync() {
            assert_eq!(s.observe(ev("e4", 4, 4), t), Verdict::Resyncing);
        }
    }
    // Stale needs an id the window forgot (a remembered one is Duplicate).
    let cfg = DedupeConfig {
        max_ids: 1,
        ..DedupeConfig::default()
    };
    let mut s = Subscription::new("orders", cfg).unwrap();
    s.reset(E, 0, None);
    for seq in 1..=2 {
        assert_eq!(
            s.observe(ev(&format!("e{seq}"), seq, seq), t),
            Verdict::Apply
        );
        s.commit(seq, None).unwrap();
    }
    assert_eq!(s.observe(ev("e1", 1, 1), t), Verdict::Stale);
    assert_eq!(s.observe(ev("e2", 2, 2), t), Verdict::Duplicate);
    assert_eq!((s.stats().stale, s.stats().dedupe_evicted), (1, 1));
}

#[test]
fn new_subscription_knows_no_epoch_and_refuses_raised_ceilings() {
    let mut s = Subscription::new("orders", DedupeConfig::default()).unwrap();
    assert_eq!(
        s.observe(ev("e1", 1, 1), Instant::now()),
        Verdict::UnknownEpoch
    );
    let raised = DedupeConfig {
        max_ids: 2049,
        ..DedupeConfig::default()
    };
    assert_eq!(
        Subscription::new("o", raised).err(),
        Some(DedupeConfigError::AboveCeiling)
    );
    let aged = DedupeConfig {
        max_age: Duration::from_secs(601),
        ..DedupeConfig::default()
    };
    assert_eq!(
        Subscription::new("o", aged).err(),
        Some(DedupeConfigError::AboveCeiling)
    );
    let zero = DedupeConfig {
        max_ids: 0,
        ..DedupeConfig::default()
    };
    assert_eq!(
        Subscription::new("o", zero).err(),
        Some(DedupeConfigError::Zero)
    );
    assert_eq!(s.stream_id(), "orders");
}

#[test]
fn commit_only_the_event_just_judged_apply() {
    let t = Instant::now();
    let mut s = sub_at_3();
    assert_eq!(s.commit(4, None), Err(CommitError::NothingPending));
    let c = Observed {
        cursor: Some("c4"),
        ..ev("e4", 4, 4)
    };
    assert_eq!(s.observe(c, t), Verdict::Apply);
    assert_eq!(
        s.commit(5, Some("c4")),
        Err(CommitError::SequenceMismatch {
            expected: 4,
            got: 5
        })
    );
    assert_eq!(s.commit(4, Some("c5")), Err(CommitError::CursorMismatch));
    assert_eq!(s.commit(4, None), Err(CommitError::CursorMismatch));
    assert_eq!(s.last_applied(), 3);
    assert_eq!(s.commit(4, Some("c4")), Ok(()));
    assert_eq!(
        (s.last_applied(), s.cursor(), s.dedupe_len()),
        (4, Some("c4"), 4)
    );
    assert_eq!(s.commit(4, Some("c4")), Err(CommitError::NothingPending));
    // Any later observe forgets an uncommitted Apply (e.g. its effect failed).
    assert_eq!(s.observe(ev("e5", 5, 5), t), Verdict::Apply);
    assert_eq!(s.observe(ev("e4", 4, 4), t), Verdict::Duplicate);
    assert_eq!(s.commit(5, None), Err(CommitError::NothingPending));
    let st = s.stats();
    assert_eq!((st.apply, st.commits, st.duplicate), (5, 4, 1));
}

#[test]
fn dedupe_window_forgets_by_age() {
    let t = Instant::now();
    let mut s = sub_at_3();
    let later = t + Duration::from_secs(600);
    assert_eq!(s.observe(ev("e1", 1, 1), later), Verdict::Duplicate);
    let much_later = later + Duration::from_millis(1);
    assert_eq!(s.observe(ev("e1", 1, 1), much_later), Verdict::Stale);
    assert_eq!((s.dedupe_len(), s.stats().dedupe_expired), (0, 3));
}

#[test]
fn reset_adopts_the_position_and_clears_state() {
    let t = Instant::now();
    let mut s = sub_at_3();
    assert_eq!(
        s.observe(ev("e7", 7, 7), t),
        Verdict::Gap {
            expected: 4,
            got: 7
        }
    );
    s.reset(E, 3, Some("c3"));
    assert_eq!(
        (s.is_resyncing(), s.dedupe_len(), s.cursor()),
        (false, 3, Some("c3"))
    );
    s.reset(E, 10, None); // a snapshot ahead: window cleared, next is 11
    assert_eq!((s.last_applied(), s.dedupe_len()), (10, 0));
    assert_eq!(s.observe(ev("e11", 11, 11), t), Verdict::Apply);
    s.reset("epoch-b", 0, None);
    assert_eq!(s.epoch(), Some("epoch-b"));
    assert_eq!(s.observe(ev("e1", 1, 1), t), Verdict::UnknownEpoch);
    assert_eq!(s.stats().resets, 4);
}

#[test]
fn subscribed_must_match_the_held_position() {
    let t = Instant::now();
    // No epoch yet: start where the server says ("now").
    let mut s = Subscription::new("orders", DedupeConfig::default()).unwrap();
    assert_eq!(
        s.accept_subscribed(E, None, 0),
        Err(SubscribedMismatch::InvalidNextExpected)
    );
    let mut s = Subscription::new("orders", DedupeConfig::default()).unwrap();
    assert_eq!(s.accept_subscribed(E, Some("c41"), 42), Ok(()));
    assert_eq!((s.last_applied(), s.cursor()), (41, Some("c41")));

    let mut s = sub_at_3();
    assert_eq!(s.accept_subscribed(E, Some("rot"), 4), Ok(()));
    assert_eq!((s.cursor(), s.dedupe_len()), (Some("rot"), 3));
    assert_eq!(
        s.accept_subscribed(E, None, 6),
        Err(SubscribedMismatch::PositionMismatch {
            expected: 4,
            got: 6
        })
    );
    assert_eq!(s.observe(ev("e4", 4, 4), t), Verdict::Resyncing);
    let mut s = sub_at_3();
    assert_eq!(
        s.accept_subscribed("epoch-b", None, 1),
        Err(SubscribedMismatch::EpochChanged)
    );

    // A gap heals by an in-position cursor resume; a conflict does not.
    let mut s = sub_at_3();
    assert_eq!(
        s.observe(ev("e6", 6, 6), t),
        Verdict::Gap {
            expected: 4,
            got: 6
        }
    );
    assert_eq!(s.accept_subscribed(E, None, 4), Ok(()));
    assert_eq!(s.observe(ev("e4", 4, 4), t), Verdict::Apply);
    let mut s = sub_at_3();
    assert_eq!(
        s.observe(ev("x3", 3, 3), t),
        Verdict::Conflict(ConflictKind::SameSequenceOtherId)
    );
    assert_eq!(
        s.accept_subscribed(E, None, 4),
        Err(SubscribedMismatch::SnapshotRequired)
    );
}
