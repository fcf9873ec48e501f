//! Ledger counters for metrics (SPEC RT-15).

/// A ledger's counters (SPEC RT-15): retention occupancy, evictions by cause,
/// appends and resume outcomes. Counters are totals since the ledger was
/// made; they survive epoch changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerStats {
    /// Events retained now.
    pub retained_events: usize,
    /// Encoded bytes retained now.
    pub retained_bytes: usize,
    /// Events appended.
    pub appends: u64,
    /// Events evicted because `max_events` was reached.
    pub evicted_by_count: u64,
    /// Events evicted because `max_bytes` was reached.
    pub evicted_by_bytes: u64,
    /// Events evicted because they passed `max_age`.
    pub evicted_by_age: u64,
    /// Events dropped by an operator's [`cut`](super::Ledger::cut).
    pub evicted_by_cut: u64,
    /// Events dropped by a [`new_epoch`](super::Ledger::new_epoch).
    pub evicted_by_epoch: u64,
    /// Resume attempts by outcome.
    pub resumes: ResumeStats,
}

/// Resume attempts by outcome (see [`ResumeRefusal`](super::ResumeRefusal)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeStats {
    /// Resumed with proven continuity.
    pub resumed: u64,
    /// Refused: malformed cursor.
    pub malformed: u64,
    /// Refused: tag mismatch.
    pub tampered: u64,
    /// Refused: earlier epoch.
    pub epoch_changed: u64,
    /// Refused: events after the cursor evicted.
    pub expired: u64,
    /// Refused: beyond the newest sequence.
    pub future: u64,
    /// Refused: the stream is not `CURSOR`.
    pub not_resumable: u64,
}
