//! `dtp serve`: the gateway on the embedded default configuration, or a
//! TOML file's. With `[dtp]` every connection runs the DTP protocol; with
//! `[terminal]` as well, the control thread runs the terminal control
//! plane (sessions, liveness, handover, audit) and the admin port serves
//! its `/v1` endpoints.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use dtp_engine::{Engine, EngineConfig, EngineHandle, Framed, Listener, Routed, Service};
use dtp_gateway::app::{GatewayDown, GatewayPlane, GatewayUp, WithRealtime};
use dtp_gateway::dtp::{DtpGateway, EtcdSessionStore};
use dtp_gateway::plane::ClusterNode;
use dtp_gateway::realtime::{FrontMetrics, RealtimeFront, RealtimePlane, RtConfig};
use dtp_gateway::{PlaneHandle, TerminalPlane};
use dtp_transports::Endpoint;
use dtp_workload::dtp::DtpResponder;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::cli_error::CliError;
use crate::config::Config;
use crate::gateway::{Gateway, MinimalControl};
use crate::terminal_cfg::{Access, plane_parts};
use dtp_gateway::admin::{self, AdminServer, Api, Exporter, Health};
use dtp_terminal::NoopAccess;

pub(crate) struct ServeArgs<'a> {
    pub(crate) config: Option<&'a Path>,
    pub(crate) listen: Option<dtp_transports::Endpoint>,
    pub(crate) realtime_listen: Option<std::net::SocketAddr>,
    pub(crate) no_realtime: bool,
    pub(crate) echo: bool,
    pub(crate) backend: Option<&'a str>,
    pub(crate) shards: Option<usize>,
    pub(crate) no_admin: bool,
    pub(crate) no_pin: bool,
    pub(crate) print_config: bool,
}

pub(crate) fn run(args: ServeArgs<'_>) -> Result<(), CliError> {
    let config = configure(&args)?;
    if args.print_config {
        print!("{}", crate::config::annotated(&config).map_err(bad_config)?);
        return Ok(());
    }
    let engine_config = config.engine().map_err(bad_config)?;
    // Checked whenever it is present (the secret file read now).
    let cluster = match &config.cluster {
        Some(c) => Some(c.check().map_err(bad_config)?),
        None => None,
    };
    // SPEC HO-4, SES-3 across gateways: with `[cluster] etcd`, this node's
    // lease (kept alive while it runs, revoked when it stops).
    let ownership = cluster
        .as_ref()
        .and_then(crate::cluster_cfg::Cluster::ownership);
    let node = match ownership.clone() {
        Some(settings) => Some(ClusterNode::start(settings).map_err(CliError::Io)?),
        None => None,
    };
    let limits = engine_config.limits;
    // Catch SIGINT/SIGTERM before anything is announced, so a supervisor
    // that signals as soon as it sees the address still gets a drain.
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).map_err(|e| CliError::Io(format!("signals: {e}")))?;
    // SPEC SES-2: with DTP, where its suspended sessions are kept.
    let terminal = match config.dtp.terminal(limits).map_err(bad_config)? {
        Some(t) => {
            let sessions = match &ownership {
                // Parked in etcd: a Fay resumes on any gateway.
                Some(o) => {
                    let limits = dtp_gateway::dtp::StoreLimits {
                        max_sessions: config.dtp.max_suspended,
                        ..dtp_gateway::dtp::StoreLimits::for_endpoint(t.endpoint)
                    };
                    let store = EtcdSessionStore::open(&o.etcd, &o.prefix, limits, o.http.clone())
                        .map_err(CliError::Io)?;
                    Arc::new(store) as Arc<dyn dtp_gateway::dtp::SuspendedSessions>
                }
                None => config
                    .dtp
                    .suspended_sessions(t.endpoint)
                    .map_err(bad_config)?,
            };
            Some((t, sessions))
        }
        None => None,
    };
    // Read and checked whenever it is set, with or without [terminal].
    let token = config.admin.token().map_err(bad_config)?;
    let mut parts = plane_parts(&config, token.as_deref()).map_err(bad_config)?;
    if let (Some(p), Some(node)) = (parts.as_mut(), node.as_ref()) {
        let inner = std::mem::replace(&mut p.access, Access::Noop(NoopAccess));
        p.access = Access::Cluster(Box::new(node.access(inner)));
    }
    let mut realtime = realtime_parts(&config, engine_config.shard_count(), cluster.as_ref())?;
    // Every port checked before anything starts (the audit log opens,
    // threads spawn).
    let (ports, admin_listener) = claim_ports(&config, &engine_config, realtime.as_ref())?;
    // SPEC §2–3: the terminal plane on the control thread, with its own
    // verifier (same trust and revocations as CAP's) and admin handle.
    let (control, plane): (Box<dyn GatewayPlane>, Option<PlaneHandle>) = match parts {
        Some(p) => {
            let (mut plane, handle) =
                TerminalPlane::new(p.config, p.verifier, p.access).map_err(|e| match e {
                    dtp_gateway::PlaneError::Audit(e) => {
                        CliError::Io(format!("terminal.audit.path: {e}"))
                    }
                    e => CliError::Io(format!("terminal: {e}")),
                })?;
            // SPEC HO-1 across gateways: handovers between Fays on
            // different gateways ask and answer through etcd.
            if let Some(node) = &node {
                plane.join_mail(node.mail().map_err(CliError::Io)?);
            }
            (Box::new(plane), Some(handle))
        }
        None => (Box::new(MinimalControl), None),
    };
    let health = Health::new(engine_config.shard_count());
    let control = health.probed(control);
    let dtp_listeners = engine_config.listen.len();
    let quic_fingerprint = engine_config
        .quic
        .as_ref()
        .and_then(|q| q.identity.fingerprint());
    let push_metrics = realtime.as_ref().and_then(|r| r.plane.push_metrics());
    let ledger_metrics = realtime.as_ref().and_then(|r| r.plane.cluster_metrics());
    let push_announce = realtime.as_mut().and_then(|r| r.push_announce.take());
    let realtime_metrics = realtime.as_ref().map(|r| r.metrics.clone());
    let realtime_config = realtime.as_ref().map(|r| r.config.clone());
    let up = health.clone();
    let started = match terminal {
        // SPEC §1: every connection runs CAP, encryption, agreements and
        // resume; suspended sessions are shared by all shards.
        Some((terminal, registry)) => {
            let terminal = Arc::new(terminal);
            start(
                engine_config,
                move |i| {
                    up.shard_started(i);
                    Framed::new(DtpGateway::new(
                        terminal.clone(),
                        registry.clone(),
                        DtpResponder::default(),
                    ))
                },
                control,
                realtime,
            )
        }
        None => start(
            engine_config,
            move |i| {
                up.shard_started(i);
                Framed::new(Gateway { limits })
            },
            control,
            realtime,
        ),
    };
    let engine = started.map_err(|e| CliError::Io(format!("could not start the gateway: {e}")))?;
    if let Err(e) = refuse_shared_ports(&engine, &ports) {
        engine.stop();
        let _ = engine.join();
        return Err(e);
    }
    say(&format!(
        "protocol {}",
        if config.dtp.enabled {
            "dtp (CAP, encrypted)"
        } else {
            "plaintext benchmark protocol"
        }
    ));
    let (dtp_addrs, realtime_addrs) = engine.local_addrs().split_at(dtp_listeners);
    for at in dtp_addrs {
        // One line per address, for scripts (and `dtp bench`) to read: TCP
        // as HOST:PORT, others with their scheme (`unix:PATH`).
        match at.tcp() {
            Some(addr) => say(&format!("listening {addr}")),
            None => say(&format!("listening {at}")),
        }
    }
    if let Some(sha) = quic_fingerprint {
        // What a client pins (`dtp load --quic-pin`).
        say(&format!(
            "quic certificate sha256 {}",
            crate::cred_cmd::parse::hex(&sha)
        ));
    }
    let realtime_tcp: Vec<_> = realtime_addrs.iter().filter_map(|a| a.tcp()).collect();
    if let Some(c) = &realtime_config {
        // The demo page served there may open its WebSocket (SPEC RT-9).
        c.serve_at(&realtime_tcp);
    }
    for addr in &realtime_tcp {
        say(&format!(
            "realtime http://{addr}/v1 (SSE, WebSocket realtime.v1, snapshots)"
        ));
    }
    if let Some(line) = push_announce {
        say(&line);
    }
    say(&format!(
        "backend {} ({})",
        engine.backend().kind.name(),
        engine.backend().reason
    ));
    if let Some(t) = &config.terminal {
        say(&format!(
            "control terminal plane (terminal_id {})",
            t.control.terminal_id
        ));
    }
    let human_id = config.terminal.as_ref().map(|t| t.control.human_id());
    if let Some(listener) = admin_listener {
        let server = AdminServer {
            exporter: Exporter {
                shards: engine.metrics_handles(),
                control: engine.control_metrics(),
                backend: engine.backend().clone(),
                plane: plane.clone(),
                realtime: realtime_metrics,
                push: push_metrics,
                ledgers: ledger_metrics,
            },
            api: plane.clone().zip(human_id).map(|(plane, human_id)| Api {
                plane,
                human_id,
                revocations: config.dtp.revoked_at_run_time.clone(),
            }),
            token,
            health: health.clone(),
        };
        let has_api = server.api.is_some();
        let bound = admin::spawn(listener, server)
            .map_err(|e| CliError::Io(format!("admin.listen: {e}")))?;
        say(&format!("metrics http://{bound}/metrics"));
        say(&format!(
            "health http://{bound}/healthz http://{bound}/readyz"
        ));
        if has_api {
            // `dtp ctl --admin ADDR` talks to this.
            say(&format!("admin http://{bound}/v1"));
        }
    } else if plane.is_some() {
        tracing::warn!("the terminal plane runs without an admin port (admin.listen is empty)");
    }
    // Block here until SIGINT or SIGTERM, then drain and stop.
    if let Some(sig) = signals.forever().next() {
        let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
        say(&format!(
            "draining: {name}: no new connections; open ones get up to {} ms to finish",
            config.engine.drain_ms
        ));
        tracing::info!(signal = name, "draining");
        health.set_draining();
        engine.stop();
    }
    engine
        .join()
        .map_err(|e| CliError::Io(format!("gateway failed: {e}")))?;
    say("stopped");
    Ok(())
}

/// The configuration: the file (or the embedded defaults) with the command
/// line's overrides.
fn configure(args: &ServeArgs<'_>) -> Result<Config, CliError> {
    let mut config = Config::load(args.config).map_err(bad_config)?;
    if let Some(at) = &args.listen {
        config.engine.listen = vec![at.clone()];
        if let Some(addr) = at.tcp_port() {
            config.realtime.listen = SocketAddr::new(addr.ip(), 0);
        }
    }
    if let Some(addr) = args.realtime_listen {
        config.realtime.listen = addr;
    }
    if args.no_realtime {
        config.realtime.enabled = false;
    }
    if args.echo {
        config.realtime.echo = true;
    }
    if let Some(b) = args.backend {
        config.io.backend = b.to_owned();
    }
    if let Some(n) = args.shards {
        config.engine.shards = n;
    }
    if args.no_admin {
        config.admin.listen = None;
    }
    if args.no_pin {
        config.engine.pin = false;
    }
    Ok(config)
}

fn bad_config(e: impl std::fmt::Display) -> CliError {
    CliError::usage("BAD_CONFIG", e)
}

/// One status line on stdout; a reader that went away is no reason to fail.
fn say(line: &str) {
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// A port that cannot be had, naming its key and address: a port another
/// process holds is `ADDRESS_IN_USE` (exit status 1: the port is not the
/// input's fault).
fn port_error(key: &str, addr: SocketAddr, e: &std::io::Error) -> CliError {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        CliError::Io(format!(
            "ADDRESS_IN_USE {key} {addr} is already in use (another process listens there: stop it or choose another port)"
        ))
    } else {
        CliError::Io(format!("{key} {addr}: {e}"))
    }
}

/// A Unix socket path this gateway can listen on, or why not, naming its
/// key and path: a folder that does not exist is `NOT_FOUND` (exit status
/// 2, as for any file named that does not exist), a socket another process
/// accepts on is `ADDRESS_IN_USE` and a file that is not a socket is in
/// the way (exit status 1). A socket nobody accepts on (its gateway was
/// killed) passes: the shard that binds it replaces it.
fn check_unix_path(key: &str, at: &Endpoint, path: &Path) -> Result<(), CliError> {
    use std::os::unix::fs::FileTypeExt;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return Err(CliError::usage(
            "NOT_FOUND",
            format_args!(
                "{key} {at}: the folder {} does not exist (create it or choose another path)",
                folder.display()
            ),
        ));
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Err(CliError::Io(format!(
            "{key} {at}: a file that is not a socket is there (remove it or choose another path)"
        )));
    }
    // A socket left by a gateway that is gone (killed) is replaced by the
    // shard that binds the path; one whose process lives is refused.
    match dtp_transports::probe_unix(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(CliError::Io(format!(
            "ADDRESS_IN_USE {key} {at} is already in use (another process listens there: stop it or choose another path)"
        ))),
        Err(e) => Err(CliError::Io(format!("{key} {at}: {e}"))),
    }
}

/// A port this gateway holds, and the key that names it.
type Port = (&'static str, SocketAddr);

/// Every port this gateway will hold, with the key that names it, checked:
/// no two of our own share one, no other process holds one (the admin port
/// is bound here, the others only probed: the shards bind them).
fn claim_ports(
    config: &Config,
    engine: &EngineConfig,
    realtime: Option<&RealtimeParts>,
) -> Result<(Vec<Port>, Option<std::net::TcpListener>), CliError> {
    // Unix sockets (the simulated BLE link's too): the folder must exist
    // and no live gateway hold the path; a stale socket file is left for
    // the shards to replace. BLE: the host must have Bluetooth.
    for listener in &engine.listen {
        let chunk_size = engine.driver.chunk_size;
        listener
            .at
            .fits_receive_buffers(chunk_size)
            .map_err(|e| bad_config(format_args!("engine.listen {e}")))?;
        match &listener.at {
            at @ (Endpoint::Unix(path) | Endpoint::BleSim { path, .. }) => {
                check_unix_path("engine.listen", at, path)?;
            }
            at @ Endpoint::Ble(_) => {
                dtp_transports::probe_ble()
                    .map_err(|e| bad_config(format_args!("engine.listen {at}: {e}")))?;
            }
            _ => {}
        }
    }
    let mut ports: Vec<Port> = engine
        .listen
        .iter()
        .filter_map(|l| Some(("engine.listen", l.at.tcp_port()?)))
        .collect();
    ports.extend(realtime.map(|r| ("realtime.listen", r.listen)));
    let admin = config.admin.listen.map(|a| ("admin.listen", a));
    refuse_overlaps(ports.iter().chain(&admin))?;
    for (key, addr) in &ports {
        dtp_transports::probe_listen(*addr).map_err(|e| port_error(key, *addr, &e))?;
    }
    let admin = match admin {
        Some((key, addr)) => {
            Some(std::net::TcpListener::bind(addr).map_err(|e| port_error(key, addr, &e))?)
        }
        None => None,
    };
    Ok((ports, admin))
}

/// Two of our own listeners on one port (the same address, or either the
/// wildcard) is a configuration mistake, named by both keys.
fn refuse_overlaps<'a>(
    ports: impl Iterator<Item = &'a (&'a str, SocketAddr)> + Clone,
) -> Result<(), CliError> {
    for (i, (key, addr)) in ports.clone().enumerate() {
        let clash = ports.clone().skip(i + 1).find(|(_, other)| {
            addr.port() != 0
                && other.port() == addr.port()
                && (other.ip() == addr.ip()
                    || other.ip().is_unspecified()
                    || addr.ip().is_unspecified())
        });
        if let Some((other_key, other)) = clash {
            return Err(bad_config(format!(
                "{other_key} {other} takes the port of {key} {addr}: give each its own port"
            )));
        }
    }
    Ok(())
}

/// After the shards listen: refuses when a listener of
/// another process shares one of our ports — one that started at the same
/// instant as we did, past [`dtp_transports::probe_listen`]. `/proc` that
/// cannot be read skips the check (the probe ran).
fn refuse_shared_ports(
    engine: &EngineHandle,
    ports: &[(&str, SocketAddr)],
) -> Result<(), CliError> {
    let bound: Vec<SocketAddr> = engine
        .local_addrs()
        .iter()
        .filter_map(|a| a.tcp_port())
        .collect();
    let foreign = match dtp_transports::foreign_listeners(&bound) {
        Ok(f) => f,
        Err(e) => {
            tracing::debug!(error = %e, "cannot list the listening sockets; the port check before start-up stands");
            return Ok(());
        }
    };
    let Some(other) = foreign.first() else {
        return Ok(());
    };
    let (key, addr) = bound
        .iter()
        .zip(ports)
        .find(|(b, _)| b.port() == other.port())
        .map_or(("engine.listen", *other), |(b, (key, _))| (*key, *b));
    Err(port_error(key, addr, &std::io::ErrorKind::AddrInUse.into()))
}

/// The realtime front end's parts, when `[realtime]` is on.
struct RealtimeParts {
    listen: std::net::SocketAddr,
    config: Arc<RtConfig>,
    plane: RealtimePlane,
    metrics: Arc<FrontMetrics>,
    /// What to say of the Web Push sender, when `[realtime.push]` has a
    /// key (its workers run from here on; they end with the plane).
    push_announce: Option<String>,
}

fn realtime_parts(
    config: &Config,
    shards: usize,
    cluster: Option<&crate::cluster_cfg::Cluster>,
) -> Result<Option<RealtimeParts>, CliError> {
    if !config.realtime.enabled {
        return Ok(None);
    }
    // With the terminal plane, its built-in streams (sessions, handovers,
    // decisions) are served too.
    let section = &config.realtime.with_built_ins(config.terminal.is_some());
    let bad = |e: String| CliError::usage("BAD_CONFIG", e);
    let specs = section.specs().map_err(bad)?;
    // SPEC RT-6: a restart without persistence is a new epoch; the epochs,
    // the cursor key and the login key come from the OS.
    let rng = ring::rand::SystemRandom::new();
    let mut failed = false;
    let mut random = || {
        let mut b = [0u8; 8];
        failed |= ring::rand::SecureRandom::fill(&rng, &mut b).is_err();
        u64::from_le_bytes(b)
    };
    let mut login = [0u8; 32];
    for part in login.chunks_mut(8) {
        part.copy_from_slice(&random().to_le_bytes());
    }
    let login = dtp_gateway::realtime::LoginKey::new(login, std::time::Instant::now());
    let front = section.front(login).map_err(bad)?;
    let push = section.push.sender().map_err(bad)?;
    // SPEC RT-6 scale-out: with `[cluster] nats`, the ledgers are the
    // cluster's JetStream streams (their epochs and the cursor key shared
    // by every gateway; read now, before anything starts).
    let mut plane = match cluster.and_then(crate::cluster_cfg::Cluster::realtime) {
        Some(settings) => {
            let plane = RealtimePlane::clustered(specs, shards, &settings, Default::default())
                .map_err(|e| CliError::Io(format!("cluster.nats: {e}")))?;
            tracing::info!(nats = ?settings.servers, node = %settings.node_id, "realtime ledgers shared through NATS JetStream");
            plane
        }
        None => RealtimePlane::new(specs, shards, &mut random)
            .map_err(|e| bad(format!("realtime: {e}")))?,
    };
    // SPEC RT-12: the Web Push sender's workers, when a VAPID key is set;
    // the plane hands them notifications and marks GONE what they report.
    let mut push_announce = None;
    if let Some(c) = push {
        let (push, announce) = crate::push_cfg::start(section, c, &mut random)?;
        plane = plane.with_push(push);
        push_announce = Some(announce);
    }
    if failed {
        return Err(CliError::Io("the system random generator failed".into()));
    }
    Ok(Some(RealtimeParts {
        listen: section.listen,
        config: front,
        plane,
        metrics: Arc::new(FrontMetrics::default()),
        push_announce,
    }))
}

/// The name of the realtime front end's listener (the others are DTP's).
const REALTIME_LISTENER: &str = "realtime";

/// Starts the engine running `make`'s service on the configured listeners
/// and, with the realtime front end, that too on its own listener, on the
/// same shards (its plane beside `control` on the control thread).
fn start<S, F>(
    mut config: EngineConfig,
    make: F,
    control: Box<dyn GatewayPlane>,
    realtime: Option<RealtimeParts>,
) -> std::io::Result<EngineHandle>
where
    S: Service<Up = GatewayUp, Down = GatewayDown> + 'static,
    F: Fn(usize) -> S + Send + Sync + 'static,
{
    let Some(rt) = realtime else {
        return Engine::start_with_control(config, make, Box::new(control));
    };
    config
        .listen
        .push(Listener::new(REALTIME_LISTENER, rt.listen.into()));
    let plane = WithRealtime::new(control, rt.plane);
    let (front, metrics) = (rt.config, rt.metrics);
    let listeners = config.listen.clone();
    Engine::start_with_control(
        config,
        move |i| {
            Routed::by_name(
                &listeners,
                REALTIME_LISTENER,
                make(i),
                RealtimeFront::new(front.clone(), i, metrics.clone()),
            )
        },
        Box::new(plane),
    )
}
