//! The [`AgreementManager`] across a connection break (SPEC SES-2, SES-3,
//! SEQ-5): what the snapshot keeps and how the restore sends requests and
//! answers again (rules in the module docs, "Connection loss").

use std::collections::BTreeSet;
use std::time::Instant;

use dtp_codec::{Body, Terms};

use super::{AgreementManager, Purpose, check_v4};
use crate::agreement::{
    Agreement, AgreementConfig, AgreementError, AgreementEvent, AgreementSnapshot, AgreementState,
    EndedBy, FailReason, PersistedAgreement, PersistedRequest, Role, TERMINATE_KEY,
};

impl AgreementManager {
    /// SPEC SES-3: a manager for a resumed session, with the agreements and
    /// request-id counters of `snapshot`.
    pub fn restore(
        role: Role,
        config: AgreementConfig,
        mut snapshot: AgreementSnapshot,
        now: Instant,
    ) -> Result<Self, AgreementError> {
        let mut manager = Self::new(role, config);
        if snapshot.agreements.len() > config.max_active_agreements {
            return Err(AgreementError::TooManyAgreements {
                max: config.max_active_agreements,
            });
        }
        for a in std::mem::take(&mut snapshot.agreements) {
            check_v4(a.id)?;
            let agreement = Agreement {
                id: a.id,
                kind: a.kind,
                initiator: a.initiator,
                terms: a.terms,
                state: AgreementState::Active,
            };
            if manager.agreements.insert(a.id, agreement).is_some() {
                return Err(AgreementError::DuplicateAgreementId { agreement_id: a.id });
            }
        }
        manager.next_request_id = snapshot.next_request_id.max(1);
        manager.highest_peer_request_id = snapshot.highest_peer_request_id;
        manager.restore_requests(snapshot, now)?;
        Ok(manager)
    }

    /// The request-level part of [`AgreementManager::restore`]: answers to
    /// replay, peer requests to decide afresh, and this side's requests sent
    /// again (in-flight ones with their ids, terminations with new ones).
    fn restore_requests(
        &mut self,
        snapshot: AgreementSnapshot,
        now: Instant,
    ) -> Result<(), AgreementError> {
        // Orphan terminations may exceed the ceiling by the expired ring.
        let max = self.config.max_outstanding_requests + self.answers_kept();
        if snapshot.in_flight.len() + snapshot.terminating.len() > max
            || snapshot.undecided.len() > self.config.max_pending_incoming
        {
            return Err(AgreementError::TooManyOutstanding { max });
        }
        let keep = self.answers_kept();
        let skip = snapshot.answers.len().saturating_sub(keep);
        self.answers = snapshot.answers.into_iter().skip(skip).collect();
        // First out after the break: the answers the peer may have missed.
        self.transmits
            .extend(self.answers.iter().cloned().map(Body::Response));
        let skip = snapshot.expired.len().saturating_sub(keep);
        for r in snapshot.expired.into_iter().skip(skip) {
            let purpose = match r.adjusts {
                Some(id) => Purpose::Adjust(id),
                None => Purpose::New(self.role.requests()),
            };
            self.expired.push_back((r.request_id, purpose, r.terms));
        }
        self.undecided = snapshot
            .undecided
            .into_iter()
            .filter(|id| *id <= self.highest_peer_request_id)
            .collect();
        for r in snapshot.in_flight {
            if r.request_id == 0 || r.request_id >= self.next_request_id {
                return Err(AgreementError::UnknownRequest {
                    request_id: r.request_id,
                });
            }
            let purpose = match r.adjusts {
                Some(id) if !self.agreements.contains_key(&id) => {
                    // The peer ended it while the adjustment was in flight.
                    self.events.push_back(AgreementEvent::Rejected {
                        request_id: r.request_id,
                        reason: "the agreement ended before the adjustment was answered".into(),
                    });
                    continue;
                }
                Some(id) => Purpose::Adjust(id),
                None => Purpose::New(self.role.requests()),
            };
            self.enqueue_request(r.request_id, purpose, r.terms, now);
        }
        // Terminations go again with new ids (bounded like the requests in
        // flight: the restore bypasses the transmit ceiling).
        for id in snapshot.terminating {
            let reason = match self.agreements.get_mut(&id) {
                Some(a) => {
                    a.state = AgreementState::Terminating;
                    ""
                }
                // Ended here already (its termination timed out), or an
                // orphan: the peer's late acceptance of a request that had
                // timed out here.
                None => "ended while the connection was down",
            };
            let terms = Terms::from([(TERMINATE_KEY.to_owned(), reason.to_owned())]);
            let request_id = self.next_request_id;
            self.next_request_id = request_id
                .checked_add(1)
                .ok_or(AgreementError::RequestIdsExhausted)?;
            self.enqueue_request(request_id, Purpose::Terminate(id), terms, now);
        }
        Ok(())
    }

    /// SPEC SES-2: what outlives the connection: the agreements in force,
    /// with the ones being terminated listed again in `terminating`.
    pub fn snapshot(&self) -> AgreementSnapshot {
        AgreementSnapshot {
            // Terminations in flight, and those that timed out unanswered
            // (ended here; the peer may not have heard): all go again.
            terminating: self
                .outstanding
                .values()
                .map(|o| &o.purpose)
                .chain(self.expired.iter().map(|(_, p, _)| p))
                .filter_map(|p| match p {
                    Purpose::Terminate(id) => Some(*id),
                    _ => None,
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            agreements: self
                .agreements
                .values()
                .map(|a| PersistedAgreement {
                    id: a.id,
                    kind: a.kind,
                    initiator: a.initiator,
                    terms: a.terms.clone(),
                })
                .collect(),
            next_request_id: self.next_request_id,
            highest_peer_request_id: self.highest_peer_request_id,
            // Terminations are sent again from `terminating`.
            in_flight: self
                .outstanding
                .iter()
                .filter_map(|(id, o)| persisted(*id, &o.purpose, &o.terms))
                .collect(),
            expired: self
                .expired
                .iter()
                .filter_map(|(id, purpose, terms)| persisted(*id, purpose, terms))
                .collect(),
            answers: self.answers.iter().cloned().collect(),
            undecided: self.undecided.iter().copied().collect(),
        }
    }

    /// SPEC SEQ-5: the connection dropped. Nothing is decided: requests in
    /// flight stay outstanding, to be sent again with the same ids after the
    /// restore; the peer's undecided requests are dropped (with their
    /// undelivered events) and remembered, to be decided afresh when the
    /// peer sends them again; agreements in force stay, and terminating ones
    /// are terminated again after the restore (see
    /// [`AgreementManager::snapshot`], [`AgreementManager::restore`]).
    pub fn on_connection_lost(&mut self) {
        self.undecided.extend(self.incoming.keys().copied());
        while self.undecided.len() > self.config.max_pending_incoming {
            self.undecided.pop_first();
        }
        self.incoming.clear();
        self.transmits.clear();
        self.events
            .retain(|e| !matches!(e, AgreementEvent::RequestReceived { .. }));
    }

    /// The session ends at a break instead of being suspended: every request
    /// in flight fails with `ConnectionLost`.
    pub fn abandon_in_flight(&mut self) {
        self.fail_all(FailReason::ConnectionLost, EndedBy::Local);
    }
}

/// A new-agreement or adjustment request as persisted (`None` for a
/// termination).
fn persisted(request_id: u64, purpose: &Purpose, terms: &Terms) -> Option<PersistedRequest> {
    let adjusts = match purpose {
        Purpose::New(_) => None,
        Purpose::Adjust(id) => Some(*id),
        Purpose::Terminate(_) => return None,
    };
    Some(PersistedRequest {
        request_id,
        adjusts,
        terms: terms.clone(),
    })
}
