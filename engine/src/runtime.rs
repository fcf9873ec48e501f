//! Starting and stopping a set of core shards.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use dtp_codec::Limits;
use dtp_transports::{BackendChoice, Driver, DriverConfig, Waker};

use crate::service::Service;
use crate::shard::Shard;

/// How to run the engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Core shards (threads); 0 means one per available core.
    pub shards: usize,
    /// Pin shard `i` to CPU `i`.
    pub pin: bool,
    /// Addresses every shard listens on (SO_REUSEPORT spreads connections).
    pub listen: Vec<SocketAddr>,
    /// Each shard's IO driver.
    pub driver: DriverConfig,
    /// Frame ceilings.
    pub limits: Limits,
    /// How long a stopping shard waits for its connections to close.
    pub drain: Duration,
}

impl EngineConfig {
    /// Checks the settings against each other; the error names the field.
    ///
    /// A connection must be able to queue two of the largest frames: the
    /// shard stops reading a connection whose queue is half full, and the
    /// frame being answered then must still fit.
    pub fn validate(&self) -> Result<(), String> {
        self.driver.validate()?;
        self.limits.validate()?;
        let frame = self.limits.max_frame_len as usize + dtp_codec::HEADER_LEN;
        if self.driver.max_send_queue < 2 * frame {
            return Err(format!(
                "max_send_queue {} must hold two frames of max_frame_len {} plus headers ({} bytes)",
                self.driver.max_send_queue,
                self.limits.max_frame_len,
                2 * frame
            ));
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            shards: 0,
            pin: true,
            listen: Vec::new(),
            driver: DriverConfig::default(),
            limits: Limits::default(),
            drain: Duration::from_secs(5),
        }
    }
}

/// Counters one shard publishes (relaxed atomics, written once per poll).
#[derive(Debug, Default)]
pub struct ShardMetrics {
    /// Connections open now.
    pub connections: AtomicU64,
    /// Connections opened (accepted or connected).
    pub opened: AtomicU64,
    /// Connections closed.
    pub closed: AtomicU64,
    /// Frames decoded.
    pub frames_in: AtomicU64,
    /// Bytes received.
    pub bytes_in: AtomicU64,
    /// Bytes sent.
    pub bytes_out: AtomicU64,
    /// Malformed frames (each closed its connection).
    pub decode_errors: AtomicU64,
    /// Times reading paused for backpressure.
    pub paused: AtomicU64,
    /// Driver polls (io_uring_enter / epoll_wait calls).
    pub polls: AtomicU64,
    /// Pool bytes in use now (whole chunks).
    pub pool_bytes_used: AtomicU64,
    /// Most pool bytes in use at once.
    pub pool_bytes_high_water: AtomicU64,
}

/// A plain copy of [`ShardMetrics`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardSnapshot {
    /// Connections open now.
    pub connections: u64,
    /// Connections opened.
    pub opened: u64,
    /// Connections closed.
    pub closed: u64,
    /// Frames decoded.
    pub frames_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Malformed frames.
    pub decode_errors: u64,
    /// Backpressure pauses.
    pub paused: u64,
    /// Driver polls.
    pub polls: u64,
    /// Pool bytes in use.
    pub pool_bytes_used: u64,
    /// Pool bytes high-water mark.
    pub pool_bytes_high_water: u64,
}

impl ShardMetrics {
    /// Reads every counter.
    pub fn snapshot(&self) -> ShardSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ShardSnapshot {
            connections: r(&self.connections),
            opened: r(&self.opened),
            closed: r(&self.closed),
            frames_in: r(&self.frames_in),
            bytes_in: r(&self.bytes_in),
            bytes_out: r(&self.bytes_out),
            decode_errors: r(&self.decode_errors),
            paused: r(&self.paused),
            polls: r(&self.polls),
            pool_bytes_used: r(&self.pool_bytes_used),
            pool_bytes_high_water: r(&self.pool_bytes_high_water),
        }
    }
}

/// The engine: a set of core shards.
pub struct Engine;

/// What a started shard reports back.
struct Started {
    waker: Waker,
    backend: BackendChoice,
    addrs: Vec<SocketAddr>,
}

/// A running engine.
pub struct EngineHandle {
    stop: Arc<AtomicBool>,
    wakers: Vec<Waker>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    addrs: Vec<SocketAddr>,
    metrics: Vec<Arc<ShardMetrics>>,
    backend: BackendChoice,
}

impl Engine {
    /// Starts `config.shards` shards, each running the service `factory`
    /// makes for it (on its own thread, so the service need not be `Send`).
    /// Returns once every shard listens.
    pub fn start<S, F>(config: EngineConfig, factory: F) -> io::Result<EngineHandle>
    where
        S: Service + 'static,
        F: Fn(usize) -> S + Send + Sync + 'static,
    {
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let n = if config.shards == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            config.shards
        };
        let factory = Arc::new(factory);
        let stop = Arc::new(AtomicBool::new(false));
        let mut handle = EngineHandle {
            stop: stop.clone(),
            wakers: Vec::new(),
            threads: Vec::new(),
            addrs: config.listen.clone(),
            metrics: Vec::new(),
            backend: BackendChoice {
                kind: dtp_transports::BackendKind::Epoll,
                reason: String::new(),
            },
        };
        for i in 0..n {
            // Shard 0 binds first, so a port 0 becomes a real port the others share.
            let mut cfg = config.clone();
            cfg.listen = handle.addrs.clone();
            let metrics = Arc::new(ShardMetrics::default());
            let (tx, rx) = mpsc::channel();
            let (f, s, m) = (factory.clone(), stop.clone(), metrics.clone());
            let thread = std::thread::Builder::new()
                .name(format!("dtp-shard-{i}"))
                .spawn(move || shard_main(i, cfg, f, s, m, tx))?;
            let started = match rx.recv() {
                Ok(Ok(started)) => started,
                Ok(Err(e)) => {
                    let _ = thread.join();
                    handle.stop();
                    return Err(e);
                }
                Err(_) => {
                    handle.stop();
                    return Err(io::Error::other(format!(
                        "shard {i} exited during start-up"
                    )));
                }
            };
            handle.addrs = started.addrs;
            handle.backend = started.backend;
            handle.wakers.push(started.waker);
            handle.threads.push(thread);
            handle.metrics.push(metrics);
        }
        Ok(handle)
    }
}

fn shard_main<S, F>(
    index: usize,
    config: EngineConfig,
    factory: Arc<F>,
    stop: Arc<AtomicBool>,
    metrics: Arc<ShardMetrics>,
    started: mpsc::Sender<io::Result<Started>>,
) -> io::Result<()>
where
    S: Service + 'static,
    F: Fn(usize) -> S,
{
    let setup = || -> io::Result<(Shard<S>, Started)> {
        if config.pin {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            if let Err(e) = dtp_transports::pin_current_thread(index % cores) {
                tracing::warn!(shard = index, error = %e, "could not pin the shard to its core");
            }
        }
        let driver = Driver::new(config.driver.clone())?;
        let mut shard = Shard::new(
            driver,
            factory(index),
            config.limits,
            config.driver.max_send_queue,
            metrics,
        );
        let mut addrs = Vec::new();
        for addr in &config.listen {
            addrs.push(shard.driver().listen(*addr, true)?.1);
        }
        let started = Started {
            waker: shard.driver().waker(),
            backend: shard.driver().backend().clone(),
            addrs,
        };
        Ok((shard, started))
    };
    match setup() {
        Ok((mut shard, info)) => {
            // The receiver waits for this message; if it is gone, start-up was abandoned.
            let _ = started.send(Ok(info));
            shard.run(&stop, config.drain)
        }
        Err(e) => {
            let msg = e.to_string();
            let _ = started.send(Err(e));
            Err(io::Error::other(msg))
        }
    }
}

impl EngineHandle {
    /// The addresses the shards listen on (ports resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The IO backend the shards use, and why.
    pub fn backend(&self) -> &BackendChoice {
        &self.backend
    }

    /// Shared handles on every shard's counters (for an exporter thread).
    pub fn metrics_handles(&self) -> Vec<Arc<ShardMetrics>> {
        self.metrics.clone()
    }

    /// Every shard's counters.
    pub fn metrics(&self) -> Vec<ShardSnapshot> {
        self.metrics.iter().map(|m| m.snapshot()).collect()
    }

    /// Asks every shard to stop: no new connections, queued bytes sent,
    /// connections closed (within the drain time).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        for w in &self.wakers {
            if let Err(e) = w.wake() {
                tracing::warn!(error = %e, "could not wake a shard; it stops at its next event");
            }
        }
    }

    /// A flag that stops the engine when set (e.g. from a signal handler
    /// thread); call [`EngineHandle::stop`] after setting it to wake shards.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Waits for every shard to finish; the first error wins.
    pub fn join(self) -> io::Result<()> {
        let mut result = Ok(());
        for t in self.threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a shard panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        result
    }
}
