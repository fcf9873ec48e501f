//! DTP's runtime: thread-per-core shards over a [`Transport`], the services
//! they run, and the control thread they share. It names no application:
//! the DTP gateway, the terminal plane and the realtime front end are
//! services of the `dtp-gateway` crate, run on it like any other.
//!
//! A connection lives on one shard for its whole life. Bytes arrive in
//! buffers the transport lends and go to the shard's [`Service`] as they
//! come — cut into whole DTP frames first by [`Framed`] for a
//! [`FrameService`] — and what it answers is queued in one batch per
//! connection per poll. [`Routed`] runs several services on
//! one shard, by listener name.
//!
//! Decisions that span connections and cores belong to one control
//! thread, linked to every shard by a pair of bounded lock-free rings
//! ([`ControlPlane`]): each service talks to its own control-plane half in
//! its own messages ([`Service::Up`], [`Service::Down`]), which the rings
//! carry without looking inside.
//!
//! Nothing here uses `unsafe`; nothing here blocks except the transport's
//! poll and the idle control thread.
//!
//! [`Transport`]: dtp_transports::Transport
#![forbid(unsafe_code)]

#[cfg(not(loom))]
mod clock;
mod control;
#[cfg(not(loom))]
mod framed;
#[cfg(not(loom))]
mod local;
mod notify;
// Under `--cfg loom` only the control thread's protocol is built, to be
// model-checked (its threads are loom's; the shards' are std's).
#[cfg(not(loom))]
mod routed;
#[cfg(not(loom))]
mod runtime;
#[cfg(not(loom))]
mod service;
#[cfg(not(loom))]
mod shard;
mod sync;

#[cfg(not(loom))]
pub use clock::{Clock, ManualClock, SystemClock};
pub use control::{ControlMetrics, ControlPlane, ControlWaker, Decision, Request};
#[cfg(not(loom))]
pub use framed::{Frame, FrameService, Framed, FramedConn};
#[cfg(not(loom))]
pub use local::Local;
pub use notify::Notifier;
#[cfg(not(loom))]
pub use routed::{Routed, RoutedConn};
#[cfg(not(loom))]
pub use runtime::{
    CONTROL_THREAD, Engine, EngineConfig, EngineHandle, Listener, ShardMetrics, ShardSnapshot,
};
#[cfg(not(loom))]
pub use service::{Connections, Ctl, Origin, Outbox, Service};
#[cfg(not(loom))]
pub use shard::{Conns, Shard};
