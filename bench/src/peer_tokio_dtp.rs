//! The peer server of `dtp bench` running the full DTP protocol (SPEC §1)
//! on tokio (epoll), written the way a careful tokio user would write it:
//! the terminal side of CAP, sealed frames, agreements, resume — the same
//! sans-IO [`DtpEndpoint`] and the same application ([`DtpResponder`]) as
//! our gateway (`dtp_gateway::dtp::DtpGateway`), so the
//! CPU-per-byte ratio of `dtp bench` measures the IO path and the runtime,
//! not two protocol implementations. It carries DTP straight on TCP, with
//! [`DtpPeerConfig::websocket`] over WebSocket with `tokio-tungstenite`
//! (`ws`: binary messages, subprotocol `dtp.v1`, as our `ws:` transport),
//! or with [`DtpPeerConfig::quic`] over QUIC with `quinn` (`quic`: ALPN
//! `dtp/1`, one bidirectional stream, as our `quic:` transport), the
//! carrier being the only part that differs (`Wire`).
//!
//! **Owns**: the tokio driver of one terminal endpoint per accepted
//! connection (`drive_connection`, whatever the carrier) — frames split
//! off a `BytesMut` read buffer with
//! [`peek_frame_len`] and handed to [`DtpEndpoint::handle_frame`] (which
//! decrypts them in place), `poll_transmit` into a write buffer written
//! with one `write_all` per read batch, `poll_event` to the application,
//! `poll_timeout` as a `sleep_until` raced against the read in `select!`,
//! resume requests answered from a [`SessionRegistry`] shared by every
//! task, and lost connections' sessions parked there. **Never touches**:
//! the protocol's rules (the endpoint's), the application's decisions
//! ([`DtpResponder`]'s), or the CLI (the hidden subcommand builds a
//! [`DtpPeerConfig`] and calls [`run_child`]).
//!
//! # Shape
//!
//! The same as the plaintext peer ([`crate::peer_tokio`]): a multi-thread
//! runtime with one worker per core (configurable), a `TcpListener` accept
//! loop in `block_on` (what `#[tokio::main]` expands to), one task per
//! connection with `TCP_NODELAY` on, a read buffer that keeps
//! [`READ_RESERVE`] of spare room, no pinning, no custom allocator, no
//! socket options but `TCP_NODELAY`. [`serve`] runs it on a background
//! thread for tests; [`run_child`] prints the same `listening ADDR` line
//! (`listening ws:ADDR/PATH` over WebSocket, `listening quic:ADDR` and
//! `quic certificate sha256 HEX` over QUIC, as `dtp serve` prints them)
//! and stops on the same end of standard input.
//!
//! # Choices
//!
//! - **Drain after every frame, write once per read.** The endpoint's
//!   queues are bounded on the assumption that its driver drains events
//!   and transmits after every input (see `dtp_gateway::dtp::drive_endpoint`), so events go
//!   to the application and transmits into the write buffer after each
//!   frame, as the gateway does; the socket is written once per read batch,
//!   like the plaintext peer.
//! - **One application per connection.** [`DtpResponder`] holds nothing
//!   but a handle to the system random generator, so each task owns one:
//!   sharing it behind a mutex would add a lock per event that our gateway
//!   (one per shard, no lock) does not pay.
//! - **Timers.** One `Sleep` per connection, reset only when the deadline
//!   changes (the endpoint's `poll_timeout`, and a waiting resume
//!   request's grace).
//! - **Resume grace.** A Fay whose connection was cut reconnects at once
//!   and may ask for its session before the old connection's task has seen
//!   the end of its socket; the request then waits up to
//!   [`RESUME_GRACE`] (the gateway's grace) before it is refused with
//!   RESUME_FAILED. As in the gateway, the registry wakes it when the
//!   session is parked (`take_or_wait`; here a `tokio::sync::Notify` the
//!   connection's task selects on), instead of it looking every
//!   [`RESUME_POLL`].
//! - **Bounded memory.** The registry holds at most
//!   [`MAX_SUSPENDED_SESSIONS`]; past it a lost session is dropped (the
//!   registry expires stale ones first). The endpoint bounds everything
//!   else; the read buffer holds at most one frame beyond a read's batch
//!   (the codec's `max_frame_len`).
//! - **Randomness.** `ring`'s system generator, as in the gateway; if it
//!   fails the connection is dropped rather than the process panicking.

mod quic;
mod ws;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use dtp_codec::DecodeError;
use dtp_codec::{ErrorCode, Limits, SessionId, peek_frame_len};
use dtp_endpoint::{DtpEndpoint, DtpError, DtpEvent, TerminalConfig};
// The suspended-session registry and its grace are the gateway crate's
// (which links the runtime): the one part of our gateway this peer shares.
use dtp_endpoint::{RESUME_GRACE, ResumeWaiter, SessionRegistry, Taken};
use ring::rand::{SecureRandom, SystemRandom};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::peer_tokio::stdin_closed;
use dtp_workload::dtp::{DtpResponder, ResponderSession};

pub use crate::peer_tokio::{READ_RESERVE, SHUTDOWN_GRACE, parse_listening_line};
pub use quic::{ALPN, QuicCert};
pub use ws::{HANDSHAKE_TIMEOUT, SUBPROTOCOL};

/// The peer's name in the report.
pub const NAME: &str = "tokio-dtp";
/// How often a resume request waiting for its session looks again: the
/// same as our gateway's, so the comparison is fair.
pub use dtp_endpoint::RESUME_POLL;
/// SPEC SES-2: most suspended sessions the peer keeps (shared by every
/// connection); past it a lost session is dropped.
pub const MAX_SUSPENDED_SESSIONS: usize = 16 * 1024;

/// The peer's settings.
#[derive(Clone, Debug)]
pub struct DtpPeerConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// Runtime worker threads (0: one per available core).
    pub workers: usize,
    /// The terminal's CAP keys, trusted issuers, ceilings and timers,
    /// shared by every connection.
    pub terminal: Arc<TerminalConfig>,
    /// Codec limits for splitting the byte stream into frames; keep them
    /// equal to `terminal.endpoint.limits` (the endpoint checks every frame
    /// against its own), as [`DtpPeerConfig::new`] does.
    pub limits: Limits,
    /// How DTP is carried.
    pub carrier: Carrier,
}

/// How the peer carries DTP's byte stream.
#[derive(Clone, Debug, Default)]
pub enum Carrier {
    /// Straight on TCP.
    #[default]
    Tcp,
    /// Over WebSocket, accepting upgrades at this path only, with the
    /// subprotocol `dtp.v1` (the tokio-tungstenite peer).
    WebSocket(String),
    /// Over QUIC on UDP with quinn (ALPN `dtp/1`, one bidirectional stream
    /// per connection), presenting this certificate (the quinn peer).
    Quic(QuicCert),
}

impl DtpPeerConfig {
    /// Listen on `listen` with `workers` worker threads (0: one per core),
    /// as the terminal `terminal`, splitting frames with its limits.
    pub fn new(listen: SocketAddr, workers: usize, terminal: Arc<TerminalConfig>) -> Self {
        let limits = terminal.endpoint.limits;
        Self {
            listen,
            workers,
            terminal,
            limits,
            carrier: Carrier::Tcp,
        }
    }

    /// The same, carrying DTP over WebSocket at `path` (`/dtp`).
    pub fn websocket(mut self, path: impl Into<String>) -> Self {
        self.carrier = Carrier::WebSocket(path.into());
        self
    }

    /// The same, carrying DTP over QUIC (UDP at the listen address) with a
    /// new self-signed certificate.
    pub fn quic(mut self) -> io::Result<Self> {
        self.carrier = Carrier::Quic(QuicCert::self_signed()?);
        Ok(self)
    }

    /// Prints the lines `dtp bench` reads once the peer is bound (the way
    /// `dtp serve` prints its endpoints): `listening ADDR`, `listening
    /// ws:ADDR/PATH` over WebSocket, or over QUIC `listening quic:ADDR`
    /// and then the certificate's pin, `quic certificate sha256 HEX`.
    pub fn announce(&self) -> impl FnOnce(SocketAddr) + Send + 'static {
        let carrier = self.carrier.clone();
        move |addr| match carrier {
            Carrier::Tcp => crate::peer_tokio::print_listening(addr),
            Carrier::WebSocket(path) => {
                crate::peer_tokio::print_line(&format!("listening ws:{addr}{path}"));
            }
            Carrier::Quic(cert) => {
                crate::peer_tokio::print_line(&format!("listening quic:{addr}"));
                crate::peer_tokio::print_line(&cert.pin_line());
            }
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

/// Counters the peer keeps per read batch or per connection event (never
/// per frame, so they cost nothing measurable).
#[derive(Debug, Default)]
pub struct DtpPeerStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections that ended (for any reason).
    pub closed: AtomicU64,
    /// Connections that ended on an IO error, a protocol error (a close
    /// with a code other than NORMAL, either side) or a failed start.
    pub errors: AtomicU64,
    /// SPEC SEQ-4: fragments handed to the application (a session delivers
    /// each exactly once, resumes included). Updated after every read
    /// batch, before the batch's answer is written.
    pub fragments_in: AtomicU64,
    /// Sealed frames opened, by connections that have ended.
    pub frames_in: AtomicU64,
    /// Sealed frames sent, by connections that have ended.
    pub frames_out: AtomicU64,
    /// SPEC SES-2: sessions parked in the registry when their connection
    /// was lost.
    pub parked: AtomicU64,
    /// SPEC SES-3, SEQ-5: sessions resumed.
    pub resumed: AtomicU64,
    /// SPEC SEQ-5: resume requests that found no parked session at first
    /// and waited for it (the old connection had not ended yet).
    pub resume_waited: AtomicU64,
    /// SPEC SEQ-5: resume requests refused (no such session within the
    /// grace, or not this peer's).
    pub resume_refused: AtomicU64,
}

/// What every connection task shares.
struct Shared {
    terminal: Arc<TerminalConfig>,
    limits: Limits,
    registry: SessionRegistry,
    stats: Arc<DtpPeerStats>,
    rng: SystemRandom,
}

/// Runs the peer until `shutdown` completes, on the calling thread (which
/// runs the accept loop, as with `#[tokio::main]`). `on_bound` is called
/// once with the bound address before the first accept.
pub fn run<F>(
    config: DtpPeerConfig,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    run_with_stats(config, Arc::default(), on_bound, shutdown)
}

fn run_with_stats<F>(
    config: DtpPeerConfig,
    stats: Arc<DtpPeerStats>,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .thread_name(match config.carrier {
            Carrier::Tcp => "tokio-dtp-peer-worker",
            Carrier::WebSocket(_) => "tokio-ws-dtp-peer-worker",
            Carrier::Quic(_) => "quinn-dtp-peer-worker",
        })
        .enable_all()
        .build()?;
    let shared = Arc::new(Shared {
        terminal: config.terminal,
        limits: config.limits,
        registry: SessionRegistry::new(MAX_SUSPENDED_SESSIONS),
        stats,
        rng: SystemRandom::new(),
    });
    let listen = config.listen;
    let result = runtime.block_on(async {
        match config.carrier {
            Carrier::Quic(cert) => quic::serve(listen, &cert, &shared, on_bound, shutdown).await,
            Carrier::Tcp => serve_tcp(listen, None, &shared, on_bound, shutdown).await,
            Carrier::WebSocket(path) => {
                serve_tcp(listen, Some(Arc::from(path)), &shared, on_bound, shutdown).await
            }
        }
    });
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// The TCP accept loop on `listen` until `shutdown`: one task per
/// connection, carrying DTP straight or (with `websocket`, the request
/// path) over WebSocket. `on_bound` gets the address first.
async fn serve_tcp(
    listen: SocketAddr,
    websocket: Option<Arc<str>>,
    shared: &Arc<Shared>,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    on_bound(listener.local_addr()?);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => {
                let sock = match accepted {
                    Ok((sock, _)) => sock,
                    // EMFILE, ECONNABORTED, …: this connection is lost,
                    // the listener is not. Back off a little on EMFILE.
                    Err(e) => {
                        if e.raw_os_error() == Some(24) {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        continue;
                    }
                };
                let websocket = websocket.clone();
                spawn_connection(shared, move |shared| async move {
                    match websocket {
                        Some(path) => ws::connection(sock, &path, &shared).await,
                        None => connection(sock, &shared).await,
                    }
                });
            }
        }
    }
}

/// Counts an accepted connection and runs `connection` on a task of its
/// own, counting how it ended.
fn spawn_connection<F, Fut>(shared: &Arc<Shared>, connection: F)
where
    F: FnOnce(Arc<Shared>) -> Fut,
    Fut: Future<Output = Result<(), ConnError>> + Send + 'static,
{
    shared.stats.accepted.fetch_add(1, Ordering::Relaxed);
    let stats = Arc::clone(&shared.stats);
    let run = connection(Arc::clone(shared));
    tokio::spawn(async move {
        let clean = run.await.is_ok();
        stats.closed.fetch_add(1, Ordering::Relaxed);
        if !clean {
            stats.errors.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// Why a connection ended other than cleanly.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("no DTP endpoint for this connection: {0}")]
    Endpoint(#[from] DtpError),
    #[error("the system random generator failed")]
    Random,
    #[error("the connection closed with code {0}")]
    Closed(ErrorCode),
}

/// One connection's endpoint and application state.
struct Conn {
    ep: DtpEndpoint,
    app: DtpResponder,
    session: ResponderSession,
    /// A resume request whose session is not parked yet, and until when it
    /// may wait ([`RESUME_GRACE`]).
    waiting_resume: Option<(SessionId, Instant)>,
    /// Woken by the registry when that session is parked (made at the
    /// first wait); whether a waiter is kept there now.
    parked: Option<Arc<tokio::sync::Notify>>,
    waiter_kept: bool,
    /// Fragments delivered since the counters were last updated.
    fragments: u64,
}

impl Conn {
    /// SPEC SEQ-1: a terminal endpoint waiting for CAP message 1.
    fn open(shared: &Shared, now: Instant) -> Result<Self, ConnError> {
        let mut failed = false;
        let mut fill = |b: &mut [u8]| {
            if shared.rng.fill(b).is_err() {
                failed = true;
            }
        };
        let ep = DtpEndpoint::terminal(&shared.terminal, now, unix_now(), &mut fill)?;
        if failed {
            return Err(ConnError::Random);
        }
        Ok(Self {
            ep,
            app: DtpResponder::default(),
            session: ResponderSession::default(),
            waiting_resume: None,
            parked: None,
            waiter_kept: false,
            fragments: 0,
        })
    }

    /// Drains the endpoint after an input: events to the application (or,
    /// for resume requests, to the registry), then transmits into `out`;
    /// again while the application's calls produce more.
    fn drive(&mut self, shared: &Shared, out: &mut BytesMut, now: Instant) {
        loop {
            let mut any = false;
            while let Some(event) = self.ep.poll_event() {
                any = true;
                match event {
                    DtpEvent::ResumeRequested { session_id } => {
                        self.waiting_resume = Some((session_id, now + RESUME_GRACE));
                        self.waiter_kept = false;
                        self.try_resume(shared, now);
                        if self.waiting_resume.is_some() {
                            shared.stats.resume_waited.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    event => {
                        match &event {
                            DtpEvent::Fragment { .. } => self.fragments += 1,
                            DtpEvent::Established { resumed: true, .. } => {
                                shared.stats.resumed.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {}
                        }
                        self.app.event(&mut self.session, &mut self.ep, event, now);
                    }
                }
            }
            self.ep.poll_transmit(out);
            if !any {
                break;
            }
        }
    }

    /// SPEC SEQ-5, SES-3: answers a waiting resume request from the
    /// registry: resumes, refuses (the grace is over), or leaves it waiting.
    fn try_resume(&mut self, shared: &Shared, now: Instant) {
        let Some((session_id, until)) = self.waiting_resume else {
            return;
        };
        let taken = if self.waiter_kept {
            // A waiter is kept already: look without keeping another.
            shared
                .registry
                .take(session_id, now)
                .map_or(Taken::Waiting, |s| Taken::Session(Box::new(s)))
        } else {
            let notify = self.parked.get_or_insert_with(Default::default).clone();
            let waiter = ResumeWaiter::new(until, move || notify.notify_one());
            shared.registry.take_or_wait(session_id, now, waiter)
        };
        self.waiter_kept = matches!(taken, Taken::Waiting);
        match taken {
            Taken::Session(s) => {
                self.waiting_resume = None;
                if let Err(refused) = self.ep.resume_with(*s, now) {
                    // Not this peer's (or not now): the session stays
                    // parked for its owner.
                    shared.stats.resume_refused.fetch_add(1, Ordering::Relaxed);
                    let _ = shared.registry.insert(*refused.session, now);
                }
            }
            _ if now >= until => {
                self.waiting_resume = None;
                shared.stats.resume_refused.fetch_add(1, Ordering::Relaxed);
                self.ep.refuse_resume();
            }
            Taken::Waiting | Taken::Absent => {}
        }
    }

    /// When the connection's timer must next fire: the endpoint's deadline,
    /// or sooner while a resume request waits for its session (its grace;
    /// every [`RESUME_POLL`] if the registry keeps no waiter for it).
    fn deadline(&self, now: Instant) -> Option<Instant> {
        let wait = self.waiting_resume.map(|(_, until)| {
            if self.waiter_kept {
                until
            } else {
                (now + RESUME_POLL).min(until)
            }
        });
        match (self.ep.poll_timeout(), wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Hands every complete frame at the front of `input` to the endpoint,
    /// draining after each. A header the codec refuses goes to the endpoint
    /// whole: it closes the connection with the decode error's code.
    fn frames(&mut self, shared: &Shared, input: &mut BytesMut, out: &mut BytesMut, now: Instant) {
        while !self.ep.is_closed() {
            let len = match peek_frame_len(input, &shared.limits) {
                Ok(len) if len <= input.len() => len,
                Ok(_) | Err(DecodeError::Incomplete { .. }) => return,
                Err(_) => input.len(),
            };
            self.ep.handle_frame(input.split_to(len), now);
            self.drive(shared, out, now);
        }
    }

    /// Publishes the counters kept since the last call.
    fn flush_stats(&mut self, stats: &DtpPeerStats) {
        if self.fragments > 0 {
            stats
                .fragments_in
                .fetch_add(self.fragments, Ordering::Relaxed);
            self.fragments = 0;
        }
    }
}

/// How a connection carries DTP's byte stream: TCP as it is ([`Tcp`]),
/// or the payloads of WebSocket binary messages ([`ws::Ws`]). The rest of
/// a connection — endpoint, application, timers, counters — is
/// [`drive_connection`], the same for both.
trait Wire {
    /// Appends the next bytes received to `input`; `Ok(false)` once the
    /// stream has ended. Cancel-safe: it races the endpoint's timer.
    async fn read(&mut self, input: &mut BytesMut, limits: &Limits) -> io::Result<bool>;

    /// Sends all of `output` and empties it.
    async fn write(&mut self, output: &mut BytesMut) -> io::Result<()>;

    /// Ends the connection in the carrier's own way once the loop is over
    /// (dropping the socket is enough for TCP).
    async fn close(&mut self) {}
}

/// DTP straight on TCP.
struct Tcp(TcpStream);

impl Wire for Tcp {
    async fn read(&mut self, input: &mut BytesMut, limits: &Limits) -> io::Result<bool> {
        // Room for the rest of a partial frame whose length is known, and
        // at least READ_RESERVE (the plaintext peer's rule).
        let want = match peek_frame_len(input, limits) {
            Ok(total) => total.saturating_sub(input.len()).max(READ_RESERVE),
            Err(_) => READ_RESERVE,
        };
        input.reserve(want);
        Ok(self.0.read_buf(input).await? > 0)
    }

    async fn write(&mut self, output: &mut BytesMut) -> io::Result<()> {
        self.0.write_all(output).await?;
        output.clear();
        Ok(())
    }
}

/// One TCP connection (`TCP_NODELAY` on) carrying DTP.
async fn connection(sock: TcpStream, shared: &Shared) -> Result<(), ConnError> {
    sock.set_nodelay(true)?;
    drive_connection(Tcp(sock), shared).await
}

/// One connection on any carrier: read, hand the frames to the endpoint,
/// write what it produced once per batch, repeat; the endpoint's timers
/// race the read.
async fn drive_connection(mut wire: impl Wire, shared: &Shared) -> Result<(), ConnError> {
    let start = Instant::now();
    let mut conn = Conn::open(shared, start)?;
    let mut input = BytesMut::new();
    let mut output = BytesMut::new();
    conn.drive(shared, &mut output, start);
    let mut armed = conn.deadline(start);
    let timer = tokio::time::sleep_until(armed.unwrap_or(start).into());
    tokio::pin!(timer);
    let outcome = loop {
        if !output.is_empty()
            && let Err(e) = wire.write(&mut output).await
        {
            break Err(e);
        }
        if conn.ep.is_closed() {
            break Ok(());
        }
        let now = tokio::select! {
            read = wire.read(&mut input, &shared.limits) => {
                let now = Instant::now();
                match read {
                    Ok(false) => break Ok(()),
                    Ok(true) => conn.frames(shared, &mut input, &mut output, now),
                    Err(e) => break Err(e),
                }
                now
            }
            () = &mut timer, if armed.is_some() => {
                let now = Instant::now();
                conn.try_resume(shared, now);
                conn.ep.handle_timeout(now);
                conn.drive(shared, &mut output, now);
                now
            }
            // Its session was parked: take it now.
            () = parked(&conn.parked), if conn.waiter_kept => {
                let now = Instant::now();
                conn.waiter_kept = false;
                conn.try_resume(shared, now);
                conn.drive(shared, &mut output, now);
                now
            }
        };
        conn.flush_stats(&shared.stats);
        let next = conn.deadline(now);
        if let Some(at) = next
            && next != armed
        {
            timer.as_mut().reset(at.into());
        }
        armed = next;
    };
    wire.close().await;
    conn.flush_stats(&shared.stats);
    finish(conn.ep, shared, outcome)
}

/// Resolves once the registry has run the connection's waiter (never
/// without one).
async fn parked(notify: &Option<Arc<tokio::sync::Notify>>) {
    match notify {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

/// The connection is over: a session still live is parked for a resume
/// (SPEC SES-2), the counters are published, and the outcome classified.
fn finish(mut ep: DtpEndpoint, shared: &Shared, outcome: io::Result<()>) -> Result<(), ConnError> {
    let now = Instant::now();
    let crypto = ep.crypto_stats();
    shared
        .stats
        .frames_in
        .fetch_add(crypto.opened_frames, Ordering::Relaxed);
    shared
        .stats
        .frames_out
        .fetch_add(crypto.sealed_frames, Ordering::Relaxed);
    let code = ep.close_code();
    if let Some(s) = ep.connection_lost(now) {
        // A full registry ends the session (bounded memory).
        match shared.registry.insert(s, now) {
            Ok(()) => {
                shared.stats.parked.fetch_add(1, Ordering::Relaxed);
            }
            Err(full) => tracing::warn!(error = %full, "a suspended session is dropped"),
        }
    }
    let _ = shared.registry.expire(now);
    outcome?;
    match code {
        Some(code) if code != ErrorCode::NORMAL => Err(ConnError::Closed(code)),
        _ => Ok(()),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A peer running on a background thread of this process.
pub type DtpPeerHandle = crate::peer_tokio::PeerHandle<DtpPeerStats>;

/// Starts the peer on a background thread; returns once it listens.
pub fn serve(config: DtpPeerConfig) -> io::Result<DtpPeerHandle> {
    crate::peer_tokio::spawn(
        "tokio DTP peer",
        Box::new(move |stats, on_bound, shutdown| {
            run_with_stats(config, stats, on_bound, shutdown)
        }),
    )
}

/// The body of the hidden `dtp` subcommand that runs this peer in its own
/// process: prints `listening <addr>` on stdout once bound (parse it with
/// [`parse_listening_line`]), and stops when its standard input reaches
/// end of file (the parent closes the pipe, or dies).
pub fn run_child(config: DtpPeerConfig) -> io::Result<()> {
    let announce = config.announce();
    run(config, announce, stdin_closed())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

    use super::*;
    use crate::dtp_workload::BenchKeys;

    fn config(listen: SocketAddr) -> DtpPeerConfig {
        let keys = BenchKeys::generate().unwrap();
        DtpPeerConfig::new(listen, 1, Arc::new(keys.terminal_config().unwrap()))
    }

    #[test]
    fn new_takes_the_terminals_limits() {
        let c = config("127.0.0.1:0".parse().unwrap());
        assert_eq!(c.limits, c.terminal.endpoint.limits);
        assert_eq!(c.worker_threads(), 1);
    }

    #[test]
    fn serve_binds_and_shuts_down() {
        let peer = serve(config("127.0.0.1:0".parse().unwrap())).unwrap();
        assert_ne!(peer.local_addr().port(), 0);
        peer.shutdown().unwrap();
    }

    #[test]
    fn a_taken_port_is_an_error() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(serve(config(held.local_addr().unwrap())).is_err());
    }
}
