//! One logical subscription's ordering state (SPEC RT-4, RT-5, RT-13).

use std::time::Instant;

use super::dedupe::{DedupeConfig, DedupeConfigError, DedupeWindow};

/// The fields of a decoded, schema-valid event the RT-5 table needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed<'a> {
    /// `streamEpoch`.
    pub epoch: &'a str,
    /// `eventId`.
    pub event_id: &'a str,
    /// `sequence`, parsed.
    pub sequence: u64,
    /// A digest of the payload the caller computes (any stable 64-bit hash
    /// of the canonical payload bytes); equal events have equal digests.
    pub digest: u64,
    /// `resumeCursor` (`CURSOR` streams), else `None`.
    pub cursor: Option<&'a str>,
}

/// Which RT-5 conflict was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictKind {
    /// A remembered eventId arrived with another sequence or payload.
    SameIdOtherEvent,
    /// A remembered sequence arrived with another eventId.
    SameSequenceOtherId,
}

/// What to do with an observed event (SPEC RT-5, seed §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// `sequence == lastApplied + 1`: apply the effect, then
    /// [`commit`](Subscription::commit). Nothing advanced yet.
    Apply,
    /// Already applied (same eventId, sequence and digest): ignore
    /// (`DUPLICATE_EVENT`).
    Duplicate,
    /// The stream contradicts itself (`EVENT_CONFLICT`): close and resync.
    Conflict(ConflictKind),
    /// `sequence <= lastApplied`, not a remembered duplicate: drop
    /// (`STALE_EVENT`).
    Stale,
    /// `sequence > lastApplied + 1` (`SEQUENCE_GAP`): stop applying and
    /// resync (cursor resume or snapshot).
    Gap {
        /// `lastApplied + 1`.
        expected: u64,
        /// The sequence that arrived.
        got: u64,
    },
    /// Another epoch than the subscription's (or none known yet): do not
    /// mix epochs; take a snapshot (or rebuild the session).
    UnknownEpoch,
    /// The subscription stopped after an earlier Gap, Conflict or
    /// UnknownEpoch and waits for [`reset`](Subscription::reset) (or, after
    /// a Gap, an in-position [`accept_subscribed`](Subscription::accept_subscribed)):
    /// the event is dropped unjudged. Never applies "newer-looking" events
    /// after a gap (seed §4.4).
    Resyncing,
}

impl Verdict {
    /// Whether the verdict stops the subscription until a resync.
    pub fn requires_resync(self) -> bool {
        matches!(
            self,
            Self::Conflict(_) | Self::Gap { .. } | Self::UnknownEpoch
        )
    }
}

/// A refused [`Subscription::commit`]: nothing was advanced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// The last observed event was not judged [`Verdict::Apply`].
    #[error("no event is waiting for commit")]
    NothingPending,
    /// Another sequence than the one just judged Apply.
    #[error("commit of sequence {got}, but {expected} was judged Apply")]
    SequenceMismatch {
        /// The sequence judged Apply.
        expected: u64,
        /// The sequence given.
        got: u64,
    },
    /// Another cursor than the one the judged event carried.
    #[error("commit cursor differs from the applied event's cursor")]
    CursorMismatch,
}

/// Why a SUBSCRIBED answer cannot be accepted (SPEC RT-9): the caller
/// answers with RESET_REQUIRED handling: snapshot, then [`Subscription::reset`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubscribedMismatch {
    /// The server's epoch differs from the subscription's.
    #[error("server epoch changed; snapshot required")]
    EpochChanged,
    /// Same epoch, but not the position the subscription holds (no silent
    /// advance or rewind).
    #[error("server resumes at {got}, subscription expects {expected}")]
    PositionMismatch {
        /// `lastApplied + 1`.
        expected: u64,
        /// The server's `nextExpectedSequence`.
        got: u64,
    },
    /// `nextExpectedSequence` 0 (sequences start at 1).
    #[error("nextExpectedSequence must be at least 1")]
    InvalidNextExpected,
    /// The subscription stopped on a Conflict or an unknown epoch, which only
    /// a snapshot heals.
    #[error("snapshot required before resuming")]
    SnapshotRequired,
}

/// Counts per verdict and per state change (SPEC RT-15).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubscriptionStats {
    /// [`Verdict::Apply`] verdicts.
    pub apply: u64,
    /// Successful commits.
    pub commits: u64,
    /// [`Verdict::Duplicate`] verdicts.
    pub duplicate: u64,
    /// [`Verdict::Conflict`] verdicts.
    pub conflict: u64,
    /// [`Verdict::Stale`] verdicts.
    pub stale: u64,
    /// [`Verdict::Gap`] verdicts.
    pub gap: u64,
    /// [`Verdict::UnknownEpoch`] verdicts.
    pub unknown_epoch: u64,
    /// [`Verdict::Resyncing`] verdicts.
    pub resyncing: u64,
    /// Resets (snapshot, RESET_REQUIRED, first SUBSCRIBED).
    pub resets: u64,
    /// Ids forgotten because the window was full.
    pub dedupe_evicted: u64,
    /// Ids forgotten because they aged out.
    pub dedupe_expired: u64,
}

/// Why the subscription stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// A gap: a cursor resume at the same position heals it.
    Gap,
    /// Conflict, unknown epoch or refused SUBSCRIBED: only a reset heals it.
    Snapshot,
}

struct Pending {
    sequence: u64,
    event_id: String,
    digest: u64,
    cursor: Option<String>,
    at: Instant,
}

/// One logical subscription's ordering state (SPEC RT-4, RT-5, RT-13):
/// stream, epoch, last applied sequence, cursor and the dedupe window.
///
/// Order of use: [`observe`](Self::observe) every decoded event; on
/// [`Verdict::Apply`] apply the effect and only then
/// [`commit`](Self::commit) (SPEC RT-4: last-applied and cursor advance
/// strictly after the effect). If the effect fails, do not commit: the next
/// `observe` forgets the pending event.
///
/// The dedupe window (2,048 ids / 10 min by default, SPEC RT-13) holds
/// committed events only. When full or aged, it forgets the oldest ids. That
/// is eviction of memory, never of events: a forgotten event arriving again
/// has `sequence <= lastApplied` and is judged [`Verdict::Stale`] instead of
/// [`Verdict::Duplicate`], so it is still never applied twice; only a
/// conflict involving a forgotten id goes undetected.
pub struct Subscription {
    stream_id: String,
    epoch: Option<String>,
    last_applied: u64,
    cursor: Option<String>,
    window: DedupeWindow,
    pending: Option<Pending>,
    stopped: Option<Stop>,
    stats: SubscriptionStats,
}

impl Subscription {
    /// A subscription to `stream_id` with no epoch yet: every event is
    /// [`Verdict::UnknownEpoch`] until [`reset`](Self::reset) or
    /// [`accept_subscribed`](Self::accept_subscribed).
    pub fn new(stream_id: &str, dedupe: DedupeConfig) -> Result<Self, DedupeConfigError> {
        dedupe.validate()?;
        Ok(Self {
            stream_id: stream_id.to_owned(),
            epoch: None,
            last_applied: 0,
            cursor: None,
            window: DedupeWindow::new(dedupe),
            pending: None,
            stopped: None,
            stats: SubscriptionStats::default(),
        })
    }

    /// The stream id.
    pub fn stream_id(&self) -> &str {
        &self.stream_id
    }

    /// The epoch, once known.
    pub fn epoch(&self) -> Option<&str> {
        self.epoch.as_deref()
    }

    /// The last applied (committed) sequence.
    pub fn last_applied(&self) -> u64 {
        self.last_applied
    }

    /// The cursor of the last committed event (send it in SUBSCRIBE).
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// Whether the subscription stopped and waits for a resync.
    pub fn is_resyncing(&self) -> bool {
        self.stopped.is_some()
    }

    /// Ids in the dedupe window.
    pub fn dedupe_len(&self) -> usize {
        self.window.len()
    }

    /// Counters.
    pub fn stats(&self) -> SubscriptionStats {
        self.stats
    }

    /// Judges an event by the RT-5 table (SPEC RT-5). Advances nothing:
    /// an [`Verdict::Apply`] waits for [`commit`](Self::commit).
    pub fn observe(&mut self, ev: Observed<'_>, now: Instant) -> Verdict {
        self.pending = None;
        self.stats.dedupe_expired += self.window.expire(now);
        let verdict = self.judge(&ev);
        let s = &mut self.stats;
        *match verdict {
            Verdict::Apply => &mut s.apply,
            Verdict::Duplicate => &mut s.duplicate,
            Verdict::Conflict(_) => &mut s.conflict,
            Verdict::Stale => &mut s.stale,
            Verdict::Gap { .. } => &mut s.gap,
            Verdict::UnknownEpoch => &mut s.unknown_epoch,
            Verdict::Resyncing => &mut s.resyncing,
        } += 1;
        match verdict {
            Verdict::Apply => {
                self.pending = Some(Pending {
                    sequence: ev.sequence,
                    event_id: ev.event_id.to_owned(),
                    digest: ev.digest,
                    cursor: ev.cursor.map(str::to_owned),
                    at: now,
                });
            }
            Verdict::Gap { .. } => self.stopped = Some(Stop::Gap),
            Verdict::Conflict(_) | Verdict::UnknownEpoch => self.stopped = Some(Stop::Snapshot),
            Verdict::Duplicate | Verdict::Stale | Verdict::Resyncing => {}
        }
        verdict
    }

    fn judge(&self, ev: &Observed<'_>) -> Verdict {
        if self.stopped.is_some() {
            return Verdict::Resyncing;
        }
        if self.epoch.as_deref() != Some(ev.epoch) {
            return Verdict::UnknownEpoch;
        }
        if let Some((sequence, digest)) = self.window.by_id(ev.event_id) {
            return if sequence == ev.sequence && digest == ev.digest {
                Verdict::Duplicate
            } else {
                Verdict::Conflict(ConflictKind::SameIdOtherEvent)
            };
        }
        if self.window.id_at(ev.sequence).is_some() {
            // The id differs: a remembered id would have matched above.
            return Verdict::Conflict(ConflictKind::SameSequenceOtherId);
        }
        match self.last_applied.checked_add(1) {
            Some(next) if ev.sequence == next => Verdict::Apply,
            Some(next) if ev.sequence > next => Verdict::Gap {
                expected: next,
                got: ev.sequence,
            },
            _ => Verdict::Stale,
        }
    }

    /// Records that the event just judged [`Verdict::Apply`] had its effect
    /// applied (SPEC RT-4): advances the last applied sequence and cursor
    /// and remembers the id. Anything else is refused and changes nothing.
    pub fn commit(&mut self, sequence: u64, cursor: Option<&str>) -> Result<(), CommitError> {
        let p = self.pending.take().ok_or(CommitError::NothingPending)?;
        if p.sequence != sequence {
            let expected = p.sequence;
            self.pending = Some(p);
            return Err(CommitError::SequenceMismatch {
                expected,
                got: sequence,
            });
        }
        if p.cursor.as_deref() != cursor {
            self.pending = Some(p);
            return Err(CommitError::CursorMismatch);
        }
        self.last_applied = p.sequence;
        self.cursor = p.cursor;
        self.stats.dedupe_evicted += self.window.insert(p.event_id, p.sequence, p.digest, p.at);
        self.stats.commits += 1;
        Ok(())
    }

    /// Adopts an authoritative position (SPEC RT-5, RT-6): a snapshot's
    /// checkpoint, or the position after RESET_REQUIRED handling. Clears
    /// the stop and the pending event; clears the dedupe window unless the
    /// position is exactly the one already held (seed §4.4 "reset dedupe/
    /// order state").
    pub fn reset(&mut self, epoch: &str, last_sequence: u64, cursor: Option<&str>) {
        let same = self.epoch.as_deref() == Some(epoch) && self.last_applied == last_sequence;
        if !same {
            self.window.clear();
        }
        self.epoch = Some(epoch.to_owned());
        self.last_applied = last_sequence;
        self.cursor = cursor.map(str::to_owned);
        self.pending = None;
        self.stopped = None;
        self.stats.resets += 1;
    }

    /// Checks a SUBSCRIBED answer (SPEC RT-9). With no epoch yet the
    /// subscription starts where the server says (a cursorless subscribe
    /// starts at "now"). Otherwise the epoch must match and
    /// `next_expected_sequence` must be `lastApplied + 1` (no silent advance
    /// or rewind); a matching answer also heals a stop caused by a Gap (the
    /// server replays from the cursor). On a mismatch the subscription stops
    /// until [`reset`](Self::reset).
    pub fn accept_subscribed(
        &mut self,
        epoch: &str,
        accepted_cursor: Option<&str>,
        next_expected_sequence: u64,
    ) -> Result<(), SubscribedMismatch> {
        self.pending = None;
        let result = self.check_subscribed(epoch, next_expected_sequence);
        match result {
            Ok(Some(last)) => self.reset(epoch, last, accepted_cursor),
            Ok(None) => {
                self.stopped = None;
                if accepted_cursor.is_some() {
                    // The server may rotate the opaque cursor of the same position.
                    self.cursor = accepted_cursor.map(str::to_owned);
                }
            }
            Err(_) => self.stopped = Some(Stop::Snapshot),
        }
        result.map(|_| ())
    }

    /// `Some(last)` to adopt a fresh position, `None` to keep the current one.
    fn check_subscribed(&self, epoch: &str, next: u64) -> Result<Option<u64>, SubscribedMismatch> {
        let last = next
            .checked_sub(1)
            .ok_or(SubscribedMismatch::InvalidNextExpected)?;
        let Some(own) = self.epoch.as_deref() else {
            return Ok(Some(last));
        };
        if own != epoch {
            return Err(SubscribedMismatch::EpochChanged);
        }
        if self.stopped == Some(Stop::Snapshot) {
            return Err(SubscribedMismatch::SnapshotRequired);
        }
        if last != self.last_applied {
            let expected = self.last_applied.saturating_add(1);
            return Err(SubscribedMismatch::PositionMismatch {
                expected,
                got: next,
            });
        }
        Ok(None)
    }
}
