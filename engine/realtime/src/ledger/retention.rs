//! Replay retention: how much history a ledger keeps (SPEC RT-6).

use std::time::Duration;

/// How much published history a ledger retains for cursor resumes
/// (SPEC RT-6 "documented replay retention").
///
/// An event stays replayable until the first of: more than `max_events`
/// newer-or-equal events are retained, the retained encoded bytes would
/// exceed `max_bytes`, or it is older than `max_age` (measured from its
/// append). Eviction always takes the oldest first, so the retained events
/// are always a contiguous suffix of the epoch. A cursor pointing before that
/// suffix is refused as expired, so the cursor expiry time is at most
/// `max_age` and shorter under load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Most events retained (default 10,000).
    pub max_events: usize,
    /// Most encoded bytes retained, by [`LedgerItem::byte_len`](super::LedgerItem::byte_len)
    /// (default 16 MiB).
    pub max_bytes: usize,
    /// Oldest event age retained (default 10 minutes).
    pub max_age: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_events: 10_000,
            max_bytes: 16 * 1024 * 1024,
            max_age: Duration::from_secs(10 * 60),
        }
    }
}

impl Retention {
    /// The largest retention a deployment may configure: 1,000,000 events,
    /// 1 GiB, 24 hours. Anything larger is a configuration mistake, not a
    /// replay policy.
    pub const CEILING: Self = Self {
        max_events: 1_000_000,
        max_bytes: 1024 * 1024 * 1024,
        max_age: Duration::from_secs(24 * 60 * 60),
    };

    /// Refuses a zero or above-[`CEILING`](Self::CEILING) bound: retention is
    /// always bounded and never empty by configuration.
    pub fn validate(&self) -> Result<(), RetentionError> {
        let c = Self::CEILING;
        let checks = [
            (
                RetentionField::MaxEvents,
                self.max_events == 0,
                self.max_events > c.max_events,
            ),
            (
                RetentionField::MaxBytes,
                self.max_bytes == 0,
                self.max_bytes > c.max_bytes,
            ),
            (
                RetentionField::MaxAge,
                self.max_age.is_zero(),
                self.max_age > c.max_age,
            ),
        ];
        for (field, zero, above) in checks {
            if zero {
                return Err(RetentionError::Zero(field));
            }
            if above {
                return Err(RetentionError::AboveCeiling(field));
            }
        }
        Ok(())
    }
}

/// A retention bound, named in [`RetentionError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionField {
    /// [`Retention::max_events`].
    MaxEvents,
    /// [`Retention::max_bytes`].
    MaxBytes,
    /// [`Retention::max_age`].
    MaxAge,
}

/// A refused [`Retention`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RetentionError {
    /// The bound is zero: the stream could never replay anything.
    #[error("retention {0:?} is zero; set a positive bound")]
    Zero(RetentionField),
    /// The bound exceeds [`Retention::CEILING`].
    #[error("retention {0:?} exceeds the ceiling (Retention::CEILING); lower it")]
    AboveCeiling(RetentionField),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_bounded_and_valid() {
        let r = Retention::default();
        assert_eq!(r.max_events, 10_000);
        assert_eq!(r.max_bytes, 16_777_216);
        assert_eq!(r.max_age, Duration::from_secs(600));
        assert_eq!(r.validate(), Ok(()));
        assert_eq!(Retention::CEILING.validate(), Ok(()));
    }

    #[test]
    fn zero_and_absurd_bounds_are_refused() {
        let ok = Retention::default();
        let cases = [
            (
                Retention {
                    max_events: 0,
                    ..ok
                },
                RetentionError::Zero(RetentionField::MaxEvents),
            ),
            (
                Retention { max_bytes: 0, ..ok },
                RetentionError::Zero(RetentionField::MaxBytes),
            ),
            (
                Retention {
                    max_age: Duration::ZERO,
                    ..ok
                },
                RetentionError::Zero(RetentionField::MaxAge),
            ),
            (
                Retention {
                    max_events: 1_000_001,
                    ..ok
                },
                RetentionError::AboveCeiling(RetentionField::MaxEvents),
            ),
            (
                Retention {
                    max_bytes: usize::MAX,
                    ..ok
                },
                RetentionError::AboveCeiling(RetentionField::MaxBytes),
            ),
            (
                Retention {
                    max_age: Duration::from_secs(86_401),
                    ..ok
                },
                RetentionError::AboveCeiling(RetentionField::MaxAge),
            ),
        ];
        for (r, want) in cases {
            assert_eq!(r.validate(), Err(want), "{r:?}");
        }
    }
}
