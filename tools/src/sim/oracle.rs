//! The simulated model and person (SPEC HO-3b, HO-3c), and the conversions
//! between the terminal's and `dtp_policy`'s forms (as the plane has them).

use std::io;

use dtp_policy::ai::http::{HttpError, HttpResponse};
use dtp_policy::{
    DecisionView, HandoverPolicy, HumanDecision, ModelCall, PolicyInput, PriorityScript, Step,
    Verdict,
};
use dtp_terminal::{HandoverContext, PolicyOutcome, PolicyRef};

use super::policy::{Event, Question};
use super::world::World;

impl World {
    pub(super) fn simulate_model(&mut self, q: Question, input: PolicyInput, call: ModelCall) {
        let now = self.now;
        let budget = u64::try_from(call.timeout.as_millis()).unwrap_or(500);
        let ok = |body: &str| {
            Ok(HttpResponse {
                status: 200,
                body: body.as_bytes().to_vec(),
            })
        };
        let r = self.rng.below(100);
        let (result, label, delay) = match r {
            0..22 => (ok(r#"{"decision":"allow"}"#), "policy.model.allow", None),
            22..36 => (
                ok(r#"{"decision":"reject","reason":"sim"}"#),
                "policy.model.reject",
                None,
            ),
            36..50 => (
                ok(r#"{"decision":"require_human"}"#),
                "policy.model.require_human",
                None,
            ),
            50..58 => (ok(r#"{"verdict":1}"#), "policy.model.garbage", None),
            58..66 => (
                Err(HttpError::Connect(io::ErrorKind::ConnectionRefused)),
                "policy.model.unavailable",
                Some(self.rng.range(1, 20)),
            ),
            66..72 => (
                Ok(HttpResponse {
                    status: 503,
                    body: Vec::new(),
                }),
                "policy.model.unavailable",
                None,
            ),
            72..84 => (
                Err(HttpError::Timeout),
                "policy.model.timeout",
                Some(budget),
            ),
            _ => {
                // No reply before the hard deadline: the terminal times the
                // handover out; the late answer must then be refused.
                let when = q.deadline.plus(self.rng.range(2, 2_000));
                self.policy.at(
                    when,
                    Event::Stale {
                        id: q.id,
                        label: "policy.model.late",
                    },
                );
                self.policy.calls.insert(q.id, (call, input));
                return;
            }
        };
        let delay = delay.unwrap_or_else(|| self.rng.range(1, budget));
        self.policy.calls.insert(q.id, (call, input));
        self.policy.at(
            now.plus(delay),
            Event::Model {
                id: q.id,
                result,
                label,
            },
        );
    }

    pub(super) fn simulate_human(&mut self, q: Question, input: &PolicyInput, h: &HumanDecision) {
        let now = self.now;
        let deadline = now.plus(h.timeout_ms()).min(q.deadline);
        let view = DecisionView::of(input);
        if let Err(e) = self
            .policy
            .humans
            .add(q.id, view, deadline.0, h.default_action)
        {
            let why = e.to_string();
            let answer = (
                q.id,
                PolicyOutcome::Reject { why },
                "policy.human.queue_full",
            );
            self.policy.answers.push_back(answer);
            return;
        }
        let window = deadline.since(now).max(2);
        let r = self.rng.below(100);
        let (allow, late) = match r {
            0..35 => (true, false),
            35..65 => (false, false),
            65..88 => return, // silence: the default action at the deadline
            _ => (true, true),
        };
        let when = if late {
            q.deadline.plus(self.rng.range(1, 5_000))
        } else {
            now.plus(self.rng.range(1, window))
        };
        self.policy.at(
            when,
            Event::Human {
                id: q.id,
                allow,
                late,
            },
        );
    }
}

/// The terminal's form of a verdict.
pub(super) fn outcome(v: Verdict) -> PolicyOutcome {
    match v {
        Verdict::Allow => PolicyOutcome::Allow,
        Verdict::Reject { reason } => PolicyOutcome::Reject { why: reason },
        Verdict::RequireHuman => PolicyOutcome::RequireHuman,
    }
}

/// The step after a model reply, as the terminal's answer (as the plane).
pub(super) fn after_model(step: Result<Step, dtp_policy::PolicyError>) -> PolicyOutcome {
    match step {
        Ok(Step::Decided(v)) => outcome(v),
        Ok(Step::AskHuman(_)) => PolicyOutcome::RequireHuman,
        Ok(Step::CallModel(_)) => PolicyOutcome::Reject {
            why: "the model reply asked for another model call".into(),
        },
        Err(e) => PolicyOutcome::Reject { why: e.to_string() },
    }
}

/// SPEC HO-3a: the policy's inputs, from the terminal's context.
pub(super) fn policy_input(c: &HandoverContext) -> PolicyInput {
    PolicyInput {
        source: dtp_policy::SourceSession {
            session_id: c.source.session_id,
            fay_id: c.source.fay_id.clone(),
            access_mode: c.source.access_mode,
            created_at_ms: c.source.created_at.0,
            last_heartbeat_ms: c.source.last_heartbeat_at.0,
            holder: if c.source.human {
                dtp_policy::Holder::Human
            } else {
                dtp_policy::Holder::Fay
            },
        },
        target_fay_id: c.target_fay_id.clone(),
        target_grants: c
            .target_grants
            .iter()
            .map(|g| dtp_policy::TargetGrant {
                resource_id: g.resource_id.clone(),
                modes: g.modes.clone(),
            })
            .collect(),
        now_ms: c.now.0,
        resource: dtp_policy::ResourceInfo {
            resource_id: c.resource.resource_id.clone(),
            metadata: c.resource.metadata.clone(),
        },
        handover_reason: c.reason.clone(),
        handover_metadata: c.metadata.clone(),
    }
}

/// The `dtp_policy` form of a terminal's policy reference.
pub(super) fn handover_policy(policy: &PolicyRef) -> HandoverPolicy {
    match policy {
        PolicyRef::PriorityScript {
            script_id,
            parameters,
        } => HandoverPolicy::PriorityScript(PriorityScript {
            script_id: script_id.clone(),
            parameters: parameters.clone(),
        }),
        PolicyRef::AiModel {
            model_endpoint,
            context_fields,
            decision_timeout_ms,
        } => HandoverPolicy::AiModel(dtp_policy::AiModel {
            model_endpoint: model_endpoint.clone(),
            context_fields: context_fields.clone(),
            decision_timeout_ms: *decision_timeout_ms,
        }),
        PolicyRef::HumanDecision {
            decision_timeout_seconds,
            default_action,
            ..
        } => HandoverPolicy::HumanDecision(HumanDecision {
            ui_channel: dtp_policy::UiChannel::ExternalPanel,
            decision_timeout_seconds: *decision_timeout_seconds,
            default_action: *default_action,
        }),
    }
}
