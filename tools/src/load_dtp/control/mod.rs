//! `dtp load --dtp --control MODE`: the terminal control plane under load
//! (issue 5, the `control` target) — many Fays, each its own runtime on its
//! own connection with its own credential, looping AuthRequests through the
//! gateway's rings and control thread (`decisions`), pairs of Fays
//! taking a shared resource from each other under a priority script
//! (`handovers`), or each Fay holding one session with heartbeats for the
//! whole run (`idle`: the soak's many quiet sessions). The rules are
//! `dtp_bench::control_workload`'s.
//!
//! **Owns**: the engine [`dtp_engine::Service`] that drives one [`flow::ControlFlow`]
//! per Fay, the run loop, the Fays' configurations minted from an issuer
//! key, and the control counters. **Never touches**: the terminal's rules,
//! the other load modes (it reuses `crate::load`'s `LoadSpec`, `Tally`,
//! `LoadResult` and measuring loop, like `super`), the bench.
//!
//! # Design choices
//!
//! - **One connection per Fay, no resume.** A Fay's sessions are bound to
//!   its connection (SPEC TS-6), so a flow that loses its connection gives
//!   up (an error); its sessions end by liveness on the terminal.
//! - **Closed loop per Fay.** One request or release in flight per Fay;
//!   load comes from the number of Fays (`--connections`).
//! - **A bounded ramp.** At most [`ControlSpec::max_opening`] Fays of a
//!   client shard are opening at once (connecting, in CAP, or waiting for
//!   their first AuthResult); the next starts as one settles. A crowd of
//!   handshakes started together would outrun the terminal and time out
//!   in its listen backlog.
//! - **`idle` beats on its own clock.** A Fay granted its session beats
//!   every [`ControlSpec::heartbeat`], the first beat a share of the
//!   interval after the grant that differs from Fay to Fay; a held
//!   session that loses its connection counts as lost and the Fay gives
//!   up. Its operations are the heartbeats answered in the window.
//! - **What an operation is.** `decisions`: an AuthResult received inside
//!   the measured window (granted or refused); latency from the
//!   AuthRequest to it. `handovers`: a grant received inside the window by
//!   a Fay whose previous session was handed over (SessionStateChanged
//!   `terminated`, `handed_over`), i.e. a handover the Fay won; latency
//!   from its AuthRequest to that grant. Refusals count by code over the
//!   whole run, warm-up and drain included.
//! - **`hold` is not a load.** One Fay, one session held open with
//!   heartbeats until Ctrl-C ([`hold`]), for a person to drive with `dtp
//!   ctl`; it shares only the options.
//! - **Drain.** After the window no request is sent; a Fay releases what it
//!   holds and closes once its loop is idle, or at the drain deadline
//!   ([`DRAIN`]), after which a flow still busy counts as unfinished.

pub(crate) mod cli;
mod client;
mod flow;
mod hold;
mod stats;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dtp_bench::control_workload::{self, ControlMode, ControlPlan};
use dtp_codec::AccessMode;
use dtp_crypto::cred::IssuerKeyPair;

use crate::load_dtp::cli::fay_config;
use dtp_engine::{Engine, EngineConfig};

use crate::load::{LoadResult, LoadSpec, Phase, Tally};
use client::{ControlClient, Shared};
use flow::{ControlFlowConfig, FaySetup};

pub(crate) use cli::{ControlCli, run_cli};
pub(crate) use stats::ControlStats;

/// How long a run waits after its window for the Fays' loops to drain:
/// longer than a request may stall ([`flow::STALL`]).
pub(crate) const DRAIN: Duration = Duration::from_secs(7);

/// What control mode adds to a [`LoadSpec`] (whose `connections` is the
/// number of Fays).
#[derive(Clone, Debug)]
pub(crate) struct ControlSpec {
    /// Who asks for what.
    pub(crate) plan: ControlPlan,
    /// The access mode of every AuthRequest.
    pub(crate) access: AccessMode,
    /// `idle`: between two heartbeats of a session (default 10 s, the
    /// terminal's default interval, SPEC LIV-2).
    pub(crate) heartbeat: Duration,
    /// Fays of a client shard opening at once, at most (default
    /// [`MAX_OPENING`]).
    pub(crate) max_opening: usize,
    /// Fay `i` of the plan, its keys and credential.
    fays: Vec<FaySetup>,
}

/// Fays of a client shard opening at once unless told otherwise: enough
/// to keep a terminal's handshakes busy, few enough that none waits out
/// its CAP timeout in the listen backlog.
pub(crate) const MAX_OPENING: usize = 256;

impl ControlSpec {
    /// Mints the plan's Fays from `issuer`: fresh Noise keys and a
    /// credential granting `access` on its resource each; `pinned`: the
    /// terminal's Noise public key (CAP fails against any other).
    pub(crate) fn mint(
        plan: ControlPlan,
        access: AccessMode,
        issuer: &IssuerKeyPair,
        pinned: Option<[u8; 32]>,
    ) -> Result<Self, String> {
        plan.check()?;
        let fays = (0..plan.fays)
            .map(|i| {
                let m = control_workload::mint_fay(
                    issuer,
                    &plan.fay_id(i),
                    &plan.resource_of(i),
                    access,
                )?;
                let fay = fay_config(m.noise, m.credential, pinned);
                Ok(FaySetup {
                    fay: Arc::new(fay),
                    fay_id: m.fay_id,
                    resource_id: m.resource_id,
                    slot: i,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            plan,
            access,
            heartbeat: Duration::from_secs(10),
            max_opening: MAX_OPENING,
            fays,
        })
    }
}

/// The result of a control run.
#[derive(Clone, Debug)]
pub(crate) struct ControlLoadResult {
    /// `ops` and `latency` are the mode's (decisions, or handovers won);
    /// connections, failed connections, errors.
    pub(crate) load: LoadResult,
    /// Every counter and histogram of the run.
    pub(crate) stats: ControlStats,
    /// Flows that gave up.
    pub(crate) failed_flows: u64,
    /// Flows still busy at the drain deadline.
    pub(crate) unfinished: u64,
    /// Fays that still held their session when the window ended.
    pub(crate) held_at_end: u64,
}

impl ControlLoadResult {
    /// Whether the run worked: at least `min` of the Fays established a
    /// DTP session and of the AuthRequests answered (or timed out) were
    /// granted — and with `idle`, of the Fays held their session to the
    /// end and of the heartbeats sent were answered; else why not
    /// (refusal and close codes by name with the terminal's message, or
    /// why connections failed).
    pub(crate) fn verdict(
        &self,
        spec: &LoadSpec,
        mode: ControlMode,
        min: f64,
    ) -> Result<(), String> {
        let (t, s) = (&self.load.tally, &self.stats);
        let fays = spec.connections as u64;
        let connect =
            (t.failed > 0).then(|| crate::load::connect_failure(&spec.target, t.last_errno));
        let mut shares = vec![
            crate::load::Share {
                what: "Fays established a DTP session",
                attempted: fays,
                succeeded: s.established.min(fays),
            },
            crate::load::Share {
                what: "AuthRequests were granted",
                attempted: s.granted + s.refused_total() + s.timeouts,
                succeeded: s.granted,
            },
        ];
        if mode == ControlMode::Idle {
            shares.push(crate::load::Share {
                what: "Fays held their session to the end",
                attempted: fays,
                succeeded: self.held_at_end.min(fays),
            });
        }
        if mode == ControlMode::Idle && s.heartbeats_sent > 0 {
            shares.push(crate::load::Share {
                what: "heartbeats were answered",
                attempted: s.heartbeats_sent,
                succeeded: s.heartbeats_answered.min(s.heartbeats_sent),
            });
        }
        crate::load::status::check(&shares, min, &s.failures, connect)
    }
}

/// Runs `control` against `spec.target` for `spec`'s warm-up and duration
/// on `spec.shards` client threads and returns what it measured; the
/// entry point for the bench and the CLI. `progress` is called about ten
/// times a second with the seconds elapsed, the operations so far and the
/// sessions held now; `phase` at the two edges of the measured window.
pub(crate) fn run(
    spec: &LoadSpec,
    control: &ControlSpec,
    mut progress: impl FnMut(f64, u64, u64),
    mut phase: impl FnMut(Phase),
) -> Result<ControlLoadResult, String> {
    let fays = control.fays.len();
    let shards = spec.shards.max(1).min(fays.max(1));
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let drain_until = end + DRAIN;
    let shared: Vec<Arc<Mutex<Shared>>> = (0..shards)
        .map(|_| Arc::new(Mutex::new(Shared::new())))
        .collect();
    // Fay i runs on shard i % shards; each shard starts its Fays in order.
    let mut shares: Vec<Vec<FaySetup>> = vec![Vec::new(); shards];
    for (i, f) in control.fays.iter().enumerate() {
        shares[i % shards].push(f.clone());
    }
    for s in &mut shares {
        s.reverse();
    }
    let factory_shared = shared.clone();
    let template = ControlFlowConfig {
        mode: control.plan.mode,
        access: control.access,
        measure_from,
        end,
        heartbeat: control.heartbeat,
    };
    let max_opening = control.max_opening.max(1);
    let target = spec.target.clone();
    let config = EngineConfig {
        shards,
        pin: false,
        listen: Vec::new(),
        driver: spec.driver.clone(),
        limits: dtp_codec::Limits::default(),
        drain: Duration::from_secs(2),
        control_ring: 1024,
        quic: spec.quic.clone(),
    };
    let engine = Engine::start(config, move |i| {
        ControlClient::new(
            target.clone(),
            template.clone(),
            shares.get(i).cloned().unwrap_or_default(),
            max_opening,
            factory_shared[i].clone(),
            start,
            drain_until,
        )
    })
    .map_err(|e| format!("could not start the load generator: {e}"))?;
    let times = (start, measure_from, end, drain_until);
    let held = |secs: f64, ops: u64| {
        let held = shared.iter().map(|s| s.lock().map_or(0, |s| s.held)).sum();
        progress(secs, ops, held);
    };
    let (backend, client_cpu_ns) = super::measure(
        engine,
        &shared,
        |s: &Shared| &s.tally,
        times,
        held,
        &mut phase,
    )?;
    let mut tally = Tally::new();
    let mut stats = ControlStats::new();
    let (mut failed_flows, mut unfinished, mut held_at_end) = (0, 0, 0);
    for s in &shared {
        if let Ok(s) = s.lock() {
            tally.merge(&s.tally);
            stats.merge(&s.stats);
            failed_flows += s.failed_flows;
            unfinished += s.unfinished;
            held_at_end += s.held_at_end;
        }
    }
    crate::load::no_connection_is_an_error(&tally, &spec.target)?;
    let latency = tally.latency.summary();
    Ok(ControlLoadResult {
        load: LoadResult {
            staged: None,
            tally,
            elapsed: spec.duration,
            latency,
            backend,
            client_cpu_ns,
        },
        stats,
        failed_flows,
        unfinished,
        held_at_end,
    })
}
