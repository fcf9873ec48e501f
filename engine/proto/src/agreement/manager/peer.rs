//! Peer input of the [`AgreementManager`]: the Request_Frames and
//! Response_Frames the other side sends (SPEC AGR-1, SEQ-3a/3b).

use std::time::Instant;

use dtp_codec::{AgreementId, Body, Decision, RequestFrame, RequestType, ResponseFrame, Terms};

use super::{AgreementManager, Incoming, Purpose, check_v4};
use crate::agreement::{
    Agreement, AgreementError, AgreementEvent, AgreementKind, AgreementState, EndedBy,
    RESERVED_PREFIX, Role, TERMINATE_KEY,
};

impl AgreementManager {
    // ----- peer input -----

    /// SPEC AGR-1, SEQ-3a/3b: a Request_Frame from the peer. Protocol
    /// errors return `Err` (close with its code); requests past a ceiling
    /// are answered with a rejection.
    pub fn handle_request(
        &mut self,
        frame: RequestFrame,
        now: Instant,
    ) -> Result<(), AgreementError> {
        let RequestFrame {
            request_id,
            request_type,
            agreement_id,
            terms,
        } = frame;
        let again = request_id <= self.highest_peer_request_id;
        if again {
            // SPEC SEQ-5: after a break the peer sends its requests in flight
            // again. One already decided gets the same answer; one dropped
            // undecided is decided afresh; anything else is a replay.
            if let Some(answer) = self.answers.iter().find(|a| a.request_id == request_id) {
                if self.transmits.len() >= self.config.max_queued_transmits {
                    return Err(AgreementError::TransmitQueueFull {
                        max: self.config.max_queued_transmits,
                    });
                }
                self.transmits.push_back(Body::Response(answer.clone()));
                return Ok(());
            }
            if !self.undecided.contains(&request_id) {
                return Err(AgreementError::DuplicateRequestId {
                    request_id,
                    highest: self.highest_peer_request_id,
                });
            }
        }
        if (request_type == RequestType::Adjustment) != agreement_id.is_some() {
            return Err(AgreementError::Inconsistent(
                "agreement_id must be present exactly for an adjustment",
            ));
        }
        let peer = self.role.peer();
        let adjusts = match (request_type, agreement_id) {
            (RequestType::Adjustment, Some(id)) => Some(id),
            (RequestType::Collection, _) | (RequestType::Injection, _) => {
                let kind = match request_type {
                    RequestType::Collection => AgreementKind::Collection,
                    _ => AgreementKind::Injection,
                };
                if kind.requester() != peer {
                    return Err(AgreementError::WrongRole {
                        role: peer,
                        request_type,
                    });
                }
                None
            }
            (RequestType::Adjustment, None) => {
                return Err(AgreementError::Inconsistent(
                    "adjustment without agreement_id",
                ));
            }
        };
        let terminate = match (adjusts, peer_reserved_keys(&terms)?) {
            (Some(_), true) => true,
            (None, true) => {
                return Err(AgreementError::Inconsistent(
                    "dtp.terminate is only valid in an adjustment",
                ));
            }
            (_, false) => false,
        };
        if self.transmits.len() >= self.config.max_queued_transmits {
            return Err(AgreementError::TransmitQueueFull {
                max: self.config.max_queued_transmits,
            });
        }
        if again {
            self.undecided.remove(&request_id);
        } else {
            self.highest_peer_request_id = request_id;
        }

        if let Some(id) = adjusts {
            let Some(agreement) = self.agreements.get(&id) else {
                if terminate {
                    // Ending is idempotent: an agreement unknown here (already
                    // ended, or orphaned by a break) is confirmed as ended.
                    self.respond(request_id, Decision::Accepted { agreement_id: id });
                    return Ok(());
                }
                // Not a fault: agreements end unilaterally, so the peer may
                // adjust one it has not yet heard ended (or one whose late
                // acceptance we terminated). Answer, so its request ends.
                return self.auto_reject(
                    request_id,
                    "no such active agreement: it ended or was never agreed",
                );
            };
            if terminate {
                // Ending is unilateral: end it now and confirm.
                self.agreements.remove(&id);
                self.respond(request_id, Decision::Accepted { agreement_id: id });
                self.withdraw_incoming_for(id, "the agreement was terminated");
                self.events.push_back(AgreementEvent::Terminated {
                    agreement_id: id,
                    by: EndedBy::Peer,
                });
                return Ok(());
            }
            if agreement.state == AgreementState::Terminating {
                return self.auto_reject(request_id, "the agreement is being terminated");
            }
            if self.role == Role::Master && self.adjusting(id) {
                return self.auto_reject(
                    request_id,
                    "adjustment glare: the Master's adjustment of this agreement takes precedence",
                );
            }
            if self.incoming.values().any(|i| i.adjusts == Some(id)) {
                return self.auto_reject(
                    request_id,
                    "an adjustment of this agreement already awaits a decision",
                );
            }
        } else if self.agreements.len() + self.reserved_new() >= self.config.max_active_agreements {
            return self.auto_reject(request_id, "too many active agreements in this session");
        }
        if self.incoming.len() >= self.config.max_pending_incoming
            || self.events.len() >= self.config.max_queued_events
        {
            return self.auto_reject(request_id, "busy: too many requests await a decision");
        }
        self.incoming.insert(
            request_id,
            Incoming {
                adjusts,
                terms: terms.clone(),
                deadline: now + self.config.request_timeout,
            },
        );
        self.events.push_back(AgreementEvent::RequestReceived {
            request_id,
            request_type,
            agreement_id,
            terms,
        });
        Ok(())
    }

    /// SPEC AGR-1: a Response_Frame from the peer.
    pub fn handle_response(
        &mut self,
        frame: ResponseFrame,
        now: Instant,
    ) -> Result<(), AgreementError> {
        let ResponseFrame {
            request_id,
            decision,
        } = frame;
        let Some(out) = self.outstanding.remove(&request_id) else {
            return self.late_response(request_id, decision, now);
        };
        match (out.purpose, decision) {
            (Purpose::Terminate(id), _) => {
                // Unilateral: any answer ends it.
                if self.agreements.remove(&id).is_some() {
                    self.events.push_back(AgreementEvent::Terminated {
                        agreement_id: id,
                        by: EndedBy::Local,
                    });
                }
            }
            (Purpose::New(kind), Decision::Accepted { agreement_id }) => {
                check_v4(agreement_id)?;
                if self.agreements.contains_key(&agreement_id) {
                    return Err(AgreementError::DuplicateAgreementId { agreement_id });
                }
                self.agreements.insert(
                    agreement_id,
                    Agreement {
                        id: agreement_id,
                        kind,
                        initiator: self.role,
                        terms: out.terms.clone(),
                        state: AgreementState::Active,
                    },
                );
                self.events.push_back(AgreementEvent::Accepted {
                    request_id,
                    agreement_id,
                    request_type: kind.request_type(),
                    terms: out.terms,
                });
            }
            (Purpose::Adjust(id), Decision::Accepted { agreement_id }) => {
                if agreement_id != id {
                    return Err(AgreementError::Inconsistent(
                        "an accepted adjustment must echo the adjusted agreement's id",
                    ));
                }
                match self.agreements.get_mut(&id) {
                    Some(a) if a.state == AgreementState::Active => {
                        a.terms = out.terms.clone();
                        self.events.push_back(AgreementEvent::Accepted {
                            request_id,
                            agreement_id,
                            request_type: RequestType::Adjustment,
                            terms: out.terms,
                        });
                    }
                    _ => self.events.push_back(AgreementEvent::Rejected {
                        request_id,
                        reason: "the agreement ended before the adjustment was answered".into(),
                    }),
                }
            }
            (_, Decision::Rejected { reason }) => {
                self.events
                    .push_back(AgreementEvent::Rejected { request_id, reason });
            }
            (purpose, Decision::CounterProposal { terms }) => {
                let (request_type, agreement_id) = match purpose {
                    Purpose::New(kind) => (kind.request_type(), None),
                    Purpose::Adjust(id) | Purpose::Terminate(id) => {
                        (RequestType::Adjustment, Some(id))
                    }
                };
                self.events.push_back(AgreementEvent::CounterProposed {
                    request_id,
                    request_type,
                    agreement_id,
                    terms,
                });
            }
        }
        Ok(())
    }

    /// Answers the peer's undecided adjustments of `id` (the agreement is
    /// ending, so no decision could apply). Bypasses the transmit ceiling:
    /// at most one per agreement (one pending adjustment each).
    pub(super) fn withdraw_incoming_for(&mut self, id: AgreementId, reason: &str) {
        let ids: Vec<u64> = self
            .incoming
            .iter()
            .filter(|(_, i)| i.adjusts == Some(id))
            .map(|(r, _)| *r)
            .collect();
        for request_id in ids {
            self.incoming.remove(&request_id);
            self.respond(
                request_id,
                Decision::Rejected {
                    reason: reason.to_owned(),
                },
            );
            self.events
                .push_back(AgreementEvent::RequestWithdrawn { request_id });
        }
    }

    /// An answer to a request of this side that is no longer outstanding:
    /// one never sent is a protocol error; a late one is ignored, except an
    /// acceptance, which must not leave the two sides apart.
    pub(super) fn late_response(
        &mut self,
        request_id: u64,
        decision: Decision,
        now: Instant,
    ) -> Result<(), AgreementError> {
        if request_id == 0 || request_id >= self.next_request_id {
            return Err(AgreementError::UnknownRequest { request_id });
        }
        let Decision::Accepted { agreement_id } = decision else {
            return Ok(());
        };
        let found = self
            .expired
            .iter()
            .position(|(id, _, _)| *id == request_id)
            .and_then(|pos| self.expired.remove(pos));
        match (found, self.agreements.get_mut(&agreement_id)) {
            // A timed-out adjustment the peer applied after all: apply it too.
            (Some((_, Purpose::Adjust(id), terms)), Some(a))
                if id == agreement_id && a.state == AgreementState::Active =>
            {
                a.terms = terms.clone();
                self.events.push_back(AgreementEvent::Accepted {
                    request_id,
                    agreement_id,
                    request_type: RequestType::Adjustment,
                    terms,
                });
            }
            // The peer runs an agreement this side gave up on: end it there
            // too. For a request of the expired ring this bypasses the
            // ceilings (each entry is taken once, so at most the ring's
            // size); for one older than the ring it is best effort.
            (found, None) => {
                let terms = Terms::from([(
                    TERMINATE_KEY.to_owned(),
                    "the request had timed out".to_owned(),
                )]);
                let purpose = Purpose::Terminate(agreement_id);
                if found.is_none() {
                    let _ = self.send_request(purpose, terms, now);
                } else if let Some(next) = self.next_request_id.checked_add(1) {
                    let id = std::mem::replace(&mut self.next_request_id, next);
                    self.enqueue_request(id, purpose, terms, now);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Whether a peer's terms are a termination; any other reserved key, or a
/// termination mixed with other keys, is a protocol error.
fn peer_reserved_keys(terms: &Terms) -> Result<bool, AgreementError> {
    let mut terminate = false;
    for key in terms.keys() {
        if key == TERMINATE_KEY {
            terminate = true;
        } else if key.starts_with(RESERVED_PREFIX) {
            return Err(AgreementError::ReservedTerm { key: key.clone() });
        }
    }
    if terminate && terms.len() != 1 {
        return Err(AgreementError::Inconsistent(
            "a termination's terms must be exactly dtp.terminate",
        ));
    }
    Ok(terminate)
}
