//! The flows driven against an in-memory terminal (`DtpEndpoint::terminal`
//! running `DtpResponder`, the gateway's application) in virtual time: the
//! same machine the engine service drives, through the same loop
//! (`drive_endpoint`), with cuts, resumes and refusals.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::{Duration, Instant};

use super::{Flow, FlowConfig, MAX_FRESH_ATTEMPTS, Phase, Stats, cut_offset};
use crate::load_dtp::cli::parse_hex32;
use crate::load_dtp::payload;
use bytes::BytesMut;
use dtp_bench::dtp_workload::{BenchKeys, DtpResponder, DtpWorkload, ResponderSession};
use dtp_codec::{Limits, peek_frame_len};
use dtp_engine::Outbox;
use dtp_gateway::dtp::{DtpEndpoint, DtpEvent, FayConfig, SuspendedSession, TerminalConfig};
use dtp_gateway::dtp::{EndpointHandler, drive_endpoint};

/// Deterministic bytes: a xorshift stream from `seed`.
struct TestRng(u64);

impl TestRng {
    fn fill(&mut self, b: &mut [u8]) {
        for x in b.iter_mut() {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *x = self.0 as u8;
        }
    }
}

/// Splits whole frames off `buf`; a partial tail stays.
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

/// A flow and the terminal it talks to, in virtual time.
struct Pair {
    now: Instant,
    rng: TestRng,
    fay: FayConfig,
    terminal: TerminalConfig,
    responder: DtpResponder,
    flow: Flow,
    /// The Fay's endpoint on the current transport connection.
    ep: Option<DtpEndpoint>,
    /// The Fay side closes the transport (a cut, or done).
    closing: bool,
    term: Option<(DtpEndpoint, ResponderSession)>,
    /// The terminal's registry: the one session a cut parks.
    parked: Option<SuspendedSession>,
    /// Forget parked sessions (the terminal refuses every resume).
    amnesiac: bool,
    stats: Stats,
    connections: u32,
}

impl Pair {
    fn new(
        keys: &BenchKeys,
        workload: DtpWorkload,
        size: usize,
        every: Option<u64>,
        seed: u64,
    ) -> Self {
        let now = Instant::now();
        Self {
            now,
            rng: TestRng(seed | 1),
            fay: keys.fay_config(),
            terminal: keys.terminal_config().unwrap(),
            responder: DtpResponder::default(),
            flow: Flow::new(FlowConfig {
                workload,
                payload: payload(workload, Some(size)),
                disconnect_every: every,
                measure_from: now,
                end: now + Duration::from_millis(150),
            }),
            ep: None,
            closing: false,
            term: None,
            parked: None,
            amnesiac: false,
            stats: Stats::new(),
            connections: 0,
        }
    }

    fn connect(&mut self) {
        self.flow.connecting();
        let rng = &mut self.rng;
        let ep = match self.flow.take_session() {
            Some(s) => DtpEndpoint::fay_resume(&self.fay, s, self.now, &mut |b| rng.fill(b))
                .map_err(|r| r.error),
            None => DtpEndpoint::fay(&self.fay, self.now, &mut |b| rng.fill(b)),
        };
        self.ep = Some(ep.unwrap());
        self.flow.connected();
        self.closing = false;
        let ep = DtpEndpoint::terminal(&self.terminal, self.now, unix_now(), &mut |b| rng.fill(b))
            .unwrap();
        self.term = Some((ep, ResponderSession::default()));
        self.connections += 1;
    }

    /// The transport dropped: both sides learn it.
    fn drop_transport(&mut self) {
        if let Some((mut ep, _)) = self.term.take()
            && let Some(s) = ep.connection_lost(self.now)
            && !self.amnesiac
        {
            self.parked = Some(s);
        }
        self.flow
            .handle_lost(self.ep.take(), self.now, &mut self.stats);
        self.closing = false;
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
            rng: &mut self.rng,
        };
        self.closing = drive_endpoint(ep, &mut out, self.now, &mut fay);
    }
}

/// The flow's side of the driving loop, as the engine service's.
struct TestFay<'a> {
    flow: &'a mut Flow,
    stats: &'a mut Stats,
    rng: &'a mut TestRng,
}

impl EndpointHandler<()> for TestFay<'_> {
    fn event(&mut self, ep: &mut DtpEndpoint, event: DtpEvent, now: Instant, _: &mut Outbox<'_>) {
        self.flow.handle_event(ep, event, now, self.stats);
    }

    fn events_done(&mut self, ep: &mut DtpEndpoint, now: Instant) {
        self.flow.events_done(ep, now, self.stats);
    }

    fn transmit(&mut self, ep: &mut DtpEndpoint, now: Instant, out: &mut Outbox<'_>) {
        let (room, rng) = (out.room(), &mut *self.rng);
        let t =
            self.flow
                .poll_transmit(ep, out.wire(), room, now, &mut |b| rng.fill(b), self.stats);
        if t.close {
            out.close();
        }
    }

    fn timer(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        self.flow.poll_timeout(ep, now)
    }
}

impl Pair {
    /// Runs until the flow finishes (or `max_steps`); each step is 1 ms.
    fn run(&mut self, max_steps: usize) {
        let mut to_term = BytesMut::new();
        for _ in 0..max_steps {
            if self.flow.is_finished() {
                return;
            }
            if self.flow.wants_connection() {
                self.connect();
            }
            self.drive(&mut to_term);
            let mut to_fay = BytesMut::new();
            let mut closed = false;
            if let Some((ep, session)) = &mut self.term {
                for f in frames(&mut to_term) {
                    ep.handle_frame(f, self.now);
                }
                if ep.poll_timeout().is_some_and(|at| at <= self.now) {
                    ep.handle_timeout(self.now);
                }
                while let Some(event) = ep.poll_event() {
                    match event {
                        DtpEvent::ResumeRequested { .. } => match self.parked.take() {
                            Some(s) => ep.resume_with(s, self.now).unwrap(),
                            None => ep.refuse_resume(),
                        },
                        other => self.responder.event(session, ep, other, self.now),
                    }
                }
                ep.poll_transmit(&mut to_fay);
                closed = ep.is_closed();
            }
            if !self.closing {
                for f in frames(&mut to_fay) {
                    if self.closing {
                        break; // a cut: the rest is dropped
                    }
                    if let Some(ep) = self.ep.as_mut() {
                        ep.handle_frame(f, self.now);
                    }
                    self.drive(&mut to_term);
                }
            }
            if self.closing {
                // A cut: the torn frame never completes on the terminal.
                // What the Fay sent before it still reaches the terminal.
                for f in frames(&mut to_term) {
                    if let Some((ep, _)) = &mut self.term {
                        ep.handle_frame(f, self.now);
                    }
                }
                to_term.clear();
                self.drop_transport();
                continue;
            }
            if closed {
                self.drop_transport();
                to_term.clear();
                continue;
            }
            self.now += Duration::from_millis(1);
            let due = self
                .ep
                .as_ref()
                .and_then(|ep| self.flow.poll_timeout(ep, self.now))
                .is_some_and(|at| at <= self.now);
            if due {
                if let Some(ep) = self.ep.as_mut() {
                    ep.handle_timeout(self.now);
                }
                self.drive(&mut to_term);
            }
        }
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn keys() -> BenchKeys {
    BenchKeys::generate().unwrap()
}

/// Everything sent was delivered once, nothing failed.
fn assert_clean(p: &Pair) {
    let c = p.flow.counters();
    assert!(p.flow.is_finished() && !p.flow.has_failed(), "{c:?}");
    assert!(c.sent > 0, "{c:?}");
    assert_eq!(c.delivered, c.sent, "{c:?}");
    assert_eq!(c.duplicated, 0, "{c:?}");
    assert_eq!(c.resumes, c.cuts, "{c:?}");
    assert_eq!(p.stats.errors, 0, "{c:?}");
    assert_eq!(p.stats.resume_latency.count(), c.resumes);
}

#[test]
fn pingpong_without_cuts_delivers_every_answer() {
    let mut p = Pair::new(&keys(), DtpWorkload::Pingpong, 66, None, 1);
    p.run(5_000);
    assert_clean(&p);
    assert_eq!(p.flow.counters().resumes, 0);
    assert_eq!(p.connections, 1);
    assert!(p.stats.ops > 0);
}

#[test]
fn pingpong_with_cuts_resumes_and_loses_nothing() {
    let mut p = Pair::new(&keys(), DtpWorkload::Pingpong, 66, Some(3), 2);
    p.run(5_000);
    assert_clean(&p);
    let c = p.flow.counters();
    assert!(c.cuts >= 5, "{c:?}");
    assert_eq!(u64::from(p.connections), c.cuts + 1);
}

#[test]
fn stream_with_cuts_resumes_and_loses_nothing() {
    let mut p = Pair::new(&keys(), DtpWorkload::Stream, 4096, Some(40), 3);
    p.run(5_000);
    assert_clean(&p);
    assert!(p.flow.counters().cuts >= 2);
}

#[test]
fn every_fragment_cut_still_makes_progress() {
    let mut p = Pair::new(&keys(), DtpWorkload::Stream, 100, Some(1), 4);
    p.run(5_000);
    assert_clean(&p);
    let c = p.flow.counters();
    assert_eq!(c.cuts, c.sent, "each connection carries one new fragment");
}

#[test]
fn a_refused_resume_fails_the_flow_and_counts_the_loss() {
    let mut p = Pair::new(&keys(), DtpWorkload::Pingpong, 66, Some(2), 5);
    p.amnesiac = true;
    p.run(5_000);
    let c = p.flow.counters();
    assert!(p.flow.has_failed(), "{c:?}");
    assert_eq!(c.resumes, 0);
    assert_eq!(c.sent - c.delivered, 1, "the cut fragment is lost");
}

#[test]
fn a_terminal_with_another_key_is_given_up_after_the_attempts() {
    let mut p = Pair::new(&keys(), DtpWorkload::Pingpong, 66, None, 6);
    p.terminal = keys().terminal_config().unwrap();
    p.run(5_000);
    assert!(p.flow.has_failed());
    assert_eq!(p.connections, MAX_FRESH_ATTEMPTS);
    assert_eq!(p.flow.counters().sent, 0);
}

#[test]
fn answers_are_checked_and_duplicates_counted() {
    let mut p = Pair::new(&keys(), DtpWorkload::Pingpong, 66, None, 7);
    let mut stats = Stats::new();
    let now = p.now;
    let good = payload(DtpWorkload::Pingpong, Some(66));
    let flow = &mut p.flow;
    flow.outstanding = Some((1, now));
    flow.on_fragment(2, &good, now, &mut stats);
    assert_eq!(stats.errors, 1, "an answer to a fragment never sent");
    flow.on_fragment(1, b"wrong", now, &mut stats);
    assert_eq!(stats.errors, 2, "a corrupted answer");
    assert_eq!(flow.counters().delivered, 1);
    flow.on_fragment(1, &good, now, &mut stats);
    assert_eq!(flow.counters().duplicated, 1);
}

#[test]
fn a_flow_being_cut_sends_nothing_more() {
    let mut p = Pair::new(&keys(), DtpWorkload::Pingpong, 66, None, 8);
    p.connect();
    p.flow.phase = Phase::Cutting;
    let mut stats = Stats::new();
    let mut dst = BytesMut::new();
    let ep = p.ep.as_mut().unwrap();
    let t = p
        .flow
        .poll_transmit(ep, &mut dst, 1 << 20, p.now, &mut |b| b.fill(1), &mut stats);
    assert!(dst.is_empty() && !t.close && !t.want_writable);
    assert_eq!(p.flow.poll_timeout(ep, p.now), None);
    assert_eq!(stats.errors, 0);
}

#[test]
fn hex_keys_are_parsed_strictly() {
    assert_eq!(parse_hex32(&"ab".repeat(32)), Some([0xab; 32]));
    assert_eq!(
        parse_hex32(&format!(" {}\n", "AB".repeat(32))),
        Some([0xab; 32])
    );
    assert_eq!(parse_hex32(&"ab".repeat(31)), None);
    assert_eq!(parse_hex32(&"zz".repeat(32)), None);
    assert_eq!(parse_hex32(""), None);
}

/// SPEC RES-1 … RES-4, SEQ-5: whatever the cut schedule, payload size and
/// torn byte, every fragment is delivered once and every cut is resumed.
/// (A seeded sweep of random cases: proptest is not a dev-dependency of this
/// crate.)
#[test]
fn cuts_never_lose_or_duplicate() {
    let keys = keys();
    let mut rng = TestRng(0x5eed);
    for case in 0..12 {
        let mut b = [0u8; 8];
        rng.fill(&mut b);
        let r = u64::from_le_bytes(b);
        let workload = if r & 1 == 0 {
            DtpWorkload::Stream
        } else {
            DtpWorkload::Pingpong
        };
        let every = 1 + (r >> 1) % 11;
        let size = ((r >> 8) % 3000) as usize;
        let mut p = Pair::new(&keys, workload, size, Some(every), r ^ case);
        p.run(5_000);
        assert_clean(&p);
    }
}

/// A cut always tears a frame: at least one byte sent, at least one not.
#[test]
fn cut_offsets_fall_inside_the_frame() {
    let mut rng = TestRng(7);
    for len in (0..2000).chain([65_535, 1 << 20]) {
        for _ in 0..8 {
            let at = cut_offset(len, &mut |b| rng.fill(b));
            if len < 2 {
                assert_eq!(at, 0);
            } else {
                assert!(at >= 1 && at < len, "{at} of {len}");
            }
        }
    }
}

#[test]
fn stream_without_cuts_is_acknowledged() {
    let mut p = Pair::new(&keys(), DtpWorkload::Stream, 16 * 1024, None, 9);
    p.run(5_000);
    assert_clean(&p);
    assert_eq!(p.connections, 1);
}
