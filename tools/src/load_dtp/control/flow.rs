//! One Fay of `dtp load --dtp --control`: a DTP session on one transport
//! connection that loops AuthRequests (and releases) for its resource, or
//! (`idle`) holds one session with heartbeats to the end of the run.
//!
//! **Owns**: where its request loop is (`Step`), and what it measures into
//! the shard's [`ControlStats`]. **Never touches**: sockets, the clock,
//! threads or global randomness (time and random bytes are passed in, as
//! for `super::super::flow`), its connection's [`DtpEndpoint`] (the
//! driver's, lent to every call), nor the terminal's rules.
//!
//! Driving order (the gateway crate's `drive_endpoint`), after every input
//! (`connected`, a frame, a timeout): each event to `handle_event`, then
//! `events_done`, then `poll_transmit` (which also sends the loop's next
//! message), then `poll_timeout`; `handle_lost` when the transport is gone.
//! A flow never resumes: a connection lost under it is an error and the
//! flow gives up (its sessions end on the terminal by liveness, LIV-4).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_bench::control_workload::ControlMode;
use dtp_codec::{
    AccessMode, AuthOutcome, AuthRequest, AuthResult, Beat, ControlMessage, ErrorCode, Heartbeat,
    HeartbeatAck, SessionId, SessionRelease, SessionState,
};
use dtp_gateway::dtp::{DtpEndpoint, DtpEvent, FayConfig, OpenFailure};

use super::stats::ControlStats;
use crate::load_dtp::flow::MAX_FRESH_ATTEMPTS;

/// How long a request or a release may wait for its answer before the
/// flow counts a timeout and gives up (a refused release gets no answer:
/// the codec has no reply that could carry it).
pub(crate) const STALL: Duration = Duration::from_secs(5);

/// How long a Fay waits before asking again after E_RESOURCE_BUSY: the
/// resource is between sessions (its last one still `terminating`, say,
/// while a slow backend revokes it), and asking again at once only makes
/// the gateway refuse again (with etcd, 150k–210k refusals per run).
pub(crate) const BUSY_BACKOFF: Duration = Duration::from_millis(2);

/// The reason a handover gives the source session's end (SPEC TS-11).
const HANDED_OVER: &str = "handed_over";

/// What every flow of a run shares.
#[derive(Clone, Debug)]
pub(crate) struct ControlFlowConfig {
    /// Decisions or handovers.
    pub(crate) mode: ControlMode,
    /// The access mode of every AuthRequest.
    pub(crate) access: AccessMode,
    /// Start of the measured window.
    pub(crate) measure_from: Instant,
    /// End of the measured window: no request is sent from here on; the
    /// flow releases what it holds and closes.
    pub(crate) end: Instant,
    /// `idle`: between two heartbeats of a held session (SPEC LIV-2).
    pub(crate) heartbeat: Duration,
}

/// One Fay: who it is and what it asks for.
#[derive(Clone, Debug)]
pub(crate) struct FaySetup {
    /// Its keys, credential and endpoint settings.
    pub(crate) fay: Arc<FayConfig>,
    /// Its id (the credential's).
    pub(crate) fay_id: String,
    /// The resource it asks for.
    pub(crate) resource_id: String,
    /// Its place in the plan: spreads the Fays' heartbeats over the
    /// interval ([`beat_offset`]).
    pub(crate) slot: usize,
}

/// Where a flow's connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Needs a transport connection (the driver opens one).
    Waiting,
    /// The driver is opening one.
    Connecting,
    /// An endpoint runs on it (CAP, then the loop).
    Open,
    /// The session is closed: the transport closes.
    Closing,
    /// Done.
    Finished,
    /// Given up.
    Failed,
}

/// Where a flow's request loop is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Nothing asked, nothing held.
    Idle,
    /// Refused E_RESOURCE_BUSY: asks again at `until` ([`BUSY_BACKOFF`]).
    Backoff { until: Instant },
    /// An AuthRequest awaits its AuthResult.
    Requesting { request_id: u64, at: Instant },
    /// A session is held (handovers: until the other Fay takes it; idle:
    /// to the end, beating at `next_beat`).
    Holding {
        session_id: SessionId,
        next_beat: Instant,
    },
    /// A SessionRelease awaits SessionStateChanged(terminated).
    Releasing { session_id: SessionId, at: Instant },
}

/// SPEC TS-5, TS-6, TS-13, TS-15, HO-1 (runtime side, as a load
/// generator): one Fay's request loop.
#[derive(Debug)]
pub(crate) struct ControlFlow {
    config: ControlFlowConfig,
    setup: FaySetup,
    /// The credential bytes every AuthRequest carries.
    credential: Bytes,
    phase: Phase,
    step: Step,
    next_request: u64,
    /// The last session held was handed over: the next grant is a
    /// handover won.
    lost_to_handover: bool,
    fresh_failures: u32,
    /// The next heartbeat's sequence number (SPEC LIV-2: from 0, per
    /// session) and the last one sent, unanswered, with its send time.
    beat_sequence: u64,
    beat_in_flight: Option<(u64, Instant)>,
    /// It got its first AuthResult (or gave up): it no longer counts
    /// against the opening limit ([`Self::is_opening`]).
    settled: bool,
    /// It still held its session when the window ended.
    held_to_end: bool,
    /// The error of this batch of events (the one that closes a
    /// connection comes just before its close).
    last_error: Option<(dtp_codec::ErrorCode, String)>,
}

impl ControlFlow {
    /// A flow that wants its transport connection.
    pub(crate) fn new(config: ControlFlowConfig, setup: FaySetup) -> Self {
        let credential = setup.fay.cap.credential.as_bytes().clone();
        Self {
            config,
            setup,
            credential,
            phase: Phase::Waiting,
            step: Step::Idle,
            next_request: 1,
            lost_to_handover: false,
            fresh_failures: 0,
            beat_sequence: 0,
            beat_in_flight: None,
            settled: false,
            held_to_end: false,
            last_error: None,
        }
    }

    /// Where its connection is.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether it is done or gave up.
    pub(crate) fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished | Phase::Failed)
    }

    /// Whether it is still opening: connecting, in CAP, or waiting for its
    /// first AuthResult (the client bounds how many do that at once).
    pub(crate) fn is_opening(&self) -> bool {
        !self.settled && !self.is_finished()
    }

    /// Whether it still held its session when the window ended.
    pub(crate) fn held_to_end(&self) -> bool {
        self.held_to_end
    }

    /// Whether it holds a session now.
    pub(crate) fn is_holding(&self) -> bool {
        self.phase == Phase::Open && matches!(self.step, Step::Holding { .. })
    }

    /// When the connection next times out: the endpoint's deadline, the
    /// window's end (a holder releases then) and the stall deadline.
    pub(crate) fn poll_timeout(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        if self.phase != Phase::Open {
            return None;
        }
        let ep = ep.poll_timeout();
        let own = match self.step {
            Step::Requesting { at, .. } | Step::Releasing { at, .. } => Some(at + STALL),
            Step::Holding { next_beat, .. } if self.config.mode == ControlMode::Idle => {
                Some(next_beat.min(self.config.end))
            }
            Step::Holding { .. } => (now < self.config.end).then_some(self.config.end),
            Step::Idle => None,
            Step::Backoff { until } => Some(until),
        };
        match (ep, own) {
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

    /// The keys and credential of this Fay's endpoints.
    pub(crate) fn fay(&self) -> &FayConfig {
        &self.setup.fay
    }

    /// SPEC SEQ-1: the transport is up and its endpoint runs CAP.
    pub(crate) fn connected(&mut self) {
        self.phase = Phase::Open;
    }

    /// The connection got no endpoint: a configuration error gives up;
    /// when the random generator failed (the driver counts that), the
    /// connection counts as dropped during CAP.
    pub(crate) fn open_failed(&mut self, why: OpenFailure, stats: &mut ControlStats) {
        stats.errors += 1;
        match why {
            OpenFailure::Endpoint(_) => self.phase = Phase::Failed,
            OpenFailure::Random => self.retry_or_fail(),
        }
    }

    /// The driver could not open a transport connection.
    pub(crate) fn handle_connect_failed(&mut self) {
        if self.phase == Phase::Connecting {
            self.retry_or_fail();
        }
    }

    /// The transport is gone: the end of a closing flow; dropped during
    /// CAP, a retry (up to `MAX_FRESH_ATTEMPTS` in a row); otherwise an
    /// error, and the flow gives up.
    pub(crate) fn handle_lost(&mut self, ep: Option<DtpEndpoint>, stats: &mut ControlStats) {
        let established = ep.is_some_and(|ep| ep.session_id().is_some());
        if self.is_holding() {
            stats.lost += 1;
        }
        match self.phase {
            Phase::Closing | Phase::Finished => self.phase = Phase::Finished,
            Phase::Failed => {}
            Phase::Waiting | Phase::Connecting => self.retry_or_fail(),
            Phase::Open => {
                stats.errors += 1;
                if established {
                    self.phase = Phase::Failed;
                } else {
                    self.retry_or_fail();
                }
            }
        }
    }

    fn retry_or_fail(&mut self) {
        self.fresh_failures += 1;
        if self.fresh_failures >= MAX_FRESH_ATTEMPTS {
            self.settled = true;
        }
        self.phase = if self.fresh_failures >= MAX_FRESH_ATTEMPTS {
            Phase::Failed
        } else {
            Phase::Waiting
        };
    }

    /// One event of the connection's endpoint, into the loop.
    pub(crate) fn handle_event(&mut self, event: DtpEvent, now: Instant, stats: &mut ControlStats) {
        {
            match event {
                DtpEvent::Established { .. } => {
                    self.fresh_failures = 0;
                    stats.established += 1;
                }
                DtpEvent::Control(ControlMessage::AuthResult(r)) => {
                    self.settled = true;
                    self.on_auth_result(r, now, stats);
                }
                DtpEvent::Control(ControlMessage::HeartbeatAck(a)) => {
                    self.on_heartbeat_ack(&a, now, stats);
                }
                DtpEvent::Control(ControlMessage::SessionStateChanged(c))
                    if c.new_state == SessionState::Terminated =>
                {
                    self.on_terminated(c.session_id, c.reason.as_deref(), now, stats);
                }
                DtpEvent::Control(ControlMessage::HandoverFailedNotification(n)) => {
                    tracing::debug!(reason = ?n.reason, "a handover failed");
                    stats.handover_failures += 1;
                }
                DtpEvent::Error(e) => {
                    tracing::debug!(error = %e, "DTP error on a control load connection");
                    stats.errors += 1;
                    self.last_error = Some((e.code(), crate::load::status::reason(&e)));
                }
                DtpEvent::Closed { code } => {
                    // The terminal ended the session (CAP refused, a
                    // protocol error): this Fay is done.
                    tracing::debug!(%code, fay = %self.setup.fay_id, "the terminal closed a control load connection");
                    let message = match &self.last_error {
                        Some((c, m)) if *c == code => m.as_str(),
                        _ => "the terminal closed the connection",
                    };
                    if code != dtp_codec::ErrorCode::NORMAL {
                        stats.failures.record(code, message);
                    }
                    if self.is_holding() {
                        stats.lost += 1;
                    }
                    stats.errors += 1;
                    self.phase = Phase::Failed;
                    self.settled = true;
                }
                _ => {}
            }
        }
    }

    /// A batch of events handled.
    pub(crate) fn events_done(&mut self) {
        self.last_error = None;
    }

    fn measuring(&self, now: Instant) -> bool {
        now >= self.config.measure_from && now < self.config.end
    }

    /// SPEC TS-6: the answer to the request in flight.
    fn on_auth_result(&mut self, r: AuthResult, now: Instant, stats: &mut ControlStats) {
        let Step::Requesting { request_id, at } = self.step else {
            stats.errors += 1;
            return;
        };
        if r.request_id != request_id {
            stats.errors += 1;
            return;
        }
        let measuring = self.measuring(now);
        let latency = now.saturating_duration_since(at);
        if measuring {
            stats.decisions += 1;
            stats.decision_latency.record(latency);
        }
        self.step = match r.outcome {
            AuthOutcome::Granted { session_id } => {
                stats.granted += 1;
                if std::mem::take(&mut self.lost_to_handover) && measuring {
                    stats.handovers += 1;
                    stats.handover_latency.record(latency);
                }
                self.beat_sequence = 0;
                self.beat_in_flight = None;
                Step::Holding {
                    session_id,
                    next_beat: now + beat_offset(self.setup.slot, self.config.heartbeat),
                }
            }
            AuthOutcome::Refused { code, message } => {
                tracing::debug!(%code, %message, "AuthRequest refused");
                *stats.refused.entry(code.0).or_default() += 1;
                stats.failures.record(code, &message);
                if code == ErrorCode::E_RESOURCE_BUSY {
                    Step::Backoff {
                        until: now + BUSY_BACKOFF,
                    }
                } else {
                    Step::Idle
                }
            }
        };
    }

    /// SPEC TS-15: a session of this Fay reached terminated.
    fn on_terminated(
        &mut self,
        id: SessionId,
        reason: Option<&str>,
        now: Instant,
        stats: &mut ControlStats,
    ) {
        match self.step {
            Step::Releasing { session_id, at } if session_id == id => {
                if self.measuring(now) {
                    stats
                        .release_latency
                        .record(now.saturating_duration_since(at));
                }
                self.step = Step::Idle;
            }
            Step::Holding { session_id, .. } if session_id == id => {
                if reason == Some(HANDED_OVER) {
                    self.lost_to_handover = true;
                } else {
                    tracing::debug!(?reason, "a held session ended");
                    stats.errors += 1;
                    stats.ended += 1;
                }
                self.step = Step::Idle;
            }
            // A release answered after a handover already ended the
            // session (or the other way round): nothing more to do.
            _ => {}
        }
    }

    /// SPEC LIV-2: the terminal acknowledged a heartbeat of the session
    /// held; its latency when it answers the last one sent.
    fn on_heartbeat_ack(&mut self, a: &HeartbeatAck, now: Instant, stats: &mut ControlStats) {
        let Step::Holding { session_id, .. } = self.step else {
            return;
        };
        for beat in a.beats.iter().filter(|b| b.session_id == session_id) {
            stats.heartbeats_answered += 1;
            if let Some((sequence, at)) = self.beat_in_flight
                && sequence == beat.sequence_number
            {
                self.beat_in_flight = None;
                if self.measuring(now) {
                    stats
                        .heartbeat_latency
                        .record(now.saturating_duration_since(at));
                }
            }
        }
    }

    // ----- outputs -----

    /// Appends what the connection sends now: the loop's next message,
    /// sealed; at the end, the session's close. True: the driver closes
    /// the transport once these bytes are sent.
    pub(crate) fn poll_transmit(
        &mut self,
        ep: &mut DtpEndpoint,
        dst: &mut BytesMut,
        now: Instant,
        stats: &mut ControlStats,
    ) -> bool {
        match self.phase {
            Phase::Open => {}
            // Given up under an open transport (the terminal closed the
            // session): close it.
            Phase::Failed => return true,
            _ => return false,
        }
        self.advance(ep, now, stats);
        ep.poll_transmit(dst);
        matches!(self.phase, Phase::Closing | Phase::Failed) || ep.is_closed()
    }

    /// Sends the loop's next message, if one is due.
    fn advance(&mut self, ep: &mut DtpEndpoint, now: Instant, stats: &mut ControlStats) {
        if !ep.is_established() {
            return;
        }
        let msg = match self.step {
            Step::Requesting { at, .. } | Step::Releasing { at, .. }
                if now.saturating_duration_since(at) >= STALL =>
            {
                stats.timeouts += 1;
                ep.close("control load: no answer");
                self.phase = Phase::Failed;
                return;
            }
            Step::Requesting { .. } | Step::Releasing { .. } => return,
            Step::Holding { session_id, .. }
                if self.config.mode == ControlMode::Decisions || now >= self.config.end =>
            {
                self.held_to_end |= now >= self.config.end;
                self.step = Step::Releasing {
                    session_id,
                    at: now,
                };
                ControlMessage::SessionRelease(SessionRelease { session_id })
            }
            Step::Holding {
                session_id,
                next_beat,
            } if self.config.mode == ControlMode::Idle && now >= next_beat => {
                self.step = Step::Holding {
                    session_id,
                    next_beat: now + self.config.heartbeat,
                };
                let sequence_number = self.beat_sequence;
                self.beat_sequence += 1;
                self.beat_in_flight = Some((sequence_number, now));
                stats.heartbeats_sent += 1;
                ControlMessage::Heartbeat(Heartbeat {
                    beats: vec![Beat {
                        session_id,
                        sequence_number,
                    }],
                })
            }
            Step::Holding { .. } => return,
            Step::Backoff { until } if now < until => return,
            Step::Idle | Step::Backoff { .. } if now >= self.config.end => {
                ep.close("load finished");
                self.phase = Phase::Closing;
                return;
            }
            Step::Idle | Step::Backoff { .. } => {
                let request_id = self.next_request;
                self.next_request += 1;
                self.step = Step::Requesting {
                    request_id,
                    at: now,
                };
                ControlMessage::AuthRequest(AuthRequest {
                    request_id,
                    fay_id: self.setup.fay_id.clone(),
                    resource_id: self.setup.resource_id.clone(),
                    access_mode: self.config.access,
                    credential: self.credential.clone(),
                })
            }
        };
        if let Err(e) = ep.send_control(msg) {
            tracing::debug!(error = %e, "could not send a control message");
            stats.errors += 1;
            ep.close("control load: send failed");
            self.phase = Phase::Failed;
        }
    }
}

/// When Fay `slot`'s first heartbeat falls after its grant: a share of the
/// interval that differs from slot to slot (the golden ratio's steps), so
/// Fays that were granted together do not beat together.
pub(crate) fn beat_offset(slot: usize, interval: Duration) -> Duration {
    const PHI_FRACTION: f64 = 0.618_033_988_749_895;
    let share = (slot as f64 * PHI_FRACTION).fract();
    interval.mul_f64(share)
}

#[cfg(test)]
#[path = "flow_tests.rs"]
mod tests;
