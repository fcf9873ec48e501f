//! [`PlaneConfig`]: the `[terminal]` section of `dtp serve` — the terminal
//! machine's settings (SPEC §2–3), the priority scripts behind its
//! policies (HO-3a), the audit log (TS-12, HO-10) and the plane's own
//! bounds — checked as a whole before anything starts.
//!
//! ```toml
//! [terminal]
//! model_workers = 2                 # HO-3b calls in flight at most
//! os_workers = 4                    # TS-4 OS operations running at most
//!
//! [terminal.control]                # dtp_terminal::TerminalConfig
//! terminal_id = "term-1"
//! [[terminal.control.resources]]
//! resource_id = "arm"
//! handover_policy = "seniority"
//! [terminal.control.policies.seniority]
//! policy = { policy_type = "priority_script", script_id = "seniority" }
//!
//! [terminal.policy.scripts]         # dtp_policy::PolicySet: scripts, ai_fallback
//! seniority = "#{ source: 1, target: 2 }"
//!
//! [terminal.audit]                  # optional
//! path = "/var/lib/dtp/audit.jsonl"
//! fsync = "every_record"            # every_record | interval | never
//! ```
//!
//! Handover policies are configured once, in `control.policies` (with their
//! HO-7 hard timeouts and `human_fallback`); the plane derives the
//! `dtp_policy` policies from them, so `policy.policies`,
//! `policy.resources` and `policy.default_policy` must stay empty.
//!
//! SPEC HO-3b: when a model answers `require_human`, the person asked is
//! the `ai_model` policy's own `human_fallback`; without one, it is
//! `policy.ai_fallback.human_decision`, which the plane adds to the
//! terminal's policies as [`AI_FALLBACK_HUMAN`] (its HO-7 hard timeout the
//! human kind's default, or the person's time if that is longer).

use std::num::{NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use dtp_audit::{AuditConfig, Fsync, Rotation};
use dtp_policy::{HandoverPolicy, PolicyEngine, PolicySet, ScriptLimits};
use dtp_terminal::{HandoverPolicyConfig, PolicyKind, PolicyRef, TerminalConfig};
use serde::Deserialize;

use super::PlaneError;

/// SPEC HO-3b: the name of the human-decision policy the plane adds for
/// `policy.ai_fallback.human_decision` (see the module).
pub const AI_FALLBACK_HUMAN: &str = "ai_fallback";

/// The terminal control plane's configuration (`serde`, unknown keys
/// refused); [`PlaneConfig::validate`] checks it whole.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlaneConfig {
    /// The terminal machine: its id, liveness, limits, handover rules,
    /// resources and named handover policies (SPEC §2–3, HO-3, HO-7).
    pub control: TerminalConfig,
    /// The priority scripts (`scripts`, HO-3a) and the model fallbacks
    /// (`ai_fallback`, HO-3b). Its `policies`, `resources` and
    /// `default_policy` must be empty: they come from `control`.
    #[serde(default)]
    pub policy: PolicySet,
    /// The audit log; none: records are dropped (SPEC audit is a MAY).
    #[serde(default)]
    pub audit: Option<AuditSection>,
    /// Worker threads for model calls (HO-3b), which is also how many may
    /// be in flight; a call beyond that counts as an unavailable model
    /// (priority-script fallback). 1–64, default 2.
    #[serde(default = "default_model_workers")]
    pub model_workers: usize,
    /// Worker threads for OS access operations of a deferred access
    /// control (SPEC TS-4: a `command` grant or revoke), with
    /// [`super::OS_QUEUE`] queued behind them; an operation beyond fails
    /// its step at once.
    /// 1–64, default 4.
    #[serde(default = "default_os_workers")]
    pub os_workers: usize,
    /// Human decisions pending at most (HO-3c); beyond, a handover asking
    /// for one is rejected. 1–4096, default 64.
    #[serde(default = "default_human_queue")]
    pub human_queue: usize,
    /// Session state changes kept for observers (oldest dropped and
    /// counted). 1–1048576, default 1024.
    #[serde(default = "default_state_changes")]
    pub state_changes: usize,
    /// Admin commands queued for the control thread at most (more are
    /// refused as busy). 1–4096, default 64.
    #[serde(default = "default_admin_queue")]
    pub admin_queue: usize,
}

fn default_model_workers() -> usize {
    2
}

fn default_os_workers() -> usize {
    4
}

fn default_human_queue() -> usize {
    64
}

fn default_state_changes() -> usize {
    1024
}

fn default_admin_queue() -> usize {
    64
}

/// SPEC TS-12, HO-10: where and how the audit log is written.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    /// The log file (JSON lines; created if missing).
    pub path: PathBuf,
    /// When records are synced to disk (default `every_record`).
    #[serde(default)]
    pub fsync: FsyncPolicy,
    /// Under `interval`: the longest a record stays unsynced (ms, ≥ 1,
    /// default 1000).
    #[serde(default = "default_fsync_interval_ms")]
    pub fsync_interval_ms: u64,
    /// Size-based rotation; none: the file grows.
    #[serde(default)]
    pub rotation: Option<RotationSection>,
}

fn default_fsync_interval_ms() -> u64 {
    1000
}

/// When the audit log syncs (see `dtp_audit`'s durability table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// After every record.
    #[default]
    EveryRecord,
    /// At most `fsync_interval_ms` after a record.
    Interval,
    /// Only when the plane stops.
    Never,
}

/// Rotation of the audit log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotationSection {
    /// The size a file may reach (bytes, ≥ 1).
    pub max_bytes: u64,
    /// Rotated files kept (≥ 1).
    pub keep: usize,
}

impl AuditSection {
    /// The writer's configuration.
    pub(crate) fn writer_config(&self) -> Result<AuditConfig, PlaneError> {
        let fsync = match self.fsync {
            FsyncPolicy::EveryRecord => Fsync::EveryRecord,
            FsyncPolicy::Never => Fsync::Never,
            FsyncPolicy::Interval if self.fsync_interval_ms == 0 => {
                return Err(config_error(
                    "audit.fsync_interval_ms",
                    "must be at least 1",
                ));
            }
            FsyncPolicy::Interval => Fsync::Interval(self.fsync_interval_ms),
        };
        let rotation = match self.rotation {
            None => None,
            Some(r) => Some(Rotation {
                max_bytes: NonZeroU64::new(r.max_bytes).ok_or_else(|| {
                    config_error("audit.rotation.max_bytes", "must be at least 1")
                })?,
                keep: NonZeroUsize::new(r.keep)
                    .ok_or_else(|| config_error("audit.rotation.keep", "must be at least 1"))?,
            }),
        };
        Ok(AuditConfig { fsync, rotation })
    }
}

impl PlaneConfig {
    /// A configuration with the plane's defaults, no scripts and no audit log.
    pub fn new(control: TerminalConfig) -> Self {
        PlaneConfig {
            control,
            policy: PolicySet::default(),
            audit: None,
            model_workers: default_model_workers(),
            os_workers: default_os_workers(),
            human_queue: default_human_queue(),
            state_changes: default_state_changes(),
            admin_queue: default_admin_queue(),
        }
    }

    /// Checks everything that can be checked without starting: the terminal
    /// machine's ranges and references, every script (compiled), every
    /// policy's script, model endpoint and fallback, the audit settings and
    /// the plane's bounds. The error names the key at fault.
    pub fn validate(&self) -> Result<(), PlaneError> {
        self.checked().map(|_| ())
    }

    /// [`PlaneConfig::validate`], keeping what it built: the terminal's
    /// configuration as it runs (with the model's human fallback, see the
    /// module), the policy engine and the audit writer's configuration.
    pub(crate) fn checked(
        &self,
    ) -> Result<(TerminalConfig, PolicyEngine, Option<AuditConfig>), PlaneError> {
        self.control
            .validate()
            .map_err(|e| config_error("control", e))?;
        let control = self.control_with_model_fallback()?;
        for (key, value, max) in [
            ("model_workers", self.model_workers, 64),
            ("os_workers", self.os_workers, 64),
            ("human_queue", self.human_queue, 4096),
            ("state_changes", self.state_changes, 1 << 20),
            ("admin_queue", self.admin_queue, 4096),
        ] {
            if !(1..=max).contains(&value) {
                return Err(config_error(key, format!("{value} is outside 1–{max}")));
            }
        }
        let audit = self
            .audit
            .as_ref()
            .map(AuditSection::writer_config)
            .transpose()?;
        let engine = self.policy_engine(&control)?;
        Ok((control, engine, audit))
    }

    /// SPEC HO-3b: `control` with every `ai_model` policy that has no
    /// `human_fallback` deferring `require_human` to
    /// `policy.ai_fallback.human_decision`, added as [`AI_FALLBACK_HUMAN`].
    fn control_with_model_fallback(&self) -> Result<TerminalConfig, PlaneError> {
        let mut control = self.control.clone();
        let Some(fallback) = &self.policy.ai_fallback else {
            // An ai_model policy without it is refused by the policy engine.
            return Ok(control);
        };
        let mut bare = control
            .policies
            .iter_mut()
            .filter(|(_, p)| p.policy.kind() == PolicyKind::AiModel && p.human_fallback.is_none())
            .map(|(_, p)| p)
            .peekable();
        if bare.peek().is_none() {
            return Ok(control);
        }
        for p in bare {
            p.human_fallback = Some(AI_FALLBACK_HUMAN.to_owned());
        }
        let h = &fallback.human_decision;
        let mut human = HandoverPolicyConfig::new(PolicyRef::HumanDecision {
            ui_channel: h.ui_channel,
            decision_timeout_seconds: h.decision_timeout_seconds,
            default_action: h.default_action,
        });
        human.hard_timeout_ms = Some(human.hard_timeout().max(h.timeout_ms()));
        if control
            .policies
            .insert(AI_FALLBACK_HUMAN.to_owned(), human)
            .is_some()
        {
            return Err(config_error(
                format!("control.policies.{AI_FALLBACK_HUMAN}"),
                "the name is the plane's for policy.ai_fallback.human_decision \
                 (an ai_model policy has no human_fallback)",
            ));
        }
        Ok(control)
    }

    /// SPEC HO-3: the policy engine of `control`'s policies, with the
    /// scripts and fallbacks of `policy`.
    fn policy_engine(&self, control: &TerminalConfig) -> Result<PolicyEngine, PlaneError> {
        let set = &self.policy;
        if let Some(name) = set.policies.keys().next() {
            return Err(config_error(
                format!("policy.policies.{name}"),
                "handover policies are configured once, in control.policies",
            ));
        }
        if let Some(resource) = set.resources.keys().next() {
            return Err(config_error(
                format!("policy.resources.{resource}"),
                "a resource's policy is its control.resources handover_policy",
            ));
        }
        if set.default_policy.is_some() {
            return Err(config_error(
                "policy.default_policy",
                "a resource without handover_policy refuses handovers (SPEC HO-3)",
            ));
        }
        let mut derived = set.clone();
        derived.policies = control
            .policies
            .iter()
            .map(|(name, p)| (name.clone(), HandoverPolicy::from(&p.policy)))
            .collect();
        // The wall clock measures each priority script's budget (10 ms: it
        // runs on this, the control thread).
        PolicyEngine::new(derived, ScriptLimits::default(), Arc::new(Instant::now))
            .map_err(|e| config_error("policy", e))
    }
}

fn config_error(key: impl std::fmt::Display, e: impl std::fmt::Display) -> PlaneError {
    PlaneError::Config(format!("{key}: {e}"))
}
