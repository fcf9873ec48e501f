//! The Fay side of DTP on the shards: [`DtpClient`] is an engine
//! [`Service`] that opens outgoing connections for the flows a [`FayApp`]
//! starts, runs one Fay [`DtpEndpoint`] per connection (a new session, or
//! the resume of a [`SuspendedSession`] the application hands back) and
//! hands its events to the application — the mirror of
//! [`DtpGateway`](super::DtpGateway) and its [`DtpApp`](super::DtpApp).
//! `dtp load --dtp` (fragments, cuts and resumes) and its control-plane
//! load (AuthRequests, handovers) are two applications on it.
//!
//! **Owns**: the shard's flows (a flow is one logical connection: it lives
//! across as many transport connections as it needs), which of them want a
//! connection, the connections being opened, each connection's endpoint,
//! the random bytes the endpoints draw (`ring`'s system generator), the
//! time of every input (the clock read per callback, as a load generator
//! measures: an answer is stamped when its connection is served, not when
//! the shard's turn began), and the application's reports (about ten a second, and once at the end).
//! **Never touches**: the protocol's rules (the endpoint's) or what a flow
//! does with its session (the application's).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use dtp_codec::ErrorCode;
use dtp_engine::{Ctl, Frame, FrameService, Origin, Outbox};
use dtp_transports::{CloseReason, ConnId, Endpoint};
use ring::rand::{SecureRandom, SystemRandom};

use super::drive::{EndpointHandler, drive_endpoint};
use super::{DtpEndpoint, DtpError, DtpEvent, FayConfig, SuspendedSession};

/// Flows started per [`dtp_engine::Service::tick`] at most, so that a large count does
/// not flood the listener's backlog.
pub const WAVE: usize = 256;

/// How often a [`DtpClient`] reports to its application while it runs.
pub const REPORT_EVERY: Duration = Duration::from_millis(100);

/// Why a connection got no endpoint ([`FayApp::open_failed`]).
#[derive(Debug)]
pub enum OpenFailure {
    /// The endpoint refused its configuration (or the session to resume).
    Endpoint(DtpError),
    /// The system random generator failed: the CAP seed is not random, so
    /// the handshake never runs with it.
    Random,
}

/// What a [`DtpClient`] counted about its connections since the last
/// report ([`FayApp::report`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnCounts {
    /// Flows that got their first transport connection.
    pub connected: u64,
    /// Connections that could not be opened.
    pub failed: u64,
    /// The OS error of the last connection that could not be opened.
    pub last_errno: i32,
    /// Times the system random generator failed (the bytes were zeros).
    pub bad_random: u64,
}

/// What a Fay-side application does with its flows, called by
/// [`DtpClient`] on the shard that runs them. A flow decides when it wants
/// a transport connection ([`FayApp::wants_connection`]); the client
/// opens it, creates the endpoint and drives it.
pub trait FayApp {
    /// One logical connection's state.
    type Flow;

    /// The next flow to start, `None` once all are started or while the
    /// application holds the rest back (asked up to [`WAVE`] times per
    /// tick).
    fn new_flow(&mut self) -> Option<Self::Flow>;

    /// Whether flows are held back that [`FayApp::new_flow`] will still
    /// give (a bounded ramp): the client keeps asking, and is not done
    /// while there are. By default none are.
    fn has_more_flows(&self) -> bool {
        false
    }

    /// Whether the client should open a transport connection for `flow`.
    fn wants_connection(&self, flow: &Self::Flow) -> bool;

    /// The client is opening a transport connection for `flow`.
    fn connecting(&mut self, flow: &mut Self::Flow);

    /// The transport connection could not be opened.
    fn connect_failed(&mut self, flow: &mut Self::Flow);

    /// Whether `flow` is done (the client stops once all are).
    fn is_finished(&self, flow: &Self::Flow) -> bool;

    /// The keys, credential and settings of `flow`'s endpoints.
    fn fay<'a>(&'a self, flow: &'a Self::Flow) -> &'a FayConfig;

    /// SPEC SEQ-5: the session `flow`'s next endpoint resumes (`None`: a
    /// new session).
    fn take_session(&mut self, flow: &mut Self::Flow) -> Option<SuspendedSession> {
        let _ = flow;
        None
    }

    /// `flow`'s endpoint runs on a new transport connection.
    fn connected(&mut self, flow: &mut Self::Flow, ep: &mut DtpEndpoint, now: Instant) {
        let _ = (flow, ep, now);
    }

    /// No endpoint for `flow`'s new connection (which the client closes);
    /// `session` is the one [`FayApp::take_session`] gave, handed back.
    fn open_failed(
        &mut self,
        flow: &mut Self::Flow,
        why: OpenFailure,
        session: Option<SuspendedSession>,
        now: Instant,
    );

    /// One event of `flow`'s endpoint.
    fn event(&mut self, flow: &mut Self::Flow, ep: &mut DtpEndpoint, event: DtpEvent, now: Instant);

    /// Every event of a batch handled.
    fn events_done(&mut self, flow: &mut Self::Flow, ep: &mut DtpEndpoint, now: Instant) {
        let _ = (flow, ep, now);
    }

    /// Appends what `flow`'s connection sends at `now` (by default the
    /// endpoint's sealed frames); may close the connection or ask for
    /// room. `rng` fills random bytes.
    fn transmit(
        &mut self,
        flow: &mut Self::Flow,
        ep: &mut DtpEndpoint,
        out: &mut Outbox<'_>,
        now: Instant,
        rng: &mut dyn FnMut(&mut [u8]),
    ) {
        let _ = (flow, now, rng);
        ep.poll_transmit(out.wire());
    }

    /// When `flow`'s connection next times out (by default the
    /// endpoint's deadline).
    fn timer(&self, flow: &Self::Flow, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        let _ = (flow, now);
        ep.poll_timeout()
    }

    /// `flow`'s transport connection is gone, with its endpoint (`None`
    /// if it had none).
    fn lost(&mut self, flow: &mut Self::Flow, ep: Option<DtpEndpoint>, now: Instant);

    /// What the shard measured: called every [`REPORT_EVERY`] with the
    /// connection counts since the last call, and once more at the end
    /// (`last`), when every flow is finished or the drain deadline came.
    fn report(&mut self, flows: &[Self::Flow], counts: ConnCounts, last: bool);
}

/// One connection of a [`DtpClient`]: its flow and endpoint (`None` when
/// the endpoint could not be created; the connection is then closed).
pub struct FayConn {
    flow: usize,
    endpoint: Option<DtpEndpoint>,
    /// The connection is closing: what still arrives is dropped.
    closing: bool,
}

/// An engine service running the Fay side of DTP (SPEC §1) for the flows
/// of a [`FayApp`], on outgoing connections to one target.
pub struct DtpClient<A: FayApp> {
    app: A,
    target: Endpoint,
    flows: Vec<A::Flow>,
    /// Flows that had a transport connection at least once.
    ever_connected: Vec<bool>,
    /// Flows waiting for a transport connection.
    to_connect: VecDeque<usize>,
    /// Connections being opened, and their flow.
    connecting: HashMap<ConnId, usize>,
    /// The application has no more flows to start (none held back).
    all_started: bool,
    counts: ConnCounts,
    rng: SystemRandom,
    drain_until: Instant,
    last_report: Instant,
    finished: bool,
}

impl<A: FayApp> DtpClient<A> {
    /// A shard's client of `app`, connecting to `target`; it starts at
    /// `start` and gives up waiting for its flows at `drain_until`.
    pub fn new(app: A, target: Endpoint, start: Instant, drain_until: Instant) -> Self {
        Self {
            app,
            target,
            flows: Vec::new(),
            ever_connected: Vec::new(),
            to_connect: VecDeque::new(),
            connecting: HashMap::new(),
            all_started: false,
            counts: ConnCounts::default(),
            rng: SystemRandom::new(),
            drain_until,
            last_report: start,
            finished: false,
        }
    }

    /// The application.
    pub fn app(&self) -> &A {
        &self.app
    }

    fn queue_if_waiting(&mut self, idx: usize) {
        if self
            .flows
            .get(idx)
            .is_some_and(|f| self.app.wants_connection(f))
        {
            self.to_connect.push_back(idx);
        }
    }

    /// Drives `c`'s endpoint after an input at `now` ([`drive_endpoint`]).
    fn drive(&mut self, c: &mut FayConn, out: &mut Outbox<'_>, now: Instant) {
        let (Some(flow), Some(ep)) = (self.flows.get_mut(c.flow), c.endpoint.as_mut()) else {
            out.close();
            c.closing = true;
            return;
        };
        let mut fay = Fay {
            app: &mut self.app,
            flow,
            rng: &self.rng,
            bad_random: &mut self.counts.bad_random,
        };
        c.closing = drive_endpoint(ep, out, now, &mut fay);
    }

    /// Opens connections for the flows that wait for one.
    fn connect_waiting(&mut self, ctl: &mut dyn Ctl) {
        for _ in 0..self.to_connect.len() {
            let Some(idx) = self.to_connect.pop_front() else {
                break;
            };
            let Some(flow) = self.flows.get_mut(idx) else {
                continue;
            };
            if !self.app.wants_connection(flow) {
                continue;
            }
            self.app.connecting(flow);
            match ctl.connect(&self.target) {
                Ok(conn) => {
                    self.connecting.insert(conn, idx);
                }
                Err(_) => {
                    self.counts.failed += 1;
                    self.app.connect_failed(flow);
                    self.queue_if_waiting(idx);
                }
            }
        }
    }

    fn report(&mut self, last: bool) {
        let counts = std::mem::take(&mut self.counts);
        self.app.report(&self.flows, counts, last);
    }
}

/// Fills `b` from `rng`; zeros (counted in `bad`) if the generator failed.
fn fill(rng: &SystemRandom, bad: &mut u64, b: &mut [u8]) {
    if rng.fill(b).is_err() {
        *bad += 1;
        b.fill(0);
    }
}

/// One Fay connection's side of [`drive_endpoint`]: the application and
/// the flow its events reach.
struct Fay<'a, A: FayApp> {
    app: &'a mut A,
    flow: &'a mut A::Flow,
    rng: &'a SystemRandom,
    bad_random: &'a mut u64,
}

impl<A: FayApp> EndpointHandler<()> for Fay<'_, A> {
    fn event(&mut self, ep: &mut DtpEndpoint, event: DtpEvent, now: Instant, _: &mut Outbox<'_>) {
        self.app.event(self.flow, ep, event, now);
    }

    fn events_done(&mut self, ep: &mut DtpEndpoint, now: Instant) {
        self.app.events_done(self.flow, ep, now);
    }

    fn transmit(&mut self, ep: &mut DtpEndpoint, now: Instant, out: &mut Outbox<'_>) {
        let (rng, bad) = (self.rng, &mut *self.bad_random);
        self.app
            .transmit(self.flow, ep, out, now, &mut |b| fill(rng, bad, b));
    }

    fn timer(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        self.app.timer(self.flow, ep, now)
    }
}

impl<A: FayApp> FrameService for DtpClient<A> {
    type Conn = Option<FayConn>;
    type Up = ();
    type Down = ();

    fn open(&mut self, conn: ConnId, _: Origin, out: &mut Outbox<'_>) -> Self::Conn {
        let now = out.now();
        let Some(idx) = self.connecting.remove(&conn) else {
            out.close();
            return None;
        };
        if let Some(first) = self.ever_connected.get_mut(idx)
            && !*first
        {
            *first = true;
            self.counts.connected += 1;
        }
        let flow = self.flows.get_mut(idx)?;
        let session = self.app.take_session(flow);
        let bad_before = self.counts.bad_random;
        let (rng, bad) = (&self.rng, &mut self.counts.bad_random);
        let mut rng = |b: &mut [u8]| fill(rng, bad, b);
        let fay = self.app.fay(flow);
        let made = match session {
            Some(s) => DtpEndpoint::fay_resume(fay, s, now, &mut rng)
                .map_err(|refused| (refused.error, Some(*refused.session))),
            None => DtpEndpoint::fay(fay, now, &mut rng).map_err(|e| (e, None)),
        };
        let mut c = FayConn {
            flow: idx,
            endpoint: None,
            closing: true,
        };
        match made {
            Err((e, session)) => {
                tracing::warn!(error = %e, "no DTP endpoint for a Fay connection");
                self.app
                    .open_failed(flow, OpenFailure::Endpoint(e), session, now);
                out.close();
            }
            Ok(mut ep) if self.counts.bad_random != bad_before => {
                let session = ep.connection_lost(now).or_else(|| ep.take_suspended());
                self.app
                    .open_failed(flow, OpenFailure::Random, session, now);
                out.close();
            }
            Ok(mut ep) => {
                self.app.connected(flow, &mut ep, now);
                c.endpoint = Some(ep);
                c.closing = false;
                self.drive(&mut c, out, now);
            }
        }
        Some(c)
    }

    fn frame(
        &mut self,
        state: &mut Self::Conn,
        frame: Frame,
        out: &mut Outbox<'_>,
    ) -> Result<(), ErrorCode> {
        let Some(c) = state else {
            out.close();
            return Ok(());
        };
        if c.closing {
            return Ok(()); // a cut or a close is under way: the rest is dropped
        }
        let now = out.now();
        if let Some(ep) = c.endpoint.as_mut() {
            ep.handle_frame_with_head(frame.head, frame.wire, now);
        }
        self.drive(c, out, now);
        Ok(())
    }

    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_>) {
        let Some(c) = state else { return };
        if c.closing {
            return;
        }
        if let Some(ep) = c.endpoint.as_mut() {
            ep.handle_timeout(now);
        }
        self.drive(c, out, now);
    }

    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_>) {
        if let Some(c) = state
            && !c.closing
        {
            let now = out.now();
            self.drive(c, out, now);
        }
    }

    fn connect_failed(&mut self, conn: ConnId, errno: i32) {
        self.counts.failed += 1;
        self.counts.last_errno = errno;
        if let Some(idx) = self.connecting.remove(&conn) {
            if let Some(flow) = self.flows.get_mut(idx) {
                self.app.connect_failed(flow);
            }
            self.queue_if_waiting(idx);
        }
    }

    fn close(&mut self, state: Self::Conn, _: CloseReason, now: Instant) {
        let Some(c) = state else { return };
        if let Some(flow) = self.flows.get_mut(c.flow) {
            self.app.lost(flow, c.endpoint, now);
        }
        self.queue_if_waiting(c.flow);
    }

    fn tick(&mut self, now: Instant, ctl: &mut dyn Ctl) -> Option<Instant> {
        if self.finished {
            return None;
        }
        for _ in 0..WAVE {
            let Some(flow) = self.app.new_flow() else {
                self.all_started = !self.app.has_more_flows();
                break;
            };
            self.to_connect.push_back(self.flows.len());
            self.flows.push(flow);
            self.ever_connected.push(false);
        }
        if !ctl.stopping() {
            self.connect_waiting(ctl);
        }
        let all_done = self.all_started && self.flows.iter().all(|f| self.app.is_finished(f));
        if all_done || now >= self.drain_until {
            self.report(true);
            self.finished = true;
            return None;
        }
        if now.duration_since(self.last_report) >= REPORT_EVERY {
            self.last_report = now;
            self.report(false);
        }
        Some(if !self.all_started || !self.to_connect.is_empty() {
            now + Duration::from_millis(1)
        } else {
            now + Duration::from_millis(20)
        })
    }
}
