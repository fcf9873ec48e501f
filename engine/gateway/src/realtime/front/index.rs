//! A shard's subscribers per stream: the fan-out list.

use std::collections::HashMap;

use dtp_transports::ConnId;

use crate::realtime::SubKey;

/// The subscribers of one stream on one shard: a dense list to walk per
/// event, and each entry's place in it for O(1) removal.
#[derive(Debug, Default)]
pub(super) struct Subscribers {
    list: Vec<(ConnId, SubKey)>,
    at: HashMap<(ConnId, SubKey), usize>,
}

impl Subscribers {
    pub(super) fn insert(&mut self, who: (ConnId, SubKey)) {
        if self.at.contains_key(&who) {
            return;
        }
        self.at.insert(who, self.list.len());
        self.list.push(who);
    }

    pub(super) fn remove(&mut self, who: (ConnId, SubKey)) {
        let Some(i) = self.at.remove(&who) else {
            return;
        };
        self.list.swap_remove(i);
        if let Some(moved) = self.list.get(i) {
            self.at.insert(*moved, i);
        }
    }

    pub(super) fn list(&self) -> &[(ConnId, SubKey)] {
        &self.list
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }
}

/// Every stream's subscribers on this shard, by stream index.
#[derive(Debug, Default)]
pub(super) struct Index {
    streams: Vec<Subscribers>,
}

impl Index {
    pub(super) fn stream(&mut self, stream: u32) -> &mut Subscribers {
        let i = stream as usize;
        if self.streams.len() <= i {
            self.streams.resize_with(i + 1, Subscribers::default);
        }
        &mut self.streams[i]
    }

    pub(super) fn remove(&mut self, stream: u32, who: (ConnId, SubKey)) {
        if let Some(s) = self.streams.get_mut(stream as usize) {
            s.remove(who);
        }
    }

    /// Subscriptions on this shard, all streams.
    pub(super) fn total(&self) -> usize {
        self.streams.iter().map(Subscribers::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removal_keeps_every_other_entry_findable() {
        let c = |n| ConnId::from_u64(n);
        let mut s = Subscribers::default();
        for n in 0..5 {
            s.insert((c(n), 0));
        }
        s.insert((c(1), 0)); // twice: once
        assert_eq!(s.len(), 5);
        s.remove((c(1), 0));
        s.remove((c(1), 0));
        s.remove((c(4), 0));
        let mut left: Vec<_> = s.list().iter().map(|(c, _)| c.as_u64()).collect();
        left.sort_unstable();
        assert_eq!(left, [0, 2, 3]);
        for n in [0, 2, 3] {
            s.remove((c(n), 0));
        }
        assert_eq!(s.len(), 0);
    }
}
