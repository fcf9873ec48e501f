//! SPEC FSM-1, FSM-2: the DTP_Engine state machine (SPEC §1.8).
//!
//! This module owns the engine's coarse state and the one table that says
//! which events move it where. It is pure: [`next`] is a function of
//! `(state, event)`, and [`EngineFsm`] only remembers the current state and
//! hands back, with each legal transition, the table's note as an
//! [`Action`] the driver must carry out. It never touches the session store,
//! agreements, frames or timers — the driver (or
//! [`crate::session::SessionManager`], which embeds one machine per session)
//! does the work the action names.
//!
//! The table is copied literally from the seed (chapter 3.3, which the seed
//! says is complete: "implementations must not introduce transitions not
//! listed"), plus the one row SPEC.md adds where the seed leaves a gap:
//! SessionEstablished → underlying connection lost → Idle (close session).
//! A connection can drop in any state, and without that row a session with
//! no agreement would have no legal way to end when it does (there is
//! nothing to resume: no agreement, no fragment in flight). Two
//! consequences of reading the table literally, which drivers must know:
//!
//! - Only a *received* adjustment Request_Frame moves Transmitting →
//!   Negotiating; the side that *sends* an adjustment stays in Transmitting
//!   (the table has no row for it) and keeps shipping fragments under the
//!   current terms until the answer arrives.
//! - Negotiating → SessionEstablished is the only exit for a failed
//!   negotiation, even when an adjustment was rejected and the adjusted
//!   agreement is still active. A driver therefore feeds
//!   [`EngineEvent::AgreementReached`] whenever the negotiation ends with an
//!   agreement in force — including "adjustment rejected, the earlier terms
//!   stay" — and [`EngineEvent::NegotiationFailed`] only when no agreement is
//!   active afterwards.

use std::fmt;

/// SPEC FSM-1: the seven states of the DTP_Engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineState {
    /// No connection.
    Idle,
    /// A connection arrived; CAP (identity + key exchange) is running (SEQ-1).
    WaitingForCap,
    /// CAP finished and a Session_ID exists (SEQ-2); no agreement is active.
    SessionEstablished,
    /// A Request_Frame is being negotiated (SEQ-3a/3b).
    Negotiating,
    /// At least one agreement is active; fragments flow (SEQ-4).
    Transmitting,
    /// The connection dropped; the session is persisted (SES-2, SEQ-5).
    Suspended,
    /// CAP re-verified on a new connection; the resume handshake runs (SEQ-5).
    Resuming,
}

impl EngineState {
    /// Every state, in table order.
    pub const ALL: [EngineState; 7] = [
        EngineState::Idle,
        EngineState::WaitingForCap,
        EngineState::SessionEstablished,
        EngineState::Negotiating,
        EngineState::Transmitting,
        EngineState::Suspended,
        EngineState::Resuming,
    ];

    /// The spec's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            EngineState::Idle => "Idle",
            EngineState::WaitingForCap => "WaitingForCAP",
            EngineState::SessionEstablished => "SessionEstablished",
            EngineState::Negotiating => "Negotiating",
            EngineState::Transmitting => "Transmitting",
            EngineState::Suspended => "Suspended",
            EngineState::Resuming => "Resuming",
        }
    }
}

impl fmt::Display for EngineState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SPEC FSM-1: the events of the table's "event" column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineEvent {
    /// A connection request was received.
    ConnectionRequestReceived,
    /// CAP verified the peer and key exchange is done.
    CapVerified,
    /// CAP failed or timed out.
    CapFailedOrTimeout,
    /// A Request_Frame was sent or received.
    RequestFrameSentOrReceived,
    /// The session timed out (SES-4 idle timeout, or the suspend timeout).
    SessionTimeout,
    /// An agreement was reached.
    AgreementReached,
    /// The negotiation failed or was rejected.
    NegotiationFailed,
    /// A fragment was sent (self loop).
    FragmentSent,
    /// An adjustment-type Request_Frame was received.
    AdjustmentRequestReceived,
    /// The underlying connection was lost.
    ConnectionLost,
    /// An agreement ended and no other agreement is active.
    AgreementEndedNoOtherActive,
    /// The connection is back and CAP re-verified the peer.
    ConnectionBackCapReverified,
    /// The resume handshake is done.
    ResumeHandshakeDone,
    /// The resume failed.
    ResumeFailed,
}

impl EngineEvent {
    /// Every event, in table order.
    pub const ALL: [EngineEvent; 14] = [
        EngineEvent::ConnectionRequestReceived,
        EngineEvent::CapVerified,
        EngineEvent::CapFailedOrTimeout,
        EngineEvent::RequestFrameSentOrReceived,
        EngineEvent::SessionTimeout,
        EngineEvent::AgreementReached,
        EngineEvent::NegotiationFailed,
        EngineEvent::FragmentSent,
        EngineEvent::AdjustmentRequestReceived,
        EngineEvent::ConnectionLost,
        EngineEvent::AgreementEndedNoOtherActive,
        EngineEvent::ConnectionBackCapReverified,
        EngineEvent::ResumeHandshakeDone,
        EngineEvent::ResumeFailed,
    ];

    /// The table's wording of the event.
    pub fn name(self) -> &'static str {
        match self {
            EngineEvent::ConnectionRequestReceived => "connection request received",
            EngineEvent::CapVerified => "CAP verified + key exchange done",
            EngineEvent::CapFailedOrTimeout => "CAP failure or timeout",
            EngineEvent::RequestFrameSentOrReceived => "Request_Frame sent or received",
            EngineEvent::SessionTimeout => "session timeout",
            EngineEvent::AgreementReached => "agreement reached",
            EngineEvent::NegotiationFailed => "negotiation failed / rejected",
            EngineEvent::FragmentSent => "fragment sent",
            EngineEvent::AdjustmentRequestReceived => "adjustment-type Request_Frame received",
            EngineEvent::ConnectionLost => "underlying connection lost",
            EngineEvent::AgreementEndedNoOtherActive => {
                "agreement ended and no other active agreement"
            }
            EngineEvent::ConnectionBackCapReverified => "connection back + CAP re-verified",
            EngineEvent::ResumeHandshakeDone => "resume handshake done",
            EngineEvent::ResumeFailed => "resume failed",
        }
    }
}

impl fmt::Display for EngineEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The table's "note" column: work the driver must do with the transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Nothing beyond the state change.
    None,
    /// Release the resources held for the connection or session.
    ReleaseResources,
    /// Close the session (and clean its stored state).
    CloseSession,
    /// Persist the session state (SES-2).
    PersistSession,
}

/// SPEC FSM-2: an event the table does not allow in the current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("illegal DTP engine transition: \"{event}\" is not allowed in state {state}")]
pub struct IllegalTransition {
    /// The state the machine was (and stays) in.
    pub state: EngineState,
    /// The refused event.
    pub event: EngineEvent,
}

impl IllegalTransition {
    /// The wire code a driver reports when a peer's frame caused it.
    pub fn code(&self) -> dtp_codec::ErrorCode {
        dtp_codec::ErrorCode::INCONSISTENT
    }
}

/// SPEC FSM-1, FSM-2: the transition table. Returns the target state and
/// the note's action, or [`IllegalTransition`] for every pair not in the
/// table.
pub fn transition(
    state: EngineState,
    event: EngineEvent,
) -> Result<(EngineState, Action), IllegalTransition> {
    use EngineEvent as E;
    use EngineState as S;
    let to = match (state, event) {
        (S::Idle, E::ConnectionRequestReceived) => (S::WaitingForCap, Action::None),
        (S::WaitingForCap, E::CapVerified) => (S::SessionEstablished, Action::None),
        (S::WaitingForCap, E::CapFailedOrTimeout) => (S::Idle, Action::ReleaseResources),
        (S::SessionEstablished, E::RequestFrameSentOrReceived) => (S::Negotiating, Action::None),
        (S::SessionEstablished, E::SessionTimeout) => (S::Idle, Action::CloseSession),
        // SPEC.md's row for the seed's gap (module docs).
        (S::SessionEstablished, E::ConnectionLost) => (S::Idle, Action::CloseSession),
        (S::Negotiating, E::AgreementReached) => (S::Transmitting, Action::None),
        (S::Negotiating, E::NegotiationFailed) => (S::SessionEstablished, Action::None),
        (S::Transmitting, E::FragmentSent) => (S::Transmitting, Action::None),
        (S::Transmitting, E::AdjustmentRequestReceived) => (S::Negotiating, Action::None),
        (S::Transmitting, E::ConnectionLost) => (S::Suspended, Action::PersistSession),
        (S::Transmitting, E::AgreementEndedNoOtherActive) => (S::SessionEstablished, Action::None),
        (S::Suspended, E::ConnectionBackCapReverified) => (S::Resuming, Action::None),
        (S::Suspended, E::SessionTimeout) => (S::Idle, Action::ReleaseResources),
        (S::Resuming, E::ResumeHandshakeDone) => (S::Transmitting, Action::None),
        (S::Resuming, E::ResumeFailed) => (S::Idle, Action::CloseSession),
        _ => return Err(IllegalTransition { state, event }),
    };
    Ok(to)
}

/// SPEC FSM-1, FSM-2: the target state of `event` in `state`, or
/// [`IllegalTransition`].
pub fn next(state: EngineState, event: EngineEvent) -> Result<EngineState, IllegalTransition> {
    transition(state, event).map(|(to, _)| to)
}

/// SPEC FSM-1, FSM-2: one engine's state; refuses every transition the table
/// does not list and leaves the state unchanged when it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineFsm {
    state: EngineState,
}

impl Default for EngineFsm {
    fn default() -> Self {
        Self::new()
    }
}

impl EngineFsm {
    /// A machine in [`EngineState::Idle`].
    pub fn new() -> Self {
        Self {
            state: EngineState::Idle,
        }
    }

    /// A machine in [`EngineState::Suspended`], for a session loaded from
    /// the store on a node that did not see it suspend (SES-3): the state it
    /// was persisted in. Crate-internal: only the session manager may skip
    /// the path, and only for a persisted session.
    pub(crate) fn persisted_suspended() -> Self {
        Self {
            state: EngineState::Suspended,
        }
    }

    /// The current state.
    pub fn state(&self) -> EngineState {
        self.state
    }

    /// Feeds one event: on a legal transition, moves and returns the action
    /// the driver must carry out; otherwise returns the error and stays.
    pub fn handle(&mut self, event: EngineEvent) -> Result<Action, IllegalTransition> {
        let (to, action) = transition(self.state, event)?;
        self.state = to;
        Ok(action)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use proptest::prelude::*;

    use super::*;

    /// The table of SPEC §1.8, copied literally, as strings.
    const TABLE: [(&str, &str, &str, &str); 16] = [
        ("Idle", "connection request received", "WaitingForCAP", ""),
        (
            "WaitingForCAP",
            "CAP verified + key exchange done",
            "SessionEstablished",
            "",
        ),
        (
            "WaitingForCAP",
            "CAP failure or timeout",
            "Idle",
            "release resources",
        ),
        (
            "SessionEstablished",
            "Request_Frame sent or received",
            "Negotiating",
            "",
        ),
        (
            "SessionEstablished",
            "session timeout",
            "Idle",
            "close session",
        ),
        (
            "SessionEstablished",
            "underlying connection lost",
            "Idle",
            "close session",
        ),
        ("Negotiating", "agreement reached", "Transmitting", ""),
        (
            "Negotiating",
            "negotiation failed / rejected",
            "SessionEstablished",
            "",
        ),
        ("Transmitting", "fragment sent", "Transmitting", ""),
        (
            "Transmitting",
            "adjustment-type Request_Frame received",
            "Negotiating",
            "",
        ),
        (
            "Transmitting",
            "underlying connection lost",
            "Suspended",
            "persist session",
        ),
        (
            "Transmitting",
            "agreement ended and no other active agreement",
            "SessionEstablished",
            "",
        ),
        (
            "Suspended",
            "connection back + CAP re-verified",
            "Resuming",
            "",
        ),
        ("Suspended", "session timeout", "Idle", "release resources"),
        ("Resuming", "resume handshake done", "Transmitting", ""),
        ("Resuming", "resume failed", "Idle", "close session"),
    ];

    fn note(action: Action) -> &'static str {
        match action {
            Action::None => "",
            Action::ReleaseResources => "release resources",
            Action::CloseSession => "close session",
            Action::PersistSession => "persist session",
        }
    }

    /// SPEC FSM-1, FSM-2: every (state, event) pair against the literal table.
    #[test]
    fn fsm_every_pair_matches_the_table() {
        let mut legal = 0;
        for state in EngineState::ALL {
            for event in EngineEvent::ALL {
                let row = TABLE
                    .iter()
                    .find(|(s, e, _, _)| *s == state.name() && *e == event.name());
                let mut fsm = EngineFsm { state };
                match (row, fsm.handle(event)) {
                    (Some((_, _, to, n)), Ok(action)) => {
                        legal += 1;
                        assert_eq!(fsm.state().name(), *to, "{state} / {event}");
                        assert_eq!(note(action), *n, "{state} / {event}");
                        assert_eq!(next(state, event).unwrap().name(), *to);
                    }
                    (None, Err(e)) => {
                        assert_eq!(e, IllegalTransition { state, event });
                        assert_eq!(fsm.state(), state, "state unchanged after {e}");
                        assert!(next(state, event).is_err());
                    }
                    (row, got) => panic!("{state} / {event}: table {row:?}, machine {got:?}"),
                }
            }
        }
        assert_eq!(legal, TABLE.len());
    }

    /// SPEC FSM-1: the seed's happy path, Idle through a suspend and resume.
    #[test]
    fn fsm_happy_path_with_suspend_and_resume() {
        use EngineEvent as E;
        let mut fsm = EngineFsm::new();
        let path = [
            (E::ConnectionRequestReceived, Action::None),
            (E::CapVerified, Action::None),
            (E::RequestFrameSentOrReceived, Action::None),
            (E::AgreementReached, Action::None),
            (E::FragmentSent, Action::None),
            (E::ConnectionLost, Action::PersistSession),
            (E::ConnectionBackCapReverified, Action::None),
            (E::ResumeHandshakeDone, Action::None),
            (E::AgreementEndedNoOtherActive, Action::None),
            (E::SessionTimeout, Action::CloseSession),
        ];
        for (event, action) in path {
            assert_eq!(fsm.handle(event).unwrap(), action, "{event}");
        }
        assert_eq!(fsm.state(), EngineState::Idle);
    }

    /// SPEC FSM-2: a few forbidden shortcuts, by name.
    #[test]
    fn fsm_refuses_shortcuts() {
        use EngineEvent as E;
        use EngineState as S;
        // No data before CAP (SEQ-1).
        assert!(next(S::WaitingForCap, E::FragmentSent).is_err());
        // No negotiation before CAP.
        assert!(next(S::Idle, E::RequestFrameSentOrReceived).is_err());
        // A suspended session only resumes through CAP re-verification.
        assert!(next(S::Suspended, E::ResumeHandshakeDone).is_err());
        // Transmitting does not time out directly (the table has no such row).
        assert!(next(S::Transmitting, E::SessionTimeout).is_err());
        let err = next(S::Idle, E::FragmentSent).unwrap_err();
        assert_eq!(err.code(), dtp_codec::ErrorCode::INCONSISTENT);
        assert!(err.to_string().contains("Idle"));
    }

    proptest! {
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

        /// SPEC FSM-2: on random event sequences, the machine only ever takes
        /// table transitions, and a refused event leaves the state as it was.
        #[test]
        fn fsm_random_sequences_follow_the_table(events in prop::collection::vec(0usize..14, 0..200)) {
            let mut fsm = EngineFsm::new();
            for i in events {
                let event = EngineEvent::ALL[i];
                let before = fsm.state();
                match fsm.handle(event) {
                    Ok(_) => {
                        let row = TABLE.iter().find(|(s, e, _, _)| *s == before.name() && *e == event.name());
                        prop_assert!(row.is_some());
                        prop_assert_eq!(row.unwrap().2, fsm.state().name());
                    }
                    Err(_) => prop_assert_eq!(fsm.state(), before),
                }
            }
        }
    }
}
