//! Unit tests of the ledger: sequencing, retention, cursors, checkpoints.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use std::time::{Duration, Instant};

use super::*;

const KEY: [u8; 32] = [0x42; 32];

fn ledger(recovery: RecoveryMode, retention: Retention) -> Ledger<Vec<u8>> {
    Ledger::new(
        "orders",
        "tenant-1",
        recovery,
        retention,
        Epoch::from_random(1),
        &KEY,
    )
    .unwrap()
}

fn cursor_ledger() -> Ledger<Vec<u8>> {
    ledger(RecoveryMode::Cursor, Retention::default())
}

fn seqs<T>(r: &Resume<'_, T>) -> Vec<u64> {
    r.iter().map(|e| e.sequence).collect()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn new_refuses_invalid_retention() {
    let r = Retention {
        max_events: 0,
        ..Retention::default()
    };
    let got = Ledger::<Vec<u8>>::new(
        "s",
        "",
        RecoveryMode::Cursor,
        r,
        Epoch::from_random(1),
        &KEY,
    );
    assert_eq!(
        got.err(),
        Some(RetentionError::Zero(RetentionField::MaxEvents))
    );
}

#[test]
fn sequences_are_contiguous_from_one_and_cursors_only_in_cursor_mode() {
    let t = Instant::now();
    let mut l = cursor_ledger();
    let a = l.append(vec![1], t).unwrap();
    let b = l.append(vec![2], t).unwrap();
    assert_eq!((a.sequence, b.sequence), (1, 2));
    assert_eq!(a.cursor, l.cursor_for(1));
    assert!(a.cursor.unwrap().starts_with("c1.0000000000000001.1."));
    assert_eq!((l.last_sequence(), l.revision()), (2, 2));
    // Position 0, the epoch's start, has a cursor (an empty stream's
    // checkpoint needs one); positions not yet reached have none.
    assert!(
        l.cursor_for(0)
            .unwrap()
            .starts_with("c1.0000000000000001.0.")
    );
    assert_eq!(l.cursor_for(3), None);

    for mode in [RecoveryMode::SnapshotOnly, RecoveryMode::SessionRebuild] {
        let mut l = ledger(mode, Retention::default());
        assert_eq!(
            l.append(vec![1], t),
            Ok(Appended {
                sequence: 1,
                cursor: None
            })
        );
        assert_eq!(l.checkpoint().cursor, None);
    }
}

#[test]
fn retention_evicts_oldest_by_count_bytes_and_age() {
    let t = Instant::now();
    let r = Retention {
        max_events: 3,
        max_bytes: 10,
        max_age: secs(60),
    };
    let mut l = ledger(RecoveryMode::Cursor, r);
    for i in 0..4 {
        l.append(vec![0; 2], t + secs(i)).unwrap();
    }
    assert_eq!(l.first_retained_sequence(), Some(2));
    assert_eq!(
        (l.stats().retained_events, l.stats().evicted_by_count),
        (3, 1)
    );
    l.append(vec![0; 7], t + secs(4)).unwrap(); // 2+2+7 = 11 > 10 → evict seq 3 too
    assert_eq!(l.first_retained_sequence(), Some(4));
    let s = l.stats();
    assert_eq!(
        (s.retained_bytes, s.evicted_by_count, s.evicted_by_bytes),
        (9, 2, 1)
    );
    // An item larger than max_bytes is published but not retained.
    let big = l.append(vec![0; 11], t + secs(5)).unwrap();
    assert_eq!(big.sequence, 6);
    assert_eq!(
        (l.first_retained_sequence(), l.stats().retained_bytes),
        (None, 0)
    );
    // Age: exactly max_age is kept, one nanosecond more is not.
    l.append(vec![1], t + secs(10)).unwrap();
    assert_eq!(l.expire(t + secs(70)), 0);
    assert_eq!(l.expire(t + secs(70) + Duration::from_nanos(1)), 1);
    assert_eq!(l.stats().evicted_by_age, 1);
    // A clock that goes backwards ages nothing.
    l.append(vec![1], t + secs(100)).unwrap();
    assert_eq!(l.expire(t), 0);
}

#[test]
fn resume_replays_exactly_the_events_after_the_cursor() {
    let t = Instant::now();
    let mut l = cursor_ledger();
    let cursors: Vec<String> = (1..=5u8)
        .map(|i| l.append(vec![i], t).unwrap().cursor.unwrap())
        .collect();
    let r = l.resume(&cursors[1], "tenant-1", t).unwrap();
    assert_eq!((r.after, r.next_expected_sequence(), r.len()), (2, 3, 3));
    assert_eq!(seqs(&r), vec![3, 4, 5]);
    let items: Vec<&Vec<u8>> = r.iter().map(|e| e.item).collect();
    assert_eq!(items, vec![&vec![3], &vec![4], &vec![5]]);
    assert_eq!(r.epoch, &Epoch::from_random(1));
    // The newest position resumes with nothing to replay (proven continuity).
    let r = l.resume(&cursors[4], "tenant-1", t).unwrap();
    assert!(r.is_empty());
    assert_eq!(r.next_expected_sequence(), 6);
    assert_eq!(l.stats().resumes.resumed, 2);
}

/// SPEC RT-10: a paced replay continues from a kept position, and is
/// refused once the epoch changed or retention dropped what it still needs.
#[test]
fn a_replay_continues_from_a_kept_position_until_retention_drops_it() {
    let t = Instant::now();
    let retention = Retention {
        max_events: 4,
        ..Retention::default()
    };
    let mut l = ledger(RecoveryMode::Cursor, retention);
    for i in 1..=4u8 {
        l.append(vec![i], t).unwrap();
    }
    let epoch = l.epoch().as_str().to_owned();
    let r = l.continue_after(&epoch, 2, t).unwrap();
    assert_eq!((seqs(&r), r.next_expected_sequence()), (vec![3, 4], 3));
    assert!(l.continue_after(&epoch, 4, t).unwrap().is_empty());
    assert_eq!(
        l.continue_after(&epoch, 5, t).err(),
        Some(ResumeRefusal::Future)
    );
    assert_eq!(
        l.continue_after("other-epoch", 2, t).err(),
        Some(ResumeRefusal::EpochChanged)
    );
    // Three more events push sequence 3 out: from 2 there is a gap now.
    for i in 5..=7u8 {
        l.append(vec![i], t).unwrap();
    }
    assert_eq!(
        l.continue_after(&epoch, 2, t).err(),
        Some(ResumeRefusal::Expired)
    );
    assert_eq!(
        seqs(&l.continue_after(&epoch, 3, t).unwrap()),
        vec![4, 5, 6, 7]
    );
    assert_eq!(
        l.stats().resumes.resumed,
        0,
        "continuations are not resumes"
    );
}

#[test]
fn resume_refusals_are_explicit() {
    let t = Instant::now();
    let r = Retention {
        max_events: 2,
        ..Retention::default()
    };
    let mut l = ledger(RecoveryMode::Cursor, r);
    let c: Vec<String> = (1..=4u8)
        .map(|i| l.append(vec![i], t).unwrap().cursor.unwrap())
        .collect();
    // Retained: 3, 4. Cursor 2 still proves continuity (3 is retained); 1 does not.
    assert_eq!(seqs(&l.resume(&c[1], "tenant-1", t).unwrap()), vec![3, 4]);
    assert_eq!(
        l.resume(&c[0], "tenant-1", t).err(),
        Some(ResumeRefusal::Expired)
    );
    assert_eq!(
        l.resume("nope", "tenant-1", t).err(),
        Some(ResumeRefusal::Malformed)
    );
    assert_eq!(
        l.resume(&c[3], "tenant-2", t).err(),
        Some(ResumeRefusal::Tampered)
    );
    let forged = format!("{}0", &c[3][..c[3].len() - 1]);
    let forged = if forged == c[3] {
        format!("{}1", &c[3][..c[3].len() - 1])
    } else {
        forged
    };
    assert_eq!(
        l.resume(&forged, "tenant-1", t).err(),
        Some(ResumeRefusal::Tampered)
    );
    let future = l.key.issue("orders", "tenant-1", l.epoch().as_str(), 5);
    assert_eq!(
        l.resume(&future, "tenant-1", t).err(),
        Some(ResumeRefusal::Future)
    );
    // Another stream's cursor, same key and scope.
    let mut other: Ledger<Vec<u8>> = Ledger::new(
        "invoices",
        "tenant-1",
        RecoveryMode::Cursor,
        Retention::default(),
        Epoch::from_random(1),
        &KEY,
    )
    .unwrap();
    let oc = other.append(vec![1], t).unwrap().cursor.unwrap();
    assert_eq!(
        l.resume(&oc, "tenant-1", t).err(),
        Some(ResumeRefusal::Tampered)
    );
    // Epoch change.
    l.new_epoch(2).unwrap();
    assert_eq!(
        l.resume(&c[3], "tenant-1", t).err(),
        Some(ResumeRefusal::EpochChanged)
    );
    let s = l.stats().resumes;
    assert_eq!(
        (
            s.resumed,
            s.expired,
            s.malformed,
            s.tampered,
            s.future,
            s.epoch_changed
        ),
        (1, 1, 1, 3, 1, 1)
    );
    // Non-CURSOR streams refuse every cursor, even a well-formed one.
    let mut snap = ledger(RecoveryMode::SnapshotOnly, Retention::default());
    snap.append(vec![1], t).unwrap();
    assert_eq!(
        snap.resume(&c[3], "tenant-1", t).err(),
        Some(ResumeRefusal::NotResumable)
    );
    assert_eq!(snap.stats().resumes.not_resumable, 1);
}

#[test]
fn resume_ages_out_before_deciding() {
    let t = Instant::now();
    let r = Retention {
        max_age: secs(10),
        ..Retention::default()
    };
    let mut l = ledger(RecoveryMode::Cursor, r);
    let c1 = l.append(vec![1], t).unwrap().cursor.unwrap();
    let c2 = l.append(vec![2], t + secs(5)).unwrap().cursor.unwrap();
    assert_eq!(
        seqs(&l.resume(&c1, "tenant-1", t + secs(10)).unwrap()),
        vec![2]
    );
    // At t+16 event 2 is gone: c1 has lost continuity, c2 (newest) has not.
    assert_eq!(
        l.resume(&c1, "tenant-1", t + secs(16)).err(),
        Some(ResumeRefusal::Expired)
    );
    assert!(l.resume(&c2, "tenant-1", t + secs(16)).unwrap().is_empty());
}

#[test]
fn cut_resets_older_cursors_but_keeps_epoch_and_sequence() {
    let t = Instant::now();
    let mut l = cursor_ledger();
    let c1 = l.append(vec![1], t).unwrap().cursor.unwrap();
    let c2 = l.append(vec![2], t).unwrap().cursor.unwrap();
    assert_eq!(l.cut(), 2);
    assert_eq!(
        (l.last_sequence(), l.revision(), l.epoch()),
        (2, 3, &Epoch::from_random(1))
    );
    assert_eq!(
        l.resume(&c1, "tenant-1", t).err(),
        Some(ResumeRefusal::Expired)
    );
    assert!(l.resume(&c2, "tenant-1", t).unwrap().is_empty());
    assert_eq!(l.append(vec![3], t).unwrap().sequence, 3);
    assert_eq!(seqs(&l.resume(&c2, "tenant-1", t).unwrap()), vec![3]);
    assert_eq!(
        l.resume(&c1, "tenant-1", t).err(),
        Some(ResumeRefusal::Expired)
    );
    assert_eq!(l.stats().evicted_by_cut, 2);
}

#[test]
fn new_epoch_restarts_sequences_and_refuses_same_epoch() {
    let t = Instant::now();
    let mut l = cursor_ledger();
    l.append(vec![1], t).unwrap();
    assert_eq!(l.new_epoch(1), Err(EpochUnchanged));
    assert_eq!(l.new_epoch(0xab).unwrap().as_str(), "00000000000000ab");
    assert_eq!((l.last_sequence(), l.first_retained_sequence()), (0, None));
    assert_eq!((l.revision(), l.stats().evicted_by_epoch), (2, 1));
    assert_eq!(l.append(vec![2], t).unwrap().sequence, 1);
}

#[test]
fn checkpoint_and_start_describe_the_current_position() {
    let t = Instant::now();
    let mut l = cursor_ledger();
    let cp = l.checkpoint();
    assert_eq!(
        cp,
        Checkpoint {
            epoch: Epoch::from_random(1),
            last_sequence: 0,
            revision: 0,
            recovery: RecoveryMode::Cursor,
            cursor: l.cursor_for(0),
        }
    );
    assert!(
        cp.cursor.is_some(),
        "an empty CURSOR stream's checkpoint has a cursor"
    );
    // It resumes: nothing to replay, the first event comes next.
    let start = cp.cursor.clone().unwrap();
    let r = l.resume(&start, "tenant-1", t).unwrap();
    assert_eq!((r.len(), r.next_expected_sequence()), (0, 1));
    assert_eq!(l.resume_from_start().next_expected_sequence, 1);
    let c = l.append(vec![1], t).unwrap().cursor;
    let cp = l.checkpoint();
    assert_eq!((cp.last_sequence, cp.revision, &cp.cursor), (1, 1, &c));
    let start = l.resume_from_start();
    assert_eq!(
        (start.epoch, start.next_expected_sequence),
        (&Epoch::from_random(1), 2)
    );
    // The checkpoint's cursor resumes with nothing to replay.
    assert!(
        l.resume(&cp.cursor.unwrap(), "tenant-1", t)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn skip_to_moves_forward_and_expires_cursors_across_the_hole() {
    let t = Instant::now();
    let mut l = cursor_ledger();
    let first = l.append(vec![1], t).unwrap();
    assert_eq!(l.skip_to(0), 0, "backwards changes nothing");
    assert_eq!(l.skip_to(9), 1);
    assert_eq!((l.last_sequence(), l.first_retained_sequence()), (9, None));
    let old = first.cursor.unwrap();
    assert_eq!(
        l.resume(&old, "tenant-1", t).err(),
        Some(ResumeRefusal::Expired)
    );
    // The new position is resumable, and the next event is 10.
    let at9 = l.cursor_for(9).unwrap();
    assert!(l.resume(&at9, "tenant-1", t).unwrap().is_empty());
    assert_eq!(l.append(vec![2], t).unwrap().sequence, 10);
    assert_eq!(seqs(&l.resume(&at9, "tenant-1", t).unwrap()), vec![10]);
}

#[test]
fn position_of_proves_an_expired_cursor_but_nothing_else() {
    let t = Instant::now();
    let mut l = ledger(
        RecoveryMode::Cursor,
        Retention {
            max_events: 2,
            ..Retention::default()
        },
    );
    let first = l.append(vec![1], t).unwrap().cursor.unwrap();
    for n in 2..=4 {
        l.append(vec![n], t).unwrap();
    }
    assert_eq!(
        l.resume(&first, "tenant-1", t).err(),
        Some(ResumeRefusal::Expired)
    );
    assert_eq!(l.position_of(&first, "tenant-1"), Ok(1));
    assert_eq!(
        l.position_of(&first, "tenant-2"),
        Err(ResumeRefusal::Tampered)
    );
    assert_eq!(
        l.position_of("c1.x", "tenant-1"),
        Err(ResumeRefusal::Malformed)
    );
    let last = l.cursor_for(4).unwrap();
    assert_eq!(l.position_of(&last, "tenant-1"), Ok(4));
    // An operator's cut is not undone: nothing before it is proven.
    l.cut();
    assert_eq!(
        l.position_of(&first, "tenant-1"),
        Err(ResumeRefusal::Expired)
    );
    assert_eq!(l.position_of(&last, "tenant-1"), Ok(4));
    l.new_epoch(99).unwrap();
    assert_eq!(
        l.position_of(&first, "tenant-1"),
        Err(ResumeRefusal::EpochChanged)
    );
}
