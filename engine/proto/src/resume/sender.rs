//! The sending side: sequence numbers (RES-1), the unacknowledged cache
//! (RES-2), its ceiling (RES-4) and the resend after a reconnect (SEQ-5).

use std::collections::VecDeque;

use super::{PushRefused, ResumeError};

/// Ceilings of the resume cache (SPEC RES-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// Most fragments cached (default 1024).
    pub max_fragments: usize,
    /// Most bytes cached (default 4 MiB).
    pub max_bytes: usize,
    /// After a `BUFFER_FULL`, pushing resumes once the cache holds at most
    /// this many fragments… (default 768; a value at or above a ceiling
    /// means "as soon as there is room")
    pub low_water_fragments: usize,
    /// … and at most this many bytes (default 3 MiB).
    pub low_water_bytes: usize,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            max_fragments: 1024,
            max_bytes: 4 * 1024 * 1024,
            low_water_fragments: 768,
            low_water_bytes: 3 * 1024 * 1024,
        }
    }
}

/// What the sender reports to its driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderEvent {
    /// SPEC RES-4: the cache drained to its low-water marks after a
    /// `BUFFER_FULL`: pushing may resume.
    Writable,
}

/// One cached fragment; its sequence is implied by its position.
#[derive(Debug)]
pub(super) struct Cached<T> {
    pub(super) len: usize,
    pub(super) item: T,
}

/// SPEC RES-1, RES-2, RES-4, SEQ-5: the sending side of one direction of a
/// DTP session.
///
/// Invariant: the cache holds exactly the sequences `acked + 1 ..
/// next_sequence`, in order.
#[derive(Debug)]
pub struct ResumeSender<T> {
    // `pub(super)`: read and rebuilt by `resume::persist`.
    pub(super) config: SenderConfig,
    pub(super) cache: VecDeque<Cached<T>>,
    pub(super) cached_bytes: usize,
    pub(super) next_sequence: u64,
    pub(super) acked: u64,
    pub(super) paused: bool,
    pub(super) writable_event: bool,
}

impl<T> ResumeSender<T> {
    /// A sender for a new session: the first fragment gets sequence 1.
    pub fn new(config: SenderConfig) -> Self {
        Self::restore(config, 1)
    }

    /// SPEC SES-2: a sender restored from a session store that saved
    /// [`ResumeSender::next_sequence`]. Numbering continues there; the cache
    /// starts empty, so a later RESUME reporting less than
    /// `next_sequence - 1` fails ([`ResumeError::ResumeBehindAck`]): those
    /// fragments are gone. A `next_sequence` of 0 is taken as 1.
    pub fn restore(config: SenderConfig, next_sequence: u64) -> Self {
        let next_sequence = next_sequence.max(1);
        Self {
            config,
            cache: VecDeque::new(),
            cached_bytes: 0,
            next_sequence,
            acked: next_sequence - 1,
            paused: false,
            writable_event: false,
        }
    }

    /// SPEC RES-1, RES-2, RES-4: assigns `item` (whose plaintext is `len`
    /// bytes) the next sequence number and caches it until acknowledged;
    /// returns the sequence to put in its data frame.
    ///
    /// Refused, with the item handed back: `BUFFER_FULL` at the ceiling or
    /// while paused (see the module docs), [`ResumeError::FragmentTooLarge`]
    /// for an item larger than the whole cache.
    pub fn push(&mut self, item: T, len: usize) -> Result<u64, PushRefused<T>> {
        if len > self.config.max_bytes {
            let error = ResumeError::FragmentTooLarge {
                len,
                max_bytes: self.config.max_bytes,
            };
            return Err(PushRefused { error, item });
        }
        if self.paused
            || self.cache.len() >= self.config.max_fragments
            || len > self.config.max_bytes.saturating_sub(self.cached_bytes)
        {
            self.paused = true;
            self.writable_event = false;
            let error = ResumeError::BufferFull {
                cached: self.cache.len(),
                cached_bytes: self.cached_bytes,
                max_fragments: self.config.max_fragments,
                max_bytes: self.config.max_bytes,
            };
            return Err(PushRefused { error, item });
        }
        let sequence = self.next_sequence;
        let Some(next) = sequence.checked_add(1) else {
            let error = ResumeError::SequenceExhausted;
            return Err(PushRefused { error, item });
        };
        self.next_sequence = next;
        self.cached_bytes += len;
        self.cache.push_back(Cached { len, item });
        Ok(sequence)
    }

    /// Handles the peer's cumulative [`AckFrame`](dtp_codec::AckFrame):
    /// frees every cached fragment up to `cumulative`; returns how many were
    /// freed. A repeated ack frees nothing; an ack beyond the last sequence
    /// sent or below an earlier ack is a protocol error and changes nothing.
    pub fn handle_ack(&mut self, cumulative: u64) -> Result<usize, ResumeError> {
        let last_sent = self.last_sent();
        if cumulative > last_sent {
            return Err(ResumeError::AckBeyondSent {
                cumulative,
                last_sent,
            });
        }
        if cumulative < self.acked {
            return Err(ResumeError::AckWentBackwards {
                cumulative,
                acked: self.acked,
            });
        }
        Ok(self.free_through(cumulative))
    }

    /// SPEC RES-3, SEQ-5: handles the peer's
    /// [`ResumeFrame`](dtp_codec::ResumeFrame) after a reconnect: frees what
    /// it received and returns the fragments to send again, in sequence
    /// order, with their (unchanged) sequence numbers. The caller seals them
    /// under the new key. A report beyond what was sent, or below what the
    /// peer had acknowledged, fails the resume (`RESUME_FAILED`) and changes
    /// nothing.
    pub fn handle_resume(
        &mut self,
        highest_received: u64,
    ) -> Result<impl ExactSizeIterator<Item = (u64, &T)> + '_, ResumeError> {
        let last_sent = self.last_sent();
        if highest_received > last_sent {
            return Err(ResumeError::ResumeBeyondSent {
                highest_received,
                last_sent,
            });
        }
        if highest_received < self.acked {
            return Err(ResumeError::ResumeBehindAck {
                highest_received,
                acked: self.acked,
            });
        }
        self.free_through(highest_received);
        Ok(self.unacked())
    }

    /// The cached fragments, oldest first, with their sequence numbers.
    pub fn unacked(&self) -> impl ExactSizeIterator<Item = (u64, &T)> + '_ {
        let first = self.acked.saturating_add(1);
        self.cache
            .iter()
            .enumerate()
            .map(move |(index, cached)| (first.saturating_add(index as u64), &cached.item))
    }

    /// The cached fragment with `sequence`, if it is still unacknowledged.
    pub fn cached(&self, sequence: u64) -> Option<&T> {
        let index = sequence.checked_sub(self.acked.saturating_add(1))?;
        let index = usize::try_from(index).ok()?;
        self.cache.get(index).map(|c| &c.item)
    }

    /// SPEC RES-4: the next event for the driver ([`SenderEvent::Writable`]
    /// once after a pause ends).
    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        std::mem::take(&mut self.writable_event).then_some(SenderEvent::Writable)
    }

    /// SPEC RES-4: whether a push of at least one small fragment would be
    /// accepted now (not paused and below both ceilings).
    pub fn is_writable(&self) -> bool {
        !self.paused
            && self.cache.len() < self.config.max_fragments
            && self.cached_bytes < self.config.max_bytes
    }

    /// Whether the sender is paused after a `BUFFER_FULL`, waiting for the
    /// cache to drain to its low-water marks.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// SPEC SES-2: the sequence the next pushed fragment gets (what a
    /// session store saves).
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// The highest sequence the peer has acknowledged (0: none).
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The last sequence assigned (0: none).
    pub fn last_sent(&self) -> u64 {
        self.next_sequence - 1
    }

    /// Fragments cached (unacknowledged).
    pub fn cached_count(&self) -> usize {
        self.cache.len()
    }

    /// Bytes cached (the lengths given on push).
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// The configuration.
    pub fn config(&self) -> &SenderConfig {
        &self.config
    }

    /// Frees the cache up to `through` (at most `last_sent`, at least
    /// `acked`: checked by the callers) and ends a pause at low water.
    fn free_through(&mut self, through: u64) -> usize {
        let mut freed = 0;
        while self.acked < through {
            let Some(cached) = self.cache.pop_front() else {
                break;
            };
            self.cached_bytes -= cached.len;
            self.acked += 1;
            freed += 1;
        }
        // Low water set at or above a ceiling acts as "just below it": a
        // pause never ends into a cache that is still full.
        if self.paused
            && self.cache.len() <= self.config.low_water_fragments
            && self.cached_bytes <= self.config.low_water_bytes
            && self.cache.len() < self.config.max_fragments
            && self.cached_bytes < self.config.max_bytes
        {
            self.paused = false;
            self.writable_event = true;
        }
        freed
    }
}
