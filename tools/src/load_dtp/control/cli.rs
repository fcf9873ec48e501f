//! `dtp load --dtp --control MODE` as a command: its options, the issuer
//! key that mints the Fays' credentials, the text report and the JSON.
//!
//! **Owns**: the control mode's options ([`ControlCli`], flattened into
//! `dtp load`'s) and report format (the other load modes' keys plus a
//! `control` object). **Never touches**: the run (`super`), the rules of
//! the workload (`dtp_bench::control_workload`).

use std::path::PathBuf;

use dtp_bench::control_workload::{self, ControlMode, ControlPlan};
use dtp_bench::latency::{LatencyRecorder, LatencySummary};
use dtp_codec::ErrorCode;
use dtp_crypto::cred::IssuerKeyPair;

use super::{ControlLoadResult, ControlSpec};
use crate::cli_error::CliError;
use crate::load::LoadSpec;
use crate::load_dtp::cli::{read_public_key, read_text};

/// The options of the control mode of `dtp load` (flattened into its
/// command line).
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct ControlCli {
    /// With --dtp: load the terminal control plane (issue 5) instead of
    /// sending fragments. `decisions`: each connection is a Fay with its
    /// own credential (minted from --issuer-key) looping AuthRequest →
    /// AuthResult → SessionRelease → SessionStateChanged. `handovers`:
    /// pairs of Fays take a shared resource from each other (its handover
    /// policy must let the requester win). Reports decisions (or handovers
    /// won) per second, latency from AuthRequest to AuthResult, and
    /// refusals by code. The terminal must know the resources (see
    /// --resources) and trust the issuer.
    #[arg(
        long,
        value_name = "MODE",
        requires = "dtp",
        conflicts_with_all = ["fay_key", "credential", "disconnect_every", "rate"]
    )]
    pub(crate) control: Option<String>,
    /// With --control: the issuer's private key (`dtp cred issuer-key`)
    /// that signs one credential per Fay (Fay ids `MODE-fay-0`, …).
    #[arg(long, value_name = "FILE", requires = "control")]
    pub(crate) issuer_key: Option<PathBuf>,
    /// With --control: distinct resources, `PREFIX0` … `PREFIX<N-1>`,
    /// shared round-robin by Fay (decisions) or by pair (handovers).
    /// Default: one per Fay, or one per pair.
    #[arg(long, value_name = "N", requires = "control")]
    pub(crate) resources: Option<usize>,
    /// With --control: the prefix of the resource ids.
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "res-",
        requires = "control"
    )]
    pub(crate) resource_prefix: String,
    /// With --control: the access mode asked for (read, write, execute,
    /// configure).
    #[arg(
        long,
        value_name = "MODE",
        default_value = "write",
        requires = "control"
    )]
    pub(crate) access_mode: String,
}

/// `dtp load --dtp --control MODE`: checks the options, mints the Fays,
/// runs, reports.
pub(crate) fn run_cli(
    spec: &LoadSpec,
    a: ControlCli,
    pin_terminal: Option<String>,
    json: Option<PathBuf>,
    min_success: f64,
) -> Result<(), CliError> {
    let usage = |what: String| CliError::usage("BAD_ARGUMENT", what);
    let name = a.control.as_deref().unwrap_or_default();
    let mode = ControlMode::from_name(name)
        .ok_or_else(|| usage(format!("--control {name:?}: decisions or handovers")))?;
    let access = control_workload::access_mode(&a.access_mode).ok_or_else(|| {
        usage(format!(
            "--access-mode {:?}: read, write, execute or configure",
            a.access_mode
        ))
    })?;
    let Some(key_path) = &a.issuer_key else {
        return Err(usage(
            "--control needs --issuer-key FILE (dtp cred issuer-key): it signs each Fay's credential"
                .to_owned(),
        ));
    };
    let mut plan = ControlPlan::new(mode, spec.connections, &a.resource_prefix);
    if let Some(n) = a.resources {
        plan.resources = n;
    }
    plan.check().map_err(usage)?;
    let issuer = IssuerKeyPair::from_text(&read_text(key_path)?).map_err(|e| {
        CliError::usage(
            "BAD_KEY",
            format_args!(
                "{}: not an issuer private key ({e}); make one with `dtp cred issuer-key`",
                key_path.display()
            ),
        )
    })?;
    let pinned = match &pin_terminal {
        Some(arg) => Some(read_public_key(arg)?),
        None => {
            eprintln!("warning: no --pin-terminal: any terminal key is accepted");
            None
        }
    };
    let control = ControlSpec::mint(plan, access, &issuer, pinned).map_err(CliError::Io)?;
    let total = (spec.warmup + spec.duration).as_secs_f64();
    let bar = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let b = indicatif::ProgressBar::new((total * 10.0) as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    let result = super::run(
        spec,
        &control,
        |secs, ops| {
            if let Some(b) = &bar {
                b.set_position((secs * 10.0) as u64);
                b.set_message(format!("{ops} {}", mode.name()));
            }
        },
        |_| {},
    )
    .map_err(CliError::Io)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    print!("{}", text_report(&control, &result));
    if let Some(path) = json {
        let v = json_report(&control, &result);
        std::fs::write(&path, format!("{v:#}\n")).map_err(|e| CliError::io(path.display(), e))?;
    }
    result.verdict(spec, min_success).map_err(CliError::Io)
}

/// A code's name for the report (`E_RESOURCE_BUSY`, or its number).
fn code_name(code: u16) -> String {
    ErrorCode(code)
        .name()
        .map_or_else(|| code.to_string(), str::to_owned)
}

/// The human-readable report.
pub(crate) fn text_report(c: &ControlSpec, r: &ControlLoadResult) -> String {
    let (t, l, s) = (&r.load.tally, &r.load.latency, &r.stats);
    let secs = r.load.elapsed.as_secs_f64().max(1e-9);
    let mut out = format!(
        "control {} over DTP · {} Fays on {} resources ({}) · {:.1} s · backend {}\n",
        c.plan.mode.name(),
        t.connected,
        c.plan.resources,
        c.access.name(),
        r.load.elapsed.as_secs_f64(),
        r.load.backend
    );
    out += &match c.plan.mode {
        ControlMode::Decisions => format!(
            "decisions   {:.0}/s  ({} in the window)\n",
            s.decisions as f64 / secs,
            s.decisions
        ),
        ControlMode::Handovers => format!(
            "handovers   {:.0}/s  ({} won in the window; {:.0} decisions/s)\n",
            s.handovers as f64 / secs,
            s.handovers,
            s.decisions as f64 / secs
        ),
    };
    out += &format!(
        "latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (AuthRequest → AuthResult{})\n",
        l.p50_us,
        l.p90_us,
        l.p99_us,
        l.p999_us,
        l.max_us,
        if c.plan.mode == ControlMode::Handovers {
            " of the winner"
        } else {
            ""
        }
    );
    if s.release_latency.count() > 0 {
        let rel = s.release_latency.summary();
        out += &format!(
            "release µs  p50 {}  p99 {}  (SessionRelease → SessionStateChanged)\n",
            rel.p50_us, rel.p99_us
        );
    }
    out += "refused     ";
    out += &if s.refused.is_empty() {
        "none".to_owned()
    } else {
        s.refused
            .iter()
            .map(|(code, n)| format!("{} {n}", code_name(*code)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out += "\n";
    if t.errors + t.failed + r.failed_flows + r.unfinished + s.handover_failures > 0 {
        out += &format!(
            "problems    {} errors ({} timeouts), {} failed connections, {} Fays given up, {} unfinished, {} handovers failed\n",
            s.errors, s.timeouts, t.failed, r.failed_flows, r.unfinished, s.handover_failures
        );
    }
    out
}

fn quantiles(l: &LatencySummary) -> serde_json::Value {
    serde_json::json!({"p50": l.p50_us, "p90": l.p90_us, "p99": l.p99_us, "p999": l.p999_us, "max": l.max_us})
}

fn summary(r: &LatencyRecorder) -> serde_json::Value {
    quantiles(&r.summary())
}

/// The JSON report: the other load modes' keys (`ops` and `latency_us` are
/// the mode's: decisions, or handovers won) and a `control` object.
pub(crate) fn json_report(c: &ControlSpec, r: &ControlLoadResult) -> serde_json::Value {
    let (t, s) = (&r.load.tally, &r.stats);
    let secs = r.load.elapsed.as_secs_f64().max(1e-9);
    let refused: serde_json::Map<String, serde_json::Value> = s
        .refused
        .iter()
        .map(|(code, n)| (code_name(*code), (*n).into()))
        .collect();
    serde_json::json!({
        "workload": "control",
        "connections": t.connected,
        "duration_s": r.load.elapsed.as_secs_f64(),
        "backend": r.load.backend,
        "ops": t.ops,
        "ops_per_s": r.load.ops_per_s(),
        "bytes_per_s": 0.0,
        "latency_us": quantiles(&r.load.latency),
        "errors": t.errors,
        "failed_connections": t.failed,
        "backlogged": t.backlogged,
        "client_cpu_ns": r.load.client_cpu_ns,
        "failures": s.failures.to_json(),
        "control": {
            "mode": c.plan.mode.name(),
            "fays": c.plan.fays,
            "resources": c.plan.resources,
            "access_mode": c.access.name(),
            "decisions": s.decisions,
            "decisions_per_s": s.decisions as f64 / secs,
            "handovers": s.handovers,
            "handovers_per_s": s.handovers as f64 / secs,
            "decision_latency_us": summary(&s.decision_latency),
            "handover_latency_us": summary(&s.handover_latency),
            "release_latency_us": summary(&s.release_latency),
            "refused": refused,
            "refused_total": s.refused_total(),
            "timeouts": s.timeouts,
            "handover_failures": s.handover_failures,
            "failed_flows": r.failed_flows,
            "unfinished": r.unfinished,
        },
    })
}
