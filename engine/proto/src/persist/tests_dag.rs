//! The DAG Manager's persisted form (SPEC SES-2, SES-3, DAG-1 … DAG-3): a
//! restored DAG behaves as the original, and broken records are refused.

use super::*;

fn persist(dag: &DagManager<u64>) -> Vec<u8> {
    let mut w = Writer::new();
    dag.persist(&mut w, |item, w| w.u64(*item));
    w.into_bytes()
}

fn read(r: &mut Reader<'_>, config: DagConfig) -> Result<DagManager<u64>, PersistError> {
    DagManager::restore_persisted(r, config, |r, id, _| {
        let item = r.u64("item")?;
        if item != id {
            return Err(PersistError::Inconsistent("item is not its id"));
        }
        Ok(item)
    })
}

fn restore(bytes: &[u8], config: DagConfig) -> Result<DagManager<u64>, PersistError> {
    let mut r = Reader::new(bytes);
    let dag = read(&mut r, config)?;
    r.finish()?;
    Ok(dag)
}

fn drain(dag: &mut DagManager<u64>) -> Vec<u64> {
    std::iter::from_fn(|| dag.poll_released())
        .map(|r| r.item)
        .collect()
}

fn small() -> DagConfig {
    DagConfig {
        max_pending: 16,
        max_pending_bytes: 1000,
        max_relations: 4,
        resolved_window: 4,
    }
}

#[test]
fn waiting_fragments_survive_and_are_released_when_their_target_arrives() {
    let mut dag = DagManager::new(small());
    dag.insert(1, &[], 10, 1).unwrap();
    dag.insert(3, &[rel(2)], 10, 3).unwrap();
    dag.insert(4, &[rel(3), rel(1)], 10, 4).unwrap();
    dag.insert(5, &[rel(2), rel(2)], 10, 5).unwrap();
    // One released fragment left untaken, too.
    dag.insert(6, &[rel(1)], 10, 6).unwrap();
    assert_eq!(drain(&mut dag)[..1], [1]);
    dag.insert(7, &[], 10, 7).unwrap();
    let bytes = persist(&dag);
    let mut back = restore(&bytes, small()).unwrap();
    assert_eq!(persist(&back), bytes, "bytes → DAG → bytes is the identity");
    assert_eq!(back.waiting_count(), 3);
    assert_eq!(back.pending_bytes(), dag.pending_bytes());
    assert_eq!(back.resolved_count(), dag.resolved_count());
    for d in [&mut dag, &mut back] {
        d.insert(2, &[], 10, 2).unwrap();
    }
    assert_eq!(drain(&mut back), drain(&mut dag));
    assert_eq!(back.waiting_count(), 0);
}

#[test]
fn dag_records_over_the_ceilings_or_truncated_are_refused() {
    let mut dag = DagManager::new(small());
    for id in 1..=6 {
        dag.insert(id, &[], 10, id).unwrap();
    }
    drain(&mut dag);
    dag.insert(9, &[rel(8), rel(7), rel(6)], 10, 9).unwrap();
    let bytes = persist(&dag);
    every_prefix_fails(&bytes, |r| read(r, small()));
    let over = |config: DagConfig| match restore(&bytes, config) {
        Err(PersistError::OverCeiling { what, .. }) => what,
        other => panic!("not over a ceiling: {other:?}"),
    };
    let with = |f: fn(&mut DagConfig)| {
        let mut c = small();
        f(&mut c);
        c
    };
    assert_eq!(
        over(with(|c| c.resolved_window = 3)),
        "remembered fragment ids"
    );
    assert_eq!(over(with(|c| c.max_relations = 2)), "relations");
    assert_eq!(over(with(|c| c.max_pending = 0)), "waiting fragments");
    assert_eq!(
        over(with(|c| c.max_pending_bytes = 9)),
        "bytes held by a DAG"
    );
}

/// Writes a DAG record by hand: no resolved ids, these waiting fragments
/// (id, [(target, unresolved)]).
fn handmade(waiting: &[(u64, &[(u64, bool)])]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(0);
    w.flag(false);
    w.count(0);
    w.count(0);
    w.count(waiting.len());
    for (id, relations) in waiting {
        w.u64(*id);
        w.u64(1);
        w.count(relations.len());
        for (target, unresolved) in relations.iter() {
            w.u64(*target);
            w.flag(*unresolved);
        }
        w.u64(*id);
    }
    w.into_bytes()
}

#[test]
fn dag_invariants_are_checked_on_restore() {
    let inconsistent = |bytes: Vec<u8>| {
        assert!(
            matches!(restore(&bytes, small()), Err(PersistError::Inconsistent(_))),
            "{:?}",
            restore(&bytes, small()).map(|d| d.waiting_count())
        );
    };
    assert!(restore(&handmade(&[(1, &[(2, true)]), (3, &[(1, true)])]), small()).is_ok());
    // DAG-1: a cycle among waiting fragments.
    inconsistent(handmade(&[(1, &[(2, true)]), (2, &[(1, true)])]));
    inconsistent(handmade(&[(1, &[(1, true)])]));
    // Waiting with nothing unresolved; twice; a target never released.
    inconsistent(handmade(&[(1, &[(2, false)])]));
    inconsistent(handmade(&[(1, &[(2, true)]), (1, &[(2, true)])]));
    inconsistent(handmade(&[(1, &[(2, true), (2, false)])]));
}

#[derive(Clone, Debug)]
struct Insert {
    id: u64,
    targets: Vec<u64>,
    drain: bool,
}

fn inserts() -> impl Strategy<Value = Vec<Insert>> {
    let one = (
        1u64..24,
        prop::collection::vec(1u64..24, 0..3),
        any::<bool>(),
    )
        .prop_map(|(id, targets, drain)| Insert { id, targets, drain });
    prop::collection::vec(one, 0..40)
}

/// Applies `ops`; returns what each insertion did and what was drained.
fn apply(dag: &mut DagManager<u64>, ops: &[Insert]) -> Vec<(bool, Vec<u64>)> {
    ops.iter()
        .map(|op| {
            let relations: Vec<Relation> = op.targets.iter().map(|t| rel(*t)).collect();
            let ok = dag.insert(op.id, &relations, 3, op.id).is_ok();
            (ok, if op.drain { drain(dag) } else { Vec::new() })
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// SPEC SES-3, DAG-3: after any history, the restored DAG re-persists
    /// to the same bytes and answers every later insertion as the original.
    #[test]
    fn dag_round_trips_and_behaves_the_same(before in inserts(), after in inserts()) {
        let mut dag = DagManager::new(small());
        apply(&mut dag, &before);
        let bytes = persist(&dag);
        let mut back = restore(&bytes, small()).unwrap();
        prop_assert_eq!(persist(&back), bytes);
        prop_assert_eq!(apply(&mut back, &after), apply(&mut dag, &after));
        prop_assert_eq!(drain(&mut back), drain(&mut dag));
        prop_assert_eq!(back.abandon_waiting(), dag.abandon_waiting());
    }
}
