//! Waking one connection of a shard from another thread.
//!
//! **Owns**: a shard's [`Notifier`] — a short list of connections that some
//! other thread wants looked at, and the shard's driver waker. Another
//! thread (or another shard) calls [`Notifier::notify`]; the shard, at its
//! next turn, calls [`Service::notified`](crate::Service::notified) for each
//! connection named. **Never touches**: the connections themselves (only
//! their ids cross threads) or what the service does when notified.
//!
//! What it is for: an event on one core that a connection on another waits
//! for — a DTP session parked by the core that held it, which a resume
//! request on another core waits to take (SPEC SES-3) — without that
//! connection polling a shared table on a timer.
//!
//! The protocol: the notifier pushes the id under the list's lock, then
//! sets `pending` (Release), then wakes the driver (a wake-up the driver
//! keeps until its next poll). The shard swaps `pending` to false
//! (Acquire) and only then takes the list, once per turn; a turn that finds
//! `pending` false costs one relaxed load. An id pushed after the shard's
//! take sets `pending` again after the swap (the lock orders them), and its
//! wake-up ends the shard's next poll, so no notice waits for an unrelated
//! event. Model-checked by loom on this very code (`loom_tests` below).

#[cfg(not(loom))]
use std::sync::{
    Arc, Mutex, PoisonError,
    atomic::{AtomicBool, Ordering},
};

use dtp_transports::ConnId;
#[cfg(loom)]
use loom::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering},
};

use crate::control::WakeShard;

/// Wakes connections of one shard from any thread: hand a clone to
/// whatever will have news for them. Given to the shard's service once,
/// before the first turn ([`Service::attach`](crate::Service::attach)).
#[derive(Clone)]
pub struct Notifier {
    inner: Arc<Inner>,
}

struct Inner {
    /// Set after an id is pushed; cleared by the shard before it takes them.
    pending: AtomicBool,
    conns: Mutex<Vec<ConnId>>,
    wake: Box<dyn WakeShard + Sync>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").finish_non_exhaustive()
    }
}

#[cfg_attr(
    loom,
    allow(dead_code, reason = "the shard loop is not built under loom")
)]
impl Notifier {
    /// A notifier whose notices end the shard's poll through `wake`.
    pub(crate) fn new(wake: Box<dyn WakeShard + Sync>) -> Self {
        Self {
            inner: Arc::new(Inner {
                pending: AtomicBool::new(false),
                conns: Mutex::new(Vec::new()),
                wake,
            }),
        }
    }

    /// Has the shard call [`Service::notified`](crate::Service::notified)
    /// for `conn` at its next turn, waking it if it sleeps. A connection
    /// closed meanwhile is skipped; several notices may come as one call
    /// or as several.
    pub fn notify(&self, conn: ConnId) {
        lock(&self.inner.conns).push(conn);
        self.inner.pending.store(true, Ordering::Release);
        self.inner.wake.wake();
    }

    /// Moves the connections notified since the last call into `into`
    /// (the shard's side, once per turn).
    pub(crate) fn take(&self, into: &mut Vec<ConnId>) {
        if !self.inner.pending.load(Ordering::Relaxed) {
            return;
        }
        if self.inner.pending.swap(false, Ordering::Acquire) {
            into.append(&mut lock(&self.inner.conns));
        }
    }
}

#[cfg(not(loom))]
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock left a whole Vec: nothing half done.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(loom)]
fn lock<T>(m: &Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
    #[allow(clippy::unwrap_used, reason = "loom's model never poisons it")]
    m.lock().unwrap()
}

/// Loom model checks of [`Notifier`]: run with `CARGO_TARGET_DIR=target/loom
/// RUSTFLAGS="--cfg loom" cargo test -p dtp-engine --release --lib
/// notify::loom_tests`.
#[cfg(all(test, loom))]
mod loom_tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;
    use loom::sync::Notify;
    use loom::thread;

    /// The driver's waker: a wake-up is kept until the next poll takes it
    /// (an eventfd, an io_uring read on it, a mio waker).
    struct Kept(Arc<Notify>);

    impl WakeShard for Kept {
        fn wake(&self) {
            self.0.notify();
        }
    }

    /// Notifiers on `senders` threads each notify one connection; the
    /// shard turns (take, then sleep in its poll) until it has seen every
    /// one. A notice lost — taken by no turn while the shard sleeps for
    /// good — is a loom deadlock; a notice seen twice or never fails the
    /// count.
    fn model(senders: u64) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let poll = Arc::new(Notify::new());
            let notifier = Notifier::new(Box::new(Kept(poll.clone())));
            let threads: Vec<_> = (0..senders)
                .map(|i| {
                    let n = notifier.clone();
                    thread::spawn(move || n.notify(ConnId::from_u64(i)))
                })
                .collect();
            let mut seen = Vec::new();
            loop {
                notifier.take(&mut seen);
                if seen.len() as u64 == senders {
                    break;
                }
                poll.wait();
            }
            for t in threads {
                t.join().unwrap();
            }
            seen.sort_by_key(|c| c.as_u64());
            let ids: Vec<u64> = seen.iter().map(|c| c.as_u64()).collect();
            assert_eq!(ids, (0..senders).collect::<Vec<_>>());
        });
    }

    #[test]
    fn loom_one_notice_is_never_lost() {
        model(1);
    }

    #[test]
    fn loom_two_notices_from_two_threads_are_each_seen_once() {
        model(2);
    }
}
