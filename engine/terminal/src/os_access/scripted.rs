//! A scripted [`OsAccess`] test double: it keeps the set of grants the OS
//! would hold, and fails the calls it is told to fail.

use std::collections::BTreeSet;

use super::{AccessGrant, OsAccess, OsError};

/// One call made to a [`ScriptedAccess`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessCall {
    /// A grant, and whether it succeeded.
    Grant(AccessGrant, bool),
    /// A revoke, and whether it succeeded.
    Revoke(AccessGrant, bool),
}

/// SPEC TS-4 test double: an in-memory OS that can be told to fail the Nth
/// grant or revoke (1-based, counted over the double's whole life) or simply
/// the next one. A failed call changes nothing, as [`OsAccess`] requires.
///
/// It also checks the terminal's side of the contract: granting what is
/// already granted, or revoking what is not, counts as a
/// [`ScriptedAccess::violations`].
///
/// A call can also be *killed* ([`ScriptedAccess::kill_next_grant`]): it
/// answers [`OsError::Indeterminate`] after applying its change — the worst
/// case for the terminal, which cannot know (SPEC TS-4). And the double can
/// be [deferred](ScriptedAccess::set_deferred): the terminal then asks its
/// driver (the test) to run each call, whenever the test likes.
#[derive(Clone, Debug, Default)]
pub struct ScriptedAccess {
    granted: BTreeSet<AccessGrant>,
    grants: u64,
    revokes: u64,
    fail_grants: BTreeSet<u64>,
    fail_revokes: BTreeSet<u64>,
    kill_grants: BTreeSet<u64>,
    kill_revokes: BTreeSet<u64>,
    calls: Vec<AccessCall>,
    violations: u64,
    deferred: bool,
    shared: bool,
}

impl ScriptedAccess {
    /// A double that succeeds until told otherwise.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails the `n`th grant (1-based, counting every grant so far).
    pub fn fail_grant_at(&mut self, n: u64) {
        self.fail_grants.insert(n);
    }

    /// Fails the `n`th revoke (1-based, counting every revoke so far).
    pub fn fail_revoke_at(&mut self, n: u64) {
        self.fail_revokes.insert(n);
    }

    /// Fails the next grant.
    pub fn fail_next_grant(&mut self) {
        self.fail_grants.insert(self.grants + 1);
    }

    /// Fails the next revoke.
    pub fn fail_next_revoke(&mut self) {
        self.fail_revokes.insert(self.revokes + 1);
    }

    /// Kills the next grant: it takes effect, yet answers
    /// [`OsError::Indeterminate`].
    pub fn kill_next_grant(&mut self) {
        self.kill_grants.insert(self.grants + 1);
    }

    /// Kills the next revoke: it takes effect, yet answers
    /// [`OsError::Indeterminate`].
    pub fn kill_next_revoke(&mut self) {
        self.kill_revokes.insert(self.revokes + 1);
    }

    /// Deferred: the terminal hands every call to its driver
    /// ([`crate::Output::OsAccess`]) instead of making it.
    pub fn set_deferred(&mut self, deferred: bool) {
        self.deferred = deferred;
    }

    /// Shared: reports its occupancy as shared with other terminals
    /// ([`OsAccess::shared`]), as a cluster's access control does.
    pub fn set_shared(&mut self, shared: bool) {
        self.shared = shared;
    }

    /// What the OS currently grants.
    pub fn granted(&self) -> &BTreeSet<AccessGrant> {
        &self.granted
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> &[AccessCall] {
        &self.calls
    }

    /// Grants attempted so far.
    pub fn grant_count(&self) -> u64 {
        self.grants
    }

    /// Revokes attempted so far.
    pub fn revoke_count(&self) -> u64 {
        self.revokes
    }

    /// Calls that broke the contract (double grant, revoke of nothing).
    pub fn violations(&self) -> u64 {
        self.violations
    }
}

impl OsAccess for ScriptedAccess {
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.grants += 1;
        let ok = !self.fail_grants.remove(&self.grants);
        self.calls.push(AccessCall::Grant(grant.clone(), ok));
        if !ok {
            return Err(OsError::Failed(format!(
                "scripted failure of grant #{}",
                self.grants
            )));
        }
        if !self.granted.insert(grant.clone()) {
            self.violations += 1;
        }
        if self.kill_grants.remove(&self.grants) {
            return Err(OsError::Indeterminate(format!(
                "grant #{} was killed",
                self.grants
            )));
        }
        Ok(())
    }

    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        self.revokes += 1;
        let ok = !self.fail_revokes.remove(&self.revokes);
        self.calls.push(AccessCall::Revoke(grant.clone(), ok));
        if !ok {
            return Err(OsError::Failed(format!(
                "scripted failure of revoke #{}",
                self.revokes
            )));
        }
        if !self.granted.remove(grant) {
            self.violations += 1;
        }
        if self.kill_revokes.remove(&self.revokes) {
            return Err(OsError::Indeterminate(format!(
                "revoke #{} was killed",
                self.revokes
            )));
        }
        Ok(())
    }

    fn deferred(&self) -> bool {
        self.deferred
    }

    fn shared(&self) -> bool {
        self.shared
    }
}

#[cfg(test)]
mod tests {
    use dtp_codec::{AccessMode, SessionId};

    use super::*;

    fn g(n: u128) -> AccessGrant {
        AccessGrant {
            session_id: SessionId::from_u128(n),
            resource_id: "r".into(),
            access_mode: AccessMode::Write,
            holder: "f".into(),
        }
    }

    #[test]
    fn fails_exactly_the_scripted_calls_and_changes_nothing_then() {
        let mut a = ScriptedAccess::new();
        a.fail_grant_at(2);
        assert_eq!(a.grant(&g(1)), Ok(()));
        assert!(a.grant(&g(2)).is_err());
        assert_eq!(a.granted().len(), 1);
        assert_eq!(a.grant(&g(2)), Ok(()));
        a.fail_next_revoke();
        assert!(a.revoke(&g(1)).is_err());
        assert_eq!(a.granted().len(), 2);
        assert_eq!(a.revoke(&g(1)), Ok(()));
        assert_eq!((a.grant_count(), a.revoke_count()), (3, 2));
        assert_eq!(a.calls().len(), 5);
        assert_eq!(a.violations(), 0);
    }

    #[test]
    fn contract_breaks_are_counted() {
        let mut a = ScriptedAccess::new();
        assert_eq!(a.revoke(&g(1)), Ok(()));
        assert_eq!(a.grant(&g(1)), Ok(()));
        assert_eq!(a.grant(&g(1)), Ok(()));
        assert_eq!(a.violations(), 2);
        a.fail_revoke_at(5);
        a.fail_next_grant();
        assert!(a.grant(&g(3)).is_err());
    }
}
