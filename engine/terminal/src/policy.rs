//! SPEC HO-3, HO-7: what the terminal knows of handover policies — their
//! configured references, the context a decision is asked with, and the
//! answer. Running a policy (script, model call, human dialog) is another
//! crate's job; the terminal only asks ([`crate::Output::EvaluatePolicy`])
//! and is told ([`crate::Terminal::policy_decided`]).

use std::collections::BTreeMap;

use dtp_codec::{AccessMode, SessionId};
use serde::{Deserialize, Serialize};

use crate::time::UnixMs;

/// SPEC HO-3: one configured handover policy, by kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy_type", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyRef {
    /// SPEC HO-3a: a priority script preconfigured on the terminal.
    PriorityScript {
        /// The script's identifier.
        script_id: String,
        /// Its parameters.
        #[serde(default)]
        parameters: BTreeMap<String, String>,
    },
    /// SPEC HO-3b: an AI model asked in real time.
    AiModel {
        /// The model's inference endpoint.
        model_endpoint: String,
        /// Which context fields the model may see.
        #[serde(default)]
        context_fields: Vec<String>,
        /// The model's own timeout (default 500 ms).
        #[serde(default = "default_ai_decision_ms")]
        decision_timeout_ms: u32,
    },
    /// SPEC HO-3c: a person decides.
    HumanDecision {
        /// Where the question is shown.
        ui_channel: UiChannel,
        /// How long the person has (default 30 s).
        #[serde(default = "default_human_decision_s")]
        decision_timeout_seconds: u32,
        /// What happens when the person does not answer (HO-3c recommends
        /// reject).
        #[serde(default)]
        default_action: DefaultAction,
    },
}

fn default_ai_decision_ms() -> u32 {
    500
}

fn default_human_decision_s() -> u32 {
    30
}

impl PolicyRef {
    /// The policy's kind (SPEC HO-7's timeouts depend on it).
    pub fn kind(&self) -> PolicyKind {
        match self {
            Self::PriorityScript { .. } => PolicyKind::PriorityScript,
            Self::AiModel { .. } => PolicyKind::AiModel,
            Self::HumanDecision { .. } => PolicyKind::HumanDecision,
        }
    }
}

/// SPEC HO-3: the three policy kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// HO-3a.
    PriorityScript,
    /// HO-3b.
    AiModel,
    /// HO-3c.
    HumanDecision,
}

impl PolicyKind {
    /// SPEC HO-7: the hard timeout's default and allowed range, in ms.
    pub fn timeout_range_ms(self) -> (u64, std::ops::RangeInclusive<u64>) {
        match self {
            Self::PriorityScript => (1_000, 500..=2_000),
            Self::AiModel => (1_000, 500..=3_000),
            Self::HumanDecision => (30_000, 5_000..=120_000),
        }
    }
}

/// SPEC HO-3c: where a human decision is asked. The one definition: the
/// policy crate (`dtp_policy`) re-exports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UiChannel {
    /// A dialog of the terminal's own desktop session.
    SystemDialog,
    /// The terminal owner's companion app.
    CompanionApp,
    /// An external panel (the admin HTTP surface's pending decisions).
    ExternalPanel,
}

/// SPEC HO-3c: what an unanswered human decision becomes. The one
/// definition: the policy crate (`dtp_policy`) re-exports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DefaultAction {
    /// Allow the handover.
    Allow,
    /// Refuse it (the seed's recommendation, and the default).
    #[default]
    Reject,
}

/// SPEC HO-3: a policy's answer, given to [`crate::Terminal::policy_decided`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PolicyOutcome {
    /// The handover may go ahead (HO-3a: S_target > S_source).
    Allow {
        /// Why, when there is more to say than the policy's name (a model
        /// that could not decide, so its fallback script allowed): for
        /// the audit log.
        why: Option<String>,
    },
    /// The handover is refused.
    Reject {
        /// Why, for people and the audit log.
        why: String,
    },
    /// SPEC HO-3b: the model defers to a person; the terminal asks the
    /// resource policy's `human_fallback`, or refuses when none is set.
    RequireHuman,
}

impl PolicyOutcome {
    /// An allow with nothing more to say.
    pub fn allow() -> Self {
        Self::Allow { why: None }
    }
}

/// SPEC HO-1, HO-9: who hands control to whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoverKind {
    /// Fay → Fay.
    FayToFay,
    /// Fay → the terminal's human user.
    FayToHuman,
    /// The human user → a Fay.
    HumanToFay,
}

/// SPEC HO-1: what started a handover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoverTrigger {
    /// Another Fay's AuthRequest for the held resource.
    AuthRequest,
    /// The holder's SessionTransferRequest.
    TransferRequest,
    /// An administrator or the human user.
    Admin,
}

/// SPEC HO-3a: the source session as a policy sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceInfo {
    /// The session handing over.
    pub session_id: SessionId,
    /// Its holder (`human:<terminal_id>` for the human user).
    pub fay_id: String,
    /// Its access mode (the target gets the same).
    pub access_mode: AccessMode,
    /// When it became active, Unix ms.
    pub created_at: UnixMs,
    /// Its last heartbeat, Unix ms.
    pub last_heartbeat_at: UnixMs,
    /// Whether the human user holds it (SPEC HO-9).
    pub human: bool,
}

/// SPEC HO-3a: one grant of the target's credential (no signature, no key
/// id: HO-3c's "never show credential secrets" holds for every policy).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrantInfo {
    /// The resource.
    pub resource_id: String,
    /// The modes granted on it.
    pub modes: Vec<AccessMode>,
}

/// SPEC HO-3a: the resource as a policy sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceMeta {
    /// The Resource_ID.
    pub resource_id: String,
    /// Its configured metadata.
    pub metadata: BTreeMap<String, String>,
}

/// SPEC HO-3a: exactly the inputs a policy decides on — source session info,
/// target Fay id, the target credential's grants, the current time and the
/// resource's metadata — plus the request's reason and metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HandoverContext {
    /// The source session.
    pub source: SourceInfo,
    /// The target (`human:<terminal_id>` for the human user).
    pub target_fay_id: String,
    /// Whether the target is the human user (grants are then empty: HO-9
    /// skips target authorisation).
    pub target_human: bool,
    /// The target credential's grants.
    pub target_grants: Vec<GrantInfo>,
    /// When the decision was asked, Unix ms.
    pub now: UnixMs,
    /// The resource.
    pub resource: ResourceMeta,
    /// Who hands to whom.
    pub kind: HandoverKind,
    /// What started it.
    pub trigger: HandoverTrigger,
    /// The request's `handover_reason`.
    pub reason: String,
    /// The request's `handover_metadata`.
    pub metadata: BTreeMap<String, String>,
}
