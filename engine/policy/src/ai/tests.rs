use serde_json::Value;

use super::http::{HttpError, HttpResponse};
use super::*;
use crate::input::sample;

fn request(fields: &[ContextField]) -> Value {
    serde_json::from_slice(&decision_request(fields, &sample::input())).unwrap()
}

#[test]
fn request_holds_only_the_configured_fields() {
    let v = request(&[ContextField::TargetFayId, ContextField::NowMs]);
    assert_eq!(
        v,
        serde_json::json!({"version": 1, "context": {
            "target": {"fay_id": "fay-b"},
            "now_ms": 1_700_000_060_000_u64,
        }})
    );
}

#[test]
fn default_request_names_source_target_resource_and_reason() {
    let v = request(&ContextField::DEFAULT);
    assert_eq!(
        v["context"],
        serde_json::json!({
            "source": {"fay_id": "fay-a", "access_mode": "write"},
            "target": {"fay_id": "fay-b"},
            "resource": {"id": "cam-1"},
            "reason": "operator shift change",
        })
    );
}

#[test]
fn full_request_carries_no_secret_and_every_field_once() {
    let bytes = decision_request(&ContextField::ALL, &sample::input());
    let text = String::from_utf8(bytes).unwrap();
    for word in [
        "signature",
        "key_id",
        "issuer",
        "descriptor",
        "noise",
        "secret",
    ] {
        assert!(!text.contains(word), "{word} in {text}");
    }
    let v: Value = serde_json::from_str(&text).unwrap();
    let ctx = &v["context"];
    assert_eq!(ctx["source"].as_object().unwrap().len(), 6);
    assert_eq!(ctx["source"]["holder"], "fay");
    assert_eq!(
        ctx["target"]["grants"],
        serde_json::json!([{"resource_id": "cam-1", "modes": ["read", "write"]}])
    );
    assert_eq!(ctx["resource"]["metadata"]["kind"], "camera");
    assert_eq!(ctx["metadata"]["ticket"], "T-17");
}

#[test]
fn field_names_round_trip() {
    for f in ContextField::ALL {
        assert_eq!(ContextField::from_name(f.name()), Some(f));
    }
    assert_eq!(ContextField::from_name("target.credential"), None);
}

#[test]
fn answers_parse() {
    assert_eq!(parse_answer(br#"{"decision":"allow"}"#), Ok(Verdict::Allow));
    assert_eq!(
        parse_answer(br#"{"decision":"require_human","reason":"unsure"}"#),
        Ok(Verdict::RequireHuman)
    );
    assert_eq!(
        parse_answer(br#"{"decision":"reject","reason":"busy"}"#),
        Ok(Verdict::reject("ai model rejected: busy"))
    );
}

#[test]
fn long_reasons_are_cut_on_a_char_boundary() {
    let body = format!(r#"{{"decision":"reject","reason":"{}"}}"#, "é".repeat(400));
    let Ok(Verdict::Reject { reason }) = parse_answer(body.as_bytes()) else {
        panic!("not a reject")
    };
    let why = reason.strip_prefix("ai model rejected: ").unwrap();
    assert_eq!(why.len(), MAX_REASON_LEN);
}

#[test]
fn garbage_answers_are_errors() {
    for body in [
        &b""[..],
        b"allow",
        b"{}",
        br#"{"decision":"maybe"}"#,
        br#"{"decision":"ALLOW"}"#,
        br#"{"decision":"allow","confidence":0.9}"#,
        br#"{"decision":1}"#,
        br#"[{"decision":"allow"}]"#,
        br#"{"decision":"reject","reason":7}"#,
    ] {
        assert!(
            parse_answer(body).is_err(),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn classification_follows_the_failure_rule() {
    let ok = |status, body: &str| {
        Ok(HttpResponse {
            status,
            body: body.as_bytes().to_vec(),
        })
    };
    assert_eq!(
        classify(ok(200, r#"{"decision":"allow"}"#)),
        ModelReply::Decided(Verdict::Allow)
    );
    assert_eq!(classify(Err(HttpError::Timeout)), ModelReply::Timeout);
    let unavailable = [
        classify(Err(HttpError::Connect(
            std::io::ErrorKind::ConnectionRefused,
        ))),
        classify(Err(HttpError::Io("reset".into()))),
        classify(Err(HttpError::TooLarge)),
        classify(Err(HttpError::Malformed("x".into()))),
        classify(Err(HttpError::Resolve("x".into()))),
        classify(ok(503, r#"{"decision":"allow"}"#)),
        classify(ok(404, "")),
        classify(ok(200, "garbage")),
    ];
    for reply in unavailable {
        assert!(matches!(reply, ModelReply::Unavailable(_)), "{reply:?}");
    }
}
