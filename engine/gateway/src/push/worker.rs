//! One sender worker: takes jobs from its queue, encrypts each (the P-256
//! work stays off the control thread), drives each job's sans-IO
//! [`Delivery`] with the clock and random draws, and sleeps on its queue
//! until the next job or the earliest retry is due.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dtp_realtime::push::{
    Delivery, EphemeralKey, Outgoing, Poll, PushTarget, RetryPolicy, VapidCache, prepare,
    write_request,
};
use ring::rand::{SecureRandom, SystemRandom};
use rustls::ClientConfig;

use super::conn::{Connections, Failure};
use super::{PushDone, PushJob, PushSenderConfig, SendError};

/// A job being delivered.
struct Pending {
    id: u64,
    delivery: Delivery,
    target: PushTarget,
    /// Unix ms of its next step (0: now).
    due_ms: u64,
}

/// One worker's state: its connections, its token cache, its deliveries.
pub(super) struct Worker {
    conns: Connections,
    vapid: VapidCache,
    policy: RetryPolicy,
    results: Sender<PushDone>,
    rng: SystemRandom,
    pending: Vec<Pending>,
}

impl Worker {
    pub(super) fn new(
        config: &PushSenderConfig,
        tls: Arc<ClientConfig>,
        vapid: VapidCache,
        results: Sender<PushDone>,
    ) -> Self {
        Self {
            conns: Connections::new(
                tls,
                config.allow_private_endpoints,
                config.max_connections_per_origin.max(1),
                config.io_timeout,
            ),
            vapid,
            policy: config.policy,
            results,
            rng: SystemRandom::new(),
            pending: Vec::new(),
        }
    }

    /// Runs until the sender is dropped (its queue closes); deliveries
    /// still waiting to retry then are abandoned.
    pub(super) fn run(
        mut self,
        jobs: &Receiver<PushJob>,
        in_flight: &AtomicUsize,
        wake: &dyn Fn(),
    ) {
        loop {
            let next_due = self.pending.iter().map(|p| p.due_ms).min();
            let job = match next_due {
                None => match jobs.recv() {
                    Ok(job) => Some(job),
                    Err(_) => return,
                },
                Some(due) => {
                    let wait = Duration::from_millis(due.saturating_sub(now_ms()));
                    match jobs.recv_timeout(wait) {
                        Ok(job) => Some(job),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            };
            for job in job.into_iter().chain(jobs.try_iter()) {
                self.start(job, in_flight, wake);
            }
            self.drive(in_flight, wake);
        }
    }

    /// Encrypts the job's hint and queues its delivery.
    fn start(&mut self, job: PushJob, in_flight: &AtomicUsize, wake: &dyn Fn()) {
        let Some(target) = PushTarget::parse(job.subscription.endpoint()) else {
            let why = "the endpoint is not an https URL";
            return self.finish(&job, 0, Err(SendError::Refused(why)), in_flight, wake);
        };
        let mut salt = [0u8; 16];
        // A draw is not a valid scalar with probability ~2^-32: draw again,
        // a few times at most.
        let ephemeral = (0..8).find_map(|_| {
            let mut scalar = [0u8; 32];
            self.rng.fill(&mut scalar).ok()?;
            self.rng.fill(&mut salt).ok()?;
            EphemeralKey::from_bytes(&scalar).ok()
        });
        let Some(ephemeral) = ephemeral else {
            return self.finish(&job, 0, Err(SendError::Random), in_flight, wake);
        };
        let out = Outgoing {
            hint: &job.hint,
            subscription_id: job.subscription_id,
            subscription: &job.subscription,
            ephemeral: &ephemeral,
            salt,
            urgency: job.urgency,
            topic: job.topic.clone(),
            policy: self.policy,
        };
        match prepare(out, now_ms()) {
            Ok(delivery) => self.pending.push(Pending {
                id: job.id,
                delivery,
                target,
                due_ms: 0,
            }),
            Err(e) => self.finish(&job, 0, Err(SendError::Prepare(e)), in_flight, wake),
        }
    }

    /// Takes every due delivery as far as it goes now.
    fn drive(&mut self, in_flight: &AtomicUsize, wake: &dyn Fn()) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].due_ms > now_ms() {
                i += 1;
                continue;
            }
            match self.step(i) {
                Some(result) => {
                    let p = self.pending.swap_remove(i);
                    // A refused endpoint got no request: do not count it.
                    let refused = matches!(result, Err(SendError::Refused(_)));
                    let attempts = p.delivery.attempts().saturating_sub(u32::from(refused));
                    let done = PushDone {
                        id: p.id,
                        subscription_id: p.delivery.subscription(),
                        attempts,
                        result,
                    };
                    self.report(done, in_flight, wake);
                }
                None => i += 1,
            }
        }
    }

    /// Drives delivery `i` until it waits (`None`) or ends.
    fn step(&mut self, i: usize) -> Option<Result<dtp_realtime::push::Outcome, SendError>> {
        loop {
            let now = now_ms();
            let p = self.pending.get_mut(i)?;
            match p.delivery.poll(now) {
                Poll::Transmit(request) => {
                    let auth = match self.vapid.authorization(p.target.origin(), now / 1_000) {
                        Ok(auth) => auth,
                        Err(e) => return Some(Err(SendError::Vapid(e))),
                    };
                    let bytes = write_request(&request, &p.target, auth);
                    let answer = self.conns.exchange(&p.target, &bytes);
                    let random = self.random_u64();
                    let p = self.pending.get_mut(i)?;
                    match answer {
                        Ok(a) => {
                            p.delivery.on_response(
                                now_ms(),
                                a.status,
                                a.retry_after.as_deref(),
                                random,
                            );
                        }
                        Err(Failure::Refused(why)) => return Some(Err(SendError::Refused(why))),
                        Err(Failure::Transport) => p.delivery.on_transport_error(now_ms(), random),
                    }
                }
                Poll::Wait { until_ms } => {
                    p.due_ms = until_ms;
                    return None;
                }
                Poll::Done(outcome) => return Some(Ok(outcome)),
                // `poll` right after an answer never says this; wait a
                // moment rather than spin.
                Poll::AwaitingResponse => {
                    p.due_ms = now.saturating_add(1_000);
                    return None;
                }
            }
        }
    }

    fn finish(
        &self,
        job: &PushJob,
        attempts: u32,
        result: Result<dtp_realtime::push::Outcome, SendError>,
        in_flight: &AtomicUsize,
        wake: &dyn Fn(),
    ) {
        let done = PushDone {
            id: job.id,
            subscription_id: job.subscription_id,
            attempts,
            result,
        };
        self.report(done, in_flight, wake);
    }

    fn report(&self, done: PushDone, in_flight: &AtomicUsize, wake: &dyn Fn()) {
        match &done.result {
            Ok(outcome) => tracing::debug!(
                registration = done.subscription_id.get(),
                attempts = done.attempts,
                ?outcome,
                "push delivery ended"
            ),
            Err(e) => tracing::info!(
                registration = done.subscription_id.get(),
                attempts = done.attempts,
                error = %e,
                "push delivery not made"
            ),
        }
        in_flight.fetch_sub(1, Ordering::AcqRel);
        // The owner may be gone (shutting down): nothing to tell then.
        let _ = self.results.send(done);
        wake();
    }

    fn random_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        // A failed draw leaves zeros: the retry comes at once, still
        // within the attempt bound.
        let _ = self.rng.fill(&mut b);
        u64::from_le_bytes(b)
    }
}

/// Unix milliseconds (hint times are unix ms).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
