//! The Resume Manager (SPEC RES-1 … RES-4, SEQ-5): sequence numbers, the cache
//! of unacknowledged fragments, acknowledgements and the RESUME exchange, for
//! one DTP session and one direction.
//!
//! # What it owns, what it never touches
//!
//! [`ResumeSender`] owns the sending side: the next sequence number (RES-1)
//! and the cache of fragments the peer has not acknowledged (RES-2), bounded
//! in count and bytes (RES-4). [`ResumeReceiver`] owns the receiving side:
//! the highest contiguous sequence received (RES-3) and when to acknowledge
//! it. Neither touches the wire, keys or the clock: the caller decodes
//! [`AckFrame`](dtp_codec::AckFrame)s and [`ResumeFrame`](dtp_codec::ResumeFrame)s,
//! encodes and encrypts what the sender returns, and passes `now` in. The
//! cache holds **plaintext** (`T`: a pool lease, a `Bytes`…) because a
//! fragment resent after a reconnect is sealed under the new key version,
//! never re-sent as old ciphertext (DESIGN.md §3, FORMAT.md §2.1).
//!
//! # The exchange
//!
//! ```text
//! sender                                   receiver
//! push(item) -> seq n  ── data(seq n) ──▶  handle_sequence(n) -> New | Duplicate
//!                                          poll_ack(now) -> AckFrame{cumulative}
//! handle_ack(c)  ◀──────── ack(c) ───────
//!        … connection lost: everything in flight is gone (SEQ-5) …
//!                                          resume_frame(session) -> highest h
//! handle_resume(h) ◀──── resume(h) ──────
//!   -> fragments h+1.. in order: re-seal and send again, same sequence numbers
//! ```
//!
//! Sequence numbers start at 1 and are never reused within a session, across
//! reconnects too: a resent fragment keeps its number, and new fragments
//! continue after the last one assigned. The state a session store must
//! persist is two integers: [`ResumeSender::next_sequence`] and
//! [`ResumeReceiver::highest_received`] (SES-2); see
//! [`ResumeSender::restore`] and [`ResumeReceiver::restore`].
//!
//! # Back-pressure (RES-4), with hysteresis
//!
//! When a push would pass the cache's ceiling ([`SenderConfig::max_fragments`]
//! or [`SenderConfig::max_bytes`]) it is refused with `BUFFER_FULL` (6001),
//! the item is handed back and the sender **pauses**: every push is refused
//! until acknowledgements bring the cache down to the low-water marks
//! ([`SenderConfig::low_water_fragments`], [`SenderConfig::low_water_bytes`]).
//! Then [`ResumeSender::poll_event`] yields [`SenderEvent::Writable`] once and
//! pushing resumes. The gap between ceiling and low water keeps a sender at
//! the limit from waking for every single ack.

mod persist;
mod receiver;
mod sender;
#[cfg(test)]
mod tests;

use dtp_codec::ErrorCode;

pub use receiver::{AckPolicy, Arrival, ResumeReceiver};
pub use sender::{ResumeSender, SenderConfig, SenderEvent};

/// What went wrong in the Resume Manager. Errors from peer input (acks,
/// resume frames, sequence numbers) are protocol errors for the session;
/// none of them panics or changes state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// SPEC RES-4: the cache is at its ceiling (or the sender is paused until
    /// it drains to the low-water mark).
    #[error(
        "{code} the resume cache holds {cached} fragments ({cached_bytes} bytes), the ceiling \
         is {max_fragments} ({max_bytes} bytes): wait for SenderEvent::Writable",
        code = ErrorCode::BUFFER_FULL
    )]
    BufferFull {
        /// Fragments cached.
        cached: usize,
        /// Bytes cached.
        cached_bytes: usize,
        /// The count ceiling.
        max_fragments: usize,
        /// The byte ceiling.
        max_bytes: usize,
    },
    /// A fragment larger than the whole cache: it could never be pushed.
    #[error(
        "{code} a fragment of {len} bytes exceeds the resume cache's {max_bytes} bytes; \
         split it or raise max_bytes",
        code = ErrorCode::LIMIT_EXCEEDED
    )]
    FragmentTooLarge {
        /// Its length.
        len: usize,
        /// The cache's byte ceiling.
        max_bytes: usize,
    },
    /// The session has used every sequence number (after 2^64 − 1 fragments).
    #[error(
        "{code} sequence numbers exhausted; start a new session",
        code = ErrorCode::LIMIT_EXCEEDED
    )]
    SequenceExhausted,
    /// The peer acknowledged a sequence number never sent.
    #[error(
        "{code} ack {cumulative} is beyond the last sequence sent ({last_sent})",
        code = ErrorCode::INVALID_VALUE
    )]
    AckBeyondSent {
        /// The acknowledged sequence.
        cumulative: u64,
        /// The last sequence assigned.
        last_sent: u64,
    },
    /// The peer's cumulative ack went below one it sent before.
    #[error(
        "{code} ack {cumulative} goes back below the earlier ack {acked}",
        code = ErrorCode::INVALID_VALUE
    )]
    AckWentBackwards {
        /// The acknowledged sequence.
        cumulative: u64,
        /// The highest acknowledged before.
        acked: u64,
    },
    /// SPEC SEQ-5: the peer reports having received more than was sent.
    #[error(
        "{code} the peer reports sequence {highest_received} received, but only {last_sent} \
         were sent in this session",
        code = ErrorCode::RESUME_FAILED
    )]
    ResumeBeyondSent {
        /// The peer's report.
        highest_received: u64,
        /// The last sequence assigned.
        last_sent: u64,
    },
    /// SPEC SEQ-5: the peer reports less than it acknowledged (it lost
    /// state): the fragments in between are no longer cached.
    #[error(
        "{code} the peer reports sequence {highest_received} received but had acknowledged \
         {acked}; fragments {highest_received}+1..={acked} are gone: close the session",
        code = ErrorCode::RESUME_FAILED
    )]
    ResumeBehindAck {
        /// The peer's report.
        highest_received: u64,
        /// What it had acknowledged.
        acked: u64,
    },
    /// A data frame carried sequence number 0 (sequences start at 1).
    #[error("{code} sequence number 0 is invalid (sequences start at 1)", code = ErrorCode::INVALID_VALUE)]
    SequenceZero,
    /// A sequence number skipped ahead: on an in-order transport this means
    /// fragments were lost.
    #[error(
        "{code} sequence {received} arrived but {expected} was expected: fragments were lost",
        code = ErrorCode::INVALID_VALUE
    )]
    SequenceGap {
        /// The next sequence expected.
        expected: u64,
        /// The sequence that arrived.
        received: u64,
    },
}

impl ResumeError {
    /// The wire code for this error: 6001 BUFFER_FULL, 6002 RESUME_FAILED,
    /// or a codec code for an out-of-domain value.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BufferFull { .. } => ErrorCode::BUFFER_FULL,
            Self::FragmentTooLarge { .. } | Self::SequenceExhausted => ErrorCode::LIMIT_EXCEEDED,
            Self::ResumeBeyondSent { .. } | Self::ResumeBehindAck { .. } => {
                ErrorCode::RESUME_FAILED
            }
            Self::AckBeyondSent { .. }
            | Self::AckWentBackwards { .. }
            | Self::SequenceZero
            | Self::SequenceGap { .. } => ErrorCode::INVALID_VALUE,
        }
    }
}

/// A refused push: the error and the fragment handed back.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct PushRefused<T> {
    /// Why it was refused.
    pub error: ResumeError,
    /// The fragment, untouched.
    pub item: T,
}

impl<T> PushRefused<T> {
    /// The wire code (see [`ResumeError::code`]).
    pub fn code(&self) -> ErrorCode {
        self.error.code()
    }
}
