//! SPEC TS-12, TS-14, HO-10: the records the terminal hands to the audit log
//! (as [`crate::Output::Audit`]); writing them is the driver's job. Every
//! record serialises to one flat JSON object tagged by `record`.

use std::sync::Arc;

use dtp_codec::{AccessMode, ErrorCode, HandoverFailedReason, SessionId};
use serde::{Serialize, Serializer};
use uuid::Uuid;

use crate::os_access::OsOperation;
use crate::policy::{HandoverKind, HandoverTrigger, PolicyKind};
use crate::session::TerminationReason;
use crate::time::UnixMs;

/// One audit record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum AuditRecord {
    /// SPEC TS-12 step 6: a session ended.
    SessionTerminated(SessionAudit),
    /// SPEC HO-10: a handover ended, either way.
    Handover(HandoverAudit),
    /// SPEC TS-4: a resource was marked for reconciliation, or cleared.
    Reconciliation(ReconciliationAudit),
}

/// SPEC TS-4: what happened to a reconciliation mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconciliationEvent {
    /// An OS operation's outcome is unknown: the resource takes no new
    /// session.
    Marked,
    /// A later revoke of the same grant succeeded.
    ClearedByRevoke,
    /// An operator cleared it.
    ClearedByOperator,
}

/// SPEC TS-4: a reconciliation mark set or cleared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReconciliationAudit {
    /// The resource.
    pub resource_id: String,
    /// The session whose grant the operation was for.
    pub session_id: SessionId,
    /// Its holder.
    pub holder: String,
    /// The operation whose outcome was unknown.
    pub operation: OsOperation,
    /// Set or cleared, and by whom.
    pub event: ReconciliationEvent,
    /// Why.
    pub message: String,
    /// When, Unix ms.
    pub at: UnixMs,
}

/// SPEC TS-12: a session's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionAudit {
    /// The session.
    pub session_id: SessionId,
    /// Its holder (`human:<terminal_id>` for the human user), shared with
    /// the session's record.
    pub fay_id: Arc<str>,
    /// Its resource, shared likewise.
    pub resource_id: Arc<str>,
    /// Its mode.
    pub access_mode: AccessMode,
    /// Why it ended.
    pub reason: TerminationReason,
    /// When it was created, Unix ms.
    pub created_at: UnixMs,
    /// When it reached terminated, Unix ms.
    pub terminated_at: UnixMs,
    /// The fencing token of its grant, when the OS access control issues
    /// one ([`crate::OsAccess::fencing`]: across gateways, the etcd
    /// revision that admitted it). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fencing: Option<u64>,
    /// When it last stopped being active (SPEC HO-4: its controlling span
    /// is `created_at` to this), Unix ms; absent when it never was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_until: Option<UnixMs>,
}

/// SPEC HO-10: a handover's full record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HandoverAudit {
    /// The handover (UUID v4).
    pub handover_id: Uuid,
    /// Who handed to whom.
    pub kind: HandoverKind,
    /// What started it.
    pub trigger: HandoverTrigger,
    /// The source session.
    pub source_session_id: SessionId,
    /// Its holder.
    pub source_fay_id: String,
    /// The target.
    pub target_fay_id: String,
    /// The session created for the target, on success.
    pub target_session_id: Option<SessionId>,
    /// The resource.
    pub resource_id: String,
    /// The access mode handed over.
    pub access_mode: AccessMode,
    /// The policy's configured name (a request refused before its policy was
    /// asked — HO-2 steps 1–2 — is not a handover and gets no record).
    pub policy: String,
    /// SPEC HO-10: every policy decision, in order.
    pub decisions: Vec<PolicyDecision>,
    /// The result.
    pub outcome: HandoverOutcome,
    /// When the evaluation started, Unix ms.
    pub started_at: UnixMs,
    /// When it ended, Unix ms.
    pub finished_at: UnixMs,
}

/// One policy's answer, as audited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PolicyDecision {
    /// The policy's name.
    pub policy: String,
    /// Its kind.
    pub kind: PolicyKind,
    /// `allow`, `reject`, `require_human` or `timeout`.
    pub decision: &'static str,
    /// The policy's reason, if it gave one.
    pub why: Option<String>,
    /// When, Unix ms.
    pub at: UnixMs,
}

/// How a handover ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum HandoverOutcome {
    /// The target holds the resource (HO-4 T5 reached).
    Succeeded,
    /// It failed.
    Failed {
        /// The E_* code the requester got.
        #[serde(serialize_with = "code_name")]
        code: ErrorCode,
        /// The HandoverFailedNotification reason, when one was sent.
        notification: Option<HandoverFailedReason>,
        /// Why, for people.
        message: String,
    },
}

fn code_name<S: Serializer>(code: &ErrorCode, s: S) -> Result<S::Ok, S::Error> {
    match code.name() {
        Some(name) => s.serialize_str(name),
        None => s.serialize_u16(code.0),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn records_serialise_flat_with_names() {
        let r = AuditRecord::SessionTerminated(SessionAudit {
            session_id: SessionId::from_u128(1),
            fay_id: "fay-a".into(),
            resource_id: "cam".into(),
            access_mode: AccessMode::Write,
            reason: TerminationReason::LivenessTimeout,
            created_at: UnixMs(5),
            terminated_at: UnixMs(9),
            fencing: None,
            active_until: Some(UnixMs(8)),
        });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["record"], "session_terminated");
        assert_eq!(v["reason"], "liveness_timeout");
        assert_eq!(v["access_mode"], "write");
        assert_eq!(v["terminated_at"], 9);

        let o = HandoverOutcome::Failed {
            code: ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE,
            notification: Some(HandoverFailedReason::AcquireFailed),
            message: "m".into(),
        };
        let v = serde_json::to_value(&o).unwrap();
        assert_eq!(v["result"], "failed");
        assert_eq!(v["code"], "E_HANDOVER_FAILED_AT_ACQUIRE");
        assert_eq!(v["notification"], "acquire_failed");
        let unknown = HandoverOutcome::Failed {
            code: ErrorCode(65000),
            notification: None,
            message: String::new(),
        };
        assert_eq!(serde_json::to_value(&unknown).unwrap()["code"], 65000);
    }
}
