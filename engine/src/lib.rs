//! DTP engine: per-core shards, the control thread and its rings, and the
//! sans-IO protocol state machines (DTP FSM, agreements, DAG, resume, CAP and
//! encryption, terminal sessions, liveness, handover, realtime streams).
//!
//! Not built yet: it arrives with the engine and protocol issues.
#![forbid(unsafe_code)]
