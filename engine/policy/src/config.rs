//! The handover policy configurations (SPEC HO-3, HO-3a/b/c, HO-7) as read
//! from TOML: strict (`deny_unknown_fields`), with defaults from the seed and
//! ranges checked once, at start-up, by [`HandoverPolicy::validate`].

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use dtp_terminal::PolicyRef;
use serde::{Deserialize, Serialize};

use crate::ai::ContextField;

/// SPEC HO-3b: the default hard timeout of a model call.
pub const AI_DECISION_TIMEOUT_MS_DEFAULT: u32 = 500;
/// SPEC HO-3b, HO-7: the accepted model-call timeouts. The ceiling keeps the
/// call, a priority-script fallback (≤ 10 ms by default, HO-3a allows 100 ms) and the handover's own steps
/// inside HO-7's 3 s maximum for an AI-model handover; below the floor no
/// HTTP round trip can finish.
pub const AI_DECISION_TIMEOUT_MS_RANGE: RangeInclusive<u32> = 50..=2500;
/// SPEC HO-3c: the default time a person has to decide.
pub const HUMAN_DECISION_TIMEOUT_S_DEFAULT: u32 = 30;
/// SPEC HO-3c, HO-7: the accepted human decision timeouts.
pub const HUMAN_DECISION_TIMEOUT_S_RANGE: RangeInclusive<u32> = 5..=120;

/// SPEC HO-3: one resource's handover policy, tagged by `policy_type`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy_type", rename_all = "snake_case")]
pub enum HandoverPolicy {
    /// SPEC HO-3a.
    PriorityScript(PriorityScript),
    /// SPEC HO-3b.
    AiModel(AiModel),
    /// SPEC HO-3c.
    HumanDecision(HumanDecision),
}

impl HandoverPolicy {
    /// Checks the ranges and names of the configuration (not script ids:
    /// those are checked against the loaded scripts by the engine).
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Self::PriorityScript(p) => p.validate(),
            Self::AiModel(a) => a.validate(),
            Self::HumanDecision(h) => h.validate(),
        }
    }

    /// The seed's name of the policy type.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PriorityScript(_) => "priority_script",
            Self::AiModel(_) => "ai_model",
            Self::HumanDecision(_) => "human_decision",
        }
    }
}

/// SPEC HO-3: a terminal's policy reference (its configuration's form) as
/// the policy engine runs it.
impl From<&PolicyRef> for HandoverPolicy {
    fn from(policy: &PolicyRef) -> Self {
        match policy {
            PolicyRef::PriorityScript {
                script_id,
                parameters,
            } => Self::PriorityScript(PriorityScript {
                script_id: script_id.clone(),
                parameters: parameters.clone(),
            }),
            PolicyRef::AiModel {
                model_endpoint,
                context_fields,
                decision_timeout_ms,
            } => Self::AiModel(AiModel {
                model_endpoint: model_endpoint.clone(),
                context_fields: context_fields.clone(),
                decision_timeout_ms: *decision_timeout_ms,
            }),
            PolicyRef::HumanDecision {
                ui_channel,
                decision_timeout_seconds,
                default_action,
            } => Self::HumanDecision(HumanDecision {
                ui_channel: *ui_channel,
                decision_timeout_seconds: *decision_timeout_seconds,
                default_action: *default_action,
            }),
        }
    }
}

/// SPEC HO-3a: `PriorityPolicyConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityScript {
    /// The script, preconfigured on the terminal, that computes the scores.
    pub script_id: String,
    /// Passed to the script as the read-only map `params`.
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
}

impl PriorityScript {
    /// Checks that a script is named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.script_id.is_empty() {
            return Err(ConfigError::EmptyScriptId);
        }
        Ok(())
    }
}

/// SPEC HO-3b: `AIPolicyConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AiModel {
    /// The model's inference endpoint, `http://host[:port]/path`.
    pub model_endpoint: String,
    /// The input fields sent to the model (names in [`ContextField`]);
    /// absent or empty → [`ContextField::DEFAULT`].
    #[serde(default)]
    pub context_fields: Vec<String>,
    /// The hard timeout of the model call; past it the handover is rejected.
    #[serde(default = "default_ai_timeout")]
    pub decision_timeout_ms: u32,
}

fn default_ai_timeout() -> u32 {
    AI_DECISION_TIMEOUT_MS_DEFAULT
}

impl AiModel {
    /// Checks the endpoint's form, the timeout's range and the field names.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::ai::http::Endpoint::parse(&self.model_endpoint).map_err(|e| {
            ConfigError::InvalidEndpoint {
                endpoint: self.model_endpoint.clone(),
                reason: e.to_string(),
            }
        })?;
        if !AI_DECISION_TIMEOUT_MS_RANGE.contains(&self.decision_timeout_ms) {
            return Err(ConfigError::AiTimeoutOutOfRange(self.decision_timeout_ms));
        }
        self.fields().map(|_| ())
    }

    /// The context fields, parsed; the default set when none are configured.
    pub fn fields(&self) -> Result<Vec<ContextField>, ConfigError> {
        if self.context_fields.is_empty() {
            return Ok(ContextField::DEFAULT.to_vec());
        }
        self.context_fields
            .iter()
            .map(|name| {
                ContextField::from_name(name)
                    .ok_or_else(|| ConfigError::UnknownContextField(name.clone()))
            })
            .collect()
    }
}

/// SPEC HO-3c: `HumanPolicyConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HumanDecision {
    /// Where the person is asked.
    pub ui_channel: UiChannel,
    /// How long the person has; then `default_action` applies.
    #[serde(default = "default_human_timeout")]
    pub decision_timeout_seconds: u32,
    /// What happens when nobody decides in time (the seed recommends reject).
    #[serde(default)]
    pub default_action: DefaultAction,
}

fn default_human_timeout() -> u32 {
    HUMAN_DECISION_TIMEOUT_S_DEFAULT
}

impl HumanDecision {
    /// Checks the timeout's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !HUMAN_DECISION_TIMEOUT_S_RANGE.contains(&self.decision_timeout_seconds) {
            return Err(ConfigError::HumanTimeoutOutOfRange(
                self.decision_timeout_seconds,
            ));
        }
        Ok(())
    }

    /// The decision timeout in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        u64::from(self.decision_timeout_seconds) * 1000
    }
}

/// SPEC HO-3c: where a person is asked, and what an unanswered question
/// becomes: the terminal's vocabulary, one definition for both crates.
pub use dtp_terminal::{DefaultAction, UiChannel};

/// A configuration that cannot be used; reported at start-up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A priority_script policy without a script id.
    #[error("priority_script: script_id is empty")]
    EmptyScriptId,
    /// A policy names a script that was not loaded.
    #[error("policy {policy:?} names script {script_id:?}, which is not loaded")]
    UnknownScript {
        /// The policy's name.
        policy: String,
        /// The missing script.
        script_id: String,
    },
    /// A script failed to compile.
    #[error(transparent)]
    Script(#[from] crate::script::ScriptError),
    /// The model endpoint is not an `http://` URL we can call.
    #[error("ai_model: model_endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The configured endpoint.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// decision_timeout_ms outside [`AI_DECISION_TIMEOUT_MS_RANGE`].
    #[error("ai_model: decision_timeout_ms = {0} is outside 50..=2500")]
    AiTimeoutOutOfRange(u32),
    /// A context field name we do not know.
    #[error("ai_model: unknown context field {0:?} (see ContextField for the names)")]
    UnknownContextField(String),
    /// An ai_model policy is configured but no fallback is.
    #[error(
        "ai_model policies need [ai_fallback] with a priority_script and a human_decision (SPEC HO-3b)"
    )]
    MissingAiFallback,
    /// decision_timeout_seconds outside [`HUMAN_DECISION_TIMEOUT_S_RANGE`].
    #[error("human_decision: decision_timeout_seconds = {0} is outside 5..=120")]
    HumanTimeoutOutOfRange(u32),
    /// An error in the named policy (or in `ai_fallback`).
    #[error("policy {policy:?}: {error}")]
    InPolicy {
        /// The policy's name.
        policy: String,
        /// What is wrong with it.
        error: Box<ConfigError>,
    },
    /// A resource is mapped to a policy name that is not configured.
    #[error("resource {resource:?} uses policy {policy:?}, which is not configured")]
    UnknownPolicy {
        /// The resource.
        resource: String,
        /// The missing policy.
        policy: String,
    },
}

impl ConfigError {
    /// This error, located in the policy `policy`.
    pub fn in_policy(self, policy: &str) -> Self {
        Self::InPolicy {
            policy: policy.to_owned(),
            error: Box::new(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HandoverPolicy, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn defaults_come_from_the_seed() {
        let ai =
            parse("policy_type = \"ai_model\"\nmodel_endpoint = \"http://127.0.0.1:9/d\"").unwrap();
        let HandoverPolicy::AiModel(ai) = ai else {
            panic!("{ai:?}")
        };
        assert_eq!(ai.decision_timeout_ms, 500);
        assert!(ai.context_fields.is_empty());
        assert_eq!(ai.fields().unwrap(), ContextField::DEFAULT.to_vec());

        let human =
            parse("policy_type = \"human_decision\"\nui_channel = \"external_panel\"").unwrap();
        let HandoverPolicy::HumanDecision(h) = human else {
            panic!("{human:?}")
        };
        assert_eq!(h.decision_timeout_seconds, 30);
        assert_eq!(h.default_action, DefaultAction::Reject);
        assert_eq!(h.timeout_ms(), 30_000);

        let p = parse("policy_type = \"priority_script\"\nscript_id = \"s\"").unwrap();
        assert_eq!(p.kind(), "priority_script");
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn unknown_fields_and_types_are_refused() {
        assert!(parse("policy_type = \"priority_script\"\nscript_id = \"s\"\nx = 1").is_err());
        assert!(
            parse("policy_type = \"ai_model\"\nmodel_endpoint = \"http://h/\"\nkey = 1").is_err()
        );
        assert!(parse("policy_type = \"human_decision\"\nui_channel = \"tv\"").is_err());
        assert!(parse("policy_type = \"coin_flip\"").is_err());
        assert!(parse("script_id = \"s\"").is_err());
    }

    #[test]
    fn ranges_are_checked() {
        let human = |s: u32| HumanDecision {
            ui_channel: UiChannel::SystemDialog,
            decision_timeout_seconds: s,
            default_action: DefaultAction::Allow,
        };
        assert_eq!(human(5).validate(), Ok(()));
        assert_eq!(human(120).validate(), Ok(()));
        assert_eq!(
            human(4).validate(),
            Err(ConfigError::HumanTimeoutOutOfRange(4))
        );
        assert_eq!(
            human(121).validate(),
            Err(ConfigError::HumanTimeoutOutOfRange(121))
        );

        let ai = |ms: u32| AiModel {
            model_endpoint: "http://127.0.0.1:8080/decide".into(),
            context_fields: vec![],
            decision_timeout_ms: ms,
        };
        assert_eq!(ai(50).validate(), Ok(()));
        assert_eq!(ai(2500).validate(), Ok(()));
        assert_eq!(ai(49).validate(), Err(ConfigError::AiTimeoutOutOfRange(49)));
        assert_eq!(
            ai(2501).validate(),
            Err(ConfigError::AiTimeoutOutOfRange(2501))
        );

        let empty = PriorityScript {
            script_id: String::new(),
            parameters: BTreeMap::new(),
        };
        assert_eq!(empty.validate(), Err(ConfigError::EmptyScriptId));
    }

    #[test]
    fn bad_endpoints_and_fields_are_refused() {
        let mut ai = AiModel {
            model_endpoint: "https://model.example/decide".into(),
            context_fields: vec![],
            decision_timeout_ms: 500,
        };
        assert!(matches!(
            ai.validate(),
            Err(ConfigError::InvalidEndpoint { .. })
        ));
        ai.model_endpoint = "http://127.0.0.1:8080/decide".into();
        ai.context_fields = vec!["source.fay_id".into(), "target.signature".into()];
        assert_eq!(
            ai.validate(),
            Err(ConfigError::UnknownContextField("target.signature".into()))
        );
    }
}
