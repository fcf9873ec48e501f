//! The receiving side: classifying arriving sequence numbers, acknowledging
//! them (RES-2) and reporting the highest received on reconnect (RES-3).

use std::time::{Duration, Instant};

use dtp_codec::{AckFrame, ResumeFrame, SessionId};

use super::ResumeError;

/// When the receiver acknowledges: after `every` new fragments, or `delay`
/// after the first unacknowledged one, whichever comes first. Acks are
/// cumulative, so a late or lost ack is covered by the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPolicy {
    /// Acknowledge after this many new fragments (default 32; 0 acts as 1).
    pub every: u64,
    /// Acknowledge at most this long after the first unacknowledged
    /// fragment arrived (default 10 ms).
    pub delay: Duration,
}

impl Default for AckPolicy {
    fn default() -> Self {
        Self {
            every: 32,
            delay: Duration::from_millis(10),
        }
    }
}

/// How an arriving sequence number is to be treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The next sequence: deliver the fragment.
    New,
    /// Already received (resent after a break): drop it.
    Duplicate,
}

/// SPEC RES-2, RES-3: the receiving side of one direction of a DTP session.
#[derive(Clone, Debug)]
pub struct ResumeReceiver {
    // `pub(super)`: read and rebuilt by `resume::persist`.
    pub(super) policy: AckPolicy,
    pub(super) highest: u64,
    pub(super) acked: u64,
    pub(super) first_unacked_at: Option<Instant>,
}

impl ResumeReceiver {
    /// A receiver for a new session (nothing received).
    pub fn new(policy: AckPolicy) -> Self {
        Self::restore(policy, 0)
    }

    /// SPEC SES-2: a receiver restored from a session store that saved
    /// [`ResumeReceiver::highest_received`].
    pub fn restore(policy: AckPolicy, highest_received: u64) -> Self {
        Self {
            policy,
            highest: highest_received,
            acked: highest_received,
            first_unacked_at: None,
        }
    }

    /// Classifies the sequence number of an arriving data frame:
    /// [`Arrival::New`] (deliver; it becomes the highest received),
    /// [`Arrival::Duplicate`] (drop), or an error: 0, or a gap — the
    /// transport is in-order, so a gap means loss. An error changes nothing.
    pub fn handle_sequence(&mut self, sequence: u64, now: Instant) -> Result<Arrival, ResumeError> {
        if sequence == 0 {
            return Err(ResumeError::SequenceZero);
        }
        if sequence <= self.highest {
            return Ok(Arrival::Duplicate);
        }
        let expected = self.highest.saturating_add(1);
        if sequence != expected {
            return Err(ResumeError::SequenceGap {
                expected,
                received: sequence,
            });
        }
        self.highest = sequence;
        if self.first_unacked_at.is_none() {
            self.first_unacked_at = Some(now);
        }
        Ok(Arrival::New)
    }

    /// The cumulative ack to send now, if the policy says so (see
    /// [`AckPolicy`]); `None` when nothing is due.
    pub fn poll_ack(&mut self, now: Instant) -> Option<AckFrame> {
        let first = self.first_unacked_at?;
        let due = self.highest - self.acked >= self.policy.every.max(1)
            || now.saturating_duration_since(first) >= self.policy.delay;
        if !due {
            return None;
        }
        self.acked = self.highest;
        self.first_unacked_at = None;
        Some(AckFrame {
            cumulative: self.highest,
        })
    }

    /// When [`ResumeReceiver::poll_ack`] must be called again for the
    /// delayed ack, if one is pending.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.first_unacked_at
            .and_then(|first| first.checked_add(self.policy.delay))
    }

    /// SPEC RES-3: the RESUME frame to send on reconnect. It acknowledges
    /// everything received, so no separate ack is pending after it.
    pub fn resume_frame(&mut self, session_id: SessionId) -> ResumeFrame {
        self.acked = self.highest;
        self.first_unacked_at = None;
        ResumeFrame {
            session_id,
            highest_received: self.highest,
        }
    }

    /// SPEC RES-3, SES-2: the highest sequence such that it and all below it
    /// arrived (0: none).
    pub fn highest_received(&self) -> u64 {
        self.highest
    }

    /// The highest sequence acknowledged so far (by an ack or a RESUME).
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The ack policy.
    pub fn policy(&self) -> &AckPolicy {
        &self.policy
    }
}
