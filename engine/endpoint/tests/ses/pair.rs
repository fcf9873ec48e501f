//! Two `DtpEndpoint`s — a Fay and a terminal — joined by an in-order link
//! in virtual time: the terminal's driver answers resume requests from a
//! `SessionRegistry`, as the gateway does, and a cut loses whatever is in
//! flight. Time moves only when a test says so (sans-IO: every call gets
//! `now`).

use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_codec::{AccessMode, AgreementId, Limits, Terms, peek_frame_len};
use dtp_endpoint::{
    DtpEndpoint, DtpEvent, EndpointConfig, FayConfig, Role, SessionRegistry, SuspendedSession,
    TerminalConfig,
};
use dtp_test_kit::{Keys, fill, unix_now};

/// One end: its endpoint, bytes it sent still on the link, its receive
/// buffer, and the events it reported.
pub(crate) struct End {
    pub(crate) ep: DtpEndpoint,
    wire: BytesMut,
    rx: BytesMut,
    pub(crate) events: Vec<DtpEvent>,
}

impl End {
    fn new(ep: DtpEndpoint) -> Self {
        End {
            ep,
            wire: BytesMut::new(),
            rx: BytesMut::new(),
            events: Vec::new(),
        }
    }

    fn transmit(&mut self) {
        self.ep.poll_transmit(&mut self.wire);
        while let Some(e) = self.ep.poll_event() {
            self.events.push(e);
        }
    }

    fn receive(&mut self, bytes: &[u8], now: Instant) {
        self.rx.extend_from_slice(bytes);
        while let Ok(len) = peek_frame_len(&self.rx, &Limits::default()) {
            if len > self.rx.len() || self.ep.is_closed() {
                break;
            }
            self.ep.handle_frame(self.rx.split_to(len), now);
        }
        self.transmit();
    }

    /// The events so far, taken.
    pub(crate) fn take(&mut self) -> Vec<DtpEvent> {
        std::mem::take(&mut self.events)
    }

    /// The close code reported, if any.
    pub(crate) fn closed(&self) -> Option<dtp_codec::ErrorCode> {
        self.events.iter().find_map(|e| match e {
            DtpEvent::Closed { code } => Some(*code),
            _ => None,
        })
    }

    /// `(fragment id, sequence)` of every fragment reported.
    pub(crate) fn fragments(&self) -> Vec<(u64, u64)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                DtpEvent::Fragment {
                    fragment_id,
                    sequence,
                    ..
                } => Some((*fragment_id, *sequence)),
                _ => None,
            })
            .collect()
    }
}

/// The pair, its clock, and the terminal's registry of suspended sessions.
pub(crate) struct Pair {
    pub(crate) keys: Keys,
    pub(crate) config: EndpointConfig,
    pub(crate) now: Instant,
    pub(crate) fay: End,
    pub(crate) term: End,
    pub(crate) registry: SessionRegistry,
    /// What the Fay's last connection left to resume.
    pub(crate) fay_suspended: Option<SuspendedSession>,
    /// When false, the terminal's driver leaves resume requests unanswered.
    pub(crate) auto_resume: bool,
}

/// The test's keys: a Fay `fay-1` allowed to read `camera`.
pub(crate) fn keys() -> Keys {
    Keys::new(41, "fay-1", &[("camera", &[AccessMode::Read])])
}

/// Where virtual time starts: any instant will do, none is read again.
#[allow(
    clippy::disallowed_methods,
    reason = "the one reading of the clock: the origin of virtual time"
)]
fn origin() -> Instant {
    Instant::now()
}

impl Pair {
    /// A pair with `config`'s timers and ceilings on both sides (each
    /// with its own DTP role), CAP not yet run.
    pub(crate) fn new(config: EndpointConfig) -> Self {
        let keys = keys();
        let now = origin();
        let fay = DtpEndpoint::fay(&fay_config(&keys, config), now, &mut fill).unwrap();
        let term =
            DtpEndpoint::terminal(&terminal_config(&keys, config), now, unix_now(), &mut fill)
                .unwrap();
        Pair {
            keys,
            config,
            now,
            fay: End::new(fay),
            term: End::new(term),
            registry: SessionRegistry::new(16),
            fay_suspended: None,
            auto_resume: true,
        }
    }

    /// A pair through CAP: the session is established on both sides.
    pub(crate) fn established(config: EndpointConfig) -> Self {
        let mut p = Self::new(config);
        p.drive();
        assert!(p.fay.ep.is_established() && p.term.ep.is_established());
        p
    }

    /// A pair with one collection agreement (the terminal sends on it).
    pub(crate) fn transmitting(config: EndpointConfig) -> (Self, AgreementId) {
        let mut p = Self::established(config);
        let id = p.collection();
        (p, id)
    }

    /// The Fay asks for a collection and the terminal accepts it.
    pub(crate) fn collection(&mut self) -> AgreementId {
        self.fay
            .ep
            .request_collection(terms("frames"), self.now)
            .unwrap();
        self.drive();
        let request = self.term.take().into_iter().find_map(|e| match e {
            DtpEvent::AgreementRequested { request_id, .. } => Some(request_id),
            _ => None,
        });
        let mut random = [0u8; 16];
        fill(&mut random);
        let id = self
            .term
            .ep
            .accept(request.unwrap(), random, self.now)
            .unwrap();
        self.drive();
        self.fay.take();
        id
    }

    /// Moves every byte on the link, both ways, until it is quiet.
    pub(crate) fn drive(&mut self) {
        self.fay.transmit();
        self.term.transmit();
        for _ in 0..100 {
            if self.fay.wire.is_empty() && self.term.wire.is_empty() {
                return;
            }
            let now = self.now;
            let to_term = self.fay.wire.split();
            self.term.receive(&to_term, now);
            self.answer_resume();
            let to_fay = self.term.wire.split();
            self.fay.receive(&to_fay, now);
        }
        panic!("the link never went quiet");
    }

    /// What the Fay sent reaches the terminal; the terminal's answers stay
    /// on the link (a cut may lose them).
    pub(crate) fn deliver_to_terminal(&mut self) {
        self.fay.transmit();
        let bytes = self.fay.wire.split();
        self.term.receive(&bytes, self.now);
    }

    /// Time passes to `at`: both ends run their due timers, the link runs.
    pub(crate) fn advance_to(&mut self, at: Instant) {
        assert!(at >= self.now, "virtual time only goes forward");
        self.now = at;
        for end in [&mut self.fay, &mut self.term] {
            if end.ep.poll_timeout().is_some_and(|t| t <= at) {
                end.ep.handle_timeout(at);
            }
        }
        self.drive();
    }

    /// Time passes by `d`.
    pub(crate) fn advance(&mut self, d: Duration) {
        self.advance_to(self.now + d);
    }

    /// The terminal's driver: a resume request is answered from the
    /// registry; a refused session goes back into it.
    fn answer_resume(&mut self) {
        if !self.auto_resume {
            return;
        }
        let asked: Vec<_> = self
            .term
            .events
            .iter()
            .filter_map(|e| match e {
                DtpEvent::ResumeRequested { session_id } => Some(*session_id),
                _ => None,
            })
            .collect();
        for id in asked {
            match self.registry.take(id, self.now) {
                Some(s) => {
                    if let Err(refused) = self.term.ep.resume_with(s, self.now) {
                        self.registry.insert(*refused.session, self.now).unwrap();
                    }
                }
                None => self.term.ep.refuse_resume(),
            }
            self.term.transmit();
        }
    }

    /// The connection drops: nothing in flight arrives; the terminal parks
    /// what it suspends, the Fay keeps what it suspends.
    pub(crate) fn cut(&mut self) {
        let now = self.now;
        self.fay.wire.clear();
        self.term.wire.clear();
        self.fay.rx.clear();
        self.term.rx.clear();
        if let Some(s) = self.term.ep.connection_lost(now) {
            self.registry.insert(s, now).unwrap();
        }
        self.fay_suspended = self
            .fay
            .ep
            .connection_lost(now)
            .or_else(|| self.fay.ep.take_suspended());
        self.fay.transmit();
        self.term.transmit();
    }

    /// A new connection: the Fay `fay` resumes its suspended session, the
    /// terminal starts afresh; the link runs.
    pub(crate) fn reconnect_as(&mut self, fay: &FayConfig) {
        self.now += Duration::from_millis(1);
        let session = self.fay_suspended.take().expect("a session to resume");
        let ep = DtpEndpoint::fay_resume(fay, session, self.now, &mut fill).unwrap();
        self.fay = End::new(ep);
        let term = terminal_config(&self.keys, self.config);
        self.term =
            End::new(DtpEndpoint::terminal(&term, self.now, unix_now(), &mut fill).unwrap());
        self.drive();
    }

    /// [`Pair::reconnect_as`] the same Fay.
    pub(crate) fn reconnect(&mut self) {
        let fay = fay_config(&self.keys, self.config);
        self.reconnect_as(&fay);
    }
}

/// The Fay's configuration with `config`'s timers, as DTP Master.
pub(crate) fn fay_config(keys: &Keys, config: EndpointConfig) -> FayConfig {
    let mut fay = keys.fay_config();
    fay.endpoint = EndpointConfig {
        role: Role::Master,
        ..config
    };
    fay
}

/// The terminal's configuration with `config`'s timers, as DTP Slave.
pub(crate) fn terminal_config(keys: &Keys, config: EndpointConfig) -> TerminalConfig {
    let mut term = keys.terminal_config();
    term.endpoint = EndpointConfig {
        role: Role::Slave,
        ..config
    };
    term
}

/// Terms naming what is collected.
pub(crate) fn terms(what: &str) -> Terms {
    Terms::from([("what".to_owned(), what.to_owned())])
}
