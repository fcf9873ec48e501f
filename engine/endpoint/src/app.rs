//! The application's calls: negotiate agreements (SEQ-3a/3b, AGR), send
//! fragments (SEQ-4, RES-1, RES-4), control messages, close.

use std::time::Instant;

use bytes::Bytes;
use dtp_codec::{
    AgreementId, Body, ControlMessage, DataFrame, ErrorCode, FragmentId, HEADER_LEN, LogicalFrame,
    Relation, SEAL_COUNTER_LEN, TAG_LEN, Terms,
};
use dtp_crypto::aead::AeadError;
use dtp_proto::fsm::{EngineEvent, EngineState};

use super::endpoint::DtpEndpoint;
use super::session::Session;
use super::transmit::Outgoing;
use super::{DtpError, DtpEvent};

/// The arena block data frames are encoded into (see the module docs).
const SCRATCH_BLOCK: usize = 64 * 1024;

impl DtpEndpoint {
    /// SPEC SEQ-3a: the Master asks to collect from the Slave. Returns the
    /// request id the answer (an event) will name.
    pub fn request_collection(&mut self, terms: Terms, now: Instant) -> Result<u64, DtpError> {
        self.agreement_call(now, |s| s.agreements.request_collection(terms, now))
    }

    /// SPEC SEQ-3b: the Slave asks to inject into the Master.
    pub fn request_injection(&mut self, terms: Terms, now: Instant) -> Result<u64, DtpError> {
        self.agreement_call(now, |s| s.agreements.request_injection(terms, now))
    }

    /// Asks the peer to change an active agreement's terms. This side keeps
    /// sending under the current terms until the answer (FSM docs).
    pub fn request_adjustment(
        &mut self,
        agreement_id: AgreementId,
        terms: Terms,
        now: Instant,
    ) -> Result<u64, DtpError> {
        self.agreement_call(now, |s| {
            s.agreements.request_adjustment(agreement_id, terms, now)
        })
    }

    /// SPEC AGR-2: ends an agreement (an adjustment with the terms
    /// `{"dtp.terminate": reason}`); `AgreementEnded` follows on both sides.
    pub fn terminate(
        &mut self,
        agreement_id: AgreementId,
        reason: &str,
        now: Instant,
    ) -> Result<u64, DtpError> {
        self.agreement_call(now, |s| s.agreements.terminate(agreement_id, reason, now))
    }

    /// SPEC SEQ-3a, AGR-3: accepts the peer's request. A new agreement's id
    /// is a UUID v4 made from `random` (16 fresh random bytes); an
    /// adjustment keeps its id. `AgreementActive` is reported here too.
    pub fn accept(
        &mut self,
        request_id: u64,
        random: [u8; 16],
        now: Instant,
    ) -> Result<AgreementId, DtpError> {
        let minted = uuid::Builder::from_random_bytes(random).into_uuid();
        let id = self.agreement_call(now, |s| s.agreements.accept(request_id, random, now))?;
        let terms = self
            .session
            .as_ref()
            .and_then(|s| s.agreements.agreement(id))
            .map(|a| a.terms.clone())
            .unwrap_or_default();
        self.push_event(DtpEvent::AgreementActive {
            agreement_id: id,
            terms,
            adjusted: id != minted,
        });
        Ok(id)
    }

    /// SPEC SEQ-3a: rejects the peer's request with a reason a person can
    /// read.
    pub fn reject(&mut self, request_id: u64, reason: &str, now: Instant) -> Result<(), DtpError> {
        self.agreement_call(now, |s| s.agreements.reject(request_id, reason))
    }

    /// SPEC SEQ-3a: answers the peer's request with other terms.
    pub fn counter_propose(
        &mut self,
        request_id: u64,
        terms: Terms,
        now: Instant,
    ) -> Result<(), DtpError> {
        self.agreement_call(now, |s| s.agreements.counter_propose(request_id, terms))
    }

    /// SPEC SEQ-4, RES-1, RES-2, RES-4, DAG-4: sends one fragment under an
    /// active agreement; returns its sequence number.
    ///
    /// The plaintext frame is encoded once into the resume cache and sealed
    /// from there at `poll_transmit`. When the cache is at its ceiling the
    /// call fails with BUFFER_FULL (6001) and nothing is sent: wait for
    /// [`DtpEvent::Writable`].
    pub fn send_fragment(
        &mut self,
        agreement_id: AgreementId,
        fragment_id: FragmentId,
        relations: Vec<Relation>,
        payload: Bytes,
    ) -> Result<u64, DtpError> {
        self.check_ready()?;
        let limits = self.config.limits;
        let stream = self.config.data_stream;
        let Some(s) = &mut self.session else {
            return Err(self.not_established());
        };
        s.agreements.check_active(agreement_id)?;
        let sequence = s.sender.next_sequence();
        let frame = LogicalFrame::plain(
            stream,
            Body::Data(DataFrame {
                agreement_id: Some(agreement_id),
                fragment_id,
                sequence,
                relations,
                payload,
            }),
        );
        let len = frame.encoded_len(&limits).map_err(DtpError::Encode)?;
        let sealed_len = len - HEADER_LEN + SEAL_COUNTER_LEN + TAG_LEN;
        if sealed_len > limits.max_frame_len as usize {
            return Err(DtpError::Aead(AeadError::FrameTooLarge {
                len: sealed_len,
                max: limits.max_frame_len,
            }));
        }
        if self.scratch.capacity() - self.scratch.len() < len {
            self.scratch.reserve(len.max(SCRATCH_BLOCK));
        }
        frame
            .encode(&mut self.scratch, &limits)
            .map_err(DtpError::Encode)?;
        let encoded = self.scratch.split().freeze();
        let pushed = s.sender.push(encoded, len).map_err(|r| r.error)?;
        debug_assert_eq!(pushed, sequence);
        self.transmit.push_back(Outgoing::Data(pushed));
        if self.fsm.state() == EngineState::Transmitting {
            self.feed(EngineEvent::FragmentSent);
        }
        Ok(pushed)
    }

    /// Sends a terminal control-plane message (FORMAT.md §6) to the peer,
    /// sealed, on stream 0.
    pub fn send_control(&mut self, message: ControlMessage) -> Result<(), DtpError> {
        self.check_ready()?;
        self.check_frame_room()?;
        self.queue_frame(LogicalFrame::plain(0, Body::Control(message)));
        Ok(())
    }

    /// SPEC SES-1: closes the connection and ends the session (code 0
    /// NORMAL): frames already queued go first, then the close frame.
    pub fn close(&mut self, reason: &str) {
        self.close_inner(ErrorCode::NORMAL, reason.to_owned());
    }

    /// SPEC SES-1: closes the connection and ends the session with `code`
    /// (an error the gateway or its control thread found): frames already
    /// queued go first, then the close frame (sealed once the session is
    /// established). The reason is cut to the codec's string limit.
    pub fn close_with(&mut self, code: ErrorCode, reason: &str) {
        self.close_inner(code, reason.to_owned());
    }

    // ----- internals -----

    /// Runs an Agreement Manager call for the application, then queues
    /// what it produced.
    fn agreement_call<T>(
        &mut self,
        now: Instant,
        call: impl FnOnce(&mut Session) -> Result<T, dtp_proto::agreement::AgreementError>,
    ) -> Result<T, DtpError> {
        self.check_ready()?;
        self.check_frame_room()?;
        let Some(s) = &mut self.session else {
            return Err(self.not_established());
        };
        let out = call(s)?;
        self.last_activity = now;
        self.after_input();
        Ok(out)
    }

    /// The session is established and the connection open.
    fn check_ready(&self) -> Result<(), DtpError> {
        if let Some(code) = self.close_code() {
            return Err(DtpError::Closed { code });
        }
        if self.is_closed() || !self.established || self.session.is_none() {
            return Err(self.not_established());
        }
        Ok(())
    }

    fn not_established(&self) -> DtpError {
        DtpError::NotEstablished {
            state: self.fsm.state(),
        }
    }
}
