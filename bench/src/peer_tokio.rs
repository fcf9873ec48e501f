//! The peer server of `dtp bench`: the workload protocol on tokio (epoll),
//! written the way a tokio user would write it.
//!
//! A multi-thread runtime with one worker per core (configurable), a
//! `TcpListener` accept loop in `block_on` (what `#[tokio::main]` expands to),
//! one task per connection with `TCP_NODELAY` on, a `BytesMut` read buffer,
//! the codec's `FrameDecoder` and the shared [`Responder`], replies encoded
//! into one write buffer and written with one `write_all` per read batch.
//! Nothing is tuned beyond what a careful tokio user would do: no pinning, no
//! custom allocator, no socket options but `TCP_NODELAY`.
//!
//! The per-frame work is [`Responder::serve`], the same call our engine
//! makes, so the CPU-per-operation ratio of `dtp bench` measures the IO path
//! and the runtime, not two protocol implementations.
//!
//! Meant to run in a process of its own (the bench starts `dtp` with a
//! hidden subcommand that calls [`run_child`]) so the OS accounts its CPU
//! time apart from the load generator's; [`serve`] runs it on a background
//! thread of the calling process for tests.

use std::future::Future;
use std::io::{self, BufRead, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use bytes::BytesMut;
use dtp_codec::{Limits, peek_frame_len};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::workload::{Responder, WorkloadError};

/// The peer's name in the report.
pub const NAME: &str = "tokio";
/// Spare room the read buffer has before every read: 64 KiB, so a `stream`
/// read takes about four 16 KiB frames per syscall.
pub const READ_RESERVE: usize = 64 * 1024;
/// How long shutdown waits for connection tasks before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The peer's settings.
#[derive(Clone, Copy, Debug)]
pub struct PeerConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// Runtime worker threads (0: one per available core).
    pub workers: usize,
    /// Codec limits for decoding and encoding.
    pub limits: Limits,
}

impl PeerConfig {
    /// Listen on `listen` with `workers` worker threads (0: one per core)
    /// and the default codec limits.
    pub fn new(listen: SocketAddr, workers: usize) -> Self {
        Self {
            listen,
            workers,
            limits: Limits::default(),
        }
    }

    /// The number of worker threads the runtime gets.
    pub fn worker_threads(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// Counters the peer keeps per connection event (never per frame, so they
/// cost nothing measurable).
#[derive(Debug, Default)]
pub struct PeerStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections that ended (for any reason).
    pub closed: AtomicU64,
    /// Connections closed because of a protocol or IO error.
    pub errors: AtomicU64,
    /// Frames handled by connections that have ended.
    pub frames: AtomicU64,
}

impl PeerStats {
    /// A connection ended with `outcome`: the frames it handled, or why it
    /// ended early.
    pub(crate) fn ended<E>(&self, outcome: &Result<u64, E>) {
        self.closed.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Ok(frames) => self.frames.fetch_add(*frames, Ordering::Relaxed),
            Err(_) => self.errors.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// An accept failed (EMFILE, ECONNABORTED, …): that connection is lost,
/// the listener is not. Backs off a little when out of descriptors.
pub(crate) async fn accept_failed(e: &io::Error) {
    if e.raw_os_error() == Some(EMFILE) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// EMFILE ("too many open files") on Linux.
const EMFILE: i32 = 24;

/// Runs the peer until `shutdown` completes, on the calling thread (which
/// runs the accept loop, as with `#[tokio::main]`). `on_bound` is called
/// once with the bound address before the first accept.
pub fn run<F>(config: PeerConfig, on_bound: impl FnOnce(SocketAddr), shutdown: F) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    run_with_stats(config, Arc::default(), on_bound, shutdown)
}

fn run_with_stats<F>(
    config: PeerConfig,
    stats: Arc<PeerStats>,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .thread_name("tokio-peer-worker")
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let listener = TcpListener::bind(config.listen).await?;
        on_bound(listener.local_addr()?);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                accepted = listener.accept() => {
                    let sock = match accepted {
                        Ok((sock, _)) => sock,
                        Err(e) => {
                            accept_failed(&e).await;
                            continue;
                        }
                    };
                    stats.accepted.fetch_add(1, Ordering::Relaxed);
                    let stats = Arc::clone(&stats);
                    let limits = config.limits;
                    tokio::spawn(async move {
                        let outcome = connection(sock, limits).await;
                        stats.ended(&outcome);
                    });
                }
            }
        }
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// Why a connection ended early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Protocol(#[from] WorkloadError),
}

/// One connection: read, answer the whole batch, write once, repeat.
/// Returns the frames handled when the client closes.
async fn connection(mut sock: TcpStream, limits: Limits) -> Result<u64, ConnError> {
    sock.set_nodelay(true)?;
    let mut responder = Responder::new(limits);
    let mut input = BytesMut::new();
    let mut output = BytesMut::new();
    loop {
        // Room for the rest of a partial frame whose length is known, and
        // at least READ_RESERVE. Once the frames split off the front are
        // dropped, `reserve` reuses the same allocation.
        let want = match peek_frame_len(&input, &limits) {
            Ok(total) => total.saturating_sub(input.len()).max(READ_RESERVE),
            Err(_) => READ_RESERVE,
        };
        input.reserve(want);
        if sock.read_buf(&mut input).await? == 0 {
            return Ok(responder.frames());
        }
        responder.serve(&mut input, &mut output)?;
        if !output.is_empty() {
            sock.write_all(&output).await?;
            output.clear();
        }
    }
}

/// A peer running on a background thread of this process (`S`: its
/// counters; the DTP peer's handle is the same type over its own).
#[derive(Debug)]
pub struct PeerHandle<S = PeerStats> {
    local_addr: SocketAddr,
    stats: Arc<S>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<io::Result<()>>>,
    name: &'static str,
}

/// What a peer's run function takes from [`spawn`]: its counters, the
/// callback that reports the bound address, and the shutdown signal.
pub(crate) type PeerBody<S> = Box<
    dyn FnOnce(
            Arc<S>,
            Box<dyn FnOnce(SocketAddr) + Send>,
            std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
        ) -> io::Result<()>
        + Send,
>;

/// Starts the peer on a background thread; returns once it listens.
pub fn serve(config: PeerConfig) -> io::Result<PeerHandle> {
    spawn(
        "tokio peer",
        Box::new(move |stats, on_bound, shutdown| {
            run_with_stats(config, stats, on_bound, shutdown)
        }),
    )
}

/// Runs `body` on a thread named after `name`; returns once it reported
/// its address (or with the error it ended with before that).
pub(crate) fn spawn<S: Default + Send + Sync + 'static>(
    name: &'static str,
    body: PeerBody<S>,
) -> io::Result<PeerHandle<S>> {
    let (stop, stopped) = oneshot::channel::<()>();
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    let stats = Arc::new(S::default());
    let thread_stats = Arc::clone(&stats);
    let thread = thread::Builder::new()
        .name(name.replace(' ', "-"))
        .spawn(move || {
            let shutdown = async move {
                // A dropped sender also means stop.
                let _ = stopped.await;
            };
            body(
                thread_stats,
                Box::new(move |addr| {
                    let _ = bound_tx.send(addr);
                }),
                Box::pin(shutdown),
            )
        })?;
    match bound_rx.recv() {
        Ok(local_addr) => Ok(PeerHandle {
            local_addr,
            stats,
            stop: Some(stop),
            thread: Some(thread),
            name,
        }),
        // The thread ended before binding: its result says why.
        Err(_) => Err(match thread.join() {
            Ok(Err(e)) => e,
            Ok(Ok(())) => io::Error::other(format!("the {name} stopped before listening")),
            Err(_) => io::Error::other(format!("the {name} panicked")),
        }),
    }
}

impl<S> PeerHandle<S> {
    /// The address the peer listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The peer's counters (still readable after [`PeerHandle::shutdown`];
    /// a connection still open at shutdown is dropped, not counted as closed).
    pub fn stats(&self) -> Arc<S> {
        Arc::clone(&self.stats)
    }

    /// Stops accepting, gives connections [`SHUTDOWN_GRACE`] to finish, and
    /// waits for the peer's thread.
    pub fn shutdown(mut self) -> io::Result<()> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other(format!("the {} panicked", self.name)))?,
            None => Ok(()),
        }
    }
}

impl<S> Drop for PeerHandle<S> {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// Prints the line [`parse_listening_line`] reads, for a peer run as a
/// child process.
pub(crate) fn print_listening(addr: SocketAddr) {
    print_line(&format!("listening {addr}"));
}

/// Prints `line` on stdout at once (a parent reads it from a pipe).
pub(crate) fn print_line(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The body of the hidden `dtp` subcommand that runs the peer in its own
/// process: prints `listening <addr>` on stdout once bound, and stops when
/// its standard input reaches end of file (the parent closes the pipe, or
/// dies).
pub fn run_child(config: PeerConfig) -> io::Result<()> {
    run(config, print_listening, stdin_closed())
}

/// The line [`run_child`] prints, parsed back: the address, if `line` is one.
pub fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    line.trim().strip_prefix("listening ")?.parse().ok()
}

/// A future that completes when standard input reaches end of file (read on
/// a plain thread: tokio's stdin would need another runtime feature for one
/// blocking read).
pub fn stdin_closed() -> impl Future<Output = ()> + Send {
    let (tx, rx) = oneshot::channel::<()>();
    // If the watcher cannot start, `tx` is dropped with its closure and the
    // future completes at once: a peer that stops is better than one nobody
    // can stop.
    let _ = thread::Builder::new()
        .name("stdin-watch".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            let mut line = String::new();
            while matches!(stdin.read_line(&mut line), Ok(n) if n > 0) {
                line.clear();
            }
            let _ = tx.send(());
        });
    async move {
        let _ = rx.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_line_round_trips() {
        let addr: SocketAddr = "127.0.0.1:4242".parse().unwrap();
        assert_eq!(
            parse_listening_line(&format!("listening {addr}\n")),
            Some(addr)
        );
        assert_eq!(parse_listening_line("hello"), None);
    }

    #[test]
    fn serve_binds_and_shuts_down() {
        let peer = serve(PeerConfig::new("127.0.0.1:0".parse().unwrap(), 1)).unwrap();
        assert_ne!(peer.local_addr().port(), 0);
        peer.shutdown().unwrap();
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = PeerConfig::new(held.local_addr().unwrap(), 1);
        assert!(serve(config).is_err());
    }
}
