//! `dtp bench`: our gateway and the load generator on loopback, side by
//! side with every peer (tokio, tokio-uring, the raw io_uring floor; the
//! tokio DTP peer over TCP, WebSocket and QUIC; the tokio/axum realtime
//! peer; the `web-push` crate against our Web Push sender), on the same
//! load generator where there is one, in one run.
//!
//! Each server runs in its own process (this binary, re-executed), so the
//! OS's accounting of its CPU time and memory is its alone. For every run,
//! workload and side: start the server, let the load generator warm up,
//! sample the server's CPU and the load generator's own, measure, sample
//! again, stop the server. A step that fails is recorded with its reason
//! and the bench goes on: the report ([`dtp_bench::report::combine`]) takes
//! every figure's median over the runs that measured it, prints every
//! figure, writes the JSON after every run, and the exit status says
//! whether anything failed. The `control` workload ([`control`]) has no
//! peer: absolute figures.

mod control;
mod etcd;
mod fanout;
mod nats;
mod progress;
mod push;
mod server;
mod sides;

use std::path::PathBuf;
use std::time::Duration;

use dtp_bench::dtp_workload::BenchKeys;
use dtp_bench::report::{self, Failure, Report, RunReport, RunWorkload};
use dtp_bench::workload::Workload;
use dtp_transports::{BackendPreference, DriverConfig};

use crate::cli_error::CliError;
use progress::Progress;

pub(crate) use control::ControlBenchCli;
pub(crate) use server::{BENCH_CHILD, Server};

/// A workload of `dtp bench`: the plaintext benchmark protocol, the same
/// over the full DTP protocol (CAP, an agreement, AES-256-GCM sealed
/// fragments, resume acks), `resume`: the DTP stream with forced
/// disconnects, `control`: the terminal control plane (ours only), or a
/// realtime fan-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BenchWorkload {
    /// The plaintext protocol (`dtp_bench::workload`).
    Plain(Workload),
    /// Over DTP (pingpong or stream), carried by TCP or another transport.
    Dtp(Workload, Carry),
    /// The DTP stream, each connection cut every [`RESUME_EVERY`] fragments
    /// and resumed.
    Resume,
    /// AuthRequest decisions and handovers through the terminal control
    /// plane; no peer.
    Control,
    /// One publisher, thousands of SSE or `realtime.v1` subscribers,
    /// against the tokio/axum realtime peer.
    Fanout(crate::load_rt::Mode),
    /// Web Push notifications to a local push service: our sender against
    /// the `web-push` crate.
    Push,
}

/// What carries DTP in a [`BenchWorkload::Dtp`] workload, and so which
/// peer our gateway is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Carry {
    /// TCP, against the tokio DTP peer.
    Tcp,
    /// WebSocket (`ws:`, binary messages, `dtp.v1`), against the
    /// tokio-tungstenite peer.
    Ws,
    /// QUIC (`quic:`, ALPN `dtp/1`, one stream per connection), against
    /// the quinn peer.
    Quic,
    /// RTSP-interleaved TCP (`rtsp:`): ours only, against our own TCP
    /// figure of the same run.
    Rtsp,
    /// A Unix stream socket (`unix:`): ours only, against our own TCP
    /// figure of the same run.
    Unix,
}

/// Every DTP workload by name: what it runs and over what.
const DTP_WORKLOADS: [(&str, Workload, Carry); 10] = [
    ("dtp-pingpong", Workload::Pingpong, Carry::Tcp),
    ("dtp-stream", Workload::Stream, Carry::Tcp),
    ("dtp-pingpong-ws", Workload::Pingpong, Carry::Ws),
    ("dtp-stream-ws", Workload::Stream, Carry::Ws),
    ("dtp-pingpong-quic", Workload::Pingpong, Carry::Quic),
    ("dtp-stream-quic", Workload::Stream, Carry::Quic),
    ("dtp-pingpong-rtsp", Workload::Pingpong, Carry::Rtsp),
    ("dtp-stream-rtsp", Workload::Stream, Carry::Rtsp),
    ("dtp-pingpong-unix", Workload::Pingpong, Carry::Unix),
    ("dtp-stream-unix", Workload::Stream, Carry::Unix),
];

/// Fragments between forced disconnects in the `resume` workload (32 MiB of
/// 16 KiB fragments).
const RESUME_EVERY: u64 = 2048;

/// Every workload name, in the order of the default run.
pub(crate) const ALL_WORKLOADS: &str = concat!(
    "pingpong,stream,connections,",
    "dtp-pingpong,dtp-stream,resume,dtp-pingpong-ws,dtp-stream-ws,",
    "dtp-pingpong-quic,dtp-stream-quic,dtp-pingpong-rtsp,dtp-stream-rtsp,",
    "dtp-pingpong-unix,dtp-stream-unix,",
    "control,fanout-sse,fanout-ws,push"
);

/// The request path of the DTP-over-WebSocket servers (`ws:ADDR/dtp`).
const WS_PATH: &str = "/dtp";

/// The side name of the DTP-over-WebSocket peer.
pub(crate) const TUNGSTENITE: &str = "tokio-tungstenite";

/// The side name of the DTP-over-QUIC peer.
pub(crate) const QUINN: &str = "quinn";

/// The side name of our gateway over TCP in the RTSP and Unix workloads:
/// the same run's `dtp-pingpong` or `dtp-stream` figures of ours (measured
/// there if that workload is not in the run), so that the ratio is the
/// transport's overhead over TCP.
pub(crate) const OURS_TCP: &str = "ours-tcp";

impl BenchWorkload {
    /// The name in the report and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Plain(w) => w.name(),
            Self::Dtp(w, c) => DTP_WORKLOADS
                .iter()
                .find(|&&(_, dw, dc)| (dw, dc) == (w, c))
                .map_or("dtp-connections", |&(name, _, _)| name),
            Self::Resume => "resume",
            Self::Control => "control",
            Self::Fanout(crate::load_rt::Mode::Sse) => "fanout-sse",
            Self::Fanout(crate::load_rt::Mode::Ws) => "fanout-ws",
            Self::Push => "push",
        }
    }

    /// The workload for a name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        if let Some(&(_, w, c)) = DTP_WORKLOADS.iter().find(|(n, _, _)| *n == name) {
            return Some(Self::Dtp(w, c));
        }
        Some(match name {
            "resume" => Self::Resume,
            "control" => Self::Control,
            "fanout-sse" => Self::Fanout(crate::load_rt::Mode::Sse),
            "fanout-ws" => Self::Fanout(crate::load_rt::Mode::Ws),
            "push" => Self::Push,
            other => Self::Plain(Workload::from_name(other)?),
        })
    }

    /// The plaintext workload it builds on (sizes, connections).
    fn base(self) -> Workload {
        match self {
            Self::Plain(w) | Self::Dtp(w, _) => w,
            Self::Resume => Workload::Stream,
            Self::Control | Self::Fanout(_) | Self::Push => Workload::Pingpong,
        }
    }

    /// Whether it runs the DTP protocol (and so needs the run's keys).
    fn is_dtp(self) -> bool {
        matches!(self, Self::Dtp(..) | Self::Resume | Self::Control)
    }

    /// What carries DTP (TCP for every workload but the DTP ones over
    /// another transport).
    fn carry(self) -> Carry {
        match self {
            Self::Dtp(_, c) => c,
            _ => Carry::Tcp,
        }
    }

    /// The same workload over TCP: what the RTSP and Unix workloads are
    /// measured against.
    fn over_tcp(self) -> Self {
        match self {
            Self::Dtp(w, _) => Self::Dtp(w, Carry::Tcp),
            other => other,
        }
    }

    /// The sides it runs, ours first.
    fn sides(self) -> &'static [&'static str] {
        match self {
            Self::Plain(_) => &[report::OURS, "tokio", "tokio-uring", "floor"],
            Self::Dtp(_, Carry::Tcp) | Self::Resume | Self::Fanout(_) => &[report::OURS, "tokio"],
            Self::Dtp(_, Carry::Ws) => &[report::OURS, TUNGSTENITE],
            Self::Dtp(_, Carry::Quic) => &[report::OURS, QUINN],
            Self::Dtp(_, Carry::Rtsp | Carry::Unix) => &[report::OURS, OURS_TCP],
            Self::Control => &[report::OURS],
            Self::Push => push::SIDES,
        }
    }
}

/// What `dtp bench` runs.
pub(crate) struct BenchArgs {
    pub(crate) quick: bool,
    pub(crate) full: bool,
    pub(crate) runs: Option<usize>,
    pub(crate) workloads: Vec<BenchWorkload>,
    pub(crate) backend: String,
    pub(crate) json: Option<PathBuf>,
    pub(crate) report: Option<PathBuf>,
    pub(crate) duration: Option<f64>,
    pub(crate) idle_connections: Option<usize>,
    pub(crate) stream_connections: Option<usize>,
    /// Fays per run of the `control` workload (`--control-fays`).
    pub(crate) control_fays: Option<usize>,
    /// The `control` workload also through a local etcd
    /// (`--control-etcd`).
    pub(crate) control_etcd: bool,
    /// Subscribers of the fan-out workloads (`--subscribers`).
    pub(crate) subscribers: Option<usize>,
    /// The fan-out workloads also with ours' ledgers in a local NATS
    /// JetStream, on one gateway and across two (`--fanout-nats`).
    pub(crate) fanout_nats: bool,
}

/// How much of everything: runs, windows, connection counts.
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
    /// The `control` workload also through a local etcd.
    control_etcd: bool,
    /// Subscribers of the fan-out workloads.
    subscribers: usize,
    /// The fan-out workloads also through a local NATS JetStream.
    fanout_nats: bool,
}

impl Plan {
    fn new(a: &BenchArgs) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        // --quick: one short run; default: three short runs, so the medians
        // mean something and the quick start takes minutes; --full: five
        // long ones for careful work.
        let (runs, secs, warmup_ms, crowd) = match (a.quick, a.full) {
            (true, _) => (1, 1.0, 300, 2_000),
            (_, true) => (5, 8.0, 1000, 10_000),
            _ => (3, 2.0, 500, 10_000),
        };
        let secs = a.duration.unwrap_or(secs);
        Self {
            runs: a.runs.unwrap_or(runs),
            warmup: Duration::from_millis(warmup_ms),
            duration: Duration::from_secs_f64(secs),
            pingpong_connections: 64,
            stream_connections: a.stream_connections.unwrap_or(STREAM_CONNECTIONS),
            idle_connections: a.idle_connections.unwrap_or(crowd),
            shards: cores,
            control_fays: a.control_fays.unwrap_or(control::DEFAULT_FAYS),
            control_etcd: a.control_etcd,
            subscribers: a.subscribers.unwrap_or(crowd.min(fanout::SUBSCRIBERS)),
            fanout_nats: a.fanout_nats,
        }
    }

    /// A rough time for one step (start, warm-up, window, stop), for the
    /// first estimate of the time left.
    fn step_guess(&self) -> Duration {
        self.warmup + self.duration + Duration::from_millis(700)
    }
}

/// Connections of the `stream` workloads: several, so that one
/// connection's send path is not what bounds them.
const STREAM_CONNECTIONS: usize = 4;

/// Refuses arguments that cannot work, before any work.
pub(crate) fn check(a: &BenchArgs) -> Result<(), CliError> {
    let bad = |what: String| Err(CliError::usage("BAD_ARGUMENT", what));
    if !matches!(a.backend.as_str(), "auto" | "uring" | "io_uring" | "epoll") {
        return bad(format!(
            "--backend {}: one of auto, uring, epoll",
            a.backend
        ));
    }
    if a.quick && a.full {
        return bad("--quick and --full exclude each other".into());
    }
    if a.runs.is_some_and(|r| !(1..=100).contains(&r)) {
        return bad("--runs must be in 1..=100".into());
    }
    if a.duration.is_some_and(|d| !(0.2..=600.0).contains(&d)) {
        return bad("--duration must be in [0.2, 600] seconds".into());
    }
    if a.stream_connections
        .is_some_and(|n| !(1..=256).contains(&n))
    {
        return bad("--stream-connections must be in 1..=256".into());
    }
    if a.idle_connections == Some(0) || a.subscribers == Some(0) {
        return bad("--idle-connections and --subscribers must be at least 1".into());
    }
    if let Some(f) = a.control_fays
        && (f < 2 || !f.is_multiple_of(2))
    {
        return bad(format!(
            "--control-fays {f}: an even number ≥ 2 (handovers run in pairs)"
        ));
    }
    if a.workloads.is_empty() {
        return bad("--workloads names no workload".into());
    }
    Ok(())
}

/// The run's DTP keys and config files, as `dtp cred` would have written
/// them, in a temporary folder.
struct DtpFiles {
    keys: BenchKeys,
    dir: PathBuf,
    /// The `[dtp]` config both servers read.
    config: String,
    /// Our gateway's config for `control` (`[dtp]` + `[terminal]`).
    control: Option<String>,
}

impl DtpFiles {
    fn make(plan: &Plan, with_control: bool) -> Result<Self, String> {
        let keys = BenchKeys::generate()?;
        let dir = std::env::temp_dir().join(format!("dtp-bench-{}", std::process::id()));
        let config = sides::write_dtp_config(&dir, &keys)?.display().to_string();
        let control = if with_control {
            Some(
                control::write_config(&dir, plan.control_fays)?
                    .display()
                    .to_string(),
            )
        } else {
            None
        };
        Ok(Self {
            keys,
            dir,
            config,
            control,
        })
    }
}

impl Drop for DtpFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the bench; every figure measured is printed and written even when
/// steps fail, and then the failures make the exit status 1.
pub(crate) fn run(args: BenchArgs) -> Result<(), CliError> {
    check(&args)?;
    let mut plan = Plan::new(&args);
    let mut notes = Vec::new();
    fit_to_fd_limit(&mut plan, &args, &mut notes);
    let mut failures = Vec::new();
    let needs_dtp = args.workloads.iter().any(|w| w.is_dtp());
    let with_control = args.workloads.contains(&BenchWorkload::Control);
    let dtp = if needs_dtp {
        DtpFiles::make(&plan, with_control)
            .map_err(|reason| {
                for w in args.workloads.iter().filter(|w| w.is_dtp()) {
                    failures.push(Failure {
                        run: None,
                        workload: w.name().to_owned(),
                        side: None,
                        reason: format!("keys and config: {reason}"),
                    });
                }
            })
            .ok()
    } else {
        None
    };
    let carries = |c: Carry| {
        args.workloads.iter().any(|&w| match w {
            BenchWorkload::Dtp(_, carry) => carry == c,
            BenchWorkload::Resume => c == Carry::Tcp,
            _ => false,
        })
    };
    if carries(Carry::Tcp) {
        notes.push(
            "the tokio DTP peer runs the same sans-IO DTP endpoint as our gateway, from the dtp-endpoint crate (on tokio, not on our runtime)"
                .to_owned(),
        );
    }
    if carries(Carry::Ws) {
        notes.push(format!(
            "the {TUNGSTENITE} peer is the tokio DTP peer with DTP carried in WebSocket binary messages (subprotocol dtp.v1) by tokio-tungstenite; ours serves ws:127.0.0.1:PORT{WS_PATH}"
        ));
    }
    if carries(Carry::Quic) {
        notes.push(format!(
            "the {QUINN} peer is the tokio DTP peer with DTP carried on one QUIC stream per connection (ALPN dtp/1) by quinn, its flow-control windows and timers set to ours; ours serves quic:127.0.0.1:PORT (quinn-proto on our UDP sockets)"
        ));
    }
    if carries(Carry::Rtsp) || carries(Carry::Unix) {
        notes.push(format!(
            "the RTSP and Unix workloads have no peer: {OURS_TCP} is our gateway's figure over TCP in the same run (dtp-pingpong or dtp-stream), so ours / {OURS_TCP} is the transport's overhead"
        ));
    }
    if args.workloads.contains(&BenchWorkload::Push) {
        #[cfg(not(feature = "webpush-peer"))]
        notes.push(push::NO_PEER.to_owned());
        notes.push(format!(
            "push: both senders run in this process beside a local push service (HTTPS on loopback, 201 to every POST) and their CPU is that of their sending threads only (schedstat per thread); the {} peer builds each message and request with the crate (ece encryption, a VAPID JWT per message) and sends it with hyper 1 over tokio-rustls trusting the bench's CA, as its own clients cannot be given one; {} requests in flight on each side",
            push::WEB_PUSH,
            push::WORKERS
        ));
    }
    let fanouts = args
        .workloads
        .iter()
        .filter(|w| matches!(w, BenchWorkload::Fanout(_)))
        .count();
    if plan.fanout_nats && fanouts > 0 {
        match nats::unavailable() {
            Some(why) => {
                notes.push(format!("the fan-out +nats rows were not run: {why}"));
                plan.fanout_nats = false;
            }
            None => notes.push(format!(
                "fan-out through NATS JetStream (a local nats-server per side, its store on disk): {} is one gateway with [cluster] nats, the publisher and the subscribers on it; {} is two gateways of one cluster, the publisher on one, the subscribers on the other (which reads each stream from JetStream with its follower); the latency is publish (send) → apply by a subscriber; {}'s CPU/op is both gateways' CPU summed, its memory the subscribers' gateway's",
                fanout::NATS_SAME,
                fanout::NATS_ACROSS,
                fanout::NATS_ACROSS
            )),
        }
    }
    let extra_sides = if plan.fanout_nats { 2 * fanouts } else { 0 };
    let steps: usize = (args
        .workloads
        .iter()
        .map(|w| w.sides().len())
        .sum::<usize>()
        + extra_sides)
        * plan.runs;
    let mut progress = Progress::new(steps, plan.step_guess());
    let backend_name = probe_backend(&args.backend);
    let mut runs: Vec<RunReport> = Vec::new();
    for run in 1..=plan.runs {
        let mut report = RunReport {
            run,
            backend: backend_name.clone(),
            workloads: Vec::new(),
            control: None,
            failures: Vec::new(),
        };
        let mut ctx = sides::Ctx {
            plan: &plan,
            backend: &args.backend,
            dtp: dtp.as_ref(),
            run,
            runs: plan.runs,
        };
        for &bw in &args.workloads {
            sides::workload(&mut ctx, bw, &mut report, &mut progress);
        }
        for f in &report.failures {
            progress.say(&format!(
                "failed: run {run} · {}{}: {}",
                f.workload,
                f.side
                    .as_ref()
                    .map_or_else(String::new, |s| format!(" · {s}")),
                f.reason
            ));
        }
        runs.push(report);
        // Write what there is after every run: an interrupted bench keeps
        // the runs it finished.
        if let Some(path) = &args.json {
            let partial = report::combine(runs.clone(), failures.clone(), notes.clone());
            let _ = write_json(&partial, path);
        }
    }
    progress.finish();
    let report = report::combine(runs, failures, notes);
    println!("{report}");
    let mut problems = Vec::new();
    if let Some(path) = &args.json
        && let Err(e) = write_json(&report, path)
    {
        problems.push(e);
    }
    if let Some(dir) = &args.report {
        match report::html::write_report(&report, dir) {
            Ok(files) => println!(
                "report: {} ({} plots)",
                files[0].display(),
                files.len().saturating_sub(1)
            ),
            Err(e) => problems.push(CliError::io(dir.display(), e)),
        }
    }
    if let Some(e) = problems.into_iter().next() {
        return Err(e);
    }
    if !report.failures.is_empty() {
        let n = report.failures.len();
        return Err(CliError::Io(format!(
            "{n} {} failed; every figure measured is above",
            if n == 1 { "step" } else { "steps" }
        )));
    }
    Ok(())
}

fn write_json(report: &Report, path: &std::path::Path) -> Result<(), CliError> {
    let json = report
        .to_json()
        .map_err(|e| CliError::Io(format!("json: {e}")))?;
    std::fs::write(path, json + "\n").map_err(|e| CliError::io(path.display(), e))
}

/// Fits the crowd workloads to the open-file limit (each idle connection
/// or subscriber costs this process one descriptor), with a note.
fn fit_to_fd_limit(plan: &mut Plan, args: &BenchArgs, notes: &mut Vec<String>) {
    let limit = dtp_transports::raise_fd_limit().unwrap_or(1024) as usize;
    let room = limit.saturating_sub(256).max(1);
    let wants = |w: fn(BenchWorkload) -> bool| args.workloads.iter().any(|b| w(*b));
    if plan.idle_connections > room && wants(|w| w == BenchWorkload::Plain(Workload::Idle)) {
        let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned());
        notes.push(format!(
            "the open-file limit is {limit} (the soft limit raised to the hard one; fs.nr_open is {nr_open}): the connections workload opens {room} connections instead of {} — each needs a descriptor in the load generator and one in the server; raise the hard limit to hold more (README: many connections)",
            plan.idle_connections
        ));
        plan.idle_connections = room;
    }
    if plan.subscribers > room && wants(|w| matches!(w, BenchWorkload::Fanout(_))) {
        notes.push(format!(
            "the open-file limit is {limit}: the fan-out workloads run {room} subscribers instead of {}",
            plan.subscribers
        ));
        plan.subscribers = room;
    }
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
        Ok(d) => dtp_transports::Transport::backend(&d)
            .kind
            .name()
            .to_owned(),
        Err(e) => format!("unavailable ({e})"),
    }
}

/// Records a step that produced no figures.
fn fail(report: &mut RunReport, workload: &str, side: Option<&str>, reason: String) {
    report.failures.push(Failure {
        run: Some(report.run),
        workload: workload.to_owned(),
        side: side.map(str::to_owned),
        reason,
    });
}

/// The workload's entry in `report`, made on first use.
fn entry<'a>(report: &'a mut RunReport, name: &str) -> &'a mut RunWorkload {
    let i = match report.workloads.iter().position(|w| w.name == name) {
        Some(i) => i,
        None => {
            report.workloads.push(RunWorkload {
                name: name.to_owned(),
                sides: Vec::new(),
                limits: Vec::new(),
            });
            report.workloads.len() - 1
        }
    };
    &mut report.workloads[i]
}
