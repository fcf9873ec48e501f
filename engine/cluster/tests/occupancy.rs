//! The cross-node occupancy table on a real etcd (SPEC TS-9, HO-4): reads
//! share and exclusive sessions exclude across nodes, racing admissions
//! never give one resource two exclusive occupants, a handover across nodes
//! leaves no instant with two, fencing tokens only go up, and a dead node's
//! occupants vanish with its lease.

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
    }
}

#[test]
fn reads_share_and_an_exclusive_session_excludes_across_nodes() {
    let server = EtcdServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let read = who("node-a", "fay-1", false);
    let t1 = Occupancy::new(&mut a, P)
        .enter("cam/1", "s1", &read, None)
        .unwrap()
        .unwrap();
    let t2 = Occupancy::new(&mut b, P)
        .enter("cam/1", "s2", &who("node-b", "fay-2", false), None)
        .unwrap()
        .unwrap();
    assert!(t2.revision > t1.revision);
    let busy = Occupancy::new(&mut b, P)
        .enter("cam/1", "s3", &who("node-b", "fay-3", true), None)
        .unwrap()
        .unwrap_err();
    assert_eq!(busy.occupants.len(), 2, "{busy:?}");
    // Another resource is untouched; the same session again is admitted.
    assert!(
        Occupancy::new(&mut b, P)
            .enter("cam/2", "s3", &who("node-b", "fay-3", true), None)
            .unwrap()
            .is_ok()
    );
    assert!(
        Occupancy::new(&mut a, P)
            .enter("cam/1", "s1", &read, None)
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
            .enter("cam/1", "s3", &who("node-b", "fay-3", true), None)
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
                    .enter("term", &format!("s{i}"), &who(&node, "fay", true), None)
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
                .enter("r", &source, &who("node-a", "fay-0", true), None)
                .unwrap()
                .unwrap();
            tokens.push(t.revision);
        }
        // The target cannot enter while the source holds the resource.
        assert!(
            Occupancy::new(to, P)
                .enter("r", &target, &who("x", "fay", true), None)
                .unwrap()
                .is_err()
        );
        Occupancy::new(from, P).leave("r", &source).unwrap();
        let (_, between) = Occupancy::new(to, P).occupants("r").unwrap();
        assert!(between.is_empty(), "T2–T3: no controller, {between:?}");
        let t = Occupancy::new(to, P)
            .enter("r", &target, &who("x", "fay", true), None)
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
        .enter("r", "s-a", &who("node-a", "fay-a", true), Some(lease.id))
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let entered = Occupancy::new(&mut b, P)
            .enter("r", "s-b", &who("node-b", "fay-b", true), None)
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
