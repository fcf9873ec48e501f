//! `dtp bench`: a gateway and a load generator on loopback, side by side
//! with the tokio peer, on the same load generator, in one run.
//!
//! Each server runs in its own process (this binary, re-executed), so the
//! OS's accounting of its CPU time and memory is its alone. For every
//! workload and every run: start the server, let the load generator warm
//! up, sample the server's CPU, measure, sample again, stop the server.
//! The figures are medians over the runs; ratios are ours / peer. The
//! `control` workload (module [`control`]) has no peer: our gateway with
//! the terminal control plane, absolute figures.

mod control;
mod fanout;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dtp_bench::dtp_workload::BenchKeys;
use dtp_bench::procstat::{self, Sample};
use dtp_bench::report::{self, Figures, Limit, Memory, Report, WorkloadReport};
use dtp_bench::workload::Workload;
use dtp_codec::AeadAlgorithm;
use dtp_transports::{BackendPreference, DriverConfig};

use crate::cli_error::CliError;
use crate::load::{self, LoadResult, LoadSpec};
use crate::load_dtp::{self, DtpSpec};

pub(crate) use control::ControlBenchCli;

/// A workload of `dtp bench`: the plaintext benchmark protocol, the same
/// over the full DTP protocol (CAP, an agreement, AES-256-GCM sealed
/// fragments, resume acks), `resume`: the DTP stream with forced
/// disconnects, or `control`: the terminal control plane (ours only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BenchWorkload {
    /// The plaintext protocol (`dtp_bench::workload`).
    Plain(Workload),
    /// Over DTP (pingpong or stream).
    Dtp(Workload),
    /// The DTP stream, each connection cut every [`RESUME_EVERY`] fragments
    /// and resumed.
    Resume,
    /// AuthRequest decisions and handovers through the terminal control
    /// plane (issue 5); opt-in, no peer.
    Control,
    /// One publisher, thousands of SSE or `realtime.v1` subscribers
    /// (issue 6), against the tokio/axum realtime peer.
    Fanout(crate::load_rt::Mode),
}

/// Fragments between forced disconnects in the `resume` workload (32 MiB of
/// 16 KiB fragments).
const RESUME_EVERY: u64 = 2048;

impl BenchWorkload {
    /// The name in the report and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Plain(w) => w.name(),
            Self::Dtp(Workload::Pingpong) => "dtp-pingpong",
            Self::Dtp(Workload::Stream) => "dtp-stream",
            Self::Dtp(Workload::Idle) => "dtp-connections",
            Self::Resume => "resume",
            Self::Control => "control",
            Self::Fanout(crate::load_rt::Mode::Sse) => "fanout-sse",
            Self::Fanout(crate::load_rt::Mode::Ws) => "fanout-ws",
        }
    }

    /// The workload for a name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "dtp-pingpong" => Self::Dtp(Workload::Pingpong),
            "dtp-stream" => Self::Dtp(Workload::Stream),
            "resume" => Self::Resume,
            "control" => Self::Control,
            "fanout-sse" => Self::Fanout(crate::load_rt::Mode::Sse),
            "fanout-ws" => Self::Fanout(crate::load_rt::Mode::Ws),
            other => Self::Plain(Workload::from_name(other)?),
        })
    }

    /// The plaintext workload it builds on (sizes, connections).
    fn base(self) -> Workload {
        match self {
            Self::Plain(w) | Self::Dtp(w) => w,
            Self::Resume => Workload::Stream,
            Self::Control | Self::Fanout(_) => Workload::Pingpong,
        }
    }

    /// Whether it runs the side-by-side DTP workloads' protocol (and so
    /// needs their keys and `[dtp]` config).
    fn is_dtp(self) -> bool {
        matches!(self, Self::Dtp(_) | Self::Resume)
    }
}

/// What `dtp bench` runs.
pub(crate) struct BenchArgs {
    pub(crate) quick: bool,
    pub(crate) runs: Option<usize>,
    pub(crate) workloads: Vec<BenchWorkload>,
    pub(crate) backend: String,
    pub(crate) json: Option<PathBuf>,
    pub(crate) duration: Option<f64>,
    pub(crate) idle_connections: Option<usize>,
    /// Fays per run of the `control` workload (`--control-fays`).
    pub(crate) control_fays: Option<usize>,
    /// Subscribers of the fan-out workloads (`--subscribers`).
    pub(crate) subscribers: Option<usize>,
}

struct Plan {
    runs: usize,
    warmup: Duration,
    duration: Duration,
    pingpong_connections: usize,
    stream_connections: usize,
    idle_connections: usize,
    shards: usize,
    /// Fays in each run of the `control` workload.
    control_fays: usize,
    /// Subscribers of the fan-out workloads.
    subscribers: usize,
}

impl Plan {
    fn new(a: &BenchArgs) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (runs, secs) = if a.quick { (1, 3.0) } else { (3, 8.0) };
        let secs = a.duration.unwrap_or(secs).clamp(0.5, 600.0);
        Self {
            runs: a.runs.unwrap_or(runs).max(1),
            warmup: Duration::from_millis(if a.quick { 500 } else { 1000 }),
            duration: Duration::from_secs_f64(secs),
            pingpong_connections: 64,
            stream_connections: 1,
            idle_connections: a.idle_connections.unwrap_or(10_000),
            shards: cores,
            control_fays: a.control_fays.unwrap_or(control::DEFAULT_FAYS),
            subscribers: a.subscribers.unwrap_or(fanout::SUBSCRIBERS),
        }
    }
}

/// A server process under test.
struct Server {
    child: Child,
    addr: SocketAddr,
    name: &'static str,
}

impl Server {
    fn start(name: &'static str, args: &[&str]) -> Result<Self, CliError> {
        Self::start_announcing(name, args, "listening ")
    }

    /// Starts a server and takes its address from the first stdout line
    /// that begins with `prefix` (up to a `/`, e.g. `realtime http://ADDR/v1`).
    fn start_announcing(name: &'static str, args: &[&str], prefix: &str) -> Result<Self, CliError> {
        let exe =
            std::env::current_exe().map_err(|e| CliError::Io(format!("own executable: {e}")))?;
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| CliError::Io(format!("starting the {name} server: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| CliError::Io("no server stdout".to_owned()))?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(a) = line.strip_prefix(prefix) {
                        let a = a.split(['/', ' ']).next().unwrap_or_default();
                        break a.trim().parse().map_err(|e| {
                            CliError::Io(format!("{name} server said {line:?}: {e}"))
                        })?;
                    }
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(CliError::Io(format!(
                        "the {name} server exited before listening"
                    )));
                }
            }
        };
        // Keep draining its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Self { child, addr, name })
    }

    fn sample(&self) -> Result<Sample, CliError> {
        procstat::sample(self.child.id())
            .map_err(|e| CliError::Io(format!("{} server stats: {e}", self.name)))
    }

    fn stop(mut self) {
        // SIGTERM would be gentler, but the figures are already taken.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One side's measurement of one workload: the load runs through `load`,
/// which calls its phase callback at the start and the end of the measured
/// window, where the server's CPU is sampled.
fn measure(
    server: &Server,
    workload: BenchWorkload,
    load: impl FnOnce(&mut dyn FnMut(load::Phase)) -> Result<LoadResult, String>,
) -> Result<Figures, CliError> {
    let before = server.sample()?;
    let mut edges: Vec<Result<Sample, CliError>> = Vec::new();
    let result = load(&mut |_| edges.push(server.sample()))
        .map_err(|e| CliError::Io(format!("{} run: {e}", server.name)))?;
    let mut edges = edges.into_iter();
    let (Some(start), Some(end)) = (edges.next(), edges.next()) else {
        return Err(CliError::Io(
            "the measured window did not complete".to_owned(),
        ));
    };
    let (start, end) = (start?, end?);
    let cpu = procstat::delta(&start, &end).map_err(|e| CliError::Io(e.to_string()))?;
    if result.tally.errors > 0 || result.tally.failed > 0 {
        return Err(CliError::Io(format!(
            "{} {}: {} errors, {} failed connections",
            server.name,
            workload.name(),
            result.tally.errors,
            result.tally.failed
        )));
    }
    let figures = Figures::from_run(
        workload.base(),
        result.tally.ops,
        result.elapsed,
        cpu.cpu_ns,
        &result.latency,
    );
    Ok(if workload == BenchWorkload::Plain(Workload::Idle) {
        figures.with_memory(Memory::from_rss(
            result.tally.connected,
            before.rss_bytes,
            end.rss_bytes,
            end.peak_rss_bytes,
        ))
    } else {
        figures
    })
}

/// A DTP run on one side: the load over DTP; for `resume`, the figures'
/// p50/p99 are the resume latencies, and nothing may be lost or duplicated.
fn measure_dtp(
    server: &Server,
    workload: BenchWorkload,
    spec: &LoadSpec,
    dtp: &DtpSpec,
) -> Result<Figures, CliError> {
    let mut counters = None;
    let mut figures = measure(server, workload, |phase| {
        let r = load_dtp::run(spec, dtp, |_, _| {}, phase)?;
        counters = Some(r.dtp);
        Ok(r.load)
    })?;
    let Some(c) = counters else {
        return Err(CliError::Io("no DTP counters".to_owned()));
    };
    if c.lost > 0 || c.duplicated > 0 || c.failed_flows > 0 {
        return Err(CliError::Io(format!(
            "{} {}: {} fragments lost, {} duplicated, {} flows failed",
            server.name,
            workload.name(),
            c.lost,
            c.duplicated,
            c.failed_flows
        )));
    }
    if workload == BenchWorkload::Resume {
        let (p50, p99) = c.resume_p50_p99_us();
        figures.p50_us = p50 as f64;
        figures.p99_us = p99 as f64;
    }
    Ok(figures)
}

/// The key files and the `[dtp]` configuration both servers read.
fn write_dtp_config(dir: &std::path::Path, keys: &BenchKeys) -> Result<PathBuf, CliError> {
    let io = |e: std::io::Error| CliError::io(dir.display(), e);
    std::fs::create_dir_all(dir).map_err(io)?;
    let terminal = dir.join("terminal.key");
    let issuer = dir.join("issuer.key.pub");
    std::fs::write(&terminal, keys.terminal_noise.to_text()).map_err(io)?;
    std::fs::write(&issuer, keys.issuer.public_key().to_text()).map_err(io)?;
    let config = dir.join("dtp.toml");
    let text = format!(
        "[dtp]\nenabled = true\nterminal_key = {:?}\ntrust = [{:?}]\nalgorithms = [\"aes-256-gcm\"]\n",
        terminal.display().to_string(),
        issuer.display().to_string()
    );
    std::fs::write(&config, text).map_err(io)?;
    Ok(config)
}

pub(crate) fn run(args: BenchArgs) -> Result<(), CliError> {
    let mut plan = Plan::new(&args);
    // Each idle connection costs this process one descriptor (the server
    // its own, in its process): fit the workload to the open-file limit.
    let limit = dtp_transports::raise_fd_limit().unwrap_or(1024) as usize;
    let room = limit.saturating_sub(256);
    if plan.idle_connections > room {
        eprintln!(
            "note: the open-file limit is {limit}: the connections workload opens {room} connections instead of {}",
            plan.idle_connections
        );
        plan.idle_connections = room;
    }
    if plan.subscribers > room {
        eprintln!(
            "note: the open-file limit is {limit}: the fan-out workloads run {room} subscribers instead of {}",
            plan.subscribers
        );
        plan.subscribers = room;
    }
    let backend = args.backend.clone();
    let shards = plan.shards.to_string();
    let ours_args = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--no-admin",
        "--backend",
        backend.as_str(),
        "--shards",
        shards.as_str(),
    ];
    let peer_args = [
        "__peer-tokio",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        shards.as_str(),
    ];
    // The DTP workloads: fresh keys for this run, in files both servers
    // read (as `dtp cred` would have written them); `control` adds a
    // `[terminal]` for our gateway.
    let with_control = args.workloads.contains(&BenchWorkload::Control);
    let dtp = if with_control || args.workloads.iter().any(|w| w.is_dtp()) {
        let keys = BenchKeys::generate().map_err(CliError::Io)?;
        let dir = std::env::temp_dir().join(format!("dtp-bench-{}", std::process::id()));
        let config = write_dtp_config(&dir, &keys)?;
        Some((keys, dir, config.display().to_string()))
    } else {
        None
    };
    let control_config = match (&dtp, with_control) {
        (Some((_, dir, _)), true) => Some(
            control::write_config(dir, plan.control_fays)?
                .display()
                .to_string(),
        ),
        _ => None,
    };
    let mut reports = Vec::new();
    let mut backend_name = String::new();
    for run in 0..plan.runs {
        let mut workloads = Vec::new();
        let mut control_report = None;
        let mut dtp_stream_goodput = None;
        for &bw in &args.workloads {
            eprintln!("run {}/{} · {} …", run + 1, plan.runs, bw.name());
            if bw == BenchWorkload::Control {
                let (Some((keys, _, _)), Some(config)) = (&dtp, &control_config) else {
                    return Err(CliError::Io("no control configuration".to_owned()));
                };
                control_report = Some(control::measure(&control::Run {
                    keys,
                    config,
                    backend: &backend,
                    shards: plan.shards,
                    fays: plan.control_fays,
                    warmup: plan.warmup,
                    duration: plan.duration,
                })?);
                continue;
            }
            if let BenchWorkload::Fanout(mode) = bw {
                workloads.push(fanout_entry(&plan, &backend, mode)?);
                continue;
            }
            let w = bw.base();
            let spec = LoadSpec {
                target: "127.0.0.1:0"
                    .parse()
                    .map_err(|_| CliError::Io("address".to_owned()))?,
                workload: w,
                connections: match w {
                    Workload::Pingpong => plan.pingpong_connections,
                    Workload::Stream => plan.stream_connections,
                    Workload::Idle => plan.idle_connections,
                },
                duration: if w == Workload::Idle {
                    Duration::from_secs(1)
                } else {
                    plan.duration
                },
                warmup: if w == Workload::Idle {
                    Duration::from_secs(3).max(plan.warmup)
                } else {
                    plan.warmup
                },
                rate: None,
                window: 512,
                shards: plan.shards,
                driver: crate::load_driver(32 * 1024, 0, crate::LOAD_CONGESTION),
                payload: None,
            };
            let mut sides = Vec::new();
            for (name, argv) in [("ours", &ours_args[..]), ("tokio", &peer_args[..])] {
                let mut argv: Vec<&str> = argv.to_vec();
                if let (true, Some((_, _, config))) = (bw.is_dtp(), &dtp) {
                    argv.extend(["--config", config.as_str()]);
                }
                let server = Server::start(if name == "ours" { "ours" } else { "tokio" }, &argv)?;
                let spec = LoadSpec {
                    target: server.addr,
                    ..spec.clone()
                };
                let figures = match (&dtp, bw) {
                    (Some((keys, _, _)), BenchWorkload::Dtp(_) | BenchWorkload::Resume) => {
                        let dtp_spec = DtpSpec {
                            fay: keys.fay_config(),
                            disconnect_every: (bw == BenchWorkload::Resume).then_some(RESUME_EVERY),
                        };
                        measure_dtp(&server, bw, &spec, &dtp_spec)
                    }
                    _ => measure(&server, bw, |phase| {
                        load::run(&spec, |_, _| {}, phase).map_err(|e| e.to_string())
                    }),
                };
                server.stop();
                sides.push(figures?);
            }
            let peer = sides.pop().unwrap_or_default();
            let ours = sides.pop().unwrap_or_default();
            let mut entry = WorkloadReport::new(bw.name(), ours, "tokio", peer);
            let window = plan.duration.min(Duration::from_secs(3));
            match bw {
                BenchWorkload::Plain(Workload::Stream) => {
                    let limit = loopback_limit(window)?;
                    let l = Limit::loopback(limit, &entry.ours, &entry.peer.figures);
                    entry = entry.with_limit(l);
                }
                BenchWorkload::Dtp(Workload::Stream) => {
                    // The lower of the loopback limit and one core sealing
                    // 16 KiB fragments with AES-256-GCM, both measured now.
                    let loopback = loopback_limit(window)?;
                    let aead = dtp_bench::aead_limit::measure(
                        AeadAlgorithm::Aes256Gcm,
                        16 * 1024,
                        window.min(Duration::from_secs(1)),
                    );
                    let (name, bytes) = if aead < loopback {
                        ("aead (AES-256-GCM, one core)", aead)
                    } else {
                        ("loopback", loopback)
                    };
                    let l = Limit::named(name, bytes, &entry.ours, &entry.peer.figures);
                    entry = entry.with_limit(l);
                    dtp_stream_goodput =
                        Some((entry.ours.bytes_per_s, entry.peer.figures.bytes_per_s));
                }
                BenchWorkload::Resume => {
                    // Goodput with disconnects against goodput without,
                    // each side against its own dtp-stream of this run.
                    if let Some((ours, peer)) = dtp_stream_goodput {
                        let mut l = Limit::named(
                            "dtp-stream goodput without disconnects (ours)",
                            ours,
                            &entry.ours,
                            &entry.peer.figures,
                        );
                        l.peer_fraction =
                            (peer > 0.0).then(|| entry.peer.figures.bytes_per_s / peer);
                        entry = entry.with_limit(l);
                    }
                }
                _ => {}
            }
            workloads.push(entry);
        }
        backend_name = probe_backend(&backend);
        reports.push(Report {
            backend: backend_name.clone(),
            workloads,
            control: control_report,
        });
    }
    let report = if reports.len() == 1 {
        reports
            .pop()
            .ok_or_else(|| CliError::Io("no run".to_owned()))?
    } else {
        report::median_of(&reports).map_err(|e| CliError::Io(format!("median: {e}")))?
    };
    let mut table = String::new();
    let _ = report::write_table(&report, &mut table);
    println!("{table}");
    if plan.runs > 1 {
        println!("(medians of {} runs; backend {backend_name})", plan.runs);
    }
    if let Some(path) = &args.json {
        let json = report
            .to_json()
            .map_err(|e| CliError::Io(format!("json: {e}")))?;
        std::fs::write(path, json).map_err(|e| CliError::io(path.display(), e))?;
    }
    Ok(())
}

/// One fan-out workload, ours then the peer.
fn fanout_entry(
    plan: &Plan,
    backend: &str,
    mode: crate::load_rt::Mode,
) -> Result<WorkloadReport, CliError> {
    let shards = plan.shards.to_string();
    let run = fanout::Run {
        mode,
        subscribers: plan.subscribers,
        shards: plan.shards,
        warmup: plan.warmup,
        duration: plan.duration,
    };
    let ours = Server::start_announcing(
        "ours",
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--realtime-listen",
            "127.0.0.1:0",
            "--no-admin",
            "--backend",
            backend,
            "--shards",
            &shards,
        ],
        "realtime http://",
    )?;
    let figures = fanout::measure(&ours, &run);
    ours.stop();
    let ours = figures?;
    let peer = Server::start(
        "tokio",
        &[
            "__peer-realtime",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            &shards,
        ],
    )?;
    let figures = fanout::measure(&peer, &run);
    peer.stop();
    let name = match mode {
        crate::load_rt::Mode::Sse => "fanout-sse",
        crate::load_rt::Mode::Ws => "fanout-ws",
    };
    Ok(WorkloadReport::new(name, ours, "tokio", figures?))
}

/// The loopback limit with the load generator's congestion control.
fn loopback_limit(window: Duration) -> Result<f64, CliError> {
    dtp_bench::loopback::measure(
        window,
        crate::congestion_name(crate::LOAD_CONGESTION).as_deref(),
    )
    .map(|l| l.bytes_per_s)
    .map_err(|e| CliError::Io(format!("loopback limit: {e}")))
}

/// The backend our gateway picks with this preference (the same logic, in-process).
fn probe_backend(pref: &str) -> String {
    let backend = match pref {
        "epoll" => BackendPreference::Epoll,
        "uring" | "io_uring" => BackendPreference::Uring,
        _ => BackendPreference::Auto,
    };
    let config = DriverConfig {
        backend,
        recv_buffers: 8,
        send_chunks: 8,
        ..DriverConfig::default()
    };
    match dtp_transports::Driver::new(config) {
        Ok(d) => d.backend().kind.name().to_owned(),
        Err(e) => format!("unavailable ({e})"),
    }
}
