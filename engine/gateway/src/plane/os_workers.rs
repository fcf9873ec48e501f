//! SPEC TS-4, DESIGN §3: the OS access operations' worker threads. A
//! deferred [`OsAccess`] (a [`super::CommandAccess`] runs a process and
//! waits for it) never runs on the control thread: the terminal asks for
//! each grant or revoke ([`dtp_terminal::Output::OsAccess`]), a worker runs
//! it on its own copy of the access control, and the answer comes back over
//! a channel, with a wake-up, as [`dtp_terminal::Terminal::os_access_done`].
//!
//! Bounded: `workers` threads and [`OS_QUEUE`] operations queued behind
//! them (the terminal has at most one outstanding per session, so this is
//! room for a burst of sessions, not an open door); an operation beyond is
//! answered at once as failed (it changed nothing), so the terminal rolls
//! its step back. Dropping the pool closes the job
//! queue: idle workers end at once, a busy one after its operation (which
//! the command's own timeout bounds).

use std::io;
use std::sync::Arc;

use dtp_terminal::{AccessGrant, OsAccess, OsError, OsOpId, OsOperation};

use super::WakerSlot;
use super::workers::Pool;

/// SPEC TS-4: OS operations waiting for a free worker at most.
pub const OS_QUEUE: usize = 256;

/// One operation to run.
struct Job {
    op: OsOpId,
    operation: OsOperation,
    grant: AccessGrant,
    /// A release's handover target.
    to: Option<Arc<str>>,
}

/// One operation's answer.
pub(crate) struct Done {
    /// The terminal's id for it.
    pub(crate) op: OsOpId,
    /// What the access control said, with a successful grant's fencing
    /// token when it issues one ([`OsAccess::fencing`]).
    pub(crate) result: Result<Option<u64>, OsError>,
}

/// The pool.
pub(crate) struct OsPool(Pool<Job, Done>);

impl OsPool {
    /// Starts `workers` threads (at least one), each with its own copy of
    /// `access`, which wake the control thread through `waker` after each
    /// operation; [`OS_QUEUE`] operations may wait behind them.
    pub(crate) fn start<A>(workers: usize, access: &A, waker: Arc<WakerSlot>) -> io::Result<Self>
    where
        A: OsAccess + Clone + Send + 'static,
    {
        let workers = workers.max(1);
        let run = |access: &mut A, job: Job| Done {
            op: job.op,
            result: job
                .operation
                .run(access, &job.grant, job.to.as_deref())
                .map(|()| access.fencing()),
        };
        let state = |_| access.clone();
        Pool::start("dtp-os", workers, workers + OS_QUEUE, waker, state, run).map(OsPool)
    }

    /// Queues an operation; `false` when the pool is full (the caller
    /// answers it as failed).
    pub(crate) fn submit(
        &mut self,
        op: OsOpId,
        operation: OsOperation,
        grant: AccessGrant,
        to: Option<Arc<str>>,
    ) -> bool {
        self.0.submit(Job {
            op,
            operation,
            grant,
            to,
        })
    }

    /// The operations answered since the last look.
    pub(crate) fn finished(&mut self) -> Vec<Done> {
        self.0.finished()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::sync::{Mutex, PoisonError};
    use std::time::{Duration, Instant};

    use dtp_codec::{AccessMode, SessionId};

    use super::*;

    /// Blocks every operation until the test opens the gate.
    #[derive(Clone)]
    struct Gate(Arc<Mutex<()>>);

    impl OsAccess for Gate {
        fn grant(&mut self, _: &AccessGrant) -> Result<(), OsError> {
            drop(self.0.lock().unwrap_or_else(PoisonError::into_inner));
            Ok(())
        }

        fn revoke(&mut self, _: &AccessGrant) -> Result<(), OsError> {
            Err(OsError::Failed("no".into()))
        }

        fn deferred(&self) -> bool {
            true
        }
    }

    fn grant() -> AccessGrant {
        AccessGrant {
            session_id: SessionId::from_u128(1),
            resource_id: "r".into(),
            access_mode: AccessMode::Write,
            holder: "f".into(),
        }
    }

    #[test]
    fn operations_run_off_the_caller_and_the_queue_is_bounded() {
        let gate = Gate(Arc::new(Mutex::new(())));
        let closed = gate.0.lock().unwrap();
        let mut pool = OsPool::start(1, &gate, Arc::new(WakerSlot::default())).unwrap();
        // One running and OS_QUEUE queued fit; the next is refused at once
        // instead of waiting.
        assert!(pool.submit(OsOpId(1), OsOperation::Grant, grant(), None));
        assert!(pool.submit(OsOpId(2), OsOperation::Revoke, grant(), None));
        for n in 3..=1 + OS_QUEUE as u64 {
            assert!(pool.submit(OsOpId(n), OsOperation::Grant, grant(), None));
        }
        assert!(!pool.submit(OsOpId(9_999), OsOperation::Grant, grant(), None));
        assert!(pool.finished().is_empty());
        drop(closed);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut done = Vec::new();
        while done.len() < 1 + OS_QUEUE && Instant::now() < deadline {
            done.extend(pool.finished());
            std::thread::yield_now();
        }
        let answers: Vec<(OsOpId, bool)> = done
            .iter()
            .take(2)
            .map(|d| (d.op, d.result.is_ok()))
            .collect();
        assert_eq!(answers, [(OsOpId(1), true), (OsOpId(2), false)]);
        assert_eq!(done.len(), 1 + OS_QUEUE);
        // Room again.
        assert!(pool.submit(OsOpId(4), OsOperation::Revoke, grant(), None));
    }
}
