//! A control flow driven against an in-memory terminal endpoint in virtual
//! time. The terminal's answers are scripted here (grant, refuse, hand
//! over); the real control plane is exercised by `tests/load_control.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_bench::control_workload::{ControlMode, ControlPlan};
use dtp_bench::dtp_workload::BenchKeys;
use dtp_codec::{
    AccessMode, AuthOutcome, AuthResult, ControlMessage, ErrorCode, HeartbeatAck, Limits,
    SessionId, SessionState, SessionStateChanged, peek_frame_len,
};
use dtp_engine::Outbox;
use dtp_gateway::dtp::{DtpEndpoint, DtpEvent, EndpointHandler, drive_endpoint};

use super::{BUSY_BACKOFF, ControlFlow, ControlFlowConfig, ControlStats, Phase, STALL};
use crate::load_dtp::control::ControlSpec;

/// How the scripted terminal answers AuthRequests.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    Grant,
    /// Grants, then at once ends the session as handed over.
    GrantThenHandOver,
    Refuse,
    /// Never answers.
    Silent,
}

/// A flow and the scripted terminal it talks to, in virtual time.
struct Pair {
    now: Instant,
    flow: ControlFlow,
    /// The Fay's endpoint (the driver's).
    ep: Option<DtpEndpoint>,
    /// The Fay side closes the transport.
    closing: bool,
    term: DtpEndpoint,
    answer: Answer,
    stats: ControlStats,
    next_session: u128,
    requests: u64,
    releases: u64,
    /// The sequence numbers of the heartbeats the terminal got.
    beats: Vec<u64>,
    /// Bytes on the wire each way: kept between `run` calls, so that a run
    /// cut short loses nothing in flight.
    to_term: BytesMut,
    to_fay: BytesMut,
}

impl Pair {
    fn new(mode: ControlMode, answer: Answer) -> Self {
        Self::with(
            mode,
            answer,
            Duration::from_millis(50),
            Duration::from_secs(1),
        )
    }

    /// A pair whose window lasts `window`, its Fay beating every
    /// `heartbeat` while it holds a session (idle).
    fn with(mode: ControlMode, answer: Answer, window: Duration, heartbeat: Duration) -> Self {
        let keys = BenchKeys::generate().unwrap();
        let plan = ControlPlan::new(mode, 2, "r-");
        let spec = ControlSpec::mint(
            plan,
            AccessMode::Write,
            &keys.issuer,
            Some(*keys.terminal_noise.public()),
        )
        .unwrap();
        let now = Instant::now();
        let config = ControlFlowConfig {
            mode,
            access: AccessMode::Write,
            measure_from: now,
            end: now + window,
            heartbeat,
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut fill = |b: &mut [u8]| {
            for x in b.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *x = seed as u8;
            }
        };
        let terminal = keys.terminal_config().unwrap();
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let term = DtpEndpoint::terminal(&terminal, now, unix, &mut fill).unwrap();
        let mut flow = ControlFlow::new(config, spec.fays[0].clone());
        flow.connecting();
        let ep = DtpEndpoint::fay(flow.fay(), now, &mut fill).unwrap();
        flow.connected();
        Self {
            now,
            flow,
            ep: Some(ep),
            closing: false,
            term,
            answer,
            stats: ControlStats::new(),
            next_session: 1,
            requests: 0,
            releases: 0,
            beats: Vec::new(),
            to_term: BytesMut::new(),
            to_fay: BytesMut::new(),
        }
    }

    fn reply(&mut self, msg: ControlMessage) {
        self.term.send_control(msg).unwrap();
    }

    /// The scripted terminal's answers to what the flow sent.
    fn serve(&mut self) {
        while let Some(event) = self.term.poll_event() {
            let DtpEvent::Control(msg) = event else {
                continue;
            };
            match msg {
                ControlMessage::AuthRequest(req) => {
                    self.requests += 1;
                    let session_id = SessionId::from_u128(self.next_session);
                    self.next_session += 1;
                    let outcome = match self.answer {
                        Answer::Silent => continue,
                        Answer::Refuse => AuthOutcome::Refused {
                            code: ErrorCode::E_RESOURCE_BUSY,
                            message: "busy".into(),
                        },
                        Answer::Grant | Answer::GrantThenHandOver => {
                            AuthOutcome::Granted { session_id }
                        }
                    };
                    self.reply(ControlMessage::AuthResult(AuthResult {
                        request_id: req.request_id,
                        outcome,
                    }));
                    if self.answer == Answer::GrantThenHandOver {
                        self.reply(ended(session_id, "handed_over"));
                    }
                }
                ControlMessage::SessionRelease(r) => {
                    self.releases += 1;
                    self.reply(ended(r.session_id, "client_release"));
                }
                ControlMessage::Heartbeat(h) => {
                    self.beats.extend(h.beats.iter().map(|b| b.sequence_number));
                    if self.answer != Answer::Silent {
                        self.reply(ControlMessage::HeartbeatAck(HeartbeatAck {
                            beats: h.beats,
                        }));
                    }
                }
                _ => {}
            }
        }
    }

    /// Drives the Fay's endpoint as the engine service does, appending
    /// what it sends to `dst`.
    fn drive(&mut self, dst: &mut BytesMut) {
        let (Some(ep), false) = (self.ep.as_mut(), self.closing) else {
            return;
        };
        let limits = Limits::default();
        let mut out = Outbox::new(dst, &limits, 1 << 20, 1 << 20, self.now);
        let mut fay = TestFay {
            flow: &mut self.flow,
            stats: &mut self.stats,
        };
        self.closing = drive_endpoint(ep, &mut out, self.now, &mut fay);
    }

    /// Runs 1 ms steps until the flow finishes (or `max_steps`).
    fn run(&mut self, max_steps: usize) {
        let mut to_term = std::mem::take(&mut self.to_term);
        let mut to_fay = std::mem::take(&mut self.to_fay);
        for _ in 0..max_steps {
            if self.flow.is_finished() {
                break;
            }
            self.step(&mut to_term, &mut to_fay);
        }
        self.to_term = to_term;
        self.to_fay = to_fay;
    }

    /// One 1 ms step: the wire both ways, then the clock and due timers.
    fn step(&mut self, to_term: &mut BytesMut, to_fay: &mut BytesMut) {
        self.drive(to_term);
        for f in frames(to_term) {
            self.term.handle_frame(f, self.now);
        }
        self.serve();
        self.term.poll_transmit(to_fay);
        for f in frames(to_fay) {
            if self.closing {
                break;
            }
            if let Some(ep) = self.ep.as_mut() {
                ep.handle_frame(f, self.now);
            }
            self.drive(to_term);
        }
        to_fay.clear();
        if self.closing {
            self.flow.handle_lost(self.ep.take(), &mut self.stats);
            return;
        }
        self.now += Duration::from_millis(1);
        let due = self
            .ep
            .as_ref()
            .and_then(|ep| self.flow.poll_timeout(ep, self.now))
            .is_some_and(|t| t <= self.now);
        if due {
            if let Some(ep) = self.ep.as_mut() {
                ep.handle_timeout(self.now);
            }
            self.drive(to_term);
        }
    }
}

/// The flow's side of the driving loop, as the engine service's.
struct TestFay<'a> {
    flow: &'a mut ControlFlow,
    stats: &'a mut ControlStats,
}

impl EndpointHandler<()> for TestFay<'_> {
    fn event(&mut self, _: &mut DtpEndpoint, event: DtpEvent, now: Instant, _: &mut Outbox<'_>) {
        self.flow.handle_event(event, now, self.stats);
    }

    fn events_done(&mut self, _: &mut DtpEndpoint, _: Instant) {
        self.flow.events_done();
    }

    fn transmit(&mut self, ep: &mut DtpEndpoint, now: Instant, out: &mut Outbox<'_>) {
        if self.flow.poll_transmit(ep, out.wire(), now, self.stats) {
            out.close();
        }
    }

    fn timer(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        self.flow.poll_timeout(ep, now)
    }
}

fn ended(session_id: SessionId, reason: &str) -> ControlMessage {
    ControlMessage::SessionStateChanged(SessionStateChanged {
        session_id,
        new_state: SessionState::Terminated,
        reason: Some(reason.into()),
        details: Default::default(),
    })
}

/// Splits whole frames off `buf`.
fn frames(buf: &mut BytesMut) -> Vec<BytesMut> {
    let mut out = Vec::new();
    while let Ok(len) = peek_frame_len(buf, &Limits::default()) {
        if len > buf.len() {
            break;
        }
        out.push(buf.split_to(len));
    }
    out
}

#[test]
fn decisions_loop_request_grant_release_and_close_at_the_end() {
    let mut p = Pair::new(ControlMode::Decisions, Answer::Grant);
    p.run(1000);
    assert_eq!(p.flow.phase(), Phase::Finished);
    assert!(p.stats.decisions > 5, "{:?}", p.stats);
    assert_eq!(p.requests, p.releases, "every grant released");
    assert_eq!(p.stats.decision_latency.count(), p.stats.decisions);
    assert!(p.stats.release_latency.count() > 0);
    assert_eq!(
        (p.stats.errors, p.stats.timeouts, p.stats.handovers),
        (0, 0, 0)
    );
    assert!(p.stats.refused.is_empty());
}

#[test]
fn refusals_count_by_code_and_the_loop_goes_on() {
    let mut p = Pair::new(ControlMode::Decisions, Answer::Refuse);
    let start = p.now;
    p.run(1000);
    assert_eq!(p.flow.phase(), Phase::Finished);
    let busy = p.stats.refused[&ErrorCode::E_RESOURCE_BUSY.0];
    assert!(busy > 5);
    // Each busy refusal is followed by a pause before the next request.
    let elapsed = p.now.duration_since(start);
    assert!(
        BUSY_BACKOFF * u32::try_from(busy - 1).unwrap() <= elapsed,
        "{busy} refusals in {elapsed:?}"
    );
    assert_eq!(p.stats.refused_total(), busy);
    assert_eq!(p.releases, 0);
}

#[test]
fn a_grant_after_a_handed_over_session_is_a_handover_won() {
    let mut p = Pair::new(ControlMode::Handovers, Answer::GrantThenHandOver);
    p.run(1000);
    assert_eq!(p.flow.phase(), Phase::Finished);
    // The first grant took a free resource; every later one won it back.
    assert!(p.stats.handovers > 5, "{:?}", p.stats);
    assert_eq!(p.stats.handovers + 1, p.stats.decisions);
    assert_eq!(p.stats.handover_latency.count(), p.stats.handovers);
    assert_eq!(p.stats.errors, 0);
}

#[test]
fn a_holder_releases_at_the_end_of_the_window() {
    let mut p = Pair::new(ControlMode::Handovers, Answer::Grant);
    p.run(1000);
    assert_eq!(p.flow.phase(), Phase::Finished);
    assert_eq!((p.requests, p.releases), (1, 1));
    assert_eq!(p.stats.handovers, 0);
}

#[test]
fn an_unanswered_request_times_out_and_the_flow_gives_up() {
    let mut p = Pair::new(ControlMode::Decisions, Answer::Silent);
    p.run(STALL.as_millis() as usize + 100);
    assert_eq!(p.flow.phase(), Phase::Failed);
    assert_eq!(p.stats.timeouts, 1);
    assert_eq!(p.requests, 1);
}

#[test]
fn idle_holds_one_session_beats_in_sequence_and_releases_at_the_end() {
    let heartbeat = Duration::from_millis(20);
    let mut p = Pair::with(
        ControlMode::Idle,
        Answer::Grant,
        Duration::from_millis(300),
        heartbeat,
    );
    p.run(2000);
    assert_eq!(p.flow.phase(), Phase::Finished);
    assert!(p.flow.held_to_end());
    assert_eq!((p.requests, p.releases), (1, 1), "one session, held");
    // Beats from 0, one per interval after the first (which falls within
    // one interval of the grant): 14 to 15 in 300 ms.
    let n = p.beats.len() as u64;
    assert!((14..=15).contains(&n), "{:?}", p.beats);
    assert_eq!(p.beats, (0..n).collect::<Vec<_>>());
    assert_eq!(p.stats.heartbeats_sent, n);
    assert_eq!(p.stats.heartbeats_answered, n);
    assert_eq!(p.stats.heartbeat_latency.count(), n);
    assert_eq!((p.stats.errors, p.stats.lost, p.stats.ended), (0, 0, 0));
}

#[test]
fn idle_counts_a_session_the_terminal_ended_and_asks_again() {
    let mut p = Pair::with(
        ControlMode::Idle,
        Answer::GrantThenHandOver,
        Duration::from_millis(30),
        Duration::from_millis(20),
    );
    p.run(2000);
    assert_eq!(p.flow.phase(), Phase::Finished);
    // A handover is no loss; the Fay asks again at once, every time.
    assert!(p.requests > 2, "{}", p.requests);
    assert_eq!((p.stats.ended, p.stats.lost), (0, 0));
}

#[test]
fn unanswered_heartbeats_are_counted_not_answered() {
    // The terminal grants (scripted below) and then never acks.
    let mut p = Pair::with(
        ControlMode::Idle,
        Answer::Grant,
        Duration::from_millis(100),
        Duration::from_millis(20),
    );
    for _ in 0..1000 {
        if p.flow.is_holding() {
            break;
        }
        p.run(1);
    }
    assert!(p.flow.is_holding());
    p.answer = Answer::Silent;
    p.run(2000);
    assert!(p.stats.heartbeats_sent >= 4, "{:?}", p.stats);
    assert_eq!(p.stats.heartbeats_answered, 0);
}

#[test]
fn first_beats_spread_over_the_interval() {
    let interval = Duration::from_secs(10);
    let mut offsets: Vec<Duration> = (0..100)
        .map(|slot| super::beat_offset(slot, interval))
        .collect();
    assert!(offsets.iter().all(|o| *o < interval));
    offsets.sort();
    // No two of 100 Fays closer than a fifth of an even share (the golden
    // ratio's steps are spread about evenly), none in the same instant.
    let even = interval / 100;
    assert!(
        offsets.windows(2).all(|w| w[1] - w[0] > even / 5),
        "{offsets:?}"
    );
}
