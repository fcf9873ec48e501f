//! The facade the terminal's handover machine asks (SPEC HO-2 step 3,
//! HO-3): it holds the compiled scripts, the policy configurations and the
//! model decision cache, and answers with a [`Step`] — a final [`Verdict`],
//! or IO for the caller's edge to run (a model call, a human decision).
//!
//! Sans-IO: [`PolicyEngine::evaluate`] and [`PolicyEngine::on_model_reply`]
//! take `now` (Unix ms) and never block, open a socket or read a clock (a
//! priority-script run reads the caller's [`BudgetClock`] for its time
//! budget, see [`crate::script`]). The driver loop is:
//!
//! 1. `evaluate(policy, &input, now)`;
//! 2. on [`Step::CallModel`], run the call on a worker thread (the runtime's
//!    `dtp_gateway::plane::run_model_call`: blocking HTTP) and
//!    feed its result to `on_model_reply(&call, &input, result, now)`, which
//!    returns the next step ([`Step::outcome`] gives the terminal's
//!    answer);
//! 3. on [`Step::AskHuman`], queue a [`crate::PendingDecisions`] entry with
//!    deadline `now + config.timeout_ms()` and show it on the channel; its
//!    [`crate::HumanOutcome`] is the verdict;
//! 4. on `Err`, reject with E_HANDOVER_REJECTED_BY_POLICY.

use std::collections::BTreeMap;
use std::time::Duration;

use dtp_terminal::PolicyOutcome;
use serde::Deserialize;

use crate::ai::http::{HttpError, HttpResponse};
use crate::ai::{self, CacheKey, ContextField, DecisionCache, ModelReply};
use crate::config::{ConfigError, HandoverPolicy, HumanDecision, PriorityScript};
use crate::input::{PolicyInput, Verdict};
use crate::script::{BudgetClock, ScriptError, ScriptLimits, ScriptRegistry};

/// Entries the model decision cache holds at most.
pub const DECISION_CACHE_CAPACITY: usize = 1024;

/// SPEC HO-3: the policy configuration file (TOML), checked at start-up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySet {
    /// Priority scripts by `script_id`: Rhai source text.
    #[serde(default)]
    pub scripts: BTreeMap<String, String>,
    /// Named policies.
    #[serde(default)]
    pub policies: BTreeMap<String, HandoverPolicy>,
    /// SPEC HO-3: the policy of each Resource_ID, by name.
    #[serde(default)]
    pub resources: BTreeMap<String, String>,
    /// The policy of a resource not listed in `resources`.
    #[serde(default)]
    pub default_policy: Option<String>,
    /// SPEC HO-3b: what an `ai_model` policy falls back to; required when
    /// one is configured.
    #[serde(default)]
    pub ai_fallback: Option<AiFallback>,
}

/// SPEC HO-3b: the policies behind a model: the priority script when the
/// model is unavailable, the human decision when it answers require_human.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AiFallback {
    /// Run when the model is unavailable.
    pub priority_script: PriorityScript,
    /// Asked when the model answers require_human.
    pub human_decision: HumanDecision,
}

/// SPEC HO-3: what the caller does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The final verdict: Allow or Reject (never RequireHuman).
    Decided(Verdict),
    /// SPEC HO-3b: run this model call, then call
    /// [`PolicyEngine::on_model_reply`].
    CallModel(ModelCall),
    /// SPEC HO-3c: ask a person under this configuration.
    AskHuman(HumanDecision),
    /// SPEC HO-3b: the model could not decide (unavailable, see the
    /// failure rule in [`crate::ai`]), so the fallback priority script
    /// gave the final `verdict` (allow or reject; a reject's reason starts
    /// with `note`).
    FellBack {
        /// The fallback script's verdict.
        verdict: Verdict,
        /// What became of the model: `ai model unavailable (…)`.
        note: String,
    },
}

impl Step {
    /// SPEC HO-3: the terminal's answer for a step that ends the
    /// policy's part — a verdict (a fallback allow says, for the audit
    /// log, that the script decided), or require_human (the terminal asks
    /// the policy's `human_fallback`). A model call here, or `Err` (the
    /// policy failed), is a reject.
    pub fn outcome(step: Result<Step, PolicyError>) -> PolicyOutcome {
        match step {
            Ok(Step::Decided(v)) => v.into(),
            Ok(Step::FellBack {
                verdict: Verdict::Allow,
                note,
            }) => PolicyOutcome::Allow {
                why: Some(format!("{note}; the fallback script allowed")),
            },
            Ok(Step::FellBack { verdict, .. }) => verdict.into(),
            Ok(Step::AskHuman(_)) => PolicyOutcome::RequireHuman,
            Ok(Step::CallModel(_)) => PolicyOutcome::Reject {
                why: "the model reply asked for another model call".into(),
            },
            Err(e) => PolicyOutcome::Reject { why: e.to_string() },
        }
    }
}

/// The terminal's form of a verdict.
impl From<Verdict> for PolicyOutcome {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Allow => PolicyOutcome::allow(),
            Verdict::Reject { reason } => PolicyOutcome::Reject { why: reason },
            Verdict::RequireHuman => PolicyOutcome::RequireHuman,
        }
    }
}

/// SPEC HO-3b: one model call for the edge to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelCall {
    /// The policy that asked.
    pub policy: String,
    /// `http://host[:port]/path`.
    pub endpoint: String,
    /// The JSON request ([`crate::ai::decision_request`]).
    pub body: Vec<u8>,
    /// The hard timeout (`decision_timeout_ms`).
    pub timeout: Duration,
    key: CacheKey,
}

/// SPEC HO-2 step 3: a policy that could not decide; the terminal rejects
/// with E_HANDOVER_REJECTED_BY_POLICY.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No policy with that name is configured.
    #[error("no handover policy named {0:?}")]
    UnknownPolicy(String),
    /// A model reply for a policy that is not an ai_model policy.
    #[error("policy {0:?} is not an ai_model policy")]
    NotAModelPolicy(String),
    /// The priority script failed (limit, runtime error, bad output).
    #[error(transparent)]
    Script(#[from] ScriptError),
}

impl PolicyError {
    /// The code the terminal reports.
    pub fn code(&self) -> dtp_codec::ErrorCode {
        dtp_codec::ErrorCode::E_HANDOVER_REJECTED_BY_POLICY
    }
}

/// SPEC HO-3: the compiled scripts, the policies and the model cache.
#[derive(Debug)]
pub struct PolicyEngine {
    scripts: ScriptRegistry,
    policies: BTreeMap<String, Compiled>,
    resources: BTreeMap<String, String>,
    default_policy: Option<String>,
    cache: DecisionCache,
}

/// A checked policy; an ai_model policy carries its fallbacks, so a model
/// policy without them cannot exist.
#[derive(Debug)]
enum Compiled {
    Script(PriorityScript),
    Model {
        config: crate::config::AiModel,
        fields: Vec<ContextField>,
        fallback: AiFallback,
    },
    Human(HumanDecision),
}

impl PolicyEngine {
    /// Compiles every script and checks every policy, reference and range;
    /// script runs are held to `limits`, their time budget measured by
    /// `clock`.
    pub fn new(
        set: PolicySet,
        limits: ScriptLimits,
        clock: BudgetClock,
    ) -> Result<Self, ConfigError> {
        let mut scripts = ScriptRegistry::new(limits, clock);
        for (id, source) in &set.scripts {
            scripts.load(id, source)?;
        }
        let check_script = |policy: &str, p: &PriorityScript| {
            p.validate().map_err(|e| e.in_policy(policy))?;
            if scripts.contains(&p.script_id) {
                Ok(())
            } else {
                Err(ConfigError::UnknownScript {
                    policy: policy.to_owned(),
                    script_id: p.script_id.clone(),
                })
            }
        };
        let mut policies = BTreeMap::new();
        for (name, policy) in set.policies {
            policy.validate().map_err(|e| e.in_policy(&name))?;
            let compiled = match policy {
                HandoverPolicy::PriorityScript(p) => {
                    check_script(&name, &p)?;
                    Compiled::Script(p)
                }
                HandoverPolicy::AiModel(config) => {
                    let fallback = set
                        .ai_fallback
                        .clone()
                        .ok_or_else(|| ConfigError::MissingAiFallback.in_policy(&name))?;
                    check_script("ai_fallback", &fallback.priority_script)?;
                    fallback
                        .human_decision
                        .validate()
                        .map_err(|e| e.in_policy("ai_fallback"))?;
                    let fields = config.fields().map_err(|e| e.in_policy(&name))?;
                    Compiled::Model {
                        config,
                        fields,
                        fallback,
                    }
                }
                HandoverPolicy::HumanDecision(h) => Compiled::Human(h),
            };
            policies.insert(name, compiled);
        }
        let mapped = set.resources.iter().map(|(r, p)| (r.as_str(), p));
        for (resource, policy) in mapped.chain(set.default_policy.iter().map(|p| ("*", p))) {
            if !policies.contains_key(policy) {
                return Err(ConfigError::UnknownPolicy {
                    resource: resource.to_owned(),
                    policy: policy.clone(),
                });
            }
        }
        Ok(Self {
            scripts,
            policies,
            resources: set.resources,
            default_policy: set.default_policy,
            cache: DecisionCache::new(ai::CACHE_TTL_MS_MAX, DECISION_CACHE_CAPACITY),
        })
    }

    /// SPEC HO-3: the policy name configured for `resource_id`.
    pub fn policy_for(&self, resource_id: &str) -> Option<&str> {
        self.resources
            .get(resource_id)
            .or(self.default_policy.as_ref())
            .map(String::as_str)
    }

    /// SPEC HO-7: the type of a named policy (`priority_script`,
    /// `ai_model`, `human_decision`), which sets the handover's hard timeout.
    pub fn policy_kind(&self, name: &str) -> Option<&'static str> {
        self.policies.get(name).map(|p| match p {
            Compiled::Script(_) => "priority_script",
            Compiled::Model { .. } => "ai_model",
            Compiled::Human(_) => "human_decision",
        })
    }

    /// SPEC HO-3: evaluates `policy_ref` on `input` at `now_ms`.
    pub fn evaluate(
        &mut self,
        policy_ref: &str,
        input: &PolicyInput,
        now_ms: u64,
    ) -> Result<Step, PolicyError> {
        let policy = self
            .policies
            .get(policy_ref)
            .ok_or_else(|| PolicyError::UnknownPolicy(policy_ref.to_owned()))?;
        match policy {
            Compiled::Script(p) => Ok(Step::Decided(self.scripts.decide(p, input)?)),
            Compiled::Human(h) => Ok(Step::AskHuman(h.clone())),
            Compiled::Model {
                config,
                fields,
                fallback,
            } => {
                let key = CacheKey::of(input);
                if let Some(v) = self.cache.get(&key, now_ms) {
                    return Ok(after_model(v.clone(), fallback));
                }
                Ok(Step::CallModel(ModelCall {
                    policy: policy_ref.to_owned(),
                    endpoint: config.model_endpoint.clone(),
                    body: ai::decision_request(fields, input),
                    timeout: Duration::from_millis(u64::from(config.decision_timeout_ms)),
                    key,
                }))
            }
        }
    }

    /// SPEC HO-3b: the outcome of a [`ModelCall`] for the same `input`:
    /// a decision is cached and followed, a timeout rejects, an unavailable
    /// model falls back to the priority script ([`Step::FellBack`]).
    pub fn on_model_reply(
        &mut self,
        call: &ModelCall,
        input: &PolicyInput,
        result: Result<HttpResponse, HttpError>,
        now_ms: u64,
    ) -> Result<Step, PolicyError> {
        let fallback = match self.policies.get(&call.policy) {
            Some(Compiled::Model { fallback, .. }) => fallback,
            Some(_) => return Err(PolicyError::NotAModelPolicy(call.policy.clone())),
            None => return Err(PolicyError::UnknownPolicy(call.policy.clone())),
        };
        match ai::classify(result) {
            ModelReply::Decided(v) => {
                self.cache.insert(call.key.clone(), v.clone(), now_ms);
                Ok(after_model(v, fallback))
            }
            ModelReply::Timeout => Ok(Step::Decided(Verdict::reject(format!(
                "ai model gave no decision within {} ms",
                call.timeout.as_millis()
            )))),
            ModelReply::Unavailable(why) => {
                let note = format!("ai model unavailable ({why})");
                let verdict = match self.scripts.decide(&fallback.priority_script, input)? {
                    Verdict::Reject { reason } => Verdict::reject(format!("{note}; {reason}")),
                    other => other,
                };
                Ok(Step::FellBack { verdict, note })
            }
        }
    }

    /// Forgets cached model decisions older than the TTL (memory only; stale
    /// entries are never used).
    pub fn purge_cache(&mut self, now_ms: u64) {
        self.cache.purge(now_ms);
    }
}

/// SPEC HO-3b: a model's decision as a step (require_human → HO-3c).
fn after_model(verdict: Verdict, fallback: &AiFallback) -> Step {
    match verdict {
        Verdict::RequireHuman => Step::AskHuman(fallback.human_decision.clone()),
        v => Step::Decided(v),
    }
}

#[cfg(test)]
mod tests;
