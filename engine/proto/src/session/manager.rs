//! The [`SessionManager`] state machine (rules in the module docs above).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use dtp_codec::SessionId;

use super::{
    MemorySessionStore, PeerIdentity, RestoredSession, ResumePositions, ResumeRefusal, Revision,
    SessionConfig, SessionError, SessionEvent, SessionSnapshot, SessionStore,
};
use crate::agreement::{AgreementSnapshot, Role};
use crate::fsm::{Action, EngineEvent, EngineFsm, EngineState, IllegalTransition};

/// One session held by the manager.
#[derive(Clone, Debug)]
struct Entry {
    peer: PeerIdentity,
    role: Role,
    fsm: EngineFsm,
    key_version: u16,
    established_at_unix: u64,
    last_activity: Instant,
    /// The revision this manager last wrote or read (`None`: never stored).
    revision: Option<Revision>,
    /// Set while suspended: when the session is released.
    suspend_deadline: Option<Instant>,
}

/// SPEC SES-1 … SES-4: the DTP sessions of one shard (sans-IO).
#[derive(Debug)]
pub struct SessionManager<S: SessionStore = MemorySessionStore> {
    config: SessionConfig,
    store: S,
    sessions: BTreeMap<SessionId, Entry>,
    events: VecDeque<SessionEvent>,
}

impl<S: SessionStore> SessionManager<S> {
    /// A manager with no session, persisting through `store`.
    pub fn new(config: SessionConfig, store: S) -> Self {
        Self {
            config,
            store,
            sessions: BTreeMap::new(),
            events: VecDeque::new(),
        }
    }

    // ----- getters -----

    /// The session's engine state, if the session is held here.
    pub fn state(&self, session_id: SessionId) -> Option<EngineState> {
        self.sessions.get(&session_id).map(|e| e.fsm.state())
    }

    /// The peer CAP authenticated for the session.
    pub fn peer(&self, session_id: SessionId) -> Option<&PeerIdentity> {
        self.sessions.get(&session_id).map(|e| &e.peer)
    }

    /// SPEC ENC-4: the key version the session's keys carry.
    pub fn key_version(&self, session_id: SessionId) -> Option<u16> {
        self.sessions.get(&session_id).map(|e| e.key_version)
    }

    /// Number of sessions held (live and suspended).
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The store, mutably (e.g. to inject failures in tests).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    // ----- inputs -----

    /// SPEC SEQ-2, SES-1: CAP verified `peer` and finished key exchange:
    /// creates a session with a Session_ID (UUID v4 from `random`), in
    /// SessionEstablished, with key version 1.
    pub fn establish(
        &mut self,
        peer: PeerIdentity,
        role: Role,
        random: [u8; 16],
        now: Instant,
        now_unix: u64,
    ) -> Result<SessionId, SessionError> {
        if self.sessions.len() >= self.config.max_sessions {
            return Err(SessionError::TooManySessions {
                max: self.config.max_sessions,
            });
        }
        let session_id = uuid::Builder::from_random_bytes(random).into_uuid();
        if self.sessions.contains_key(&session_id) {
            return Err(SessionError::DuplicateSessionId { session_id });
        }
        let mut fsm = EngineFsm::new();
        fsm.handle(EngineEvent::ConnectionRequestReceived)?;
        fsm.handle(EngineEvent::CapVerified)?;
        self.sessions.insert(
            session_id,
            Entry {
                peer,
                role,
                fsm,
                key_version: 1,
                established_at_unix: now_unix,
                last_activity: now,
                revision: None,
                suspend_deadline: None,
            },
        );
        Ok(session_id)
    }

    /// SPEC FSM-1: feeds the session's engine one event of the negotiation
    /// and transfer phases; counts as traffic (SES-4). Returns the new state.
    pub fn handle_event(
        &mut self,
        session_id: SessionId,
        event: EngineEvent,
        now: Instant,
    ) -> Result<EngineState, SessionError> {
        match event {
            EngineEvent::RequestFrameSentOrReceived
            | EngineEvent::AgreementReached
            | EngineEvent::NegotiationFailed
            | EngineEvent::FragmentSent
            | EngineEvent::AdjustmentRequestReceived
            | EngineEvent::AgreementEndedNoOtherActive
            | EngineEvent::ResumeHandshakeDone => {}
            _ => return Err(SessionError::DedicatedEntryPoint { event }),
        }
        let entry = self.entry_mut(session_id)?;
        entry.fsm.handle(event)?;
        entry.last_activity = now;
        Ok(entry.fsm.state())
    }

    /// SPEC SES-4: traffic was seen on the session (any frame sent or
    /// received); restarts its idle timer.
    pub fn touch(&mut self, session_id: SessionId, now: Instant) -> Result<(), SessionError> {
        self.entry_mut(session_id)?.last_activity = now;
        Ok(())
    }

    /// SPEC SES-2, SEQ-5: the connection dropped while transmitting:
    /// persists the session and suspends it. On a store error the session
    /// stays as it was (Transmitting) and the driver should close it.
    pub fn suspend(
        &mut self,
        session_id: SessionId,
        agreements: AgreementSnapshot,
        positions: ResumePositions,
        now: Instant,
        now_unix: u64,
    ) -> Result<Revision, SessionError> {
        let suspend_timeout = self.config.suspend_timeout;
        let Some(entry) = self.sessions.get_mut(&session_id) else {
            return Err(SessionError::UnknownSession { session_id });
        };
        let mut fsm = entry.fsm.clone();
        // Only Transmitting's row persists: SessionEstablished's loss row
        // closes the session, which is the driver's `close`, not a suspend.
        if fsm.handle(EngineEvent::ConnectionLost)? != Action::PersistSession {
            return Err(SessionError::Illegal(IllegalTransition {
                state: entry.fsm.state(),
                event: EngineEvent::ConnectionLost,
            }));
        }
        let snapshot = SessionSnapshot {
            session_id,
            peer: entry.peer.clone(),
            role: entry.role,
            agreements,
            positions,
            key_version: entry.key_version,
            established_at_unix: entry.established_at_unix,
            suspended_at_unix: now_unix,
            expires_at_unix: now_unix.saturating_add(suspend_timeout.as_secs()),
            live: false,
        };
        let revision = self.store.save(&snapshot, entry.revision)?;
        entry.fsm = fsm;
        entry.revision = Some(revision);
        entry.suspend_deadline = Some(now + suspend_timeout);
        Ok(revision)
    }

    /// SPEC SES-3, SEQ-5: the connection is back and CAP re-verified `peer`
    /// on it: restores the session (Suspended → Resuming) if it is `peer`'s,
    /// bumping the key version. The session may have been suspended on this
    /// manager or, through a shared store, on another.
    pub fn restore(
        &mut self,
        session_id: SessionId,
        peer: &PeerIdentity,
        now: Instant,
        now_unix: u64,
    ) -> Result<RestoredSession, SessionError> {
        let refuse = |reason| SessionError::ResumeRefused { session_id, reason };
        let local = self.sessions.get(&session_id);
        if let Some(entry) = local {
            if entry.fsm.state() != EngineState::Suspended {
                return Err(refuse(ResumeRefusal::NotSuspended));
            }
            if entry.peer != *peer {
                return Err(refuse(ResumeRefusal::PeerMismatch));
            }
        } else if self.sessions.len() >= self.config.max_sessions {
            return Err(SessionError::TooManySessions {
                max: self.config.max_sessions,
            });
        }
        let Some((snapshot, revision)) = self.store.load(session_id)? else {
            return Err(refuse(ResumeRefusal::UnknownSession));
        };
        if snapshot.peer != *peer {
            return Err(refuse(ResumeRefusal::PeerMismatch));
        }
        if snapshot.live {
            return Err(refuse(ResumeRefusal::NotSuspended));
        }
        // Fencing: a manager that suspended the session expects its own
        // revision; if another wrote since, this one is the stale writer.
        let expected = self
            .sessions
            .get(&session_id)
            .and_then(|e| e.revision)
            .unwrap_or(revision);
        if now_unix > snapshot.expires_at_unix {
            // Best effort: the record is useless now.
            let _ = self.store.delete(session_id, revision);
            self.sessions.remove(&session_id);
            return Err(refuse(ResumeRefusal::Expired));
        }
        let Some(key_version) = snapshot.key_version.checked_add(1) else {
            return Err(refuse(ResumeRefusal::KeyVersionsExhausted));
        };
        let mut updated = snapshot.clone();
        updated.key_version = key_version;
        updated.live = true;
        let revision = self.store.save(&updated, Some(expected))?;
        let mut fsm = match self.sessions.get(&session_id) {
            Some(entry) => entry.fsm.clone(),
            None => EngineFsm::persisted_suspended(),
        };
        fsm.handle(EngineEvent::ConnectionBackCapReverified)?;
        self.sessions.insert(
            session_id,
            Entry {
                peer: snapshot.peer,
                role: snapshot.role,
                fsm,
                key_version,
                established_at_unix: snapshot.established_at_unix,
                last_activity: now,
                revision: Some(revision),
                suspend_deadline: None,
            },
        );
        Ok(RestoredSession {
            session_id,
            role: snapshot.role,
            agreements: snapshot.agreements,
            positions: snapshot.positions,
            key_version,
            revision,
        })
    }

    /// SPEC SEQ-5: the resume handshake failed: Resuming → Idle, the session
    /// is closed and its record deleted.
    pub fn resume_failed(&mut self, session_id: SessionId) -> Result<(), SessionError> {
        let entry = self.entry_mut(session_id)?;
        entry.fsm.handle(EngineEvent::ResumeFailed)?;
        self.remove(session_id);
        Ok(())
    }

    /// SPEC SES-1: closes the session in whatever state it is, deleting its
    /// stored record.
    pub fn close(&mut self, session_id: SessionId) -> Result<(), SessionError> {
        if !self.sessions.contains_key(&session_id) {
            return Err(SessionError::UnknownSession { session_id });
        }
        self.remove(session_id);
        Ok(())
    }

    /// SPEC SES-4: closes idle SessionEstablished sessions and releases
    /// suspended sessions past their deadline. Stops early (and resumes on
    /// the next call) while the event queue is full.
    pub fn handle_timeout(&mut self, now: Instant) {
        let idle = self.config.idle_timeout;
        let due: Vec<(SessionId, bool)> = self
            .sessions
            .iter()
            .filter_map(|(id, e)| match (e.fsm.state(), e.suspend_deadline) {
                (EngineState::Suspended, Some(deadline)) if deadline <= now => Some((*id, true)),
                (EngineState::SessionEstablished, _) if e.last_activity + idle <= now => {
                    Some((*id, false))
                }
                _ => None,
            })
            .collect();
        for (session_id, suspended) in due {
            if self.events.len() >= self.config.max_queued_events {
                return;
            }
            let Some(entry) = self.sessions.get_mut(&session_id) else {
                continue;
            };
            if entry.fsm.handle(EngineEvent::SessionTimeout).is_err() {
                continue;
            }
            self.remove(session_id);
            self.events.push_back(if suspended {
                SessionEvent::SuspendExpired { session_id }
            } else {
                SessionEvent::IdleTimeout { session_id }
            });
        }
    }

    // ----- outputs -----

    /// When [`SessionManager::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let idle = self.config.idle_timeout;
        self.sessions
            .values()
            .filter_map(|e| match e.fsm.state() {
                EngineState::Suspended => e.suspend_deadline,
                EngineState::SessionEstablished => Some(e.last_activity + idle),
                _ => None,
            })
            .min()
    }

    /// The next event for the driver, if any.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    // ----- internals -----

    fn entry_mut(&mut self, session_id: SessionId) -> Result<&mut Entry, SessionError> {
        self.sessions
            .get_mut(&session_id)
            .ok_or(SessionError::UnknownSession { session_id })
    }

    /// Drops the session and (best effort) its record.
    fn remove(&mut self, session_id: SessionId) {
        if let Some(entry) = self.sessions.remove(&session_id)
            && let Some(revision) = entry.revision
        {
            // A failed delete leaves a record that expires_at_unix refuses.
            let _ = self.store.delete(session_id, revision);
        }
    }
}
