//! The terminal's configuration (TOML or JSON through serde, unknown keys
//! refused) and its validation: every range the SPEC states is checked once,
//! at start-up, by [`TerminalConfig::validate`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::policy::{PolicyKind, PolicyRef};

/// The whole configuration of one terminal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalConfig {
    /// The terminal's id; its human user is `human:<terminal_id>` (SPEC HO-9).
    pub terminal_id: String,
    /// SPEC LIV-2, LIV-4.
    #[serde(default)]
    pub liveness: LivenessConfig,
    /// SPEC TS-17.
    #[serde(default)]
    pub limits: SessionLimits,
    /// SPEC HO-6, HO-8.
    #[serde(default)]
    pub handover: HandoverConfig,
    /// SPEC TS-8: the resources this terminal owns.
    #[serde(default)]
    pub resources: Vec<ResourceConfig>,
    /// SPEC HO-3: handover policies by name, referenced by resources.
    #[serde(default)]
    pub policies: BTreeMap<String, HandoverPolicyConfig>,
    /// SPEC TS-12: how long to wait before retrying an OS revoke that failed
    /// while a session was terminating (ms, default 1000).
    #[serde(default = "default_revoke_retry_ms")]
    pub revoke_retry_ms: u64,
    /// SPEC LIV-5: how many ended sessions are remembered, so that requests
    /// for them get E_SESSION_TERMINATED rather than E_SESSION_NOT_FOUND
    /// (oldest forgotten first; default 4096).
    #[serde(default = "default_tombstones")]
    pub tombstones: usize,
}

fn default_revoke_retry_ms() -> u64 {
    1_000
}

fn default_tombstones() -> usize {
    4_096
}

impl TerminalConfig {
    /// A configuration with defaults and no resources.
    pub fn new(terminal_id: impl Into<String>) -> Self {
        TerminalConfig {
            terminal_id: terminal_id.into(),
            liveness: LivenessConfig::default(),
            limits: SessionLimits::default(),
            handover: HandoverConfig::default(),
            resources: Vec::new(),
            policies: BTreeMap::new(),
            revoke_retry_ms: default_revoke_retry_ms(),
            tombstones: default_tombstones(),
        }
    }

    /// The id of the terminal's human user (SPEC HO-9).
    pub fn human_id(&self) -> String {
        format!("{HUMAN_PREFIX}{}", self.terminal_id)
    }

    /// Checks every SPEC range and every reference.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.terminal_id.is_empty() {
            return Err(ConfigError::EmptyTerminalId);
        }
        self.liveness.validate()?;
        self.limits.validate()?;
        self.handover.validate()?;
        if self.revoke_retry_ms == 0 {
            return Err(ConfigError::ZeroRevokeRetry);
        }
        for (name, p) in &self.policies {
            p.validate(name)?;
            if let Some(fallback) = &p.human_fallback {
                match self.policies.get(fallback) {
                    Some(f) if f.policy.kind() == PolicyKind::HumanDecision => {}
                    _ => return Err(ConfigError::BadHumanFallback(name.clone())),
                }
            }
        }
        let mut seen = BTreeSet::new();
        for r in &self.resources {
            if r.resource_id.is_empty() || !seen.insert(r.resource_id.as_str()) {
                return Err(ConfigError::DuplicateResource(r.resource_id.clone()));
            }
            if let Some(p) = &r.handover_policy
                && !self.policies.contains_key(p)
            {
                return Err(ConfigError::UnknownPolicy {
                    resource: r.resource_id.clone(),
                    policy: p.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The prefix of the human user's id (SPEC HO-9).
pub const HUMAN_PREFIX: &str = "human:";

/// SPEC LIV-2, LIV-4: heartbeat interval and timeout threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LivenessConfig {
    /// The interval runtimes beat at (1–60 s, default 10 s). Only checked
    /// here: the terminal never asks for beats, it judges their absence.
    pub heartbeat_interval_ms: u64,
    /// The threshold of the dual judgment (2×–6× the interval, default 30 s).
    pub heartbeat_timeout_ms: u64,
}

impl Default for LivenessConfig {
    fn default() -> Self {
        LivenessConfig {
            heartbeat_interval_ms: 10_000,
            heartbeat_timeout_ms: 30_000,
        }
    }
}

impl LivenessConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let i = self.heartbeat_interval_ms;
        if !(1_000..=60_000).contains(&i) {
            return Err(ConfigError::HeartbeatInterval(i));
        }
        let t = self.heartbeat_timeout_ms;
        if t < 2 * i || t > 6 * i {
            return Err(ConfigError::HeartbeatTimeout {
                timeout_ms: t,
                interval_ms: i,
            });
        }
        Ok(())
    }
}

/// SPEC TS-17: session limits (SHOULD; adjustable).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionLimits {
    /// Live sessions on the terminal (default 1024).
    pub per_terminal: usize,
    /// Live sessions of one Fay (default 64).
    pub per_fay: usize,
    /// Read sessions on one resource (default 32).
    pub reads_per_resource: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            per_terminal: 1024,
            per_fay: 64,
            reads_per_resource: 32,
        }
    }
}

impl SessionLimits {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.per_terminal == 0 || self.per_fay == 0 || self.reads_per_resource == 0 {
            return Err(ConfigError::ZeroLimit);
        }
        Ok(())
    }
}

/// SPEC HO-6: what happens to a handover request while another runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConcurrentHandovers {
    /// Queue FIFO up to `queue_capacity`, then E_HANDOVER_IN_PROGRESS.
    #[default]
    Queue,
    /// Refuse at once with E_HANDOVER_IN_PROGRESS.
    Reject,
}

/// SPEC HO-6, HO-8: handover serialisation and retry limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoverConfig {
    /// Queue or reject (default queue).
    pub concurrent: ConcurrentHandovers,
    /// Queue length per resource (1–8, default 8).
    pub queue_capacity: usize,
    /// Retries allowed per (source session, target Fay) pair after the
    /// first attempt (0–3, default 3).
    pub max_retries: u32,
    /// Least time between two attempts of one pair (ms, default 1000; 0
    /// disables the check).
    pub min_retry_interval_ms: u64,
}

impl Default for HandoverConfig {
    fn default() -> Self {
        HandoverConfig {
            concurrent: ConcurrentHandovers::Queue,
            queue_capacity: 8,
            max_retries: 3,
            min_retry_interval_ms: 1_000,
        }
    }
}

impl HandoverConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=8).contains(&self.queue_capacity) {
            return Err(ConfigError::QueueCapacity(self.queue_capacity));
        }
        if self.max_retries > 3 {
            return Err(ConfigError::MaxRetries(self.max_retries));
        }
        Ok(())
    }
}

/// SPEC TS-8, HO-3: one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    /// The Resource_ID.
    pub resource_id: String,
    /// Metadata shown to handover policies (HO-3a).
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The name of its handover policy; none: no handover is possible
    /// (requests get E_HANDOVER_REJECTED_BY_POLICY).
    #[serde(default)]
    pub handover_policy: Option<String>,
    /// Whether it is available at start (SPEC TS-10).
    #[serde(default = "default_true")]
    pub available: bool,
}

fn default_true() -> bool {
    true
}

impl ResourceConfig {
    /// An available resource with no metadata and no policy.
    pub fn new(resource_id: impl Into<String>) -> Self {
        ResourceConfig {
            resource_id: resource_id.into(),
            metadata: BTreeMap::new(),
            handover_policy: None,
            available: true,
        }
    }
}

/// SPEC HO-3, HO-7: a named policy and its hard timeout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoverPolicyConfig {
    /// The policy.
    pub policy: PolicyRef,
    /// SPEC HO-7: the handover's hard timeout (ms); default and range by
    /// kind: script 1000 (500–2000), model 1000 (500–3000), human 30000
    /// (5000–120000).
    #[serde(default)]
    pub hard_timeout_ms: Option<u64>,
    /// SPEC HO-1: whether another Fay's AuthRequest for the held resource
    /// starts a handover (default true); if false it gets E_RESOURCE_BUSY.
    #[serde(default = "default_true")]
    pub on_auth_request: bool,
    /// SPEC HO-3b: the human-decision policy asked when this policy answers
    /// `require_human`.
    #[serde(default)]
    pub human_fallback: Option<String>,
}

impl HandoverPolicyConfig {
    /// A policy with its kind's default hard timeout.
    pub fn new(policy: PolicyRef) -> Self {
        HandoverPolicyConfig {
            policy,
            hard_timeout_ms: None,
            on_auth_request: true,
            human_fallback: None,
        }
    }

    /// The hard timeout in effect (SPEC HO-7).
    pub fn hard_timeout(&self) -> u64 {
        self.hard_timeout_ms
            .unwrap_or(self.policy.kind().timeout_range_ms().0)
    }

    fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let kind = self.policy.kind();
        let t = self.hard_timeout();
        if !kind.timeout_range_ms().1.contains(&t) {
            return Err(ConfigError::HardTimeout {
                policy: name.to_owned(),
                kind,
                timeout_ms: t,
            });
        }
        let inner = match &self.policy {
            PolicyRef::AiModel {
                decision_timeout_ms,
                ..
            } => u64::from(*decision_timeout_ms),
            PolicyRef::HumanDecision {
                decision_timeout_seconds,
                ..
            } => u64::from(*decision_timeout_seconds) * 1000,
            PolicyRef::PriorityScript { .. } => 0,
        };
        if inner > t {
            return Err(ConfigError::DecisionOutlivesHardTimeout(name.to_owned()));
        }
        Ok(())
    }
}

/// Why a configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The terminal id is empty.
    #[error("terminal_id must not be empty")]
    EmptyTerminalId,
    /// SPEC LIV-2: interval outside 1–60 s.
    #[error("heartbeat_interval_ms {0} is outside 1000–60000 (SPEC LIV-2)")]
    HeartbeatInterval(u64),
    /// SPEC LIV-2: threshold outside 2×–6× the interval.
    #[error(
        "heartbeat_timeout_ms {timeout_ms} must be 2× to 6× heartbeat_interval_ms {interval_ms} (SPEC LIV-2)"
    )]
    HeartbeatTimeout {
        /// The threshold.
        timeout_ms: u64,
        /// The interval.
        interval_ms: u64,
    },
    /// A session limit is 0.
    #[error("session limits must be at least 1 (SPEC TS-17)")]
    ZeroLimit,
    /// SPEC HO-6: queue length outside 1–8.
    #[error("handover queue_capacity {0} is outside 1–8 (SPEC HO-6)")]
    QueueCapacity(usize),
    /// SPEC HO-8: more than 3 retries.
    #[error("handover max_retries {0} exceeds 3 (SPEC HO-8)")]
    MaxRetries(u32),
    /// The revoke retry interval is 0.
    #[error("revoke_retry_ms must be at least 1")]
    ZeroRevokeRetry,
    /// SPEC HO-7: hard timeout outside its kind's range.
    #[error(
        "policy {policy}: hard_timeout_ms {timeout_ms} is outside the {kind:?} range (SPEC HO-7)"
    )]
    HardTimeout {
        /// The policy's name.
        policy: String,
        /// Its kind.
        kind: PolicyKind,
        /// The timeout.
        timeout_ms: u64,
    },
    /// A model's or person's own timeout is longer than the hard timeout.
    #[error("policy {0}: its decision timeout exceeds its hard timeout (SPEC HO-7)")]
    DecisionOutlivesHardTimeout(String),
    /// A `human_fallback` does not name a human-decision policy.
    #[error("policy {0}: human_fallback must name a human_decision policy (SPEC HO-3b)")]
    BadHumanFallback(String),
    /// Two resources share an id, or one is empty.
    #[error("resource id {0:?} is empty or configured twice")]
    DuplicateResource(String),
    /// A resource names a policy that does not exist.
    #[error("resource {resource}: handover_policy {policy:?} is not configured")]
    UnknownPolicy {
        /// The resource.
        resource: String,
        /// The missing policy name.
        policy: String,
    },
}

#[cfg(test)]
mod tests;
