//! The terminal plane's built-in realtime streams (issue 6 item 2): what
//! people watching from a browser need, published as the terminal commits
//! it, with no credential, Fay id or free text in any payload (SPEC RT-3).
//!
//! | stream | event type | when |
//! |---|---|---|
//! | `sessions` | `session.state` | every committed session transition (TS-3) |
//! | `handovers` | `handover.ended` | a handover finished, either way (HO-10) |
//! | `decisions` | `decision.pending` | a handover waits for a person (HO-3c) |
//! | `decisions` | `decision.closed` | that question was withdrawn or answered |
//! | `resources` | `resource.availability` | an operator made a resource (un)available (TS-10) |
//!
//! The snapshot of `sessions` is the whole live session table
//! ([`SESSIONS_TABLE`]); the other streams' snapshots hold their latest
//! event.

use std::fmt::Display;

use dtp_codec::{AccessMode, HandoverFailedReason, SessionId, SessionState};
use dtp_terminal::{
    HandoverAudit, HandoverKind, HandoverOutcome, HandoverTrigger, StateChange, TerminationReason,
};
use serde::{Serialize, Serializer};
use uuid::Uuid;

use crate::app::PlaneEvent;
use crate::realtime::TableShape;

/// The built-in streams and their event types, for the realtime
/// configuration (`dtp serve` registers them when `[terminal]` runs).
pub const BUILT_IN_STREAMS: [(&str, &[&str]); 4] = [
    ("sessions", &["session.state"]),
    ("handovers", &["handover.ended"]),
    ("decisions", &["decision.pending", "decision.closed"]),
    ("resources", &["resource.availability"]),
];

/// The built-in streams as realtime stream specs with the default
/// retention, cursor recovery and scope `scope` (what a test or an
/// embedder registers; `dtp serve` sets its retention from the
/// configuration).
pub fn built_in_specs(scope: &str) -> Vec<dtp_realtime::StreamSpec> {
    BUILT_IN_STREAMS
        .iter()
        .map(|(id, types)| dtp_realtime::StreamSpec {
            id: (*id).into(),
            recovery: dtp_realtime::RecoveryMode::Cursor,
            event_types: types.iter().map(|t| (*t).to_owned()).collect(),
            retention: dtp_realtime::Retention::default(),
            scope: scope.into(),
        })
        .collect()
}

/// The snapshot of the `sessions` stream: the whole live session table
/// (`{"sessions":[…]}`), one row per session — its latest `session.state`
/// payload — until the session is terminated (SPEC RT-2, RT-6: a
/// dashboard rebuilds from the snapshot plus the events after its
/// checkpoint).
pub const SESSIONS_TABLE: TableShape = TableShape {
    member: "sessions",
    key: "sessionId",
    gone: ("to", "terminated"),
};

/// The table a built-in stream's snapshot keeps, if it keeps one (the
/// others keep their latest event). A configured stream with a built-in
/// stream's id is that stream, so it keeps the same shape.
pub fn built_in_table(stream: &str) -> Option<TableShape> {
    (stream == "sessions").then_some(SESSIONS_TABLE)
}

/// At most this many events wait between two drains (one pump's outputs;
/// the pair plane drains after every call).
pub(super) const MAX_PENDING: usize = 65_536;

/// The payloads are written straight from these structs: no
/// `serde_json::Value` tree per event (a profile of the control workload
/// with the streams on showed building it at about a tenth of the control
/// thread). The fields are in the order the payloads always had.
fn event(stream: &'static str, event_type: &'static str, payload: &impl Serialize) -> PlaneEvent {
    // Room for every built-in payload up front: grown from empty, the
    // buffer was reallocated (and copied) five or six times per event.
    let mut buf = Vec::with_capacity(PAYLOAD_ROOM);
    if serde_json::to_writer(&mut buf, payload).is_err() {
        buf.clear();
        buf.extend_from_slice(b"{}");
    }
    PlaneEvent {
        stream,
        event_type,
        payload: buf,
    }
}

/// The first allocation of a built-in event's payload, bytes (the largest,
/// `handover.ended` with two session ids and a handover id, is about 300).
const PAYLOAD_ROOM: usize = 384;

/// An id as its text, written without a `String` in between.
fn text<T: Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// An optional id as its text, or `null`.
fn text_opt<T: Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionStatePayload<'a> {
    #[serde(serialize_with = "text")]
    session_id: &'a SessionId,
    resource_id: &'a str,
    access_mode: AccessMode,
    from: Option<SessionState>,
    to: SessionState,
    reason: Option<TerminationReason>,
}

/// `sessions` / `session.state`.
pub(super) fn session_state(c: &StateChange) -> PlaneEvent {
    let p = SessionStatePayload {
        session_id: &c.session_id,
        resource_id: &c.resource_id,
        access_mode: c.access_mode,
        from: c.from,
        to: c.to,
        reason: c.reason,
    };
    event("sessions", "session.state", &p)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HandoverEndedPayload<'a> {
    #[serde(serialize_with = "text")]
    handover_id: &'a Uuid,
    kind: &'a HandoverKind,
    trigger: &'a HandoverTrigger,
    #[serde(serialize_with = "text")]
    source_session_id: &'a SessionId,
    #[serde(serialize_with = "text_opt")]
    target_session_id: &'a Option<SessionId>,
    resource_id: &'a str,
    access_mode: AccessMode,
    outcome: Outcome<'a>,
}

/// `handovers` / `handover.ended`.
pub(super) fn handover_ended(h: &HandoverAudit) -> PlaneEvent {
    let p = HandoverEndedPayload {
        handover_id: &h.handover_id,
        kind: &h.kind,
        trigger: &h.trigger,
        source_session_id: &h.source_session_id,
        target_session_id: &h.target_session_id,
        resource_id: &h.resource_id,
        access_mode: h.access_mode,
        outcome: outcome(&h.outcome),
    };
    event("handovers", "handover.ended", &p)
}

/// SPEC RT-3: a handover's outcome as the stream shows it, in registry
/// values and codes only. The failure's text (a policy's error, a
/// credential's problem) stays in the audit log: it is free text a
/// subscriber with read access must not see.
#[derive(Serialize)]
#[serde(tag = "result", rename_all = "lowercase")]
enum Outcome<'a> {
    Succeeded,
    Failed {
        code: Code,
        notification: &'a Option<HandoverFailedReason>,
    },
}

/// An error code by its registered name, or its number when it has none.
#[derive(Serialize)]
#[serde(untagged)]
enum Code {
    Name(&'static str),
    Number(u16),
}

fn outcome(o: &HandoverOutcome) -> Outcome<'_> {
    match o {
        HandoverOutcome::Succeeded => Outcome::Succeeded,
        HandoverOutcome::Failed {
            code,
            notification,
            message: _,
        } => Outcome::Failed {
            code: code.name().map_or(Code::Number(code.0), Code::Name),
            notification,
        },
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionPendingPayload<'a> {
    #[serde(serialize_with = "text")]
    handover_id: &'a Uuid,
    policy: &'a str,
    deadline_ms: u64,
}

/// `decisions` / `decision.pending`: a person is asked (the question
/// itself is on the admin panel, `GET /v1/decisions`).
pub(super) fn decision_pending(handover_id: Uuid, policy: &str, deadline_ms: u64) -> PlaneEvent {
    let p = DecisionPendingPayload {
        handover_id: &handover_id,
        policy,
        deadline_ms,
    };
    event("decisions", "decision.pending", &p)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionClosedPayload<'a> {
    #[serde(serialize_with = "text")]
    handover_id: &'a Uuid,
}

/// `decisions` / `decision.closed`.
pub(super) fn decision_closed(handover_id: Uuid) -> PlaneEvent {
    let p = DecisionClosedPayload {
        handover_id: &handover_id,
    };
    event("decisions", "decision.closed", &p)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AvailabilityPayload<'a> {
    resource_id: &'a str,
    available: bool,
}

/// `resources` / `resource.availability` (the sessions it ended are on
/// `sessions`).
pub(super) fn resource_availability(resource_id: &str, available: bool) -> PlaneEvent {
    let p = AvailabilityPayload {
        resource_id,
        available,
    };
    event("resources", "resource.availability", &p)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use dtp_codec::{AccessMode, ErrorCode, SessionState};
    use dtp_terminal::{HandoverOutcome, StateChange, TerminationReason};
    use serde_json::{Value, json};

    fn outcome(o: &HandoverOutcome) -> Value {
        serde_json::to_value(super::outcome(o)).unwrap()
    }

    /// SPEC RT-3: a failure's free text never reaches the stream; its
    /// code does.
    #[test]
    fn a_failed_handover_shows_its_code_not_its_text() {
        let failed = HandoverOutcome::Failed {
            code: ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE,
            notification: None,
            message: "policy: script error at line 3: secret_param".into(),
        };
        let v = outcome(&failed);
        assert_eq!(v["result"], "failed");
        assert_eq!(v["code"], "E_HANDOVER_FAILED_AT_ACQUIRE");
        assert!(!v.to_string().contains("secret_param"), "{v}");
        assert!(v.get("message").is_none());
        let v = outcome(&HandoverOutcome::Succeeded);
        assert_eq!(v, json!({ "result": "succeeded" }));
        let unnamed = HandoverOutcome::Failed {
            code: ErrorCode(65_000),
            notification: None,
            message: String::new(),
        };
        assert_eq!(outcome(&unnamed)["code"], 65_000);
    }

    /// The payload's bytes are what the `json!` tree used to give: the
    /// same keys, values and order (subscribers and snapshots compare).
    #[test]
    fn session_state_bytes_are_unchanged() {
        let id = dtp_codec::SessionId::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0001);
        let c = StateChange {
            session_id: id,
            fay_id: "fay-1".into(),
            resource_id: "term-\"1\"".into(),
            access_mode: AccessMode::Write,
            from: Some(SessionState::Active),
            to: SessionState::Terminating,
            reason: Some(TerminationReason::ClientRelease),
            at: dtp_terminal::UnixMs(1),
        };
        let old = json!({
            "sessionId": id.to_string(),
            "resourceId": c.resource_id,
            "accessMode": c.access_mode,
            "from": c.from,
            "to": c.to,
            "reason": c.reason,
        });
        let got = super::session_state(&c).payload;
        assert_eq!(got, serde_json::to_vec(&old).unwrap());
        let created = StateChange {
            from: None,
            reason: None,
            ..c
        };
        let v: Value = serde_json::from_slice(&super::session_state(&created).payload).unwrap();
        assert_eq!((&v["from"], &v["reason"]), (&Value::Null, &Value::Null));
        assert!(
            !String::from_utf8(super::session_state(&created).payload)
                .unwrap()
                .contains("fay-1")
        );
    }
}
