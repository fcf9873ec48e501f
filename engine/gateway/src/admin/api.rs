//! The `/v1` admin endpoints of the terminal plane (SPEC TS-10, TS-11,
//! TS-16, HO-1, HO-3c), each one [`PlaneHandle`] call:
//!
//! | method and path | body | answer |
//! |---|---|---|
//! | `GET /v1/sessions` | | `{"sessions": [...]}` |
//! | `GET /v1/resources` | | `{"resources": [...]}` |
//! | `GET /v1/handovers` | | `{"handovers": [...]}` (policy deciding) |
//! | `POST /v1/sessions/{id}/terminate` | | `{"session_id", "reason": "forced"}` |
//! | `POST /v1/resources/{id}/availability` | `{"available": bool}` | `{"resource_id", "available", "sessions_ended"}` |
//! | `POST /v1/resources/{id}/reconciled` | | `{"resource_id", "cleared"}` (TS-4: an operator checked the OS after a killed command) |
//! | `POST /v1/handovers` | `{"resource_id", "target_credential", "target_fay_id"?, "reason"?, "source_session_id"?, "metadata"?}` | 202 `{"status": "evaluating"/"queued", ...}` |
//! | `GET /v1/decisions` | | `{"decisions": [...]}` (HO-3c: source and target Fay, resource, mode, reason) |
//! | `POST /v1/decisions/{handover_id}` | `{"decision": "allow"/"reject"}` | `{"handover_id", "verdict", "decided_by"}` |
//! | `POST /v1/revocations` | `{"descriptor_id": uuid}` | `{"descriptor_id", "sessions_ended"}` |
//!
//! Errors are `{"error": CODE, "message": ...}`: the terminal's E_* code
//! when it refused, else one of ours (BAD_UUID, BAD_JSON, BAD_CREDENTIAL,
//! UNKNOWN_RESOURCE, NO_CONTROLLER, BUSY, TIMEOUT, …). No answer and no
//! error message carries a credential's signature or key id.

use std::collections::BTreeMap;

use crate::{PlaneError, PlaneHandle};
use bytes::Bytes;
use dtp_codec::ErrorCode;
use dtp_crypto::cred::Credential;
use dtp_policy::HumanError;
use dtp_terminal::{AdminHandover, Refusal};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use uuid::Uuid;

use super::http::Response;

/// The admin API of one running plane.
pub struct Api {
    /// The terminal plane's handle, which the calls act through.
    pub plane: PlaneHandle,
    /// `human:<terminal_id>`: the target of a handover to the human user.
    pub human_id: String,
    /// Revocations the gateway's CAP honours too (SPEC TS-16).
    pub revocations: dtp_crypto::cred::SharedRevocations,
}

/// A handler's failure, already an HTTP answer.
type Answer = Result<Response, Response>;

impl Api {
    /// Answers `method` on `/v1/<segments>` (segments percent-decoded).
    pub fn handle(&self, method: &str, segments: &[String], body: &[u8]) -> Response {
        let s: Vec<&str> = segments.iter().map(String::as_str).collect();
        let answer = match (s.as_slice(), method) {
            (["sessions"], "GET") => self.plane.sessions().map(|v| ok(json!({"sessions": v}))),
            (["resources"], "GET") => self.plane.resources().map(|v| ok(json!({"resources": v}))),
            (["handovers"], "GET") => self
                .plane
                .pending_handovers()
                .map(|v| ok(json!({"handovers": v}))),
            (["decisions"], "GET") => self
                .plane
                .pending_decisions()
                .map(|v| ok(json!({"decisions": v}))),
            (["sessions", id, "terminate"], "POST") => return either(self.terminate(id)),
            (["resources", id, "availability"], "POST") => {
                return either(self.availability(id, body));
            }
            (["resources", id, "reconciled"], "POST") => return either(self.reconciled(id)),
            (["handovers"], "POST") => return either(self.handover(body)),
            (["decisions", id], "POST") => return either(self.decide(id, body)),
            (["revocations"], "POST") => return either(self.revoke(body)),
            (path, _) => return wrong_method_or_path(path),
        };
        answer.unwrap_or_else(plane_error)
    }

    fn terminate(&self, id: &str) -> Answer {
        let id = uuid("session id", id)?;
        self.plane.force_terminate(id).map_err(plane_error)?;
        Ok(ok(json!({"session_id": id, "reason": "forced"})))
    }

    fn availability(&self, resource_id: &str, body: &[u8]) -> Answer {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Body {
            available: bool,
        }
        let b: Body = parse(body)?;
        let ended = self
            .plane
            .set_resource_available(resource_id, b.available)
            .map_err(resource_error)?;
        Ok(ok(json!({
            "resource_id": resource_id,
            "available": b.available,
            "sessions_ended": ended.sessions_ended,
        })))
    }

    /// SPEC TS-4: the operator clears the resource's reconciliation marks.
    fn reconciled(&self, resource_id: &str) -> Answer {
        let cleared = self
            .plane
            .clear_reconciliation(resource_id)
            .map_err(resource_error)?;
        Ok(ok(json!({"resource_id": resource_id, "cleared": cleared})))
    }

    fn handover(&self, body: &[u8]) -> Answer {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Body {
            resource_id: String,
            target_credential: String,
            #[serde(default)]
            target_fay_id: Option<String>,
            #[serde(default)]
            reason: Option<String>,
            #[serde(default)]
            source_session_id: Option<String>,
            #[serde(default)]
            metadata: BTreeMap<String, String>,
        }
        let b: Body = parse(body)?;
        let source = match &b.source_session_id {
            Some(id) => uuid("source_session_id", id)?,
            None => self.controller_of(&b.resource_id)?,
        };
        let (target_fay_id, target_credential) = if b.target_credential == "human" {
            let target = b.target_fay_id.unwrap_or_else(|| self.human_id.clone());
            if target != self.human_id {
                let m = format!(
                    "target_credential \"human\" hands control to this terminal's human user, {}",
                    self.human_id
                );
                return Err(Response::error(400, "BAD_TARGET", m));
            }
            (target, Bytes::new())
        } else {
            let c = Credential::from_text(&b.target_credential).map_err(|e| {
                let m = format!(
                    "target_credential is neither \"human\" nor a credential in `dtp cred` text form: {e}"
                );
                Response::error(400, "BAD_CREDENTIAL", m)
            })?;
            let target = b
                .target_fay_id
                .unwrap_or_else(|| c.descriptor().fay_id.clone());
            (target, c.as_bytes().clone())
        };
        let request = AdminHandover {
            source_session_id: source,
            target_fay_id: target_fay_id.clone(),
            target_credential,
            reason: b
                .reason
                .unwrap_or_else(|| "administrator request".to_owned()),
            metadata: b.metadata,
        };
        let admission = self.plane.admin_handover(request).map_err(plane_error)?;
        let mut answer = serde_json::to_value(admission).unwrap_or_else(|_| json!({}));
        if let Some(map) = answer.as_object_mut() {
            map.insert("resource_id".into(), json!(b.resource_id));
            map.insert("source_session_id".into(), json!(source));
            map.insert("target_fay_id".into(), json!(target_fay_id));
        }
        Ok(Response::json(202, &answer))
    }

    /// The one session controlling `resource_id` (HO-1: the source of an
    /// admin handover named by its resource).
    fn controller_of(&self, resource_id: &str) -> Result<Uuid, Response> {
        let resources = self.plane.resources().map_err(plane_error)?;
        let Some(r) = resources.iter().find(|r| r.resource_id == resource_id) else {
            let m = format!("this terminal has no resource {resource_id:?}");
            return Err(Response::error(404, "UNKNOWN_RESOURCE", m));
        };
        match r.controllers.as_slice() {
            [one] => Ok(*one),
            [] => Err(Response::error(
                409,
                "NO_CONTROLLER",
                format!("no session controls {resource_id:?}: there is nothing to hand over"),
            )),
            _ => Err(Response::error(
                409,
                "AMBIGUOUS_SOURCE",
                format!("several sessions share {resource_id:?}: name one with source_session_id"),
            )),
        }
    }

    fn decide(&self, id: &str, body: &[u8]) -> Answer {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Body {
            decision: String,
        }
        let id = uuid("handover id", id)?;
        let b: Body = parse(body)?;
        let allow = match b.decision.as_str() {
            "allow" => true,
            "reject" => false,
            _ => {
                let m = "decision must be \"allow\" or \"reject\"";
                return Err(Response::error(400, "BAD_DECISION", m));
            }
        };
        let outcome = self.plane.decide(id, allow).map_err(plane_error)?;
        Ok(ok(json!(outcome)))
    }

    fn revoke(&self, body: &[u8]) -> Answer {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Body {
            descriptor_id: String,
        }
        let b: Body = parse(body)?;
        let id = uuid("descriptor_id", &b.descriptor_id)?;
        // CAP on every core refuses it from now on; the plane ends its
        // sessions and refuses its requests.
        if let Err(e) = self.revocations.revoke(id) {
            return Err(Response::error(503, "REVOCATIONS_FULL", e.to_string()));
        }
        let ended = self.plane.revoke(id).map_err(plane_error)?;
        Ok(ok(json!({
            "descriptor_id": id,
            "sessions_ended": ended.sessions_ended,
        })))
    }
}

fn ok(value: serde_json::Value) -> Response {
    Response::json(200, &value)
}

fn either(answer: Answer) -> Response {
    answer.unwrap_or_else(|e| e)
}

/// 405 with `allow` for a known path, 404 for an unknown one.
fn wrong_method_or_path(path: &[&str]) -> Response {
    let allow = match path {
        ["sessions"] | ["resources"] | ["decisions"] => "GET",
        ["handovers"] => "GET, POST",
        ["sessions", _, "terminate"]
        | ["resources", _, "availability"]
        | ["decisions", _]
        | ["revocations"] => "POST",
        _ => {
            let m = "no such endpoint: /v1/sessions, /v1/resources, /v1/handovers, /v1/decisions, /v1/revocations";
            return Response::error(404, "NOT_FOUND", m);
        }
    };
    Response::error(
        405,
        "METHOD_NOT_ALLOWED",
        format!("this endpoint takes {allow}"),
    )
    .with_header("allow", allow)
}

fn uuid(what: &str, text: &str) -> Result<Uuid, Response> {
    Uuid::try_parse(text).map_err(|_| {
        let m = format!("the {what} is not a UUID: {text:?}");
        Response::error(400, "BAD_UUID", m)
    })
}

/// Parses a JSON body. Messages name fields, never values: a body may hold
/// a credential.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Response> {
    if body.is_empty() {
        return Err(Response::error(400, "BAD_JSON", "a JSON body is needed"));
    }
    serde_json::from_slice(body).map_err(|e| {
        let text = e.to_string();
        let what = if e.is_data()
            && (text.starts_with("missing field") || text.starts_with("unknown field"))
        {
            text.split(" at line")
                .next()
                .unwrap_or("bad field")
                .to_owned()
        } else if e.is_data() {
            "a field has the wrong type".to_owned()
        } else {
            "not valid JSON".to_owned()
        };
        let m = format!("{what} (line {} column {})", e.line(), e.column());
        Response::error(400, "BAD_JSON", m)
    })
}

/// A plane failure as an HTTP answer.
fn plane_error(e: PlaneError) -> Response {
    match e {
        PlaneError::Refused(r) => refusal(r),
        PlaneError::Human(h) => {
            let status = match h {
                HumanError::Unknown(_) => 404,
                _ => 409,
            };
            let code = match h {
                HumanError::Unknown(_) => "UNKNOWN_DECISION",
                HumanError::AlreadyDecided(_) => "ALREADY_DECIDED",
                HumanError::Expired(_) => "DECISION_EXPIRED",
                HumanError::Duplicate(_) | HumanError::Full(_) => "CONFLICT",
            };
            Response::error(status, code, h.to_string())
        }
        PlaneError::Answer(a) => Response::error(409, "TOO_LATE", a.to_string()),
        PlaneError::Busy => Response::error(503, "BUSY", e.to_string()),
        PlaneError::Timeout(_) => Response::error(503, "TIMEOUT", e.to_string()),
        PlaneError::Stopped => Response::error(503, "STOPPED", e.to_string()),
        other => Response::error(500, "INTERNAL", other.to_string()),
    }
}

/// The terminal's refusal, under its E_* code.
fn refusal(r: Refusal) -> Response {
    let status = match r.code {
        ErrorCode::E_SESSION_NOT_FOUND => 404,
        ErrorCode::E_HANDOVER_INVALID_TARGET | ErrorCode::E_UNAUTHORIZED => 400,
        _ => 409,
    };
    Response::error(status, r.code.name().unwrap_or("REFUSED"), r.message)
}

/// A plane error for a call naming a resource: an unknown one is a 404.
fn resource_error(e: PlaneError) -> Response {
    match e {
        PlaneError::Refused(r) if r.code == ErrorCode::E_RESOURCE_UNKNOWN => {
            Response::error(404, "UNKNOWN_RESOURCE", r.message)
        }
        other => plane_error(other),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only parsed")]
    struct Secretive {
        flag: bool,
    }

    #[test]
    fn body_errors_name_fields_and_never_echo_values() {
        let body = |s: &str| {
            String::from_utf8(parse::<Secretive>(s.as_bytes()).unwrap_err().body).unwrap()
        };
        assert!(body(r#"{"flag": "s3cret-signature"}"#).contains("wrong type"));
        assert!(!body(r#"{"flag": "s3cret-signature"}"#).contains("s3cret"));
        assert!(body(r#"{"flog": true}"#).contains("unknown field `flog`"));
        assert!(body("{}").contains("missing field `flag`"));
        assert!(body("{nope").contains("not valid JSON"));
        assert!(body("").contains("a JSON body is needed"));
    }

    #[test]
    fn wrong_methods_say_what_is_allowed() {
        let r = wrong_method_or_path(&["handovers"]);
        assert_eq!(r.status, 405);
        assert_eq!(r.extra_headers, vec![("allow", "GET, POST".to_owned())]);
        assert_eq!(wrong_method_or_path(&["nope"]).status, 404);
    }
}
