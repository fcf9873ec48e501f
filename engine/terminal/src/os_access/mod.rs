//! SPEC TS-4, TS-6, TS-12, HO-4: the OS access-control interface (the seeds'
//! §1.3.2) through which a session's holder is allowed to reach its
//! resource, and the implementations shipped with the terminal.
//!
//! Contract of every [`OsAccess`]: each call is one transaction — `Ok` means
//! the OS now reflects the change, [`OsError::Failed`] means it changed
//! nothing, [`OsError::Indeterminate`] means nobody knows (a command killed
//! at its timeout). The terminal relies on this to keep a session
//! transition and its OS operation all-or-nothing (TS-4): it commits the
//! transition only after `Ok`, rolls it back after `Failed`, and after
//! `Indeterminate` rolls it back *and* marks the resource for
//! reconciliation (see [`crate::Reconciliation`]).

mod command;
mod scripted;

pub use command::{CommandAccessConfig, CommandConfigError, CommandTemplates};
pub use scripted::{AccessCall, ScriptedAccess};

use std::sync::Arc;

use dtp_codec::{AccessMode, SessionId};

/// SPEC TS-6: what is granted or revoked — a holder's access to one resource
/// in one mode, for one session.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessGrant {
    /// The session the access belongs to.
    pub session_id: SessionId,
    /// The resource (shared with the session's record: asking for a grant
    /// or a revoke copies no id).
    pub resource_id: Arc<str>,
    /// The mode.
    pub access_mode: AccessMode,
    /// The holder: a Fay id, or `human:<terminal_id>` for the human user's
    /// OS process (SPEC HO-9).
    pub holder: Arc<str>,
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

/// SPEC TS-4, TS-7: an OS access-control operation did not succeed (the
/// terminal reports E_OS_INTEGRATION_FAILED, or a handover's
/// release/acquire failure).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OsError {
    /// It failed and changed nothing (the [`OsAccess`] contract's `Err`):
    /// the transition is simply rolled back.
    #[error("OS access control failed: {0}")]
    Failed(String),
    /// SPEC TS-4: it may have changed something — a command killed at its
    /// timeout proves nothing either way. The step still fails, and the
    /// resource is marked for reconciliation (no new grants) until a later
    /// successful revoke of the same grant, or an operator, clears it.
    #[error("OS access control outcome unknown: {0}")]
    Indeterminate(String),
    /// SPEC TS-9 across gateways: another gateway of the cluster holds the
    /// resource in a conflicting mode; nothing changed (E_RESOURCE_BUSY).
    #[error("the resource is held on another gateway: {0}")]
    Busy(String),
}

impl OsError {
    /// Whether the operation may have changed the OS (SPEC TS-4).
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, OsError::Indeterminate(_))
    }
}

/// SPEC TS-4: which OS operation the terminal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OsOperation {
    /// [`OsAccess::grant`].
    Grant,
    /// [`OsAccess::revoke`].
    Revoke,
    /// [`OsAccess::release`]: a handover source's revoke (SPEC HO-4 T1).
    Release,
}

impl OsOperation {
    /// Runs this operation on `access` (a driver answering a deferred
    /// [`crate::Output::OsAccess`] request, or the terminal itself); `to`
    /// is a release's handover target.
    pub fn run<A: OsAccess + ?Sized>(
        self,
        access: &mut A,
        grant: &AccessGrant,
        to: Option<&str>,
    ) -> Result<(), OsError> {
        match self {
            OsOperation::Grant => access.grant(grant),
            OsOperation::Revoke => access.revoke(grant),
            OsOperation::Release => access.release(grant, to),
        }
    }
}

/// SPEC TS-4: names one outstanding OS operation of a terminal, from its
/// [`crate::Output::OsAccess`] request to [`crate::Terminal::os_access_done`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct OsOpId(pub u64);

/// SPEC TS-4: the OS access-control interface, transactional per call.
///
/// Two ways to run it:
/// - **inline** (`deferred()` is false, the default): the terminal calls
///   [`OsAccess::grant`] / [`OsAccess::revoke`] itself, inside the input
///   that needs it. Only for implementations that answer at once
///   ([`NoopAccess`], the [`ScriptedAccess`] test double).
/// - **deferred** (`deferred()` is true): the terminal never calls it; it
///   emits [`crate::Output::OsAccess`] with an [`OsOpId`] and goes on with
///   other inputs; the driver runs the operation off the control thread
///   and answers with [`crate::Terminal::os_access_done`]. Anything that
///   can wait (a process, a remote service) must be deferred: the control
///   thread never blocks (DESIGN §3).
///
/// Either way the terminal holds the resource while the operation is
/// outstanding so that SPEC HO-4 holds at every instant.
pub trait OsAccess {
    /// Lets `grant.holder` reach `grant.resource_id` in `grant.access_mode`.
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError>;

    /// Withdraws what [`OsAccess::grant`] gave for the same `grant`.
    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError>;

    /// SPEC HO-4 T1: revokes a handover source's access; its target's
    /// grant follows, T4 — on this terminal, or, for a handover across
    /// gateways, on the gateway of the target `to` (a holder id). A revoke
    /// by default. A shared occupancy keeps the resource for this node (and
    /// `to`) a bounded while, so that between T2 and T4 no one else admits
    /// a controller the target would then lose to.
    fn release(&mut self, grant: &AccessGrant, to: Option<&str>) -> Result<(), OsError> {
        let _ = to;
        self.revoke(grant)
    }

    /// Whether the driver runs the operations (see the trait docs).
    fn deferred(&self) -> bool {
        false
    }

    /// The fencing token of this access control's last successful grant,
    /// if it issues them (SPEC HO-4 across gateways: the etcd revision that
    /// admitted the session, strictly increasing per resource). The
    /// terminal keeps it with the session and writes it to the session's
    /// audit record. None by default.
    fn fencing(&self) -> Option<u64> {
        None
    }

    /// Whether this node may hold grants now. False for a cluster member
    /// that can no longer prove its membership (its lease may have
    /// expired, and another gateway may grant the resource): its driver
    /// then ends every active session ([`crate::Terminal::fence`]) and new
    /// grants fail. True by default.
    fn may_hold(&self) -> bool {
        true
    }

    /// SPEC HO-4, HO-7: whether the occupancy this access control enforces
    /// is shared with other terminals (a cluster's): a revoke that went
    /// through frees the resource for them at once, so a local record
    /// alone no longer keeps it. A handover source whose T1 revoke HO-7
    /// abandoned is then restored only once that revoke has answered — and,
    /// if it went through, once the source is granted again — never while
    /// another gateway may admit a controller. False by default.
    fn shared(&self) -> bool {
        false
    }

    /// Gives the access control a way to wake its driver when
    /// [`OsAccess::may_hold`] turns false. Nothing by default.
    fn attach_wake(&mut self, wake: Arc<dyn Fn() + Send + Sync>) {
        let _ = wake;
    }
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
