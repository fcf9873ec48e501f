//! The invariants of the terminal's state, checked after every input on a
//! [`Snapshot`] of what the terminal shows (SPEC TS-3, TS-4, TS-8, TS-9,
//! TS-10, TS-17, HO-4, LIV-4). A snapshot is plain data, so a test can
//! hand the checker a broken state and see it caught.

use std::collections::{BTreeMap, BTreeSet};

use dtp_codec::{AccessMode, SessionId, SessionState};
use dtp_terminal::occupancy::is_exclusive;
use dtp_terminal::session::is_controlling;
use dtp_terminal::{AccessGrant, ResourceInfo, SessionInfo, UnixMs};

use super::world::{LIVENESS_MS, World};

/// What the checks look at.
#[derive(Clone, Debug)]
pub(super) struct Snapshot {
    pub(super) now: UnixMs,
    /// [`dtp_terminal::Terminal::sessions`].
    pub(super) sessions: Vec<SessionInfo>,
    /// [`dtp_terminal::Terminal::resources`].
    pub(super) resources: Vec<ResourceInfo>,
    /// What the OS grants ([`dtp_terminal::ScriptedAccess::granted`]).
    pub(super) granted: BTreeSet<AccessGrant>,
    /// Double grants and revokes of nothing the OS double saw.
    pub(super) os_contract_breaks: u64,
    pub(super) reads_per_resource: usize,
    pub(super) per_fay: usize,
    pub(super) per_terminal: usize,
    pub(super) liveness_ms: u64,
}

/// SPEC TS-9 and TS-17's read limit: may a session in `mode` join the
/// resource's occupancy as shown?
pub(super) fn admits(r: &ResourceInfo, mode: AccessMode, reads_limit: usize) -> bool {
    let exclusive = r.occupancy.iter().any(|(_, m, _)| is_exclusive(*m));
    if exclusive {
        return false;
    }
    if is_exclusive(mode) {
        return r.occupancy.is_empty();
    }
    r.occupancy.len() < reads_limit
}

/// Every invariant broken in `s`, worded with its SPEC rule.
pub(super) fn check(s: &Snapshot) -> Vec<String> {
    let mut v = Vec::new();
    let by_id: BTreeMap<SessionId, &SessionInfo> =
        s.sessions.iter().map(|x| (x.session_id, x)).collect();
    // TS-3: no transient state survives an input.
    for x in &s.sessions {
        if !matches!(x.state, SessionState::Active | SessionState::Terminating) {
            v.push(format!(
                "TS-3: {} is {} between inputs",
                x.session_id,
                x.state.name()
            ));
        }
    }
    for r in &s.resources {
        let id = &r.resource_id;
        // HO-4: at most one active controller in an exclusive mode, and
        // then no other controller.
        let controllers: Vec<&SessionInfo> = s
            .sessions
            .iter()
            .filter(|x| &x.resource_id == id && is_controlling(x.state))
            .collect();
        let exclusive = controllers
            .iter()
            .filter(|x| is_exclusive(x.access_mode))
            .count();
        if exclusive > 1 || (exclusive == 1 && controllers.len() > 1) {
            let list: Vec<_> = controllers
                .iter()
                .map(|x| (x.session_id, x.fay_id.as_str(), x.access_mode.name()))
                .collect();
            v.push(format!(
                "HO-4: {id} has {} active controllers: {list:?}",
                list.len()
            ));
        }
        // TS-9: an exclusive occupant is alone; reads up to the limit.
        let excl_occ = r
            .occupancy
            .iter()
            .filter(|(_, m, _)| is_exclusive(*m))
            .count();
        if excl_occ > 0 && r.occupancy.len() > 1 {
            v.push(format!("TS-9: {id} is occupied {:?}", r.occupancy));
        }
        if excl_occ == 0 && r.occupancy.len() > s.reads_per_resource {
            v.push(format!(
                "TS-17: {id} has {} read sessions (limit {})",
                r.occupancy.len(),
                s.reads_per_resource
            ));
        }
        // TS-8: every occupant is a live session of this resource, mode
        // and state.
        for (sid, mode, state) in &r.occupancy {
            match by_id.get(sid) {
                Some(x) if &x.resource_id == id && x.access_mode == *mode && x.state == *state => {}
                Some(x) => v.push(format!(
                    "TS-8: {id} lists {sid} as {} {}, the session is {} {} on {}",
                    mode.name(),
                    state.name(),
                    x.access_mode.name(),
                    x.state.name(),
                    x.resource_id
                )),
                None => v.push(format!(
                    "TS-8: {id} is occupied by {sid}, which is no live session"
                )),
            }
        }
        // TS-10: nothing active on a resource that is gone.
        if !r.available && controllers.iter().any(|x| x.state == SessionState::Active) {
            v.push(format!(
                "TS-10: {id} is unavailable but has an active session"
            ));
        }
    }
    // TS-8: every live session occupies its resource.
    let occupied: BTreeSet<SessionId> = s
        .resources
        .iter()
        .flat_map(|r| r.occupancy.iter().map(|(sid, _, _)| *sid))
        .collect();
    for x in &s.sessions {
        if !occupied.contains(&x.session_id) {
            v.push(format!(
                "TS-8: live session {} ({}) occupies nothing",
                x.session_id, x.resource_id
            ));
        }
    }
    // TS-4: the OS grants exactly the live sessions, never twice.
    let want: BTreeSet<AccessGrant> = s
        .sessions
        .iter()
        .map(|x| AccessGrant {
            session_id: x.session_id,
            resource_id: x.resource_id.as_str().into(),
            access_mode: x.access_mode,
            holder: x.fay_id.as_str().into(),
        })
        .collect();
    for g in s.granted.difference(&want) {
        v.push(format!(
            "TS-4: the OS still grants {} on {} to {} (no live session)",
            g.session_id, g.resource_id, g.holder
        ));
    }
    for g in want.difference(&s.granted) {
        v.push(format!(
            "TS-4: live session {} has no OS grant on {}",
            g.session_id, g.resource_id
        ));
    }
    if s.os_contract_breaks > 0 {
        v.push(format!(
            "TS-4: {} double grants or revokes of nothing",
            s.os_contract_breaks
        ));
    }
    // TS-17: per terminal and per Fay.
    if s.sessions.len() > s.per_terminal {
        v.push(format!("TS-17: {} live sessions", s.sessions.len()));
    }
    let mut per_fay: BTreeMap<&str, usize> = BTreeMap::new();
    for x in &s.sessions {
        *per_fay.entry(x.fay_id.as_str()).or_default() += 1;
    }
    for (f, n) in per_fay {
        if n > s.per_fay {
            v.push(format!("TS-17: {f} has {n} live sessions"));
        }
    }
    // LIV-4: a session whose connection and heartbeat have both been silent
    // past the threshold is dead.
    for x in &s.sessions {
        let down = x
            .conn_down_since
            .is_some_and(|d| s.now.since(d) > s.liveness_ms);
        if x.state == SessionState::Active
            && down
            && s.now.since(x.last_heartbeat_at) > s.liveness_ms
        {
            v.push(format!(
                "LIV-4: {} ({}) is still active, connection down since {:?}, last heartbeat {}",
                x.session_id, x.fay_id, x.conn_down_since, x.last_heartbeat_at.0
            ));
        }
    }
    v
}

impl World {
    /// The snapshot of the terminal now.
    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            now: self.now,
            sessions: self.t.sessions(),
            resources: self.t.resources(),
            granted: self.t.access().granted().clone(),
            os_contract_breaks: self.t.access().violations(),
            reads_per_resource: self.config.limits.reads_per_resource,
            per_fay: self.config.limits.per_fay,
            per_terminal: self.config.limits.per_terminal,
            liveness_ms: LIVENESS_MS,
        }
    }

    /// Runs every state check, and the credential checks.
    pub(super) fn check_state(&mut self) {
        for v in check(&self.snapshot()) {
            self.violation(v);
        }
        self.check_credentials();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn session(n: u128, fay: &str, mode: AccessMode) -> SessionInfo {
        SessionInfo {
            session_id: SessionId::from_u128(n),
            fay_id: fay.into(),
            human: false,
            resource_id: "arm".into(),
            access_mode: mode,
            state: SessionState::Active,
            conn: None,
            conn_down_since: None,
            created_at: UnixMs(1),
            last_heartbeat_at: UnixMs(1),
        }
    }

    fn snapshot(sessions: Vec<SessionInfo>) -> Snapshot {
        let occupancy = sessions
            .iter()
            .map(|s| (s.session_id, s.access_mode, s.state))
            .collect();
        let granted = sessions
            .iter()
            .map(|s| AccessGrant {
                session_id: s.session_id,
                resource_id: s.resource_id.as_str().into(),
                access_mode: s.access_mode,
                holder: s.fay_id.as_str().into(),
            })
            .collect();
        Snapshot {
            now: UnixMs(2),
            resources: vec![ResourceInfo {
                resource_id: "arm".into(),
                available: true,
                metadata: BTreeMap::new(),
                handover_policy: None,
                occupancy,
                controllers: sessions.iter().map(|s| s.session_id).collect(),
                handover: None,
                queued: 0,
                reconciliation: Vec::new(),
            }],
            sessions,
            granted,
            os_contract_breaks: 0,
            reads_per_resource: 2,
            per_fay: 3,
            per_terminal: 24,
            liveness_ms: 6_000,
        }
    }

    #[test]
    fn a_consistent_state_passes() {
        let s = snapshot(vec![session(1, "fay-1", AccessMode::Write)]);
        assert_eq!(check(&s), Vec::<String>::new());
        let reads = snapshot(vec![
            session(1, "fay-1", AccessMode::Read),
            session(2, "fay-2", AccessMode::Read),
        ]);
        assert_eq!(check(&reads), Vec::<String>::new());
    }

    #[test]
    fn two_controllers_are_reported() {
        let s = snapshot(vec![
            session(1, "fay-1", AccessMode::Write),
            session(2, "fay-2", AccessMode::Write),
        ]);
        let found = check(&s);
        assert!(
            found
                .iter()
                .any(|v| v.starts_with("HO-4: arm has 2 active controllers")),
            "{found:?}"
        );
        assert!(found.iter().any(|v| v.starts_with("TS-9:")), "{found:?}");
    }

    #[test]
    fn orphans_leaks_and_missed_deaths_are_reported() {
        let mut s = snapshot(vec![session(1, "fay-1", AccessMode::Read)]);
        s.resources[0].occupancy.push((
            SessionId::from_u128(9),
            AccessMode::Read,
            SessionState::Active,
        ));
        s.granted.clear();
        s.sessions[0].conn_down_since = Some(UnixMs(0));
        s.now = UnixMs(10_000);
        let found = check(&s);
        for rule in ["TS-8: arm is occupied by", "TS-4: live session", "LIV-4:"] {
            assert!(
                found.iter().any(|v| v.starts_with(rule)),
                "{rule}: {found:?}"
            );
        }
        assert!(!admits(&s.resources[0], AccessMode::Read, 2));
        assert!(!admits(&s.resources[0], AccessMode::Write, 2));
    }
}
