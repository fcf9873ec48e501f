//! SPEC TS-4, TS-6, TS-12, HO-4: the OS access-control interface (the seeds'
//! §1.3.2) through which a session's holder is allowed to reach its
//! resource, and the implementations shipped with the terminal.
//!
//! Contract of every [`OsAccess`]: each call is one transaction — `Ok` means
//! the OS now reflects the change, `Err` means it changed nothing. The
//! terminal relies on this to keep a session transition and its OS operation
//! all-or-nothing (TS-4): it commits the transition only after `Ok`.

mod command;
mod scripted;

pub use command::{CommandAccessConfig, CommandConfigError, CommandTemplates};
pub use scripted::{AccessCall, ScriptedAccess};

use dtp_codec::{AccessMode, SessionId};

/// SPEC TS-6: what is granted or revoked — a holder's access to one resource
/// in one mode, for one session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessGrant {
    /// The session the access belongs to.
    pub session_id: SessionId,
    /// The resource.
    pub resource_id: String,
    /// The mode.
    pub access_mode: AccessMode,
    /// The holder: a Fay id, or `human:<terminal_id>` for the human user's
    /// OS process (SPEC HO-9).
    pub holder: String,
}

impl AccessGrant {
    fn key(&self) -> (&SessionId, &str, u8, &str) {
        (
            &self.session_id,
            &self.resource_id,
            self.access_mode as u8,
            &self.holder,
        )
    }
}

/// Ordered by session, resource, mode, holder (so sets of grants list
/// deterministically).
impl Ord for AccessGrant {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for AccessGrant {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// SPEC TS-7: an OS access-control operation failed (the terminal reports
/// E_OS_INTEGRATION_FAILED, or a handover's release/acquire failure).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("OS access control failed: {0}")]
pub struct OsError(pub String);

/// SPEC TS-4: the OS access-control interface, transactional per call.
///
/// Calls are synchronous: the terminal runs each handover step (HO-4) and
/// each creation (TS-6) to its end within one input, so an implementation
/// that talks to the OS slowly stalls the control thread for that long;
/// keep it fast or bound it (see [`CommandTemplates::timeout`]).
pub trait OsAccess {
    /// Lets `grant.holder` reach `grant.resource_id` in `grant.access_mode`.
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError>;

    /// Withdraws what [`OsAccess::grant`] gave for the same `grant`.
    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError>;
}

/// An [`OsAccess`] that always succeeds and does nothing: for terminals whose
/// resources enforce access themselves.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopAccess;

impl OsAccess for NoopAccess {
    fn grant(&mut self, _: &AccessGrant) -> Result<(), OsError> {
        Ok(())
    }

    fn revoke(&mut self, _: &AccessGrant) -> Result<(), OsError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noop_always_succeeds() {
        let g = AccessGrant {
            session_id: SessionId::nil(),
            resource_id: "r".into(),
            access_mode: AccessMode::Read,
            holder: "f".into(),
        };
        assert_eq!(NoopAccess.grant(&g), Ok(()));
        assert_eq!(NoopAccess.revoke(&g), Ok(()));
    }
}
