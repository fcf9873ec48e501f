//! SPEC RES-1 … RES-4, SEQ-5 end to end over real TCP: a Fay streams
//! fragments to a gateway (the engine's shards running `DtpGateway`) through
//! a fault injector that cuts every connection at a random byte — during
//! CAP, mid-frame, during the resume handshake. The Fay resumes each time
//! under a new handshake. At least 1,000 forced disconnects; the gateway's
//! application must see every fragment exactly once, in order, intact, and
//! every resume must run under a new key version.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_codec::{AccessMode, AeadAlgorithm, Limits, Terms, peek_frame_len};
use dtp_engine::{Engine, EngineConfig, Framed};
use dtp_gateway::dtp::{
    DtpApp, DtpEndpoint, DtpEvent, DtpGateway, FayConfig, SessionRegistry, SuspendedSession,
    TerminalConfig,
};
use dtp_test_kit::Keys;
use dtp_transports::{
    BackendPreference, Driver, DriverConfig, Endpoint, Event, FaultInjector, FaultPlan, Transport,
};

/// Deterministic "random" bytes: unique per call, which is all the ids need.
fn counter_bytes<const N: usize>() -> [u8; N] {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut b = [0u8; N];
    let n = NEXT.fetch_add(1, Ordering::Relaxed).to_le_bytes();
    for (i, x) in b.iter_mut().enumerate() {
        *x = n[i % 8] ^ (i as u8).wrapping_mul(37);
    }
    b
}

fn fill(buf: &mut [u8]) {
    for chunk in buf.chunks_mut(16) {
        let b: [u8; 16] = counter_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

fn payload(id: u64) -> Bytes {
    let len = 40 + (id * 97 % 600) as usize;
    Bytes::from((0..len).map(|i| (i as u64 ^ id) as u8).collect::<Vec<u8>>())
}

/// What the gateway's application saw.
#[derive(Default)]
struct Log {
    fragments: Vec<(u64, Bytes)>,
    /// The key version of every resumed connection, in order.
    resumed_at: Vec<u16>,
    sessions: usize,
}

/// Accepts every agreement; records fragments and resumes.
struct Sink(Arc<Mutex<Log>>);

impl DtpApp for Sink {
    type Session = ();

    fn event(&mut self, _: &mut (), ep: &mut DtpEndpoint, event: DtpEvent, now: Instant) {
        let mut log = self.0.lock().unwrap();
        match event {
            DtpEvent::Established { resumed, .. } => {
                if resumed {
                    log.resumed_at.push(ep.key_version());
                } else {
                    log.sessions += 1;
                }
            }
            DtpEvent::AgreementRequested { request_id, .. } => {
                ep.accept(request_id, counter_bytes(), now).unwrap();
            }
            DtpEvent::Fragment {
                fragment_id,
                payload,
                ..
            } => log.fragments.push((fragment_id, payload)),
            _ => {}
        }
    }
}

fn configs() -> (FayConfig, TerminalConfig) {
    let keys = Keys::new(7, "fay-e2e", &[("stream", &[AccessMode::Read])])
        .with_algorithms(&[AeadAlgorithm::Aes256Gcm, AeadAlgorithm::ChaCha20Poly1305]);
    (keys.fay_config(), keys.terminal_config())
}

/// The Fay: one connection after another through the fault injector, each
/// carrying the stream as far as it gets.
struct Fay {
    config: FayConfig,
    adapter: FaultInjector<Driver>,
    target: Endpoint,
    suspended: Option<SuspendedSession>,
    next_fragment: u64,
    disconnects: u32,
}

impl Fay {
    /// Runs one connection until it is cut (true) or, unless `endless`,
    /// until fragments 1 ..= `last` are all sent and acknowledged (false).
    /// An endless connection extends the stream as it goes.
    fn connection(&mut self, last: &mut u64, endless: bool, deadline: Instant) -> bool {
        let now = Instant::now();
        let mut ep = match self.suspended.take() {
            Some(s) => match DtpEndpoint::fay_resume(&self.config, s, now, &mut fill) {
                Ok(ep) => ep,
                Err(refused) => panic!("resume refused locally: {refused}"),
            },
            None => DtpEndpoint::fay(&self.config, now, &mut fill).unwrap(),
        };
        let id = self.adapter.connect(&self.target).unwrap();
        let (mut rx, mut tx) = (BytesMut::new(), BytesMut::new());
        let mut events = Vec::new();
        let mut agreement = ep.agreements().next().map(|a| a.id);
        loop {
            assert!(
                Instant::now() < deadline,
                "no progress: state {:?}, established {}, next fragment {}, last {}, cache {:?}, disconnects {}, tx {} bytes, queued {}",
                ep.state(),
                ep.is_established(),
                self.next_fragment,
                last,
                ep.resume_cache(),
                self.disconnects,
                tx.len(),
                self.adapter.queued(id)
            );
            self.adapter
                .poll(&mut events, Some(Duration::from_millis(1)))
                .unwrap();
            let now = Instant::now();
            let mut down = false;
            for e in events.drain(..) {
                match e {
                    Event::Received { data, .. } => rx.extend_from_slice(&data),
                    Event::Closed { .. } => down = true,
                    _ => {}
                }
            }
            while let Ok(len) = peek_frame_len(&rx, &Limits::default()) {
                if len > rx.len() {
                    break;
                }
                ep.handle_frame(rx.split_to(len), now);
            }
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            while let Some(event) = ep.poll_event() {
                match event {
                    DtpEvent::Established { resumed: false, .. } => {
                        ep.request_collection(Terms::new(), now).unwrap();
                    }
                    DtpEvent::AgreementActive { agreement_id, .. } => {
                        agreement = Some(agreement_id);
                    }
                    _ => {}
                }
            }
            if agreement.is_none() {
                // A resumed session brings its agreements back with it.
                agreement = ep.agreements().next().map(|a| a.id);
            }
            if let Some(a) = agreement
                && ep.is_established()
            {
                if endless && self.next_fragment > *last {
                    *last += 40;
                }
                while self.next_fragment <= *last {
                    match ep.send_fragment(
                        a,
                        self.next_fragment,
                        vec![],
                        payload(self.next_fragment),
                    ) {
                        Ok(_) => self.next_fragment += 1,
                        Err(e) if e.code() == dtp_codec::ErrorCode::BUFFER_FULL => break,
                        Err(e) => panic!("send_fragment: {e}"),
                    }
                }
            }
            ep.poll_transmit(&mut tx);
            if !tx.is_empty() && self.adapter.send(id, &tx).is_ok() {
                tx.clear();
            }
            if down {
                self.disconnects += 1;
                self.suspended = ep.connection_lost(now).or_else(|| ep.take_suspended());
                return true;
            }
            assert!(!ep.is_closed(), "the session closed: {:?}", ep.close_code());
            // Done once the session is back (a resuming endpoint has no
            // cache to show yet) and nothing is left unacknowledged.
            if !endless
                && ep.is_established()
                && self.next_fragment > *last
                && ep.resume_cache().0 == 0
            {
                return false;
            }
        }
    }
}

fn stream_through_cuts(backend: BackendPreference, disconnects: u32) {
    let (fay_config, terminal_config) = configs();
    let log = Arc::new(Mutex::new(Log::default()));
    let registry = Arc::new(SessionRegistry::new(64));
    let terminal_config = Arc::new(terminal_config);
    let (l, r, t) = (log.clone(), registry.clone(), terminal_config.clone());
    let engine = Engine::start(
        EngineConfig {
            shards: 2,
            pin: false,
            listen: vec!["127.0.0.1:0".parse().unwrap()],
            driver: DriverConfig {
                backend,
                ..DriverConfig::default()
            },
            limits: Limits::default(),
            drain: Duration::from_secs(2),
            control_ring: 64,
            quic: None,
        },
        move |_| Framed::new(DtpGateway::new(t.clone(), r.clone(), Sink(l.clone()))),
    )
    .unwrap();
    let mut adapter = FaultInjector::new(
        Driver::new(DriverConfig {
            backend,
            ..DriverConfig::default()
        })
        .unwrap(),
        0x5eed ^ disconnects as u64,
    );
    // Every connection is cut at a random byte of a random direction within
    // its first 12 KB: during CAP, mid-frame, during the resume handshake.
    adapter.set_default_plan(FaultPlan {
        drop_within: Some(12_000),
        ..FaultPlan::NONE
    });
    let mut fay = Fay {
        config: fay_config,
        adapter,
        target: engine.local_addrs()[0].clone(),
        suspended: None,
        next_fragment: 1,
        disconnects: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut last = 0;
    while fay.disconnects < disconnects {
        assert!(fay.connection(&mut last, true, deadline));
    }
    // The last connection has no faults: it drains what is left.
    fay.adapter.set_default_plan(FaultPlan::NONE);
    while fay.connection(&mut last, false, deadline) {}
    // The gateway has it all once its log has the last fragment.
    loop {
        if Instant::now() >= deadline {
            let log = log.lock().unwrap();
            let ids: Vec<u64> = log.fragments.iter().map(|(id, _)| *id).collect();
            panic!(
                "the gateway never saw everything: {} of {last}, sessions {}, resumes {:?}, first ids {:?}, last ids {:?}",
                ids.len(),
                log.sessions,
                log.resumed_at,
                &ids[..ids.len().min(10)],
                &ids[ids.len().saturating_sub(10)..]
            );
        }
        if log.lock().unwrap().fragments.len() as u64 >= last {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let log = log.lock().unwrap();
    let ids: Vec<u64> = log.fragments.iter().map(|(id, _)| *id).collect();
    let want: Vec<u64> = (1..=last).collect();
    assert!(
        ids == want,
        "{backend:?}: fragments lost, duplicated or out of order"
    );
    for (id, p) in &log.fragments {
        assert_eq!(*p, payload(*id), "{backend:?}: fragment {id} altered");
    }
    // Every resume ran under a new key version of its session: versions
    // strictly increase between two fresh sessions.
    assert!(!log.resumed_at.is_empty());
    for w in log.resumed_at.windows(2) {
        assert!(
            w[1] > w[0] || w[1] == 2,
            "{backend:?}: key version {} after {}",
            w[1],
            w[0]
        );
    }
    eprintln!(
        "{backend:?}: {} disconnects, {} fragments, {} sessions, {} resumes (key versions up to {})",
        fay.disconnects,
        last,
        log.sessions,
        log.resumed_at.len(),
        log.resumed_at.iter().max().copied().unwrap_or(0)
    );
    drop(log);
    engine.stop();
    engine.join().unwrap();
}

#[test]
fn a_thousand_cuts_lose_and_duplicate_nothing_on_io_uring() {
    stream_through_cuts(BackendPreference::Uring, 1000);
}

#[test]
fn cuts_lose_and_duplicate_nothing_on_epoll() {
    stream_through_cuts(BackendPreference::Epoll, 200);
}
