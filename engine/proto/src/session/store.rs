//! SPEC SES-2: where suspended DTP sessions are kept, behind a small trait.
//!
//! The trait is shaped for the stores DESIGN.md §3 names for scale-out: keyed
//! by Session_ID, every write a compare-and-swap on a revision (etcd's
//! `mod_revision`, JetStream's last-sequence check), so a writer holding a
//! stale revision — a node that lost the session to another — is refused
//! with [`StoreError::Conflict`] instead of overwriting. The trait is
//! synchronous: the in-memory default answers at once, and a remote store
//! is fronted by an adapter that the driver completes at the control
//! thread's edge.

use std::collections::HashMap;

use dtp_codec::{ErrorCode, SessionId};

use super::SessionSnapshot;

/// A record's revision: the fencing token of every write. Issued by the
/// store, strictly increasing per store; never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Revision(pub u64);

/// Why a store refused or failed an operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The record's revision is not the one the writer expected: another
    /// writer got there first (a stale writer is refused).
    #[error(
        "session {session_id}: stored revision {found:?} is not the expected {expected:?} (another writer owns it)"
    )]
    Conflict {
        /// The session.
        session_id: SessionId,
        /// The revision the writer expected (`None`: no record).
        expected: Option<Revision>,
        /// The revision found (`None`: no record).
        found: Option<Revision>,
    },
    /// The store holds its most records.
    #[error(
        "the session store is full ({max} sessions); raise its capacity or wait for suspended sessions to expire"
    )]
    Full {
        /// The ceiling.
        max: usize,
    },
    /// The store cannot be reached or failed.
    #[error("the session store is unavailable: {reason}")]
    Unavailable {
        /// What went wrong.
        reason: String,
    },
}

impl StoreError {
    /// The wire code a driver reports.
    pub fn code(&self) -> ErrorCode {
        match self {
            StoreError::Conflict { .. } => ErrorCode::RESUME_FAILED,
            StoreError::Full { .. } => ErrorCode::LIMIT_EXCEEDED,
            StoreError::Unavailable { .. } => ErrorCode::INTERNAL,
        }
    }
}

/// SPEC SES-2: a fallible, fenced key-value store of suspended sessions.
pub trait SessionStore {
    /// The record of `session_id` and its revision, if any.
    fn load(
        &self,
        session_id: SessionId,
    ) -> Result<Option<(SessionSnapshot, Revision)>, StoreError>;

    /// Writes `snapshot` under its session id if the stored revision is
    /// `expected` (`None`: no record may exist). Returns the new revision.
    fn save(
        &mut self,
        snapshot: &SessionSnapshot,
        expected: Option<Revision>,
    ) -> Result<Revision, StoreError>;

    /// Deletes the record if its revision is `expected`. Deleting a record
    /// that does not exist succeeds (closing is idempotent).
    fn delete(&mut self, session_id: SessionId, expected: Revision) -> Result<(), StoreError>;
}

/// SPEC SES-2: the default store, in memory, bounded in count.
#[derive(Clone, Debug)]
pub struct MemorySessionStore {
    records: HashMap<SessionId, (SessionSnapshot, Revision)>,
    last_revision: u64,
    max_records: usize,
}

impl MemorySessionStore {
    /// An empty store holding at most `max_records` sessions.
    pub fn new(max_records: usize) -> Self {
        Self {
            records: HashMap::new(),
            last_revision: 0,
            max_records,
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

impl Default for MemorySessionStore {
    fn default() -> Self {
        Self::new(1024)
    }
}

impl SessionStore for MemorySessionStore {
    fn load(
        &self,
        session_id: SessionId,
    ) -> Result<Option<(SessionSnapshot, Revision)>, StoreError> {
        Ok(self.records.get(&session_id).cloned())
    }

    fn save(
        &mut self,
        snapshot: &SessionSnapshot,
        expected: Option<Revision>,
    ) -> Result<Revision, StoreError> {
        let session_id = snapshot.session_id;
        let found = self.records.get(&session_id).map(|(_, r)| *r);
        if found != expected {
            return Err(StoreError::Conflict {
                session_id,
                expected,
                found,
            });
        }
        if found.is_none() && self.records.len() >= self.max_records {
            return Err(StoreError::Full {
                max: self.max_records,
            });
        }
        self.last_revision =
            self.last_revision
                .checked_add(1)
                .ok_or_else(|| StoreError::Unavailable {
                    reason: "revisions exhausted".into(),
                })?;
        let revision = Revision(self.last_revision);
        self.records
            .insert(session_id, (snapshot.clone(), revision));
        Ok(revision)
    }

    fn delete(&mut self, session_id: SessionId, expected: Revision) -> Result<(), StoreError> {
        match self.records.get(&session_id).map(|(_, r)| *r) {
            None => Ok(()),
            Some(found) if found == expected => {
                self.records.remove(&session_id);
                Ok(())
            }
            Some(found) => Err(StoreError::Conflict {
                session_id,
                expected: Some(expected),
                found: Some(found),
            }),
        }
    }
}
