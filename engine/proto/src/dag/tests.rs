//! Tests of the DAG Manager: one group per requirement, then the properties.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::collections::{HashMap, HashSet};

use dtp_codec::{ErrorCode, FragmentId, Relation, RelationType};
use proptest::prelude::*;

use super::{DagConfig, DagError, DagManager, Insertion, Released};

fn rel(target: FragmentId) -> Relation {
    Relation {
        kind: RelationType::DerivedFrom,
        target,
    }
}

fn rels(targets: &[FragmentId]) -> Vec<Relation> {
    targets.iter().map(|&t| rel(t)).collect()
}

fn dag() -> DagManager<&'static str> {
    DagManager::new(DagConfig::default())
}

fn drain<T>(dag: &mut DagManager<T>) -> Vec<FragmentId> {
    std::iter::from_fn(|| dag.poll_released())
        .map(|r| r.id)
        .collect()
}

/// Counters that a refused insertion must leave as they were.
fn snapshot<T>(dag: &DagManager<T>) -> (usize, usize, usize, usize, u64, usize) {
    (
        dag.waiting_count(),
        dag.waiting_bytes(),
        dag.released_count(),
        dag.released_bytes(),
        dag.resolved_count(),
        dag.remembered_count(),
    )
}

// ---- DAG-1: cycles -------------------------------------------------------

#[test]
fn dag1_self_reference_is_refused() {
    let mut dag = dag();
    let err = dag.insert(1, &rels(&[1]), 3, "one").unwrap_err();
    assert_eq!(
        err.error,
        DagError::CycleDetected {
            fragment: 1,
            target: 1
        }
    );
    assert_eq!(err.code(), ErrorCode::DAG_CYCLE_DETECTED);
    assert_eq!(err.item, "one", "the fragment is handed back");
    assert_eq!(snapshot(&dag), (0, 0, 0, 0, 0, 0));
    // The id was not used: the same fragment without the bad edge is fine.
    assert_eq!(
        dag.insert(1, &[], 3, "one").unwrap(),
        Insertion::Released { count: 1 }
    );
}

#[test]
fn dag1_cycle_closed_among_waiting_fragments_is_refused_and_dag_unchanged() {
    let mut dag = dag();
    // 2 waits on 3, 3 waits on 4; 4 arriving with a relation to 2 closes 2→3→4→2.
    assert_eq!(
        dag.insert(2, &rels(&[3]), 10, "two").unwrap(),
        Insertion::Waiting { missing: 1 }
    );
    assert_eq!(
        dag.insert(3, &rels(&[4]), 10, "three").unwrap(),
        Insertion::Waiting { missing: 1 }
    );
    let before = snapshot(&dag);
    let err = dag.insert(4, &rels(&[2]), 10, "four").unwrap_err();
    assert_eq!(
        err.error,
        DagError::CycleDetected {
            fragment: 4,
            target: 2
        }
    );
    assert_eq!(snapshot(&dag), before);
    assert!(!dag.is_waiting(4) && !dag.is_resolved(4));
    // A correct 4 releases the whole chain, target first.
    assert_eq!(
        dag.insert(4, &[], 10, "four").unwrap(),
        Insertion::Released { count: 3 }
    );
    assert_eq!(drain(&mut dag), vec![4, 3, 2]);
}

#[test]
fn dag1_two_fragment_cycle_is_refused() {
    let mut dag = dag();
    dag.insert(1, &rels(&[2]), 1, "a").unwrap();
    let err = dag.insert(2, &rels(&[1]), 1, "b").unwrap_err();
    assert_eq!(err.code(), ErrorCode::DAG_CYCLE_DETECTED);
    assert_eq!(dag.waiting_count(), 1);
}

#[test]
fn dag1_diamond_is_not_a_cycle() {
    let mut dag = dag();
    // 4 → {2, 3} → 1, all arriving before 1.
    dag.insert(4, &rels(&[2, 3]), 1, "d").unwrap();
    dag.insert(2, &rels(&[1]), 1, "b").unwrap();
    dag.insert(3, &rels(&[1]), 1, "c").unwrap();
    assert_eq!(
        dag.insert(1, &[], 1, "a").unwrap(),
        Insertion::Released { count: 4 }
    );
    assert_eq!(drain(&mut dag), vec![1, 2, 3, 4]);
}

#[test]
fn dag1_edge_into_resolved_fragment_never_forms_a_cycle() {
    let mut dag = dag();
    dag.insert(1, &[], 1, "a").unwrap();
    dag.insert(3, &rels(&[2]), 1, "c").unwrap();
    // 2 → 1 (resolved): fine even though 3 waits on 2.
    assert_eq!(
        dag.insert(2, &rels(&[1]), 1, "b").unwrap(),
        Insertion::Released { count: 2 }
    );
}

// ---- DAG-2: waiting, bounded ---------------------------------------------

#[test]
fn dag2_fragment_with_missing_dependency_waits() {
    let mut dag = dag();
    assert_eq!(
        dag.insert(5, &rels(&[1, 2]), 100, "five").unwrap(),
        Insertion::Waiting { missing: 2 }
    );
    assert!(dag.is_waiting(5));
    assert_eq!(dag.waiting_count(), 1);
    assert_eq!(dag.waiting_bytes(), 100);
    assert_eq!(dag.poll_released(), None);
    dag.insert(1, &[], 1, "one").unwrap();
    assert_eq!(drain(&mut dag), vec![1], "5 still misses 2");
    assert!(dag.is_waiting(5));
    dag.insert(2, &[], 1, "two").unwrap();
    assert_eq!(drain(&mut dag), vec![2, 5]);
    assert_eq!((dag.waiting_count(), dag.waiting_bytes()), (0, 0));
}

#[test]
fn dag2_count_limit_refuses_with_4002_and_leaves_dag_unchanged() {
    let mut dag = DagManager::new(DagConfig {
        max_pending: 2,
        ..DagConfig::default()
    });
    dag.insert(10, &rels(&[1]), 1, "a").unwrap();
    dag.insert(11, &rels(&[1]), 1, "b").unwrap();
    let before = snapshot(&dag);
    let err = dag.insert(12, &rels(&[1]), 1, "c").unwrap_err();
    assert!(matches!(
        err.error,
        DagError::PendingLimit {
            fragment: 12,
            pending: 2,
            max_pending: 2,
            ..
        }
    ));
    assert_eq!(err.code(), ErrorCode::DAG_PENDING_LIMIT);
    assert_eq!(snapshot(&dag), before);
    assert!(!dag.dependents[&1].contains(&12), "no dangling edge");
    // Releasing the waiting ones (and draining) makes room again.
    dag.insert(1, &[], 1, "one").unwrap_err(); // 1 is the third held fragment
    assert_eq!(dag.abandon_waiting().len(), 2);
    dag.insert(1, &[], 1, "one").unwrap();
    assert_eq!(drain(&mut dag), vec![1]);
    assert!(dag.insert(12, &rels(&[1]), 1, "c").is_ok());
}

#[test]
fn dag2_byte_limit_refuses_with_4002() {
    let mut dag = DagManager::new(DagConfig {
        max_pending_bytes: 100,
        ..DagConfig::default()
    });
    dag.insert(10, &rels(&[1]), 60, "a").unwrap();
    let err = dag.insert(11, &rels(&[1]), 41, "b").unwrap_err();
    assert!(matches!(
        err.error,
        DagError::PendingLimit {
            size: 41,
            pending_bytes: 60,
            max_pending_bytes: 100,
            ..
        }
    ));
    assert_eq!(dag.waiting_bytes(), 60);
    assert!(
        dag.insert(11, &rels(&[1]), 40, "b").is_ok(),
        "exactly full fits"
    );
    // A fragment larger than the whole budget is refused even when empty.
    let mut empty = DagManager::new(DagConfig {
        max_pending_bytes: 100,
        ..DagConfig::default()
    });
    assert!(empty.insert(1, &[], 101, "big").is_err());
}

#[test]
fn dag2_undrained_releases_count_against_the_bound() {
    let mut dag = DagManager::new(DagConfig {
        max_pending: 2,
        ..DagConfig::default()
    });
    dag.insert(1, &[], 1, "a").unwrap();
    dag.insert(2, &[], 1, "b").unwrap();
    assert_eq!(dag.pending_count(), 2);
    let err = dag.insert(3, &[], 1, "c").unwrap_err();
    assert_eq!(err.code(), ErrorCode::DAG_PENDING_LIMIT);
    assert_eq!(drain(&mut dag), vec![1, 2]);
    assert!(dag.insert(3, &[], 1, "c").is_ok());
}

#[test]
fn dag2_error_text_says_what_to_do() {
    let e = DagError::PendingLimit {
        fragment: 7,
        size: 5,
        pending: 2,
        pending_bytes: 10,
        max_pending: 2,
        max_pending_bytes: 100,
    };
    let text = e.to_string();
    assert!(
        text.starts_with("4002 DAG_PENDING_LIMIT fragment 7"),
        "{text}"
    );
    assert!(text.contains("send missing dependencies"), "{text}");
    let e = DagError::CycleDetected {
        fragment: 4,
        target: 2,
    };
    assert!(e.to_string().starts_with("4001 DAG_CYCLE_DETECTED"));
}

// ---- DAG-3: lazy, transitive, deterministic release ----------------------

#[test]
fn dag3_release_cascades_transitively_in_arrival_order() {
    let mut dag = dag();
    // Waiting on 1: 30 (via 20), 21, 20 — arrival order 30, 21, 20.
    dag.insert(30, &rels(&[20]), 1, "").unwrap();
    dag.insert(21, &rels(&[1]), 1, "").unwrap();
    dag.insert(20, &rels(&[1]), 1, "").unwrap();
    dag.insert(22, &rels(&[1]), 1, "").unwrap();
    assert_eq!(dag.waiting_count(), 4);
    assert_eq!(
        dag.insert(1, &[], 1, "").unwrap(),
        Insertion::Released { count: 5 }
    );
    // Breadth-first: 1, then its dependents in arrival order, then theirs.
    assert_eq!(drain(&mut dag), vec![1, 21, 20, 22, 30]);
    assert_eq!(dag.resolved_count(), 5);
    assert!(dag.dependents.is_empty());
}

#[test]
fn dag3_released_fragment_carries_item_and_size() {
    let mut dag = dag();
    dag.insert(2, &rels(&[1]), 7, "payload two").unwrap();
    dag.insert(1, &[], 3, "payload one").unwrap();
    assert_eq!(dag.released_bytes(), 10);
    assert_eq!(
        dag.poll_released(),
        Some(Released {
            id: 1,
            size: 3,
            item: "payload one"
        })
    );
    assert_eq!(
        dag.poll_released(),
        Some(Released {
            id: 2,
            size: 7,
            item: "payload two"
        })
    );
    assert_eq!(dag.released_bytes(), 0);
}

#[test]
fn dag3_two_relations_to_the_same_target_release_once() {
    let mut dag = dag();
    let relations = [
        rel(1),
        Relation {
            kind: RelationType::Annotates,
            target: 1,
        },
    ];
    assert_eq!(
        dag.insert(2, &relations, 1, "").unwrap(),
        Insertion::Waiting { missing: 2 }
    );
    dag.insert(1, &[], 1, "").unwrap();
    assert_eq!(drain(&mut dag), vec![1, 2]);
}

// ---- DAG-4: the three relation types --------------------------------------

#[test]
fn dag4_every_relation_type_delivers_target_first() {
    for kind in [
        RelationType::DerivedFrom,
        RelationType::Annotates,
        RelationType::Supersedes,
    ] {
        let mut dag = dag();
        let relation = Relation { kind, target: 1 };
        assert_eq!(
            dag.insert(2, &[relation], 1, "").unwrap(),
            Insertion::Waiting { missing: 1 },
            "{kind:?}"
        );
        dag.insert(1, &[], 1, "").unwrap();
        assert_eq!(drain(&mut dag), vec![1, 2], "{kind:?}");
    }
}

// ---- Ids: duplicates, window, watermark ------------------------------------

#[test]
fn duplicate_ids_are_refused_not_overwritten() {
    let mut dag = dag();
    dag.insert(1, &[], 1, "first").unwrap();
    dag.insert(3, &rels(&[2]), 1, "waiting").unwrap();
    let err = dag.insert(1, &[], 1, "second").unwrap_err();
    assert_eq!(err.error, DagError::Duplicate { fragment: 1 });
    assert_eq!(err.code(), ErrorCode::INVALID_VALUE);
    assert_eq!(err.item, "second");
    let err = dag.insert(3, &[], 1, "again").unwrap_err();
    assert_eq!(err.error, DagError::Duplicate { fragment: 3 });
    assert_eq!(dag.poll_released().unwrap().item, "first");
    dag.insert(2, &[], 1, "two").unwrap();
    assert_eq!(
        std::iter::from_fn(|| dag.poll_released())
            .map(|r| r.item)
            .collect::<Vec<_>>(),
        vec!["two", "waiting"]
    );
}

#[test]
fn too_many_relations_are_refused() {
    let mut dag = DagManager::new(DagConfig {
        max_relations: 2,
        ..DagConfig::default()
    });
    let err = dag.insert(9, &rels(&[1, 2, 3]), 1, "").unwrap_err();
    assert_eq!(
        err.error,
        DagError::TooManyRelations {
            fragment: 9,
            count: 3,
            max: 2
        }
    );
    assert_eq!(err.code(), ErrorCode::LIMIT_EXCEEDED);
}

#[test]
fn window_bounds_memory_and_watermark_resolves_forgotten_targets() {
    let mut dag = DagManager::new(DagConfig {
        resolved_window: 4,
        ..DagConfig::default()
    });
    for id in 1..=10 {
        dag.insert(id, &[], 1, "").unwrap();
        drain(&mut dag);
        assert!(dag.remembered_count() <= 4);
    }
    assert_eq!(dag.remembered_count(), 4);
    assert_eq!(dag.watermark(), Some(6));
    assert_eq!(dag.resolved_count(), 10);
    // 3 fell out of the window: a relation to it counts as resolved.
    assert!(dag.is_resolved(3));
    assert_eq!(
        dag.insert(11, &rels(&[3, 9]), 1, "").unwrap(),
        Insertion::Released { count: 1 }
    );
    // An id at or below the watermark may be an undetectable duplicate.
    let err = dag.insert(5, &[], 1, "").unwrap_err();
    assert_eq!(
        err.error,
        DagError::BelowWatermark {
            fragment: 5,
            watermark: 7
        }
    );
    // A target above the watermark that never arrived still blocks.
    assert_eq!(
        dag.insert(13, &rels(&[12]), 1, "").unwrap(),
        Insertion::Waiting { missing: 1 }
    );
}

#[test]
fn waiting_fragment_below_watermark_is_still_a_duplicate_and_still_blocks() {
    let mut dag = DagManager::new(DagConfig {
        resolved_window: 1,
        ..DagConfig::default()
    });
    dag.insert(2, &rels(&[100]), 1, "").unwrap(); // waits
    dag.insert(10, &[], 1, "").unwrap();
    dag.insert(11, &[], 1, "").unwrap(); // watermark 10 > 2
    assert_eq!(dag.watermark(), Some(10));
    assert!(!dag.is_resolved(2), "waiting, not forgotten");
    assert_eq!(
        dag.insert(2, &[], 1, "").unwrap_err().error,
        DagError::Duplicate { fragment: 2 }
    );
    assert_eq!(
        dag.insert(12, &rels(&[2]), 1, "").unwrap(),
        Insertion::Waiting { missing: 1 }
    );
}

#[test]
fn zero_window_remembers_nothing_but_the_watermark() {
    let mut dag = DagManager::new(DagConfig {
        resolved_window: 0,
        ..DagConfig::default()
    });
    dag.insert(1, &[], 1, "").unwrap();
    dag.insert(2, &rels(&[1]), 1, "").unwrap();
    assert_eq!(dag.remembered_count(), 0);
    assert_eq!(dag.watermark(), Some(2));
    assert_eq!(drain(&mut dag), vec![1, 2]);
}

#[test]
fn abandon_waiting_returns_fragments_in_arrival_order() {
    let mut dag = dag();
    dag.insert(9, &rels(&[1]), 5, "nine").unwrap();
    dag.insert(4, &rels(&[9]), 5, "four").unwrap();
    dag.insert(7, &rels(&[2]), 5, "seven").unwrap();
    let abandoned = dag.abandon_waiting();
    assert_eq!(abandoned, vec![(9, "nine"), (4, "four"), (7, "seven")]);
    assert_eq!((dag.waiting_count(), dag.waiting_bytes()), (0, 0));
    dag.insert(1, &[], 1, "one").unwrap();
    assert_eq!(drain(&mut dag), vec![1]);
}

// ---- Properties -------------------------------------------------------------

/// A random acyclic DAG: node `i` relates to a subset of nodes `< i`; ids are
/// a random relabelling (so ids need not follow the topological order), and
/// insertion follows a random permutation.
fn acyclic_dag() -> impl Strategy<Value = (Vec<FragmentId>, Vec<Vec<usize>>, Vec<usize>)> {
    (1usize..40).prop_flat_map(|n| {
        let ids = Just((0..n as FragmentId).map(|i| i * 3 + 5).collect::<Vec<_>>()).prop_shuffle();
        let edges = (0..n)
            .map(|i| {
                if i == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    proptest::collection::vec(0..i, 0..5).boxed()
                }
            })
            .collect::<Vec<_>>();
        let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
        (ids, edges, order)
    })
}

/// An arbitrary directed graph over `n` nodes (self-loops and cycles
/// included) with a random insertion order.
fn any_graph() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<usize>)> {
    (1usize..25).prop_flat_map(|n| {
        let edges = proptest::collection::vec(proptest::collection::vec(0..n, 0..4), n);
        let order = Just((0..n).collect::<Vec<_>>()).prop_shuffle();
        (edges, order)
    })
}

/// Reference model: does `new` reach itself through `accepted ∪ {new}`?
fn closes_cycle(
    accepted: &HashMap<FragmentId, Vec<FragmentId>>,
    new: FragmentId,
    targets: &[FragmentId],
) -> bool {
    let mut seen = HashSet::new();
    let mut stack: Vec<FragmentId> = targets.to_vec();
    while let Some(node) = stack.pop() {
        if node == new {
            return true;
        }
        if seen.insert(node)
            && let Some(next) = accepted.get(&node)
        {
            stack.extend(next.iter().copied());
        }
    }
    false
}

proptest! {
    /// SPEC DAG-1/2/3: any insertion order of an acyclic DAG releases every
    /// fragment exactly once, each after all its targets.
    #[test]
    fn prop_acyclic_dag_releases_every_fragment_once_after_its_targets(
        (ids, edges, order) in acyclic_dag()
    ) {
        let mut dag = DagManager::new(DagConfig::default());
        let mut released: Vec<FragmentId> = Vec::new();
        for &node in &order {
            let relations = rels(&edges[node].iter().map(|&t| ids[t]).collect::<Vec<_>>());
            prop_assert!(dag.insert(ids[node], &relations, 1, node).is_ok());
            while let Some(r) = dag.poll_released() {
                prop_assert_eq!(r.id, ids[r.item]);
                released.push(r.id);
            }
        }
        prop_assert_eq!(released.len(), ids.len());
        let position: HashMap<FragmentId, usize> =
            released.iter().enumerate().map(|(p, &id)| (id, p)).collect();
        prop_assert_eq!(position.len(), ids.len(), "each released exactly once");
        for (node, targets) in edges.iter().enumerate() {
            for &t in targets {
                prop_assert!(position[&ids[t]] < position[&ids[node]]);
            }
        }
        prop_assert_eq!(dag.waiting_count(), 0);
        prop_assert_eq!(dag.waiting_bytes(), 0);
        prop_assert!(dag.dependents.is_empty());
    }

    /// SPEC DAG-1: an extra edge from a node to one of its descendants closes
    /// a cycle; whatever the order, some insertion is refused with 4001 and
    /// every refusal matches the reference model.
    #[test]
    fn prop_an_edge_closing_a_cycle_is_refused(
        (ids, mut edges, order) in acyclic_dag(),
        pick in any::<proptest::sample::Index>(),
    ) {
        // Back edge from an ancestor to a node that (transitively) depends on it.
        let n = ids.len();
        let from = pick.index(n);
        let mut descendants: Vec<usize> = (0..n)
            .filter(|&d| {
                let mut stack = vec![d];
                let mut seen = HashSet::new();
                while let Some(x) = stack.pop() {
                    if x == from { return true; }
                    if seen.insert(x) { stack.extend(edges[x].iter().copied()); }
                }
                false
            })
            .collect();
        descendants.sort_unstable();
        let to = *descendants.last().unwrap(); // `from` itself at worst: a self-loop
        edges[from].push(to);
        let mut dag = DagManager::new(DagConfig::default());
        let mut accepted: HashMap<FragmentId, Vec<FragmentId>> = HashMap::new();
        let mut refusals = 0;
        for &node in &order {
            let targets: Vec<FragmentId> = edges[node].iter().map(|&t| ids[t]).collect();
            let expect_cycle = closes_cycle(&accepted, ids[node], &targets);
            match dag.insert(ids[node], &rels(&targets), 1, ()) {
                Ok(_) => {
                    prop_assert!(!expect_cycle);
                    accepted.insert(ids[node], targets);
                }
                Err(e) => {
                    prop_assert!(expect_cycle);
                    prop_assert_eq!(e.code(), ErrorCode::DAG_CYCLE_DETECTED);
                    refusals += 1;
                }
            }
        }
        prop_assert!(refusals >= 1);
    }

    /// SPEC DAG-1/3 against a reference model on arbitrary graphs: a fragment
    /// is refused iff it closes a cycle; released fragments come after their
    /// targets; and the released set is exactly the closure "all targets
    /// released" (nothing held back, nothing released early).
    #[test]
    fn prop_matches_reference_model_on_arbitrary_graphs((edges, order) in any_graph()) {
        let mut dag = DagManager::new(DagConfig::default());
        let mut accepted: HashMap<FragmentId, Vec<FragmentId>> = HashMap::new();
        let mut released: HashSet<FragmentId> = HashSet::new();
        for &node in &order {
            let id = node as FragmentId;
            let targets: Vec<FragmentId> = edges[node].iter().map(|&t| t as FragmentId).collect();
            let expect_cycle = closes_cycle(&accepted, id, &targets);
            let result = dag.insert(id, &rels(&targets), 2, ());
            prop_assert_eq!(result.is_err(), expect_cycle);
            if result.is_ok() {
                accepted.insert(id, targets);
            }
            while let Some(r) = dag.poll_released() {
                for t in &accepted[&r.id] {
                    prop_assert!(released.contains(t), "{} released before {}", r.id, t);
                }
                prop_assert!(released.insert(r.id), "released twice");
            }
            for (id, targets) in &accepted {
                if !released.contains(id) {
                    prop_assert!(targets.iter().any(|t| !released.contains(t)));
                    prop_assert!(dag.is_waiting(*id));
                }
            }
            prop_assert_eq!(dag.waiting_count(), accepted.len() - released.len());
            prop_assert_eq!(dag.waiting_bytes(), 2 * dag.waiting_count());
        }
    }

    /// Bounded memory: held fragments never pass the ceilings and remembered
    /// ids never pass the window, whatever arrives.
    #[test]
    fn prop_bounds_hold(
        (edges, order) in any_graph(),
        max_pending in 1usize..8,
        window in 0usize..6,
        drain_every in 1usize..4,
    ) {
        let config = DagConfig {
            max_pending,
            max_pending_bytes: 3 * max_pending,
            max_relations: 255,
            resolved_window: window,
        };
        let mut dag = DagManager::new(config);
        for (step, &node) in order.iter().enumerate() {
            let targets: Vec<FragmentId> = edges[node].iter().map(|&t| t as FragmentId).collect();
            let before = snapshot(&dag);
            if let Err(e) = dag.insert(node as FragmentId, &rels(&targets), node % 4, ()) {
                prop_assert_eq!(snapshot(&dag), before);
                let _ = e.error.code();
            }
            prop_assert!(dag.pending_count() <= max_pending);
            prop_assert!(dag.pending_bytes() <= 3 * max_pending);
            prop_assert!(dag.remembered_count() <= window);
            if step % drain_every == 0 {
                drain(&mut dag);
            }
        }
    }
}
