//! The Resume Manager's persisted forms (SPEC SES-2, SES-3, RES-1 … RES-4):
//! the sender with its cache and pause, the receiver with its pending ack.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use super::*;

fn sender_config(max_fragments: usize, max_bytes: usize) -> SenderConfig {
    SenderConfig {
        max_fragments,
        max_bytes,
        low_water_fragments: max_fragments,
        low_water_bytes: max_bytes,
    }
}

fn persist_sender(s: &ResumeSender<Vec<u8>>) -> Vec<u8> {
    let mut w = Writer::new();
    s.persist(&mut w, |item, w| w.bytes(item));
    w.into_bytes()
}

fn read_sender(
    r: &mut Reader<'_>,
    config: SenderConfig,
) -> Result<ResumeSender<Vec<u8>>, PersistError> {
    ResumeSender::restore_persisted(r, config, |r, _, len| Ok(r.bytes("item", len)?.to_vec()))
}

#[test]
fn sender_round_trips_with_its_cache_and_pause() {
    let config = SenderConfig {
        low_water_fragments: 1,
        ..sender_config(4, 100)
    };
    let mut s = ResumeSender::new(config);
    for i in 0..4u8 {
        s.push(vec![i; usize::from(i) + 1], usize::from(i) + 1)
            .unwrap();
    }
    assert!(s.push(vec![9], 1).is_err(), "at the ceiling: paused");
    s.handle_ack(1).unwrap();
    let bytes = persist_sender(&s);
    let mut back = read_sender(&mut Reader::new(&bytes), config).unwrap();
    assert_eq!(persist_sender(&back), bytes);
    assert_eq!(back.acked(), 1);
    assert_eq!(back.next_sequence(), 5);
    assert_eq!(back.cached_bytes(), 2 + 3 + 4);
    assert!(back.is_paused());
    let resend: Vec<u64> = back.handle_resume(2).unwrap().map(|(seq, _)| seq).collect();
    assert_eq!(resend, vec![3, 4]);
    every_prefix_fails(&bytes, |r| read_sender(r, config));
    // Over the restoring side's ceilings.
    let err = read_sender(&mut Reader::new(&bytes), sender_config(2, 100)).unwrap_err();
    assert!(matches!(
        err,
        PersistError::OverCeiling {
            what: "cached fragments",
            ..
        }
    ));
    let err = read_sender(&mut Reader::new(&bytes), sender_config(4, 8)).unwrap_err();
    assert!(matches!(
        err,
        PersistError::OverCeiling {
            what: "resume cache bytes",
            ..
        }
    ));
}

#[test]
fn sender_and_receiver_invariants_are_checked() {
    let config = sender_config(4, 100);
    // Three cached fragments but only two sequences sent.
    let mut w = Writer::new();
    w.u64(3);
    w.flag(false);
    w.flag(false);
    w.count(3);
    for _ in 0..3 {
        w.u64(1);
        w.bytes(&[0]);
    }
    let err = read_sender(&mut Reader::new(w.as_slice()), config).unwrap_err();
    assert!(matches!(err, PersistError::Inconsistent(_)));
    let mut w = Writer::new();
    w.u64(1);
    w.flag(true);
    w.flag(true);
    w.count(0);
    let err = read_sender(&mut Reader::new(w.as_slice()), config).unwrap_err();
    assert!(matches!(err, PersistError::Inconsistent(_)));
    let now = Instant::now();
    let policy = AckPolicy::default();
    let mut w = Writer::new();
    w.u64(3);
    w.u64(4);
    let err = ResumeReceiver::restore_persisted(&mut Reader::new(w.as_slice()), policy, now);
    assert!(matches!(err, Err(PersistError::Inconsistent(_))));
}

#[test]
fn receiver_round_trips_and_its_pending_ack_restarts_at_the_restore() {
    let t0 = Instant::now();
    let policy = AckPolicy {
        every: 10,
        delay: Duration::from_millis(5),
    };
    let mut r = ResumeReceiver::new(policy);
    for seq in 1..=3 {
        r.handle_sequence(seq, t0).unwrap();
    }
    let mut w = Writer::new();
    r.persist(&mut w);
    let bytes = w.into_bytes();
    let later = t0 + Duration::from_secs(1);
    let mut back =
        ResumeReceiver::restore_persisted(&mut Reader::new(&bytes), policy, later).unwrap();
    assert_eq!(back.highest_received(), 3);
    assert_eq!(back.acked(), 0);
    assert_eq!(back.poll_timeout(), Some(later + policy.delay));
    assert_eq!(back.poll_ack(later + policy.delay).unwrap().cumulative, 3);
    every_prefix_fails(&bytes, |r| {
        ResumeReceiver::restore_persisted(r, policy, later)
    });
}
