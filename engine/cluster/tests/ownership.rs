//! Ownership on a real etcd: claims between two nodes, transfers,
//! releases, lease expiry, and fencing tokens that only go up (SPEC HO-4).

mod servers;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use dtp_cluster::etcd::EventKind;
use dtp_cluster::{Error, Ownership, Stale, Taken};
use servers::EtcdServer;

const KEY: &[u8] = b"/dtp/resource/cam-1";

#[test]
fn two_nodes_one_claim() {
    let server = EtcdServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let claim = Ownership::new(&mut a)
        .claim(KEY, "node-a", None)
        .unwrap()
        .unwrap();
    let taken = Ownership::new(&mut b)
        .claim(KEY, "node-b", None)
        .unwrap()
        .unwrap_err();
    assert_eq!(
        taken,
        Taken {
            holder: "node-a".into(),
            revision: claim.revision,
            lease: None
        }
    );
    // A claim by the holder itself is refused too: one claim at a time.
    assert!(
        Ownership::new(&mut a)
            .claim(KEY, "node-a", None)
            .unwrap()
            .is_err()
    );
    assert_eq!(Ownership::new(&mut b).holder(KEY).unwrap(), Some(taken));
}

#[test]
fn racing_nodes_exactly_one_wins() {
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
                Ownership::new(&mut etcd)
                    .claim(KEY, &format!("node-{i}"), None)
                    .unwrap()
            })
        })
        .collect();
    let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let mut etcd = server.client();
    let holder = Ownership::new(&mut etcd).holder(KEY).unwrap().unwrap();
    assert_eq!(holder.revision, winners[0].revision);
    for lost in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert_eq!(lost, &holder);
    }
}

#[test]
fn transfer_and_release_need_the_current_revision() {
    let server = EtcdServer::start();
    let mut etcd = server.client();
    let mut own = Ownership::new(&mut etcd);
    let first = own.claim(KEY, "node-a", None).unwrap().unwrap();
    let second = own
        .transfer(KEY, first.revision, "node-b", None)
        .unwrap()
        .unwrap();
    assert!(second.revision > first.revision);
    // The old token is stale now: neither a transfer nor a release with it.
    let stale = own
        .transfer(KEY, first.revision, "node-c", None)
        .unwrap()
        .unwrap_err();
    let now = Taken {
        holder: "node-b".into(),
        revision: second.revision,
        lease: None,
    };
    assert_eq!(
        stale,
        Stale {
            current: Some(now.clone())
        }
    );
    assert_eq!(
        own.release(KEY, first.revision).unwrap().unwrap_err(),
        Stale { current: Some(now) }
    );
    let released = own.release(KEY, second.revision).unwrap().unwrap();
    assert!(released.revision > second.revision);
    assert_eq!(own.holder(KEY).unwrap(), None);
    assert_eq!(
        own.release(KEY, second.revision).unwrap().unwrap_err(),
        Stale { current: None }
    );
}

#[test]
fn lease_expiry_frees_a_claim_and_tokens_keep_rising() {
    let server = EtcdServer::start();
    let (mut a, mut b) = (server.client(), server.client());
    let mut tokens = Vec::new();

    let lease = a.lease_grant(1).unwrap();
    let claim = Ownership::new(&mut a)
        .claim(KEY, "node-a", Some(lease.id))
        .unwrap()
        .unwrap();
    tokens.push(claim.revision);
    let taken = Ownership::new(&mut b)
        .claim(KEY, "node-b", None)
        .unwrap()
        .unwrap_err();
    assert_eq!(taken.lease, Some(lease.id));

    // node-a stops refreshing: wait for etcd to delete the key.
    let mut watch = b.watch(KEY, None, claim.revision + 1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(20))).unwrap();
    let gone = watch.next().unwrap().unwrap();
    assert_eq!(gone.kind, EventKind::Delete);
    tokens.push(gone.kv.mod_revision);

    let mut own = Ownership::new(&mut b);
    let second = own.claim(KEY, "node-b", None).unwrap().unwrap();
    tokens.push(second.revision);
    let third = own
        .transfer(KEY, second.revision, "node-c", None)
        .unwrap()
        .unwrap();
    tokens.push(third.revision);
    let released = own.release(KEY, third.revision).unwrap().unwrap();
    tokens.push(released.revision);
    let fourth = own.claim(KEY, "node-a", None).unwrap().unwrap();
    tokens.push(fourth.revision);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens must strictly increase: {tokens:?}"
    );
    // The expired lease is gone for its holder too: it cannot claim on it.
    assert!(matches!(
        a.lease_keepalive_once(lease.id),
        Err(Error::LeaseNotFound(_))
    ));
    let mut own = Ownership::new(&mut a);
    assert!(matches!(
        own.claim(b"/dtp/resource/other", "node-a", Some(lease.id)),
        Err(Error::LeaseNotFound(id)) if id == lease.id
    ));
}
