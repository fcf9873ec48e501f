//! A Fay over a blocking [`TcpStream`]: a [`DtpEndpoint`] fed the frames
//! that arrive, its transmissions written, its timers run, its events kept
//! until a test takes them. It drives the endpoint in the order the
//! endpoint's docs ask (input, `poll_transmit`, `poll_event`,
//! `poll_timeout`), in turns of at most 20 ms.
//!
//! It speaks every part of DTP a test needs: CAP (SPEC SEQ-1), agreements
//! (SEQ-3a), sealed fragments (ENC-1), control messages (the terminal
//! plane's AuthRequest, heartbeats, releases: TS-6, LIV-2, TS-13), a cut
//! connection and its resume under a new handshake (SES-2, SES-3, SEQ-5).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use dtp_codec::{
    AccessMode, AgreementId, AuthOutcome, AuthRequest, AuthResult, ControlMessage, ErrorCode,
    Limits, SessionId, SessionState, Terms, peek_frame_len,
};
use dtp_endpoint::{DtpEndpoint, DtpEvent, FayConfig, SuspendedSession};

/// How long [`Fay::wait`] waits for its event, unless told otherwise
/// ([`Fay::with_patience`]).
pub const WAIT: Duration = Duration::from_secs(10);

/// Hands `ep` every whole frame of `rx` (taking them off it) and runs its
/// timer if due at `now`: one step of a test's hand-driven endpoint.
pub fn feed(ep: &mut DtpEndpoint, rx: &mut BytesMut, now: Instant) {
    while let Ok(len) = peek_frame_len(rx, &Limits::default()) {
        if len > rx.len() {
            break;
        }
        ep.handle_frame(rx.split_to(len), now);
    }
    if ep.poll_timeout().is_some_and(|t| t <= now) {
        ep.handle_timeout(now);
    }
}

/// Distinct bytes on every call, in this process and across processes (a
/// clock-seeded counter): all that CAP's ephemeral seeds need in a test.
pub fn fill(buf: &mut [u8]) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let seed = clock ^ n.rotate_left(32) ^ u64::from(std::process::id());
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (seed.rotate_left((i % 64) as u32) as u8) ^ (i as u8).wrapping_mul(151);
    }
}

/// A Fay on one TCP connection.
pub struct Fay {
    /// The endpoint, for what the helpers here do not cover.
    pub ep: DtpEndpoint,
    fay_id: String,
    credential: Bytes,
    sock: TcpStream,
    rx: BytesMut,
    events: Vec<DtpEvent>,
    /// The terminal closed the connection.
    eof: bool,
    /// How long a wait may take.
    patience: Duration,
}

impl Fay {
    /// Connects to `addr` and starts CAP with `config`'s key and credential.
    pub fn start(addr: SocketAddr, config: &FayConfig) -> Self {
        let ep = DtpEndpoint::fay(config, Instant::now(), &mut fill).unwrap();
        Self::over(addr, config, ep)
    }

    /// Connects and runs CAP: a new session is established.
    pub fn connect(addr: SocketAddr, config: &FayConfig) -> Self {
        let mut fay = Self::start(addr, config);
        fay.wait("DTP session", |e| {
            matches!(e, DtpEvent::Established { resumed: false, .. }).then_some(())
        });
        fay
    }

    /// Connects, expecting CAP to be refused: the terminal's close code.
    pub fn refused(addr: SocketAddr, config: &FayConfig) -> ErrorCode {
        let mut fay = Self::start(addr, config);
        fay.closed()
    }

    /// SPEC SEQ-5: connects to `addr` and starts resuming `session` (CAP
    /// again, then RESUME).
    pub fn start_resume(addr: SocketAddr, config: &FayConfig, session: SuspendedSession) -> Self {
        let ep = match DtpEndpoint::fay_resume(config, session, Instant::now(), &mut fill) {
            Ok(ep) => ep,
            Err(refused) => panic!("resume refused locally: {refused}"),
        };
        Self::over(addr, config, ep)
    }

    /// SPEC SES-3: resumes `session` on a new connection to `addr`: the
    /// session is established again, `resumed`.
    pub fn resume(addr: SocketAddr, config: &FayConfig, session: SuspendedSession) -> Self {
        let mut fay = Self::start_resume(addr, config, session);
        fay.wait("resumed DTP session", |e| match e {
            DtpEvent::Established { resumed: true, .. } => Some(()),
            DtpEvent::Closed { code } => panic!("the resume was refused with {code}"),
            _ => None,
        });
        fay
    }

    fn over(addr: SocketAddr, config: &FayConfig, ep: DtpEndpoint) -> Self {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_nodelay(true).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let credential = &config.cap.credential;
        Fay {
            ep,
            fay_id: credential.descriptor().fay_id.clone(),
            credential: credential.as_bytes().clone(),
            sock,
            rx: BytesMut::new(),
            events: Vec::new(),
            eof: false,
            patience: WAIT,
        }
    }

    /// The same Fay, each wait allowed `patience` instead of [`WAIT`] (a
    /// long stream in a debug build).
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// The `fay_id` of the credential this Fay presents.
    pub fn fay_id(&self) -> &str {
        &self.fay_id
    }

    /// Whether the terminal closed the connection.
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// Sends what the endpoint has queued, reading nothing. A write the
    /// terminal no longer takes (it closed) counts as the end of the
    /// connection.
    pub fn flush(&mut self) {
        let mut tx = BytesMut::new();
        self.ep.poll_transmit(&mut tx);
        if !tx.is_empty() && !self.eof && self.sock.write_all(&tx).is_err() {
            self.eof = true;
        }
    }

    /// Writes what the endpoint has queued but its last `keep_back` bytes
    /// (a cut in the middle of a frame); how many bytes were queued.
    pub fn write_all_but(&mut self, keep_back: usize) -> usize {
        let mut tx = BytesMut::new();
        self.ep.poll_transmit(&mut tx);
        let len = tx.len();
        self.sock
            .write_all(&tx[..len.saturating_sub(keep_back)])
            .unwrap();
        len
    }

    /// Closes the socket in both directions (the endpoint is not told).
    pub fn shutdown(&self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    /// One turn: send what is queued, read what came (20 ms at most), feed
    /// whole frames, run timers, keep the events.
    pub fn turn(&mut self) {
        self.flush();
        let mut buf = [0u8; 64 * 1024];
        if !self.eof {
            match self.sock.read(&mut buf) {
                Ok(0) => self.eof = true,
                Ok(n) => self.rx.extend_from_slice(&buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => self.eof = true,
                Err(e) => panic!("read: {e}"),
            }
        }
        feed(&mut self.ep, &mut self.rx, Instant::now());
        while let Some(e) = self.ep.poll_event() {
            self.events.push(e);
        }
    }

    /// The events kept so far, taken.
    pub fn take_events(&mut self) -> Vec<DtpEvent> {
        std::mem::take(&mut self.events)
    }

    /// Turns until an event matches `f` (taking it); fails after [`WAIT`]
    /// or once the terminal closed without sending it.
    pub fn wait<T>(&mut self, what: &str, mut f: impl FnMut(&DtpEvent) -> Option<T>) -> T {
        let deadline = Instant::now() + self.patience;
        loop {
            if let Some(i) = self.events.iter().position(|e| f(e).is_some()) {
                let e = self.events.remove(i);
                return f(&e).unwrap();
            }
            assert!(
                Instant::now() < deadline && !self.eof,
                "no {what} within {:?} (terminal closed: {}); state {:?}, events {:?}",
                self.patience,
                self.eof,
                self.ep.state(),
                self.events
            );
            self.turn();
        }
    }

    /// The code the connection closes with (no session may be established
    /// first).
    pub fn closed(&mut self) -> ErrorCode {
        self.wait("close", |e| match e {
            DtpEvent::Established { .. } => panic!("CAP succeeded"),
            DtpEvent::Closed { code } => Some(*code),
            _ => None,
        })
    }

    /// Turns until the connection ends (the endpoint closed, or the
    /// terminal hung up): the endpoint's close code.
    pub fn wait_closed(&mut self) -> Option<ErrorCode> {
        let deadline = Instant::now() + self.patience;
        while !self.ep.is_closed() && !self.eof {
            assert!(Instant::now() < deadline, "the connection never ended");
            self.turn();
        }
        self.ep.close_code()
    }

    /// Closes cleanly: the close frame goes out, the terminal hangs up.
    pub fn close(mut self) {
        self.ep.close("done");
        let deadline = Instant::now() + self.patience;
        while !self.eof {
            assert!(Instant::now() < deadline, "the terminal never hung up");
            self.turn();
        }
    }

    /// The next control message matching `f`.
    pub fn control<T>(&mut self, what: &str, mut f: impl FnMut(&ControlMessage) -> Option<T>) -> T {
        self.wait(what, |e| match e {
            DtpEvent::Control(m) => f(m),
            _ => None,
        })
    }

    /// Sends a control message.
    pub fn send_control(&mut self, msg: ControlMessage) {
        self.ep.send_control(msg).unwrap();
        self.turn();
    }

    /// SPEC SEQ-3a: requests a collection under `terms` and waits until
    /// the agreement is active.
    pub fn open_agreement(&mut self, terms: Terms) -> AgreementId {
        self.ep.request_collection(terms, Instant::now()).unwrap();
        self.wait("AgreementActive", |e| match e {
            DtpEvent::AgreementActive { agreement_id, .. } => Some(*agreement_id),
            DtpEvent::AgreementRejected { reason, .. } => panic!("agreement rejected: {reason}"),
            _ => None,
        })
    }

    /// Sends fragment `id` (no relations) on `agreement`, sealed.
    pub fn send_fragment(&mut self, agreement: AgreementId, id: u64, payload: Bytes) {
        self.ep
            .send_fragment(agreement, id, vec![], payload)
            .unwrap();
        self.turn();
    }

    /// SPEC RES-4: sends fragments `*next ..= last` (payloads from
    /// `payload`) on `agreement` as far as the resume cache allows
    /// (BUFFER_FULL pauses); `next` moves past what was sent.
    pub fn send_stream(
        &mut self,
        agreement: AgreementId,
        next: &mut u64,
        last: u64,
        payload: impl Fn(u64) -> Bytes,
    ) {
        while *next <= last {
            match self
                .ep
                .send_fragment(agreement, *next, vec![], payload(*next))
            {
                Ok(_) => *next += 1,
                Err(e) if e.code() == ErrorCode::BUFFER_FULL => return,
                Err(e) => panic!("send_fragment: {e}"),
            }
        }
    }

    /// SPEC RES-2: streams until fragments up to `last` are all sent and
    /// acknowledged (the resume cache is empty). An error the endpoint
    /// reports, or a close, fails the test.
    pub fn finish_stream(
        &mut self,
        agreement: AgreementId,
        next: &mut u64,
        last: u64,
        payload: impl Fn(u64) -> Bytes,
    ) {
        let deadline = Instant::now() + self.patience;
        loop {
            self.send_stream(agreement, next, last, &payload);
            if *next > last && self.ep.resume_cache().0 == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no progress: next {next} of {last}, cache {:?}",
                self.ep.resume_cache()
            );
            self.turn();
            for event in self.take_events() {
                if let DtpEvent::Error(e) = event {
                    panic!("the Fay's endpoint reports an error: {e}");
                }
            }
            assert!(!self.ep.is_closed(), "closed: {:?}", self.ep.close_code());
        }
    }

    /// The next fragment the terminal sends: its id and payload.
    pub fn fragment(&mut self) -> (u64, Bytes) {
        self.wait("Fragment", |e| match e {
            DtpEvent::Fragment {
                fragment_id,
                payload,
                ..
            } => Some((*fragment_id, payload.clone())),
            _ => None,
        })
    }

    /// SPEC SES-2: the connection is cut (the socket closed without a
    /// close frame): the session the endpoint suspends, if any. Events not
    /// taken yet are dropped with the connection (a fragment among them
    /// counts as received: it is not sent again).
    pub fn cut(mut self) -> Option<SuspendedSession> {
        self.shutdown();
        drop(self.sock);
        let now = Instant::now();
        self.ep
            .connection_lost(now)
            .or_else(|| self.ep.take_suspended())
    }

    /// SPEC TS-6: sends an AuthRequest for `resource_id` in `mode` with
    /// this Fay's credential.
    pub fn ask(&mut self, request_id: u64, resource_id: &str, mode: AccessMode) {
        let auth = AuthRequest {
            request_id,
            fay_id: self.fay_id.clone(),
            resource_id: resource_id.into(),
            access_mode: mode,
            credential: self.credential.clone(),
        };
        self.send_control(ControlMessage::AuthRequest(auth));
    }

    /// The AuthResult of `request_id`.
    pub fn outcome(&mut self, request_id: u64) -> AuthOutcome {
        self.control("AuthResult", |m| match m {
            ControlMessage::AuthResult(AuthResult {
                request_id: r,
                outcome,
            }) if *r == request_id => Some(outcome.clone()),
            _ => None,
        })
    }

    /// Asks and expects a terminal session.
    pub fn session(&mut self, request_id: u64, resource_id: &str, mode: AccessMode) -> SessionId {
        self.ask(request_id, resource_id, mode);
        match self.outcome(request_id) {
            AuthOutcome::Granted { session_id } => session_id,
            refused => panic!("{} refused {resource_id}: {refused:?}", self.fay_id),
        }
    }

    /// The reason `session_id` reached terminated with (SPEC TS-13).
    pub fn terminated(&mut self, session_id: SessionId) -> Option<String> {
        self.control("SessionStateChanged(terminated)", |m| match m {
            ControlMessage::SessionStateChanged(c)
                if c.session_id == session_id && c.new_state == SessionState::Terminated =>
            {
                Some(c.reason.clone())
            }
            _ => None,
        })
    }
}
