//! Handover policies (SPEC HO-3): the decision step of a control handover
//! (HO-2 step 3), between target validation and atomic pre-emption.
//!
//! - [`script`] — HO-3a `priority_script`, the policy every terminal MUST
//!   implement: sandboxed, deterministic Rhai scripts with step, depth, size
//!   and time limits (20 000 operations and 10 ms a run by default: runs are on the control thread).
//! - [`ai`] — HO-3b `ai_model`: the decision request and answer, the ≤ 5 s
//!   decision cache, the timeout/unavailable rule, and the HTTP/1.1 request
//!   and response framing of the model call (the blocking client that sends
//!   it is `dtp_gateway::plane::post_json`, on the edge's worker thread).
//! - [`human`] — HO-3c `human_decision`: the pending-decision queue an admin
//!   panel serves and the [`HumanChannel`] trait for other user interfaces.
//! - [`PolicyEngine`] — the facade: configured policies in, a [`Step`] out.
//!
//! The crate is sans-IO, and its `clippy.toml` enforces it: no clock, socket,
//! file, thread or process. A script's time budget is measured by the
//! caller's [`BudgetClock`]. It knows nothing of the terminal's session machine: the terminal
//! builds a [`PolicyInput`] and is told a [`Verdict`]. It never sees a
//! credential's signature or key id.
//!
//! SPEC HO-7 (hard handover timeouts per policy type: script 1 s, AI model
//! 1 s, human 30 s) is kept by the terminal; each policy's own time limits
//! fit inside those (see each module's doc).
#![forbid(unsafe_code)]

pub mod ai;
mod config;
mod engine;
pub mod human;
mod input;
pub mod script;

pub use config::{
    AI_DECISION_TIMEOUT_MS_DEFAULT, AI_DECISION_TIMEOUT_MS_RANGE, AiModel, ConfigError,
    DefaultAction, HUMAN_DECISION_TIMEOUT_S_DEFAULT, HUMAN_DECISION_TIMEOUT_S_RANGE,
    HandoverPolicy, HumanDecision, PriorityScript, UiChannel,
};
pub use engine::{
    AiFallback, DECISION_CACHE_CAPACITY, ModelCall, PolicyEngine, PolicyError, PolicySet, Step,
};
pub use human::{
    DecidedBy, DecisionView, HumanChannel, HumanChoice, HumanError, HumanOutcome, PendingDecisions,
    PendingEntry,
};
pub use input::{
    HUMAN_PREFIX, Holder, PolicyInput, ResourceInfo, SourceSession, TargetGrant, Verdict,
};
pub use script::{
    BudgetClock, CONTROL_THREAD_BUDGET, ScriptError, ScriptErrorKind, ScriptLimits, ScriptRegistry,
};
