//! SPEC SES-2, SES-3: the registry of suspended sessions that the shards of
//! a gateway share, so that a reconnect landing on another core finds its
//! session.
//!
//! Why a mutex: the registry is touched only at connect and disconnect —
//! insert when a connection is lost, take when a Fay asks to resume, expire
//! on a slow timer — never per frame. Those events are rare next to frames,
//! each holds the lock for one map operation, and the hot path (frames of a
//! live connection) never sees the registry. A lock-free map would buy
//! nothing measurable and cost clarity.
//!
//! A poisoned lock (a panic elsewhere while holding it) is recovered: each
//! operation is a single map call, so the map is never left half-updated.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use dtp_codec::{ErrorCode, SessionId};

use crate::SuspendedSession;

/// SPEC SES-2: a bounded, thread-safe map of suspended sessions by
/// Session_ID, each with its expiry (the endpoint's `suspend_timeout`),
/// and the resume requests waiting for a session not parked yet.
#[derive(Debug)]
pub struct SessionRegistry {
    state: Mutex<State>,
    max_sessions: usize,
}

#[derive(Debug, Default)]
struct State {
    sessions: HashMap<SessionId, SuspendedSession>,
    /// Resume requests that found no session, by the id they wait for;
    /// at most `max_sessions` in all.
    waiting: HashMap<SessionId, Vec<ResumeWaiter>>,
    waiters: usize,
}

/// SPEC SES-3: a resume request waiting for its session to be parked (the
/// old connection's end not yet seen by the core that held it): called
/// once when a session with that id is parked, from the thread that parks
/// it. Dropped unused when its deadline passes.
pub struct ResumeWaiter {
    until: Instant,
    wake: Box<dyn FnOnce() + Send>,
}

impl ResumeWaiter {
    /// A waiter that runs `wake` when the session is parked, and is
    /// forgotten after `until` (the request's grace, [`RESUME_GRACE`]).
    pub fn new(until: Instant, wake: impl FnOnce() + Send + 'static) -> Self {
        Self {
            until,
            wake: Box::new(wake),
        }
    }
}

impl fmt::Debug for ResumeWaiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResumeWaiter")
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

/// SPEC SES-3: what [`SuspendedSessions::take_or_wait`] found.
#[derive(Debug)]
pub enum Taken {
    /// The session, taken (boxed: the other answers carry nothing).
    Session(Box<SuspendedSession>),
    /// Not here; the waiter runs once it is parked.
    Waiting,
    /// Not here, and the store will not say when it is: look again later.
    Absent,
}

/// The registry holds its most sessions: the session is handed back.
#[derive(Debug)]
pub struct RegistryFull {
    /// The ceiling.
    pub max: usize,
    /// The session that did not fit.
    pub session: Box<SuspendedSession>,
}

impl RegistryFull {
    /// The wire code (LIMIT_EXCEEDED).
    pub fn code(&self) -> ErrorCode {
        ErrorCode::LIMIT_EXCEEDED
    }
}

impl fmt::Display for RegistryFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} the session registry holds its ceiling of {} suspended sessions; session {} cannot be kept (raise the ceiling or lower suspend_timeout)",
            self.code(),
            self.max,
            self.session.session_id()
        )
    }
}

impl std::error::Error for RegistryFull {}

/// SPEC SES-2: why a [`SuspendedSessions`] store could not keep a session.
#[derive(Debug, thiserror::Error)]
pub enum ParkError {
    /// The store holds its most sessions.
    #[error("the store holds its ceiling of {max} suspended sessions")]
    Full {
        /// The ceiling.
        max: usize,
    },
    /// The session's persisted form is over the store's per-session bound.
    #[error("the session's {len} bytes exceed the store's {max} bytes per session")]
    TooLarge {
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The store failed (e.g. a file could not be written).
    #[error("the session store failed: {0}")]
    Store(String),
}

impl ParkError {
    /// The wire code: LIMIT_EXCEEDED for a bound, INTERNAL for a failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Full { .. } | Self::TooLarge { .. } => ErrorCode::LIMIT_EXCEEDED,
            Self::Store(_) => ErrorCode::INTERNAL,
        }
    }
}

/// SPEC SES-2: a session [`SuspendedSessions::park`] could not keep, handed
/// back with the reason.
#[derive(Debug)]
pub struct ParkRefused {
    /// Why.
    pub error: ParkError,
    /// The session, untouched.
    pub session: Box<SuspendedSession>,
}

impl fmt::Display for ParkRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} suspended session {} not kept: {}",
            self.error.code(),
            self.session.session_id(),
            self.error
        )
    }
}

impl std::error::Error for ParkRefused {}

impl From<RegistryFull> for ParkRefused {
    fn from(full: RegistryFull) -> Self {
        Self {
            error: ParkError::Full { max: full.max },
            session: full.session,
        }
    }
}

/// SPEC SES-2: where suspended sessions wait for their Fay to come back,
/// shared by every shard of a gateway (a reconnect may land on any core).
///
/// [`SessionRegistry`] (in memory, bounded) is the default;
/// a gateway's directory store keeps them in files that
/// outlive the process. A gateway with other needs — a registry sharded by
/// session id, a database — implements this (with
/// [`SuspendedSession::to_bytes`] and [`SuspendedSession::from_bytes`] for
/// storage) and hands it to the gateway's service.
/// Called only when a connection ends or a resume is asked for, never per
/// frame.
pub trait SuspendedSessions: Send + Sync {
    /// Keeps a suspended session until it is taken or expires; hands it
    /// back when there is no room or the store fails.
    fn park(&self, session: SuspendedSession, now: Instant) -> Result<(), ParkRefused>;
    /// Takes the session with this id to resume it; `None` when unknown or
    /// expired. A taken session is gone, so two connections cannot resume
    /// it at once.
    fn take(&self, session_id: SessionId, now: Instant) -> Option<SuspendedSession>;
    /// Releases every expired session; returns how many.
    fn expire(&self, now: Instant) -> usize;

    /// As [`SuspendedSessions::take`]; when the session is not here, keeps
    /// `waiter` to run once a session with this id is parked
    /// ([`Taken::Waiting`]), in the same step, so that a park between the
    /// look and the wait cannot be missed. The default keeps no waiter
    /// ([`Taken::Absent`]): the caller looks again on a timer.
    fn take_or_wait(&self, session_id: SessionId, now: Instant, waiter: ResumeWaiter) -> Taken {
        let _ = waiter;
        match self.take(session_id, now) {
            Some(s) => Taken::Session(Box::new(s)),
            None => Taken::Absent,
        }
    }
}

impl SuspendedSessions for SessionRegistry {
    fn park(&self, session: SuspendedSession, now: Instant) -> Result<(), ParkRefused> {
        Ok(self.insert(session, now)?)
    }

    fn take(&self, session_id: SessionId, now: Instant) -> Option<SuspendedSession> {
        SessionRegistry::take(self, session_id, now)
    }

    fn expire(&self, now: Instant) -> usize {
        SessionRegistry::expire(self, now)
    }

    fn take_or_wait(&self, session_id: SessionId, now: Instant, waiter: ResumeWaiter) -> Taken {
        SessionRegistry::take_or_wait(self, session_id, now, waiter)
    }
}

impl SessionRegistry {
    /// An empty registry holding at most `max_sessions` sessions.
    pub fn new(max_sessions: usize) -> Self {
        Self {
            state: Mutex::new(State::default()),
            max_sessions,
        }
    }

    /// SPEC SES-2: keeps a suspended session until it is taken or expires.
    /// At the ceiling, expired sessions are dropped first; if none is, the
    /// session is handed back. A session with the same id replaces the
    /// older one (one connection per session: the older is stale).
    ///
    /// Requests waiting for this id ([`SessionRegistry::take_or_wait`]) are
    /// woken, after the lock is let go.
    pub fn insert(&self, session: SuspendedSession, now: Instant) -> Result<(), RegistryFull> {
        let mut state = self.lock();
        let id = session.session_id();
        if !state.sessions.contains_key(&id) && state.sessions.len() >= self.max_sessions {
            state.expire(now);
            if state.sessions.len() >= self.max_sessions {
                return Err(RegistryFull {
                    max: self.max_sessions,
                    session: Box::new(session),
                });
            }
        }
        state.sessions.insert(id, session);
        let waiting = state.waiting.remove(&id).unwrap_or_default();
        state.waiters -= waiting.len();
        drop(state);
        for w in waiting {
            (w.wake)();
        }
        Ok(())
    }

    /// SPEC SES-3: takes the session, or keeps `waiter` to run when a
    /// session with this id is parked ([`Taken::Waiting`]) — in one step,
    /// so no park falls between. With `max_sessions` waiters already kept,
    /// keeps none ([`Taken::Absent`]: the caller looks again later).
    pub fn take_or_wait(&self, session_id: SessionId, now: Instant, waiter: ResumeWaiter) -> Taken {
        let mut state = self.lock();
        if let Some(session) = state.sessions.remove(&session_id) {
            drop(state);
            if session.is_expired(now) {
                session.expire();
                return Taken::Absent;
            }
            return Taken::Session(Box::new(session));
        }
        if state.waiters >= self.max_sessions {
            state.expire(now);
            if state.waiters >= self.max_sessions {
                return Taken::Absent;
            }
        }
        state.waiting.entry(session_id).or_default().push(waiter);
        state.waiters += 1;
        Taken::Waiting
    }

    /// SPEC SES-3: takes the session to resume it (see
    /// [`DtpEndpoint::resume_with`](crate::DtpEndpoint::resume_with), which
    /// checks the peer); `None` when unknown or expired (an expired one is
    /// released). A taken session is no longer here, so a second
    /// connection cannot resume it at the same time.
    pub fn take(&self, session_id: SessionId, now: Instant) -> Option<SuspendedSession> {
        let session = self.lock().sessions.remove(&session_id)?;
        if session.is_expired(now) {
            session.expire();
            return None;
        }
        Some(session)
    }

    /// SPEC SES-2: releases every session whose suspend timeout passed
    /// (FSM Suspended → Idle), and forgets the waiters whose grace passed;
    /// returns how many sessions.
    pub fn expire(&self, now: Instant) -> usize {
        self.lock().expire(now)
    }

    /// The earliest expiry, for the driver's timer.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.lock()
            .sessions
            .values()
            .filter_map(SuspendedSession::expires_at)
            .min()
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.lock().sessions.is_empty()
    }

    /// Resume requests waiting for a session ([`SessionRegistry::take_or_wait`]).
    pub fn waiting(&self) -> usize {
        self.lock().waiters
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn expire(&mut self, now: Instant) -> usize {
        let due: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.is_expired(now))
            .map(|(id, _)| *id)
            .collect();
        for id in &due {
            if let Some(session) = self.sessions.remove(id) {
                session.expire();
            }
        }
        if self.waiters > 0 {
            self.waiting.retain(|_, ws| {
                ws.retain(|w| w.until > now);
                !ws.is_empty()
            });
            self.waiters = self.waiting.values().map(Vec::len).sum();
        }
        due.len()
    }
}

/// How long a resume request waits for its session to be parked. A Fay
/// that saw its connection cut reconnects at once, often to another core,
/// and may ask for its session before the old connection's end has reached
/// the core that held it; that core parks the session as soon as it does.
pub const RESUME_GRACE: Duration = Duration::from_secs(2);

/// How often a waiting resume request looks for its session again when
/// the store cannot wake it ([`Taken::Absent`]); a store that can
/// ([`SessionRegistry`]) wakes it the moment the session is parked.
pub const RESUME_POLL: Duration = Duration::from_millis(1);
