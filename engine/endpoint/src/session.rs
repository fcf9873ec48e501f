//! SPEC SES-1 … SES-3, SEQ-5, RES-3: the session that lives on a
//! connection, what a lost connection leaves of it ([`SuspendedSession`]),
//! and the resume handshake that brings it back.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Instant;

use bytes::Bytes;
use dtp_codec::{AgreementId, Body, LogicalFrame, ResumeFrame, SessionId};
use dtp_proto::agreement::{AgreementManager, AgreementSnapshot, Role};
use dtp_proto::dag::DagManager;
use dtp_proto::fsm::{EngineEvent, EngineFsm, EngineState};
use dtp_proto::resume::{ResumeReceiver, ResumeSender};
use dtp_proto::session::PeerIdentity;

use super::endpoint::{DtpEndpoint, Ended, Held};
use super::transmit::Outgoing;
use super::{DtpError, DtpEvent, EndpointConfig};

/// The live session of a connection.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) id: SessionId,
    pub(super) peer: PeerIdentity,
    /// SPEC AGR: one Agreement Manager per session.
    pub(super) agreements: AgreementManager,
    /// SPEC RES-1, RES-2, RES-4: sequences and the cache of plaintext
    /// encoded data frames not yet acknowledged.
    pub(super) sender: ResumeSender<Bytes>,
    /// SPEC RES-2, RES-3: the receiving position and acks.
    pub(super) receiver: ResumeReceiver,
    /// SPEC DAG: one DAG Manager per agreement that received data.
    pub(super) dags: HashMap<AgreementId, DagManager<Held>>,
    /// Agreements ended lately (data still in flight for them is dropped).
    pub(super) recently_ended: VecDeque<AgreementId>,
}

impl Session {
    pub(super) fn new(id: SessionId, peer: PeerIdentity, config: &EndpointConfig) -> Self {
        Self {
            id,
            peer,
            agreements: AgreementManager::new(config.role, config.agreements),
            sender: ResumeSender::new(config.resume_cache),
            receiver: ResumeReceiver::new(config.ack),
            dags: HashMap::new(),
            recently_ended: VecDeque::new(),
        }
    }

    pub(super) fn remember_ended(&mut self, id: AgreementId, max: usize) {
        if max == 0 {
            return;
        }
        if self.recently_ended.len() >= max {
            self.recently_ended.pop_front();
        }
        self.recently_ended.push_back(id);
    }
}

/// SPEC SES-2, SEQ-5: a session whose connection was lost, with everything
/// needed to resume it on a new connection: the Session_ID, the peer CAP
/// authenticated, the agreements, the resume sender with its cached
/// plaintext frames, the receiver's position, the DAGs and the key version.
///
/// `Send`: the driver may keep it anywhere (a [`SessionRegistry`] shared by
/// the shards, on the terminal; beside its reconnect loop, on the Fay) and
/// resume it on any core. It holds no key material, and
/// [`SuspendedSession::to_bytes`] / [`SuspendedSession::from_bytes`] turn
/// it into bytes and back for storage that outlives the process (SES-2,
/// SES-3; the format is in `dtp/persist.rs`, a directory store in
/// `dtp_gateway::dtp::DirSessionStore`).
///
/// [`SessionRegistry`]: super::SessionRegistry
pub struct SuspendedSession {
    pub(super) session_id: SessionId,
    pub(super) role: Role,
    pub(super) peer: PeerIdentity,
    /// In Suspended.
    pub(super) fsm: EngineFsm,
    pub(super) agreements: AgreementSnapshot,
    pub(super) sender: ResumeSender<Bytes>,
    pub(super) receiver: ResumeReceiver,
    pub(super) dags: HashMap<AgreementId, DagManager<Held>>,
    pub(super) recently_ended: VecDeque<AgreementId>,
    pub(super) key_version: u16,
    pub(super) expires_at: Option<Instant>,
}

impl fmt::Debug for SuspendedSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SuspendedSession")
            .field("session_id", &self.session_id)
            .field("role", &self.role)
            .field("key_version", &self.key_version)
            .field("cached_fragments", &self.sender.cached_count())
            .field("highest_received", &self.receiver.highest_received())
            .finish_non_exhaustive()
    }
}

impl SuspendedSession {
    /// A terminal-side session suspended with no agreements and nothing
    /// cached, as a connection lost right after its session began leaves
    /// behind: what a session store is tested with (a real one comes from
    /// [`DtpEndpoint::connection_lost`]).
    pub fn empty(session_id: SessionId, peer: PeerIdentity, expires_at: Option<Instant>) -> Self {
        let mut fsm = EngineFsm::new();
        for e in [
            EngineEvent::ConnectionRequestReceived,
            EngineEvent::CapVerified,
            EngineEvent::RequestFrameSentOrReceived,
            EngineEvent::AgreementReached,
            EngineEvent::ConnectionLost,
        ] {
            // Each is the table's row from the state the one before left.
            let _ = fsm.handle(e);
        }
        Self {
            session_id,
            role: Role::Slave,
            peer,
            fsm,
            agreements: AgreementSnapshot::default(),
            sender: ResumeSender::new(dtp_proto::resume::SenderConfig::default()),
            receiver: ResumeReceiver::new(dtp_proto::resume::AckPolicy::default()),
            dags: HashMap::new(),
            recently_ended: VecDeque::new(),
            key_version: 1,
            expires_at,
        }
    }

    /// SPEC SEQ-2: the Session_ID.
    pub fn session_id(&self) -> SessionId {
        self.session_id
    }

    /// The peer CAP authenticated when the session began.
    pub fn peer(&self) -> &PeerIdentity {
        &self.peer
    }

    /// This side's DTP role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// SPEC FSM-1: the session's engine state (Suspended).
    pub fn state(&self) -> EngineState {
        self.fsm.state()
    }

    /// SPEC ENC-4: the key version of the last connection; a resume uses a
    /// higher one.
    pub fn key_version(&self) -> u16 {
        self.key_version
    }

    /// SPEC SES-2: after this instant the session may no longer be resumed
    /// (`suspend_timeout` after the loss).
    pub fn expires_at(&self) -> Option<Instant> {
        self.expires_at
    }

    /// Whether the suspend timeout passed at `now`.
    pub fn is_expired(&self, now: Instant) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }

    /// SPEC RES-2: fragments sent and not yet acknowledged (resent on
    /// resume if the peer did not get them).
    pub fn cached_fragments(&self) -> usize {
        self.sender.cached_count()
    }

    /// SPEC RES-3: the highest sequence received from the peer.
    pub fn highest_received(&self) -> u64 {
        self.receiver.highest_received()
    }

    /// SPEC DAG-2: received fragments still waiting in a DAG for a
    /// dependency (delivered once it arrives after the resume).
    pub fn waiting_fragments(&self) -> usize {
        self.dags.values().map(DagManager::waiting_count).sum()
    }

    /// SPEC SES-3: the agreements in force when the connection was lost.
    pub fn agreements(&self) -> &AgreementSnapshot {
        &self.agreements
    }

    /// SPEC FSM-1: the suspend timeout passed (a store that held the session
    /// drops it): Suspended → Idle, release.
    pub fn expire(mut self) {
        let _ = self.fsm.handle(EngineEvent::SessionTimeout);
    }
}

/// SPEC SEQ-5: a refused resume: the error (RESUME_FAILED for every refusal
/// of the session) and the session handed back untouched, so the driver can
/// keep it for its rightful peer.
#[derive(Debug)]
pub struct ResumeRefused {
    /// Why.
    pub error: DtpError,
    /// The session, as it was.
    pub session: Box<SuspendedSession>,
}

impl fmt::Display for ResumeRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "resume of session {} refused: {}",
            self.session.session_id, self.error
        )
    }
}

impl std::error::Error for ResumeRefused {}

impl DtpEndpoint {
    /// SPEC SEQ-5, SES-2: the transport dropped. A Transmitting session is
    /// suspended (FSM Transmitting → Suspended) and handed to the driver,
    /// and so is a Negotiating one with agreements in force (it settles
    /// first: Negotiating → Transmitting → Suspended); a session without an
    /// agreement ends. On the Fay, a session whose
    /// resume had not finished is handed back as it was. Frames not yet
    /// sent are dropped (the resume resends data, and agreement requests and
    /// answers in flight, as `dtp_proto::agreement` rules).
    pub fn connection_lost(&mut self, now: Instant) -> Option<SuspendedSession> {
        if self.ended.is_some() {
            return None;
        }
        self.transmit.clear();
        self.queued_frames = 0;
        self.pending_ack = None;
        if let Some(s) = self.resume_from.take() {
            // A resume attempt that did not finish: the session is as it was
            // (with the attempt's key version). The tentative machine goes.
            self.fsm = s.fsm.clone();
            self.end_lost();
            return Some(s);
        }
        let has_agreement = self
            .session
            .as_ref()
            .is_some_and(|s| s.agreements.agreements().next().is_some());
        let suspend = match self.fsm.state() {
            EngineState::Transmitting => true,
            // E.g. a peer's adjustment was undecided: the agreements in
            // force make the session worth resuming (module docs).
            EngineState::Negotiating => has_agreement,
            _ => false,
        };
        if let Some(s) = &mut self.session {
            s.agreements.on_connection_lost();
            if !suspend {
                // The session ends here: nothing will answer its requests.
                s.agreements.abandon_in_flight();
            }
        }
        self.drain_agreements();
        self.transmit.clear();
        self.queued_frames = 0;
        if suspend && self.fsm.state() == EngineState::Negotiating {
            // Requests of this side still in flight keep `settle` from
            // leaving Negotiating; they survive the break in the snapshot,
            // so the negotiation ends here with the agreements in force.
            self.feed(EngineEvent::AgreementReached);
        }
        let suspended = if suspend && self.feed(EngineEvent::ConnectionLost) {
            self.session.take().map(|s| self.suspend(s, now))
        } else {
            None
        };
        self.end_lost();
        suspended
    }

    /// Fay: the session a resume attempt did not get to resume (CAP failed,
    /// the terminal's key did not match), once the connection ended; keep
    /// it and try again on a new connection.
    pub fn take_suspended(&mut self) -> Option<SuspendedSession> {
        if self.ended.is_some() {
            self.resume_from.take()
        } else {
            None
        }
    }

    fn suspend(&self, s: Session, now: Instant) -> SuspendedSession {
        SuspendedSession {
            session_id: s.id,
            role: self.config.role,
            peer: s.peer,
            fsm: self.fsm.clone(),
            agreements: s.agreements.snapshot(),
            sender: s.sender,
            receiver: s.receiver,
            dags: s.dags,
            recently_ended: s.recently_ended,
            // The highest version either direction reached (rekeys included).
            key_version: self.key_version,
            expires_at: now.checked_add(self.config.suspend_timeout),
        }
    }

    fn end_lost(&mut self) {
        self.ended = Some(Ended::Lost);
        self.session = None;
        self.established = false;
        self.pending_keys = None;
        self.pending_resume = None;
        self.resume_deadline = None;
        self.cap = super::cap::Cap::Done;
        // SPEC FSM-1: the loss ends the machine through a row of the table.
        // Transmitting took its own (→ Suspended) in `connection_lost`;
        // Negotiating settled there (agreement reached, or failed into
        // SessionEstablished); a Fay's tentative Resuming machine was
        // swapped back for the suspended session's.
        let event = match self.fsm.state() {
            EngineState::WaitingForCap => Some(EngineEvent::CapFailedOrTimeout),
            // SPEC.md's row for the seed's gap: nothing to resume, close.
            EngineState::SessionEstablished => Some(EngineEvent::ConnectionLost),
            _ => None,
        };
        let moved = event.is_some_and(|e| self.feed(e));
        let state = self.fsm.state();
        if !moved && !matches!(state, EngineState::Suspended | EngineState::Idle) {
            // Not reached by the paths above. FSM-2: no jump outside the
            // table either; the state stays, and `is_closed` tells the end.
            tracing::debug!(%state, "connection lost in a state without a loss row");
        }
    }

    /// SPEC SEQ-5 (terminal): resumes `session` on this connection, after
    /// [`DtpEvent::ResumeRequested`]. Checks that it is the session the Fay
    /// named, for this DTP role, of the peer CAP just authenticated, with a
    /// key version above the session's; then answers with RESUME, resends
    /// what the Fay did not receive, and reports
    /// `Established { resumed: true }`. Any refusal closes the connection
    /// with RESUME_FAILED and hands the session back untouched.
    pub fn resume_with(
        &mut self,
        session: SuspendedSession,
        now: Instant,
    ) -> Result<(), ResumeRefused> {
        let refuse = |error, session| ResumeRefused {
            error,
            session: Box::new(session),
        };
        let Some(request) = self.pending_resume else {
            let state = self.fsm.state();
            return Err(refuse(DtpError::NotEstablished { state }, session));
        };
        if let Err(reason) = self.check_resume(&session, &request, now) {
            let error = DtpError::ResumeFailed { reason };
            self.fail(error.clone());
            return Err(refuse(error, session));
        }
        let agreements = match AgreementManager::restore(
            session.role,
            self.config.agreements,
            session.agreements.clone(),
            now,
        ) {
            Ok(a) => a,
            Err(e) => {
                let error = DtpError::ResumeFailed {
                    reason: "the session's agreements do not fit this endpoint's ceilings",
                };
                self.fail(DtpError::Agreement(e));
                return Err(refuse(error, session));
            }
        };
        self.pending_resume = None;
        let mut fsm = session.fsm.clone();
        if fsm
            .handle(EngineEvent::ConnectionBackCapReverified)
            .is_err()
        {
            let error = DtpError::ResumeFailed {
                reason: "the session is not suspended",
            };
            self.fail(error.clone());
            return Err(refuse(error, session));
        }
        self.fsm = fsm;
        let mut live = session.into_live(agreements);
        let highest = live.receiver.highest_received();
        let _ = live.receiver.resume_frame(live.id);
        self.queue_frame(LogicalFrame::plain(
            0,
            Body::Resume(ResumeFrame {
                session_id: live.id,
                highest_received: highest,
            }),
        ));
        self.finish_resume(live, request.highest_received, now);
        Ok(())
    }

    /// SPEC SEQ-5 (terminal): no suspended session fits the Fay's RESUME
    /// (unknown, expired, taken): close with RESUME_FAILED.
    pub fn refuse_resume(&mut self) {
        if self.pending_resume.take().is_some() {
            self.fail(DtpError::ResumeFailed {
                reason: "no suspended session with this id for this peer",
            });
        }
    }

    /// Every reason a resume is refused; the peer only sees RESUME_FAILED.
    fn check_resume(
        &self,
        session: &SuspendedSession,
        request: &ResumeFrame,
        now: Instant,
    ) -> Result<(), &'static str> {
        if session.session_id != request.session_id {
            return Err("the suspended session is not the one the Fay named");
        }
        if session.role != self.config.role {
            return Err("the session was suspended under another DTP role");
        }
        if self.peer.as_ref() != Some(&session.peer) {
            return Err("the session belongs to another peer");
        }
        if self.key_version <= session.key_version {
            return Err("the new connection's key version is not above the session's");
        }
        if session.fsm.state() != EngineState::Suspended {
            return Err("the session is not suspended");
        }
        if session.is_expired(now) {
            return Err("the session's suspend timeout passed");
        }
        let sent = session.sender.last_sent();
        if request.highest_received > sent || request.highest_received < session.sender.acked() {
            return Err("the Fay's highest received sequence does not match what was sent");
        }
        Ok(())
    }

    /// Fay: the terminal's RESUME: adopt the session and resend.
    pub(super) fn fay_resumed(&mut self, resume: ResumeFrame, now: Instant) {
        let Some(session) = self.resume_from.take() else {
            return self.fail(DtpError::ResumeFailed {
                reason: "a RESUME arrived but no resume is in progress",
            });
        };
        if self.fsm.state() != EngineState::Resuming || resume.session_id != session.session_id {
            return self.fail(DtpError::ResumeFailed {
                reason: "the terminal resumed another session",
            });
        }
        let agreements = match AgreementManager::restore(
            session.role,
            self.config.agreements,
            session.agreements.clone(),
            now,
        ) {
            Ok(a) => a,
            Err(e) => return self.fail(DtpError::Agreement(e)),
        };
        let mut live = session.into_live(agreements);
        let _ = live.receiver.resume_frame(live.id);
        self.finish_resume(live, resume.highest_received, now);
    }

    /// Both sides: resend above the peer's highest received (re-sealed under
    /// the new key at `poll_transmit`), Resuming → Transmitting.
    fn finish_resume(&mut self, mut live: Session, peer_highest: u64, now: Instant) {
        // The restored manager's answers go first: data resent below must
        // not reach the peer before the acceptance of its agreement.
        while let Some(body) = live.agreements.poll_transmit() {
            self.queue_frame(LogicalFrame::plain(0, body));
        }
        match live.sender.handle_resume(peer_highest) {
            Ok(resend) => {
                for (sequence, _) in resend {
                    self.transmit.push_back(Outgoing::Data(sequence));
                }
            }
            Err(e) => return self.fail(e.into()),
        }
        if !self.feed(EngineEvent::ResumeHandshakeDone) {
            return self.fail(DtpError::ResumeFailed {
                reason: "the engine is not resuming",
            });
        }
        let (session_id, peer) = (live.id, live.peer.clone());
        self.session = Some(live);
        self.resume_deadline = None;
        self.established = true;
        self.last_activity = now;
        self.push_event(DtpEvent::Established {
            session_id,
            peer,
            resumed: true,
        });
        self.drain_agreements();
    }
}

impl SuspendedSession {
    fn into_live(self, agreements: AgreementManager) -> Session {
        Session {
            id: self.session_id,
            peer: self.peer,
            agreements,
            sender: self.sender,
            receiver: self.receiver,
            dags: self.dags,
            recently_ended: self.recently_ended,
        }
    }
}
