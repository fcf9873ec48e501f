//! Time and randomness for the terminal machine, which reads neither: the
//! plane is its driver, so the wall clock and the OS random generator are
//! read here (DESIGN.md §1 "Sans-IO").
//!
//! The control loop hands the plane monotonic [`Instant`]s; the terminal
//! (credentials, TS-16; UUID v7 session ids, TS-6) and the policies run on
//! Unix milliseconds. A [`Clock`] turns the one into the other once per
//! plane call, and deadlines go back through the same pair
//! ([`instant_of`]), so a test's [`OffsetClock`] drives the whole plane in
//! virtual time.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dtp_terminal::{RandomSource, UnixMs};
use ring::rand::{SecureRandom, SystemRandom};

/// Where the plane's wall-clock time comes from.
pub trait Clock: Send + 'static {
    /// The Unix time, in ms, at the control loop's instant `now`.
    fn unix_ms(&mut self, now: Instant) -> UnixMs;
}

/// The system's wall clock: one `SystemTime::now()` read per plane call.
/// It never goes back: after a step back of the system clock the plane's
/// time stays where it was until the clock catches up (the terminal's
/// arithmetic saturates anyway; this keeps audit times ordered).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock {
    last: UnixMs,
}

impl Clock for SystemClock {
    fn unix_ms(&mut self, _now: Instant) -> UnixMs {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.last = self.last.max(UnixMs(ms));
        self.last
    }
}

/// A virtual clock: Unix time is `origin_unix` plus the time elapsed since
/// `origin` — a pure function of the instant passed in, so a test that
/// passes `origin + d` is `d` into its virtual day.
#[derive(Clone, Copy, Debug)]
pub struct OffsetClock {
    origin: Instant,
    origin_unix: UnixMs,
}

impl OffsetClock {
    /// A clock that reads `origin_unix` at `origin`.
    pub fn new(origin: Instant, origin_unix: UnixMs) -> Self {
        OffsetClock {
            origin,
            origin_unix,
        }
    }
}

impl Clock for OffsetClock {
    fn unix_ms(&mut self, now: Instant) -> UnixMs {
        let elapsed = now.saturating_duration_since(self.origin).as_millis();
        self.origin_unix
            .plus(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }
}

/// The longest the plane asks the loop to wait: a deadline further out is
/// simply looked at again then (this keeps `Instant` arithmetic in range).
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// The loop's instant of the Unix `deadline`, given that `now` is `unix_now`.
pub(crate) fn instant_of(deadline: UnixMs, now: Instant, unix_now: UnixMs) -> Instant {
    now + Duration::from_millis(deadline.since(unix_now)).min(MAX_WAIT)
}

/// The operating system's CSPRNG (`ring`'s `SystemRandom`): session ids
/// (TS-6) and handover ids are hard to guess only when their random bits
/// are.
///
/// Read ahead [`OsRandom::READ_AHEAD`] bytes at a time: one `getrandom`
/// per 256 session ids instead of one per id (a profile of the control
/// workload showed the system call on every decision). The bytes handed
/// out are the kernel's, unchanged, each handed out once.
#[derive(Clone)]
pub struct OsRandom {
    rng: SystemRandom,
    ahead: Box<[u8; Self::READ_AHEAD]>,
    /// Bytes of `ahead` already handed out (from the front).
    used: usize,
}

impl std::fmt::Debug for OsRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OsRandom(..)")
    }
}

impl OsRandom {
    /// Bytes read from the kernel at once.
    pub const READ_AHEAD: usize = 4096;

    /// The system generator.
    pub fn new() -> Self {
        OsRandom {
            rng: SystemRandom::new(),
            ahead: Box::new([0; Self::READ_AHEAD]),
            used: Self::READ_AHEAD,
        }
    }
}

impl Default for OsRandom {
    fn default() -> Self {
        Self::new()
    }
}

impl RandomSource for OsRandom {
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        // `getrandom` fails only before the kernel's pool is seeded or under
        // a broken seccomp profile; ids from a failed generator would be
        // guessable, so no session may be created: stop, as the gateway does.
        let failed = || panic!("the system random generator failed");
        if dest.len() > Self::READ_AHEAD / 4 {
            if self.rng.fill(dest).is_err() {
                failed();
            }
            return;
        }
        if Self::READ_AHEAD - self.used < dest.len() {
            if self.rng.fill(&mut self.ahead[..]).is_err() {
                failed();
            }
            self.used = 0;
        }
        let taken = &mut self.ahead[self.used..self.used + dest.len()];
        dest.copy_from_slice(taken);
        // Handed out once: what stays behind is not what was given.
        taken.fill(0);
        self.used += dest.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draws across several read-aheads (and one larger than a quarter of
    /// it, read straight from the kernel) are never zero and never repeat.
    #[test]
    fn read_ahead_hands_out_each_byte_once() {
        let mut rng = OsRandom::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 * OsRandom::READ_AHEAD / 16 {
            let mut id = [0u8; 16];
            rng.fill_bytes(&mut id);
            assert_ne!(id, [0; 16]);
            assert!(seen.insert(id), "an id came twice");
        }
        let mut big = vec![0u8; OsRandom::READ_AHEAD];
        rng.fill_bytes(&mut big);
        assert!(big.chunks(16).all(|c| c != [0; 16]));
    }
}
