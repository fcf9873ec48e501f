//! `dtp audit check`: SPEC HO-4 across gateways, checked from their audit
//! logs — no two controlling sessions of one resource overlap in time or
//! in fencing token ([`dtp_audit::history`]).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use dtp_audit::history::{Span, check};
use serde::Deserialize;

use crate::cli_error::CliError;

/// `dtp audit`.
#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check one or more audit logs (each gateway's, and their rotated
    /// files) for two sessions controlling one resource at once.
    ///
    /// A session controls its resource from its creation to when it last
    /// stopped being active; two such spans of one resource must not
    /// overlap unless both are reads, and across exclusive sessions the
    /// fencing tokens (with `[cluster]`, the etcd revision that admitted
    /// each) must rise with creation time. Prints one line per violation,
    /// a summary, and how many handovers the logs record (and how many
    /// succeeded); exit status 1 when there is any violation, 2 when a
    /// file cannot be read or is not an audit log.
    Check(CheckArgs),
}

/// `dtp audit check`.
#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The audit log files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// The fields of a `session_terminated` record the check reads.
#[derive(Deserialize)]
struct Record {
    record: String,
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    resource_id: String,
    #[serde(default)]
    access_mode: String,
    #[serde(default)]
    created_at: u64,
    #[serde(default)]
    active_until: Option<u64>,
    #[serde(default)]
    fencing: Option<u64>,
    /// A `handover` record's outcome.
    #[serde(default)]
    outcome: Option<Outcome>,
    /// A `handover` record's target session: none for one that succeeded
    /// with its target on another gateway.
    #[serde(default)]
    target_session_id: Option<String>,
}

/// A handover's outcome (`succeeded`, `failed`).
#[derive(Deserialize)]
struct Outcome {
    result: String,
    /// A failure's E_* code.
    #[serde(default)]
    code: Option<serde_json::Value>,
}

/// Runs it: Ok(true) when the logs hold no violation.
pub(crate) fn run(c: AuditCommand) -> Result<bool, CliError> {
    let AuditCommand::Check(args) = c;
    let mut spans = Vec::new();
    let mut sessions = 0usize;
    let (mut handovers, mut handed_over, mut across) = (0usize, 0usize, 0usize);
    let mut failed: std::collections::BTreeMap<String, usize> = Default::default();
    for file in &args.files {
        let name = file.display().to_string();
        let reader = dtp_gateway::plane::open_audit_file::<Record>(file)
            .map_err(|e| CliError::usage("BAD_AUDIT_LOG", e))?;
        for envelope in reader {
            let r = envelope
                .map_err(|e| CliError::usage("BAD_AUDIT_LOG", e))?
                .record;
            if r.record == "handover" {
                handovers += 1;
                match r.outcome {
                    Some(o) if o.result == "succeeded" => {
                        handed_over += 1;
                        across += usize::from(r.target_session_id.is_none());
                    }
                    Some(Outcome { code: Some(c), .. }) => {
                        let c = c.as_str().map_or_else(|| c.to_string(), str::to_owned);
                        *failed.entry(c).or_default() += 1;
                    }
                    _ => {}
                }
            }
            if r.record != "session_terminated" {
                continue;
            }
            sessions += 1;
            let Some(until) = r.active_until else {
                continue;
            };
            spans.push(Span {
                source: name.clone(),
                session: r.session_id,
                resource: r.resource_id,
                exclusive: r.access_mode != "read",
                from: r.created_at,
                until,
                fencing: r.fencing,
            });
        }
    }
    let violations = check(&spans);
    for v in &violations {
        println!("violation: {v}");
    }
    let fenced = spans.iter().filter(|s| s.fencing.is_some()).count();
    println!(
        "{} logs, {sessions} sessions, {} controlling spans ({fenced} with fencing tokens): {} violations",
        args.files.len(),
        spans.len(),
        violations.len()
    );
    let failed: Vec<String> = failed.iter().map(|(c, n)| format!("{c} {n}")).collect();
    println!(
        "{handovers} handovers recorded, {handed_over} handovers succeeded ({across} to another gateway); failed: {}",
        if failed.is_empty() {
            "none".to_owned()
        } else {
            failed.join(", ")
        }
    );
    Ok(violations.is_empty())
}
