//! The thread primitives the control thread's wake-up protocol uses.
//!
//! Owns nothing but names: under `--cfg loom` they are loom's model-checked
//! types, so the real control loop ([`crate::control`]) runs inside loom's
//! model (`control::loom_tests`); otherwise std's.

#[cfg(loom)]
pub(crate) use loom::thread::{Thread, park};
#[cfg(not(loom))]
pub(crate) use std::thread::{Thread, park};

/// Parks the current thread for at most `d` (a spurious early return is
/// allowed, as with std's). Loom has no timed park: there it only yields,
/// which is one of the behaviours a timed park may show.
pub(crate) fn park_timeout(d: std::time::Duration) {
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    std::thread::park_timeout(d);
}
