//! The Rhai engine a priority script runs in (SPEC HO-3a): which functions
//! exist, which symbols are disabled, the limits, and how the inputs are
//! shown to the script. Nothing here touches the network, files, a random
//! source or a clock (the budget check reads the caller's [`BudgetClock`]).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rhai::packages::{
    BasicArrayPackage, BasicMapPackage, BasicMathPackage, BitFieldPackage, CorePackage,
    LogicPackage, MoreStringPackage, Package,
};
use rhai::{AST, Array, Dynamic, Engine, EvalAltResult, Map, Module, ParseError, Scope, Shared};

use super::{BUDGET_CHECK_EVERY, BudgetClock, ScriptErrorKind, ScriptLimits};
use crate::input::PolicyInput;

/// Symbols a script may not use: module loading (`import`, `export`),
/// output (`print`, `debug`) and run-time compilation (`eval`).
const DISABLED_SYMBOLS: [&str; 5] = ["import", "export", "print", "debug", "eval"];

/// The function packages scripts may call: the language core, arithmetic,
/// logic, math, bit fields, strings, arrays and maps. Deliberately absent:
/// Rhai's time package (`timestamp`), its file module resolver, and any
/// random-number package (Rhai has none built in).
pub(super) fn packages() -> Vec<Shared<Module>> {
    vec![
        CorePackage::new().as_shared_module(),
        LogicPackage::new().as_shared_module(),
        BasicMathPackage::new().as_shared_module(),
        BitFieldPackage::new().as_shared_module(),
        MoreStringPackage::new().as_shared_module(),
        BasicArrayPackage::new().as_shared_module(),
        BasicMapPackage::new().as_shared_module(),
    ]
}

thread_local! {
    /// When the run on this thread started, if one is running (see
    /// [`engine`] and [`timed`]).
    static RUN_START: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A sandboxed engine, built once per registry and reused by every run. With
/// `budget`, a run made through [`timed`] is stopped once it has used that
/// much time on the clock; the start is the calling thread's own, so a
/// registry shared between threads times each run alone.
pub(super) fn engine(
    packages: &[Shared<Module>],
    limits: &ScriptLimits,
    budget: Option<(Duration, BudgetClock)>,
) -> Engine {
    // `new_raw`: no packages, no module resolver, no print/debug sink.
    let mut engine = Engine::new_raw();
    for package in packages {
        engine.register_global_module(package.clone());
    }
    for symbol in DISABLED_SYMBOLS {
        engine.disable_symbol(symbol);
    }
    engine
        .set_strict_variables(true)
        .set_fail_on_invalid_map_property(true)
        .set_max_operations(limits.max_operations)
        .set_max_call_levels(limits.max_call_levels)
        .set_max_expr_depths(limits.max_expr_depth, limits.max_fn_expr_depth)
        .set_max_string_size(limits.max_string_len)
        .set_max_array_size(limits.max_array_len)
        .set_max_map_size(limits.max_map_len)
        .set_max_variables(limits.max_variables)
        .set_max_functions(limits.max_functions)
        .set_max_modules(0);
    if let Some((budget, clock)) = budget {
        // The caller's clock (see the module doc of `script`).
        engine.on_progress(move |ops| {
            let over = ops % BUDGET_CHECK_EVERY == 0
                && RUN_START
                    .get()
                    .is_some_and(|start| clock().saturating_duration_since(start) > budget);
            over.then_some(Dynamic::UNIT)
        });
    }
    engine
}

/// Runs `f` as one timed run started at `start` (the budget of [`engine`]
/// counts from there).
pub(super) fn timed<T>(start: Instant, f: impl FnOnce() -> T) -> T {
    RUN_START.set(Some(start));
    let out = f();
    RUN_START.set(None);
    out
}

/// Compiles a script. `input` and `params` are declared (as plain
/// variables: declaring them as constants would let the optimiser fold the
/// placeholder values into the AST) so that strict variables accept them.
pub(super) fn compile(engine: &Engine, source: &str) -> Result<AST, ParseError> {
    let mut scope = Scope::new();
    scope.push_dynamic("input", Dynamic::UNIT);
    scope.push_dynamic("params", Dynamic::UNIT);
    engine.compile_with_scope(&scope, source)
}

/// Runs a compiled script with the inputs as read-only constants.
pub(super) fn run(
    engine: &Engine,
    ast: &AST,
    input: &PolicyInput,
    params: &BTreeMap<String, String>,
) -> Result<Dynamic, ScriptErrorKind> {
    let mut scope = Scope::new();
    scope.push_constant_dynamic("input", input_value(input).into_read_only());
    scope.push_constant_dynamic("params", string_map(params).into_read_only());
    engine
        .eval_ast_with_scope::<Dynamic>(&mut scope, ast)
        .map_err(|e| classify(*e))
}

/// SPEC HO-3a: the `input` map; the names are the README's reference.
fn input_value(input: &PolicyInput) -> Dynamic {
    let s = &input.source;
    let source = Map::from([
        ("session_id".into(), s.session_id.to_string().into()),
        ("fay_id".into(), s.fay_id.clone().into()),
        ("access_mode".into(), s.access_mode.name().into()),
        ("created_at_ms".into(), int(s.created_at_ms)),
        ("last_heartbeat_ms".into(), int(s.last_heartbeat_ms)),
        ("holder".into(), s.holder.name().into()),
    ]);
    let grants: Array = input
        .target_grants
        .iter()
        .map(|g| {
            let modes: Array = g.modes.iter().map(|m| m.name().into()).collect();
            Dynamic::from_map(Map::from([
                ("resource_id".into(), g.resource_id.clone().into()),
                ("modes".into(), Dynamic::from_array(modes)),
            ]))
        })
        .collect();
    let target = Map::from([
        ("fay_id".into(), input.target_fay_id.clone().into()),
        ("grants".into(), Dynamic::from_array(grants)),
    ]);
    let resource = Map::from([
        ("id".into(), input.resource.resource_id.clone().into()),
        ("metadata".into(), string_map(&input.resource.metadata)),
    ]);
    Dynamic::from_map(Map::from([
        ("source".into(), Dynamic::from_map(source)),
        ("target".into(), Dynamic::from_map(target)),
        ("now_ms".into(), int(input.now_ms)),
        ("resource".into(), Dynamic::from_map(resource)),
    ]))
}

fn string_map(map: &BTreeMap<String, String>) -> Dynamic {
    Dynamic::from_map(
        map.iter()
            .map(|(k, v)| (k.as_str().into(), v.clone().into()))
            .collect(),
    )
}

/// Unix milliseconds as a Rhai integer; values past `i64::MAX` (year
/// 292 million) saturate.
fn int(v: u64) -> Dynamic {
    Dynamic::from_int(i64::try_from(v).unwrap_or(i64::MAX))
}

/// Maps a Rhai error to ours, looking through function-call wrappers so that
/// a limit hit inside a function reports the limit.
fn classify(mut err: EvalAltResult) -> ScriptErrorKind {
    loop {
        err = match err {
            EvalAltResult::ErrorInFunctionCall(_, _, inner, _)
            | EvalAltResult::ErrorInModule(_, inner, _) => *inner,
            EvalAltResult::ErrorTooManyOperations(_) => return ScriptErrorKind::StepLimit,
            EvalAltResult::ErrorTerminated(..) => return ScriptErrorKind::TimeBudget,
            EvalAltResult::ErrorStackOverflow(_) => return ScriptErrorKind::CallDepth,
            EvalAltResult::ErrorDataTooLarge(what, _) => return ScriptErrorKind::TooLarge(what),
            EvalAltResult::ErrorTooManyVariables(_) => {
                return ScriptErrorKind::TooLarge("too many variables".into());
            }
            other => return ScriptErrorKind::Runtime(other.to_string()),
        };
    }
}
