//! `dtp bench`: a gateway and a load generator on loopback, side by side
//! with the tokio peer, on the same load generator, in one run.
//!
//! Each server runs in its own process (this binary, re-executed), so the
//! OS's accounting of its CPU time and memory is its alone. For every
//! workload and every run: start the server, let the load generator warm
//! up, sample the server's CPU, measure, sample again, stop the server.
//! The figures are medians over the runs; ratios are ours / peer.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dtp_bench::procstat::{self, Sample};
use dtp_bench::report::{self, Figures, Limit, Memory, Report, WorkloadReport};
use dtp_bench::workload::Workload;
use dtp_transports::{BackendPreference, DriverConfig};

use crate::cli_error::CliError;
use crate::load::{self, LoadSpec};

/// What `dtp bench` runs.
pub(crate) struct BenchArgs {
    pub(crate) quick: bool,
    pub(crate) runs: Option<usize>,
    pub(crate) workloads: Vec<Workload>,
    pub(crate) backend: String,
    pub(crate) json: Option<PathBuf>,
    pub(crate) duration: Option<f64>,
    pub(crate) idle_connections: Option<usize>,
}

struct Plan {
    runs: usize,
    warmup: Duration,
    duration: Duration,
    pingpong_connections: usize,
    stream_connections: usize,
    idle_connections: usize,
    shards: usize,
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
                    if let Some(a) = line.strip_prefix("listening ") {
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

/// One side's measurement of one workload.
fn measure(server: &Server, spec: &LoadSpec, workload: Workload) -> Result<Figures, CliError> {
    let before = server.sample()?;
    let mut edges: Vec<Result<Sample, CliError>> = Vec::new();
    let result = load::run(spec, |_, _| {}, |_| edges.push(server.sample()))
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
        workload,
        result.tally.ops,
        result.elapsed,
        cpu.cpu_ns,
        &result.latency,
    );
    Ok(if workload == Workload::Idle {
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
    let mut reports = Vec::new();
    let mut backend_name = String::new();
    for run in 0..plan.runs {
        let mut workloads = Vec::new();
        for &w in &args.workloads {
            eprintln!("run {}/{} · {} …", run + 1, plan.runs, w.name());
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
                let server = Server::start(if name == "ours" { "ours" } else { "tokio" }, argv)?;
                let spec = LoadSpec {
                    target: server.addr,
                    ..spec.clone()
                };
                let figures = measure(&server, &spec, w);
                server.stop();
                sides.push(figures?);
            }
            let peer = sides.pop().unwrap_or_default();
            let ours = sides.pop().unwrap_or_default();
            let mut entry = WorkloadReport::new(w.name(), ours, "tokio", peer);
            if w == Workload::Stream {
                let limit = dtp_bench::loopback::measure(
                    plan.duration.min(Duration::from_secs(3)),
                    crate::congestion_name(crate::LOAD_CONGESTION).as_deref(),
                )
                .map_err(|e| CliError::Io(format!("loopback limit: {e}")))?;
                let l = Limit::loopback(limit.bytes_per_s, &entry.ours, &entry.peer.figures);
                entry = entry.with_limit(l);
            }
            workloads.push(entry);
        }
        backend_name = probe_backend(&backend);
        reports.push(Report {
            backend: backend_name.clone(),
            workloads,
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
