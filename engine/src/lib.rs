//! DTP engine: thread-per-core shards over the IO driver, the frame pipeline
//! of every connection, and (growing) the sans-IO protocol machines.
//!
//! A connection lives on one shard for its whole life. Bytes arrive in the
//! core's pool chunks, are decoded into frames (zero-copy slices of one
//! assembly buffer), handed to the shard's [`Service`], and the frames it
//! answers with are encoded and queued in one batch per connection per
//! poll. Between decode and service, and between service and encode, sit
//! the slots where the DTP protocol (decrypt / encrypt, sessions, resume)
//! plugs in.
//!
//! Decisions that span connections and cores (terminal sessions, handover)
//! belong to one control thread, linked to every shard by a pair of bounded
//! lock-free rings ([`ControlPlane`], module `control`).
//!
//! Nothing here uses `unsafe`; nothing here blocks except the driver's poll
//! and the idle control thread.
#![forbid(unsafe_code)]

#[cfg(not(loom))]
pub mod app;
mod control;
#[cfg(not(loom))]
pub mod dtp;
#[cfg(not(loom))]
pub mod plane;
// Under `--cfg loom` only the control thread's protocol is built, to be
// model-checked (its threads are loom's; the shards' are std's).
#[cfg(not(loom))]
pub mod realtime;
#[cfg(not(loom))]
mod routed;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod service;
#[cfg(not(loom))]
mod shard;
mod sync;

pub use control::{ControlMetrics, ControlPlane, ControlWaker, Decision, Request};
#[cfg(not(loom))]
pub use plane::{PlaneConfig, PlaneError, PlaneHandle, TerminalPlane};
#[cfg(not(loom))]
pub use routed::{Routed, RoutedConn};
#[cfg(not(loom))]
pub use runtime::{Engine, EngineConfig, EngineHandle, Listener, ShardMetrics, ShardSnapshot};
#[cfg(not(loom))]
pub use service::{Connections, Ctl, InputMode, Origin, Outbox, Service};
#[cfg(not(loom))]
pub use shard::{Conns, Shard};
