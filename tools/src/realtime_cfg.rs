//! `dtp serve`'s `[realtime]` section: the realtime front end's listener,
//! streams, client credentials, origins and ceilings (SPEC §4, issue 6).
//!
//! On by default, on loopback, with one demo stream and a documented demo
//! credential, so that a browser or `curl` on the same machine can try it
//! at once. The demo token is refused on any address but loopback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dtp_gateway::push::PushSenderConfig;
use dtp_gateway::realtime::{LoginKey, RtClient, RtConfig, RtLimits};
use dtp_realtime::push::{RegistryConfig, RetryPolicy, VapidCache, VapidKey};
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
    pub(crate) push: PushSection,
}

/// `[realtime.push]`: the Web Push sender (SPEC RT-12). Off while
/// `vapid_key` is empty.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct PushSection {
    /// The VAPID private key file (`dtp cred vapid-key`); empty: no Web Push.
    pub(crate) vapid_key: String,
    /// The VAPID contact (`mailto:` or `https:`), required with a key.
    pub(crate) subject: String,
    /// PEM CA files trusted besides the system's roots.
    pub(crate) extra_roots: Vec<String>,
    /// Endpoints may resolve to loopback, private or link-local addresses.
    pub(crate) allow_private_endpoints: bool,
    /// The notification types a hint may name (closed registry).
    pub(crate) notification_types: Vec<String>,
    /// The route intents a hint may name (closed registry).
    pub(crate) route_intents: Vec<String>,
    /// Registrations one client may hold.
    pub(crate) max_subscriptions_per_client: usize,
    /// Notifications queued, sending or waiting to retry, at most.
    pub(crate) max_in_flight: usize,
    /// Requests per notification at most, the first included.
    pub(crate) max_attempts: u32,
    /// Sender worker threads.
    pub(crate) workers: usize,
    /// Idle keep-alive connections per push service, per worker.
    pub(crate) max_connections_per_origin: usize,
}

impl Default for PushSection {
    fn default() -> Self {
        Self {
            vapid_key: String::new(),
            subject: String::new(),
            extra_roots: Vec::new(),
            allow_private_endpoints: false,
            notification_types: vec!["demo.alert".into()],
            route_intents: vec!["demo.open".into()],
            max_subscriptions_per_client: RegistryConfig::default().max_per_principal,
            max_in_flight: 1_024,
            max_attempts: RetryPolicy::default().max_attempts,
            workers: 2,
            max_connections_per_origin: 4,
        }
    }
}

/// Ceilings of `[realtime.push]`: (key, least, most).
const PUSH_BOUNDS: [(&str, usize, usize); 5] = [
    ("max_subscriptions_per_client", 1, 256),
    ("max_in_flight", 1, 65_536),
    ("max_attempts", 1, 20),
    ("workers", 1, 64),
    ("max_connections_per_origin", 1, 64),
];

impl PushSection {
    /// The sender's configuration, every value checked (errors are one
    /// line naming the key); `None` when Web Push is off (no `vapid_key`).
    pub(crate) fn sender(&self) -> Result<Option<PushSenderConfig>, String> {
        let values = [
            self.max_subscriptions_per_client,
            self.max_in_flight,
            usize::try_from(self.max_attempts).unwrap_or(usize::MAX),
            self.workers,
            self.max_connections_per_origin,
        ];
        for ((key, least, most), value) in PUSH_BOUNDS.iter().zip(values) {
            if !(*least..=*most).contains(&value) {
                return Err(format!(
                    "realtime.push.{key}: {value} is not within {least}..={most}"
                ));
            }
        }
        for (key, ids) in [
            ("notification_types", &self.notification_types),
            ("route_intents", &self.route_intents),
        ] {
            if let Some(bad) = ids.iter().find(|id| !dtp_codec::realtime::is_valid_id(id)) {
                return Err(format!(
                    "realtime.push.{key}: {bad:?} is not 1-128 characters of A-Z a-z 0-9 . _ : -"
                ));
            }
            if let Some((i, dup)) = ids
                .iter()
                .enumerate()
                .find(|(i, id)| ids[..*i].contains(id))
            {
                return Err(format!(
                    "realtime.push.{key}: {dup:?} is listed twice (entry {})",
                    i + 1
                ));
            }
        }
        if self.vapid_key.is_empty() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&self.vapid_key)
            .map_err(|e| format!("realtime.push.vapid_key: {}: {e}", self.vapid_key))?;
        let vapid = VapidKey::from_text(&text).map_err(|_| {
            format!(
                "realtime.push.vapid_key: {}: not a P-256 private key (PEM PKCS#8, PEM SEC1 or base64url; make one with `dtp cred vapid-key`)",
                self.vapid_key
            )
        })?;
        if VapidCache::new(vapid.clone(), &self.subject).is_err() {
            return Err(format!(
                "realtime.push.subject: {:?} is not a mailto: or https: URI (required with a vapid_key)",
                self.subject
            ));
        }
        let extra_roots: Vec<PathBuf> = self.extra_roots.iter().map(PathBuf::from).collect();
        dtp_gateway::push::trust_store(&extra_roots).map_err(|e| format!("realtime.{e}"))?;
        let mut config = PushSenderConfig::new(vapid, &self.subject);
        config.extra_roots = extra_roots;
        config.allow_private_endpoints = self.allow_private_endpoints;
        config.workers = self.workers;
        config.max_in_flight = self.max_in_flight;
        config.max_connections_per_origin = self.max_connections_per_origin;
        config.policy.max_attempts = self.max_attempts;
        Ok(Some(config))
    }

    /// The realtime plane's Web Push settings (registries, SSRF rule,
    /// per-client ceiling), with `key` for registration ids and epochs and
    /// `storage_key` for the registry's sealed records and endpoint
    /// fingerprints. Call after [`PushSection::sender`] accepted the
    /// section.
    pub(crate) fn settings(
        &self,
        key: [u8; 32],
        storage_key: [u8; 32],
    ) -> dtp_gateway::realtime::PushSettings {
        dtp_gateway::realtime::PushSettings {
            notification_types: self.notification_types.clone(),
            route_intents: self.route_intents.clone(),
            allow_private_endpoints: self.allow_private_endpoints,
            registry: RegistryConfig {
                max_per_principal: self.max_subscriptions_per_client,
                ..RegistryConfig::default()
            },
            release_epoch: concat!("dtp-", env!("CARGO_PKG_VERSION")).to_owned(),
            key,
            storage_key,
        }
    }

    /// Makes the key and root file names relative to `base`.
    pub(crate) fn resolve_paths(&mut self, base: &std::path::Path) {
        for name in std::iter::once(&mut self.vapid_key).chain(self.extra_roots.iter_mut()) {
            crate::config::resolve(base, name);
        }
    }
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
            }],
            push: PushSection::default(),
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
    fn push_settings_carry_the_registries_and_the_per_client_ceiling() {
        let p = PushSection {
            max_subscriptions_per_client: 3,
            allow_private_endpoints: true,
            ..PushSection::default()
        };
        let s = p.settings([1; 32], [2; 32]);
        assert_eq!(s.registry.max_per_principal, 3);
        assert_eq!(s.notification_types, ["demo.alert"]);
        assert_eq!(s.route_intents, ["demo.open"]);
        assert!(s.allow_private_endpoints);
        assert!(dtp_codec::realtime::is_valid_id(&s.release_epoch));
    }

    #[test]
    fn push_is_off_without_a_key_and_every_bad_value_names_its_key() {
        let dir = std::env::temp_dir().join(format!("dtp-push-cfg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = PushSection::default();
        assert!(p.sender().unwrap().is_none());
        assert_eq!(p.notification_types, ["demo.alert"]);
        assert_eq!(p.route_intents, ["demo.open"]);
        let key = dir.join("vapid.key");
        std::fs::write(
            &key,
            dtp_realtime::push::private_key_pem(&[0x11; 32]).unwrap(),
        )
        .unwrap();
        p.vapid_key = key.display().to_string();
        let err = |p: &PushSection| p.sender().err().unwrap_or_default();
        assert!(
            err(&p).starts_with("realtime.push.subject: \"\""),
            "{}",
            err(&p)
        );
        p.subject = "mailto:ops@example.com".into();
        let root = dir.join("root.pem");
        std::fs::write(&root, "no certificate here\n").unwrap();
        p.extra_roots = vec![root.display().to_string()];
        assert!(
            err(&p).starts_with("realtime.push.extra_roots: "),
            "{}",
            err(&p)
        );
        p.extra_roots.clear();
        let config = p.sender();
        // A machine without a system CA store has no root at all: that is
        // the one error left, and it says what to set.
        match config {
            Ok(Some(c)) => {
                assert_eq!(c.subject, "mailto:ops@example.com");
                assert!(!c.allow_private_endpoints);
                assert_eq!(c.policy.max_attempts, 5);
            }
            other => assert!(
                other
                    .as_ref()
                    .err()
                    .is_some_and(|e| e.contains("extra_roots")),
                "{other:?}"
            ),
        }
        let mut q = p.clone();
        q.max_attempts = 0;
        assert_eq!(
            err(&q),
            "realtime.push.max_attempts: 0 is not within 1..=20"
        );
        let mut q = p.clone();
        q.max_in_flight = 1 << 20;
        assert!(err(&q).starts_with("realtime.push.max_in_flight: "));
        let mut q = p.clone();
        q.route_intents.push("free text".into());
        assert!(err(&q).starts_with("realtime.push.route_intents: \"free text\""));
        let mut q = p.clone();
        q.notification_types.push("demo.alert".into());
        assert!(err(&q).contains("listed twice"), "{}", err(&q));
        let mut q = p.clone();
        q.vapid_key = dir.join("missing").display().to_string();
        assert!(err(&q).starts_with("realtime.push.vapid_key: "));
        std::fs::write(&key, "not a key").unwrap();
        assert!(err(&p).contains("not a P-256 private key"), "{}", err(&p));
        let _ = std::fs::remove_dir_all(&dir);
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
