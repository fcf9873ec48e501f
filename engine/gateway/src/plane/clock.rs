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
#[derive(Clone, Debug)]
pub struct OsRandom(SystemRandom);

impl OsRandom {
    /// The system generator.
    pub fn new() -> Self {
        OsRandom(SystemRandom::new())
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
        if self.0.fill(dest).is_err() {
            panic!("the system random generator failed");
        }
    }
}
