//! `dtp sim`: a deterministic simulation of the terminal control plane
//! (SPEC §2–3, issue 5 item 8).
//!
//! One [`dtp_terminal::Terminal`] per seed, driven in virtual time with
//! seeded randomness — no threads, no sockets, no clock reads (the one
//! clock read left is inside `dtp_policy`'s priority-script runner, which
//! can only turn a script running past 100 ms into a reject). Each step
//! advances the clock (running the terminal's timers, the simulated
//! model's replies and the simulated person's answers that fall due on the
//! way) and then applies one random input:
//!
//! - AuthRequests from many Fays with valid, expired, not-yet-valid,
//!   revoked, unknown-issuer, wrong-grant, wrong-Fay and garbage
//!   credentials, for free and for held resources (HO-1 handovers);
//! - heartbeats (single, aggregated, retransmitted, replayed, after death,
//!   from the wrong connection), connection drops and returns;
//! - releases (own, repeated, unknown, from the wrong connection),
//!   revocations, credential renewals and clock jumps past `not_after`,
//!   resource loss and return, forced terminations;
//! - transfer requests and admin handovers, Fay→Fay, Fay→human and
//!   human→Fay, answered by the three policies: a real Rhai priority
//!   script through `dtp_policy`, a simulated AI model (allow, reject,
//!   require_human, garbage, down, 5xx, timeout, late past the hard
//!   deadline) whose replies go through `dtp_policy`'s real classification
//!   and fallback, and a simulated person on `dtp_policy`'s real
//!   pending-decision queue (allow, reject, silence → default action, late);
//! - OS-access failures armed at random and at the handover steps that
//!   can fail (see [`world`]'s notes on T0 … T5).
//!
//! After every input the terminal was given (not only every step) the
//! checks of [`checks`] (state) and [`notify`] (the output stream) run;
//! every violation is kept with the seed and step that reproduce it.

mod admin;
mod checks;
mod creds;
mod expect;
mod handovers;
mod inputs;
mod messages;
mod notify;
mod oracle;
mod policy;
mod report;
mod world;

pub(crate) use report::Report;

use report::SeedReport;
use world::World;

/// A seed's run stops after this many violations: the first one is the one
/// to reproduce, and a broken invariant tends to fire on every step after.
pub(crate) const MAX_VIOLATIONS_PER_SEED: usize = 100;

/// What to simulate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SimOptions {
    /// The first seed.
    pub(crate) seed: u64,
    /// Steps per seed.
    pub(crate) steps: u64,
    /// How many seeds, from `seed` on.
    pub(crate) seeds: u64,
}

/// Runs every seed, one after the other.
pub(crate) fn run(opts: SimOptions) -> Report {
    let mut report = Report::new(opts);
    for k in 0..opts.seeds {
        report.add(run_seed(opts.seed.wrapping_add(k), opts.steps));
    }
    report
}

/// Runs one seed for `steps` steps. Step `n` depends only on the seed and
/// the steps before it, so `--seed S --steps n` replays a run up to step n.
pub(crate) fn run_seed(seed: u64, steps: u64) -> SeedReport {
    let mut w = match World::new(seed) {
        Ok(w) => w,
        Err(e) => {
            let mut r = SeedReport::new(seed);
            r.violation(0, format!("the simulated terminal could not start: {e}"));
            return r;
        }
    };
    for step in 1..=steps {
        w.step = step;
        w.run_step();
        if w.report.violations.len() >= MAX_VIOLATIONS_PER_SEED {
            w.report.stopped_early = true;
            break;
        }
    }
    w.finish()
}

/// A small deterministic generator (SplitMix64) for the simulation's own
/// choices; the terminal gets its own [`dtp_terminal::SeededRandom`].
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator whose whole output follows from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x6A09_E667_F3BC_C908)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// Uniform in `lo..hi` (`lo` when the range is empty).
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo))
    }

    /// True with probability `percent` / 100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An index into a slice of `len` elements, if there are any.
    pub(crate) fn index(&mut self, len: usize) -> Option<usize> {
        (len > 0).then(|| (self.below(len as u64)) as usize)
    }

    /// One element of `items`, if there are any.
    pub(crate) fn pick<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        self.index(items.len()).and_then(|i| items.get(i).cloned())
    }

    /// 16 random bytes.
    pub(crate) fn bytes16(&mut self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        b[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
            let r = a.range(10, 20);
            assert!((10..20).contains(&r));
            b.range(10, 20);
        }
        assert_eq!(a.below(0), 0);
        assert_eq!(a.index(0), None);
    }

    #[test]
    fn a_short_run_is_clean_and_replays_exactly() {
        let a = run_seed(3, 400);
        let b = run_seed(3, 400);
        assert_eq!(a.violations, Vec::new(), "{:?}", a.violations);
        assert_eq!(a.counts, b.counts);
        assert_eq!(a.virtual_ms, b.virtual_ms);
    }
}
