//! Realtime stream ledgers (server) and the subscription runtime (client)
//! for SPEC §4, sans-IO: no clocks, no randomness, no threads. Every call
//! that depends on time takes `now: Instant`; every random value (an epoch,
//! a jitter draw) is passed in, so the control thread and the tests are two
//! drivers of the same deterministic machines.
//!
//! - [`ledger`]: one stream's publication history (SPEC RT-2, RT-6): epoch,
//!   contiguous sequence, bounded replay retention, HMAC-bound resume cursors
//!   and snapshot checkpoints.
//! - [`registry`]: the streams a deployment configures, each with its ledger,
//!   refusing unknown streams and unregistered event types (SPEC RT-3).
//! - [`client`]: the Rust client's per-subscription state (SPEC RT-4, RT-5,
//!   RT-13) and the full-jitter reconnect policy (SPEC RT-7).
//!
//! This crate owns no wire format: encoding envelopes, SSE and WebSocket
//! messages is `dtp_codec::realtime`'s job; the ledger stores whatever
//! encoded item the caller gives it ([`LedgerItem`]).
#![forbid(unsafe_code)]

pub mod client;
pub mod ledger;
pub mod push;
pub mod registry;
pub mod time;

pub use client::{
    CommitError, ConflictKind, DedupeConfig, DedupeConfigError, DegradedReason, FailureClass, Next,
    NoRetryReason, Observed, PollConfig, PollConfigError, PollLease, PollNext, PollOutcome,
    PollStop, Reconnect, ReconnectConfig, ReconnectConfigError, SubscribedMismatch, Subscription,
    SubscriptionStats, Verdict,
};
pub use dtp_codec::realtime::RecoveryMode;
pub use ledger::{
    Appended, Checkpoint, Epoch, EpochUnchanged, Ledger, LedgerItem, LedgerStats, Replayed, Resume,
    ResumeRefusal, ResumeStats, Retention, RetentionError, RetentionField, SequenceExhausted,
    Start,
};
pub use registry::{PublishError, RegistryError, SpecError, StreamRegistry, StreamSpec};
