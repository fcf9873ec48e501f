//! SPEC HO-3b through the plane: a model answering over real local HTTP
//! decides on a worker thread; with the model down, the fallback priority
//! script decides.

use dtp_codec::{AuthOutcome, ErrorCode};
use dtp_test_kit::model::ModelServer;
pub(crate) use dtp_test_kit::model::closed_port;

use crate::rig::{Rig, auth_result, config};

/// SPEC HO-3b: fay-c, whom the fallback script would refuse, asks for the
/// held `cam`; the model (real HTTP, on a worker thread) allows. The answer
/// comes at a later tick, woken by the worker; the model saw only the
/// configured context fields.
#[test]
fn ai_model_allows_over_local_http() {
    let server = ModelServer::answering(r#"{"decision":"allow"}"#);
    let mut rig = Rig::new(config(server.port()));
    rig.up(0, 1);
    rig.up(0, 3);
    rig.session(0, 1, "fay-a", "cam");
    let (id, out) = rig.auth(0, 3, "fay-c", "cam");
    assert!(
        auth_result(&out, 0, 3, id).is_none(),
        "decided before the model: {out:?}"
    );
    assert_eq!(rig.plane.metrics().model_calls, 1);

    let out = rig.tick_until("the model's answer", |out| {
        auth_result(out, 0, 3, id).is_some()
    });
    assert!(
        matches!(
            auth_result(&out, 0, 3, id),
            Some(AuthOutcome::Granted { .. })
        ),
        "{out:?}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&requests[0].body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"version": 1, "context": {
            "source": {"fay_id": "fay-a"}, "target": {"fay_id": "fay-c"}}})
    );
}

/// SPEC HO-3b: the model is down (connection refused), so the fallback
/// priority script decides: fay-c is refused, and says why.
#[test]
fn ai_model_down_falls_back_to_the_script() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 3);
    rig.session(0, 1, "fay-a", "cam");
    let (id, _) = rig.auth(0, 3, "fay-c", "cam");
    let out = rig.tick_until("the fallback's answer", |out| {
        auth_result(out, 0, 3, id).is_some()
    });
    match auth_result(&out, 0, 3, id) {
        Some(AuthOutcome::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
            assert!(message.contains("ai model unavailable"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// SPEC HO-3b: with the model down, the fallback script lets fay-b win.
#[test]
fn ai_model_down_fallback_script_can_allow() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 2);
    rig.session(0, 1, "fay-a", "cam");
    let (id, _) = rig.auth(0, 2, "fay-b", "cam");
    let out = rig.tick_until("the fallback's answer", |out| {
        auth_result(out, 0, 2, id).is_some()
    });
    assert!(
        matches!(
            auth_result(&out, 0, 2, id),
            Some(AuthOutcome::Granted { .. })
        ),
        "{out:?}"
    );
}

/// SPEC HO-3b → HO-3c: the model answers require_human and `cam`'s policy
/// has no human_fallback: the person of `ai_fallback.human_decision` is
/// asked (under the plane's policy `ai_fallback`, with its 5 s), and allows.
#[test]
fn ai_model_require_human_asks_the_ai_fallback_person() {
    let server = ModelServer::answering(r#"{"decision":"require_human"}"#);
    let mut rig = Rig::new(config(server.port()));
    rig.up(0, 1);
    rig.up(0, 3);
    rig.session(0, 1, "fay-a", "cam");
    let (id, _) = rig.auth(0, 3, "fay-c", "cam");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let entry = loop {
        let (pending, _) = rig.admin(|h| h.pending_decisions());
        if let Some(entry) = pending.unwrap().into_iter().next() {
            break entry;
        }
        assert!(std::time::Instant::now() < deadline, "nobody was asked");
    };
    assert_eq!(entry.view.target_fay_id, "fay-c");
    assert_eq!(entry.deadline_ms, rig.unix() + 5_000, "ai_fallback's time");
    let (handovers, _) = rig.admin(|h| h.pending_handovers());
    assert_eq!(handovers.unwrap()[0].policy, "ai_fallback");
    let handover_id = entry.handover_id;
    let (decided, out) = rig.admin(move |h| h.decide(handover_id, true));
    decided.unwrap();
    assert!(
        matches!(
            auth_result(&out, 0, 3, id),
            Some(AuthOutcome::Granted { .. })
        ),
        "{out:?}"
    );
}
