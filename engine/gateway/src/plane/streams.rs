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

use dtp_terminal::{HandoverAudit, HandoverOutcome, StateChange};
use serde_json::{Value, json};
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

fn event(stream: &'static str, event_type: &'static str, payload: &Value) -> PlaneEvent {
    PlaneEvent {
        stream,
        event_type,
        payload: serde_json::to_vec(payload).unwrap_or_else(|_| b"{}".to_vec()),
    }
}

/// `sessions` / `session.state`.
pub(super) fn session_state(c: &StateChange) -> PlaneEvent {
    let p = json!({
        "sessionId": c.session_id.to_string(),
        "resourceId": c.resource_id,
        "accessMode": c.access_mode,
        "from": c.from,
        "to": c.to,
        "reason": c.reason,
    });
    event("sessions", "session.state", &p)
}

/// `handovers` / `handover.ended`.
pub(super) fn handover_ended(h: &HandoverAudit) -> PlaneEvent {
    let p = json!({
        "handoverId": h.handover_id.to_string(),
        "kind": h.kind,
        "trigger": h.trigger,
        "sourceSessionId": h.source_session_id.to_string(),
        "targetSessionId": h.target_session_id.map(|s| s.to_string()),
        "resourceId": h.resource_id,
        "accessMode": h.access_mode,
        "outcome": outcome(&h.outcome),
    });
    event("handovers", "handover.ended", &p)
}

/// SPEC RT-3: a handover's outcome as the stream shows it, in registry
/// values and codes only. The failure's text (a policy's error, a
/// credential's problem) stays in the audit log: it is free text a
/// subscriber with read access must not see.
fn outcome(o: &HandoverOutcome) -> Value {
    match o {
        HandoverOutcome::Succeeded => json!({ "result": "succeeded" }),
        HandoverOutcome::Failed {
            code,
            notification,
            message: _,
        } => json!({
            "result": "failed",
            "code": code.name().map_or_else(|| json!(code.0), |n| json!(n)),
            "notification": notification,
        }),
    }
}

/// `decisions` / `decision.pending`: a person is asked (the question
/// itself is on the admin panel, `GET /v1/decisions`).
pub(super) fn decision_pending(handover_id: Uuid, policy: &str, deadline_ms: u64) -> PlaneEvent {
    let p = json!({
        "handoverId": handover_id.to_string(),
        "policy": policy,
        "deadlineMs": deadline_ms,
    });
    event("decisions", "decision.pending", &p)
}

/// `decisions` / `decision.closed`.
pub(super) fn decision_closed(handover_id: Uuid) -> PlaneEvent {
    let p = json!({ "handoverId": handover_id.to_string() });
    event("decisions", "decision.closed", &p)
}

/// `resources` / `resource.availability` (the sessions it ended are on
/// `sessions`).
pub(super) fn resource_availability(resource_id: &str, available: bool) -> PlaneEvent {
    let p = json!({ "resourceId": resource_id, "available": available });
    event("resources", "resource.availability", &p)
}

#[cfg(test)]
mod tests {
    use dtp_codec::ErrorCode;
    use dtp_terminal::HandoverOutcome;

    /// SPEC RT-3: a failure's free text never reaches the stream; its
    /// code does.
    #[test]
    fn a_failed_handover_shows_its_code_not_its_text() {
        let failed = HandoverOutcome::Failed {
            code: ErrorCode::E_HANDOVER_FAILED_AT_ACQUIRE,
            notification: None,
            message: "policy: script error at line 3: secret_param".into(),
        };
        let v = super::outcome(&failed);
        assert_eq!(v["result"], "failed");
        assert_eq!(v["code"], "E_HANDOVER_FAILED_AT_ACQUIRE");
        assert!(!v.to_string().contains("secret_param"), "{v}");
        assert!(v.get("message").is_none());
        let v = super::outcome(&HandoverOutcome::Succeeded);
        assert_eq!(v, serde_json::json!({ "result": "succeeded" }));
    }
}
