//! [`Terminal`]: the one state machine of the terminal control plane
//! (SPEC §2–3), driven by the control thread.
//!
//! Inputs are methods taking `now` ([`Terminal::handle`] for what
//! connections send, the admin and policy methods for the rest); outputs
//! are polled. Driver loop, in the manner of quinn-proto:
//!
//! 1. feed inputs as they come (`handle`, `policy_decided`,
//!    `os_access_done`, `revoke`, …);
//! 2. drain [`Terminal::poll_output`] until `None` after every input;
//! 3. call [`Terminal::handle_timeout`] when [`Terminal::poll_timeout`]'s
//!    instant is reached, and drain again.
//!
//! Every input first runs the timers that are due at its `now`, so the
//! result never depends on how punctually step 3 is run.

mod create;
mod decide;
mod evaluate;
mod handover;
mod liveness;
mod os_ops;
mod remote;
mod sequence;
mod terminate;
mod timers;
mod views;

pub use handover::{AdminHandover, HandoverAdmission, HandoverPhase, PolicyAnswerError};
pub use os_ops::UnknownOsOp;
pub use remote::{MAX_REMOTE_WAITS, REMOTE_SLACK_MS, RemoteAnswer, RemoteHandover, UnknownRemote};
pub use views::{HandoverInfo, ResourceInfo, SessionInfo};

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};
use std::sync::Arc;

use dtp_codec::{
    AccessMode, ControlMessage, ErrorCode, SessionId, SessionState, SessionStateChanged,
};
use dtp_crypto::cred::{SignatureCache, VerifiedCredential, Verifier};

use crate::config::{ConfigError, HUMAN_PREFIX, TerminalConfig};
use crate::occupancy::Resource;
use crate::os_access::{AccessGrant, OsAccess};
use crate::output::{ConnKey, Output, Refusal, RequestKind, StateChange};
use crate::session::{SessionEvent, TerminationReason, transition};
use crate::time::{RandomSource, UnixMs};

use handover::{Evaluation, HandoverRequest};

/// SPEC HO-8: the most targets one source session's handover attempts
/// are counted for; a request naming yet another target is refused with
/// `E_HANDOVER_RETRY_LIMIT` (the count of a peer's attempts is bounded,
/// whatever target ids it makes up).
pub const MAX_TARGETS_PER_SOURCE: usize = 16;

/// A stable fingerprint of a target Fay id, for the attempt counts.
pub(crate) fn target_key(fay_id: &str) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    h.write(fay_id.as_bytes());
    h.finish()
}

/// What a connection can tell the terminal (the engine's `Request`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// SPEC LIV-1: the connection is up.
    Up(ConnKey),
    /// SPEC LIV-1: the connection is down (alone, never the end of a session).
    Down(ConnKey),
    /// The connection sent a control-plane message.
    Message(ConnKey, ControlMessage),
}

/// SPEC TS-8: who holds a session.
#[derive(Clone, Debug)]
pub(crate) enum Holder {
    /// A Fay, with the credential its session was granted on (TS-16).
    Fay(Arc<str>, VerifiedCredential),
    /// The terminal's human user, `human:<terminal_id>` (HO-9).
    Human(Arc<str>),
}

impl Holder {
    pub(crate) fn id(&self) -> &str {
        self.shared_id()
    }

    /// The id, shared (a copy is a reference count).
    pub(crate) fn shared_id(&self) -> &Arc<str> {
        match self {
            Holder::Fay(id, _) | Holder::Human(id) => id,
        }
    }
}

/// SPEC LIV-1, LIV-4: where a session's runtime is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// On this connection, which is up.
    Conn(ConnKey),
    /// Its connection has been down since then.
    Detached(UnixMs),
    /// Held by the human user's OS process: no connection, no liveness.
    Local,
}

/// One live (not yet terminated) session.
#[derive(Clone, Debug)]
pub(crate) struct SessionRecord {
    pub(crate) id: SessionId,
    pub(crate) holder: Holder,
    pub(crate) resource_id: Arc<str>,
    pub(crate) mode: AccessMode,
    pub(crate) state: SessionState,
    pub(crate) binding: Binding,
    pub(crate) created_at: UnixMs,
    /// The fencing token of its grant, if the access control issued one.
    pub(crate) fencing: Option<u64>,
    /// When it last left the active state, if it was ever active.
    pub(crate) active_until: Option<UnixMs>,
    pub(crate) last_heartbeat_at: UnixMs,
    /// SPEC LIV-3: the highest sequence number seen.
    pub(crate) max_seq: Option<u64>,
    pub(crate) reason: Option<TerminationReason>,
    /// Terminating with a failed OS revoke: when to try again.
    pub(crate) revoke_retry_at: Option<UnixMs>,
    /// Whether its runtime knows the id (AuthResult sent), so that
    /// SessionStateChanged is worth sending.
    pub(crate) announced: bool,
}

impl SessionRecord {
    pub(crate) fn grant(&self) -> AccessGrant {
        AccessGrant {
            session_id: self.id,
            resource_id: self.resource_id.clone(),
            access_mode: self.mode,
            holder: self.holder.shared_id().clone(),
        }
    }

    pub(crate) fn conn(&self) -> Option<ConnKey> {
        match self.binding {
            Binding::Conn(c) => Some(c),
            _ => None,
        }
    }
}

/// SPEC LIV-5: an ended session, remembered for E_SESSION_TERMINATED.
#[derive(Clone, Debug)]
pub(crate) struct Tombstone {
    pub(crate) fay_id: Arc<str>,
    pub(crate) reason: TerminationReason,
    /// The one SessionStateChanged LIV-5 allows after death was sent.
    pub(crate) notified: bool,
}

/// SPEC §2–3: the terminal's sessions, liveness and handovers, sans-IO.
///
/// `A` is the OS access control (SPEC TS-4): called inline when it answers
/// at once, else asked of the driver ([`Output::OsAccess`], answered with
/// [`Terminal::os_access_done`]). The terminal never reads a clock, never
/// draws global randomness and never does IO (apart from what an inline
/// `A` does inside a transition).
pub struct Terminal<A: OsAccess> {
    pub(crate) config: TerminalConfig,
    pub(crate) verifier: Verifier,
    /// Credentials whose signature already checked out: a Fay presents the
    /// same one with every AuthRequest, and the Ed25519 check was most of
    /// the control thread's time per decision.
    pub(crate) signatures: SignatureCache,
    pub(crate) access: A,
    pub(crate) random: Box<dyn RandomSource + Send>,
    pub(crate) resources: BTreeMap<Arc<str>, Resource>,
    pub(crate) sessions: BTreeMap<SessionId, SessionRecord>,
    /// SPEC TS-17: how many of `sessions` each holder has, so that the
    /// per-Fay limit is a lookup, not a count of the whole table on every
    /// AuthRequest. A count that falls to zero stays until the map holds
    /// twice as many entries as there are sessions (plus 1,024), then the
    /// zeros are pruned: a Fay holding one session at a time costs no
    /// allocation per decision, and the map stays bounded.
    pub(crate) per_holder: BTreeMap<String, u32>,
    pub(crate) tombstones: BTreeMap<SessionId, Tombstone>,
    pub(crate) tomb_order: VecDeque<SessionId>,
    /// Connections that are up, and the Fays known to speak on each.
    pub(crate) conns: BTreeMap<ConnKey, BTreeSet<Arc<str>>>,
    /// The latest connection each Fay was seen on (handover targets).
    pub(crate) last_conn_of: BTreeMap<Arc<str>, ConnKey>,
    /// SPEC HO-6: the handover being evaluated, per resource.
    pub(crate) evaluations: BTreeMap<String, Evaluation>,
    /// SPEC HO-6: the requests waiting behind it, FIFO.
    pub(crate) queues: BTreeMap<String, VecDeque<HandoverRequest>>,
    /// SPEC HO-8: attempts per (source session, target Fay), the target
    /// by a fingerprint of its id (a peer-chosen string of up to the
    /// codec's limit is not kept), at most [`MAX_TARGETS_PER_SOURCE`] per
    /// source.
    pub(crate) attempts: BTreeMap<(SessionId, u64), (u32, UnixMs)>,
    /// SPEC TS-4: OS operations asked of the driver and not yet answered
    /// (at most one per live session).
    pub(crate) ops: BTreeMap<crate::os_access::OsOpId, os_ops::PendingOp>,
    /// AuthRequests waiting for another gateway's answer (module `remote`),
    /// at most [`MAX_REMOTE_WAITS`].
    pub(crate) remote_waits: BTreeMap<uuid::Uuid, remote::RemoteWait>,
    pub(crate) next_op: u64,
    pub(crate) out: VecDeque<Output>,
    pub(crate) next_timer: Option<UnixMs>,
    /// Session timers by due instant, earliest on top; entries may be
    /// stale (module `timers`).
    pub(crate) timers: BinaryHeap<Reverse<(UnixMs, SessionId)>>,
}

impl<A: OsAccess> Terminal<A> {
    /// A terminal with a validated `config`, the credential `verifier`
    /// (trusted issuers, revocation list), its OS access control and its
    /// random source.
    pub fn new(
        config: TerminalConfig,
        verifier: Verifier,
        access: A,
        random: Box<dyn RandomSource + Send>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let resources = config
            .resources
            .iter()
            .map(|r| (Arc::from(r.resource_id.as_str()), Resource::new(r.clone())))
            .collect();
        Ok(Terminal {
            config,
            verifier,
            signatures: SignatureCache::default(),
            access,
            random,
            resources,
            sessions: BTreeMap::new(),
            per_holder: BTreeMap::new(),
            tombstones: BTreeMap::new(),
            tomb_order: VecDeque::new(),
            conns: BTreeMap::new(),
            last_conn_of: BTreeMap::new(),
            evaluations: BTreeMap::new(),
            queues: BTreeMap::new(),
            attempts: BTreeMap::new(),
            ops: BTreeMap::new(),
            remote_waits: BTreeMap::new(),
            next_op: 1,
            out: VecDeque::new(),
            next_timer: None,
            timers: BinaryHeap::new(),
        })
    }

    /// Handles one input from a connection.
    pub fn handle(&mut self, input: Input, now: UnixMs) {
        match input {
            Input::Up(conn) => self.connection_up(conn, now),
            Input::Down(conn) => self.connection_down(conn, now),
            Input::Message(conn, msg) => self.handle_message(conn, msg, now),
        }
    }

    /// SPEC LIV-1: a connection is up.
    pub fn connection_up(&mut self, conn: ConnKey, now: UnixMs) {
        self.begin(now);
        self.conns.entry(conn).or_default();
        self.end();
    }

    /// Tells the terminal which Fay authenticated `conn` (its CAP
    /// credential). Drivers should call it after CAP: a runtime that
    /// reconnects can only rebind its sessions (by heartbeat) on a
    /// connection known to speak for its Fay. Connections also learn their
    /// Fay from each AuthRequest whose credential verifies.
    pub fn identify(&mut self, conn: ConnKey, fay_id: &str, now: UnixMs) -> Result<(), Refusal> {
        if fay_id.starts_with(HUMAN_PREFIX) || fay_id.is_empty() {
            return Err(Refusal::new(
                RequestKind::Admin,
                None,
                ErrorCode::E_UNAUTHORIZED,
                format!("{fay_id:?} is not a Fay id"),
            ));
        }
        self.begin(now);
        self.learn(conn, fay_id);
        self.end();
        Ok(())
    }

    /// Handles a control-plane message from a runtime.
    pub fn handle_message(&mut self, conn: ConnKey, msg: ControlMessage, now: UnixMs) {
        self.begin(now);
        self.conns.entry(conn).or_default();
        match msg {
            ControlMessage::AuthRequest(req) => self.on_auth_request(conn, req, now, false),
            ControlMessage::Heartbeat(hb) => self.on_heartbeat(conn, hb, now),
            ControlMessage::SessionRelease(r) => self.on_release(conn, r.session_id, now),
            ControlMessage::SessionTransferRequest(t) => self.on_transfer(conn, t, now),
            other => self.out.push_back(Output::Close {
                conn,
                code: ErrorCode::INVALID_VALUE,
                reason: format!("{} is sent by terminals, not to them", other.name()),
            }),
        }
        self.end();
    }

    /// Runs the timers due at `now`: credential expiry (TS-16), liveness
    /// (LIV-4), revoke retries (TS-12) and handover deadlines (HO-7).
    pub fn handle_timeout(&mut self, now: UnixMs) {
        self.run_timers(now);
        self.end();
    }

    /// The next instant [`Terminal::handle_timeout`] has work, if any.
    pub fn poll_timeout(&self) -> Option<UnixMs> {
        self.next_timer
    }

    /// The next decision, oldest first.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// The OS access control (for inspection).
    pub fn access(&self) -> &A {
        &self.access
    }

    /// The OS access control (for test doubles that are told to fail).
    pub fn access_mut(&mut self) -> &mut A {
        &mut self.access
    }

    /// The credential verifier.
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// The configuration.
    pub fn config(&self) -> &TerminalConfig {
        &self.config
    }

    pub(crate) fn begin(&mut self, now: UnixMs) {
        if self.next_timer.is_some_and(|t| t <= now) {
            self.run_timers(now);
        }
    }

    pub(crate) fn end(&mut self) {
        self.next_timer = self.compute_next_timer();
    }

    /// Records that `conn` speaks for `fay_id`.
    pub(crate) fn learn(&mut self, conn: ConnKey, fay_id: &str) {
        // Known pairs (every request after a connection's first) are
        // looked up, not copied: no allocation per decision.
        let shared = match self.last_conn_of.get_key_value(fay_id) {
            Some((id, _)) => id.clone(),
            None => Arc::from(fay_id),
        };
        let fays = self.conns.entry(conn).or_default();
        if !fays.contains(fay_id) {
            fays.insert(shared.clone());
        }
        self.last_conn_of.insert(shared, conn);
    }

    /// The id of a Fay [`Terminal::learn`] has seen, shared (a session's
    /// holder then copies no text); a new one otherwise.
    pub(crate) fn shared_fay_id(&self, fay_id: String) -> Arc<str> {
        match self.last_conn_of.get_key_value(fay_id.as_str()) {
            Some((id, _)) => id.clone(),
            None => fay_id.into(),
        }
    }

    /// Whether `conn` may act for the holder of `rec`.
    pub(crate) fn speaks_for(&self, conn: ConnKey, holder: &str) -> bool {
        self.conns.get(&conn).is_some_and(|f| f.contains(holder))
    }

    /// Queues `msg` for `conn` if that connection is up.
    pub(crate) fn send(&mut self, conn: Option<ConnKey>, msg: ControlMessage) {
        if let Some(conn) = conn.filter(|c| self.conns.contains_key(c)) {
            self.out.push_back(Output::Send { conn, msg });
        }
    }

    pub(crate) fn refuse(&mut self, conn: ConnKey, refusal: Refusal) {
        self.out.push_back(Output::Refused { conn, refusal });
    }

    /// Applies one TS-1 event to a live session and tells observers (and its
    /// runtime, for the TS-15 transitions, once it knows the session).
    /// Callers check the state first: an illegal event is a bug, caught in
    /// debug builds and otherwise refused without any change.
    pub(crate) fn step(&mut self, id: SessionId, event: SessionEvent, now: UnixMs) -> bool {
        let Some(rec) = self.sessions.get_mut(&id) else {
            return false;
        };
        let from = rec.state;
        let to = match transition(from, event) {
            Ok(to) => to,
            Err(e) => {
                debug_assert!(false, "{e}");
                return false;
            }
        };
        rec.state = to;
        if from == SessionState::Active && to != SessionState::Active {
            rec.active_until = Some(now);
        }
        match event {
            SessionEvent::Terminate(r) => rec.reason = Some(r),
            SessionEvent::HandoverSucceeded => rec.reason = Some(TerminationReason::HandedOver),
            // The source could not get its resource back (HO-7, shared
            // occupancy): not handed over, its resource went elsewhere.
            SessionEvent::HandoverTimedOut => {
                rec.reason = Some(TerminationReason::ResourceUnavailable);
            }
            SessionEvent::InitFailed => rec.reason = Some(TerminationReason::CreationFailed),
            _ => {}
        }
        let change = StateChange {
            session_id: id,
            fay_id: rec.holder.shared_id().clone(),
            resource_id: rec.resource_id.clone(),
            access_mode: rec.mode,
            from: Some(from),
            to,
            reason: rec
                .reason
                .filter(|_| matches!(to, SessionState::Terminating | SessionState::Terminated)),
            at: now,
        };
        let notify = (rec.announced && from != SessionState::Creating).then(|| {
            let msg = ControlMessage::SessionStateChanged(state_changed(id, to, change.reason));
            (rec.conn(), msg)
        });
        self.out.push_back(Output::StateChanged(change));
        if let Some((conn, msg)) = notify {
            self.send(conn, msg);
        }
        if to == SessionState::Active {
            // Created, or a handover rolled back: its timers run again.
            self.arm(id);
        }
        true
    }
}

/// A SessionStateChanged message.
pub(crate) fn state_changed(
    session_id: SessionId,
    new_state: SessionState,
    reason: Option<TerminationReason>,
) -> SessionStateChanged {
    SessionStateChanged {
        session_id,
        new_state,
        reason: reason.map(|r| r.as_str().to_owned()),
        details: Default::default(),
    }
}
