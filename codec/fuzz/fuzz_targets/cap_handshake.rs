//! Arbitrary bytes into the CAP machines (SPEC SEQ-1: a peer's handshake
//! messages never panic the terminal or the Fay).
//!
//! Input: byte 0 picks the mode, the rest is split into messages at each
//! `0xff 0x00` pair (so the fuzzer can build several messages).
//! - mode even: every message goes to a fresh terminal (responder).
//! - mode odd: a real Fay (initiator) and a real terminal run the handshake;
//!   message number `mode / 2 % 4 + 1` is replaced by the first fuzz message,
//!   and any further fuzz messages go to the side that received it.
//!
//! Oracle: no panic; a machine fed only fuzz bytes for a message never ends
//! established (nothing the fuzzer writes can carry a key it does not know),
//! unless one of them is the real message; and when both sides end
//! established, their keys, hash and algorithm agree.

#![no_main]

use std::sync::OnceLock;
use std::time::Instant;

use dtp_codec::{AccessMode, AeadAlgorithm};
use dtp_crypto::cap::{
    CapInitiator, CapResponder, CapState, DEFAULT_HANDSHAKE_TIMEOUT, InitiatorConfig, NoiseKeypair,
    ResponderConfig, ResponderContext,
};
use dtp_crypto::cred::{CredentialRequest, Grant, IssuerKeyPair, Verifier};
use libfuzzer_sys::fuzz_target;

const UNIX: u64 = 1_700_000_000;

struct Fixture {
    verifier: Verifier,
    initiator: InitiatorConfig,
    responder: ResponderConfig,
}

/// The keys, the credential and both configurations, built once: issuing
/// a credential (a signature) and deriving the static keys cost far more
/// than a handshake message, and are the same for every input.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(build_fixture)
}

fn build_fixture() -> Fixture {
    let issuer = IssuerKeyPair::from_seed(&[1; 32]).expect("seeded issuer");
    let mut verifier = Verifier::new();
    verifier.trust(*issuer.public_key()).expect("one issuer");
    let fay = NoiseKeypair::from_private([2; 32]).expect("fay key");
    let credential = issuer
        .issue(
            CredentialRequest {
                fay_id: "fay".into(),
                noise_key: *fay.public(),
                grants: vec![Grant {
                    resource_id: "r".into(),
                    modes: [AccessMode::Read].into_iter().collect(),
                }],
                not_before: 0,
                not_after: u64::MAX,
            },
            [3; 16],
        )
        .expect("valid request");
    let algorithms = vec![AeadAlgorithm::ChaCha20Poly1305, AeadAlgorithm::Aes256Gcm];
    Fixture {
        verifier,
        initiator: InitiatorConfig {
            static_keypair: fay,
            credential,
            algorithms: algorithms.clone(),
            pinned_responder_key: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
        responder: ResponderConfig {
            static_keypair: NoiseKeypair::from_private([4; 32]).expect("terminal key"),
            algorithms,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        },
    }
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        if data[i] == 0xff && data[i + 1] == 0x00 {
            out.push(&data[start..i]);
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    out.push(&data[start.min(data.len())..]);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let now = Instant::now();
    let ctx = ResponderContext {
        verifier: &f.verifier,
        unix_now: UNIX,
    };
    let msgs = split(rest);
    if mode % 2 == 0 {
        let mut r = CapResponder::new(&f.responder, now, [5; 32], [6; 16]).expect("config");
        for m in &msgs {
            let _ = r.handle_message(m, now, ctx);
            let _ = r.poll_transmit();
        }
        assert_ne!(
            r.state(),
            CapState::Established,
            "fuzz bytes established a terminal"
        );
        return;
    }
    let target = mode / 2 % 4 + 1;
    let mut i = CapInitiator::new(&f.initiator, now, [7; 32]).expect("config");
    let mut r = CapResponder::new(&f.responder, now, [5; 32], [6; 16]).expect("config");
    let mut fuzzed = msgs.iter();
    for n in 1..=4u8 {
        let to_responder = n % 2 == 1;
        let real = if to_responder {
            i.poll_transmit()
        } else {
            r.poll_transmit()
        };
        let Some(real) = real else { break };
        if n == target {
            for m in fuzzed.by_ref() {
                if to_responder {
                    let _ = r.handle_message(m, now, ctx);
                } else {
                    let _ = i.handle_message(m, now);
                }
            }
            // Unless the fuzzer reproduced the real message, the side fed
            // only fuzz bytes for it cannot have finished.
            if !msgs.iter().any(|m| *m == &real[..]) {
                let s = if to_responder { r.state() } else { i.state() };
                assert_ne!(s, CapState::Established, "fuzzed message {n} established");
            }
        } else if to_responder {
            let _ = r.handle_message(&real, now, ctx);
        } else {
            let _ = i.handle_message(&real, now);
        }
    }
    if let (Some(Ok(a)), Some(Ok(b))) = (i.poll_outcome(), r.poll_outcome()) {
        assert_eq!(a.initiator_to_responder, b.initiator_to_responder);
        assert_eq!(a.responder_to_initiator, b.responder_to_initiator);
        assert_eq!(a.handshake_hash, b.handshake_hash);
        assert_eq!(a.algorithm, b.algorithm);
    }
});
