//! SPEC ENC-1: keys are replaced before their usage limit, in the middle of
//! a session, without the application noticing: with a seal limit of a few
//! frames, a long exchange crosses many rekeys in both directions and every
//! fragment still arrives once, in order.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

#[path = "dtp_pair/harness.rs"]
#[allow(
    dead_code,
    reason = "the pair tests' harness: this test uses part of it"
)]
mod harness;

use bytes::Bytes;
use dtp_crypto::aead::KeyLimits;
use harness::*;

#[test]
fn enc1_sessions_rekey_before_the_usage_limit_and_lose_nothing() {
    let mut world = World::new();
    // Rekey after 8 seals, refuse after 16: a frame of either side crosses
    // a rekey every few fragments.
    world.endpoint.key_limits = Some(KeyLimits {
        soft_seals: 8,
        hard_seals: 16,
        soft_blocks: 1 << 20,
        hard_blocks: 1 << 21,
    });
    let (mut p, collection, injection) = pair_with_agreements(world);
    let start_version = p.fay.ep.key_version();
    for i in 1..=200u64 {
        p.fay
            .ep
            .send_fragment(injection, i, vec![], Bytes::from(vec![i as u8; 100]))
            .unwrap();
        p.term
            .ep
            .send_fragment(collection, i, vec![], Bytes::from(vec![!(i as u8); 100]))
            .unwrap();
        p.drive();
    }
    while p.advance() {
        if p.fay.ep.resume_cache().0 == 0 && p.term.ep.resume_cache().0 == 0 {
            break;
        }
    }
    let ids = |v: Vec<(dtp_codec::AgreementId, u64)>, a| -> Vec<u64> {
        v.into_iter()
            .filter(|(x, _)| *x == a)
            .map(|(_, f)| f)
            .collect()
    };
    let want: Vec<u64> = (1..=200).collect();
    assert_eq!(ids(p.term.fragments(), injection), want);
    assert_eq!(ids(p.fay.fragments(), collection), want);
    assert!(p.fay.closed_code().is_none() && p.term.closed_code().is_none());
    // Both sides moved to later key versions, many times.
    assert!(
        p.fay.ep.key_version() > start_version + 10,
        "key version {} from {start_version}",
        p.fay.ep.key_version()
    );
    let stats = p.fay.ep.crypto_stats();
    assert!(
        stats.rekeys_sent > 10 && stats.rekeys_received > 10,
        "{stats:?}"
    );
}
