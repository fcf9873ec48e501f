//! The floor of `dtp bench`: the least a server can do on this kernel for
//! the plaintext workloads (`pingpong`, `stream`, `connections`), so the
//! report can say how far every real server is from the physical limit.
//!
//! **This is a measuring instrument, not part of the data plane.** Nothing
//! in DTP uses it; it shares no code with the [`Driver`](crate::Driver),
//! the engine, the codec or the pool. It lives in this crate only because it
//! needs `unsafe` (io_uring's submission is unsafe) and this is one of the
//! two crates allowed to have any.
//!
//! What it does, per thread (one per core, or `workers`):
//!
//! - its own ring, set up with SINGLE_ISSUER + DEFER_TASKRUN (+ NO_SQARRAY)
//!   where the kernel has them, and its own `SO_REUSEPORT` listener on the
//!   shared port (`TCP_NODELAY` set on the listener, which accepted sockets
//!   inherit);
//! - one multishot accept straight into the ring's fixed-file table (direct
//!   descriptors: no fd table, no per-operation file lookup), and one
//!   multishot receive per connection into a provided-buffer ring;
//! - one `submit_and_wait(1)` per loop turn: every re-arm and send queued
//!   while handling the previous batch of completions goes in with it;
//! - no allocation after start: receive buffers, output chunks and the
//!   connection table are mapped (and faulted in) up front, and a
//!   connection's slot is its direct descriptor.
//!
//! The framing is what the workloads need and no more ([`frame`]): the
//! 16-byte header and the 18 bytes of data fields are read by hand; a
//! `pingpong` frame is answered with its own bytes (the shared responder's
//! answer to a well-formed request is byte-identical to it: see
//! `bench/tests/peer_floor.rs`), a `stream` payload is skipped unread and
//! acked by the workload's rule (after every 64th frame, and at once after a
//! frame whose fragment id is `u64::MAX`). Anything else closes the
//! connection: another kind or stream, an agreement id or relations (the
//! workload's clients send neither), a sequence gap.
//!
//! Left out on purpose, because a server that must deliver the bytes cannot
//! skip them: `MSG_TRUNC` receives (the kernel would drop the payload
//! without copying it) and SQPOLL (a polling kernel thread, whose CPU would
//! be counted against every operation).

pub mod frame;
mod mem;
mod worker;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc;
use std::thread;

use socket2::{Domain, Socket, Type};

/// The floor's name in the report.
pub const NAME: &str = "floor";

/// The floor's settings (the defaults are what `dtp bench` runs).
#[derive(Clone, Debug)]
pub struct FloorConfig {
    /// Address to listen on (port 0: any free port, shared by all threads).
    pub listen: SocketAddr,
    /// Threads, each with its own ring and listener (0: one per core).
    pub workers: usize,
    /// Connections per thread (also capped by the open-file limit, which
    /// bounds a ring's fixed-file table); more are refused by the kernel.
    pub max_connections: u32,
    /// Bytes of one receive buffer.
    pub recv_buffer_len: u32,
    /// Receive buffers per thread (a power of two).
    pub recv_buffers: u16,
    /// Bytes of one output chunk.
    pub out_chunk_len: u32,
    /// Output chunks per thread.
    pub out_chunks: u16,
    /// Receive buffers one connection may hold before its receive pauses.
    pub max_held: u16,
    /// While streaming (32 KiB or more received in the last loop turn), a
    /// wait holds out for this many completions (1: never; at most half
    /// the receive buffers)…
    pub stream_batch: u32,
    /// …for at most this many µs once one is there (kernel 6.12+; ignored
    /// elsewhere): fewer wake-ups per byte for that much added latency.
    pub stream_batch_wait_us: u32,
    /// Pin thread `i` to core `i` (modulo the cores), as our gateway pins
    /// its shards. Off by default: on this 2-core machine, shared with the
    /// load generator, it changed nothing measurable (perf/peers.md).
    pub pin: bool,
    /// Submission queue entries (the completion queue has four times as many).
    pub ring_entries: u32,
}

impl FloorConfig {
    /// Listen on `listen` with `workers` threads (0: one per core).
    pub fn new(listen: SocketAddr, workers: usize) -> Self {
        Self {
            listen,
            workers,
            max_connections: 65_536,
            recv_buffer_len: 64 * 1024,
            // Few buffers, so the kernel's copy lands in memory still in
            // the cache: 256 of them (16 MiB, cycled through in ring order)
            // made `stream` cost about 15 % more per frame than 16.
            recv_buffers: 16,
            out_chunk_len: 16 * 1024,
            out_chunks: 256,
            max_held: 8,
            // Our driver's figures (`DriverConfig::batch`, `batch_wait_us`).
            stream_batch: 8,
            stream_batch_wait_us: 100,
            pin: false,
            ring_entries: 1024,
        }
    }

    /// The number of threads started.
    pub fn worker_threads(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            thread::available_parallelism().map_or(1, |n| n.get())
        }
    }

    /// Slots of each thread's fixed-file table.
    fn table_len(&self) -> u32 {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a live, writable rlimit the call fills in.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            lim.rlim_cur
        } else {
            1024
        };
        let soft = u32::try_from(soft).unwrap_or(u32::MAX);
        self.max_connections.min(soft).max(16)
    }
}

/// What one run of the floor did, summed over its threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FloorStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Accepts that failed because the connection table was full.
    pub refused: u64,
    /// Connections closed (for any reason).
    pub closed: u64,
    /// Connections closed because a frame broke the workload protocol.
    pub malformed: u64,
    /// Frames received by connections that have closed.
    pub frames: u64,
    /// Acks sent by connections that have closed.
    pub acks: u64,
    /// Receives that found no free buffer (and were re-armed later).
    pub recv_starved: u64,
    /// Sends the kernel took only part of (the rest was sent next).
    pub short_sends: u64,
}

impl FloorStats {
    fn add(&mut self, o: &FloorStats) {
        self.accepted += o.accepted;
        self.refused += o.refused;
        self.closed += o.closed;
        self.malformed += o.malformed;
        self.frames += o.frames;
        self.acks += o.acks;
        self.recv_starved += o.recv_starved;
        self.short_sends += o.short_sends;
    }
}

struct Thread {
    stop: OwnedFd,
    handle: Option<thread::JoinHandle<io::Result<FloorStats>>>,
}

/// A running floor: its threads and their shared address.
pub struct Floor {
    local_addr: SocketAddr,
    threads: Vec<Thread>,
}

impl std::fmt::Debug for Floor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Floor")
            .field("local_addr", &self.local_addr)
            .field("threads", &self.threads.len())
            .finish()
    }
}

fn listener(addr: SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    // Accepted sockets inherit it: no setsockopt per connection.
    s.set_tcp_nodelay(true)?;
    s.bind(&addr.into())?;
    s.listen(4096)?;
    Ok(s)
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked before use.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this process owns and nothing else holds.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Floor {
    /// Binds every thread's listener, starts the threads and returns once
    /// each has its ring set up (or with the first error).
    pub fn start(config: FloorConfig) -> io::Result<Floor> {
        let n = config.worker_threads();
        let first = listener(config.listen)?;
        let local_addr = first
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("the listener has no socket address"))?;
        let mut sockets = vec![first];
        for _ in 1..n {
            sockets.push(listener(local_addr)?);
        }
        let mut floor = Floor {
            local_addr,
            threads: Vec::with_capacity(n),
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        for (i, socket) in sockets.into_iter().enumerate() {
            let stop = eventfd()?;
            let stop_read = stop.try_clone()?;
            let config = config.clone();
            let ready_tx = ready_tx.clone();
            let handle = thread::Builder::new()
                .name(format!("floor-{i}"))
                .spawn(move || {
                    if config.pin {
                        let cores = thread::available_parallelism().map_or(1, |n| n.get());
                        // Not fatal: an unpinned floor still serves.
                        let _ = crate::pin_current_thread(i % cores);
                    }
                    worker::run(socket, stop_read, &config, |r| {
                        let _ = ready_tx.send(r);
                    })
                })?;
            floor.threads.push(Thread {
                stop,
                handle: Some(handle),
            });
        }
        drop(ready_tx);
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(io::Error::other(
                        "a floor thread ended before its ring was set up",
                    ));
                }
            }
        }
        Ok(floor)
    }

    /// The address every thread listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops every thread and returns what they did.
    pub fn stop(mut self) -> io::Result<FloorStats> {
        self.stop_all()
    }

    /// Waits for the threads without stopping them (they run until the
    /// process ends, or one fails).
    pub fn wait(mut self) -> io::Result<FloorStats> {
        let mut total = FloorStats::default();
        for t in &mut self.threads {
            if let Some(h) = t.handle.take() {
                total.add(&join(h)?);
            }
        }
        Ok(total)
    }

    fn stop_all(&mut self) -> io::Result<FloorStats> {
        for t in &self.threads {
            let one: u64 = 1;
            // SAFETY: writes the 8 bytes of a live u64 to an eventfd we own.
            let _ = unsafe { libc::write(t.stop.as_raw_fd(), (&raw const one).cast(), 8) };
        }
        let mut total = FloorStats::default();
        let mut first_err = None;
        for t in &mut self.threads {
            if let Some(h) = t.handle.take() {
                match join(h) {
                    Ok(s) => total.add(&s),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(total),
        }
    }
}

fn join(h: thread::JoinHandle<io::Result<FloorStats>>) -> io::Result<FloorStats> {
    h.join()
        .map_err(|_| io::Error::other("a floor thread panicked"))?
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.stop_all();
    }
}

/// The body of the hidden `dtp __peer-floor` subcommand: starts the floor,
/// prints `listening ADDR` on stdout, and serves until the process is
/// killed (as `dtp bench` does) or a thread fails.
pub fn run_child(config: FloorConfig) -> io::Result<()> {
    use std::io::Write;
    let floor = Floor::start(config)?;
    let mut out = io::stdout().lock();
    writeln!(out, "listening {}", floor.local_addr())?;
    out.flush()?;
    drop(out);
    floor.wait().map(|_| ())
}
