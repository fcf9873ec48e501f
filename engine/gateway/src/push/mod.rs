//! SPEC RT-12: the Web Push sender — the IO half of `dtp_realtime::push`.
//! Each notification to one subscription is encrypted (RFC 8291), signed
//! (RFC 8292, through a per-origin [`VapidCache`]) and POSTed to the push
//! service over HTTP/1.1 and TLS, on the sender's own worker threads: never
//! on the control thread or a shard (DESIGN §3). What the push service
//! answers drives the sans-IO [`Delivery`](dtp_realtime::push::Delivery):
//! 201/202 delivered, 404/410 gone, 429/5xx and connection failures retried
//! after `Retry-After` or a full-jitter backoff within the attempts and the
//! hint's lifetime, other 4xx failed.
//!
//! | call | who |
//! |---|---|
//! | [`PushSender::start`] | start-up: loads the trust store, starts the workers |
//! | [`PushSender::submit`] | the owner (a plane): one [`PushJob`]; refused when [`PushSenderConfig::max_in_flight`] are queued, sending or waiting to retry |
//! | `wake()` | a worker, after each finished job: the owner should look |
//! | [`PushSender::finished`] | the owner: the [`PushDone`]s since the last look; on [`Outcome::Gone`] it marks the registration gone |
//!
//! **Why our own HTTP/1.1 over a rustls stream, not a client crate.** The
//! endpoint is attacker-supplied, so the sender must check every address the
//! host resolves to ([`is_public_address`](dtp_realtime::push::is_public_address))
//! and connect to exactly the address it checked — a client crate that
//! resolves on its own reopens the hole between check and connect (DNS
//! rebinding); ureq can be given a resolver only through its unversioned
//! API. The request is one fixed shape (`write_request`), the answer's head
//! goes through the workspace's one response parser (`dtp_codec::http`), and
//! the body is not needed, so the client is small; rustls and ring are
//! already the workspace's TLS and crypto, so nothing new enters the
//! dependency tree but the system trust store reader.
//!
//! **Connections** are kept alive per push service origin, per worker: at
//! most [`PushSenderConfig::max_connections_per_origin`] idle ones, and at
//! most [`MAX_ORIGINS_PER_WORKER`] origins. A kept connection the server
//! closed meanwhile is replaced and the request sent again once, when no
//! byte of an answer came back.
//!
//! **Never logged**: endpoints, keys, tokens. Logs carry the registration
//! id and the closed outcome.

mod conn;
mod tls;
mod worker;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dtp_realtime::push::{
    Outcome, PrepareError, PushSubscription, RetryPolicy, SubscriptionId, Urgency, VapidCache,
    VapidError, VapidKey, WebPushHint,
};

pub use tls::trust_store;

/// Push service origins one worker keeps connections to at most.
pub const MAX_ORIGINS_PER_WORKER: usize = 64;

/// The sender's settings (`[realtime.push]` in `dtp serve`).
#[derive(Clone)]
pub struct PushSenderConfig {
    /// The VAPID signing key (RFC 8292).
    pub vapid: VapidKey,
    /// The VAPID `sub` contact: `mailto:` or `https:`.
    pub subject: String,
    /// PEM files of CAs trusted besides the system's roots (a private push
    /// service, the tests' local one).
    pub extra_roots: Vec<PathBuf>,
    /// Whether endpoints may resolve to loopback, private or link-local
    /// addresses (SSRF guard off). Default false.
    pub allow_private_endpoints: bool,
    /// Worker threads.
    pub workers: usize,
    /// Jobs accepted and not finished (queued, sending, waiting to retry)
    /// at most; [`PushSender::submit`] refuses beyond.
    pub max_in_flight: usize,
    /// Idle keep-alive connections per push service origin, per worker.
    pub max_connections_per_origin: usize,
    /// Attempts and backoff of each delivery.
    pub policy: RetryPolicy,
    /// Connect, TLS handshake, write and read, each at most this long.
    pub io_timeout: Duration,
}

impl PushSenderConfig {
    /// Defaults for everything but the key and the contact: 2 workers,
    /// 1,024 in flight, 4 connections per origin, [`RetryPolicy::default`],
    /// 10 s per IO step, the SSRF guard on.
    pub fn new(vapid: VapidKey, subject: &str) -> Self {
        Self {
            vapid,
            subject: subject.to_owned(),
            extra_roots: Vec::new(),
            allow_private_endpoints: false,
            workers: 2,
            max_in_flight: 1_024,
            max_connections_per_origin: 4,
            policy: RetryPolicy::default(),
            io_timeout: Duration::from_secs(10),
        }
    }
}

impl fmt::Debug for PushSenderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushSenderConfig")
            .field("vapid", &self.vapid)
            .field("extra_roots", &self.extra_roots)
            .field("allow_private_endpoints", &self.allow_private_endpoints)
            .field("workers", &self.workers)
            .field("max_in_flight", &self.max_in_flight)
            .field(
                "max_connections_per_origin",
                &self.max_connections_per_origin,
            )
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Why the sender did not start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The VAPID contact is not a `mailto:` or `https:` URI.
    #[error("push.subject: {0}")]
    Subject(VapidError),
    /// An `extra_roots` file could not be read or holds no certificate.
    #[error("push.extra_roots: {path}: {why}")]
    Roots {
        /// The file.
        path: String,
        /// What went wrong.
        why: String,
    },
    /// Neither the system nor `extra_roots` gave a trusted root.
    #[error("push: no trusted root certificate: the system has none; set extra_roots")]
    NoRoots,
    /// TLS refused the configuration.
    #[error("push: TLS: {0}")]
    Tls(String),
    /// A worker thread could not start.
    #[error("push: worker thread: {0}")]
    Spawn(#[from] std::io::Error),
}

/// One notification to one subscription.
pub struct PushJob {
    /// The caller's id for it, returned in [`PushDone::id`].
    pub id: u64,
    /// The registration it goes to.
    pub subscription_id: SubscriptionId,
    /// Its endpoint and keys.
    pub subscription: PushSubscription,
    /// The WEB_PUSH_HINT_V1 payload; its `expiresAt` bounds the retries.
    pub hint: WebPushHint,
    /// The `Urgency` header.
    pub urgency: Urgency,
    /// An optional `Topic` (1–32 base64url characters).
    pub topic: Option<String>,
}

impl fmt::Debug for PushJob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushJob")
            .field("id", &self.id)
            .field("subscription_id", &self.subscription_id)
            .field("hint", &self.hint)
            .finish_non_exhaustive()
    }
}

/// Why a job ended without a push service's verdict.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The hint, topic or keys were refused before anything was sent.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// The endpoint resolves to an address the SSRF guard refuses
    /// (loopback, private, link-local, …), or its host does not resolve to
    /// any address at all. Nothing was sent.
    #[error("endpoint refused: {0}")]
    Refused(&'static str),
    /// VAPID refused the endpoint's origin.
    #[error(transparent)]
    Vapid(#[from] VapidError),
    /// The system's random generator failed: no key or salt to encrypt
    /// with. Nothing was sent.
    #[error("the system random generator failed")]
    Random,
}

/// How one job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushDone {
    /// [`PushJob::id`].
    pub id: u64,
    /// [`PushJob::subscription_id`].
    pub subscription_id: SubscriptionId,
    /// Requests sent.
    pub attempts: u32,
    /// The delivery's outcome, or why none was reached.
    pub result: Result<Outcome, SendError>,
}

/// SPEC RT-12: the sender's handle (see the module doc).
pub struct PushSender {
    queues: Vec<SyncSender<PushJob>>,
    next: usize,
    done: Mutex<Receiver<PushDone>>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: usize,
}

impl PushSender {
    /// Loads the trust store, checks the contact and starts the workers;
    /// each calls `wake` after finishing a job.
    pub fn start(
        config: PushSenderConfig,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self, SetupError> {
        let tls = tls::client_config(&config.extra_roots)?;
        let workers = config.workers.max(1);
        let max_in_flight = config.max_in_flight.max(1);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (results, done) = mpsc::channel();
        let mut queues = Vec::with_capacity(workers);
        for i in 0..workers {
            // A worker moves its queue into its own list as it comes by, so
            // its share of the ceiling is room enough (the channel
            // allocates its slots up front).
            let (tx, rx) = mpsc::sync_channel(max_in_flight.div_ceil(workers));
            // One token cache per worker: no lock on the send path.
            let vapid = VapidCache::new(config.vapid.clone(), &config.subject)
                .map_err(SetupError::Subject)?;
            let w = worker::Worker::new(&config, tls.clone(), vapid, results.clone());
            let (in_flight, wake) = (in_flight.clone(), wake.clone());
            std::thread::Builder::new()
                .name(format!("dtp-push-{i}"))
                .spawn(move || w.run(&rx, &in_flight, &*wake))?;
            queues.push(tx);
        }
        Ok(Self {
            queues,
            next: 0,
            done: Mutex::new(done),
            in_flight,
            max_in_flight,
        })
    }

    /// Queues a job; gives it back when
    /// [`max_in_flight`](PushSenderConfig::max_in_flight) jobs are
    /// unfinished or the workers are gone.
    pub fn submit(&mut self, job: PushJob) -> Result<(), Box<PushJob>> {
        if self.in_flight.load(Ordering::Acquire) >= self.max_in_flight {
            return Err(Box::new(job));
        }
        // Round robin; a worker busy with a slow push service whose queue
        // is full passes its turn to the next.
        let n = self.queues.len();
        let mut job = job;
        for k in 0..n {
            let Some(queue) = self.queues.get((self.next + k) % n) else {
                break;
            };
            self.in_flight.fetch_add(1, Ordering::AcqRel);
            match queue.try_send(job) {
                Ok(()) => {
                    self.next = (self.next + k + 1) % n;
                    return Ok(());
                }
                Err(TrySendError::Full(back) | TrySendError::Disconnected(back)) => {
                    self.in_flight.fetch_sub(1, Ordering::AcqRel);
                    job = back;
                }
            }
        }
        Err(Box::new(job))
    }

    /// The jobs finished since the last look.
    pub fn finished(&self) -> Vec<PushDone> {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_iter()
            .collect()
    }

    /// Waits up to `timeout` for the next finished job (for owners that
    /// have nothing else to do, and tests).
    pub fn wait_finished(&self, timeout: Duration) -> Option<PushDone> {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv_timeout(timeout)
            .ok()
    }

    /// Jobs accepted and not yet finished.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.queues.len()
    }
}

impl fmt::Debug for PushSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushSender")
            .field("workers", &self.queues.len())
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}
