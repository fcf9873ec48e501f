//! `dtp load`: its arguments, their checks, and the runs they start (DTP
//! over every transport, or realtime subscribers with `--realtime`).

use std::path::PathBuf;

use clap::Args;

use crate::cli_error::CliError;
use crate::{cred_cmd, load, load_dtp, load_rt};

#[derive(Args)]
pub(crate) struct LoadCli {
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

pub(crate) fn workload(name: &str) -> Result<dtp_bench::workload::Workload, CliError> {
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

pub(crate) fn run_load(a: LoadCli) -> Result<(), CliError> {
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
    let bar = load::Progress::new(total);
    let result =
        load::run(&spec, |secs, ops| bar.update(secs, ops), |_| {}).map_err(CliError::Io)?;
    bar.finish();
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

/// Refuses, before any work, the `dtp load` arguments that cannot work
/// (the rest are checked where they are used).
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
