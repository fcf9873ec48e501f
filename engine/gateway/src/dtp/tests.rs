//! Unit tests of the endpoint's pieces: the registry, error codes, the
//! configuration, bounds, and hostile bytes on a lone endpoint. The
//! two-endpoint scenarios (every SEQ phase, cuts, CAP failures) are in
//! `engine/tests/dtp_pair.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use dtp_codec::{AccessMode, AeadAlgorithm, ErrorCode, Limits, LogicalFrame, Terms};
use dtp_crypto::cap::{DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair, ResponderConfig};
use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair, Verifier};
use proptest::prelude::*;
use uuid::Uuid;

use super::*;

const UNIX: u64 = 1_700_000_000;

fn counter_rng() -> impl FnMut(&mut [u8]) {
    let mut n = 0u8;
    move |buf: &mut [u8]| {
        for b in buf {
            n = n.wrapping_add(37);
            *b = n;
        }
    }
}

fn configs() -> (FayConfig, TerminalConfig) {
    let issuer = IssuerKeyPair::from_seed(&[1; 32]).unwrap();
    let fay = NoiseKeypair::from_private([2; 32]).unwrap();
    let terminal = NoiseKeypair::from_private([3; 32]).unwrap();
    let credential = issuer
        .issue(
            CredentialRequest {
                fay_id: "fay-1".into(),
                noise_key: *fay.public(),
                grants: vec![Grant {
                    resource_id: "camera".into(),
                    modes: [AccessMode::Read].into_iter().collect(),
                }],
                not_before: UNIX - 10,
                not_after: UNIX + 3600,
            },
            [4; 16],
        )
        .unwrap();
    let mut verifier = Verifier::new();
    verifier.trust(*issuer.public_key()).unwrap();
    let fay_config = FayConfig {
        cap: InitiatorConfig {
            static_keypair: fay,
            credential,
            algorithms: vec![AeadAlgorithm::Aes256Gcm],
            pinned_responder_key: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        endpoint: EndpointConfig::fay(),
    };
    let terminal_config = TerminalConfig {
        cap: ResponderConfig {
            static_keypair: terminal,
            algorithms: vec![AeadAlgorithm::Aes256Gcm],
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        verifier: Arc::new(verifier),
        endpoint: EndpointConfig::terminal(),
    };
    (fay_config, terminal_config)
}

fn suspended(id: u128, expires_at: Option<Instant>) -> SuspendedSession {
    let peer = PeerIdentity::new(&b"fay-1"[..]).unwrap();
    SuspendedSession::empty(Uuid::from_u128(id), peer, expires_at)
}

fn events(ep: &mut DtpEndpoint) -> Vec<DtpEvent> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

/// SPEC SES-2: a suspended session is `Send` (any core may resume it) and
/// the registry is shareable between shards.
#[test]
fn ses2_suspended_session_is_send_and_registry_is_sync() {
    fn send<T: Send>() {}
    fn sync<T: Send + Sync>() {}
    send::<SuspendedSession>();
    send::<DtpEndpoint>();
    sync::<SessionRegistry>();
}

/// SPEC SES-2, SES-3: take removes (one resume at a time), expiry
/// releases, the ceiling hands the session back.
#[test]
fn ses2_registry_take_expire_and_ceiling() {
    let t0 = Instant::now();
    let later = t0 + Duration::from_secs(10);
    let registry = SessionRegistry::new(2);
    registry.insert(suspended(1, Some(later)), t0).unwrap();
    registry
        .insert(suspended(2, Some(t0 + Duration::from_secs(1))), t0)
        .unwrap();
    assert_eq!(registry.len(), 2);
    assert_eq!(registry.next_expiry(), Some(t0 + Duration::from_secs(1)));
    let full = registry.insert(suspended(3, Some(later)), t0).unwrap_err();
    assert_eq!(full.code(), ErrorCode::LIMIT_EXCEEDED);
    assert_eq!(full.session.session_id(), Uuid::from_u128(3));
    // At the ceiling, an expired session makes room.
    let t2 = t0 + Duration::from_secs(2);
    registry.insert(suspended(3, Some(later)), t2).unwrap();
    assert_eq!(registry.len(), 2);
    let s = registry.take(Uuid::from_u128(1), t2).unwrap();
    assert_eq!(s.state(), EngineState::Suspended);
    assert!(
        registry.take(Uuid::from_u128(1), t2).is_none(),
        "taken once"
    );
    assert!(
        registry.take(Uuid::from_u128(3), later).is_none(),
        "expired"
    );
    assert!(registry.is_empty());
    registry.insert(suspended(4, Some(later)), t0).unwrap();
    assert_eq!(registry.expire(later), 1);
}

/// SPEC SES-3: a resume request that finds no session keeps a waiter,
/// which runs once when the session is parked (in the same step as the
/// look, so a park in between is not missed); a look that finds the
/// session takes it and keeps nothing.
#[test]
fn ses3_a_waiting_resume_is_woken_when_its_session_is_parked() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let t0 = Instant::now();
    let later = t0 + Duration::from_secs(10);
    let registry = SessionRegistry::new(4);
    let woken = Arc::new(AtomicUsize::new(0));
    let waiter = |until| {
        let woken = woken.clone();
        ResumeWaiter::new(until, move || {
            woken.fetch_add(1, Ordering::SeqCst);
        })
    };
    let id = Uuid::from_u128(7);
    assert!(matches!(
        registry.take_or_wait(id, t0, waiter(later)),
        Taken::Waiting
    ));
    assert_eq!(registry.waiting(), 1);
    registry.insert(suspended(8, Some(later)), t0).unwrap();
    assert_eq!(
        woken.load(Ordering::SeqCst),
        0,
        "another session wakes no one"
    );
    registry.insert(suspended(7, Some(later)), t0).unwrap();
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    assert_eq!(registry.waiting(), 0, "a waiter runs once");
    let Taken::Session(s) = registry.take_or_wait(id, t0, waiter(later)) else {
        panic!("the parked session is taken");
    };
    assert_eq!(s.session_id(), id);
    assert_eq!(registry.waiting(), 0);
}

/// SPEC SES-3: waiters are bounded (at the registry's ceiling the caller is
/// told to look again itself) and forgotten once their grace has passed.
#[test]
fn ses3_resume_waiters_are_bounded_and_expire() {
    let t0 = Instant::now();
    let registry = SessionRegistry::new(2);
    let grace = t0 + Duration::from_secs(2);
    for id in 1..=2 {
        let w = ResumeWaiter::new(grace, || {});
        assert!(matches!(
            registry.take_or_wait(Uuid::from_u128(id), t0, w),
            Taken::Waiting
        ));
    }
    let w = ResumeWaiter::new(grace, || {});
    assert!(matches!(
        registry.take_or_wait(Uuid::from_u128(3), t0, w),
        Taken::Absent
    ));
    registry.expire(grace);
    assert_eq!(registry.waiting(), 0);
    let w = ResumeWaiter::new(grace + Duration::from_secs(2), || {});
    assert!(matches!(
        registry.take_or_wait(Uuid::from_u128(3), grace, w),
        Taken::Waiting
    ));
}

/// Every error carries its SPEC code.
#[test]
fn errors_map_to_their_spec_codes() {
    use dtp_codec::FrameKind;
    let cases = [
        (
            DtpError::FrameBeforeCap {
                kind: FrameKind::Data,
            },
            ErrorCode::CAP_FAILED,
        ),
        (
            DtpError::PlaintextAfterCap {
                kind: FrameKind::Ack,
            },
            ErrorCode::DECRYPT_FAILED,
        ),
        (
            DtpError::UnknownAgreement { agreement_id: None },
            ErrorCode::UNKNOWN_AGREEMENT,
        ),
        (
            DtpError::ResumeFailed { reason: "x" },
            ErrorCode::RESUME_FAILED,
        ),
        (DtpError::SessionTimeout, ErrorCode::SESSION_TIMEOUT),
        (
            DtpError::NotEstablished {
                state: EngineState::WaitingForCap,
            },
            ErrorCode::KEY_NOT_READY,
        ),
        (
            DtpError::QueueFull {
                what: "event",
                max: 1,
            },
            ErrorCode::LIMIT_EXCEEDED,
        ),
        (
            DtpError::Cap(dtp_crypto::cap::CapError::Timeout),
            ErrorCode::CAP_TIMEOUT,
        ),
    ];
    for (error, code) in cases {
        assert_eq!(error.code(), code, "{error}");
        assert!(
            error.to_string().contains(&code.0.to_string()) || matches!(error, DtpError::Cap(_))
        );
    }
}

/// The configuration refuses what the endpoint cannot run with.
#[test]
fn config_validation() {
    assert!(EndpointConfig::fay().validate().is_ok());
    assert_eq!(EndpointConfig::fay().role, Role::Master);
    assert_eq!(EndpointConfig::terminal().role, Role::Slave);
    let mut c = EndpointConfig::terminal();
    c.data_stream = 0;
    assert!(c.validate().is_err());
    let (mut fay, _) = configs();
    fay.endpoint.max_queued_events = 0;
    let err = DtpEndpoint::fay(&fay, Instant::now(), &mut counter_rng()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::INTERNAL);
}

/// SPEC ENC-3, SEQ-1: before CAP, application calls are refused and
/// nothing is sealed; the Fay's first output is CAP message 1 in plaintext.
#[test]
fn enc3_nothing_before_cap() {
    let (fay_config, _) = configs();
    let now = Instant::now();
    let mut fay = DtpEndpoint::fay(&fay_config, now, &mut counter_rng()).unwrap();
    assert_eq!(fay.state(), EngineState::WaitingForCap);
    let err = fay.request_collection(Terms::new(), now).unwrap_err();
    assert_eq!(err.code(), ErrorCode::KEY_NOT_READY);
    let err = fay
        .send_fragment(Uuid::from_u128(1), 1, vec![], Bytes::new())
        .unwrap_err();
    assert!(matches!(err, DtpError::NotEstablished { .. }));
    let mut out = BytesMut::new();
    fay.poll_transmit(&mut out);
    let (frame, used) = dtp_codec::decode_frame(&out.freeze(), &Limits::default()).unwrap();
    assert!(matches!(
        frame,
        LogicalFrame {
            stream_id: 0,
            body: dtp_codec::Body::Handshake(dtp_codec::HandshakeFrame { stage: 1, .. })
        }
    ));
    assert!(used > 16);
    assert!(fay.poll_timeout().is_some());
}

/// FRM-5: the driver must hand exactly one frame; more or garbage closes
/// with the codec's code.
#[test]
fn frm5_garbage_and_trailing_bytes_close_with_codec_codes() {
    let (_, terminal_config) = configs();
    let now = Instant::now();
    let mut t = DtpEndpoint::terminal(&terminal_config, now, UNIX, &mut counter_rng()).unwrap();
    t.handle_frame(BytesMut::from(&b"not a DTP frame at all"[..]), now);
    assert_eq!(t.close_code(), Some(ErrorCode::BAD_MAGIC));
    assert_eq!(t.state(), EngineState::Idle);

    let mut t = DtpEndpoint::terminal(&terminal_config, now, UNIX, &mut counter_rng()).unwrap();
    let close = LogicalFrame::plain(
        0,
        dtp_codec::Body::Close(dtp_codec::CloseFrame {
            code: ErrorCode::NORMAL,
            reason: String::new(),
        }),
    );
    let mut two = BytesMut::from(&close.to_bytes(&Limits::default()).unwrap()[..]);
    two.extend_from_slice(&[0xD7]);
    t.handle_frame(two, now);
    assert_eq!(t.close_code(), Some(ErrorCode::TRAILING_BYTES));
    let evs = events(&mut t);
    assert!(matches!(evs.last(), Some(DtpEvent::Closed { .. })));
}

/// A plaintext close from the peer ends the connection with its code.
#[test]
fn peer_close_during_cap_ends_idle() {
    let (_, terminal_config) = configs();
    let now = Instant::now();
    let mut t = DtpEndpoint::terminal(&terminal_config, now, UNIX, &mut counter_rng()).unwrap();
    let close = LogicalFrame::plain(
        0,
        dtp_codec::Body::Close(dtp_codec::CloseFrame {
            code: ErrorCode::CREDENTIAL_EXPIRED,
            reason: "bye".into(),
        }),
    );
    t.handle_frame(
        BytesMut::from(&close.to_bytes(&Limits::default()).unwrap()[..]),
        now,
    );
    assert_eq!(t.state(), EngineState::Idle);
    assert_eq!(
        events(&mut t),
        vec![DtpEvent::Closed {
            code: ErrorCode::CREDENTIAL_EXPIRED
        }]
    );
    let mut out = BytesMut::new();
    assert_eq!(t.poll_transmit(&mut out), 0, "no answer to a close");
    assert!(t.connection_lost(now).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// Nothing panics on peer input: arbitrary bytes, framed or not, fed
    /// to either side, end in an orderly state.
    #[test]
    fn hostile_bytes_never_panic(
        fay_side in any::<bool>(),
        frames in prop::collection::vec((0u8..10, any::<u8>(), prop::collection::vec(any::<u8>(), 0..64)), 1..8),
    ) {
        let (fay_config, terminal_config) = configs();
        let now = Instant::now();
        let mut ep = if fay_side {
            DtpEndpoint::fay(&fay_config, now, &mut counter_rng()).unwrap()
        } else {
            DtpEndpoint::terminal(&terminal_config, now, UNIX, &mut counter_rng()).unwrap()
        };
        for (kind, aead, body) in frames {
            let mut wire = BytesMut::new();
            wire.extend_from_slice(&[0xD7, 0x50, 1, kind, 0, aead % 3, 0, u8::from(aead % 3 != 0), 0, 0, 0, 0]);
            wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
            wire.extend_from_slice(&body);
            ep.handle_frame(wire, now);
            let mut out = BytesMut::new();
            ep.poll_transmit(&mut out);
            while ep.poll_event().is_some() {}
        }
        ep.handle_timeout(now + Duration::from_secs(60));
        while ep.poll_event().is_some() {}
        prop_assert!(ep.is_closed() || ep.state() == EngineState::WaitingForCap);
    }
}
