//! [`DtpEndpoint`]: the struct, its constructors and getters, its outputs
//! (`poll_event`, `poll_timeout`), its timers, and the bookkeeping shared by
//! the input paths (closing, the engine state, draining the Agreement
//! Manager into frames and events).

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use dtp_codec::{
    AckFrame, AgreementContext, AgreementId, CloseFrame, ErrorCode, LogicalFrame, RequestType,
    SessionId,
};
use dtp_crypto::aead::{AeadStats, EncryptionModule};
use dtp_crypto::cap::{CapInitiator, CapResponder, TerminalKey};
use dtp_crypto::cred::VerifiedCredential;
use dtp_proto::agreement::{Agreement, AgreementEvent, EndedBy};
use dtp_proto::fsm::{EngineEvent, EngineFsm, EngineState};
use dtp_proto::session::PeerIdentity;

use super::cap::{Cap, PendingKeys};
use super::session::{Session, SuspendedSession};
use super::transmit::Outgoing;
use super::{DtpError, DtpEvent, EndpointConfig, FayConfig, ResumeRefused, TerminalConfig};

/// Which end of CAP this endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent: CAP initiator, DTP Master by default.
    Fay,
    /// The device/gateway: CAP responder, DTP Slave by default.
    Terminal,
}

/// How the connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// A close frame was sent or received with this code.
    Closed(ErrorCode),
    /// The transport dropped ([`DtpEndpoint::connection_lost`]).
    Lost,
}

/// SPEC §1: one DTP connection, sans-IO — CAP (SEQ-1), the Encryption
/// Module (ENC-1 … ENC-4), the engine state machine (FSM-1/2), and the
/// session that lives on the connection: agreements (AGR, SEQ-3), DAGs
/// (DAG), resume (RES, SEQ-5). See the module docs for the driving order
/// and the rules.
#[derive(Debug)]
pub struct DtpEndpoint {
    pub(super) side: Side,
    pub(super) config: EndpointConfig,
    /// SPEC FSM-1/2: the connection's machine until a session exists, then
    /// the session's.
    pub(super) fsm: EngineFsm,
    pub(super) cap: Cap,
    /// The stage number of the next handshake message sent / expected.
    pub(super) out_stage: u8,
    pub(super) in_stage: u8,
    pub(super) crypto: EncryptionModule,
    /// Terminal: CAP's secrets until the Fay's first sealed frame names the
    /// key version.
    pub(super) pending_keys: Option<PendingKeys>,
    /// Terminal: the Session_ID CAP minted, used if the Fay starts a new
    /// session.
    pub(super) cap_session_id: Option<SessionId>,
    /// Terminal: true between CAP and the Fay's first sealed frame.
    pub(super) awaiting_first_frame: bool,
    /// Terminal: the Fay's RESUME, awaiting the driver's answer.
    pub(super) pending_resume: Option<dtp_codec::ResumeFrame>,
    /// Fay: the session being resumed, until the terminal's RESUME.
    pub(super) resume_from: Option<SuspendedSession>,
    pub(super) resume_deadline: Option<Instant>,
    /// The live session.
    pub(super) session: Option<Session>,
    pub(super) established: bool,
    pub(super) peer: Option<PeerIdentity>,
    pub(super) peer_credential: Option<VerifiedCredential>,
    pub(super) terminal_key: Option<TerminalKey>,
    /// The highest key version in use on this connection.
    pub(super) key_version: u16,
    /// SPEC SEQ-4: inheritance on received data frames (per connection).
    pub(super) inherit: AgreementContext,
    pub(super) transmit: VecDeque<Outgoing>,
    /// Frames in `transmit` that are not data (bounded by
    /// `max_queued_frames`; data is bounded by the resume cache).
    pub(super) queued_frames: usize,
    pub(super) pending_ack: Option<AckFrame>,
    pub(super) events: EventQueue,
    /// The arena data frames are encoded into (see the module docs).
    pub(super) scratch: BytesMut,
    pub(super) last_activity: Instant,
    pub(super) ended: Option<Ended>,
}

impl DtpEndpoint {
    // ----- constructors -----

    /// SPEC SEQ-1: a Fay-side connection starting a new session at `now`.
    /// `rng` fills buffers with fresh random bytes (the CAP ephemeral seed).
    /// CAP message 1 is ready for `poll_transmit`.
    pub fn fay(
        config: &FayConfig,
        now: Instant,
        rng: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Self, DtpError> {
        config.endpoint.validate().map_err(DtpError::Config)?;
        let mut seed = [0u8; 32];
        rng(&mut seed);
        let machine = CapInitiator::new(&config.cap, now, seed)?;
        seed.fill(0);
        let mut endpoint = Self::new(Side::Fay, config.endpoint, Cap::Initiator(machine), now);
        endpoint.start(now);
        Ok(endpoint)
    }

    /// SPEC SEQ-5: a Fay-side connection resuming `session` at `now`: CAP
    /// runs again (new keys, a higher key version), then the Fay sends
    /// RESUME. On a configuration error the session is handed back.
    pub fn fay_resume(
        config: &FayConfig,
        session: SuspendedSession,
        now: Instant,
        rng: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Self, ResumeRefused> {
        if session.role != config.endpoint.role {
            return Err(ResumeRefused {
                error: DtpError::ResumeFailed {
                    reason: "the session was suspended under another DTP role",
                },
                session: Box::new(session),
            });
        }
        match Self::fay(config, now, rng) {
            Ok(mut endpoint) => {
                endpoint.resume_from = Some(session);
                Ok(endpoint)
            }
            Err(error) => Err(ResumeRefused {
                error,
                session: Box::new(session),
            }),
        }
    }

    /// SPEC SEQ-1: a terminal-side connection at `now`, waiting for CAP
    /// message 1. `unix_now` is the wall-clock time in Unix seconds at
    /// `now`; credential validity is checked at `unix_now` plus the time
    /// elapsed since. `rng` fills buffers with fresh random bytes (the CAP
    /// ephemeral seed and the Session_ID).
    pub fn terminal(
        config: &TerminalConfig,
        now: Instant,
        unix_now: u64,
        rng: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Self, DtpError> {
        config.endpoint.validate().map_err(DtpError::Config)?;
        let mut seed = [0u8; 32];
        rng(&mut seed);
        let mut session_random = [0u8; 16];
        rng(&mut session_random);
        let machine = CapResponder::new(&config.cap, now, seed, session_random)?;
        seed.fill(0);
        let cap = Cap::Responder {
            machine,
            verifier: config.verifier.clone(),
            unix_at_start: unix_now,
            started: now,
        };
        let mut endpoint = Self::new(Side::Terminal, config.endpoint, cap, now);
        endpoint.start(now);
        Ok(endpoint)
    }

    fn new(side: Side, config: EndpointConfig, cap: Cap, now: Instant) -> Self {
        let (out_stage, in_stage) = match side {
            Side::Fay => (1, 2),
            Side::Terminal => (2, 1),
        };
        Self {
            side,
            config,
            fsm: EngineFsm::new(),
            cap,
            out_stage,
            in_stage,
            crypto: EncryptionModule::new(),
            pending_keys: None,
            cap_session_id: None,
            awaiting_first_frame: false,
            pending_resume: None,
            resume_from: None,
            resume_deadline: None,
            session: None,
            established: false,
            peer: None,
            peer_credential: None,
            terminal_key: None,
            key_version: 0,
            inherit: AgreementContext::new(config.max_streams),
            transmit: VecDeque::new(),
            queued_frames: 0,
            pending_ack: None,
            events: EventQueue::new(&config),
            scratch: BytesMut::new(),
            last_activity: now,
            ended: None,
        }
    }

    /// FSM Idle → WaitingForCAP, and the first handshake message (Fay).
    fn start(&mut self, now: Instant) {
        if let Err(e) = self.fsm.handle(EngineEvent::ConnectionRequestReceived) {
            self.fail(e.into());
            return;
        }
        self.after_cap_input(now);
    }

    // ----- getters -----

    /// SPEC FSM-1: the engine state (Idle after a close: the session's
    /// machine is dropped; Suspended after a connection loss that suspended
    /// the session).
    pub fn state(&self) -> EngineState {
        self.fsm.state()
    }

    /// Which end of CAP this is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// SPEC SEQ-2: the session's id, once established or resumed.
    pub fn session_id(&self) -> Option<SessionId> {
        self.session.as_ref().map(|s| s.id)
    }

    /// The peer CAP authenticated, once CAP finished.
    pub fn peer(&self) -> Option<&PeerIdentity> {
        self.peer.as_ref()
    }

    /// Terminal: the Fay's verified credential (grants, validity), once CAP
    /// finished.
    pub fn peer_credential(&self) -> Option<&VerifiedCredential> {
        self.peer_credential.as_ref()
    }

    /// Fay: the terminal's static key CAP authenticated.
    pub fn terminal_key(&self) -> Option<&TerminalKey> {
        self.terminal_key.as_ref()
    }

    /// SPEC ENC-4: the highest key version in use on this connection (its
    /// keys start at 1 for a new session, above the suspended session's
    /// version for a resume; rekeys raise it); 0 before keys.
    pub fn key_version(&self) -> u16 {
        self.key_version
    }

    /// True once `Established` was reported and until the connection ends.
    pub fn is_established(&self) -> bool {
        self.established && self.ended.is_none()
    }

    /// True once the connection closed or was lost.
    pub fn is_closed(&self) -> bool {
        self.ended.is_some()
    }

    /// The code the connection closed with (sent or received).
    pub fn close_code(&self) -> Option<ErrorCode> {
        match self.ended {
            Some(Ended::Closed(code)) => Some(code),
            _ => None,
        }
    }

    /// SPEC AGR-4: the agreements in force.
    pub fn agreements(&self) -> impl Iterator<Item = &Agreement> {
        self.session.iter().flat_map(|s| s.agreements.agreements())
    }

    /// SPEC RES-2, RES-4: fragments and bytes in the resume cache.
    pub fn resume_cache(&self) -> (usize, usize) {
        self.session.as_ref().map_or((0, 0), |s| {
            (s.sender.cached_count(), s.sender.cached_bytes())
        })
    }

    /// The Encryption Module's counters.
    pub fn crypto_stats(&self) -> AeadStats {
        self.crypto.stats()
    }

    // ----- outputs -----

    /// The next event, if any. Drain after every input.
    pub fn poll_event(&mut self) -> Option<DtpEvent> {
        self.events.pop()
    }

    /// When [`DtpEndpoint::handle_timeout`] must next be called (the
    /// earliest of the CAP deadline, the agreements' timers, the delayed
    /// ack, the idle timeout and the resume deadline).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.ended.is_some() {
            return None;
        }
        let mut next = self.cap.poll_timeout();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if let Some(s) = &self.session {
            consider(s.agreements.poll_timeout());
            consider(s.receiver.poll_timeout());
        }
        if self.fsm.state() == EngineState::SessionEstablished {
            consider(self.last_activity.checked_add(self.config.idle_timeout));
        }
        consider(self.resume_deadline);
        next
    }

    /// Time passed: CAP and resume deadlines, the idle timeout (SES-4),
    /// agreement timers and the delayed ack.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ended.is_some() {
            return;
        }
        if self.cap.handle_timeout(now) {
            self.after_cap_input(now);
            if self.ended.is_some() {
                return;
            }
        }
        if self.fsm.state() == EngineState::SessionEstablished
            && self
                .last_activity
                .checked_add(self.config.idle_timeout)
                .is_some_and(|t| t <= now)
        {
            self.fail(DtpError::SessionTimeout);
            return;
        }
        if self.resume_deadline.is_some_and(|t| t <= now) {
            // Resuming → resume failed → Idle closes the session.
            self.resume_from = None;
            self.fail(DtpError::ResumeFailed {
                reason: "no RESUME from the terminal within resume_timeout",
            });
            return;
        }
        if let Some(s) = &mut self.session {
            s.agreements.handle_timeout(now);
            if let Some(ack) = s.receiver.poll_ack(now) {
                self.pending_ack = Some(ack);
            }
        }
        self.after_input();
    }

    // ----- shared bookkeeping -----

    /// After every input: agreement frames and events, Writable, ceilings.
    pub(super) fn after_input(&mut self) {
        if self.ended.is_some() {
            return;
        }
        self.drain_agreements();
        if let Some(s) = &mut self.session
            && s.sender.poll_event().is_some()
        {
            self.push_event(DtpEvent::Writable);
        }
        if self.queued_frames > self.config.max_queued_frames {
            self.fail(DtpError::QueueFull {
                what: "transmit",
                max: self.config.max_queued_frames,
            });
        }
    }

    /// Moves the Agreement Manager's frames to the transmit queue and its
    /// events to the application, feeding the engine machine.
    pub(super) fn drain_agreements(&mut self) {
        loop {
            let Some(s) = &mut self.session else { return };
            let Some(body) = s.agreements.poll_transmit() else {
                break;
            };
            self.queue_frame(LogicalFrame::plain(0, body));
        }
        loop {
            let Some(s) = &mut self.session else { return };
            let Some(event) = s.agreements.poll_event() else {
                break;
            };
            self.on_agreement_event(event);
        }
        self.settle();
    }

    fn on_agreement_event(&mut self, event: AgreementEvent) {
        let out = match event {
            AgreementEvent::RequestReceived {
                request_id,
                request_type,
                agreement_id,
                terms,
            } => {
                if request_type == RequestType::Adjustment
                    && self.fsm.state() == EngineState::Transmitting
                {
                    self.feed(EngineEvent::AdjustmentRequestReceived);
                }
                DtpEvent::AgreementRequested {
                    request_id,
                    kind: request_type,
                    agreement_id,
                    terms,
                }
            }
            AgreementEvent::Accepted {
                agreement_id,
                request_type,
                terms,
                ..
            } => DtpEvent::AgreementActive {
                agreement_id,
                terms,
                adjusted: request_type == RequestType::Adjustment,
            },
            AgreementEvent::Rejected { request_id, reason } => {
                DtpEvent::AgreementRejected { request_id, reason }
            }
            AgreementEvent::CounterProposed {
                request_id,
                agreement_id,
                terms,
                ..
            } => DtpEvent::CounterProposal {
                request_id,
                agreement_id,
                terms,
            },
            AgreementEvent::RequestFailed { request_id, reason } => {
                DtpEvent::RequestFailed { request_id, reason }
            }
            AgreementEvent::RequestWithdrawn { request_id } => {
                DtpEvent::RequestWithdrawn { request_id }
            }
            AgreementEvent::Terminated { agreement_id, by } => {
                self.end_agreement(agreement_id, by);
                return;
            }
        };
        self.push_event(out);
    }

    /// SPEC AGR-2: an agreement ended: its DAG goes (fragments still
    /// waiting are dropped and counted), streams forget it, and data the
    /// peer sent before it learnt of the end will be dropped quietly.
    fn end_agreement(&mut self, agreement_id: AgreementId, by: EndedBy) {
        let mut undelivered = 0;
        if let Some(s) = &mut self.session {
            if let Some(mut dag) = s.dags.remove(&agreement_id) {
                undelivered = dag.abandon_waiting().len();
            }
            s.remember_ended(agreement_id, self.config.recently_ended);
        }
        self.inherit.forget(agreement_id);
        self.push_event(DtpEvent::AgreementEnded {
            agreement_id,
            by,
            undelivered,
        });
    }

    /// SPEC FSM-1: brings the engine state in line with the agreements,
    /// through table transitions only (see the module docs).
    pub(super) fn settle(&mut self) {
        let Some(s) = &self.session else { return };
        let has_agreement = s.agreements.agreements().next().is_some();
        let negotiating =
            s.agreements.outstanding_count() + s.agreements.pending_incoming_count() > 0;
        for _ in 0..3 {
            let event = match (self.fsm.state(), has_agreement, negotiating) {
                (EngineState::SessionEstablished, _, true) => {
                    EngineEvent::RequestFrameSentOrReceived
                }
                (EngineState::Negotiating, true, false) => EngineEvent::AgreementReached,
                (EngineState::Negotiating, false, false) => EngineEvent::NegotiationFailed,
                (EngineState::Transmitting, false, _) => EngineEvent::AgreementEndedNoOtherActive,
                _ => return,
            };
            if !self.feed(event) {
                return;
            }
        }
    }

    /// Feeds `event` if the table allows it here; true if it moved.
    pub(super) fn feed(&mut self, event: EngineEvent) -> bool {
        self.fsm.handle(event).is_ok()
    }

    /// Queues a frame other than data (sealed at `poll_transmit`).
    pub(super) fn queue_frame(&mut self, frame: LogicalFrame) {
        self.queued_frames += 1;
        self.transmit.push_back(Outgoing::Frame(frame));
    }

    /// Whether an application call may queue one more frame.
    pub(super) fn check_frame_room(&self) -> Result<(), DtpError> {
        if self.queued_frames >= self.config.max_queued_frames {
            return Err(DtpError::QueueFull {
                what: "transmit",
                max: self.config.max_queued_frames,
            });
        }
        Ok(())
    }

    /// Queues an event; a full queue closes the connection.
    pub(super) fn push_event(&mut self, event: DtpEvent) {
        if let Err(e) = self.events.push(event) {
            self.fail(e);
        }
    }

    /// A fatal error: report it, send a close frame with its code, end.
    pub(super) fn fail(&mut self, error: DtpError) {
        if self.ended.is_some() {
            return;
        }
        let code = error.code();
        let reason = error.to_string();
        self.events.push_unbounded(DtpEvent::Error(error));
        self.close_inner(code, reason);
    }

    /// Ends the connection with a close frame carrying `code`.
    pub(super) fn close_inner(&mut self, code: ErrorCode, mut reason: String) {
        if self.ended.is_some() {
            return;
        }
        let max = usize::from(self.config.limits.max_string_len);
        if reason.len() > max {
            let mut cut = max;
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
        }
        self.transmit
            .push_back(Outgoing::Close(CloseFrame { code, reason }));
        self.end(Ended::Closed(code));
        self.events.push_unbounded(DtpEvent::Closed { code });
    }

    /// The peer closed the connection.
    pub(super) fn peer_closed(&mut self, close: CloseFrame) {
        if close.code == ErrorCode::RESUME_FAILED {
            // The terminal refused the resume: the session is gone there.
            self.resume_from = None;
        }
        self.end(Ended::Closed(close.code));
        self.events
            .push_unbounded(DtpEvent::Closed { code: close.code });
    }

    /// Releases everything a closed connection held, through the table's
    /// row where there is one.
    fn end(&mut self, how: Ended) {
        self.ended = Some(how);
        self.pending_ack = None;
        self.pending_keys = None;
        self.pending_resume = None;
        self.resume_deadline = None;
        self.cap = Cap::Done;
        let code = match how {
            Ended::Closed(code) => code,
            Ended::Lost => ErrorCode::NORMAL,
        };
        let event = match self.fsm.state() {
            EngineState::WaitingForCap => Some(EngineEvent::CapFailedOrTimeout),
            EngineState::SessionEstablished if code == ErrorCode::SESSION_TIMEOUT => {
                Some(EngineEvent::SessionTimeout)
            }
            EngineState::Resuming => Some(EngineEvent::ResumeFailed),
            _ => None,
        };
        let moved = event.is_some_and(|e| self.feed(e));
        if !moved && self.fsm.state() != EngineState::Suspended {
            // The table has no close row: the session's machine is dropped.
            self.fsm = EngineFsm::new();
        }
        if let Some(mut s) = self.session.take() {
            s.agreements.close();
        }
        self.established = false;
    }
}

/// A fragment held by a DAG until its dependencies are delivered.
#[derive(Clone, Debug)]
pub(super) struct Held {
    pub(super) sequence: u64,
    pub(super) relations: Vec<dtp_codec::Relation>,
    pub(super) payload: Bytes,
}

/// The bounded event queue: fragments count against the undelivered
/// ceilings, other events against `max_queued_events`.
#[derive(Debug)]
pub(super) struct EventQueue {
    queue: VecDeque<DtpEvent>,
    fragments: usize,
    bytes: usize,
    others: usize,
    max_others: usize,
    pub(super) max_fragments: usize,
    pub(super) max_bytes: usize,
}

impl EventQueue {
    pub(super) fn new(config: &EndpointConfig) -> Self {
        Self {
            queue: VecDeque::new(),
            fragments: 0,
            bytes: 0,
            others: 0,
            max_others: config.max_queued_events,
            max_fragments: config.max_undelivered_fragments,
            max_bytes: config.max_undelivered_bytes,
        }
    }

    /// Queues an event other than a fragment, within the ceiling.
    pub(super) fn push(&mut self, event: DtpEvent) -> Result<(), DtpError> {
        if self.others >= self.max_others {
            return Err(DtpError::QueueFull {
                what: "event",
                max: self.max_others,
            });
        }
        self.push_unbounded(event);
        Ok(())
    }

    /// Queues an event past the ceiling (the last ones of a connection).
    pub(super) fn push_unbounded(&mut self, event: DtpEvent) {
        match &event {
            DtpEvent::Fragment { payload, .. } => {
                self.fragments += 1;
                self.bytes += payload.len();
            }
            _ => self.others += 1,
        }
        self.queue.push_back(event);
    }

    /// Whether one more fragment of `len` bytes may be taken in.
    pub(super) fn has_room(&self, len: usize) -> bool {
        self.fragments < self.max_fragments && len <= self.max_bytes.saturating_sub(self.bytes)
    }

    fn pop(&mut self) -> Option<DtpEvent> {
        let event = self.queue.pop_front()?;
        match &event {
            DtpEvent::Fragment { payload, .. } => {
                self.fragments -= 1;
                self.bytes -= payload.len();
            }
            _ => self.others -= 1,
        }
        Some(event)
    }
}
