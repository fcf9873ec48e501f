//! The realtime wire formats: REALTIME_EVENT_V1 envelopes, `realtime.v1`
//! messages, SSE (SPEC RT-3, RT-4, RT-8, RT-9, RT-14).

mod recovery;

pub use recovery::{RecoveryMode, UnknownRecoveryMode};
