//! SPEC HO-3b: the model calls' worker threads. A model call is blocking
//! HTTP ([`run_model_call`]), so it never runs on the control
//! thread: a small fixed pool runs them and sends each result back over a
//! channel, then wakes the control thread.
//!
//! Bounded: `workers` threads, and at most that many calls in flight (the
//! job queue holds no more); a call beyond is refused at once and the plane
//! treats the model as unavailable (the priority-script fallback decides).
//! Dropping the pool closes the job queue: idle workers end at once, a busy
//! one after its call (which its own timeout bounds).

use std::io;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

use dtp_policy::ModelCall;
use dtp_policy::ai::http::{HttpError, HttpResponse};
use uuid::Uuid;

use super::WakerSlot;
use super::model_http::run_model_call;

/// One call to run.
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

/// The pool.
pub(crate) struct ModelPool {
    jobs: SyncSender<Job>,
    done: Receiver<Done>,
    in_flight: usize,
    workers: usize,
}

impl ModelPool {
    /// Starts `workers` threads (at least one), which wake the control
    /// thread through `waker` after each call.
    pub(crate) fn start(workers: usize, waker: Arc<WakerSlot>) -> io::Result<Self> {
        let workers = workers.max(1);
        let (jobs, queue) = mpsc::sync_channel::<Job>(workers);
        let queue = Arc::new(Mutex::new(queue));
        let (results, done) = mpsc::channel();
        for i in 0..workers {
            let (queue, results, waker) = (queue.clone(), results.clone(), waker.clone());
            std::thread::Builder::new()
                .name(format!("dtp-model-{i}"))
                .spawn(move || work(&queue, &results, &waker))?;
        }
        Ok(ModelPool {
            jobs,
            done,
            in_flight: 0,
            workers,
        })
    }

    /// Starts a call; false when every worker is busy.
    pub(crate) fn submit(&mut self, handover_id: Uuid, call: &ModelCall) -> bool {
        if self.in_flight >= self.workers {
            return false;
        }
        let call = call.clone();
        match self.jobs.try_send(Job { handover_id, call }) {
            Ok(()) => {
                self.in_flight += 1;
                true
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }

    /// The calls finished since the last look.
    pub(crate) fn finished(&mut self) -> Vec<Done> {
        let done: Vec<Done> = self.done.try_iter().collect();
        self.in_flight = self.in_flight.saturating_sub(done.len());
        done
    }
}

/// A worker: takes calls until the pool is dropped.
fn work(queue: &Mutex<Receiver<Job>>, results: &Sender<Done>, waker: &WakerSlot) {
    loop {
        // One idle worker waits in `recv` holding the lock, the others wait
        // for the lock; a poisoned lock still guards a sound receiver.
        let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(job) = job else {
            return;
        };
        let result = run_model_call(&job.call);
        let done = Done {
            handover_id: job.handover_id,
            result,
        };
        if results.send(done).is_err() {
            return;
        }
        waker.wake();
    }
}
