//! The plane's worker threads: everything that can wait runs here, never on
//! the control thread (DESIGN §3). One [`Pool`] shape serves both kinds:
//!
//! - [`ModelPool`] (SPEC HO-3b): a model call is blocking HTTP
//!   ([`run_model_call`]); at most `workers` calls in flight (the job queue
//!   holds no more); a call beyond is refused at once and the plane treats
//!   the model as unavailable (the priority-script fallback decides).
//! - the OS access pool (module `os_workers`, SPEC TS-4).
//!
//! Each result goes back over a channel, then the worker wakes the control
//! thread. Dropping a pool closes its job queue: idle workers end at once, a
//! busy one after its job (which its own timeout bounds).

use std::io;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

use dtp_policy::ModelCall;
use dtp_policy::ai::http::{HttpError, HttpResponse};
use uuid::Uuid;

use super::WakerSlot;
use super::model_http::run_model_call;

/// A bounded pool of worker threads running jobs `J` into results `D`.
pub(crate) struct Pool<J, D> {
    jobs: SyncSender<J>,
    done: Receiver<D>,
    in_flight: usize,
    capacity: usize,
}

impl<J: Send + 'static, D: Send + 'static> Pool<J, D> {
    /// Starts `workers` threads (at least one) named `name-<i>`, each with
    /// its own state from `state(i)`, running `run`; at most `capacity`
    /// jobs (at least `workers`) queued or running.
    pub(crate) fn start<S, F>(
        name: &str,
        workers: usize,
        capacity: usize,
        waker: Arc<WakerSlot>,
        mut state: impl FnMut(usize) -> S,
        run: F,
    ) -> io::Result<Self>
    where
        S: Send + 'static,
        F: Fn(&mut S, J) -> D + Clone + Send + 'static,
    {
        let workers = workers.max(1);
        let capacity = capacity.max(workers);
        let (jobs, queue) = mpsc::sync_channel::<J>(capacity);
        let queue = Arc::new(Mutex::new(queue));
        let (results, done) = mpsc::channel();
        for i in 0..workers {
            let (queue, results, waker) = (queue.clone(), results.clone(), waker.clone());
            let (mut s, run) = (state(i), run.clone());
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(&queue, &results, &waker, |j| run(&mut s, j)))?;
        }
        Ok(Pool {
            jobs,
            done,
            in_flight: 0,
            capacity,
        })
    }

    /// Queues a job; false when the pool is full.
    pub(crate) fn submit(&mut self, job: J) -> bool {
        if self.in_flight >= self.capacity {
            return false;
        }
        match self.jobs.try_send(job) {
            Ok(()) => {
                self.in_flight += 1;
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// The results since the last look.
    pub(crate) fn finished(&mut self) -> Vec<D> {
        let done: Vec<D> = self.done.try_iter().collect();
        self.in_flight = self.in_flight.saturating_sub(done.len());
        done
    }
}

/// A worker: takes jobs until the pool is dropped.
fn work<J, D>(
    queue: &Mutex<Receiver<J>>,
    results: &Sender<D>,
    waker: &WakerSlot,
    mut run: impl FnMut(J) -> D,
) {
    loop {
        // One idle worker waits in `recv` holding the lock, the others wait
        // for the lock; a poisoned lock still guards a sound receiver.
        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = job else {
            return;
        };
        if results.send(run(job)).is_err() {
            return;
        }
        waker.wake();
    }
}

/// One model call to run.
struct Job {
    handover_id: Uuid,
    call: ModelCall,
}

/// One call's outcome.
pub(crate) struct Done {
    /// The handover it decides.
    pub(crate) handover_id: Uuid,
    /// What [`run_model_call`] returned.
    pub(crate) result: Result<HttpResponse, HttpError>,
}

/// SPEC HO-3b: the model calls' pool.
pub(crate) struct ModelPool(Pool<Job, Done>);

impl ModelPool {
    /// Starts `workers` threads (at least one), which wake the control
    /// thread through `waker` after each call.
    pub(crate) fn start(workers: usize, waker: Arc<WakerSlot>) -> io::Result<Self> {
        let run = |_: &mut (), job: Job| Done {
            handover_id: job.handover_id,
            result: run_model_call(&job.call),
        };
        Pool::start("dtp-model", workers, workers, waker, |_| (), run).map(ModelPool)
    }

    /// Starts a call; false when every worker is busy.
    pub(crate) fn submit(&mut self, handover_id: Uuid, call: &ModelCall) -> bool {
        let call = call.clone();
        self.0.submit(Job { handover_id, call })
    }

    /// The calls finished since the last look.
    pub(crate) fn finished(&mut self) -> Vec<Done> {
        self.0.finished()
    }
}
