//! SPEC HO-3: answering the terminal's policy questions as `dtp serve`'s
//! plane does (engine/src/plane/policy.rs), with the model and the person
//! simulated:
//!
//! - priority scripts run for real (Rhai, through [`PolicyEngine`]);
//! - a model call gets a simulated reply — allow, reject, require_human,
//!   garbage, down, 5xx, timeout — fed to [`PolicyEngine::on_model_reply`],
//!   so the classification, the ≤ 5 s cache and the script fallback are
//!   the real ones; or no reply before the hard deadline (late);
//! - a person is asked on a real [`PendingDecisions`] queue and allows,
//!   rejects, stays silent (→ the default action at the deadline) or
//!   answers too late.
//!
//! Before an `allow` reaches the terminal, a failure may be injected into
//! the handover it starts (see [`super::world`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use dtp_policy::ai::http::{HttpError, HttpResponse};
use dtp_policy::{
    AiFallback, HumanChoice, HumanDecision, ModelCall, PendingDecisions, PolicyEngine, PolicyInput,
    PolicySet, PriorityScript, ScriptLimits, Step, Verdict,
};
use dtp_terminal::{HandoverContext, PolicyKind, PolicyOutcome, TerminalConfig, UnixMs};
use uuid::Uuid;

use super::notify::{Ctx, PolicyEvent};
use super::oracle::handover_policy;
use super::world::World;

/// SPEC HO-3a: the scripts. `rank`: the higher Fay number wins (the human
/// user ranks 5). `seniority`: a holder keeps the resource for `hold_s`.
const SCRIPTS: [(&str, &str); 2] = [
    (
        "rank",
        r#"
fn rank(id) { if id.starts_with("human:") { 5 } else { parse_int(id.sub_string(4)) } }
#{ source: rank(input.source.fay_id), target: rank(input.target.fay_id) }
"#,
    ),
    (
        "seniority",
        r#"
let age_s = (input.now_ms - input.source.created_at_ms) / 1000;
#{ source: parse_int(params.hold_s), target: age_s }
"#,
    ),
];

/// One question of the terminal ([`dtp_terminal::Output::EvaluatePolicy`]).
#[derive(Clone, Debug)]
pub(super) struct Question {
    pub(super) id: Uuid,
    pub(super) policy_name: String,
    pub(super) kind: PolicyKind,
    pub(super) deadline: UnixMs,
    pub(super) context: Box<HandoverContext>,
}

/// Something the simulated world does later.
#[derive(Clone, Debug)]
pub(super) enum Event {
    /// A model call comes back.
    Model {
        id: Uuid,
        result: Result<HttpResponse, HttpError>,
        label: &'static str,
    },
    /// The person answers (`late`: after the deadline, on purpose).
    Human { id: Uuid, allow: bool, late: bool },
    /// An answer sent to the terminal after the handover's hard deadline.
    Stale { id: Uuid, label: &'static str },
}

/// The policy side of the simulated plane.
pub(super) struct PolicySide {
    engine: PolicyEngine,
    pub(super) humans: PendingDecisions,
    /// Model calls in flight: what their reply is judged on.
    pub(super) calls: BTreeMap<Uuid, (ModelCall, PolicyInput)>,
    events: BTreeMap<(UnixMs, u64), Event>,
    seq: u64,
    /// Answers to give the terminal, in order, with what they count as.
    pub(super) answers: VecDeque<(Uuid, PolicyOutcome, &'static str)>,
}

impl PolicySide {
    /// The policy engine for `config`'s policies, as the plane derives it.
    pub(super) fn new(config: &TerminalConfig) -> Result<Self, String> {
        let mut set = PolicySet::default();
        for (id, src) in SCRIPTS {
            set.scripts.insert(id.into(), src.into());
        }
        for (name, p) in &config.policies {
            set.policies
                .insert(name.clone(), handover_policy(&p.policy));
        }
        set.ai_fallback = Some(AiFallback {
            priority_script: PriorityScript {
                script_id: "rank".into(),
                parameters: BTreeMap::new(),
            },
            human_decision: HumanDecision {
                ui_channel: dtp_policy::UiChannel::ExternalPanel,
                decision_timeout_seconds: 10,
                default_action: dtp_policy::DefaultAction::Reject,
            },
        });
        // The wall clock measures each script's budget, as in `dtp serve`.
        let engine = PolicyEngine::new(set, ScriptLimits::default(), Arc::new(Instant::now))
            .map_err(|e| e.to_string())?;
        Ok(PolicySide {
            engine,
            humans: PendingDecisions::new(64),
            calls: BTreeMap::new(),
            events: BTreeMap::new(),
            seq: 0,
            answers: VecDeque::new(),
        })
    }

    /// The earliest instant something of the policy side falls due.
    pub(super) fn next_due(&self) -> Option<UnixMs> {
        let event = self.events.keys().next().map(|(t, _)| *t);
        let human = self.humans.next_deadline().map(UnixMs);
        [event, human].into_iter().flatten().min()
    }

    /// The terminal no longer needs an answer for `id`.
    pub(super) fn cancel(&mut self, id: Uuid) {
        self.calls.remove(&id);
        self.humans.withdraw(id);
        self.answers.retain(|(a, _, _)| *a != id);
    }

    pub(super) fn at(&mut self, when: UnixMs, event: Event) {
        self.seq += 1;
        self.events.insert((when, self.seq), event);
    }
}

impl World {
    /// Answers the terminal's questions and delivers every answer due now,
    /// until nothing is left to do at this instant.
    pub(super) fn settle(&mut self) {
        for _ in 0..10_000 {
            for event in std::mem::take(&mut self.watch.policy_events) {
                match event {
                    PolicyEvent::Ask(q) => self.ask(q),
                    PolicyEvent::Cancel(id) => self.policy.cancel(id),
                }
            }
            match self.policy.answers.pop_front() {
                Some((id, outcome, label)) => self.deliver(id, outcome, label, false),
                None if self.watch.policy_events.is_empty() => return,
                None => {}
            }
        }
        self.violation("the policy side did not settle within 10,000 rounds".into());
    }

    /// Runs the model replies and human answers due now, and the human
    /// deadlines passed (default actions).
    pub(super) fn run_due_policy_events(&mut self) {
        let now = self.now;
        while let Some(entry) = self.policy.events.first_entry() {
            if entry.key().0 > now {
                break;
            }
            match entry.remove() {
                Event::Model { id, result, label } => {
                    let Some((call, input)) = self.policy.calls.remove(&id) else {
                        self.report.bump("policy.model.dropped");
                        continue;
                    };
                    let step = self
                        .policy
                        .engine
                        .on_model_reply(&call, &input, result, now.0);
                    self.policy
                        .answers
                        .push_back((id, Step::outcome(step), label));
                }
                Event::Human { id, allow, late } => {
                    let choice = if allow {
                        HumanChoice::Allow
                    } else {
                        HumanChoice::Reject
                    };
                    match self.policy.humans.decide(id, choice, now.0) {
                        Ok(o) if !late => {
                            let label = if allow {
                                "policy.human.allow"
                            } else {
                                "policy.human.reject"
                            };
                            self.policy.answers.push_back((id, o.verdict.into(), label));
                        }
                        Ok(_) => self.violation(format!(
                            "HO-3c: the decision queue took a person's answer for {id} after its deadline"
                        )),
                        Err(_) if late => {
                            self.deliver(id, PolicyOutcome::allow(), "policy.human.late", true);
                        }
                        Err(_) => self.report.bump("policy.human.withdrawn"),
                    }
                }
                Event::Stale { id, label } => self.deliver(id, PolicyOutcome::allow(), label, true),
            }
        }
        for o in self.policy.humans.expire(now.0) {
            let answer = (o.handover_id, o.verdict.into(), "policy.human.default");
            self.policy.answers.push_back(answer);
        }
    }

    /// Asks the policy, as the plane does; schedules what the model or the
    /// person will do.
    fn ask(&mut self, q: Question) {
        let input = PolicyInput::from(&*q.context);
        let now = self.now;
        let step = match self.policy.engine.evaluate(&q.policy_name, &input, now.0) {
            Ok(step) => step,
            Err(e) => {
                let why = e.to_string();
                self.policy.answers.push_back((
                    q.id,
                    PolicyOutcome::Reject { why },
                    "policy.error",
                ));
                return;
            }
        };
        match step {
            Step::Decided(v) => {
                let label = match (q.kind, &v) {
                    (PolicyKind::PriorityScript, Verdict::Allow) => "policy.script.allow",
                    (PolicyKind::PriorityScript, _) => "policy.script.reject",
                    _ => "policy.model.cached",
                };
                self.policy.answers.push_back((q.id, v.into(), label));
            }
            Step::CallModel(call) => self.simulate_model(q, input, call),
            Step::AskHuman(h) if q.kind == PolicyKind::HumanDecision => {
                self.simulate_human(q, &input, &h);
            }
            Step::AskHuman(_) => {
                let answer = (q.id, PolicyOutcome::RequireHuman, "policy.model.cached");
                self.policy.answers.push_back(answer);
            }
            // Only a model reply falls back; evaluate never does.
            fell_back @ Step::FellBack { .. } => {
                let answer = (q.id, Step::outcome(Ok(fell_back)), "policy.model.fallback");
                self.policy.answers.push_back(answer);
            }
        }
    }

    /// Gives the terminal an answer (`stale`: sent after the handover's
    /// end on purpose) and checks it was taken exactly when it was in time.
    pub(super) fn deliver(
        &mut self,
        id: Uuid,
        answer: PolicyOutcome,
        label: &'static str,
        stale: bool,
    ) {
        if matches!(answer, PolicyOutcome::Allow { .. }) && !stale {
            self.maybe_inject(id);
        }
        let in_time = self
            .watch
            .handovers
            .get(&id)
            .map(|h| h.deadline >= self.now);
        self.report.bump(label);
        let r = self.call(Ctx::Answer(id), |t, now| t.policy_decided(id, answer, now));
        match (in_time, r) {
            (Some(true), Err(e)) => self.violation(format!(
                "HO-7: an answer for handover {id} before its deadline was refused: {e}"
            )),
            (None | Some(false), Ok(())) => self.violation(format!(
                "HO-7: an answer for handover {id} after its deadline or end was accepted"
            )),
            _ => {}
        }
    }
}
