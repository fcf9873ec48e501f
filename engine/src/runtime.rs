//! Starting and stopping a set of core shards.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use dtp_codec::Limits;
use dtp_transports::{
    BackendChoice, DriverConfig, Endpoint, QuicConfig, Sockets, Transport, Waker,
};

use crate::control::{self, ControlLink, ControlMetrics, ControlPlane, ShardLink};
use crate::service::Service;
use crate::shard::Shard;

/// The control thread's name (what `/proc/PID/task/*/comm` and profilers
/// show): `dtp bench` reads its CPU time by it.
pub const CONTROL_THREAD: &str = "dtp-control";

/// How to run the engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Core shards (threads); 0 means one per available core.
    pub shards: usize,
    /// Pin shard `i` to CPU `i`.
    pub pin: bool,
    /// Listeners every shard listens on, shared between the shards (TCP:
    /// SO_REUSEPORT spreads connections; Unix: one socket, accepted from by
    /// each), named for routing ([`Routed`](crate::Routed)).
    pub listen: Vec<Listener>,
    /// Each shard's IO driver (for [`Engine::start`]'s socket transports).
    pub driver: DriverConfig,
    /// Frame ceilings.
    pub limits: Limits,
    /// How long a stopping shard waits for its connections to close.
    pub drain: Duration,
    /// Slots of each control ring (one per direction per shard).
    pub control_ring: usize,
    /// QUIC for [`Engine::start`]'s socket transports (`quic:` listeners
    /// and targets); `None`: no QUIC, and a `quic:` endpoint is refused.
    /// Give an identity made once ([`dtp_transports::QuicIdentity::made_once`])
    /// so that every shard presents the same certificate.
    pub quic: Option<QuicConfig>,
}

impl EngineConfig {
    /// How many shards start: `shards`, or one per available core if 0.
    pub fn shard_count(&self) -> usize {
        if self.shards == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.shards
        }
    }

    /// Checks the settings against each other; the error names the field.
    ///
    /// A connection must be able to queue two of the largest frames: the
    /// shard stops reading a connection whose queue is half full, and the
    /// frame being answered then must still fit.
    pub fn validate(&self) -> Result<(), String> {
        self.driver.validate()?;
        self.limits.validate()?;
        if self.control_ring == 0 || self.control_ring > 1 << 20 {
            return Err(format!(
                "control_ring {} must be within 1 … 1048576",
                self.control_ring
            ));
        }
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
            control_ring: 1024,
            quic: None,
        }
    }
}

/// One listener of the engine: where, and the name services are routed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The name a [`Routed`](crate::Routed) pair routes by.
    pub name: String,
    /// Where it listens.
    pub at: Endpoint,
}

impl Listener {
    /// The name a listener has unless given another.
    pub const DEFAULT_NAME: &'static str = "main";

    /// A listener named `name` at `at`.
    pub fn new(name: &str, at: Endpoint) -> Self {
        Self {
            name: name.to_owned(),
            at,
        }
    }
}

impl From<Endpoint> for Listener {
    /// A listener of the default name.
    fn from(at: Endpoint) -> Self {
        Self::new(Self::DEFAULT_NAME, at)
    }
}

impl std::str::FromStr for Listener {
    type Err = dtp_transports::ParseEndpointError;

    /// An endpoint ([`Endpoint`]'s forms), named [`Listener::DEFAULT_NAME`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<Endpoint>().map(Self::from)
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
    /// SPEC MEM-3: the pool's reserved backing (used and free chunks; not RSS).
    pub pool_bytes_reserved: AtomicU64,
    /// SPEC MEM-3: the pool's metadata (handle, lease, ticket tables, …).
    pub pool_metadata_bytes: AtomicU64,
    /// SPEC MEM-3: valid data in the pool's buffers.
    pub pool_live_bytes: AtomicU64,
    /// Requests waiting for the control thread (ring + backlog).
    pub control_pending: AtomicU64,
    /// Sends refused because their connection held its share of send
    /// chunks while only the core's reserve was left (SPEC TRN-2).
    pub send_reserve_refusals: AtomicU64,
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
    /// The pool's reserved backing.
    pub pool_bytes_reserved: u64,
    /// The pool's metadata.
    pub pool_metadata_bytes: u64,
    /// Valid data in the pool's buffers.
    pub pool_live_bytes: u64,
    /// Requests waiting for the control thread (ring + backlog).
    pub control_pending: u64,
    /// Sends refused for the send chunks' reserve.
    pub send_reserve_refusals: u64,
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
            pool_bytes_reserved: r(&self.pool_bytes_reserved),
            pool_metadata_bytes: r(&self.pool_metadata_bytes),
            pool_live_bytes: r(&self.pool_live_bytes),
            control_pending: r(&self.control_pending),
            send_reserve_refusals: r(&self.send_reserve_refusals),
        }
    }
}

/// The engine: a set of core shards.
pub struct Engine;

/// What a started shard reports back.
struct Started {
    waker: Waker,
    backend: BackendChoice,
    addrs: Vec<Endpoint>,
}

/// A running engine.
pub struct EngineHandle {
    control: Option<(JoinHandle<()>, Arc<ControlMetrics>)>,
    stop: Arc<AtomicBool>,
    wakers: Vec<Waker>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    addrs: Vec<Endpoint>,
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
        Self::start_on(config, socket_transport, factory, None)
    }

    /// As [`Engine::start`], with a control thread running `plane`: every
    /// shard tells it when connections come and go and forwards it the
    /// control-plane messages they receive, and carries out its decisions.
    pub fn start_with_control<S, F>(
        config: EngineConfig,
        factory: F,
        plane: Box<dyn ControlPlane<S::Up, S::Down>>,
    ) -> io::Result<EngineHandle>
    where
        S: Service + 'static,
        F: Fn(usize) -> S + Send + Sync + 'static,
    {
        Self::start_on(config, socket_transport, factory, Some(plane))
    }

    /// As [`Engine::start`] (with a control thread when `plane` is given),
    /// on the transport `transport` makes for each shard: on the shard's own
    /// thread, from the engine's config and the shard's index, so the
    /// transport need not be `Send` (an in-memory one of a test, a fault
    /// injector around the socket transport).
    pub fn start_on<T, M, S, F>(
        config: EngineConfig,
        transport: M,
        factory: F,
        plane: Option<Box<dyn ControlPlane<S::Up, S::Down>>>,
    ) -> io::Result<EngineHandle>
    where
        T: Transport + 'static,
        M: Fn(&EngineConfig, usize) -> io::Result<T> + Send + Sync + 'static,
        S: Service + 'static,
        F: Fn(usize) -> S + Send + Sync + 'static,
    {
        let transport = Arc::new(transport);
        config
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let n = config.shard_count();
        let factory = Arc::new(factory);
        let stop = Arc::new(AtomicBool::new(false));
        // The control thread starts first (its handle is what shards unpark)
        // and waits for its ends of the rings until every shard is up.
        let (links_tx, links_rx) = mpsc::channel::<Vec<ControlLink<S::Up, S::Down>>>();
        let control = match plane {
            Some(plane) => {
                let metrics = Arc::new(ControlMetrics::default());
                let (m, s) = (metrics.clone(), stop.clone());
                let thread = std::thread::Builder::new()
                    .name(CONTROL_THREAD.to_owned())
                    .spawn(move || {
                        if let Ok(links) = links_rx.recv() {
                            control::run(plane, links, s, m);
                        }
                    })?;
                Some((thread, metrics))
            }
            None => None,
        };
        let control_thread = control.as_ref().map(|(t, _)| t.thread().clone());
        let mut control_links = Vec::new();
        let mut handle = EngineHandle {
            control,
            stop: stop.clone(),
            wakers: Vec::new(),
            threads: Vec::new(),
            addrs: config.listen.iter().map(|l| l.at.clone()).collect(),
            metrics: Vec::new(),
            backend: BackendChoice {
                kind: dtp_transports::BackendKind::Epoll,
                reason: String::new(),
            },
        };
        for i in 0..n {
            // Shard 0 binds first, so a port 0 becomes a real port the others share.
            let mut cfg = config.clone();
            for (l, bound) in cfg.listen.iter_mut().zip(&handle.addrs) {
                l.at = bound.clone();
            }
            let metrics = Arc::new(ShardMetrics::default());
            let (tx, rx) = mpsc::channel();
            let (f, s, m, t) = (
                factory.clone(),
                stop.clone(),
                metrics.clone(),
                transport.clone(),
            );
            let mut link = None;
            let mut far_end = None;
            if let Some(control) = &control_thread {
                let ring = |e: dtp_pool::RingError| io::Error::other(e.to_string());
                let (req_tx, req_rx) = dtp_pool::spsc(config.control_ring).map_err(ring)?;
                let (dec_tx, dec_rx) = dtp_pool::spsc(config.control_ring).map_err(ring)?;
                link = Some(ShardLink {
                    requests: req_tx,
                    decisions: dec_rx,
                    pushed: false,
                    control: crate::control::UnparkOnDrop(control.clone()),
                });
                far_end = Some((req_rx, dec_tx));
            }
            let thread = std::thread::Builder::new()
                .name(format!("dtp-shard-{i}"))
                .spawn(move || shard_main(i, cfg, &*t, f, s, m, link, tx))?;
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
            if let Some((requests, decisions)) = far_end {
                control_links.push(ControlLink {
                    requests,
                    decisions,
                    waker: Box::new(started.waker.clone()),
                    held: Default::default(),
                });
            }
            handle.wakers.push(started.waker);
            handle.threads.push(thread);
            handle.metrics.push(metrics);
        }
        if handle.control.is_some() {
            // The control thread was waiting for exactly this.
            let _ = links_tx.send(control_links);
        }
        Ok(handle)
    }
}

/// The socket transport of [`Engine::start`]: every scheme a core's
/// sockets speak ([`Sockets`]: TCP, Unix, WebSocket, and QUIC when
/// configured) on the configured backend.
fn socket_transport(config: &EngineConfig, _shard: usize) -> io::Result<Sockets> {
    dtp_transports::sockets(config.driver.clone(), config.quic.as_ref())
}

#[allow(
    clippy::too_many_arguments,
    reason = "a thread's entry: everything it owns"
)]
fn shard_main<T, M, S, F>(
    index: usize,
    config: EngineConfig,
    transport: &M,
    factory: Arc<F>,
    stop: Arc<AtomicBool>,
    metrics: Arc<ShardMetrics>,
    link: Option<ShardLink<S::Up, S::Down>>,
    started: mpsc::Sender<io::Result<Started>>,
) -> io::Result<()>
where
    T: Transport + 'static,
    M: Fn(&EngineConfig, usize) -> io::Result<T>,
    S: Service + 'static,
    F: Fn(usize) -> S,
{
    let drain = config.drain;
    let setup = move || -> io::Result<(Shard<T, S>, Started)> {
        if config.pin {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            if let Err(e) = dtp_transports::pin_current_thread(index % cores) {
                tracing::warn!(shard = index, error = %e, "could not pin the shard to its core");
            }
        }
        let driver = transport(&config, index)?;
        let mut shard = Shard::new(
            driver,
            factory(index),
            config.limits,
            config.driver.max_send_queue,
            metrics,
        );
        if let Some(link) = link {
            shard.set_control(link);
        }
        let mut addrs = Vec::new();
        for l in &config.listen {
            addrs.push(shard.listen(&l.at)?);
        }
        let started = Started {
            waker: shard.transport().waker(),
            backend: shard.transport().backend().clone(),
            addrs,
        };
        Ok((shard, started))
    };
    match setup() {
        Ok((mut shard, info)) => {
            // The receiver waits for this message; if it is gone, start-up was abandoned.
            let _ = started.send(Ok(info));
            shard.run(&stop, drain)
        }
        Err(e) => {
            let msg = e.to_string();
            let _ = started.send(Err(e));
            Err(io::Error::other(msg))
        }
    }
}

impl EngineHandle {
    /// The endpoints the shards listen on, in `EngineConfig::listen`
    /// order (ports resolved).
    pub fn local_addrs(&self) -> &[Endpoint] {
        &self.addrs
    }

    /// The TCP address of listener `i`, if it is a TCP one.
    pub fn tcp_addr(&self, i: usize) -> Option<SocketAddr> {
        self.addrs.get(i).and_then(Endpoint::tcp)
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

    /// The control thread's counters, if it runs.
    pub fn control_metrics(&self) -> Option<Arc<ControlMetrics>> {
        self.control.as_ref().map(|(_, m)| m.clone())
    }

    /// Waits for every shard (and the control thread) to finish; the first
    /// error wins.
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
        if let Some((thread, _)) = self.control {
            // Every shard is gone, so the control thread finds its rings
            // abandoned; wake it to notice.
            thread.thread().unpark();
            if thread.join().is_err() && result.is_ok() {
                result = Err(io::Error::other("the control thread panicked"));
            }
        }
        result
    }
}
