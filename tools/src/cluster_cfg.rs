//! `[cluster]`: several `dtp serve` gateways sharing state through
//! distributed engines (DESIGN.md §3, state behind seams): NATS JetStream
//! for the realtime stream ledgers (SPEC RT-6 scale-out), etcd for
//! ownership (SPEC HO-4, TS-8). Without the section nothing changes: every
//! piece of state stays in the process.
//!
//! Every key is checked at start-up (one-line errors naming the key);
//! `nats`, `node_id` and `secret_file` are used by the realtime plane,
//! `etcd` and `lease_ttl_secs` are read for the ownership seam; the
//! credentials to both are read by `cluster_auth`.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// The `[cluster]` section as written.
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ClusterSection {
    /// This gateway's name in the cluster (unique among the gateways).
    pub(crate) node_id: String,
    /// etcd endpoints, `http://HOST:PORT`.
    pub(crate) etcd: Vec<String>,
    /// The NATS server, `nats://HOST:PORT`; empty: the realtime ledgers
    /// stay in the process.
    pub(crate) nats: String,
    /// A file holding the cluster's shared secret (at least 16 bytes, the
    /// same file on every gateway): the realtime cursor key is derived
    /// from it, so a cursor one gateway issued resumes on another.
    pub(crate) secret_file: String,
    /// Time allowed for one connection or request to etcd or NATS (ms).
    pub(crate) timeout_ms: u64,
    /// Lifetime of an ownership lease in etcd (s); renewed every third.
    pub(crate) lease_ttl_secs: u64,
    /// The etcd user to authenticate as; empty: none.
    pub(crate) etcd_user: String,
    /// A file whose first line is `etcd_user`'s password.
    pub(crate) etcd_password_file: String,
    /// The NATS user to authenticate as; empty: none.
    pub(crate) nats_user: String,
    /// A file whose first line is `nats_user`'s password.
    pub(crate) nats_password_file: String,
    /// A file whose first line is the NATS token (instead of a user).
    pub(crate) nats_token_file: String,
    /// The CA (PEM) of `https://` etcd and `tls://` NATS servers.
    pub(crate) ca_file: String,
}

impl Default for ClusterSection {
    fn default() -> Self {
        Self {
            node_id: String::new(),
            etcd: Vec::new(),
            nats: String::new(),
            secret_file: String::new(),
            timeout_ms: 2_000,
            lease_ttl_secs: 10,
            etcd_user: String::new(),
            etcd_password_file: String::new(),
            nats_user: String::new(),
            nats_password_file: String::new(),
            nats_token_file: String::new(),
            ca_file: String::new(),
        }
    }
}

/// Longest node id.
const MAX_NODE_ID: usize = 64;
/// Shortest shared secret (bytes, surrounding whitespace not counted).
const MIN_SECRET: usize = 16;

/// `[cluster]`, checked.
#[derive(Clone, Debug)]
pub(crate) struct Cluster {
    /// This gateway's name.
    pub(crate) node_id: String,
    /// etcd endpoints (`host:port`, or `https://host:port`).
    pub(crate) etcd: Vec<String>,
    /// The NATS server (`nats://host:port`), if the ledgers are shared.
    pub(crate) nats: Option<String>,
    /// Connection and request timeout.
    pub(crate) timeout: Duration,
    /// Ownership lease lifetime.
    pub(crate) lease_ttl: Duration,
    /// The realtime cursor key (with `nats`).
    cursor_key: Option<[u8; 32]>,
    /// etcd's credentials, if set.
    etcd_auth: Option<dtp_cluster::etcd::EtcdAuth>,
    /// NATS's credentials, if set.
    nats_auth: Option<dtp_cluster::nats::NatsAuth>,
    /// The CA of TLS endpoints, if any.
    tls: Option<dtp_cluster::ClusterTls>,
    /// Whether the NATS server is `tls://`.
    nats_tls: bool,
}

impl ClusterSection {
    /// Makes the file keys relative to `base` (the configuration's folder).
    pub(crate) fn resolve_paths(&mut self, base: &Path) {
        for file in [
            &mut self.secret_file,
            &mut self.etcd_password_file,
            &mut self.nats_password_file,
            &mut self.nats_token_file,
            &mut self.ca_file,
        ] {
            if !file.is_empty() && Path::new(file.as_str()).is_relative() {
                *file = base.join(file.as_str()).display().to_string();
            }
        }
    }

    /// Checks every key; reads the secret file when the ledgers are shared.
    pub(crate) fn check(&self) -> Result<Cluster, String> {
        let id = &self.node_id;
        let id_ok = (1..=MAX_NODE_ID).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !id_ok {
            return Err(format!(
                "cluster.node_id: {id:?} must be 1-{MAX_NODE_ID} characters of [A-Za-z0-9_-]"
            ));
        }
        let mut etcd = Vec::new();
        let etcd_https = self
            .etcd
            .iter()
            .filter(|e| e.starts_with("https://"))
            .count();
        if etcd_https != 0 && etcd_https != self.etcd.len() {
            return Err("cluster.etcd: all https:// or all http://".into());
        }
        for (i, e) in self.etcd.iter().enumerate() {
            let at = match host_port(e, "https://") {
                Some(at) => format!("https://{at}"),
                None => host_port(e, "http://").ok_or_else(|| {
                    format!("cluster.etcd[{i}]: {e:?} is not http(s)://HOST:PORT")
                })?,
            };
            etcd.push(at);
        }
        let nats = if self.nats.is_empty() {
            None
        } else {
            host_port(&self.nats, "nats://")
                .or_else(|| host_port(&self.nats, "tls://"))
                .ok_or_else(|| {
                    format!(
                        "cluster.nats: {:?} is not nats:// or tls://HOST:PORT",
                        self.nats
                    )
                })?;
            Some(self.nats.clone())
        };
        let nats_tls = self.nats.starts_with("tls://");
        let tls = crate::cluster_auth::tls(&self.ca_file, etcd_https > 0 || nats_tls)?;
        if etcd.is_empty() && nats.is_none() {
            return Err(
                "cluster: neither etcd nor nats is set; remove [cluster] or set one".into(),
            );
        }
        if !(1..=60_000).contains(&self.timeout_ms) {
            return Err(format!(
                "cluster.timeout_ms {} must be 1..=60000",
                self.timeout_ms
            ));
        }
        if !(2..=3_600).contains(&self.lease_ttl_secs) {
            return Err(format!(
                "cluster.lease_ttl_secs {} must be 2..=3600",
                self.lease_ttl_secs
            ));
        }
        // A lease is renewed every third of its lifetime: one renewal must
        // fit in that third.
        if self.timeout_ms.saturating_mul(3) > self.lease_ttl_secs * 1000 {
            return Err(format!(
                "cluster.timeout_ms {} must be at most a third of lease_ttl_secs ({} s)",
                self.timeout_ms, self.lease_ttl_secs
            ));
        }
        let cursor_key = match (&nats, self.secret_file.as_str()) {
            (None, _) => None,
            (Some(_), "") => {
                return Err(
                    "cluster.secret_file: needed with nats (the cursor key every gateway shares)"
                        .into(),
                );
            }
            (Some(_), file) => Some(cursor_key(file)?),
        };
        let etcd_auth = crate::cluster_auth::etcd(&self.etcd_user, &self.etcd_password_file)?;
        if etcd_auth.is_some() && etcd.is_empty() {
            return Err("cluster.etcd_user: set without etcd".into());
        }
        let nats_auth = crate::cluster_auth::nats(
            &self.nats_user,
            &self.nats_password_file,
            &self.nats_token_file,
        )?;
        if nats_auth.is_some() && nats.is_none() {
            return Err("cluster: NATS credentials set without nats".into());
        }
        Ok(Cluster {
            node_id: id.clone(),
            etcd,
            nats,
            timeout: Duration::from_millis(self.timeout_ms),
            lease_ttl: Duration::from_secs(self.lease_ttl_secs),
            cursor_key,
            etcd_auth,
            nats_auth,
            tls,
            nats_tls,
        })
    }
}

/// The key prefix of this deployment's state in etcd.
const ETCD_PREFIX: &str = "dtp";

impl Cluster {
    /// How the terminal plane joins the occupancy table and the session
    /// store, when `etcd` is set.
    pub(crate) fn ownership(&self) -> Option<dtp_gateway::plane::ClusterSettings> {
        (!self.etcd.is_empty()).then(|| dtp_gateway::plane::ClusterSettings {
            node_id: self.node_id.clone(),
            etcd: self.etcd.clone(),
            prefix: ETCD_PREFIX.to_owned(),
            lease_ttl: self.lease_ttl,
            http: self.http(),
        })
    }

    /// The etcd clients' timeouts.
    pub(crate) fn http(&self) -> dtp_cluster::HttpConfig {
        dtp_cluster::HttpConfig {
            connect_timeout: self.timeout,
            io_timeout: self.timeout,
            auth: self.etcd_auth.clone(),
            tls: self.tls.clone(),
            ..dtp_cluster::HttpConfig::default()
        }
    }

    /// How the realtime plane joins the shared ledgers, when `nats` is set.
    pub(crate) fn realtime(&self) -> Option<dtp_gateway::realtime::ClusterSettings> {
        let (nats, key) = (self.nats.as_ref()?, self.cursor_key?);
        Some(dtp_gateway::realtime::ClusterSettings {
            servers: vec![nats.clone()],
            node_id: self.node_id.clone(),
            timeout: self.timeout,
            cursor_key: key,
            auth: self.nats_auth.clone(),
            tls: self.tls.clone().filter(|_| self.nats_tls),
        })
    }
}

/// `host:port` of `url` written `<scheme>HOST:PORT` (no path), if it is.
fn host_port(url: &str, scheme: &str) -> Option<String> {
    let rest = url.strip_prefix(scheme)?;
    let (host, port) = rest.rsplit_once(':')?;
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':'));
    let port_ok = port.parse::<u16>().is_ok_and(|p| p != 0);
    (host_ok && port_ok).then(|| rest.to_owned())
}

/// The cursor key derived from the shared secret in `file` (never shown).
fn cursor_key(file: &str) -> Result<[u8; 32], String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cluster.secret_file: {file}: {e}"))?;
    let secret = bytes.trim_ascii();
    if secret.len() < MIN_SECRET {
        return Err(format!(
            "cluster.secret_file: {file} holds fewer than {MIN_SECRET} bytes"
        ));
    }
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"dtp-realtime/cluster-cursor-key/v1");
    ctx.update(secret);
    let mut key = [0u8; 32];
    key.copy_from_slice(ctx.finish().as_ref());
    Ok(key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn section(text: &str) -> Result<ClusterSection, String> {
        toml::from_str::<ClusterSection>(text).map_err(|e| e.to_string())
    }

    fn secret(tag: &str, content: &[u8]) -> String {
        let p =
            std::env::temp_dir().join(format!("dtp-cluster-secret-{tag}-{}", std::process::id()));
        std::fs::write(&p, content).unwrap();
        p.display().to_string()
    }

    #[test]
    fn a_full_section_checks_and_derives_the_same_key_from_the_same_secret() {
        let file = secret("full", b"  correct horse battery staple\n");
        let text = format!(
            "node_id = \"gw-1\"\netcd = [\"http://127.0.0.1:2379\", \"http://[::1]:2379\"]\nnats = \"nats://127.0.0.1:4222\"\nsecret_file = {file:?}\ntimeout_ms = 500\nlease_ttl_secs = 6\n"
        );
        let c = section(&text).unwrap().check().unwrap();
        assert_eq!(c.etcd, ["127.0.0.1:2379", "[::1]:2379"]);
        assert_eq!(c.lease_ttl, Duration::from_secs(6));
        let a = c.realtime().unwrap();
        let other = secret("same", b"correct horse battery staple");
        let again = format!("node_id = \"gw-2\"\nnats = \"nats://h:1\"\nsecret_file = {other:?}\n");
        let b = section(&again)
            .unwrap()
            .check()
            .unwrap()
            .realtime()
            .unwrap();
        assert_eq!(
            a.cursor_key, b.cursor_key,
            "whitespace around the secret ignored"
        );
        assert_eq!(a.servers, ["nats://127.0.0.1:4222"]);
        let _ = std::fs::remove_file(file);
        let _ = std::fs::remove_file(other);
    }

    #[test]
    fn every_bad_key_is_named() {
        let short = secret("short", b"tiny");
        let cases = [
            ("node_id = \"\"\nnats = \"nats://h:1\"", "cluster.node_id"),
            (
                "node_id = \"a b\"\nnats = \"nats://h:1\"",
                "cluster.node_id",
            ),
            ("node_id = \"a\"\netcd = [\"h:1\"]", "cluster.etcd[0]"),
            ("node_id = \"a\"\nnats = \"nats://h\"", "cluster.nats"),
            ("node_id = \"a\"", "neither etcd nor nats"),
            (
                "node_id = \"a\"\netcd = [\"http://h:1\"]\ntimeout_ms = 0",
                "cluster.timeout_ms",
            ),
            (
                "node_id = \"a\"\netcd = [\"http://h:1\"]\nlease_ttl_secs = 1",
                "cluster.lease_ttl_secs",
            ),
            (
                "node_id = \"a\"\netcd = [\"http://h:1\"]\ntimeout_ms = 5000\nlease_ttl_secs = 10",
                "a third of lease_ttl_secs",
            ),
            (
                "node_id = \"a\"\nnats = \"nats://h:1\"",
                "cluster.secret_file: needed",
            ),
            (
                "node_id = \"a\"\nnats = \"nats://h:1\"\nsecret_file = \"/nonexistent/s\"",
                "cluster.secret_file",
            ),
        ];
        for (text, want) in cases {
            let err = section(text).unwrap().check().unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
        let text = format!("node_id = \"a\"\nnats = \"nats://h:1\"\nsecret_file = {short:?}");
        let err = section(&text).unwrap().check().unwrap_err();
        assert!(
            err.contains("fewer than 16 bytes") && !err.contains("tiny"),
            "{err}"
        );
        // Credentials for an engine that is not set are a mistake.
        let pw = secret("pw", b"a password of sixteen bytes or more\n");
        for (text, want) in [
            (
                format!(
                    "node_id = \"a\"\nnats = \"nats://h:1\"\nsecret_file = {pw:?}\netcd_user = \"u\"\netcd_password_file = {pw:?}"
                ),
                "cluster.etcd_user: set without etcd",
            ),
            (
                format!("node_id = \"a\"\netcd = [\"http://h:1\"]\nnats_token_file = {pw:?}"),
                "NATS credentials set without nats",
            ),
        ] {
            let err = section(&text).unwrap().check().unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        // Set, they reach the clients' configs.
        let both = format!(
            "node_id = \"a\"\netcd = [\"http://h:1\"]\nnats = \"nats://h:2\"\nsecret_file = {pw:?}\netcd_user = \"u\"\netcd_password_file = {pw:?}\nnats_token_file = {pw:?}"
        );
        let c = section(&both).unwrap().check().unwrap();
        assert_eq!(
            c.http().auth.map(|a| a.user().to_owned()).as_deref(),
            Some("u")
        );
        assert_eq!(
            c.realtime().unwrap().auth,
            Some(dtp_cluster::nats::NatsAuth::Token(
                "a password of sixteen bytes or more".into()
            ))
        );
        let _ = std::fs::remove_file(pw);
        for (text, want) in [
            (
                "node_id = \"a\"\netcd = [\"https://h:1\", \"http://h:2\"]",
                "all https:// or all http://",
            ),
            (
                "node_id = \"a\"\netcd = [\"https://h:1\"]",
                "cluster.ca_file: needed",
            ),
            (
                "node_id = \"a\"\netcd = [\"http://h:1\"]\nca_file = \"ca.pem\"",
                "no endpoint is https:// or tls://",
            ),
            (
                "node_id = \"a\"\netcd = [\"https://h:1\"]\nca_file = \"/nonexistent/ca.pem\"",
                "cluster.ca_file: /nonexistent/ca.pem",
            ),
        ] {
            let err = section(text).unwrap().check().unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        assert!(section("nodeid = \"a\"").is_err(), "unknown keys refused");
        // etcd alone needs no secret.
        section("node_id = \"a\"\netcd = [\"http://h:1\"]")
            .unwrap()
            .check()
            .unwrap();
        let _ = std::fs::remove_file(short);
    }
}
