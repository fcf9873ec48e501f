//! The DTP connection endpoint (SPEC §1): CAP, encryption, agreements, the
//! DAG and resume put together behind one sans-IO object per connection.
//!
//! **Owns**: one connection's [`DtpEndpoint`] — its CAP machine, its
//! Encryption Module, its engine state machine, and while a session lives
//! on it, the session's Agreement Manager, DAG Managers, Resume sender and
//! receiver; the [`SuspendedSession`] a lost connection leaves behind; and
//! (a gateway keeps it in a shared registry or a directory until the Fay
//! comes back).
//!
//! **Never touches**: sockets, clocks, threads or global randomness (time
//! and random bytes are passed in), the runtime (a gateway's shard is one
//! driver of this machine, the tests' virtual-time pair is another), the wire layouts (`dtp-codec`), the cryptography (`dtp-crypto`)
//! or the rules of the sub-machines (`dtp-proto`): this module wires them
//! together and decides only what they leave to their driver.
//!
//! # Driving an endpoint (quinn-proto style)
//!
//! ```text
//! inputs   handle_frame(wire, now)      one complete frame (split the byte
//!                                       stream with dtp_codec::peek_frame_len)
//!          handle_timeout(now)          when poll_timeout's instant is reached
//!          connection_lost(now)         the transport dropped: -> Option<SuspendedSession>
//!          request_collection / request_injection / request_adjustment /
//!          accept / reject / counter_propose / terminate / send_fragment /
//!          send_control / close         the application
//!          resume_with / refuse_resume  the driver, after ResumeRequested
//! outputs  poll_transmit(&mut BytesMut) wire bytes to send, appended
//!          poll_event()                 DtpEvent, until None
//!          poll_timeout()               the next instant to call handle_timeout
//! ```
//!
//! After every input the driver drains, in this order, `poll_transmit`,
//! `poll_event` (until `None`) and `poll_timeout`. Queues are bounded on
//! that assumption: a driver that never drains eventually has its
//! connection closed with LIMIT_EXCEEDED rather than unbounded memory.
//!
//! # The rules this module chooses
//!
//! - **SEQ-1, order of a connection.** CAP runs first, in plaintext
//!   `handshake` frames on stream 0 whose stage is the CAP message number
//!   (the Fay sends 1 and 3, the terminal 2 and 4). Before CAP finishes
//!   only handshake and close frames are accepted; anything else aborts CAP
//!   (FSM WaitingForCAP → Idle, close with CAP_FAILED). After CAP every
//!   frame is sealed (ENC-3 holds by construction: nothing is sealed without
//!   keys); a plaintext frame other than close is refused with
//!   DECRYPT_FAILED. A plaintext close is accepted at any time (a peer may
//!   fail before it has keys; whoever can inject it on the path can reset
//!   the transport anyway).
//! - **Key version (ENC-4, SEQ-5).** The Fay chooses it: 1 for a new
//!   session, above the suspended session's version for a resume (its
//!   version + 1, or more after an aborted attempt). The terminal installs
//!   its keys when the Fay's first sealed frame arrives, at the version that
//!   frame's plaintext header names; a new session must use 1, a resume must
//!   use a version above the one the session was suspended with (checked
//!   in [`DtpEndpoint::resume_with`]). Version labels never repeat within a
//!   session, and every connection's keys are fresh from its own handshake.
//! - **The Fay's first sealed frame** says what the connection is for:
//!   `RESUME` (resume a session) or anything else — the Fay sends a sealed
//!   `ACK 0` right after CAP, which also confirms it holds the keys. The
//!   terminal reports [`DtpEvent::Established`] (new session, the Session_ID
//!   minted during CAP, SEQ-2) or [`DtpEvent::ResumeRequested`] accordingly;
//!   application calls before `Established` fail with
//!   [`DtpError::NotEstablished`].
//! - **Engine state (FSM-1/2).** Every state change is a
//!   transition of the table
//!   ([`EngineFsm`](dtp_proto::fsm::EngineFsm)); events without a row in the current state are
//!   not fed (the FSM docs list the consequences: a side that sends a new
//!   request or an adjustment while Transmitting stays Transmitting). The
//!   endpoint derives Negotiating/Transmitting/SessionEstablished from the
//!   Agreement Manager after each input (`settle`). Data may flow while
//!   Negotiating (an adjustment of one agreement does not stop the others);
//!   only Transmitting has a `fragment sent` row. A close drops the
//!   session's machine (the table has no close row, as in
//!   `dtp_proto::session`): [`DtpEndpoint::state`] then reports Idle.
//!   WaitingForCAP fails through its own row, SessionEstablished times out
//!   through its own row, Resuming fails through its own row.
//!   On a resume, the connection's machine (WaitingForCAP) hands over to
//!   the session's once CAP re-verified the peer: Suspended → Resuming →
//!   Transmitting.
//! - **Connection loss (SEQ-5, SES-2).** Transmitting → Suspended hands the
//!   whole session to the driver as a [`SuspendedSession`]: agreements
//!   (negotiations in flight fail, `dtp_proto::agreement` rules), the resume
//!   sender with its cached plaintext frames, the receiver's position, the
//!   DAGs and the key version. Negotiating with an agreement still in force
//!   first settles (AgreementReached) then suspends; without an agreement
//!   there is nothing to resume and the session ends through the table:
//!   Negotiating → negotiation failed → SessionEstablished → underlying
//!   connection lost → Idle (the row SPEC.md adds for the seed's gap;
//!   WaitingForCAP takes its CAP-failure row).
//!   On the Fay, a resume attempt is tentative until the terminal's RESUME
//!   arrives: a cut before that hands back the suspended session (with the
//!   key version of the attempt, so the next one goes higher); the tentative
//!   Resuming machine is dropped, never driven through a missing row.
//! - **Resume handshake.** Fay: `RESUME{session, highest_received}`;
//!   terminal: [`DtpEvent::ResumeRequested`], then the driver's
//!   [`DtpEndpoint::resume_with`] checks the session id, the DTP role, the
//!   CAP-authenticated peer (the Fay's `fay_id`) and the key version, answers
//!   with its own RESUME and resends; the Fay resends on the terminal's
//!   RESUME. Every refusal is RESUME_FAILED (6002), whatever the cause, and
//!   a refused session is handed back to the driver untouched.
//! - **Data frames always name their agreement.** The resume cache keeps
//!   each data frame's plaintext encoding and a resend after a reconnect
//!   is those bytes, re-sealed (`Sealer::seal_encoded`); inheritance context
//!   is per connection (FORMAT.md §5.3), so a cached frame must not depend
//!   on it. Received frames may still inherit ([`dtp_codec::AgreementContext`]).
//! - **Data under an ending agreement.** Data for an agreement this side is
//!   terminating, or one that ended recently (a bounded memory), is dropped
//!   silently: the peer sent it before it learnt of the end. Data for any
//!   other inactive agreement is UNKNOWN_AGREEMENT (3002), fatal.
//! - **DAG errors.** DAG_CYCLE_DETECTED (4001) and a reused fragment id are
//!   the peer application's mistakes about one fragment: that fragment is
//!   dropped, the application gets [`DtpEvent::Error`], the connection goes
//!   on (the fragment counts as received, so it is not resent forever).
//!   DAG_PENDING_LIMIT (4002) closes the connection: continuing would drop a
//!   valid fragment silently, and DTP has no flow control to slow the peer.
//! - **Delivery.** Released fragments go straight to the event queue, in
//!   DAG order, and count against `max_undelivered_*`; an agreement's end is
//!   reported after its last released fragment. Duplicates after a resume
//!   are recognised by the Resume receiver and never delivered twice.
//! - **Errors.** From the peer, fatal errors send a close frame with the
//!   code, then report [`DtpEvent::Error`] and [`DtpEvent::Closed`]. From
//!   the application, errors are returned and change nothing. Nothing
//!   panics on peer input.
//!
//! # Copies and allocations on the hot path
//!
//! - **Receive: no copy.** The frame's buffer ([`dtp_codec::FrameBuf`]) is
//!   decrypted in place
//!   ([`Opener::open_frame`](dtp_crypto::aead::Opener::open_frame)) and the
//!   delivered payload is a slice of it. Under `dtp_gateway::dtp::DtpGateway` that buffer is
//!   the pool chunk the kernel received the frame into (a
//!   `dtp_transports::RecvBuf`) whenever the frame lies wholly inside one
//!   read; only a frame straddling two reads is assembled (copied) first.
//!   A payload the application keeps pins its receive chunk: the shard
//!   copies instead of lending once half the receive chunks are out, so a
//!   hoarding application costs copies, never a stalled connection. The codec allocates a fragment's
//!   relation list when it has relations; the endpoint clones that list
//!   (only when non-empty) to hand it to the application after the DAG.
//! - **Send: two copies of the payload.** `send_fragment` encodes the
//!   plaintext frame once into the resume cache (RES-2 needs the plaintext
//!   to outlive the ciphertext: a resend is sealed under a new key). The
//!   encoding goes into a block-allocated arena (`BytesMut::split`), so
//!   fragments share allocations that are reclaimed once acknowledged.
//!   `poll_transmit` copies the cached frame into the transmit buffer and
//!   encrypts it there, in place. Control frames are encoded straight into
//!   the transmit buffer.
//!
//! # Known gaps
//!
//! - Agreement negotiations survive a cut (SPEC SEQ-5): requests in flight
//!   are sent again with their ids and each side replays its latest
//!   answers first thing after the resume, before any resent data (the
//!   `dtp_proto::agreement` docs, "Connection loss"). A session that had
//!   no agreement yet is not suspended, so its requests fail with
//!   `ConnectionLost`.
//! - Data queued but not yet handed to `poll_transmit` when the connection
//!   drops is not lost (it is in the resume cache and resent), but terminal
//!   control-plane messages (`send_control`) queued at that moment are:
//!   they are requests with ids that the runtime retries (SPEC §2), not
//!   part of the DTP stream.
//!
//! # Sessions across cores
//!
//! [`SessionRegistry`] is the one shared object: a mutex-protected, bounded
//! map of suspended sessions with an expiry. A mutex is acceptable because
//! it is taken only at connect and disconnect (insert on loss, take on
//! resume, expire on a slow timer), never per frame; the hot path stays
//! lock-free and core-local.
//!
//! # Sessions across restarts (SES-2, SES-3)
//!
//! [`SuspendedSession::to_bytes`] / [`SuspendedSession::from_bytes`] give a
//! suspended session a versioned, checksummed byte form (layout and what is
//! persisted: `persist.rs`; no key material — a resume always runs a new
//! CAP handshake under a higher key version), read back under the resuming
//! endpoint's ceilings. `dtp_gateway::dtp::DirSessionStore` keeps them in a directory, one
//! atomically written file each, behind the same [`SuspendedSessions`]
//! trait as the registry.

#![forbid(unsafe_code)]

mod app;
mod cap;
mod config;
mod endpoint;
mod error;
mod event;
mod persist;
mod recv;
mod registry;
mod session;
mod transmit;

#[cfg(test)]
mod tests;

pub use config::{
    DEFAULT_IDLE_TIMEOUT, EndpointConfig, FayConfig, MAX_HEARTBEAT_INTERVAL, TerminalConfig,
};
pub use endpoint::{DtpEndpoint, Side};
pub use error::DtpError;
pub use event::DtpEvent;
pub use persist::{SESSION_FORMAT_VERSION, SESSION_MAGIC};
pub use registry::{
    ParkError, ParkRefused, RESUME_GRACE, RESUME_POLL, RegistryFull, ResumeWaiter, SessionRegistry,
    SuspendedSessions, Taken,
};
pub use session::{ResumeRefused, SuspendedSession};

pub use dtp_proto::agreement::{Agreement, AgreementKind, EndedBy, FailReason, Role};
pub use dtp_proto::fsm::EngineState;
pub use dtp_proto::persist::PersistError;
pub use dtp_proto::session::PeerIdentity;
