//! SPEC HO-3c: the human-user decision (`human_decision`).
//!
//! [`PendingDecisions`] is the sans-IO queue of handovers waiting for a
//! person: the terminal adds one with a deadline, a person decides it once
//! (through whichever [`HumanChannel`] showed it), or [`PendingDecisions::expire`]
//! resolves it with the policy's `default_action` once `now` reaches the
//! deadline. Time is passed in; nothing here blocks or reads a clock.
//!
//! What a person sees is a [`DecisionView`]: source Fay, target Fay,
//! resource, access mode and reason — the five things HO-3c requires — and
//! never a credential detail (signature, key id): the view is built from a
//! [`PolicyInput`], which holds none.
//!
//! Channels: `external_panel` is the admin HTTP endpoint, served by another
//! component straight from [`PendingDecisions::list`] and
//! [`PendingDecisions::decide`] ([`PanelChannel`] is its no-op notifier);
//! `system_dialog` and `companion_app` sit behind [`HumanChannel`] too, but
//! need a desktop-session or companion-app integration that a server does
//! not have, so none ships here ([`RecordingChannel`] is the test double).
//!
//! SPEC HO-7: a human-decision handover has a 30 s (5–120 s) hard timeout,
//! which is the configured `decision_timeout_seconds`.

mod channel;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};

use dtp_codec::AccessMode;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::DefaultAction;
use crate::input::{PolicyInput, Verdict};

pub use channel::{ChannelError, ChannelEvent, HumanChannel, PanelChannel, RecordingChannel};

/// How many resolved handover ids are remembered to tell "already decided"
/// from "unknown".
pub const DECIDED_MEMORY: usize = 256;

/// SPEC HO-3c: what the person is shown — and nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionView {
    /// The controller holding the resource now.
    pub source_fay_id: String,
    /// The controller asking to take over.
    pub target_fay_id: String,
    /// The resource.
    pub resource_id: String,
    /// The source session's access mode (the target gets the same, HO-2).
    pub access_mode: AccessMode,
    /// The handover reason.
    pub reason: String,
}

impl DecisionView {
    /// The view of a handover request.
    pub fn of(input: &PolicyInput) -> Self {
        Self {
            source_fay_id: input.source.fay_id.clone(),
            target_fay_id: input.target_fay_id.clone(),
            resource_id: input.resource.resource_id.clone(),
            access_mode: input.source.access_mode,
            reason: input.handover_reason.clone(),
        }
    }
}

/// SPEC HO-3c: a handover waiting for a person, as the panel lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingEntry {
    /// The handover (UUID v4).
    pub handover_id: Uuid,
    /// What is shown.
    #[serde(flatten)]
    pub view: DecisionView,
    /// When `default_action` applies, Unix milliseconds.
    pub deadline_ms: u64,
    /// What happens at the deadline.
    pub default_action: DefaultAction,
}

/// SPEC HO-3c: a person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HumanChoice {
    /// Let the handover go ahead.
    Allow,
    /// Refuse it.
    Reject,
}

/// Who resolved a pending decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// A person, in time.
    Human,
    /// Nobody in time: the policy's `default_action`.
    Timeout,
}

/// SPEC HO-3c: how a pending decision ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HumanOutcome {
    /// The handover.
    pub handover_id: Uuid,
    /// Allow or reject (never RequireHuman).
    pub verdict: Verdict,
    /// A person, or the timeout.
    pub decided_by: DecidedBy,
}

/// SPEC HO-3c: the handovers waiting for a person.
#[derive(Clone, Debug)]
pub struct PendingDecisions {
    capacity: usize,
    pending: BTreeMap<Uuid, PendingEntry>,
    decided: VecDeque<Uuid>,
}

impl PendingDecisions {
    /// An empty queue holding at most `capacity` pending decisions.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            pending: BTreeMap::new(),
            decided: VecDeque::new(),
        }
    }

    /// Queues `handover_id` until `deadline_ms`.
    pub fn add(
        &mut self,
        handover_id: Uuid,
        view: DecisionView,
        deadline_ms: u64,
        default_action: DefaultAction,
    ) -> Result<&PendingEntry, HumanError> {
        if self.pending.contains_key(&handover_id) || self.decided.contains(&handover_id) {
            return Err(HumanError::Duplicate(handover_id));
        }
        if self.pending.len() >= self.capacity {
            return Err(HumanError::Full(self.capacity));
        }
        let entry = PendingEntry {
            handover_id,
            view,
            deadline_ms,
            default_action,
        };
        Ok(self.pending.entry(handover_id).or_insert(entry))
    }

    /// The pending decisions, earliest deadline first (for the panel).
    pub fn list(&self) -> Vec<&PendingEntry> {
        let mut all: Vec<&PendingEntry> = self.pending.values().collect();
        all.sort_by_key(|e| (e.deadline_ms, e.handover_id));
        all
    }

    /// The pending decision for `handover_id`.
    pub fn get(&self, handover_id: &Uuid) -> Option<&PendingEntry> {
        self.pending.get(handover_id)
    }

    /// A person's decision, accepted once and only before the deadline.
    pub fn decide(
        &mut self,
        handover_id: Uuid,
        choice: HumanChoice,
        now_ms: u64,
    ) -> Result<HumanOutcome, HumanError> {
        let Some(entry) = self.pending.get(&handover_id) else {
            return Err(if self.decided.contains(&handover_id) {
                HumanError::AlreadyDecided(handover_id)
            } else {
                HumanError::Unknown(handover_id)
            });
        };
        if now_ms >= entry.deadline_ms {
            return Err(HumanError::Expired(handover_id));
        }
        self.resolve(handover_id);
        let verdict = match choice {
            HumanChoice::Allow => Verdict::Allow,
            HumanChoice::Reject => Verdict::reject("rejected by the terminal's user"),
        };
        Ok(HumanOutcome {
            handover_id,
            verdict,
            decided_by: DecidedBy::Human,
        })
    }

    /// Resolves every decision whose deadline is at or before `now_ms` with
    /// its `default_action`, earliest deadline first.
    pub fn expire(&mut self, now_ms: u64) -> Vec<HumanOutcome> {
        let due: Vec<PendingEntry> = self
            .list()
            .into_iter()
            .take_while(|e| e.deadline_ms <= now_ms)
            .cloned()
            .collect();
        due.into_iter()
            .map(|e| {
                self.resolve(e.handover_id);
                let verdict = match e.default_action {
                    DefaultAction::Allow => Verdict::Allow,
                    DefaultAction::Reject => {
                        Verdict::reject("no decision from the terminal's user in time")
                    }
                };
                HumanOutcome {
                    handover_id: e.handover_id,
                    verdict,
                    decided_by: DecidedBy::Timeout,
                }
            })
            .collect()
    }

    /// Drops a pending decision the handover no longer needs (it was
    /// cancelled); returns whether it was pending.
    pub fn withdraw(&mut self, handover_id: Uuid) -> bool {
        let was = self.pending.contains_key(&handover_id);
        if was {
            self.resolve(handover_id);
        }
        was
    }

    /// The earliest deadline, for the caller's timer.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.values().map(|e| e.deadline_ms).min()
    }

    /// Pending decisions.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    fn resolve(&mut self, handover_id: Uuid) {
        self.pending.remove(&handover_id);
        if self.decided.len() >= DECIDED_MEMORY {
            self.decided.pop_front();
        }
        self.decided.push_back(handover_id);
    }
}

/// A decision request the queue refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HumanError {
    /// No pending decision has that id.
    #[error("handover {0} is not waiting for a decision")]
    Unknown(Uuid),
    /// It was decided (or timed out, or was withdrawn) already.
    #[error("handover {0} was already decided")]
    AlreadyDecided(Uuid),
    /// Its deadline passed; the default action applies.
    #[error("handover {0}: the decision time is over")]
    Expired(Uuid),
    /// It is queued already.
    #[error("handover {0} is already queued")]
    Duplicate(Uuid),
    /// The queue holds its maximum.
    #[error("{0} decisions are pending already")]
    Full(usize),
}
