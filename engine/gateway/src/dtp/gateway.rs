//! The terminal side of DTP on the shards: [`DtpGateway`] is an engine
//! [`Service`] that runs one terminal [`DtpEndpoint`] per accepted
//! connection and hands its events to a [`DtpApp`].
//!
//! **Owns**: the wiring between a shard and its endpoints — frames in as
//! wire bytes (decrypted in place by the endpoint), sealed bytes out, the
//! endpoint's deadline as the connection's timer, resume requests answered
//! from the [`SessionRegistry`] the shards share, and lost connections'
//! sessions parked there. **Never touches**: the protocol's rules (the
//! endpoint's) or the application's decisions (the [`DtpApp`]'s).
//!
//! This is the one place of the module that reads the clock and draws
//! random bytes (`ring`'s system generator): it is a driver, like the
//! tests' virtual-time pair.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dtp_codec::{ControlMessage, ErrorCode, SessionId};
use dtp_transports::{CloseReason, ConnId};
use ring::rand::{SecureRandom, SystemRandom};

use super::drive::{EndpointHandler, drive_endpoint};
use super::{
    DtpEndpoint, DtpError, DtpEvent, RESUME_GRACE, RESUME_POLL, ResumeWaiter, SuspendedSessions,
    Taken, TerminalConfig,
};
use crate::app::{GatewayDown, GatewayUp};
use dtp_engine::{Connections, Frame, FrameService, Notifier, Origin, Outbox};

/// What a gateway does with its DTP sessions: decides agreements, consumes
/// fragments, produces its own. Called on the shard that owns the
/// connection, with the endpoint to act on.
pub trait DtpApp {
    /// Per-connection application state.
    type Session: Default;

    /// One event of a connection's endpoint (resume requests are answered
    /// by the gateway before the application sees anything).
    fn event(
        &mut self,
        session: &mut Self::Session,
        endpoint: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
    );
}

/// An engine service running the terminal side of DTP (SPEC §1) for every
/// accepted connection.
pub struct DtpGateway<A: DtpApp> {
    config: Arc<TerminalConfig>,
    registry: Arc<dyn SuspendedSessions>,
    app: A,
    rng: SystemRandom,
    /// Wakes this shard's connections: a resume request waiting for its
    /// session is woken by the core that parks it.
    notifier: Option<Notifier>,
}

/// One connection of a [`DtpGateway`]: its endpoint and application state
/// (`None` when the endpoint could not be created; the connection is then
/// closed at once).
pub struct GatewayConn<S> {
    /// The transport connection (what a log line can name).
    conn: ConnId,
    endpoint: DtpEndpoint,
    session: S,
    /// A resume request whose session is not parked yet: until when it may
    /// wait ([`RESUME_GRACE`]).
    waiting_resume: Option<WaitingResume>,
}

/// A resume request whose session is not parked yet.
#[derive(Clone, Copy, Debug)]
struct WaitingResume {
    session_id: SessionId,
    /// The end of its grace.
    until: Instant,
    /// The registry wakes it when the session is parked; else it looks
    /// again every [`RESUME_POLL`].
    woken: bool,
}

/// How a waiting resume request is woken: its shard's notifier and its
/// connection.
#[derive(Clone, Copy)]
struct Wake<'a> {
    notifier: Option<&'a Notifier>,
    conn: ConnId,
}

impl<A: DtpApp> DtpGateway<A> {
    /// A gateway of one shard; `registry` is shared by all shards, so a
    /// session cut on one core resumes on any (a
    /// [`SessionRegistry`](super::SessionRegistry) by default).
    pub fn new(config: Arc<TerminalConfig>, registry: Arc<dyn SuspendedSessions>, app: A) -> Self {
        Self {
            config,
            registry,
            app,
            rng: SystemRandom::new(),
            notifier: None,
        }
    }

    /// The application.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// Drains the endpoint after an input ([`drive_endpoint`]): events to
    /// the application (or, for resume requests, to the registry),
    /// transmits, the next deadline, and a close once the endpoint has
    /// closed.
    fn drive(&mut self, c: &mut GatewayConn<A::Session>, out: &mut Outbox<'_, GatewayUp>) {
        let mut terminal = Terminal {
            app: &mut self.app,
            registry: &*self.registry,
            wake: Wake {
                notifier: self.notifier.as_ref(),
                conn: c.conn,
            },
            session: &mut c.session,
            waiting_resume: &mut c.waiting_resume,
        };
        let now = out.now();
        drive_endpoint(&mut c.endpoint, out, now, &mut terminal);
    }
}

/// One terminal connection's side of [`drive_endpoint`]: the borrowed parts
/// of the gateway and of the connection that its events reach.
struct Terminal<'a, A: DtpApp> {
    app: &'a mut A,
    registry: &'a dyn SuspendedSessions,
    wake: Wake<'a>,
    session: &'a mut A::Session,
    waiting_resume: &'a mut Option<WaitingResume>,
}

impl<A: DtpApp> EndpointHandler<GatewayUp> for Terminal<'_, A> {
    fn event(
        &mut self,
        ep: &mut DtpEndpoint,
        event: DtpEvent,
        now: Instant,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        match event {
            DtpEvent::ResumeRequested { session_id } => {
                *self.waiting_resume = Some(WaitingResume {
                    session_id,
                    until: now + RESUME_GRACE,
                    woken: false,
                });
                try_resume(self.registry, ep, self.waiting_resume, self.wake, now);
            }
            // Terminal control-plane messages belong to the control
            // thread (SPEC §2-3), which answers through `control`.
            DtpEvent::Control(msg) => out.to_control(GatewayUp::Message {
                conn: self.wake.conn,
                msg: Box::new(msg),
            }),
            DtpEvent::Established {
                session_id,
                peer,
                resumed,
            } => {
                let fay_id = String::from_utf8_lossy(peer.as_bytes());
                out.to_control(GatewayUp::Identified {
                    conn: self.wake.conn,
                    fay_id: fay_id.into(),
                });
                let event = DtpEvent::Established {
                    session_id,
                    peer,
                    resumed,
                };
                self.app.event(self.session, ep, event, now);
            }
            DtpEvent::Error(DtpError::Cap(e)) => {
                refused_handshake(self.wake.conn, &e);
                let event = DtpEvent::Error(DtpError::Cap(e));
                self.app.event(self.session, ep, event, now);
            }
            other => self.app.event(self.session, ep, other, now),
        }
    }

    fn timer(&self, ep: &DtpEndpoint, now: Instant) -> Option<Instant> {
        let wait = self.waiting_resume.map(|w| {
            if w.woken {
                w.until
            } else {
                (now + RESUME_POLL).min(w.until)
            }
        });
        match (ep.poll_timeout(), wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A handshake this terminal refused: logged (the code, the connection,
/// why — a credential's descriptor id at most, never key material) and
/// counted for `/metrics` ([`cap_refusals`](super::cap_refusals)). A
/// handshake that timed out is an `info`, every other refusal a `warn`.
fn refused_handshake(conn: ConnId, e: &dtp_crypto::cap::CapError) {
    let code = e.code();
    super::cap_refusals().record(code);
    if code == ErrorCode::CAP_TIMEOUT {
        tracing::info!(%code, conn = conn.as_u64(), reason = %e, "CAP handshake refused");
    } else {
        tracing::warn!(%code, conn = conn.as_u64(), reason = %e, "CAP handshake refused");
    }
}

/// Answers a waiting resume request from the registry: resumes, refuses
/// (the grace is over), or leaves it waiting — woken by the registry when
/// the session is parked (on any core), or looking again on its timer when
/// the store cannot wake it.
fn try_resume(
    registry: &dyn SuspendedSessions,
    ep: &mut DtpEndpoint,
    waiting_resume: &mut Option<WaitingResume>,
    wake: Wake<'_>,
    now: Instant,
) {
    let Some(mut w) = *waiting_resume else {
        return;
    };
    let taken = match wake.notifier {
        // A waiter is kept already: look without keeping another.
        _ if w.woken => registry
            .take(w.session_id, now)
            .map_or(Taken::Waiting, |s| Taken::Session(Box::new(s))),
        Some(notifier) => {
            let (notifier, conn) = (notifier.clone(), wake.conn);
            let waiter = ResumeWaiter::new(w.until, move || notifier.notify(conn));
            registry.take_or_wait(w.session_id, now, waiter)
        }
        None => registry
            .take(w.session_id, now)
            .map_or(Taken::Absent, |s| Taken::Session(Box::new(s))),
    };
    match taken {
        Taken::Session(s) => {
            *waiting_resume = None;
            if let Err(refused) = ep.resume_with(*s, now) {
                // Not this peer's (or not now): the session stays
                // parked for its owner.
                let _ = registry.park(*refused.session, now);
            }
        }
        _ if now >= w.until => {
            *waiting_resume = None;
            ep.refuse_resume();
        }
        Taken::Waiting => {
            w.woken = true;
            *waiting_resume = Some(w);
        }
        Taken::Absent => {
            w.woken = false;
            *waiting_resume = Some(w);
        }
    }
}

impl<A: DtpApp> DtpGateway<A> {
    /// Looks for the session `c`'s resume request waits for ([`try_resume`]).
    fn look_for_session(&self, c: &mut GatewayConn<A::Session>, now: Instant) {
        let wake = Wake {
            notifier: self.notifier.as_ref(),
            conn: c.conn,
        };
        try_resume(
            &*self.registry,
            &mut c.endpoint,
            &mut c.waiting_resume,
            wake,
            now,
        );
    }

    /// Sends a control-plane message in `c`'s session (SPEC §2-3).
    fn send_control(
        &mut self,
        c: &mut GatewayConn<A::Session>,
        msg: ControlMessage,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        if let Err(e) = c.endpoint.send_control(msg) {
            // Not established (yet, or any more): the control thread hears
            // the connection's end; the message has no session to go on.
            tracing::debug!(error = %e, "a control message found no session");
        }
        self.drive(c, out);
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl<A: DtpApp> FrameService for DtpGateway<A> {
    type Conn = Option<GatewayConn<A::Session>>;
    type Up = GatewayUp;
    type Down = GatewayDown;

    fn open(&mut self, conn: ConnId, _: Origin, out: &mut Outbox<'_, GatewayUp>) -> Self::Conn {
        let now = out.now();
        let rng = self.rng.clone();
        let mut fill = |b: &mut [u8]| {
            if rng.fill(b).is_err() {
                panic!("the system random generator failed");
            }
        };
        match DtpEndpoint::terminal(&self.config, now, unix_now(), &mut fill) {
            Ok(endpoint) => {
                let mut c = GatewayConn {
                    conn,
                    endpoint,
                    session: A::Session::default(),
                    waiting_resume: None,
                };
                self.drive(&mut c, out);
                Some(c)
            }
            Err(e) => {
                tracing::error!(conn = conn.as_u64(), error = %e, "no DTP endpoint for this connection");
                out.close();
                None
            }
        }
    }

    fn frame(
        &mut self,
        state: &mut Self::Conn,
        frame: Frame,
        out: &mut Outbox<'_, GatewayUp>,
    ) -> Result<(), ErrorCode> {
        let Some(c) = state else {
            out.close();
            return Ok(());
        };
        let now = out.now();
        c.endpoint
            .handle_frame_with_head(frame.head, frame.wire, now);
        self.drive(c, out);
        Ok(())
    }

    /// The close frame goes out in the connection's session (sealed once
    /// it is established), and the session ends: it is not parked for a
    /// resume.
    fn close_with(
        &mut self,
        state: &mut Self::Conn,
        code: ErrorCode,
        reason: &str,
        out: &mut Outbox<'_, GatewayUp>,
    ) {
        if let Some(c) = state {
            c.endpoint.close_with(code, reason);
            self.drive(c, out);
        }
    }

    /// The control thread's messages for a connection go out sealed in
    /// its session.
    fn decision(
        &mut self,
        decision: GatewayDown,
        conns: &mut dyn Connections<Self::Conn, GatewayUp>,
    ) -> Option<GatewayDown> {
        let GatewayDown::Send { conn, msg } = decision else {
            return Some(decision);
        };
        let mut msg = Some(*msg);
        // A connection closed meanwhile is skipped: the control thread
        // hears its Down.
        conns.visit(conn, &mut |state, out| {
            if let (Some(c), Some(msg)) = (state.as_mut(), msg.take()) {
                self.send_control(c, msg, out);
            }
        });
        None
    }

    fn timeout(&mut self, state: &mut Self::Conn, now: Instant, out: &mut Outbox<'_, GatewayUp>) {
        if let Some(c) = state {
            self.look_for_session(c, now);
            c.endpoint.handle_timeout(now);
            self.drive(c, out);
        }
    }

    fn attach(&mut self, notifier: Notifier) {
        self.notifier = Some(notifier);
    }

    /// The session a resume request waits for was parked (by this core or
    /// another): take it now.
    fn notified(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, GatewayUp>) {
        if let Some(c) = state
            && let Some(w) = &mut c.waiting_resume
        {
            // Its waiter has run: a look that finds nothing keeps a new one.
            w.woken = false;
            let now = out.now();
            self.look_for_session(c, now);
            self.drive(c, out);
        }
    }

    fn writable(&mut self, state: &mut Self::Conn, out: &mut Outbox<'_, GatewayUp>) {
        if let Some(c) = state {
            self.drive(c, out);
        }
    }

    fn close(&mut self, state: Self::Conn, _: CloseReason, now: Instant) {
        let Some(mut c) = state else {
            return;
        };
        if let Some(s) = c.endpoint.connection_lost(now) {
            // SES-2: park the session for a reconnect on any shard; a full
            // (or failing) store ends it (bounded memory).
            if let Err(refused) = self.registry.park(s, now) {
                tracing::warn!(error = %refused, "a suspended session is dropped");
            }
        }
        let _ = self.registry.expire(now);
    }
}
