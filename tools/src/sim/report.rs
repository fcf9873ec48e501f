//! What a simulation run found: counts of every kind of event, and every
//! violation with the seed and step that reproduce it. The text and JSON
//! forms depend on nothing but the run (no wall time), so the same seed
//! prints the same bytes.

use crate::text::plural;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::SimOptions;

/// The event kinds every long enough run must have seen at least once:
/// a run missing one did not exercise what the simulation promises.
pub(crate) const REQUIRED_KINDS: &[&str] = &[
    "auth.valid",
    "auth.expired",
    "auth.not_yet_valid",
    "auth.revoked",
    "auth.unknown_issuer",
    "auth.wrong_grants",
    "auth.wrong_fay",
    "auth.garbage",
    "auth.granted",
    "heartbeat.acked",
    "heartbeat.replay_refused",
    "heartbeat.after_death",
    "heartbeat.aggregated",
    "conn.drop",
    "conn.return",
    "release.active",
    "release.repeated",
    "revocation",
    "resource.loss",
    "resource.return",
    "force_terminate",
    "clock.jump_past_expiry",
    "handover.trigger.auth_request",
    "handover.trigger.transfer_request",
    "handover.trigger.admin",
    "handover.started.priority_script",
    "handover.started.ai_model",
    "handover.started.human_decision",
    "handover.escalated_to_human",
    "handover.succeeded.fay_to_fay",
    "handover.succeeded.fay_to_human",
    "handover.succeeded.human_to_fay",
    "handover.failed.policy_rejected",
    "handover.failed.timeout",
    "handover.failed.release_failed",
    "handover.failed.acquire_failed",
    "policy.script.allow",
    "policy.script.reject",
    "policy.model.allow",
    "policy.model.reject",
    "policy.model.require_human",
    "policy.model.unavailable",
    "policy.model.garbage",
    "policy.model.timeout",
    "policy.model.late",
    "policy.human.allow",
    "policy.human.reject",
    "policy.human.default",
    "policy.human.late",
    "inject.t0",
    "inject.t1",
    "inject.t3",
    "inject.t4",
    "os.grant_failed",
    "os.revoke_failed",
    "session.ended.client_release",
    "session.ended.liveness_timeout",
    "session.ended.credential_revoked",
    "session.ended.resource_unavailable",
    "session.ended.credential_expired",
    "session.ended.handed_over",
    "session.ended.forced",
    "session.ended.creation_failed",
];

/// One violation: where to reproduce it and what broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The seed.
    pub(crate) seed: u64,
    /// The step (1-based) during which it was seen.
    pub(crate) step: u64,
    /// What broke, naming the SPEC rule.
    pub(crate) what: String,
}

/// One seed's findings.
#[derive(Clone, Debug, Default)]
pub(crate) struct SeedReport {
    /// The seed.
    pub(crate) seed: u64,
    /// Steps run.
    pub(crate) steps: u64,
    /// Virtual time covered, ms.
    pub(crate) virtual_ms: u64,
    /// Events by kind.
    pub(crate) counts: BTreeMap<String, u64>,
    /// Violations, in order.
    pub(crate) violations: Vec<Violation>,
    /// The run stopped at [`super::MAX_VIOLATIONS_PER_SEED`].
    pub(crate) stopped_early: bool,
}

impl SeedReport {
    /// An empty report for `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        SeedReport {
            seed,
            ..Default::default()
        }
    }

    /// Counts one event of `kind`.
    pub(crate) fn bump(&mut self, kind: &str) {
        self.add(kind, 1);
    }

    /// Counts `n` events of `kind`.
    pub(crate) fn add(&mut self, kind: &str, n: u64) {
        if let Some(c) = self.counts.get_mut(kind) {
            *c += n;
        } else {
            self.counts.insert(kind.to_owned(), n);
        }
    }

    /// Records a violation seen during `step`.
    pub(crate) fn violation(&mut self, step: u64, what: String) {
        self.violations.push(Violation {
            seed: self.seed,
            step,
            what,
        });
    }
}

/// The whole run's findings.
#[derive(Clone, Debug)]
pub(crate) struct Report {
    opts: SimOptions,
    /// Steps run in all.
    pub(crate) steps: u64,
    /// Virtual time covered in all, ms.
    pub(crate) virtual_ms: u64,
    /// Events by kind, over every seed.
    pub(crate) counts: BTreeMap<String, u64>,
    /// Every violation.
    pub(crate) violations: Vec<Violation>,
    /// Seeds stopped early for too many violations.
    pub(crate) stopped: Vec<u64>,
}

impl Report {
    /// An empty report for a run of `opts`.
    pub(crate) fn new(opts: SimOptions) -> Self {
        Report {
            opts,
            steps: 0,
            virtual_ms: 0,
            counts: BTreeMap::new(),
            violations: Vec::new(),
            stopped: Vec::new(),
        }
    }

    /// Adds one seed's findings.
    pub(crate) fn add(&mut self, seed: SeedReport) {
        self.steps += seed.steps;
        self.virtual_ms += seed.virtual_ms;
        for (k, n) in seed.counts {
            *self.counts.entry(k).or_insert(0) += n;
        }
        if seed.stopped_early {
            self.stopped.push(seed.seed);
        }
        self.violations.extend(seed.violations);
    }

    /// The required kinds this run never saw.
    pub(crate) fn missing_kinds(&self) -> Vec<&'static str> {
        REQUIRED_KINDS
            .iter()
            .copied()
            .filter(|k| self.counts.get(*k).copied().unwrap_or(0) == 0)
            .collect()
    }

    /// `seed S` or `seeds S..=T (K seeds)`.
    fn seeds_text(&self) -> String {
        let first = self.opts.seed;
        match self.opts.seeds {
            1 => format!("seed {first}"),
            n => format!("seeds {first}..={} ({n} seeds)", first.wrapping_add(n - 1)),
        }
    }

    /// The text form.
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "dtp sim: {}, {} each, {} run, {} of virtual time",
            self.seeds_text(),
            plural(self.opts.steps, "step"),
            plural(self.steps, "step"),
            duration(self.virtual_ms)
        );
        let _ = writeln!(s, "events:");
        let width = self.counts.keys().map(String::len).max().unwrap_or(0);
        for (k, n) in &self.counts {
            let _ = writeln!(s, "  {k:<width$}  {n}");
        }
        let missing = self.missing_kinds();
        if !missing.is_empty() {
            let _ = writeln!(s, "not exercised: {}", missing.join(", "));
        }
        for v in &self.violations {
            let _ = writeln!(
                s,
                "violation: seed {} step {}: {} (reproduce: dtp sim --seed {} --steps {})",
                v.seed, v.step, v.what, v.seed, v.step
            );
        }
        for seed in &self.stopped {
            let _ = writeln!(
                s,
                "seed {seed} stopped after {}",
                plural(super::MAX_VIOLATIONS_PER_SEED, "violation")
            );
        }
        let _ = writeln!(s, "violations: {}", self.violations.len());
        s
    }

    /// The JSON form (`--json FILE`).
    pub(crate) fn json(&self) -> Value {
        let violations: Vec<Value> = self
            .violations
            .iter()
            .map(|v| json!({"seed": v.seed, "step": v.step, "what": v.what}))
            .collect();
        json!({
            "seed": self.opts.seed,
            "seeds": self.opts.seeds,
            "steps_per_seed": self.opts.steps,
            "steps": self.steps,
            "virtual_ms": self.virtual_ms,
            "counts": self.counts,
            "not_exercised": self.missing_kinds(),
            "violations": violations,
            "stopped_seeds": self.stopped,
        })
    }
}

/// `1d 02h 03m 04.005s`-style virtual time.
fn duration(ms: u64) -> String {
    let (d, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (h, rest) = (rest / 3_600_000, rest % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let secs = format!("{:02}.{:03}s", rest / 1000, rest % 1000);
    match (d, h, m) {
        (0, 0, 0) => secs,
        (0, 0, _) => format!("{m}m {secs}"),
        (0, _, _) => format!("{h}h {m:02}m {secs}"),
        _ => format!("{d}d {h:02}h {m:02}m {secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(1_234), "01.234s");
        assert_eq!(duration(61_000), "1m 01.000s");
        assert_eq!(duration(90_061_001), "1d 01h 01m 01.001s");
    }
}
