//! Where a shard's time comes from (DESIGN.md §2, "Time is passed in"):
//! the system's monotonic clock, or a clock a test moves by hand, so that a
//! whole gateway runs in virtual time.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A shard's clock: read once per turn of its loop, the same instant for
/// every callback of that turn ([`Outbox::now`](crate::Outbox::now)).
pub trait Clock {
    /// The time now.
    fn now(&self) -> Instant;

    /// Whether this is the system's clock: a shard on it may sleep in its
    /// transport's poll until a deadline; on any other it never sleeps
    /// (virtual time passes only when the test moves it).
    fn is_real(&self) -> bool {
        false
    }
}

/// The system's monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn is_real(&self) -> bool {
        true
    }
}

/// A clock that stands still until it is moved: clones share one time, so
/// a test keeps one and hands the others to its shards.
#[derive(Clone, Debug)]
pub struct ManualClock(Rc<Cell<Instant>>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Instant) -> Self {
        Self(Rc::new(Cell::new(start)))
    }

    /// Moves the time on by `by`.
    pub fn advance(&self, by: Duration) {
        self.0.set(self.0.get() + by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.0.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_its_clones_follow() {
        let start = Instant::now();
        let clock = ManualClock::new(start);
        let shard_side = clock.clone();
        assert_eq!(shard_side.now(), start);
        clock.advance(Duration::from_secs(3));
        assert_eq!(shard_side.now(), start + Duration::from_secs(3));
        assert!(!shard_side.is_real());
        assert!(SystemClock.is_real());
    }
}
