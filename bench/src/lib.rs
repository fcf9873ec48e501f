//! The side-by-side workload harness of `dtp bench`, minus the engine and the
//! load generator (which live in `engine/` and `tools/`), plus shared helpers
//! for the criterion benchmarks in `benches/`.
//!
//! - [`workload`]: the application protocol every benchmarked server speaks,
//!   and the sans-IO [`workload::Responder`] that *is* their server logic.
//! - [`dtp_workload`]: the same workloads over the full DTP protocol, and
//!   [`dtp_workload::DtpResponder`], the server application of every DTP
//!   server in the benchmark.
//! - [`control_workload`]: the `control` workload's rules (issue 5): who
//!   asks for which resource, the Fays' credentials, the `[terminal]`
//!   section that serves it.
//! - [`peer_tokio`]: the peer server, the same protocol on tokio.
//! - [`peer_tokio_dtp`]: the peer server running the full DTP protocol on
//!   tokio, over TCP, over WebSocket (tokio-tungstenite) or over QUIC
//!   (quinn).
//! - [`peer_tokio_uring`]: the same protocol on tokio-uring, one runtime per core.
//! - [`loopback`]: the machine's loopback limit for `stream`;
//!   [`udp_loopback`] its UDP counterpart for the QUIC stream.
//! - [`aead_limit`]: the single-core AEAD limit for encrypted `stream`.
//! - [`sealed_limit`]: the sealed-stream limit: sealing on one core, opening
//!   on another, over loopback TCP.
//! - [`procstat`]: the OS's accounting (CPU, RSS, threads) of a server process.
//! - [`latency`]: the latency histogram, with coordinated-omission correction.
//! - [`report`]: the JSON report, the median of several runs, the table;
//!   [`control_report`] its `control` part (no peer, no ratio).
//!
//! The schema and the measuring rules are written down in
//! `perf/bench-harness.md`.
#![forbid(unsafe_code)]

pub mod aead_limit;
pub mod control_report;
pub mod control_workload;
pub mod dtp_workload;
pub mod latency;
pub mod loopback;
pub mod peer_realtime;
pub mod peer_tokio;
pub mod peer_tokio_dtp;
pub mod peer_tokio_uring;
#[cfg(feature = "webpush-peer")]
pub mod peer_webpush;
pub mod procstat;
pub mod push_service;
pub mod report;
pub mod sealed_limit;
pub mod udp_loopback;
pub mod workload;
