//! A realtime server on loopback for the tests: the engine with the
//! realtime front end on every shard and the realtime plane on the control
//! thread, with two streams and three clients.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dtp_codec::Limits;
use dtp_engine::{Engine, EngineConfig, EngineHandle};
use dtp_gateway::realtime::{
    FrontMetrics, RealtimeFront, RealtimePlane, RtClient, RtConfig, RtLimits,
};
use dtp_realtime::{RecoveryMode, Retention, StreamSpec};
use dtp_transports::{BackendPreference, DriverConfig};

/// Reads and publishes everything.
pub(crate) const ADMIN: &str = "admin-token-1";
/// Reads `ticks` only.
pub(crate) const READER: &str = "reader-token-1";
/// Reads and publishes `ticks`, no admin.
pub(crate) const PUBLISHER: &str = "publisher-token-1";
/// The allowed browser origin.
pub(crate) const ORIGIN: &str = "http://app.example";

/// Every test that touches IO runs on both backends.
pub(crate) const BACKENDS: [BackendPreference; 2] =
    [BackendPreference::Uring, BackendPreference::Epoll];

/// A server with the default (SPEC RT-13) ceilings.
pub(crate) fn start_default(backend: BackendPreference) -> Server {
    start(backend, RtLimits::default())
}

pub(crate) struct Server {
    pub(crate) engine: EngineHandle,
    pub(crate) addr: SocketAddr,
    pub(crate) metrics: Arc<FrontMetrics>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.engine.stop();
    }
}

pub(crate) fn specs() -> Vec<StreamSpec> {
    let spec = |id: &str, recovery, types: &[&str]| StreamSpec {
        id: id.into(),
        recovery,
        event_types: types.iter().map(|t| (*t).to_owned()).collect(),
        retention: Retention {
            max_events: 100,
            ..Retention::default()
        },
        scope: format!("scope-{id}"),
    };
    vec![
        spec("ticks", RecoveryMode::Cursor, &["tick", "big"]),
        spec("state", RecoveryMode::SnapshotOnly, &["changed"]),
    ]
}

pub(crate) fn start(backend: BackendPreference, limits: RtLimits) -> Server {
    start_with(backend, limits, |plane| plane)
}

/// [`start`], with `with` applied to the realtime plane (e.g. to serve Web
/// Push).
pub(crate) fn start_with(
    backend: BackendPreference,
    limits: RtLimits,
    with: impl FnOnce(RealtimePlane) -> RealtimePlane,
) -> Server {
    let client = |token: &str, streams: &[&str], publish, admin| RtClient {
        token: token.into(),
        streams: streams.iter().map(|s| (*s).to_owned()).collect(),
        publish,
        admin,
    };
    let config = Arc::new(RtConfig {
        clients: vec![
            client(ADMIN, &["*"], true, true),
            client(READER, &["ticks"], false, false),
            client(PUBLISHER, &["ticks"], true, false),
        ],
        cookie: "dtp_session".into(),
        login: dtp_gateway::realtime::LoginKey::new([5; 32], std::time::Instant::now()),
        origins: vec![ORIGIN.into()],
        own_origins: Default::default(),
        echo_max_message: Some(1 << 20),
        scopes: specs()
            .into_iter()
            .map(|s| (s.id, s.scope))
            .collect::<HashMap<_, _>>(),
        limits,
    });
    config.validate().unwrap();
    let shards = 2;
    let mut seed = 7u64;
    let mut random = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed
    };
    let plane = with(RealtimePlane::new(specs(), shards, &mut random).unwrap());
    let metrics = Arc::new(FrontMetrics::default());
    let m = metrics.clone();
    let engine = Engine::start_with_control(
        EngineConfig {
            shards,
            pin: false,
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            driver: DriverConfig {
                backend,
                ..DriverConfig::default()
            },
            limits: Limits::default(),
            drain: Duration::from_secs(1),
            control_ring: 1024,
            quic: None,
        },
        move |i| RealtimeFront::new(config.clone(), i, m.clone()),
        Box::new(plane),
    )
    .unwrap();
    let addr = engine.tcp_addr(0).unwrap();
    Server {
        engine,
        addr,
        metrics,
    }
}
