//! The terminal's connection keys: one [`ConnKey`] per connection of a
//! shard, for as long as it is up.
//!
//! Connection ids are per shard (each shard's driver numbers its own
//! slots), so two shards can hold the same `ConnId::as_u64()` at once. The
//! plane therefore numbers connections itself and remembers each key's
//! shard and id, for routing the terminal's answers back. Bounded by the
//! connections that are up: a key is forgotten at `Down`.

use std::collections::HashMap;

use dtp_terminal::ConnKey;
use dtp_transports::ConnId;

/// The map between (shard, connection) and the terminal's keys.
#[derive(Debug, Default)]
pub(crate) struct Conns {
    keys: HashMap<(usize, ConnId), ConnKey>,
    routes: HashMap<ConnKey, (usize, ConnId)>,
    /// The last key given out (keys start at 1 and are never reused).
    last: u64,
}

impl Conns {
    /// The key of `conn` on `shard`, made on first sight.
    pub(crate) fn key(&mut self, shard: usize, conn: ConnId) -> ConnKey {
        if let Some(key) = self.keys.get(&(shard, conn)) {
            return *key;
        }
        self.last += 1;
        let key = ConnKey(self.last);
        self.keys.insert((shard, conn), key);
        self.routes.insert(key, (shard, conn));
        key
    }

    /// The key of `conn` on `shard`, if it has one.
    pub(crate) fn find(&self, shard: usize, conn: ConnId) -> Option<ConnKey> {
        self.keys.get(&(shard, conn)).copied()
    }

    /// Where `key`'s connection lives, while it is up.
    pub(crate) fn route(&self, key: ConnKey) -> Option<(usize, ConnId)> {
        self.routes.get(&key).copied()
    }

    /// Forgets a connection that went down.
    pub(crate) fn forget(&mut self, key: ConnKey) {
        if let Some(k) = self.routes.remove(&key) {
            self.keys.remove(&k);
        }
    }

    /// Connections known.
    pub(crate) fn len(&self) -> usize {
        self.routes.len()
    }
}
