//! `[terminal]`: the terminal control plane of `dtp serve` (SPEC §2–3) —
//! the engine's [`PlaneConfig`] plus the OS access control (TS-4), in a
//! form that both reads (unknown keys refused) and prints with its
//! defaults (`dtp serve --print-config`).
//!
//! The engine's configuration types only deserialise; this module mirrors
//! the parts that do not serialise (the policy scripts, the audit log) and
//! converts to [`PlaneConfig`] with a struct literal, so a field the engine
//! adds is a compile error here rather than a silently ignored key.
//!
//! ```toml
//! [terminal.control]
//! terminal_id = "term-1"
//! [[terminal.control.resources]]
//! resource_id = "arm"
//! handover_policy = "ask"
//! [terminal.control.policies.ask]
//! policy = { policy_type = "human_decision", ui_channel = "external_panel" }
//! [terminal.audit]
//! path = "audit.jsonl"
//! [terminal.os_access]
//! kind = "command"
//! grant = ["/usr/local/bin/grant", "--", "{resource_id}", "{fay_id}", "{access_mode}"]
//! revoke = ["/usr/local/bin/revoke", "--", "{resource_id}", "{fay_id}", "{access_mode}"]
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use dtp_crypto::cred::Verifier;
use dtp_gateway::plane::{AuditSection, CommandAccess, FsyncPolicy, PlaneConfig, RotationSection};
use dtp_policy::{AiFallback, HumanDecision, PolicySet, PriorityScript};
use dtp_terminal::{
    AccessGrant, CommandAccessConfig, NoopAccess, OsAccess, OsError, TerminalConfig,
};
use serde::{Deserialize, Serialize};

use crate::config::Config;

/// The `[terminal]` section: present, `dtp serve` runs the terminal
/// control plane (it needs `[dtp] enabled = true`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TerminalSection {
    /// The terminal machine: id, liveness, limits, handover rules,
    /// resources (with metadata and handover policy) and named policies.
    pub(crate) control: TerminalConfig,
    /// Priority scripts (HO-3a) and the model fallbacks (HO-3b).
    #[serde(default)]
    pub(crate) policy: PolicySection,
    /// The audit log (TS-12, HO-10); absent, records are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) audit: Option<AuditMirror>,
    /// Model calls in flight at most (1–64).
    #[serde(default = "default_model_workers")]
    pub(crate) model_workers: usize,
    /// OS access operations (a `command`'s grants and revokes) running at
    /// most, off the control thread (1–64).
    #[serde(default = "default_os_workers")]
    pub(crate) os_workers: usize,
    /// Human decisions pending at most (1–4096).
    #[serde(default = "default_human_queue")]
    pub(crate) human_queue: usize,
    /// Session state changes kept for observers (1–1048576).
    #[serde(default = "default_state_changes")]
    pub(crate) state_changes: usize,
    /// Admin commands queued for the control thread at most (1–4096).
    #[serde(default = "default_admin_queue")]
    pub(crate) admin_queue: usize,
    /// SPEC TS-4: how a session's holder is let at its resource.
    #[serde(default)]
    pub(crate) os_access: OsAccessSection,
}

/// The engine's defaults for the plane's own bounds.
fn plane_defaults() -> PlaneConfig {
    PlaneConfig::new(TerminalConfig::new("-"))
}

fn default_model_workers() -> usize {
    plane_defaults().model_workers
}

fn default_os_workers() -> usize {
    plane_defaults().os_workers
}

fn default_human_queue() -> usize {
    plane_defaults().human_queue
}

fn default_state_changes() -> usize {
    plane_defaults().state_changes
}

fn default_admin_queue() -> usize {
    plane_defaults().admin_queue
}

/// SPEC HO-3a, HO-3b: the scripts behind `priority_script` policies and
/// what an `ai_model` policy falls back to. (Policies themselves are named
/// in `control.policies`.)
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct PolicySection {
    /// Rhai priority scripts by `script_id`.
    pub(crate) scripts: BTreeMap<String, String>,
    /// Required when an `ai_model` policy is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ai_fallback: Option<AiFallbackSection>,
}

/// SPEC HO-3b: the script run when the model is unavailable and the human
/// decision asked when it answers `require_human`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AiFallbackSection {
    pub(crate) priority_script: PriorityScript,
    pub(crate) human_decision: HumanDecision,
}

/// SPEC TS-12, HO-10: the audit log (JSON lines).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditMirror {
    /// The log file (created if missing).
    pub(crate) path: PathBuf,
    /// `every_record` (default), `interval` or `never` (only at stop).
    #[serde(default)]
    pub(crate) fsync: FsyncMirror,
    /// Under `interval`: the longest a record stays unsynced (ms).
    #[serde(default = "default_fsync_interval_ms")]
    pub(crate) fsync_interval_ms: u64,
    /// Size-based rotation; absent, the file grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rotation: Option<RotationMirror>,
}

fn default_fsync_interval_ms() -> u64 {
    1000
}

/// When the audit log syncs.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FsyncMirror {
    #[default]
    EveryRecord,
    Interval,
    Never,
}

/// Rotation of the audit log.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RotationMirror {
    /// The size a file may reach (bytes).
    pub(crate) max_bytes: u64,
    /// Rotated files kept.
    pub(crate) keep: usize,
}

/// SPEC TS-4: the OS access control, by `kind`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum OsAccessSection {
    /// Grants and revokes always succeed and do nothing (resources that
    /// enforce access themselves).
    #[default]
    Noop,
    /// Runs `grant` / `revoke` argv templates (no shell), with
    /// `{resource_id}`, `{access_mode}`, `{session_id}`, `{fay_id}`
    /// substituted; exit status 0 is success; `timeout_ms` (default 2000)
    /// kills a command that hangs (its resource is then marked for
    /// reconciliation, SPEC TS-4). Commands run on the plane's OS workers,
    /// never on the control thread.
    Command(CommandAccessConfig),
}

/// The OS access control `dtp serve` runs.
#[derive(Clone)]
pub(crate) enum Access {
    Noop(NoopAccess),
    Command(CommandAccess),
    /// Either of the others, taking part in a cluster's occupancy table
    /// (`[cluster] etcd`).
    Cluster(Box<dtp_gateway::plane::ClusterAccess<Access>>),
}

impl OsAccess for Access {
    fn grant(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        match self {
            Access::Noop(a) => a.grant(grant),
            Access::Command(a) => a.grant(grant),
            Access::Cluster(a) => a.grant(grant),
        }
    }

    fn revoke(&mut self, grant: &AccessGrant) -> Result<(), OsError> {
        match self {
            Access::Noop(a) => a.revoke(grant),
            Access::Command(a) => a.revoke(grant),
            Access::Cluster(a) => a.revoke(grant),
        }
    }

    fn release(&mut self, grant: &AccessGrant, to: Option<&str>) -> Result<(), OsError> {
        match self {
            Access::Noop(a) => a.release(grant, to),
            Access::Command(a) => a.release(grant, to),
            Access::Cluster(a) => a.release(grant, to),
        }
    }

    /// A command runs on the plane's OS workers, never on the control
    /// thread (SPEC TS-4).
    fn deferred(&self) -> bool {
        match self {
            Access::Noop(a) => a.deferred(),
            Access::Command(a) => a.deferred(),
            Access::Cluster(a) => a.deferred(),
        }
    }

    fn fencing(&self) -> Option<u64> {
        match self {
            Access::Cluster(a) => a.fencing(),
            Access::Noop(_) | Access::Command(_) => None,
        }
    }

    fn may_hold(&self) -> bool {
        match self {
            Access::Cluster(a) => a.may_hold(),
            Access::Noop(_) | Access::Command(_) => true,
        }
    }

    fn shared(&self) -> bool {
        match self {
            Access::Cluster(a) => a.shared(),
            Access::Noop(_) | Access::Command(_) => false,
        }
    }

    fn attach_wake(&mut self, wake: std::sync::Arc<dyn Fn() + Send + Sync>) {
        if let Access::Cluster(a) = self {
            a.attach_wake(wake);
        }
    }
}

impl TerminalSection {
    /// Makes the audit log's path, and a command's program named with a
    /// folder (`./grant.sh`, `bin/grant`; a bare name is looked up on
    /// `PATH`), relative to `base` (the configuration file's folder).
    pub(crate) fn resolve_paths(&mut self, base: &std::path::Path) {
        if let Some(audit) = &mut self.audit
            && audit.path.is_relative()
        {
            audit.path = base.join(&audit.path);
        }
        if let OsAccessSection::Command(c) = &mut self.os_access {
            for argv in [&mut c.grant, &mut c.revoke] {
                if let Some(program) = argv.first_mut()
                    && program.contains('/')
                {
                    crate::config::resolve(base, program);
                }
            }
        }
    }

    /// The engine's plane configuration and the OS access control, every
    /// range and reference checked (scripts compiled); errors name the key
    /// (`terminal.control: …`, `terminal.model_workers: …`).
    pub(crate) fn plane(&self) -> Result<(PlaneConfig, Access), String> {
        let audit = self.audit.as_ref().map(|a| AuditSection {
            path: a.path.clone(),
            fsync: match a.fsync {
                FsyncMirror::EveryRecord => FsyncPolicy::EveryRecord,
                FsyncMirror::Interval => FsyncPolicy::Interval,
                FsyncMirror::Never => FsyncPolicy::Never,
            },
            fsync_interval_ms: a.fsync_interval_ms,
            rotation: a.rotation.map(|r| RotationSection {
                max_bytes: r.max_bytes,
                keep: r.keep,
            }),
        });
        let policy = PolicySet {
            scripts: self.policy.scripts.clone(),
            ai_fallback: self.policy.ai_fallback.clone().map(|f| AiFallback {
                priority_script: f.priority_script,
                human_decision: f.human_decision,
            }),
            ..PolicySet::default()
        };
        let config = PlaneConfig {
            control: self.control.clone(),
            policy,
            audit,
            model_workers: self.model_workers,
            os_workers: self.os_workers,
            human_queue: self.human_queue,
            state_changes: self.state_changes,
            admin_queue: self.admin_queue,
        };
        config.validate().map_err(|e| match e {
            dtp_gateway::PlaneError::Config(what) => format!("terminal.{what}"),
            other => format!("terminal: {other}"),
        })?;
        let access = match &self.os_access {
            OsAccessSection::Noop => Access::Noop(NoopAccess),
            OsAccessSection::Command(c) => Access::Command(
                CommandAccess::new(c.clone()).map_err(|e| format!("terminal.os_access: {e}"))?,
            ),
        };
        Ok((config, access))
    }
}

/// What `dtp serve` needs to run the terminal plane.
pub(crate) struct PlaneParts {
    pub(crate) config: PlaneConfig,
    pub(crate) access: Access,
    /// Built from `[dtp]`'s `trust` and `revocations`, like CAP's.
    pub(crate) verifier: Verifier,
}

/// `[terminal]` checked against the rest of the file: it needs
/// `[dtp] enabled = true` (sessions come from DTP's authenticated
/// connections), and an admin port off loopback needs a token (`token`,
/// read from `[admin] token_file`). `None`: no `[terminal]`.
pub(crate) fn plane_parts(
    config: &Config,
    token: Option<&str>,
) -> Result<Option<PlaneParts>, String> {
    let Some(section) = &config.terminal else {
        return Ok(None);
    };
    if !config.dtp.enabled {
        return Err(
            "terminal: the terminal control plane needs [dtp] enabled = true \
             (its sessions come from DTP's authenticated connections)"
                .to_owned(),
        );
    }
    if let Some(addr) = config.admin.listen
        && !addr.ip().is_loopback()
        && token.is_none()
    {
        return Err(format!(
            "admin.listen: {addr} is not a loopback address, and the /v1 admin endpoints \
             can end sessions and hand control over: set admin.token_file, or listen on 127.0.0.1"
        ));
    }
    let (plane, access) = section.plane()?;
    Ok(Some(PlaneParts {
        config: plane,
        access,
        verifier: config.dtp.verifier()?,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    const MINIMAL: &str = "[control]\nterminal_id = \"t\"\n";

    #[test]
    fn a_minimal_section_gets_the_engine_defaults_and_prints_them() {
        let s: TerminalSection = toml::from_str(MINIMAL).unwrap();
        let (plane, _) = s.plane().unwrap();
        assert_eq!(plane.model_workers, plane_defaults().model_workers);
        let text = toml::to_string_pretty(&s).unwrap();
        for key in [
            "heartbeat_interval_ms = 10000",
            "kind = \"noop\"",
            "admin_queue = 64",
        ] {
            assert!(text.contains(key), "{key} in\n{text}");
        }
        let again: TerminalSection = toml::from_str(&text).unwrap();
        assert_eq!(again.control, s.control);
    }

    #[test]
    fn command_access_reads_with_its_default_timeout_and_checks_placeholders() {
        let text = format!(
            "{MINIMAL}[os_access]\nkind = \"command\"\ngrant = [\"true\", \"{{fay_id}}\"]\nrevoke = [\"true\"]\n"
        );
        let s: TerminalSection = toml::from_str(&text).unwrap();
        let OsAccessSection::Command(c) = &s.os_access else {
            panic!("{s:?}");
        };
        assert_eq!(c.timeout_ms, 2000);
        let bad = text.replace("{fay_id}", "{nobody}");
        let s: TerminalSection = toml::from_str(&bad).unwrap();
        assert!(s.plane().err().unwrap().starts_with("terminal.os_access"));
        let unknown = format!("{text}surprise = 1\n");
        assert!(toml::from_str::<TerminalSection>(&unknown).is_err());
    }

    #[test]
    fn ceilings_and_references_name_their_key() {
        for (extra, key) in [
            ("model_workers = 0\n", "terminal.model_workers"),
            ("admin_queue = 100000\n", "terminal.admin_queue"),
        ] {
            let s: TerminalSection = toml::from_str(&format!("{extra}{MINIMAL}")).unwrap();
            assert!(s.plane().err().unwrap().starts_with(key), "{extra}");
        }
        let liveness = format!("{MINIMAL}[control.liveness]\nheartbeat_interval_ms = 10\n");
        let s: TerminalSection = toml::from_str(&liveness).unwrap();
        assert!(s.plane().err().unwrap().starts_with("terminal.control"));
        let script = format!(
            "{MINIMAL}[control.policies.p]\npolicy = {{ policy_type = \"priority_script\", script_id = \"nope\" }}\n"
        );
        let s: TerminalSection = toml::from_str(&script).unwrap();
        assert!(s.plane().err().unwrap().starts_with("terminal.policy"));
    }
}
