//! Realtime delivery to browsers (SPEC §4): the messages between the shards
//! and the realtime plane on the control thread.

mod msg;

pub use msg::{RtDecision, RtEvent, RtRefusal, RtRequest, SubKey};
