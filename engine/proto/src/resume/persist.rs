//! SPEC SES-2, SES-3, RES-1 … RES-4: the Resume Manager's two halves as
//! bytes, with the cached fragments (the store keeps what a restart would
//! otherwise lose: RES-2's plaintext).
//!
//! [`ResumeSender`]: next sequence (u64), paused flag, pending-`Writable`
//! flag, count of cached fragments (≤ `max_fragments`), then each: its
//! length as given on push (u64; ≤ `max_bytes`, and all together ≤
//! `max_bytes`) and the item, written by the caller. The acknowledged
//! position is not written: the cache holds exactly `acked + 1 ..
//! next_sequence`, so it follows from the count.
//!
//! [`ResumeReceiver`]: highest received (u64), highest acknowledged (u64,
//! ≤ highest). The instant of the first unacknowledged fragment is not
//! written (an `Instant` does not outlive the process): a receiver with
//! something unacknowledged is restored with it at `now`, so its delayed
//! ack is due one delay after the restore (a resume acknowledges everything
//! with its RESUME frame anyway).
//!
//! The configurations are not written either: a restored half takes the
//! restoring endpoint's, and what it holds must fit them.

use std::collections::VecDeque;
use std::time::Instant;

use super::receiver::{AckPolicy, ResumeReceiver};
use super::sender::{Cached, ResumeSender, SenderConfig};
use crate::persist::{PersistError, Reader, Writer};

impl<T> ResumeSender<T> {
    /// SPEC SES-2, RES-2: appends the sender to `w`; `item` writes each
    /// cached fragment (layout in the module docs).
    pub fn persist(&self, w: &mut Writer, mut item: impl FnMut(&T, &mut Writer)) {
        w.u64(self.next_sequence);
        w.flag(self.paused);
        w.flag(self.writable_event);
        w.count(self.cache.len());
        for cached in &self.cache {
            w.u64(u64::try_from(cached.len).unwrap_or(u64::MAX));
            item(&cached.item, w);
        }
    }

    /// SPEC SES-3, RES-2, RES-4: reads a sender written by
    /// [`ResumeSender::persist`] under `config`: the cache must fit its
    /// ceilings. `item` reads one cached fragment, given its sequence and
    /// the length it was pushed with, and may refuse it.
    pub fn restore_persisted(
        r: &mut Reader<'_>,
        config: SenderConfig,
        mut item: impl FnMut(&mut Reader<'_>, u64, usize) -> Result<T, PersistError>,
    ) -> Result<Self, PersistError> {
        let next_sequence = r.u64("next sequence")?;
        let paused = r.flag("sender paused")?;
        let writable_event = r.flag("sender writable event")?;
        if next_sequence == 0 {
            return Err(PersistError::Inconsistent("the next sequence is 0"));
        }
        if paused && writable_event {
            return Err(PersistError::Inconsistent(
                "a paused sender cannot have a Writable event pending",
            ));
        }
        let n = r.count("cached fragments", config.max_fragments, 8)?;
        let last_sent = next_sequence - 1;
        let acked = u64::try_from(n)
            .ok()
            .and_then(|n| last_sent.checked_sub(n))
            .ok_or(PersistError::Inconsistent(
                "more fragments cached than sequences sent",
            ))?;
        let mut cache = VecDeque::with_capacity(n);
        let mut cached_bytes = 0usize;
        for sequence in (acked + 1)..next_sequence {
            let len = r.u64("cached fragment length")?;
            let over = PersistError::OverCeiling {
                what: "resume cache bytes",
                found: len,
                max: u64::try_from(config.max_bytes).unwrap_or(u64::MAX),
            };
            let len = usize::try_from(len).map_err(|_| over.clone())?;
            cached_bytes = cached_bytes
                .checked_add(len)
                .filter(|total| *total <= config.max_bytes)
                .ok_or(over)?;
            let item = item(r, sequence, len)?;
            cache.push_back(Cached { len, item });
        }
        Ok(Self {
            config,
            cache,
            cached_bytes,
            next_sequence,
            acked,
            paused,
            writable_event,
        })
    }
}

impl ResumeReceiver {
    /// SPEC SES-2, RES-3: appends the receiver to `w` (layout in the module
    /// docs).
    pub fn persist(&self, w: &mut Writer) {
        w.u64(self.highest);
        w.u64(self.acked);
    }

    /// SPEC SES-3, RES-3: reads a receiver written by
    /// [`ResumeReceiver::persist`], with the restoring endpoint's `policy`;
    /// an ack still due is due again from `now`.
    pub fn restore_persisted(
        r: &mut Reader<'_>,
        policy: AckPolicy,
        now: Instant,
    ) -> Result<Self, PersistError> {
        let highest = r.u64("highest received")?;
        let acked = r.u64("highest acknowledged")?;
        if acked > highest {
            return Err(PersistError::Inconsistent(
                "more acknowledged than received",
            ));
        }
        Ok(Self {
            policy,
            highest,
            acked,
            first_unacked_at: (highest > acked).then_some(now),
        })
    }
}
