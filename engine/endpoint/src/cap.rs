//! SPEC SEQ-1, SEQ-2: CAP on the connection — handshake frames in and out,
//! and what a finished handshake starts (keys, the session or its resume).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use dtp_codec::{AckFrame, AeadAlgorithm, Body, HandshakeFrame, LogicalFrame, ResumeFrame};
use dtp_crypto::aead::{KeyMaterial, Secret};
use dtp_crypto::cap::{
    CapError, CapInitiator, CapOutcome, CapResponder, ResponderContext, TerminalKey,
};
use dtp_crypto::cred::{VerifiedCredential, Verifier};
use dtp_proto::fsm::EngineEvent;
use dtp_proto::session::PeerIdentity;

use super::endpoint::DtpEndpoint;
use super::session::Session;
use super::transmit::Outgoing;
use super::{DtpError, DtpEvent};

/// The connection's CAP machine, while it runs.
#[derive(Debug)]
pub(super) enum Cap {
    /// The Fay's side.
    Initiator(CapInitiator),
    /// The terminal's side, with what message 3 needs.
    Responder {
        machine: CapResponder,
        verifier: Arc<Verifier>,
        unix_at_start: u64,
        started: Instant,
    },
    /// Finished, failed, or never to run again on this connection.
    Done,
}

impl Cap {
    pub(super) fn is_running(&self) -> bool {
        !matches!(self, Cap::Done)
    }

    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        match self {
            Cap::Initiator(m) => m.poll_timeout(),
            Cap::Responder { machine, .. } => machine.poll_timeout(),
            Cap::Done => None,
        }
    }

    /// Feeds the deadline; true if the machine may have something to report.
    pub(super) fn handle_timeout(&mut self, now: Instant) -> bool {
        match self {
            Cap::Initiator(m) => m.handle_timeout(now),
            Cap::Responder { machine, .. } => machine.handle_timeout(now),
            Cap::Done => return false,
        }
        true
    }
}

/// Terminal: CAP's secrets, held until the Fay's first sealed frame names
/// the key version (see the module docs).
#[derive(Debug)]
pub(super) struct PendingKeys {
    algorithm: AeadAlgorithm,
    send: Secret,
    recv: Secret,
}

/// What a finished CAP machine handed over.
enum Finished {
    Fay(CapOutcome<TerminalKey>),
    Terminal(CapOutcome<VerifiedCredential>),
}

impl DtpEndpoint {
    /// SPEC SEQ-1: a plaintext handshake frame while CAP runs.
    pub(super) fn handle_handshake(&mut self, stream_id: u32, h: HandshakeFrame, now: Instant) {
        if stream_id != 0 || h.stage != self.in_stage {
            let expected = self.in_stage;
            self.fail(DtpError::UnexpectedHandshake {
                expected,
                found: h.stage,
            });
            return;
        }
        self.in_stage = self.in_stage.saturating_add(2);
        // Errors are also what poll_outcome reports; handled there.
        let _ = match &mut self.cap {
            Cap::Initiator(m) => m.handle_message(&h.message, now),
            Cap::Responder {
                machine,
                verifier,
                unix_at_start,
                started,
            } => {
                let elapsed = now.saturating_duration_since(*started).as_secs();
                let ctx = ResponderContext {
                    verifier,
                    unix_now: unix_at_start.saturating_add(elapsed),
                };
                machine.handle_message(&h.message, now, ctx)
            }
            Cap::Done => Err(CapError::UnexpectedMessage),
        };
        self.after_cap_input(now);
    }

    /// Queues what the CAP machine wants to send and acts on its outcome.
    pub(super) fn after_cap_input(&mut self, now: Instant) {
        loop {
            let message = match &mut self.cap {
                Cap::Initiator(m) => m.poll_transmit(),
                Cap::Responder { machine, .. } => machine.poll_transmit(),
                Cap::Done => None,
            };
            let Some(message) = message else { break };
            self.queue_handshake(message);
        }
        let outcome = match &mut self.cap {
            Cap::Initiator(m) => m.poll_outcome().map(|r| r.map(Finished::Fay)),
            Cap::Responder { machine, .. } => {
                machine.poll_outcome().map(|r| r.map(Finished::Terminal))
            }
            Cap::Done => None,
        };
        match outcome {
            None => {}
            Some(Err(e)) => {
                // SPEC FSM: WaitingForCAP → Idle with the CAP code.
                self.cap = Cap::Done;
                self.fail(DtpError::Cap(e));
            }
            Some(Ok(Finished::Fay(outcome))) => {
                self.cap = Cap::Done;
                self.fay_established(outcome, now);
            }
            Some(Ok(Finished::Terminal(outcome))) => {
                self.cap = Cap::Done;
                self.terminal_established(outcome, now);
            }
        }
    }

    fn queue_handshake(&mut self, message: Bytes) {
        let stage = self.out_stage;
        self.out_stage = self.out_stage.saturating_add(2);
        self.transmit
            .push_back(Outgoing::Handshake(LogicalFrame::plain(
                0,
                Body::Handshake(HandshakeFrame { stage, message }),
            )));
    }

    /// SPEC SEQ-1, SEQ-2, ENC-1: the Fay's CAP finished: install keys at
    /// the version it chooses, then start a session or ask to resume one.
    fn fay_established(&mut self, mut outcome: CapOutcome<TerminalKey>, now: Instant) {
        let version = match &self.resume_from {
            None => Some(1),
            Some(s) => s.key_version.checked_add(1),
        };
        let material = KeyMaterial {
            algorithm: outcome.algorithm,
            initial_version: version.unwrap_or(0),
            send: Secret::from_bytes(outcome.initiator_to_responder),
            recv: Secret::from_bytes(outcome.responder_to_initiator),
        };
        outcome.initiator_to_responder.fill(0);
        outcome.responder_to_initiator.fill(0);
        let Some(version) = version else {
            self.fail(DtpError::ResumeFailed {
                reason: "the session's key versions are exhausted; start a new session",
            });
            return;
        };
        if let Err(e) = self.crypto.install(material, self.config.key_limits) {
            self.fail(e.into());
            return;
        }
        self.key_version = version;
        self.terminal_key = Some(outcome.peer);
        let peer = match PeerIdentity::new(outcome.peer.0.to_vec()) {
            Ok(p) => p,
            Err(_) => {
                self.fail(DtpError::Config("peer identity"));
                return;
            }
        };
        self.peer = Some(peer.clone());
        self.last_activity = now;
        match self.resume_from.take() {
            None => {
                if !self.feed(EngineEvent::CapVerified) {
                    self.fail(DtpError::Config("engine state out of step with CAP"));
                    return;
                }
                let session = Session::new(outcome.session_id, peer.clone(), &self.config);
                self.session = Some(session);
                // Key confirmation, and "a new session" for the terminal.
                self.queue_frame(LogicalFrame::plain(
                    0,
                    Body::Ack(AckFrame { cumulative: 0 }),
                ));
                self.established = true;
                self.push_event(DtpEvent::Established {
                    session_id: outcome.session_id,
                    peer,
                    resumed: false,
                });
            }
            Some(mut suspended) => {
                if suspended.peer != peer {
                    self.resume_from = Some(suspended);
                    self.fail(DtpError::ResumeFailed {
                        reason: "the terminal is not the one the session was established with",
                    });
                    return;
                }
                // The attempt uses `version`: if it is cut, the next goes higher.
                suspended.key_version = version;
                let mut fsm = suspended.fsm.clone();
                if fsm
                    .handle(EngineEvent::ConnectionBackCapReverified)
                    .is_err()
                {
                    self.resume_from = Some(suspended);
                    self.fail(DtpError::ResumeFailed {
                        reason: "the session is not suspended",
                    });
                    return;
                }
                // Tentative until the terminal's RESUME (see the module docs).
                self.fsm = fsm;
                self.queue_frame(LogicalFrame::plain(
                    0,
                    Body::Resume(ResumeFrame {
                        session_id: suspended.session_id,
                        highest_received: suspended.receiver.highest_received(),
                    }),
                ));
                self.resume_deadline = now.checked_add(self.config.resume_timeout);
                self.resume_from = Some(suspended);
            }
        }
    }

    /// SPEC SEQ-1, SEQ-2: the terminal's CAP finished: keep the secrets
    /// until the Fay's first sealed frame, which says new session or resume.
    fn terminal_established(&mut self, mut outcome: CapOutcome<VerifiedCredential>, now: Instant) {
        self.pending_keys = Some(PendingKeys {
            algorithm: outcome.algorithm,
            send: Secret::from_bytes(outcome.responder_to_initiator),
            recv: Secret::from_bytes(outcome.initiator_to_responder),
        });
        outcome.initiator_to_responder.fill(0);
        outcome.responder_to_initiator.fill(0);
        let peer = match PeerIdentity::new(outcome.peer.fay_id().as_bytes().to_vec()) {
            Ok(p) => p,
            Err(_) => {
                self.fail(DtpError::Config("peer identity"));
                return;
            }
        };
        if !self.feed(EngineEvent::CapVerified) {
            self.fail(DtpError::Config("engine state out of step with CAP"));
            return;
        }
        self.peer = Some(peer);
        self.peer_credential = Some(outcome.peer);
        self.cap_session_id = Some(outcome.session_id);
        self.awaiting_first_frame = true;
        self.last_activity = now;
    }

    /// Terminal: installs CAP's keys at the version the Fay's first sealed
    /// frame names.
    pub(super) fn install_pending_keys(&mut self, version: u16) -> Result<(), DtpError> {
        let Some(keys) = self.pending_keys.take() else {
            return Ok(());
        };
        if version == 0 {
            return Err(DtpError::Aead(
                dtp_crypto::aead::AeadError::KeyVersionMismatch {
                    found: 0,
                    current: 1,
                },
            ));
        }
        let material = KeyMaterial {
            algorithm: keys.algorithm,
            initial_version: version,
            send: keys.send,
            recv: keys.recv,
        };
        self.crypto.install(material, self.config.key_limits)?;
        self.key_version = version;
        Ok(())
    }
}
