//! The tokio-uring peer end to end over loopback, driven by a plain
//! `std::net` client: the answers and acks a user of the workload protocol
//! would see.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed setup step should fail the test loudly"
)]

mod peer_client;

use std::sync::atomic::Ordering;

use dtp_bench::peer_tokio::{PeerConfig, PeerHandle};
use dtp_bench::peer_tokio_uring;

fn start() -> PeerHandle {
    peer_tokio_uring::serve(PeerConfig::new("127.0.0.1:0".parse().unwrap(), 2)).unwrap()
}

#[test]
fn pingpong_gets_one_correct_answer_per_request() {
    let peer = start();
    let mut sock = peer_client::connect(peer.local_addr());
    peer_client::pingpong(&mut sock, 500);
    drop(sock);
    peer.shutdown().unwrap();
}

#[test]
fn pingpong_over_concurrent_connections() {
    let peer = start();
    peer_client::concurrent_pingpong(peer.local_addr());
    assert_eq!(peer.stats().accepted.load(Ordering::Relaxed), 8);
    peer.shutdown().unwrap();
}

#[test]
fn pipelined_pingpong_answers_in_order() {
    let peer = start();
    peer_client::pipelined_pingpong(peer.local_addr());
}

#[test]
fn a_stream_of_1000_frames_is_acked_every_64_and_at_the_end() {
    let peer = start();
    peer_client::stream_of_1000(peer.local_addr());
}

#[test]
fn a_flush_is_acked_at_once_and_restarts_the_count() {
    let peer = start();
    peer_client::stream_flush_restarts_the_count(peer.local_addr());
}

#[test]
fn garbage_closes_the_connection_and_the_peer_keeps_serving() {
    let peer = start();
    peer_client::garbage_is_closed(peer.local_addr());
    peer_client::foreign_frame_is_closed(peer.local_addr());
    let mut good = peer_client::connect(peer.local_addr());
    peer_client::pingpong(&mut good, 3);
    drop(good);
    let stats = peer.stats();
    peer.shutdown().unwrap();
    assert_eq!(stats.accepted.load(Ordering::Relaxed), 3);
    assert_eq!(stats.errors.load(Ordering::Relaxed), 2);
}

#[test]
fn many_idle_connections_each_answer() {
    let peer = start();
    peer_client::many_idle_connections(peer.local_addr(), 300);
    assert_eq!(peer.stats().accepted.load(Ordering::Relaxed), 300);
}
