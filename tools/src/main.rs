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
mod load_dtp;
mod load_rt;
mod logging;
mod push_cfg;
mod realtime_cfg;
mod serve;
mod sim;
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
    Load(Box<LoadCli>),
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
    Sim(SimCli),
}

#[derive(Args)]
struct SimCli {
    /// The (first) seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Steps per seed (1–100000000).
    #[arg(long, default_value_t = 10_000)]
    steps: u64,
    /// How many seeds to run: seed, seed+1, … (1–100000).
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Simulate several gateways sharing resources through a linearizable
    /// store with leases instead (three nodes, three resources, message
    /// delays, partitions, crashes and restarts; the real occupancy code
    /// over a model of etcd): after every step, no resource is held by two
    /// gateways and the store lists at most one exclusive occupant.
    #[arg(long)]
    cluster: bool,
}

#[derive(Args)]
struct ServeCli {
    /// TOML configuration file (default: embedded defaults).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen on this endpoint instead of the configured ones: `HOST:PORT`
    /// (TCP), `unix:PATH`, `ws:HOST:PORT/PATH` (DTP frames as WebSocket
    /// binary messages, subprotocol dtp.v1), `rtsp:HOST:PORT`
    /// (RTSP-interleaved), `quic:HOST:PORT` (see [quic] in the config),
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
struct LoadCli {
    /// The gateway to load: `HOST:PORT` (TCP), `unix:PATH`,
    /// `ws:HOST:PORT/PATH` (DTP over WebSocket), `rtsp:HOST:PORT`
    /// (RTSP-interleaved), `quic:HOST:PORT` (with --quic-pin),
    /// `ble:ADDR/psm/N[?mtu=M][&type=random]` (Bluetooth LE L2CAP) or
    /// `ble-sim:PATH[?mtu=M]` (the simulated BLE link; the same MTU as the
    /// gateway's); the realtime modes and `--control hold` need TCP.
    #[arg(long, default_value = "127.0.0.1:7700", value_name = "ENDPOINT")]
    target: dtp_transports::Endpoint,
    /// pingpong, stream or connections.
    #[arg(long, default_value = "pingpong")]
    workload: String,
    /// Connections in all.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Measured seconds (after the warm-up); default 10. With --control
    /// hold: how long to hold the session (default: until Ctrl-C).
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Open loop: requests per second in all (pingpong only); default closed loop.
    #[arg(long)]
    rate: Option<u64>,
    /// stream: frames in flight per connection (a multiple of 64).
    #[arg(long, default_value_t = 512)]
    window: u64,
    /// Payload bytes per request (pingpong) or frame (stream); default 66
    /// and 16384. At most 1048576 − 18 (the frame ceiling).
    #[arg(long, value_name = "BYTES")]
    payload: Option<usize>,
    /// Client threads (default: one per core).
    #[arg(long)]
    shards: Option<usize>,
    /// io_uring: send frames of at least this many bytes with SEND_ZC (0: never).
    #[arg(long, default_value_t = 0)]
    send_zc_threshold: usize,
    /// TCP congestion control of the load generator's own connections
    /// (`system`: the kernel's default). Reno by default: on loopback,
    /// BBR's pacing caps one connection's large writes at about half of
    /// what reno reaches, which would make the client the bottleneck. The
    /// gateway under test keeps its own setting.
    #[arg(long, default_value = LOAD_CONGESTION, value_name = "NAME")]
    congestion: String,
    /// Local addresses the connections come from, taken in turn: a
    /// comma-separated list, each an address or a range of IPv4 addresses
    /// (`127.0.0.2-127.0.0.9`). One source address reaches one server
    /// address from at most the ephemeral port range (~28k ports by
    /// default), so more connections than that need several. Default: the
    /// kernel picks.
    #[arg(long, value_name = "ADDRS", value_parser = parse_sources)]
    source: Option<Sources>,
    /// Write the result as JSON to FILE (with --dtp: plus a `dtp` object of
    /// the counters below).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Run pingpong or stream over the full DTP protocol: per connection a
    /// Fay session (CAP, a collection agreement naming the workload,
    /// encrypted fragments, resume acks) against a DTP gateway. Pingpong
    /// keeps one fragment in flight per connection (closed loop: no
    /// --rate); stream sends until the resume cache is full (--window does
    /// not apply). Reports fragments sent, delivered (answered or
    /// acknowledged), lost, duplicated, and resumes.
    #[arg(long)]
    dtp: bool,
    /// With --dtp: the Fay's Noise private key file (`dtp cred noise-key`).
    #[arg(long, value_name = "FILE", requires = "dtp")]
    fay_key: Option<PathBuf>,
    /// With --dtp: the Fay's credential file (`dtp cred issue`), binding the
    /// --fay-key's public half.
    #[arg(long, value_name = "FILE", requires = "dtp")]
    credential: Option<PathBuf>,
    /// With --dtp: the terminal's Noise public key, 64 hex digits or its
    /// FILE.pub; CAP fails against any other terminal. Without it any
    /// terminal key is accepted (a warning says so).
    #[arg(long, value_name = "PUBFILE_OR_HEX", requires = "dtp")]
    pin_terminal: Option<String>,
    /// With a `quic:HOST:PORT` target: the gateway's certificate, pinned —
    /// the 64 hex digits of its SHA-256 (`dtp serve` prints them as `quic
    /// certificate sha256 …`) or its PEM file. No other certificate is
    /// accepted, and no system roots are used.
    #[arg(long, value_name = "SHA256_OR_PEMFILE")]
    quic_pin: Option<String>,
    /// With --dtp: cut every connection at its N-th fragment sent — that
    /// fragment's sealed frame goes out only up to a random byte inside it,
    /// then the connection closes — reconnect, resume the session and go
    /// on. Reports resumes and resume latency (from the cut to the resumed
    /// session); nothing should be lost or duplicated.
    #[arg(long, value_name = "N", requires = "dtp")]
    disconnect_every: Option<u64>,
    /// The least share of the run that must succeed, in (0, 1]: of the
    /// connections established (with --dtp: that established a DTP
    /// session; with --control: Fays with a session, AuthRequests
    /// granted) and, with --dtp, of the fragments sent that were
    /// delivered. Below it, or when nothing was answered at all, `dtp
    /// load` prints why (refusal and CAP codes by name, `nothing listens
    /// on ADDR`) and exits 1.
    #[arg(long, default_value_t = load::DEFAULT_MIN_SUCCESS, value_name = "SHARE")]
    min_success: f64,
    /// `--control MODE` and its options (see `load_dtp::control`).
    #[command(flatten)]
    control: load_dtp::ControlCli,
    /// `--realtime MODE` and its options (see `load_rt`).
    #[command(flatten)]
    realtime: load_rt::RealtimeCli,
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
        Command::Load(a) => run_load(*a),
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
        Command::Sim(a) => match run_sim(a) {
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

fn workload(name: &str) -> Result<dtp_bench::workload::Workload, CliError> {
    dtp_bench::workload::Workload::from_name(name).ok_or_else(|| {
        CliError::usage(
            "BAD_ARGUMENT",
            format!("unknown workload `{name}` (pingpong, stream, connections)"),
        )
    })
}

/// `--source`: the addresses connections come from.
#[derive(Clone, Debug)]
struct Sources(Vec<std::net::IpAddr>);

/// Most addresses `--source` may name (a range is counted by its size).
const MAX_SOURCES: usize = 4096;

/// Parses `--source`: addresses and IPv4 ranges, comma-separated.
fn parse_sources(text: &str) -> Result<Sources, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("`{part}` is neither an IP address nor a range A-B of IPv4 addresses");
        match part.split_once('-') {
            None => out.push(part.parse::<std::net::IpAddr>().map_err(|_| bad())?),
            Some((a, b)) => {
                let a: std::net::Ipv4Addr = a.trim().parse().map_err(|_| bad())?;
                let b: std::net::Ipv4Addr = b.trim().parse().map_err(|_| bad())?;
                let (a, b) = (u32::from(a), u32::from(b));
                if a > b || (b - a) as usize >= MAX_SOURCES {
                    return Err(format!(
                        "`{part}`: a range runs from the lower address up, {MAX_SOURCES} addresses at most"
                    ));
                }
                out.extend((a..=b).map(|ip| std::net::IpAddr::V4(ip.into())));
            }
        }
        if out.len() > MAX_SOURCES {
            return Err(format!("at most {MAX_SOURCES} source addresses"));
        }
    }
    Ok(Sources(out))
}

fn run_load(a: LoadCli) -> Result<(), CliError> {
    if let Some(m) = &a.realtime.realtime {
        return run_realtime_load(&a, m);
    }
    let duration = a.duration.unwrap_or(10.0);
    let w = workload(&a.workload)?;
    check_load_args(&a, w)?;
    if a.window == 0 || !a.window.is_multiple_of(64) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            format!("--window {} must be a positive multiple of 64", a.window),
        ));
    }
    if !(duration > 0.0 && duration <= 86_400.0 && (0.0..=3600.0).contains(&a.warmup)) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--duration must be in (0, 86400] and --warmup in [0, 3600] seconds",
        ));
    }
    let max_payload =
        dtp_codec::Limits::default().max_frame_len as usize - dtp_bench::workload::DATA_FIELDS_LEN;
    if a.payload.is_some_and(|n| n > max_payload) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            format!("--payload must be at most {max_payload} bytes"),
        ));
    }
    if a.connections == 0 {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            "--connections must be at least 1",
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spec = load::LoadSpec {
        staged: false,
        target: a.target.clone(),
        workload: w,
        connections: a.connections,
        duration: std::time::Duration::from_secs_f64(duration),
        warmup: std::time::Duration::from_secs_f64(a.warmup),
        rate: a.rate,
        window: a.window,
        shards: a.shards.unwrap_or(cores).max(1),
        driver: dtp_transports::DriverConfig {
            bind_sources: a.source.clone().map(|s| s.0).unwrap_or_default(),
            ..load_driver(a.connections, a.send_zc_threshold, &a.congestion)
        },
        payload: a.payload,
        quic: quic_client(&a.target, a.quic_pin.as_deref())?,
    };
    if a.dtp {
        return load_dtp::run_cli(
            &spec,
            load_dtp::DtpCliArgs {
                fay_key: a.fay_key,
                credential: a.credential,
                pin_terminal: a.pin_terminal,
                disconnect_every: a.disconnect_every,
                json: a.json,
                min_success: a.min_success,
                hold_for: a.duration.map(std::time::Duration::from_secs_f64),
                control: a.control.control.is_some().then_some(a.control),
            },
        );
    }
    let total = a.warmup + duration;
    let bar = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let b = indicatif::ProgressBar::new((total * 10.0) as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let result = load::run(
        &spec,
        |secs, ops| {
            if let Some(b) = &bar {
                b.set_position((secs * 10.0) as u64);
                b.set_message(format!("{ops} ops"));
            }
        },
        |_| {},
    )
    .map_err(CliError::Io)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let l = &result.latency;
    println!(
        "{} · {} · {:.1} s · backend {}",
        w.name(),
        crate::text::plural(result.tally.connected, "connection"),
        result.elapsed.as_secs_f64(),
        result.backend
    );
    println!(
        "throughput  {:.0} ops/s  {:.1} MB/s",
        result.ops_per_s(),
        result.bytes_per_s() / 1e6
    );
    println!(
        "latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
    );
    if let Some(cpus) = result.client_cpus() {
        println!("client cpu  {cpus:.2} cores (this load generator, over the window)");
    }
    if result.tally.errors + result.tally.failed + result.tally.backlogged > 0 {
        println!(
            "problems    {}, {}, {} not sent when due",
            crate::text::plural(result.tally.errors, "error"),
            crate::text::plural(result.tally.failed, "failed connection"),
            crate::text::plural(result.tally.backlogged, "request")
        );
    }
    if let Some(path) = a.json {
        let v = serde_json::json!({
            "workload": w.name(),
            "connections": result.tally.connected,
            "duration_s": result.elapsed.as_secs_f64(),
            "backend": result.backend,
            "ops": result.tally.ops,
            "ops_per_s": result.ops_per_s(),
            "bytes_per_s": result.bytes_per_s(),
            "latency_us": {"p50": l.p50_us, "p90": l.p90_us, "p99": l.p99_us, "p999": l.p999_us, "max": l.max_us},
            "errors": result.tally.errors,
            "failed_connections": result.tally.failed,
            "backlogged": result.tally.backlogged,
            "client_cpu_ns": result.client_cpu_ns,
        });
        std::fs::write(&path, format!("{v:#}\n")).map_err(|e| CliError::io(path.display(), e))?;
    }
    result.verdict(&spec, a.min_success).map_err(CliError::Io)
}

/// Refuses, before any work, the `dtp load` arguments that cannot work
/// (the rest are checked where they are used).
/// The QUIC configuration of a load on `target`: `None` unless it is a
/// `quic:` endpoint, which needs `pin` (SPEC TRN-4: the certificate is
/// pinned, by SHA-256 or PEM file).
fn quic_client(
    target: &dtp_transports::Endpoint,
    pin: Option<&str>,
) -> Result<Option<dtp_transports::QuicConfig>, CliError> {
    let bad = |what: String| Err(CliError::usage("BAD_ARGUMENT", what));
    let quic = matches!(target, dtp_transports::Endpoint::Quic(_));
    let pin = match (quic, pin) {
        (false, None) => return Ok(None),
        (false, Some(_)) => return bad("--quic-pin applies to a quic:HOST:PORT target only".into()),
        (true, None) => {
            return bad(format!(
                "{target} needs --quic-pin: the gateway's certificate SHA-256 (dtp serve prints it) or its PEM file"
            ));
        }
        (true, Some(pin)) => pin,
    };
    let pin = match cred_cmd::parse::parse_hex32(pin) {
        Some(sha) => dtp_transports::CertPin::Sha256(sha),
        None if std::path::Path::new(pin).is_file() => dtp_transports::CertPin::File(pin.into()),
        None => {
            return bad(format!(
                "--quic-pin `{pin}` is neither 64 hex digits nor a file"
            ));
        }
    };
    Ok(Some(dtp_transports::QuicConfig {
        identity: dtp_transports::QuicIdentity::ClientOnly,
        pins: vec![pin],
        ..dtp_transports::QuicConfig::default()
    }))
}

fn check_load_args(a: &LoadCli, w: dtp_bench::workload::Workload) -> Result<(), CliError> {
    let bad = |what: String| Err(CliError::usage("BAD_ARGUMENT", what));
    if a.rate == Some(0) {
        return bad("--rate 0: give a positive rate in requests per second, or leave it out for a closed loop".into());
    }
    if a.rate.is_some() && w != dtp_bench::workload::Workload::Pingpong {
        return bad(format!(
            "--rate applies to the pingpong workload only, not {}",
            w.name()
        ));
    }
    if a.payload == Some(0) {
        return bad("--payload 0: a frame needs at least one payload byte".into());
    }
    if a.shards == Some(0) {
        return bad("--shards 0: give at least one client thread, or leave it out".into());
    }
    if !(a.min_success > 0.0 && a.min_success <= 1.0) {
        return bad(format!("--min-success {} must be in (0, 1]", a.min_success));
    }
    if matches!(a.target, dtp_transports::Endpoint::Ble(_))
        && let Err(e) = dtp_transports::probe_ble()
    {
        return bad(format!("--target {}: {e}", a.target));
    }
    if let Some(mtu) = a.target.mtu()
        && a.target.fits_receive_buffers(LOAD_CHUNK_SIZE).is_err()
    {
        return bad(format!(
            "--target {}: mtu {mtu} is more than dtp load receives in one buffer ({LOAD_CHUNK_SIZE} bytes): use a smaller mtu",
            a.target
        ));
    }
    Ok(())
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

/// `dtp sim`: prints the report; `Ok(false)` when it found violations.
fn run_sim(a: SimCli) -> Result<bool, CliError> {
    if !(1..=100_000_000).contains(&a.steps) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            format!("--steps {} must be in 1..=100000000", a.steps),
        ));
    }
    if !(1..=100_000).contains(&a.seeds) {
        return Err(CliError::usage(
            "BAD_ARGUMENT",
            format!("--seeds {} must be in 1..=100000", a.seeds),
        ));
    }
    if a.cluster {
        return Ok(run_cluster_sim(&a));
    }
    let report = sim::run(sim::SimOptions {
        seed: a.seed,
        steps: a.steps,
        seeds: a.seeds,
    });
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, report.text().as_bytes()).map_err(cli_error::out)?;
    if let Some(path) = a.json {
        std::fs::write(&path, format!("{:#}\n", report.json()))
            .map_err(|e| CliError::io(path.display(), e))?;
    }
    Ok(report.violations.is_empty())
}

/// `dtp sim --cluster`: prints one line per seed with a violation and a
/// summary; true when no seed broke an invariant.
fn run_cluster_sim(a: &SimCli) -> bool {
    use dtp_cluster::sim::{Model, Sim};
    let (mut grants, mut busy, mut fences, mut crashes, mut broken) = (0, 0, 0, 0, 0);
    for seed in a.seed..a.seed.saturating_add(a.seeds) {
        let o = Sim::new(Model::default(), seed).run(a.steps);
        if let Some(v) = &o.violation {
            println!("seed {seed}: violation after {} steps: {v}", o.steps);
            broken += 1;
        }
        grants += o.grants;
        busy += o.busy;
        fences += o.fences;
        crashes += o.crashes;
    }
    println!(
        "cluster: {} seeds × {} steps: {grants} grants, {busy} refused busy, {fences} fences, {crashes} crashes; {broken} seeds with a violation",
        a.seeds, a.steps
    );
    broken == 0
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

/// The load generator's default congestion control (see `dtp load --help`).
pub(crate) const LOAD_CONGESTION: &str = "reno";

/// A congestion control setting: `system` (or empty) keeps the kernel's
/// default, anything else names an algorithm.
pub(crate) fn congestion_name(s: &str) -> Option<String> {
    match s {
        "" | "system" => None,
        name => Some(name.to_owned()),
    }
}

/// The load generator's receive (and send) buffer size.
const LOAD_CHUNK_SIZE: u32 = 16 * 1024;

/// The load generator's IO settings: it sends far more than it receives, so
/// small chunks (more sends in flight per poll) and no batched waits suit
/// it better than the gateway's defaults (measured: perf/README.md).
pub(crate) fn load_driver(
    connections: usize,
    send_zc_threshold: usize,
    congestion: &str,
) -> dtp_transports::DriverConfig {
    dtp_transports::DriverConfig {
        max_connections: connections + 64,
        send_zc_threshold,
        tcp_congestion: congestion_name(congestion),
        chunk_size: LOAD_CHUNK_SIZE,
        recv_buffers: 64,
        send_chunks: 4096,
        batch: 1,
        ..Default::default()
    }
}

/// `dtp load --realtime sse|ws`.
fn run_realtime_load(a: &LoadCli, m: &str) -> Result<(), CliError> {
    let bad = |e: String| CliError::usage("BAD_ARGUMENT", e);
    let mode = load_rt::mode(m).map_err(bad)?;
    let r = &a.realtime;
    if !(r.publish_rate > 0.0 && r.publish_rate <= 100_000.0) {
        return Err(bad("--publish-rate must be in (0, 100000]".into()));
    }
    let duration = a.duration.unwrap_or(10.0);
    if a.connections == 0 || !(duration > 0.0 && duration <= 86_400.0) {
        return Err(bad(
            "--connections must be at least 1 and --duration in (0, 86400]".into(),
        ));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(target) = a.target.tcp() else {
        return Err(bad(
            "the realtime load needs a TCP --target (HOST:PORT)".into()
        ));
    };
    let spec = load_rt::RtSpec {
        target,
        publish_to: None,
        mode,
        subscribers: a.connections,
        stream: r.stream.clone(),
        event_type: r.event_type.clone(),
        token: r.token.clone(),
        subscriber_token: r.subscriber_token.clone(),
        scope: None,
        rate: r.publish_rate,
        payload: a.payload.unwrap_or(64).min(32 * 1024),
        warmup: std::time::Duration::from_secs_f64(a.warmup),
        duration: std::time::Duration::from_secs_f64(duration),
        shards: a.shards.unwrap_or(cores).max(1),
        driver: dtp_transports::DriverConfig {
            bind_sources: a.source.clone().map(|s| s.0).unwrap_or_default(),
            ..load_driver(a.connections, 0, &a.congestion)
        },
        policy: r.policy().map_err(bad)?,
        kick: r.kick,
    };
    let result =
        load_rt::run(&spec, |line| eprintln!("{line}"), &mut |_| {}).map_err(CliError::Io)?;
    println!("{}", load_rt::report(&spec, &result));
    if let Some(path) = &a.json {
        let json = format!("{:#}\n", load_rt::json(&spec, &result));
        std::fs::write(path, json).map_err(|e| CliError::Io(format!("{}: {e}", path.display())))?;
    }
    load_rt::verdict(&spec, &result).map_err(CliError::Io)
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
