//! The simulated model and person (SPEC HO-3b, HO-3c), and the conversions
//! between the terminal's and `dtp_policy`'s forms (as the plane has them).

use std::io;

use dtp_policy::ai::http::{HttpError, HttpResponse};
use dtp_policy::{DecisionView, HandoverPolicy, HumanDecision, ModelCall, PolicyInput};
use dtp_terminal::{PolicyOutcome, PolicyRef};

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

/// The `dtp_policy` form of a terminal's policy reference, as the gateway
/// makes it, but for a person's decision always on the external panel: the
/// simulator's people answer there.
pub(super) fn handover_policy(policy: &PolicyRef) -> HandoverPolicy {
    match HandoverPolicy::from(policy) {
        HandoverPolicy::HumanDecision(h) => HandoverPolicy::HumanDecision(HumanDecision {
            ui_channel: dtp_policy::UiChannel::ExternalPanel,
            ..h
        }),
        other => other,
    }
}
