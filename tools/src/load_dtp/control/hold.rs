//! `dtp load --dtp --control hold`: one Fay holds one terminal session open
//! from the command line — CAP, AuthRequest → AuthResult for `--resource`,
//! heartbeats until Ctrl-C (or `--duration`), then SessionRelease — so a
//! new user can watch and drive it with `dtp ctl` (sessions, terminate,
//! handovers) while it runs.
//!
//! **Owns**: its one blocking TCP connection and the loop that drives the
//! Fay's [`DtpEndpoint`] over it (the shape of the tests' Fay driver),
//! what it prints. **Never touches**: the terminal's rules, the other
//! control modes (`super::flow`), the engine.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_codec::{
    AccessMode, AuthOutcome, AuthRequest, Beat, ControlMessage, ErrorCode, Heartbeat, SessionId,
    SessionRelease, SessionState, peek_frame_len,
};
use dtp_gateway::dtp::{DtpEndpoint, DtpEvent, FayConfig};
use ring::rand::{SecureRandom, SystemRandom};

use crate::cli_error::CliError;
use crate::load::status::{connect_failure, hint, reason};

/// How long the handshake and the AuthRequest may take, and the release
/// at the end.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// The longest one read waits (the loop's tick).
const TICK: Duration = Duration::from_millis(50);

/// What to hold.
pub(crate) struct HoldSpec {
    pub(crate) target: SocketAddr,
    pub(crate) fay: FayConfig,
    pub(crate) resource_id: String,
    pub(crate) access: AccessMode,
    /// Between two heartbeats (below the terminal's interval: SPEC LIV-2).
    pub(crate) heartbeat: Duration,
    /// Hold this long; `None`: until SIGINT or SIGTERM.
    pub(crate) duration: Option<Duration>,
}

/// The connection and its endpoint.
struct Link {
    sock: TcpStream,
    ep: DtpEndpoint,
    rx: BytesMut,
    eof: bool,
}

impl Link {
    /// One turn: send what is queued, read what came (at most [`TICK`]),
    /// feed whole frames and due timeouts.
    fn turn(&mut self, events: &mut Vec<DtpEvent>) -> Result<(), CliError> {
        let mut tx = BytesMut::new();
        self.ep.poll_transmit(&mut tx);
        if !tx.is_empty() {
            self.sock
                .write_all(&tx)
                .map_err(|e| CliError::Io(format!("the connection failed: {e}")))?;
        }
        let mut buf = [0u8; 16 * 1024];
        match self.sock.read(&mut buf) {
            Ok(0) => self.eof = true,
            Ok(n) => self.rx.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(CliError::Io(format!("the connection failed: {e}"))),
        }
        let now = Instant::now();
        let limits = self.ep.config().limits;
        loop {
            match peek_frame_len(&self.rx, &limits) {
                Ok(len) if len <= self.rx.len() => {
                    let frame = self.rx.split_to(len);
                    self.ep.handle_frame(frame, now);
                }
                Ok(_) => break,
                Err(e) if e.code() == ErrorCode::TRUNCATED => break,
                Err(e) => {
                    return Err(CliError::Io(format!(
                        "the terminal sent a malformed frame: {e}"
                    )));
                }
            }
        }
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
        }
        while let Some(e) = self.ep.poll_event() {
            events.push(e);
        }
        Ok(())
    }

    /// Turns until `f` takes an event; fails when the terminal closes or
    /// `within` passes first.
    fn wait<T>(
        &mut self,
        what: &str,
        within: Duration,
        mut f: impl FnMut(&DtpEvent) -> Option<T>,
    ) -> Result<T, CliError> {
        let deadline = Instant::now() + within;
        let mut events = Vec::new();
        let mut last_error = None;
        loop {
            for e in events.drain(..) {
                if let Some(v) = f(&e) {
                    return Ok(v);
                }
                failure(e, &mut last_error)?;
            }
            if self.eof {
                return Err(CliError::Io(format!(
                    "the terminal closed the connection while waiting for {what}"
                )));
            }
            if Instant::now() >= deadline {
                return Err(CliError::Io(format!(
                    "no {what} within {} s",
                    within.as_secs()
                )));
            }
            self.turn(&mut events)?;
        }
    }
}

/// Keeps an error event for the close that follows it; a close is the
/// run's end, with that error's reason.
fn failure(e: DtpEvent, last_error: &mut Option<(ErrorCode, String)>) -> Result<(), CliError> {
    match e {
        DtpEvent::Error(err) => *last_error = Some((err.code(), reason(&err))),
        DtpEvent::Closed { code } => return Err(closed(code, last_error.take())),
        _ => {}
    }
    Ok(())
}

/// The error of a connection closed with `code`.
fn closed(code: ErrorCode, last_error: Option<(ErrorCode, String)>) -> CliError {
    let mut line = format!("the connection closed with {code}");
    if let Some((c, why)) = last_error
        && c == code
    {
        line += &format!(": {why}");
    }
    if let Some(h) = hint(code) {
        line += &format!(" ({h})");
    }
    CliError::Io(line)
}

/// Holds one session: connects, asks, prints, heartbeats, releases.
pub(crate) fn run(spec: &HoldSpec) -> Result<(), CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| CliError::Io(format!("signals: {e}")))?;
    }
    let sock = TcpStream::connect(spec.target).map_err(|e| {
        CliError::Io(connect_failure(
            &spec.target.into(),
            e.raw_os_error().unwrap_or(0),
        ))
    })?;
    sock.set_read_timeout(Some(TICK))
        .and_then(|()| sock.set_nodelay(true))
        .map_err(|e| CliError::Io(format!("socket: {e}")))?;
    let rng = SystemRandom::new();
    let mut ok = true;
    let ep = DtpEndpoint::fay(&spec.fay, Instant::now(), &mut |b| {
        if rng.fill(b).is_err() {
            ok = false;
        }
    })
    .map_err(|e| CliError::Io(format!("no DTP endpoint: {e}")))?;
    if !ok {
        return Err(CliError::Io("no system randomness for CAP".into()));
    }
    let mut link = Link {
        sock,
        ep,
        rx: BytesMut::new(),
        eof: false,
    };
    link.wait("DTP session", ANSWER_WITHIN, |e| {
        matches!(e, DtpEvent::Established { .. }).then_some(())
    })?;
    let credential = &spec.fay.cap.credential;
    let fay_id = credential.descriptor().fay_id.clone();
    link.ep
        .send_control(ControlMessage::AuthRequest(AuthRequest {
            request_id: 1,
            fay_id: fay_id.clone(),
            resource_id: spec.resource_id.clone(),
            access_mode: spec.access,
            credential: credential.as_bytes().clone(),
        }))
        .map_err(|e| CliError::Io(format!("could not send the AuthRequest: {e}")))?;
    let outcome = link.wait("AuthResult", ANSWER_WITHIN, |e| match e {
        DtpEvent::Control(ControlMessage::AuthResult(r)) if r.request_id == 1 => {
            Some(r.outcome.clone())
        }
        _ => None,
    })?;
    let session_id = match outcome {
        AuthOutcome::Granted { session_id } => session_id,
        AuthOutcome::Refused { code, message } => {
            let mut line = format!("the terminal refused the AuthRequest: {code}: {message}");
            if let Some(h) = hint(code) {
                line += &format!(" ({h})");
            }
            return Err(CliError::Io(line));
        }
    };
    println!(
        "holding session {session_id} on {} ({}) as {fay_id}",
        spec.resource_id,
        spec.access.name()
    );
    println!(
        "dtp ctl sessions lists it: {session_id}  {fay_id}  {}  {}  active  up",
        spec.resource_id,
        spec.access.name()
    );
    println!(
        "{}",
        match spec.duration {
            Some(d) => format!(
                "heartbeat every {} ms for {:.1} s, then release (Ctrl-C releases it sooner)",
                spec.heartbeat.as_millis(),
                d.as_secs_f64()
            ),
            None => format!(
                "heartbeat every {} ms until Ctrl-C, then release",
                spec.heartbeat.as_millis()
            ),
        }
    );
    let ended = hold(&mut link, spec, session_id, &stop)?;
    if let Some(why) = ended {
        println!("the terminal ended session {session_id} ({why})");
        link.ep.close("hold finished");
        let _ = link.turn(&mut Vec::new());
        return Ok(());
    }
    release(&mut link, session_id)?;
    println!("released session {session_id}");
    Ok(())
}

/// Heartbeats until `stop` or the duration; `Some(reason)` if the
/// terminal ended the session first.
fn hold(
    link: &mut Link,
    spec: &HoldSpec,
    session_id: SessionId,
    stop: &AtomicBool,
) -> Result<Option<String>, CliError> {
    let until = spec.duration.map(|d| Instant::now() + d);
    let mut sequence = 0u64;
    let mut next_beat = Instant::now();
    let mut events = Vec::new();
    let mut last_error = None;
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) || until.is_some_and(|u| now >= u) {
            return Ok(None);
        }
        if now >= next_beat {
            let beat = Beat {
                session_id,
                sequence_number: sequence,
            };
            sequence += 1;
            next_beat = now + spec.heartbeat;
            link.ep
                .send_control(ControlMessage::Heartbeat(Heartbeat { beats: vec![beat] }))
                .map_err(|e| CliError::Io(format!("could not send a heartbeat: {e}")))?;
        }
        link.turn(&mut events)?;
        for e in events.drain(..) {
            if let Some(why) = terminated(&e, session_id) {
                return Ok(Some(why));
            }
            failure(e, &mut last_error)?;
        }
        if link.eof {
            return Err(CliError::Io(format!(
                "the terminal closed the connection; session {session_id} ends by liveness"
            )));
        }
    }
}

/// SPEC TS-15: why `session_id` ended, if `e` says it did.
fn terminated(e: &DtpEvent, session_id: SessionId) -> Option<String> {
    match e {
        DtpEvent::Control(ControlMessage::SessionStateChanged(c))
            if c.session_id == session_id && c.new_state == SessionState::Terminated =>
        {
            Some(c.reason.clone().unwrap_or_else(|| "no reason given".into()))
        }
        _ => None,
    }
}

/// SPEC TS-13: releases the session and waits for it to end, then closes.
fn release(link: &mut Link, session_id: SessionId) -> Result<(), CliError> {
    link.ep
        .send_control(ControlMessage::SessionRelease(SessionRelease {
            session_id,
        }))
        .map_err(|e| CliError::Io(format!("could not send the release: {e}")))?;
    link.wait("release", ANSWER_WITHIN, |e| terminated(e, session_id))?;
    link.ep.close("hold finished");
    link.turn(&mut Vec::new())?;
    Ok(())
}
