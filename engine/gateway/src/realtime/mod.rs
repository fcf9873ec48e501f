//! Realtime delivery to browsers (SPEC §4): the realtime plane on the
//! control thread (stream ledgers, SPEC RT-6) and the messages between it
//! and the shards.

mod cluster;
mod config;
mod front;
mod json;
mod login;
mod msg;
mod plane;
mod push;
mod state;

pub use cluster::{ClusterError, ClusterSettings, derived_epoch, jetstream_name, subject};
pub use config::{ECHO_MAX_MESSAGE, MAX_OVERLOAD_RETRY, RtClient, RtConfig, RtLimits};
pub use dtp_realtime::time::{format_rfc3339, format_timestamp as format_rfc3339_ms};
pub use front::{FrontMetrics, RealtimeFront, RtConn};
pub use login::{LOGIN_LIFETIME, LoginKey};
pub use msg::{PageSize, ReplayPage, RtDecision, RtEvent, RtRefusal, RtRequest, SubKey};
pub use plane::{RealtimeMetrics, RealtimePlane, StreamSetupError};
pub use push::{
    LATENCY_BUCKETS_MS, MAX_BOUND_STREAMS, MAX_INSTALLATION_ID, MAX_TTL_SECS, PushCall,
    PushMetrics, PushPlane, PushPort, PushSettings, PushStore, PushWake, Restored, StoreLine,
    StreamHint, load_store,
};
pub use state::{MAX_TABLE_BYTES, MAX_TABLE_ROWS, TableShape};
