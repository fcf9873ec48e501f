//! SPEC HO-3a: the priority-rule script (`priority_script`), the policy every
//! terminal MUST implement.
//!
//! Scripts are written in [Rhai](https://rhai.rs) and registered by
//! `script_id` from configuration text; each is compiled once, at load
//! ([`ScriptRegistry::load`]), and a script that does not compile is a
//! start-up configuration error. A run sees two read-only maps — `input`
//! (exactly HO-3a's inputs) and `params` (the policy's `parameters`) — and
//! returns `#{source: S_source, target: S_target}`; the handover is allowed
//! iff `S_target > S_source` (equal scores reject). The language reference is
//! in the crate's README.
//!
//! The sandbox (see `sandbox`): no package that gives time, randomness,
//! printing, file or module access is registered; `import`, `print`,
//! `debug` and `eval` are disabled symbols, so a script using them does not
//! compile; undeclared variables are compile errors; operations (steps),
//! call depth, expression depth, string/array/map sizes, variables and
//! functions are bounded ([`ScriptLimits`]). The result is a function of the
//! input alone (deterministic), or an error.
//!
//! **The time budget**: HO-3a caps a run at 100 ms of wall time, but a run
//! happens on the control thread, which decides for every core and must
//! never block (DESIGN §3): so the default bounds are much smaller. The
//! step limit (20,000 operations) is the deterministic guard: a runaway
//! loop reaches it in about 0.3 ms on a release build (5–10 ms in a debug
//! one). As a backstop for operations that are slow one by one (copying a
//! large string or map), [`CONTROL_THREAD_BUDGET`] (10 ms of wall time)
//! stops a run whatever it does: the progress
//! callback reads the caller's [`BudgetClock`] every [`BUDGET_CHECK_EVERY`]
//! operations and stops the run past [`ScriptLimits::time_budget`]. The
//! crate reads no clock itself (the runtime passes the wall clock); the
//! budget can only turn a result into [`ScriptErrorKind::TimeBudget`], and
//! the terminal treats every [`ScriptError`] as a reject (SPEC HO-2 step 3).
//! A rule that needs more than the budget is refused, not run longer: real
//! scoring rules (a loop over a few hundred grants) take well under it.
//!
//! SPEC HO-7: the priority-script handover has a 1 s (0.5–2 s) hard timeout;
//! the run budget keeps the decision well inside it.

mod sandbox;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rhai::{AST, Engine};

use crate::config::PriorityScript;
use crate::input::{PolicyInput, Verdict};

/// SPEC HO-3a: the clock a run's time budget is measured by, passed in by
/// the caller (the runtime gives the wall clock, `Instant::now`; a test may
/// give a virtual one). Read once at a run's start and every
/// [`BUDGET_CHECK_EVERY`] operations.
pub type BudgetClock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// How often (in operations) a run compares the clock with its budget.
pub const BUDGET_CHECK_EVERY: u64 = 64;

/// SPEC HO-3a, DESIGN §3: the default wall-time budget of one run — it
/// runs on the control thread, so far below HO-3a's 100 ms ceiling. (The
/// operation limit normally ends a runaway run well before.)
pub const CONTROL_THREAD_BUDGET: Duration = Duration::from_millis(10);

/// SPEC HO-3a: the bounds every script run is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Operations (steps) per run; past it → [`ScriptErrorKind::StepLimit`].
    /// 0 means unlimited (Rhai's convention): only the time budget then
    /// stops a run, so keep it for tests.
    pub max_operations: u64,
    /// Nested function calls; past it → [`ScriptErrorKind::CallDepth`].
    pub max_call_levels: usize,
    /// Expression nesting at global level (checked when compiling).
    pub max_expr_depth: usize,
    /// Expression nesting inside functions (checked when compiling).
    pub max_fn_expr_depth: usize,
    /// Bytes in one string.
    pub max_string_len: usize,
    /// Elements in one array.
    pub max_array_len: usize,
    /// Entries in one map.
    pub max_map_len: usize,
    /// Variables alive at once.
    pub max_variables: usize,
    /// Functions a script may define.
    pub max_functions: usize,
    /// Wall time per run (HO-3a: ≤ 100 ms; default
    /// [`CONTROL_THREAD_BUDGET`]); past it → [`ScriptErrorKind::TimeBudget`].
    pub time_budget: Duration,
}

impl Default for ScriptLimits {
    /// Room for real scoring rules (loops over a few hundred grants) while
    /// a runaway script stops within [`CONTROL_THREAD_BUDGET`] on the
    /// control thread.
    fn default() -> Self {
        Self {
            max_operations: 20_000,
            max_call_levels: 16,
            max_expr_depth: 64,
            max_fn_expr_depth: 32,
            max_string_len: 4096,
            max_array_len: 1024,
            max_map_len: 1024,
            max_variables: 256,
            max_functions: 64,
            time_budget: CONTROL_THREAD_BUDGET,
        }
    }
}

/// SPEC HO-3a: the compiled priority scripts, by `script_id`.
pub struct ScriptRegistry {
    scripts: HashMap<String, AST>,
    /// One sandboxed engine for every compile and run: building one per
    /// run (its packages, disabled symbols and limits) was most of a
    /// handover's script cost.
    engine: Engine,
    limits: ScriptLimits,
    clock: BudgetClock,
}

impl fmt::Debug for ScriptRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<&String> = self.scripts.keys().collect();
        ids.sort();
        f.debug_struct("ScriptRegistry")
            .field("scripts", &ids)
            .field("limits", &self.limits)
            .finish()
    }
}

impl ScriptRegistry {
    /// An empty registry whose runs are held to `limits`, their time budget
    /// measured by `clock`.
    pub fn new(limits: ScriptLimits, clock: BudgetClock) -> Self {
        let budget = (limits.time_budget, clock.clone());
        let engine = sandbox::engine(&sandbox::packages(), &limits, Some(budget));
        Self {
            scripts: HashMap::new(),
            engine,
            limits,
            clock,
        }
    }

    /// Compiles `source` and registers it as `script_id`. A compile error or
    /// a duplicate id is a configuration error.
    pub fn load(&mut self, script_id: &str, source: &str) -> Result<(), ScriptError> {
        let err = |kind| ScriptError {
            script_id: script_id.to_owned(),
            kind,
        };
        if self.scripts.contains_key(script_id) {
            return Err(err(ScriptErrorKind::Duplicate));
        }
        let ast = sandbox::compile(&self.engine, source)
            .map_err(|e| err(ScriptErrorKind::Compile(one_line(&e.to_string()))))?;
        self.scripts.insert(script_id.to_owned(), ast);
        Ok(())
    }

    /// Whether `script_id` is loaded.
    pub fn contains(&self, script_id: &str) -> bool {
        self.scripts.contains_key(script_id)
    }

    /// The limits every run is held to.
    pub fn limits(&self) -> &ScriptLimits {
        &self.limits
    }

    /// SPEC HO-3a: runs `script_id` on `input` and `parameters`.
    pub fn scores(
        &self,
        script_id: &str,
        input: &PolicyInput,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Scores, ScriptError> {
        let err = |kind| ScriptError {
            script_id: script_id.to_owned(),
            kind,
        };
        let ast = self
            .scripts
            .get(script_id)
            .ok_or_else(|| err(ScriptErrorKind::Unknown))?;
        let run = || sandbox::run(&self.engine, ast, input, parameters);
        let out = sandbox::timed((self.clock)(), run).map_err(err)?;
        Scores::from_output(out).map_err(|m| err(ScriptErrorKind::Output(m)))
    }

    /// SPEC HO-3a: the decision — allow iff `S_target > S_source`.
    pub fn decide(
        &self,
        policy: &PriorityScript,
        input: &PolicyInput,
    ) -> Result<Verdict, ScriptError> {
        let scores = self.scores(&policy.script_id, input, &policy.parameters)?;
        Ok(if scores.allows() {
            Verdict::Allow
        } else {
            Verdict::reject(format!(
                "priority script {:?}: S_target {} <= S_source {}",
                policy.script_id, scores.target, scores.source
            ))
        })
    }
}

/// SPEC HO-3a: a script's two priority scores.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scores {
    /// S_source: the current holder's priority.
    pub source: Score,
    /// S_target: the would-be holder's priority.
    pub target: Score,
}

impl Scores {
    /// SPEC HO-3a: the target wins only with a strictly higher score.
    pub fn allows(&self) -> bool {
        match (self.target, self.source) {
            (Score::Int(t), Score::Int(s)) => t > s,
            (t, s) => t.as_f64() > s.as_f64(),
        }
    }

    fn from_output(out: rhai::Dynamic) -> Result<Self, String> {
        let type_name = out.type_name();
        let map = out.try_cast::<rhai::Map>().ok_or_else(|| {
            format!("expected #{{source: number, target: number}}, got {type_name}")
        })?;
        if map.len() != 2 {
            return Err(format!(
                "expected exactly the keys source and target, got {} keys",
                map.len()
            ));
        }
        let score = |key: &str| -> Result<Score, String> {
            let v = map.get(key).ok_or_else(|| format!("missing key {key:?}"))?;
            if let Ok(i) = v.as_int() {
                return Ok(Score::Int(i));
            }
            match v.as_float() {
                Ok(f) if !f.is_nan() => Ok(Score::Float(f)),
                Ok(_) => Err(format!("{key} is NaN")),
                Err(t) => Err(format!("{key} must be a number, got {t}")),
            }
        };
        Ok(Self {
            source: score("source")?,
            target: score("target")?,
        })
    }
}

/// One priority score: a script may return integers or floats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Score {
    /// A Rhai integer.
    Int(i64),
    /// A Rhai float (never NaN).
    Float(f64),
}

impl Score {
    /// The score as a float (mixed comparisons are done in f64).
    pub fn as_f64(self) -> f64 {
        match self {
            // Precision loss beyond 2^53 is accepted: only mixed int/float
            // comparisons take this path.
            Self::Int(i) => i as f64,
            Self::Float(f) => f,
        }
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(i) => write!(f, "{i}"),
            Self::Float(x) => write!(f, "{x}"),
        }
    }
}

/// `text` on one line: rhai's compile errors quote the script's text back,
/// and a control character in it (a newline, a carriage return) is written
/// as its escape instead.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// SPEC HO-3a: a script that could not produce scores. The terminal treats
/// every one as a reject (E_HANDOVER_REJECTED_BY_POLICY).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("priority script {script_id:?}: {kind}")]
pub struct ScriptError {
    /// The script concerned.
    pub script_id: String,
    /// What went wrong.
    pub kind: ScriptErrorKind,
}

/// What went wrong with a priority script.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScriptErrorKind {
    /// It does not compile (syntax, a disabled symbol such as `import` or
    /// `print`, an undeclared variable, an expression nested too deep).
    #[error("does not compile: {0}")]
    Compile(String),
    /// Two scripts with one id.
    #[error("loaded twice")]
    Duplicate,
    /// No script with that id is loaded.
    #[error("is not loaded")]
    Unknown,
    /// It ran past [`ScriptLimits::max_operations`].
    #[error("stopped by the step limit")]
    StepLimit,
    /// It ran past [`ScriptLimits::time_budget`].
    #[error("stopped by its time budget")]
    TimeBudget,
    /// It nested calls past [`ScriptLimits::max_call_levels`].
    #[error("stopped by the call depth limit")]
    CallDepth,
    /// It built a string, array or map past the size limits.
    #[error("stopped by a size limit: {0}")]
    TooLarge(String),
    /// Another runtime error (unknown function such as `timestamp`, type
    /// mismatch, assignment to the read-only inputs, arithmetic overflow…).
    #[error("failed: {0}")]
    Runtime(String),
    /// It returned something other than `#{source: number, target: number}`.
    #[error("returned a wrong value: {0}")]
    Output(String),
}
