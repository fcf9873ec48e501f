//! Property tests of the ledger against a naive model: resume succeeds iff
//! continuity is provable, and retention never exceeds a bound.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const KEY: [u8; 32] = [9; 32];
const SCOPE: &str = "scope-a";

#[derive(Clone, Debug, PartialEq, Eq)]
struct Item {
    seq: u64,
    len: usize,
}

impl LedgerItem for Item {
    fn byte_len(&self) -> usize {
        self.len
    }
}

#[derive(Clone, Debug)]
enum Op {
    Append {
        len: usize,
        dt_ms: u64,
    },
    Cut,
    Expire {
        dt_ms: u64,
    },
    NewEpoch(u64),
    Resume {
        pick: usize,
        forge: Forge,
        dt_ms: u64,
    },
}

#[derive(Clone, Copy, Debug)]
enum Forge {
    Real,
    FlipTag,
    OtherScope,
    MoveSequence,
    Garbage,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..40, 0u64..3_000).prop_map(|(len, dt_ms)| Op::Append { len, dt_ms }),
        1 => Just(Op::Cut),
        2 => (0u64..20_000).prop_map(|dt_ms| Op::Expire { dt_ms }),
        1 => any::<u64>().prop_map(Op::NewEpoch),
        6 => (any::<usize>(), prop_oneof![
            4 => Just(Forge::Real), 1 => Just(Forge::FlipTag), 1 => Just(Forge::OtherScope),
            1 => Just(Forge::MoveSequence), 1 => Just(Forge::Garbage),
        ], 0u64..3_000)
            .prop_map(|(pick, forge, dt_ms)| Op::Resume { pick, forge, dt_ms }),
    ]
}

fn retention() -> impl Strategy<Value = Retention> {
    (1usize..12, 1usize..120, 1u64..30).prop_map(|(max_events, max_bytes, s)| Retention {
        max_events,
        max_bytes,
        max_age: Duration::from_secs(s),
    })
}

/// The naive model: retained (seq, bytes, at) of the current epoch.
struct Model {
    epoch: String,
    last: u64,
    retained: VecDeque<(u64, usize, Instant)>,
}

impl Model {
    fn expire(&mut self, r: &Retention, now: Instant) {
        self.retained
            .retain(|&(_, _, at)| now.saturating_duration_since(at) <= r.max_age);
    }
    fn append(&mut self, r: &Retention, len: usize, now: Instant) {
        self.last += 1;
        self.retained.push_back((self.last, len, now));
        while self.retained.len() > r.max_events
            || self.retained.iter().map(|e| e.1).sum::<usize>() > r.max_bytes
        {
            self.retained.pop_front();
        }
        self.expire(r, now);
    }
    /// Continuity from `after`: every sequence in (after, last] retained.
    fn continuous(&self, after: u64) -> bool {
        (after + 1..=self.last).all(|s| self.retained.iter().any(|e| e.0 == s))
    }
}

fn check_bounds(l: &Ledger<Item>, r: &Retention, now: Instant) {
    let s = l.stats();
    assert!(s.retained_events <= r.max_events);
    assert!(s.retained_bytes <= r.max_bytes);
    assert_eq!(
        s.retained_bytes,
        l.entries.iter().map(|e| e.bytes).sum::<usize>()
    );
    for e in &l.entries {
        assert!(now.saturating_duration_since(e.at) <= r.max_age);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn resume_succeeds_iff_continuity_is_provable(
        r in retention(),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let t0 = Instant::now();
        let mut now = t0;
        let mut l: Ledger<Item> =
            Ledger::new("s1", SCOPE, RecoveryMode::Cursor, r, Epoch::from_random(0), &KEY).unwrap();
        let mut m = Model { epoch: l.epoch().to_string(), last: 0, retained: VecDeque::new() };
        // Every cursor ever issued: (text, epoch, sequence).
        let mut issued: Vec<(String, String, u64)> = Vec::new();
        for op in ops {
            match op {
                Op::Append { len, dt_ms } => {
                    now += Duration::from_millis(dt_ms);
                    let a = l.append(Item { seq: m.last + 1, len }, now).unwrap();
                    m.append(&r, len, now);
                    prop_assert_eq!(a.sequence, m.last);
                    issued.push((a.cursor.unwrap(), m.epoch.clone(), a.sequence));
                }
                Op::Cut => {
                    l.cut();
                    m.retained.clear();
                }
                Op::Expire { dt_ms } => {
                    now += Duration::from_millis(dt_ms);
                    l.expire(now);
                    m.expire(&r, now);
                }
                Op::NewEpoch(random) => {
                    if l.new_epoch(random).is_ok() {
                        m = Model { epoch: l.epoch().to_string(), last: 0, retained: VecDeque::new() };
                    }
                }
                Op::Resume { pick, forge, dt_ms } => {
                    now += Duration::from_millis(dt_ms);
                    m.expire(&r, now);
                    if issued.is_empty() {
                        prop_assert_eq!(l.resume("", SCOPE, now).err(), Some(ResumeRefusal::Malformed));
                        continue;
                    }
                    let (text, epoch, seq) = issued[pick % issued.len()].clone();
                    let (cursor, scope, want_forged) = match forge {
                        Forge::Real => (text, SCOPE, None),
                        Forge::FlipTag => {
                            let last = text.as_bytes()[text.len() - 1];
                            let flipped = if last == b'0' { '1' } else { '0' };
                            (format!("{}{flipped}", &text[..text.len() - 1]), SCOPE, Some(ResumeRefusal::Tampered))
                        }
                        Forge::OtherScope => (text, "scope-b", Some(ResumeRefusal::Tampered)),
                        Forge::MoveSequence => {
                            let moved = text.replacen(&format!(".{seq}."), &format!(".{}.", seq + 1), 1);
                            (moved, SCOPE, Some(ResumeRefusal::Tampered))
                        }
                        Forge::Garbage => (text.replace('.', "/"), SCOPE, Some(ResumeRefusal::Malformed)),
                    };
                    let got = l.resume(&cursor, scope, now);
                    if let Some(want) = want_forged {
                        prop_assert_eq!(got.err(), Some(want));
                    } else if epoch != m.epoch {
                        prop_assert_eq!(got.err(), Some(ResumeRefusal::EpochChanged));
                    } else if m.continuous(seq) {
                        let res = got.unwrap();
                        prop_assert_eq!(res.after, seq);
                        let got_seqs: Vec<u64> = res.iter().map(|e| e.item.seq).collect();
                        let want_seqs: Vec<u64> = (seq + 1..=m.last).collect();
                        prop_assert_eq!(got_seqs, want_seqs);
                        prop_assert!(res.iter().all(|e| e.sequence == e.item.seq));
                    } else {
                        prop_assert_eq!(got.err(), Some(ResumeRefusal::Expired));
                    }
                }
            }
            check_bounds(&l, &r, now);
            prop_assert_eq!(l.last_sequence(), m.last);
            let model_seqs: Vec<u64> = m.retained.iter().map(|e| e.0).collect();
            let ledger_seqs: Vec<u64> = l.entries.iter().map(|e| e.sequence).collect();
            prop_assert_eq!(ledger_seqs, model_seqs);
        }
    }

    #[test]
    fn resume_never_panics_on_arbitrary_cursors(s in "\\PC{0,160}", dots in "[c0-9a-f.]{0,90}") {
        let t = Instant::now();
        let mut l: Ledger<Item> = Ledger::new(
            "s1", SCOPE, RecoveryMode::Cursor, Retention::default(), Epoch::from_random(0), &KEY,
        ).unwrap();
        l.append(Item { seq: 1, len: 1 }, t).unwrap();
        prop_assert!(l.resume(&s, SCOPE, t).is_err());
        prop_assert!(l.resume(&dots, SCOPE, t).is_err());
    }
}
