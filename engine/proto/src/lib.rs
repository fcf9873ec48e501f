//! DTP's protocol machines, sans-IO (SPEC §1): the engine state machine
//! (FSM), the Agreement Manager (AGR), the DAG Manager (DAG), the Session
//! Manager (SES) and the Resume Manager (RES).
//!
//! Every machine here is a plain struct fed with inputs (`handle_*(…, now)`)
//! and drained for outputs (`poll_*`), in the manner of quinn-proto: no
//! sockets, no clocks, no threads, no global randomness — time and random
//! bytes are passed in. The shard's per-connection pipeline and the tests
//! (a virtual-time pair) are two drivers of the same machines.
#![forbid(unsafe_code)]

pub mod agreement;
pub mod dag;
pub mod fsm;
pub mod persist;
pub mod resume;
pub mod session;
