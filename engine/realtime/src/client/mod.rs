//! The Rust client's realtime runtime, sans-IO (SPEC RT-4, RT-5, RT-7,
//! RT-13): one [`Subscription`] per logical subscription judges every
//! decoded event against the RT-5 table and remembers what was applied;
//! one [`Reconnect`] per physical connection decides when (and whether) to
//! reconnect; one [`PollLease`] schedules bounded snapshot polling (RT-11).
//!
//! Neither touches IO, clocks or randomness: the driver (load generator,
//! gateway) decodes envelopes, passes `now` and random draws in, applies
//! effects and sends messages. Decoding (RT-4's steps up to the registry and
//! scope fences) happens before [`Subscription::observe`]; the effect and
//! the commit happen after it.

mod dedupe;
mod poll;
mod reconnect;
mod subscription;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod reconnect_tests;
#[cfg(test)]
mod subscription_tests;

pub use dedupe::{DedupeConfig, DedupeConfigError};
pub use poll::{PollConfig, PollConfigError, PollLease, PollNext, PollOutcome, PollStop};
pub use reconnect::{
    DegradedReason, FailureClass, Next, NoRetryReason, Reconnect, ReconnectConfig,
    ReconnectConfigError,
};
pub use subscription::{
    CommitError, ConflictKind, Observed, SubscribedMismatch, Subscription, SubscriptionStats,
    Verdict,
};
