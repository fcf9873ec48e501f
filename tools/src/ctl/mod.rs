//! `dtp ctl`: the terminal control plane's admin client — list sessions,
//! resources, handovers and pending human decisions, end a session, mark
//! a resource (un)available, start a handover, decide one, revoke a
//! credential — against the `/v1` endpoints of a running `dtp serve`.
//!
//! Exit status as the rest of the tool: 0 on success; 2 for bad input
//! (a malformed id, an unreadable credential, or a request the terminal
//! refused for what it names: HTTP 400, 404, 405, 409, 413) with one line
//! `error: <CODE> <message>`; 1 when the admin port cannot be reached or
//! fails (connection refused, 401, 5xx).

mod client;
mod show;

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli_error::{CliError, out};
use client::{Answer, Client};

/// `dtp ctl`'s options and command.
#[derive(Args)]
pub(crate) struct CtlArgs {
    /// The admin port of `dtp serve` (its `[admin] listen`, printed as
    /// `admin http://ADDR/v1`).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:9700",
        global = true
    )]
    admin: String,
    /// Print the server's JSON answer instead of a table or a sentence.
    #[arg(long, global = true)]
    json: bool,
    /// A file holding the admin bearer token (the server's `[admin]
    /// token_file`); sent as `Authorization: Bearer`.
    #[arg(long, value_name = "FILE", global = true)]
    token_file: Option<PathBuf>,
    /// Seconds to wait to connect and for the answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0, global = true)]
    timeout: f64,
    #[command(subcommand)]
    command: CtlCommand,
}

/// The `dtp ctl` subcommands.
#[derive(Subcommand)]
pub(crate) enum CtlCommand {
    /// List the live terminal sessions (SPEC TS-14).
    ///
    /// Id, holder (Fay id, or `human:<terminal_id>`), resource, access
    /// mode, state, connection, last heartbeat.
    Sessions,
    /// List the resources and who controls them (SPEC TS-8, HO-6).
    ///
    /// Available or not, handover policy, controlling sessions, occupants,
    /// the handover being decided and how many wait behind it.
    Resources,
    /// List the handovers whose policy is deciding now (SPEC HO-2).
    Handovers,
    /// End a session at once, reason `forced` (SPEC TS-11).
    ///
    /// Its runtime gets SessionStateChanged terminated.
    Terminate {
        /// The session id (a UUID, as `dtp ctl sessions` lists it).
        session_id: String,
    },
    /// Mark a resource available or unavailable (SPEC TS-10).
    ///
    /// Unavailable ends every session bound to it (`resource_unavailable`);
    /// available again restores none of them.
    #[command(group(ArgGroup::new("state").required(true).args(["available", "unavailable"])))]
    Resource {
        /// The resource id.
        resource_id: String,
        /// The resource is back.
        #[arg(long)]
        available: bool,
        /// The resource is gone (unplugged, crashed, lost by the OS).
        #[arg(long)]
        unavailable: bool,
    },
    /// Start a handover of a resource to a Fay or the human user (SPEC HO-1).
    ///
    /// The resource's controlling session hands over to another Fay, or to
    /// this terminal's human user (HO-9); the resource's policy decides, as
    /// for any handover. Prints the handover id (or its queue position).
    Handover {
        /// The resource whose controlling session hands over.
        #[arg(long, value_name = "RESOURCE")]
        resource: String,
        /// The target Fay's credential file (`dtp cred issue`), or the
        /// word `human` for the terminal's human user (`./human` for a
        /// file of that name).
        #[arg(long, value_name = "FILE|human")]
        credential: String,
        /// The target Fay's id (default: the credential's; for `human`,
        /// `human:<terminal_id>`).
        #[arg(long, value_name = "FAY_ID")]
        target_fay: Option<String>,
        /// Why, shown to the policy and to a person deciding.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// The source session, when several share the resource (reads).
        #[arg(long, value_name = "SESSION_ID")]
        source_session: Option<String>,
    },
    /// List the handovers waiting for a person (SPEC HO-3c).
    ///
    /// The `external_panel`: source and target Fay, resource, access mode,
    /// reason, time left and the default action — never signatures or key
    /// ids.
    Decisions,
    /// Allow or reject a handover waiting for a person (SPEC HO-3c).
    Decide {
        /// The handover id (as `dtp ctl decisions` lists it).
        handover_id: String,
        /// What the person decides.
        decision: Decision,
    },
    /// Revoke a credential on the running terminal (SPEC TS-16).
    ///
    /// Its sessions end (`credential_revoked`) and its AuthRequests are
    /// refused until the gateway restarts. Add it to the revocation list
    /// file too (`dtp cred revoke`) so it stays revoked.
    Revoke {
        /// The credential's descriptor id (as `dtp cred issue` printed it).
        descriptor_id: String,
    },
}

/// A person's decision.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Decision {
    /// Let the handover go ahead.
    Allow,
    /// Refuse it.
    Reject,
}

/// Runs one `dtp ctl` command.
pub(crate) fn run(args: CtlArgs) -> Result<(), CliError> {
    if !(args.timeout > 0.0 && args.timeout <= 3600.0) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--timeout must be in (0, 3600] seconds",
        ));
    }
    let token = match &args.token_file {
        Some(path) => Some(read_token(path)?),
        None => None,
    };
    let client = Client {
        admin: args.admin.clone(),
        token,
        timeout: Duration::from_secs_f64(args.timeout),
    };
    let (answer, render): (Value, fn(&Value) -> String) = match &args.command {
        CtlCommand::Sessions => (get(&client, "/v1/sessions")?, show::sessions),
        CtlCommand::Resources => (get(&client, "/v1/resources")?, show::resources),
        CtlCommand::Handovers => (get(&client, "/v1/handovers")?, show::handovers),
        CtlCommand::Decisions => (get(&client, "/v1/decisions")?, show::decisions),
        CtlCommand::Terminate { session_id } => {
            let id = uuid("session id", session_id)?;
            let path = format!("/v1/sessions/{id}/terminate");
            let render =
                |a: &Value| format!("terminated {} (forced)\n", show_field(a, "session_id"));
            (post(&client, &path, None)?, render)
        }
        CtlCommand::Resource {
            resource_id,
            available,
            ..
        } => {
            let path = format!("/v1/resources/{}/availability", encode(resource_id));
            let body = json!({ "available": available });
            let render = |a: &Value| {
                let state = if a["available"] == true {
                    "available"
                } else {
                    "unavailable"
                };
                format!(
                    "{} is {state}; sessions ended: {}\n",
                    show_field(a, "resource_id"),
                    show_field(a, "sessions_ended")
                )
            };
            (post(&client, &path, Some(&body))?, render)
        }
        CtlCommand::Handover {
            resource,
            credential,
            target_fay,
            reason,
            source_session,
        } => {
            let mut body = json!({
                "resource_id": resource,
                "target_credential": target_credential(credential)?,
            });
            if let Some(t) = target_fay {
                body["target_fay_id"] = json!(t);
            }
            if let Some(r) = reason {
                body["reason"] = json!(r);
            }
            if let Some(s) = source_session {
                body["source_session_id"] = json!(uuid("source session id", s)?);
            }
            (post(&client, "/v1/handovers", Some(&body))?, show::handover)
        }
        CtlCommand::Decide {
            handover_id,
            decision,
        } => {
            let id = uuid("handover id", handover_id)?;
            let word = match decision {
                Decision::Allow => "allow",
                Decision::Reject => "reject",
            };
            let body = json!({ "decision": word });
            (
                post(&client, &format!("/v1/decisions/{id}"), Some(&body))?,
                show::decided,
            )
        }
        CtlCommand::Revoke { descriptor_id } => {
            let id = uuid("descriptor id", descriptor_id)?;
            let body = json!({ "descriptor_id": id });
            let render = |a: &Value| {
                format!(
                    "revoked {}; sessions ended: {}\n",
                    show_field(a, "descriptor_id"),
                    show_field(a, "sessions_ended")
                )
            };
            (post(&client, "/v1/revocations", Some(&body))?, render)
        }
    };
    let text = if args.json {
        format!("{answer:#}\n")
    } else {
        render(&answer)
    };
    emit(&text)
}

fn show_field(a: &Value, key: &str) -> String {
    match &a[key] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn get(client: &Client, path: &str) -> Result<Value, CliError> {
    checked(client.call("GET", path, None)?)
}

fn post(client: &Client, path: &str, body: Option<&Value>) -> Result<Value, CliError> {
    checked(client.call("POST", path, body)?)
}

/// A 2xx answer's body, or the error it carries with the exit status the
/// module docs give.
fn checked(answer: Answer) -> Result<Value, CliError> {
    if (200..300).contains(&answer.status) {
        return Ok(answer.body);
    }
    let code = answer.body["error"]
        .as_str()
        .unwrap_or("HTTP_ERROR")
        .to_owned();
    let message = answer.body["message"]
        .as_str()
        .map_or_else(|| format!("HTTP status {}", answer.status), str::to_owned);
    match answer.status {
        400 | 404 | 405 | 409 | 413 => Err(CliError::Input(format!("{code} {message}"))),
        status => Err(CliError::Io(format!(
            "admin port: {status} {code} {message}"
        ))),
    }
}

fn uuid(what: &str, text: &str) -> Result<Uuid, CliError> {
    Uuid::try_parse(text.trim()).map_err(|_| {
        CliError::usage(
            "BAD_UUID",
            format_args!("the {what} `{text}` is not a UUID"),
        )
    })
}

/// `human`, or the text of a credential file (checked by the server).
fn target_credential(arg: &str) -> Result<String, CliError> {
    if arg == "human" {
        return Ok(arg.to_owned());
    }
    let text = std::fs::read_to_string(arg).map_err(|e| CliError::io(arg, e))?;
    if text.len() > dtp_crypto::cred::text::MAX_ARMOR_LEN {
        return Err(CliError::usage(
            "BAD_CREDENTIAL",
            format_args!("{arg}: longer than a credential can be"),
        ));
    }
    Ok(text)
}

fn read_token(path: &std::path::Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::io(path.display(), e))?;
    Ok(text.trim().to_owned())
}

/// Percent-encodes one path segment (unreserved characters kept).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn emit(text: &str) -> Result<(), CliError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(encode("cam-1.a_b~"), "cam-1.a_b~");
        assert_eq!(encode("cam/1 x"), "cam%2F1%20x");
    }
}
