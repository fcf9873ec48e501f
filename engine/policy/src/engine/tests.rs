use std::io;

use super::*;
use crate::config::{DefaultAction, UiChannel};
use crate::input::sample;
use crate::script::ScriptErrorKind;
use crate::script::tests::wall_clock;

/// Target wins iff the parameter `target` is greater than `source`.
const CONFIG: &str = r#"
default_policy = "script"

[scripts]
by_params = '#{ source: parse_int(params.source), target: parse_int(params.target) }'
broken_at_run = 'throw "no"'

[policies.script]
policy_type = "priority_script"
script_id = "by_params"
parameters = { source = "1", target = "2" }

[policies.failing]
policy_type = "priority_script"
script_id = "broken_at_run"

[policies.model]
policy_type = "ai_model"
model_endpoint = "http://127.0.0.1:9/decide"
context_fields = ["target.fay_id", "resource.id"]
decision_timeout_ms = 300

[policies.person]
policy_type = "human_decision"
ui_channel = "companion_app"
decision_timeout_seconds = 60
default_action = "allow"

[resources]
cam-1 = "model"
door = "person"

[ai_fallback.priority_script]
script_id = "by_params"
parameters = { source = "5", target = "1" }

[ai_fallback.human_decision]
ui_channel = "external_panel"
"#;

fn set() -> PolicySet {
    toml::from_str(CONFIG).unwrap()
}

fn engine() -> PolicyEngine {
    PolicyEngine::new(set(), ScriptLimits::default(), wall_clock()).unwrap()
}

fn model_call(engine: &mut PolicyEngine, now_ms: u64) -> ModelCall {
    match engine.evaluate("model", &sample::input(), now_ms).unwrap() {
        Step::CallModel(call) => call,
        other => panic!("expected a model call, got {other:?}"),
    }
}

fn answer(body: &str) -> Result<HttpResponse, HttpError> {
    Ok(HttpResponse {
        status: 200,
        body: body.as_bytes().to_vec(),
    })
}

#[test]
fn resources_map_to_policies() {
    let e = engine();
    assert_eq!(e.policy_for("cam-1"), Some("model"));
    assert_eq!(e.policy_for("door"), Some("person"));
    assert_eq!(e.policy_for("anything-else"), Some("script"));
    assert_eq!(e.policy_kind("model"), Some("ai_model"));
    assert_eq!(e.policy_kind("person"), Some("human_decision"));
    assert_eq!(e.policy_kind("script"), Some("priority_script"));
    assert_eq!(e.policy_kind("nope"), None);
}

#[test]
fn priority_script_decides_at_once() {
    let mut e = engine();
    assert_eq!(
        e.evaluate("script", &sample::input(), 0),
        Ok(Step::Decided(Verdict::Allow))
    );
}

#[test]
fn script_failures_are_errors_that_reject() {
    let mut e = engine();
    let err = e.evaluate("failing", &sample::input(), 0).unwrap_err();
    assert!(matches!(
        &err,
        PolicyError::Script(s) if matches!(s.kind, ScriptErrorKind::Runtime(_))
    ));
    assert_eq!(
        err.code(),
        dtp_codec::ErrorCode::E_HANDOVER_REJECTED_BY_POLICY
    );
    assert_eq!(
        e.evaluate("nope", &sample::input(), 0),
        Err(PolicyError::UnknownPolicy("nope".into()))
    );
}

#[test]
fn human_policy_asks_a_person() {
    let mut e = engine();
    let Step::AskHuman(h) = e.evaluate("person", &sample::input(), 0).unwrap() else {
        panic!("not a human step")
    };
    assert_eq!(h.ui_channel, UiChannel::CompanionApp);
    assert_eq!(h.timeout_ms(), 60_000);
    assert_eq!(h.default_action, DefaultAction::Allow);
}

#[test]
fn model_call_carries_the_configured_request() {
    let mut e = engine();
    let call = model_call(&mut e, 0);
    assert_eq!(call.endpoint, "http://127.0.0.1:9/decide");
    assert_eq!(call.timeout, Duration::from_millis(300));
    let body: serde_json::Value = serde_json::from_slice(&call.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"version": 1, "context": {
            "target": {"fay_id": "fay-b"}, "resource": {"id": "cam-1"}}})
    );
}

#[test]
fn model_decisions_are_followed_and_cached_under_five_seconds() {
    let mut e = engine();
    let input = sample::input();
    let call = model_call(&mut e, 1000);
    let step = e.on_model_reply(&call, &input, answer(r#"{"decision":"allow"}"#), 1000);
    assert_eq!(step, Ok(Step::Decided(Verdict::Allow)));
    // Within 5 s: the cached decision, no call.
    assert_eq!(
        e.evaluate("model", &input, 5999),
        Ok(Step::Decided(Verdict::Allow))
    );
    // After 5 s: a new call.
    let again = model_call(&mut e, 6000);
    let step = e.on_model_reply(
        &again,
        &input,
        answer(r#"{"decision":"reject","reason":"x"}"#),
        6000,
    );
    assert_eq!(
        step,
        Ok(Step::Decided(Verdict::reject("ai model rejected: x")))
    );
    assert!(matches!(
        e.evaluate("model", &input, 6001),
        Ok(Step::Decided(Verdict::Reject { .. }))
    ));
    e.purge_cache(20_000);
    model_call(&mut e, 20_000);
}

#[test]
fn require_human_goes_to_the_fallback_human_decision() {
    let mut e = engine();
    let input = sample::input();
    let call = model_call(&mut e, 0);
    let step = e.on_model_reply(&call, &input, answer(r#"{"decision":"require_human"}"#), 0);
    let Ok(Step::AskHuman(h)) = step else {
        panic!("{step:?}")
    };
    assert_eq!(h.ui_channel, UiChannel::ExternalPanel);
    assert_eq!(h.default_action, DefaultAction::Reject);
    // Cached as well: asking again within 5 s asks the person again.
    assert!(matches!(
        e.evaluate("model", &input, 10),
        Ok(Step::AskHuman(_))
    ));
}

#[test]
fn timeout_rejects_and_is_not_cached() {
    let mut e = engine();
    let input = sample::input();
    let call = model_call(&mut e, 0);
    let step = e
        .on_model_reply(&call, &input, Err(HttpError::Timeout), 0)
        .unwrap();
    assert_eq!(
        step,
        Step::Decided(Verdict::reject("ai model gave no decision within 300 ms"))
    );
    model_call(&mut e, 1);
}

#[test]
fn unavailable_model_falls_back_to_the_priority_script() {
    let mut e = engine();
    let input = sample::input();
    let call = model_call(&mut e, 0);
    for failure in [
        Err(HttpError::Connect(io::ErrorKind::ConnectionRefused)),
        Ok(HttpResponse {
            status: 503,
            body: vec![],
        }),
        answer("garbage"),
        Err(HttpError::TooLarge),
    ] {
        // The fallback script scores source 5, target 1: reject.
        let Ok(Step::FellBack {
            verdict: Verdict::Reject { reason },
            note,
        }) = e.on_model_reply(&call, &input, failure, 0)
        else {
            panic!("fallback did not reject")
        };
        assert!(note.starts_with("ai model unavailable ("), "{note}");
        assert!(reason.starts_with(&format!("{note}; ")), "{reason}");
        assert!(reason.contains("S_target 1 <= S_source 5"), "{reason}");
    }
    // Nothing was cached: the model is asked again.
    model_call(&mut e, 1);
}

#[test]
fn fallback_script_can_allow() {
    let mut set = set();
    let fb = set.ai_fallback.as_mut().unwrap();
    fb.priority_script
        .parameters
        .insert("target".into(), "9".into());
    let mut e = PolicyEngine::new(set, ScriptLimits::default(), wall_clock()).unwrap();
    let call = model_call(&mut e, 0);
    let step = e.on_model_reply(
        &call,
        &sample::input(),
        Err(HttpError::Io("reset".into())),
        0,
    );
    let note = "ai model unavailable (model connection failed: reset)";
    assert_eq!(
        step,
        Ok(Step::FellBack {
            verdict: Verdict::Allow,
            note: note.into(),
        })
    );
    // The terminal's answer says, for the audit log, who decided.
    assert_eq!(
        Step::outcome(step),
        PolicyOutcome::Allow {
            why: Some(format!("{note}; the fallback script allowed")),
        }
    );
}

#[test]
fn replies_for_other_policies_are_refused() {
    let mut e = engine();
    let mut call = model_call(&mut e, 0);
    call.policy = "script".into();
    assert_eq!(
        e.on_model_reply(
            &call,
            &sample::input(),
            answer(r#"{"decision":"allow"}"#),
            0
        ),
        Err(PolicyError::NotAModelPolicy("script".into()))
    );
    call.policy = "gone".into();
    assert_eq!(
        e.on_model_reply(
            &call,
            &sample::input(),
            answer(r#"{"decision":"allow"}"#),
            0
        ),
        Err(PolicyError::UnknownPolicy("gone".into()))
    );
}

#[test]
fn bad_configurations_fail_at_start_up() {
    let new =
        |s: PolicySet| PolicyEngine::new(s, ScriptLimits::default(), wall_clock()).unwrap_err();

    let mut s = set();
    s.scripts.insert("bad".into(), "let = ;".into());
    assert!(matches!(new(s), ConfigError::Script(e) if e.script_id == "bad"));

    let mut s = set();
    s.scripts.remove("broken_at_run");
    assert_eq!(
        new(s),
        ConfigError::UnknownScript {
            policy: "failing".into(),
            script_id: "broken_at_run".into()
        }
    );

    let mut s = set();
    s.ai_fallback = None;
    assert_eq!(new(s), ConfigError::MissingAiFallback.in_policy("model"));

    let mut s = set();
    s.ai_fallback.as_mut().unwrap().priority_script.script_id = "missing".into();
    assert!(matches!(new(s), ConfigError::UnknownScript { policy, .. } if policy == "ai_fallback"));

    let mut s = set();
    s.ai_fallback
        .as_mut()
        .unwrap()
        .human_decision
        .decision_timeout_seconds = 1;
    assert_eq!(
        new(s),
        ConfigError::HumanTimeoutOutOfRange(1).in_policy("ai_fallback")
    );

    let mut s = set();
    if let Some(HandoverPolicy::HumanDecision(h)) = s.policies.get_mut("person") {
        h.decision_timeout_seconds = 121;
    }
    let err = new(s);
    assert_eq!(
        err,
        ConfigError::HumanTimeoutOutOfRange(121).in_policy("person")
    );
    assert_eq!(
        err.to_string(),
        "policy \"person\": human_decision: decision_timeout_seconds = 121 is outside 5..=120"
    );

    let mut s = set();
    if let Some(HandoverPolicy::PriorityScript(p)) = s.policies.get_mut("script") {
        p.script_id.clear();
    }
    assert_eq!(new(s), ConfigError::EmptyScriptId.in_policy("script"));

    let mut s = set();
    s.resources.insert("lamp".into(), "missing".into());
    assert_eq!(
        new(s),
        ConfigError::UnknownPolicy {
            resource: "lamp".into(),
            policy: "missing".into()
        }
    );

    let mut s = set();
    s.default_policy = Some("missing".into());
    assert!(matches!(new(s), ConfigError::UnknownPolicy { resource, .. } if resource == "*"));

    let mut s = set();
    if let Some(HandoverPolicy::AiModel(a)) = s.policies.get_mut("model") {
        a.context_fields.push("target.credential".into());
    }
    assert_eq!(
        new(s),
        ConfigError::UnknownContextField("target.credential".into()).in_policy("model")
    );

    assert!(toml::from_str::<PolicySet>("surprise = 1").is_err());
    assert!(
        toml::from_str::<PolicySet>("[ai_fallback.priority_script]\nscript_id = \"s\"\nx = 1")
            .is_err()
    );
}

#[test]
fn an_empty_set_is_valid_but_knows_no_policy() {
    let mut e =
        PolicyEngine::new(PolicySet::default(), ScriptLimits::default(), wall_clock()).unwrap();
    assert_eq!(e.policy_for("cam-1"), None);
    assert!(e.evaluate("script", &sample::input(), 0).is_err());
}

/// The README's TOML and example script are real: they load and decide.
#[test]
fn readme_examples_work() {
    let readme = include_str!("../../README.md");
    let block = |fence: &str| {
        let start = readme.find(fence).unwrap() + fence.len();
        let len = readme[start..].find("```").unwrap();
        readme[start..start + len].to_owned()
    };
    let set: PolicySet = toml::from_str(&block("```toml\n")).unwrap();
    let mut e = PolicyEngine::new(set, ScriptLimits::default(), wall_clock()).unwrap();
    assert_eq!(e.policy_for("cam-1"), Some("camera_model"));
    // Source age 60 s, threshold 600 s: the target wins.
    assert_eq!(
        e.evaluate("seniority", &sample::input(), 0),
        Ok(Step::Decided(Verdict::Allow))
    );

    let mut scripts = ScriptRegistry::new(ScriptLimits::default(), wall_clock());
    scripts.load("example", &block("```rhai\n")).unwrap();
    let none = BTreeMap::new();
    let mut input = sample::input();
    // Heartbeat 10 s ago (fresh), target without configure: source 10 > 8.
    let s = scripts.scores("example", &input, &none).unwrap();
    assert!(!s.allows());
    // Idle past the grace period, target holds configure: 5 < 13.
    input.now_ms = input.source.last_heartbeat_ms + 60_000;
    input.target_grants[0]
        .modes
        .push(dtp_codec::AccessMode::Configure);
    assert!(scripts.scores("example", &input, &none).unwrap().allows());
}

#[test]
fn engine_and_calls_move_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PolicyEngine>();
    send_sync::<ModelCall>();
    send_sync::<crate::PendingDecisions>();
}
