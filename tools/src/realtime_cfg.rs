//! `dtp serve`'s `[realtime]` section: the realtime front end's listener,
//! streams, client credentials, origins and ceilings (SPEC §4, issue 6).
//!
//! On by default, on loopback, with one demo stream and a documented demo
//! credential, so that a browser or `curl` on the same machine can try it
//! at once. The demo token is refused on any address but loopback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dtp_gateway::realtime::{LoginKey, RtClient, RtConfig, RtLimits};
use dtp_realtime::{RecoveryMode, Retention, StreamSpec};
use serde::{Deserialize, Serialize};

/// The demo credential of the embedded defaults (loopback only).
pub(crate) const DEMO_TOKEN: &str = "dtp-demo-token";

/// The demo stream's scope binding.
pub(crate) const DEMO_SCOPE: &str = "demo-scope";

/// `[realtime]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RealtimeSection {
    /// Serve the realtime endpoints (SSE, WebSocket, snapshots, publication).
    pub(crate) enabled: bool,
    /// Where.
    pub(crate) listen: SocketAddr,
    /// The name of the session cookie a browser presents (its value is a
    /// session id `POST /v1/login` issued).
    pub(crate) cookie: String,
    /// Origins allowed to open a WebSocket, exactly.
    pub(crate) origins: Vec<String>,
    /// The plain WebSocket echo endpoint `/v1/echo`, for RFC 6455
    /// conformance suites (Autobahn|Testsuite).
    pub(crate) echo: bool,
    /// The echo endpoint's largest message (up to 16 MiB).
    pub(crate) echo_max_message: usize,
    /// Ceilings (SPEC RT-13: may be lowered, never raised).
    pub(crate) limits: LimitsSection,
    /// Client credentials.
    pub(crate) clients: Vec<ClientSection>,
    /// Streams.
    pub(crate) streams: Vec<StreamSection>,
    /// Web Push (SPEC RT-12).
    pub(crate) push: crate::push_cfg::PushSection,
}

/// `[[realtime.clients]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientSection {
    /// The secret, as `Authorization: Bearer` or the cookie's value.
    pub(crate) token: String,
    /// Streams it may read (`*`: all).
    pub(crate) streams: Vec<String>,
    /// May publish to them.
    #[serde(default)]
    pub(crate) publish: bool,
    /// May cut their retention.
    #[serde(default)]
    pub(crate) admin: bool,
}

/// `[[realtime.streams]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamSection {
    pub(crate) id: String,
    /// `CURSOR`, `SNAPSHOT_ONLY` or `SESSION_REBUILD`.
    pub(crate) recovery: String,
    pub(crate) event_types: Vec<String>,
    /// The scope binding its envelopes carry (opaque).
    pub(crate) scope: String,
    /// Replay retention: events, bytes, seconds.
    #[serde(default = "default_events")]
    pub(crate) retain_events: usize,
    #[serde(default = "default_bytes")]
    pub(crate) retain_bytes: usize,
    #[serde(default = "default_secs")]
    pub(crate) retain_secs: u64,
    /// A Web Push hint for each publication, to the registrations bound
    /// to the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) push: Option<crate::push_cfg::StreamPushSection>,
}

fn default_events() -> usize {
    Retention::default().max_events
}
fn default_bytes() -> usize {
    Retention::default().max_bytes
}
fn default_secs() -> u64 {
    Retention::default().max_age.as_secs()
}

/// `[realtime.limits]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LimitsSection {
    pub(crate) max_message: usize,
    pub(crate) max_outbound: usize,
    pub(crate) max_subscriptions: usize,
    pub(crate) sse_heartbeat_ms: u64,
    pub(crate) sse_retry_ms: u64,
    pub(crate) overload_retry_ms: u64,
    pub(crate) idle_timeout_ms: u64,
    pub(crate) head_timeout_ms: u64,
    pub(crate) poll_burst: u32,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let d = RtLimits::default();
        Self {
            max_message: d.max_message,
            max_outbound: d.max_outbound,
            max_subscriptions: d.max_subscriptions,
            sse_heartbeat_ms: ms(d.sse_heartbeat),
            sse_retry_ms: ms(d.sse_retry),
            overload_retry_ms: ms(d.overload_retry),
            idle_timeout_ms: ms(d.idle_timeout),
            head_timeout_ms: ms(d.head_timeout),
            poll_burst: d.poll_burst,
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Default for RealtimeSection {
    fn default() -> Self {
        let listen = SocketAddr::from(([127, 0, 0, 1], 7780));
        Self {
            enabled: true,
            listen,
            cookie: "dtp_session".into(),
            // The page's own origins on a loopback listener are allowed
            // once it is bound; any other is listed here.
            origins: Vec::new(),
            echo: false,
            echo_max_message: 1 << 20,
            limits: LimitsSection::default(),
            clients: vec![ClientSection {
                token: DEMO_TOKEN.into(),
                streams: vec!["*".into()],
                publish: true,
                admin: true,
            }],
            streams: vec![StreamSection {
                id: "demo".into(),
                recovery: "CURSOR".into(),
                event_types: vec!["demo.tick".into(), "demo.note".into()],
                scope: DEMO_SCOPE.into(),
                retain_events: default_events(),
                retain_bytes: default_bytes(),
                retain_secs: default_secs(),
                push: Some(crate::push_cfg::StreamPushSection::demo()),
            }],
            push: crate::push_cfg::PushSection::default(),
        }
    }
}

impl RealtimeSection {
    /// This section with the terminal plane's built-in streams added (when
    /// `terminal`), each unless a configured stream has its id: CURSOR,
    /// default retention, scope binding `terminal`.
    pub(crate) fn with_built_ins(&self, terminal: bool) -> Self {
        let mut s = self.clone();
        if !terminal {
            return s;
        }
        for (id, types) in dtp_gateway::plane::BUILT_IN_STREAMS {
            if s.streams.iter().any(|x| x.id == id) {
                continue;
            }
            s.streams.push(StreamSection {
                id: id.into(),
                recovery: "CURSOR".into(),
                event_types: types.iter().map(|t| (*t).to_owned()).collect(),
                scope: "terminal".into(),
                retain_events: default_events(),
                retain_bytes: default_bytes(),
                retain_secs: default_secs(),
                push: None,
            });
        }
        s
    }

    /// The stream specs, checked.
    pub(crate) fn specs(&self) -> Result<Vec<StreamSpec>, String> {
        self.streams
            .iter()
            .map(|s| {
                let recovery: RecoveryMode = s
                    .recovery
                    .parse()
                    .map_err(|_| format!("realtime.streams {:?}: recovery must be CURSOR, SNAPSHOT_ONLY or SESSION_REBUILD", s.id))?;
                let spec = StreamSpec {
                    id: s.id.clone(),
                    recovery,
                    event_types: s.event_types.clone(),
                    retention: Retention {
                        max_events: s.retain_events,
                        max_bytes: s.retain_bytes,
                        max_age: Duration::from_secs(s.retain_secs),
                    },
                    scope: s.scope.clone(),
                };
                spec.validate()
                    .map_err(|e| format!("realtime.streams {:?}: {e}", s.id))?;
                Ok(spec)
            })
            .collect()
    }

    /// The front end's configuration, checked.
    /// The front end's configuration; `login` signs the browsers' session
    /// ids (a key drawn at start-up).
    pub(crate) fn front(&self, login: LoginKey) -> Result<Arc<RtConfig>, String> {
        let l = &self.limits;
        let limits = RtLimits {
            max_message: l.max_message,
            max_outbound: l.max_outbound,
            max_subscriptions: l.max_subscriptions,
            sse_heartbeat: Duration::from_millis(l.sse_heartbeat_ms),
            sse_retry: Duration::from_millis(l.sse_retry_ms),
            overload_retry: Duration::from_millis(l.overload_retry_ms),
            idle_timeout: Duration::from_millis(l.idle_timeout_ms),
            head_timeout: Duration::from_millis(l.head_timeout_ms),
            poll_burst: l.poll_burst,
            ..RtLimits::default()
        };
        let demo = self.clients.iter().any(|c| c.token == DEMO_TOKEN);
        if demo && !self.listen.ip().is_loopback() {
            return Err(format!(
                "realtime: the demo token {DEMO_TOKEN:?} is only allowed on loopback; set your own [[realtime.clients]]"
            ));
        }
        let config = RtConfig {
            clients: self
                .clients
                .iter()
                .map(|c| RtClient {
                    token: c.token.clone(),
                    streams: c.streams.clone(),
                    publish: c.publish,
                    admin: c.admin,
                })
                .collect(),
            cookie: self.cookie.clone(),
            login,
            origins: self.origins.clone(),
            own_origins: Default::default(),
            echo_max_message: self.echo.then_some(self.echo_max_message),
            scopes: self
                .streams
                .iter()
                .map(|s| (s.id.clone(), s.scope.clone()))
                .collect::<HashMap<_, _>>(),
            limits,
        };
        config.validate().map_err(|e| format!("realtime: {e}"))?;
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LoginKey {
        LoginKey::new([1; 32], std::time::Instant::now())
    }

    #[test]
    fn defaults_are_valid_and_the_demo_token_stays_on_loopback() {
        let mut s = RealtimeSection::default();
        assert_eq!(s.specs().unwrap().len(), 1);
        assert!(s.front(key()).is_ok());
        s.listen = "0.0.0.0:7780".parse().unwrap();
        assert!(s.front(key()).unwrap_err().contains("loopback"));
    }

    #[test]
    fn ceilings_may_be_lowered_never_raised() {
        let mut s = RealtimeSection::default();
        s.limits.max_outbound = 1024;
        assert!(s.front(key()).is_ok());
        s.limits.max_outbound = 1 << 20;
        assert!(s.front(key()).unwrap_err().contains("max_outbound"));
        let mut s = RealtimeSection::default();
        s.streams[0].recovery = "cursor".into();
        assert!(s.specs().unwrap_err().contains("recovery"));
    }
}
