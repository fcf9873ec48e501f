//! DTP on the shards: the terminal side's [`DtpGateway`] service, the Fay
//! side's [`DtpClient`] service (both drive their endpoints with one loop,
//! [`drive_endpoint`]), the
//! registry and the directory store that keep suspended sessions for a
//! Fay that comes back (SPEC SES-2, SES-3), and the sans-IO endpoint
//! itself, re-exported from `dtp-endpoint`.

mod client;
mod drive;
mod gateway;
mod refused;
mod responder;
mod store_dir;
mod store_etcd;

#[cfg(test)]
mod tests;

pub use client::{ConnCounts, DtpClient, FayApp, FayConn, OpenFailure, REPORT_EVERY, WAVE};
pub use drive::{EndpointHandler, drive_endpoint};
pub use dtp_endpoint::*;
pub use gateway::{DtpApp, DtpGateway, GatewayConn};
pub use refused::{CapRefusals, cap_refusals};
pub use store_dir::{DirSessionStore, DirStoreError, StoreLimits, WallClock};
pub use store_etcd::{EtcdSessionStore, MAX_RECORD};
