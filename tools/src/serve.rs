//! `dtp serve`: the gateway on the embedded default configuration, or a
//! TOML file's. With `[dtp]` every connection runs the DTP protocol; with
//! `[terminal]` as well, the control thread runs the terminal control
//! plane (sessions, liveness, handover, audit) and the admin port serves
//! its `/v1` endpoints.

use std::path::Path;
use std::sync::Arc;

use dtp_bench::dtp_workload::DtpResponder;
use dtp_engine::dtp::{DtpGateway, SessionRegistry};
use dtp_engine::realtime::{FrontMetrics, RealtimeFront, RealtimePlane, RtConfig};
use dtp_engine::{
    ControlPlane, Engine, EngineConfig, EngineHandle, Pair, PairPlane, PlaneHandle, Service,
    TerminalPlane,
};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::admin::{self, AdminServer, Api, Exporter};
use crate::cli_error::CliError;
use crate::config::Config;
use crate::gateway::{Gateway, MinimalControl};
use crate::terminal_cfg::plane_parts;

pub(crate) struct ServeArgs<'a> {
    pub(crate) config: Option<&'a Path>,
    pub(crate) listen: Option<std::net::SocketAddr>,
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
    let mut config = Config::load(args.config).map_err(|e| CliError::usage("BAD_CONFIG", e))?;
    if let Some(addr) = args.listen {
        config.engine.listen = vec![addr];
        config.realtime.listen = std::net::SocketAddr::new(addr.ip(), 0);
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
    if args.print_config {
        let text = toml::to_string_pretty(&config).map_err(|e| CliError::usage("BAD_CONFIG", e))?;
        print!("{text}");
        if config.terminal.is_none() {
            // Present, the section turns the plane on, so its defaults are
            // only shown once it is there.
            println!(
                "\n# [terminal] is absent: the minimal control plane runs. Add\n# [terminal.control] terminal_id = \"...\" (with [dtp] enabled) for the\n# terminal control plane; --print-config then shows its defaults."
            );
        }
        return Ok(());
    }
    let engine_config = config
        .engine()
        .map_err(|e| CliError::usage("BAD_CONFIG", e))?;
    let limits = engine_config.limits;
    // Catch SIGINT/SIGTERM before anything is announced, so a supervisor
    // that signals as soon as it sees the address still gets a drain.
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).map_err(|e| CliError::Io(format!("signals: {e}")))?;
    let terminal = config
        .dtp
        .terminal(limits)
        .map_err(|e| CliError::usage("BAD_CONFIG", e))?;
    let parts = plane_parts(&config).map_err(|e| CliError::usage("BAD_CONFIG", e))?;
    let token = parts.as_ref().and_then(|p| p.token.clone());
    // SPEC §2–3: the terminal plane on the control thread, with its own
    // verifier (same trust and revocations as CAP's) and admin handle.
    let (control, plane): (Box<dyn ControlPlane>, Option<PlaneHandle>) = match parts {
        Some(p) => {
            let (plane, handle) =
                TerminalPlane::new(p.config, p.verifier, p.access).map_err(|e| match e {
                    dtp_engine::PlaneError::Audit(e) => {
                        CliError::Io(format!("terminal.audit.path: {e}"))
                    }
                    e => CliError::Io(format!("terminal: {e}")),
                })?;
            (Box::new(plane), Some(handle))
        }
        None => (Box::new(MinimalControl), None),
    };
    let realtime = realtime_parts(&config, engine_config.shard_count())?;
    let dtp_listeners = engine_config.listen.len();
    let realtime_metrics = realtime.as_ref().map(|r| r.metrics.clone());
    let started = match terminal {
        // SPEC §1: every connection runs CAP, encryption, agreements and
        // resume; suspended sessions are shared by all shards.
        Some(terminal) => {
            let terminal = Arc::new(terminal);
            let registry = Arc::new(SessionRegistry::new(config.dtp.max_suspended));
            start(
                engine_config,
                move |_| {
                    DtpGateway::new(terminal.clone(), registry.clone(), DtpResponder::default())
                },
                control,
                realtime,
            )
        }
        None => start(
            engine_config,
            move |_| Gateway { limits },
            control,
            realtime,
        ),
    };
    let engine = started.map_err(|e| CliError::Io(format!("could not start the gateway: {e}")))?;
    println!(
        "protocol {}",
        if config.dtp.enabled {
            "dtp (CAP, encrypted)"
        } else {
            "plaintext benchmark protocol"
        }
    );
    let (dtp_addrs, realtime_addrs) = engine.local_addrs().split_at(dtp_listeners);
    for addr in dtp_addrs {
        // One line per address, for scripts (and `dtp bench`) to read.
        println!("listening {addr}");
    }
    for addr in realtime_addrs {
        println!("realtime http://{addr}/v1 (SSE, WebSocket realtime.v1, snapshots)");
    }
    println!(
        "backend {} ({})",
        engine.backend().kind.name(),
        engine.backend().reason
    );
    if let Some(t) = &config.terminal {
        println!(
            "control terminal plane (terminal_id {})",
            t.control.terminal_id
        );
    }
    let human_id = config.terminal.as_ref().map(|t| t.control.human_id());
    if let Some(addr) = config.admin.listen {
        let server = AdminServer {
            exporter: Exporter {
                shards: engine.metrics_handles(),
                control: engine.control_metrics(),
                backend: engine.backend().clone(),
                plane: plane.clone(),
                realtime: realtime_metrics,
            },
            api: plane.clone().zip(human_id).map(|(plane, human_id)| Api {
                plane,
                human_id,
                revocations: config.dtp.revoked_at_run_time.clone(),
            }),
            token,
        };
        let has_api = server.api.is_some();
        let bound = admin::spawn(addr, server)
            .map_err(|e| CliError::Io(format!("admin port {addr}: {e}")))?;
        println!("metrics http://{bound}/metrics");
        if has_api {
            // `dtp ctl --admin ADDR` talks to this.
            println!("admin http://{bound}/v1");
        }
    } else if plane.is_some() {
        tracing::warn!("the terminal plane runs without an admin port (admin.listen is empty)");
    }
    let stop = engine.stop_flag();
    let wakers_engine = &engine;
    // Block here until SIGINT or SIGTERM, then drain and stop.
    if let Some(sig) = signals.forever().next() {
        tracing::info!(signal = sig, "stopping: no new connections, draining");
        stop.store(true, std::sync::atomic::Ordering::Release);
        wakers_engine.stop();
    }
    engine
        .join()
        .map_err(|e| CliError::Io(format!("gateway failed: {e}")))
}

/// The realtime front end's parts, when `[realtime]` is on.
struct RealtimeParts {
    listen: std::net::SocketAddr,
    config: Arc<RtConfig>,
    plane: RealtimePlane,
    metrics: Arc<FrontMetrics>,
}

fn realtime_parts(config: &Config, shards: usize) -> Result<Option<RealtimeParts>, CliError> {
    if !config.realtime.enabled {
        return Ok(None);
    }
    // With the terminal plane, its built-in streams (sessions, handovers,
    // decisions) are served too.
    let section = &config.realtime.with_built_ins(config.terminal.is_some());
    let bad = |e: String| CliError::usage("BAD_CONFIG", e);
    let specs = section.specs().map_err(bad)?;
    let front = section.front().map_err(bad)?;
    // SPEC RT-6: a restart without persistence is a new epoch; the epochs
    // and the cursor key come from the OS.
    let rng = ring::rand::SystemRandom::new();
    let mut failed = false;
    let mut random = || {
        let mut b = [0u8; 8];
        failed |= ring::rand::SecureRandom::fill(&rng, &mut b).is_err();
        u64::from_le_bytes(b)
    };
    let plane = RealtimePlane::new(specs, shards, &mut random)
        .map_err(|e| bad(format!("realtime: {e}")))?;
    if failed {
        return Err(CliError::Io("the system random generator failed".into()));
    }
    Ok(Some(RealtimeParts {
        listen: section.listen,
        config: front,
        plane,
        metrics: Arc::new(FrontMetrics::default()),
    }))
}

/// Starts the engine running `make`'s service on the configured listeners
/// and, with the realtime front end, that too on its own listener, on the
/// same shards (its plane beside `control` on the control thread).
fn start<S, F>(
    mut config: EngineConfig,
    make: F,
    control: Box<dyn ControlPlane>,
    realtime: Option<RealtimeParts>,
) -> std::io::Result<EngineHandle>
where
    S: Service + 'static,
    F: Fn(usize) -> S + Send + Sync + 'static,
{
    let Some(rt) = realtime else {
        return Engine::start_with_control(config, make, control);
    };
    let split = config.listen.len();
    config.listen.push(rt.listen);
    let plane = PairPlane::new(control, rt.plane);
    let (front, metrics) = (rt.config, rt.metrics);
    Engine::start_with_control(
        config,
        move |i| {
            Pair::new(
                make(i),
                RealtimeFront::new(front.clone(), i, metrics.clone()),
                split,
            )
        },
        Box::new(plane),
    )
}
