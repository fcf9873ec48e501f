//! The per-subscription dedupe window (SPEC RT-5, RT-13).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Bounds of a subscription's dedupe window (SPEC RT-13: 2,048 ids or
/// 10 minutes, whichever comes first; a deployment may lower, never raise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DedupeConfig {
    /// Most event ids remembered (default and ceiling 2,048).
    pub max_ids: usize,
    /// Longest an id is remembered after its commit (default and ceiling
    /// 10 minutes).
    pub max_age: Duration,
}

impl DedupeConfig {
    /// The RT-13 ceiling, also the default.
    pub const CEILING: Self = Self {
        max_ids: 2048,
        max_age: Duration::from_secs(600),
    };

    /// Refuses zero bounds and bounds above [`CEILING`](Self::CEILING).
    pub fn validate(&self) -> Result<(), DedupeConfigError> {
        if self.max_ids == 0 || self.max_age.is_zero() {
            return Err(DedupeConfigError::Zero);
        }
        if self.max_ids > Self::CEILING.max_ids || self.max_age > Self::CEILING.max_age {
            return Err(DedupeConfigError::AboveCeiling);
        }
        Ok(())
    }
}

impl Default for DedupeConfig {
    fn default() -> Self {
        Self::CEILING
    }
}

/// A refused [`DedupeConfig`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DedupeConfigError {
    /// A bound is zero.
    #[error("dedupe window bounds must be positive")]
    Zero,
    /// A bound is above the SPEC RT-13 ceiling (2,048 ids, 10 minutes).
    #[error("dedupe window above the RT-13 ceiling (2048 ids, 10 min)")]
    AboveCeiling,
}

/// Committed events of one epoch: id → (sequence, digest) and sequence → id,
/// oldest first. Only committed events enter, so sequences are increasing
/// and ids unique.
pub(crate) struct DedupeWindow {
    config: DedupeConfig,
    order: VecDeque<(u64, Instant)>,
    by_seq: HashMap<u64, (String, u64)>,
    by_id: HashMap<String, u64>,
}

impl DedupeWindow {
    pub(crate) fn new(config: DedupeConfig) -> Self {
        Self {
            config,
            order: VecDeque::new(),
            by_seq: HashMap::new(),
            by_id: HashMap::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// The (sequence, digest) remembered for `id`.
    pub(crate) fn by_id(&self, id: &str) -> Option<(u64, u64)> {
        let seq = *self.by_id.get(id)?;
        self.by_seq.get(&seq).map(|(_, digest)| (seq, *digest))
    }

    /// The id remembered for `sequence`.
    pub(crate) fn id_at(&self, sequence: u64) -> Option<&str> {
        self.by_seq.get(&sequence).map(|(id, _)| id.as_str())
    }

    /// Forgets ids older than `max_age` at `now`; returns how many.
    pub(crate) fn expire(&mut self, now: Instant) -> u64 {
        let mut n = 0;
        while let Some(&(_, at)) = self.order.front() {
            if now.saturating_duration_since(at) <= self.config.max_age {
                break;
            }
            self.pop_front();
            n += 1;
        }
        n
    }

    /// Remembers a committed event, forgetting the oldest if full; returns
    /// how many were forgotten for room.
    pub(crate) fn insert(&mut self, id: String, sequence: u64, digest: u64, now: Instant) -> u64 {
        let mut evicted = 0;
        while self.order.len() >= self.config.max_ids {
            self.pop_front();
            evicted += 1;
        }
        self.order.push_back((sequence, now));
        self.by_id.insert(id.clone(), sequence);
        self.by_seq.insert(sequence, (id, digest));
        evicted
    }

    pub(crate) fn clear(&mut self) {
        self.order.clear();
        self.by_seq.clear();
        self.by_id.clear();
    }

    fn pop_front(&mut self) {
        if let Some((seq, _)) = self.order.pop_front()
            && let Some((id, _)) = self.by_seq.remove(&seq)
        {
            self.by_id.remove(&id);
        }
    }
}
