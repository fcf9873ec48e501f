//! One stream's publication history (SPEC RT-2, RT-6): epoch, contiguous
//! sequence, bounded replay retention, resume cursors and checkpoints.
//!
//! A [`Ledger`] lives on the control thread, one per stream. The caller
//! appends an event only after the business commit that produced it (SPEC
//! RT-6 "publish only after commit"), asks it to resume a subscriber from a
//! cursor, and takes a [`Checkpoint`] in the same single-threaded step as the
//! state it snapshots. The ledger owns no IO, clock or randomness: `now` and
//! epoch randomness come from the caller. It must never hand out a position
//! it cannot prove: a resume either replays every event after the cursor or
//! is refused ([`ResumeRefusal`]).

mod cursor;
mod epoch;
mod resume;
mod retention;
mod stats;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::Instant;

use dtp_codec::realtime::RecoveryMode;

use cursor::CursorKey;
pub use epoch::Epoch;
pub use resume::{Checkpoint, Replayed, Resume, ResumeIter, ResumeRefusal, Start};
pub use retention::{Retention, RetentionError, RetentionField};
pub use stats::{LedgerStats, ResumeStats};

/// What a ledger stores per event (SPEC RT-6): the engine stores the
/// already-encoded envelope bytes plus its eventId; the ledger only needs
/// the size that counts against [`Retention::max_bytes`].
pub trait LedgerItem {
    /// Bytes this item counts against the retention's byte bound.
    fn byte_len(&self) -> usize;
}

impl LedgerItem for bytes::Bytes {
    fn byte_len(&self) -> usize {
        self.len()
    }
}

impl LedgerItem for Vec<u8> {
    fn byte_len(&self) -> usize {
        self.len()
    }
}

/// The position an [`append`](Ledger::append) gave its event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The event's sequence (1 for an epoch's first event).
    pub sequence: u64,
    /// Its `resumeCursor` for `CURSOR` streams, `None` otherwise (SPEC RT-3).
    pub cursor: Option<String>,
}

/// The epoch's sequence space is used up (2⁶⁴ − 1 events): start a new epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("sequence space of this epoch exhausted; start a new epoch")]
pub struct SequenceExhausted;

/// [`Ledger::new_epoch`] was given randomness that reproduces the current
/// epoch; continuity would falsely appear proven. Draw again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("new epoch equals the current one; draw new randomness")]
pub struct EpochUnchanged;

/// One retained event.
pub(crate) struct Entry<T> {
    pub(crate) sequence: u64,
    pub(crate) at: Instant,
    pub(crate) bytes: usize,
    pub(crate) item: T,
}

/// One stream's history (SPEC RT-6): per-stream epoch, sequences contiguous
/// from 1 within the epoch, bounded replay retention and HMAC-bound cursors.
pub struct Ledger<T> {
    stream_id: String,
    scope: String,
    recovery: RecoveryMode,
    retention: Retention,
    epoch: Epoch,
    key: CursorKey,
    last_sequence: u64,
    revision: u64,
    entries: VecDeque<Entry<T>>,
    retained_bytes: usize,
    /// The newest position when an operator last cut (0: never, in this
    /// epoch): [`Ledger::position_of`] proves nothing before it.
    cut_at: u64,
    stats: LedgerStats,
}

impl<T: LedgerItem> Ledger<T> {
    /// A new ledger in `epoch` with nothing published. `scope` is the
    /// stream's scope binding, which every cursor is bound to; `cursor_key`
    /// is the deployment's cursor secret (keep it across restarts). A new
    /// `Ledger` after a restart without persistence must get a fresh
    /// random `epoch`.
    pub fn new(
        stream_id: &str,
        scope: &str,
        recovery: RecoveryMode,
        retention: Retention,
        epoch: Epoch,
        cursor_key: &[u8; 32],
    ) -> Result<Self, RetentionError> {
        retention.validate()?;
        let mut key = CursorKey::new(cursor_key);
        key.bind(stream_id, scope, epoch.as_str());
        Ok(Self {
            stream_id: stream_id.to_owned(),
            scope: scope.to_owned(),
            recovery,
            retention,
            epoch,
            key,
            last_sequence: 0,
            revision: 0,
            entries: VecDeque::new(),
            retained_bytes: 0,
            cut_at: 0,
            stats: LedgerStats::default(),
        })
    }

    /// The stream id.
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    /// The stream's scope binding the cursors are bound to.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The stream's recovery mode.
    pub fn recovery(&self) -> RecoveryMode {
        self.recovery
    }

    /// The retention bounds.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// The current epoch.
    pub fn epoch(&self) -> &Epoch {
        &self.epoch
    }

    /// The newest sequence published in this epoch (0 if none).
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The snapshot revision (bumped on every append, cut and epoch change).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The oldest retained sequence, if any event is retained.
    pub fn first_retained_sequence(&self) -> Option<u64> {
        self.entries.front().map(|e| e.sequence)
    }

    /// Counters for metrics, with the current occupancy.
    pub fn stats(&self) -> LedgerStats {
        LedgerStats {
            retained_events: self.entries.len(),
            retained_bytes: self.retained_bytes,
            ..self.stats
        }
    }

    /// Records `item` as the next event (SPEC RT-6). Call only after the
    /// commit that produced it. Retention is enforced right after: the
    /// oldest events go first, by count, then bytes, then age; an item
    /// larger than `max_bytes` is published but not retained.
    pub fn append(&mut self, item: T, now: Instant) -> Result<Appended, SequenceExhausted> {
        self.append_with(now, |_| item)
    }

    /// [`Ledger::append`] for an item that carries its own position (an
    /// encoded envelope holds its sequence and cursor): `make` is given the
    /// position the item will have, before it is recorded.
    pub fn append_with(
        &mut self,
        now: Instant,
        make: impl FnOnce(&Appended) -> T,
    ) -> Result<Appended, SequenceExhausted> {
        let sequence = self.last_sequence.checked_add(1).ok_or(SequenceExhausted)?;
        let position = Appended {
            sequence,
            cursor: (self.recovery.has_cursor()).then(|| {
                self.key
                    .issue(&self.stream_id, &self.scope, self.epoch.as_str(), sequence)
            }),
        };
        let item = make(&position);
        let bytes = item.byte_len();
        self.last_sequence = sequence;
        self.revision = self.revision.wrapping_add(1);
        self.stats.appends += 1;
        self.retained_bytes = self.retained_bytes.saturating_add(bytes);
        self.entries.push_back(Entry {
            sequence,
            at: now,
            bytes,
            item,
        });
        while self.entries.len() > self.retention.max_events {
            self.evict_front();
            self.stats.evicted_by_count += 1;
        }
        while self.retained_bytes > self.retention.max_bytes && self.evict_front() {
            self.stats.evicted_by_bytes += 1;
        }
        self.expire(now);
        Ok(position)
    }

    /// Evicts every event older than `max_age` at `now`; returns how many.
    /// (An event exactly `max_age` old is still retained.)
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while let Some(front) = self.entries.front() {
            if now.saturating_duration_since(front.at) <= self.retention.max_age {
                break;
            }
            self.evict_front();
            n += 1;
        }
        self.stats.evicted_by_age += n as u64;
        n
    }

    /// A forced retention cut (operator action): drops every retained event
    /// but keeps the epoch and sequence, so every cursor before the newest
    /// position is refused `Expired` (an explicit reset, never an empty
    /// success). The newest position stays resumable: nothing after it was
    /// lost. Returns how many events were dropped.
    pub fn cut(&mut self) -> usize {
        self.cut_at = self.last_sequence;
        let n = self.drop_all();
        self.stats.evicted_by_cut += n as u64;
        self.revision = self.revision.wrapping_add(1);
        n
    }

    /// Moves the newest position forward to `last` without events (a ledger
    /// that mirrors a shared log, SPEC RT-6 scale-out: at start, the log's
    /// position before the first event it still holds; later, a range of
    /// the log that retention removed before this node read it). Every
    /// retained event is dropped, as by [`Ledger::cut`], so a cursor before
    /// `last` is refused `Expired` (never resumed across the hole); `last`
    /// itself stays resumable. Returns how many events were dropped; a
    /// `last` at or before the newest position changes nothing.
    pub fn skip_to(&mut self, last: u64) -> usize {
        if last <= self.last_sequence {
            return 0;
        }
        let n = self.drop_all();
        self.stats.evicted_by_cut += n as u64;
        self.last_sequence = last;
        self.revision = self.revision.wrapping_add(1);
        n
    }

    /// Starts a new epoch from caller randomness (SPEC RT-6): used whenever
    /// the ledger cannot prove continuity. Sequences restart at 1, retained
    /// events are dropped and every earlier cursor is refused `EpochChanged`.
    pub fn new_epoch(&mut self, random: u64) -> Result<&Epoch, EpochUnchanged> {
        let epoch = Epoch::from_random(random);
        if epoch == self.epoch {
            return Err(EpochUnchanged);
        }
        let n = self.drop_all();
        self.stats.evicted_by_epoch += n as u64;
        self.key.bind(&self.stream_id, &self.scope, epoch.as_str());
        self.epoch = epoch;
        self.last_sequence = 0;
        self.cut_at = 0;
        self.revision = self.revision.wrapping_add(1);
        Ok(&self.epoch)
    }

    /// The snapshot checkpoint of the current position (SPEC RT-6). Take it
    /// in the same control-thread step as the snapshot's state read.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            epoch: self.epoch.clone(),
            last_sequence: self.last_sequence,
            revision: self.revision,
            recovery: self.recovery,
            cursor: self.cursor_for(self.last_sequence),
        }
    }

    /// The cursor of position `sequence` (0 ..= last: position 0 is the
    /// epoch's start, before its first event, so that the checkpoint of an
    /// empty stream has a cursor too) in the current epoch; `None` for
    /// other positions and for streams that are not `CURSOR`.
    pub fn cursor_for(&self, sequence: u64) -> Option<String> {
        let issued = sequence <= self.last_sequence;
        (issued && self.recovery.has_cursor()).then(|| {
            self.key
                .issue(&self.stream_id, &self.scope, self.epoch.as_str(), sequence)
        })
    }

    /// Where a subscriber without a cursor starts: at the next event
    /// published ("now"); nothing is replayed. See [`Start`].
    pub fn resume_from_start(&self) -> Start<'_> {
        Start {
            epoch: &self.epoch,
            next_expected_sequence: self.last_sequence.saturating_add(1),
        }
    }

    /// Resumes a subscriber from `cursor` (SPEC RT-6, RT-9), presented under
    /// the subscriber's authorised `scope` (the caller re-checks
    /// authorisation first). Ages out old events at `now` before deciding.
    /// Succeeds only with proven continuity; see [`ResumeRefusal`] for the
    /// checks, made in its declaration order.
    pub fn resume(
        &mut self,
        cursor: &str,
        scope: &str,
        now: Instant,
    ) -> Result<Resume<'_, T>, ResumeRefusal> {
        self.expire(now);
        match self.check_cursor(cursor, scope) {
            Ok(after) => {
                self.stats.resumes.resumed += 1;
                Ok(self.resume_at(after))
            }
            Err(refusal) => {
                let r = &mut self.stats.resumes;
                *match refusal {
                    ResumeRefusal::Malformed => &mut r.malformed,
                    ResumeRefusal::Tampered => &mut r.tampered,
                    ResumeRefusal::EpochChanged => &mut r.epoch_changed,
                    ResumeRefusal::Expired => &mut r.expired,
                    ResumeRefusal::Future => &mut r.future,
                    ResumeRefusal::NotResumable => &mut r.not_resumable,
                } += 1;
                Err(refusal)
            }
        }
    }

    /// Continues a replay already under way (SPEC RT-10: replay is sent in
    /// pages as the subscriber's socket drains): the events after `after`
    /// in `epoch`, a position this server proved earlier from a cursor and
    /// kept — not a client's claim, so no cursor is checked. Refused as a
    /// [`Ledger::resume`] would be when the epoch changed or retention
    /// dropped events after `after` meanwhile (the subscriber fell behind).
    /// Not counted as a resume.
    pub fn continue_after(
        &mut self,
        epoch: &str,
        after: u64,
        now: Instant,
    ) -> Result<Resume<'_, T>, ResumeRefusal> {
        self.expire(now);
        if !self.recovery.has_cursor() {
            return Err(ResumeRefusal::NotResumable);
        }
        if epoch != self.epoch.as_str() {
            return Err(ResumeRefusal::EpochChanged);
        }
        let after = self.check_position(after)?;
        Ok(self.resume_at(after))
    }

    /// The position `cursor` proves in the current epoch whether or not
    /// the events after it are still retained here: for a ledger that
    /// mirrors a shared log (SPEC RT-6 scale-out), which may still hold
    /// what this ledger no longer does. Refused as [`Ledger::resume`]
    /// refuses, except for `Expired` by retention; a position before an
    /// operator's [`Ledger::cut`] is still `Expired`. Not counted as a
    /// resume.
    pub fn position_of(&self, cursor: &str, scope: &str) -> Result<u64, ResumeRefusal> {
        match self.check_cursor(cursor, scope) {
            Err(ResumeRefusal::Expired) => {
                let parsed = cursor::parse(cursor).ok_or(ResumeRefusal::Malformed)?;
                if parsed.sequence < self.cut_at {
                    return Err(ResumeRefusal::Expired);
                }
                Ok(parsed.sequence)
            }
            other => other,
        }
    }

    /// The replay after `after`, a position [`Ledger::check_position`]
    /// accepted.
    fn resume_at(&self, after: u64) -> Resume<'_, T> {
        // Retained sequences are contiguous (entry i has first + i) and
        // `after >= first - 1`, so this skips exactly the entries the
        // subscriber already applied.
        let skip = self.first_retained_sequence().map_or(0, |first| {
            usize::try_from(after - (first - 1)).unwrap_or(usize::MAX)
        });
        Resume {
            after,
            epoch: &self.epoch,
            entries: &self.entries,
            skip,
        }
    }

    /// The position `cursor` proves, or why it proves none.
    fn check_cursor(&self, cursor: &str, scope: &str) -> Result<u64, ResumeRefusal> {
        if !self.recovery.has_cursor() {
            return Err(ResumeRefusal::NotResumable);
        }
        let parsed = cursor::parse(cursor).ok_or(ResumeRefusal::Malformed)?;
        if !self.key.verify(&self.stream_id, scope, &parsed) {
            return Err(ResumeRefusal::Tampered);
        }
        if parsed.epoch != self.epoch.as_str() {
            return Err(ResumeRefusal::EpochChanged);
        }
        self.check_position(parsed.sequence)
    }

    /// `after` if it is a published position of the current epoch with
    /// every later event still retained.
    fn check_position(&self, after: u64) -> Result<u64, ResumeRefusal> {
        if after > self.last_sequence {
            return Err(ResumeRefusal::Future);
        }
        // Every event after `after` must be retained: the oldest retained one
        // (or, with none retained, the next to be published) is `after + 1`
        // or earlier.
        let expired = match self.first_retained_sequence() {
            Some(first) => after < first - 1,
            None => after < self.last_sequence,
        };
        if expired {
            return Err(ResumeRefusal::Expired);
        }
        Ok(after)
    }

    /// Drops the oldest retained event; false if none.
    fn evict_front(&mut self) -> bool {
        match self.entries.pop_front() {
            Some(e) => {
                self.retained_bytes = self.retained_bytes.saturating_sub(e.bytes);
                true
            }
            None => false,
        }
    }

    fn drop_all(&mut self) -> usize {
        let n = self.entries.len();
        self.entries.clear();
        self.retained_bytes = 0;
        n
    }
}
