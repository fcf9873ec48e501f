//! SPEC HO-2 step 3, HO-3: answering the terminal's policy questions.
//!
//! The terminal asks ([`dtp_terminal::Output::EvaluatePolicy`]); the
//! [`PolicyEngine`] answers with a step:
//!
//! - `Decided` (a priority script, HO-3a, run here on the control thread
//!   within its 10 ms budget; or a cached model answer) — answered at once;
//! - `CallModel` (HO-3b) — run on the [`ModelPool`]; the reply comes back at
//!   a later tick and goes through `on_model_reply` (timeout → reject,
//!   unavailable → the fallback script). All workers busy counts as
//!   unavailable;
//! - `AskHuman` (HO-3c) — for a human-decision policy, queued in
//!   [`PendingDecisions`] until a person decides through the admin handle or
//!   the deadline (the policy's `decision_timeout_seconds`, never past the
//!   terminal's HO-7 hard deadline) applies the default action. When a
//!   *model* answers `require_human`, the terminal is told
//!   `RequireHuman` instead: it asks the policy's own `human_fallback` with
//!   a fresh human-sized hard deadline (a model's 0.5–3 s would not do);
//!   a model policy configured without one has `ai_fallback.human_decision`
//!   as its fallback (`super::AI_FALLBACK_HUMAN`).
//!
//! Every `ui_channel` is served from that one queue, which the admin panel
//! lists: this build has no desktop-session or companion-app integration
//! (`dtp_policy::HumanChannel`), so `system_dialog` and `companion_app`
//! questions are answered on the panel too, or end in their default action.
//!
//! A policy error (script failure, unknown policy) is a reject.

use std::collections::HashMap;

use dtp_policy::ai::http::HttpError;
use dtp_policy::{
    HumanChoice, HumanError, HumanOutcome, ModelCall, PendingDecisions, PendingEntry, PolicyEngine,
    PolicyInput, Step,
};
use dtp_terminal::{HandoverContext, PolicyKind, PolicyOutcome, UnixMs};
use uuid::Uuid;

use super::observe::PlaneMetrics;
use super::workers::ModelPool;

/// How often cached model answers older than their TTL are forgotten.
const PURGE_EVERY_MS: u64 = 5_000;

/// The policy side of the plane.
pub(crate) struct Policies {
    engine: PolicyEngine,
    humans: PendingDecisions,
    models: ModelPool,
    /// Model calls in flight, with what their reply is judged on.
    calls: HashMap<Uuid, (ModelCall, PolicyInput)>,
    next_purge: UnixMs,
}

/// One question of the terminal.
pub(crate) struct Question<'a> {
    pub(crate) handover_id: Uuid,
    pub(crate) policy_name: &'a str,
    pub(crate) kind: PolicyKind,
    pub(crate) deadline: UnixMs,
    pub(crate) context: &'a HandoverContext,
}

impl Policies {
    pub(crate) fn new(engine: PolicyEngine, human_queue: usize, models: ModelPool) -> Self {
        Policies {
            engine,
            humans: PendingDecisions::new(human_queue),
            models,
            calls: HashMap::new(),
            next_purge: UnixMs(0),
        }
    }

    /// Asks the policy; the answer if there is one now.
    pub(crate) fn ask(
        &mut self,
        q: Question<'_>,
        now: UnixMs,
        metrics: &PlaneMetrics,
    ) -> Option<PolicyOutcome> {
        PlaneMetrics::bump(&metrics.policy_asked);
        let input = PolicyInput::from(q.context);
        let step = match self.engine.evaluate(q.policy_name, &input, now.0) {
            Ok(step) => step,
            Err(e) => return Some(reject(e)),
        };
        match step {
            Step::CallModel(call) => {
                if self.models.submit(q.handover_id, &call) {
                    PlaneMetrics::bump(&metrics.model_calls);
                    self.calls.insert(q.handover_id, (call, input));
                    return None;
                }
                PlaneMetrics::bump(&metrics.model_busy);
                let busy = HttpError::Io("every model worker is busy".into());
                let step = self.engine.on_model_reply(&call, &input, Err(busy), now.0);
                Some(Step::outcome(step))
            }
            Step::AskHuman(h) if q.kind == PolicyKind::HumanDecision => {
                let deadline = now.plus(h.timeout_ms()).min(q.deadline);
                let view = dtp_policy::DecisionView::of(&input);
                match self
                    .humans
                    .add(q.handover_id, view, deadline.0, h.default_action)
                {
                    Ok(_) => {
                        PlaneMetrics::bump(&metrics.human_asked);
                        None
                    }
                    Err(e) => Some(reject(e)),
                }
            }
            // A script's verdict or a cached model answer (require_human:
            // the terminal asks the policy's human_fallback).
            decided => Some(Step::outcome(Ok(decided))),
        }
    }

    /// The terminal no longer needs an answer.
    pub(crate) fn cancel(&mut self, handover_id: Uuid) {
        self.calls.remove(&handover_id);
        self.humans.withdraw(handover_id);
    }

    /// The answers of the model calls finished since the last look.
    pub(crate) fn model_replies(&mut self, now: UnixMs) -> Vec<(Uuid, PolicyOutcome)> {
        let mut answers = Vec::new();
        for done in self.models.finished() {
            // A call whose handover ended meanwhile is simply dropped.
            let Some((call, input)) = self.calls.remove(&done.handover_id) else {
                continue;
            };
            let step = self
                .engine
                .on_model_reply(&call, &input, done.result, now.0);
            answers.push((done.handover_id, Step::outcome(step)));
        }
        answers
    }

    /// The human decisions whose deadline passed, with their default action.
    pub(crate) fn expire_humans(
        &mut self,
        now: UnixMs,
        metrics: &PlaneMetrics,
    ) -> Vec<(Uuid, PolicyOutcome)> {
        self.humans
            .expire(now.0)
            .into_iter()
            .map(|o| {
                PlaneMetrics::bump(&metrics.human_expired);
                (o.handover_id, o.verdict.into())
            })
            .collect()
    }

    /// A person's decision (HO-3c): accepted once, before the deadline.
    pub(crate) fn decide(
        &mut self,
        handover_id: Uuid,
        allow: bool,
        now: UnixMs,
    ) -> Result<(HumanOutcome, PolicyOutcome), HumanError> {
        let choice = if allow {
            HumanChoice::Allow
        } else {
            HumanChoice::Reject
        };
        let o = self.humans.decide(handover_id, choice, now.0)?;
        let answer = o.verdict.clone().into();
        Ok((o, answer))
    }

    /// What the human panel lists: source and target Fay, resource, mode,
    /// reason and deadline — never a credential detail.
    pub(crate) fn pending(&self) -> Vec<PendingEntry> {
        self.humans.list().into_iter().cloned().collect()
    }

    /// The earliest human deadline.
    pub(crate) fn next_deadline(&self) -> Option<UnixMs> {
        self.humans.next_deadline().map(UnixMs)
    }

    /// Forgets stale cached model answers now and then.
    pub(crate) fn purge(&mut self, now: UnixMs) {
        if now >= self.next_purge {
            self.engine.purge_cache(now.0);
            self.next_purge = now.plus(PURGE_EVERY_MS);
        }
    }
}

fn reject(e: impl std::fmt::Display) -> PolicyOutcome {
    PolicyOutcome::Reject { why: e.to_string() }
}
