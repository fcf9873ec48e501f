//! `dtp sim`: seeded runs of the terminal's state machines, or with
//! `--cluster` of several gateways over a model of etcd.

use std::path::PathBuf;

use clap::Args;

use crate::cli_error::{self, CliError};
use crate::sim;

#[derive(Args)]
pub(crate) struct SimCli {
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
    /// delays, partitions, crashes, restarts, handovers through
    /// reservations, wall clocks up to 500 ms apart; the real occupancy
    /// code over a model of etcd): after every step, no resource is held by
    /// two gateways, the store lists at most one exclusive occupant, and no
    /// gateway took a reservation its clock said was live for another.
    #[arg(long)]
    cluster: bool,
}

/// `dtp sim`: prints the report; `Ok(false)` when it found violations.
pub(crate) fn run_sim(a: SimCli) -> Result<bool, CliError> {
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
    use dtp_cluster::sim::{Model, Outcome, Sim};
    let mut sum = Outcome::default();
    let mut broken = 0;
    for seed in a.seed..a.seed.saturating_add(a.seeds) {
        let o = Sim::new(Model::default(), seed).run(a.steps);
        if let Some(v) = &o.violation {
            println!("seed {seed}: violation after {} steps: {v}", o.steps);
            broken += 1;
        }
        sum.grants += o.grants;
        sum.busy += o.busy;
        sum.fences += o.fences;
        sum.crashes += o.crashes;
        sum.handovers += o.handovers;
        sum.handed += o.handed;
        sum.taken_early += o.taken_early;
    }
    println!(
        "cluster: {} seeds × {} steps: {} grants, {} refused busy, {} fences, {} crashes, {} handovers ({} reached their target, {} reservations lost to a skewed clock); {broken} seeds with a violation",
        a.seeds,
        a.steps,
        sum.grants,
        sum.busy,
        sum.fences,
        sum.crashes,
        sum.handovers,
        sum.handed,
        sum.taken_early
    );
    broken == 0
}
