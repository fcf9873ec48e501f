//! `dtp load`: the load generator, a client service on the same engine as
//! the gateway, so the client is never the bottleneck of a comparison.
//!
//! Workloads follow `dtp_bench::workload`: `pingpong` (closed loop, or open
//! loop at a fixed rate with latency measured from each request's intended
//! send time, correcting coordinated omission), `stream` (a window of 16 KiB
//! frames per connection, goodput measured by the server's acks) and `idle`
//! (one round trip per connection, then nothing).

mod progress;
pub(crate) mod status;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use dtp_bench::latency::{LatencyRecorder, LatencySummary, Schedule};
use dtp_bench::workload::{self, DATA_FIELDS_LEN, PINGPONG_STREAM_ID, StreamWindow, Workload};
use dtp_codec::{Body, DataFrame, HEADER_LEN};
use dtp_codec::{ErrorCode, LogicalFrame};
use dtp_engine::{Ctl, Engine, EngineConfig, Frame, FrameService, Framed, Origin, Outbox};
use dtp_transports::{CloseReason, ConnId, DriverConfig, Endpoint};

pub(crate) use progress::Progress;
pub(crate) use status::{DEFAULT_MIN_SUCCESS, Failures, Share, connect_failure};

/// What to run.
#[derive(Clone, Debug)]
pub(crate) struct LoadSpec {
    pub(crate) target: Endpoint,
    pub(crate) workload: Workload,
    pub(crate) connections: usize,
    /// Measured time (after the warm-up).
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
    /// Open-loop requests per second in all (pingpong only); `None`: closed loop.
    pub(crate) rate: Option<u64>,
    /// `stream` frames in flight per connection (a multiple of 64).
    pub(crate) window: u64,
    /// Client shards (threads).
    pub(crate) shards: usize,
    pub(crate) driver: DriverConfig,
    /// Payload bytes per request (pingpong) or frame (stream); `None`: the
    /// workload's standard size (66 B, 16 KiB).
    pub(crate) payload: Option<usize>,
    /// QUIC for a `quic:` target (the server's certificate pinned).
    pub(crate) quic: Option<dtp_transports::QuicConfig>,
    /// `idle` only: open half the connections, call the phase callback
    /// with [`Phase::Half`] once they are all answered (or failed), then
    /// open the rest — so a caller can take the server's memory at half
    /// and at the whole count, and the set-up rate is that of the second
    /// half, measured without the pause.
    pub(crate) staged: bool,
}

/// What one client shard measured (merged across shards at the end).
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    /// Operations completed inside the measured window.
    pub(crate) ops: u64,
    /// Wire bytes those operations moved (both directions for pingpong,
    /// acked frames for stream).
    pub(crate) bytes: u64,
    pub(crate) latency: LatencyRecorder,
    pub(crate) connected: u64,
    pub(crate) failed: u64,
    pub(crate) errors: u64,
    /// Open loop: requests that could not be sent when due (backpressure).
    pub(crate) backlogged: u64,
    /// The OS error of the last failed connect (0: none).
    pub(crate) last_errno: i32,
    /// Refusals and CAP failures by code (DTP modes).
    pub(crate) failures: Failures,
    /// `idle`: when the last connection's round trip was answered.
    pub(crate) last_answer: Option<Instant>,
    pub(crate) done: bool,
}

impl Tally {
    /// Nothing counted yet.
    pub(crate) fn new() -> Self {
        Self {
            ops: 0,
            bytes: 0,
            latency: LatencyRecorder::new(),
            connected: 0,
            failed: 0,
            errors: 0,
            backlogged: 0,
            last_errno: 0,
            failures: Failures::default(),
            last_answer: None,
            done: false,
        }
    }

    /// Adds `o`'s counts; `done` is left to the caller.
    pub(crate) fn merge(&mut self, o: &Tally) {
        self.ops += o.ops;
        self.bytes += o.bytes;
        self.latency.merge(&o.latency);
        self.connected += o.connected;
        self.failed += o.failed;
        self.errors += o.errors;
        self.backlogged += o.backlogged;
        if o.last_errno != 0 {
            self.last_errno = o.last_errno;
        }
        self.failures.merge(&o.failures);
        self.last_answer = self.last_answer.max(o.last_answer);
    }
}

/// The result of a run.
#[derive(Clone, Debug)]
pub(crate) struct LoadResult {
    pub(crate) tally: Tally,
    pub(crate) elapsed: Duration,
    pub(crate) latency: LatencySummary,
    pub(crate) backend: String,
    /// CPU time (user + system, all threads) this process spent over the
    /// measured window, in ns: the load generator's own cost, to compare
    /// with the server's. `None` when the window did not complete or the
    /// OS's accounting could not be read.
    pub(crate) client_cpu_ns: Option<u64>,
    /// `idle`, staged: connections answered at [`Phase::Half`], and those
    /// opened after it per second (from the release to the last answer).
    pub(crate) staged: Option<Staged>,
}

/// What a staged `idle` run saw at its half and after.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Staged {
    /// Connections answered when the second half was released.
    pub(crate) at_half: u64,
    /// Connections of the second half answered per second.
    pub(crate) setup_per_s: Option<f64>,
}

impl LoadResult {
    pub(crate) fn ops_per_s(&self) -> f64 {
        self.tally.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(crate) fn bytes_per_s(&self) -> f64 {
        self.tally.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The client's CPUs busy over the window (`client_cpu_ns` / window).
    pub(crate) fn client_cpus(&self) -> Option<f64> {
        self.client_cpu_ns
            .map(|ns| ns as f64 / 1e9 / self.elapsed.as_secs_f64().max(1e-9))
    }

    /// Whether the run worked: at least `min` of the connections were
    /// established and something was answered in the measured window;
    /// else why not.
    pub(crate) fn verdict(&self, spec: &LoadSpec, min: f64) -> Result<(), String> {
        let t = &self.tally;
        let connect = (t.failed > 0).then(|| connect_failure(&spec.target, t.last_errno));
        let established = Share {
            what: "connections established",
            attempted: spec.connections as u64,
            succeeded: t.connected,
        };
        status::check(&[established], min, &t.failures, connect)?;
        if t.ops == 0 {
            return Err(format!(
                "no operation was answered in the measured window ({} errors)",
                t.errors
            ));
        }
        Ok(())
    }
}

enum ConnState {
    /// Closed loop: the send time of the one request in flight.
    Ping {
        next: u64,
        sent_at: Option<Instant>,
    },
    /// Open loop: requests carry their schedule index as sequence.
    OpenPing,
    Stream {
        window: StreamWindow,
        sent_at: std::collections::VecDeque<(u64, Instant)>,
    },
    Idle {
        answered: bool,
    },
}

/// The client service of one shard.
struct Client {
    spec: LoadSpec,
    share: usize,
    launched: usize,
    /// Staged `idle`: set once the second half may be opened.
    released: Option<Arc<AtomicBool>>,
    shared: Arc<Mutex<Tally>>,
    local: Tally,
    measure_from: Instant,
    end: Instant,
    schedule: Option<(Schedule, u64)>,
    open: Vec<ConnId>,
    rr: usize,
    payload: Bytes,
    last_flush: Instant,
}

impl Client {
    /// Bytes on the wire of one request or stream frame.
    fn frame_len(&self) -> usize {
        HEADER_LEN + DATA_FIELDS_LEN + self.payload.len()
    }

    /// The pingpong request with this sequence, carrying this run's payload.
    fn request(&self, sequence: u64) -> LogicalFrame {
        LogicalFrame::plain(
            PINGPONG_STREAM_ID,
            Body::Data(DataFrame {
                agreement_id: None,
                fragment_id: sequence,
                sequence,
                relations: Vec::new(),
                payload: self.payload.clone(),
            }),
        )
    }

    /// Whether `answer` is the server's echo of request `sequence`.
    fn check(&self, sequence: u64, answer: &LogicalFrame) -> Result<(), ErrorCode> {
        if *answer == self.request(sequence) {
            Ok(())
        } else {
            Err(ErrorCode::INVALID_VALUE)
        }
    }

    fn measuring(&self, now: Instant) -> bool {
        now >= self.measure_from && now < self.end
    }

    fn count(&mut self, now: Instant, ops: u64, bytes: u64, latency: Duration) {
        if self.measuring(now) {
            self.local.ops += ops;
            self.local.bytes += bytes;
            self.local.latency.record(latency);
        }
    }

    fn fill_stream(&mut self, state: &mut ConnState, out: &mut Outbox<'_>) {
        let ConnState::Stream { window, sent_at } = state else {
            return;
        };
        let now = Instant::now();
        if now >= self.end {
            return;
        }
        loop {
            if out.room() < self.frame_len() {
                // Out of room, not out of window: go on when the queue drains.
                out.want_writable();
                break;
            }
            let Some(seq) = window.next_sequence() else {
                break;
            };
            // The frame that fills the window is always an ack point (the
            // window is a multiple of 64), so no flush marker is needed.
            let frame = workload::stream_frame(seq, &self.payload, false);
            if out.send(&frame).is_err() {
                self.local.errors += 1;
                break;
            }
            sent_at.push_back((seq, now));
        }
    }

    fn flush(&mut self, final_flush: bool) {
        let Ok(mut shared) = self.shared.lock() else {
            return;
        };
        let delta = std::mem::replace(&mut self.local, Tally::new());
        shared.merge(&delta);
        shared.done |= final_flush;
    }
}

impl FrameService for Client {
    type Conn = ConnState;
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, out: &mut Outbox<'_>) -> ConnState {
        self.local.connected += 1;
        self.open.push(conn);
        let now = Instant::now();
        match (self.spec.workload, self.spec.rate) {
            (Workload::Pingpong, None) => {
                if out.send(&self.request(1)).is_err() {
                    self.local.errors += 1;
                }
                ConnState::Ping {
                    next: 2,
                    sent_at: Some(now),
                }
            }
            (Workload::Pingpong, Some(_)) => ConnState::OpenPing,
            (Workload::Stream, _) => {
                let Ok(window) = StreamWindow::new(self.spec.window) else {
                    // The CLI checks the window before starting; count it anyway.
                    self.local.errors += 1;
                    return ConnState::Idle { answered: true };
                };
                let mut s = ConnState::Stream {
                    window,
                    sent_at: Default::default(),
                };
                self.fill_stream(&mut s, out);
                s
            }
            (Workload::Idle, _) => {
                if out.send(&self.request(1)).is_err() {
                    self.local.errors += 1;
                }
                ConnState::Idle { answered: false }
            }
        }
    }

    fn frame(
        &mut self,
        state: &mut ConnState,
        frame: Frame,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        let frame = frame.decode(out.limits()).map_err(|e| e.code())?;
        let now = Instant::now();
        match state {
            ConnState::Ping { next, sent_at } => {
                let seq = *next - 1;
                self.check(seq, &frame)?;
                if let Some(t) = sent_at.take() {
                    self.count(now, 1, 2 * self.frame_len() as u64, now - t);
                }
                if now < self.end {
                    out.send(&self.request(*next))?;
                    *sent_at = Some(now);
                    *next += 1;
                }
            }
            ConnState::OpenPing => {
                let dtp_codec::Body::Data(d) = &frame.body else {
                    return Err(ErrorCode::INVALID_VALUE);
                };
                let seq = d.sequence;
                self.check(seq, &frame)?;
                if let Some((schedule, _)) = &self.schedule {
                    let intended = schedule.intended(seq);
                    if self.measuring(intended) {
                        self.local.ops += 1;
                        self.local.bytes += 2 * self.frame_len() as u64;
                        self.local.latency.record_open_loop(intended, now);
                    }
                }
            }
            ConnState::Stream { window, sent_at } => {
                let cumulative =
                    workload::parse_ack(&frame).map_err(|_| ErrorCode::INVALID_VALUE)?;
                let newly = window
                    .on_ack(cumulative)
                    .map_err(|_| ErrorCode::INVALID_VALUE)?;
                let mut first = None;
                while let Some(&(seq, t)) = sent_at.front() {
                    if seq > cumulative {
                        break;
                    }
                    first.get_or_insert(t);
                    sent_at.pop_front();
                }
                if let Some(t) = first {
                    // Latency of an ack batch: from its first frame's send to the ack.
                    self.count(now, newly, newly * self.frame_len() as u64, now - t);
                }
                self.fill_stream(state, out);
            }
            ConnState::Idle { answered } => {
                self.check(1, &frame)?;
                *answered = true;
                self.local.ops += 1;
                self.local.last_answer = Some(now);
            }
        }
        Ok(())
    }

    fn writable(&mut self, state: &mut ConnState, out: &mut Outbox<'_>) {
        self.fill_stream(state, out);
    }

    fn connect_failed(&mut self, _conn: ConnId, errno: i32) {
        self.local.failed += 1;
        self.local.last_errno = errno;
    }

    fn close(&mut self, _state: ConnState, reason: CloseReason, _: Instant) {
        if matches!(reason, CloseReason::ConnectFailed(_)) {
            self.local.failed += 1;
        } else if !matches!(reason, CloseReason::Local) {
            self.local.errors += 1;
        }
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        // Open connections in waves, so a large count does not flood the
        // backlog; a staged run opens half its share first.
        let allowed = match &self.released {
            Some(r) if !r.load(Ordering::Acquire) => self.share / 2,
            _ => self.share,
        };
        let wave = allowed.saturating_sub(self.launched).min(256);
        for _ in 0..wave {
            match ctl.connect(&self.spec.target) {
                Ok(_) => self.launched += 1,
                Err(_) => {
                    self.local.failed += 1;
                    self.launched += 1;
                }
            }
        }
        if let Some((schedule, mut sent)) = self.schedule.take() {
            let due = schedule.due_by(now.min(self.end));
            while sent < due && !self.open.is_empty() {
                let request = self.request(sent);
                let mut placed = false;
                for _ in 0..self.open.len() {
                    self.rr = (self.rr + 1) % self.open.len();
                    if ctl.send(self.open[self.rr], &request).is_ok() {
                        placed = true;
                        break;
                    }
                }
                if !placed {
                    self.local.backlogged += due - sent;
                    break;
                }
                sent += 1;
            }
            self.schedule = Some((schedule, sent));
        }
        if now >= self.end + Duration::from_millis(200) {
            self.flush(true);
            return None;
        }
        if now.duration_since(self.last_flush) >= Duration::from_millis(100) {
            self.last_flush = now;
            self.flush(false);
        }
        let next = match &self.schedule {
            Some((s, sent)) => s.intended(*sent).min(now + Duration::from_millis(20)),
            None => now + Duration::from_millis(20),
        };
        Some(if self.launched < allowed { now } else { next })
    }
}

/// Where a run is, for callers that sample something (a server's CPU) at
/// the edges of the measured window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The warm-up ended: the measured window starts now.
    MeasureStart,
    /// The measured window ends now (connections are still open).
    MeasureEnd,
    /// A staged `idle` run: half the connections are answered (or failed),
    /// before the rest are opened ([`LoadSpec::staged`]).
    Half,
}

/// Runs the load and returns what it measured. `progress` is called about
/// ten times a second with the seconds elapsed and the operations so far;
/// `phase` at the two edges of the measured window.
pub(crate) fn run(
    spec: &LoadSpec,
    progress: impl FnMut(f64, u64),
    phase: impl FnMut(Phase),
) -> Result<LoadResult, String> {
    let phase = std::cell::RefCell::new(phase);
    let shards = spec.shards.max(1);
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let tallies: Vec<Arc<Mutex<Tally>>> = (0..shards)
        .map(|_| Arc::new(Mutex::new(Tally::new())))
        .collect();
    let factory_tallies = tallies.clone();
    let base = spec.clone();
    let staged =
        (spec.staged && spec.workload == Workload::Idle).then(|| Arc::new(AtomicBool::new(false)));
    let factory_released = staged.clone();
    let connections = spec.connections;
    let share = move |i: usize| base_share(connections, shards, i);
    let config = EngineConfig {
        shards,
        pin: false,
        listen: Vec::new(),
        driver: spec.driver.clone(),
        limits: dtp_codec::Limits::default(),
        drain: Duration::from_secs(2),
        control_ring: 1024,
        quic: spec.quic.clone(),
    };
    let engine = Engine::start(config, move |i| {
        let share = share(i);
        let rate = base.rate.map(|r| (r / shards as u64).max(1));
        Framed::new(Client {
            spec: base.clone(),
            share,
            launched: 0,
            released: factory_released.clone(),
            shared: factory_tallies[i].clone(),
            local: Tally::new(),
            measure_from,
            end,
            schedule: rate.map(|r| (Schedule::per_second(start, r), 0)),
            open: Vec::new(),
            rr: 0,
            payload: match (base.workload, base.payload) {
                (_, Some(n)) => (0..n).map(|i| (i % 251) as u8).collect(),
                (Workload::Stream, None) => workload::stream_payload(),
                (_, None) => workload::pingpong_payload(),
            },
            last_flush: start,
        })
    })
    .map_err(|e| format!("could not start the load generator: {e}"))?;
    let backend = engine.backend().kind.name().to_owned();
    let deadline = end + Duration::from_secs(10);
    // Staged: the second half is released once the first is answered or
    // failed (or when the measured window starts, whichever comes first).
    let half: u64 = (0..shards).map(|i| (share(i) / 2) as u64).sum();
    let mut at_half: Option<(u64, Instant)> = None;
    let mut poll = || {
        let (ops, settled, done) = tallies
            .iter()
            .fold((0, 0, true), |(ops, settled, done), t| match t.lock() {
                Ok(t) => (
                    ops + t.ops,
                    settled + t.ops + t.failed + t.errors,
                    done && t.done,
                ),
                Err(_) => (ops, settled, done),
            });
        if let Some(released) = &staged
            && at_half.is_none()
            && (settled >= half || Instant::now() >= measure_from)
        {
            (phase.borrow_mut())(Phase::Half);
            at_half = Some((ops, Instant::now()));
            released.store(true, Ordering::Release);
        }
        (ops, done)
    };
    // A window that did not complete is reported as such by the caller
    // (its edges never fired).
    let window = run_window(
        start,
        measure_from,
        end,
        deadline,
        &mut poll,
        progress,
        &mut |p| (phase.borrow_mut())(p),
    );
    engine.stop();
    engine
        .join()
        .map_err(|e| format!("load generator failed: {e}"))?;
    let mut total = Tally::new();
    for t in &tallies {
        if let Ok(t) = t.lock() {
            total.merge(&t);
        }
    }
    no_connection_is_an_error(&total, &spec.target)?;
    let latency = total.latency.summary();
    let staged = at_half.map(|(at_half, released)| {
        let opened = total.ops.saturating_sub(at_half);
        let took = total
            .last_answer
            .map(|t| t.saturating_duration_since(released).as_secs_f64());
        Staged {
            at_half,
            setup_per_s: took
                .filter(|&t| t > 0.0 && opened > 0)
                .map(|t| opened as f64 / t),
        }
    });
    Ok(LoadResult {
        staged,
        tally: total,
        elapsed: spec.duration,
        latency,
        backend,
        client_cpu_ns: window.client_cpu_ns,
    })
}

/// The connections shard `i` of `shards` opens of `connections`.
fn base_share(connections: usize, shards: usize, i: usize) -> usize {
    connections / shards + usize::from(i < connections % shards)
}

/// What [`run_window`] saw.
pub(crate) struct Window {
    /// The edges not reached, latest first.
    pub(crate) missed: Vec<(Instant, Phase)>,
    /// This process's CPU time from the window's start to its end (`None`
    /// if either edge was missed or the accounting could not be read).
    pub(crate) client_cpu_ns: Option<u64>,
}

/// The measuring loop of a load run: fires `phase` at the measured window's
/// start and end (and samples this process's CPU time there), reports
/// progress about every 100 ms, until `poll` says every connection is done
/// (`(ops, done)`) or `deadline` passes.
pub(crate) fn run_window(
    start: Instant,
    measure_from: Instant,
    end: Instant,
    deadline: Instant,
    mut poll: impl FnMut() -> (u64, bool),
    mut progress: impl FnMut(f64, u64),
    phase: &mut impl FnMut(Phase),
) -> Window {
    let mut cpu_at_start = None;
    let mut client_cpu_ns = None;
    let mut edges = vec![
        (end, Phase::MeasureEnd),
        (measure_from, Phase::MeasureStart),
    ];
    loop {
        let now = Instant::now();
        let mut wake = now + Duration::from_millis(100);
        if let Some(&(at, _)) = edges.last() {
            wake = wake.min(at);
        }
        std::thread::sleep(wake.saturating_duration_since(now));
        let now = Instant::now();
        while let Some(&(at, p)) = edges.last() {
            if now < at {
                break;
            }
            let sample = dtp_bench::procstat::sample_self().ok();
            match p {
                Phase::MeasureStart => cpu_at_start = sample,
                Phase::MeasureEnd => {
                    client_cpu_ns = cpu_at_start
                        .as_ref()
                        .zip(sample.as_ref())
                        .and_then(|(a, b)| dtp_bench::procstat::delta(a, b).ok())
                        .map(|d| d.cpu_ns);
                }
                Phase::Half => {}
            }
            phase(p);
            edges.pop();
        }
        let (ops, all_done) = poll();
        progress(now.saturating_duration_since(start).as_secs_f64(), ops);
        if all_done || now > deadline {
            return Window {
                missed: edges,
                client_cpu_ns,
            };
        }
    }
}

/// A run in which no connection could be made is an error that says why
/// (`nothing listens on ADDR`).
pub(crate) fn no_connection_is_an_error(total: &Tally, target: &Endpoint) -> Result<(), String> {
    if total.connected == 0 {
        return Err(connect_failure(target, total.last_errno));
    }
    Ok(())
}
