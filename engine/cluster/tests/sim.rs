//! The cluster simulation (`dtp_cluster::sim`) over many seeds: with the
//! gateway keeper's rule (give everything up after two thirds of the lease
//! without a refresh), no resource is ever held by two gateways at once
//! and the store never lists two exclusive occupants — through partitions,
//! crashes, restarts and message delays.

use dtp_cluster::sim::{Model, Sim};

#[test]
fn no_seed_gives_one_resource_two_holders() {
    let mut totals = (0, 0, 0, 0);
    for seed in 0..60 {
        let o = Sim::new(Model::default(), seed).run(2_000);
        assert_eq!(o.violation, None, "seed {seed}: {o:?}");
        totals.0 += o.grants;
        totals.1 += o.busy;
        totals.2 += o.fences;
        totals.3 += o.crashes;
    }
    let (grants, busy, fences, crashes) = totals;
    println!(
        "60 seeds × 2,000 steps: {grants} grants, {busy} refused busy, {fences} fences, {crashes} crashes"
    );
    assert!(
        grants > 1_000 && busy > 100 && fences > 100 && crashes > 100,
        "{totals:?}"
    );
}
