//! `dtp serve`'s `[realtime.push]` section and each stream's
//! `[realtime.streams.push]`: the Web Push sender, its registries and
//! ceilings, and the streams that send a hint for each publication (SPEC
//! RT-12).

use std::path::PathBuf;

use dtp_gateway::push::{PushSender, PushSenderConfig};
use dtp_gateway::realtime::{PushPlane, PushStore, PushWake, StreamHint, load_store};

use crate::cli_error::CliError;
use dtp_realtime::push::{
    RegistryConfig, RetryPolicy, Urgency, VapidCache, VapidKey, is_valid_topic,
};
use serde::{Deserialize, Serialize};

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
    /// The file registrations are kept in across restarts; empty: in
    /// memory only.
    pub(crate) store: String,
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
            store: String::new(),
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
    /// per-client ceiling, hinted `streams`), with `key` for registration
    /// ids and epochs and `storage_key` for the registry's sealed records
    /// and endpoint fingerprints. Call after [`PushSection::sender`]
    /// accepted the section; a stream's hint that names an unregistered
    /// type or intent, or a bad value, is a one-line error naming it.
    pub(crate) fn settings(
        &self,
        streams: &[crate::realtime_cfg::StreamSection],
        key: [u8; 32],
        storage_key: [u8; 32],
    ) -> Result<dtp_gateway::realtime::PushSettings, String> {
        let streams = streams
            .iter()
            .filter_map(|s| Some(self.hint(&s.id, s.push.as_ref()?)))
            .collect::<Result<_, _>>()?;
        Ok(dtp_gateway::realtime::PushSettings {
            notification_types: self.notification_types.clone(),
            route_intents: self.route_intents.clone(),
            allow_private_endpoints: self.allow_private_endpoints,
            registry: RegistryConfig {
                max_per_principal: self.max_subscriptions_per_client,
                ..RegistryConfig::default()
            },
            release_epoch: concat!("dtp-", env!("CARGO_PKG_VERSION")).to_owned(),
            streams,
            clients: Vec::new(),
            key,
            storage_key,
        })
    }

    /// Stream `id`'s hint, checked against the registries.
    fn hint(&self, id: &str, p: &StreamPushSection) -> Result<StreamHint, String> {
        let at = |key: &str| format!("realtime.streams.push.{key} (stream {id:?})");
        if !self.notification_types.contains(&p.notification_type) {
            return Err(format!(
                "{}: {:?} is not in realtime.push.notification_types",
                at("notification_type"),
                p.notification_type
            ));
        }
        if !self.route_intents.contains(&p.route_intent) {
            return Err(format!(
                "{}: {:?} is not in realtime.push.route_intents",
                at("route_intent"),
                p.route_intent
            ));
        }
        let max = dtp_gateway::realtime::MAX_TTL_SECS;
        if !(1..=max).contains(&p.ttl_seconds) {
            let ttl = p.ttl_seconds;
            return Err(format!(
                "{}: {ttl} is not within 1..={max}",
                at("ttl_seconds")
            ));
        }
        let urgency = Urgency::parse(&p.urgency).ok_or_else(|| {
            format!(
                "{}: {:?} is not very-low, low, normal or high",
                at("urgency"),
                p.urgency
            )
        })?;
        if p.topic.as_deref().is_some_and(|t| !is_valid_topic(t)) {
            return Err(format!(
                "{}: 1-32 characters of A-Z a-z 0-9 - _",
                at("topic")
            ));
        }
        Ok(StreamHint {
            stream: id.to_owned(),
            notification_type: p.notification_type.clone(),
            route_intent: p.route_intent.clone(),
            ttl_secs: p.ttl_seconds,
            urgency,
            topic: p.topic.clone(),
        })
    }

    /// Makes the key and root file names relative to `base`.
    pub(crate) fn resolve_paths(&mut self, base: &std::path::Path) {
        let files = [&mut self.vapid_key, &mut self.store];
        for name in files.into_iter().chain(self.extra_roots.iter_mut()) {
            crate::config::resolve(base, name);
        }
    }
}

/// Starts the Web Push half of the realtime plane (SPEC RT-12): the
/// sender's workers and, with `store`, the registrations kept before, and
/// what to say of them. Keys: with a store, registration ids and the store
/// come from secrets derived from the VAPID key (so ids and records
/// survive a restart, and end with the key); without one, from `random`.
pub(crate) fn start(
    section: &crate::realtime_cfg::RealtimeSection,
    c: PushSenderConfig,
    random: &mut impl FnMut() -> u64,
) -> Result<(PushPlane, String), CliError> {
    let bad = |e: String| CliError::usage("BAD_CONFIG", e);
    let public = dtp_realtime::push::base64url_encode(c.vapid.public_key());
    let workers = c.workers;
    let (mut mac_key, mut salt) = ([0u8; 32], [0u8; 32]);
    for part in mac_key.chunks_mut(8).chain(salt.chunks_mut(8)) {
        part.copy_from_slice(&random().to_le_bytes());
    }
    let stored = !section.push.store.is_empty();
    let secret = c.vapid.derive(b"dtp push store");
    if stored {
        mac_key = c.vapid.derive(b"dtp push registration ids");
    }
    let mut settings = section
        .push
        .settings(&section.streams, mac_key, salt)
        .map_err(bad)?;
    // A client's name: a keyed fingerprint of its token, never the token.
    let names = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret);
    settings.clients = section
        .clients
        .iter()
        .map(|client| {
            let tag = ring::hmac::sign(&names, client.token.as_bytes());
            dtp_realtime::push::base64url_encode(&tag.as_ref()[..12])
        })
        .collect();
    let wake = PushWake::default();
    let path = std::path::Path::new(&section.push.store);
    let kept = if stored {
        let lines = load_store(path).map_err(|e| bad(format!("realtime.push.store: {e}")))?;
        let store = PushStore::open(path, wake.callback())
            .map_err(|e| CliError::Io(format!("realtime.push.store: {e}")))?;
        Some((lines, store))
    } else {
        None
    };
    let sender =
        PushSender::start(c, wake.callback()).map_err(|e| CliError::Io(format!("realtime.{e}")))?;
    let mut plane = PushPlane::new(settings, Box::new(sender), wake);
    let mut announce = format!("web push sender: {workers} workers, applicationServerKey {public}");
    if let Some((lines, store)) = kept {
        plane = plane.with_store(store, secret);
        let r = plane.restore(lines);
        announce.push_str(&format!(
            "; {} registrations restored, {} dropped",
            r.registrations, r.dropped
        ));
    }
    Ok((plane, announce))
}

/// `[realtime.streams.push]`: a stream that sends a Web Push hint for
/// each publication to the registrations bound to it (SPEC RT-12).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamPushSection {
    /// The hint's `notificationType` (one of `realtime.push.notification_types`).
    pub(crate) notification_type: String,
    /// The hint's `routeIntent` (one of `realtime.push.route_intents`).
    pub(crate) route_intent: String,
    /// The hint's lifetime, seconds (1..=86400).
    #[serde(default = "default_hint_ttl")]
    pub(crate) ttl_seconds: u32,
    /// `very-low`, `low`, `normal` or `high`.
    #[serde(default = "default_urgency")]
    pub(crate) urgency: String,
    /// A `Topic`: a push service keeps the latest undelivered hint of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) topic: Option<String>,
}

fn default_hint_ttl() -> u32 {
    3600
}

fn default_urgency() -> String {
    "normal".into()
}

impl StreamPushSection {
    /// The demo stream's hint: `demo.alert`, opening `demo.open`.
    pub(crate) fn demo() -> Self {
        Self {
            notification_type: "demo.alert".into(),
            route_intent: "demo.open".into(),
            ttl_seconds: default_hint_ttl(),
            urgency: default_urgency(),
            topic: Some("demo".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_settings_carry_the_registries_and_the_per_client_ceiling() {
        let p = PushSection {
            max_subscriptions_per_client: 3,
            allow_private_endpoints: true,
            ..PushSection::default()
        };
        let s = p.settings(&[], [1; 32], [2; 32]).unwrap();
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
}
