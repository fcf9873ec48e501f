//! SPEC HO-3b end to end: `dtp serve` with an `ai_model` handover policy
//! asks a model server this test runs (real HTTP/1.1 on 127.0.0.1), and a
//! Fay's AuthRequest for a held resource is decided by what the model
//! answers — allow, reject, require_human (then a person, HO-3c), too late
//! (the call's timeout: reject), a 2xx that is no answer, or nothing
//! listening (both: the fallback priority script decides). Each case is
//! checked where the Fays see it, in `dtp ctl`, in the audit log (read back
//! with its own reader, which checks every line and the `seq` chain) and in
//! what the model was sent: the configured context fields, no credential.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the terminal tests; each uses part of it"
)]
mod support;

use std::path::Path;

use dtp_codec::{
    AccessMode, AuthOutcome, ControlMessage, ErrorCode, HandoverFailedNotification,
    HandoverFailedReason, SessionId,
};
use dtp_test_kit::Fay;
use dtp_test_kit::model::{Behaviour, ModelServer, closed_port, http_response};
use serde_json::{Value, json};
use support::{FayFiles, Serve, Setup, eventually};

/// The fallback priority script: the Fay named by `params.winner` wins.
const WINNER: &str =
    "#{ source: 1, target: if input.target.fay_id == params.winner { 2 } else { 0 } }";

/// The model call's own timeout in the answering cases: generous, for a
/// loaded machine (the call runs in real time).
const GENEROUS_MS: u32 = 2_500;

/// `arm`, held under the `ai_model` policy `model` (the model at `port`,
/// its call timeout `call_ms`, the HO-7 hard timeout its maximum, 3 s);
/// `require_human` goes to the person on the panel (`ask`: 5 s, default
/// reject); the fallback script lets fay-b win (and the fallback person,
/// asked only without `ask`, has 30 s, default allow).
fn terminal_section(setup: &Setup, port: u16, call_ms: u32) -> String {
    format!(
        r##"[terminal.control]
terminal_id = "t1"

[[terminal.control.resources]]
resource_id = "arm"
handover_policy = "model"
metadata = {{ kind = "robot arm" }}

[terminal.control.policies.model]
policy = {{ policy_type = "ai_model", model_endpoint = "http://127.0.0.1:{port}/v1/decide", context_fields = ["source.fay_id", "source.access_mode", "target.fay_id", "target.grants", "resource.id", "resource.metadata", "reason"], decision_timeout_ms = {call_ms} }}
hard_timeout_ms = 3000
human_fallback = "ask"

[terminal.control.policies.ask]
policy = {{ policy_type = "human_decision", ui_channel = "external_panel", decision_timeout_seconds = 5 }}

[terminal.policy.scripts]
winner = "{WINNER}"

[terminal.policy.ai_fallback]
priority_script = {{ script_id = "winner", parameters = {{ winner = "fay-b" }} }}
human_decision = {{ ui_channel = "external_panel", default_action = "allow" }}

[terminal.audit]
path = "{}"
"##,
        setup.dir.join("audit.jsonl").display()
    )
}

/// A gateway whose `arm` is held by fay-a, and two Fays who may want it:
/// fay-b (whom the fallback script lets win) and fay-c (whom it refuses).
struct Case {
    setup: Setup,
    serve: Serve,
    holder: Fay,
    held: SessionId,
    b: Fay,
    c: Fay,
    /// fay-c's files (its credential must never reach the model).
    c_files: FayFiles,
}

impl Case {
    fn start(name: &str, port: u16, call_ms: u32) -> Self {
        Self::configured(name, |setup| terminal_section(setup, port, call_ms))
    }

    /// As [`Case::start`], the `[terminal]` section made by `section`.
    fn configured(name: &str, section: impl FnOnce(&Setup) -> String) -> Self {
        let setup = Setup::new(name);
        let files: Vec<FayFiles> = ["fay-a", "fay-b", "fay-c"]
            .into_iter()
            .map(|id| setup.fay(id, &["arm=write"]))
            .collect();
        let serve = Serve::start(&setup.config(&section(&setup)));
        let mut fays = files
            .iter()
            .map(|f| Fay::connect(serve.addr, &setup.fay_config(f)));
        let mut holder = fays.next().unwrap();
        let (b, c) = (fays.next().unwrap(), fays.next().unwrap());
        let held = holder.session(1, "arm", AccessMode::Write);
        let c_files = files.into_iter().nth(2).unwrap();
        Case {
            setup,
            serve,
            holder,
            held,
            b,
            c,
            c_files,
        }
    }

    /// The one session of the arm, from `dtp ctl`: its id and state.
    fn only_session(&self) -> (String, String) {
        let sessions = self.serve.ctl_json(&["sessions"]);
        let list = sessions["sessions"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{sessions}");
        let resources = self.serve.ctl_json(&["resources"]);
        assert_eq!(
            resources["resources"][0]["controllers"],
            json!([list[0]["session_id"]]),
            "{resources}"
        );
        (
            list[0]["session_id"].as_str().unwrap().to_owned(),
            list[0]["state"].as_str().unwrap().to_owned(),
        )
    }

    /// fay-a still holds the arm, and is told the handover failed.
    fn holder_kept_the_arm(&mut self, reason: HandoverFailedReason) {
        let failed = failure_notice(&mut self.holder);
        assert_eq!(failed.source_session_id, self.held);
        assert_eq!(failed.reason, reason);
        let (sid, state) = self.only_session();
        assert_eq!((sid, state.as_str()), (self.held.to_string(), "active"));
    }

    /// fay-a's session was handed over; `target` holds the arm alone.
    fn handed_to(&mut self, target: SessionId) {
        assert_eq!(
            self.holder.terminated(self.held).as_deref(),
            Some("handed_over")
        );
        let (sid, state) = self.only_session();
        assert_eq!((sid, state.as_str()), (target.to_string(), "active"));
    }

    /// The one handover record of the audit log (once written), the log
    /// read back whole by its reader; `policy` is the policy that decided
    /// last (a model's `require_human` hands the handover to its
    /// `human_fallback`).
    fn handover_record(&self, policy: &str) -> Value {
        let path = self.setup.dir.join("audit.jsonl");
        let records = eventually("the handover's audit record", || {
            let handovers: Vec<Value> = verified_records(&path)
                .into_iter()
                .filter(|r| r["record"] == "handover")
                .collect();
            (!handovers.is_empty()).then_some(handovers)
        });
        assert_eq!(records.len(), 1, "{records:?}");
        let r = records.into_iter().next().unwrap();
        assert_eq!(r["resource_id"], "arm");
        assert_eq!(r["source_session_id"], self.held.to_string());
        assert_eq!(r["source_fay_id"], "fay-a");
        assert_eq!(r["policy"], policy);
        assert_eq!(r["trigger"], "auth_request");
        r
    }
}

/// The audit log read back by the project's reader: every line parses, the
/// `seq` chain has no gap, no torn tail; the records.
fn verified_records(path: &Path) -> Vec<Value> {
    let mut reader = dtp_gateway::plane::open_audit_file::<Value>(path).unwrap();
    let mut records = Vec::new();
    let mut last = 0;
    for envelope in &mut reader {
        let envelope = envelope.unwrap();
        assert_eq!(envelope.seq, last + 1, "seq chain");
        last = envelope.seq;
        records.push(envelope.record);
    }
    assert!(reader.torn_tail().is_none(), "a torn audit record");
    records
}

/// The next HandoverFailedNotification `fay` gets.
fn failure_notice(fay: &mut Fay) -> HandoverFailedNotification {
    fay.control("HandoverFailedNotification", |m| match m {
        ControlMessage::HandoverFailedNotification(n) => Some(n.clone()),
        _ => None,
    })
}

/// The refusal of `request_id`: its code and message.
fn refused(fay: &mut Fay, request_id: u64) -> (ErrorCode, String) {
    match fay.outcome(request_id) {
        AuthOutcome::Refused { code, message } => (code, message),
        granted => panic!("{} was not refused: {granted:?}", fay.fay_id()),
    }
}

/// The session granted for `request_id`.
fn granted(fay: &mut Fay, request_id: u64) -> SessionId {
    match fay.outcome(request_id) {
        AuthOutcome::Granted { session_id } => session_id,
        refused => panic!("{} was refused: {refused:?}", fay.fay_id()),
    }
}

/// `record`'s policy decisions as `(policy, kind, decision)`.
fn decisions(record: &Value) -> Vec<(String, String, String)> {
    record["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let s = |k: &str| d[k].as_str().unwrap().to_owned();
            (s("policy"), s("kind"), s("decision"))
        })
        .collect()
}

fn decision(policy: &str, kind: &str, decision: &str) -> (String, String, String) {
    (policy.to_owned(), kind.to_owned(), decision.to_owned())
}

/// SPEC HO-3b: the model was asked once per handover, with exactly the
/// configured context fields of `target`'s request — and nothing of a
/// credential: no signature, no key id, no credential text.
fn model_saw_only_the_context(case: &Case, model: &ModelServer, target: &str) {
    let calls = model.requests();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = &calls[0];
    assert!(
        call.head.starts_with("POST /v1/decide HTTP/1.1\r\n"),
        "{call:?}"
    );
    let body: Value = serde_json::from_str(&call.body).unwrap();
    assert_eq!(
        body,
        json!({"version": 1, "context": {
            "source": {"fay_id": "fay-a", "access_mode": "write"},
            "target": {"fay_id": target, "grants": [{"resource_id": "arm", "modes": ["write"]}]},
            "resource": {"id": "arm", "metadata": {"kind": "robot arm"}},
            "reason": "auth_request",
        }})
    );
    let credential = std::fs::read_to_string(&case.c_files.credential).unwrap();
    let armour: Vec<&str> = credential
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 16)
        .collect();
    assert!(!armour.is_empty());
    let sent = format!("{}{}", call.head, call.body);
    assert!(!sent.contains(&case.setup.issuer_key_id), "key id sent");
    for line in armour {
        assert!(!sent.contains(line), "credential sent: {sent}");
    }
    for word in ["signature", "key_id", "credential"] {
        assert!(!sent.contains(word), "{word} in {sent}");
    }
}

/// SPEC HO-3b, HO-4: the model allows fay-c — whom the fallback script
/// would refuse — so the model decided: fay-c gets the arm, fay-a's
/// session is handed over, one controller.
#[test]
fn the_model_allows_and_control_moves_to_the_target() {
    let model = ModelServer::answering(r#"{"decision":"allow"}"#);
    let mut case = Case::start("ai-allow", model.port(), GENEROUS_MS);
    case.c.ask(5, "arm", AccessMode::Write);
    let sc = granted(&mut case.c, 5);
    case.handed_to(sc);
    model_saw_only_the_context(&case, &model, "fay-c");

    let record = case.handover_record("model");
    assert_eq!(record["target_fay_id"], "fay-c");
    assert_eq!(record["target_session_id"], sc.to_string());
    assert_eq!(record["outcome"]["result"], "succeeded");
    assert_eq!(decisions(&record), [decision("model", "ai_model", "allow")]);
    assert_eq!(
        record["decisions"][0]["why"],
        Value::Null,
        "the model decided"
    );
    let ended = verified_records(&case.setup.dir.join("audit.jsonl"))
        .into_iter()
        .find(|r| r["record"] == "session_terminated")
        .expect("the source session's record");
    assert_eq!(ended["session_id"], case.held.to_string());
    assert_eq!(ended["reason"], "handed_over");
}

/// SPEC HO-3b, HO-2 (3): the model rejects fay-b — whom the fallback
/// would let win — with its reason: fay-b is refused with
/// E_HANDOVER_REJECTED_BY_POLICY, fay-a keeps the arm and is told.
#[test]
fn the_model_rejects_with_its_reason() {
    let model =
        ModelServer::answering(r#"{"decision":"reject","reason":"an operator is on the arm"}"#);
    let mut case = Case::start("ai-reject", model.port(), GENEROUS_MS);
    case.b.ask(5, "arm", AccessMode::Write);
    let (code, message) = refused(&mut case.b, 5);
    assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
    assert_eq!(message, "ai model rejected: an operator is on the arm");
    case.holder_kept_the_arm(HandoverFailedReason::PolicyRejected);
    model_saw_only_the_context(&case, &model, "fay-b");

    let record = case.handover_record("model");
    assert_eq!(record["target_fay_id"], "fay-b");
    assert_eq!(record["target_session_id"], Value::Null);
    assert_eq!(record["outcome"]["result"], "failed");
    assert_eq!(record["outcome"]["code"], "E_HANDOVER_REJECTED_BY_POLICY");
    assert_eq!(record["outcome"]["notification"], "policy_rejected");
    assert_eq!(
        decisions(&record),
        [decision("model", "ai_model", "reject")]
    );
    assert_eq!(
        record["decisions"][0]["why"],
        "ai model rejected: an operator is on the arm"
    );
}

/// The pending human decision `dtp ctl decisions` lists for fay-c's
/// request (whose default action is `default`): its handover id.
fn pending_for_fay_c(case: &Case, default: &str) -> String {
    let pending = eventually("a pending decision", || {
        let d = case.serve.ctl_json(&["decisions"]);
        (d["decisions"].as_array().unwrap().len() == 1).then_some(d)
    });
    let entry = &pending["decisions"][0];
    assert_eq!(entry["source_fay_id"], "fay-a");
    assert_eq!(entry["target_fay_id"], "fay-c");
    assert_eq!(entry["resource_id"], "arm");
    assert_eq!(entry["access_mode"], "write");
    assert_eq!(entry["default_action"], default);
    entry["handover_id"].as_str().unwrap().to_owned()
}

/// SPEC HO-3b → HO-3c: the model answers require_human; the handover
/// waits on the panel until a person allows it with `dtp ctl decide`.
#[test]
fn the_model_defers_to_a_person_who_allows() {
    let model = ModelServer::answering(r#"{"decision":"require_human"}"#);
    let mut case = Case::start("ai-human", model.port(), GENEROUS_MS);
    case.c.ask(5, "arm", AccessMode::Write);
    let handover_id = pending_for_fay_c(&case, "reject");
    // Waiting: fay-a still holds the arm (handover_pending comes at T0,
    // after the decision).
    let (sid, _) = case.only_session();
    assert_eq!(sid, case.held.to_string());
    let out = case.serve.ctl_ok(&["decide", &handover_id, "allow"]);
    assert_eq!(out, format!("handover {handover_id}: allowed\n"));
    let sc = granted(&mut case.c, 5);
    case.handed_to(sc);
    model_saw_only_the_context(&case, &model, "fay-c");

    let record = case.handover_record("ask");
    assert_eq!(record["handover_id"], handover_id.as_str());
    assert_eq!(record["target_session_id"], sc.to_string());
    assert_eq!(record["outcome"]["result"], "succeeded");
    assert_eq!(
        decisions(&record),
        [
            decision("model", "ai_model", "require_human"),
            decision("ask", "human_decision", "allow"),
        ]
    );
}

/// SPEC HO-3b → HO-3c: the model answers require_human and nobody
/// decides: after the person's 5 s the default action (reject) applies.
#[test]
fn the_model_defers_to_a_person_who_does_not_answer() {
    let model = ModelServer::answering(r#"{"decision":"require_human"}"#);
    let mut case = Case::start("ai-human-late", model.port(), GENEROUS_MS);
    case.c.ask(5, "arm", AccessMode::Write);
    let handover_id = pending_for_fay_c(&case, "reject");
    let (code, message) = refused(&mut case.c, 5);
    assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
    assert_eq!(message, "no decision from the terminal's user in time");
    case.holder_kept_the_arm(HandoverFailedReason::PolicyRejected);
    let late = case.serve.ctl(&["decide", &handover_id, "allow"]);
    assert_eq!(late.status.code(), Some(2), "{late:?}");

    let record = case.handover_record("ask");
    assert_eq!(record["handover_id"], handover_id.as_str());
    assert_eq!(record["outcome"]["code"], "E_HANDOVER_REJECTED_BY_POLICY");
    assert_eq!(
        decisions(&record),
        [
            decision("model", "ai_model", "require_human"),
            decision("ask", "human_decision", "reject"),
        ]
    );
}

/// SPEC HO-3b → HO-3c: the model's policy has no `human_fallback`, so
/// the person asked on require_human is `[terminal.policy.ai_fallback]`'s
/// `human_decision` (its default action, allow, shows which); they reject
/// through the admin endpoint `dtp ctl` uses.
#[test]
fn without_a_human_fallback_the_ai_fallback_person_is_asked() {
    let model = ModelServer::answering(r#"{"decision":"require_human"}"#);
    let port = model.port();
    let mut case = Case::configured("ai-human-fallback", |setup| {
        terminal_section(setup, port, GENEROUS_MS).replace("human_fallback = \"ask\"\n", "")
    });
    case.c.ask(5, "arm", AccessMode::Write);
    let handover_id = pending_for_fay_c(&case, "allow");
    let handovers = case.serve.ctl_json(&["handovers"]);
    assert_eq!(handovers["handovers"][0]["policy"], "ai_fallback");
    let out = case.serve.ctl_ok(&["decide", &handover_id, "reject"]);
    assert_eq!(out, format!("handover {handover_id}: rejected\n"));
    let (code, message) = refused(&mut case.c, 5);
    assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
    assert_eq!(message, "rejected by the terminal's user");
    case.holder_kept_the_arm(HandoverFailedReason::PolicyRejected);

    let record = case.handover_record("ai_fallback");
    assert_eq!(
        decisions(&record),
        [
            decision("model", "ai_model", "require_human"),
            decision("ai_fallback", "human_decision", "reject"),
        ]
    );
}

/// SPEC HO-3b ("hard timeout → reject"), HO-7: the model answers only
/// after the call's 500 ms timeout — after the gateway hung up. fay-b,
/// whom the fallback would let win, is refused: a late model is a reject,
/// not a second decision.
#[test]
fn a_model_slower_than_its_timeout_is_a_reject() {
    let model = ModelServer::start(Behaviour::AfterHangUp(http_response(
        "200 OK",
        r#"{"decision":"allow"}"#,
    )));
    let mut case = Case::start("ai-slow", model.port(), 500);
    case.b.ask(5, "arm", AccessMode::Write);
    let (code, message) = refused(&mut case.b, 5);
    assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
    assert_eq!(message, "ai model gave no decision within 500 ms");
    case.holder_kept_the_arm(HandoverFailedReason::PolicyRejected);
    eventually("the gateway hanging up on the model", || {
        model.requests().first()?.hung_up.then_some(())
    });
    model_saw_only_the_context(&case, &model, "fay-b");

    let record = case.handover_record("model");
    assert_eq!(record["outcome"]["code"], "E_HANDOVER_REJECTED_BY_POLICY");
    assert_eq!(
        decisions(&record),
        [decision("model", "ai_model", "reject")]
    );
    assert_eq!(
        record["decisions"][0]["why"],
        "ai model gave no decision within 500 ms"
    );
}

/// The fallback script decides twice on one unavailable model: fay-c is
/// refused (saying the model was unavailable, `why`), then fay-b wins —
/// and the audit log says both times that the script decided.
fn the_fallback_decides(case: &mut Case, why: &str) {
    case.c.ask(5, "arm", AccessMode::Write);
    let (code, message) = refused(&mut case.c, 5);
    assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
    assert!(
        message.starts_with("ai model unavailable (") && message.contains(why),
        "{message}"
    );
    case.holder_kept_the_arm(HandoverFailedReason::PolicyRejected);
    case.b.ask(6, "arm", AccessMode::Write);
    let sb = granted(&mut case.b, 6);
    case.handed_to(sb);

    let path = case.setup.dir.join("audit.jsonl");
    let handovers = eventually("two handover records", || {
        let h: Vec<Value> = verified_records(&path)
            .into_iter()
            .filter(|r| r["record"] == "handover")
            .collect();
        (h.len() == 2).then_some(h)
    });
    assert_eq!(handovers[0]["target_fay_id"], "fay-c");
    assert_eq!(
        handovers[0]["outcome"]["code"],
        "E_HANDOVER_REJECTED_BY_POLICY"
    );
    assert_eq!(
        decisions(&handovers[0]),
        [decision("model", "ai_model", "reject")]
    );
    assert_eq!(handovers[0]["decisions"][0]["why"], message.as_str());
    assert_eq!(handovers[1]["target_fay_id"], "fay-b");
    assert_eq!(handovers[1]["target_session_id"], sb.to_string());
    assert_eq!(handovers[1]["outcome"]["result"], "succeeded");
    assert_eq!(
        decisions(&handovers[1]),
        [decision("model", "ai_model", "allow")]
    );
    // The record says the script decided, not the model.
    let allowed = handovers[1]["decisions"][0]["why"].as_str().unwrap();
    assert!(
        allowed.starts_with("ai model unavailable (")
            && allowed.contains(why)
            && allowed.ends_with("; the fallback script allowed"),
        "{allowed}"
    );
}

/// SPEC HO-3b: a 2xx whose body is not a decision is an unavailable
/// model: the fallback priority script decides, each time (a non-answer
/// is not cached).
#[test]
fn a_model_answering_garbage_falls_back_to_the_script() {
    let model = ModelServer::answering(r#"{"verdict":"yes, go ahead"}"#);
    let mut case = Case::start("ai-garbage", model.port(), GENEROUS_MS);
    the_fallback_decides(&mut case, "not a model decision");
    assert_eq!(model.requests().len(), 2);
}

/// SPEC HO-3b: nothing listens at the endpoint: the fallback priority
/// script decides.
#[test]
fn a_model_that_is_down_falls_back_to_the_script() {
    let mut case = Case::start("ai-down", closed_port(), GENEROUS_MS);
    the_fallback_decides(&mut case, "cannot connect to the model");
}
