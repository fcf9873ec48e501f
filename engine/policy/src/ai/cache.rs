//! SPEC HO-3b: the model decision cache ("cache recent decisions to avoid
//! high-frequency flapping; validity ≤ 5 s"). Time is passed in.

use std::collections::HashMap;

use dtp_codec::SessionId;

use crate::input::{PolicyInput, Verdict};

/// SPEC HO-3b: the longest a cached decision stays valid.
pub const CACHE_TTL_MS_MAX: u64 = 5000;

/// SPEC HO-3b: what a cached decision is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The session holding control.
    pub source_session: SessionId,
    /// The would-be holder.
    pub target_fay_id: String,
    /// The resource.
    pub resource_id: String,
}

impl CacheKey {
    /// The key of a handover request.
    pub fn of(input: &PolicyInput) -> Self {
        Self {
            source_session: input.source.session_id,
            target_fay_id: input.target_fay_id.clone(),
            resource_id: input.resource.resource_id.clone(),
        }
    }
}

/// SPEC HO-3b: model decisions by (source session, target Fay, resource),
/// each valid for `ttl_ms` after it was stored, bounded in entries.
#[derive(Clone, Debug)]
pub struct DecisionCache {
    ttl_ms: u64,
    capacity: usize,
    entries: HashMap<CacheKey, (Verdict, u64)>,
}

impl DecisionCache {
    /// A cache whose entries live `ttl_ms` (clamped to
    /// [`CACHE_TTL_MS_MAX`]) and which holds at most `capacity` (≥ 1) entries.
    pub fn new(ttl_ms: u64, capacity: usize) -> Self {
        Self {
            ttl_ms: ttl_ms.min(CACHE_TTL_MS_MAX),
            capacity: capacity.max(1),
            entries: HashMap::new(),
        }
    }

    /// The time to live in force.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// The cached decision for `key`, if stored less than `ttl_ms` ago. An
    /// entry stored "in the future" (the clock went back) is not trusted.
    pub fn get(&self, key: &CacheKey, now_ms: u64) -> Option<&Verdict> {
        let (verdict, at) = self.entries.get(key)?;
        self.fresh(*at, now_ms).then_some(verdict)
    }

    /// Stores `verdict` for `key` at `now_ms`. When full, expired entries go
    /// first, then the oldest.
    pub fn insert(&mut self, key: CacheKey, verdict: Verdict, now_ms: u64) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.purge(now_ms);
            if self.entries.len() >= self.capacity {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
            }
        }
        self.entries.insert(key, (verdict, now_ms));
    }

    /// Drops every entry that is no longer fresh at `now_ms`.
    pub fn purge(&mut self, now_ms: u64) {
        let ttl = self.ttl_ms;
        self.entries
            .retain(|_, (_, at)| now_ms >= *at && now_ms - *at < ttl);
    }

    /// Entries held (fresh or not yet purged).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn fresh(&self, at: u64, now_ms: u64) -> bool {
        now_ms >= at && now_ms - at < self.ttl_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::sample;

    #[test]
    fn entries_live_less_than_the_ttl() {
        let input = sample::input();
        let key = CacheKey::of(&input);
        let mut cache = DecisionCache::new(5000, 16);
        assert_eq!(cache.get(&key, 1000), None);
        cache.insert(key.clone(), Verdict::Allow, 1000);
        assert_eq!(cache.get(&key, 1000), Some(&Verdict::Allow));
        assert_eq!(cache.get(&key, 5999), Some(&Verdict::Allow));
        assert_eq!(cache.get(&key, 6000), None);
        // The clock went back: not trusted.
        assert_eq!(cache.get(&key, 999), None);
    }

    #[test]
    fn ttl_is_clamped_to_five_seconds() {
        let cache = DecisionCache::new(60_000, 16);
        assert_eq!(cache.ttl_ms(), CACHE_TTL_MS_MAX);
        assert_eq!(DecisionCache::new(2000, 16).ttl_ms(), 2000);
    }

    #[test]
    fn key_separates_session_target_and_resource() {
        let input = sample::input();
        let mut cache = DecisionCache::new(5000, 16);
        cache.insert(CacheKey::of(&input), Verdict::Allow, 0);
        let mut other = input.clone();
        other.target_fay_id = "fay-c".into();
        assert_eq!(cache.get(&CacheKey::of(&other), 1), None);
        let mut other = input.clone();
        other.resource.resource_id = "cam-2".into();
        assert_eq!(cache.get(&CacheKey::of(&other), 1), None);
        let mut other = input;
        other.source.session_id = SessionId::from_u128(7);
        assert_eq!(cache.get(&CacheKey::of(&other), 1), None);
    }

    #[test]
    fn full_cache_drops_expired_then_oldest() {
        let key = |n: u128| CacheKey {
            source_session: SessionId::from_u128(n),
            target_fay_id: "t".into(),
            resource_id: "r".into(),
        };
        let mut cache = DecisionCache::new(5000, 2);
        cache.insert(key(1), Verdict::Allow, 0);
        cache.insert(key(2), Verdict::Allow, 100);
        cache.insert(key(3), Verdict::Allow, 200);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&key(1), 300), None, "oldest evicted");
        assert!(cache.get(&key(2), 300).is_some());
        cache.insert(key(4), Verdict::RequireHuman, 5150);
        // key(2) expired at 5100 and goes first; key(3) stays.
        assert_eq!(cache.get(&key(2), 5150), None);
        assert!(cache.get(&key(3), 5150).is_some());
        cache.purge(20_000);
        assert!(cache.is_empty());
    }
}
