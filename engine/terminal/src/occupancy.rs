//! SPEC TS-8, TS-9, TS-17: resources and who occupies them.
//!
//! A [`Resource`] keeps its configuration, its availability (TS-10) and its
//! occupancy: one `(session, access_mode)` entry per live session bound to
//! it — including a terminating session whose OS grant is not yet revoked,
//! since that session may still reach the resource. The TS-9 sharing rule
//! and the per-resource read limit are decided here; per-terminal and
//! per-Fay limits need every session and live in [`crate::Terminal`].

use std::collections::BTreeMap;

use dtp_codec::{AccessMode, ErrorCode, SessionId};

use serde::Serialize;

use crate::config::ResourceConfig;
use crate::os_access::OsOperation;
use crate::time::UnixMs;

/// SPEC TS-9: whether a mode excludes every other session.
pub fn is_exclusive(mode: AccessMode) -> bool {
    !matches!(mode, AccessMode::Read)
}

/// Why a resource cannot take one more session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OccupancyError {
    /// SPEC TS-9: the modes conflict (E_RESOURCE_BUSY).
    #[error("the resource is held in a conflicting mode (SPEC TS-9)")]
    Busy,
    /// SPEC TS-17: the resource already has its maximum of read sessions
    /// (E_SESSION_LIMIT_EXCEEDED).
    #[error("the resource already has {0} read sessions (SPEC TS-17)")]
    ReadLimit(usize),
    /// SPEC TS-4: an OS operation on the resource had an unknown outcome;
    /// it takes no new session until reconciled (E_OS_INTEGRATION_FAILED).
    #[error(
        "the resource awaits reconciliation of an OS operation with an unknown outcome (SPEC TS-4)"
    )]
    Reconciling,
}

impl OccupancyError {
    /// The wire code.
    pub fn code(self) -> ErrorCode {
        match self {
            Self::Busy => ErrorCode::E_RESOURCE_BUSY,
            Self::ReadLimit(_) => ErrorCode::E_SESSION_LIMIT_EXCEEDED,
            Self::Reconciling => ErrorCode::E_OS_INTEGRATION_FAILED,
        }
    }
}

/// SPEC TS-9 and TS-17's per-resource limit: may a session in `requested`
/// join sessions in `held` modes?
///
/// - no session → any mode;
/// - only reads → another read (below `read_limit`), nothing exclusive;
/// - an exclusive session → nothing.
pub fn admit(
    held: impl IntoIterator<Item = AccessMode>,
    requested: AccessMode,
    read_limit: usize,
) -> Result<(), OccupancyError> {
    let mut reads = 0usize;
    let mut any = false;
    for mode in held {
        if is_exclusive(mode) {
            return Err(OccupancyError::Busy);
        }
        any = true;
        reads += 1;
    }
    if any && is_exclusive(requested) {
        return Err(OccupancyError::Busy);
    }
    if !is_exclusive(requested) && reads >= read_limit {
        return Err(OccupancyError::ReadLimit(read_limit));
    }
    Ok(())
}

/// SPEC TS-4: an OS operation on a resource whose outcome is unknown (a
/// command killed at its timeout). While a resource has one, it admits no
/// new session; a successful revoke of the same session's grant, or an
/// operator ([`crate::Terminal::clear_reconciliation`]), clears it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reconciliation {
    /// The session whose grant the operation was for.
    pub session_id: SessionId,
    /// Its holder.
    pub holder: String,
    /// Grant or revoke.
    pub operation: OsOperation,
    /// What the OS access control said.
    pub message: String,
    /// Since when, Unix ms.
    pub since: UnixMs,
}

/// SPEC TS-8, TS-10: one resource of the terminal.
#[derive(Clone, Debug)]
pub struct Resource {
    config: ResourceConfig,
    available: bool,
    occupants: BTreeMap<SessionId, AccessMode>,
    /// SPEC TS-4: unknown outcomes, by session (at most one per session).
    reconcile: BTreeMap<SessionId, Reconciliation>,
}

impl Resource {
    /// From its configuration (available as configured, unoccupied).
    pub fn new(config: ResourceConfig) -> Self {
        Resource {
            available: config.available,
            config,
            occupants: BTreeMap::new(),
            reconcile: BTreeMap::new(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &ResourceConfig {
        &self.config
    }

    /// Whether it is available (SPEC TS-10).
    pub fn is_available(&self) -> bool {
        self.available
    }

    /// Marks it available or not; the caller ends bound sessions (TS-10).
    pub fn set_available(&mut self, available: bool) {
        self.available = available;
    }

    /// SPEC TS-8: the `(session, access_mode)` entries.
    pub fn occupants(&self) -> &BTreeMap<SessionId, AccessMode> {
        &self.occupants
    }

    /// SPEC TS-9, TS-4: whether a session in `mode` may join now.
    pub fn admit(&self, mode: AccessMode, read_limit: usize) -> Result<(), OccupancyError> {
        if !self.reconcile.is_empty() {
            return Err(OccupancyError::Reconciling);
        }
        admit(self.occupants.values().copied(), mode, read_limit)
    }

    /// SPEC TS-4: the unknown outcomes awaiting reconciliation.
    pub fn reconciliation(&self) -> impl Iterator<Item = &Reconciliation> {
        self.reconcile.values()
    }

    /// SPEC TS-4: records an unknown outcome (the latest per session).
    pub fn mark_for_reconciliation(&mut self, entry: Reconciliation) {
        self.reconcile.insert(entry.session_id, entry);
    }

    /// SPEC TS-4: a revoke of `session`'s grant succeeded; its mark, if
    /// any, is cleared and returned.
    pub fn clear_reconciliation(&mut self, session: &SessionId) -> Option<Reconciliation> {
        self.reconcile.remove(session)
    }

    /// SPEC TS-4: an operator cleared every mark; they are returned.
    pub fn clear_all_reconciliation(&mut self) -> Vec<Reconciliation> {
        std::mem::take(&mut self.reconcile).into_values().collect()
    }

    /// Records a session after [`Resource::admit`] said yes.
    pub fn occupy(&mut self, session: SessionId, mode: AccessMode) {
        self.occupants.insert(session, mode);
    }

    /// Removes a session's entry; `true` if it was there.
    pub fn vacate(&mut self, session: &SessionId) -> bool {
        self.occupants.remove(session).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use AccessMode::{Configure, Execute, Read, Write};

    const MODES: [AccessMode; 4] = [Read, Write, Execute, Configure];

    #[test]
    fn ts9_matrix() {
        // Held: nothing → anything goes.
        for m in MODES {
            assert_eq!(admit([], m, 32), Ok(()), "{m:?} on an idle resource");
        }
        // Held: one or more reads → read yes, exclusive no.
        for held in [vec![Read], vec![Read, Read, Read]] {
            for m in MODES {
                let want = if m == Read {
                    Ok(())
                } else {
                    Err(OccupancyError::Busy)
                };
                assert_eq!(admit(held.clone(), m, 32), want, "{m:?} after {held:?}");
            }
        }
        // Held: one exclusive → nothing.
        for h in [Write, Execute, Configure] {
            for m in MODES {
                assert_eq!(
                    admit([h], m, 32),
                    Err(OccupancyError::Busy),
                    "{m:?} after {h:?}"
                );
            }
        }
    }

    #[test]
    fn read_limit_is_per_resource_and_exact() {
        let held = vec![Read; 31];
        assert_eq!(admit(held.clone(), Read, 32), Ok(()));
        let held = vec![Read; 32];
        assert_eq!(admit(held, Read, 32), Err(OccupancyError::ReadLimit(32)));
        assert_eq!(admit([], Read, 1), Ok(()));
        assert_eq!(admit([Read], Read, 1), Err(OccupancyError::ReadLimit(1)));
    }

    #[test]
    fn errors_map_to_their_codes() {
        assert_eq!(OccupancyError::Busy.code(), ErrorCode::E_RESOURCE_BUSY);
        assert_eq!(
            OccupancyError::ReadLimit(1).code(),
            ErrorCode::E_SESSION_LIMIT_EXCEEDED
        );
    }

    #[test]
    fn resource_tracks_its_occupants() {
        let mut r = Resource::new(ResourceConfig::new("cam"));
        let (a, b) = (SessionId::from_u128(1), SessionId::from_u128(2));
        assert!(r.is_available());
        r.occupy(a, Read);
        assert_eq!(r.admit(Read, 32), Ok(()));
        assert_eq!(r.admit(Write, 32), Err(OccupancyError::Busy));
        r.occupy(b, Read);
        assert!(r.vacate(&a));
        assert!(!r.vacate(&a));
        assert_eq!(r.occupants().len(), 1);
        r.set_available(false);
        assert!(!r.is_available());
    }
}
