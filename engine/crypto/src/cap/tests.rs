#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test code: the sans-IO rule binds the crate, not its tests, which may read a clock or start threads"
)]
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::{Duration, Instant};

use dtp_codec::{AccessMode, AeadAlgorithm, ErrorCode};
use proptest::prelude::*;

use super::noise::Noise;
use super::*;
use crate::cred::{CredentialRequest, Grant, IssuerKeyPair, VerifiedCredential};

const UNIX: u64 = 1_700_000_000;
const CHACHA: AeadAlgorithm = AeadAlgorithm::ChaCha20Poly1305;
const AES: AeadAlgorithm = AeadAlgorithm::Aes256Gcm;

struct World {
    issuer: IssuerKeyPair,
    verifier: Verifier,
    fay: NoiseKeypair,
    terminal: NoiseKeypair,
    t0: Instant,
}

impl World {
    fn new() -> Self {
        let issuer = IssuerKeyPair::from_seed(&[1; 32]).unwrap();
        let mut verifier = Verifier::new();
        verifier.trust(*issuer.public_key()).unwrap();
        World {
            issuer,
            verifier,
            fay: NoiseKeypair::from_private([2; 32]).unwrap(),
            terminal: NoiseKeypair::from_private([3; 32]).unwrap(),
            t0: Instant::now(),
        }
    }

    fn credential_for(&self, noise_key: [u8; 32], not_after: u64) -> Credential {
        let req = CredentialRequest {
            fay_id: "fay-1".into(),
            noise_key,
            grants: vec![Grant {
                resource_id: "camera".into(),
                modes: [AccessMode::Read].into_iter().collect(),
            }],
            not_before: UNIX - 100,
            not_after,
        };
        self.issuer.issue(req, [4; 16]).unwrap()
    }

    fn initiator_config(&self, algorithms: Vec<AeadAlgorithm>) -> InitiatorConfig {
        InitiatorConfig {
            static_keypair: self.fay.clone(),
            credential: self.credential_for(*self.fay.public(), UNIX + 100),
            algorithms,
            pinned_responder_key: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    fn responder_config(&self, algorithms: Vec<AeadAlgorithm>) -> ResponderConfig {
        ResponderConfig {
            static_keypair: self.terminal.clone(),
            algorithms,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }

    fn ctx(&self) -> ResponderContext<'_> {
        ResponderContext {
            verifier: &self.verifier,
            unix_now: UNIX,
        }
    }

    fn responder(&self, algorithms: Vec<AeadAlgorithm>) -> CapResponder {
        CapResponder::new(
            &self.responder_config(algorithms),
            self.t0,
            [5; 32],
            [6; 16],
        )
        .unwrap()
    }
}

type Outcomes = (
    Result<CapOutcome<TerminalKey>, CapError>,
    Result<CapOutcome<VerifiedCredential>, CapError>,
);

/// Runs both machines to the end in memory, passing each message through
/// `tamper` (message number, bytes).
fn run(
    w: &World,
    mut i: CapInitiator,
    mut r: CapResponder,
    mut tamper: impl FnMut(u8, &mut Vec<u8>),
) -> Outcomes {
    let now = w.t0 + Duration::from_millis(1);
    for n in 1..=4u8 {
        let from_initiator = n % 2 == 1;
        let msg = if from_initiator {
            i.poll_transmit()
        } else {
            r.poll_transmit()
        };
        let Some(msg) = msg else { break };
        let mut msg = msg.to_vec();
        tamper(n, &mut msg);
        let _ = if from_initiator {
            r.handle_message(&msg, now, w.ctx())
        } else {
            i.handle_message(&msg, now)
        };
    }
    assert!(i.poll_transmit().is_none() && r.poll_transmit().is_none());
    let io = i
        .poll_outcome()
        .unwrap_or(Err(CapError::Internal("initiator unfinished")));
    let ro = r
        .poll_outcome()
        .unwrap_or(Err(CapError::Internal("responder unfinished")));
    // Outcomes are handed out once.
    assert!(i.poll_outcome().is_none() && r.poll_outcome().is_none());
    (io, ro)
}

fn handshake(w: &World, cfg: &InitiatorConfig, allowed: Vec<AeadAlgorithm>) -> Outcomes {
    let i = CapInitiator::new(cfg, w.t0, [7; 32]).unwrap();
    run(w, i, w.responder(allowed), |_, _| {})
}

fn assert_established(o: &Outcomes, w: &World) -> AeadAlgorithm {
    let (Ok(i), Ok(r)) = o else { panic!("{o:?}") };
    assert_eq!(i.algorithm, r.algorithm);
    assert_eq!(i.initiator_to_responder, r.initiator_to_responder);
    assert_eq!(i.responder_to_initiator, r.responder_to_initiator);
    assert_ne!(i.initiator_to_responder, i.responder_to_initiator);
    assert_eq!(i.handshake_hash, r.handshake_hash);
    assert_eq!(i.session_id, r.session_id);
    assert_eq!(i.session_id.get_version_num(), 4);
    assert_eq!(i.peer, TerminalKey(*w.terminal.public()));
    assert_eq!(r.peer.fay_id(), "fay-1");
    assert_eq!(r.peer.noise_key(), w.fay.public());
    assert!(r.peer.permits("camera", AccessMode::Read));
    i.algorithm
}

/// Both sides failed: the terminal with `local`, the Fay told `code`.
fn assert_rejected(o: &Outcomes, local: &CapError, code: ErrorCode) {
    assert_eq!(o.1.as_ref().unwrap_err(), local);
    assert_eq!(o.1.as_ref().unwrap_err().code(), code);
    assert_eq!(o.0.as_ref().unwrap_err(), &CapError::Rejected { code });
    assert_eq!(o.0.as_ref().unwrap_err().code(), code);
}

#[test]
fn full_handshake_chooses_by_the_fays_order() {
    let w = World::new();
    let both = vec![CHACHA, AES];
    assert_eq!(
        assert_established(
            &handshake(&w, &w.initiator_config(vec![CHACHA, AES]), both.clone()),
            &w
        ),
        CHACHA
    );
    assert_eq!(
        assert_established(
            &handshake(&w, &w.initiator_config(vec![AES, CHACHA]), both),
            &w
        ),
        AES
    );
    assert_eq!(
        assert_established(
            &handshake(&w, &w.initiator_config(vec![CHACHA, AES]), vec![AES]),
            &w
        ),
        AES
    );
}

#[test]
fn machine_states_and_timers_through_a_handshake() {
    let w = World::new();
    let mut i = CapInitiator::new(&w.initiator_config(vec![CHACHA]), w.t0, [7; 32]).unwrap();
    let mut r = w.responder(vec![CHACHA]);
    let deadline = w.t0 + DEFAULT_HANDSHAKE_TIMEOUT;
    assert_eq!(
        (i.poll_timeout(), r.poll_timeout()),
        (Some(deadline), Some(deadline))
    );
    assert!(r.poll_transmit().is_none());
    r.handle_message(&i.poll_transmit().unwrap(), w.t0, w.ctx())
        .unwrap();
    assert!(i.poll_transmit().is_none());
    i.handle_message(&r.poll_transmit().unwrap(), w.t0).unwrap();
    assert_eq!(i.state(), CapState::Handshaking);
    r.handle_message(&i.poll_transmit().unwrap(), w.t0, w.ctx())
        .unwrap();
    assert_eq!(r.state(), CapState::Established);
    i.handle_message(&r.poll_transmit().unwrap(), w.t0).unwrap();
    assert_eq!(i.state(), CapState::Established);
    assert_eq!((i.poll_timeout(), r.poll_timeout()), (None, None));
    // A late timeout changes nothing; a further message is refused.
    i.handle_timeout(deadline);
    assert_eq!(i.state(), CapState::Established);
    assert_eq!(
        i.handle_message(&[0; 34], w.t0),
        Err(CapError::UnexpectedMessage)
    );
    assert_eq!(
        r.handle_message(&[0; 34], w.t0, w.ctx()),
        Err(CapError::UnexpectedMessage)
    );
    assert!(i.poll_outcome().unwrap().is_ok());
}

#[test]
fn seeded_handshakes_are_deterministic() {
    let w = World::new();
    let a = handshake(&w, &w.initiator_config(vec![CHACHA]), vec![CHACHA]);
    let b = handshake(&w, &w.initiator_config(vec![CHACHA]), vec![CHACHA]);
    assert_eq!(a.0.unwrap(), b.0.unwrap());
    // Another ephemeral seed: other keys.
    let i = CapInitiator::new(&w.initiator_config(vec![CHACHA]), w.t0, [8; 32]).unwrap();
    let c = run(&w, i, w.responder(vec![CHACHA]), |_, _| {});
    assert_ne!(
        c.0.unwrap().initiator_to_responder,
        a.1.unwrap().initiator_to_responder
    );
}

#[test]
fn bad_signature_is_rejected_to_both() {
    let w = World::new();
    let mut cfg = w.initiator_config(vec![CHACHA]);
    let mut bytes = cfg.credential.as_bytes().to_vec();
    *bytes.last_mut().unwrap() ^= 1;
    cfg.credential = Credential::from_bytes(&bytes).unwrap();
    let o = handshake(&w, &cfg, vec![CHACHA]);
    let key = w.issuer.public_key().key_id();
    assert_rejected(
        &o,
        &CapError::Credential(CredError::BadSignature(key)),
        ErrorCode::CREDENTIAL_INVALID,
    );
}

#[test]
fn unknown_issuer_is_rejected_to_both() {
    let mut w = World::new();
    let key = w.issuer.public_key().key_id();
    w.verifier.distrust(&key);
    let o = handshake(&w, &w.initiator_config(vec![CHACHA]), vec![CHACHA]);
    assert_rejected(
        &o,
        &CapError::Credential(CredError::UnknownIssuer(key)),
        ErrorCode::UNKNOWN_ISSUER,
    );
}

#[test]
fn expired_is_rejected_to_both() {
    let w = World::new();
    let mut cfg = w.initiator_config(vec![CHACHA]);
    cfg.credential = w.credential_for(*w.fay.public(), UNIX);
    let o = handshake(&w, &cfg, vec![CHACHA]);
    let e = CapError::Credential(CredError::Expired {
        not_after: UNIX,
        now: UNIX,
    });
    assert_rejected(&o, &e, ErrorCode::CREDENTIAL_EXPIRED);
}

#[test]
fn revoked_is_rejected_to_both() {
    let mut w = World::new();
    let cfg = w.initiator_config(vec![CHACHA]);
    let id = cfg.credential.descriptor().descriptor_id;
    w.verifier.revoke(id).unwrap();
    let o = handshake(&w, &cfg, vec![CHACHA]);
    assert_rejected(
        &o,
        &CapError::Credential(CredError::Revoked(id)),
        ErrorCode::CREDENTIAL_REVOKED,
    );
}

#[test]
fn no_common_algorithm_is_rejected_to_both() {
    let w = World::new();
    let o = handshake(&w, &w.initiator_config(vec![CHACHA]), vec![AES]);
    assert_rejected(&o, &CapError::NoCommonAlgorithm, ErrorCode::CAP_FAILED);
}

/// A Fay that proves `fay` but sends `payload3` as its message-3 payload
/// (bypassing [`CapInitiator`]'s own checks).
fn raw_fay(w: &World, payload1: &[u8], payload3: &[u8]) -> (Result<(), CapError>, CapResponder) {
    let mut r = w.responder(vec![CHACHA]);
    let mut noise = Noise::new(true, &w.fay, [9; 32]).unwrap();
    let mut buf = vec![0u8; 70_000];
    let n = noise.hs.write_message(payload1, &mut buf).unwrap();
    if let Err(e) = r.handle_message(&buf[..n], w.t0, w.ctx()) {
        return (Err(e), r);
    }
    let m2 = r.poll_transmit().unwrap();
    noise.hs.read_message(&m2, &mut buf).unwrap();
    let n = noise.hs.write_message(payload3, &mut buf).unwrap();
    (r.handle_message(&buf[..n], w.t0, w.ctx()), r)
}

#[test]
fn credential_for_another_noise_key_fails() {
    let w = World::new();
    let other = w.credential_for([0x42; 32], UNIX + 100);
    let offer = msg::encode_offer(&[CHACHA]);
    let (res, mut r) = raw_fay(&w, &offer, other.as_bytes());
    assert_eq!(res, Err(CapError::KeyMismatch));
    assert_eq!(CapError::KeyMismatch.code(), ErrorCode::CAP_FAILED);
    assert_eq!(r.state(), CapState::Failed);
    assert!(r.poll_transmit().is_some(), "the rejection is still sent");
    // The initiator refuses such a configuration up front.
    let mut cfg = w.initiator_config(vec![CHACHA]);
    cfg.credential = other;
    assert_eq!(
        CapInitiator::new(&cfg, w.t0, [7; 32]).unwrap_err(),
        CapError::LocalKeyMismatch
    );
}

#[test]
fn garbage_credential_payload_is_credential_invalid() {
    let w = World::new();
    let (res, _) = raw_fay(&w, &msg::encode_offer(&[CHACHA]), b"not a credential");
    let Err(CapError::Credential(CredError::Malformed(e))) = res else {
        panic!("{res:?}")
    };
    assert_eq!(e.offset, 0);
}

#[test]
fn malformed_offers_fail_without_reply() {
    let w = World::new();
    for (offer, reason) in [
        (vec![], "offer is empty"),
        (vec![2, 1, 2], "unsupported CAP version"),
        (vec![1], "offer has no count"),
        (vec![1, 0], "offer lists 0 or more than 8 algorithms"),
        (vec![1, 2, 2], "offer length does not match its count"),
        (vec![1, 2, 2, 2], "offer repeats an algorithm"),
    ] {
        let (res, mut r) = raw_fay(&w, &offer, &[]);
        assert!(
            matches!(res, Err(CapError::Malformed { message: 1, reason: got, .. }) if got == reason),
            "{res:?}"
        );
        assert_eq!(r.state(), CapState::Failed);
        assert!(r.poll_transmit().is_none());
        assert_eq!(r.poll_timeout(), None);
    }
    // Unknown ids are skipped: an offer of only unknown ids has no common algorithm.
    let cred = w.initiator_config(vec![CHACHA]).credential;
    let (res, _) = raw_fay(&w, &[1, 1, 99], cred.as_bytes());
    assert_eq!(res, Err(CapError::NoCommonAlgorithm));
}

#[test]
fn tampered_messages_fail() {
    let w = World::new();
    let cfg = w.initiator_config(vec![CHACHA]);
    for (n, at) in [
        (1u8, 5usize),
        (1, 33),
        (2, 0),
        (2, 40),
        (2, 90),
        (3, 10),
        (3, 100),
        (4, 0),
        (4, 20),
    ] {
        let i = CapInitiator::new(&cfg, w.t0, [7; 32]).unwrap();
        let o = run(&w, i, w.responder(vec![CHACHA]), |m, bytes| {
            if m == n {
                bytes[at] ^= 0x01;
            }
        });
        assert!(o.0.is_err(), "message {n} byte {at}: initiator {:?}", o.0);
        // A tampered message 4 is the only case where the terminal finished.
        assert_eq!(
            o.1.is_ok(),
            n == 4,
            "message {n} byte {at}: responder {:?}",
            o.1
        );
        let e = o.0.as_ref().unwrap_err();
        assert_eq!(e.code(), ErrorCode::CAP_FAILED, "{e:?}");
    }
}

#[test]
fn tampered_message_errors_are_typed() {
    let w = World::new();
    let cfg = w.initiator_config(vec![CHACHA]);
    let flip = |target: u8| {
        let i = CapInitiator::new(&cfg, w.t0, [7; 32]).unwrap();
        run(&w, i, w.responder(vec![CHACHA]), move |m, bytes| {
            if m == target {
                let last = bytes.len() - 1;
                bytes[last] ^= 0x80;
            }
        })
    };
    assert_eq!(flip(2).0.unwrap_err(), CapError::Decrypt { message: 2 });
    let o = flip(3);
    assert_eq!(o.1.unwrap_err(), CapError::Decrypt { message: 3 });
    assert_eq!(
        o.0.unwrap_err(),
        CapError::Internal("initiator unfinished"),
        "no reply to an unauthenticated message"
    );
    assert_eq!(flip(4).0.unwrap_err(), CapError::Decrypt { message: 4 });
}

#[test]
fn truncated_and_oversized_messages() {
    let w = World::new();
    let mut r = w.responder(vec![CHACHA]);
    assert_eq!(
        r.handle_message(&[0; msg::MAX_MSG1 + 1], w.t0, w.ctx()),
        Err(CapError::MessageTooLarge {
            message: 1,
            len: msg::MAX_MSG1 + 1,
            max: msg::MAX_MSG1
        })
    );
    let mut r = w.responder(vec![CHACHA]);
    assert!(matches!(
        r.handle_message(&[0; 10], w.t0, w.ctx()),
        Err(CapError::Malformed { message: 1, .. })
    ));
    let mut i = CapInitiator::new(&w.initiator_config(vec![CHACHA]), w.t0, [7; 32]).unwrap();
    assert!(matches!(
        i.handle_message(&[0; 97], w.t0),
        Err(CapError::MessageTooLarge { message: 2, .. })
    ));
    let mut i = CapInitiator::new(&w.initiator_config(vec![CHACHA]), w.t0, [7; 32]).unwrap();
    assert!(matches!(
        i.handle_message(&[0; 20], w.t0),
        Err(CapError::Malformed { message: 2, .. })
    ));
    assert_eq!(i.state(), CapState::Failed);
    assert_eq!(
        i.handle_message(&[0; 20], w.t0),
        Err(CapError::UnexpectedMessage)
    );
}

#[test]
fn pinned_terminal_key() {
    let w = World::new();
    let mut cfg = w.initiator_config(vec![CHACHA]);
    cfg.pinned_responder_key = Some(*w.terminal.public());
    assert_established(&handshake(&w, &cfg, vec![CHACHA]), &w);
    cfg.pinned_responder_key = Some([0x11; 32]);
    let o = handshake(&w, &cfg, vec![CHACHA]);
    assert_eq!(o.0.unwrap_err(), CapError::PinMismatch);
    // The credential was never sent: the terminal is still waiting.
    assert_eq!(o.1.unwrap_err(), CapError::Internal("responder unfinished"));
}

#[test]
fn timeout_via_now() {
    let w = World::new();
    let mut i = CapInitiator::new(&w.initiator_config(vec![CHACHA]), w.t0, [7; 32]).unwrap();
    let mut r = w.responder(vec![CHACHA]);
    let deadline = i.poll_timeout().unwrap();
    r.handle_message(&i.poll_transmit().unwrap(), w.t0, w.ctx())
        .unwrap();
    // Just before: nothing happens.
    i.handle_timeout(deadline - Duration::from_nanos(1));
    assert_eq!(i.state(), CapState::Handshaking);
    i.handle_timeout(deadline);
    assert_eq!(i.state(), CapState::Failed);
    let e = i.poll_outcome().unwrap().unwrap_err();
    assert_eq!(
        (e.clone(), e.code()),
        (CapError::Timeout, ErrorCode::CAP_TIMEOUT)
    );
    assert_eq!(i.poll_timeout(), None);
    // A message arriving after the deadline is a timeout too.
    assert_eq!(
        r.handle_message(&[0; 60], deadline, w.ctx()),
        Err(CapError::Timeout)
    );
    assert!(
        r.poll_transmit().is_none(),
        "message 2 is dropped with the state"
    );
    assert_eq!(
        r.poll_outcome().unwrap().unwrap_err().code(),
        ErrorCode::CAP_TIMEOUT
    );
}

#[test]
fn configuration_errors() {
    let w = World::new();
    for algs in [vec![], vec![CHACHA, CHACHA], vec![AES; 9]] {
        assert!(matches!(
            CapInitiator::new(&w.initiator_config(algs), w.t0, [7; 32]),
            Err(CapError::Config(_))
        ));
    }
    assert!(matches!(
        CapResponder::new(&w.responder_config(vec![]), w.t0, [5; 32], [6; 16]),
        Err(CapError::Config(_))
    ));
}

#[test]
fn outcome_message_refuses_foreign_codes() {
    let (h, k) = ([1; 32], [2; 32]);
    let sealed = msg::seal_outcome(
        msg::Outcome::Rejected {
            code: ErrorCode::BUFFER_FULL,
        },
        &h,
        &k,
    )
    .unwrap();
    assert!(matches!(
        msg::open_outcome(&sealed, &h, &k),
        Err(CapError::Malformed { message: 4, .. })
    ));
    let sealed = msg::seal_outcome(
        msg::Outcome::Rejected {
            code: ErrorCode::CAP_FAILED,
        },
        &h,
        &k,
    )
    .unwrap();
    assert_eq!(
        msg::open_outcome(&sealed, &[3; 32], &k),
        Err(CapError::Decrypt { message: 4 })
    );
    assert_eq!(
        msg::open_outcome(&sealed, &h, &k),
        Ok(msg::Outcome::Rejected {
            code: ErrorCode::CAP_FAILED
        })
    );
}

#[test]
fn noise_keys_text_round_trip() {
    let k = NoiseKeypair::from_private([7; 32]).unwrap();
    assert_eq!(NoiseKeypair::from_text(&k.to_text()).unwrap(), k);
    assert!(!format!("{k:?}").contains(&crate::cred::hex(k.private())));
}

#[test]
fn outcome_debug_hides_secrets() {
    let w = World::new();
    let o = handshake(&w, &w.initiator_config(vec![CHACHA]), vec![CHACHA])
        .0
        .unwrap();
    let text = format!("{o:?}");
    assert!(text.contains("<secret>"));
    assert!(!text.contains(&format!("{:?}", o.initiator_to_responder)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Arbitrary bytes never panic a responder, and never establish it.
    #[test]
    fn responder_survives_arbitrary_messages(msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..4)) {
        let w = World::new();
        let mut r = w.responder(vec![CHACHA]);
        for m in &msgs {
            let _ = r.handle_message(m, w.t0, w.ctx());
            let _ = r.poll_transmit();
        }
        prop_assert_ne!(r.state(), CapState::Established);
    }

    /// Arbitrary bytes never panic an initiator after its first message.
    #[test]
    fn initiator_survives_arbitrary_messages(msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..4)) {
        let w = World::new();
        let mut i = CapInitiator::new(&w.initiator_config(vec![CHACHA]), w.t0, [7; 32]).unwrap();
        let _ = i.poll_transmit();
        for m in &msgs {
            let _ = i.handle_message(m, w.t0);
        }
        prop_assert_ne!(i.state(), CapState::Established);
    }

    /// Invariant: any single flipped bit anywhere leaves the Fay not
    /// established (or, for message 4 only, the terminal established and the
    /// Fay failed) — and whenever both are established their keys agree.
    #[test]
    fn tampering_never_yields_disagreeing_sessions(n in 1u8..=4, at in any::<usize>(), bit in 0u8..8, seed in any::<[u8; 32]>()) {
        let w = World::new();
        let i = CapInitiator::new(&w.initiator_config(vec![AES, CHACHA]), w.t0, seed).unwrap();
        let (io, ro) = run(&w, i, w.responder(vec![CHACHA, AES]), |m, bytes| {
            if m == n && !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] ^= 1 << bit;
            }
        });
        prop_assert!(io.is_err());
        prop_assert!(ro.is_err() || n == 4);
        prop_assert_eq!(io.unwrap_err().code(), ErrorCode::CAP_FAILED);
    }

    /// Untampered handshakes with any seeds agree on everything.
    #[test]
    fn any_seeds_agree(si in any::<[u8; 32]>(), sr in any::<[u8; 32]>(), sid in any::<[u8; 16]>()) {
        let w = World::new();
        let i = CapInitiator::new(&w.initiator_config(vec![CHACHA, AES]), w.t0, si).unwrap();
        let r = CapResponder::new(&w.responder_config(vec![AES, CHACHA]), w.t0, sr, sid).unwrap();
        let o = run(&w, i, r, |_, _| {});
        prop_assert_eq!(assert_established(&o, &w), CHACHA);
    }
}
