//! Time and randomness, both passed in: the terminal never reads a clock and
//! never draws from a global random source (DESIGN.md §1 "Sans-IO").

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A point in time: milliseconds since the Unix epoch, given by the driver
/// on every input. Wall time, not a monotonic instant, because credentials
/// (SPEC TS-16) and UUID v7 session ids (SPEC TS-6) are defined on it.
/// Arithmetic saturates, so a clock that steps back never panics.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct UnixMs(pub u64);

impl UnixMs {
    /// Whole seconds since the epoch (what credentials are dated in).
    pub fn secs(self) -> u64 {
        self.0 / 1000
    }

    /// This time plus `ms` milliseconds (saturating).
    #[must_use]
    pub fn plus(self, ms: u64) -> UnixMs {
        UnixMs(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self` (0 if `earlier` is later).
    pub fn since(self, earlier: UnixMs) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// Where the terminal's randomness comes from (SPEC TS-6: the random bits of
/// a UUID v7 session id; DESIGN.md §3: UUID v4 handover ids).
///
/// The driver supplies it: an operating-system CSPRNG in production, a
/// seeded generator in tests and simulations.
pub trait RandomSource {
    /// Fills `dest` with random bytes.
    fn fill_bytes(&mut self, dest: &mut [u8]);
}

/// A deterministic generator (SplitMix64) for tests and replayable
/// simulations. Not cryptographic: production drivers pass an OS-seeded
/// CSPRNG instead, because session ids are hard to guess only when their
/// random bits are.
#[derive(Clone, Debug)]
pub struct SeededRandom {
    state: u64,
}

impl SeededRandom {
    /// A generator whose whole output follows from `seed`.
    pub fn new(seed: u64) -> Self {
        SeededRandom { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl RandomSource for SeededRandom {
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// SPEC TS-6: a session id, UUID v7 from `now` and 74 bits of `random`.
pub(crate) fn session_id(now: UnixMs, random: &mut dyn RandomSource) -> Uuid {
    let mut bits = [0u8; 10];
    random.fill_bytes(&mut bits);
    uuid::Builder::from_unix_timestamp_millis(now.0, &bits).into_uuid()
}

/// DESIGN.md §3: a handover id, UUID v4 from 122 bits of `random`.
pub(crate) fn handover_id(random: &mut dyn RandomSource) -> Uuid {
    let mut bits = [0u8; 16];
    random.fill_bytes(&mut bits);
    uuid::Builder::from_random_bytes(bits).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_v7_and_carry_the_time() {
        let mut r = SeededRandom::new(1);
        let id = session_id(UnixMs(1_700_000_000_123), &mut r);
        assert_eq!(id.get_version_num(), 7);
        let (secs, nanos) = id.get_timestamp().map(|t| t.to_unix()).unwrap_or_default();
        assert_eq!(
            secs * 1000 + u64::from(nanos) / 1_000_000,
            1_700_000_000_123
        );
    }

    #[test]
    fn handover_ids_are_v4_and_differ() {
        let mut r = SeededRandom::new(1);
        let a = handover_id(&mut r);
        let b = handover_id(&mut r);
        assert_eq!(a.get_version_num(), 4);
        assert_ne!(a, b);
    }

    #[test]
    fn seeded_random_is_deterministic_and_fills_odd_lengths() {
        let (mut a, mut b) = (SeededRandom::new(9), SeededRandom::new(9));
        let (mut x, mut y) = ([0u8; 13], [0u8; 13]);
        a.fill_bytes(&mut x);
        b.fill_bytes(&mut y);
        assert_eq!(x, y);
        assert_ne!(x, [0u8; 13]);
    }

    #[test]
    fn time_arithmetic_saturates() {
        assert_eq!(UnixMs(u64::MAX).plus(5), UnixMs(u64::MAX));
        assert_eq!(UnixMs(3).since(UnixMs(10)), 0);
        assert_eq!(UnixMs(12_999).secs(), 12);
    }
}
