//! The realtime benchmark peer (issue 6): the HTTP, SSE and `realtime.v1`
//! endpoints of our realtime front end (SPEC RT-3, RT-6, RT-8, RT-9,
//! RT-10), written the way a tokio user would write them — axum routes, an
//! axum `Sse` response, axum's WebSocket (tokio-tungstenite), and one
//! `tokio::sync::broadcast` channel per stream — so `dtp bench` can drive
//! it and our io_uring front end with the same subscriber load generator.
//!
//! What is shared with our server, so the comparison measures the IO path
//! and the runtime rather than two protocol implementations: the wire
//! formats of `dtp_codec::realtime` (each envelope is encoded once with
//! `write_envelope` and shared by every subscriber as an `Arc`), and the
//! `dtp_realtime` ledger for epochs, sequences, retention and cursors.
//!
//! The contract (byte-identical to ours where the load generator looks):
//! - `POST /v1/streams/{stream}/events` (bearer token, `application/json`,
//!   exactly `{"eventType","payload"}`) → `201`
//!   `{"streamId","streamEpoch","sequence","resumeCursor"}`.
//! - `GET /v1/streams/{stream}/sse` (bearer token) → `text/event-stream`,
//!   `Cache-Control: no-store, no-transform`, `retry: 2000`, then blocks
//!   `id: <resumeCursor>` / `data: <envelope>`, `: heartbeat` comments every
//!   15 s; `Last-Event-ID` resumes from the ledger.
//! - `GET /v1/ws`, subprotocol `realtime.v1` (bearer token) → WELCOME,
//!   SUBSCRIBE → SUBSCRIBED + EVENTs, HEARTBEAT → HEARTBEAT_ACK,
//!   UNSUBSCRIBE → UNSUBSCRIBED.
//! - `GET /v1/health` → `200 {"status":"ok"}`.
//!
//! Slow consumers (SPEC RT-10): each stream's channel holds
//! [`BROADCAST_CAPACITY`] events; a subscriber that falls further behind
//! (`RecvError::Lagged`) is never skipped forward: SSE gets an
//! `event: control` block `{"type":"RESET_REQUIRED","reason":"QUEUE_OVERFLOW"}`
//! and its stream ends; a WebSocket gets `{"type":"CLOSE","category":"OVERLOADED"}`
//! and close code 1013. (Ours bounds each connection at 256 KiB of queued
//! bytes instead: about 700 envelopes of the bench's size, the same order.)
//!
//! Left out, as the benchmark does not use them: snapshots, cut/kick, the
//! login cookie, the `?cursor=` query, Origin checks (clients send none),
//! per-client grants (one token reads and publishes every stream), and the
//! periodic age-out of retained events (retention still bounds them by
//! count and bytes: 10,000 events, 16 MiB).
//!
//! Not tuned beyond what a careful tokio user does: `TCP_NODELAY` on, one
//! worker per core, WebSocket writes flushed once per batch of ready events,
//! a 4 KiB WebSocket read buffer instead of tungstenite's 128 KiB (clients
//! only send small control messages). Everything else is a library default.

mod http;
mod state;
mod ws;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_client;
#[cfg(test)]
mod tests_ws;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;

/// Events each stream's broadcast channel holds for its slowest subscriber
/// before that subscriber is reset (SPEC RT-10).
pub const BROADCAST_CAPACITY: usize = 1024;
/// SSE comment heartbeat period, as ours (below common proxy idle timeouts).
pub const SSE_HEARTBEAT: Duration = Duration::from_secs(15);
/// The SSE `retry:` hint sent first, as ours.
pub const SSE_RETRY: Duration = Duration::from_secs(2);
/// WELCOME's heartbeat bounds, as ours.
pub const WS_HEARTBEAT_MIN: Duration = Duration::from_secs(10);
/// See [`WS_HEARTBEAT_MIN`]; a connection silent for twice this is closed.
pub const WS_HEARTBEAT_MAX: Duration = Duration::from_secs(30);
/// Largest inbound WebSocket message (SPEC RT-13: 64 KiB).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Logical subscriptions per WebSocket connection (SPEC RT-13: 32).
pub const MAX_SUBSCRIPTIONS: usize = 32;
/// How long shutdown waits for connection tasks before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The peer's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// Runtime worker threads (0: one per available core).
    pub workers: usize,
    /// The bearer token that may subscribe and publish.
    pub token: String,
    /// The streams: (stream id, scope binding). Every stream is `CURSOR`
    /// with the default retention, as `dtp serve`'s demo stream.
    pub streams: Vec<(String, String)>,
    /// The event types every stream registers.
    pub event_types: Vec<String>,
}

impl Default for PeerConfig {
    /// `dtp serve`'s embedded `[realtime]` defaults: `127.0.0.1:7780`,
    /// stream `demo` with scope `demo-scope`, token `dtp-demo-token`, event
    /// types `demo.tick` and `demo.note`.
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7780)),
            workers: 0,
            token: "dtp-demo-token".into(),
            streams: vec![("demo".into(), "demo-scope".into())],
            event_types: vec!["demo.tick".into(), "demo.note".into()],
        }
    }
}

impl PeerConfig {
    /// The number of worker threads the runtime gets.
    pub fn worker_threads(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// Runs the peer until the process is killed: builds a multi-thread tokio
/// runtime with [`PeerConfig::worker_threads`] workers, binds, calls
/// `ready` with the bound address, and serves. An invalid configuration
/// (empty token, an invalid or repeated stream, no or bad event types) is
/// [`io::ErrorKind::InvalidInput`].
pub fn run(config: PeerConfig, ready: impl FnOnce(SocketAddr)) -> io::Result<()> {
    run_until(config, ready, std::future::pending())
}

/// [`run`] until `shutdown` completes (e.g.
/// [`crate::peer_tokio::stdin_closed`] for a child process), then gives
/// connections [`SHUTDOWN_GRACE`] and returns. The accept loop runs on the
/// calling thread, as `#[tokio::main]` would.
pub fn run_until(
    config: PeerConfig,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let app = Arc::new(state::App::new(&config)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .thread_name("rt-peer-worker")
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let listener = TcpListener::bind(config.listen).await?;
        ready(listener.local_addr()?);
        let listener = listener.tap_io(|tcp| {
            // Best effort, as every axum example: a refusal costs latency only.
            let _ = tcp.set_nodelay(true);
        });
        let serve = axum::serve(listener, http::router(app));
        tokio::select! {
            r = serve.into_future() => r,
            () = shutdown => Ok(()),
        }
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result
}
