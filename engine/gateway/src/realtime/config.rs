//! What the realtime front end of a shard is told: who may do what, which
//! origins may open WebSockets, and its ceilings (SPEC RT-6, RT-9, RT-10,
//! RT-13). Shared read-only by every shard.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dtp_codec::http::HttpLimits;

use super::login::LoginKey;
use crate::secret::same_secret;

/// One client credential: a token presented as `Authorization: Bearer` or
/// as the session cookie's value, and what it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtClient {
    /// The secret token.
    pub token: String,
    /// Streams it may subscribe to and snapshot (`*`: every stream).
    pub streams: Vec<String>,
    /// Whether it may publish to those streams.
    pub publish: bool,
    /// Whether it may cut a stream's retention (operator).
    pub admin: bool,
}

impl RtClient {
    /// Whether this client may read `stream`.
    pub fn may_read(&self, stream: &str) -> bool {
        self.streams.iter().any(|s| s == "*" || s == stream)
    }
}

/// The largest [`RtLimits::overload_retry`]: its hints, spread up to twice
/// it, stay below SPEC RT-13's 60 s largest reconnect delay.
pub const MAX_OVERLOAD_RETRY: Duration = Duration::from_secs(30);

/// Ceilings of the realtime front end. Defaults are the ceilings of SPEC
/// RT-13; a deployment may lower them, never raise them
/// ([`RtLimits::validate`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtLimits {
    /// HTTP request ceilings.
    pub http: HttpLimits,
    /// Largest inbound WebSocket message and largest event (64 KiB).
    pub max_message: usize,
    /// Outbound bytes queued per connection before it is a slow consumer
    /// (256 KiB, RT-10: it is closed with QUEUE_OVERFLOW, never skipped).
    pub max_outbound: usize,
    /// Logical subscriptions per WebSocket connection (32).
    pub max_subscriptions: usize,
    /// SSE comment heartbeat period (15 s: below common proxy idle timeouts).
    pub sse_heartbeat: Duration,
    /// The least SSE `retry:` hint sent on connect: each stream's is spread
    /// over `[sse_retry, 2 × sse_retry)` (SPEC RT-7).
    pub sse_retry: Duration,
    /// The least `retryAfterMs` of a CLOSE OVERLOADED that ends a lagging
    /// WebSocket session: each close's hint is spread over
    /// `[overload_retry, 2 × overload_retry)` (SPEC RT-7: OVERLOADED is
    /// retried only with a server hint; RT-10). At most 30 s, so that no
    /// hint passes RT-13's 60 s largest reconnect delay.
    pub overload_retry: Duration,
    /// WebSocket: the client's heartbeat interval bounds, announced in
    /// WELCOME; a connection silent for twice the maximum is closed.
    pub ws_heartbeat_min: Duration,
    /// See [`RtLimits::ws_heartbeat_min`].
    pub ws_heartbeat_max: Duration,
    /// How long an idle keep-alive HTTP connection is kept.
    pub idle_timeout: Duration,
    /// How long a request head may take from its first byte (10 s): a
    /// client trickling a head byte by byte (slowloris) holds its
    /// connection no longer than this, whatever it sends.
    pub head_timeout: Duration,
    /// Snapshot polls per client per core per minimum interval (RT-11: the
    /// minimum interval is 5 s); more is answered 429 with Retry-After.
    pub poll_burst: u32,
    /// See [`RtLimits::poll_burst`].
    pub poll_interval: Duration,
}

impl Default for RtLimits {
    fn default() -> Self {
        Self {
            http: HttpLimits::default(),
            max_message: 64 * 1024,
            max_outbound: 256 * 1024,
            max_subscriptions: 32,
            sse_heartbeat: Duration::from_secs(15),
            sse_retry: Duration::from_secs(2),
            overload_retry: Duration::from_secs(1),
            ws_heartbeat_min: Duration::from_secs(10),
            ws_heartbeat_max: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(10),
            poll_burst: 5,
            poll_interval: Duration::from_secs(5),
        }
    }
}

impl RtLimits {
    /// Refuses a ceiling above SPEC RT-13's, or one that makes no sense.
    pub fn validate(&self) -> Result<(), String> {
        let ceiling = Self::default();
        let checks = [
            ("max_message", self.max_message, ceiling.max_message),
            ("max_outbound", self.max_outbound, ceiling.max_outbound),
            (
                "max_subscriptions",
                self.max_subscriptions,
                ceiling.max_subscriptions,
            ),
        ];
        for (name, v, max) in checks {
            if v == 0 || v > max {
                return Err(format!("{name} must be 1 ..= {max} (SPEC RT-13), not {v}"));
            }
        }
        if self.poll_interval < ceiling.poll_interval {
            return Err("poll_interval may not be below 5 s (SPEC RT-11)".into());
        }
        if self.overload_retry.is_zero() || self.overload_retry > MAX_OVERLOAD_RETRY {
            return Err("overload_retry must be 1 ms ..= 30 s (SPEC RT-13)".into());
        }
        if self.ws_heartbeat_min > self.ws_heartbeat_max || self.ws_heartbeat_min.is_zero() {
            return Err("ws heartbeat bounds must be 0 < min <= max".into());
        }
        if self.poll_burst == 0
            || self.sse_heartbeat.is_zero()
            || self.idle_timeout.is_zero()
            || self.head_timeout.is_zero()
        {
            return Err(
                "poll_burst, sse_heartbeat, idle_timeout and head_timeout must be positive".into(),
            );
        }
        Ok(())
    }
}

/// The realtime front end's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtConfig {
    /// Client credentials.
    pub clients: Vec<RtClient>,
    /// The name of the session cookie browsers present (HttpOnly, set by
    /// `POST /v1/login`): its value is a signed, expiring session id
    /// ([`LoginKey`]), never a token.
    pub cookie: String,
    /// Signs and checks the session ids.
    pub login: LoginKey,
    /// Origins allowed to open a WebSocket, exactly (scheme://host:port,
    /// SPEC RT-9). A request carrying an `Origin` not listed is refused
    /// 403; one without `Origin` (not a browser) must authenticate with a
    /// bearer token.
    pub origins: Vec<String>,
    /// The page's own origins, known once its listener is bound
    /// ([`RtConfig::serve_at`]): allowed exactly like `origins`.
    pub own_origins: Arc<OnceLock<Vec<String>>>,
    /// The plain WebSocket echo endpoint `/v1/echo` (for RFC 6455
    /// conformance suites), with its message ceiling; `None`: off.
    pub echo_max_message: Option<usize>,
    /// Each stream's scope binding (stream id → the opaque token its
    /// envelopes carry, SPEC RT-3): a SUBSCRIBE must present it exactly.
    pub scopes: HashMap<String, String>,
    /// Ceilings.
    pub limits: RtLimits,
}

/// The echo endpoint's message ceiling may be raised to this (16 MiB).
pub const ECHO_MAX_MESSAGE: usize = 16 << 20;

impl RtConfig {
    /// The client holding `token`, if any. Every client's token is
    /// compared, each in constant time, so the answer's timing tells
    /// nothing about how close a guess was.
    pub fn client(&self, token: &str) -> Option<usize> {
        self.clients.iter().enumerate().fold(None, |found, (i, c)| {
            let same = same_secret(token.as_bytes(), c.token.as_bytes());
            found.or(same.then_some(i))
        })
    }

    /// SPEC RT-9: whether a browser page of `origin` may open a WebSocket:
    /// only an origin listed exactly, or one of the page's own origins on
    /// the bound listener. Never one derived from the request's `Host`,
    /// which the client chooses (DNS rebinding would pass it).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let own = self.own_origins.get().map_or(&[][..], Vec::as_slice);
        self.origins.iter().chain(own).any(|o| o == origin)
    }

    /// Records where the front end listens (the bound addresses, port
    /// resolved), so that the demo page it serves there may open a
    /// WebSocket: `http://ADDR` for each loopback address, and
    /// `http://localhost:PORT` beside 127.0.0.1 and `[::1]`. A listener on
    /// any other address derives nothing: list its origins. Only the first
    /// call counts.
    pub fn serve_at(&self, addrs: &[SocketAddr]) {
        let mut own = Vec::new();
        for a in addrs.iter().filter(|a| a.ip().is_loopback()) {
            own.push(format!("http://{a}"));
            own.push(format!("http://localhost:{}", a.port()));
        }
        let _ = self.own_origins.set(own);
    }

    /// Checks the ceilings and the credentials.
    pub fn validate(&self) -> Result<(), String> {
        self.limits.validate()?;
        if let Some(n) = self.echo_max_message
            && (n == 0 || n > ECHO_MAX_MESSAGE)
        {
            return Err(format!("echo_max_message must be 1 ..= {ECHO_MAX_MESSAGE}"));
        }
        for c in &self.clients {
            if c.token.len() < 8 || !c.token.bytes().all(|b| b.is_ascii_graphic() && b != b';') {
                return Err(
                    "a client token must be 8 or more visible ASCII characters, no ';'".into(),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(origins: &[&str]) -> RtConfig {
        RtConfig {
            clients: vec![
                RtClient {
                    token: "first-token".into(),
                    streams: vec!["*".into()],
                    publish: false,
                    admin: false,
                },
                RtClient {
                    token: "second-token".into(),
                    streams: vec![],
                    publish: false,
                    admin: false,
                },
            ],
            cookie: "dtp_session".into(),
            login: LoginKey::new([3; 32], std::time::Instant::now()),
            origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            own_origins: Default::default(),
            echo_max_message: None,
            scopes: HashMap::new(),
            limits: RtLimits::default(),
        }
    }

    /// SPEC RT-9: exact origins only, the page's own once bound on
    /// loopback, nothing for another address.
    #[test]
    fn origins_are_matched_exactly() {
        let c = config(&["https://app.example"]);
        assert!(c.origin_allowed("https://app.example"));
        assert!(!c.origin_allowed("https://app.example:443"));
        assert!(!c.origin_allowed("http://127.0.0.1:7780"));
        c.serve_at(&[
            "127.0.0.1:7780".parse().unwrap(),
            "0.0.0.0:7781".parse().unwrap(),
        ]);
        assert!(c.origin_allowed("http://127.0.0.1:7780"));
        assert!(c.origin_allowed("http://localhost:7780"));
        assert!(!c.origin_allowed("http://localhost:7781"));
        assert!(!c.origin_allowed("http://0.0.0.0:7781"));
        assert!(!c.origin_allowed("http://evil.example:7780"));
    }

    #[test]
    fn tokens_find_their_client() {
        let c = config(&[]);
        assert_eq!(c.client("first-token"), Some(0));
        assert_eq!(c.client("second-token"), Some(1));
        assert_eq!(c.client("second-tokem"), None);
        assert_eq!(c.client(""), None);
    }

    /// SPEC RT-7, RT-13: an OVERLOADED hint base of 1 ms ..= 30 s, so that
    /// no spread hint passes the 60 s largest reconnect delay.
    #[test]
    fn the_overload_hint_is_bounded() {
        let with = |ms| RtLimits {
            overload_retry: Duration::from_millis(ms),
            ..RtLimits::default()
        };
        assert_eq!(with(1).validate(), Ok(()));
        assert_eq!(with(30_000).validate(), Ok(()));
        assert!(with(0).validate().is_err());
        assert!(with(30_001).validate().is_err());
        assert!(
            2 * MAX_OVERLOAD_RETRY.as_millis()
                <= u128::from(dtp_codec::realtime::MAX_RETRY_AFTER_MS)
        );
    }
}
