//! SPEC HO-3c, TS-11, TS-12, HO-10 through the admin handle: a person
//! decides (and does not), an admin ends a session, the audit log holds
//! what happened; and the configuration is checked whole.

use std::time::Duration;

use dtp_codec::{AuthOutcome, ControlMessage, ErrorCode, SessionState};
use dtp_crypto::cred::Verifier;
use dtp_gateway::plane::{FsyncPolicy, PlaneConfig, open_audit_file};
use dtp_gateway::{PlaneError, TerminalPlane};
use dtp_policy::{HandoverPolicy, HumanError, PriorityScript, Verdict};
use dtp_terminal::{NoopAccess, PolicyRef};
use serde::Deserialize;

use crate::model::closed_port;
use crate::rig::{Rig, audit_at, auth_result, config, scratch, sent_to};

/// SPEC HO-3c: fay-b asks for the held `screen`; the panel lists the
/// question (no credential detail), a person allows through the handle,
/// fay-b is granted; a second answer is refused.
#[test]
fn human_decision_through_the_handle_allows() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 2);
    rig.session(0, 1, "fay-a", "screen");
    let (id, out) = rig.auth(0, 2, "fay-b", "screen");
    assert!(auth_result(&out, 0, 2, id).is_none(), "{out:?}");

    let (pending, _) = rig.admin(|h| h.pending_decisions());
    let pending = pending.unwrap();
    assert_eq!(pending.len(), 1);
    let entry = &pending[0];
    assert_eq!(entry.view.source_fay_id, "fay-a");
    assert_eq!(entry.view.target_fay_id, "fay-b");
    assert_eq!(entry.view.resource_id, "screen");
    assert_eq!(
        entry.deadline_ms,
        rig.unix() + 5_000,
        "decision_timeout_seconds"
    );
    let json = serde_json::to_string(&pending).unwrap();
    for secret in ["credential", "signature", "key_id", "descriptor"] {
        assert!(!json.contains(secret), "{secret} shown to a person: {json}");
    }
    let handover_id = entry.handover_id;
    let (handovers, _) = rig.admin(|h| h.pending_handovers());
    let handovers = handovers.unwrap();
    assert_eq!(handovers.len(), 1);
    assert_eq!(
        (handovers[0].handover_id, handovers[0].policy.as_str()),
        (handover_id, "ask")
    );

    let (decided, out) = rig.admin(move |h| h.decide(handover_id, true));
    assert_eq!(decided.unwrap().verdict, Verdict::Allow);
    assert!(
        matches!(
            auth_result(&out, 0, 2, id),
            Some(AuthOutcome::Granted { .. })
        ),
        "{out:?}"
    );
    let (again, _) = rig.admin(move |h| h.decide(handover_id, false));
    assert!(
        matches!(again, Err(PlaneError::Human(HumanError::AlreadyDecided(_)))),
        "{again:?}"
    );
}

/// SPEC HO-3c, HO-7: nobody answers; at the decision deadline (5 s, before
/// the 30 s hard timeout) the default action rejects.
#[test]
fn human_decision_times_out_to_the_default_reject() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    rig.up(0, 2);
    rig.session(0, 1, "fay-a", "screen");
    let (id, _) = rig.auth(0, 2, "fay-b", "screen");
    let (_, next) = rig.tick();
    assert_eq!(next, Some(rig.now + Duration::from_millis(5_000)));
    let out = rig.advance(4_999);
    assert!(auth_result(&out, 0, 2, id).is_none(), "{out:?}");
    let out = rig.advance(1);
    match auth_result(&out, 0, 2, id) {
        Some(AuthOutcome::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::E_HANDOVER_REJECTED_BY_POLICY);
            assert!(message.contains("no decision"), "{message}");
        }
        other => panic!("{other:?} in {out:?}"),
    }
    let m = rig.plane.metrics();
    assert_eq!((m.human_asked, m.human_expired), (1, 1));
    let (pending, _) = rig.admin(|h| h.pending_decisions());
    assert!(pending.unwrap().is_empty());
}

/// SPEC TS-11 `forced`: the admin ends a session through the handle; its
/// runtime hears it; a second try is E_SESSION_TERMINATED; unknown
/// resources are refused.
#[test]
fn force_terminate_through_the_handle() {
    let mut rig = Rig::new(config(closed_port()));
    rig.up(0, 1);
    let s = rig.session(0, 1, "fay-a", "lamp");
    let (sessions, _) = rig.admin(|h| h.sessions());
    assert_eq!(sessions.unwrap()[0].session_id, s);

    let (done, out) = rig.admin(move |h| h.force_terminate(s));
    done.unwrap();
    let last = sent_to(&out, 0, 1).into_iter().rev().find_map(|m| match m {
        ControlMessage::SessionStateChanged(c) => Some(c),
        _ => None,
    });
    let last = last.unwrap();
    assert_eq!(
        (last.new_state, last.reason.as_deref()),
        (SessionState::Terminated, Some("forced"))
    );
    let (sessions, _) = rig.admin(|h| h.sessions());
    assert!(sessions.unwrap().is_empty());
    let (resources, _) = rig.admin(|h| h.resources());
    let resources = resources.unwrap();
    let lamp = resources.iter().find(|r| r.resource_id == "lamp").unwrap();
    assert!(lamp.occupancy.is_empty());

    let (again, _) = rig.admin(move |h| h.force_terminate(s));
    match again {
        Err(PlaneError::Refused(r)) => assert_eq!(r.code, ErrorCode::E_SESSION_TERMINATED),
        other => panic!("{other:?}"),
    }
    let (unknown, _) = rig.admin(|h| h.set_resource_available("nope", false));
    assert!(
        matches!(unknown, Err(PlaneError::Refused(_))),
        "{unknown:?}"
    );
    assert_eq!(rig.plane.metrics().admin_commands, 6);
}

/// A handle waits at most its timeout; once the plane is gone it says so.
#[test]
fn handle_times_out_and_sees_the_plane_stop() {
    let rig = Rig::new(config(closed_port()));
    let handle = rig.handle.clone().with_timeout(Duration::from_millis(50));
    // Nobody ticks the plane here.
    assert!(matches!(handle.sessions(), Err(PlaneError::Timeout(_))));
    drop(rig);
    assert!(matches!(handle.sessions(), Err(PlaneError::Stopped)));
}

/// SPEC TS-12, HO-10: the audit log file holds the handover (with its
/// policy decision) and the terminations, read back with `open_audit_file`.
#[test]
fn audit_log_holds_handover_and_termination_records() {
    let dir = scratch("audit");
    let path = dir.join("audit.jsonl");
    let mut cfg = config(closed_port());
    cfg.audit = Some(audit_at(path.clone()));
    let mut rig = Rig::new(cfg);
    rig.up(0, 1);
    rig.up(0, 2);
    let a = rig.session(0, 1, "fay-a", "arm");
    let (id, out) = rig.auth(0, 2, "fay-b", "arm");
    let Some(AuthOutcome::Granted { session_id: b }) = auth_result(&out, 0, 2, id) else {
        panic!("{out:?}");
    };
    rig.advance(10);
    let (done, _) = rig.admin(move |h| h.force_terminate(b));
    done.unwrap();
    rig.plane.sync_audit();
    let written = rig.plane.metrics().audit_records;
    let end = rig.unix();
    drop(rig);

    let log = open_audit_file::<serde_json::Value>(&path)
        .unwrap()
        .read_to_end()
        .unwrap();
    assert!(log.torn_tail.is_none());
    assert_eq!(log.records.len() as u64, written);
    let seqs: Vec<u64> = log.records.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=written).collect::<Vec<_>>());
    let summary: Vec<(String, String)> = log
        .records
        .iter()
        .map(|e| {
            let r = &e.record;
            let what = r["reason"].as_str().or(r["outcome"]["result"].as_str());
            (
                r["record"].as_str().unwrap().to_owned(),
                what.unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("session_terminated", "handed_over"),
        ("handover", "succeeded"),
        ("session_terminated", "forced"),
    ];
    assert_eq!(summary, expected.map(|(k, w)| (k.to_owned(), w.to_owned())));
    assert_eq!(log.records[0].record["session_id"], a.to_string());
    let handover = log
        .records
        .iter()
        .find(|e| e.record["record"] == "handover")
        .unwrap();
    let h = &handover.record;
    assert_eq!(h["source_session_id"], a.to_string());
    assert_eq!(h["target_session_id"], b.to_string());
    assert_eq!(
        (h["source_fay_id"].as_str(), h["target_fay_id"].as_str()),
        (Some("fay-a"), Some("fay-b"))
    );
    assert_eq!(h["policy"], "prio");
    assert_eq!(h["decisions"][0]["decision"], "allow");
    assert_eq!(h["outcome"]["result"], "succeeded");
    let forced = log
        .records
        .iter()
        .find(|e| {
            e.record["record"] == "session_terminated" && e.record["session_id"] == b.to_string()
        })
        .unwrap();
    assert_eq!(forced.record["reason"], "forced");
    assert_eq!(forced.at_unix_ms, end);
    let _ = std::fs::remove_dir_all(dir);
}

/// The `[terminal]` section as `dtp serve` reads it (the module docs'
/// example), and unknown keys refused.
#[test]
fn the_terminal_section_parses_and_refuses_unknown_keys() {
    #[derive(Deserialize)]
    struct File {
        terminal: PlaneConfig,
    }
    let text = r##"
[terminal]
model_workers = 2

[terminal.control]
terminal_id = "term-1"
[[terminal.control.resources]]
resource_id = "arm"
handover_policy = "seniority"
[terminal.control.policies.seniority]
policy = { policy_type = "priority_script", script_id = "seniority" }

[terminal.policy.scripts]
seniority = "#{ source: 1, target: 2 }"

[terminal.audit]
path = "/var/lib/dtp/audit.jsonl"
fsync = "every_record"
"##;
    let file: File = toml::from_str(text).unwrap();
    file.terminal.validate().unwrap();
    let audit = file.terminal.audit.unwrap();
    assert_eq!(audit.fsync, FsyncPolicy::EveryRecord);
    let bad = "[terminal]\nmodel_worker = 2\n[terminal.control]\nterminal_id = \"t\"\n";
    let err = toml::from_str::<File>(bad).err().unwrap().to_string();
    assert!(err.contains("model_worker"), "{err}");
}

/// Start-up checks name the key at fault: a policy naming an unknown
/// script, a script that does not compile, a policy configured twice, a
/// bound out of range.
#[test]
fn configuration_errors_name_the_key() {
    let start = |c: PlaneConfig| {
        TerminalPlane::new(c, Verifier::new(), NoopAccess)
            .err()
            .unwrap()
            .to_string()
    };
    let mut c = config(closed_port());
    c.control.policies.get_mut("prio").unwrap().policy = PolicyRef::PriorityScript {
        script_id: "missing".into(),
        parameters: Default::default(),
    };
    let e = start(c);
    assert!(e.contains("\"prio\"") && e.contains("\"missing\""), "{e}");

    let mut c = config(closed_port());
    c.policy.scripts.insert("prio".into(), "#{ source: ".into());
    let e = start(c);
    assert!(
        e.contains("\"prio\"") && e.contains("does not compile"),
        "{e}"
    );

    let mut c = config(closed_port());
    let twice = HandoverPolicy::PriorityScript(PriorityScript {
        script_id: "prio".into(),
        parameters: Default::default(),
    });
    c.policy.policies.insert("twice".into(), twice);
    let e = start(c);
    assert!(e.contains("policy.policies.twice"), "{e}");

    let mut c = config(closed_port());
    c.model_workers = 0;
    assert!(start(c).contains("model_workers"));

    // SPEC HO-3b: `model` has no human_fallback, so the plane's name for
    // the ai_fallback person is taken.
    let mut c = config(closed_port());
    let taken = c.control.policies["ask"].clone();
    c.control
        .policies
        .insert(dtp_gateway::plane::AI_FALLBACK_HUMAN.into(), taken);
    let e = start(c);
    assert!(e.contains("control.policies.ai_fallback"), "{e}");

    let mut c = config(closed_port());
    c.control.liveness.heartbeat_timeout_ms = 1;
    assert!(start(c).contains("control: heartbeat_timeout_ms"));
}

/// SPEC audit is a MAY: a log that cannot be written (here `/dev/full`,
/// every write ENOSPC) is counted and logged, and the plane goes on
/// granting and ending sessions.
#[test]
fn audit_write_failures_are_counted_and_never_stop_the_plane() {
    let mut cfg = config(closed_port());
    let mut audit = audit_at("/dev/full".into());
    audit.fsync = FsyncPolicy::Never;
    cfg.audit = Some(audit);
    let mut rig = Rig::new(cfg);
    rig.up(0, 1);
    let s = rig.session(0, 1, "fay-a", "lamp");
    let (done, _) = rig.admin(move |h| h.force_terminate(s));
    done.unwrap();
    rig.plane.sync_audit();
    let m = rig.plane.metrics();
    assert_eq!((m.audit_records, m.audit_failures), (0, 1), "{m:?}");
    // Within the reopen back-off the next record is lost without a try.
    let s = rig.session(0, 1, "fay-a", "lamp");
    let (done, _) = rig.admin(move |h| h.force_terminate(s));
    done.unwrap();
    rig.plane.sync_audit();
    assert_eq!(rig.plane.metrics().audit_failures, 2);
}

/// The admin handle is what the admin HTTP thread holds.
#[test]
fn the_handle_is_clone_send_and_sync() {
    fn usable_anywhere<T: Clone + Send + Sync + 'static>() {}
    usable_anywhere::<dtp_gateway::PlaneHandle>();
}

/// An admin call made while the engine is still starting (before the
/// control loop attached its waker) is answered once the loop runs: the
/// loop ticks its plane once at start (found in CI as a 2 s timeout of a
/// `dtp serve` admin test).
#[test]
fn an_admin_call_made_while_the_engine_starts_is_answered() {
    use dtp_engine::{Engine, EngineConfig, Origin, Outbox, Service};
    use dtp_transports::{ConnId, DriverConfig};

    struct Nothing;
    impl Service for Nothing {
        type Conn = ();
        type Up = dtp_gateway::app::GatewayUp;
        type Down = dtp_gateway::app::GatewayDown;
        fn open(&mut self, _: ConnId, _: Origin, _: &mut Outbox<'_, Self::Up>) {}
        fn bytes(
            &mut self,
            _: &mut (),
            _: dtp_transports::RecvBuf,
            _: &mut Outbox<'_, Self::Up>,
        ) -> Result<(), ErrorCode> {
            Ok(())
        }
    }

    let (plane, handle) =
        TerminalPlane::new(config(closed_port()), Verifier::new(), NoopAccess).unwrap();
    let early = std::thread::spawn({
        let handle = handle.clone().with_timeout(Duration::from_secs(10));
        move || handle.sessions()
    });
    // The call is queued with no waker to wake yet.
    std::thread::sleep(Duration::from_millis(100));
    let engine = Engine::start_with_control(
        EngineConfig {
            shards: 1,
            pin: false,
            listen: Vec::new(),
            driver: DriverConfig::default(),
            limits: dtp_codec::Limits::default(),
            drain: Duration::from_secs(1),
            control_ring: 16,
            quic: None,
        },
        |_| Nothing,
        Box::new(plane),
    )
    .unwrap();
    let answer = early.join().unwrap();
    assert!(answer.is_ok(), "{answer:?}");
    engine.stop();
    engine.join().unwrap();
}
