//! `dtp`: the DTP data plane's command-line tool: the gateway (`serve`),
//! the load generator (`load`), the side-by-side benchmark (`bench`), the
//! terminal's admin client (`ctl`), frame tools (`inspect`, `frame`) and
//! credential tools (`cred`).
#![forbid(unsafe_code)]

mod audit_cmd;
mod bench;
mod cli_error;
mod cluster_auth;
mod cluster_cfg;
mod config;
mod cred_cmd;
mod ctl;
mod frame_cmd;
mod gateway;
mod inspect;
mod load;
mod load_cmd;
mod load_dtp;
mod load_rt;
mod logging;
mod push_cfg;
mod realtime_cfg;
mod serve;
mod sim;
mod sim_cmd;
mod terminal_cfg;
mod text;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use dtp_codec::Limits;

use crate::cli_error::CliError;

/// DTP data plane: a thread-per-core io_uring gateway, its load generator,
/// a side-by-side benchmark against tokio, and frame tools.
///
/// Start with `dtp bench --quick`. Exit status: 0 on success, 2 on malformed
/// input or bad usage, a file named that does not exist included (one line
/// `error: <code> <what> [at byte <offset>]` on stderr), 1 when something
/// outside the input fails (a file that cannot be read or written, a socket,
/// a port another process holds: `error: ADDRESS_IN_USE <key> <addr> …`).
///
/// Logs go to stderr (colour only on a terminal). RUST_LOG sets what is
/// logged, e.g. `RUST_LOG=info` or `RUST_LOG=dtp_engine=debug`; by default
/// only warnings and errors.
#[derive(Parser)]
#[command(name = "dtp", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway: every core a shard, on io_uring (epoll as fallback).
    ///
    /// Runs on embedded defaults (listen 127.0.0.1:7700, realtime on
    /// 127.0.0.1:7780, admin port on 127.0.0.1:9700); `--config FILE` reads
    /// TOML (unknown keys refused; relative file names in it are relative to
    /// its folder; `--print-config` shows every key, documented, with its
    /// value). `[dtp]` turns on the DTP protocol; `[terminal]` (needs
    /// `[dtp]`) runs the terminal control plane — sessions, liveness,
    /// handover, audit log — and serves its admin endpoints under /v1 on the
    /// admin port (`dtp ctl`).
    ///
    /// Prints one line per address it serves: `listening ADDR` (the
    /// gateway), `realtime http://ADDR/v1`, `metrics http://ADDR/metrics`,
    /// `health http://ADDR/healthz http://ADDR/readyz` and, with
    /// `[terminal]`, `admin http://ADDR/v1`. On the admin port, without the
    /// token: GET /healthz answers 200 `ok` while the process serves; GET
    /// /readyz answers 200 `ready` while every shard runs and the control
    /// thread answers, else 503 `not ready: <why>`.
    ///
    /// A port another process holds (even one sharing it with
    /// SO_REUSEPORT, such as a second `dtp serve`) is refused before
    /// anything starts: `error: ADDRESS_IN_USE engine.listen ADDR is already
    /// in use`, exit status 1. Configuration errors are one line `error:
    /// BAD_CONFIG <file> line N: <what>` or naming the key, exit status 2.
    ///
    /// SIGINT/SIGTERM stop it: it prints `draining: …` (no new
    /// connections, /readyz 503), sends what is queued, closes connections
    /// within engine.drain_ms, then prints `stopped` and exits 0. Logs go
    /// to stderr (`--log-format json`: one JSON object per line);
    /// RUST_LOG=info shows more (e.g. the IO backend's choice).
    Serve(ServeCli),
    /// Drive a gateway with load and print throughput and latency.
    ///
    /// Built on the same engine as the gateway. Closed loop by default;
    /// `--rate` sends at a fixed rate and measures latency from each
    /// request's intended send time (no coordinated omission).
    Load(Box<load_cmd::LoadCli>),
    /// Benchmark our gateway against its peers on loopback — tokio,
    /// tokio-uring and the raw io_uring floor — with the same load
    /// generator, and print every figure and the ratios.
    ///
    /// Three short runs by default (a few minutes; --quick one run under a
    /// minute, --full five long runs); every figure is the median over the
    /// runs that measured it. A step that fails is reported with its reason
    /// and the rest goes on: every figure measured is printed (and written
    /// with --json and --report), and the exit status is 1 if anything
    /// failed. Progress goes to stderr.
    ///
    /// Workloads: pingpong (100-byte request/response, 64 connections),
    /// stream (16 KiB frames, 4 connections), connections (10,000 idle
    /// connections: memory per connection), and the same over the full DTP protocol:
    /// dtp-pingpong, dtp-stream, resume (forced disconnects; its p50/p99
    /// are resume latencies); dtp-pingpong-ws and dtp-stream-ws (DTP over
    /// WebSocket against a tokio-tungstenite peer); dtp-pingpong-quic and
    /// dtp-stream-quic (DTP over QUIC against a quinn peer);
    /// dtp-pingpong-rtsp, dtp-stream-rtsp, dtp-pingpong-unix and
    /// dtp-stream-unix (ours only, against our own TCP figure of the same
    /// run); and control (the terminal control plane:
    /// AuthRequest → AuthResult decisions per second and handovers per
    /// second under a priority script, 64 Fays, without and with the built-in
    /// realtime streams published; no peer, absolute figures).
    /// Reports the server's CPU time per operation
    /// (from the OS), throughput, latency, and for the streams their limit
    /// (loopback; for dtp-stream and dtp-stream-ws the lower of loopback
    /// and one core's AES-256-GCM; for dtp-stream-quic the lower of UDP
    /// loopback and one core's AES-256-GCM).
    Bench(BenchCli),
    /// (Internal) The realtime fan-out peer of `dtp bench`: SSE and
    /// `realtime.v1` on axum and a tokio broadcast channel.
    #[command(name = "__peer-realtime", hide = true)]
    PeerRealtime {
        /// Where to listen.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// Runtime worker threads (0: one per core).
        #[arg(long, default_value_t = 0)]
        workers: usize,
    },
    /// The tokio peer server used by `dtp bench` (internal).
    #[command(name = "__peer-tokio", hide = true)]
    PeerTokio {
        /// Where to listen.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// Runtime worker threads.
        #[arg(long, default_value_t = 0)]
        workers: usize,
        /// A `dtp serve` configuration file: with `[dtp] enabled = true`
        /// the peer runs the DTP protocol with its keys.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// With a DTP --config: carry DTP over WebSocket (tokio-tungstenite,
        /// subprotocol dtp.v1) at this request path.
        #[arg(long, value_name = "PATH", requires = "config")]
        websocket: Option<String>,
        /// With a DTP --config: carry DTP over QUIC (quinn, ALPN dtp/1) on
        /// UDP at --listen, with a self-signed certificate whose SHA-256
        /// it prints (`quic certificate sha256 HEX`).
        #[arg(long, requires = "config", conflicts_with = "websocket")]
        quic: bool,
    },
    /// The tokio-uring peer server used by `dtp bench` (internal).
    #[command(name = "__peer-tokio-uring", hide = true)]
    PeerTokioUring {
        /// Where to listen.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// Worker threads, one runtime each (0: one per core).
        #[arg(long, default_value_t = 0)]
        workers: usize,
    },
    /// The raw io_uring floor used by `dtp bench` (internal): the least a
    /// server can do for the plaintext workloads.
    #[command(name = "__peer-floor", hide = true)]
    PeerFloor {
        /// Where to listen.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// Threads, one ring each (0: one per core).
        #[arg(long, default_value_t = 0)]
        workers: usize,
    },
    /// Decode one or more concatenated binary frames and print them.
    ///
    /// Reads FILE, or the bytes given with --hex, or standard input when
    /// neither is given. Frames are decoded as a stream: input may be any
    /// size, memory stays bounded by the maximum frame length.
    Inspect(InspectArgs),
    /// Build binary frames from their JSON form, or print sample frames.
    #[command(subcommand)]
    Frame(FrameCommand),
    /// Issuer keys, Fay credentials and revocation lists (CAP identity).
    ///
    /// Flow: `issuer-key` once per issuer, `noise-key` per Fay, `issue` a
    /// credential binding the Fay's Noise key to its grants, `verify` it as a
    /// terminal would, `revoke` it. Exit status: 0 on success, 2 on bad input,
    /// a file named that does not exist, or a credential that does not
    /// verify (`error: <code> <what>`), 1 when a file cannot be read or
    /// written.
    #[command(subcommand)]
    Cred(cred_cmd::CredCommand),
    /// Administer a running terminal: sessions, resources, handovers,
    /// human decisions, revocations.
    ///
    /// Talks to the `/v1` endpoints on the admin port of `dtp serve` (run
    /// with `[terminal]`; `--admin ADDR`, default 127.0.0.1:9700). Prints
    /// tables or one line per action; `--json` prints the server's JSON.
    /// Exit status: 0 on success; 2 on bad input or a request the terminal
    /// refused (`error: <CODE> <message>`, e.g. E_SESSION_NOT_FOUND); 1
    /// when the admin port cannot be reached or fails.
    Ctl(ctl::CtlArgs),
    /// Read gateways' audit logs: `dtp audit check FILE...` finds two
    /// sessions that controlled one resource at once (SPEC HO-4, also
    /// across gateways: by time and by fencing token).
    #[command(subcommand)]
    Audit(audit_cmd::AuditCommand),
    /// Simulate the terminal control plane deterministically and check its
    /// invariants after every input.
    ///
    /// One terminal per seed (six resources under a priority script, an AI
    /// model, two human-decision policies and none; eight Fays), driven in
    /// virtual time with seeded randomness — no threads, no sockets, no clock
    /// reads (but the 100 ms budget check inside the priority-script
    /// runner), so the same seed prints the same bytes. Each step moves the
    /// clock (timers, model replies, human answers fall due) and applies one
    /// random input: AuthRequests with valid, expired, not-yet-valid,
    /// revoked, unknown-issuer, wrong-grant, wrong-Fay and garbage
    /// credentials; heartbeats (aggregated, retransmitted, replayed, after
    /// death); connection drops and returns; releases (also repeated);
    /// revocations and expiries; resource loss and return; forced ends;
    /// transfer and admin handovers Fay→Fay, Fay→human and human→Fay under
    /// the three policies (the model allows, rejects, asks for a human, sends
    /// garbage, is down, times out or answers too late; the person allows,
    /// rejects or stays silent); OS grant/revoke failures, also injected at
    /// the handover steps that can fail.
    ///
    /// After every input it checks: at most one active controller per
    /// resource (also at every observable instant of the event stream); the
    /// TS-9 occupancy matrix; occupancy exactly the live sessions; OS grants
    /// exactly the live sessions; every handover ends, by its hard deadline,
    /// in success or a HandoverFailedNotification to the parties; the
    /// SessionStateChanged messages of TS-15 and HO-10; heartbeat answers
    /// (LIV-2/3/5); why each session ended (TS-11, TS-16, LIV-4).
    ///
    /// Prints the steps run, the seeds, a count of every kind of event and
    /// every violation with the seed and step that reproduce it (`--seed S
    /// --steps N` replays a run up to step N). Exit status: 0 when no
    /// invariant broke, 1 on any
    /// violation, 2 on bad usage.
    Sim(sim_cmd::SimCli),
}

#[derive(Args)]
struct ServeCli {
    /// TOML configuration file (default: embedded defaults).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen on this endpoint instead of the configured ones: `HOST:PORT`
    /// (TCP), `unix:PATH`, `ws:HOST:PORT/PATH` (DTP frames as WebSocket
    /// binary messages, subprotocol dtp.v1), `rtsp:HOST:PORT`
    /// (RTSP-interleaved), `quic:HOST:PORT` (see `[quic]` in the config),
    /// `ble:ADDR/psm/N[?mtu=M]` (Bluetooth LE L2CAP channel; needs a host
    /// with Bluetooth) or `ble-sim:PATH[?mtu=M]` (the BLE link simulated on
    /// a Unix seqpacket socket, SDUs of at most M bytes, default 247).
    /// With a TCP port the realtime front end
    /// moves to the same IP on a free port (printed), unless
    /// --realtime-listen says where.
    #[arg(long, value_name = "ENDPOINT")]
    listen: Option<dtp_transports::Endpoint>,
    /// The realtime front end's address (SSE, WebSocket realtime.v1,
    /// snapshots, publication; default 127.0.0.1:7780).
    #[arg(long, value_name = "ADDR")]
    realtime_listen: Option<std::net::SocketAddr>,
    /// Serve no realtime front end.
    #[arg(long)]
    no_realtime: bool,
    /// Switch on the plain WebSocket echo endpoint /v1/echo on the realtime
    /// port (for RFC 6455 conformance suites such as Autobahn|Testsuite).
    #[arg(long)]
    echo: bool,
    /// IO backend: auto, uring or epoll (also DTP_IO_BACKEND).
    #[arg(long, value_name = "BACKEND")]
    backend: Option<String>,
    /// Core shards (0: one per core).
    #[arg(long, value_name = "N")]
    shards: Option<usize>,
    /// Serve no admin port: neither /metrics, /healthz, /readyz nor the /v1
    /// endpoints.
    #[arg(long)]
    no_admin: bool,
    /// Do not pin shards to cores (for machines shared with other busy
    /// processes, such as a load generator: a pinned shard cannot move to a
    /// free core).
    #[arg(long)]
    no_pin: bool,
    /// Log lines on stderr as `text` (colour only on a terminal) or `json`
    /// (one object per line: time, level, target, spans, message and the
    /// event's fields). RUST_LOG chooses what is logged.
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    log_format: logging::LogFormat,
    /// Print the effective configuration (file and flags) as TOML, every
    /// key under a comment saying what it is, and exit.
    #[arg(long)]
    print_config: bool,
}

#[derive(Args)]
struct BenchCli {
    /// One short run (under a minute): smaller crowds, 1 s windows.
    #[arg(long)]
    quick: bool,
    /// Five long runs (8 s windows) for careful work; the default is three
    /// short runs (2 s windows), a few minutes in all.
    #[arg(long, conflicts_with = "quick")]
    full: bool,
    /// Runs (1–100); every figure is the median over the runs that measured it.
    #[arg(long, value_name = "N")]
    runs: Option<usize>,
    /// Comma-separated workloads: pingpong, stream, connections (plaintext,
    /// against tokio, tokio-uring and the raw io_uring floor),
    /// dtp-pingpong, dtp-stream (the full DTP protocol: CAP, an agreement,
    /// AES-256-GCM sealed fragments, resume acks), resume (dtp-stream with
    /// every connection cut and resumed every 2,048 fragments),
    /// dtp-pingpong-ws and dtp-stream-ws (the same DTP workloads carried in
    /// WebSocket binary messages, subprotocol dtp.v1: ours on a ws:
    /// listener against a tokio-tungstenite peer, side `tokio-tungstenite`),
    /// dtp-pingpong-quic and dtp-stream-quic (carried on one QUIC stream
    /// per connection, ALPN dtp/1: ours on a quic: listener against a quinn
    /// peer, side `quinn`; dtp-stream-quic's limit is UDP loopback),
    /// dtp-pingpong-rtsp, dtp-stream-rtsp, dtp-pingpong-unix and
    /// dtp-stream-unix (ours on an rtsp: or unix: listener, no peer: side
    /// `ours-tcp` is our TCP figure of the same run, so the ratio is the
    /// transport's overhead), control (the terminal control plane, no
    /// peer), fanout-sse and
    /// fanout-ws (one publisher, --subscribers SSE or realtime.v1
    /// subscribers, against a tokio/axum peer), push (Web Push
    /// notifications to a local push service: our sender against the
    /// web-push crate, side `web-push`).
    #[arg(long, default_value = bench::ALL_WORKLOADS)]
    workloads: String,
    /// Our gateway's IO backend: auto, uring or epoll.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// Measured seconds per workload and side (0.2–600).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Idle connections in the connections workload (default 10000; 2000 with --quick).
    #[arg(long, value_name = "N")]
    idle_connections: Option<usize>,
    /// Connections of the stream workloads (default 4).
    #[arg(long, value_name = "N")]
    stream_connections: Option<usize>,
    /// Subscribers in the fan-out workloads (default 10000; 2000 with --quick).
    #[arg(long, value_name = "N")]
    subscribers: Option<usize>,
    /// The fan-out workloads also with our realtime ledgers in NATS
    /// JetStream, on a local nats-server the bench starts (nats-server
    /// from PATH or /usr/sbin): side `ours+nats` (one gateway with
    /// `[cluster] nats`, publisher and subscribers on it) and side
    /// `ours+nats-across` (two gateways of one cluster, the publisher on
    /// one, the subscribers on the other: publish → deliver across
    /// gateways; CPU/op is both gateways' summed). Without nats-server the
    /// rows are not run and a note says why.
    #[arg(long)]
    fanout_nats: bool,
    /// Write the report as JSON to FILE after every run (schema in
    /// perf/bench-harness.md).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write DIR/index.html and SVG plots: per workload CPU per operation
    /// and throughput of every side with the floor marked, latency
    /// percentiles, and the run-to-run spread.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// `--control-fays N`, `--control-etcd` (see `bench::control`).
    #[command(flatten)]
    control: bench::ControlBenchCli,
}

#[derive(Args)]
struct InspectArgs {
    /// File of concatenated binary frames (default: standard input).
    #[arg(conflicts_with = "hex")]
    file: Option<PathBuf>,
    /// The frames as hexadecimal text instead of a file (white space allowed).
    #[arg(long, value_name = "HEX")]
    hex: Option<String>,
    /// Print one JSON object per frame (the form `dtp frame encode` reads)
    /// instead of the human-readable form.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Subcommand)]
enum FrameCommand {
    /// Read frames as JSON objects, one per line, and write their binary
    /// encoding to standard output.
    ///
    /// Blank lines are skipped. The JSON form is documented in
    /// codec/FORMAT.md §8; `dtp frame sample` prints an example of every kind.
    Encode {
        /// File of JSON lines (default: standard input).
        file: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Print one example frame of every kind as JSON lines.
    ///
    /// `dtp frame sample | dtp frame encode | dtp inspect` round-trips.
    Sample,
}

/// The smallest `--max-frame-len` that `Limits::validate` accepts.
const MIN_FRAME_LEN: u32 = 64;

#[derive(Args)]
struct LimitArgs {
    /// Largest frame body accepted or written, in bytes.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = Limits::default().max_frame_len,
        help = format!(
            "Largest frame body accepted or written, in bytes ({MIN_FRAME_LEN} to {})",
            Limits::MAX_FRAME_LEN_CEILING
        )
    )]
    max_frame_len: u32,
}

impl LimitArgs {
    fn limits(&self) -> Result<Limits, CliError> {
        let limits = Limits {
            max_frame_len: self.max_frame_len,
            ..Limits::default()
        };
        limits
            .validate()
            .map_err(|what| CliError::usage("BAD_LIMIT", what))?;
        Ok(limits)
    }
}

/// SPEC MEM-3: the heap is counted, so `/metrics` reports what lies outside
/// the cores' pools as a figure, not as unmeasured.
#[global_allocator]
static HEAP: dtp_pool::CountingAlloc = dtp_pool::CountingAlloc::new();

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli_error::parse_failure(&e, &Cli::command(), std::env::args()),
    };
    logging::init(match &cli.command {
        Command::Serve(a) => a.log_format,
        _ => logging::LogFormat::Text,
    });
    // A server started by `dtp bench` ends with the bench, even a killed one.
    if std::env::var_os(bench::BENCH_CHILD).is_some()
        && !matches!(dtp_transports::die_with_parent(), Ok(true))
    {
        return ExitCode::from(1);
    }
    if matches!(
        cli.command,
        Command::Serve(_)
            | Command::Load(_)
            | Command::Bench(_)
            | Command::PeerTokio { .. }
            | Command::PeerRealtime { .. }
            | Command::PeerTokioUring { .. }
            | Command::PeerFloor { .. }
    ) && let Err(e) = dtp_transports::raise_fd_limit()
    {
        tracing::warn!(error = %e, "could not raise the open-file limit");
    }
    let result = match cli.command {
        Command::Serve(a) => serve::run(serve::ServeArgs {
            config: a.config.as_deref(),
            listen: a.listen.clone(),
            realtime_listen: a.realtime_listen,
            no_realtime: a.no_realtime,
            echo: a.echo,
            backend: a.backend.as_deref(),
            shards: a.shards,
            no_admin: a.no_admin,
            no_pin: a.no_pin,
            print_config: a.print_config,
        }),
        Command::Load(a) => load_cmd::run_load(*a),
        Command::Bench(a) => run_bench(a),
        Command::PeerRealtime { listen, workers } => {
            let config = dtp_bench::peer_realtime::PeerConfig {
                listen,
                workers,
                ..Default::default()
            };
            dtp_bench::peer_realtime::run(config, |addr| println!("listening {addr}"))
                .map_err(|e| CliError::Io(format!("realtime peer: {e}")))
        }
        Command::PeerTokio {
            listen,
            workers,
            config,
            websocket,
            quic,
        } => run_peer(listen, workers, config.as_deref(), websocket, quic),
        Command::PeerTokioUring { listen, workers } => run_peer_tokio_uring(listen, workers),
        Command::PeerFloor { listen, workers } => run_peer_floor(listen, workers),
        Command::Inspect(args) => args.limits.limits().and_then(|limits| {
            inspect::run(args.file.as_deref(), args.hex.as_deref(), args.json, limits)
        }),
        Command::Frame(FrameCommand::Encode { file, limits }) => limits
            .limits()
            .and_then(|limits| frame_cmd::encode(file.as_deref(), limits)),
        Command::Frame(FrameCommand::Sample) => frame_cmd::sample(),
        Command::Cred(c) => cred_cmd::run(c),
        Command::Ctl(c) => ctl::run(c),
        Command::Audit(c) => match audit_cmd::run(c) {
            // Violations: printed; exit status 1.
            Ok(false) => return ExitCode::from(1),
            other => other.map(|_| ()),
        },
        Command::Sim(a) => match sim_cmd::run_sim(a) {
            // Violations: the report said so; exit status 1.
            Ok(false) => return ExitCode::from(1),
            other => other.map(|_| ()),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}

fn run_bench(a: BenchCli) -> Result<(), CliError> {
    let workloads = a
        .workloads
        .split(',')
        .map(|w| {
            bench::BenchWorkload::from_name(w.trim()).ok_or_else(|| {
                CliError::usage(
                    "BAD_ARGUMENT",
                    format!(
                        "unknown workload `{w}` ({})",
                        bench::ALL_WORKLOADS.replace(',', ", ")
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    bench::run(bench::BenchArgs {
        quick: a.quick,
        full: a.full,
        runs: a.runs,
        workloads,
        backend: a.backend,
        json: a.json,
        report: a.report,
        duration: a.duration,
        idle_connections: a.idle_connections,
        stream_connections: a.stream_connections,
        control_fays: a.control.control_fays,
        control_etcd: a.control.control_etcd,
        subscribers: a.subscribers,
        fanout_nats: a.fanout_nats,
    })
}

fn run_peer(
    listen: std::net::SocketAddr,
    workers: usize,
    config: Option<&std::path::Path>,
    websocket: Option<String>,
    quic: bool,
) -> Result<(), CliError> {
    let file = config::Config::load(config).map_err(|e| CliError::usage("BAD_CONFIG", e))?;
    let limits = file
        .engine()
        .map_err(|e| CliError::usage("BAD_CONFIG", e))?
        .limits;
    if let Some(terminal) = file
        .dtp
        .terminal(limits)
        .map_err(|e| CliError::usage("BAD_CONFIG", e))?
    {
        let mut config = dtp_bench::peer_tokio_dtp::DtpPeerConfig::new(
            listen,
            workers,
            std::sync::Arc::new(terminal),
        );
        if let Some(path) = websocket {
            if !path.starts_with('/') {
                return Err(CliError::usage(
                    "BAD_ARGUMENT",
                    format!("--websocket {path}: a request path starts with /"),
                ));
            }
            config = config.websocket(path);
        }
        if quic {
            config = config
                .quic()
                .map_err(|e| CliError::Io(format!("quinn DTP peer: {e}")))?;
        }
        let announce = config.announce();
        return dtp_bench::peer_tokio_dtp::run(config, announce, std::future::pending::<()>())
            .map_err(|e| CliError::Io(format!("tokio DTP peer: {e}")));
    }
    if websocket.is_some() || quic {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--websocket and --quic need a --config with [dtp] enabled = true".to_owned(),
        ));
    }
    let config = dtp_bench::peer_tokio::PeerConfig::new(listen, workers);
    dtp_bench::peer_tokio::run(
        config,
        |addr| println!("listening {addr}"),
        std::future::pending::<()>(),
    )
    .map_err(|e| CliError::Io(format!("tokio peer: {e}")))
}

fn run_peer_tokio_uring(listen: std::net::SocketAddr, workers: usize) -> Result<(), CliError> {
    let config = dtp_bench::peer_tokio::PeerConfig::new(listen, workers);
    dtp_bench::peer_tokio_uring::run(
        config,
        |addr| println!("listening {addr}"),
        std::future::pending::<()>(),
    )
    .map_err(|e| CliError::Io(format!("tokio-uring peer: {e}")))
}

fn run_peer_floor(listen: std::net::SocketAddr, workers: usize) -> Result<(), CliError> {
    let config = dtp_transports::floor::FloorConfig::new(listen, workers);
    dtp_transports::floor::run_child(config).map_err(|e| CliError::Io(format!("floor peer: {e}")))
}

#[cfg(test)]
mod limit_args_tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use clap::CommandFactory;

    use super::{Cli, LimitArgs, Limits, MIN_FRAME_LEN};

    #[test]
    fn max_frame_len_help_names_exactly_the_range_that_is_accepted() {
        let ok = |n: u32| LimitArgs { max_frame_len: n }.limits().is_ok();
        let max = Limits::MAX_FRAME_LEN_CEILING;
        assert!(ok(MIN_FRAME_LEN) && ok(max), "both ends are accepted");
        assert!(
            !ok(MIN_FRAME_LEN - 1) && !ok(max + 1),
            "one past either end is not"
        );
        let mut cli = Cli::command();
        let inspect = cli.find_subcommand_mut("inspect").unwrap();
        let help = inspect.render_help().to_string();
        assert!(help.contains("(64 to 16777216)"), "{help}");
    }
}
