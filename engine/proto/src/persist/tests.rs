//! Tests of the persisted forms (SPEC SES-2, SES-3): each machine round
//! trips through bytes, restores to the same behaviour, and refuses
//! truncated, over-ceiling and inconsistent bytes with typed errors.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::time::{Duration, Instant};

use dtp_codec::{Decision, Relation, RelationType, ResponseFrame, Terms};
use proptest::prelude::*;
use uuid::Uuid;

use super::{PersistError, Reader, Writer};
use crate::agreement::{
    AgreementConfig, AgreementKind, AgreementSnapshot, PersistedAgreement, PersistedRequest, Role,
};
use crate::dag::{DagConfig, DagManager};
use crate::fsm::{EngineEvent, EngineFsm, EngineState};
use crate::resume::{AckPolicy, ResumeReceiver, ResumeSender, SenderConfig};

/// Every strict prefix of `bytes` fails to read, with a typed error.
fn every_prefix_fails<T: std::fmt::Debug>(
    bytes: &[u8],
    read: impl Fn(&mut Reader<'_>) -> Result<T, PersistError>,
) {
    for cut in 0..bytes.len() {
        let mut r = Reader::new(&bytes[..cut]);
        let result = read(&mut r).and_then(|v| r.finish().map(|()| v));
        assert!(
            result.is_err(),
            "a prefix of {cut} bytes read as {result:?}"
        );
    }
}

fn rel(target: u64) -> Relation {
    Relation {
        kind: RelationType::DerivedFrom,
        target,
    }
}

// ---- primitives -----------------------------------------------------------

#[test]
fn counts_are_bounded_by_the_ceiling_and_by_the_bytes_left() {
    let mut w = Writer::new();
    w.count(10);
    let bytes = w.into_bytes();
    let over = Reader::new(&bytes).count("things", 9, 1).unwrap_err();
    assert_eq!(
        over,
        PersistError::OverCeiling {
            what: "things",
            found: 10,
            max: 9
        }
    );
    // Ten items of at least one byte each, none there: nothing allocated.
    let short = Reader::new(&bytes).count("things", 10, 1).unwrap_err();
    assert!(matches!(short, PersistError::Truncated { needed: 10, .. }));
    let mut w = Writer::new();
    w.count(usize::MAX);
    let bytes = w.into_bytes();
    let huge = Reader::new(&bytes)
        .count("things", usize::MAX, 8)
        .unwrap_err();
    assert!(matches!(huge, PersistError::Truncated { .. }));
}

#[test]
fn flags_strings_and_trailing_bytes_are_checked() {
    assert!(matches!(
        Reader::new(&[2]).flag("f"),
        Err(PersistError::InvalidValue { what: "f", .. })
    ));
    let mut w = Writer::new();
    w.bytes(&[0xff, 0xfe]);
    let bytes = w.into_bytes();
    assert!(matches!(
        Reader::new(&bytes).string("s", 16),
        Err(PersistError::InvalidValue { what: "s", .. })
    ));
    assert!(matches!(
        Reader::new(&bytes).string("s", 1),
        Err(PersistError::OverCeiling { found: 2, .. })
    ));
    let r = Reader::new(&bytes);
    assert_eq!(
        r.finish(),
        Err(PersistError::TrailingBytes { offset: 0, len: 6 })
    );
}

// ---- FSM ---------------------------------------------------------------

#[test]
fn only_a_suspended_machine_is_restored() {
    let mut fsm = EngineFsm::new();
    for e in [
        EngineEvent::ConnectionRequestReceived,
        EngineEvent::CapVerified,
        EngineEvent::RequestFrameSentOrReceived,
        EngineEvent::AgreementReached,
        EngineEvent::ConnectionLost,
    ] {
        fsm.handle(e).unwrap();
    }
    let mut w = Writer::new();
    fsm.persist(&mut w);
    let bytes = w.into_bytes();
    let back = EngineFsm::restore_persisted(&mut Reader::new(&bytes)).unwrap();
    assert_eq!(back.state(), EngineState::Suspended);
    for b in [1u8, 2, 3, 4, 5, 7] {
        let err = EngineFsm::restore_persisted(&mut Reader::new(&[b])).unwrap_err();
        assert!(matches!(err, PersistError::Inconsistent(_)), "{b}: {err:?}");
    }
    for b in [0u8, 8, 255] {
        let err = EngineFsm::restore_persisted(&mut Reader::new(&[b])).unwrap_err();
        assert!(matches!(err, PersistError::InvalidValue { .. }), "{b}");
    }
}

// ---- agreements -----------------------------------------------------------

fn terms_strategy() -> impl Strategy<Value = Terms> {
    prop::collection::btree_map("[a-z]{0,6}", "[ -~]{0,12}", 0..4)
}

fn request_strategy() -> impl Strategy<Value = PersistedRequest> {
    (
        any::<u64>(),
        prop::option::of(any::<u128>()),
        terms_strategy(),
    )
        .prop_map(|(request_id, adjusts, terms)| PersistedRequest {
            request_id,
            adjusts: adjusts.map(Uuid::from_u128),
            terms,
        })
}

fn decision_strategy() -> impl Strategy<Value = Decision> {
    prop_oneof![
        any::<u128>().prop_map(|id| Decision::Accepted {
            agreement_id: Uuid::from_u128(id)
        }),
        "[ -~]{0,20}".prop_map(|reason| Decision::Rejected { reason }),
        terms_strategy().prop_map(|terms| Decision::CounterProposal { terms }),
    ]
}

fn snapshot_strategy() -> impl Strategy<Value = AgreementSnapshot> {
    let agreement = (
        any::<u128>(),
        any::<bool>(),
        any::<bool>(),
        terms_strategy(),
    )
        .prop_map(|(id, collection, master, terms)| PersistedAgreement {
            id: Uuid::from_u128(id),
            kind: match collection {
                true => AgreementKind::Collection,
                false => AgreementKind::Injection,
            },
            initiator: match master {
                true => Role::Master,
                false => Role::Slave,
            },
            terms,
        });
    let answer =
        (any::<u64>(), decision_strategy()).prop_map(|(request_id, decision)| ResponseFrame {
            request_id,
            decision,
        });
    (
        prop::collection::vec(agreement, 0..4),
        prop::collection::vec(any::<u128>().prop_map(Uuid::from_u128), 0..3),
        any::<(u64, u64)>(),
        prop::collection::vec(request_strategy(), 0..3),
        prop::collection::vec(request_strategy(), 0..3),
        prop::collection::vec(answer, 0..4),
        prop::collection::vec(any::<u64>(), 0..3),
    )
        .prop_map(
            |(agreements, terminating, ids, in_flight, expired, answers, undecided)| {
                AgreementSnapshot {
                    agreements,
                    terminating,
                    next_request_id: ids.0,
                    highest_peer_request_id: ids.1,
                    in_flight,
                    expired,
                    answers,
                    undecided,
                }
            },
        )
}

fn persist_snapshot(s: &AgreementSnapshot) -> Vec<u8> {
    let mut w = Writer::new();
    s.persist(&mut w);
    w.into_bytes()
}

fn read_snapshot(
    bytes: &[u8],
    config: &AgreementConfig,
) -> Result<AgreementSnapshot, PersistError> {
    let mut r = Reader::new(bytes);
    let s = AgreementSnapshot::restore_persisted(&mut r, config, 64)?;
    r.finish()?;
    Ok(s)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    /// SPEC SES-2, SES-3: a snapshot reads back equal, and re-persists to
    /// the same bytes; every strict prefix is refused.
    #[test]
    fn agreement_snapshot_round_trips(s in snapshot_strategy()) {
        let config = AgreementConfig::default();
        let bytes = persist_snapshot(&s);
        let back = read_snapshot(&bytes, &config).unwrap();
        prop_assert_eq!(&back, &s);
        prop_assert_eq!(persist_snapshot(&back), bytes.clone());
        every_prefix_fails(&bytes, |r| AgreementSnapshot::restore_persisted(r, &config, 64));
    }
}

#[test]
fn agreement_counts_over_the_ceilings_are_refused() {
    let agreement = PersistedAgreement {
        id: Uuid::from_u128(1),
        kind: AgreementKind::Collection,
        initiator: Role::Master,
        terms: Terms::from([("k".into(), "v".into()), ("l".into(), "w".into())]),
    };
    let s = AgreementSnapshot {
        agreements: vec![agreement.clone(), agreement],
        undecided: vec![1, 2],
        answers: vec![
            ResponseFrame {
                request_id: 1,
                decision: Decision::Rejected {
                    reason: "no".into()
                },
            };
            2
        ],
        ..AgreementSnapshot::default()
    };
    let bytes = persist_snapshot(&s);
    let tight = |f: fn(&mut AgreementConfig)| {
        let mut c = AgreementConfig::default();
        f(&mut c);
        match read_snapshot(&bytes, &c).unwrap_err() {
            PersistError::OverCeiling { what, .. } => what,
            other => panic!("not over a ceiling: {other:?}"),
        }
    };
    assert_eq!(tight(|c| c.max_active_agreements = 1), "agreements");
    assert_eq!(tight(|c| c.max_terms = 1), "terms entries");
    assert_eq!(
        tight(|c| c.max_pending_incoming = 1),
        "undecided peer requests"
    );
    // One outstanding request allowed: four answers kept, five requests
    // (in flight and terminating) at most; none of them here.
    assert!(
        read_snapshot(
            &bytes,
            &AgreementConfig {
                max_outstanding_requests: 1,
                ..AgreementConfig::default()
            }
        )
        .is_ok()
    );
    let mut r = Reader::new(&bytes);
    let err = AgreementSnapshot::restore_persisted(&mut r, &AgreementConfig::default(), 0);
    assert!(matches!(
        err,
        Err(PersistError::OverCeiling {
            what: "terms key",
            ..
        })
    ));
    // Terms keys out of order are refused: one encoding per snapshot.
    let mut w = Writer::new();
    w.count(1);
    w.uuid(Uuid::from_u128(1));
    w.u8(1);
    w.u8(1);
    w.count(2);
    for key in ["b", "a"] {
        w.str(key);
        w.str("");
    }
    let err = AgreementSnapshot::restore_persisted(
        &mut Reader::new(w.as_slice()),
        &AgreementConfig::default(),
        64,
    );
    assert!(matches!(err, Err(PersistError::Inconsistent(_))));
}

#[path = "tests_dag.rs"]
mod dag;
#[path = "tests_resume.rs"]
mod resume;
