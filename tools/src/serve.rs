//! `dtp serve`: the gateway on the embedded default configuration, or a
//! TOML file's. With `[dtp]` every connection runs the DTP protocol; with
//! `[terminal]` as well, the control thread runs the terminal control
//! plane (sessions, liveness, handover, audit) and the admin port serves
//! its `/v1` endpoints.

use std::path::Path;
use std::sync::Arc;

use dtp_bench::dtp_workload::DtpResponder;
use dtp_engine::dtp::{DtpGateway, SessionRegistry};
use dtp_engine::{ControlPlane, Engine, PlaneHandle, TerminalPlane};
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
    let started = match terminal {
        // SPEC §1: every connection runs CAP, encryption, agreements and
        // resume; suspended sessions are shared by all shards.
        Some(terminal) => {
            let terminal = Arc::new(terminal);
            let registry = Arc::new(SessionRegistry::new(config.dtp.max_suspended));
            Engine::start_with_control(
                engine_config,
                move |_| {
                    DtpGateway::new(terminal.clone(), registry.clone(), DtpResponder::default())
                },
                control,
            )
        }
        None => Engine::start_with_control(engine_config, move |_| Gateway { limits }, control),
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
    for addr in engine.local_addrs() {
        // One line per address, for scripts (and `dtp bench`) to read.
        println!("listening {addr}");
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
