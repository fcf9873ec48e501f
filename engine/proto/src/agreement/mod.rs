//! SPEC AGR-1 … AGR-4, SEQ-3a, SEQ-3b: the Agreement Manager.
//!
//! This module owns one session's agreements and the negotiations that make,
//! change and end them: the Request_Frames this side sent and awaits answers
//! to, the peer's Request_Frames waiting for the local application's
//! decision, and the agreements in force. It never touches bytes (frames are
//! [`dtp_codec::Body`] values; encoding and sealing belong to the driver), the
//! engine state machine ([`crate::fsm`]; the driver feeds it), fragments, or
//! the session store.
//!
//! Sans-IO: feed it the peer's frames ([`AgreementManager::handle_request`],
//! [`AgreementManager::handle_response`]), the application's decisions
//! ([`AgreementManager::accept`], [`AgreementManager::reject`],
//! [`AgreementManager::counter_propose`]) and time
//! ([`AgreementManager::handle_timeout`]); then drain, in this order,
//! [`AgreementManager::poll_transmit`] (frames to send),
//! [`AgreementManager::poll_timeout`] (next wake-up) and
//! [`AgreementManager::poll_event`] (news for the application).
//!
//! # Rules this module chooses (the seeds leave them open)
//!
//! - **Lifecycle (AGR-2).** *negotiating*: a request is in flight (it has a
//!   request id, no Agreement_ID yet); *active*: accepted, listed by
//!   [`AgreementManager::agreements`]; *terminating*: this side asked to end
//!   it and awaits the answer (no new adjustment, no new data); *terminated*:
//!   removed, reported once as [`AgreementEvent::Terminated`].
//! - **Who decides.** The side that receives a request never decides by
//!   itself: it reports [`AgreementEvent::RequestReceived`] and the
//!   application answers. The manager answers on its own only to keep its
//!   promises: a request over a ceiling, an adjustment that collides with
//!   another one, or one left unanswered past `request_timeout` is rejected
//!   with a reason, so every request is eventually answered or times out.
//! - **Accept mints the id (AGR-3).** [`AgreementManager::accept`] builds a
//!   UUID v4 from 16 random bytes the caller passes in. An adjustment keeps
//!   its agreement's id (the response echoes it): the agreement continues
//!   with new terms, so data in flight and stream inheritance stay valid.
//! - **Counter-proposals.** A counter-proposal answers (and closes) the
//!   request. The requester's application sees
//!   [`AgreementEvent::CounterProposed`] and takes it by issuing a *new*
//!   request with those terms (or gives up). The side that counter-proposed
//!   keeps no state about it: the new request is decided like any other.
//!   This keeps one response per request, as the codec has it.
//! - **Termination.** The codec has no frame for it, so ending an agreement
//!   is an adjustment request whose terms are exactly
//!   `{"dtp.terminate": <reason>}` ([`TERMINATE_KEY`]). Ending is
//!   unilateral: the receiver's manager ends the agreement at once, answers
//!   `Accepted` with the same id and tells its application; the requester
//!   ends it on any answer, or when the answer times out. Ending an
//!   agreement the receiver does not know is confirmed all the same
//!   (idempotent, like a repeated release). Keys starting with
//!   `dtp.` ([`RESERVED_PREFIX`]) are reserved: the application may not use
//!   them, and a peer's request that carries any other reserved key is a
//!   protocol error. Closing the session ([`AgreementManager::close`]) ends
//!   every agreement without frames.
//! - **Request ids** start at 1 and strictly increase per side for the whole
//!   session, across reconnects (they are part of [`AgreementSnapshot`]). A
//!   peer's id not above the highest seen is a duplicate — one number
//!   detects every replay, in bounded memory.
//! - **Adjustment glare.** One adjustment per agreement per side at a time.
//!   When both sides adjust the same agreement at once, the Master's wins:
//!   the Master rejects the Slave's, and the Slave's application decides the
//!   Master's. Both sides then agree on the terms.
//! - **Connection loss.** A break loses no decision (SPEC SEQ-5). Agreements
//!   in force survive in [`AgreementManager::snapshot`]; a termination in
//!   progress is sent again by [`AgreementManager::restore`]. A request in
//!   flight is neither failed nor forgotten: the restore sends it again
//!   *with the same id*. Each side keeps its latest answers (at least
//!   [`ANSWERS_FACTOR`] × `max_outstanding_requests` of them, in its
//!   snapshot), sends them again first thing after the restore — before the
//!   resume resends any data, so data never arrives under an agreement whose
//!   acceptance the other side has not yet seen — and answers a request it
//!   already decided by replaying its answer. So an `Accepted` lost with the
//!   connection arrives after the resume and both sides run the same
//!   agreement with the same terms; an answer the requester already had is
//!   a late answer and changes nothing; a request that timed out meanwhile
//!   (also kept in the snapshot) has its late acceptance ended, as always.
//!   A peer request still undecided at the break is dropped with its event
//!   and, when the peer sends it again, decided afresh. Any other repeated
//!   id is still a duplicate. The window is enough because a stream
//!   delivers in order: the answers the peer missed are the *latest* ones
//!   this side sent, at most as many as the peer may have requests
//!   outstanding. If a session ends at the break instead of being suspended
//!   (it had no agreement yet), its requests fail with `ConnectionLost`
//!   ([`AgreementManager::abandon_in_flight`]).
//! - **Late answers.** An answer naming a request id this side never used
//!   is a protocol error; the answer to a request that already timed out is
//!   ignored — except an acceptance: a new agreement the peer accepted too
//!   late is ended at once with a termination request, and a timed-out
//!   adjustment the peer accepted after all is applied here too (with a
//!   late [`AgreementEvent::Accepted`]), so both sides converge. The terms of
//!   recently timed-out requests are kept in a ring of 4 ×
//!   `max_outstanding_requests`; an adjustment accepted later than that is
//!   the one case left apart.
//! - **Bounds.** Active agreements (counting new requests in flight, so an
//!   `Accepted` always fits), requests in flight, the peer's pending
//!   requests, queued frames and queued events all have ceilings in
//!   [`AgreementConfig`]. Past them, app calls get a typed error and peer
//!   requests an automatic rejection.

mod manager;
mod persist;
#[cfg(test)]
mod tests;

use std::time::Duration;

use dtp_codec::{AgreementId, ErrorCode, RequestType, ResponseFrame, Terms};

pub use manager::AgreementManager;

/// A manager keeps its latest answers to at least this many times
/// `max_outstanding_requests` peer requests, to replay them after a break
/// (see the module docs, "Connection loss").
pub const ANSWERS_FACTOR: usize = 4;

/// The terms key of a termination request (an adjustment whose terms are
/// exactly this key; its value is the reason, possibly empty).
pub const TERMINATE_KEY: &str = "dtp.terminate";
/// Terms keys with this prefix are reserved for the protocol.
pub const RESERVED_PREFIX: &str = "dtp.";
/// Longest rejection or termination reason, in bytes.
pub const MAX_REASON_LEN: usize = 512;

/// SPEC SEQ-3a/3b: which end of the DTP relation this engine is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// DTP_Master: requests collection (SEQ-3a), answers injection.
    Master,
    /// DTP_Slave: requests injection (SEQ-3b), answers collection.
    Slave,
}

impl Role {
    /// The other end.
    pub fn peer(self) -> Role {
        match self {
            Role::Master => Role::Slave,
            Role::Slave => Role::Master,
        }
    }

    /// The kind of new agreement this role may request.
    pub fn requests(self) -> AgreementKind {
        match self {
            Role::Master => AgreementKind::Collection,
            Role::Slave => AgreementKind::Injection,
        }
    }
}

/// What an agreement is for: the request type that created it (never
/// `Adjustment`, which changes an existing one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AgreementKind {
    /// SPEC SEQ-3a: the Master collects from the Slave.
    Collection,
    /// SPEC SEQ-3b: the Slave injects into the Master.
    Injection,
}

impl AgreementKind {
    /// The request type that asks for this kind.
    pub fn request_type(self) -> RequestType {
        match self {
            AgreementKind::Collection => RequestType::Collection,
            AgreementKind::Injection => RequestType::Injection,
        }
    }

    /// The role allowed to request it.
    pub fn requester(self) -> Role {
        match self {
            AgreementKind::Collection => Role::Master,
            AgreementKind::Injection => Role::Slave,
        }
    }
}

/// SPEC AGR-2: where an agreement in the table is in its lifecycle
/// (negotiating agreements have no id yet; terminated ones are removed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AgreementState {
    /// In force: data may flow, either side may adjust or end it.
    Active,
    /// This side asked to end it and awaits the answer.
    Terminating,
}

/// SPEC AGR-2, AGR-4: one agreement of the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// SPEC AGR-3: its id, a UUID v4.
    pub id: AgreementId,
    /// Collection or injection.
    pub kind: AgreementKind,
    /// The role that requested it.
    pub initiator: Role,
    /// The terms in force (the last accepted adjustment's, if any).
    pub terms: Terms,
    /// Active or terminating.
    pub state: AgreementState,
}

/// SPEC SES-2: what of the agreements outlives a connection.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AgreementSnapshot {
    /// The agreements in force (active or terminating).
    pub agreements: Vec<PersistedAgreement>,
    /// The agreements this side was terminating (those of `agreements`, and
    /// orphans the peer accepted too late): the restore sends their
    /// termination again.
    pub terminating: Vec<AgreementId>,
    /// The next request id this side will use.
    pub next_request_id: u64,
    /// The highest request id the peer used.
    pub highest_peer_request_id: u64,
    /// This side's new-agreement and adjustment requests still awaiting
    /// their answer at the break: the restore sends them again with the same
    /// ids (the peer answers again, or replays the answer it gave).
    pub in_flight: Vec<PersistedRequest>,
    /// This side's requests that timed out without an answer (the newest
    /// [`ANSWERS_FACTOR`] × `max_outstanding_requests`): an acceptance the
    /// peer replays after the break is then ended, as any late acceptance.
    pub expired: Vec<PersistedRequest>,
    /// This side's latest answers to the peer's requests, oldest first: the
    /// restore sends them again first (before any resent data), and a
    /// request the peer sends again after a break gets the same answer.
    pub answers: Vec<ResponseFrame>,
    /// The peer's requests that were awaiting this side's decision at the
    /// break: when the peer sends one again it is decided afresh.
    pub undecided: Vec<u64>,
}

/// SPEC SEQ-5: a request of this side in flight at a break, as persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistedRequest {
    /// Its id, kept across the break.
    pub request_id: u64,
    /// `None`: a new agreement of this role's kind; `Some`: an adjustment of
    /// that agreement.
    pub adjusts: Option<AgreementId>,
    /// The terms asked for.
    pub terms: Terms,
}

/// SPEC SES-2: one agreement in force, as persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistedAgreement {
    /// Its id.
    pub id: AgreementId,
    /// Collection or injection.
    pub kind: AgreementKind,
    /// The role that requested it.
    pub initiator: Role,
    /// The terms in force.
    pub terms: Terms,
}

/// SPEC AGR-4: the ceilings and the timer of one session's manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgreementConfig {
    /// Most agreements in force at once, counting new requests in flight.
    pub max_active_agreements: usize,
    /// Most requests of this side awaiting an answer.
    pub max_outstanding_requests: usize,
    /// Most peer requests awaiting the application's decision.
    pub max_pending_incoming: usize,
    /// Most frames queued for [`AgreementManager::poll_transmit`] before app
    /// calls and peer requests are refused (expiry rejections may exceed it
    /// by at most `max_pending_incoming`).
    pub max_queued_transmits: usize,
    /// Most events queued for [`AgreementManager::poll_event`] before peer
    /// requests are rejected as "busy".
    pub max_queued_events: usize,
    /// Most entries in one terms map (the codec's `max_map_entries`).
    pub max_terms: usize,
    /// How long a request waits for its answer — and how long the
    /// application has to decide a peer's request before it is rejected.
    pub request_timeout: Duration,
}

impl Default for AgreementConfig {
    fn default() -> Self {
        Self {
            max_active_agreements: 16,
            max_outstanding_requests: 16,
            max_pending_incoming: 16,
            max_queued_transmits: 64,
            max_queued_events: 64,
            max_terms: 64,
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// Why a request of this side ended without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailReason {
    /// No answer within `request_timeout`.
    TimedOut,
    /// The connection dropped before the answer.
    ConnectionLost,
    /// The session closed before the answer.
    SessionClosed,
}

/// Who ended an agreement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndedBy {
    /// This side's application (answered, timed out, or cut by connection loss).
    Local,
    /// The peer.
    Peer,
    /// The session closed.
    SessionClosed,
}

/// News for the application, drained by [`AgreementManager::poll_event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgreementEvent {
    /// The peer asks for something; answer with accept, reject or
    /// counter_propose before `request_timeout`.
    RequestReceived {
        /// The peer's request id.
        request_id: u64,
        /// Collection, injection or adjustment.
        request_type: RequestType,
        /// The agreement to adjust (adjustments only).
        agreement_id: Option<AgreementId>,
        /// The proposed terms.
        terms: Terms,
    },
    /// The manager answered the peer's request itself (no decision within
    /// `request_timeout`, or its agreement ended): answering it now fails
    /// with `UnknownRequest`.
    RequestWithdrawn {
        /// The peer's request id.
        request_id: u64,
    },
    /// The peer accepted this side's request: the agreement is active (new)
    /// or runs under the new terms (adjustment).
    Accepted {
        /// This side's request id.
        request_id: u64,
        /// The agreement.
        agreement_id: AgreementId,
        /// What was asked.
        request_type: RequestType,
        /// The terms now in force.
        terms: Terms,
    },
    /// The peer rejected this side's request.
    Rejected {
        /// This side's request id.
        request_id: u64,
        /// Why.
        reason: String,
    },
    /// The peer proposes other terms; take them with a new request.
    CounterProposed {
        /// This side's request id.
        request_id: u64,
        /// What was asked.
        request_type: RequestType,
        /// The agreement (adjustments only).
        agreement_id: Option<AgreementId>,
        /// The peer's terms.
        terms: Terms,
    },
    /// This side's request ended without an answer.
    RequestFailed {
        /// This side's request id.
        request_id: u64,
        /// Why.
        reason: FailReason,
    },
    /// SPEC AGR-2: an agreement reached `terminated`.
    Terminated {
        /// The agreement.
        agreement_id: AgreementId,
        /// Who ended it.
        by: EndedBy,
    },
}

/// SPEC AGR-1 … AGR-4: why an agreement operation was refused. From a peer's
/// frame, the driver closes with [`AgreementError::code`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgreementError {
    /// The request type belongs to the other role (SEQ-3a/3b).
    #[error(
        "a {role:?} may not request {request_type:?} (the Master requests collection, the Slave injection)"
    )]
    WrongRole {
        /// The role that asked.
        role: Role,
        /// What it asked.
        request_type: RequestType,
    },
    /// The agreement is not active in this session.
    #[error("agreement {agreement_id} is not active in this session")]
    UnknownAgreement {
        /// The agreement named.
        agreement_id: AgreementId,
    },
    /// The agreement is being terminated by this side.
    #[error("agreement {agreement_id} is being terminated")]
    AgreementTerminating {
        /// The agreement named.
        agreement_id: AgreementId,
    },
    /// No request with this id awaits an answer or a decision.
    #[error("no request {request_id} awaits an answer here (answered, expired, or never sent)")]
    UnknownRequest {
        /// The request id.
        request_id: u64,
    },
    /// The peer reused a request id (ids strictly increase, from 1).
    #[error(
        "request id {request_id} is not above the highest seen ({highest}): duplicate or replay"
    )]
    DuplicateRequestId {
        /// The id received.
        request_id: u64,
        /// The highest id seen before.
        highest: u64,
    },
    /// Two fields of a frame contradict each other.
    #[error("inconsistent frame: {0}")]
    Inconsistent(&'static str),
    /// An Agreement_ID that is not a UUID v4 (AGR-3).
    #[error("agreement id {agreement_id} is not a UUID v4")]
    InvalidAgreementId {
        /// The id received.
        agreement_id: AgreementId,
    },
    /// The Agreement_ID is already in use in this session.
    #[error("agreement id {agreement_id} is already in use; draw new random bytes")]
    DuplicateAgreementId {
        /// The id.
        agreement_id: AgreementId,
    },
    /// A terms key uses the reserved `dtp.` prefix.
    #[error("terms key {key:?} is reserved for the protocol (prefix \"dtp.\")")]
    ReservedTerm {
        /// The key.
        key: String,
    },
    /// A terms map, or a reason, is over its ceiling.
    #[error("{what}: {found} exceeds the ceiling {max}")]
    TooLarge {
        /// What is too large.
        what: &'static str,
        /// Its size.
        found: usize,
        /// The ceiling.
        max: usize,
    },
    /// SPEC AGR-4: the session holds the most agreements allowed.
    #[error("at most {max} agreements may be active (or requested) at once; end one first")]
    TooManyAgreements {
        /// The ceiling.
        max: usize,
    },
    /// The most requests allowed already await answers.
    #[error("at most {max} requests may await answers at once; wait for one")]
    TooManyOutstanding {
        /// The ceiling.
        max: usize,
    },
    /// An adjustment of this agreement by this side already awaits an answer.
    #[error("an adjustment of agreement {agreement_id} already awaits an answer")]
    AdjustmentInProgress {
        /// The agreement.
        agreement_id: AgreementId,
    },
    /// The frames queue is full: drain `poll_transmit`.
    #[error("{max} frames already wait to be sent; drain poll_transmit")]
    TransmitQueueFull {
        /// The ceiling.
        max: usize,
    },
    /// The session used every request id.
    #[error("request ids are exhausted for this session")]
    RequestIdsExhausted,
}

impl AgreementError {
    /// The wire code for a close frame.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::UnknownAgreement { .. } | Self::AgreementTerminating { .. } => {
                ErrorCode::UNKNOWN_AGREEMENT
            }
            Self::WrongRole { .. } | Self::Inconsistent(_) | Self::DuplicateAgreementId { .. } => {
                ErrorCode::INCONSISTENT
            }
            Self::UnknownRequest { .. }
            | Self::DuplicateRequestId { .. }
            | Self::InvalidAgreementId { .. }
            | Self::ReservedTerm { .. } => ErrorCode::INVALID_VALUE,
            Self::TooLarge { .. }
            | Self::TooManyAgreements { .. }
            | Self::TooManyOutstanding { .. }
            | Self::AdjustmentInProgress { .. }
            | Self::TransmitQueueFull { .. }
            | Self::RequestIdsExhausted => ErrorCode::LIMIT_EXCEEDED,
        }
    }
}
