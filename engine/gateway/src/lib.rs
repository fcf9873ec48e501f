//! The applications that run on DTP's runtime (`dtp-engine`), each a
//! service on the shards and, where it needs one, a plane on the control
//! thread:
//!
//! - [`dtp`]: the terminal side of the DTP protocol ([`dtp::DtpGateway`]),
//!   with the suspended sessions a Fay resumes;
//! - [`plane`]: the terminal plane — sessions, liveness, handover and its
//!   policies, the audit log — on the control thread ([`TerminalPlane`]);
//! - [`realtime`]: the realtime front end (SSE, WebSocket `realtime.v1`,
//!   snapshots, publication) and its plane of stream ledgers;
//! - [`push`]: the Web Push sender (SPEC RT-12), HTTP/1.1 over TLS to
//!   push services on its own worker threads;
//! - [`admin`]: the admin port (terminal sessions and decisions under
//!   `/v1`, `/metrics`, `/healthz`, `/readyz`), on its own thread;
//! - [`app`]: what these services and planes say to each other through
//!   the runtime's rings, and the terminal plane beside the realtime plane.
//!
//! `dtp serve` is these, configured; a gateway builder embeds the runtime
//! with its own service beside or instead of them.
#![forbid(unsafe_code)]

pub mod admin;
pub mod app;
pub mod dtp;
pub mod plane;
pub mod push;
pub mod realtime;
pub mod secret;

pub use plane::{PlaneConfig, PlaneError, PlaneHandle, TerminalPlane};
