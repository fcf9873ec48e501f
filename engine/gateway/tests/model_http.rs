//! SPEC HO-3b end to end: the policy engine and the plane's blocking model
//! client (`dtp_gateway::plane::post_json`) against a real HTTP server on
//! loopback playing the model, driven as the terminal's edge would drive
//! it (the call runs on a worker thread; time for the cache is passed in).
#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use dtp_codec::{AccessMode, SessionId};
use dtp_gateway::plane::{post_json, run_model_call};
use dtp_policy::ai::http::{HttpError, MAX_RESPONSE_BYTES};
use dtp_policy::{
    AiFallback, AiModel, DefaultAction, HandoverPolicy, Holder, HumanDecision, PolicyEngine,
    PolicyInput, PolicySet, PriorityScript, ResourceInfo, ScriptLimits, SourceSession, Step,
    TargetGrant, UiChannel, Verdict,
};
use dtp_test_kit::model::{Behaviour, ModelServer, closed_port, http_response, read_request};

fn input() -> PolicyInput {
    PolicyInput {
        source: SourceSession {
            session_id: SessionId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0042),
            fay_id: "fay-a".into(),
            access_mode: AccessMode::Execute,
            created_at_ms: 1_000,
            last_heartbeat_ms: 2_000,
            holder: Holder::Fay,
        },
        target_fay_id: "fay-b".into(),
        target_grants: vec![TargetGrant {
            resource_id: "arm-1".into(),
            modes: vec![AccessMode::Execute],
        }],
        now_ms: 3_000,
        resource: ResourceInfo {
            resource_id: "arm-1".into(),
            metadata: BTreeMap::new(),
        },
        handover_reason: "maintenance".into(),
        handover_metadata: BTreeMap::new(),
    }
}

/// An engine whose `model` policy calls `addr`; its fallback script allows
/// (target 2 > source 1), so a fallback is told apart from a timeout.
fn engine(addr: SocketAddr, timeout_ms: u32) -> PolicyEngine {
    let set = PolicySet {
        scripts: BTreeMap::from([("fixed".into(), "#{ source: 1, target: 2 }".into())]),
        policies: BTreeMap::from([(
            "model".into(),
            HandoverPolicy::AiModel(AiModel {
                model_endpoint: format!("http://{addr}/v1/decide"),
                context_fields: vec![
                    "source.fay_id".into(),
                    "target.fay_id".into(),
                    "reason".into(),
                ],
                decision_timeout_ms: timeout_ms,
            }),
        )]),
        resources: BTreeMap::new(),
        default_policy: Some("model".into()),
        ai_fallback: Some(AiFallback {
            priority_script: PriorityScript {
                script_id: "fixed".into(),
                parameters: BTreeMap::new(),
            },
            human_decision: HumanDecision {
                ui_channel: UiChannel::ExternalPanel,
                decision_timeout_seconds: 30,
                default_action: DefaultAction::Reject,
            },
        }),
    };
    PolicyEngine::new(set, ScriptLimits::default(), Arc::new(Instant::now)).unwrap()
}

/// The model could not decide; the fallback script (which allows) did.
fn assert_fell_back(step: Step) {
    assert!(
        matches!(
            &step,
            Step::FellBack {
                verdict: Verdict::Allow,
                note,
            } if note.starts_with("ai model unavailable (")
        ),
        "{step:?}"
    );
}

/// One evaluation as the edge runs it: a model call goes to a worker thread.
fn decide(engine: &mut PolicyEngine, now_ms: u64) -> Step {
    let input = input();
    match engine.evaluate("model", &input, now_ms).unwrap() {
        Step::CallModel(call) => {
            let worker = {
                let call = call.clone();
                thread::spawn(move || run_model_call(&call))
            };
            let result = worker.join().unwrap();
            engine
                .on_model_reply(&call, &input, result, now_ms)
                .unwrap()
        }
        other => other,
    }
}

#[test]
fn model_allows_and_sees_only_the_configured_context() {
    let model = ModelServer::start(Behaviour::Respond(http_response(
        "200 OK",
        r#"{"decision":"allow"}"#,
    )));
    let step = decide(&mut engine(model.addr, 500), 0);
    assert_eq!(step, Step::Decided(Verdict::Allow));
    assert_eq!(model.connections(), 1);
    let request = model.requests()[0].clone();
    assert!(
        request.head.starts_with("POST /v1/decide HTTP/1.1\r\n"),
        "{request:?}"
    );
    assert!(request.head.contains("Content-Type: application/json\r\n"));
    let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"version": 1, "context": {
            "source": {"fay_id": "fay-a"},
            "target": {"fay_id": "fay-b"},
            "reason": "maintenance",
        }})
    );
}

#[test]
fn model_rejects() {
    let model = ModelServer::start(Behaviour::Respond(http_response(
        "200 OK",
        r#"{"decision":"reject","reason":"arm busy"}"#,
    )));
    let step = decide(&mut engine(model.addr, 500), 0);
    assert_eq!(
        step,
        Step::Decided(Verdict::reject("ai model rejected: arm busy"))
    );
}

#[test]
fn model_requires_a_human() {
    let model = ModelServer::start(Behaviour::Respond(http_response(
        "200 OK",
        r#"{"decision":"require_human"}"#,
    )));
    let Step::AskHuman(h) = decide(&mut engine(model.addr, 500), 0) else {
        panic!("no human step")
    };
    assert_eq!(h.ui_channel, UiChannel::ExternalPanel);
}

#[test]
fn slow_model_is_a_reject() {
    let model = ModelServer::start(Behaviour::AfterHangUp(Vec::new()));
    let step = decide(&mut engine(model.addr, 200), 0);
    assert_eq!(
        step,
        Step::Decided(Verdict::reject("ai model gave no decision within 200 ms"))
    );
    assert_eq!(model.connections(), 1);
}

#[test]
fn model_down_falls_back_to_the_script() {
    let addr = SocketAddr::from(([127, 0, 0, 1], closed_port()));
    assert_fell_back(decide(&mut engine(addr, 500), 0));
    assert!(matches!(
        post_json(
            &format!("http://{addr}/"),
            b"{}",
            Duration::from_millis(500)
        ),
        Err(HttpError::Connect(_))
    ));
}

#[test]
fn garbage_answer_falls_back_to_the_script() {
    let model = ModelServer::start(Behaviour::Respond(http_response(
        "200 OK",
        "I think you should allow it",
    )));
    assert_fell_back(decide(&mut engine(model.addr, 500), 0));
    assert_eq!(model.connections(), 1);
}

#[test]
fn server_error_falls_back_to_the_script() {
    let model = ModelServer::start(Behaviour::Respond(http_response(
        "500 Internal Server Error",
        r#"{"decision":"reject"}"#,
    )));
    assert_fell_back(decide(&mut engine(model.addr, 500), 0));
    assert_eq!(model.connections(), 1);
}

#[test]
fn oversized_answer_falls_back_to_the_script() {
    let big = format!(
        r#"{{"decision":"reject","reason":"{}"}}"#,
        "x".repeat(MAX_RESPONSE_BYTES)
    );
    let model = ModelServer::start(Behaviour::Respond(http_response("200 OK", &big)));
    assert_fell_back(decide(&mut engine(model.addr, 500), 0));
    let direct = post_json(
        &format!("http://{}/", model.addr),
        b"{}",
        Duration::from_millis(500),
    );
    assert_eq!(direct, Err(HttpError::TooLarge));
}

#[test]
fn cached_decision_spares_the_model_for_five_seconds() {
    let model = ModelServer::start(Behaviour::Respond(http_response(
        "200 OK",
        r#"{"decision":"reject","reason":"no"}"#,
    )));
    let mut engine = engine(model.addr, 500);
    let first = decide(&mut engine, 10_000);
    assert!(matches!(first, Step::Decided(Verdict::Reject { .. })));
    assert_eq!(model.connections(), 1);
    // 4.999 s later: from the cache, the server is not called.
    assert_eq!(decide(&mut engine, 14_999), first);
    assert_eq!(model.connections(), 1);
    // 5 s later: the cache has expired, the server is called again.
    assert_eq!(decide(&mut engine, 15_000), first);
    assert_eq!(model.connections(), 2);
}

#[test]
fn responses_in_pieces_and_empty_bodies_are_read() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut BufReader::new(&s));
        for piece in [
            "HTTP/1.1 200 OK\r\nContent-",
            "Length: 20\r\n\r\n{\"decision\"",
            ":\"allow\"}",
        ] {
            s.write_all(piece.as_bytes()).unwrap();
            s.flush().unwrap();
        }
        let (mut s, _) = listener.accept().unwrap();
        read_request(&mut BufReader::new(&s));
        s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
    });
    let url = format!("http://{addr}/d");
    let r = post_json(&url, b"{}", Duration::from_secs(5)).unwrap();
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &br#"{"decision":"allow"}"#[..])
    );
    let r = post_json(&url, b"{}", Duration::from_secs(5)).unwrap();
    assert_eq!((r.status, r.body.len()), (204, 0));
}

#[test]
fn chunked_or_truncated_responses_are_refused() {
    let chunked = ModelServer::start(Behaviour::Respond(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
    ));
    let r = post_json(
        &format!("http://{}/", chunked.addr),
        b"{}",
        Duration::from_secs(5),
    );
    assert!(matches!(r, Err(HttpError::Malformed(_))), "{r:?}");

    let truncated = ModelServer::start(Behaviour::Respond(
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}".to_vec(),
    ));
    let r = post_json(
        &format!("http://{}/", truncated.addr),
        b"{}",
        Duration::from_secs(5),
    );
    assert!(matches!(r, Err(HttpError::Io(_))), "{r:?}");

    let r = post_json("https://127.0.0.1/", b"{}", Duration::from_secs(5));
    assert!(matches!(r, Err(HttpError::InvalidUrl(_))), "{r:?}");
}
