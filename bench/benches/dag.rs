//! DAG Manager micro-benchmarks (SPEC DAG-1 … DAG-3).
//!
//! - `dag_insert_resolved/{0,1,4,16}`: one fragment whose relations all point
//!   to already released fragments — the common case, which should cost
//!   O(relations): one lookup per relation, one insertion into the window of
//!   remembered ids (evicting the oldest: the steady state), one release.
//!   Each iteration also takes the released fragment, as a driver would.
//! - `dag_chain_lazy/whole/N`: a chain of N fragments arriving tail first
//!   (each waits on its predecessor), then the head, whose arrival releases
//!   the whole chain (DAG-3); throughput is per fragment.
//! - `dag_chain_lazy/release/N`: only the head's insertion and the cascade it
//!   triggers, the N − 1 waiting fragments being set up outside the timing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "benchmarks: the fixed graphs are valid, a panic is the failure report"
)]

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dtp_codec::{FragmentId, Relation, RelationType};
use dtp_proto::dag::{DagConfig, DagManager, Insertion};

/// Relation counts of the resolved-targets benchmark.
const RELATIONS: [usize; 4] = [0, 1, 4, 16];

/// Chain lengths of the lazy-resolution benchmark.
const CHAINS: [u64; 2] = [16, 256];

/// Byte size given for every fragment (only counted, never touched).
const SIZE: usize = 1024;

fn insert_resolved(c: &mut Criterion) {
    let mut group = c.benchmark_group("dag_insert_resolved");
    group.throughput(Throughput::Elements(1));
    for k in RELATIONS {
        let mut dag: DagManager<FragmentId> = DagManager::new(DagConfig::default());
        // Fill the window so every measured insertion also evicts one id.
        let window = dag.config().resolved_window as FragmentId;
        for id in 0..window {
            dag.insert(id, &[], SIZE, id).unwrap();
            dag.poll_released().unwrap();
        }
        let mut next = window;
        let mut relations = vec![
            Relation {
                kind: RelationType::DerivedFrom,
                target: 0,
            };
            k
        ];
        group.bench_function(BenchmarkId::from_parameter(k), |b| {
            b.iter(|| {
                // The k most recent fragments: all resolved and remembered.
                for (i, relation) in relations.iter_mut().enumerate() {
                    relation.target = next - 1 - i as FragmentId;
                }
                let inserted = dag.insert(next, black_box(&relations), SIZE, next).unwrap();
                debug_assert_eq!(inserted, Insertion::Released { count: 1 });
                next += 1;
                black_box(dag.poll_released())
            });
        });
        assert_eq!(dag.waiting_count(), 0);
    }
    group.finish();
}

/// Inserts fragments `2..=len` of a chain (fragment `i` derives from
/// `i - 1`), tail first: all of them wait.
fn waiting_chain(len: FragmentId) -> DagManager<FragmentId> {
    let mut dag = DagManager::new(DagConfig::default());
    for id in (2..=len).rev() {
        let relation = Relation {
            kind: RelationType::DerivedFrom,
            target: id - 1,
        };
        dag.insert(id, &[relation], SIZE, id).unwrap();
    }
    dag
}

fn chain_lazy(c: &mut Criterion) {
    let mut group = c.benchmark_group("dag_chain_lazy");
    for len in CHAINS {
        group.throughput(Throughput::Elements(len));
        group.bench_function(BenchmarkId::new("whole", len), |b| {
            b.iter(|| {
                let mut dag = waiting_chain(black_box(len));
                dag.insert(1, &[], SIZE, 1).unwrap();
                let mut released = 0;
                while dag.poll_released().is_some() {
                    released += 1;
                }
                assert_eq!(released, len);
            });
        });
        group.bench_function(BenchmarkId::new("release", len), |b| {
            b.iter_batched_ref(
                || waiting_chain(len),
                |dag| {
                    let inserted = dag.insert(1, &[], SIZE, 1).unwrap();
                    let mut released = 0;
                    while dag.poll_released().is_some() {
                        released += 1;
                    }
                    (inserted, released)
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, insert_resolved, chain_lazy);
criterion_main!(benches);
