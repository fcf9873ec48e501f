//! The `control` workload of `dtp bench`: our gateway with the
//! terminal control plane (`dtp serve` with `[dtp]` and `[terminal]`, in
//! its own process), loaded by `dtp load`'s control mode — first
//! decisions, then handovers under a priority script where the requester
//! wins — each with the gateway's CPU sampled at the edges of its window.
//!
//! There is no peer for this workload, so the report
//! has absolute figures and no ratio (`dtp_bench::control_report`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use dtp_bench::control_report::{ControlFigures, ControlReport};
use dtp_bench::control_workload::{self, ControlMode, ControlPlan};
use dtp_bench::dtp_workload::BenchKeys;
use dtp_bench::procstat::{self, Sample};
use dtp_bench::workload::Workload;
use dtp_codec::AccessMode;
use dtp_engine::CONTROL_THREAD;

use super::Server;
use super::etcd::LocalEtcd;
use crate::load::LoadSpec;
use crate::load_dtp::control::{self, ControlSpec};
use crate::text::plural;

/// Fays in each control run unless `--control-fays` says otherwise.
pub(crate) const DEFAULT_FAYS: usize = 64;

/// The options of the `control` workload (flattened into `dtp bench`'s).
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct ControlBenchCli {
    /// The control workload (the terminal control plane, ours only):
    /// Fays in each of its two runs — decisions (AuthRequest → AuthResult →
    /// SessionRelease, each Fay its own resource) and handovers (pairs
    /// sharing a resource under a priority script where the requester
    /// wins). Reports decisions/s, handovers/s, p50/p99 and the gateway's
    /// CPU per decision; no peer, so no ratio. Default 64 (even, ≥ 2).
    #[arg(long, value_name = "N")]
    pub(crate) control_fays: Option<usize>,
    /// The control workload also with our gateway in a cluster: the same
    /// decisions and handovers against a gateway with `[cluster] etcd` on
    /// a local etcd the bench starts (etcd from PATH or /usr/sbin), rows
    /// `+etcd` beside the embedded ones. Without etcd the rows are
    /// reported as not run, with the reason.
    #[arg(long)]
    pub(crate) control_etcd: bool,
}

/// The resource prefix of each run.
fn prefix(mode: ControlMode) -> &'static str {
    match mode {
        ControlMode::Decisions => "dec-",
        ControlMode::Handovers => "ho-",
        ControlMode::Idle => "idle-",
    }
}

/// The plan of each run with `fays` Fays.
fn plans(fays: usize) -> [ControlPlan; 2] {
    [ControlMode::Decisions, ControlMode::Handovers].map(|m| ControlPlan::new(m, fays, prefix(m)))
}

/// Writes `control.toml` in `dir`: the `[dtp]` section of the other DTP
/// workloads (the key files `super::write_dtp_config` wrote) and a
/// `[terminal]` serving both runs' resources.
pub(crate) fn write_config(dir: &Path, fays: usize) -> Result<PathBuf, String> {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    let [decisions, handovers] = plans(fays);
    // The admin port on an ephemeral loopback port: the terminal plane
    // wants one (idle through the run), and a fixed port could be taken.
    let text = format!(
        "[admin]\nlisten = \"127.0.0.1:0\"\n\n[dtp]\nenabled = true\nterminal_key = {:?}\ntrust = [{:?}]\nalgorithms = [\"aes-256-gcm\"]\n\n{}",
        dir.join("terminal.key").display().to_string(),
        dir.join("issuer.key.pub").display().to_string(),
        control_workload::terminal_section(
            &decisions.resource_ids(),
            &handovers.resource_ids(),
            // Every Fay holds at most one session; room for stragglers.
            2 * fays + 64,
        )
    );
    let config = dir.join("control.toml");
    std::fs::write(&config, text).map_err(io)?;
    Ok(config)
}

/// What one control run needs from the bench's plan.
pub(crate) struct Run<'a> {
    pub(crate) keys: &'a BenchKeys,
    pub(crate) config: &'a str,
    pub(crate) backend: &'a str,
    pub(crate) shards: usize,
    pub(crate) fays: usize,
    /// Also through a local etcd.
    pub(crate) etcd: bool,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
}

/// Starts our gateway with the control config and the realtime front end
/// off, runs decisions then handovers against it; then again with the
/// built-in realtime streams published (`dtp serve`'s default); with
/// `etcd`, then again (front end off) in a cluster through a local etcd.
/// Reports them all; a failure of the second or third gateway is reported
/// as a warning and leaves its two rows out (the first pair stands; the
/// etcd pair's reason is in the report).
pub(crate) fn measure(r: &Run<'_>) -> Result<ControlReport, String> {
    if r.fays < 2 || !r.fays.is_multiple_of(2) {
        return Err(format!(
            "--control-fays {}: an even number ≥ 2 (handovers run in pairs)",
            r.fays
        ));
    }
    let (decisions, handovers) = measure_pair(r, r.config, false)?;
    let streams = measure_pair(r, r.config, true)
        .inspect_err(|e| eprintln!("warning: control with the built-in streams: {e}"))
        .ok();
    let (etcd, etcd_not_run) = match r.etcd.then(|| measure_etcd(r)) {
        None => (None, None),
        Some(Ok(pair)) => (Some(pair), None),
        Some(Err(e)) => {
            eprintln!("warning: control through etcd: {e}");
            (None, Some(e))
        }
    };
    Ok(ControlReport {
        decisions,
        handovers,
        decisions_streams: streams.as_ref().map(|s| s.0.clone()),
        handovers_streams: streams.map(|s| s.1),
        decisions_etcd: etcd.as_ref().map(|e| e.0.clone()),
        handovers_etcd: etcd.map(|e| e.1),
        etcd_not_run,
    })
}

/// The `[cluster]` section of the etcd pair: this gateway alone in a
/// cluster on the etcd at `addr`, with `dtp serve`'s default timeout and
/// lease.
fn cluster_section(addr: &str) -> String {
    format!("\n[cluster]\nnode_id = \"bench\"\netcd = [\"http://{addr}\"]\n")
}

/// Decisions then handovers against a gateway in a cluster through a local
/// etcd started for them (the realtime front end off, as for the first
/// pair); why not, when etcd cannot be started.
fn measure_etcd(r: &Run<'_>) -> Result<(ControlFigures, ControlFigures), String> {
    let dir = Path::new(r.config)
        .parent()
        .ok_or("the control configuration has no folder")?;
    let etcd = LocalEtcd::start(dir)?;
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    let base = std::fs::read_to_string(r.config).map_err(io)?;
    let text = format!("{base}{}", cluster_section(&etcd.addr));
    let config = dir.join("control-etcd.toml");
    std::fs::write(&config, text).map_err(io)?;
    let pair = measure_pair(r, &config.display().to_string(), false);
    drop(etcd);
    pair
}

/// Decisions then handovers against one gateway with `config`, its
/// realtime front end (and so the built-in streams) on when `streams`.
fn measure_pair(
    r: &Run<'_>,
    config: &str,
    streams: bool,
) -> Result<(ControlFigures, ControlFigures), String> {
    let shards = r.shards.to_string();
    let mut args: Vec<String> = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--backend",
        r.backend,
        "--shards",
        &shards,
        "--config",
        config,
    ]
    .map(str::to_owned)
    .into();
    if !streams {
        args.push("--no-realtime".to_owned());
    }
    let server = Server::start("ours", &args, "listening ")?;
    let [decisions, handovers] = plans(r.fays);
    let result = measure_run(&server, r, decisions).and_then(|d| {
        let h = measure_run(&server, r, handovers)?;
        Ok((d, h))
    });
    server.stop();
    result
}

/// One run of `plan` against `server`: the server's CPU over the window.
fn measure_run(server: &Server, r: &Run<'_>, plan: ControlPlan) -> Result<ControlFigures, String> {
    let mode = plan.mode;
    let resources = plan.resources as u64;
    let spec = ControlSpec::mint(
        plan,
        AccessMode::Write,
        &r.keys.issuer,
        Some(*r.keys.terminal_noise.public()),
    )?;
    let load = LoadSpec {
        staged: false,
        target: server.endpoint.clone(),
        // Not used by the control mode.
        workload: Workload::Pingpong,
        connections: r.fays,
        duration: r.duration,
        warmup: r.warmup,
        rate: None,
        window: 512,
        shards: r.shards,
        driver: crate::load_cmd::load_driver(r.fays, 0, crate::load_cmd::LOAD_CONGESTION),
        payload: None,
        quic: None,
    };
    let mut edges: Vec<Result<Sample, String>> = Vec::new();
    let mut control_edges: Vec<Option<u64>> = Vec::new();
    let at_edge = |_| {
        edges.push(server.sample());
        control_edges.push(server.thread_cpu_ns(CONTROL_THREAD));
    };
    let result = control::run(&load, &spec, |_, _, _| {}, at_edge)
        .map_err(|e| format!("control {}: {e}", mode.name()))?;
    let mut edges = edges.into_iter();
    let (Some(start), Some(end)) = (edges.next(), edges.next()) else {
        return Err("the measured window did not complete".to_owned());
    };
    let cpu = procstat::delta(&start?, &end?).map_err(|e| e.to_string())?;
    let control_cpu_ns = match control_edges[..] {
        [Some(a), Some(b), ..] => b.saturating_sub(a),
        _ => 0,
    };
    let (t, s) = (&result.load.tally, &result.stats);
    if t.errors > 0 || t.failed > 0 || result.failed_flows > 0 || result.unfinished > 0 {
        return Err(format!(
            "control {}: {} ({}), {}, {} given up, {} unfinished",
            mode.name(),
            plural(s.errors, "error"),
            plural(s.timeouts, "timeout"),
            plural(t.failed, "failed connection"),
            plural(result.failed_flows, "Fay"),
            result.unfinished
        ));
    }
    let refused = s.refused_total();
    if refused > 0 {
        eprintln!(
            "warning: control {}: {} refused ({:?} by code)",
            mode.name(),
            plural(refused, "AuthRequest"),
            s.refused
        );
    }
    Ok(ControlFigures::from_run(
        t.connected,
        resources,
        t.ops,
        result.load.elapsed,
        (cpu.cpu_ns, control_cpu_ns),
        &result.load.latency,
        refused,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use super::*;

    /// The config the bench writes is one `dtp serve` accepts: the
    /// terminal section parses and validates (scripts compiled).
    #[test]
    fn the_bench_config_is_a_valid_terminal() {
        let dir = std::env::temp_dir().join(format!("dtp-bench-control-{}", std::process::id()));
        let keys = BenchKeys::generate().unwrap();
        assert!(super::super::sides::write_dtp_config(&dir, &keys).is_ok());
        let Ok(path) = write_config(&dir, 4) else {
            panic!("could not write the control config");
        };
        let config = crate::config::Config::load(Some(&path)).unwrap();
        let terminal = config.terminal.as_ref().expect("a [terminal] section");
        let (plane, _) = terminal.plane().unwrap();
        let ids: Vec<&str> = plane
            .control
            .resources
            .iter()
            .map(|r| r.resource_id.as_str())
            .collect();
        assert_eq!(ids, ["dec-0", "dec-1", "dec-2", "dec-3", "ho-0", "ho-1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
