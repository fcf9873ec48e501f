//! One workload of one run: every side in turn (its server started, loaded,
//! sampled and stopped), then the workload's limit figures. A side that
//! fails — its server does not start, the load reports errors, something
//! panics — is recorded with its reason and the next side runs.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Duration;

use dtp_bench::dtp_workload::BenchKeys;
use dtp_bench::procstat::{self, Sample};
use dtp_bench::report::{Cores, Figures, LimitFigure, Memory, OURS, RunReport, Side};
use dtp_bench::workload::Workload;
use dtp_codec::AeadAlgorithm;

use super::{
    BenchWorkload, Carry, DtpFiles, OURS_TCP, Plan, Progress, QUINN, RESUME_EVERY, Server,
    TUNGSTENITE, WS_PATH, control, entry, fail, fanout,
};
use crate::load::{self, LoadResult, LoadSpec};
use crate::load_dtp::{self, DtpSpec};
use crate::text::plural;

/// What every step of a run shares.
pub(super) struct Ctx<'a> {
    pub(super) plan: &'a Plan,
    pub(super) backend: &'a str,
    pub(super) dtp: Option<&'a DtpFiles>,
    pub(super) run: usize,
    pub(super) runs: usize,
}

/// Runs workload `bw` on every side and records what it measured (or why
/// not) in `report`.
pub(super) fn workload(
    ctx: &mut Ctx<'_>,
    bw: BenchWorkload,
    report: &mut RunReport,
    progress: &mut Progress,
) {
    let name = bw.name();
    let mut sides = bw.sides().to_vec();
    if matches!(bw, BenchWorkload::Fanout(_)) && ctx.plan.fanout_nats {
        sides.extend([fanout::NATS_SAME, fanout::NATS_ACROSS]);
    }
    for side in sides {
        progress.step(&format!("run {}/{} · {name} · {side}", ctx.run, ctx.runs));
        let measured = guarded(|| match bw {
            BenchWorkload::Control => {
                let files = ctx.dtp.ok_or("no keys for the DTP workloads")?;
                let config = files.control.as_deref().ok_or("no control configuration")?;
                let c = control::measure(&control::Run {
                    keys: &files.keys,
                    config,
                    backend: ctx.backend,
                    shards: ctx.plan.shards,
                    fays: ctx.plan.control_fays,
                    etcd: ctx.plan.control_etcd,
                    warmup: ctx.plan.warmup,
                    duration: ctx.plan.duration,
                })?;
                report.control = Some(c);
                Ok(None)
            }
            BenchWorkload::Fanout(mode) => fanout_side(ctx, mode, side).map(Some),
            BenchWorkload::Push => {
                super::push::measure(side, super::push::notifications(ctx.plan.duration)).map(Some)
            }
            _ if side == OURS_TCP => tcp_reference(ctx, bw, report).map(Some),
            _ => load_side(ctx, bw, side).map(Some),
        });
        match measured {
            Ok(Some(figures)) => entry(report, name).sides.push(Side {
                name: side.to_owned(),
                figures,
            }),
            Ok(None) => {}
            Err(reason) => fail(report, name, Some(side), reason),
        }
    }
    if let Err(reason) = guarded(|| limits(ctx, bw, report)) {
        fail(report, name, None, format!("limit: {reason}"));
    }
}

/// Runs `f`, turning a panic into an error (a bug in one step must not end
/// the bench and lose what the others measured).
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".to_owned());
            Err(format!("panicked: {what}"))
        }
    }
}

/// Our figures for `bw`'s workload over TCP: those of the same run (the
/// `dtp-pingpong` or `dtp-stream` step before), or measured now if the run
/// has none.
fn tcp_reference(ctx: &Ctx<'_>, bw: BenchWorkload, report: &RunReport) -> Result<Figures, String> {
    let tcp = bw.over_tcp();
    let same_run = report
        .workloads
        .iter()
        .find(|w| w.name == tcp.name())
        .and_then(|w| w.sides.iter().find(|s| s.name == OURS));
    match same_run {
        Some(side) => Ok(side.figures.clone()),
        None => load_side(ctx, tcp, OURS),
    }
}

/// Where our gateway listens for `bw`.
fn our_listen(ctx: &Ctx<'_>, bw: BenchWorkload) -> Result<String, String> {
    Ok(match bw.carry() {
        Carry::Tcp => "127.0.0.1:0".to_owned(),
        Carry::Ws => format!("ws:127.0.0.1:0{WS_PATH}"),
        Carry::Quic => "quic:127.0.0.1:0".to_owned(),
        Carry::Rtsp => "rtsp:127.0.0.1:0".to_owned(),
        Carry::Unix => {
            let files = ctx.dtp.ok_or("no folder for the Unix socket")?;
            format!("unix:{}", files.dir.join("gateway.sock").display())
        }
    })
}

/// The command line that starts `side`'s server for `bw`.
fn server_args(ctx: &Ctx<'_>, bw: BenchWorkload, side: &str) -> Result<Vec<String>, String> {
    let shards = ctx.plan.shards.to_string();
    let listen = our_listen(ctx, bw)?;
    let mut args: Vec<String> = match side {
        OURS => vec![
            "serve",
            "--listen",
            &listen,
            "--no-admin",
            "--no-realtime",
            "--backend",
            ctx.backend,
            "--shards",
            &shards,
        ],
        "tokio" => vec![
            "__peer-tokio",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            &shards,
        ],
        TUNGSTENITE => vec![
            "__peer-tokio",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            &shards,
            "--websocket",
            WS_PATH,
        ],
        QUINN => vec![
            "__peer-tokio",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            &shards,
            "--quic",
        ],
        "tokio-uring" => vec![
            "__peer-tokio-uring",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            &shards,
        ],
        "floor" => vec![
            "__peer-floor",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            &shards,
        ],
        other => return Err(format!("no server for side {other}")),
    }
    .into_iter()
    .map(str::to_owned)
    .collect();
    if bw.is_dtp() {
        let files = ctx.dtp.ok_or("no keys for the DTP workloads")?;
        args.extend(["--config".to_owned(), files.config.clone()]);
    }
    if bw == BenchWorkload::Plain(Workload::Idle) && side == OURS {
        // Each shard may have to hold every connection (the kernel spreads
        // them over the shards' listeners unevenly).
        let path = idle_config();
        let n = ctx.plan.idle_connections + 64;
        std::fs::write(&path, format!("[io]\nmax_connections = {n}\n"))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        args.extend(["--config".to_owned(), path.display().to_string()]);
    }
    fault(&mut args, bw.name(), side);
    Ok(args)
}

/// The test hook `DTP_BENCH_FAULT=WORKLOAD:SIDE`: that side's server is
/// started with an argument it refuses, so it exits before listening —
/// the real failure path, for the tests that check a failed step is
/// reported while the rest goes on.
fn fault(args: &mut Vec<String>, workload: &str, side: &str) {
    if std::env::var("DTP_BENCH_FAULT").is_ok_and(|f| f == format!("{workload}:{side}")) {
        args.push("--fault-injected-by-DTP_BENCH_FAULT".to_owned());
    }
}

/// One side of a plaintext or DTP workload.
fn load_side(ctx: &Ctx<'_>, bw: BenchWorkload, side: &str) -> Result<Figures, String> {
    let plan = ctx.plan;
    let w = bw.base();
    // Every server prints its endpoint as `dtp serve` does (`listening
    // ADDR`, `listening ws:ADDR/PATH`, `listening quic:ADDR` and its pin…).
    let server = Server::start(side, &server_args(ctx, bw, side)?, "listening ")?;
    let spec = LoadSpec {
        target: server.endpoint.clone(),
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
        // Long enough to open every idle connection at 2,000/s or more (the
        // tokio peer's single accept loop has set up 1,700–6,600/s here):
        // the memory is read at the window's end, once all are open.
        warmup: if w == Workload::Idle {
            Duration::from_secs(3).max(plan.warmup)
                + Duration::from_secs_f64(plan.idle_connections as f64 / 2_000.0)
        } else {
            plan.warmup
        },
        rate: None,
        window: 512,
        shards: plan.shards,
        driver: if w == Workload::Idle {
            idle_driver(plan.idle_connections)
        } else {
            crate::load_cmd::load_driver(32 * 1024, 0, crate::load_cmd::LOAD_CONGESTION)
        },
        staged: w == Workload::Idle,
        payload: None,
        quic: server.pin.map(|pin| dtp_transports::QuicConfig {
            pins: vec![dtp_transports::CertPin::Sha256(pin)],
            ..dtp_transports::QuicConfig::default()
        }),
    };
    let cores = Cores {
        machine: plan.shards,
        server: plan.shards,
        client: spec.shards,
    };
    let figures = match (ctx.dtp, bw) {
        (Some(files), BenchWorkload::Dtp(..) | BenchWorkload::Resume) => {
            let dtp = DtpSpec {
                fay: files.keys.fay_config(),
                disconnect_every: (bw == BenchWorkload::Resume).then_some(RESUME_EVERY),
            };
            measure_dtp(&server, bw, &spec, &dtp, cores)
        }
        (None, BenchWorkload::Dtp(..) | BenchWorkload::Resume) => {
            Err("no keys for the DTP workloads".to_owned())
        }
        _ => measure(&server, bw, cores, |phase| {
            load::run(&spec, |_, _| {}, phase).map_err(|e| e.to_string())
        }),
    };
    server.stop();
    if w == Workload::Idle {
        let _ = std::fs::remove_file(idle_config());
    }
    figures
}

/// Our gateway's config file for the `connections` workload (its
/// `max_connections`), removed once the side is measured.
fn idle_config() -> PathBuf {
    std::env::temp_dir().join(format!("dtp-bench-idle-{}.toml", std::process::id()))
}

/// One side's measurement of one workload: the load runs through `load`,
/// which calls its phase callback at the start and the end of the measured
/// window, where the server's CPU and the load generator's are sampled.
fn measure(
    server: &Server,
    workload: BenchWorkload,
    cores: Cores,
    load: impl FnOnce(&mut dyn FnMut(load::Phase)) -> Result<LoadResult, String>,
) -> Result<Figures, String> {
    let before = server.sample()?;
    let mut edges: Vec<Result<Sample, String>> = Vec::new();
    let mut half = None;
    let result = load(&mut |p| match p {
        load::Phase::Half => half = Some(server.sample()),
        _ => edges.push(server.sample()),
    })?;
    let mut edges = edges.into_iter();
    let (Some(start), Some(end)) = (edges.next(), edges.next()) else {
        return Err("the measured window did not complete".to_owned());
    };
    let (start, end) = (start?, end?);
    let cpu = procstat::delta(&start, &end).map_err(|e| e.to_string())?;
    let t = &result.tally;
    let idle = workload == BenchWorkload::Plain(Workload::Idle);
    // Idle connections that could not all be opened (no descriptor or port
    // left) still measure the ones that were: the memory says how many.
    if t.errors > 0 || (t.failed > 0 && !(idle && t.connected > 0)) {
        return Err(format!(
            "{}, {}",
            plural(t.errors, "error"),
            plural(t.failed, "failed connection")
        ));
    }
    if t.ops == 0 {
        return Err("no operation completed in the measured window".to_owned());
    }
    let mut figures = Figures::from_run(
        workload.base(),
        t.ops,
        result.elapsed,
        cpu.cpu_ns,
        &result.latency,
    );
    if let Some(client) = result.client_cpu_ns {
        figures = figures.with_client(client, result.elapsed, cores);
    }
    if !idle {
        return Ok(figures);
    }
    let mut memory = match (half, result.staged) {
        (Some(Ok(h)), Some(s)) if s.at_half > 0 && s.at_half < t.connected => Memory::between(
            s.at_half,
            h.rss_bytes,
            t.connected,
            end.rss_bytes,
            end.peak_rss_bytes,
        ),
        _ => Memory::from_rss(
            t.connected,
            before.rss_bytes,
            end.rss_bytes,
            end.peak_rss_bytes,
        ),
    };
    memory.setup_per_s = result.staged.and_then(|s| s.setup_per_s);
    memory.failed = t.failed;
    Ok(figures.with_memory(memory))
}

/// The load generator's driver for `connections` idle connections: room
/// for all of them, and spread over several loopback source addresses
/// (127.0.0.2 …), one per 16,384 connections, so that no source runs out
/// of ephemeral ports towards the one server address.
fn idle_driver(connections: usize) -> dtp_transports::DriverConfig {
    let sources = connections.div_ceil(16 * 1024).clamp(1, 250);
    dtp_transports::DriverConfig {
        bind_sources: (0..sources)
            .map(|i| std::net::IpAddr::from([127, 0, 0, 2 + i as u8]))
            .collect(),
        ..crate::load_cmd::load_driver(connections, 0, crate::load_cmd::LOAD_CONGESTION)
    }
}

/// A DTP run on one side: the load over DTP, its resume counters; nothing
/// may be lost or duplicated.
fn measure_dtp(
    server: &Server,
    workload: BenchWorkload,
    spec: &LoadSpec,
    dtp: &DtpSpec,
    cores: Cores,
) -> Result<Figures, String> {
    let mut counters = None;
    let mut figures = measure(server, workload, cores, |phase| {
        let r = load_dtp::run(spec, dtp, |_, _| {}, phase)?;
        counters = Some(r.dtp);
        Ok(r.load)
    })?;
    let c = counters.ok_or("no DTP counters")?;
    if c.lost > 0 || c.duplicated > 0 || c.failed_flows > 0 {
        return Err(format!(
            "{} lost, {} duplicated, {} failed",
            plural(c.lost, "fragment"),
            c.duplicated,
            plural(c.failed_flows, "flow")
        ));
    }
    if workload == BenchWorkload::Resume {
        let (p50, p99) = c.resume_p50_p99_us();
        figures.resumes = Some(c.resumes);
        figures.lost = Some(c.lost);
        figures.duplicated = Some(c.duplicated);
        figures.resume_p50_us = Some(p50 as f64);
        figures.resume_p99_us = Some(p99 as f64);
    }
    Ok(figures)
}

/// One side of a fan-out workload: ours embedded, the tokio/axum peer,
/// or ours with its ledgers in a local nats-server started for this side
/// (one gateway, or two of one cluster: see [`fanout`]).
fn fanout_side(ctx: &Ctx<'_>, mode: crate::load_rt::Mode, side: &str) -> Result<Figures, String> {
    let shards = ctx.plan.shards.to_string();
    let ours = |config: Option<&str>| -> Result<Server, String> {
        let mut args: Vec<String> = [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--realtime-listen",
            "127.0.0.1:0",
            "--no-admin",
            "--backend",
            ctx.backend,
            "--shards",
            &shards,
        ]
        .map(str::to_owned)
        .into();
        if let Some(c) = config {
            args.extend(["--config".to_owned(), c.to_owned()]);
        }
        fault(&mut args, BenchWorkload::Fanout(mode).name(), side);
        Server::start(side, &args, "realtime http://")
    };
    let nats = match side {
        fanout::NATS_SAME | fanout::NATS_ACROSS => {
            Some(super::nats::LocalNats::start().map_err(|e| format!("nats-server: {e}"))?)
        }
        _ => None,
    };
    let (server, publisher) = match (side, &nats) {
        (OURS, _) => (ours(None)?, None),
        ("tokio", _) => {
            let mut args: Vec<String> = [
                "__peer-realtime",
                "--listen",
                "127.0.0.1:0",
                "--workers",
                &shards,
            ]
            .map(str::to_owned)
            .into();
            fault(&mut args, BenchWorkload::Fanout(mode).name(), side);
            (Server::start(side, &args, "listening ")?, None)
        }
        (fanout::NATS_SAME, Some(n)) => (ours(Some(&n.gateway_config("a")?))?, None),
        (fanout::NATS_ACROSS, Some(n)) => {
            let a = ours(Some(&n.gateway_config("a")?))?;
            let b = ours(Some(&n.gateway_config("b")?))?;
            (b, Some(a))
        }
        (other, _) => return Err(format!("no fan-out server for side {other}")),
    };
    let run = fanout::Run {
        mode,
        subscribers: ctx.plan.subscribers,
        shards: ctx.plan.shards,
        warmup: ctx.plan.warmup,
        duration: ctx.plan.duration,
    };
    let figures = fanout::measure(&server, publisher.as_ref(), &run);
    server.stop();
    if let Some(p) = publisher {
        p.stop();
    }
    drop(nats);
    figures
}

/// The workload's limit figures of this run: loopback for `stream`; for
/// `dtp-stream` loopback and one core's AES-256-GCM (`dtp-stream-ws` takes
/// those of `dtp-stream` in the same run, or measures its own); for
/// `dtp-stream-quic` UDP loopback and one core's AES-256-GCM (that of
/// `dtp-stream` in the same run, or its own); for `resume` each side's own
/// `dtp-stream` goodput of this run. The RTSP and Unix workloads have none:
/// their figure is the ratio to TCP.
fn limits(ctx: &Ctx<'_>, bw: BenchWorkload, report: &mut RunReport) -> Result<(), String> {
    let window = ctx.plan.duration.min(Duration::from_secs(3));
    let n = ctx.plan.stream_connections;
    let loopback = || -> Result<LimitFigure, String> {
        Ok(LimitFigure::new(
            &format!("loopback ({})", plural(n, "connection")),
            loopback_limit(window, n)?,
        ))
    };
    let same_run = |name: &str| {
        report
            .workloads
            .iter()
            .find(|w| w.name == name)
            .map(|w| w.limits.clone())
            .filter(|l| !l.is_empty())
    };
    let aead = || {
        same_run("dtp-stream")
            .and_then(|l| l.into_iter().find(|f| f.name == AEAD_LIMIT))
            .unwrap_or_else(|| {
                LimitFigure::new(
                    AEAD_LIMIT,
                    dtp_bench::aead_limit::measure(
                        AeadAlgorithm::Aes256Gcm,
                        16 * 1024,
                        window.min(Duration::from_secs(1)),
                    ),
                )
            })
    };
    let reused = match bw {
        BenchWorkload::Dtp(Workload::Stream, Carry::Ws) => same_run("dtp-stream"),
        _ => None,
    };
    let figures = match (bw, reused) {
        (_, Some(same)) => same,
        (BenchWorkload::Plain(Workload::Stream), None) => vec![loopback()?],
        (BenchWorkload::Dtp(Workload::Stream, Carry::Tcp | Carry::Ws), None) => {
            vec![
                loopback()?,
                LimitFigure::new(
                    "sealed (AES-256-GCM, two cores raw)",
                    dtp_bench::sealed_limit::measure(window, congestion().as_deref())
                        .map_err(|e| format!("sealed limit: {e}"))?
                        .bytes_per_s,
                ),
                aead(),
            ]
        }
        (BenchWorkload::Dtp(Workload::Stream, Carry::Quic), None) => {
            let udp = dtp_bench::udp_loopback::measure(window, n)
                .map_err(|e| format!("UDP loopback limit: {e}"))?;
            vec![
                LimitFigure::new(
                    &format!(
                        "udp loopback ({}, {}-byte datagrams, {} per send)",
                        plural(n, "flow"),
                        dtp_bench::udp_loopback::DATAGRAM,
                        udp.segments
                    ),
                    udp.bytes_per_s,
                ),
                aead(),
            ]
        }
        (BenchWorkload::Resume, None) => {
            let Some(stream) = report.workloads.iter().find(|w| w.name == "dtp-stream") else {
                return Ok(());
            };
            stream
                .sides
                .iter()
                .map(|s| {
                    LimitFigure::of_side(
                        "dtp-stream goodput without disconnects",
                        &s.name,
                        s.figures.bytes_per_s,
                    )
                })
                .collect()
        }
        _ => return Ok(()),
    };
    if report.workloads.iter().any(|w| w.name == bw.name()) {
        entry(report, bw.name()).limits = figures;
    }
    Ok(())
}

/// The name of one core's AES-256-GCM limit.
const AEAD_LIMIT: &str = "aead (AES-256-GCM, one core)";

/// The load generator's congestion control, for the limits.
fn congestion() -> Option<String> {
    crate::load_cmd::congestion_name(crate::load_cmd::LOAD_CONGESTION)
}

/// The loopback limit over `connections` connections with the load
/// generator's congestion control.
fn loopback_limit(window: Duration, connections: usize) -> Result<f64, String> {
    dtp_bench::loopback::measure_parallel(window, connections, congestion().as_deref())
        .map(|l| l.bytes_per_s)
        .map_err(|e| format!("loopback limit: {e}"))
}

/// The key files and the `[dtp]` configuration both servers read.
pub(super) fn write_dtp_config(dir: &Path, keys: &BenchKeys) -> Result<PathBuf, String> {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
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
