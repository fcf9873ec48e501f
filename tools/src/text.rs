//! Small helpers for the text people read: counts with their nouns.

use std::fmt;

/// `n` and its noun, singular for exactly one: `plural(1, "connection")`
/// shows `1 connection`, `plural(3, "connection")` `3 connections` (every
/// noun the tool counts takes an `s`).
pub(crate) fn plural(n: impl Count, noun: &str) -> Counted<'_> {
    Counted { n: n.count(), noun }
}

/// An unsigned count of any width (`usize` included, which `Into<u64>`
/// is not).
pub(crate) trait Count {
    /// The count.
    fn count(self) -> u64;
}

macro_rules! count_impl {
    ($($t:ty),*) => {$(
        impl Count for $t {
            fn count(self) -> u64 {
                u64::from(self)
            }
        }
    )*};
}

count_impl!(u8, u16, u32, u64);

impl Count for usize {
    fn count(self) -> u64 {
        // Lossless on every target this tool builds for (at most 64 bits).
        u64::try_from(self).unwrap_or(u64::MAX)
    }
}

/// A count with its noun, shown by [`fmt::Display`] (no allocation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted<'a> {
    n: u64,
    noun: &'a str,
}

impl fmt::Display for Counted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.n {
            1 => write!(f, "1 {}", self.noun),
            n => write!(f, "{n} {}s", self.noun),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plural;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(plural(1u32, "connection").to_string(), "1 connection");
        assert_eq!(plural(0u32, "connection").to_string(), "0 connections");
        assert_eq!(plural(2u64, "byte").to_string(), "2 bytes");
        assert_eq!(plural(1usize, "byte").to_string(), "1 byte");
    }
}
