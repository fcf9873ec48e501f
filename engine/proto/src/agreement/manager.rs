//! The [`AgreementManager`] state machine (rules in the module docs above).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use dtp_codec::{AgreementId, Body, Decision, RequestFrame, RequestType, ResponseFrame, Terms};

mod breaks;
mod peer;

use super::{
    ANSWERS_FACTOR, Agreement, AgreementConfig, AgreementError, AgreementEvent, AgreementKind,
    AgreementState, EndedBy, FailReason, MAX_REASON_LEN, RESERVED_PREFIX, Role, TERMINATE_KEY,
};

/// What a request of this side is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Purpose {
    New(AgreementKind),
    Adjust(AgreementId),
    Terminate(AgreementId),
}

/// A request of this side awaiting its answer.
#[derive(Clone, Debug)]
struct Outstanding {
    purpose: Purpose,
    terms: Terms,
    deadline: Instant,
}

/// A peer request awaiting the application's decision.
#[derive(Clone, Debug)]
struct Incoming {
    /// `None`: a new agreement of the peer's kind; `Some`: an adjustment.
    adjusts: Option<AgreementId>,
    terms: Terms,
    deadline: Instant,
}

/// SPEC AGR-1 … AGR-4: one session's Agreement Manager (sans-IO).
#[derive(Clone, Debug)]
pub struct AgreementManager {
    role: Role,
    config: AgreementConfig,
    agreements: BTreeMap<AgreementId, Agreement>,
    outstanding: BTreeMap<u64, Outstanding>,
    incoming: BTreeMap<u64, Incoming>,
    /// Recently timed-out requests of this side, oldest first (at most
    /// [`ANSWERS_FACTOR`] × `max_outstanding_requests`).
    expired: VecDeque<(u64, Purpose, Terms)>,
    next_request_id: u64,
    highest_peer_request_id: u64,
    /// The latest answers to peer requests, oldest first (at most
    /// [`ANSWERS_FACTOR`] × `max_outstanding_requests`), replayed when the
    /// peer sends a request again after a break.
    answers: VecDeque<ResponseFrame>,
    /// Peer requests dropped undecided at a break, to decide afresh when the
    /// peer sends them again.
    undecided: BTreeSet<u64>,
    transmits: VecDeque<Body>,
    events: VecDeque<AgreementEvent>,
}

impl AgreementManager {
    /// A manager for a new session, with no agreement.
    pub fn new(role: Role, config: AgreementConfig) -> Self {
        Self {
            role,
            config,
            agreements: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            incoming: BTreeMap::new(),
            expired: VecDeque::new(),
            next_request_id: 1,
            highest_peer_request_id: 0,
            answers: VecDeque::new(),
            undecided: BTreeSet::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    // ----- getters -----

    /// This side's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The ceilings in force.
    pub fn config(&self) -> &AgreementConfig {
        &self.config
    }

    /// SPEC AGR-4: the agreements in force (active or terminating), by id.
    pub fn agreements(&self) -> impl Iterator<Item = &Agreement> {
        self.agreements.values()
    }

    /// One agreement, if it is in force.
    pub fn agreement(&self, id: AgreementId) -> Option<&Agreement> {
        self.agreements.get(&id)
    }

    /// SPEC SEQ-4: whether data may flow under `id` (it is active).
    pub fn check_active(&self, id: AgreementId) -> Result<&Agreement, AgreementError> {
        match self.agreements.get(&id) {
            Some(a) if a.state == AgreementState::Active => Ok(a),
            Some(_) => Err(AgreementError::AgreementTerminating { agreement_id: id }),
            None => Err(AgreementError::UnknownAgreement { agreement_id: id }),
        }
    }

    /// Number of active agreements (terminating ones excluded).
    pub fn active_count(&self) -> usize {
        self.agreements
            .values()
            .filter(|a| a.state == AgreementState::Active)
            .count()
    }

    /// Number of this side's requests awaiting answers.
    pub fn outstanding_count(&self) -> usize {
        self.outstanding.len()
    }

    /// Number of peer requests awaiting the application's decision.
    pub fn pending_incoming_count(&self) -> usize {
        self.incoming.len()
    }

    /// Number of queued frames and events (for memory accounting).
    pub fn queued(&self) -> (usize, usize) {
        (self.transmits.len(), self.events.len())
    }

    // ----- application calls: requests -----

    /// SPEC SEQ-3a/3b: asks the peer for a new agreement of this role's kind
    /// (collection for the Master, injection for the Slave). Returns the
    /// request id the answer will name.
    pub fn request(&mut self, terms: Terms, now: Instant) -> Result<u64, AgreementError> {
        self.check_terms(&terms)?;
        if self.agreements.len() + self.reserved_new() >= self.config.max_active_agreements {
            return Err(AgreementError::TooManyAgreements {
                max: self.config.max_active_agreements,
            });
        }
        let kind = self.role.requests();
        self.send_request(Purpose::New(kind), terms, now)
    }

    /// SPEC SEQ-3a: the Master asks to collect. A Slave gets `WrongRole`.
    pub fn request_collection(
        &mut self,
        terms: Terms,
        now: Instant,
    ) -> Result<u64, AgreementError> {
        self.check_role(AgreementKind::Collection)?;
        self.request(terms, now)
    }

    /// SPEC SEQ-3b: the Slave asks to inject. A Master gets `WrongRole`.
    pub fn request_injection(&mut self, terms: Terms, now: Instant) -> Result<u64, AgreementError> {
        self.check_role(AgreementKind::Injection)?;
        self.request(terms, now)
    }

    /// Asks the peer to change the terms of an active agreement.
    pub fn request_adjustment(
        &mut self,
        agreement_id: AgreementId,
        terms: Terms,
        now: Instant,
    ) -> Result<u64, AgreementError> {
        self.check_terms(&terms)?;
        self.check_active(agreement_id)?;
        if self.adjusting(agreement_id) {
            return Err(AgreementError::AdjustmentInProgress { agreement_id });
        }
        self.send_request(Purpose::Adjust(agreement_id), terms, now)
    }

    /// SPEC AGR-2: ends an active agreement (unilateral; see the module
    /// docs). It is `terminating` until the peer answers or the request
    /// times out, then `terminated`.
    pub fn terminate(
        &mut self,
        agreement_id: AgreementId,
        reason: &str,
        now: Instant,
    ) -> Result<u64, AgreementError> {
        check_reason(reason)?;
        self.check_active(agreement_id)?;
        let terms = Terms::from([(TERMINATE_KEY.to_owned(), reason.to_owned())]);
        let id = self.send_request(Purpose::Terminate(agreement_id), terms, now)?;
        if let Some(a) = self.agreements.get_mut(&agreement_id) {
            a.state = AgreementState::Terminating;
        }
        self.withdraw_incoming_for(agreement_id, "the agreement is being terminated");
        Ok(id)
    }

    // ----- application calls: decisions -----

    /// SPEC AGR-3: accepts the peer's request. A new agreement gets an id
    /// minted from `random` (UUID v4); an adjustment keeps its agreement's id
    /// and `random` is unused.
    pub fn accept(
        &mut self,
        request_id: u64,
        random: [u8; 16],
        _now: Instant,
    ) -> Result<AgreementId, AgreementError> {
        let incoming = self
            .incoming
            .get(&request_id)
            .ok_or(AgreementError::UnknownRequest { request_id })?;
        self.check_transmit_room()?;
        let agreement_id = match incoming.adjusts {
            Some(id) => {
                self.check_active(id)?;
                id
            }
            None => {
                if self.agreements.len() + self.reserved_new() >= self.config.max_active_agreements
                {
                    return Err(AgreementError::TooManyAgreements {
                        max: self.config.max_active_agreements,
                    });
                }
                let id = uuid::Builder::from_random_bytes(random).into_uuid();
                if self.agreements.contains_key(&id) {
                    return Err(AgreementError::DuplicateAgreementId { agreement_id: id });
                }
                id
            }
        };
        let Some(Incoming {
            terms: incoming_terms,
            ..
        }) = self.incoming.remove(&request_id)
        else {
            return Err(AgreementError::UnknownRequest { request_id });
        };
        match self.agreements.get_mut(&agreement_id) {
            Some(a) => a.terms = incoming_terms,
            None => {
                let kind = self.role.peer().requests();
                self.agreements.insert(
                    agreement_id,
                    Agreement {
                        id: agreement_id,
                        kind,
                        initiator: self.role.peer(),
                        terms: incoming_terms,
                        state: AgreementState::Active,
                    },
                );
            }
        }
        self.respond(request_id, Decision::Accepted { agreement_id });
        Ok(agreement_id)
    }

    /// Rejects the peer's request with a reason a person can read.
    pub fn reject(&mut self, request_id: u64, reason: &str) -> Result<(), AgreementError> {
        check_reason(reason)?;
        if !self.incoming.contains_key(&request_id) {
            return Err(AgreementError::UnknownRequest { request_id });
        }
        self.check_transmit_room()?;
        self.incoming.remove(&request_id);
        self.respond(
            request_id,
            Decision::Rejected {
                reason: reason.to_owned(),
            },
        );
        Ok(())
    }

    /// Answers the peer's request with other terms (the peer may take them
    /// with a new request).
    pub fn counter_propose(&mut self, request_id: u64, terms: Terms) -> Result<(), AgreementError> {
        self.check_terms(&terms)?;
        if !self.incoming.contains_key(&request_id) {
            return Err(AgreementError::UnknownRequest { request_id });
        }
        self.check_transmit_room()?;
        self.incoming.remove(&request_id);
        self.respond(request_id, Decision::CounterProposal { terms });
        Ok(())
    }

    /// Time passed: requests without an answer fail, peer requests without a
    /// decision are rejected, terminations without an answer complete.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|(_, o)| o.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for request_id in due {
            let Some(out) = self.outstanding.remove(&request_id) else {
                continue;
            };
            if let Purpose::Terminate(id) = out.purpose {
                if self.agreements.remove(&id).is_some() {
                    self.events.push_back(AgreementEvent::Terminated {
                        agreement_id: id,
                        by: EndedBy::Local,
                    });
                }
            } else {
                self.events.push_back(AgreementEvent::RequestFailed {
                    request_id,
                    reason: FailReason::TimedOut,
                });
            }
            if self.expired.len()
                >= ANSWERS_FACTOR.saturating_mul(self.config.max_outstanding_requests)
            {
                self.expired.pop_front();
            }
            self.expired.push_back((request_id, out.purpose, out.terms));
        }
        let due: Vec<u64> = self
            .incoming
            .iter()
            .filter(|(_, i)| i.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for request_id in due {
            self.incoming.remove(&request_id);
            // Bypasses the transmit ceiling: at most max_pending_incoming extra.
            self.respond(
                request_id,
                Decision::Rejected {
                    reason: "no decision within the request timeout".into(),
                },
            );
            self.events
                .push_back(AgreementEvent::RequestWithdrawn { request_id });
        }
    }

    /// SPEC SES-1: the session closes; every agreement ends, without frames.
    pub fn close(&mut self) {
        self.fail_all(FailReason::SessionClosed, EndedBy::SessionClosed);
        let ids: Vec<AgreementId> = self.agreements.keys().copied().collect();
        for agreement_id in ids {
            self.agreements.remove(&agreement_id);
            self.events.push_back(AgreementEvent::Terminated {
                agreement_id,
                by: EndedBy::SessionClosed,
            });
        }
    }

    // ----- outputs -----

    /// The next frame to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Body> {
        self.transmits.pop_front()
    }

    /// When [`AgreementManager::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let out = self.outstanding.values().map(|o| o.deadline).min();
        let inc = self.incoming.values().map(|i| i.deadline).min();
        match (out, inc) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next event for the application, if any.
    pub fn poll_event(&mut self) -> Option<AgreementEvent> {
        self.events.pop_front()
    }

    // ----- internals -----

    fn check_role(&self, kind: AgreementKind) -> Result<(), AgreementError> {
        if kind.requester() == self.role {
            Ok(())
        } else {
            Err(AgreementError::WrongRole {
                role: self.role,
                request_type: kind.request_type(),
            })
        }
    }

    fn check_terms(&self, terms: &Terms) -> Result<(), AgreementError> {
        if terms.len() > self.config.max_terms {
            return Err(AgreementError::TooLarge {
                what: "terms",
                found: terms.len(),
                max: self.config.max_terms,
            });
        }
        if let Some(key) = terms.keys().find(|k| k.starts_with(RESERVED_PREFIX)) {
            return Err(AgreementError::ReservedTerm { key: key.clone() });
        }
        Ok(())
    }

    fn check_transmit_room(&self) -> Result<(), AgreementError> {
        if self.transmits.len() >= self.config.max_queued_transmits {
            return Err(AgreementError::TransmitQueueFull {
                max: self.config.max_queued_transmits,
            });
        }
        Ok(())
    }

    /// New-agreement requests of this side in flight: each holds a slot.
    fn reserved_new(&self) -> usize {
        self.outstanding
            .values()
            .filter(|o| matches!(o.purpose, Purpose::New(_)))
            .count()
    }

    fn adjusting(&self, id: AgreementId) -> bool {
        self.outstanding
            .values()
            .any(|o| o.purpose == Purpose::Adjust(id))
    }

    fn send_request(
        &mut self,
        purpose: Purpose,
        terms: Terms,
        now: Instant,
    ) -> Result<u64, AgreementError> {
        if self.outstanding.len() >= self.config.max_outstanding_requests {
            return Err(AgreementError::TooManyOutstanding {
                max: self.config.max_outstanding_requests,
            });
        }
        self.check_transmit_room()?;
        let request_id = self.next_request_id;
        self.next_request_id = request_id
            .checked_add(1)
            .ok_or(AgreementError::RequestIdsExhausted)?;
        self.enqueue_request(request_id, purpose, terms, now);
        Ok(request_id)
    }

    fn respond(&mut self, request_id: u64, decision: Decision) {
        let answer = ResponseFrame {
            request_id,
            decision,
        };
        if self.answers.len() >= self.answers_kept() {
            self.answers.pop_front();
        }
        self.answers.push_back(answer.clone());
        self.transmits.push_back(Body::Response(answer));
    }

    /// How many answers are kept for replay after a break.
    fn answers_kept(&self) -> usize {
        ANSWERS_FACTOR
            .saturating_mul(self.config.max_outstanding_requests)
            .max(1)
    }

    /// Queues a request of this side with its id and a new deadline (for a
    /// request sent again after a break, room was checked when it was first
    /// sent).
    pub(super) fn enqueue_request(
        &mut self,
        request_id: u64,
        purpose: Purpose,
        terms: Terms,
        now: Instant,
    ) {
        let (request_type, agreement_id) = match &purpose {
            Purpose::New(kind) => (kind.request_type(), None),
            Purpose::Adjust(id) | Purpose::Terminate(id) => (RequestType::Adjustment, Some(*id)),
        };
        self.transmits.push_back(Body::Request(RequestFrame {
            request_id,
            request_type,
            agreement_id,
            terms: terms.clone(),
        }));
        self.outstanding.insert(
            request_id,
            Outstanding {
                purpose,
                terms,
                deadline: now + self.config.request_timeout,
            },
        );
    }

    fn auto_reject(&mut self, request_id: u64, reason: &str) -> Result<(), AgreementError> {
        self.respond(
            request_id,
            Decision::Rejected {
                reason: reason.to_owned(),
            },
        );
        Ok(())
    }

    fn fail_all(&mut self, reason: FailReason, ended: EndedBy) {
        let outstanding = std::mem::take(&mut self.outstanding);
        for (request_id, out) in outstanding {
            match out.purpose {
                // A termination survives a break (the agreement stays
                // `terminating` and is re-sent on restore); a close ends it.
                Purpose::Terminate(id) => {
                    if reason == FailReason::SessionClosed && self.agreements.remove(&id).is_some()
                    {
                        self.events.push_back(AgreementEvent::Terminated {
                            agreement_id: id,
                            by: ended,
                        });
                    }
                }
                _ => self
                    .events
                    .push_back(AgreementEvent::RequestFailed { request_id, reason }),
            }
        }
        self.incoming.clear();
        self.expired.clear();
        self.transmits.clear();
        // Undecided peer requests are gone: their events would only mislead.
        self.events
            .retain(|e| !matches!(e, AgreementEvent::RequestReceived { .. }));
    }
}

fn check_v4(id: AgreementId) -> Result<(), AgreementError> {
    if id.get_version_num() == 4 && id.get_variant() == uuid::Variant::RFC4122 {
        Ok(())
    } else {
        Err(AgreementError::InvalidAgreementId { agreement_id: id })
    }
}

fn check_reason(reason: &str) -> Result<(), AgreementError> {
    if reason.len() > MAX_REASON_LEN {
        return Err(AgreementError::TooLarge {
            what: "reason",
            found: reason.len(),
            max: MAX_REASON_LEN,
        });
    }
    Ok(())
}
