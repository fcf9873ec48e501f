//! `dtp serve`'s configuration: embedded defaults, an optional TOML file with
//! unknown keys refused, and every ceiling checked at start-up.

mod doc;

pub(crate) use doc::annotated;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use dtp_codec::Limits;
use dtp_engine::EngineConfig;
use dtp_engine::Listener;
use dtp_transports::Endpoint;
use dtp_transports::{BackendPreference, DriverConfig};
use serde::Deserialize;

use crate::cluster_cfg::ClusterSection;
use crate::realtime_cfg::RealtimeSection;
use crate::terminal_cfg::TerminalSection;

/// The whole file. Every section and key is optional; absent ones keep
/// their defaults (shown by `dtp serve --print-config`).
#[derive(Debug, Default, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Config {
    pub(crate) engine: EngineSection,
    pub(crate) io: IoSection,
    pub(crate) limits: LimitsSection,
    pub(crate) admin: AdminSection,
    pub(crate) dtp: DtpSection,
    /// DTP over QUIC (`quic:` listeners): the certificate and timers.
    pub(crate) quic: QuicSection,
    /// The terminal control plane (SPEC §2–3); absent, the gateway runs
    /// the minimal control plane (heartbeat acks only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) terminal: Option<TerminalSection>,
    /// The realtime front end (SPEC §4): SSE, WebSocket, snapshots.
    pub(crate) realtime: RealtimeSection,
    /// Several gateways sharing state (NATS JetStream, etcd); absent,
    /// every piece of state stays in the process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cluster: Option<ClusterSection>,
}

/// The DTP protocol (SPEC §1): off, the gateway speaks the plaintext
/// benchmark protocol; on, every connection runs CAP, encryption,
/// agreements and resume with these keys.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct DtpSection {
    /// Run the DTP protocol on every connection.
    pub(crate) enabled: bool,
    /// The terminal's Noise private key file (`dtp cred noise-key`).
    pub(crate) terminal_key: String,
    /// Issuer public key files whose credentials are trusted
    /// (`dtp cred issuer-key` writes them as `FILE.pub`).
    pub(crate) trust: Vec<String>,
    /// A revocation list file (`dtp cred revoke`); empty for none.
    pub(crate) revocations: String,
    /// The session AEADs allowed: `aes-256-gcm`, `chacha20-poly1305`.
    pub(crate) algorithms: Vec<String>,
    /// Suspended sessions kept for a resume, across all shards.
    pub(crate) max_suspended: usize,
    /// SPEC SES-2, SES-3: a directory where suspended sessions are kept,
    /// one file each, so that a Fay resumes after the gateway restarts;
    /// empty: in memory only (a restart refuses every resume).
    pub(crate) session_store: String,
    /// SPEC SES-4: milliseconds a DTP connection with no agreement may go
    /// without traffic before it is closed with SESSION_TIMEOUT. Must be
    /// above the longest heartbeat interval (60 s, SPEC LIV-2): a
    /// control-only connection's heartbeats are its only traffic. The
    /// default, twice that interval, lets one beat come a whole interval
    /// late without the connection being closed.
    pub(crate) idle_timeout_ms: u64,
    /// Revocations made while running (`POST /v1/revocations`), shared by
    /// every verifier this section builds: CAP on every core refuses the
    /// credential at once, as the control plane does (SPEC TS-16).
    #[serde(skip)]
    pub(crate) revoked_at_run_time: dtp_crypto::cred::SharedRevocations,
}

impl Default for DtpSection {
    fn default() -> Self {
        Self {
            enabled: false,
            terminal_key: String::new(),
            trust: Vec::new(),
            revocations: String::new(),
            algorithms: vec!["aes-256-gcm".to_owned(), "chacha20-poly1305".to_owned()],
            max_suspended: 4096,
            session_store: String::new(),
            idle_timeout_ms: dtp_gateway::dtp::DEFAULT_IDLE_TIMEOUT.as_millis() as u64,
            revoked_at_run_time: dtp_crypto::cred::SharedRevocations::new(),
        }
    }
}

/// SPEC TRN-1, TRN-4: DTP over QUIC, used when `[engine] listen` has a
/// `quic:HOST:PORT` endpoint (TLS 1.3, ALPN `dtp/1`).
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct QuicSection {
    /// The certificate chain the gateway presents (PEM); empty: a
    /// self-signed one made at start-up for `localhost` and 127.0.0.1,
    /// whose SHA-256 `dtp serve` prints for clients to pin.
    pub(crate) cert: String,
    /// The certificate's private key (PEM); with `cert` only.
    pub(crate) key: String,
    /// Milliseconds a QUIC connection may hear nothing before it is closed.
    pub(crate) idle_timeout_ms: u64,
    /// Milliseconds between keep-alives of an idle QUIC connection; below
    /// `idle_timeout_ms`.
    pub(crate) keep_alive_ms: u64,
}

impl Default for QuicSection {
    fn default() -> Self {
        let q = dtp_transports::QuicConfig::default();
        Self {
            cert: String::new(),
            key: String::new(),
            idle_timeout_ms: q.idle_timeout.as_millis() as u64,
            keep_alive_ms: q.keep_alive.as_millis() as u64,
        }
    }
}

impl QuicSection {
    /// The QUIC configuration of a gateway, its certificate made or read
    /// once for every shard; errors name the key.
    pub(crate) fn server(&self) -> Result<dtp_transports::QuicConfig, String> {
        use dtp_transports::QuicIdentity;
        let identity = match (self.cert.is_empty(), self.key.is_empty()) {
            (true, true) => QuicIdentity::SelfSigned {
                names: vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
            },
            (false, false) => QuicIdentity::Files {
                cert: self.cert.clone().into(),
                key: self.key.clone().into(),
            },
            _ => return Err("quic.cert and quic.key go together: give both or neither".into()),
        };
        let config = dtp_transports::QuicConfig {
            identity: identity.made_once().map_err(|e| e.to_string())?,
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            keep_alive: Duration::from_millis(self.keep_alive_ms),
            ..dtp_transports::QuicConfig::default()
        };
        if config.keep_alive.is_zero() || config.keep_alive >= config.idle_timeout {
            return Err(format!(
                "quic.keep_alive_ms {} must be positive and below quic.idle_timeout_ms {}",
                self.keep_alive_ms, self.idle_timeout_ms
            ));
        }
        Ok(config)
    }
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct EngineSection {
    /// Core shards; 0 = one per available core.
    pub(crate) shards: usize,
    /// Pin each shard to its core.
    pub(crate) pin: bool,
    /// Endpoints to listen on: `HOST:PORT` or `tcp:HOST:PORT`, `unix:PATH`,
    /// `ws:HOST:PORT/PATH`, `rtsp:HOST:PORT`, `quic:HOST:PORT`,
    /// `ble:ADDR/psm/N`, `ble-sim:PATH?mtu=N`.
    #[serde(with = "endpoints")]
    pub(crate) listen: Vec<Endpoint>,
    /// Milliseconds a stopping gateway waits for connections to close.
    pub(crate) drain_ms: u64,
    /// Slots of each ring between a shard and the control thread.
    pub(crate) control_ring: usize,
}

impl Default for EngineSection {
    fn default() -> Self {
        Self {
            shards: 0,
            pin: true,
            listen: vec![Endpoint::Tcp(SocketAddr::from(([127, 0, 0, 1], 7700)))],
            drain_ms: 5000,
            control_ring: 1024,
        }
    }
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct IoSection {
    /// `auto`, `uring` or `epoll`.
    pub(crate) backend: String,
    pub(crate) ring_entries: u32,
    pub(crate) chunk_size: u32,
    pub(crate) recv_buffers: u16,
    pub(crate) send_chunks: u32,
    pub(crate) max_send_queue: usize,
    pub(crate) max_connections: usize,
    pub(crate) nodelay: bool,
    /// TCP congestion control of every connection (`system`: the kernel's
    /// default).
    pub(crate) tcp_congestion: String,
    /// io_uring: completions one wait holds out for.
    pub(crate) batch: u32,
    /// io_uring: µs a wait may hold out for `batch` completions.
    pub(crate) batch_wait_us: u32,
    /// io_uring: SEND_ZC for sends of at least this many bytes (0: never).
    pub(crate) send_zc_threshold: usize,
    /// io_uring: accept connections as direct descriptors where the kernel
    /// has them.
    pub(crate) fixed_files: bool,
    /// Milliseconds an outgoing connect may take.
    pub(crate) connect_timeout_ms: u64,
}

impl Default for IoSection {
    fn default() -> Self {
        let d = DriverConfig::default();
        Self {
            backend: "auto".to_owned(),
            ring_entries: d.ring_entries,
            chunk_size: d.chunk_size,
            recv_buffers: d.recv_buffers,
            send_chunks: d.send_chunks,
            max_send_queue: d.max_send_queue,
            max_connections: d.max_connections,
            nodelay: d.nodelay,
            tcp_congestion: d.tcp_congestion.unwrap_or_else(|| "system".to_owned()),
            batch: d.batch,
            batch_wait_us: d.batch_wait_us,
            send_zc_threshold: d.send_zc_threshold,
            fixed_files: d.fixed_files,
            connect_timeout_ms: d.connect_timeout.as_millis() as u64,
        }
    }
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LimitsSection {
    pub(crate) max_frame_len: u32,
}

impl Default for LimitsSection {
    fn default() -> Self {
        Self {
            max_frame_len: Limits::default().max_frame_len,
        }
    }
}

/// The admin port: `/metrics`, `/healthz`, `/readyz`, and with
/// `[terminal]` the `/v1` admin endpoints (sessions, resources, handovers,
/// decisions, revocations).
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct AdminSection {
    /// Where the admin port listens; `""` (or `dtp serve --no-admin`): no
    /// admin port. Keep it on loopback: with `[terminal]` and no
    /// `token_file`, anyone who reaches it can end sessions and hand
    /// control over.
    #[serde(with = "empty_is_none")]
    pub(crate) listen: Option<SocketAddr>,
    /// A file holding a bearer token (16–256 printable ASCII characters,
    /// surrounding white space ignored): when set, every `/v1` request
    /// needs `Authorization: Bearer <token>` (`dtp ctl --token-file`).
    /// Required when `[terminal]` is on and `listen` is not loopback; read
    /// and checked whenever it is set. `/metrics`, `/healthz` and
    /// `/readyz` stay open.
    pub(crate) token_file: String,
}

impl Default for AdminSection {
    fn default() -> Self {
        Self {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9700))),
            token_file: String::new(),
        }
    }
}

impl AdminSection {
    /// The bearer token, if `token_file` names one; errors name the key.
    pub(crate) fn token(&self) -> Result<Option<String>, String> {
        if self.token_file.is_empty() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&self.token_file)
            .map_err(|e| format!("admin.token_file: {}: {e}", self.token_file))?;
        let token = text.trim();
        if !(16..=256).contains(&token.len()) || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "admin.token_file: {}: the token must be 16–256 printable ASCII characters",
                self.token_file
            ));
        }
        Ok(Some(token.to_owned()))
    }
}

impl DtpSection {
    /// Reads the file `dtp.<key>` names; errors name the key and the file.
    fn read(key: &str, path: &str) -> Result<String, String> {
        if path.is_empty() {
            return Err(format!(
                "dtp.{key}: a file is needed when dtp.enabled is true"
            ));
        }
        std::fs::read_to_string(path).map_err(|e| format!("dtp.{key}: {path}: {e}"))
    }

    /// A credential verifier trusting `trust` and knowing `revocations`:
    /// one for CAP (the gateway) and one for the terminal plane (its
    /// AuthRequests and admin revocations).
    pub(crate) fn verifier(&self) -> Result<dtp_crypto::cred::Verifier, String> {
        use dtp_crypto::cred::{IssuerPublicKey, RevocationList, Verifier};
        if self.trust.is_empty() {
            return Err("dtp.trust: at least one issuer public key file is needed".to_owned());
        }
        let mut verifier = Verifier::new();
        verifier.share_revocations(self.revoked_at_run_time.clone());
        for path in &self.trust {
            let key = IssuerPublicKey::from_text(&Self::read("trust", path)?)
                .map_err(|e| format!("dtp.trust: {path}: {e}"))?;
            verifier
                .trust(key)
                .map_err(|e| format!("dtp.trust: {path}: {e}"))?;
        }
        if !self.revocations.is_empty() {
            let list = RevocationList::from_text(
                &Self::read("revocations", &self.revocations)?,
                RevocationList::DEFAULT_MAX,
            )
            .map_err(|e| format!("dtp.revocations: {}: {e}", self.revocations))?;
            verifier.set_revocations(list);
        }
        Ok(verifier)
    }

    /// The terminal's DTP configuration, or `None` when DTP is off; errors
    /// name the key (and the file) at fault.
    pub(crate) fn terminal(
        &self,
        limits: Limits,
    ) -> Result<Option<dtp_gateway::dtp::TerminalConfig>, String> {
        use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, NoiseKeypair, ResponderConfig};
        if !self.enabled {
            return Ok(None);
        }
        let idle_timeout = self.idle_timeout()?;
        let keys = NoiseKeypair::from_text(&Self::read("terminal_key", &self.terminal_key)?)
            .map_err(|e| format!("dtp.terminal_key: {}: {e}", self.terminal_key))?;
        let verifier = self.verifier()?;
        let mut algorithms = Vec::new();
        for name in &self.algorithms {
            let a = match name.as_str() {
                "aes-256-gcm" => dtp_codec::AeadAlgorithm::Aes256Gcm,
                "chacha20-poly1305" => dtp_codec::AeadAlgorithm::ChaCha20Poly1305,
                other => {
                    return Err(format!(
                        "dtp.algorithms: {other:?} is not aes-256-gcm or chacha20-poly1305"
                    ));
                }
            };
            algorithms.push(a);
        }
        if algorithms.is_empty() {
            return Err("dtp.algorithms: at least one is needed".to_owned());
        }
        if self.max_suspended == 0 {
            return Err("dtp.max_suspended must be positive".to_owned());
        }
        let mut endpoint = dtp_gateway::dtp::EndpointConfig::terminal();
        endpoint.limits = limits;
        endpoint.idle_timeout = idle_timeout;
        endpoint.validate().map_err(|e| format!("dtp: {e}"))?;
        Ok(Some(dtp_gateway::dtp::TerminalConfig {
            cap: ResponderConfig {
                static_keypair: keys,
                algorithms,
                handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            },
            verifier: std::sync::Arc::new(verifier),
            endpoint,
        }))
    }
}

impl DtpSection {
    /// SPEC SES-4, LIV-2: `idle_timeout_ms`, checked to be above the
    /// longest heartbeat interval.
    fn idle_timeout(&self) -> Result<Duration, String> {
        let max_beat = dtp_gateway::dtp::MAX_HEARTBEAT_INTERVAL.as_millis() as u64;
        if self.idle_timeout_ms <= max_beat {
            return Err(format!(
                "dtp.idle_timeout_ms {} must be above {max_beat}, the longest heartbeat interval (SPEC LIV-2)",
                self.idle_timeout_ms
            ));
        }
        Ok(Duration::from_millis(self.idle_timeout_ms))
    }

    /// SPEC SES-2, SES-3: where the gateway's shards keep suspended
    /// sessions: `session_store`'s directory (created if needed, and
    /// checked writable now) or memory, at most `max_suspended` either
    /// way. `endpoint` bounds what the store reads back.
    pub(crate) fn suspended_sessions(
        &self,
        endpoint: dtp_gateway::dtp::EndpointConfig,
    ) -> Result<std::sync::Arc<dyn dtp_gateway::dtp::SuspendedSessions>, String> {
        use dtp_gateway::dtp::{DirSessionStore, SessionRegistry, StoreLimits};
        if self.session_store.is_empty() {
            return Ok(std::sync::Arc::new(SessionRegistry::new(
                self.max_suspended,
            )));
        }
        let limits = StoreLimits {
            max_sessions: self.max_suspended,
            ..StoreLimits::for_endpoint(endpoint)
        };
        let store = DirSessionStore::open(&self.session_store, limits)
            .map_err(|e| format!("dtp.session_store: {e}"))?;
        tracing::info!(
            dir = %self.session_store,
            sessions = store.len(),
            "suspended sessions are kept in the session store"
        );
        Ok(std::sync::Arc::new(store))
    }
}

impl Config {
    /// Reads `path`, or the embedded defaults when `None`. A syntax error
    /// or an unknown key is one line naming the file and the line
    /// (`dtp.toml line 3: …`). Relative file names in the file (keys, trust
    /// and revocation lists, the session store, the token, the audit log, a
    /// command's program)
    /// are taken relative to the file's folder, not the working directory.
    pub(crate) fn load(path: Option<&Path>) -> Result<Self, String> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text, path.parent()).map_err(|e| format!("{}{e}", path.display()))
    }

    /// The text of a configuration file, read as [`Config::load`] reads it
    /// (SPEC FRM-5: no text makes it panic): relative file names are taken
    /// relative to `base` when given. The error is one line, ` line N: what`
    /// (or `: what`), written to follow the file's name. The fuzz target
    /// `serve_config` (`codec/fuzz`) feeds it arbitrary text.
    pub(crate) fn parse(text: &str, base: Option<&Path>) -> Result<Self, String> {
        let mut config: Self = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
        if let Some(base) = base {
            config.resolve_paths(base);
        }
        Ok(config)
    }

    /// Makes every relative file name in the configuration relative to
    /// `base` (the configuration file's folder).
    fn resolve_paths(&mut self, base: &Path) {
        if base.as_os_str().is_empty() {
            return; // the file is in the working directory already
        }
        let dtp = &mut self.dtp;
        for name in std::iter::once(&mut dtp.terminal_key)
            .chain(std::iter::once(&mut dtp.revocations))
            .chain(dtp.trust.iter_mut())
            .chain(std::iter::once(&mut dtp.session_store))
            .chain(std::iter::once(&mut self.admin.token_file))
            .chain(std::iter::once(&mut self.quic.cert))
            .chain(std::iter::once(&mut self.quic.key))
        {
            resolve(base, name);
        }
        if let Some(terminal) = &mut self.terminal {
            terminal.resolve_paths(base);
        }
        self.realtime.push.resolve_paths(base);
        if let Some(cluster) = &mut self.cluster {
            cluster.resolve_paths(base);
        }
        for at in &mut self.engine.listen {
            if let Endpoint::Unix(path) | Endpoint::BleSim { path, .. } = at
                && path.is_relative()
            {
                *path = base.join(&*path);
            }
        }
    }

    /// The engine's settings, with every ceiling checked; errors name the key.
    pub(crate) fn engine(&self) -> Result<EngineConfig, String> {
        let backend = match self.io.backend.as_str() {
            "auto" => BackendPreference::Auto,
            "uring" | "io_uring" => BackendPreference::Uring,
            "epoll" => BackendPreference::Epoll,
            other => {
                return Err(format!(
                    "io.backend: {other:?} is not one of auto, uring, epoll"
                ));
            }
        };
        let driver = DriverConfig {
            backend,
            ring_entries: self.io.ring_entries,
            chunk_size: self.io.chunk_size,
            recv_buffers: self.io.recv_buffers,
            send_chunks: self.io.send_chunks,
            max_send_queue: self.io.max_send_queue,
            max_connections: self.io.max_connections,
            nodelay: self.io.nodelay,
            tcp_congestion: crate::load_cmd::congestion_name(&self.io.tcp_congestion),
            batch: self.io.batch,
            batch_wait_us: self.io.batch_wait_us,
            send_zc_threshold: self.io.send_zc_threshold,
            fixed_files: self.io.fixed_files,
            connect_timeout: Duration::from_millis(self.io.connect_timeout_ms),
            // The gateway only accepts: its outgoing connections (none
            // today) would go from the kernel's choice of address.
            bind_sources: Vec::new(),
        };
        driver.validate().map_err(|e| format!("io: {e}"))?;
        let limits = Limits {
            max_frame_len: self.limits.max_frame_len,
            ..Limits::default()
        };
        limits.validate().map_err(|e| format!("limits: {e}"))?;
        if self.engine.listen.is_empty() {
            return Err("engine.listen: at least one address is needed".to_owned());
        }
        if self.engine.shards > 1024 {
            return Err(format!(
                "engine.shards {} exceeds the ceiling 1024",
                self.engine.shards
            ));
        }
        let config = EngineConfig {
            shards: self.engine.shards,
            pin: self.engine.pin,
            listen: self
                .engine
                .listen
                .iter()
                .cloned()
                .map(Listener::from)
                .collect(),
            driver,
            limits,
            drain: Duration::from_millis(self.engine.drain_ms),
            control_ring: self.engine.control_ring,
            quic: None,
        };
        let quic = self
            .engine
            .listen
            .iter()
            .any(|at| matches!(at, Endpoint::Quic(_)));
        let config = EngineConfig {
            quic: if quic {
                Some(self.quic.server()?)
            } else {
                None
            },
            ..config
        };
        config.validate().map_err(|e| format!("io/limits: {e}"))?;
        Ok(config)
    }
}

/// An optional address written as a string, `""` for none (TOML has no
/// null), so that a printed configuration reads back the same.
mod empty_is_none {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        addr: &Option<SocketAddr>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match addr {
            Some(a) => s.collect_str(a),
            None => s.serialize_str(""),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SocketAddr>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(serde::de::Error::custom)
    }
}

/// `[engine] listen` in TOML: a list of endpoint strings, TCP ones written
/// as a bare `HOST:PORT` (what the defaults and older files say).
mod endpoints {
    use dtp_transports::Endpoint;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(list: &[Endpoint], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(list.iter().map(|e| match e {
            Endpoint::Tcp(addr) => addr.to_string(),
            other => other.to_string(),
        }))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Endpoint>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| text.parse().map_err(serde::de::Error::custom))
            .collect()
    }
}

/// A file name relative to `base` when it is relative (empty: none).
pub(crate) fn resolve(base: &Path, name: &mut String) {
    if !name.is_empty() && Path::new(name.as_str()).is_relative() {
        *name = base.join(name.as_str()).to_string_lossy().into_owned();
    }
}

/// A TOML error as ` line N: what`, on one line (the toml crate's own
/// rendering quotes the input over several).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    match e.span() {
        Some(span) => {
            let before = text.as_bytes().get(..span.start).unwrap_or(text.as_bytes());
            let line = before.iter().filter(|b| **b == b'\n').count() + 1;
            format!(" line {line}: {what}")
        }
        None => format!(": {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert!(Config::default().engine().is_ok());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let e =
            toml::from_str::<Config>("[io]\nbackend = \"uring\"\nringentries = 3\n").unwrap_err();
        assert!(e.to_string().contains("ringentries"), "{e}");
        let c: Config = toml::from_str("[io]\nrecv_buffers = 300\n").unwrap();
        assert!(c.engine().unwrap_err().starts_with("io: recv_buffers 300"));
        let c: Config = toml::from_str("[io]\nbackend = \"kqueue\"\n").unwrap();
        assert!(c.engine().unwrap_err().starts_with("io.backend"));
        // A value quoted in an error stays on its line.
        let c: Config = toml::from_str("[io]\nbackend = \"a\\nb\"\n").unwrap();
        assert_eq!(
            c.engine().unwrap_err(),
            r#"io.backend: "a\nb" is not one of auto, uring, epoll"#
        );
        let c: Config = toml::from_str("[limits]\nmax_frame_len = 99999999\n").unwrap();
        assert!(c.engine().unwrap_err().starts_with("limits: max_frame_len"));
        let c: Config = toml::from_str("[engine]\nlisten = []\n").unwrap();
        assert!(c.engine().unwrap_err().starts_with("engine.listen"));
        // The admin port: an address, or "" for none.
        let c: Config = toml::from_str("[admin]\nlisten = \"\"\n").unwrap();
        assert_eq!(c.admin.listen, None);
        let e = toml::from_str::<Config>("[admin]\nlisten = \"nowhere\"\n").unwrap_err();
        assert!(e.to_string().contains("invalid socket address"), "{e}");
    }

    /// SPEC SES-4, LIV-2: `dtp.idle_timeout_ms` reaches the endpoint, its
    /// default is above the longest heartbeat interval, and a value not
    /// above it is refused in one line naming the key.
    #[test]
    fn dtp_idle_timeout_is_configurable_and_above_the_heartbeat_maximum() {
        use dtp_gateway::dtp::{DEFAULT_IDLE_TIMEOUT, MAX_HEARTBEAT_INTERVAL};
        let default = DtpSection::default();
        assert_eq!(default.idle_timeout().unwrap(), DEFAULT_IDLE_TIMEOUT);
        assert!(DEFAULT_IDLE_TIMEOUT > MAX_HEARTBEAT_INTERVAL);
        let c: Config = toml::from_str("[dtp]\nidle_timeout_ms = 90000\n").unwrap();
        assert_eq!(c.dtp.idle_timeout().unwrap(), Duration::from_secs(90));
        for refused in [60_000, 1_000, 0] {
            let text = format!("[dtp]\nidle_timeout_ms = {refused}\n");
            let c: Config = toml::from_str(&text).unwrap();
            let e = c.dtp.idle_timeout().unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "dtp.idle_timeout_ms {refused} must be above 60000"
                )),
                "{e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn parse_names_the_line_on_one_line_and_resolves_against_the_base() {
        let e = Config::parse("[engine]\nshards = 1\n\n[io]\nbogus = 1\n", None).unwrap_err();
        assert!(e.starts_with(" line 5: unknown field `bogus`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let c =
            Config::parse("[dtp]\nterminal_key = \"t.key\"\n", Some(Path::new("conf"))).unwrap();
        assert_eq!(Path::new(&c.dtp.terminal_key), Path::new("conf/t.key"));
    }
}
