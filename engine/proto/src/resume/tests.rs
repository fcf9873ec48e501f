//! Tests of the Resume Manager: one group per requirement, then the property
//! test of a sender and a receiver over a lossy, reconnecting link.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use dtp_codec::{AckFrame, ErrorCode};
use proptest::prelude::*;
use uuid::Uuid;

use super::{
    AckPolicy, Arrival, ResumeError, ResumeReceiver, ResumeSender, SenderConfig, SenderEvent,
};

fn config(max_fragments: usize, max_bytes: usize) -> SenderConfig {
    SenderConfig {
        max_fragments,
        max_bytes,
        low_water_fragments: max_fragments,
        low_water_bytes: max_bytes,
    }
}

fn unacked<T: Copy>(sender: &ResumeSender<T>) -> Vec<(u64, T)> {
    sender.unacked().map(|(s, &t)| (s, t)).collect()
}

// ---- RES-1: sequence numbers ---------------------------------------------

#[test]
fn res1_sequences_start_at_1_and_increase_by_one() {
    let mut sender = ResumeSender::new(SenderConfig::default());
    assert_eq!(sender.next_sequence(), 1);
    assert_eq!(sender.last_sent(), 0);
    for expected in 1..=5 {
        assert_eq!(sender.push(expected * 10, 1).unwrap(), expected);
    }
    assert_eq!(sender.next_sequence(), 6);
}

#[test]
fn res1_sequences_are_never_reused_across_reconnects() {
    let mut sender = ResumeSender::new(SenderConfig::default());
    for i in 1..=3 {
        sender.push(i, 1).unwrap();
    }
    let resent: Vec<u64> = sender.handle_resume(1).unwrap().map(|(s, _)| s).collect();
    assert_eq!(resent, vec![2, 3], "resent fragments keep their numbers");
    assert_eq!(
        sender.push(4, 1).unwrap(),
        4,
        "new ones continue after them"
    );
}

#[test]
fn res1_restored_sender_continues_numbering() {
    let mut sender: ResumeSender<u8> = ResumeSender::restore(SenderConfig::default(), 42);
    assert_eq!((sender.acked(), sender.last_sent()), (41, 41));
    assert_eq!(sender.push(0, 1).unwrap(), 42);
    // A fresh receiver-side report below what was forgotten cannot be served.
    let err = sender.handle_resume(10).err().unwrap();
    assert_eq!(
        err,
        ResumeError::ResumeBehindAck {
            highest_received: 10,
            acked: 41
        }
    );
    assert_eq!(err.code(), ErrorCode::RESUME_FAILED);
    assert_eq!(
        ResumeSender::<u8>::restore(SenderConfig::default(), 0).next_sequence(),
        1
    );
}

// ---- RES-2: the cache until acknowledged ----------------------------------

#[test]
fn res2_fragments_are_cached_until_a_cumulative_ack() {
    let mut sender = ResumeSender::new(SenderConfig::default());
    for i in 1..=5u64 {
        sender.push(i * 100, 10).unwrap();
    }
    assert_eq!((sender.cached_count(), sender.cached_bytes()), (5, 50));
    assert_eq!(sender.cached(3), Some(&300));
    assert_eq!(sender.handle_ack(3).unwrap(), 3);
    assert_eq!(sender.cached(3), None);
    assert_eq!(sender.cached(0), None);
    assert_eq!(sender.cached(6), None);
    assert_eq!(unacked(&sender), vec![(4, 400), (5, 500)]);
    assert_eq!((sender.cached_count(), sender.cached_bytes()), (2, 20));
    assert_eq!(
        sender.handle_ack(3).unwrap(),
        0,
        "a repeated ack frees nothing"
    );
    assert_eq!(sender.handle_ack(5).unwrap(), 2);
    assert_eq!((sender.cached_count(), sender.cached_bytes()), (0, 0));
    assert_eq!(sender.acked(), 5);
}

#[test]
fn res2_bad_acks_are_typed_errors_and_change_nothing() {
    let mut sender = ResumeSender::new(SenderConfig::default());
    for i in 1..=3u64 {
        sender.push(i, 1).unwrap();
    }
    let err = sender.handle_ack(4).unwrap_err();
    assert_eq!(
        err,
        ResumeError::AckBeyondSent {
            cumulative: 4,
            last_sent: 3
        }
    );
    assert_eq!(err.code(), ErrorCode::INVALID_VALUE);
    sender.handle_ack(2).unwrap();
    let err = sender.handle_ack(1).unwrap_err();
    assert_eq!(
        err,
        ResumeError::AckWentBackwards {
            cumulative: 1,
            acked: 2
        }
    );
    assert_eq!(unacked(&sender), vec![(3, 3)]);
    assert!(sender.handle_ack(u64::MAX).is_err());
}

// ---- RES-3: the receiver ----------------------------------------------------

#[test]
fn res3_receiver_classifies_new_duplicate_and_gap() {
    let now = Instant::now();
    let mut receiver = ResumeReceiver::new(AckPolicy::default());
    assert_eq!(receiver.highest_received(), 0);
    assert_eq!(receiver.handle_sequence(1, now).unwrap(), Arrival::New);
    assert_eq!(receiver.handle_sequence(2, now).unwrap(), Arrival::New);
    assert_eq!(
        receiver.handle_sequence(2, now).unwrap(),
        Arrival::Duplicate
    );
    assert_eq!(
        receiver.handle_sequence(1, now).unwrap(),
        Arrival::Duplicate
    );
    let err = receiver.handle_sequence(4, now).unwrap_err();
    assert_eq!(
        err,
        ResumeError::SequenceGap {
            expected: 3,
            received: 4
        }
    );
    assert_eq!(err.code(), ErrorCode::INVALID_VALUE);
    assert_eq!(
        receiver.handle_sequence(0, now).unwrap_err(),
        ResumeError::SequenceZero
    );
    assert_eq!(receiver.highest_received(), 2, "errors change nothing");
    assert_eq!(receiver.handle_sequence(3, now).unwrap(), Arrival::New);
    assert_eq!(receiver.highest_received(), 3);
}

#[test]
fn res3_resume_frame_reports_highest_received_and_covers_the_pending_ack() {
    let now = Instant::now();
    let mut receiver = ResumeReceiver::new(AckPolicy::default());
    for s in 1..=3 {
        receiver.handle_sequence(s, now).unwrap();
    }
    let session_id = Uuid::from_u128(7);
    let frame = receiver.resume_frame(session_id);
    assert_eq!(frame.session_id, session_id);
    assert_eq!(frame.highest_received, 3);
    assert_eq!(receiver.acked(), 3);
    assert_eq!(receiver.poll_ack(now + Duration::from_secs(1)), None);
    assert_eq!(receiver.poll_timeout(), None);
}

#[test]
fn res3_restored_receiver_treats_earlier_sequences_as_duplicates() {
    let now = Instant::now();
    let mut receiver = ResumeReceiver::restore(AckPolicy::default(), 10);
    assert_eq!(receiver.highest_received(), 10);
    assert_eq!(
        receiver.handle_sequence(10, now).unwrap(),
        Arrival::Duplicate
    );
    assert_eq!(receiver.handle_sequence(11, now).unwrap(), Arrival::New);
}

#[test]
fn acks_are_sent_after_every_n_fragments() {
    let now = Instant::now();
    let policy = AckPolicy {
        every: 3,
        delay: Duration::from_secs(60),
    };
    let mut receiver = ResumeReceiver::new(policy);
    assert_eq!(receiver.poll_ack(now), None, "nothing to ack");
    receiver.handle_sequence(1, now).unwrap();
    receiver.handle_sequence(2, now).unwrap();
    assert_eq!(receiver.poll_ack(now), None);
    receiver.handle_sequence(3, now).unwrap();
    assert_eq!(receiver.poll_ack(now), Some(AckFrame { cumulative: 3 }));
    assert_eq!(receiver.poll_ack(now), None, "acked once");
    receiver.handle_sequence(3, now).unwrap(); // a duplicate is not new
    assert_eq!(receiver.poll_ack(now), None);
}

#[test]
fn acks_are_sent_after_a_delay_since_the_first_unacked_fragment() {
    let t0 = Instant::now();
    let policy = AckPolicy {
        every: 100,
        delay: Duration::from_millis(10),
    };
    let mut receiver = ResumeReceiver::new(policy);
    receiver.handle_sequence(1, t0).unwrap();
    receiver
        .handle_sequence(2, t0 + Duration::from_millis(8))
        .unwrap();
    assert_eq!(
        receiver.poll_timeout(),
        Some(t0 + Duration::from_millis(10))
    );
    assert_eq!(receiver.poll_ack(t0 + Duration::from_millis(9)), None);
    assert_eq!(
        receiver.poll_ack(t0 + Duration::from_millis(10)),
        Some(AckFrame { cumulative: 2 })
    );
    assert_eq!(receiver.poll_timeout(), None);
    // The timer restarts with the next new fragment.
    let t1 = t0 + Duration::from_millis(50);
    receiver.handle_sequence(3, t1).unwrap();
    assert_eq!(
        receiver.poll_timeout(),
        Some(t1 + Duration::from_millis(10))
    );
}

// ---- RES-4: the ceiling, BUFFER_FULL, hysteresis -----------------------------

#[test]
fn res4_count_ceiling_refuses_with_buffer_full_and_hands_the_item_back() {
    let mut sender = ResumeSender::new(config(2, 1000));
    sender.push("a", 1).unwrap();
    assert!(sender.is_writable());
    sender.push("b", 1).unwrap();
    assert!(!sender.is_writable());
    let err = sender.push("c", 1).unwrap_err();
    assert_eq!(err.code(), ErrorCode::BUFFER_FULL);
    assert_eq!(err.item, "c");
    assert!(err.to_string().starts_with("6001 BUFFER_FULL"), "{err}");
    assert!(sender.is_paused());
    assert_eq!(
        sender.next_sequence(),
        3,
        "a refusal uses no sequence number"
    );
    assert_eq!(sender.poll_event(), None);
    sender.handle_ack(1).unwrap();
    assert_eq!(sender.poll_event(), Some(SenderEvent::Writable));
    assert_eq!(sender.poll_event(), None, "reported once");
    assert_eq!(sender.push("c", 1).unwrap(), 3);
}

#[test]
fn res4_byte_ceiling_refuses_with_buffer_full() {
    let mut sender = ResumeSender::new(config(100, 10));
    sender.push(1, 6).unwrap();
    let err = sender.push(2, 5).unwrap_err();
    assert_eq!(
        err.error,
        ResumeError::BufferFull {
            cached: 1,
            cached_bytes: 6,
            max_fragments: 100,
            max_bytes: 10
        }
    );
    sender.handle_ack(1).unwrap();
    assert_eq!(sender.push(2, 10).unwrap(), 2, "exactly full fits");
}

#[test]
fn res4_fragment_larger_than_the_cache_is_refused_without_pausing() {
    let mut sender = ResumeSender::new(config(100, 10));
    let err = sender.push(1, 11).unwrap_err();
    assert_eq!(
        err.error,
        ResumeError::FragmentTooLarge {
            len: 11,
            max_bytes: 10
        }
    );
    assert_eq!(err.code(), ErrorCode::LIMIT_EXCEEDED);
    assert!(!sender.is_paused());
}

#[test]
fn res4_pause_holds_until_the_low_water_marks() {
    let mut sender = ResumeSender::new(SenderConfig {
        max_fragments: 4,
        max_bytes: 1000,
        low_water_fragments: 1,
        low_water_bytes: 1000,
    });
    for i in 1..=4 {
        sender.push(i, 1).unwrap();
    }
    assert_eq!(
        sender.push(5, 1).unwrap_err().code(),
        ErrorCode::BUFFER_FULL
    );
    sender.handle_ack(2).unwrap(); // 2 cached: room, but above low water
    assert!(sender.is_paused() && !sender.is_writable());
    assert_eq!(sender.poll_event(), None);
    assert_eq!(
        sender.push(5, 1).unwrap_err().code(),
        ErrorCode::BUFFER_FULL
    );
    sender.handle_ack(3).unwrap(); // 1 cached: low water
    assert_eq!(sender.poll_event(), Some(SenderEvent::Writable));
    assert!(sender.is_writable());
    assert_eq!(sender.push(5, 1).unwrap(), 5);
}

#[test]
fn res4_low_water_at_the_ceiling_never_reports_a_full_cache_writable() {
    // Found by the property test: low water = ceiling, a resume that frees
    // nothing must not end the pause.
    let mut sender = ResumeSender::new(config(1, 100));
    sender.push(1, 1).unwrap();
    sender.push(2, 1).unwrap_err();
    assert_eq!(sender.handle_resume(0).unwrap().len(), 1);
    assert_eq!(sender.poll_event(), None);
    assert!(sender.is_paused() && !sender.is_writable());
    sender.handle_ack(1).unwrap();
    assert_eq!(sender.poll_event(), Some(SenderEvent::Writable));
}

#[test]
fn res4_link_stall_fills_the_cache_exactly_at_the_ceiling() {
    let mut sender = ResumeSender::new(config(8, 1 << 20));
    let mut accepted = 0;
    for i in 0..100 {
        match sender.push(i, 100) {
            Ok(_) => accepted += 1,
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::BUFFER_FULL);
                break;
            }
        }
    }
    assert_eq!(accepted, 8);
    assert_eq!(sender.cached_count(), 8);
}

// ---- SEQ-5: the RESUME exchange ------------------------------------------------

#[test]
fn seq5_resume_frees_what_arrived_and_returns_the_rest_in_order() {
    let mut sender = ResumeSender::new(SenderConfig::default());
    for i in 1..=6u64 {
        sender.push(i * 10, 2).unwrap();
    }
    sender.handle_ack(2).unwrap();
    let resend: Vec<(u64, u64)> = sender
        .handle_resume(4)
        .unwrap()
        .map(|(s, &v)| (s, v))
        .collect();
    assert_eq!(resend, vec![(5, 50), (6, 60)]);
    assert_eq!((sender.cached_count(), sender.cached_bytes()), (2, 4));
    assert_eq!(sender.acked(), 4);
    // Resuming again with the same report resends the same fragments.
    assert_eq!(sender.handle_resume(4).unwrap().len(), 2);
    assert_eq!(sender.handle_resume(6).unwrap().len(), 0);
}

#[test]
fn seq5_impossible_resume_reports_fail_with_6002_and_change_nothing() {
    let mut sender = ResumeSender::new(SenderConfig::default());
    for i in 1..=3u64 {
        sender.push(i, 1).unwrap();
    }
    sender.handle_ack(2).unwrap();
    let err = sender.handle_resume(4).err().unwrap();
    assert_eq!(
        err,
        ResumeError::ResumeBeyondSent {
            highest_received: 4,
            last_sent: 3
        }
    );
    assert_eq!(err.code(), ErrorCode::RESUME_FAILED);
    let err = sender.handle_resume(1).err().unwrap();
    assert_eq!(err.code(), ErrorCode::RESUME_FAILED);
    assert_eq!(unacked(&sender), vec![(3, 3)]);
}

#[test]
fn seq5_resume_ends_a_pause() {
    let mut sender = ResumeSender::new(config(2, 100));
    sender.push(1, 1).unwrap();
    sender.push(2, 1).unwrap();
    sender.push(3, 1).unwrap_err();
    assert_eq!(sender.handle_resume(1).unwrap().len(), 1);
    assert_eq!(sender.poll_event(), Some(SenderEvent::Writable));
}

// ---- The property: exactly once, in order, over a breaking link -------------

#[derive(Clone, Debug)]
enum Op {
    /// The application offers up to n fragments.
    Push(u8),
    /// The link delivers up to n data frames.
    Deliver(u8),
    /// The receiver polls for an ack (sent if the link is up).
    PollAck,
    /// The link delivers up to n acks.
    DeliverAcks(u8),
    /// Time passes.
    Advance(u16),
    /// The connection drops: everything in flight is lost.
    Disconnect,
    /// The connection returns: RESUME exchange, resend.
    Reconnect,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..12).prop_map(Op::Push),
        4 => (1u8..12).prop_map(Op::Deliver),
        3 => Just(Op::PollAck),
        3 => (1u8..4).prop_map(Op::DeliverAcks),
        2 => (0u16..30).prop_map(Op::Advance),
        1 => Just(Op::Disconnect),
        1 => Just(Op::Reconnect),
    ]
}

fn length(value: u64) -> usize {
    (value % 7) as usize + 1
}

/// The simulated pair: a sender, a receiver and an in-order link with loss
/// at disconnect, driven in virtual time.
struct Sim {
    sender: ResumeSender<u64>,
    receiver: ResumeReceiver,
    now: Instant,
    connected: bool,
    data: VecDeque<(u64, u64)>,
    acks: VecDeque<u64>,
    next_value: u64,
    delivered: Vec<u64>,
    buffer_full: usize,
}

impl Sim {
    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Push(n) => {
                for _ in 0..n {
                    let value = self.next_value;
                    let len = length(value);
                    let config = *self.sender.config();
                    let must_refuse = self.sender.is_paused()
                        || self.sender.cached_count() >= config.max_fragments
                        || self.sender.cached_bytes() + len > config.max_bytes;
                    match self.sender.push(value, len) {
                        Ok(sequence) => {
                            prop_assert!(!must_refuse);
                            prop_assert_eq!(sequence, value, "one sequence per fragment, no gaps");
                            if self.connected {
                                self.data.push_back((sequence, value));
                            }
                            self.next_value += 1;
                        }
                        Err(refused) => {
                            prop_assert!(must_refuse);
                            prop_assert_eq!(refused.code(), ErrorCode::BUFFER_FULL);
                            prop_assert_eq!(refused.item, value);
                            self.buffer_full += 1;
                            break;
                        }
                    }
                }
            }
            Op::Deliver(n) => {
                for _ in 0..n {
                    let Some((sequence, value)) = self.data.pop_front() else {
                        break;
                    };
                    match self.receiver.handle_sequence(sequence, self.now) {
                        Ok(Arrival::New) => self.delivered.push(value),
                        Ok(Arrival::Duplicate) => {}
                        Err(e) => prop_assert!(false, "receiver error {e}"),
                    }
                }
            }
            Op::PollAck => {
                // An ack polled while the link is down is lost.
                if let Some(ack) = self.receiver.poll_ack(self.now)
                    && self.connected
                {
                    self.acks.push_back(ack.cumulative);
                }
            }
            Op::DeliverAcks(n) => {
                for _ in 0..n {
                    let Some(cumulative) = self.acks.pop_front() else {
                        break;
                    };
                    prop_assert!(self.sender.handle_ack(cumulative).is_ok());
                }
            }
            Op::Advance(ms) => self.now += Duration::from_millis(u64::from(ms)),
            Op::Disconnect => {
                if self.connected {
                    self.connected = false;
                    self.data.clear();
                    self.acks.clear();
                }
            }
            Op::Reconnect => {
                if !self.connected {
                    self.connected = true;
                    let frame = self.receiver.resume_frame(Uuid::from_u128(1));
                    let resend = self.sender.handle_resume(frame.highest_received);
                    prop_assert!(resend.is_ok());
                    let resend: Vec<(u64, u64)> = resend.unwrap().map(|(s, &v)| (s, v)).collect();
                    self.data.extend(resend);
                }
            }
        }
        if self.sender.poll_event() == Some(SenderEvent::Writable) {
            prop_assert!(self.sender.is_writable());
        }
        let config = *self.sender.config();
        prop_assert!(self.sender.cached_count() <= config.max_fragments);
        prop_assert!(self.sender.cached_bytes() <= config.max_bytes);
        prop_assert_eq!(
            self.sender.cached_count() as u64,
            self.sender.last_sent() - self.sender.acked()
        );
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// SPEC RES-1…RES-4, SEQ-5: whatever the schedule of pushes, deliveries,
    /// batched and delayed acks, disconnects (losing everything in flight,
    /// mid-burst included) and RESUME exchanges, the receiving application
    /// sees every fragment exactly once and in order, and the sender's cache
    /// never passes its ceiling; a push is refused with BUFFER_FULL exactly
    /// when the cache is at the ceiling or paused.
    #[test]
    fn prop_exactly_once_in_order_across_disconnects(
        ops in proptest::collection::vec(op(), 0..300),
        max_fragments in 1usize..16,
        low_water_pct in 0usize..=100,
        max_bytes in 7usize..64,
        every in 1u64..8,
        delay_ms in 1u64..20,
    ) {
        let low_water_fragments = max_fragments * low_water_pct / 100;
        let config = SenderConfig {
            max_fragments,
            max_bytes,
            low_water_fragments,
            low_water_bytes: max_bytes * low_water_pct / 100,
        };
        let policy = AckPolicy { every, delay: Duration::from_millis(delay_ms) };
        let mut sim = Sim {
            sender: ResumeSender::new(config),
            receiver: ResumeReceiver::new(policy),
            now: Instant::now(),
            connected: true,
            data: VecDeque::new(),
            acks: VecDeque::new(),
            next_value: 1,
            delivered: Vec::new(),
            buffer_full: 0,
        };
        for op in &ops {
            sim.step(op)?;
            let expected: Vec<u64> = (1..=sim.delivered.len() as u64).collect();
            prop_assert_eq!(&sim.delivered, &expected, "in order, no duplicates");
        }
        // Heal the link and let everything drain.
        sim.step(&Op::Reconnect)?;
        sim.step(&Op::Deliver(u8::MAX))?;
        sim.step(&Op::Advance(u16::MAX))?;
        sim.step(&Op::PollAck)?;
        sim.step(&Op::DeliverAcks(u8::MAX))?;
        let sent = sim.next_value - 1;
        prop_assert_eq!(&sim.delivered, &(1..=sent).collect::<Vec<_>>(), "every fragment, once");
        prop_assert_eq!(sim.sender.cached_count(), 0);
        prop_assert_eq!(sim.sender.cached_bytes(), 0);
        prop_assert_eq!(sim.receiver.highest_received(), sent);
        // A fully stalled link must end in BUFFER_FULL.
        let before = sim.buffer_full;
        sim.step(&Op::Disconnect)?;
        for _ in 0..=max_fragments {
            sim.step(&Op::Push(1))?;
        }
        prop_assert!(sim.buffer_full > before, "BUFFER_FULL when the link stalls");
    }
}
