//! A blocking NATS client (text protocol: INFO, CONNECT, PUB, HPUB, SUB,
//! MSG, HMSG, PING, PONG, -ERR) and JetStream over it, for worker threads.
//!
//! - [`Nats`]: one connection, request/reply through one inbox.
//! - [`JetStream`]: streams, acknowledged publishes with dedupe and
//!   optimistic concurrency, reads by sequence and replay.

mod auth;
mod client;
mod headers;
mod jetstream;
mod js_types;
mod proto;
#[cfg(test)]
mod tests;

pub use auth::NatsAuth;
pub use client::{Message, Nats, NatsConfig};
pub use headers::Headers;
pub use jetstream::{JetStream, Replay, Replayed};
pub use js_types::{
    PubAck, Publish, Storage, StoredMessage, StreamConfig, StreamInfo, StreamState,
};
