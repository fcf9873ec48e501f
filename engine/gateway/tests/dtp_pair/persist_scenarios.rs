//! SPEC SES-2, SES-3, SEQ-5: the persisted-session scenarios of
//! `dtp_persist.rs`, step by step.

use super::*;

/// SPEC SES-2, SES-3, DAG-2, DAG-3, RES-2: fragments waiting in a DAG and
/// fragments in the resume cache, on both sides, survive a cut, a store
/// restart and bytes; after the resume each side gets each fragment once,
/// the dependency first.
#[test]
fn ses3_waiting_and_cached_fragments_survive_a_restart() {
    let (mut p, collection, injection, dir) = durable_pair();
    // Each side sends 2 (derived from 1) and it arrives: it waits for 1.
    p.term
        .ep
        .send_fragment(collection, 2, derived_from(1), payload(2))
        .unwrap();
    p.fay
        .ep
        .send_fragment(injection, 12, derived_from(11), payload(12))
        .unwrap();
    p.drive();
    assert!(p.fay.fragments().is_empty() && p.term.fragments().is_empty());
    // Then 1 is sent but lost in the cut, and a third fragment too.
    p.term
        .ep
        .send_fragment(collection, 1, vec![], payload(1))
        .unwrap();
    p.term
        .ep
        .send_fragment(collection, 3, derived_from(2), payload(3))
        .unwrap();
    p.fay
        .ep
        .send_fragment(injection, 11, vec![], payload(11))
        .unwrap();
    p.transmit();
    p.cut(0, 0);
    let store = p.store.clone().unwrap();
    assert_eq!(store.len(), 1);
    let fay = p.fay_suspended.take().unwrap();
    assert_eq!(fay.waiting_fragments(), 1);
    assert_eq!(fay.cached_fragments(), 2, "11 and 12 are unacknowledged");
    p.fay_suspended = Some(through_bytes(fay, &p.fay_config.endpoint, p.now));
    let file = store.path_of(p.fay_suspended.as_ref().unwrap().session_id());
    assert!(file.exists());
    drop(store);
    restart_store(&mut p, &dir);
    p.reconnect();
    p.drive();
    let (_, resumed) = established(&p.fay.events).unwrap();
    assert!(resumed);
    assert_eq!(
        p.fay.ep.key_version(),
        2,
        "a resume runs a new CAP: new keys"
    );
    assert!(!file.exists(), "a taken session's file is removed");
    assert_eq!(p.store.as_ref().unwrap().len(), 0);
    let ids = |v: Vec<(AgreementId, u64)>| v.into_iter().map(|(_, id)| id).collect::<Vec<_>>();
    assert_eq!(ids(p.fay.fragments()), vec![1, 2, 3]);
    assert_eq!(ids(p.term.fragments()), vec![11, 12]);
    for _ in 0..5 {
        p.advance();
    }
    assert_eq!(p.fay.ep.resume_cache().0, 0);
    assert_eq!(p.term.ep.resume_cache().0, 0);
}

/// SPEC SEQ-5, SES-2: a cut while the terminal holds the Fay's adjustment
/// undecided (the terminal is Negotiating, with agreements in force)
/// suspends the session on both sides — it used to end the terminal's —
/// and the resumed Fay gets its answer.
#[test]
fn seq5_cut_with_an_undecided_adjustment_suspends_both_sides() {
    let (mut p, _, injection) = pair_with_agreements(World::new());
    let request = p
        .fay
        .ep
        .request_adjustment(injection, terms(&[("rate", "2")]), p.now)
        .unwrap();
    p.drive();
    assert_eq!(
        p.term.ep.state(),
        dtp_gateway::dtp::EngineState::Negotiating
    );
    p.cut(0, 0);
    assert_eq!(p.registry.len(), 1, "the terminal's session is suspended");
    assert!(p.fay_suspended.is_some());
    p.reconnect();
    p.drive();
    let (asked, _) = requested(&p.term.take_events()).unwrap();
    assert_eq!(asked, request, "sent again with its id");
    let random = p.rng.bytes16();
    p.term.ep.accept(asked, random, p.now).unwrap();
    p.drive();
    assert!(
        p.fay.events.iter().any(
            |e| matches!(e, DtpEvent::AgreementActive { agreement_id, adjusted: true, .. }
                if *agreement_id == injection)
        ),
        "{:?}",
        p.fay.events
    );
}
