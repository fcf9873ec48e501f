//! The etcd client against a real etcd: keys, transactions, leases,
//! watches, failover.

mod servers;

use std::time::Duration;

use dtp_cluster::etcd::Etcd;
use dtp_cluster::etcd::{
    Compare, CompareOp, CompareTarget, EventKind, OpResponse, Txn, TxnOp, prefix_end,
};
use dtp_cluster::{Error, HttpConfig};
use servers::{EtcdServer, free_port};

#[test]
fn put_get_delete_and_prefix_range() {
    let server = EtcdServer::start();
    let mut etcd = server.client();
    assert_eq!(etcd.get(b"a/1").unwrap().kv, None);
    let r1 = etcd.put(b"a/1", b"one", None).unwrap();
    let r2 = etcd.put(b"a/2", b"two", None).unwrap();
    etcd.put(b"b", b"other", None).unwrap();
    assert!(r2 > r1);
    let got = etcd.get(b"a/1").unwrap();
    let kv = got.kv.unwrap();
    assert_eq!(kv.value, b"one");
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (r1, r1, 1)
    );
    let range = etcd.range(b"a/", Some(&prefix_end(b"a/"))).unwrap();
    assert_eq!(range.count, 2);
    let keys: Vec<&[u8]> = range.kvs.iter().map(|kv| kv.key.as_slice()).collect();
    assert_eq!(keys, [&b"a/1"[..], b"a/2"]);
    // Binary keys and values survive the base64 round trip.
    let odd = [0u8, 0xff, b'\n', b'"'];
    etcd.put(&odd, &odd, None).unwrap();
    assert_eq!(etcd.get(&odd).unwrap().kv.unwrap().value, odd);
    assert_eq!(etcd.delete(b"a/1").unwrap().0, 1);
    assert_eq!(etcd.delete(b"a/1").unwrap().0, 0);
    assert_eq!(etcd.get(b"a/1").unwrap().kv, None);
}

#[test]
fn txn_compare_and_swap() {
    let server = EtcdServer::start();
    let mut etcd = server.client();
    let rev = etcd.put(b"k", b"v1", None).unwrap();
    let cas = |expected: i64, value: &[u8]| Txn {
        compare: vec![Compare::mod_revision_is(b"k".to_vec(), expected)],
        then: vec![TxnOp::Put {
            key: b"k".to_vec(),
            value: value.to_vec(),
            lease: None,
        }],
        otherwise: vec![TxnOp::Get { key: b"k".to_vec() }],
    };
    let won = etcd.txn(&cas(rev, b"v2")).unwrap();
    assert!(won.succeeded);
    assert!(
        matches!(won.responses[..], [OpResponse::Put { revision }] if revision == won.revision)
    );
    // The same expectation again is stale now: the else branch reads v2.
    let lost = etcd.txn(&cas(rev, b"v3")).unwrap();
    assert!(!lost.succeeded);
    let OpResponse::Get { kvs } = &lost.responses[0] else {
        panic!("{lost:?}")
    };
    assert_eq!(
        (kvs[0].value.as_slice(), kvs[0].mod_revision),
        (&b"v2"[..], won.revision)
    );
    // Value and version compares, and a delete in the then branch.
    let t = etcd
        .txn(&Txn {
            compare: vec![
                Compare::new(
                    b"k".to_vec(),
                    CompareOp::Equal,
                    CompareTarget::Value(b"v2".to_vec()),
                ),
                Compare::new(b"k".to_vec(), CompareOp::Greater, CompareTarget::Version(1)),
            ],
            then: vec![TxnOp::Delete { key: b"k".to_vec() }],
            otherwise: vec![],
        })
        .unwrap();
    assert!(t.succeeded);
    assert_eq!(t.responses, [OpResponse::Delete { deleted: 1 }]);
    assert!(matches!(etcd.txn(&Txn::default()), Ok(t) if t.succeeded));
}

#[test]
fn lease_keepalive_revoke_and_expiry() {
    let server = EtcdServer::start();
    let mut etcd = server.client();
    let lease = etcd.lease_grant(30).unwrap();
    assert!(lease.ttl >= 30);
    etcd.put(b"leased", b"x", Some(lease.id)).unwrap();
    assert_eq!(
        etcd.get(b"leased").unwrap().kv.unwrap().lease,
        Some(lease.id)
    );
    assert!(etcd.lease_keepalive_once(lease.id).unwrap() > 0);
    etcd.lease_revoke(lease.id).unwrap();
    assert_eq!(
        etcd.get(b"leased").unwrap().kv,
        None,
        "revoking deletes the lease's keys"
    );
    assert!(
        matches!(etcd.lease_keepalive_once(lease.id), Err(Error::LeaseNotFound(id)) if id == lease.id)
    );
    assert!(matches!(
        etcd.lease_revoke(lease.id),
        Err(Error::LeaseNotFound(_))
    ));
    assert!(matches!(
        etcd.put(b"k", b"v", Some(12345)),
        Err(Error::LeaseNotFound(12345))
    ));

    // A short lease left alone: etcd deletes its key, and a watch sees it.
    let short = etcd.lease_grant(1).unwrap();
    let rev = etcd.put(b"short", b"x", Some(short.id)).unwrap();
    let mut watch = etcd.watch(b"short", None, rev + 1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(20))).unwrap();
    let ev = watch.next().unwrap().unwrap();
    assert_eq!(ev.kind, EventKind::Delete);
    assert_eq!(ev.kv.key, b"short");
    assert!(matches!(
        etcd.lease_keepalive_once(short.id),
        Err(Error::LeaseNotFound(_))
    ));
}

#[test]
fn watch_sees_changes_from_a_revision() {
    let server = EtcdServer::start();
    let mut etcd = server.client();
    let r1 = etcd.put(b"w/a", b"1", None).unwrap();
    let mut watch = etcd.watch(b"w/", Some(&prefix_end(b"w/")), r1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let r2 = etcd.put(b"w/b", b"2", None).unwrap();
    etcd.put(b"elsewhere", b"-", None).unwrap();
    let (_, r3) = etcd.delete(b"w/a").unwrap();
    let events: Vec<_> = watch.by_ref().take(3).map(Result::unwrap).collect();
    let seen: Vec<(EventKind, &[u8], i64)> = events
        .iter()
        .map(|e| (e.kind.clone(), e.kv.key.as_slice(), e.kv.mod_revision))
        .collect();
    assert_eq!(
        seen,
        [
            (EventKind::Put, &b"w/a"[..], r1),
            (EventKind::Put, b"w/b", r2),
            (EventKind::Delete, b"w/a", r3)
        ]
    );
    // Nothing more: the next wait times out and the watch stays usable.
    watch.set_timeout(Some(Duration::from_millis(200))).unwrap();
    assert!(matches!(watch.next(), Some(Err(Error::Timeout { .. }))));
    let r4 = etcd.put(b"w/c", b"3", None).unwrap();
    watch.set_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(watch.next().unwrap().unwrap().kv.mod_revision, r4);
}

#[test]
fn failover_to_the_next_endpoint_and_unavailable() {
    let server = EtcdServer::start();
    let dead = format!("127.0.0.1:{}", free_port());
    let mut etcd = Etcd::new(&[&dead, &server.addr], HttpConfig::default()).unwrap();
    etcd.put(b"k", b"v", None).unwrap();
    assert_eq!(etcd.get(b"k").unwrap().kv.unwrap().value, b"v");
    // A watch finds the live endpoint too.
    let mut watch = etcd.watch(b"k", None, 1).unwrap();
    assert_eq!(watch.next().unwrap().unwrap().kv.value, b"v");
    let mut none = Etcd::new(&[&dead], HttpConfig::default()).unwrap();
    assert!(matches!(
        none.get(b"k"),
        Err(Error::Unavailable { tried: 1, .. })
    ));
    assert!(Etcd::new(&[], HttpConfig::default()).is_err());
}

#[test]
fn a_killed_server_ends_watches_and_is_reached_again_after_restart() {
    let mut server = EtcdServer::start();
    let mut etcd = server.client();
    let rev = etcd.put(b"k", b"v", None).unwrap();
    let mut watch = etcd.watch(b"k", None, rev + 1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(20))).unwrap();
    server.kill_and_restart();
    // The watch's connection died with the server: an error, then the end.
    assert!(matches!(watch.next(), Some(Err(Error::Io { .. }))));
    assert!(watch.next().is_none());
    // The kept-alive connection died too: the next calls connect again,
    // and what etcd acknowledged before the kill is still there.
    assert_eq!(etcd.get(b"k").unwrap().kv.unwrap().mod_revision, rev);
    assert!(etcd.put(b"k", b"w", None).unwrap() > rev);
    // A new watch from the old revision sees the write made since.
    let mut watch = etcd.watch(b"k", None, rev + 1).unwrap();
    watch.set_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(watch.next().unwrap().unwrap().kv.value, b"w");
}
