//! SPEC SES-2, SES-3 across gateways, on a real etcd: a session parked by
//! one gateway's [`EtcdSessionStore`] is resumed through another's, every
//! fragment delivered exactly once; a session is taken once however many
//! gateways ask at the same time; an expired one is gone.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::sync::{Arc, Barrier};
use std::time::Duration;

use bytes::Bytes;
use dtp_cluster::HttpConfig;
use dtp_gateway::dtp::{EndpointConfig, EtcdSessionStore, StoreLimits, SuspendedSessions};

#[allow(
    dead_code,
    reason = "the pair tests' harness: this test uses part of it"
)]
#[path = "dtp_pair/harness.rs"]
mod harness;
#[path = "../../cluster/tests/servers/mod.rs"]
mod servers;

use harness::*;
use servers::EtcdServer;

fn store(server: &EtcdServer, endpoint: EndpointConfig) -> Arc<EtcdSessionStore> {
    let endpoints = [format!("http://{}", server.addr)];
    let limits = StoreLimits::for_endpoint(endpoint);
    Arc::new(EtcdSessionStore::open(&endpoints, "dtp/test", limits, HttpConfig::default()).unwrap())
}

fn payload(id: u64) -> Bytes {
    Bytes::from(format!("fragment {id}"))
}

#[test]
fn a_session_parked_on_one_gateway_resumes_on_another() {
    let server = EtcdServer::start();
    let (mut p, collection, injection) = pair_with_agreements(World::new());
    let endpoint = p.world.terminal_config().endpoint;
    let (gateway_a, gateway_b) = (store(&server, endpoint), store(&server, endpoint));
    p.shared = Some(gateway_a.clone());
    p.term
        .ep
        .send_fragment(collection, 1, vec![], payload(1))
        .unwrap();
    p.fay
        .ep
        .send_fragment(injection, 11, vec![], payload(11))
        .unwrap();
    p.transmit();
    p.cut(0, 0);
    // The Fay reconnects to gateway B, which finds the session in etcd.
    p.shared = Some(gateway_b.clone());
    p.reconnect();
    p.drive();
    let (_, resumed) = established(&p.fay.events).unwrap();
    assert!(resumed, "resumed through the other gateway's store");
    let ids =
        |v: Vec<(dtp_codec::AgreementId, u64)>| v.into_iter().map(|(_, id)| id).collect::<Vec<_>>();
    assert_eq!(ids(p.fay.fragments()), vec![1]);
    assert_eq!(ids(p.term.fragments()), vec![11]);
    // Taken: gone from etcd for both gateways.
    let id = established(&p.fay.events).unwrap().0;
    assert!(gateway_a.try_take(id, p.now).unwrap().is_none());
    assert!(gateway_b.try_take(id, p.now).unwrap().is_none());
}

/// A pair whose terminal parks in an etcd store, cut with one fragment of
/// the terminal's unacknowledged.
fn cut_pair(server: &EtcdServer, world: World) -> (Pair, Arc<EtcdSessionStore>) {
    let (mut p, collection, _) = pair_with_agreements(world);
    let parked = store(server, p.world.terminal_config().endpoint);
    p.shared = Some(parked.clone());
    p.term
        .ep
        .send_fragment(collection, 1, vec![], payload(1))
        .unwrap();
    p.transmit();
    p.cut(0, 0);
    (p, parked)
}

#[test]
fn a_session_is_taken_once_however_many_gateways_ask() {
    let server = EtcdServer::start();
    let (p, _) = cut_pair(&server, World::new());
    let endpoint = p.world.terminal_config().endpoint;
    let id = p.fay_suspended.as_ref().unwrap().session_id();
    const GATEWAYS: usize = 4;
    let barrier = Arc::new(Barrier::new(GATEWAYS));
    let now = p.now;
    let takers: Vec<_> = (0..GATEWAYS)
        .map(|_| {
            let (g, barrier) = (store(&server, endpoint), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                g.take(id, now).is_some()
            })
        })
        .collect();
    let won = takers.into_iter().map(|t| t.join().unwrap());
    assert_eq!(won.filter(|w| *w).count(), 1);
}

#[test]
fn an_expired_session_is_gone() {
    let server = EtcdServer::start();
    let mut world = World::new();
    world.endpoint.suspend_timeout = Duration::from_secs(1);
    let (p, parked) = cut_pair(&server, world);
    let id = p.fay_suspended.as_ref().unwrap().session_id();
    // Past its suspend timeout (wall clock): etcd's lease ended it.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(parked.try_take(id, p.now).unwrap().is_none());
}
