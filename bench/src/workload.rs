//! The application protocol every server in `dtp bench` speaks, ours and
//! the peer: it lives in `dtp-workload` (the sans-IO crate `dtp serve` and
//! the bench share), re-exported here so the bench names it as before.

pub use dtp_workload::plain::*;
