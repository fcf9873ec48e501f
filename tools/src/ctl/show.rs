//! `dtp ctl`'s human-readable output: aligned tables of the admin port's
//! JSON lists, and one line per action.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// A field as text: strings as they are, numbers and booleans printed,
/// absent or null as `-`.
fn field(v: &Value, key: &str) -> String {
    match v.get(key) {
        None | Some(Value::Null) => "-".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => if *b { "yes" } else { "no" }.to_owned(),
        Some(other) => other.to_string(),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `12s ago` for a past Unix-ms time.
fn ago(v: &Value, key: &str) -> String {
    match v.get(key).and_then(Value::as_u64) {
        Some(t) => format!("{}s ago", now_ms().saturating_sub(t) / 1000),
        None => "-".to_owned(),
    }
}

/// `12s` until a Unix-ms deadline, or `due`.
fn left(v: &Value, key: &str) -> String {
    match v.get(key).and_then(Value::as_u64) {
        Some(t) if t > now_ms() => format!("{}s", (t - now_ms()).div_ceil(1000)),
        Some(_) => "due".to_owned(),
        None => "-".to_owned(),
    }
}

/// Lays `rows` out under `headers`, columns two spaces apart.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The list under `key` of an answer (empty if absent).
fn list<'a>(answer: &'a Value, key: &str) -> &'a [Value] {
    answer
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `GET /v1/sessions`.
pub(crate) fn sessions(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = list(answer, "sessions")
        .iter()
        .map(|s| {
            let connection = if s.get("conn").is_some_and(|c| !c.is_null()) {
                "up".to_owned()
            } else {
                format!("down {}", ago(s, "conn_down_since"))
            };
            vec![
                field(s, "session_id"),
                field(s, "fay_id"),
                field(s, "resource_id"),
                field(s, "access_mode"),
                field(s, "state"),
                connection,
                ago(s, "last_heartbeat_at"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no sessions\n".to_owned();
    }
    let headers = [
        "SESSION",
        "HOLDER",
        "RESOURCE",
        "MODE",
        "STATE",
        "CONNECTION",
        "LAST BEAT",
    ];
    table(&headers, &rows)
}

/// `GET /v1/resources`.
pub(crate) fn resources(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = list(answer, "resources")
        .iter()
        .map(|r| {
            let controllers: Vec<String> = list(r, "controllers")
                .iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            let handover = r
                .get("handover")
                .map_or("-".to_owned(), |h| field(h, "handover_id"));
            vec![
                field(r, "resource_id"),
                field(r, "available"),
                field(r, "handover_policy"),
                if controllers.is_empty() {
                    "-".to_owned()
                } else {
                    controllers.join(",")
                },
                list(r, "occupancy").len().to_string(),
                handover,
                field(r, "queued"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no resources\n".to_owned();
    }
    let headers = [
        "RESOURCE",
        "AVAILABLE",
        "POLICY",
        "CONTROLLERS",
        "OCCUPANTS",
        "HANDOVER",
        "QUEUED",
    ];
    table(&headers, &rows)
}

/// `GET /v1/handovers`.
pub(crate) fn handovers(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = list(answer, "handovers")
        .iter()
        .map(|h| {
            vec![
                field(h, "handover_id"),
                field(h, "resource_id"),
                field(h, "source_session_id"),
                field(h, "target_fay_id"),
                field(h, "trigger"),
                format!("{} ({})", field(h, "policy"), field(h, "policy_kind")),
                left(h, "deadline"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no handovers pending\n".to_owned();
    }
    let headers = [
        "HANDOVER",
        "RESOURCE",
        "SOURCE",
        "TARGET",
        "TRIGGER",
        "POLICY",
        "TIME LEFT",
    ];
    table(&headers, &rows)
}

/// `GET /v1/decisions`: what HO-3c shows a person, and nothing else.
pub(crate) fn decisions(answer: &Value) -> String {
    let rows: Vec<Vec<String>> = list(answer, "decisions")
        .iter()
        .map(|d| {
            vec![
                field(d, "handover_id"),
                field(d, "source_fay_id"),
                field(d, "target_fay_id"),
                field(d, "resource_id"),
                field(d, "access_mode"),
                field(d, "reason"),
                left(d, "deadline_ms"),
                field(d, "default_action"),
            ]
        })
        .collect();
    if rows.is_empty() {
        return "no decisions pending\n".to_owned();
    }
    let headers = [
        "HANDOVER",
        "FROM",
        "TO",
        "RESOURCE",
        "MODE",
        "REASON",
        "TIME LEFT",
        "DEFAULT",
    ];
    table(&headers, &rows)
}

/// `POST /v1/handovers`' answer.
pub(crate) fn handover(answer: &Value) -> String {
    let what = format!(
        "{} from session {} to {}",
        field(answer, "resource_id"),
        field(answer, "source_session_id"),
        field(answer, "target_fay_id")
    );
    match answer.get("status").and_then(Value::as_str) {
        Some("queued") => format!(
            "handover of {what}: queued at position {} behind another handover\n",
            field(answer, "position")
        ),
        _ => format!(
            "handover {} of {what}: the policy is deciding\n",
            field(answer, "handover_id")
        ),
    }
}

/// `POST /v1/decisions/{id}`' answer.
pub(crate) fn decided(answer: &Value) -> String {
    let verdict = answer.get("verdict").cloned().unwrap_or(Value::Null);
    let decision = match field(&verdict, "decision").as_str() {
        "allow" => "allowed",
        "reject" => "rejected",
        other => return format!("handover {}: {other}\n", field(answer, "handover_id")),
    };
    format!("handover {}: {decision}\n", field(answer, "handover_id"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tables_align_and_empty_lists_say_so() {
        let t = table(&["A", "BB"], &[vec!["long".into(), "x".into()]]);
        assert_eq!(t, "A     BB\nlong  x\n");
        assert_eq!(sessions(&json!({"sessions": []})), "no sessions\n");
        let d = decisions(&json!({"decisions": [{
            "handover_id": "h", "source_fay_id": "a", "target_fay_id": "b",
            "resource_id": "arm", "access_mode": "write", "reason": "r",
            "deadline_ms": 0, "default_action": "reject"
        }]}));
        assert!(
            d.contains("h  ") && d.contains("due") && d.contains("reject"),
            "{d}"
        );
    }
}
