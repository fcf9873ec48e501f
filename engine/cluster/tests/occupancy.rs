//! The cross-node occupancy table on a real etcd (SPEC TS-9, HO-4): reads
//! share and exclusive sessions exclude across nodes, racing admissions
//! never give one resource two exclusive occupants, a handover across nodes
//! leaves no instant with two, fencing tokens only go up, and a dead node's
//! occupants vanish with its lease; a handover's reservation keeps the
//! other nodes out until its target takes it over, or its time passes.

#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

mod servers;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use dtp_cluster::{Occupancy, Occupant};
use servers::EtcdServer;

const P: &str = "dtp/test";

fn who(node: &str, holder: &str, exclusive: bool) -> Occupant {
    Occupant {
        node: node.into(),
        holder: holder.into(),
        exclusive,
        reserved_until: None,
        reserved_for: None,
    }
}

/// The admissions' clock (Unix ms): only reservations read it.
const NOW: u64 = 1_000_000;

#[test]
fn reads_share_and_an_exclusive_session_excludes_across_nodes() {
    let server = EtcdServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let read = who("node-a", "fay-1", false);
    let t1 = Occupancy::new(&mut a, P)
        .enter("cam/1", "s1", &read, None, NOW)
        .unwrap()
        .unwrap();
    let t2 = Occupancy::new(&mut b, P)
        .enter("cam/1", "s2", &who("node-b", "fay-2", false), None, NOW)
        .unwrap()
        .unwrap();
    assert!(t2.revision > t1.revision);
    let busy = Occupancy::new(&mut b, P)
        .enter("cam/1", "s3", &who("node-b", "fay-3", true), None, NOW)
        .unwrap()
        .unwrap_err();
    assert_eq!(busy.occupants.len(), 2, "{busy:?}");
    // Another resource is untouched; the same session again is admitted.
    assert!(
        Occupancy::new(&mut b, P)
            .enter("cam/2", "s3", &who("node-b", "fay-3", true), None, NOW)
            .unwrap()
            .is_ok()
    );
    assert!(
        Occupancy::new(&mut a, P)
            .enter("cam/1", "s1", &read, None, NOW)
            .unwrap()
            .is_ok()
    );
    let (_, occupants) = Occupancy::new(&mut a, P).occupants("cam/1").unwrap();
    let mut sessions: Vec<_> = occupants.iter().map(|(s, _)| s.as_str()).collect();
    sessions.sort_unstable();
    assert_eq!(sessions, ["s1", "s2"]);
    Occupancy::new(&mut a, P).leave("cam/1", "s1").unwrap();
    Occupancy::new(&mut a, P).leave("cam/1", "s1").unwrap();
    Occupancy::new(&mut b, P).leave("cam/1", "s2").unwrap();
    assert!(
        Occupancy::new(&mut b, P)
            .enter("cam/1", "s3", &who("node-b", "fay-3", true), None, NOW)
            .unwrap()
            .is_ok()
    );
}

#[test]
fn racing_exclusive_admissions_on_several_nodes_admit_exactly_one() {
    let server = Arc::new(EtcdServer::start());
    const NODES: usize = 6;
    let barrier = Arc::new(Barrier::new(NODES));
    let handles: Vec<_> = (0..NODES)
        .map(|i| {
            let (server, barrier) = (Arc::clone(&server), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut etcd = server.client();
                etcd.get(b"warm-up").unwrap();
                barrier.wait();
                let node = format!("node-{i}");
                Occupancy::new(&mut etcd, P)
                    .enter(
                        "term",
                        &format!("s{i}"),
                        &who(&node, "fay", true),
                        None,
                        NOW,
                    )
                    .unwrap()
                    .is_ok()
            })
        })
        .collect();
    let admitted = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|ok| *ok)
        .count();
    assert_eq!(admitted, 1);
    let (_, occupants) = Occupancy::new(&mut server.client(), P)
        .occupants("term")
        .unwrap();
    assert_eq!(occupants.len(), 1);
}

/// HO-4 across nodes: the source's node leaves, the target's node enters;
/// a watcher of the table never sees two exclusive occupants, and each
/// grant's token is above the previous one's.
#[test]
fn a_handover_across_nodes_never_shows_two_controllers() {
    let server = EtcdServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let mut tokens = Vec::new();
    for round in 0..20 {
        let (from, to) = if round % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let source = format!("s{round}");
        let target = format!("s{}", round + 1);
        if round == 0 {
            let t = Occupancy::new(from, P)
                .enter("r", &source, &who("node-a", "fay-0", true), None, NOW)
                .unwrap()
                .unwrap();
            tokens.push(t.revision);
        }
        // The target cannot enter while the source holds the resource.
        assert!(
            Occupancy::new(to, P)
                .enter("r", &target, &who("x", "fay", true), None, NOW)
                .unwrap()
                .is_err()
        );
        Occupancy::new(from, P).leave("r", &source).unwrap();
        let (_, between) = Occupancy::new(to, P).occupants("r").unwrap();
        assert!(between.is_empty(), "T2–T3: no controller, {between:?}");
        let t = Occupancy::new(to, P)
            .enter("r", &target, &who("x", "fay", true), None, NOW)
            .unwrap()
            .unwrap();
        tokens.push(t.revision);
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[test]
fn a_dead_nodes_occupants_vanish_with_its_lease() {
    let server = EtcdServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let lease = a.lease_grant(1).unwrap();
    Occupancy::new(&mut a, P)
        .enter(
            "r",
            "s-a",
            &who("node-a", "fay-a", true),
            Some(lease.id),
            NOW,
        )
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let entered = Occupancy::new(&mut b, P)
            .enter("r", "s-b", &who("node-b", "fay-b", true), None, NOW)
            .unwrap();
        if entered.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the lease never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, occupants) = Occupancy::new(&mut b, P).occupants("r").unwrap();
    assert_eq!(occupants.len(), 1);
    assert_eq!(occupants[0].1.node, "node-b");
}

/// Two clients of a new etcd; node-a's session `src` on `r` handed over
/// (T1): its entry is node-a's reservation until `NOW + 500`.
fn reserved() -> (EtcdServer, dtp_cluster::etcd::Etcd, dtp_cluster::etcd::Etcd) {
    let server = EtcdServer::start();
    let (mut a, b) = (server.client(), server.client());
    Occupancy::new(&mut a, P)
        .enter("r", "src", &who("node-a", "fay-a", true), None, NOW)
        .unwrap()
        .unwrap();
    Occupancy::new(&mut a, P)
        .reserve("r", "src", ("node-a", Some("fay-t")), NOW + 500, None)
        .unwrap();
    (server, a, b)
}

#[test]
fn a_reservation_keeps_the_resource_for_its_node_until_its_time() {
    let (_server, mut a, mut b) = reserved();
    let (_, occupants) = Occupancy::new(&mut b, P).occupants("r").unwrap();
    assert_eq!(occupants.len(), 1);
    assert_eq!(occupants[0].1.reserved_until, Some(NOW + 500));
    // Another node is kept out, in any mode, until the reservation's time.
    for exclusive in [true, false] {
        let busy = Occupancy::new(&mut b, P)
            .enter(
                "r",
                "other",
                &who("node-b", "fay-b", exclusive),
                None,
                NOW + 499,
            )
            .unwrap()
            .unwrap_err();
        assert_eq!(busy.occupants[0].0, "src");
    }
    // T4 on node-a: the target takes the reservation over, in one write.
    let t = Occupancy::new(&mut a, P)
        .enter("r", "dst", &who("node-a", "fay-t", true), None, NOW + 1)
        .unwrap()
        .unwrap();
    let (_, occupants) = Occupancy::new(&mut b, P).occupants("r").unwrap();
    assert_eq!(occupants.len(), 1, "{occupants:?}");
    assert_eq!(occupants[0].0, "dst");
    assert!(t.revision > 0);
}

#[test]
fn an_expired_reservation_lets_another_node_in_and_a_gone_entry_is_not_reserved() {
    let (_server, mut a, mut b) = reserved();
    // The target never came: from its time on, the reservation is void
    // and dropped by the next admission.
    Occupancy::new(&mut b, P)
        .enter("r", "other", &who("node-b", "fay-b", true), None, NOW + 500)
        .unwrap()
        .unwrap();
    let (_, occupants) = Occupancy::new(&mut b, P).occupants("r").unwrap();
    assert_eq!(occupants.len(), 1, "{occupants:?}");
    assert_eq!(occupants[0].0, "other");
    // Reserving an entry that is gone writes nothing.
    Occupancy::new(&mut a, P)
        .reserve("r", "src", ("node-a", None), NOW + 10_000, None)
        .unwrap();
    let (_, occupants) = Occupancy::new(&mut b, P).occupants("r").unwrap();
    assert_eq!(occupants.len(), 1, "{occupants:?}");
}

#[test]
fn a_reservation_lets_its_target_in_on_another_node() {
    let (_server, mut a, mut b) = reserved();
    // A handover across gateways: the target's session is on node-b.
    Occupancy::new(&mut b, P)
        .enter("r", "dst", &who("node-b", "fay-t", true), None, NOW + 1)
        .unwrap()
        .unwrap();
    let (_, occupants) = Occupancy::new(&mut a, P).occupants("r").unwrap();
    assert_eq!(occupants.len(), 1, "{occupants:?}");
    assert_eq!(occupants[0].0, "dst");
    // Now the target holds it: node-a is kept out like anyone else.
    assert!(
        Occupancy::new(&mut a, P)
            .enter("r", "again", &who("node-a", "fay-a", true), None, NOW + 2)
            .unwrap()
            .is_err()
    );
}
