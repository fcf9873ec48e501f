//! SPEC TS-1, TS-2: the five-state session machine as a pure transition
//! function, and TS-11's termination reasons.
//!
//! This module owns only the table. Which event happens when, and the
//! resource and OS operations that go with it (TS-3, TS-4), belong to
//! [`crate::Terminal`], which applies an event only after its resource
//! operation succeeded — so a refused event never leaves a trace.

use std::fmt;

use serde::Serialize;

pub use dtp_codec::SessionState;

/// SPEC TS-11: why a session ends (the `reason` of SessionStateChanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminationReason {
    /// The runtime released it (SessionRelease).
    ClientRelease,
    /// SPEC LIV-4: connection and heartbeat both silent past the threshold.
    LivenessTimeout,
    /// SPEC TS-16: its credential was revoked.
    CredentialRevoked,
    /// SPEC TS-10: its resource went away.
    ResourceUnavailable,
    /// SPEC TS-16: its credential reached `not_after`.
    CredentialExpired,
    /// SPEC HO-4: control passed to another controller.
    HandedOver,
    /// An administrator ended it.
    Forced,
    /// SPEC TS-7: creation failed before the session became active. Ours:
    /// TS-11 names no reason for it; it only appears in audit records and
    /// observer events (the runtime gets a refused AuthResult instead).
    CreationFailed,
}

impl TerminationReason {
    /// Every reason, for exhaustive tests.
    pub const ALL: [TerminationReason; 8] = [
        Self::ClientRelease,
        Self::LivenessTimeout,
        Self::CredentialRevoked,
        Self::ResourceUnavailable,
        Self::CredentialExpired,
        Self::HandedOver,
        Self::Forced,
        Self::CreationFailed,
    ];

    /// The reason as the seeds spell it (`client_release`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientRelease => "client_release",
            Self::LivenessTimeout => "liveness_timeout",
            Self::CredentialRevoked => "credential_revoked",
            Self::ResourceUnavailable => "resource_unavailable",
            Self::CredentialExpired => "credential_expired",
            Self::HandedOver => "handed_over",
            Self::Forced => "forced",
            Self::CreationFailed => "creation_failed",
        }
    }

    /// Whether this reason ends an `active` session directly (TS-1's
    /// active→terminating triggers); `handed_over` goes through
    /// `handover_pending`, `creation_failed` through `creating`.
    pub fn ends_active(self) -> bool {
        !matches!(self, Self::HandedOver | Self::CreationFailed)
    }
}

impl fmt::Display for TerminationReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// SPEC TS-1: what can happen to a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionEvent {
    /// Resources initialised (OS grant done): creating → active.
    Initialised,
    /// Initialisation failed: creating → terminating.
    InitFailed,
    /// A handover of this session was allowed (HO-4 T0): active →
    /// handover_pending.
    HandoverRequested,
    /// Release, heartbeat timeout, revocation, expiry, resource loss or an
    /// administrator: active → terminating. Only reasons that
    /// [`TerminationReason::ends_active`] are legal here.
    Terminate(TerminationReason),
    /// The handover succeeded; the source must end: handover_pending →
    /// terminating.
    HandoverSucceeded,
    /// The handover was cancelled by its timeout and the source cannot be
    /// restored: handover_pending → terminating (TS-1's row). HO-7 restores
    /// the source; only with a shared occupancy (a cluster), whose source
    /// waits for its late revoke, can the resource have gone to another
    /// gateway meanwhile — then the source ends, `resource_unavailable`.
    HandoverTimedOut,
    /// The handover was refused or rolled back (HO-5): handover_pending →
    /// active.
    HandoverRolledBack,
    /// Resources fully released and state recorded: terminating →
    /// terminated.
    ResourcesReleased,
}

impl SessionEvent {
    /// Every event (each termination reason once), for exhaustive tests.
    pub fn all() -> Vec<SessionEvent> {
        let mut v = vec![
            Self::Initialised,
            Self::InitFailed,
            Self::HandoverRequested,
            Self::HandoverSucceeded,
            Self::HandoverTimedOut,
            Self::HandoverRolledBack,
            Self::ResourcesReleased,
        ];
        v.extend(TerminationReason::ALL.into_iter().map(Self::Terminate));
        v
    }
}

/// SPEC TS-2: the event is not allowed in that state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("SPEC TS-2: a session in state {} cannot take event {event:?}", .from.name())]
pub struct IllegalTransition {
    /// The state the session was in.
    pub from: SessionState,
    /// The refused event.
    pub event: SessionEvent,
}

/// SPEC TS-1, TS-2: the only legal transitions; every other (state, event)
/// pair is an error and changes nothing.
pub fn transition(
    from: SessionState,
    event: SessionEvent,
) -> Result<SessionState, IllegalTransition> {
    use SessionEvent as E;
    use SessionState as S;
    let to = match (from, event) {
        (S::Creating, E::Initialised) => S::Active,
        (S::Creating, E::InitFailed) => S::Terminating,
        (S::Active, E::HandoverRequested) => S::HandoverPending,
        (S::Active, E::Terminate(r)) if r.ends_active() => S::Terminating,
        (S::HandoverPending, E::HandoverSucceeded | E::HandoverTimedOut) => S::Terminating,
        (S::HandoverPending, E::HandoverRolledBack) => S::Active,
        (S::Terminating, E::ResourcesReleased) => S::Terminated,
        _ => return Err(IllegalTransition { from, event }),
    };
    Ok(to)
}

/// Whether a session in `state` still counts as a controller of its
/// resource for SPEC HO-4 (at most one per resource).
pub fn is_controlling(state: SessionState) -> bool {
    matches!(state, SessionState::Active | SessionState::HandoverPending)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATES: [SessionState; 5] = [
        SessionState::Creating,
        SessionState::Active,
        SessionState::HandoverPending,
        SessionState::Terminating,
        SessionState::Terminated,
    ];

    /// TS-1's table, written out independently of `transition`.
    fn table(from: SessionState, event: SessionEvent) -> Option<SessionState> {
        use SessionEvent as E;
        use SessionState as S;
        use TerminationReason as R;
        let legal: &[(S, E, S)] = &[
            (S::Creating, E::Initialised, S::Active),
            (S::Creating, E::InitFailed, S::Terminating),
            (S::Active, E::HandoverRequested, S::HandoverPending),
            (S::Active, E::Terminate(R::ClientRelease), S::Terminating),
            (S::Active, E::Terminate(R::LivenessTimeout), S::Terminating),
            (
                S::Active,
                E::Terminate(R::CredentialRevoked),
                S::Terminating,
            ),
            (
                S::Active,
                E::Terminate(R::ResourceUnavailable),
                S::Terminating,
            ),
            (
                S::Active,
                E::Terminate(R::CredentialExpired),
                S::Terminating,
            ),
            (S::Active, E::Terminate(R::Forced), S::Terminating),
            (S::HandoverPending, E::HandoverSucceeded, S::Terminating),
            (S::HandoverPending, E::HandoverTimedOut, S::Terminating),
            (S::HandoverPending, E::HandoverRolledBack, S::Active),
            (S::Terminating, E::ResourcesReleased, S::Terminated),
        ];
        legal
            .iter()
            .find(|(f, e, _)| *f == from && *e == event)
            .map(|(_, _, t)| *t)
    }

    #[test]
    fn every_state_event_pair_matches_the_table() {
        let mut legal = 0;
        for from in STATES {
            for event in SessionEvent::all() {
                match (transition(from, event), table(from, event)) {
                    (Ok(to), Some(want)) => {
                        assert_eq!(to, want, "{from:?} + {event:?}");
                        legal += 1;
                    }
                    (Err(e), None) => {
                        assert_eq!(e, IllegalTransition { from, event });
                    }
                    (got, want) => panic!("{from:?} + {event:?}: got {got:?}, table says {want:?}"),
                }
            }
        }
        // 5 states × 15 events, of which exactly TS-1's 13 rows are legal.
        assert_eq!(legal, 13);
        assert_eq!(SessionEvent::all().len(), 15);
    }

    #[test]
    fn terminated_is_final() {
        for event in SessionEvent::all() {
            assert!(transition(SessionState::Terminated, event).is_err());
        }
    }

    #[test]
    fn reasons_are_spelled_as_the_seed_spells_them() {
        let names: Vec<&str> = TerminationReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "client_release",
                "liveness_timeout",
                "credential_revoked",
                "resource_unavailable",
                "credential_expired",
                "handed_over",
                "forced",
                "creation_failed"
            ]
        );
        assert_eq!(TerminationReason::Forced.to_string(), "forced");
    }

    #[test]
    fn controllers_are_active_or_handover_pending() {
        let c: Vec<bool> = STATES.iter().map(|s| is_controlling(*s)).collect();
        assert_eq!(c, [false, true, true, false, false]);
    }
}
