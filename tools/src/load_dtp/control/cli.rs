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
use crate::text::plural;

/// The options of the control mode of `dtp load` (flattened into its
/// command line).
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct ControlCli {
    /// With --dtp: load the terminal control plane instead of sending
    /// fragments. `decisions`: each connection is a Fay with its own
    /// credential (minted from --issuer-key) looping AuthRequest →
    /// AuthResult → SessionRelease → SessionStateChanged. `handovers`:
    /// pairs of Fays take a shared resource from each other (its handover
    /// policy must let the requester win). Reports decisions (or handovers
    /// won) per second, latency from AuthRequest to AuthResult, and
    /// refusals by code. `idle`: each connection is a Fay that takes a
    /// session on its own resource and holds it for the whole run with a
    /// heartbeat every --heartbeat-ms (a soak: many quiet sessions);
    /// reports sessions held, heartbeats answered and their latency,
    /// sessions lost, and every 10 s a line with the sessions held. The
    /// terminal must know the resources (see --resources) and trust the
    /// issuer. `hold`: one Fay (--fay-key and
    /// --credential, or a credential minted from --issuer-key for
    /// --fay-id) opens a session on --resource, prints its id, keeps it
    /// alive with heartbeats until Ctrl-C (or --duration), then releases
    /// it: a session to try `dtp ctl` on.
    #[arg(
        long,
        value_name = "MODE",
        requires = "dtp",
        conflicts_with_all = ["disconnect_every", "rate"]
    )]
    pub(crate) control: Option<String>,
    /// With --control hold: the resource to hold a session on.
    #[arg(long, value_name = "ID", requires = "control")]
    pub(crate) resource: Option<String>,
    /// With --control hold and --issuer-key: the Fay id of the minted
    /// credential.
    #[arg(
        long,
        value_name = "ID",
        default_value = "hold-fay",
        requires = "control"
    )]
    pub(crate) fay_id: String,
    /// With --control hold or idle: milliseconds between two heartbeats
    /// (at most the terminal's heartbeat_interval_ms, at least 1000).
    /// Default: 1000 for hold, 10000 (the terminal's default interval)
    /// for idle.
    #[arg(long, value_name = "MS", requires = "control")]
    pub(crate) heartbeat_ms: Option<u64>,
    /// With --control: Fays of a client shard opening at once (connecting,
    /// in CAP, or waiting for their first AuthResult), at most; the next
    /// starts as one is answered. Bounds the ramp so handshakes do not
    /// time out in the terminal's listen backlog.
    #[arg(long, value_name = "N", default_value_t = super::MAX_OPENING, requires = "control")]
    pub(crate) max_opening: usize,
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

/// What the DTP options of `dtp load` give the control modes.
pub(crate) struct ControlArgs {
    /// `--pin-terminal`.
    pub(crate) pin_terminal: Option<String>,
    /// `--json`.
    pub(crate) json: Option<PathBuf>,
    /// `--min-success`.
    pub(crate) min_success: f64,
    /// `--fay-key` and `--credential` (hold only).
    pub(crate) fay_key: Option<PathBuf>,
    pub(crate) credential: Option<PathBuf>,
    /// `--duration` as given (hold: `None` holds until Ctrl-C).
    pub(crate) hold_for: Option<std::time::Duration>,
}

/// `dtp load --dtp --control MODE`: checks the options, mints the Fays,
/// runs, reports; `hold` holds one session instead.
pub(crate) fn run_cli(spec: &LoadSpec, a: ControlCli, o: ControlArgs) -> Result<(), CliError> {
    let usage = |what: String| CliError::usage("BAD_ARGUMENT", what);
    let name = a.control.as_deref().unwrap_or_default();
    let access = control_workload::access_mode(&a.access_mode).ok_or_else(|| {
        usage(format!(
            "--access-mode {:?}: read, write, execute or configure",
            a.access_mode
        ))
    })?;
    if name == "hold" {
        return run_hold(spec, &a, access, o);
    }
    let mode = ControlMode::from_name(name).ok_or_else(|| {
        usage(format!(
            "--control {name:?}: decisions, handovers, idle or hold"
        ))
    })?;
    if o.fay_key.is_some() || o.credential.is_some() || a.resource.is_some() {
        return Err(usage(format!(
            "--fay-key, --credential and --resource apply to --control hold; {name} mints a credential per Fay from --issuer-key"
        )));
    }
    let (pin_terminal, json, min_success) = (o.pin_terminal, o.json, o.min_success);
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
    let issuer = read_issuer(key_path)?;
    let pinned = match &pin_terminal {
        Some(arg) => Some(read_public_key(arg)?),
        None => {
            eprintln!("warning: no --pin-terminal: any terminal key is accepted");
            None
        }
    };
    let mut control = ControlSpec::mint(plan, access, &issuer, pinned).map_err(CliError::Io)?;
    control.heartbeat = heartbeat_of(&a, 10_000)?;
    if a.max_opening == 0 {
        return Err(usage("--max-opening must be at least 1".to_owned()));
    }
    control.max_opening = a.max_opening;
    let mut lines = IdleLines::new(mode);
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
        |secs, ops, held| {
            if let Some(b) = &bar {
                b.set_position((secs * 10.0) as u64);
                b.set_message(match mode {
                    ControlMode::Idle => format!("{held} sessions held"),
                    _ => format!("{ops} {}", mode.name()),
                });
            } else {
                lines.at(secs, ops, held);
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
    result
        .verdict(spec, mode, min_success)
        .map_err(CliError::Io)
}

/// `--control hold`: the Fay from its files or minted, then `hold::run`.
fn run_hold(
    spec: &LoadSpec,
    a: &ControlCli,
    access: dtp_codec::AccessMode,
    o: ControlArgs,
) -> Result<(), CliError> {
    let usage = |what: &str| CliError::usage("BAD_ARGUMENT", what);
    let Some(resource_id) = a.resource.clone() else {
        return Err(usage(
            "--control hold needs --resource ID: the resource to hold a session on",
        ));
    };
    let heartbeat = heartbeat_of(a, 1000)?;
    if o.hold_for.is_some_and(|d| d.is_zero()) {
        return Err(usage("--duration must be positive"));
    }
    let pinned = match &o.pin_terminal {
        Some(arg) => Some(read_public_key(arg)?),
        None => {
            eprintln!("warning: no --pin-terminal: any terminal key is accepted");
            None
        }
    };
    let fay = match (&o.fay_key, &o.credential, &a.issuer_key) {
        (Some(key), Some(cred), None) => crate::load_dtp::cli::fay_config_from(key, cred, pinned)?,
        (None, None, Some(issuer)) => {
            let issuer = read_issuer(issuer)?;
            let m = control_workload::mint_fay(&issuer, &a.fay_id, &resource_id, access)
                .map_err(CliError::Io)?;
            crate::load_dtp::cli::fay_config(m.noise, m.credential, pinned)
        }
        _ => {
            return Err(usage(
                "--control hold needs either --fay-key FILE and --credential FILE, or --issuer-key FILE",
            ));
        }
    };
    let Some(target) = spec.target.tcp() else {
        return Err(usage("--control hold needs a TCP --target (HOST:PORT)"));
    };
    super::hold::run(&super::hold::HoldSpec {
        target,
        fay,
        resource_id,
        access,
        heartbeat,
        duration: o.hold_for,
    })
}

/// `--heartbeat-ms`, or `default_ms`, checked (SPEC LIV-2: 1–60 s).
fn heartbeat_of(a: &ControlCli, default_ms: u64) -> Result<std::time::Duration, CliError> {
    let ms = a.heartbeat_ms.unwrap_or(default_ms);
    if !(1000..=60_000).contains(&ms) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--heartbeat-ms must be in 1000..=60000 (SPEC LIV-2)",
        ));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// `idle` without a terminal on stderr: a line every [`IdleLines::EVERY`]
/// seconds with the sessions held and the heartbeats answered, for a
/// script or a log to follow a long run.
struct IdleLines {
    on: bool,
    next: f64,
}

impl IdleLines {
    const EVERY: f64 = 10.0;

    fn new(mode: ControlMode) -> Self {
        Self {
            on: mode == ControlMode::Idle,
            next: Self::EVERY,
        }
    }

    fn at(&mut self, secs: f64, answered: u64, held: u64) {
        if self.on && secs >= self.next {
            self.next += Self::EVERY;
            eprintln!("{secs:7.1} s  {held} sessions held  {answered} heartbeats answered");
        }
    }
}

/// The issuer's private key from its file.
fn read_issuer(path: &std::path::Path) -> Result<IssuerKeyPair, CliError> {
    IssuerKeyPair::from_text(&read_text(path)?).map_err(|e| {
        CliError::usage(
            "BAD_KEY",
            format_args!(
                "{}: not an issuer private key ({e}); make one with `dtp cred issuer-key`",
                path.display()
            ),
        )
    })
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
        "control {} over DTP · {} on {} ({}) · {:.1} s · backend {}\n",
        c.plan.mode.name(),
        plural(t.connected, "Fay"),
        plural(c.plan.resources, "resource"),
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
        ControlMode::Idle => format!(
            "sessions    {} granted, {} held at the end, {} lost, {} ended by the terminal\n\
             heartbeats  {} sent, {} answered  (every {} ms)\n",
            s.granted,
            r.held_at_end,
            s.lost,
            s.ended,
            s.heartbeats_sent,
            s.heartbeats_answered,
            c.heartbeat.as_millis(),
        ),
    };
    out += &format!(
        "latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({})\n",
        l.p50_us,
        l.p90_us,
        l.p99_us,
        l.p999_us,
        l.max_us,
        match c.plan.mode {
            ControlMode::Decisions => "AuthRequest → AuthResult",
            ControlMode::Handovers => "AuthRequest → AuthResult of the winner",
            ControlMode::Idle => "Heartbeat → HeartbeatAck",
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
            "problems    {} ({}), {}, {} given up, {} unfinished, {} failed\n",
            plural(s.errors, "error"),
            plural(s.timeouts, "timeout"),
            plural(t.failed, "failed connection"),
            plural(r.failed_flows, "Fay"),
            r.unfinished,
            plural(s.handover_failures, "handover")
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
            "granted": s.granted,
            "held_at_end": r.held_at_end,
            "lost": s.lost,
            "ended": s.ended,
            "heartbeat_ms": c.heartbeat.as_millis() as u64,
            "heartbeats_sent": s.heartbeats_sent,
            "heartbeats_answered": s.heartbeats_answered,
            "heartbeat_latency_us": summary(&s.heartbeat_latency),
        },
    })
}
