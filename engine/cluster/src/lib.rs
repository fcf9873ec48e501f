//! Blocking clients of the distributed engines DTP scales out on, for
//! worker threads (DESIGN.md §3: "State behind seams, for scale-out";
//! the control thread never blocks, so none of this runs on it):
//!
//! - [`etcd`]: etcd v3 over its HTTP/JSON gateway — keys, transactions,
//!   leases, watches — and, on top, [`ownership`]: one controller per
//!   resource across gateways, with fencing tokens (SPEC HO-4, TS-8).
//! - [`nats`]: NATS JetStream — per-stream sequences, acknowledged and
//!   deduplicated publishes, reads by sequence and replay (SPEC RT-6; the
//!   session state of SPEC SES-2/3 fits the same streams).
//! - [`occupancy`]: who occupies each resource across gateways (SPEC TS-9,
//!   HO-4), admissions serialised by etcd, each with its fencing token, and
//!   reservations that keep a handed-over resource for its target.
//! - [`sim`]: the occupancy code over a model of etcd, with seeded
//!   partitions, crashes, handovers and skewed clocks (`dtp sim --cluster`).
//!
//! Every call blocks for at most its configured timeouts (std sockets, no
//! async runtime); every answer is bounded in size; bytes a server sends
//! are parsed, never trusted: a bad answer is an [`Error`], not a panic.
//!
//! # Where it runs
//!
//! A worker thread owns one [`etcd::Etcd`] or [`nats::JetStream`] (neither
//! is shared: each holds one connection), takes requests from the control
//! thread over a channel, and hands each result back as a control input
//! carrying the decision's deadline; the control thread never waits on a
//! socket. A claim's [`Claim::revision`] (or a publish's
//! [`nats::PubAck::seq`]) travels with the decision it allowed, so a late
//! answer from a stale owner is recognised by its smaller token. Leases are
//! refreshed by the worker ([`etcd::Etcd::lease_keepalive_once`] every
//! third of the TTL); [`Error::LeaseNotFound`] means every claim on the
//! lease is gone and must be reported as lost.
//!
//! # Credentials
//!
//! [`HttpConfig::auth`] (etcd user and password) and
//! [`nats::NatsConfig::auth`] (NATS user and password, or token) are sent
//! on every connection; the etcd token is shared by every client made
//! from clones of one config and renewed once when etcd refuses it. A
//! server refusing the credentials is [`Error::AuthRefused`]. Neither a
//! password nor a token appears in `Debug` output or an error.
//!
//! # TLS
//!
//! With a [`ClusterTls`] (the deployment's CA) in [`HttpConfig::tls`],
//! `https://` etcd endpoints are reached over TLS; in
//! [`nats::NatsConfig::tls`], every NATS connection is upgraded to TLS
//! after the server's INFO. No client certificate is sent.
#![forbid(unsafe_code)]

mod error;
pub mod etcd;
mod http;
pub mod nats;
pub mod occupancy;
pub mod ownership;
pub mod sim;
mod tls;

pub use error::{
    Error, JS_NO_MESSAGE_FOUND, JS_STREAM_NAME_IN_USE, JS_STREAM_NOT_FOUND, JS_WRONG_LAST_SEQUENCE,
    MAX_SERVER_TEXT, Result,
};
pub use http::HttpConfig;
pub use occupancy::{Busy, Entered, Occupancy, Occupant};
pub use ownership::{Claim, Ownership, Released, Stale, Taken};
pub use tls::ClusterTls;

#[cfg(test)]
mod tests {
    /// Worker threads own the clients: each must move to one.
    #[test]
    fn clients_move_between_threads() {
        fn send<T: Send + 'static>() {}
        send::<crate::etcd::Etcd>();
        send::<crate::etcd::Watch>();
        send::<crate::nats::JetStream>();
        send::<crate::Error>();
        fn sync<T: Sync>() {}
        sync::<crate::Error>();
        // The lease keeper and the workers share one token.
        send::<crate::etcd::EtcdAuth>();
        sync::<crate::etcd::EtcdAuth>();
    }
}
