//! SPEC HO-3b: the AI-model real-time decision (`ai_model`).
//!
//! The sans-IO half lives here: [`decision_request`] builds the JSON request
//! from the configured [`ContextField`]s only (the input holds no credential
//! signature, key id or secret, so none can be sent), [`parse_answer`]
//! reads the model's `{"decision": "allow"|"reject"|"require_human",
//! "reason"?: string}`, [`DecisionCache`] keeps answers for at most 5 s, and
//! [`classify`] turns the outcome of a call into a [`ModelReply`]; [`http`]
//! holds the endpoint, the request bytes and the response framing. The IO
//! half is `dtp_gateway::plane::post_json`, a small blocking HTTP/1.1 client
//! the control thread's edge runs on a worker thread — never inside a state
//! machine.
//!
//! **Failure rule** (HO-3b says "timeout → reject" and "unavailable → fall
//! back to the priority script"; the rest is our choice):
//!
//! | outcome of the call | reply | handover |
//! |---|---|---|
//! | 2xx with a valid answer | [`ModelReply::Decided`] | allow / reject / human decision (HO-3c) |
//! | no complete answer within `decision_timeout_ms` (connect, write or read) | [`ModelReply::Timeout`] | reject |
//! | refused, unreachable, reset, name not resolved | [`ModelReply::Unavailable`] | priority script |
//! | any 5xx, or another non-2xx status | [`ModelReply::Unavailable`] | priority script |
//! | malformed HTTP, no Content-Length, body over 64 KiB | [`ModelReply::Unavailable`] | priority script |
//! | 2xx with a body that is not a valid answer ("garbage") | [`ModelReply::Unavailable`] | priority script |
//!
//! Why garbage is "unavailable" rather than "reject": a service that does
//! not answer the decision protocol cannot decide, exactly like one that is
//! down, and the priority script is the baseline every terminal must run
//! (HO-3) — falling back to it loses no safety, while rejecting would let a
//! broken model integration block every handover. Only the one failure the
//! seed names (timeout) rejects: a model slower than its budget must not
//! turn into a second, later decision.
//!
//! SPEC HO-7: an AI-model handover has a 1 s (0.5–3 s) hard timeout; the
//! call's own timeout (default 500 ms, at most 2.5 s) plus a fallback run
//! (≤ 100 ms) fits inside it. When the model answers `require_human`, the
//! handover continues under the human decision's timeout (5–120 s).

mod cache;
pub mod http;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::input::{PolicyInput, Verdict};

pub use cache::{CACHE_TTL_MS_MAX, CacheKey, DecisionCache};

/// The longest model-given reason kept (bytes); longer ones are cut.
pub const MAX_REASON_LEN: usize = 512;

/// SPEC HO-3b: an input field that may be sent to the model
/// (`context_fields`). The names are those of the priority script's `input`
/// map, dotted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContextField {
    /// `source.session_id`
    SourceSessionId,
    /// `source.fay_id`
    SourceFayId,
    /// `source.access_mode`
    SourceAccessMode,
    /// `source.created_at_ms`
    SourceCreatedAt,
    /// `source.last_heartbeat_ms`
    SourceLastHeartbeat,
    /// `source.holder`
    SourceHolder,
    /// `target.fay_id`
    TargetFayId,
    /// `target.grants` (resource ids and modes only)
    TargetGrants,
    /// `now_ms`
    NowMs,
    /// `resource.id`
    ResourceId,
    /// `resource.metadata`
    ResourceMetadata,
    /// `reason` (the handover reason)
    Reason,
    /// `metadata` (the handover metadata)
    Metadata,
}

impl ContextField {
    /// Every field, in request order.
    pub const ALL: [Self; 13] = [
        Self::SourceSessionId,
        Self::SourceFayId,
        Self::SourceAccessMode,
        Self::SourceCreatedAt,
        Self::SourceLastHeartbeat,
        Self::SourceHolder,
        Self::TargetFayId,
        Self::TargetGrants,
        Self::NowMs,
        Self::ResourceId,
        Self::ResourceMetadata,
        Self::Reason,
        Self::Metadata,
    ];

    /// The fields sent when `context_fields` is absent: the seed's "source
    /// and target information" — who holds what, how, who asks and why.
    pub const DEFAULT: [Self; 5] = [
        Self::SourceFayId,
        Self::SourceAccessMode,
        Self::TargetFayId,
        Self::ResourceId,
        Self::Reason,
    ];

    /// The dotted name used in configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::SourceSessionId => "source.session_id",
            Self::SourceFayId => "source.fay_id",
            Self::SourceAccessMode => "source.access_mode",
            Self::SourceCreatedAt => "source.created_at_ms",
            Self::SourceLastHeartbeat => "source.last_heartbeat_ms",
            Self::SourceHolder => "source.holder",
            Self::TargetFayId => "target.fay_id",
            Self::TargetGrants => "target.grants",
            Self::NowMs => "now_ms",
            Self::ResourceId => "resource.id",
            Self::ResourceMetadata => "resource.metadata",
            Self::Reason => "reason",
            Self::Metadata => "metadata",
        }
    }

    /// The field with that dotted name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    fn value(self, input: &PolicyInput) -> Value {
        let s = &input.source;
        match self {
            Self::SourceSessionId => json!(s.session_id.to_string()),
            Self::SourceFayId => json!(s.fay_id),
            Self::SourceAccessMode => json!(s.access_mode.name()),
            Self::SourceCreatedAt => json!(s.created_at_ms),
            Self::SourceLastHeartbeat => json!(s.last_heartbeat_ms),
            Self::SourceHolder => json!(s.holder.name()),
            Self::TargetFayId => json!(input.target_fay_id),
            Self::TargetGrants => Value::Array(
                input
                    .target_grants
                    .iter()
                    .map(|g| {
                        let modes: Vec<&str> = g.modes.iter().map(|m| m.name()).collect();
                        json!({"resource_id": g.resource_id, "modes": modes})
                    })
                    .collect(),
            ),
            Self::NowMs => json!(input.now_ms),
            Self::ResourceId => json!(input.resource.resource_id),
            Self::ResourceMetadata => json!(input.resource.metadata),
            Self::Reason => json!(input.handover_reason),
            Self::Metadata => json!(input.handover_metadata),
        }
    }
}

/// SPEC HO-3b: the decision request body,
/// `{"version": 1, "context": {…}}`, where `context` nests the selected
/// fields by their dotted names (`source.fay_id` → `{"source": {"fay_id":
/// …}}`) and holds nothing else.
pub fn decision_request(fields: &[ContextField], input: &PolicyInput) -> Vec<u8> {
    let mut context = Map::new();
    for field in fields {
        let value = field.value(input);
        match field.name().split_once('.') {
            Some((group, leaf)) => {
                let entry = context
                    .entry(group)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(inner) = entry {
                    inner.insert(leaf.to_owned(), value);
                }
            }
            None => {
                context.insert(field.name().to_owned(), value);
            }
        }
    }
    json!({"version": 1, "context": context})
        .to_string()
        .into_bytes()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    decision: AnswerDecision,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum AnswerDecision {
    Allow,
    Reject,
    RequireHuman,
}

/// SPEC HO-3b: reads the model's answer. Anything but
/// `{"decision": "allow"|"reject"|"require_human", "reason"?: string}` is
/// an error.
pub fn parse_answer(body: &[u8]) -> Result<Verdict, AnswerError> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| AnswerError(e.to_string()))?;
    Ok(match answer.decision {
        AnswerDecision::Allow => Verdict::Allow,
        AnswerDecision::RequireHuman => Verdict::RequireHuman,
        AnswerDecision::Reject => {
            let mut why = answer.reason.unwrap_or_default();
            if why.len() > MAX_REASON_LEN {
                let mut cut = MAX_REASON_LEN;
                while !why.is_char_boundary(cut) {
                    cut -= 1;
                }
                why.truncate(cut);
            }
            Verdict::reject(format!("ai model rejected: {why}"))
        }
    })
}

/// SPEC HO-3b: a model answer that is not a decision.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a model decision: {0}")]
pub struct AnswerError(pub String);

/// SPEC HO-3b: what a model call came to (see the module's failure rule).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelReply {
    /// The model decided (allow, reject or require_human).
    Decided(Verdict),
    /// No answer within the hard timeout: reject.
    Timeout,
    /// The model cannot decide now: fall back to the priority script.
    Unavailable(String),
}

/// SPEC HO-3b: classifies the result of a model call (the runtime's
/// `post_json`).
pub fn classify(result: Result<http::HttpResponse, http::HttpError>) -> ModelReply {
    match result {
        Err(e) if e.is_timeout() => ModelReply::Timeout,
        Err(e) => ModelReply::Unavailable(e.to_string()),
        Ok(resp) if (200..300).contains(&resp.status) => match parse_answer(&resp.body) {
            Ok(v) => ModelReply::Decided(v),
            Err(e) => ModelReply::Unavailable(e.to_string()),
        },
        Ok(resp) => ModelReply::Unavailable(format!("model answered HTTP {}", resp.status)),
    }
}

#[cfg(test)]
mod tests;
