//! A Fay and a terminal joined in memory (no sockets): CAP with real keys,
//! a collection agreement, fragments with relations, a cut, and the resume.
//!
//! Run with `cargo run -p dtp-engine --example fay_and_terminal`.
//!
//! A real driver does the same with a transport: after every input it
//! drains `poll_transmit` into the socket, `poll_event` into the
//! application, and arms a timer at `poll_timeout`.

use std::error::Error;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use dtp_codec::{AccessMode, AeadAlgorithm, Limits, Relation, RelationType, Terms, peek_frame_len};
use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair, ResponderConfig};
use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair, Verifier};
use dtp_gateway::dtp::{
    DtpEndpoint, DtpEvent, EndpointConfig, FayConfig, SessionRegistry, TerminalConfig,
};

fn main() -> Result<(), Box<dyn Error>> {
    let mut rng = example_random;
    let unix = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();

    // Keys: an issuer, the Fay's credential for its Noise key, the terminal's Noise key.
    let issuer = IssuerKeyPair::from_seed(&random::<32>())?;
    let fay_keys = NoiseKeypair::from_private(random::<32>())?;
    let terminal_keys = NoiseKeypair::from_private(random::<32>())?;
    let credential = issuer.issue(
        CredentialRequest {
            fay_id: "fay-example".into(),
            noise_key: *fay_keys.public(),
            grants: vec![Grant {
                resource_id: "camera".into(),
                modes: [AccessMode::Read].into_iter().collect(),
            }],
            not_before: unix - 60,
            not_after: unix + 3600,
        },
        random::<16>(),
    )?;
    let mut verifier = Verifier::new();
    verifier.trust(*issuer.public_key())?;

    let fay_config = FayConfig {
        cap: InitiatorConfig {
            static_keypair: fay_keys,
            credential,
            algorithms: vec![AeadAlgorithm::ChaCha20Poly1305, AeadAlgorithm::Aes256Gcm],
            pinned_responder_key: Some(*terminal_keys.public()),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        endpoint: EndpointConfig::fay(),
    };
    let terminal_config = TerminalConfig {
        cap: ResponderConfig {
            static_keypair: terminal_keys,
            algorithms: vec![AeadAlgorithm::ChaCha20Poly1305, AeadAlgorithm::Aes256Gcm],
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        verifier: Arc::new(verifier),
        endpoint: EndpointConfig::terminal(),
    };
    let registry = SessionRegistry::new(1024);

    // SEQ-1, SEQ-2: CAP, then a session.
    let now = Instant::now();
    let mut fay = DtpEndpoint::fay(&fay_config, now, &mut rng)?;
    let mut terminal = DtpEndpoint::terminal(&terminal_config, now, unix, &mut rng)?;
    pump(&mut fay, &mut terminal, &registry, now);

    // SEQ-3a: the Fay (Master) asks to collect; the terminal (Slave) accepts.
    let terms = Terms::from([("stream".to_owned(), "camera/frames".to_owned())]);
    fay.request_collection(terms, now)?;
    let (_, requests) = pump(&mut fay, &mut terminal, &registry, now);
    let Some(request_id) = requests.iter().find_map(|e| match e {
        DtpEvent::AgreementRequested { request_id, .. } => Some(*request_id),
        _ => None,
    }) else {
        return Err("no request arrived".into());
    };
    let agreement = terminal.accept(request_id, random::<16>(), now)?;
    pump(&mut fay, &mut terminal, &registry, now);

    // SEQ-4, DAG-4: fragments with relations; 3 is sent before 2 and still
    // delivered after it.
    let derived_from = |target| {
        vec![Relation {
            kind: RelationType::DerivedFrom,
            target,
        }]
    };
    terminal.send_fragment(agreement, 1, vec![], Bytes::from_static(b"frame 1"))?;
    terminal.send_fragment(
        agreement,
        3,
        derived_from(2),
        Bytes::from_static(b"thumbnail of 2"),
    )?;
    terminal.send_fragment(
        agreement,
        2,
        derived_from(1),
        Bytes::from_static(b"frame 2"),
    )?;
    pump(&mut fay, &mut terminal, &registry, now);

    // SEQ-5: a fragment is sent, and the connection is cut before it arrives.
    terminal.send_fragment(
        agreement,
        4,
        derived_from(2),
        Bytes::from_static(b"frame 4"),
    )?;
    let mut lost = BytesMut::new();
    terminal.poll_transmit(&mut lost);
    println!("-- cut: {} bytes lost", lost.len());
    if let Some(session) = terminal.connection_lost(now) {
        registry.insert(session, now)?;
    }
    let Some(suspended) = fay.connection_lost(now) else {
        return Err("the Fay's session was not suspended".into());
    };

    // A new connection: CAP again (new keys, key version 2), RESUME, resend.
    let mut fay = DtpEndpoint::fay_resume(&fay_config, suspended, now, &mut rng)?;
    let mut terminal = DtpEndpoint::terminal(&terminal_config, now, unix, &mut rng)?;
    pump(&mut fay, &mut terminal, &registry, now);
    println!("-- resumed under key version {}", fay.key_version());

    fay.terminate(agreement, "enough frames", now)?;
    pump(&mut fay, &mut terminal, &registry, now);
    fay.close("bye");
    pump(&mut fay, &mut terminal, &registry, now);
    Ok(())
}

/// Moves bytes both ways until nothing is in flight, printing events; the
/// terminal's driver answers resume requests from the registry. Returns
/// the events of each side.
fn pump(
    fay: &mut DtpEndpoint,
    terminal: &mut DtpEndpoint,
    registry: &SessionRegistry,
    now: Instant,
) -> (Vec<DtpEvent>, Vec<DtpEvent>) {
    let (mut fay_events, mut terminal_events) = (Vec::new(), Vec::new());
    loop {
        let mut to_terminal = BytesMut::new();
        let mut to_fay = BytesMut::new();
        fay.poll_transmit(&mut to_terminal);
        terminal.poll_transmit(&mut to_fay);
        if to_terminal.is_empty() && to_fay.is_empty() {
            return (fay_events, terminal_events);
        }
        feed(terminal, &mut to_terminal, now);
        feed(fay, &mut to_fay, now);
        while let Some(event) = terminal.poll_event() {
            println!("terminal: {}", describe(&event));
            if let DtpEvent::ResumeRequested { session_id } = event {
                match registry.take(session_id, now) {
                    Some(session) => {
                        if let Err(refused) = terminal.resume_with(session, now) {
                            println!("terminal: {}", refused);
                        }
                    }
                    None => terminal.refuse_resume(),
                }
            }
            terminal_events.push(event);
        }
        while let Some(event) = fay.poll_event() {
            println!("fay:      {}", describe(&event));
            fay_events.push(event);
        }
    }
}

/// Splits a byte stream into frames, as a transport driver does.
fn feed(endpoint: &mut DtpEndpoint, stream: &mut BytesMut, now: Instant) {
    while let Ok(len) = peek_frame_len(stream, &Limits::default()) {
        if len > stream.len() {
            break;
        }
        endpoint.handle_frame(stream.split_to(len), now);
    }
}

fn describe(event: &DtpEvent) -> String {
    match event {
        DtpEvent::Fragment {
            fragment_id,
            payload,
            ..
        } => format!(
            "fragment {fragment_id}: {:?}",
            String::from_utf8_lossy(payload)
        ),
        other => format!("{other:?}"),
    }
}

/// EXAMPLE ONLY: bytes from std's per-process random hasher keys. A real
/// deployment fills these from a CSPRNG (`ring::rand::SystemRandom`,
/// `getrandom`).
fn example_random(buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_usize(chunk.as_ptr() as usize);
        chunk.copy_from_slice(&hasher.finish().to_le_bytes()[..chunk.len()]);
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    example_random(&mut out);
    out
}
