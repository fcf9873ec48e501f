//! Stream epochs (SPEC RT-2, RT-6).

use std::fmt;

/// Length of an epoch's text: 16 lowercase hex digits (64 random bits).
pub(crate) const EPOCH_LEN: usize = 16;

/// A stream epoch (SPEC RT-6): an opaque label that changes whenever the
/// ledger cannot prove continuity with what it published before (a restart
/// without persistence, an operator's reset). Sequences restart at 1 in
/// every epoch, so a position means nothing without its epoch.
///
/// Made only from a random `u64` the caller draws (the crate reads no
/// randomness): 16 lowercase hex digits, header-safe and free of the `.`
/// that separates cursor fields. Two epochs of one stream collide with
/// probability 2⁻⁶⁴ per change; callers must draw from a CSPRNG, never
/// from a counter or a clock that could repeat after a restart.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Epoch(String);

impl Epoch {
    /// The epoch whose text is `random` in 16 lowercase hex digits.
    pub fn from_random(random: u64) -> Self {
        Self(format!("{random:016x}"))
    }

    /// The epoch's wire text (the envelope's `streamEpoch`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `s` has the shape of an epoch this crate makes.
    pub(crate) fn is_well_formed(s: &str) -> bool {
        s.len() == EPOCH_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_is_sixteen_lowercase_hex_digits() {
        assert_eq!(Epoch::from_random(0).as_str(), "0000000000000000");
        assert_eq!(Epoch::from_random(0xDEAD_BEEF).as_str(), "00000000deadbeef");
        assert_eq!(Epoch::from_random(u64::MAX).to_string(), "ffffffffffffffff");
        assert!(Epoch::is_well_formed("00000000deadbeef"));
        assert!(!Epoch::is_well_formed("00000000DEADBEEF"));
        assert!(!Epoch::is_well_formed("deadbeef"));
        assert!(!Epoch::is_well_formed("00000000deadbeef0"));
    }
}
