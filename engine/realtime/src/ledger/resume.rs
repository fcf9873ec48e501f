//! What a resume, a fresh subscription and a snapshot get from a ledger
//! (SPEC RT-6, RT-9).

use std::collections::VecDeque;
use std::iter::FusedIterator;

use dtp_codec::realtime::RecoveryMode;

use super::Entry;
use super::epoch::Epoch;

/// A proven-continuous resume (SPEC RT-6): the subscriber applied everything
/// up to [`after`](Self::after) and every event after it is still retained,
/// in order. Zero events only when `after` is the newest published sequence.
pub struct Resume<'a, T> {
    /// The last sequence the subscriber applied (the cursor's position).
    pub after: u64,
    /// The epoch the position belongs to (the current one).
    pub epoch: &'a Epoch,
    pub(super) entries: &'a VecDeque<Entry<T>>,
    /// Index of the first entry with sequence > `after`.
    pub(super) skip: usize,
}

impl<'a, T> Resume<'a, T> {
    /// The sequence the subscriber must see next (SPEC RT-9 SUBSCRIBED's
    /// `nextExpectedSequence` = `after + 1`, no silent advance).
    pub fn next_expected_sequence(&self) -> u64 {
        self.after.saturating_add(1)
    }

    /// How many events the resume replays.
    pub fn len(&self) -> usize {
        self.entries.len().saturating_sub(self.skip)
    }

    /// Whether nothing is replayed (the cursor is the newest position).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The replayed events, oldest first, sequences `after + 1 ..= last`.
    pub fn iter(&self) -> ResumeIter<'a, T> {
        ResumeIter {
            inner: self.entries.range(self.skip..),
        }
    }
}

impl<'a, T> IntoIterator for &Resume<'a, T> {
    type Item = Replayed<'a, T>;
    type IntoIter = ResumeIter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over a [`Resume`]'s events.
pub struct ResumeIter<'a, T> {
    inner: std::collections::vec_deque::Iter<'a, Entry<T>>,
}

impl<'a, T> Iterator for ResumeIter<'a, T> {
    type Item = Replayed<'a, T>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|e| Replayed {
            sequence: e.sequence,
            item: &e.item,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> ExactSizeIterator for ResumeIter<'_, T> {}
impl<T> FusedIterator for ResumeIter<'_, T> {}

/// One replayed event.
#[derive(Debug, PartialEq, Eq)]
pub struct Replayed<'a, T> {
    /// Its sequence in the current epoch.
    pub sequence: u64,
    /// The stored item (the encoded envelope).
    pub item: &'a T,
}

/// Why a cursor was not resumed (SPEC RT-6: never an empty success for a
/// cursor whose continuity cannot be proven).
///
/// The front end answers every refusal except [`NotResumable`](Self::NotResumable)
/// with RESET_REQUIRED (WebSocket) or 409/410 (SSE), after which the client
/// takes a snapshot. `Malformed` and `Tampered` are also worth a security
/// diagnostic: a correct client only presents cursors the server issued
/// for that stream and scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResumeRefusal {
    /// Not a cursor this server issues (syntax, length, charset).
    #[error("malformed resume cursor")]
    Malformed,
    /// Well-formed, but the tag does not verify for this stream and scope
    /// (forged, altered, another stream's or another scope's cursor, or
    /// issued under another cursor key).
    #[error("resume cursor does not belong to this stream and scope")]
    Tampered,
    /// Issued by this server for an earlier epoch: continuity is lost.
    #[error("stream epoch changed; take a snapshot")]
    EpochChanged,
    /// Some event after the cursor is no longer retained (age, size or an
    /// operator's cut): `CURSOR_EXPIRED`.
    #[error("resume cursor expired (replay retention); take a snapshot")]
    Expired,
    /// Beyond the newest published sequence: never issued in this epoch.
    #[error("resume cursor is ahead of the stream")]
    Future,
    /// The stream is not registered `CURSOR` (SPEC RT-3).
    #[error("stream does not support cursor resume")]
    NotResumable,
}

/// Where a subscriber without a cursor starts (SPEC RT-9 SUBSCRIBE with
/// `cursor: null`): at "now", i.e. the next event published. Nothing is
/// replayed; a client that needs the state before that takes a snapshot and
/// checks that its checkpoint's `last_sequence + 1` equals
/// `next_expected_sequence` (else it missed events in between and resyncs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start<'a> {
    /// The current epoch.
    pub epoch: &'a Epoch,
    /// The next sequence to be published (`last_sequence + 1`).
    pub next_expected_sequence: u64,
}

/// A snapshot checkpoint (SPEC RT-6 SnapshotCheckpoint): the ledger position
/// a snapshot corresponds to. The caller takes it in the same
/// single-threaded step as the state it snapshots, so both describe the same
/// commit point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// `streamEpoch`.
    pub epoch: Epoch,
    /// `lastAppliedSequence`: the newest sequence published in this epoch
    /// (0 if none yet).
    pub last_sequence: u64,
    /// `snapshotRevision`: bumped on every append, cut and epoch change.
    pub revision: u64,
    /// `recoveryMode`.
    pub recovery: RecoveryMode,
    /// `resumeCursor`: the cursor of `last_sequence` for `CURSOR` streams;
    /// `None` for other modes and when nothing was published yet in this
    /// epoch. A client holding a `None` checkpoint of a `CURSOR` stream
    /// subscribes with `cursor: null` and accepts the SUBSCRIBED position only
    /// if its `nextExpectedSequence` is `last_sequence + 1` (= 1); otherwise
    /// events were published in between and it takes a new snapshot.
    pub cursor: Option<String>,
}
