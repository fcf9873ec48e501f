//! Read-only views for observers and an admin surface (SPEC TS-14, HO-4):
//! sessions, resources with their occupancy and handovers. All serialise
//! to JSON.

use std::collections::BTreeMap;

use dtp_codec::{AccessMode, SessionId, SessionState};
use serde::Serialize;
use uuid::Uuid;

use super::handover::HandoverPhase;
use super::{Binding, Holder, SessionRecord, Terminal};
use crate::occupancy::Reconciliation;
use crate::os_access::OsAccess;
use crate::output::ConnKey;
use crate::policy::{HandoverKind, HandoverTrigger, PolicyKind};
use crate::session::is_controlling;
use crate::time::UnixMs;

/// One live session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The session.
    pub session_id: SessionId,
    /// Its holder (`human:<terminal_id>` for the human user).
    pub fay_id: String,
    /// Whether the human user holds it.
    pub human: bool,
    /// Its resource.
    pub resource_id: String,
    /// Its mode.
    pub access_mode: AccessMode,
    /// Its state.
    pub state: SessionState,
    /// Its connection, while up.
    pub conn: Option<ConnKey>,
    /// Since when its connection is down (SPEC LIV-4).
    pub conn_down_since: Option<UnixMs>,
    /// When it became active, Unix ms.
    pub created_at: UnixMs,
    /// Its last heartbeat, Unix ms.
    pub last_heartbeat_at: UnixMs,
}

/// One resource, its occupancy and its handovers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceInfo {
    /// The Resource_ID.
    pub resource_id: String,
    /// SPEC TS-10.
    pub available: bool,
    /// Its configured metadata.
    pub metadata: BTreeMap<String, String>,
    /// Its handover policy's name.
    pub handover_policy: Option<String>,
    /// SPEC TS-8: `(session, mode, state)` of every occupant.
    pub occupancy: Vec<(SessionId, AccessMode, SessionState)>,
    /// SPEC HO-4: the active controllers (at most one exclusive).
    pub controllers: Vec<SessionId>,
    /// The handover in progress.
    pub handover: Option<HandoverInfo>,
    /// SPEC HO-6: requests queued behind it.
    pub queued: usize,
    /// SPEC TS-4: OS operations with an unknown outcome; while any is
    /// listed the resource admits no new session.
    pub reconciliation: Vec<Reconciliation>,
}

/// A handover in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HandoverInfo {
    /// SPEC HO-4: deciding, or in an OS step.
    pub phase: HandoverPhase,
    /// The handover.
    pub handover_id: Uuid,
    /// The resource.
    pub resource_id: String,
    /// The source session.
    pub source_session_id: SessionId,
    /// The target.
    pub target_fay_id: String,
    /// Who hands to whom.
    pub kind: HandoverKind,
    /// What started it.
    pub trigger: HandoverTrigger,
    /// The policy asked.
    pub policy: String,
    /// Its kind.
    pub policy_kind: PolicyKind,
    /// When the evaluation started, Unix ms.
    pub started_at: UnixMs,
    /// SPEC HO-7: the hard deadline, Unix ms.
    pub deadline: UnixMs,
}

impl<A: OsAccess> Terminal<A> {
    /// Every live session, oldest first (ids are UUID v7).
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.sessions.values().map(session_info).collect()
    }

    /// One live session.
    pub fn session(&self, id: SessionId) -> Option<SessionInfo> {
        self.sessions.get(&id).map(session_info)
    }

    /// Every resource.
    pub fn resources(&self) -> Vec<ResourceInfo> {
        self.resources
            .keys()
            .filter_map(|r| self.state_of(r))
            .collect()
    }

    /// SPEC HO-4: what an observer sees of one resource now.
    pub fn state_of(&self, resource_id: &str) -> Option<ResourceInfo> {
        let r = self.resources.get(resource_id)?;
        let occupancy = r
            .occupants()
            .iter()
            .filter_map(|(id, mode)| self.sessions.get(id).map(|s| (*id, *mode, s.state)))
            .collect();
        Some(ResourceInfo {
            resource_id: resource_id.to_owned(),
            available: r.is_available(),
            metadata: r.config().metadata.clone(),
            handover_policy: r.config().handover_policy.clone(),
            occupancy,
            controllers: self.active_controllers(resource_id),
            handover: self.handover_info(resource_id),
            queued: self.queues.get(resource_id).map_or(0, |q| q.len()),
            reconciliation: r.reconciliation().cloned().collect(),
        })
    }

    /// SPEC HO-4: the sessions controlling `resource_id` (active or
    /// handover_pending).
    pub fn active_controllers(&self, resource_id: &str) -> Vec<SessionId> {
        self.sessions
            .values()
            .filter(|s| *s.resource_id == *resource_id && is_controlling(s.state))
            .map(|s| s.id)
            .collect()
    }

    /// Every handover in progress (deciding or in its OS steps).
    pub fn pending_handovers(&self) -> Vec<HandoverInfo> {
        self.evaluations
            .keys()
            .filter_map(|r| self.handover_info(r))
            .collect()
    }

    fn handover_info(&self, resource_id: &str) -> Option<HandoverInfo> {
        let e = self.evaluations.get(resource_id)?;
        Some(HandoverInfo {
            phase: e.phase,
            handover_id: e.id,
            resource_id: e.resource_id.clone(),
            source_session_id: e.request.source,
            target_fay_id: e.request.target_fay_id.clone(),
            kind: e.kind,
            trigger: e.request.origin.trigger(),
            policy: e.policy_name.clone(),
            policy_kind: e.policy.kind(),
            started_at: e.started_at,
            deadline: e.deadline,
        })
    }
}

fn session_info(s: &SessionRecord) -> SessionInfo {
    SessionInfo {
        session_id: s.id,
        fay_id: s.holder.id().to_owned(),
        human: matches!(s.holder, Holder::Human(_)),
        resource_id: s.resource_id.to_string(),
        access_mode: s.mode,
        state: s.state,
        conn: s.conn(),
        conn_down_since: match s.binding {
            Binding::Detached(t) => Some(t),
            _ => None,
        },
        created_at: s.created_at,
        last_heartbeat_at: s.last_heartbeat_at,
    }
}
