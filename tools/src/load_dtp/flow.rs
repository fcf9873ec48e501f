//! One logical connection of `dtp load --dtp`: a Fay session that lives
//! across as many transport connections as its forced disconnects need.
//!
//! **Owns**: the [`SuspendedSession`] between two transport connections, the workload's state (the one
//! pingpong fragment in flight, the stream's unacknowledged send times), the
//! cut schedule, and the per-flow counters (`sent`, `delivered`,
//! `duplicated`, `resumes`). **Never touches**: sockets, the clock, threads
//! or global randomness (time and random bytes are passed in), nor the
//! endpoint of a connection: the driver owns it and lends it to every call
//! (the gateway crate's `DtpClient` is one driver, the unit tests'
//! in-memory pair another), nor the protocol's rules (the endpoint's).
//!
//! Driving order (the gateway crate's `drive_endpoint`), after every input
//! (`connected`, a frame, a timeout, a writable transport): each event to
//! `handle_event`, then `events_done`, then `poll_transmit` (which also
//! sends the workload's next fragments and performs a due cut), then
//! `poll_timeout`. `handle_lost` when the transport is gone.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_bench::latency::LatencyRecorder;
use dtp_codec::{AgreementId, ErrorCode, FragmentId, peek_frame_len};
use dtp_gateway::dtp::{DtpEndpoint, DtpEvent, OpenFailure, SuspendedSession};
use dtp_workload::dtp::DtpWorkload;

use crate::load::Failures;

#[cfg(test)]
mod tests;

/// Consecutive transport connections a flow may fail to establish a
/// session on before it gives up (connect refused, CAP failed).
pub(crate) const MAX_FRESH_ATTEMPTS: u32 = 5;

/// Bytes a sealed data frame adds to its payload, at most (header, data
/// fields, seal counter and tag): the room a stream send needs.
pub(crate) const FRAME_OVERHEAD: usize = 96;

/// What a flow runs, and when.
#[derive(Clone, Debug)]
pub(crate) struct FlowConfig {
    /// The workload its agreement names.
    pub(crate) workload: DtpWorkload,
    /// The payload of every fragment.
    pub(crate) payload: Bytes,
    /// Cut the transport connection at the N-th fragment sent on it (the
    /// N-th fragment's sealed frame goes out only in part).
    pub(crate) disconnect_every: Option<u64>,
    /// Start of the measured window.
    pub(crate) measure_from: Instant,
    /// End of the measured window: no new fragment is sent from here on;
    /// the flow closes once everything it sent is delivered.
    pub(crate) end: Instant,
}

/// What the flows of a shard measured: the driver owns one and lends it to
/// every input, so a flow carries no histogram of its own.
#[derive(Debug)]
pub(crate) struct Stats {
    /// Operations inside the measured window (pingpong answers, stream
    /// fragments acknowledged).
    pub(crate) ops: u64,
    /// Payload bytes of those operations (both directions for pingpong).
    pub(crate) bytes: u64,
    /// Round trips (pingpong) or ack batches (stream) inside the window.
    pub(crate) latency: LatencyRecorder,
    /// From a cut to the resumed session's `Established { resumed: true }`.
    pub(crate) resume_latency: LatencyRecorder,
    /// Protocol errors, refused agreements, wrong answers, unexpected drops.
    pub(crate) errors: u64,
    /// Why connections closed with an error code (CAP refused, …).
    pub(crate) failures: Failures,
}

impl Stats {
    /// Nothing measured yet.
    pub(crate) fn new() -> Self {
        Self {
            ops: 0,
            bytes: 0,
            latency: LatencyRecorder::new(),
            resume_latency: LatencyRecorder::new(),
            errors: 0,
            failures: Failures::default(),
        }
    }
}

/// A flow's counters over the whole run (warm-up and drain included), so
/// that `sent - delivered` is what was lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlowCounters {
    /// Fragments handed to the endpoint (`send_fragment` succeeded).
    pub(crate) sent: u64,
    /// Pingpong: answers received; stream: fragments acknowledged.
    pub(crate) delivered: u64,
    /// Pingpong answers received a second time.
    pub(crate) duplicated: u64,
    /// Sessions resumed (`Established { resumed: true }`).
    pub(crate) resumes: u64,
    /// Cuts made (`disconnect_every`).
    pub(crate) cuts: u64,
    /// New sessions established (`Established { resumed: false }`).
    pub(crate) sessions: u64,
}

/// What the driver must do after `poll_transmit`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Transmit {
    /// Close the transport once the bytes appended are sent (a cut, or the
    /// flow finished).
    pub(crate) close: bool,
    /// The room ran out: call `poll_transmit` again when the transport has
    /// room.
    pub(crate) want_writable: bool,
}

/// Where a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Needs a transport connection (the driver opens one).
    Waiting,
    /// The driver is opening one.
    Connecting,
    /// An endpoint runs on the transport.
    Open,
    /// A cut is queued: the transport closes after the partial frame.
    Cutting,
    /// Everything delivered, the session closed: the transport closes.
    Closing,
    /// Done (drained and closed).
    Finished,
    /// Given up: the session ended or no connection could be made.
    Failed,
}

/// SPEC SEQ-1, SEQ-3a, SEQ-4, SEQ-5, RES-1 … RES-4 (Fay side, as a load
/// generator): one logical connection's session across transport cuts.
#[derive(Debug)]
pub(crate) struct Flow {
    config: FlowConfig,
    phase: Phase,
    /// SPEC SES-2: the session between two transport connections.
    suspended: Option<SuspendedSession>,
    agreement: Option<AgreementId>,
    next_fragment: FragmentId,
    /// Fragments sent on the current transport connection.
    since_cut: u64,
    /// When the session was last cut (or lost), until it resumes.
    cut_at: Option<Instant>,
    /// Pingpong: the fragment in flight and when it was sent.
    outstanding: Option<(FragmentId, Instant)>,
    /// Pingpong: the highest fragment answered.
    answered: FragmentId,
    /// Stream: send times of the fragments not yet acknowledged, in
    /// sequence order (bounded by the resume cache's ceiling: one entry per
    /// cached fragment).
    in_flight: VecDeque<Instant>,
    fresh_failures: u32,
    counters: FlowCounters,
    /// The error of this batch of events (the one that closes a
    /// connection comes just before its close).
    last_error: Option<(ErrorCode, String)>,
    scratch: BytesMut,
}

impl Flow {
    /// A flow that wants its first transport connection.
    pub(crate) fn new(config: FlowConfig) -> Self {
        Self {
            config,
            phase: Phase::Waiting,
            suspended: None,
            agreement: None,
            next_fragment: 1,
            since_cut: 0,
            cut_at: None,
            outstanding: None,
            answered: 0,
            in_flight: VecDeque::new(),
            fresh_failures: 0,
            counters: FlowCounters::default(),
            last_error: None,
            scratch: BytesMut::new(),
        }
    }

    // ----- getters -----

    /// Whether the driver should open a transport connection for it.
    pub(crate) fn wants_connection(&self) -> bool {
        self.phase == Phase::Waiting
    }

    /// Whether the flow is done, drained or given up.
    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished | Phase::Failed)
    }

    /// Whether the flow gave up.
    pub(crate) fn has_failed(&self) -> bool {
        self.phase == Phase::Failed
    }

    /// The counters so far.
    pub(crate) fn counters(&self) -> FlowCounters {
        self.counters
    }

    /// When the connection next times out: the endpoint's deadline, and the
    /// end of the measured window (a flow with nothing in flight closes then).
    pub(crate) fn poll_timeout(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        if self.phase != Phase::Open {
            return None;
        }
        let ep = ep.poll_timeout();
        let end = (now < self.config.end).then_some(self.config.end);
        match (ep, end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ----- inputs -----

    /// The driver is opening a transport connection.
    pub(crate) fn connecting(&mut self) {
        if self.phase == Phase::Waiting {
            self.phase = Phase::Connecting;
        }
    }

    /// SPEC SEQ-5: the session the next connection resumes (`None`: a
    /// new session starts).
    pub(crate) fn take_session(&mut self) -> Option<SuspendedSession> {
        self.suspended.take()
    }

    /// SPEC SEQ-1, SEQ-5: the transport connection is up and its endpoint
    /// runs CAP, for a new session or to resume the suspended one.
    pub(crate) fn connected(&mut self) {
        self.phase = Phase::Open;
        self.since_cut = 0;
    }

    /// The connection got no endpoint: on a configuration error the flow
    /// keeps its session and fails; when the random generator failed, the
    /// connection counts as dropped. The driver closes the transport.
    pub(crate) fn open_failed(
        &mut self,
        why: OpenFailure,
        session: Option<SuspendedSession>,
        now: Instant,
        stats: &mut Stats,
    ) {
        match why {
            OpenFailure::Endpoint(_) => {
                self.suspended = session;
                stats.errors += 1;
                self.phase = Phase::Failed;
            }
            OpenFailure::Random => {
                // As a connection dropped under the flow (the driver
                // counts the generator's failure).
                self.phase = Phase::Open;
                self.lose(session, now, stats);
            }
        }
    }

    /// The driver could not open a transport connection.
    pub(crate) fn handle_connect_failed(&mut self) {
        if self.phase == Phase::Connecting {
            self.retry_or_fail();
        }
    }

    /// SPEC SEQ-5, SES-2: the transport connection is gone. A session that
    /// can be resumed is kept for the next connection (a resume attempt
    /// that did not finish hands it back, `take_suspended`); otherwise the
    /// flow starts over (no session yet) or fails (its session ended).
    pub(crate) fn handle_lost(&mut self, ep: Option<DtpEndpoint>, now: Instant, stats: &mut Stats) {
        let Some(mut ep) = ep else {
            if self.phase == Phase::Connecting {
                self.retry_or_fail();
            }
            return;
        };
        let suspended = ep.connection_lost(now).or_else(|| ep.take_suspended());
        self.lose(suspended, now, stats);
    }

    /// The transport is gone, leaving `suspended` to resume.
    fn lose(&mut self, suspended: Option<SuspendedSession>, now: Instant, stats: &mut Stats) {
        match self.phase {
            Phase::Closing | Phase::Finished => {
                self.phase = Phase::Finished;
                return;
            }
            Phase::Failed => return,
            Phase::Cutting => {}
            _ => {
                // Not ours: the transport or the peer dropped it.
                stats.errors += 1;
                self.cut_at.get_or_insert(now);
            }
        }
        if let Some(s) = suspended {
            self.suspended = Some(s);
            self.phase = Phase::Waiting;
        } else if self.agreement.is_none() && self.counters.sent == 0 {
            self.retry_or_fail();
        } else {
            // The session ended: what it had in flight is lost.
            if self.phase == Phase::Cutting {
                stats.errors += 1;
            }
            self.phase = Phase::Failed;
        }
    }

    fn retry_or_fail(&mut self) {
        self.fresh_failures += 1;
        self.phase = if self.fresh_failures >= MAX_FRESH_ATTEMPTS {
            Phase::Failed
        } else {
            Phase::Waiting
        };
    }

    /// One event of the connection's endpoint, into the workload.
    pub(crate) fn handle_event(
        &mut self,
        ep: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
        stats: &mut Stats,
    ) {
        {
            match event {
                DtpEvent::Established { resumed, .. } => {
                    self.fresh_failures = 0;
                    if !resumed {
                        self.counters.sessions += 1;
                    }
                    if resumed {
                        self.counters.resumes += 1;
                        if let Some(at) = self.cut_at.take() {
                            stats
                                .resume_latency
                                .record(now.saturating_duration_since(at));
                        }
                        if self.agreement.is_none() {
                            self.agreement = ep.agreements().next().map(|a| a.id);
                        }
                    } else if let Err(e) = ep.request_collection(self.config.workload.terms(), now)
                    {
                        tracing::debug!(error = %e, "could not request the workload's agreement");
                        stats.errors += 1;
                    }
                }
                DtpEvent::AgreementActive { agreement_id, .. } => {
                    self.agreement = Some(agreement_id);
                }
                DtpEvent::AgreementRejected { reason, .. } => {
                    tracing::warn!(%reason, "the terminal rejected the workload's agreement");
                    stats.errors += 1;
                    ep.close("agreement rejected");
                }
                DtpEvent::RequestFailed { reason, .. } => {
                    tracing::debug!(?reason, "the agreement request failed");
                    stats.errors += 1;
                }
                DtpEvent::Fragment {
                    fragment_id,
                    payload,
                    ..
                } => self.on_fragment(fragment_id, &payload, now, stats),
                DtpEvent::Error(e) => {
                    tracing::debug!(error = %e, "DTP error on a load connection");
                    stats.errors += 1;
                    self.last_error = Some((e.code(), crate::load::status::reason(&e)));
                }
                DtpEvent::Closed { code } if code != ErrorCode::NORMAL => {
                    let message = match &self.last_error {
                        Some((c, m)) if *c == code => m.as_str(),
                        _ => "the terminal closed the connection",
                    };
                    stats.failures.record(code, message);
                }
                DtpEvent::AgreementEnded { .. } => {
                    self.agreement = None;
                }
                _ => {}
            }
        }
    }

    /// A batch of events handled: what the resume cache let go was
    /// acknowledged.
    pub(crate) fn events_done(&mut self, ep: &DtpEndpoint, now: Instant, stats: &mut Stats) {
        self.last_error = None;
        self.settle_acks(ep, now, stats);
    }

    /// A pingpong answer (the stream workload gets none).
    fn on_fragment(&mut self, id: FragmentId, payload: &[u8], now: Instant, stats: &mut Stats) {
        match self.outstanding {
            Some((want, sent_at))
                if want == id && self.config.workload == DtpWorkload::Pingpong =>
            {
                self.outstanding = None;
                self.answered = id;
                self.counters.delivered += 1;
                if payload != self.config.payload.as_ref() {
                    stats.errors += 1;
                }
                if self.measuring(now) {
                    stats.ops += 1;
                    stats.bytes += 2 * payload.len() as u64;
                    stats.latency.record(now.saturating_duration_since(sent_at));
                }
            }
            _ if id <= self.answered => self.counters.duplicated += 1,
            _ => stats.errors += 1,
        }
    }

    /// SPEC RES-2 (stream): fragments that left the resume cache were
    /// acknowledged.
    fn settle_acks(&mut self, ep: &DtpEndpoint, now: Instant, stats: &mut Stats) {
        if !ep.is_established() || self.config.workload != DtpWorkload::Stream {
            return;
        }
        let cached = ep.resume_cache().0;
        let mut first = None;
        let mut newly = 0u64;
        while self.in_flight.len() > cached {
            let Some(t) = self.in_flight.pop_front() else {
                break;
            };
            first.get_or_insert(t);
            newly += 1;
        }
        self.counters.delivered += newly;
        if let Some(t) = first
            && self.measuring(now)
        {
            stats.ops += newly;
            stats.bytes += newly * self.config.payload.len() as u64;
            stats.latency.record(now.saturating_duration_since(t));
        }
    }

    fn measuring(&self, now: Instant) -> bool {
        now >= self.config.measure_from && now < self.config.end
    }

    // ----- outputs -----

    /// Appends to `dst` what the connection sends now: the workload's next
    /// fragments (within `room` bytes for the stream), sealed, and — when a
    /// cut is due — only a prefix (1 ..= len − 1 bytes, from `rng`) of the
    /// cut fragment's sealed frame, asking the driver to close.
    pub(crate) fn poll_transmit(
        &mut self,
        ep: &mut DtpEndpoint,
        dst: &mut BytesMut,
        room: usize,
        now: Instant,
        rng: &mut dyn FnMut(&mut [u8]),
        stats: &mut Stats,
    ) -> Transmit {
        let mut t = Transmit::default();
        if self.phase != Phase::Open {
            return t;
        }
        let base = dst.len();
        if let Some(agreement) = self.agreement
            && ep.is_established()
            && now < self.config.end
        {
            loop {
                if self.config.workload == DtpWorkload::Pingpong && self.outstanding.is_some() {
                    break;
                }
                let used = dst.len() - base;
                if room.saturating_sub(used) < self.config.payload.len() + FRAME_OVERHEAD {
                    t.want_writable = true;
                    break;
                }
                let cut = self
                    .config
                    .disconnect_every
                    .is_some_and(|n| self.since_cut + 1 >= n);
                // Seal what is queued now, so `used` counts every byte (and
                // before a cut, whole frames go first: only the cut
                // fragment is torn).
                ep.poll_transmit(dst);
                match ep.send_fragment(
                    agreement,
                    self.next_fragment,
                    Vec::new(),
                    self.config.payload.clone(),
                ) {
                    Ok(_) => {}
                    // SPEC RES-4: the cache is full; `Writable` follows an ack.
                    Err(e) if e.code() == ErrorCode::BUFFER_FULL => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "send_fragment failed");
                        stats.errors += 1;
                        break;
                    }
                }
                match self.config.workload {
                    DtpWorkload::Pingpong => self.outstanding = Some((self.next_fragment, now)),
                    DtpWorkload::Stream => self.in_flight.push_back(now),
                }
                self.next_fragment += 1;
                self.counters.sent += 1;
                self.since_cut += 1;
                if cut {
                    self.cut(ep, dst, now, rng);
                    t.close = true;
                    return t;
                }
                ep.poll_transmit(dst);
            }
        }
        ep.poll_transmit(dst);
        // Drained after the window: close the session cleanly.
        let drained = self.outstanding.is_none() && self.in_flight.is_empty();
        if now >= self.config.end && ep.is_established() && drained {
            ep.close("load finished");
            ep.poll_transmit(dst);
            self.phase = Phase::Closing;
            t.close = true;
        } else if ep.is_closed() {
            t.close = true;
        }
        t
    }

    /// Seals what is queued into the scratch buffer and appends only a part
    /// of its first frame (the fragment just sent) to `dst`.
    fn cut(
        &mut self,
        ep: &mut DtpEndpoint,
        dst: &mut BytesMut,
        now: Instant,
        rng: &mut dyn FnMut(&mut [u8]),
    ) {
        self.scratch.clear();
        ep.poll_transmit(&mut self.scratch);
        let limits = ep.config().limits;
        let len = match peek_frame_len(&self.scratch, &limits) {
            Ok(len) if len <= self.scratch.len() => len,
            _ => self.scratch.len(),
        };
        let prefix = cut_offset(len, rng);
        dst.extend_from_slice(&self.scratch[..prefix]);
        self.scratch.clear();
        self.phase = Phase::Cutting;
        self.cut_at = Some(now);
        self.since_cut = 0;
        self.counters.cuts += 1;
    }
}

/// A random prefix length inside a frame of `len` bytes: 1 ..= len − 1
/// (0 for a frame of one byte or none).
pub(crate) fn cut_offset(len: usize, rng: &mut dyn FnMut(&mut [u8])) -> usize {
    if len < 2 {
        return 0;
    }
    let mut b = [0u8; 8];
    rng(&mut b);
    let r = u64::from_le_bytes(b);
    1 + (r % (len as u64 - 1)) as usize
}

/// The resume latency quantiles reported, in microseconds.
pub(crate) fn resume_quantiles(r: &LatencyRecorder) -> (u64, u64) {
    if r.count() == 0 {
        return (0, 0);
    }
    (r.quantile_us(0.5), r.quantile_us(0.99))
}

/// How long a run waits, after its measured window, for flows to drain
/// (a resume may wait for the gateway's `RESUME_GRACE`).
pub(crate) const DRAIN: Duration = Duration::from_secs(5);
