//! What the endpoint reports to the application and its driver.

use bytes::Bytes;
use dtp_codec::{
    AgreementId, ControlMessage, ErrorCode, FragmentId, Relation, RequestType, SessionId, Terms,
};
use dtp_proto::agreement::{EndedBy, FailReason};
use dtp_proto::session::PeerIdentity;

use super::DtpError;

/// News drained by [`DtpEndpoint::poll_event`](super::DtpEndpoint::poll_event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DtpEvent {
    /// SPEC SEQ-2, SEQ-5: the session is established (CAP finished) or
    /// resumed (resume handshake done). Application calls work from here.
    Established {
        /// The Session_ID (UUID v4, minted by the terminal during CAP).
        session_id: SessionId,
        /// The peer CAP authenticated (the Fay's `fay_id` on the terminal,
        /// the terminal's static Noise key on the Fay).
        peer: PeerIdentity,
        /// True when an earlier session was resumed.
        resumed: bool,
    },
    /// SPEC SEQ-5 (terminal side): the Fay asks to resume `session_id`.
    /// The driver answers with
    /// [`resume_with`](super::DtpEndpoint::resume_with) (the suspended
    /// session taken from its the gateway's registry)
    /// or [`refuse_resume`](super::DtpEndpoint::refuse_resume).
    ResumeRequested {
        /// The session named by the Fay.
        session_id: SessionId,
    },
    /// SPEC SEQ-3a/3b, AGR-1: the peer asks for an agreement (or an
    /// adjustment); answer with `accept`, `reject` or `counter_propose`.
    AgreementRequested {
        /// The peer's request id (quote it in the answer).
        request_id: u64,
        /// Collection, injection or adjustment.
        kind: RequestType,
        /// The agreement to adjust (adjustments only).
        agreement_id: Option<AgreementId>,
        /// The proposed terms.
        terms: Terms,
    },
    /// SPEC AGR-2, AGR-3: an agreement is active (new), or runs under new
    /// terms (`adjusted`). Reported on both sides.
    AgreementActive {
        /// The agreement.
        agreement_id: AgreementId,
        /// The terms in force.
        terms: Terms,
        /// True for an adjustment of an existing agreement.
        adjusted: bool,
    },
    /// SPEC SEQ-3a: the peer rejected this side's request.
    AgreementRejected {
        /// This side's request id.
        request_id: u64,
        /// The peer's reason.
        reason: String,
    },
    /// SPEC SEQ-3a: the peer answered this side's request with other terms;
    /// take them with a new request.
    CounterProposal {
        /// This side's request id.
        request_id: u64,
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
    /// The peer's request was answered by the endpoint itself (no decision
    /// in time, or its agreement ended); it can no longer be answered.
    RequestWithdrawn {
        /// The peer's request id.
        request_id: u64,
    },
    /// SPEC AGR-2: an agreement reached `terminated`. Every fragment of it
    /// the DAG released was reported before this event.
    AgreementEnded {
        /// The agreement.
        agreement_id: AgreementId,
        /// Who ended it.
        by: EndedBy,
        /// Fragments still waiting for a dependency that never came; they
        /// are dropped.
        undelivered: usize,
    },
    /// SPEC SEQ-4, DAG-3: a fragment, in DAG order (every fragment it
    /// relates to was reported before it), exactly once per session.
    Fragment {
        /// Its agreement.
        agreement_id: AgreementId,
        /// Its id within the agreement.
        fragment_id: FragmentId,
        /// Its sequence number in the peer's sending direction (RES-1).
        sequence: u64,
        /// Its relations (DAG-4).
        relations: Vec<Relation>,
        /// Its bytes: a slice of the buffer it arrived in (no copy).
        payload: Bytes,
    },
    /// SPEC RES-4: the resume cache drained after a BUFFER_FULL;
    /// `send_fragment` works again.
    Writable,
    /// A terminal control-plane message (FORMAT.md §6) from the peer, for
    /// the gateway's control thread.
    Control(ControlMessage),
    /// An error. Followed by [`DtpEvent::Closed`] when it is fatal.
    Error(DtpError),
    /// The connection is closed, by this side (with the code it sent) or by
    /// the peer (with the peer's code). Nothing more will happen.
    Closed {
        /// The close code (0 NORMAL for a clean close).
        code: ErrorCode,
    },
}
