//! The receive path: one frame's bytes in, checked against SEQ-1, opened in
//! place, and dispatched to CAP, the agreements, the Resume Manager and the
//! DAG.

use std::time::Instant;

use dtp_codec::{
    AckFrame, Body, DataFrame, DecodeError, DecodeErrorKind, FrameBuf, FrameHead, InheritError,
    LogicalFrame, ResumeFrame, decode_frame, peek_frame_head,
};
use dtp_proto::agreement::AgreementError;
use dtp_proto::dag::{DagError, DagManager};
use dtp_proto::resume::Arrival;

use super::endpoint::{DtpEndpoint, Held};
use super::session::Session;
use super::{DtpError, DtpEvent, Side};

impl DtpEndpoint {
    /// SPEC SEQ-1, ENC-2, FRM-2: one complete frame from the peer: exactly
    /// the bytes [`dtp_codec::peek_frame_len`] measured off the stream, in
    /// any [`FrameBuf`] (a `BytesMut`, or the transports' `RecvBuf`: the
    /// frame still in the pool chunk it was received into). A sealed frame
    /// is decrypted in place in `wire`; delivered payloads are slices of it.
    ///
    /// Anything wrong with it is reported as events (and, when fatal, a
    /// close frame); nothing panics. Input after the connection ended is
    /// ignored.
    pub fn handle_frame<B: FrameBuf>(&mut self, wire: B, now: Instant) {
        if self.ended.is_some() {
            return;
        }
        match peek_frame_head(&wire, &self.config.limits) {
            Ok(head) => self.handle_frame_with_head(head, wire, now),
            Err(e) => self.fail(e.into()),
        }
    }

    /// [`DtpEndpoint::handle_frame`] for a frame whose header a framing
    /// layer has already checked (`head`, from [`peek_frame_head`] with
    /// this endpoint's limits): the header is not read a second time.
    pub fn handle_frame_with_head<B: FrameBuf>(&mut self, head: FrameHead, wire: B, now: Instant) {
        if self.ended.is_some() {
            return;
        }
        let total = head.total_len;
        if total != wire.len() {
            let error = if wire.len() < total {
                DecodeError::Incomplete { needed: total }
            } else {
                DecodeError::Malformed {
                    kind: DecodeErrorKind::TrailingBytes(wire.len() - total),
                    field: "frame",
                    offset: total,
                }
            };
            return self.fail(error.into());
        }
        self.last_activity = now;
        if head.aead.is_none() {
            self.on_plain(wire, now);
        } else {
            self.on_sealed(wire, head, now);
        }
        self.after_input();
    }

    fn on_plain<B: FrameBuf>(&mut self, wire: B, now: Instant) {
        let bytes = wire.freeze();
        let frame = match decode_frame(&bytes, &self.config.limits) {
            Ok((frame, _)) => frame,
            Err(e) => return self.fail(e.into()),
        };
        let kind = frame.kind();
        match frame.body {
            Body::Close(close) => self.peer_closed(close),
            Body::Handshake(h) if self.cap.is_running() => {
                self.handle_handshake(frame.stream_id, h, now)
            }
            Body::Handshake(h) => self.fail(DtpError::UnexpectedHandshake {
                expected: 0,
                found: h.stage,
            }),
            _ if self.cap.is_running() => self.fail(DtpError::FrameBeforeCap { kind }),
            _ => self.fail(DtpError::PlaintextAfterCap { kind }),
        }
    }

    fn on_sealed<B: FrameBuf>(&mut self, wire: B, head: FrameHead, now: Instant) {
        if self.cap.is_running() {
            return self.fail(DtpError::FrameBeforeCap { kind: head.kind });
        }
        let version = head.key_version;
        if let Err(e) = self.install_pending_keys(version) {
            return self.fail(e);
        }
        // The opener refuses any version but the current and the next.
        self.key_version = self.key_version.max(version);
        let frame = match self.crypto.open_frame(wire, &self.config.limits) {
            Ok(frame) => frame,
            Err(e) => return self.fail(e.into()),
        };
        if self.awaiting_first_frame {
            self.on_first_frame(frame, version, now);
        } else {
            self.dispatch(frame, now);
        }
    }

    /// Terminal: the Fay's first sealed frame says what the connection is
    /// for: RESUME, or a new session (see the module docs).
    fn on_first_frame(&mut self, frame: LogicalFrame, version: u16, now: Instant) {
        self.awaiting_first_frame = false;
        match frame.body {
            Body::Resume(resume) => {
                self.pending_resume = Some(resume);
                self.push_event(DtpEvent::ResumeRequested {
                    session_id: resume.session_id,
                });
            }
            Body::Close(close) => self.peer_closed(close),
            _ => {
                if version != 1 {
                    return self.fail(DtpError::Aead(
                        dtp_crypto::aead::AeadError::KeyVersionMismatch {
                            found: version,
                            current: 1,
                        },
                    ));
                }
                let (Some(id), Some(peer)) = (self.cap_session_id, self.peer.clone()) else {
                    return self.fail(DtpError::Config("CAP finished without a session id"));
                };
                self.session = Some(Session::new(id, peer.clone(), &self.config));
                self.established = true;
                self.push_event(DtpEvent::Established {
                    session_id: id,
                    peer,
                    resumed: false,
                });
                self.dispatch(frame, now);
            }
        }
    }

    /// An opened frame of an established (or resuming) connection.
    fn dispatch(&mut self, frame: LogicalFrame, now: Instant) {
        let kind = frame.kind();
        match frame.body {
            Body::Close(close) => return self.peer_closed(close),
            Body::Resume(resume) => return self.on_resume(resume, now),
            Body::Handshake(h) => {
                return self.fail(DtpError::UnexpectedHandshake {
                    expected: 0,
                    found: h.stage,
                });
            }
            _ if !self.established => {
                return self.fail(DtpError::Unexpected {
                    kind,
                    why: "the session is not established or resumed yet",
                });
            }
            _ => {}
        }
        let result = match frame.body {
            Body::Data(data) => return self.on_data(frame.stream_id, data, now),
            Body::Ack(ack) => self.on_ack(ack),
            Body::Request(request) => self
                .session
                .as_mut()
                .map_or(Ok(()), |s| s.agreements.handle_request(request, now))
                .map_err(DtpError::from),
            Body::Response(response) => self
                .session
                .as_mut()
                .map_or(Ok(()), |s| s.agreements.handle_response(response, now))
                .map_err(DtpError::from),
            Body::Control(message) => {
                self.push_event(DtpEvent::Control(message));
                Ok(())
            }
            _ => Err(DtpError::Unexpected {
                kind,
                why: "not a frame a session accepts",
            }),
        };
        if let Err(e) = result {
            self.fail(e);
        }
    }

    /// SPEC RES-2: the peer's cumulative ack frees the resume cache.
    fn on_ack(&mut self, ack: AckFrame) -> Result<(), DtpError> {
        if let Some(s) = &mut self.session {
            s.sender.handle_ack(ack.cumulative)?;
        }
        Ok(())
    }

    /// SPEC SEQ-5: a RESUME. The terminal only takes it as the Fay's first
    /// frame; the Fay takes it while resuming.
    fn on_resume(&mut self, resume: ResumeFrame, now: Instant) {
        match self.side {
            Side::Terminal => self.fail(DtpError::ResumeFailed {
                reason: "RESUME is only accepted as the Fay's first sealed frame",
            }),
            Side::Fay => self.fay_resumed(resume, now),
        }
    }

    /// SPEC SEQ-4, RES-1, RES-3, DAG-1 … DAG-3: a data frame.
    fn on_data(&mut self, stream_id: u32, data: DataFrame, now: Instant) {
        let DataFrame {
            agreement_id,
            fragment_id,
            sequence,
            relations,
            payload,
        } = data;
        let agreement_id = match self.inherit.resolve(stream_id, agreement_id) {
            Ok(id) => id,
            Err(InheritError::NothingToInherit { .. }) => {
                return self.fail(DtpError::UnknownAgreement { agreement_id: None });
            }
            Err(InheritError::TooManyStreams { max }) => {
                return self.fail(DtpError::TooManyStreams { max });
            }
        };
        let dag_config = self.config.dag;
        let Some(s) = &mut self.session else { return };
        match s.receiver.handle_sequence(sequence, now) {
            Ok(Arrival::New) => {}
            // Resent after a resume and already delivered: drop.
            Ok(Arrival::Duplicate) => return,
            Err(e) => return self.fail(e.into()),
        }
        if let Some(ack) = s.receiver.poll_ack(now) {
            self.pending_ack = Some(ack);
        }
        match s.agreements.check_active(agreement_id) {
            Ok(_) => {}
            // Sent before the peer learnt this side is ending it: drop.
            Err(AgreementError::AgreementTerminating { .. }) => return,
            Err(_) if s.recently_ended.contains(&agreement_id) => return,
            Err(_) => {
                return self.fail(DtpError::UnknownAgreement {
                    agreement_id: Some(agreement_id),
                });
            }
        }
        if !self.events.has_room(payload.len()) {
            let max = self.events.max_fragments;
            return self.fail(DtpError::QueueFull {
                what: "undelivered fragment",
                max,
            });
        }
        let dag = s
            .dags
            .entry(agreement_id)
            .or_insert_with(|| DagManager::new(dag_config));
        let size = payload.len();
        let held = Held {
            sequence,
            relations: relations.clone(),
            payload,
        };
        let refused = match dag.insert(fragment_id, &relations, size, held) {
            Ok(_) => None,
            Err(refused) => Some(refused.error),
        };
        while let Some(released) = dag.poll_released() {
            self.events.push_unbounded(DtpEvent::Fragment {
                agreement_id,
                fragment_id: released.id,
                sequence: released.item.sequence,
                relations: released.item.relations,
                payload: released.item.payload,
            });
        }
        if let Some(error) = refused {
            let e = DtpError::Dag {
                agreement_id,
                fragment_id,
                error,
            };
            if matches!(error, DagError::PendingLimit { .. }) {
                self.fail(e);
            } else {
                self.push_event(DtpEvent::Error(e));
            }
        }
    }
}
