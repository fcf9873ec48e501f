//! SPEC HO-2 steps 1–3: validating a handover's source and target, and
//! asking the resource's policy.

use dtp_codec::{ErrorCode, SessionState};
use uuid::Uuid;

use super::handover::{Evaluation, HandoverRequest, Origin};
use super::{Holder, Terminal};
use crate::config::HUMAN_PREFIX;
use crate::os_access::OsAccess;
use crate::output::{Output, Refusal};
use crate::policy::{GrantInfo, HandoverContext, HandoverKind, ResourceMeta, SourceInfo};
use crate::time::{UnixMs, handover_id};

impl<A: OsAccess> Terminal<A> {
    /// SPEC HO-2 steps 1–3: validate the source and the target, then ask the
    /// resource's policy ([`Output::EvaluatePolicy`]).
    pub(crate) fn evaluate(&mut self, req: HandoverRequest, now: UnixMs) -> Result<Uuid, Refusal> {
        let refuse =
            |code, m: String| Refusal::new(req.origin.request_kind(), Some(req.source), code, m);
        let Some(src) = self.sessions.get(&req.source) else {
            return Err(self.missing_source(&req));
        };
        // Step 1: an active source, and an initiator that may ask.
        if src.state != SessionState::Active {
            return Err(refuse(
                ErrorCode::E_HANDOVER_INVALID_SOURCE,
                format!("the source session is {} (SPEC HO-2 (1))", src.state.name()),
            ));
        }
        if let Origin::Transfer { conn } = req.origin
            && !self.may_act(conn, src.holder.id(), src.conn())
        {
            return Err(refuse(
                ErrorCode::E_HANDOVER_INVALID_SOURCE,
                "the initiator may not hand this session over (SPEC HO-2 (1))".into(),
            ));
        }
        let (resource_id, mode) = (src.resource_id.to_string(), src.mode);
        let source_human = matches!(src.holder, Holder::Human(_));
        let source = SourceInfo {
            session_id: src.id,
            fay_id: src.holder.id().to_owned(),
            access_mode: mode,
            created_at: src.created_at,
            last_heartbeat_at: src.last_heartbeat_at,
            human: source_human,
        };
        let source_conn = src.conn();
        // Step 2: a valid, authorised target (skipped for the human, HO-9).
        let target_human = req.target_fay_id.starts_with(HUMAN_PREFIX);
        let invalid = |m: String| refuse(ErrorCode::E_HANDOVER_INVALID_TARGET, m);
        if target_human && req.target_fay_id != self.config.human_id() {
            return Err(invalid("not this terminal's human user (SPEC HO-9)".into()));
        }
        if req.target_fay_id == source.fay_id {
            return Err(invalid("the target already holds the session".into()));
        }
        let target = if target_human {
            None
        } else {
            let cred = self
                .signatures
                .verify_bytes(&self.verifier, &req.target_credential, now.secs())
                .map_err(|e| invalid(format!("target credential: {e}")))?;
            if cred.fay_id() != req.target_fay_id {
                return Err(invalid(format!("the credential names {:?}", cred.fay_id())));
            }
            if !cred.permits(&resource_id, mode) {
                return Err(invalid(format!(
                    "the target may not use {resource_id:?} in {} (SPEC HO-2 (2))",
                    mode.name()
                )));
            }
            Some(cred)
        };
        let mine = self
            .sessions
            .values()
            .filter(|s| s.holder.id() == req.target_fay_id);
        if mine.count() >= self.config.limits.per_fay {
            return Err(refuse(
                ErrorCode::E_SESSION_LIMIT_EXCEEDED,
                "the target has too many sessions (SPEC TS-17)".into(),
            ));
        }
        // Step 3: the resource's policy.
        let resource = self.resources.get(resource_id.as_str());
        let named = resource.and_then(|r| r.config().handover_policy.clone());
        let Some((policy_name, cfg)) =
            named.and_then(|n| self.config.policies.get(&n).cloned().map(|c| (n, c)))
        else {
            return Err(refuse(
                ErrorCode::E_HANDOVER_REJECTED_BY_POLICY,
                "the resource has no handover policy (SPEC HO-3)".into(),
            ));
        };
        let id = handover_id(self.random.as_mut());
        let kind = match (source_human, target_human) {
            (true, _) => HandoverKind::HumanToFay,
            (false, true) => HandoverKind::FayToHuman,
            (false, false) => HandoverKind::FayToFay,
        };
        let target_conn = match &req.origin {
            Origin::Auth { conn, .. } => Some(*conn),
            _ => self.last_conn_of.get(req.target_fay_id.as_str()).copied(),
        };
        let context = Box::new(HandoverContext {
            source,
            target_fay_id: req.target_fay_id.clone(),
            target_human,
            target_grants: target.as_ref().map_or_else(Vec::new, |c| {
                c.grants()
                    .iter()
                    .map(|g| GrantInfo {
                        resource_id: g.resource_id.clone(),
                        modes: g.modes.iter().collect(),
                    })
                    .collect()
            }),
            now,
            resource: ResourceMeta {
                resource_id: resource_id.clone(),
                metadata: resource
                    .map(|r| r.config().metadata.clone())
                    .unwrap_or_default(),
            },
            kind,
            trigger: req.origin.trigger(),
            reason: req.reason.clone(),
            metadata: req.metadata.clone(),
        });
        let ev = Evaluation {
            phase: super::handover::HandoverPhase::Deciding,
            id,
            kind,
            resource_id: resource_id.clone(),
            mode,
            source_fay: context.source.fay_id.clone(),
            source_conn,
            target,
            target_conn,
            policy_name,
            deadline: now.plus(cfg.hard_timeout()),
            policy: cfg.policy,
            context,
            started_at: now,
            decisions: Vec::new(),
            request: req,
        };
        self.ask_policy(&ev);
        self.evaluations.insert(resource_id, ev);
        Ok(id)
    }

    pub(crate) fn ask_policy(&mut self, ev: &Evaluation) {
        self.out.push_back(Output::EvaluatePolicy {
            handover_id: ev.id,
            policy_name: ev.policy_name.clone(),
            policy: ev.policy.clone(),
            deadline: ev.deadline,
            context: ev.context.clone(),
        });
    }
}
