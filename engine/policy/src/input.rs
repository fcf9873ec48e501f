//! What a handover policy decides on and what it answers (SPEC HO-3, HO-3a).
//!
//! [`PolicyInput`] holds exactly the inputs HO-3a names — source session
//! info, the target Fay id, the target credential's grants, the current time
//! and the resource with its metadata — plus the handover reason and
//! metadata that the model request (HO-3b) and the human view (HO-3c) show.
//! It deliberately has no field for a credential signature, key id or any
//! other secret: a policy cannot leak what it was never given.

use std::collections::BTreeMap;

use dtp_codec::{AccessMode, SessionId};
use dtp_terminal::HandoverContext;
use serde::Serialize;

/// SPEC HO-9: the prefix of a `target_fay_id` that names the terminal's
/// human user (`"human:" + terminal_id`).
pub const HUMAN_PREFIX: &str = "human:";

/// SPEC HO-3a: everything a handover policy may look at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyInput {
    /// The session that holds control now.
    pub source: SourceSession,
    /// Who should take over (`human:<terminal_id>` for a person, HO-9).
    pub target_fay_id: String,
    /// What the target's (already verified) credential grants. Only the
    /// grants: never the signature, issuer key id or descriptor id.
    pub target_grants: Vec<TargetGrant>,
    /// The current time, Unix milliseconds, as the caller's clock read it.
    pub now_ms: u64,
    /// The resource whose control is handed over.
    pub resource: ResourceInfo,
    /// Why the handover was asked for (SessionTransferRequest.handover_reason).
    pub handover_reason: String,
    /// SessionTransferRequest.handover_metadata (empty when absent).
    pub handover_metadata: BTreeMap<String, String>,
}

impl PolicyInput {
    /// SPEC HO-9: whether the target is the terminal's human user.
    pub fn target_is_human(&self) -> bool {
        self.target_fay_id.starts_with(HUMAN_PREFIX)
    }
}

/// SPEC HO-3a: the policy's inputs, from the terminal's context (grants
/// only: no signature or key id is in either).
impl From<&HandoverContext> for PolicyInput {
    fn from(c: &HandoverContext) -> Self {
        Self {
            source: SourceSession {
                session_id: c.source.session_id,
                fay_id: c.source.fay_id.clone(),
                access_mode: c.source.access_mode,
                created_at_ms: c.source.created_at.0,
                last_heartbeat_ms: c.source.last_heartbeat_at.0,
                holder: if c.source.human {
                    Holder::Human
                } else {
                    Holder::Fay
                },
            },
            target_fay_id: c.target_fay_id.clone(),
            target_grants: c
                .target_grants
                .iter()
                .map(|g| TargetGrant {
                    resource_id: g.resource_id.clone(),
                    modes: g.modes.clone(),
                })
                .collect(),
            now_ms: c.now.0,
            resource: ResourceInfo {
                resource_id: c.resource.resource_id.clone(),
                metadata: c.resource.metadata.clone(),
            },
            handover_reason: c.reason.clone(),
            handover_metadata: c.metadata.clone(),
        }
    }
}

/// SPEC HO-3a: the source session's info (SPEC TS-6's recorded fields).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceSession {
    /// The terminal Session_ID (UUID v7).
    pub session_id: SessionId,
    /// The controller holding the session (`human:<terminal_id>` for a person).
    pub fay_id: String,
    /// How the session uses the resource.
    pub access_mode: AccessMode,
    /// When the session became active, Unix milliseconds.
    pub created_at_ms: u64,
    /// The last heartbeat received, Unix milliseconds.
    pub last_heartbeat_ms: u64,
    /// Whether a Fay or a person holds the session (SPEC HO-1, HO-9).
    pub holder: Holder,
}

/// SPEC HO-1, HO-9: the kind of controller that holds a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// An AI agent through its iFay_Runtime.
    Fay,
    /// The terminal's human user through an OS process.
    Human,
}

impl Holder {
    /// The name scripts and model requests see: `"fay"` or `"human"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fay => "fay",
            Self::Human => "human",
        }
    }
}

/// SPEC HO-3a: one grant of the target's credential (resource × modes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TargetGrant {
    /// The Resource_ID granted.
    pub resource_id: String,
    /// The access modes granted on it.
    pub modes: Vec<AccessMode>,
}

/// SPEC HO-3a: the resource and its configured metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    /// The Resource_ID.
    pub resource_id: String,
    /// Operator-configured metadata (e.g. `kind = "camera"`).
    pub metadata: BTreeMap<String, String>,
}

/// SPEC HO-3: a policy's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Verdict {
    /// The handover may go ahead (HO-2 step 4 follows).
    Allow,
    /// The handover is refused: E_HANDOVER_REJECTED_BY_POLICY with `reason`.
    Reject {
        /// Why, for the audit log and HandoverFailedNotification details.
        reason: String,
    },
    /// SPEC HO-3b: the model defers to a person (HO-3c).
    RequireHuman,
}

impl Verdict {
    /// A rejection with the given reason.
    pub fn reject(reason: impl Into<String>) -> Self {
        Self::Reject {
            reason: reason.into(),
        }
    }

    /// Whether the handover may go ahead.
    pub fn is_allow(&self) -> bool {
        matches!(self, Self::Allow)
    }
}

#[cfg(test)]
pub(crate) mod sample {
    //! A realistic input shared by the crate's unit tests.

    use super::*;

    /// Fay `fay-a` holds `cam-1` for writing; `fay-b` asks to take over.
    pub(crate) fn input() -> PolicyInput {
        PolicyInput {
            source: SourceSession {
                session_id: SessionId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001),
                fay_id: "fay-a".into(),
                access_mode: AccessMode::Write,
                created_at_ms: 1_700_000_000_000,
                last_heartbeat_ms: 1_700_000_050_000,
                holder: Holder::Fay,
            },
            target_fay_id: "fay-b".into(),
            target_grants: vec![TargetGrant {
                resource_id: "cam-1".into(),
                modes: vec![AccessMode::Read, AccessMode::Write],
            }],
            now_ms: 1_700_000_060_000,
            resource: ResourceInfo {
                resource_id: "cam-1".into(),
                metadata: BTreeMap::from([("kind".into(), "camera".into())]),
            },
            handover_reason: "operator shift change".into(),
            handover_metadata: BTreeMap::from([("ticket".into(), "T-17".into())]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_target_is_recognised_by_prefix() {
        let mut input = sample::input();
        assert!(!input.target_is_human());
        input.target_fay_id = "human:term-7".into();
        assert!(input.target_is_human());
    }

    #[test]
    fn verdict_serialises_with_decision_tag() {
        let json = serde_json::to_string(&Verdict::reject("no")).unwrap();
        assert_eq!(json, r#"{"decision":"reject","reason":"no"}"#);
        assert!(Verdict::Allow.is_allow());
        assert!(!Verdict::RequireHuman.is_allow());
    }
}
