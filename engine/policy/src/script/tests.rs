#![allow(
    clippy::disallowed_methods,
    reason = "tests: the wall clock measures the time budget, as in the runtime"
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use crate::input::sample;

/// The wall clock, as the runtime passes it.
pub(crate) fn wall_clock() -> BudgetClock {
    Arc::new(Instant::now)
}

/// Scores by seniority: the older session keeps control unless the target
/// holds a `configure` grant on the resource and a parameter boosts it.
const SENIORITY: &str = r#"
    let age_s = (input.now_ms - input.source.created_at_ms) / 1000;
    let boost = if "boost" in params { parse_int(params.boost) } else { 0 };
    let target = 10 + boost;
    for g in input.target.grants {
        if g.resource_id == input.resource.id && "configure" in g.modes { target += 100; }
    }
    #{ source: 10 + age_s / 30, target: target }
"#;

/// The default limits with a generous time budget, for tests of what a
/// script computes: the budget has its own tests, and a loaded machine
/// must not turn their results into `TimeBudget`.
fn roomy() -> ScriptLimits {
    ScriptLimits {
        time_budget: Duration::from_secs(1),
        ..ScriptLimits::default()
    }
}

fn registry(id: &str, source: &str) -> ScriptRegistry {
    let mut r = ScriptRegistry::new(roomy(), wall_clock());
    r.load(id, source).unwrap();
    r
}

fn policy(id: &str, params: &[(&str, &str)]) -> PriorityScript {
    PriorityScript {
        script_id: id.into(),
        parameters: params
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
    }
}

fn run_err(source: &str) -> ScriptErrorKind {
    let r = registry("s", source);
    r.scores("s", &sample::input(), &BTreeMap::new())
        .unwrap_err()
        .kind
}

fn compile_err(source: &str) -> ScriptErrorKind {
    let mut r = ScriptRegistry::new(ScriptLimits::default(), wall_clock());
    let err = r.load("s", source).unwrap_err();
    assert_eq!(err.script_id, "s");
    assert!(!r.contains("s"));
    err.kind
}

#[test]
fn higher_target_score_allows() {
    let r = registry("seniority", SENIORITY);
    // Source age 60 s → S_source 12; S_target 10 + 5.
    let v = r
        .decide(&policy("seniority", &[("boost", "5")]), &sample::input())
        .unwrap();
    assert_eq!(v, Verdict::Allow);
}

#[test]
fn lower_target_score_rejects() {
    let r = registry("seniority", SENIORITY);
    let v = r
        .decide(&policy("seniority", &[]), &sample::input())
        .unwrap();
    assert_eq!(
        v,
        Verdict::reject("priority script \"seniority\": S_target 10 <= S_source 12")
    );
}

#[test]
fn equal_scores_reject() {
    let r = registry("seniority", SENIORITY);
    let scores = r
        .scores(
            "seniority",
            &sample::input(),
            &policy("seniority", &[("boost", "2")]).parameters,
        )
        .unwrap();
    assert_eq!(
        (scores.source, scores.target),
        (Score::Int(12), Score::Int(12))
    );
    assert!(!scores.allows());
    let v = r
        .decide(&policy("seniority", &[("boost", "2")]), &sample::input())
        .unwrap();
    assert!(!v.is_allow());
}

#[test]
fn script_sees_every_input_field() {
    let r = registry(
        "echo",
        r#"
        let s = input.source;
        let ok = s.session_id == "01900000-0000-7000-8000-000000000001"
            && s.fay_id == "fay-a" && s.access_mode == "write" && s.holder == "fay"
            && s.created_at_ms == 1700000000000 && s.last_heartbeat_ms == 1700000050000
            && input.target.fay_id == "fay-b"
            && input.target.grants[0].modes == ["read", "write"]
            && input.now_ms == 1700000060000
            && input.resource.id == "cam-1" && input.resource.metadata.kind == "camera"
            && params.x == "y"
            && input.keys().len() == 4;
        #{ source: 0, target: if ok { 1 } else { -1 } }
        "#,
    );
    assert_eq!(
        r.decide(&policy("echo", &[("x", "y")]), &sample::input())
            .unwrap(),
        Verdict::Allow
    );
}

#[test]
fn reason_and_metadata_are_not_script_inputs() {
    // HO-3a's inputs only: the handover reason and metadata are not shown,
    // and reading a missing property is an error, not ().
    for source in [
        "input.reason; #{source: 0, target: 1}",
        "input.metadata; #{source: 0, target: 1}",
    ] {
        assert!(
            matches!(run_err(source), ScriptErrorKind::Runtime(_)),
            "{source}"
        );
    }
}

#[test]
fn mixed_int_and_float_scores_compare() {
    let r = registry("f", "#{ source: 1, target: 1.5 }");
    assert!(
        r.scores("f", &sample::input(), &BTreeMap::new())
            .unwrap()
            .allows()
    );
    let r = registry("f", "#{ source: 2.0, target: 2 }");
    assert!(
        !r.scores("f", &sample::input(), &BTreeMap::new())
            .unwrap()
            .allows()
    );
}

/// What stops an endless loop under `limits`, timed by `clock`.
fn spin_stopped_by(limits: ScriptLimits, clock: BudgetClock) -> ScriptErrorKind {
    let mut r = ScriptRegistry::new(limits, clock);
    r.load("spin", "loop { } #{ source: 0, target: 1 }")
        .unwrap();
    r.scores("spin", &sample::input(), &BTreeMap::new())
        .unwrap_err()
        .kind
}

#[test]
fn infinite_loop_is_stopped_by_the_step_limit() {
    let limits = ScriptLimits {
        // Generous, so only the step limit can stop it.
        time_budget: Duration::from_secs(3600),
        ..ScriptLimits::default()
    };
    assert_eq!(
        spin_stopped_by(limits, wall_clock()),
        ScriptErrorKind::StepLimit
    );
}

#[test]
fn time_budget_stops_a_run_the_step_limit_would_not() {
    let limits = ScriptLimits {
        max_operations: 0, // Rhai: unlimited
        time_budget: Duration::from_millis(1),
        ..ScriptLimits::default()
    };
    assert_eq!(
        spin_stopped_by(limits, wall_clock()),
        ScriptErrorKind::TimeBudget
    );
}

/// The engine is built once and reused: every run's budget counts from
/// its own start, not from the registry's first run, and a run after one
/// that was stopped is not stopped for it.
#[test]
fn each_run_of_a_reused_engine_has_its_own_budget() {
    let (clock, reads) = counting_clock(Duration::from_millis(1));
    let limits = ScriptLimits {
        max_operations: 0, // Rhai: unlimited
        time_budget: Duration::from_millis(10),
        ..ScriptLimits::default()
    };
    let mut r = ScriptRegistry::new(limits, clock);
    r.load("spin", "loop { } #{ source: 0, target: 1 }")
        .unwrap();
    r.load("quick", "#{ source: 0, target: 1 }").unwrap();
    let input = sample::input();
    for _ in 0..2 {
        let before = reads.load(Ordering::Relaxed);
        let e = r.scores("spin", &input, &BTreeMap::new()).unwrap_err();
        assert_eq!(e.kind, ScriptErrorKind::TimeBudget);
        // Its own start, then one read per check until 10 ms passed.
        assert!(reads.load(Ordering::Relaxed) - before >= 12);
        assert!(r.scores("quick", &input, &BTreeMap::new()).is_ok());
    }
}

#[test]
fn the_time_budget_is_measured_by_the_callers_clock() {
    // A virtual clock that moves 1 ms per read: the run ends on the budget
    // after a bounded number of checks, whatever the real time.
    let t0 = Instant::now();
    let reads = Arc::new(AtomicU64::new(0));
    let counted = reads.clone();
    let clock: BudgetClock =
        Arc::new(move || t0 + Duration::from_millis(counted.fetch_add(1, Ordering::Relaxed)));
    let limits = ScriptLimits {
        max_operations: 0, // Rhai: unlimited
        time_budget: Duration::from_millis(10),
        ..ScriptLimits::default()
    };
    assert_eq!(spin_stopped_by(limits, clock), ScriptErrorKind::TimeBudget);
    // The start, then one read per check until more than 10 ms passed.
    assert!(reads.load(Ordering::Relaxed) >= 12);
}

#[test]
fn deep_recursion_is_stopped() {
    let kind = run_err("fn down(n) { down(n + 1) } down(0)");
    assert_eq!(kind, ScriptErrorKind::CallDepth);
}

#[test]
fn expression_nesting_is_a_compile_error() {
    let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
    assert!(matches!(compile_err(&deep), ScriptErrorKind::Compile(_)));
}

#[test]
fn oversized_data_is_stopped() {
    let kind = run_err("let s = \"x\"; loop { s += s; }");
    assert!(matches!(kind, ScriptErrorKind::TooLarge(_)), "{kind:?}");
    let kind = run_err("let a = []; loop { a.push(1); }");
    assert!(matches!(kind, ScriptErrorKind::TooLarge(_)), "{kind:?}");
    let mut r = ScriptRegistry::new(
        ScriptLimits {
            max_map_len: 8,
            ..roomy()
        },
        wall_clock(),
    );
    // Rhai checks a map's size when it is merged, passed or returned; a
    // key added by index is bounded by the step limit only.
    r.load(
        "m",
        "let m = #{}; let i = 0; loop { let n = #{}; n[`k${i}`] = i; m += n; i += 1; }",
    )
    .unwrap();
    let kind = r
        .scores("m", &sample::input(), &BTreeMap::new())
        .unwrap_err()
        .kind;
    assert!(matches!(kind, ScriptErrorKind::TooLarge(_)), "{kind:?}");
}

#[test]
fn import_print_debug_and_eval_do_not_compile() {
    for source in [
        "import \"os\" as os; #{source: 0, target: 1}",
        "print(\"hello\"); #{source: 0, target: 1}",
        "debug(\"hello\"); #{source: 0, target: 1}",
        "eval(\"1\"); #{source: 0, target: 1}",
    ] {
        assert!(
            matches!(compile_err(source), ScriptErrorKind::Compile(_)),
            "{source}"
        );
    }
}

#[test]
fn a_compile_error_quoting_the_script_stays_on_one_line() {
    // rhai quotes the bad token back, carriage return and all.
    let ScriptErrorKind::Compile(what) = compile_err("0 + 'a\rb'") else {
        panic!("compiled");
    };
    assert!(what.contains("\\r"), "{what}");
    assert!(!what.contains(['\r', '\n']), "{what}");
}

#[test]
fn clock_and_undeclared_names_are_unavailable() {
    assert!(matches!(
        run_err("let t = timestamp(); #{source: 0, target: 1}"),
        ScriptErrorKind::Runtime(_)
    ));
    // Strict variables: a name that is not declared does not compile.
    assert!(matches!(
        compile_err("#{source: env, target: 1}"),
        ScriptErrorKind::Compile(_)
    ));
}

#[test]
fn inputs_are_read_only() {
    for source in [
        "input.now_ms = 0; #{source: 0, target: 1}",
        "input.source.fay_id = \"z\"; #{source: 0, target: 1}",
        "input.target.grants[0].modes = []; #{source: 0, target: 1}",
        "input.resource.metadata.kind = \"x\"; #{source: 0, target: 1}",
        "input = 1; #{source: 0, target: 1}",
        "params = #{}; #{source: 0, target: 1}",
    ] {
        let r = registry("s", source);
        let p = BTreeMap::from([("x".to_string(), "y".to_string())]);
        let err = r.scores("s", &sample::input(), &p).unwrap_err();
        assert!(
            matches!(err.kind, ScriptErrorKind::Runtime(_)),
            "{source}: {err}"
        );
    }
    let r = registry("s", "params.x = \"z\"; #{source: 0, target: 1}");
    let p = BTreeMap::from([("x".to_string(), "y".to_string())]);
    assert!(r.scores("s", &sample::input(), &p).is_err());
}

#[test]
fn keys_a_run_adds_to_its_inputs_do_not_outlive_it() {
    // Rhai lets a script add a key to a constant map (not change one); the
    // maps are built afresh for every run, so nothing carries over.
    let r = registry(
        "s",
        "let seen = \"seen\" in input; input.seen = true; #{source: 0, target: if seen { 2 } else { 1 }}",
    );
    for _ in 0..3 {
        let scores = r.scores("s", &sample::input(), &BTreeMap::new()).unwrap();
        assert_eq!(scores.target, Score::Int(1));
    }
}

#[test]
fn wrong_return_types_are_errors() {
    for source in [
        "42",
        "true",
        "#{ source: 1 }",
        "#{ source: 1, target: \"2\" }",
        "#{ source: 1, target: 2, extra: 3 }",
        "#{ src: 1, target: 2 }",
        "#{ source: 0.0 / 0.0, target: 1 }",
        "[1, 2]",
    ] {
        assert!(
            matches!(run_err(source), ScriptErrorKind::Output(_)),
            "{source}"
        );
    }
}

#[test]
fn runtime_errors_are_typed() {
    assert!(matches!(
        run_err("throw \"no\";"),
        ScriptErrorKind::Runtime(_)
    ));
    assert!(matches!(
        run_err("let x = 1 / 0; #{source: x, target: 1}"),
        ScriptErrorKind::Runtime(_)
    ));
}

#[test]
fn same_input_same_output_every_time() {
    let r = registry(
        "busy",
        r#"
        let m = #{};
        for i in 0..50 { m[`k${i % 7}`] = i * 31 % 17; }
        let total = 0;
        for k in m.keys() { total += m[k] * k.len(); }
        #{ source: total, target: total / 2 + 0.5 }
        "#,
    );
    let input = sample::input();
    let first = r.scores("busy", &input, &BTreeMap::new()).unwrap();
    for _ in 0..100 {
        assert_eq!(r.scores("busy", &input, &BTreeMap::new()).unwrap(), first);
    }
}

#[test]
fn registry_errors() {
    let mut r = registry("s", "#{source: 0, target: 1}");
    assert_eq!(
        r.load("s", "#{source: 0, target: 1}").unwrap_err().kind,
        ScriptErrorKind::Duplicate
    );
    assert_eq!(
        r.scores("nope", &sample::input(), &BTreeMap::new())
            .unwrap_err()
            .kind,
        ScriptErrorKind::Unknown
    );
    assert!(matches!(
        compile_err("let = ;"),
        ScriptErrorKind::Compile(_)
    ));
    assert_eq!(r.limits(), &roomy());
    assert!(format!("{r:?}").contains("\"s\""));
}

/// A clock for a run that moves `step` per read, and its read count.
fn counting_clock(step: Duration) -> (BudgetClock, Arc<AtomicU64>) {
    let t0 = Instant::now();
    let reads = Arc::new(AtomicU64::new(0));
    let counted = reads.clone();
    let clock: BudgetClock = Arc::new(move || {
        let n = counted.fetch_add(1, Ordering::Relaxed);
        t0 + step * u32::try_from(n).unwrap_or(u32::MAX)
    });
    (clock, reads)
}

/// DESIGN §3: with the default limits, a runaway script holds the control
/// thread no longer than [`CONTROL_THREAD_BUDGET`] (plus one check of
/// [`BUDGET_CHECK_EVERY`] operations): on a clock that moves 1 ms per
/// read, the run ends on its budget after at most budget + 2 reads.
#[test]
fn a_runaway_script_is_held_to_the_control_thread_budget() {
    assert!(ScriptLimits::default().time_budget <= CONTROL_THREAD_BUDGET);
    assert!(CONTROL_THREAD_BUDGET <= Duration::from_millis(10));
    let (clock, reads) = counting_clock(Duration::from_millis(1));
    assert_eq!(
        spin_stopped_by(ScriptLimits::default(), clock),
        ScriptErrorKind::TimeBudget
    );
    let budget_ms = CONTROL_THREAD_BUDGET.as_millis() as u64;
    assert!(reads.load(Ordering::Relaxed) <= budget_ms + 2, "{reads:?}");
}

/// DESIGN §3: when the clock does not move (a stalled or coarse clock),
/// the operation limit alone ends a runaway run, after at most
/// `max_operations` operations.
#[test]
fn a_runaway_script_on_a_frozen_clock_ends_on_the_step_limit() {
    let (clock, reads) = counting_clock(Duration::ZERO);
    assert_eq!(
        spin_stopped_by(ScriptLimits::default(), clock),
        ScriptErrorKind::StepLimit
    );
    let checks = ScriptLimits::default().max_operations / BUDGET_CHECK_EVERY;
    assert!(reads.load(Ordering::Relaxed) <= checks + 2, "{reads:?}");
}
