//! Tests of the configuration's ranges and references.
#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;
use crate::policy::{DefaultAction, UiChannel};

fn script() -> PolicyRef {
    PolicyRef::PriorityScript {
        script_id: "s".into(),
        parameters: BTreeMap::new(),
    }
}

fn human(seconds: u32) -> PolicyRef {
    PolicyRef::HumanDecision {
        ui_channel: UiChannel::SystemDialog,
        decision_timeout_seconds: seconds,
        default_action: DefaultAction::Reject,
    }
}

fn base() -> TerminalConfig {
    let mut c = TerminalConfig::new("t1");
    c.policies
        .insert("p".into(), HandoverPolicyConfig::new(script()));
    let mut r = ResourceConfig::new("cam");
    r.handover_policy = Some("p".into());
    c.resources.push(r);
    c
}

#[test]
fn defaults_are_the_spec_defaults_and_valid() {
    let c = base();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.liveness.heartbeat_interval_ms, 10_000);
    assert_eq!(c.liveness.heartbeat_timeout_ms, 30_000);
    assert_eq!(
        (
            c.limits.per_terminal,
            c.limits.per_fay,
            c.limits.reads_per_resource
        ),
        (1024, 64, 32)
    );
    assert_eq!(c.handover.queue_capacity, 8);
    assert_eq!(c.policies["p"].hard_timeout(), 1_000);
    assert_eq!(c.human_id(), "human:t1");
}

#[test]
fn liveness_ranges_are_enforced() {
    for (i, t, ok) in [
        (999, 2_000, false),
        (1_000, 2_000, true),
        (60_000, 120_000, true),
        (60_001, 120_002, false),
        (10_000, 19_999, false),
        (10_000, 20_000, true),
        (10_000, 60_000, true),
        (10_000, 60_001, false),
    ] {
        let mut c = base();
        c.liveness = LivenessConfig {
            heartbeat_interval_ms: i,
            heartbeat_timeout_ms: t,
        };
        assert_eq!(c.validate().is_ok(), ok, "interval {i} timeout {t}");
    }
}

#[test]
fn hard_timeouts_are_checked_per_kind() {
    let ai = PolicyRef::AiModel {
        model_endpoint: "http://m".into(),
        context_fields: vec![],
        decision_timeout_ms: 500,
    };
    for (policy, t, ok) in [
        (script(), 499, false),
        (script(), 2_000, true),
        (script(), 2_001, false),
        (ai.clone(), 3_000, true),
        (ai, 3_001, false),
        (human(5), 4_999, false),
        (human(5), 5_000, true),
        (human(30), 120_000, true),
        (human(30), 120_001, false),
    ] {
        let mut c = base();
        let mut p = HandoverPolicyConfig::new(policy);
        p.hard_timeout_ms = Some(t);
        c.policies.insert("p".into(), p);
        assert_eq!(c.validate().is_ok(), ok, "timeout {t}");
    }
}

#[test]
fn every_other_error_is_reported() {
    let mut c = base();
    c.terminal_id.clear();
    assert_eq!(c.validate(), Err(ConfigError::EmptyTerminalId));

    let mut c = base();
    c.limits.per_fay = 0;
    assert_eq!(c.validate(), Err(ConfigError::ZeroLimit));

    let mut c = base();
    c.handover.queue_capacity = 9;
    assert_eq!(c.validate(), Err(ConfigError::QueueCapacity(9)));

    let mut c = base();
    c.handover.max_retries = 4;
    assert_eq!(c.validate(), Err(ConfigError::MaxRetries(4)));

    let mut c = base();
    c.revoke_retry_ms = 0;
    assert_eq!(c.validate(), Err(ConfigError::ZeroRevokeRetry));

    let mut c = base();
    let mut p = HandoverPolicyConfig::new(human(60));
    p.hard_timeout_ms = Some(30_000);
    c.policies.insert("p".into(), p);
    assert_eq!(
        c.validate(),
        Err(ConfigError::DecisionOutlivesHardTimeout("p".into()))
    );

    let mut c = base();
    c.policies.get_mut("p").unwrap().human_fallback = Some("p".into());
    assert_eq!(c.validate(), Err(ConfigError::BadHumanFallback("p".into())));

    let mut c = base();
    c.resources.push(ResourceConfig::new("cam"));
    assert_eq!(
        c.validate(),
        Err(ConfigError::DuplicateResource("cam".into()))
    );

    let mut c = base();
    c.resources[0].handover_policy = Some("nope".into());
    assert!(matches!(
        c.validate(),
        Err(ConfigError::UnknownPolicy { .. })
    ));
}

#[test]
fn human_fallback_to_a_human_policy_is_accepted() {
    let mut c = base();
    c.policies
        .insert("h".into(), HandoverPolicyConfig::new(human(30)));
    c.policies.get_mut("p").unwrap().human_fallback = Some("h".into());
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn config_parses_from_text_and_refuses_unknown_keys() {
    let text = r#"{
        "terminal_id": "t9",
        "policies": {"p": {"policy": {"policy_type": "human_decision",
            "ui_channel": "external_panel"}}},
        "resources": [{"resource_id": "arm", "handover_policy": "p"}]
    }"#;
    let c: TerminalConfig = serde_json::from_str(text).unwrap();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.policies["p"].hard_timeout(), 30_000);
    assert!(c.resources[0].available);
    let bad = r#"{"terminal_id": "t9", "colour": "red"}"#;
    assert!(serde_json::from_str::<TerminalConfig>(bad).is_err());
}
