//! The virtual-time pair of `dtp_pair.rs`: the keys and credentials, a
//! deterministic random source, and two endpoints joined by an in-order
//! link with per-direction queues that can be cut at any byte.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use dtp_codec::{
    AccessMode, AgreementId, ErrorCode, Limits, Relation, RelationType, RequestType, Terms,
    peek_frame_len,
};
use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair, ResponderConfig};
use dtp_crypto::cred::{Credential, IssuerKeyPair, Verifier};
use dtp_gateway::dtp::{
    DirSessionStore, DtpEndpoint, DtpEvent, EndpointConfig, EngineState, FayConfig,
    SessionRegistry, SuspendedSession, SuspendedSessions, TerminalConfig,
};
use dtp_test_kit::keys;

pub(crate) const UNIX: u64 = 1_700_000_000;
const CHACHA: dtp_codec::AeadAlgorithm = dtp_codec::AeadAlgorithm::ChaCha20Poly1305;

// ----- the world: keys, credentials, configs -----

pub(crate) struct World {
    pub(crate) issuer: IssuerKeyPair,
    pub(crate) verifier: Verifier,
    pub(crate) fay: NoiseKeypair,
    pub(crate) terminal: NoiseKeypair,
    pub(crate) endpoint: EndpointConfig,
}

impl World {
    pub(crate) fn new() -> Self {
        let issuer = IssuerKeyPair::from_seed(&[1; 32]).unwrap();
        let verifier = keys::verifier(&issuer);
        World {
            issuer,
            verifier,
            fay: NoiseKeypair::from_private([2; 32]).unwrap(),
            terminal: NoiseKeypair::from_private([3; 32]).unwrap(),
            endpoint: EndpointConfig::terminal(),
        }
    }

    pub(crate) fn credential(
        &self,
        issuer: &IssuerKeyPair,
        fay: &NoiseKeypair,
        id: &str,
        not_after: u64,
    ) -> Credential {
        let grants: &[(&str, &[AccessMode])] = &[("camera", &[AccessMode::Read])];
        keys::issue(
            issuer,
            id,
            *fay.public(),
            grants,
            [4; 16],
            UNIX - 100..not_after,
        )
    }

    pub(crate) fn fay_config_with(&self, keys: &NoiseKeypair, credential: Credential) -> FayConfig {
        let mut endpoint = self.endpoint;
        endpoint.role = dtp_gateway::dtp::Role::Master;
        FayConfig {
            cap: InitiatorConfig {
                static_keypair: keys.clone(),
                credential,
                algorithms: vec![CHACHA],
                pinned_responder_key: Some(*self.terminal.public()),
                handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            },
            endpoint,
        }
    }

    pub(crate) fn fay_config(&self) -> FayConfig {
        let cred = self.credential(&self.issuer, &self.fay, "fay-1", UNIX + 3600);
        self.fay_config_with(&self.fay, cred)
    }

    pub(crate) fn terminal_config(&self) -> TerminalConfig {
        let mut endpoint = self.endpoint;
        endpoint.role = dtp_gateway::dtp::Role::Slave;
        TerminalConfig {
            cap: ResponderConfig {
                static_keypair: self.terminal.clone(),
                algorithms: vec![CHACHA],
                handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            },
            verifier: Arc::new(self.verifier_clone()),
            endpoint,
        }
    }

    pub(crate) fn verifier_clone(&self) -> Verifier {
        let mut v = Verifier::new();
        v.trust(*self.issuer.public_key()).unwrap();
        v.set_revocations(self.verifier.revocations().clone());
        v
    }
}

/// Deterministic "random" bytes (splitmix64): tests need repeatability.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            *b = (z ^ (z >> 31)) as u8;
        }
    }

    pub(crate) fn bytes16(&mut self) -> [u8; 16] {
        let mut b = [0u8; 16];
        self.fill(&mut b);
        b
    }
}

// ----- the virtual-time pair -----

/// One end: its endpoint, the bytes it sent that are in flight, its
/// receive assembly buffer and the events it reported.
pub(crate) struct End {
    pub(crate) ep: DtpEndpoint,
    pub(crate) in_flight: BytesMut,
    pub(crate) rx: BytesMut,
    pub(crate) events: Vec<DtpEvent>,
}

impl End {
    pub(crate) fn new(ep: DtpEndpoint) -> Self {
        End {
            ep,
            in_flight: BytesMut::new(),
            rx: BytesMut::new(),
            events: Vec::new(),
        }
    }

    pub(crate) fn drain_events(&mut self) {
        while let Some(e) = self.ep.poll_event() {
            self.events.push(e);
        }
    }

    pub(crate) fn transmit(&mut self) {
        self.ep.poll_transmit(&mut self.in_flight);
        self.drain_events();
    }

    /// Feeds every complete frame in `rx` (the driver's split with
    /// peek_frame_len); a malformed header is fed as is, for the endpoint
    /// to refuse.
    pub(crate) fn receive(&mut self, now: Instant) {
        loop {
            let total = match peek_frame_len(&self.rx, &Limits::default()) {
                Ok(total) if self.rx.len() >= total => total,
                Ok(_) | Err(dtp_codec::DecodeError::Incomplete { .. }) => break,
                Err(_) => self.rx.len(),
            };
            let frame = self.rx.split_to(total);
            self.ep.handle_frame(frame, now);
            self.drain_events();
            if self.ep.is_closed() {
                break;
            }
        }
    }

    pub(crate) fn fragments(&self) -> Vec<(AgreementId, u64)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                DtpEvent::Fragment {
                    agreement_id,
                    fragment_id,
                    ..
                } => Some((*agreement_id, *fragment_id)),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn closed_code(&self) -> Option<ErrorCode> {
        self.events.iter().find_map(|e| match e {
            DtpEvent::Closed { code } => Some(*code),
            _ => None,
        })
    }

    pub(crate) fn take_events(&mut self) -> Vec<DtpEvent> {
        std::mem::take(&mut self.events)
    }
}

pub(crate) struct Pair {
    pub(crate) world: World,
    pub(crate) fay_config: FayConfig,
    pub(crate) now: Instant,
    pub(crate) rng: Rng,
    pub(crate) fay: End,
    pub(crate) term: End,
    pub(crate) registry: SessionRegistry,
    /// SPEC SES-2: when set, the terminal parks suspended sessions here
    /// instead of `registry` (a durable store a test may reopen).
    pub(crate) store: Option<Arc<DirSessionStore>>,
    /// SPEC SES-3 across gateways: when set (and `store` is not), the
    /// terminal parks and takes here — a store several gateways share.
    pub(crate) shared: Option<Arc<dyn SuspendedSessions>>,
    pub(crate) fay_suspended: Option<SuspendedSession>,
    /// Every sealed frame the terminal sent (for replay tests).
    pub(crate) term_frames: Vec<BytesMut>,
    /// When false, ResumeRequested is left for the test to answer.
    pub(crate) auto_resume: bool,
}

impl Pair {
    pub(crate) fn new(world: World) -> Self {
        let fay_config = world.fay_config();
        Self::with_fay(world, fay_config)
    }

    pub(crate) fn with_fay(world: World, fay_config: FayConfig) -> Self {
        Self::seeded(world, fay_config, 7)
    }

    /// A pair whose random bytes (Session_ID, agreement ids…) come from
    /// `seed`.
    pub(crate) fn seeded(world: World, fay_config: FayConfig, seed: u64) -> Self {
        let now = Instant::now();
        let mut rng = Rng(seed);
        let fay = DtpEndpoint::fay(&fay_config, now, &mut |b| rng.fill(b)).unwrap();
        let term = DtpEndpoint::terminal(&world.terminal_config(), now, UNIX, &mut |b| rng.fill(b))
            .unwrap();
        Pair {
            world,
            fay_config,
            now,
            rng,
            fay: End::new(fay),
            term: End::new(term),
            registry: SessionRegistry::new(16),
            store: None,
            shared: None,
            fay_suspended: None,
            term_frames: Vec::new(),
            auto_resume: true,
        }
    }

    pub(crate) fn transmit(&mut self) {
        self.fay.transmit();
        let before = self.term.in_flight.len();
        self.term.transmit();
        let mut sent = self.term.in_flight[before..].to_vec();
        while let Ok(total) = peek_frame_len(&sent, &Limits::default()) {
            if total > sent.len() {
                break;
            }
            let rest = sent.split_off(total);
            self.term_frames.push(BytesMut::from(&sent[..]));
            sent = rest;
        }
    }

    /// Moves up to `n` bytes each way, then feeds what completed.
    pub(crate) fn deliver(&mut self, to_terminal: bool, n: usize) {
        let now = self.now;
        if to_terminal {
            let n = n.min(self.fay.in_flight.len());
            let bytes = self.fay.in_flight.split_to(n);
            self.term.rx.extend_from_slice(&bytes);
            self.term.receive(now);
        } else {
            let n = n.min(self.term.in_flight.len());
            let bytes = self.term.in_flight.split_to(n);
            self.fay.rx.extend_from_slice(&bytes);
            self.fay.receive(now);
        }
        self.answer_resume();
        self.transmit();
    }

    /// The terminal's driver: answer a ResumeRequested from the registry.
    pub(crate) fn answer_resume(&mut self) {
        if !self.auto_resume {
            return;
        }
        let requested: Vec<_> = self
            .term
            .events
            .iter()
            .filter_map(|e| match e {
                DtpEvent::ResumeRequested { session_id } => Some(*session_id),
                _ => None,
            })
            .collect();
        self.term
            .events
            .retain(|e| !matches!(e, DtpEvent::ResumeRequested { .. }));
        for id in requested {
            let taken = match (&self.store, &self.shared) {
                (Some(store), _) => store.take(id, self.now),
                (None, Some(shared)) => shared.take(id, self.now),
                (None, None) => self.registry.take(id, self.now),
            };
            match taken {
                Some(s) => {
                    if let Err(refused) = self.term.ep.resume_with(s, self.now) {
                        self.park(*refused.session);
                    }
                }
                None => self.term.ep.refuse_resume(),
            }
            self.term.drain_events();
        }
    }

    /// The terminal's driver: keep a suspended session (SES-2).
    pub(crate) fn park(&mut self, session: SuspendedSession) {
        match (&self.store, &self.shared) {
            (Some(store), _) => store.park(session, self.now).unwrap(),
            (None, Some(shared)) => shared.park(session, self.now).unwrap(),
            (None, None) => self.registry.insert(session, self.now).unwrap(),
        }
    }

    /// Runs the link until nothing is in flight.
    pub(crate) fn drive(&mut self) {
        self.transmit();
        for _ in 0..1000 {
            if self.fay.in_flight.is_empty() && self.term.in_flight.is_empty() {
                return;
            }
            self.deliver(true, usize::MAX);
            self.deliver(false, usize::MAX);
        }
        panic!("the link never went quiet");
    }

    /// Jumps to the earlier of the two endpoints' timers and fires them.
    pub(crate) fn advance(&mut self) -> bool {
        let next = [self.fay.ep.poll_timeout(), self.term.ep.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next);
        self.fay.ep.handle_timeout(self.now);
        self.term.ep.handle_timeout(self.now);
        self.drive();
        true
    }

    /// Time passes by `ms`; both ends run their timers and transmit.
    pub(crate) fn tick(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
        let now = self.now;
        self.fay.ep.handle_timeout(now);
        self.term.ep.handle_timeout(now);
        self.transmit();
    }

    /// Cuts the connection: `keep_*` bytes of what is in flight arrive,
    /// the rest (and any partial frame) is lost; both ends are told.
    pub(crate) fn cut(&mut self, keep_to_terminal: usize, keep_to_fay: usize) {
        let now = self.now;
        let n = keep_to_terminal.min(self.fay.in_flight.len());
        let bytes = self.fay.in_flight.split_to(n);
        self.term.rx.extend_from_slice(&bytes);
        self.term.receive(now);
        let n = keep_to_fay.min(self.term.in_flight.len());
        let bytes = self.term.in_flight.split_to(n);
        self.fay.rx.extend_from_slice(&bytes);
        self.fay.receive(now);
        self.answer_resume();
        for end in [&mut self.fay, &mut self.term] {
            end.in_flight.clear();
            end.rx.clear();
        }
        if let Some(s) = self.term.ep.connection_lost(now) {
            self.park(s);
        }
        let fay = self
            .fay
            .ep
            .connection_lost(now)
            .or_else(|| self.fay.ep.take_suspended());
        if fay.is_some() {
            self.fay_suspended = fay;
        }
        self.fay.drain_events();
        self.term.drain_events();
    }

    /// A new connection: the Fay resumes its suspended session (or starts
    /// a new one), the terminal starts fresh.
    pub(crate) fn reconnect(&mut self) {
        self.now += Duration::from_millis(1);
        let now = self.now;
        let rng = &mut self.rng;
        let fay = match self.fay_suspended.take() {
            Some(s) => {
                DtpEndpoint::fay_resume(&self.fay_config, s, now, &mut |b| rng.fill(b)).unwrap()
            }
            None => DtpEndpoint::fay(&self.fay_config, now, &mut |b| rng.fill(b)).unwrap(),
        };
        let term = DtpEndpoint::terminal(&self.world.terminal_config(), now, UNIX, &mut |b| {
            rng.fill(b)
        })
        .unwrap();
        let old_fay = std::mem::replace(&mut self.fay.ep, fay);
        let old_term = std::mem::replace(&mut self.term.ep, term);
        drop((old_fay, old_term));
    }
}

pub(crate) fn terms(pairs: &[(&str, &str)]) -> Terms {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub(crate) fn requested(events: &[DtpEvent]) -> Option<(u64, RequestType)> {
    events.iter().find_map(|e| match e {
        DtpEvent::AgreementRequested {
            request_id, kind, ..
        } => Some((*request_id, *kind)),
        _ => None,
    })
}

pub(crate) fn active(events: &[DtpEvent]) -> Vec<(AgreementId, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            DtpEvent::AgreementActive {
                agreement_id,
                adjusted,
                ..
            } => Some((*agreement_id, *adjusted)),
            _ => None,
        })
        .collect()
}

pub(crate) fn established(events: &[DtpEvent]) -> Option<(dtp_codec::SessionId, bool)> {
    events.iter().find_map(|e| match e {
        DtpEvent::Established {
            session_id,
            resumed,
            ..
        } => Some((*session_id, *resumed)),
        _ => None,
    })
}

/// Sets up a session with one collection (the terminal sends) and one
/// injection (the Fay sends).
pub(crate) fn pair_with_agreements(world: World) -> (Pair, AgreementId, AgreementId) {
    agreements_on(Pair::new(world))
}

/// [`pair_with_agreements`] on a given pair.
pub(crate) fn agreements_on(mut p: Pair) -> (Pair, AgreementId, AgreementId) {
    p.drive();
    assert!(p.fay.ep.is_established() && p.term.ep.is_established());
    p.fay.take_events();
    p.term.take_events();
    p.fay
        .ep
        .request_collection(terms(&[("what", "frames")]), p.now)
        .unwrap();
    p.drive();
    let (req, _) = requested(&p.term.take_events()).unwrap();
    let random = p.rng.bytes16();
    let collection = p.term.ep.accept(req, random, p.now).unwrap();
    p.drive();
    p.term
        .ep
        .request_injection(terms(&[("what", "config")]), p.now)
        .unwrap();
    p.drive();
    let (req, _) = requested(&p.fay.take_events()).unwrap();
    let random = p.rng.bytes16();
    let injection = p.fay.ep.accept(req, random, p.now).unwrap();
    p.drive();
    p.fay.take_events();
    p.term.take_events();
    assert_eq!(p.fay.ep.state(), EngineState::Transmitting);
    assert_eq!(p.term.ep.state(), EngineState::Transmitting);
    (p, collection, injection)
}

pub(crate) fn derived_from(target: u64) -> Vec<Relation> {
    vec![Relation {
        kind: RelationType::DerivedFrom,
        target,
    }]
}
